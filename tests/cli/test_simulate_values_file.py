"""`ldptel simulate --values-file`: users plan on their own data, for every oracle: the
domain is the file's distinct values (most frequent first), the true counts are the file's,
and the hashing oracles hash the values themselves."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from ldptel_command import ldptel, one_line_error

from ldptel.analysis.simulation import build_oracle
from ldptel.cli.main import main
from ldptel.client.oracles import ORACLES

COUNTS = {"rouge": 600, "bleu": 300, "vert pâle": 100}


@pytest.fixture(scope="module")
def values_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("values") / "colors.txt"
    lines = [value for value, count in COUNTS.items() for _ in range(count)]
    path.write_text("\r\n".join(lines[::-1]) + "\r\n", encoding="utf-8")  # CRLF, reversed
    return path


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_every_oracle_simulates_the_files_users(
    name: str, values_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["simulate", "--oracle", name, "--epsilon", "2", "--values-file", str(values_file)]
    assert main([*args, "--seed", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["n"], data["domain_size"], data["values_file"]) == (1_000, 3, str(values_file))
    items = data["items"]
    assert [(i["value"], i["true"]) for i in items] == list(COUNTS.items())
    for item in items:  # 3 items per oracle, |z| < 5: false failure about 2e-6 each
        assert abs(item["estimate"] - item["true"]) < 5 * item["stderr"], (name, item)
    # Its variance is the oracle's own (labels given only to the oracles that hash them).
    oracle = build_oracle(name, epsilon=2.0, domain_size=3)
    if oracle.exact_estimator:
        exact = oracle.variance(1_000, np.array(list(COUNTS.values())) / 1_000)
        assert [i["variance"] for i in items] == pytest.approx(exact.tolist(), rel=1e-9)


def test_the_table_names_the_values_and_domain_size_adds_items_nobody_holds(
    values_file: Path,
) -> None:
    result = ldptel(
        "simulate", "--oracle", "olh", "--epsilon", "2", "--values-file", str(values_file),
        "--domain-size", "5", "--seed", "3",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"oracle olh, epsilon 2, domain size 5, n 1000 (values of {values_file}, seed 3)"
    )
    header = next(i for i, line in enumerate(lines) if line.startswith("item "))
    shown = [line.split()[0] for line in lines[header + 2 : header + 7]]
    assert shown[:2] == ["rouge", "bleu"] and "vert" in shown and "#0" in shown


def test_bad_combinations_are_one_line(values_file: Path, tmp_path: Path) -> None:
    one = tmp_path / "one.txt"
    one.write_text("a\na\n", encoding="utf-8")
    base = ["simulate", "--oracle", "de", "--epsilon", "1", "--values-file"]
    for args, field in [
        ([*base, str(values_file), "--n", "10"], "n"),
        ([*base, str(values_file), "--domain-size", "2"], "domain_size"),
        ([*base, str(one)], "values_file"),
    ]:
        one_line_error(ldptel(*args), "simulate", field)
