"""`ldptel simulate`: n simulated clients through an oracle's real code, estimates with their
exact variance; with --target-stderr, the planner (users needed), computed without simulating."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

import numpy as np

from ldptel.aggregator.model import Privacy
from ldptel.aggregator.privacy import privacy_section
from ldptel.analysis.numeric import NUMERIC_DISTRIBUTIONS
from ldptel.analysis.simulation import (
    DISTRIBUTIONS,
    Plan,
    Simulation,
    StrategyPlan,
    build_oracle,
    plan,
    plan_levels,
    simulate,
    simulate_levels,
    split_users,
    true_counts,
)
from ldptel.cli.oracle_options import (
    add_oracle_arguments,
    domain_size_from_args,
    oracle_from_args,
    parse_float,
    parse_int,
    parse_params,
    parse_positive,
    rng_from_args,
)
from ldptel.cli.progress import ProgressLine
from ldptel.cli.simulate_breakdown import run_breakdown
from ldptel.cli.simulate_longitudinal import add_longitudinal_arguments, run_longitudinal
from ldptel.cli.simulate_numeric import run_numeric
from ldptel.cli.table import format_table
from ldptel.cli.values_file import oracle_over_file
from ldptel.client.campaign import CampaignConfig, Mechanism
from ldptel.client.errors import LdptelError, ParameterError
from ldptel.client.guarantee import guarantee
from ldptel.client.levels import SAMPLE, SIMULATED_STRATEGIES, check_levels
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
        "joint or pairs; with --values-file (a CSV with a header): NAME,... its columns used "
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


def _simulation_inputs(
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
        return _run_levels(args)
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
        n, top, exponent, rng, seed = _simulation_inputs(args)
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
    items = _items(result, labels)
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
    config = CampaignConfig(name="simulate", oracle=oracle.name, epsilon=oracle.epsilon, domain=())
    return privacy_section(config, oracle, n, guarantee(config, oracle.epsilon))


RAPPOR_RULE = "one-sided test of count > 0 on the fit's standard error, at alpha / d (Bonferroni)"


def _rappor_fit(oracle: FrequencyOracle, result: Simulation) -> RapporFit | None:
    """Full RAPPOR's decoding of the simulated support (the fit `estimate` already made)."""
    if not isinstance(oracle, Rappor) or result.support is None:
        return None
    return oracle.fit(result.support)


def _items(result: Simulation, labels: list[str] | None = None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [
        {"item": i, "true": int(t), "estimate": float(e), "variance": float(v), "stderr": float(s)}
        for i, (t, e, v, s) in enumerate(
            zip(result.counts, result.estimate, result.variance, result.stderr, strict=True)
        )
    ]
    for item, label in zip(items, labels or [], strict=False):
        item["value"] = label
    return items


def _shape(header: dict[str, Any]) -> str:
    if "values_file" in header:
        return f"values of {header['values_file']}, seed {header['seed']}"
    shape = str(header["distribution"])
    if shape == "zipf":
        shape += f" s={header['zipf_exponent']:g}"
    return f"{shape}, seed {header['seed']}"


def _simulation_text(
    header: dict[str, Any],
    result: Simulation,
    top: int,
    fit: RapporFit | None = None,
    labels: list[str] | None = None,
) -> str:
    lines = [
        f"oracle {header['oracle']}, epsilon {header['epsilon']:.6g}, "
        f"domain size {header['domain_size']}, n {header['n']} ({_shape(header)})"
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
    lines += ["", *_item_lines(result, top, labels)]
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


def _item_lines(result: Simulation, top: int, labels: list[str] | None = None) -> list[str]:
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


# -- personalized privacy: --levels ------------------------------------------------------

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
    if sample and threshold is None:
        raise ParameterError("level_threshold", "is required by level_strategy sample")
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


def _run_levels(args: argparse.Namespace) -> int:
    levels, fractions = parse_level_mix(args.levels)
    config = _level_config(args, levels)
    plans = plan_levels(config, fractions)
    if args.target_stderr is not None:
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
        return 0
    n, top, exponent, rng, seed = _simulation_inputs(args)
    counts = {
        level: true_counts(users, config.domain_size, rng, args.distribution, exponent)
        if users
        else np.zeros(config.domain_size, dtype=np.int64)
        for level, users in split_users(n, fractions).items()
    }
    result = simulate_levels(config, counts, rng)
    combination = result.combination
    truth = result.reporting_counts
    simulation = Simulation(
        counts=truth,
        estimate=combination.estimate,
        variance=combination.variance(truth / combination.n),
    )
    weights = {level: float(np.mean(w)) for level, w in combination.weights.items()}
    level_rows: list[dict[str, Any]] = [
        {
            "level": level,
            "epsilon": levels[level],
            "epsilon_used": config.reporting_epsilon(level),
            "fraction": fractions[level],
            "n": int(counts[level].sum()),
            "weight": weights.get(level, 0.0),
        }
        for level in sorted(levels, key=lambda level: (levels[level], level))
    ]
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
    if args.json:
        body = {"levels": level_rows, "items": _items(simulation), "strategies": strategies}
        print(json.dumps({**header, **body}))
        return 0
    lines = [
        f"oracle {header['oracle']}, domain size {header['domain_size']}, n {n} "
        f"({_shape(header)}), privacy levels, strategy {config.level_strategy}",
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
        + ("" if combination.n == n else f"; true counts of the {combination.n:,} reporting users")
        + ":",
        *_item_lines(simulation, top),
        "",
        f"Strategies for this level mix at n = {n:,}: standard error of an item's",
        "estimated frequency (rare items, exact variance).",
        _strategies_text(plans, strategies, "stderr (frequency)"),
    ]
    print("\n".join(lines))
    return 0


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
