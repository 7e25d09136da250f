"""`ldptel simulate`: n simulated clients through an oracle's real code, estimates with their
exact variance; with --target-stderr, the planner (users needed), computed without simulating."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, TextIO

import numpy as np

from ldptel.cli.oracle_options import (
    add_oracle_arguments,
    oracle_from_args,
    parse_float,
    parse_int,
    parse_positive,
    rng_from_args,
)
from ldptel.cli.table import format_table
from ldptel.client.errors import LdptelError, ParameterError
from ldptel.client.oracles import ORACLES, FrequencyOracle
from ldptel.client.simulation import (
    DISTRIBUTIONS,
    Plan,
    Simulation,
    build_oracle,
    plan,
    simulate,
    true_counts,
)

DEFAULT_TOP = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_oracle_arguments(parser)
    parser.add_argument("--n", metavar="N", help="number of simulated clients (reports)")
    parser.add_argument("--distribution", choices=DISTRIBUTIONS, default="zipf")
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
    oracle = oracle_from_args(args)
    if args.target_stderr is not None:
        return _run_planner(oracle, args)
    if args.n is None:
        raise ParameterError("n", "is required (or give --target-stderr to plan)")
    n = parse_int(args.n, "n", 1)
    top = parse_int(args.top, "top", 1)
    exponent = parse_float(args.zipf_exponent, "zipf_exponent")
    rng, seed = rng_from_args(args)
    counts = true_counts(n, oracle.domain_size, rng, args.distribution, exponent)
    with ProgressLine(sys.stderr, f"simulating {oracle.name}") as progress:
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
    if oracle.name != args.oracle:  # an alias, or a chooser such as `auto`
        header["requested_oracle"] = args.oracle
    if args.json:
        print(json.dumps({**header, "items": _items(result)}))
    else:
        print(_simulation_text(header, result, top))
    return 0


def _items(result: Simulation) -> list[dict[str, Any]]:
    return [
        {"item": i, "true": int(t), "estimate": float(e), "variance": float(v), "stderr": float(s)}
        for i, (t, e, v, s) in enumerate(
            zip(result.counts, result.estimate, result.variance, result.stderr, strict=True)
        )
    ]


def _simulation_text(header: dict[str, Any], result: Simulation, top: int) -> str:
    shape = header["distribution"]
    if shape == "zipf":
        shape += f" s={header['zipf_exponent']:g}"
    lines = [
        f"oracle {header['oracle']}, epsilon {header['epsilon']:.6g}, "
        f"domain size {header['domain_size']}, n {header['n']} ({shape}, seed {header['seed']})",
        "",
    ]
    z = (result.estimate - result.counts) / result.stderr
    shown = np.argsort(-result.counts, kind="stable")[:top]
    rows = [
        [
            str(i),
            str(result.counts[i]),
            f"{result.estimate[i]:.1f}",
            f"{result.stderr[i]:.1f}",
            f"{z[i]:+.2f}",
        ]
        for i in shown
    ]
    lines.append(format_table(["item", "true", "estimate", "stderr", "error/stderr"], rows))
    lines += [
        "",
        f"{len(shown)} of {result.counts.size} items shown (most frequent first; --top K, "
        "or --json for all).",
        f"Over all items: root mean square of error/stderr {np.sqrt(np.mean(z**2)):.2f} "
        "(about 1 when the variance is right).",
    ]
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


class ProgressLine:
    """A one-line progress indicator on a terminal (nothing when output is not a TTY)."""

    def __init__(self, stream: TextIO, label: str, interval: float = 0.25) -> None:
        self.stream = stream
        self.label = label
        self.interval = interval
        self.active = stream.isatty()
        self.shown = False
        self.last = 0.0

    def __enter__(self) -> ProgressLine:
        self.last = time.monotonic()
        return self

    def update(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.active or (now - self.last < self.interval and done < total):
            return
        self.last = now
        self.shown = True
        self.stream.write(f"\r{self.label}: {100 * done / total:5.1f}% ({done:,}/{total:,})")
        self.stream.flush()

    def __exit__(self, *exc: object) -> None:
        if self.shown:  # clear the line so the result starts clean
            self.stream.write("\r\033[K")
            self.stream.flush()
