"""Full RAPPOR: parameters and privacy, the client's permanent and instantaneous responses,
per-bit and per-candidate estimates within their standard errors, detection, wire, vectors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from contract_checks import Z_LIMIT, event_z
from scipy import stats

from ldptel.analysis.audit import exact_audit
from ldptel.client.errors import ParameterError, ReportError
from ldptel.client.oracles.rappor import Rappor, RapporClient, one_report_epsilon

VECTORS = Path(__file__).parents[2] / "vectors" / "rappor.json"
GOOGLE = {"k": 16, "h": 2, "m": 64, "f": 0.5, "p": 0.5, "q": 0.75}
GOOGLE_EPSILON = 2 * math.log(0.6875 * 0.4375 / (0.5625 * 0.3125))


def google(domain_size: int = 20, **changes: object) -> Rappor:
    params = {**GOOGLE, **changes}
    return Rappor(epsilon=GOOGLE_EPSILON, domain_size=domain_size, **params)  # type: ignore[arg-type]


def simulate(
    oracle: Rappor, counts: np.ndarray, seed: int
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    values = np.repeat(np.arange(counts.size), counts)
    rng.shuffle(values)
    return oracle.perturb_batch(values, rng), values


# -- parameters and privacy -----------------------------------------------------------------


def test_google_defaults_and_their_epsilons() -> None:
    oracle = google()
    assert (oracle.p_star, oracle.q_star) == (0.5625, 0.6875)
    assert oracle.epsilon == pytest.approx(GOOGLE_EPSILON)  # 1.0743
    assert oracle.permanent_epsilon == pytest.approx(4 * math.log(3))  # 2h ln((1-f/2)/(f/2))
    assert oracle.support_size == 64 * 16 + 64


@pytest.mark.parametrize("epsilon", [0.3, 1.0, GOOGLE_EPSILON, 2.0])
def test_f_is_set_from_the_requested_epsilon(epsilon: float) -> None:
    oracle = Rappor(epsilon=epsilon, domain_size=8)
    assert oracle.epsilon == pytest.approx(epsilon, rel=1e-8)
    assert oracle.epsilon <= epsilon
    assert oracle.permanent_epsilon > oracle.epsilon


def test_an_unreachable_epsilon_gives_less_not_more() -> None:
    oracle = Rappor(epsilon=5.0, domain_size=8)
    assert oracle.epsilon < 5.0
    assert oracle.f == 1 / 32


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"k": 0}, "k"),
        ({"h": 17}, "h"),
        ({"m": 0}, "m"),
        ({"f": 1.0}, "f"),
        ({"f": -0.1}, "f"),
        ({"p": 0.8}, "q"),  # p must stay below q
        ({"q": 1.5}, "q"),
        ({"p": "0.5"}, "p"),
        ({"f": 0.1}, "epsilon"),  # 1.84 per report > the requested 1.07
        ({"labels": ["a"] * 20}, "labels"),
        ({"labels": ["a", "b"]}, "labels"),
    ],
)
def test_parameters_are_validated(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ParameterError, match=field):
        google(**changes)


def test_exact_audit_measures_the_one_report_epsilon() -> None:
    oracle = google(domain_size=6)
    assert oracle.audit_probabilities(0, 5).sum() == pytest.approx(1.0)
    # Some cohort gives a pair disjoint filters of h bits each: the bound is reached.
    assert exact_audit(oracle).epsilon == pytest.approx(oracle.epsilon, rel=1e-9)


def test_audit_events_agree_with_their_exact_probabilities() -> None:
    oracle = google(domain_size=6)
    for v, w in [(1, 4), (4, 1)]:
        z = event_z(oracle, v, w, 60_000, np.random.default_rng(31))
        assert np.max(np.abs(z)) < Z_LIMIT, z


def test_the_audit_event_check_catches_a_prr_that_ignores_f() -> None:
    class NoPermanentNoise(Rappor):
        def perturb_cohorts(self, values, cohorts, rng):  # type: ignore[no-untyped-def]
            bloom = self.bloom_bits(np.asarray(cohorts), np.asarray(values))
            return {
                "cohort": np.asarray(cohorts, np.uint32),
                "bits": np.packbits(self.irr(bloom, rng), axis=1),
            }

    oracle = NoPermanentNoise(epsilon=GOOGLE_EPSILON, domain_size=6, **GOOGLE)  # type: ignore[arg-type]
    z = event_z(oracle, 1, 4, 60_000, np.random.default_rng(31))
    assert np.max(np.abs(z)) > Z_LIMIT


# -- the client -----------------------------------------------------------------------------


def test_the_permanent_response_is_memoized_by_the_secret() -> None:
    oracle = google()
    client = RapporClient(oracle, b"s" * 32, cohort=5)
    assert np.array_equal(client.prr(3), client.prr(3))
    others = [RapporClient(oracle, bytes([i]) * 32, 5).prr(3) for i in range(20)]
    assert len({row.tobytes() for row in others}) > 10


def test_permanent_bits_follow_f() -> None:
    # Over many secrets: a Bloom bit 1 stays 1 w.p. 1 - f/2, a 0 becomes 1 w.p. f/2.
    oracle = google(f=0.5)
    value, cohort = 7, 2
    bloom = oracle.bloom_bits(np.array([cohort]), np.array([value]))[0].astype(bool)
    rows = np.array(
        [RapporClient(oracle, i.to_bytes(16, "big"), cohort).prr(value) for i in range(4000)]
    )
    for bits, prob in ((rows[:, bloom], 1 - 0.25), (rows[:, ~bloom], 0.25)):
        z = (bits.mean() - prob) / math.sqrt(prob * (1 - prob) / bits.size)
        assert abs(z) < Z_LIMIT


def test_reports_are_fresh_and_decode() -> None:
    oracle = google()
    client = oracle.client(b"k" * 16, cohort=9)
    reports = [client.report(4) for _ in range(30)]
    assert len({r["bits"] for r in reports}) > 1
    assert {r["cohort"] for r in reports} == {9}
    assert np.all(oracle.decode(reports)["cohort"] == 9)


def test_client_state_is_validated() -> None:
    oracle = google()
    with pytest.raises(ParameterError, match="secret"):
        RapporClient(oracle, b"short", 0)
    with pytest.raises(ParameterError, match="cohort"):
        RapporClient(oracle, b"s" * 16, 64)
    with pytest.raises(ParameterError, match="value"):
        RapporClient(oracle, b"s" * 16, 0).report(20)
    assert 0 <= RapporClient.create(oracle).cohort < 64


class NoFloats(np.random.Generator):
    """A generator that refuses to draw floats: the client's laws are exact integer draws."""

    def random(self, *args: object, **kwargs: object) -> np.ndarray:  # type: ignore[override]
        raise AssertionError("a float was sampled")


