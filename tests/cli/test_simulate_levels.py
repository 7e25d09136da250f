"""`ldptel simulate --levels`: plan a campaign with privacy levels, and compare the level
strategies (optimal combination, Minimum, Threshold)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from ldptel_command import ldptel, one_line_error

MIX = "high:0.5:0.54,medium:1:0.37,low:2:0.09"


def simulate_json(*args: str) -> dict[str, Any]:
    result = ldptel("simulate", *args, "--json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_json_has_the_levels_the_combined_items_and_every_strategy() -> None:
    data = simulate_json(
        "--oracle", "olh", "--domain-size", "16", "--levels", MIX, "--n", "40000", "--seed", "4"
    )
    levels = {row["level"]: row for row in data["levels"]}
    assert [row["level"] for row in data["levels"]] == ["high", "medium", "low"]
    assert [levels[x]["n"] for x in ("high", "medium", "low")] == [21600, 14800, 3600]
    assert sum(row["weight"] for row in data["levels"]) == pytest.approx(1.0)
    assert levels["low"]["weight"] > levels["high"]["weight"]
    assert data["n_reporting"] == 40000
    assert sum(item["true"] for item in data["items"]) == 40000
    for item in data["items"]:
        assert abs(item["estimate"] - item["true"]) < 5 * item["stderr"]  # 16 items, |z| < 5
    strategies = {(s["strategy"], s["threshold"]): s for s in data["strategies"]}
    assert set(strategies) == {
        ("optimal", None), ("minimum", None), ("threshold", 1.0), ("threshold", 2.0),
        ("sample", 1.0), ("sample", 2.0),
    }  # fmt: skip
    # Sample uses every user, so it beats Threshold at the same t; it never beats optimal.
    for t in (1.0, 2.0):
        sample, threshold = strategies[("sample", t)], strategies[("threshold", t)]
        assert sample["variance_per_user"] < threshold["variance_per_user"]
    optimal = strategies[("optimal", None)]
    assert optimal["variance_vs_optimal"] == 1.0
    assert all(s["variance_vs_optimal"] > 1 for s in data["strategies"] if s is not optimal)
    # The planned stderr of the optimal strategy is the simulated combination's (rare items).
    rarest = min(data["items"], key=lambda item: item["true"])
    assert optimal["stderr"] == pytest.approx(rarest["stderr"] / 40000, rel=0.05)


def test_threshold_simulates_only_the_levels_at_or_above_t() -> None:
    data = simulate_json(
        "--oracle", "de", "--domain-size", "6", "--levels", MIX, "--n", "20000", "--seed", "1",
        "--level-strategy", "threshold", "--level-threshold", "1",
    )  # fmt: skip
    levels = {row["level"]: row for row in data["levels"]}
    assert levels["high"]["epsilon_used"] is None and levels["high"]["weight"] == 0
    assert levels["low"]["epsilon_used"] == 1.0
    assert data["n_reporting"] == 20000 - levels["high"]["n"]


def test_sample_simulates_every_level_at_t_and_estimates_within_its_stderr() -> None:
    data = simulate_json(
        "--oracle", "de", "--domain-size", "6", "--levels", MIX, "--n", "20000", "--seed", "1",
        "--level-strategy", "sample", "--level-threshold", "1",
    )  # fmt: skip
    assert data["level_strategy"] == "sample" and data["n_reporting"] == 20000
    levels = {row["level"]: row for row in data["levels"]}
    # Below t a report guarantees the level's own epsilon; at or above t it is made at t.
    assert levels["high"]["epsilon_used"] == 0.5 and levels["low"]["epsilon_used"] == 1.0
    assert all(row["weight"] > 0 for row in data["levels"])
    for item in data["items"]:
        assert abs(item["estimate"] - item["true"]) < 5 * item["stderr"]  # 6 items, |z| < 5


def test_the_table_shows_levels_items_and_the_strategy_comparison() -> None:
    result = ldptel(
        "simulate", "--oracle", "olh", "--domain-size", "32", "--levels", MIX,
        "--n", "20000", "--seed", "2", "--top", "3",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    text = result.stdout
    for expected in ("level", "epsilon used", "weight", "optimal", "minimum", "threshold t=1"):
        assert expected in text
    assert "3 of 32 items shown" in text


def test_the_planner_gives_users_needed_per_strategy() -> None:
    data = simulate_json(
        "--oracle", "olh", "--domain-size", "64", "--levels", MIX, "--target-stderr", "0.001"
    )
    needed = {(s["strategy"], s["threshold"]): s["n_required"] for s in data["strategies"]}
    assert needed[("optimal", None)] < min(n for key, n in needed.items() if key[0] != "optimal")
    # Minimum is everyone at epsilon 0.5 with OLH: 4 e^eps / (e^eps - 1)^2 per report
    # (at the integer g = round(e^0.5 + 1) = 3 the exact variance is a little higher).
    e = math.exp(0.5)
    assert needed[("minimum", None)] >= 4 * e / (e - 1) ** 2 / 0.001**2


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("--levels", "high:0.5"), "levels"),
        (("--levels", "high:0.5:0.5,low:2:0.4"), "levels"),  # fractions sum to 0.9
        (("--levels", "high:0.5:0.5,high:2:0.5"), "levels"),
        (("--levels", "High:0.5:1"), "levels"),
        (("--levels", "high:-1:1"), "levels.high"),
        (("--levels", "high:x:1"), "levels"),
        (("--levels", MIX, "--epsilon", "1"), "epsilon"),
        (("--levels", MIX, "--level-strategy", "threshold"), "level_threshold"),
        (("--levels", MIX), "n"),
        ((), "epsilon"),
    ],
)
def test_bad_level_options_are_one_line_naming_the_field(args: tuple[str, ...], field: str) -> None:
    result = ldptel("simulate", "--oracle", "de", "--domain-size", "4", *args)
    one_line_error(result, "simulate", field)


@pytest.mark.parametrize("strategy", ["sample", "threshold"])
def test_a_strategy_without_a_threshold_names_the_flags(strategy: str) -> None:
    args = ("--levels", MIX, "--level-strategy", strategy, "--n", "100")
    result = ldptel("simulate", "--oracle", "de", "--domain-size", "4", *args)
    one_line_error(result, "simulate", "level_threshold")
    assert f"--level-threshold T is required by --level-strategy {strategy}\n" in result.stderr
