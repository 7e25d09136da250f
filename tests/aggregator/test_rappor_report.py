"""Reports of full RAPPOR: standard errors, confidence intervals and significance come from the
decoder's own fit (Rappor.fit), not from the design variance and the generic threshold."""

from __future__ import annotations

import json
from html import escape
from typing import Any

import numpy as np
import pytest
from stream_entries import make_config, register, simulate

from ldptel.aggregator.html import render_html
from ldptel.aggregator.model import from_json
from ldptel.aggregator.reports import ReportOptions, build_window, significance_z
from ldptel.aggregator.reports.categorical import DECODER_FIT, UNCALIBRATED
from ldptel.aggregator.state import StateKey, read_state
from ldptel.aggregator.table import format_window
from ldptel.aggregator.worker import Worker
from ldptel.store.registry import Registry

WINDOW = 1_700_006_400
#: Four candidates people hold, then eight decoys nobody holds.
FREQUENCIES = [0.4, 0.3, 0.2, 0.1] + [0.0] * 8
N = 20_000


def rappor_window(
    client: Any, options: ReportOptions, **params: Any
) -> tuple[Any, dict[str, Any], Any]:
    """A RAPPOR campaign aggregated from real stream entries: (its oracle, its report, the fit
    Rappor.fit gives for the same support)."""
    domain = [f"item{i}" for i in range(len(FREQUENCIES))]
    config = make_config(oracle="rappor", epsilon=1.1, domain=domain, params={"f": 0.5, **params})
    register(client, config)
    values = np.random.default_rng(11).choice(len(FREQUENCIES), size=N, p=FREQUENCIES)
    simulate(client, config, values, window=WINDOW, batch_size=1000)
    Worker(client).run_pass()
    registry = Registry(client)
    document = build_window(client, registry, config.name, WINDOW, options)
    (report,) = from_json(json.dumps(document))["reports"]  # as served: checked by the model
    oracle = config.build_oracle()
    shards = range(registry.shard_count(config.name))
    n, support = read_state(client, config.name, shards, StateKey(WINDOW, config.config_id, ""),
                            oracle.support_size)  # fmt: skip
    assert n == N
    return oracle, report, oracle.fit(support, alpha=options.false_flags)


@pytest.mark.parametrize("false_flags", [0.05, 0.01])
def test_flags_and_stderr_are_the_decoders_own(redis_client: Any, false_flags: float) -> None:
    options = ReportOptions(false_flags=false_flags, consistency="base-cut")
    oracle, report, fit = rappor_window(redis_client, options)
    items = report["items"]

    assert report["significance"]["method"] == DECODER_FIT
    assert "uncalibrated" not in report  # least squares: calibrated (benchmarks/README.md)
    assert [item["significant"] for item in items] == fit.significant.tolist()
    assert [item["estimate"] for item in items] == pytest.approx(fit.estimate.tolist())
    selected = np.flatnonzero(fit.selected)
    stderr = np.array([item["stderr"] for item in items])
    # The design stderr (the generic rule) differs by ~1-2% here: far outside this tolerance.
    np.testing.assert_allclose(stderr[selected], fit.stderr[selected], rtol=1e-12)
    design = np.sqrt(oracle.variance(N, np.clip(fit.estimate / N, 0, 1)))
    assert not np.allclose(stderr[selected], design[selected], rtol=1e-3)
    # Every candidate is identifiable here: least squares, so decoys keep their unbiased
    # estimate, of either sign, and are reported as not significant rather than as zero.
    assert fit.least_squares and fit.selected.all()
    decoys = np.flatnonzero(~fit.significant)
    assert decoys.size and any(items[i]["estimate"] < 0 for i in decoys)
    z = significance_z(len(items), false_flags)
    for item in items:
        assert item["variance"] == pytest.approx(item["stderr"] ** 2)
        assert item["threshold"] == pytest.approx(z * item["stderr"])
        assert item["ci_low"] < item["estimate"] < item["ci_high"]
        # Base-Cut keeps exactly what the fit calls significant.
        assert item["consistent"] == (item["estimate"] if item["significant"] else 0.0)
    json.dumps(report, allow_nan=False)


def test_decoys_are_not_flagged_and_frequent_candidates_are(redis_client: Any) -> None:
    _, report, _ = rappor_window(redis_client, ReportOptions())
    flags = [item["significant"] for item in report["items"]]
    truly_held = [f > 0 for f in FREQUENCIES]
    # Decoys: 0.05 false flags expected over the domain (Bonferroni), so with this seed none;
    # the smallest true count, 2,000, is ~10 of the fit's stderrs above 0.
    assert flags == truly_held


def test_a_report_decoded_by_the_lasso_says_its_intervals_are_not_calibrated(
    redis_client: Any,
) -> None:
    # 12 candidates > m k / 4 = 8: the LASSO + NNLS selection (benchmarks/README.md measures
    # its stated variance 0.001-0.26 of the repetitions').
    _, report, fit = rappor_window(redis_client, ReportOptions(), k=8, m=4)
    assert fit.lasso and not fit.least_squares
    assert report["uncalibrated"] == UNCALIBRATED
    document: Any = {"campaign": "c", "window": report["window"], "built_at": "",
                     "reports": [report]}  # fmt: skip
    assert escape(UNCALIBRATED) in render_html(document)
    assert UNCALIBRATED in format_window(document)


def test_more_candidates_than_the_design_separates_still_gives_a_finite_report(
    redis_client: Any,
) -> None:
    # 12 candidates > m k = 8 Bloom bits over all cohorts: least squares cannot separate them,
    # so the design variance is infinite; a candidate the LASSO leaves at 0 gets the variance
    # it would have alone, and the document stays JSON (no Infinity) that pages can draw.
    oracle, report, _ = rappor_window(redis_client, ReportOptions(), k=2, m=4)
    assert np.isinf(oracle.variance(N, None)).all()
    assert report["uncalibrated"] == UNCALIBRATED
    stderrs = [item["stderr"] for item in report["items"]]
    assert all(np.isfinite(stderrs)) and min(stderrs) > 0
    document: Any = {"campaign": "c", "window": report["window"], "built_at": "",
                     "reports": [report]}  # fmt: skip
    json.dumps(document, allow_nan=False)
    assert "<svg" in render_html(document)