def test_no_float_is_sampled_on_the_client_or_in_simulations() -> None:
    oracle = google()
    rng = NoFloats(np.random.PCG64(1))
    client = RapporClient(oracle, b"s" * 32, cohort=3)
    assert {client.report(2, rng)["cohort"] for _ in range(5)} == {3}
    assert oracle.perturb_batch(np.arange(20), rng)["bits"].shape[0] == 20


def test_instantaneous_bits_are_one_with_q_if_set_and_p_if_not() -> None:
    oracle = Rappor(epsilon=10.0, domain_size=20, **{**GOOGLE, "p": 0.25, "q": 0.875})  # type: ignore[arg-type]
    prr = np.tile(np.array([1, 0], dtype=np.uint8), (20_000, 8))
    irr = oracle.irr(prr, np.random.default_rng(2))
    for bits, prob in ((irr[prr == 1], 0.875), (irr[prr == 0], 0.25)):
        z = (bits.mean() - prob) / math.sqrt(prob * (1 - prob) / bits.size)
        assert abs(z) < Z_LIMIT


# -- estimates ------------------------------------------------------------------------------

COUNTS = np.array([60_000, 40_000, 25_000, 15_000, 10_000, 8_000] + [0] * 14)


def test_per_bit_estimates_are_unbiased_within_their_standard_errors() -> None:
    oracle = google()
    batch, values = simulate(oracle, COUNTS, seed=41)
    counts, variances, reports = oracle.bit_estimates(oracle.support(batch))
    # The true number of reports with each (cohort, bit) set, for the cohorts drawn.
    bloom = oracle.bloom_bits(batch["cohort"].astype(np.int64), values)
    truth = np.zeros((oracle.m, oracle.k))
    np.add.at(truth, batch["cohort"].astype(np.int64), bloom)
    z = (counts - truth) / np.sqrt(variances)
    limit = stats.norm.isf(1e-3 / (2 * z.size))  # Bonferroni over the m * k cells
    assert np.max(np.abs(z)) < limit
    assert reports.sum() == values.size


