"""`ldptel simulate --windows T`: n installs report once per window for T windows under one
memoization mode, each mode at the largest per-report epsilon its guarantee allows under the
lifetime budget (ldptel.analysis.longitudinal); prints the window RMSE."""

from __future__ import annotations

import argparse
import json

import numpy as np

from ldptel.analysis.longitudinal import (
    LONGITUDINAL_MODES,
    histories,
    run_mode,
    tracked_frequencies,
    window_rmse,
)
from ldptel.cli.oracle_options import parse_float, parse_int, parse_positive, rng_from_args
from ldptel.client.errors import ParameterError
from ldptel.client.memoization import MEMO_EXACT, MEMO_NONE, MEMO_TREE
from ldptel.client.tree import MAX_HORIZON_WINDOWS

DEFAULT_INSTALLS = 20_000
DEFAULT_LIFETIME = 10.0
#: What each mode's epsilon is, in words (the JSON's `longitudinal.rule`).
RULES = {
    MEMO_NONE: "every report fresh, charged: epsilon = L / T",
    MEMO_EXACT: "one draw per distinct value, at most C + 1: epsilon = L / (C + 1); "
    "holds only between histories with the same change pattern",
    MEMO_TREE: "one horizon of T windows costs epsilon: epsilon = L, K = max_changes",
}


def add_longitudinal_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--windows",
        metavar="T",
        help="longitudinal run: every install reports once per window for T windows "
        "(DE over --domain-size labels, default 2); prints longitudinal.window_rmse",
    )
    parser.add_argument(
        "--changes", default="0", metavar="C", help="with --windows: value changes per install"
    )
    parser.add_argument(
        "--lifetime-epsilon",
        default=str(DEFAULT_LIFETIME),
        metavar="L",
        help=f"with --windows: each install's lifetime budget (default {DEFAULT_LIFETIME:g})",
    )
    parser.add_argument(
        "--memoization",
        default=MEMO_NONE,
        metavar="MODE",
        help=f"with --windows: {', '.join(LONGITUDINAL_MODES)} (default {MEMO_NONE})",
    )
    parser.add_argument(
        "--max-changes",
        metavar="K",
        help="with --memoization tree: changes tracked per install (default C + 1: the first "
        "value counts as a change)",
    )


def run_longitudinal(args: argparse.Namespace) -> int:
    windows = parse_int(args.windows, "windows", 1, MAX_HORIZON_WINDOWS)
    changes = parse_int(args.changes, "changes", 0, windows - 1)
    lifetime = parse_positive(args.lifetime_epsilon, "lifetime_epsilon")
    mode = args.memoization
    if mode not in LONGITUDINAL_MODES:
        raise ParameterError("memoization", f"must be one of {', '.join(LONGITUDINAL_MODES)}")
    d = 2 if args.domain_size is None else parse_int(args.domain_size, "domain_size", 2, 64)
    n = DEFAULT_INSTALLS if args.n is None else parse_int(args.n, "n", 1)
    k = None if args.max_changes is None else parse_int(args.max_changes, "max_changes", 1, 64)
    exponent = parse_float(args.zipf_exponent, "zipf_exponent")
    rng, seed = rng_from_args(args)
    weights = 1.0 / np.arange(1, d + 1) ** exponent
    values = histories(weights / weights.sum(), n, windows, changes, rng)
    truth = np.stack([np.bincount(values[:, t], minlength=d) / n for t in range(windows)])
    result = run_mode(mode, values, d, lifetime, changes, rng, k)
    longitudinal = {
        "window_rmse": window_rmse(result.estimates, truth),
        "lifetime_epsilon": lifetime,
        "per_report_epsilon": result.epsilon,
        "rule": RULES[mode],
    }
    if mode == MEMO_TREE:
        tracked = min(changes + 1 if k is None else k, windows)
        longitudinal["max_changes"] = tracked
        # Installs past K changes: the estimate follows their K-th value (a bias, measured).
        bias = window_rmse(tracked_frequencies(values, d, tracked), truth)
        longitudinal["past_max_changes_bias_rmse"] = bias
    header = {
        "memoization": mode,
        "windows": windows,
        "changes": changes,
        "n": n,
        "domain_size": d,
        "zipf_exponent": exponent,
        "seed": seed,
        "longitudinal": longitudinal,
    }
    if args.json:
        print(json.dumps(header))
        return 0
    print(
        f"{mode}: {n:,} installs x {windows} windows, {changes} changes each, d = {d}, "
        f"lifetime epsilon {lifetime:g} -> per-report epsilon {result.epsilon:.4g} "
        f"({RULES[mode]}); window RMSE {longitudinal['window_rmse']:.4f}"
    )
    return 0
