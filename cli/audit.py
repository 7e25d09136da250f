"""`ldptel audit`: measure an oracle's privacy loss (exactly from its parameters, and from
sampled reports with a confidence bound) against the epsilon it claims; exit 1 if violated."""

from __future__ import annotations

import argparse
import json
import math
import sys

from ldptel.analysis.audit import (
    DEFAULT_CONFIDENCE,
    DEFAULT_SAMPLED_PAIRS,
    DEFAULT_SAMPLES,
    Audited,
    AuditResult,
    audit,
)
from ldptel.analysis.numeric import LevelLaw
from ldptel.cli.oracle_options import (
    add_oracle_arguments,
    mechanism_from_args,
    oracle_from_args,
    parse_float,
    parse_int,
    rng_from_args,
)
from ldptel.cli.progress import ProgressLine


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_oracle_arguments(parser, numeric=True)
    parser.add_argument(
        "--samples",
        default=str(DEFAULT_SAMPLES),
        metavar="N",
        help=f"sampled reports per input of each pair (default {DEFAULT_SAMPLES:,})",
    )
    parser.add_argument(
        "--pairs",
        default=str(DEFAULT_SAMPLED_PAIRS),
        metavar="P",
        help=f"input pairs in the sampled audit (default {DEFAULT_SAMPLED_PAIRS})",
    )
    parser.add_argument(
        "--confidence",
        default=str(DEFAULT_CONFIDENCE),
        metavar="C",
        help=f"confidence of the sampled lower bound (default {DEFAULT_CONFIDENCE})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    # A numeric mechanism is audited on its law over the range's levels (its inputs).
    oracle: Audited = (
        oracle_from_args(args) if args.range is None else LevelLaw(mechanism_from_args(args))
    )
    samples = parse_int(args.samples, "samples", 100)
    pairs = parse_int(args.pairs, "pairs", 1)
    confidence = parse_float(args.confidence, "confidence")
    rng, seed = rng_from_args(args)
    with ProgressLine(sys.stderr, f"auditing {oracle.name}", machine_output=args.json) as progress:
        result = audit(
            oracle,
            rng,
            samples=samples,
            sampled_pairs=pairs,
            confidence=confidence,
            progress=progress.update,
        )
    # Full RAPPOR: the audit measures one report; the bound over repeated reports of one
    # value (their shared permanent randomized response) is stated, not measured.
    permanent = getattr(oracle, "permanent_epsilon", None)
    if args.json:
        extra = {} if permanent is None else {"permanent_epsilon": permanent}
        print(
            json.dumps(
                {**result.to_dict(), "domain_size": oracle.domain_size, "seed": seed, **extra}
            )
        )
    else:
        print(_text(result, oracle.domain_size, seed, permanent))
    return 1 if result.violated else 0


def _eps(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if math.isfinite(value) else str(value)


def _text(result: AuditResult, domain_size: int, seed: int, permanent: float | None) -> str:
    status = "VIOLATED" if result.violated else "ok"
    lines = [
        f"audit {result.oracle}, domain size {domain_size}, seed {seed}",
        f"  claimed epsilon                {_eps(result.claimed_epsilon)}"
        + ("" if permanent is None else "  (one report)"),
        *(
            []
            if permanent is None
            else [
                f"  permanent bound                {_eps(permanent)}  (any number of reports "
                "of one value; from the parameters, not measured)"
            ]
        ),
        f"  exact (from the parameters)    {_eps(result.exact_epsilon)}"
        f"  over {result.exact_pairs} ordered input pairs",
        f"  sampled (from perturb_batch)   {_eps(result.sampled_epsilon)}"
        f"  point estimate, {result.samples:,} reports per input, "
        f"{result.sampled_pairs} ordered pairs",
        f"  sampled lower bound            {_eps(result.sampled_lower_bound)}"
        f"  at {result.confidence:g} confidence",
        f"verdict: {status}"
        + (
            " (measured privacy loss exceeds the claimed epsilon)"
            if result.violated
            else " (no evidence that the claim is exceeded)"
        ),
    ]
    return "\n".join(lines)
