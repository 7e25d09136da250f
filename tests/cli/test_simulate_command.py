"""`ldptel simulate` as a user runs it: JSON for programs, a table for people, the planner,
and one clear line for every bad parameter."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from ldptel_command import ldptel, one_line_error

from ldptel.analysis.simulation import build_oracle
from ldptel.client.oracles import ORACLES

ITEM_KEYS = {"item", "true", "estimate", "variance", "stderr"}


def simulate_json(*args: str) -> dict[str, object]:
    result = ldptel("simulate", *args, "--json")
    assert result.returncode == 0, result.stderr
    data: dict[str, object] = json.loads(result.stdout)
    return data


def test_json_has_every_item_with_its_true_count_estimate_and_exact_variance() -> None:
    data = simulate_json(
        "--oracle", "oue", "--epsilon", "1", "--domain-size", "12", "--n", "50000", "--seed", "3"
    )
    assert {"oracle", "epsilon", "domain_size", "n", "items"} <= set(data)
    assert (data["oracle"], data["epsilon"], data["domain_size"], data["n"]) == (
        "oue",
        1.0,
        12,
        50_000,
    )
    items = data["items"]
    assert isinstance(items, list) and [i["item"] for i in items] == list(range(12))
    assert all(set(i) == ITEM_KEYS for i in items)
    assert sum(i["true"] for i in items) == 50_000
    for i in items:
        assert i["stderr"] == pytest.approx(math.sqrt(i["variance"]))
        assert abs(i["estimate"] - i["true"]) < 5 * i["stderr"]  # 12 items, |z| < 5
    # The variance is the oracle's exact one at each item's true frequency (its f_v term).
    counts = np.array([i["true"] for i in items])
    exact = build_oracle("oue", epsilon=1.0, domain_size=12).variance(50_000, counts / 50_000)
    assert [i["variance"] for i in items] == pytest.approx(exact.tolist(), rel=1e-12)
    assert np.ptp(exact) > 0  # the f_v term is there to see: item 0 differs from the rest


def test_a_seed_makes_the_run_reproducible_and_uniform_is_uniform() -> None:
    args = ("--oracle", "de", "--epsilon", "2", "--domain-size", "5", "--n", "10000")
    first = simulate_json(*args, "--seed", "9", "--distribution", "uniform")
    assert first == simulate_json(*args, "--seed", "9", "--distribution", "uniform")
    assert first["seed"] == 9
    counts = [i["true"] for i in first["items"]]  # type: ignore[union-attr]
    assert all(abs(c - 2000) < 5 * math.sqrt(2000) for c in counts)


def test_the_table_shows_the_top_items_in_aligned_columns() -> None:
    result = ldptel(
        "simulate", "--oracle", "olh", "--epsilon", "2", "--domain-size", "40",
        "--n", "20000", "--seed", "1", "--top", "5",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("oracle olh, epsilon 2, domain size 40, n 20000")
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["item", "true"])
    table = lines[start : start + 7]  # header, rule, 5 rows
    assert set(table[1]) <= {"-", " "}
    assert len({len(line) for line in table}) == 1  # numbers right-aligned to one width
    assert [int(row.split()[0]) for row in table[2:]] == [0, 1, 2, 3, 4]  # zipf: by count
    assert "5 of 40 items shown" in result.stdout
    assert result.stderr == ""  # no progress line when stderr is not a terminal


def test_the_planner_gives_users_needed_from_the_exact_variance() -> None:
    data = simulate_json(
        "--oracle", "de", "--epsilon", "1", "--domain-size", "16", "--target-stderr", "0.01"
    )
    oracle = build_oracle("de", epsilon=1.0, domain_size=16)
    worst = max(float(oracle.variance(1, np.full(16, f)).max()) for f in (0.0, 1.0))
    assert data["n_required"] == math.ceil(worst / 0.01**2)
    rare = float(oracle.variance(1).max())
    assert data["n_required_rare_items"] == math.ceil(rare / 0.01**2)
    compared = {c["oracle"] for c in data["comparison"]}  # type: ignore[union-attr]
    assert compared == set(ORACLES)


def test_a_simulation_with_the_planned_users_meets_the_target() -> None:
    plan = simulate_json(
        "--oracle", "sue", "--epsilon", "2", "--domain-size", "8", "--target-stderr", "0.02"
    )
    n = plan["n_required"]
    run = simulate_json(
        "--oracle", "sue", "--epsilon", "2", "--domain-size", "8", "--n", str(n), "--seed", "2"
    )
    assert max(i["stderr"] for i in run["items"]) / n <= 0.02  # type: ignore[union-attr]


def test_the_planner_table_compares_every_oracle() -> None:
    result = ldptel(
        "simulate", "--oracle", "olh", "--epsilon", "1", "--domain-size", "64",
        "--target-stderr", "0.005",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "users needed:" in result.stdout
    for name in ORACLES:
        assert name in result.stdout


def test_oracle_parameters_pass_through_param() -> None:
    data = simulate_json(
        "--oracle", "olh", "--epsilon", "1", "--domain-size", "8", "--n", "2000",
        "--param", "g=6", "--seed", "5",
    )  # fmt: skip
    default = simulate_json(
        "--oracle", "olh", "--epsilon", "1", "--domain-size", "8", "--n", "2000", "--seed", "5"
    )
    # The same epsilon with more buckets: a different (larger) variance.
    assert data["epsilon"] == pytest.approx(1.0)
    assert data["items"][0]["variance"] > default["items"][0]["variance"]  # type: ignore[index]


BASE = ["--oracle", "de", "--epsilon", "1", "--domain-size", "8", "--n", "100"]


def replaced(option: str, value: str) -> list[str]:
    args = list(BASE)
    args[args.index(option) + 1] = value
    return args


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (replaced("--epsilon", "0"), "epsilon"),
        (replaced("--epsilon", "-1"), "epsilon"),
        (replaced("--epsilon", "nan"), "epsilon"),
        (replaced("--epsilon", "inf"), "epsilon"),
        (replaced("--epsilon", "one"), "epsilon"),
        (replaced("--domain-size", "1"), "domain_size"),
        (replaced("--domain-size", "2.5"), "domain_size"),
        (replaced("--oracle", "nope"), "oracle"),
        (replaced("--n", "0"), "n"),
        (BASE[:-2], "n"),
        ([*BASE, "--param", "g"], "param"),
        ([*BASE, "--param", "g=3"], "param"),  # DE has no g
        ([*replaced("--oracle", "olh"), "--param", "g=1"], "g"),
        ([*BASE, "--target-stderr", "0"], "target_stderr"),
        ([*BASE, "--zipf-exponent", "-1"], "zipf_exponent"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_bad_parameters_give_one_line_and_exit_2(args: list[str], field: str) -> None:
    one_line_error(ldptel("simulate", *args), "simulate", field)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (replaced("--epsilon", "1000"), "epsilon: must be <= 20"),
        (replaced("--domain-size", "1e30"), "domain_size: must be >= 2, <= 16777216"),
        (replaced("--epsilon", "-inf"), "write --option=VALUE"),
        ([*BASE, "--distribution", "normal"], "invalid choice: 'normal'"),
        (BASE[2:], "oracle: is required (or give --windows"),
    ],
    ids=["huge epsilon", "huge domain", "negative-looking value", "choice", "missing option"],
)
def test_huge_values_and_usage_errors_are_one_line_too(args: list[str], says: str) -> None:
    result = ldptel("simulate", *args)
    assert (result.returncode, result.stdout) == (2, ""), result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ldptel simulate: error: "), result.stderr
    assert says in lines[0]


def test_rappor_shows_both_guarantees_and_which_candidates_are_significant() -> None:
    args = ("--oracle", "rappor", "--epsilon", "1", "--domain-size", "16", "--n", "100000")
    data = simulate_json(*args, "--seed", "4")
    assert isinstance(data["privacy"], dict)
    privacy = data["privacy"]["rappor"]
    # The guarantees of the parameters actually used (f derived from the requested epsilon).
    h, f, p, q = privacy["h"], privacy["f"], privacy["p"], privacy["q"]
    p_star, q_star = (f / 2) * q + (1 - f / 2) * p, (1 - f / 2) * q + (f / 2) * p
    one = h * math.log(q_star * (1 - p_star) / (p_star * (1 - q_star)))
    assert privacy["epsilon"] == pytest.approx(one) == pytest.approx(1.0, rel=1e-6)
    assert privacy["permanent_epsilon"] == pytest.approx(2 * h * math.log((1 - f / 2) / (f / 2)))
    items = data["items"]
    assert isinstance(items, list) and all(
        ITEM_KEYS | {"significant", "pvalue"} == set(i) for i in items
    )
    # The most frequent items are detected; a non-significant one keeps its estimate.
    assert items[0]["significant"] and items[0]["pvalue"] < 0.05 / 16
    assert not all(i["significant"] for i in items)
    table = ldptel("simulate", *args, "--seed", "4").stdout
    bound = f"{privacy['permanent_epsilon']:.4g}"
    assert f"reports of one value by one client at most {bound} (permanent bound)" in table
    flagged = sum(i["significant"] for i in items)
    assert f"Bonferroni): {flagged} of 16 candidates" in table


def test_auto_and_aliases_say_what_they_stand_for() -> None:
    args = ("--epsilon", "1", "--domain-size", "64", "--n", "1000", "--seed", "1")
    data = simulate_json("--oracle", "auto", *args)
    choice = data["oracle_choice"]
    assert isinstance(choice, dict) and choice["oracle"] == data["oracle"] != "auto"
    assert data["requested_oracle"] == "auto"
    table = ldptel("simulate", "--oracle", "auto", *args).stdout
    assert f"auto chose {data['oracle']}: {choice['reason']}" in table
    assert "(rappor-basic is sue)" in ldptel("simulate", "--oracle", "rappor-basic", *args).stdout
