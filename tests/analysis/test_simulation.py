"""Simulation and planning: chunked perturbation counts every simulated client exactly once
with its own value, and the planner inverts the exact variance."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from ldptel.analysis import simulation
from ldptel.analysis.simulation import (
    build_oracle,
    chunk_rows,
    item_probabilities,
    plan,
    simulate,
    simulate_support,
    true_counts,
)
from ldptel.client.errors import ParameterError
from ldptel.client.oracles.base import ReportBatch
from ldptel.client.oracles.de import DirectEncoding
from ldptel.client.randomness import Rng


class Truthful(DirectEncoding):
    """No noise at all: the support is exactly the true counts (to test the plumbing)."""

    def perturb_batch(self, values: Any, rng: Rng) -> ReportBatch:
        return {"y": np.asarray(values, dtype=np.uint32)}


def test_chunked_simulation_reports_each_client_once_with_its_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(simulation, "chunk_rows", lambda oracle: 7)
    counts = np.array([10, 0, 3, 0, 0, 22, 1, 0], dtype=np.int64)
    chunks: list[int] = []
    support = simulate_support(
        Truthful(epsilon=1.0, domain_size=8),
        counts,
        np.random.default_rng(0),
        lambda done, total: chunks.append(done),
    )
    assert np.array_equal(support, counts)
    assert chunks == [7, 14, 21, 28, 35, 36]


def test_simulate_estimates_with_the_true_frequency_term() -> None:
    oracle = DirectEncoding(epsilon=1.0, domain_size=4)
    counts = np.array([600, 300, 100, 0], dtype=np.int64)
    result = simulate(oracle, counts, np.random.default_rng(1))
    assert result.n == 1000
    assert np.allclose(result.variance, oracle.variance(1000, counts / 1000))
    assert np.allclose(result.stderr**2, result.variance)


def test_true_counts_follow_the_distribution() -> None:
    rng = np.random.default_rng(2)
    assert true_counts(1000, 5, rng, "uniform").sum() == 1000
    zipf = item_probabilities(4, "zipf", 1.0)
    assert np.allclose(zipf, np.array([1, 1 / 2, 1 / 3, 1 / 4]) / (25 / 12))
    assert np.allclose(item_probabilities(4, "zipf", 0.0), 0.25)
    with pytest.raises(ParameterError, match="distribution"):
        item_probabilities(4, "normal")
    with pytest.raises(ParameterError, match="n"):
        true_counts(0, 4, rng)


def test_chunks_follow_the_report_width() -> None:
    assert chunk_rows(DirectEncoding(epsilon=1.0, domain_size=4)) == simulation.MAX_CHUNK_ROWS
    wide = build_oracle("oue", epsilon=1.0, domain_size=2**20)  # 128 KiB per report
    assert chunk_rows(wide) == simulation.CHUNK_BYTES // 2**17 == 128
    # A report wider than the whole budget (SHE at R = 64: 2 bytes per item) is perturbed alone.
    widest = build_oracle("she", epsilon=1.0, domain_size=2**24, params={"resolution": 64})
    assert chunk_rows(widest) == 1


def test_the_planner_inverts_the_exact_variance() -> None:
    oracle = DirectEncoding(epsilon=2.0, domain_size=10)
    result = plan(oracle, 0.01)
    e = math.exp(2.0)
    rare = (10 - 2 + e) / (e - 1) ** 2  # Wang et al. 2017: Var/n of DE at f_v = 0
    assert result.variance_rare == pytest.approx(rare)
    assert result.users_rare == math.ceil(rare / 0.01**2)
    assert result.users >= result.users_rare
    with pytest.raises(ParameterError, match="target_stderr"):
        plan(oracle, -1.0)


def test_build_oracle_names_a_bad_parameter() -> None:
    with pytest.raises(ParameterError, match="no parameter 'g'"):
        build_oracle("de", epsilon=1.0, domain_size=4, params={"g": 3})
    with pytest.raises(ParameterError, match="own option"):
        build_oracle("olh", epsilon=1.0, domain_size=4, params={"epsilon": 3})
    assert build_oracle("olh", epsilon=1.0, domain_size=4, params={"g": 5}).g == 5  # type: ignore[attr-defined]
