"""`ldptel simulate --attributes`: the breakdown's marginals as JSON, from simulated rows or
a CSV of the users' own rows, and clear errors for bad arguments."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from ldptel_command import ldptel, one_line_error


def test_json_holds_every_marginal_with_cells_beside_the_truth() -> None:
    result = ldptel(
        "simulate", "--oracle", "auto", "--attributes", "os:4,plan:3,country:5",
        "--epsilon", "2", "--n", "20000", "--json", "--seed", "29",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["requested_oracle"] == "auto" and document["oracle"] in ("joint", "pairs")
    assert document["audited_epsilon"] <= 2 + 1e-9
    assert document["consistency"]["biased"] is True
    assert all(c["consistent"] >= 0 for m in document["marginals"] for c in m["cells"])
    shapes = {tuple(m["attributes"]): len(m["cells"]) for m in document["marginals"]}
    assert shapes == {
        ("os",): 4, ("plan",): 3, ("country",): 5,
        ("os", "plan"): 12, ("os", "country"): 20, ("plan", "country"): 15,
    }  # fmt: skip
    two_way = [c for m in document["marginals"] if len(m["attributes"]) == 2 for c in m["cells"]]
    assert sum(c["true"] for c in two_way) == 3 * 20000
    z = np.array([(c["estimate"] - c["true"]) / c["stderr"] for c in two_way])
    # 47 cells, each |z| > 5 with probability 6e-7 (a fixed seed: the run is repeatable).
    assert np.abs(z).max() < 5


def test_a_csv_of_the_users_rows(tmp_path: Path) -> None:
    values = tmp_path / "rows.csv"
    values.write_text("os,user,plan\n" + "ios,1,pro\n" * 30 + "android,2,free\n" * 70)
    result = ldptel(
        "simulate", "--oracle", "joint", "--values-file", str(values), "--attributes", "os,plan",
        "--epsilon", "1", "--json", "--seed", "1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    cross = next(m for m in document["marginals"] if m["attributes"] == ["os", "plan"])
    truth = {tuple(c["values"]): c["true"] for c in cross["cells"]}
    assert truth == {
        ("android", "free"): 70, ("android", "pro"): 0, ("ios", "free"): 0, ("ios", "pro"): 30,
    }  # fmt: skip


def test_bad_attributes_are_named() -> None:
    result = ldptel(
        "simulate", "--oracle", "auto", "--attributes", "os:4,plan", "--epsilon", "1", "--n", "10"
    )
    one_line_error(result, "simulate", "attributes")
    result = ldptel(
        "simulate", "--oracle", "oue", "--attributes", "os:4,plan:3", "--epsilon", "1", "--n", "10"
    )
    one_line_error(result, "simulate", "oracle")
