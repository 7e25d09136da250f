"""What every `ldptel simulate` run of a frequency oracle shares (cli/simulate.py, one
epsilon; cli/simulate_levels.py, privacy levels): the run's inputs and its items as JSON
rows and as the text table."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from ldptel.analysis.simulation import Simulation
from ldptel.cli.oracle_options import parse_float, parse_int, rng_from_args
from ldptel.cli.table import format_table
from ldptel.client.errors import ParameterError


def simulation_inputs(
    args: argparse.Namespace,
) -> tuple[int, int, float, np.random.Generator, int]:
    """n, rows to show, Zipf exponent, the seeded generator and its seed."""
    if args.n is None:
        raise ParameterError("n", "is required (or give --target-stderr to plan)")
    n = parse_int(args.n, "n", 1)
    top = parse_int(args.top, "top", 1)
    exponent = parse_float(args.zipf_exponent, "zipf_exponent")
    rng, seed = rng_from_args(args)
    return n, top, exponent, rng, seed


def item_rows(result: Simulation, labels: list[str] | None = None) -> list[dict[str, Any]]:
    """Every item's true count, estimate, variance and stderr (and its value, if labelled)."""
    items: list[dict[str, Any]] = [
        {"item": i, "true": int(t), "estimate": float(e), "variance": float(v), "stderr": float(s)}
        for i, (t, e, v, s) in enumerate(
            zip(result.counts, result.estimate, result.variance, result.stderr, strict=True)
        )
    ]
    for item, label in zip(items, labels or [], strict=False):
        item["value"] = label
    return items


def shape_text(header: dict[str, Any]) -> str:
    """Where the simulated values came from: a distribution or a values file, and the seed."""
    if "values_file" in header:
        return f"values of {header['values_file']}, seed {header['seed']}"
    shape = str(header["distribution"])
    if shape == "zipf":
        shape += f" s={header['zipf_exponent']:g}"
    return f"{shape}, seed {header['seed']}"


def item_lines(result: Simulation, top: int, labels: list[str] | None = None) -> list[str]:
    """The most frequent items' true count, estimate and stderr, and the z summary."""
    lines = []
    z = (result.estimate - result.counts) / result.stderr
    shown = np.argsort(-result.counts, kind="stable")[:top]
    rows = [
        [
            str(i) if labels is None else labels[i],
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
    return lines
