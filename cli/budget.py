"""`ldptel budget`: how many reports each install may send under a lifetime budget, by adding
epsilons and by optimal composition, and what a reader of the reports gets centrally."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ldptel.aggregator.privacy import composed_windows, shuffle_amplification
from ldptel.cli.oracle_options import parse_int, parse_positive
from ldptel.client.accounting import composed_epsilon, max_reports
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.client.guarantee import guarantee
from ldptel.client.lifetime import BASIC, OPTIMAL, STATED_DELTA
from ldptel.client.statements import CENTRAL_LIFETIME, render

#: Below this per-report epsilon optimal composition allows more reports than adding them
#: (at lifetime 10, delta 1e-6: 346 at 0.1, 43 at 0.3, none more from 0.5 up).
NO_GAIN_NOTE = "from epsilon 0.5 per report up, optimal composition allows no more reports"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--epsilon", required=True, metavar="E", help="epsilon per report")
    parser.add_argument(
        "--lifetime-epsilon", required=True, metavar="L", help="the campaign's lifetime_epsilon"
    )
    parser.add_argument(
        "--lifetime-delta",
        metavar="D",
        help="the campaign's lifetime_delta: the ledger then charges by optimal composition "
        f"(without it the ledger adds epsilons; optimal composition is shown at {STATED_DELTA:g})",
    )
    parser.add_argument(
        "--oracle", default="de", metavar="O", help="the campaign's oracle (default de)"
    )
    parser.add_argument(
        "--domain-size", default="2", metavar="D", help="its number of items (default 2)"
    )
    parser.add_argument("--n", metavar="N", help="users per window: the central guarantee")
    parser.add_argument(
        "--windows", metavar="T", help="windows a reader reads (default: as many as reports)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    epsilon = parse_positive(args.epsilon, "epsilon")
    lifetime = parse_positive(args.lifetime_epsilon, "lifetime_epsilon")
    data: dict[str, Any] = {
        "name": "budget",
        "oracle": args.oracle,
        "epsilon": epsilon,
        "domain": [str(i) for i in range(parse_int(args.domain_size, "domain_size", 2))],
        "lifetime_epsilon": lifetime,
    }
    if args.lifetime_delta is not None:
        data["lifetime_delta"] = parse_positive(args.lifetime_delta, "lifetime_delta")
    promise = guarantee(CampaignConfig.from_dict(data))
    per_report, delta = promise.per_report_epsilon, promise.lifetime_delta or STATED_DELTA
    basic = int(lifetime / per_report * (1 + 1e-9))
    optimal = max_reports(per_report, lifetime, delta)
    result: dict[str, Any] = {
        "oracle": args.oracle,
        "epsilon": per_report,
        "lifetime_epsilon": lifetime,
        "lifetime_delta": promise.lifetime_delta,
        "reports": promise.lifetime_reports,
        "enforced_by": promise.accountant,
        "accountants": [
            {"accountant": BASIC, "reports": basic, "epsilon": basic * per_report, "delta": 0.0},
            {
                "accountant": OPTIMAL,
                "reports": optimal,
                "epsilon": composed_epsilon([(per_report, optimal)], delta),
                "delta": delta,
            },
        ],
        "gain": optimal / basic if basic else None,
        "note": NO_GAIN_NOTE,
        "statement": promise.statement,
    }
    if args.n is not None:
        result["central"] = _central(per_report, promise, args)
    if args.json:
        print(json.dumps(result))
    else:
        print(_text(result))
    return 0


def _central(per_report: float, promise: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The window's central guarantee at n users, and over the windows a reader reads."""
    n = parse_int(args.n, "n", 1)
    windows = promise.lifetime_reports
    if args.windows is not None:
        windows = parse_int(args.windows, "windows", 1)
        if windows > promise.lifetime_reports:
            reason = f"an install reports in at most {promise.lifetime_reports} windows"
            raise ParameterError("windows", reason)
    window = shuffle_amplification(per_report, n)
    central: dict[str, Any] = {"window": window, "windows": windows}
    if window["applies"]:
        epsilon, delta = composed_windows(per_report, n, windows, promise)
        central.update(epsilon=epsilon, delta=delta)
        central["statement"] = render(
            CENTRAL_LIFETIME, epsilon=epsilon, delta=delta, windows=windows, n=n
        )
    return central


def _text(result: dict[str, Any]) -> str:
    lines = [
        f"epsilon {result['epsilon']:.3g} per report, lifetime epsilon "
        f"{result['lifetime_epsilon']:g}: each install may send {result['reports']} reports "
        f"(the ledger enforces {result['enforced_by']}).",
    ]
    for row in result["accountants"]:
        lines.append(
            f"  {row['accountant']}: {row['reports']} reports, "
            f"({row['epsilon']:.3g}, {row['delta']:g})"
        )
    lines.append(f"Note: {result['note']}.")
    lines.append(result["statement"])
    central = result.get("central")
    if central is not None:
        lines.append(central["window"]["statement"])
        if "statement" in central:
            lines.append(central["statement"])
    return "\n".join(lines)
