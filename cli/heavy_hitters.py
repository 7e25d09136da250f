"""`ldptel heavy-hitters`: the users of a values file report through the Prefix Extending
Method (ldptel.client.discovery, the real client code); the strings discovered with no
candidate list, beside their true counts, with recall and precision."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ldptel.analysis.heavy_hitters import HeavyHitterSimulation, simulate_discovery
from ldptel.cli.oracle_options import parse_float, parse_int, parse_positive, rng_from_args
from ldptel.cli.progress import ProgressLine
from ldptel.cli.table import format_table
from ldptel.cli.values_file import read_values
from ldptel.client.discovery import PrefixExtendingMethod
from ldptel.client.discovery.pem import (
    DEFAULT_FALSE_DISCOVERIES,
    DEFAULT_ROWS,
    DEFAULT_STEP_BITS,
    DEFAULT_TOP_K,
    DEFAULT_WIDTH,
    SKETCHES,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--values-file", required=True, metavar="FILE", help="one user's value per line, UTF-8"
    )
    parser.add_argument("--epsilon", required=True, metavar="E", help="privacy budget, > 0")
    parser.add_argument(
        "--max-length",
        metavar="BYTES",
        help="longest value in UTF-8 bytes (default: the file's longest)",
    )
    parser.add_argument(
        "--top-k",
        default=str(DEFAULT_TOP_K),
        metavar="K",
        help=f"prefixes kept per step (default {DEFAULT_TOP_K})",
    )
    parser.add_argument(
        "--step-bits",
        default=str(DEFAULT_STEP_BITS),
        metavar="B",
        help=f"bits each group adds to the prefix (default {DEFAULT_STEP_BITS})",
    )
    parser.add_argument(
        "--sketch",
        choices=tuple(SKETCHES),
        help="each group's frequency oracle (default: the lower variance at epsilon)",
    )
    parser.add_argument(
        "--k", default=str(DEFAULT_ROWS), help=f"sketch rows (default {DEFAULT_ROWS})"
    )
    parser.add_argument(
        "--m", default=str(DEFAULT_WIDTH), help=f"sketch columns (default {DEFAULT_WIDTH})"
    )
    parser.add_argument(
        "--false-discoveries",
        default=str(DEFAULT_FALSE_DISCOVERIES),
        metavar="A",
        help="expected number of listed strings that no user holds, which sets the "
        f"threshold (default {DEFAULT_FALSE_DISCOVERIES})",
    )
    parser.add_argument(
        "--seed", metavar="S", help="seed of the simulation's random generator (default: random)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    values = read_values(args.values_file)
    longest = max(len(v.encode("utf-8")) for v in values)
    pem = PrefixExtendingMethod(
        epsilon=parse_float(args.epsilon, "epsilon"),
        max_length=max(1, longest) if args.max_length is None
        else parse_int(args.max_length, "max_length", 1),
        top_k=parse_int(args.top_k, "top_k", 1),
        step_bits=parse_int(args.step_bits, "step_bits", 1),
        sketch=args.sketch,
        k=parse_int(args.k, "k", 1),
        m=parse_int(args.m, "m", 2),
    )  # fmt: skip
    false_discoveries = parse_positive(args.false_discoveries, "false_discoveries")
    rng, seed = rng_from_args(args)
    with ProgressLine(sys.stderr, "simulating users", machine_output=args.json) as progress:
        result = simulate_discovery(pem, values, rng, false_discoveries, progress.update)
    if args.json:
        print(json.dumps(to_json(result)))
    else:
        print(text(pem, result, seed))
    return 0


def to_json(result: HeavyHitterSimulation) -> dict[str, Any]:
    found = result.discovery
    return {
        "discovered": [
            {"value": value, "estimate": estimate, "stderr": stderr, "true": result.true(value)}
            for value, estimate, stderr in zip(
                found.values, found.estimate.tolist(), found.stderr.tolist(), strict=True
            )
        ],
        "threshold": found.threshold,
        "expected_false_discoveries": found.expected_false_discoveries,
        "recall": result.recall,
        "precision": result.precision,
    }


def _share(part: float | None) -> str:
    return "-" if part is None else f"{part:.0%}"


def text(pem: PrefixExtendingMethod, result: HeavyHitterSimulation, seed: int) -> str:
    found = result.discovery
    rows = [
        [value, f"{estimate:,.0f}", f"{stderr:,.0f}", f"{result.true(value):,}"]
        for value, estimate, stderr in zip(
            found.values, found.estimate.tolist(), found.stderr.tolist(), strict=True
        )
    ]
    heavy = result.heavy
    return "\n".join(
        [
            f"PEM over {pem.sketch}: epsilon {pem.epsilon:.6g} per user (one report each), "
            f"n {found.n:,} users in {pem.groups} groups, prefixes of "
            f"{', '.join(map(str, pem.lengths))} bits, top {pem.top_k} kept (seed {seed})",
            "",
            format_table(["value", "estimate", "stderr", "true"], rows),
            "",
            f"Threshold {found.threshold:,.0f} users; of the {found.candidates:,} strings "
            "tested, the expected number listed that no user holds (false discoveries) is "
            f"{found.expected_false_discoveries:g}.",
            f"Recall {_share(result.recall)} of the {len(heavy)} strings with a true count at "
            f"least the threshold; precision {_share(result.precision)} of the "
            f"{len(found.values)} listed.",
            "Listing above a threshold is post-processing of the reports: no extra privacy.",
        ]
    )
