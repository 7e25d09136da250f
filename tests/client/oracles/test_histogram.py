"""Histogram encoding's shared parts: the integer noise table and its exact sampler, the
privacy of the report law actually sampled, the wire form and the audit events."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from contract_checks import Z_LIMIT, event_z
from numpy.typing import NDArray
from scipy import stats

from ldptel.analysis.audit import exact_audit, sampled_audit
from ldptel.client.errors import ParameterError, ReportError
from ldptel.client.oracles import make_oracle
from ldptel.client.oracles.histogram import (
    CHUNK_VALUES,
    MAX_RESOLUTION,
    GridNoise,
    HistogramEncoding,
    grid_noise,
)
from ldptel.client.oracles.she import SummationHistogramEncoding
from ldptel.client.randomness import SecureRandom
from ldptel.client.samplers import GUIDE_BLOCKS, TableSampler

#: (epsilon, resolution): typical, coarse, fine, tiny epsilon (clamped hard), huge epsilon.
LAWS = [(1.0, 64), (4.0, 64), (1.0, 1), (0.5, 7), (0.05, 256), (0.002, 64), (300.0, 64)]


def discrete_laplace_variance(a: float) -> float:
    return 2 * a / (1 - a) ** 2


class ScriptedRng:
    """An Rng whose integer draws are scripted: `answers(high, size)` per call, in order."""

    def __init__(self, *answers: Callable[[int, int], NDArray[np.uint64]]) -> None:
        self.answers = list(answers)
        self.calls: list[int] = []

    def random(self, size: int | tuple[int, ...]) -> NDArray[np.float64]:
        raise AssertionError("the grid sampler draws no floats")

    def integers(
        self, low: int, high: int, size: int | tuple[int, ...], dtype: type = np.int64
    ) -> NDArray[Any]:
        assert low == 0
        self.calls.append(high)
        return self.answers.pop(0)(high, int(np.prod(size))).astype(dtype).reshape(size)


def highest(high: int, size: int) -> NDArray[np.uint64]:
    return np.full(size, high - 1, dtype=np.uint64)


def lowest(high: int, size: int) -> NDArray[np.uint64]:
    return np.zeros(size, dtype=np.uint64)


# -- the table -------------------------------------------------------------------------------
@pytest.mark.parametrize(("eps", "R"), LAWS)
def test_every_table_step_decays_by_at_most_one_over_a(eps: float, R: int) -> None:
    noise = grid_noise(eps, R)
    num, den = noise.a.as_integer_ratio()
    half = [int(w) for w in noise.weights[noise.half_width :]]
    assert noise.weights.tolist() == noise.weights[::-1].tolist()  # symmetric
    assert noise.a >= math.exp(-eps / (2 * R))
    for j in range(len(half) - 2):
        assert half[j + 1] <= half[j] and half[j + 1] * den >= half[j] * num, j
    # The end cell holds at least the geometric tail W(L-1) a / (1 - a).
    assert half[-1] * (den - num) >= half[-2] * num
    assert noise.total < 2**62 and noise.clamp == noise.half_width - R and noise.clamp > R


@pytest.mark.parametrize(("eps", "R"), LAWS)
def test_the_report_law_actually_sampled_is_epsilon_ldp(eps: float, R: int) -> None:
    # Max over outputs of |ln P(z | R) / P(z | 0)|, twice (two coordinates change).
    noise = grid_noise(eps, R)
    assert np.all(noise.masses[0] > 0) and np.all(noise.masses[R] > 0)
    assert noise.masses[0].sum() == noise.masses[R].sum() == noise.total
    assert noise.epsilon <= eps * (1 + 1e-12)


@pytest.mark.parametrize(("eps", "R"), [(0.5, 64), (1.0, 64), (4.0, 64), (1.0, 1), (8.0, 16)])
def test_the_guarantee_is_tight_where_the_table_is_a_discrete_laplace(eps: float, R: int) -> None:
    assert grid_noise(eps, R).epsilon == pytest.approx(eps, rel=1e-9)


def test_a_huge_epsilon_claims_only_what_the_table_delivers() -> None:
    # e^(-eps/2R) underflows the table's integer weights: the tails go flat, more private.
    noise = grid_noise(300.0, 64)
    assert 10 < noise.epsilon < 300


@pytest.mark.parametrize(("eps", "R"), [(1.0, 64), (4.0, 64), (0.5, 7), (1.0, 1)])
def test_the_table_law_is_a_discrete_laplace_up_to_its_far_tail(eps: float, R: int) -> None:
    noise = grid_noise(eps, R)
    a = noise.a
    # Exact moments of a reported coordinate vs Var = 2a/(1-a)^2 of the untruncated law.
    assert noise.mean(0) == pytest.approx(0, abs=1e-9)
    assert noise.mean(R) == pytest.approx(R, rel=1e-8)
    assert noise.variance(0) == pytest.approx(discrete_laplace_variance(a), rel=1e-7)
    assert noise.variance(R) == pytest.approx(discrete_laplace_variance(a), rel=1e-7)
    # P(k + 1) / P(k) = a wherever the weights are large (ceil rounding is then negligible).
    half = noise.weights[noise.half_width :].astype(np.float64)
    half = half[half > 2.0**40]
    assert half.size > 10 and np.allclose(half[1:] / half[:-1], a, rtol=1e-9)


def test_parameters_are_validated() -> None:
    for bad in (0, -1, MAX_RESOLUTION + 1, 2.5, True, "64"):
        with pytest.raises(ParameterError, match="resolution"):
            SummationHistogramEncoding(epsilon=1.0, domain_size=8, resolution=bad)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="epsilon"):
        grid_noise(1e-300, 64)


# -- the sampler -----------------------------------------------------------------------------
def cell_of(cdf: NDArray[np.int64], u: NDArray[np.int64]) -> NDArray[np.intp]:
    """The reference inversion: u is in cell i iff cdf[i-1] <= u < cdf[i]."""
    return np.searchsorted(cdf, u, side="right")


def words_for(low: NDArray[np.int64], shift: int) -> Callable[[int, int], NDArray[np.uint64]]:
    """Scripted 64-bit words whose top `shift` bits are `low` (the sampler's low part)."""
    return lambda high, size: low.astype(np.uint64) << np.uint64(64 - shift)


@pytest.mark.parametrize(("eps", "R"), [(1.0, 64), (0.002, 64), (4.0, 2), (1.0, 1), (300.0, 64)])
def test_the_sampler_inverts_the_cdf_exactly_at_every_cell_and_block_boundary(
    eps: float, R: int
) -> None:
    # Both stages, at both sides of every cell boundary and at both ends of every block:
    # a block the guide resolves holds one value from end to end (so everywhere, the
    # inversion being monotone); the low-part stage finds the exact cell of any u.
    noise = grid_noise(eps, R)
    for sampler in [noise._noise_sampler, *noise._report_samplers.values()]:
        cdf, block, shift = sampler.cdf, sampler.block, sampler.shift
        assert block == 2**45 and noise.total <= GUIDE_BLOCKS * block < noise.total * (1 + 2**-19)
        starts = np.arange(GUIDE_BLOCKS, dtype=np.int64) * block
        ends = np.minimum(starts + block - 1, noise.total - 1)
        resolved = sampler.guide != sampler.unresolved
        assert resolved.any() and not resolved[-1]  # the last block may reject
        for edge in (starts, ends):
            truth = sampler.values[cell_of(cdf, edge)]
            assert np.array_equal(sampler.guide[resolved], truth[resolved])
        u = np.unique(np.concatenate((starts, ends, cdf[:-1] - 1, cdf[:-1], [noise.total - 1])))
        u = u[~resolved[u >> shift]]
        got = sampler._finish(ScriptedRng(words_for(u & (block - 1), shift)), u >> shift)
        assert np.array_equal(got, sampler.values[cell_of(cdf, u)])


def test_a_draw_past_the_total_is_rejected_and_drawn_afresh() -> None:
    # total = 2^32 + 1: blocks of B = 2^17, the upper half of the 2^16 lies past the total.
    cdf = np.array([2**31, 2**32 + 1], dtype=np.int64)
    sampler = TableSampler(cdf, np.array([7, 9], dtype=np.int8))
    assert sampler.block == 2**17 and sampler.dtype == np.int8
    assert sampler.guide[: 2**14].tolist() == [7] * 2**14
    assert (sampler.guide[2**15 :] == sampler.unresolved).all()
    # Top bits 0x8000 (block 2^15; a word holds four), low part 0: u = 2^32 < total, kept.
    block_2_15 = np.uint64(0x8000_8000_8000_8000)
    kept = ScriptedRng(lambda high, size: np.full(size, block_2_15), lowest)
    out = np.empty(3, dtype=np.int8)
    sampler.sample(kept, out)
    assert out.tolist() == [9, 9, 9] and kept.calls == [2**64, 2**64]
    # Low part 1: u = 2^32 + 1 >= total, rejected; the fresh draw (top bits 0) lands in
    # block 0, which the guide resolves to cell 0.
    rejected = ScriptedRng(
        lambda high, size: np.full(size, block_2_15), words_for(np.ones(3, np.int64), 17), lowest
    )
    sampler.sample(rejected, out)
    assert out.tolist() == [7, 7, 7] and rejected.calls == [2**64, 2**64, 2**64]
    # It fills the array it is given, of its type, so a strided view (a copy once flattened)
    # or another integer type is refused.
    with pytest.raises(ValueError, match="contiguous"):
        sampler.sample(kept, np.empty((2, 4), dtype=np.int8)[:, ::2])
    with pytest.raises(ValueError, match="int8"):
        sampler.sample(kept, np.empty(3, dtype=np.int32))
    # Its values must lie above their type's minimum, which marks the unresolved blocks.
    with pytest.raises(ValueError, match="minimum"):
        TableSampler(cdf, np.array([-128, 9], dtype=np.int8))


def sample_law(noise: GridNoise, size: int, seed: int) -> NDArray[np.int64]:
    return noise.sample(np.random.default_rng(seed), (size,))


def pooled_chi_square(samples: NDArray[np.int64], noise: GridNoise) -> float:
    """p-value of a chi-square goodness of fit to the table, cells pooled to >= 20 expected."""
    expected = noise.weights / float(noise.total) * samples.size
    observed = np.bincount(samples + noise.half_width, minlength=expected.size)
    groups = np.cumsum(expected) // 20  # consecutive cells with ~20 expected each
    obs = np.bincount(groups.astype(np.int64), weights=observed)
    exp = np.bincount(groups.astype(np.int64), weights=expected)
    keep = exp > 0
    result = stats.chisquare(obs[keep], exp[keep] * obs.sum() / exp[keep].sum())
    return float(result.pvalue)


@pytest.mark.parametrize(("eps", "R"), [(1.0, 8), (4.0, 64), (0.5, 2)])
def test_sampled_noise_follows_the_discrete_laplace_law(eps: float, R: int) -> None:
    noise = grid_noise(eps, R)
    a, n = noise.a, 400_000
    samples = sample_law(noise, n, seed=7)
    var = discrete_laplace_variance(a)
    # Mean 0: the sample mean within 4 standard errors sqrt(Var / n).
    assert abs(samples.mean()) < Z_LIMIT * math.sqrt(var / n)
    # Variance: the sample variance within 4 standard errors sqrt((m4 - Var^2) / n), with
    # the fourth moment of the exact table law.
    m4 = float(
        np.dot(
            noise.weights / noise.total, np.arange(-noise.half_width, noise.half_width + 1) ** 4.0
        )
    )
    assert abs(samples.var() - var) < Z_LIMIT * math.sqrt((m4 - var**2) / n)
    # Tail ratio P(k+1) / P(k) = a: E|N| = 2a / (1 - a^2) identifies a; compare E|N|.
    magnitude = np.abs(samples)
    assert abs(magnitude.mean() - 2 * a / (1 - a * a)) < Z_LIMIT * magnitude.std() / math.sqrt(n)
    # The whole law, cell by cell.
    assert pooled_chi_square(samples, noise) > 1e-4


def test_the_law_checks_detect_a_slightly_wrong_sampler() -> None:
    # Noise for epsilon 1.1 checked against the law of epsilon 1: the test above would fail.
    noise, wrong = grid_noise(1.0, 8), grid_noise(1.1, 8)
    samples = sample_law(wrong, 400_000, seed=7)
    var = discrete_laplace_variance(noise.a)
    assert pooled_chi_square(samples, noise) < 1e-4
    assert abs(samples.var() - var) > Z_LIMIT * math.sqrt(2 * var**2 / samples.size)


def test_the_seeded_sampler_is_reproducible() -> None:
    noise = grid_noise(1.0, 64)
    assert np.array_equal(sample_law(noise, 1000, seed=3), sample_law(noise, 1000, seed=3))
    assert not np.array_equal(sample_law(noise, 1000, seed=3), sample_law(noise, 1000, seed=4))


# -- the report ------------------------------------------------------------------------------
def test_a_report_is_the_one_hot_grid_vector_plus_clamped_noise() -> None:
    oracle = SummationHistogramEncoding(epsilon=1.0, domain_size=5, resolution=64)
    values = np.array([0, 4, 2, 2], dtype=np.int64)
    z = oracle.perturb_batch(values, np.random.default_rng(1))["z"]
    # The same draws by hand: a clamp(R + noise) for each true coordinate, clamp(0 + noise)
    # everywhere, then the true coordinates replaced.
    rng = np.random.default_rng(1)
    true_coordinates = np.empty(4, dtype=np.int16)
    oracle.noise.sample_reported(rng, 64, true_coordinates)
    expected = np.empty((4, 5), dtype=np.int16)
    oracle.noise.sample_reported(rng, 0, expected)
    expected[np.arange(4), values] = true_coordinates
    assert z.dtype == np.int16 and np.array_equal(z, expected)
    with pytest.raises(ParameterError, match="values"):
        oracle.perturb_batch(np.array([5]), np.random.default_rng(1))


@pytest.mark.parametrize(
    ("eps", "R", "dtype"),
    [(1.0, 1, np.int8), (0.3, 1, np.int16), (1.0, 64, np.int16), (0.05, 64, np.int32)],
)
def test_reports_are_held_in_the_narrowest_integer_type_and_sent_as_int32(
    eps: float, R: int, dtype: type
) -> None:
    # In memory and in stream entries the values take 1, 2 or 4 bytes (M < 2^7, 2^15, else);
    # on the wire they are always little-endian int32.
    oracle = SummationHistogramEncoding(epsilon=eps, domain_size=3, resolution=R)
    assert oracle.fields[0].dtype == np.dtype(dtype).str
    batch = oracle.perturb_batch(np.array([0, 2]), np.random.default_rng(5))
    assert batch["z"].dtype == dtype
    wire = oracle.encode(batch)
    assert len(base64.b64decode(wire[0]["z"])) == 4 * 3
    decoded = oracle.decode(wire)["z"]
    assert decoded.dtype == dtype and np.array_equal(decoded, batch["z"])
    assert np.array_equal(oracle.unpack(oracle.pack(batch), 2)["z"], batch["z"])


def pooled_p_value(observed: NDArray[np.int64], probabilities: NDArray[np.float64]) -> float:
    """Chi-square goodness of fit, consecutive outputs pooled to >= 20 expected."""
    expected = probabilities * observed.sum()
    groups = (np.cumsum(expected) // 20).astype(np.int64)
    obs = np.bincount(groups, weights=observed)
    exp = np.bincount(groups, weights=expected)
    keep = exp > 0
    return float(stats.chisquare(obs[keep], exp[keep] * obs.sum() / exp[keep].sum()).pvalue)


@pytest.mark.parametrize(
    ("eps", "R"), [(1.0, 64), (4.0, 16), (0.05, 256), (20.0, 1), (1.0, 1), (0.5, 1), (1.0, 2)]
)
def test_reported_coordinates_follow_the_clamped_law_exactly_claimed(eps: float, R: int) -> None:
    # Every coordinate of a report, the true one (law of x = R) and the others (x = 0),
    # against probabilities(x), which the estimators and the privacy proof use; (0.05, 256)
    # puts mass on the clamped ends +-M, (20, 1) is the largest epsilon, whose far cells
    # bottom out at weight 1.
    oracle = SummationHistogramEncoding(epsilon=eps, domain_size=4, resolution=R)
    values = np.repeat(np.arange(4), 50_000)
    z = oracle.perturb_batch(values, np.random.default_rng(11))["z"].astype(np.int64)
    M = oracle.clamp
    is_true = values[:, None] == np.arange(4)
    for x, coordinates in [(R, z[is_true]), (0, z[~is_true])]:
        observed = np.bincount(coordinates + M, minlength=2 * M + 1)
        assert pooled_p_value(observed, oracle.noise.probabilities(x)) > 1e-4, x


def test_the_report_law_check_detects_a_wrong_true_coordinate() -> None:
    # The x = R law checked against the x = R/2 law (the check above would fail).
    oracle = SummationHistogramEncoding(epsilon=1.0, domain_size=4, resolution=64)
    shifted = np.empty(200_000, dtype=oracle.noise.report_dtype)
    oracle.noise.sample_reported(np.random.default_rng(11), 0, shifted)
    observed = np.bincount(shifted + 32 + oracle.clamp, minlength=2 * oracle.clamp + 1)
    assert pooled_p_value(observed, oracle.noise.probabilities(64)) < 1e-4


def test_big_batches_are_drawn_in_chunks() -> None:
    # epsilon 8: noise sd ~23 grid units, so 100 rows' mean of z_0 is R = 64 +- ~2.3.
    oracle = SummationHistogramEncoding(epsilon=8.0, domain_size=1000, resolution=64)
    n = 3 * CHUNK_VALUES // 1000 + 7
    z = oracle.perturb_batch(np.zeros(n, dtype=np.int64), np.random.default_rng(2))["z"]
    assert z.shape == (n, 1000)
    assert np.all(np.abs(z) <= oracle.clamp)
    # Item 0 carries R in every row, in every chunk (the last one partial).
    for rows in (z[:100], z[n // 2 : n // 2 + 100], z[-100:]):
        assert rows[:, 0].mean() > 40 > abs(rows[:, 1:].mean())


def test_the_os_csprng_drives_the_client_by_default() -> None:
    oracle = SummationHistogramEncoding(epsilon=2.0, domain_size=6)
    report = oracle.perturb(3)
    z = oracle.decode([report])["z"]
    assert z.shape == (1, 6)
    batch = oracle.perturb_batch(np.arange(6), SecureRandom())
    assert np.all(np.abs(batch["z"]) <= oracle.clamp)


# -- the wire --------------------------------------------------------------------------------
def encoded(values: list[int]) -> str:
    return base64.b64encode(np.array(values, dtype="<i4").tobytes()).decode("ascii")


def test_wire_and_storage_round_trips() -> None:
    oracle = SummationHistogramEncoding(epsilon=1.0, domain_size=7)
    batch = oracle.perturb_batch(np.arange(7).repeat(3), np.random.default_rng(4))
    wire = oracle.encode(batch)
    assert set(wire[0]) == {"z"} and len(wire[0]["z"]) == 4 * math.ceil(28 / 3)
    decoded = oracle.decode(wire)
    assert np.array_equal(decoded["z"], batch["z"])
    stored = oracle.unpack(oracle.pack(decoded), len(wire))
    assert np.array_equal(stored["z"], batch["z"])
    assert oracle.decode([])["z"].shape == (0, 7)


CLAMP = grid_noise(1.0, 64).clamp
INT32_MIN = -(2**31)


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ("not an object", "report"),
        ({}, "z"),
        ({"z": None}, "z"),
        ({"z": 7}, "z"),
        ({"z": float("nan")}, "z"),
        ({"z": 1.5}, "z"),
        ({"z": [0, 64, 0, 0]}, "z"),  # a JSON list is not the wire form
        ({"z": "!!!!!!!!"}, "z"),  # not base64
        ({"z": "AAAAAAAAAAAAAAAAAAAAAAA="}, "z"),  # 24 characters, but 17 bytes
        ({"z": encoded([0, 64, 0])}, "z"),  # 3 values
        ({"z": encoded([0, 64, 0, 0, 0])}, "z"),  # 5 values
        ({"z": encoded([0, 64, 0, 0])[:-3] + "B=="}, "z"),  # non-zero padding bits
        ({"z": encoded([0, CLAMP + 1, 0, 0])}, "z"),
        ({"z": encoded([-CLAMP - 1, 0, 0, 0])}, "z"),
        ({"z": encoded([0, 0, 0, INT32_MIN])}, "z"),
        ({"z": "ÀÀÀÀÀÀÀÀÀÀÀÀÀÀÀÀÀÀÀÀÀÀÀÀ"}, "z"),  # 24 non-ASCII characters
        ({"z": encoded([-CLAMP, CLAMP, 0, -1])}, None),  # valid: the extremes are allowed
    ],
)
def test_malformed_reports_are_rejected_naming_the_field(report: Any, field: str | None) -> None:
    oracle = SummationHistogramEncoding(epsilon=1.0, domain_size=4, resolution=64)
    if field is None:
        assert oracle.decode([report])["z"].tolist() == [[-CLAMP, CLAMP, 0, -1]]
        return
    with pytest.raises(ReportError, match=rf"reports\[1\]\.{field}"):
        oracle.decode([{"z": encoded([0, 0, 0, 0])}, report])


def test_a_batch_must_be_a_list() -> None:
    with pytest.raises(ReportError, match="reports"):
        SummationHistogramEncoding(epsilon=1.0, domain_size=4).decode({"z": encoded([0] * 4)})


# -- the audit -------------------------------------------------------------------------------
class OverSharing(SummationHistogramEncoding):
    """Draws the noise of 2 epsilon but claims epsilon: half the noise it should add."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.noise = grid_noise(2 * self.requested_epsilon, self.resolution)

    @property
    def epsilon(self) -> float:
        return self.requested_epsilon


@pytest.mark.parametrize(("eps", "R"), [(1.0, 64), (3.0, 4)])
def test_the_exact_audit_measures_the_claimed_epsilon(eps: float, R: int) -> None:
    oracle = SummationHistogramEncoding(epsilon=eps, domain_size=5, resolution=R)
    for v, w in [(0, 1), (3, 2)]:
        assert oracle.audit_probabilities(v, w).sum() == pytest.approx(1.0)
        # Swapping the pair keeps the events; only the true input changes.
        batch = oracle.perturb_batch(np.arange(5), np.random.default_rng(0))
        assert np.array_equal(oracle.audit_events(batch, v, w), oracle.audit_events(batch, w, v))
    assert exact_audit(oracle).epsilon == pytest.approx(eps, rel=1e-9)


def test_audit_events_agree_with_their_exact_probabilities() -> None:
    oracle = SummationHistogramEncoding(epsilon=1.0, domain_size=6, resolution=16)
    for v, w in [(1, 4), (4, 1)]:
        z = event_z(oracle, v, w, 100_000, np.random.default_rng(5))
        assert np.max(np.abs(z)) < Z_LIMIT, z


def test_audits_catch_an_oversharing_oracle() -> None:
    oracle = OverSharing(epsilon=1.0, domain_size=4, resolution=8)
    assert exact_audit(oracle).epsilon == pytest.approx(2.0, rel=1e-6)
    sampled = sampled_audit(oracle, np.random.default_rng(6), samples=100_000, pairs=1)
    assert sampled.lower_bound > oracle.epsilon


def test_histogram_encoding_is_abstract_about_counting() -> None:
    assert HistogramEncoding.__abstractmethods__ >= {"support", "estimate", "variance"}


# -- test vectors (she.json, the.json; the oracle-specific parts in test_she/test_the) ------
VECTORS = Path(__file__).parents[2] / "vectors"


@pytest.mark.parametrize("name", ["she", "the"])
def test_vectors_noise_tables_and_malformed_reports(name: str) -> None:
    data = json.loads((VECTORS / f"{name}.json").read_text())
    for case in data["cases"]:
        oracle = make_oracle(
            name,
            epsilon=case["epsilon"],
            domain_size=case["domain_size"],
            resolution=case["resolution"],
        )
        assert isinstance(oracle, HistogramEncoding)
        assert oracle.decode([case["report"]])["z"].tolist() == [case["z"]]
        facts = case.get("noise")
        if facts is None:
            continue
        noise = oracle.noise
        half = [str(w) for w in noise.weights[noise.half_width :].tolist()]
        assert noise.a == float.fromhex(facts["a_hex"]) == facts["a"]
        assert (noise.clamp, noise.half_width) == (facts["clamp"], facts["half_width"])
        assert str(noise.total) == facts["total"]
        assert half[:4] == facts["weights_from_0"]
        assert half[-2:] == [facts["weight_last_cell"], facts["weight_tail_cell"]]
        assert noise.epsilon == pytest.approx(facts["epsilon_guaranteed"], rel=1e-12)
        # The config serves the table; built from it alone, the law is the same.
        assert oracle.derived_params()["noise"] == facts["served"]
        served = make_oracle(
            name,
            epsilon=case["epsilon"],
            domain_size=case["domain_size"],
            resolution=case["resolution"],
            noise=facts["served"],
        )
        assert isinstance(served, HistogramEncoding)
        assert np.array_equal(served.noise.weights, noise.weights)
    bad = data["malformed"]
    oracle = make_oracle(
        name, epsilon=bad["epsilon"], domain_size=bad["domain_size"], resolution=bad["resolution"]
    )
    for case in bad["cases"]:
        if case["field"] is None:
            oracle.decode([case["report"]])
            continue
        with pytest.raises(ReportError, match=rf"reports\[0\]\.{case['field']}"):
            oracle.decode([case["report"]])
