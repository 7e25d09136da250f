"""`ldptel budget` counts the reports a lifetime budget allows with each accountant, and
`ldptel simulate --json` states the privacy object of a window report (local, central,
longitudinal), with the numerical shuffle bound."""

from __future__ import annotations

import json
from typing import Any

from ldptel_command import ldptel, one_line_error

from ldptel.client.shuffle import closed_form_epsilon


def run_json(*args: str) -> Any:
    result = ldptel(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_lifetime_of_10_and_1e_6_allows_346_reports_of_0_1() -> None:
    data = run_json("budget", "--epsilon", "0.1", "--lifetime-epsilon", "10",
                    "--lifetime-delta", "1e-6")  # fmt: skip
    assert data["reports"] == 346 and data["lifetime_delta"] == 1e-6
    basic, optimal = data["accountants"]
    assert (basic["reports"], optimal["reports"]) == (100, 346)
    assert optimal["epsilon"] <= 10 and optimal["delta"] == 1e-6
    assert "(9.99, 1e-06)-differentially private" in data["statement"]


def test_without_a_delta_the_ledger_adds_epsilons_and_from_one_half_nothing_is_gained() -> None:
    data = run_json("budget", "--epsilon", "0.1", "--lifetime-epsilon", "10")
    assert data["reports"] == 100 and data["accountants"][1]["reports"] == 346
    data = run_json("budget", "--epsilon", "0.5", "--lifetime-epsilon", "10",
                    "--lifetime-delta", "1e-6")  # fmt: skip
    assert data["reports"] == 20 and data["gain"] == 1.0
    assert "0.5" in data["note"]


def test_with_n_it_states_the_central_guarantee_per_window_and_over_the_windows() -> None:
    data = run_json("budget", "--epsilon", "1", "--lifetime-epsilon", "10", "--n", "100000",
                    "--windows", "5")  # fmt: skip
    central = data["central"]
    assert central["window"]["applies"] and central["window"]["epsilon"] < 0.02
    assert central["windows"] == 5 and central["window"]["epsilon"] < central["epsilon"] < 0.2
    assert "at most 5 windows" in central["statement"]
    refused = ldptel("budget", "--epsilon", "1", "--lifetime-epsilon", "10", "--n", "10000",
                     "--windows", "11")  # fmt: skip
    one_line_error(refused, "budget", "windows")


def test_simulate_carries_the_privacy_object_of_a_window_report() -> None:
    data = run_json("simulate", "--oracle", "oue", "--epsilon", "1", "--n", "100000",
                    "--domain-size", "8", "--seed", "1")  # fmt: skip
    privacy = data["privacy"]
    assert {"local", "central", "longitudinal", "central_lifetime"} <= set(privacy)
    central = privacy["central"]
    closed = closed_form_epsilon(1.0, 100_000, central["delta"])
    assert central["closed_form_epsilon"] == closed and closed is not None
    assert central["applies"] and central["epsilon"] <= closed / 2
    assert central["adversary"] == "readers of the reports"
    assert privacy["local"]["adversary"] == "the collector and the network"
