"""The ledger's behaviour vectors (tests/vectors/ledger.json, shared with the TypeScript
client): the committed file is what make_ledger.py's plain rules give, and the Python
client's own code (the level rule, the charged window, the memo's cost, ledger.charge)
reaches the same status, budget field, window and charge at every step."""

from __future__ import annotations

import importlib.util
import json
import types
from pathlib import Path
from typing import Any

import pytest

from ldptel.client import ledger, memo
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import BudgetExhaustedError
from ldptel.client.guarantee import Budget
from ldptel.client.statedb import open_state, transaction
from ldptel.client.windows import Windows

VECTORS = Path(__file__).parents[1] / "vectors"
FILE = json.loads((VECTORS / "ledger.json").read_text())


def test_the_committed_vectors_are_what_the_rules_give() -> None:
    spec = importlib.util.spec_from_file_location("make_ledger", VECTORS / "make_ledger.py")
    assert spec is not None and spec.loader is not None
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    assert maker.build() == FILE


def charged_window(config: CampaignConfig, now: float) -> int:
    """Windows.charged itself (the Reporter's), on a clock reading `now`."""
    fake = types.SimpleNamespace(
        _clock=types.SimpleNamespace(now=lambda: now),
        _margin=lambda: FILE["timeout_seconds"] + 2.0,
    )
    return int(Windows.charged(fake, config))  # type: ignore[arg-type]


@pytest.mark.parametrize("case", FILE["cases"], ids=[c["title"][:40] for c in FILE["cases"]])
def test_the_python_client_takes_the_vectors_decisions(
    case: dict[str, Any], tmp_path: Path
) -> None:
    served = dict(case["config"])
    claimed = served.pop("config_id")
    config = CampaignConfig.from_dict(served, stored=True)
    assert config.config_id == claimed
    conn = open_state(tmp_path, [ledger.SCHEMA, memo.SCHEMA])
    randomizers: dict[str, memo.Randomizer] = {}
    for step in case["steps"]:
        level = step["level"]
        epsilon = config.reporting_epsilon(level)
        if epsilon is None:
            assert step["status"] == "level_not_collected"
            continue
        if level not in randomizers:
            randomizers[level] = memo.Randomizer(config, conn, b"k" * 32, level)
        window = charged_window(config, step["now"])
        assert window == step["window"], step
        budget = Budget.of(config, epsilon)
        try:
            with transaction(conn):
                _, cost = randomizers[level].spend(conn, config.domain.index(step["value"]))
                ledger.charge(conn, config.name, window, config.window_seconds, cost, budget)
        except BudgetExhaustedError as refused:
            assert (step["status"], step["field"]) == ("budget_exhausted", refused.field), step
            continue
        assert step["status"] == "spooled", step
        assert cost == pytest.approx(step["charged"], rel=1e-12, abs=1e-15), step
    conn.close()