def test_the_per_bit_check_catches_estimates_that_ignore_the_prr() -> None:
    oracle = google()
    batch, values = simulate(oracle, COUNTS, seed=41)
    oracle.p_star, oracle.q_star = oracle.p, oracle.q  # IRR-only probabilities: wrong
    counts, variances, _ = oracle.bit_estimates(oracle.support(batch))
    bloom = oracle.bloom_bits(batch["cohort"].astype(np.int64), values)
    truth = np.zeros((oracle.m, oracle.k))
    np.add.at(truth, batch["cohort"].astype(np.int64), bloom)
    z = (counts - truth) / np.sqrt(variances)
    assert np.max(np.abs(z)) > stats.norm.isf(1e-3 / (2 * z.size))


def test_candidates_are_estimated_within_their_standard_errors_and_detected() -> None:
    oracle = google()
    batch, _ = simulate(oracle, COUNTS, seed=42)
    fit = oracle.fit(oracle.support(batch))
    true = COUNTS > 0
    assert fit.selected[true].all() and fit.significant[true].all()
    z = (fit.estimate[true] - COUNTS[true]) / fit.stderr[true]
    assert np.max(np.abs(z)) < Z_LIMIT, z
    assert fit.significant[~true].sum() <= 1  # alpha = 0.05 family-wise
    assert np.array_equal(oracle.estimate(oracle.support(batch), int(COUNTS.sum())), fit.estimate)


def test_standard_errors_are_close_to_the_design_variance() -> None:
    oracle = google()
    batch, _ = simulate(oracle, COUNTS, seed=43)
    fit = oracle.fit(oracle.support(batch))
    n = int(COUNTS.sum())
    approx = np.sqrt(oracle.variance(n, COUNTS / n))
    assert fit.least_squares and fit.selected.all() and np.all(np.isfinite(approx))
    # Both are the least-squares covariance: the fit's from the data (observed cohort sizes,
    # plug-in bit variances), the design's from N_c = n / m and the true frequencies.
    np.testing.assert_allclose(fit.stderr, approx, rtol=0.05)
    assert np.all(oracle.variance(n)[:3] > 0)
    assert np.all(np.isinf(google(domain_size=2000).variance(n)))


@pytest.mark.parametrize(("k", "h", "m", "epsilon"), [(8, 2, 16, 1.0743), (16, 1, 8, 2.0)])
def test_stated_stderr_is_the_repetition_spread_and_intervals_cover(
    k: int, h: int, m: int, epsilon: float
) -> None:
    oracle = Rappor(epsilon=epsilon, domain_size=8, k=k, h=h, m=m)
    counts = np.array([6_000, 3_000, 1_000, 500, 0, 0, 0, 0])
    values = np.repeat(np.arange(8), counts)
    rng = np.random.default_rng(47)
    repetitions = 300
    fits = [
        oracle.fit(oracle.support(oracle.perturb_batch(values, rng))) for _ in range(repetitions)
    ]
    estimates = np.array([fit.estimate for fit in fits])
    stated = np.mean([fit.stderr**2 for fit in fits], axis=0)
    assert all(fit.least_squares for fit in fits)
    # Per candidate, (R - 1) s^2 / sigma^2 is chi^2(R - 1): a Bonferroni band over the 8.
    ratio = estimates.var(axis=0, ddof=1) / stated
    low, high = stats.chi2.ppf([1e-3 / 16, 1 - 1e-3 / 16], repetitions - 1) / (repetitions - 1)
    assert np.all((low < ratio) & (ratio < high)), ratio
    # Coverage of the 95% intervals: Binomial(R d, 0.95) (intervals of one repetition are
    # correlated, so the band is widened by sqrt(d)).
    covered = np.abs(estimates - counts) <= stats.norm.isf(0.025) * np.sqrt(
        [fit.stderr**2 for fit in fits]
    )
    spread = np.sqrt(0.95 * 0.05 / covered.size * counts.size)
    assert abs(covered.mean() - 0.95) < 4 * spread, covered.mean()


