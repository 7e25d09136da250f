"""`ldptel simulate`: n simulated clients through an oracle's real code, estimates with their
exact variance; with --target-stderr, the planner (users needed), computed without simulating."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from ldptel.aggregator.model import Privacy
from ldptel.aggregator.privacy import privacy_section
from ldptel.analysis.numeric import NUMERIC_DISTRIBUTIONS
from ldptel.analysis.simulation import (
    DISTRIBUTIONS,
    Plan,
    Simulation,
    build_oracle,
    plan,
    simulate,
    true_counts,
)
from ldptel.cli.oracle_options import (
    add_oracle_arguments,
    oracle_from_args,
    parse_int,
    parse_positive,
    rng_from_args,
)
from ldptel.cli.progress import ProgressLine
from ldptel.cli.simulate_breakdown import run_breakdown
from ldptel.cli.simulate_levels import run_levels
from ldptel.cli.simulate_longitudinal import add_longitudinal_arguments, run_longitudinal
from ldptel.cli.simulate_numeric import run_numeric
from ldptel.cli.simulate_output import item_lines, item_rows, shape_text, simulation_inputs
from ldptel.cli.table import format_table
from ldptel.cli.values_file import oracle_over_file
from ldptel.client.campaign import CampaignConfig, Mechanism
from ldptel.client.campaign_kinds import Categorical
from ldptel.client.errors import LdptelError, ParameterError
from ldptel.client.guarantee import guarantee
from ldptel.client.levels import SIMULATED_STRATEGIES
from ldptel.client.oracles import ORACLES, FrequencyOracle
from ldptel.client.oracles.rappor import Rappor
from ldptel.client.oracles.rappor_decode import RapporFit

DEFAULT_TOP = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # --oracle is checked in `run`: a longitudinal run (--windows) draws through DE and the tree.
    add_oracle_arguments(parser, epsilon_required=False, numeric=True, oracle_required=False)
    add_longitudinal_arguments(parser)
    parser.add_argument(
        "--levels",
        metavar="NAME:EPS:FRACTION,...",
        help="personalized privacy: users split into levels (e.g. high:0.5:0.54,"
        "medium:1:0.37,low:2:0.09); replaces --epsilon",
    )
    parser.add_argument(
        "--level-strategy",
        choices=SIMULATED_STRATEGIES,
        default="optimal",
        help="with --levels: the strategy simulated (default optimal; sample: the Sample "
        "mechanism, simulated only, docs/personalized-privacy.md)",
    )
    parser.add_argument(
        "--level-threshold",
        metavar="T",
        help="with --level-strategy threshold or sample: the epsilon t",
    )
    parser.add_argument("--n", metavar="N", help="number of simulated clients (reports)")
    parser.add_argument(
        "--attributes",
        metavar="NAME:SIZE,...",
        help="a breakdown over 2-8 attributes (e.g. os:4,plan:3,country:5): --oracle auto, "
        "joint, pairs, split or hadamard; with --values-file (a CSV with a header): NAME,... its "
        "columns used "
        "(docs/breakdowns.md)",
    )
    parser.add_argument(
        "--distribution",
        choices=tuple(dict.fromkeys((*DISTRIBUTIONS, *NUMERIC_DISTRIBUTIONS))),
        help="how the simulated users' true values are drawn (default zipf; with --range: "
        f"{', '.join(NUMERIC_DISTRIBUTIONS)}, default {NUMERIC_DISTRIBUTIONS[0]})",
    )
    parser.add_argument(
        "--values-file",
        metavar="FILE",
        help="simulate these users: one value per line, UTF-8 (n = lines); the domain is its "
        "distinct values, most frequent first (with --domain-size D: D items, the rest held by "
        "nobody); with --range: one number per line",
    )
    parser.add_argument(
        "--zipf-exponent", default="1.1", metavar="S", help="zipf exponent (default 1.1)"
    )
    parser.add_argument(
        "--target-stderr",
        metavar="X",
        help="plan instead: users needed so an item's estimated frequency has stderr <= X",
    )
    parser.add_argument(
        "--top", default=str(DEFAULT_TOP), metavar="K", help="items shown in the table"
    )
    parser.add_argument("--json", action="store_true", help="print JSON (all items)")


def run(args: argparse.Namespace) -> int:
    if args.windows is not None:
        return run_longitudinal(args)
    if args.oracle is None:
        raise ParameterError("oracle", "is required (or give --windows for a longitudinal run)")
    if args.attributes is not None:
        return run_breakdown(args)
    if args.range is not None:
        return run_numeric(args)
    args.distribution = args.distribution or DISTRIBUTIONS[0]
    if args.levels is not None:
        return run_levels(args)
    if args.epsilon is None:
        raise ParameterError("epsilon", "is required (or give --levels)")
    labels: list[str] | None = None
    if args.values_file is not None:
        oracle, labels, counts = oracle_over_file(args)
    else:  # --domain-size required here (ParameterError names range for a numeric oracle)
        oracle = oracle_from_args(args)
    if args.target_stderr is not None:
        return _run_planner(oracle, args)
    if labels is None:
        n, top, exponent, rng, seed = simulation_inputs(args)
        counts = true_counts(n, oracle.domain_size, rng, args.distribution, exponent)
    else:
        n, top, exponent = int(counts.sum()), parse_int(args.top, "top", 1), 0.0
        rng, seed = rng_from_args(args)
    with ProgressLine(
        sys.stderr, f"simulating {oracle.name}", machine_output=args.json
    ) as progress:
        result = simulate(oracle, counts, rng, progress.update)
    header: dict[str, Any] = {
        "oracle": oracle.name,
        "epsilon": oracle.epsilon,
        "domain_size": oracle.domain_size,
        "n": n,
        "distribution": args.distribution,
        "zipf_exponent": exponent if args.distribution == "zipf" else None,
        "seed": seed,
    }
    if labels is not None:
        header.update(distribution=None, zipf_exponent=None, values_file=args.values_file)
    if oracle.name != args.oracle:  # an alias, or a chooser such as `auto`
        header["requested_oracle"] = args.oracle
    choice = getattr(oracle, "auto_choice", None)
    if choice is not None:
        header["oracle_choice"] = choice
    header["privacy"] = simulated_privacy(oracle, n)
    items = item_rows(result, labels)
    fit = _rappor_fit(oracle, result)
    if fit is not None:
        header["significance"] = {"alpha": fit.alpha, "rule": RAPPOR_RULE}
        for item, significant, pvalue in zip(
            items, fit.significant.tolist(), fit.pvalue.tolist(), strict=True
        ):
            item.update(significant=significant, pvalue=pvalue)
    if args.json:
        print(json.dumps({**header, "items": items}))
    else:
        print(_simulation_text(header, result, top, fit, labels))
    return 0


def simulated_privacy(oracle: Mechanism, n: int) -> Privacy:
    """The privacy object a window report of these n users would carry: one report per user
    in the window, the default lifetime budget (aggregator/privacy.py)."""
    config = CampaignConfig(
        name="simulate", oracle=oracle.name, epsilon=oracle.epsilon, kind=Categorical(domain=())
    )
    return privacy_section(config, oracle, n, guarantee(config, oracle.epsilon))


RAPPOR_RULE = "one-sided test of count > 0 on the fit's standard error, at alpha / d (Bonferroni)"


def _rappor_fit(oracle: FrequencyOracle, result: Simulation) -> RapporFit | None:
    """Full RAPPOR's decoding of the simulated support (the fit `estimate` already made)."""
    if not isinstance(oracle, Rappor) or result.support is None:
        return None
    return oracle.fit(result.support)


