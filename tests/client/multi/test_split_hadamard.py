"""The `split` and `hadamard` breakdowns: every one-way and two-way cell unbiased with its
stated exact variance, one report's exact privacy loss (checked against a brute force over
every report and every pair of rows), and the wire path (decode, pack, unpack, support)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from ldptel.analysis.breakdown import audit_breakdown, simulated_rows
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError, ReportError
from ldptel.client.multi import (
    BREAKDOWNS,
    Attributes,
    HadamardBreakdown,
    SplitBreakdown,
    choose_breakdown,
)
from ldptel.client.multi.hadamard import parity
from ldptel.client.multi.wire_flat import breakdown_reports

CAMPAIGN = Attributes.of_sizes({"os": 4, "plan": 3, "country": 5})
#: 12 values at epsilon 1/2 take OUE (12 >= 3 e^0.5 + 2), 3 values k-RR.
MIXED = Attributes.of_sizes({"app": 12, "tier": 3})
ATTRIBUTES = {"os": ["android", "ios"], "plan": ["free", "pro", "team"], "country": ["de", "fr"]}
REPEATS = 300
# As tests/client/multi/test_breakdowns.py: the mean of R unbiased estimates is within 4.5
# of its stderr but with probability ~7e-6 a cell; the sample variance of R near-normal
# estimates is Var * chi2(R-1)/(R-1), sd sqrt(2/(R-1)) = 0.08: 6 sd either side.
MEAN_Z = 4.5
VARIANCE_RATIO = (1 - 6 * math.sqrt(2 / (REPEATS - 1)), 1 + 6 * math.sqrt(2 / (REPEATS - 1)))


def _true_marginal(attributes: Attributes, rows: np.ndarray, which: tuple[int, ...]) -> np.ndarray:
    joint = np.bincount(attributes.joint_index(rows), minlength=attributes.joint_size)
    axes = tuple(a for a in range(len(attributes.sizes)) if a not in which)
    return joint.reshape(attributes.sizes).sum(axis=axes).reshape(-1)


@pytest.mark.parametrize(
    ("name", "attributes", "epsilon", "which"),
    [
        ("split", CAMPAIGN, 2.0, (0, 2)),  # k-RR per attribute at 2/3
        ("split", CAMPAIGN, 0.5, (1,)),
        ("split", MIXED, 1.0, (0, 1)),  # OUE x k-RR
        ("split", MIXED, 1.0, (0,)),
        ("hadamard", CAMPAIGN, 2.0, (0, 2)),  # 5 bits: 32 padded cells, 20 kept
        ("hadamard", CAMPAIGN, 1.0, (1,)),
        ("hadamard", CAMPAIGN, 4.0, (1, 2)),
        ("hadamard", MIXED, 2.0, (0, 1)),
    ],
)
def test_cells_are_unbiased_with_the_stated_exact_variance(
    name: str, attributes: Attributes, epsilon: float, which: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(29)
    rows = simulated_rows(attributes, 3000, rng)
    mechanism = BREAKDOWNS[name](epsilon=epsilon, attributes=attributes)
    truth = _true_marginal(attributes, rows, which)
    estimates = np.array(
        [
            mechanism.marginal(mechanism.state_of_rows(rows, rng), which).estimate
            for _ in range(REPEATS)
        ]
    )
    exact = mechanism.exact_variance(rows.shape[0], which, truth / rows.shape[0])
    assert np.abs(estimates.mean(axis=0) - truth).max() <= MEAN_Z * np.sqrt(exact / REPEATS).max()
    ratio = estimates.var(axis=0, ddof=1) / exact
    assert VARIANCE_RATIO[0] <= ratio.min() and ratio.max() <= VARIANCE_RATIO[1], ratio


@pytest.mark.parametrize("name", ["split", "hadamard"])
def test_stated_stderr_gives_z_scores_of_unit_mean_square(name: str) -> None:
    # mean z^2 over 40 runs x 47 two-way cells at n = 5,000 (plug-in variance at the
    # estimated frequencies): ~1 with sd ~0.05 (as test_breakdowns.py), 5 sd either side.
    rng = np.random.default_rng(11)
    mechanism = BREAKDOWNS[name](epsilon=2.0, attributes=CAMPAIGN)
    squares = []
    for _ in range(40):
        rows = simulated_rows(CAMPAIGN, 5000, rng)
        state = mechanism.state_of_rows(rows, rng)
        for which in CAMPAIGN.pairs:
            marginal = mechanism.marginal(state, which)
            z = (marginal.estimate - _true_marginal(CAMPAIGN, rows, which)) / marginal.stderr
            squares.append(z**2)
    z2 = np.concatenate(squares)
    assert 0.75 <= z2.mean() <= 1.25
    assert z2.max() < 25


@pytest.mark.parametrize("cls", [SplitBreakdown, HadamardBreakdown])
@pytest.mark.parametrize("epsilon", [0.5, 2.0, 4.0])
def test_one_reports_exact_privacy_loss_is_the_campaigns_epsilon(cls: type, epsilon: float) -> None:
    mechanism = cls(epsilon=epsilon, attributes=CAMPAIGN)
    assert audit_breakdown(mechanism) == pytest.approx(epsilon, abs=1e-9)
    assert mechanism.epsilon == pytest.approx(epsilon, abs=1e-12)


def _brute_force_loss(laws: np.ndarray) -> float:
    """max over ordered pairs of rows and every report of log P[r | x] / P[r | x']."""
    return max(
        float(np.max(np.log(laws[x] / laws[y])))
        for x, y in itertools.permutations(range(laws.shape[0]), 2)
    )


def test_split_loss_matches_every_report_of_every_pair_of_rows() -> None:
    attributes = Attributes.of_sizes({"a": 2, "b": 3})
    mechanism = SplitBreakdown(epsilon=1.5, attributes=attributes)
    rows = list(itertools.product(range(2), range(3)))
    own = [np.array([o.output_law(v) for v in range(o.domain_size)]) for o in mechanism.inners]
    laws = np.array([np.outer(own[0][a], own[1][b]).reshape(-1) for a, b in rows])
    assert _brute_force_loss(laws) == pytest.approx(audit_breakdown(mechanism), abs=1e-12)
    assert audit_breakdown(mechanism) == pytest.approx(1.5, abs=1e-12)


def test_hadamard_loss_matches_every_report_of_every_pair_of_rows() -> None:
    mechanism = HadamardBreakdown(epsilon=1.0, attributes=CAMPAIGN)
    rows = np.array(list(itertools.product(*(range(d) for d in CAMPAIGN.sizes))))
    odd = parity(mechanism.masks[None, :] & mechanism.codes(rows)[:, None])  # rows x coef
    p = mechanism.p
    laws = np.concatenate((np.where(odd == 0, p, 1 - p), np.where(odd == 1, p, 1 - p)), axis=1)
    assert _brute_force_loss(laws / mechanism.coefficients) == pytest.approx(
        audit_breakdown(mechanism), abs=1e-12
    )


@pytest.mark.parametrize("name", ["split", "hadamard"])
@pytest.mark.parametrize("attributes", [CAMPAIGN, MIXED], ids=["4x3x5", "12x3"])
def test_wire_path_gives_the_kernels_state(name: str, attributes: Attributes) -> None:
    mechanism = BREAKDOWNS[name](epsilon=1.0, attributes=attributes)
    wire = breakdown_reports(mechanism)
    rows = simulated_rows(attributes, 500, np.random.default_rng(1))
    values = attributes.joint_index(rows)
    batch = wire.decode(wire.encode(wire.perturb_batch(values, np.random.default_rng(2))))
    data = wire.pack(batch)
    assert len(data) == sum(f.nbytes(500) for f in wire.fields)
    state = wire.support(wire.unpack(data, 500))
    assert state.shape == (wire.support_size,)
    np.testing.assert_array_equal(state, mechanism.state_of_rows(rows, np.random.default_rng(2)))
    assert wire.widest_reports()[0].keys() == wire.encode(batch)[0].keys()


@pytest.mark.parametrize("name", ["split", "hadamard"])
def test_sdk_reports_estimate_the_rows(name: str) -> None:
    # 2,000 users of one row through the SDK's path (perturb of the joint index, OS CSPRNG):
    # every two-way cell within 5 stated sd of the truth (~6e-7 a cell to fail).
    mechanism = BREAKDOWNS[name](epsilon=2.0, attributes=CAMPAIGN)
    wire = breakdown_reports(mechanism)
    row = CAMPAIGN.row_of({"os": "1", "plan": "2", "country": "4"})
    value = int(CAMPAIGN.joint_index(np.array([row]))[0])
    state = wire.state([wire.perturb(value) for _ in range(2000)])
    for which in CAMPAIGN.pairs:
        truth = _true_marginal(CAMPAIGN, np.array([row] * 2000), which)
        marginal = mechanism.marginal(state, which)
        exact = mechanism.exact_variance(2000, which, truth / 2000)
        assert marginal.n == 2000
        assert np.abs(marginal.estimate - truth).max() <= 5 * np.sqrt(exact).max()


def test_bad_split_reports_are_named() -> None:
    wire = breakdown_reports(SplitBreakdown(epsilon=1.0, attributes=CAMPAIGN))
    good = wire.perturb(0)
    assert set(good) == {"os.y", "plan.y", "country.y"}
    with pytest.raises(ReportError, match=r"reports\[1\]\.plan\.y: is required"):
        wire.state([good, {k: v for k, v in good.items() if k != "plan.y"}])
    with pytest.raises(ReportError, match=r"reports\[2\]\.country\.y"):
        wire.state([good, good, {**good, "country.y": 5}])
    with pytest.raises(ReportError, match=r"reports\[0\]\.report"):
        wire.state([3])


def test_bad_hadamard_reports_are_named() -> None:
    mechanism = HadamardBreakdown(epsilon=1.0, attributes=CAMPAIGN)
    wire = breakdown_reports(mechanism)
    assert mechanism.coefficients == 64  # 3 + 3 + 7 own masks, 9 + 21 + 21 pair masks
    with pytest.raises(ReportError, match=r"reports\[1\]\.coef"):
        wire.state([{"coef": 0, "bit": 1}, {"coef": 64, "bit": 0}])
    with pytest.raises(ReportError, match=r"reports\[0\]\.bit"):
        wire.state([{"coef": 3, "bit": 2}])
    data = wire.pack(wire.decode([{"coef": 63, "bit": 1}]))
    with pytest.raises(ReportError, match="payload"):
        wire.unpack(data[:-1], 1)


@pytest.mark.parametrize("name", ["split", "hadamard"])
def test_no_three_way_marginal(name: str) -> None:
    mechanism = BREAKDOWNS[name](epsilon=1.0, attributes=CAMPAIGN)
    with pytest.raises(ParameterError, match="attributes"):
        mechanism.marginal(np.zeros(mechanism.state_size, dtype=np.int64), (0, 1, 2))


def test_auto_compares_every_mechanism_and_says_why() -> None:
    mechanism, choice = choose_breakdown(2.0, CAMPAIGN)
    assert set(choice.variances) == set(BREAKDOWNS)
    assert choice.variances[mechanism.name] == min(choice.variances.values())
    for name in BREAKDOWNS:
        assert name in choice.reason


@pytest.mark.parametrize(("oracle", "inner"), [("split", ["de", "de", "de"]), ("hadamard", ["rr"])])
def test_a_created_config_serves_the_inner_parameters_and_refuses_weaker_ones(
    oracle: str, inner: list[str]
) -> None:
    config = {"name": "crashes", "oracle": oracle, "epsilon": 2.0, "attributes": ATTRIBUTES}
    created = CampaignConfig.from_dict(config).as_created()
    served = created.params["inner"]
    assert [own["oracle"] for own in served] == inner
    stored = CampaignConfig.from_dict(json.loads(created.canonical_json()), stored=True)
    assert stored == created and stored.build_mechanism().epsilon == pytest.approx(2.0)
    tampered = json.loads(created.canonical_json())
    first = tampered["params"]["inner"][0]
    if oracle == "hadamard":
        first["p"] = 0.95  # e^eps = 19 > e^2
    else:  # country (first in name order), 2 values at 2/3: p / q = 9 > e^(2/3)
        first["p"], first["q"] = 0.9, 0.1
    with pytest.raises(ParameterError, match="epsilon"):
        CampaignConfig.from_dict(tampered)


@pytest.mark.parametrize(
    ("name", "attributes", "epsilon", "which"),
    [
        ("split", CAMPAIGN, 2.0, (0, 2)),
        ("split", MIXED, 1.0, (0, 1)),
        ("hadamard", CAMPAIGN, 1.0, (0, 2)),
    ],
)
def test_the_exact_variance_holds_to_a_few_percent(
    name: str, attributes: Attributes, epsilon: float, which: tuple[int, ...]
) -> None:
    # 4,000 repetitions over 60 users: the sample variance s^2 of R draws has sd
    # sqrt((m4 - s^4) / R) (m4 the fourth central moment, estimated from the same draws,
    # which is what the products' heavy tails need); every cell within 5 such sd of the
    # stated variance (~6e-7 a cell to fail by chance): 11-12% of it here, so a variance
    # formula 15% off fails (checked by hand on these three cases).
    rng = np.random.default_rng(61)
    rows = simulated_rows(attributes, 60, rng)
    mechanism = BREAKDOWNS[name](epsilon=epsilon, attributes=attributes)
    truth = _true_marginal(attributes, rows, which)
    repeats = 4000
    estimates = np.array(
        [
            mechanism.marginal(mechanism.state_of_rows(rows, rng), which).estimate
            for _ in range(repeats)
        ]
    )
    exact = mechanism.exact_variance(rows.shape[0], which, truth / rows.shape[0])
    centred = estimates - estimates.mean(axis=0)
    s2 = (centred**2).mean(axis=0)
    m4 = (centred**4).mean(axis=0)
    assert np.abs(estimates.mean(axis=0) - truth).max() <= 5 * np.sqrt(exact / repeats).max()
    assert np.all(np.abs(s2 - exact) <= 5 * np.sqrt((m4 - s2**2) / repeats)), s2 / exact