def test_many_candidates_go_through_the_lasso_without_crashing() -> None:
    oracle = google(domain_size=2000)
    counts = np.zeros(2000, dtype=np.int64)
    counts[[3, 500, 1999]] = [40_000, 30_000, 20_000]
    batch, _ = simulate(oracle, counts, seed=44)
    fit = oracle.fit(oracle.support(batch))
    assert fit.lasso
    assert fit.significant[[3, 500, 1999]].all()
    assert fit.significant.sum() <= 5


def test_nothing_to_select_is_not_a_crash() -> None:
    oracle = google(domain_size=1500)
    empty = oracle.fit(np.zeros(oracle.support_size, dtype=np.int64))
    assert not empty.selected.any() and not empty.significant.any()
    assert np.all(empty.estimate == 0) and np.all(np.isnan(empty.stderr))
    batch, _ = simulate(oracle, np.r_[np.full(1500, 1)], seed=45)  # one report each: noise
    fit = oracle.fit(oracle.support(batch))
    assert not fit.significant.any()
    assert np.all(np.isfinite(fit.estimate))


# -- wire -----------------------------------------------------------------------------------


def test_wire_and_storage_round_trip() -> None:
    oracle = google()
    batch, _ = simulate(oracle, COUNTS // 1000, seed=46)
    decoded = oracle.decode(oracle.encode(batch))
    for name in ("cohort", "bits"):
        assert np.array_equal(decoded[name], batch[name])
    unpacked = oracle.unpack(oracle.pack(decoded), len(decoded["cohort"]))
    assert np.array_equal(unpacked["bits"], batch["bits"])


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ("x", "report"),
        ({"bits": "AAA="}, "cohort"),
        ({"cohort": 1}, "bits"),
        ({"cohort": True, "bits": "AAA="}, "cohort"),
        ({"cohort": 64, "bits": "AAA="}, "cohort"),
        ({"cohort": -1, "bits": "AAA="}, "cohort"),
        ({"cohort": 1, "bits": "AAAA"}, "bits"),
        ({"cohort": 1, "bits": "AA=="}, "bits"),
        ({"cohort": 1, "bits": 12}, "bits"),
    ],
)
def test_malformed_reports_are_rejected(report: object, field: str) -> None:
    with pytest.raises(ReportError, match=rf"reports\[0\]\.{field}"):
        google().decode([report])


def test_vectors() -> None:
    document = json.loads(VECTORS.read_text())
    params = document["params"]
    oracle = Rappor(
        epsilon=one_report_epsilon(params["h"], params["f"], params["p"], params["q"]),
        domain_size=len(document["labels"]),
        labels=document["labels"],
        **params,
    )
    for case in document["cases"]:
        value = document["labels"].index(case["value"])
        assert sorted(set(oracle.bloom[case["cohort"], value].tolist())) == case["bloom_bits"]
        client = RapporClient(oracle, bytes.fromhex(case["secret_hex"]), case["cohort"])
        assert client.prr_coins(case["value"]).tolist() == case["prr_coins"]
        assert client.prr(value).tolist() == case["prr"]
        irr = np.array([case["irr"]], dtype=np.uint8)
        encoded = oracle.encode(
            {"cohort": np.array([case["cohort"]], np.uint32), "bits": np.packbits(irr, axis=1)}
        )
        assert encoded == [case["report"]]


def test_nnls_is_lawson_hanson_as_scipy_computes_it() -> None:
    # The decode needs no scipy (docs/protocol.md); its NNLS must give scipy's answer.
    from scipy.optimize import nnls as scipy_nnls

    from ldptel.client.oracles.rappor_decode import nnls

    rng = np.random.default_rng(7)
    for _ in range(200):
        rows = int(rng.integers(4, 60))
        matrix = rng.normal(size=(rows, int(rng.integers(1, rows + 1))))
        target = rng.normal(size=rows)
        ours = nnls(matrix, target, maxiter=50 * matrix.shape[1])
        assert (ours >= 0).all()
        np.testing.assert_allclose(ours, scipy_nnls(matrix, target)[0], atol=1e-9)
