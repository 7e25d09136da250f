"""Direct encoding against its test vectors (docs/protocol.md, tests/vectors/de.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldptel.client.errors import ReportError
from ldptel.client.oracles import make_oracle
from ldptel.client.oracles.de import DirectEncoding
from ldptel.client.randomness import SecureRandom

VECTORS = json.loads((Path(__file__).parents[2] / "vectors" / "de.json").read_text())


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: f"d{c['domain_size']}")
def test_vectors_give_the_documented_probabilities_support_and_estimate(
    case: dict[str, Any],
) -> None:
    oracle = make_oracle("de", epsilon=case["epsilon"], domain_size=case["domain_size"])
    assert oracle.p_star == pytest.approx(case["p"], rel=1e-12)
    assert oracle.q_star == pytest.approx(case["q"], rel=1e-12)
    batch = oracle.decode(case["reports"])
    assert oracle.encode(batch) == case["reports"]
    support = oracle.support(batch)
    assert support.tolist() == case["support"]
    estimate = oracle.estimate(support, len(case["reports"]))
    np.testing.assert_allclose(estimate, case["estimate"], rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("case", VECTORS["malformed"], ids=lambda c: json.dumps(c["report"]))
def test_malformed_vectors_are_rejected_naming_the_field(case: dict[str, Any]) -> None:
    oracle = make_oracle("de", epsilon=1.0, domain_size=case["domain_size"])
    with pytest.raises(ReportError) as raised:
        oracle.decode([{"y": 0}, case["report"]])
    assert raised.value.field == f"reports[1].{case['field']}"
    assert case["reason"] in raised.value.reason


def test_one_report_from_the_os_csprng_has_the_exact_law(monkeypatch) -> None:
    # The SDK's scalar path (no numpy batch): P[y = v] = p, every other value q.
    from scipy import stats

    oracle = DirectEncoding(epsilon=1.0, domain_size=4)
    monkeypatch.setattr(oracle, "perturb_batch", None)  # the scalar path must not use it
    reports = [oracle.perturb(2, SecureRandom())["y"] for _ in range(40_000)]
    expected = np.array([oracle.q, oracle.q, oracle.p, oracle.q]) * len(reports)
    assert stats.chisquare(np.bincount(reports, minlength=4), expected).pvalue > 1e-6
