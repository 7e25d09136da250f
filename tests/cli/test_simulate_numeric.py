"""`ldptel simulate --range` and `ldptel audit --range` as a user runs them: the mean's truth,
estimate and exact standard error in JSON, the distribution for sw and dbitflip, values from
a file, the planner, and one clear line for every bad parameter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ldptel_command import ldptel, one_line_error

MEAN_KEYS = {"true", "estimate", "stderr", "estimated_stderr", "worst_case_stderr", "ci95"}


def simulate_json(*args: str) -> dict[str, Any]:
    result = ldptel("simulate", *args, "--json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_a_mean_mechanism_reports_the_true_mean_its_estimate_and_stderr() -> None:
    data = simulate_json(
        "--oracle", "pm", "--epsilon", "1", "--range", "0", "1000", "--n", "20000", "--seed", "4"
    )
    assert (data["oracle"], data["range"], data["n"], data["distribution"]) == (
        "pm",
        [0.0, 1000.0],
        20_000,
        "lognormal",
    )
    mean = data["mean"]
    assert set(mean) == MEAN_KEYS
    assert abs(mean["estimate"] - mean["true"]) < 4 * mean["stderr"]
    assert mean["stderr"] <= mean["worst_case_stderr"]
    assert "histogram" not in data
    # The config parameters the run used, so it can be repeated as a campaign.
    assert {"resolution", "band", "light", "heavy"} <= set(data["params"])
    again = ("--oracle", "pm", "--epsilon", "1", "--range", "0", "1000", "--n", "20000")
    assert simulate_json(*again, "--seed", "4") == data


@pytest.mark.parametrize("oracle", ["sw", "dbitflip"])
def test_a_distribution_mechanism_adds_the_histogram_cdf_and_quantiles(oracle: str) -> None:
    data = simulate_json(
        "--oracle", oracle, "--epsilon", "2", "--range", "0", "100",
        "--distribution", "bimodal", "--n", "20000", "--seed", "2",
    )  # fmt: skip
    histogram = data["histogram"]
    points = histogram["points"]
    assert len(histogram["edges"]) == len(points) + 1
    assert len(histogram["probabilities"]) == len(points) == len(histogram["cdf"])
    assert sum(histogram["probabilities"]) == pytest.approx(1.0)
    assert histogram["cdf"][-1] == pytest.approx(1.0)
    assert set(histogram["quantiles"]) == {"0.1", "0.25", "0.5", "0.75", "0.9", "0.99"}
    assert 0 <= histogram["wasserstein"] < 10
    assert abs(data["mean"]["estimate"] - data["mean"]["true"]) < 4 * data["mean"]["stderr"]


def test_values_come_from_a_file_one_number_per_line(tmp_path: Path) -> None:
    values = tmp_path / "latency.txt"
    values.write_text("12.5\n80\n\n3000\n-4\n")
    data = simulate_json(
        "--oracle", "duchi", "--epsilon", "1", "--range", "0", "100",
        "--values-file", str(values), "--seed", "1",
    )  # fmt: skip
    assert (data["n"], data["values_file"], data["distribution"]) == (4, str(values), None)
    assert data["mean"]["true"] == pytest.approx((12.5 + 80 + 100 + 0) / 4)  # clipped


def test_auto_says_which_mechanism_it_chose_and_why() -> None:
    data = simulate_json(
        "--oracle", "auto", "--epsilon", "2", "--range", "0", "1", "--n", "1000", "--seed", "1"
    )
    assert (data["oracle"], data["requested_oracle"]) == ("hm", "auto")
    assert "lowest exact worst-case variance" in data["oracle_choice"]["reason"]


@pytest.mark.parametrize("extra", [("--n", "1000", "--seed", "1"), ("--target-stderr", "1")])
def test_the_exact_epsilon_of_integer_probabilities_is_stated_beside_the_requested_one(
    extra: tuple[str, ...],
) -> None:
    # auto picks hm at epsilon 1; its integer probabilities lose ln(1 + B K / A) < 1.
    args = ("--oracle", "auto", "--epsilon", "1", "--range", "0", "100", *extra)
    data = simulate_json(*args)
    assert data["requested_epsilon"] == 1.0
    assert 1 - 1e-8 < data["epsilon"] < 1.0
    result = ldptel("simulate", *args)
    assert result.returncode == 0, result.stderr
    words = f"epsilon {data['epsilon']:.10g} (requested 1; the exact loss of its integer"
    assert words in result.stdout.splitlines()[0]
    # Where they agree (a float law), only the requested epsilon.
    exact = ldptel("simulate", "--oracle", "oue", "--epsilon", "1", "--n", "100", "--seed", "1")
    assert exact.stdout.startswith("oracle oue, epsilon 1, ")


def test_the_planner_gives_the_users_for_a_target_stderr_of_the_mean() -> None:
    data = simulate_json(
        "--oracle", "duchi", "--epsilon", "1", "--range", "0", "100", "--target-stderr", "0.5"
    )
    # Duchi's worst case: ((e + 1) / (e - 1))^2 (range / 2)^2 per report.
    assert data["n_required"] == pytest.approx(2.1640**2 * 50**2 / 0.25, rel=1e-3)


def test_the_table_shows_the_mean_row() -> None:
    result = ldptel(
        "simulate", "--oracle", "sw", "--epsilon", "1", "--range", "0", "10", "--n", "5000"
    )
    assert result.returncode == 0, result.stderr
    assert "mean" in result.stdout and "95% interval" in result.stdout
    assert "Wasserstein" in result.stdout


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("--oracle", "pm", "--epsilon", "1", "--n", "10"), "range"),
        (("--oracle", "oue", "--epsilon", "1", "--range", "0", "1", "--n", "10"), "oracle"),
        (("--oracle", "pm", "--epsilon", "1", "--range", "0", "1", "--param", "g=3"), "param"),
        (("--oracle", "oue", "--epsilon", "1", "--n", "10", "--domain-size", "1"), "domain_size"),
        (("--oracle", "pm", "--range", "0", "1", "--n", "10"), "epsilon"),
    ],
)
def test_bad_parameters_are_one_line_naming_the_field(args: tuple[str, ...], field: str) -> None:
    one_line_error(ldptel("simulate", *args), "simulate", field)


def test_audit_checks_a_numeric_mechanism_on_its_levels() -> None:
    result = ldptel(
        "audit", "--oracle", "sw", "--epsilon", "1", "--range", "0", "100",
        "--samples", "5000", "--seed", "3", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["verdict"] == "ok"
    assert data["domain_size"] == 257  # the levels
    assert data["exact_epsilon"] == pytest.approx(data["claimed_epsilon"], rel=1e-9)
