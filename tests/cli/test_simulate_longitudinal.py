"""`ldptel simulate --windows T --changes C --lifetime-epsilon L --memoization MODE --json`:
every mode at the largest per-report epsilon its guarantee allows under L over T windows, and
the issue's done-when at T = 365, L = 10 (tree <= 0.25x the default's window RMSE for stable
values, <= 0.6x with one change)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ldptel_command import ldptel, one_line_error


def longitudinal(mode: str, windows: int, changes: int, *extra: str) -> dict[str, Any]:
    result = ldptel(
        "simulate",
        *("--windows", str(windows), "--changes", str(changes), "--lifetime-epsilon", "10"),
        *("--memoization", mode, "--n", "20000", "--seed", "3", "--json", *extra),
    )
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)["longitudinal"]
    return data


@pytest.mark.parametrize(("changes", "limit"), [(0, 0.25), (1, 0.6)])
def test_the_tree_beats_fresh_draws_over_a_year_of_daily_windows(
    changes: int, limit: float
) -> None:
    tree = longitudinal("tree", 365, changes)
    fresh = longitudinal("none", 365, changes)
    assert (tree["per_report_epsilon"], tree["lifetime_epsilon"]) == (10.0, 10.0)
    assert fresh["per_report_epsilon"] == pytest.approx(10 / 365)
    assert tree["max_changes"] == changes + 1 and tree["past_max_changes_bias_rmse"] == 0.0
    assert tree["window_rmse"] <= limit * fresh["window_rmse"]


def test_exact_resending_runs_at_its_distinct_values_epsilon_and_past_k_is_measured() -> None:
    exact = longitudinal("exact_discloses_changes", 16, 1)
    assert exact["per_report_epsilon"] == 5.0 and "same change pattern" in exact["rule"]
    past = longitudinal("tree", 16, 3, "--max-changes", "1")
    assert past["max_changes"] == 1 and past["past_max_changes_bias_rmse"] > 0.01


def test_a_bad_mode_is_one_clear_line() -> None:
    result = ldptel("simulate", "--windows", "8", "--memoization", "sometimes")
    one_line_error(result, "simulate", "memoization")
    one_line_error(ldptel("simulate", "--epsilon", "1", "--n", "5"), "simulate", "oracle")
