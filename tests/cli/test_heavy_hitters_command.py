"""`ldptel heavy-hitters` as a user runs it on a values file: the JSON the issue specifies,
the table for people, and one clear line for every bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from ldptel_command import ldptel, one_line_error

COUNTS = {"red": 1_500, "blue": 1_100, "grün": 800}


@pytest.fixture(scope="module")
def values_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Three frequent answers and 400 answers held by one user each, in file order mixed.
    lines = [v for v, c in COUNTS.items() for _ in range(c)] + [f"x{i}" for i in range(400)]
    path = tmp_path_factory.mktemp("values") / "answers.txt"
    random.Random(0).shuffle(lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_json_lists_the_discovered_strings_with_threshold_recall_and_precision(
    values_file: Path,
) -> None:
    result = ldptel(
        "heavy-hitters", "--values-file", str(values_file), "--epsilon", "4", "--seed", "2",
        "--false-discoveries", "0.001", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no progress bar off a terminal
    data = json.loads(result.stdout)
    assert set(data) == {
        "discovered", "threshold", "expected_false_discoveries", "recall", "precision",
    }  # fmt: skip
    found = {item["value"]: item for item in data["discovered"]}
    assert all(set(item) == {"value", "estimate", "stderr", "true"} for item in found.values())
    # The frequent answers are found, with their true counts; no answer of one user is.
    assert set(found) == set(COUNTS)
    assert {value: item["true"] for value, item in found.items()} == COUNTS
    for item in found.values():  # 3 strings, |z| < 4: false failure about 2e-4
        assert abs(item["estimate"] - item["true"]) < 4 * item["stderr"]
        assert item["estimate"] > data["threshold"] > 1
    assert data["expected_false_discoveries"] == pytest.approx(0.001)
    assert (data["recall"], data["precision"]) == (1.0, 1.0)


def test_the_table_states_the_threshold_and_that_it_costs_no_privacy(values_file: Path) -> None:
    result = ldptel(
        "heavy-hitters", "--values-file", str(values_file), "--epsilon", "4", "--seed", "2",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("PEM over cms: epsilon 4 per user (one report each), n 3,800 users")
    header, rule, first = out.splitlines()[2:5]
    assert header.split() == ["value", "estimate", "stderr", "true"] and set(rule) == {"-", " "}
    assert first.split()[0] == "red" and first.split()[-1] == "1,500"
    assert "Threshold " in out and "(false discoveries) is 0.05." in out
    assert "Recall 100% of the 3 strings" in out
    assert "no extra privacy" in out


def test_bad_inputs_are_one_line_naming_the_field(tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\xe9\n".encode("latin-1"))
    long = tmp_path / "long.txt"
    long.write_text("abcdef\n", encoding="utf-8")
    for args, field in [
        (["--values-file", str(tmp_path / "missing.txt"), "--epsilon", "1"], "values_file"),
        (["--values-file", str(latin1), "--epsilon", "1"], "values_file"),
        (["--values-file", str(long), "--epsilon", "0"], "epsilon"),
        (["--values-file", str(long), "--epsilon", "1", "--max-length", "3"], "value"),
        (["--values-file", str(long), "--epsilon", "1", "--top-k", "x"], "top_k"),
    ]:
        one_line_error(ldptel("heavy-hitters", *args), "heavy-hitters", field)