def _simulation_text(
    header: dict[str, Any],
    result: Simulation,
    top: int,
    fit: RapporFit | None = None,
    labels: list[str] | None = None,
) -> str:
    lines = [
        f"oracle {header['oracle']}, epsilon {header['epsilon']:.6g}, "
        f"domain size {header['domain_size']}, n {header['n']} ({shape_text(header)})"
    ]
    requested = header.get("requested_oracle")
    if "oracle_choice" in header:
        lines.append(f"{requested} chose {header['oracle']}: {header['oracle_choice']['reason']}")
    elif requested is not None:
        lines.append(f"({requested} is {header['oracle']})")
    if "rappor" in header["privacy"]:
        lines += [
            "RAPPOR k={k} h={h} m={m} f={f:.6g} p={p:g} q={q:g}: one report is "
            "{epsilon:.4g}-LDP; any number of reports of one value by one client at most "
            "{permanent_epsilon:.4g} (permanent bound)".format(**header["privacy"]["rappor"])
        ]
    central = header["privacy"]["central"]
    if central is not None:
        lines.append(central["statement"])
    lines += ["", *item_lines(result, top, labels)]
    if fit is not None:
        flagged = np.flatnonzero(fit.significant)
        shown = ", ".join(str(i) for i in flagged[:top]) + (", ..." if flagged.size > top else "")
        lines.append(
            f"Significant (count > 0 at alpha {fit.alpha:g} / {fit.significant.size}, "
            f"Bonferroni): {flagged.size} of {fit.significant.size} candidates"
            + (f" ({shown})" if flagged.size else "")
            + "; the others keep their fitted estimate and are not significant."
        )
    return "\n".join(lines)


