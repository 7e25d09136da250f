"""`ldptel simulate --levels`: personalized privacy, a mix of privacy levels simulated
through its campaign config's real code (the combined estimate with its exact variance), and
every level strategy's standard error or users needed (analysis/simulation.py)."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import Any

import numpy as np

from ldptel.analysis.simulation import (
    LevelSimulation,
    Simulation,
    StrategyPlan,
    build_oracle,
    plan_levels,
    simulate_levels,
    split_users,
    true_counts,
)
from ldptel.cli.oracle_options import (
    domain_size_from_args,
    parse_float,
    parse_params,
    parse_positive,
)
from ldptel.cli.simulate_output import item_lines, item_rows, shape_text, simulation_inputs
from ldptel.cli.table import format_table
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.client.levels import SAMPLE, check_levels

#: Level fractions must sum to 1 within this (they are written by hand with a few digits).
FRACTION_SLACK = 1e-6


def parse_level_mix(text: str) -> tuple[dict[str, float], dict[str, float]]:
    """ "name:epsilon:fraction,..." -> ({name: epsilon}, {name: fraction}); fractions > 0
    summing to 1. Names and epsilons are checked by the campaign config."""
    levels: dict[str, float] = {}
    fractions: dict[str, float] = {}
    for item in text.split(","):
        parts = item.strip().split(":")
        if len(parts) != 3:
            raise ParameterError("levels", f"expected NAME:EPSILON:FRACTION, got {item!r}")
        name, epsilon, fraction = parts
        if name in levels:
            raise ParameterError("levels", f"level {name!r} given twice")
        levels[name] = parse_float(epsilon, "levels")
        fractions[name] = parse_float(fraction, "levels")
        if not 0 < fractions[name] <= 1:
            raise ParameterError("levels", f"fraction of {name!r} must be in (0, 1]")
    if abs(sum(fractions.values()) - 1) > FRACTION_SLACK:
        raise ParameterError("levels", f"fractions must sum to 1, got {sum(fractions.values()):g}")
    return levels, fractions


def _level_config(args: argparse.Namespace, levels: dict[str, float]) -> CampaignConfig:
    """A campaign config with the simulated levels (its epsilon: the largest level's)."""
    if args.epsilon is not None:
        raise ParameterError("epsilon", "comes from --levels; leave --epsilon out")
    domain_size = domain_size_from_args(args)
    params = parse_params(args.param)
    epsilon = max(check_levels(levels).values())
    # Named errors for unknown parameters before the config wraps the oracle's own.
    build_oracle(args.oracle, epsilon=epsilon, domain_size=domain_size, params=params)
    threshold = args.level_threshold
    if threshold is not None:
        threshold = parse_float(threshold, "level_threshold")
    # Sample is not a campaign strategy: its config is threshold's (same t, validated the
    # same way) with the strategy swapped in.
    sample = args.level_strategy == SAMPLE
    if args.level_strategy in ("threshold", SAMPLE) and threshold is None:
        # The config's own message names its fields; here the flags the user typed.
        raise ParameterError(
            "level_threshold",
            f"--level-threshold T is required by --level-strategy {args.level_strategy}",
        )
    config = CampaignConfig.from_dict(
        {
            "name": "simulation",
            "oracle": args.oracle,
            "epsilon": epsilon,
            "domain": [str(i) for i in range(domain_size)],
            "params": params,
            "levels": levels,
            "level_strategy": "threshold" if sample else args.level_strategy,
            "level_threshold": threshold,
        }
    )
    return replace(config, level_strategy=SAMPLE) if sample else config


def run_levels(args: argparse.Namespace) -> int:
    """`ldptel simulate --levels`: a level mix through its campaign config's real code, or
    with --target-stderr the users each level strategy needs (exact variance)."""
    levels, fractions = parse_level_mix(args.levels)
    config = _level_config(args, levels)
    plans = plan_levels(config, fractions)
    if args.target_stderr is not None:
        _print_users_needed(args, plans)
        return 0
    n, top, exponent, rng, seed = simulation_inputs(args)
    counts = {
        level: true_counts(users, config.domain_size, rng, args.distribution, exponent)
        if users
        else np.zeros(config.domain_size, dtype=np.int64)
        for level, users in split_users(n, fractions).items()
    }
    result = simulate_levels(config, counts, rng)
    combination = result.combination
    level_rows = _level_rows(config, levels, fractions, result)
    strategies = [{**_strategy_dict(p, plans[0]), "stderr": p.stderr(n)} for p in plans]
    header: dict[str, Any] = {
        "oracle": config.oracle,
        "domain_size": config.domain_size,
        "n": n,
        "n_reporting": combination.n,
        "level_strategy": config.level_strategy,
        "level_threshold": config.level_threshold,
        "distribution": args.distribution,
        "zipf_exponent": exponent if args.distribution == "zipf" else None,
        "seed": seed,
    }
    truth = result.reporting_counts
    simulation = Simulation(
        counts=truth,
        estimate=combination.estimate,
        variance=combination.variance(truth / combination.n),
    )
    if args.json:
        body = {"levels": level_rows, "items": item_rows(simulation), "strategies": strategies}
        print(json.dumps({**header, **body}))
        return 0
    lines = _levels_text(header, config.level_strategy, level_rows, simulation, top)
    print("\n".join([*lines, _strategies_text(plans, strategies, "stderr (frequency)")]))
    return 0


def _print_users_needed(args: argparse.Namespace, plans: list[StrategyPlan]) -> None:
    """--target-stderr: the users each strategy needs, computed without simulating."""
    target = parse_positive(args.target_stderr, "target_stderr")
    rows = [{**_strategy_dict(p, plans[0]), "n_required": p.users(target)} for p in plans]
    if args.json:
        print(json.dumps({"target_stderr": target, "strategies": rows}))
    else:
        print(
            f"Users needed (all levels) for a standard error <= {target:g} on each item's\n"
            "estimated frequency, per level strategy (exact variance):\n"
            + _strategies_text(plans, rows, "users needed")
        )


def _level_rows(
    config: CampaignConfig,
    levels: dict[str, float],
    fractions: dict[str, float],
    result: LevelSimulation,
) -> list[dict[str, Any]]:
    """Each level's epsilon, the epsilon its users report with, its users and its mean
    weight in the combination, smallest epsilon first."""
    weights = {level: float(np.mean(w)) for level, w in result.combination.weights.items()}
    return [
        {
            "level": level,
            "epsilon": levels[level],
            "epsilon_used": config.reporting_epsilon(level),
            "fraction": fractions[level],
            "n": int(result.counts[level].sum()),
            "weight": weights.get(level, 0.0),
        }
        for level in sorted(levels, key=lambda level: (levels[level], level))
    ]


def _levels_text(
    header: dict[str, Any],
    strategy: str,
    level_rows: list[dict[str, Any]],
    simulation: Simulation,
    top: int,
) -> list[str]:
    """The text report's lines up to the strategies table."""
    n, n_reporting = header["n"], header["n_reporting"]
    return [
        f"oracle {header['oracle']}, domain size {header['domain_size']}, n {n} "
        f"({shape_text(header)}), privacy levels, strategy {strategy}",
        "",
        format_table(
            ["level", "epsilon", "epsilon used", "fraction", "users", "weight"],
            [
                [
                    str(row["level"]),
                    f"{row['epsilon']:g}",
                    "-" if row["epsilon_used"] is None else f"{row['epsilon_used']:g}",
                    f"{row['fraction']:g}",
                    f"{row['n']:,}",
                    f"{row['weight']:.3f}",
                ]
                for row in level_rows
            ],
        ),
        "",
        "The combined estimate (inverse-variance weighted over the levels, exact variance)"
        + ("" if n_reporting == n else f"; true counts of the {n_reporting:,} reporting users")
        + ":",
        *item_lines(simulation, top),
        "",
        f"Strategies for this level mix at n = {n:,}: standard error of an item's",
        "estimated frequency (rare items, exact variance).",
    ]


def _strategy_name(plan: StrategyPlan) -> str:
    return plan.strategy + ("" if plan.threshold is None else f" t={plan.threshold:g}")


def _strategy_dict(plan: StrategyPlan, optimal: StrategyPlan) -> dict[str, Any]:
    return {
        "strategy": plan.strategy,
        "threshold": plan.threshold,
        "epsilons": plan.epsilons,
        "reporting_fraction": plan.reporting_fraction,
        "variance_per_user": plan.variance_per_user,
        "variance_vs_optimal": plan.variance_per_user / optimal.variance_per_user,
    }


def _strategies_text(plans: list[StrategyPlan], rows: list[dict[str, Any]], column: str) -> str:
    """Every strategy for this level mix, from the exact variances (rare items, f_v = 0)."""
    value = "n_required" if "n_required" in rows[0] else "stderr"
    table = format_table(
        ["strategy", "users reporting", column, "variance vs optimal"],
        [
            [
                _strategy_name(plan),
                f"{row['reporting_fraction']:.0%}",
                f"{row[value]:,}" if value == "n_required" else f"{row[value]:.3g}",
                f"{row['variance_vs_optimal']:.2f}",
            ]
            for plan, row in zip(plans, rows, strict=True)
        ],
    )
    return (
        table + "\nminimum and threshold are the baselines of Jorgensen, Cormode, Yu (ICDE 2015);"
        "\nunder threshold only the levels with epsilon >= t report; sample is their Sample"
        "\nmechanism in the local model (levels below t send a t-report with probability"
        "\n(e^eps - 1)/(e^t - 1), else a dummy; simulated only, not a campaign strategy)."
    )