def _run_planner(oracle: FrequencyOracle, args: argparse.Namespace) -> int:
    target = parse_positive(args.target_stderr, "target_stderr")
    chosen = plan(oracle, target)
    comparison: list[dict[str, Any]] = []
    for name in ORACLES:
        try:
            other = build_oracle(
                name, epsilon=oracle.requested_epsilon, domain_size=oracle.domain_size
            )
            row = {**_plan_dict(plan(other, target)), "oracle": name}
            if other.name != name:  # a chooser such as `auto`: say what it chose
                row["chooses"] = other.name
            comparison.append(row)
        except LdptelError as error:  # an oracle that does not fit this (d, epsilon)
            comparison.append({"oracle": name, "error": str(error)})
    if args.json:
        print(json.dumps({**_plan_dict(chosen), "comparison": comparison}))
    else:
        print(_plan_text(chosen, comparison))
    return 0


def _plan_dict(result: Plan) -> dict[str, Any]:
    return {
        "oracle": result.oracle,
        "epsilon": result.epsilon,
        "domain_size": result.domain_size,
        "target_stderr": result.target_stderr,
        "n_required": result.users,
        "n_required_rare_items": result.users_rare,
        "variance_per_report": result.variance_worst,
        "variance_per_report_rare_items": result.variance_rare,
    }


def _plan_text(chosen: Plan, comparison: list[dict[str, Any]]) -> str:
    lines = [
        f"oracle {chosen.oracle}, epsilon {chosen.epsilon:.6g}, domain size "
        f"{chosen.domain_size}: for a standard error <= {chosen.target_stderr:g} on each "
        "item's estimated frequency",
        f"  users needed: {chosen.users:,} (any item), {chosen.users_rare:,} (rare items, f_v ~ 0)",
        "",
        "All oracles at this domain size and epsilon (default parameters):",
    ]
    fitting = sorted((c for c in comparison if "error" not in c), key=lambda c: c["n_required"])
    rows = [
        [
            c["oracle"] + (f" ({c['chooses']})" if "chooses" in c else ""),
            f"{c['n_required']:,}",
            f"{c['n_required_rare_items']:,}",
        ]
        for c in fitting
    ]
    lines.append(format_table(["oracle", "users (any item)", "users (rare items)"], rows))
    lines += [
        f"{c['oracle']}: not available here ({c['error']})" for c in comparison if "error" in c
    ]
    return "\n".join(lines)
