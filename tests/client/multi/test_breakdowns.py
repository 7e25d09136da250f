"""Breakdown mechanisms: every one-way and two-way marginal cell unbiased with its stated
exact variance, one report's exact privacy loss equal to the campaign's epsilon, the wire
path, and `auto`'s recorded choice."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldptel.analysis.breakdown import audit_breakdown, simulated_rows
from ldptel.client.errors import ParameterError, ReportError
from ldptel.client.multi import (
    BREAKDOWNS,
    Attributes,
    JointBreakdown,
    PairsBreakdown,
    choose_breakdown,
    make_consistent,
)
from ldptel.client.multi.wire import BreakdownReports

CAMPAIGN = Attributes.of_sizes({"os": 4, "plan": 3, "country": 5})
REPEATS = 300
# The mean of R unbiased estimates is within 4.5 of its stderr sqrt(Var/R) but with
# probability ~7e-6 a cell; the sample variance of R near-normal estimates is
# Var * chi2(R-1)/(R-1), sd sqrt(2/(R-1)) = 0.08: 6 sd either side.
MEAN_Z = 4.5
VARIANCE_RATIO = (1 - 6 * math.sqrt(2 / (REPEATS - 1)), 1 + 6 * math.sqrt(2 / (REPEATS - 1)))


def _true_marginal(rows: np.ndarray, which: tuple[int, ...]) -> np.ndarray:
    joint = np.bincount(CAMPAIGN.joint_index(rows), minlength=CAMPAIGN.joint_size)
    axes = tuple(a for a in range(3) if a not in which)
    return joint.reshape(CAMPAIGN.sizes).sum(axis=axes).reshape(-1)


@pytest.mark.parametrize(
    ("name", "epsilon", "which"),
    [
        ("joint", 2.0, (0, 2)),  # OUE over the 60 joint cells
        ("joint", 4.0, (1,)),  # k-RR over them (60 < 3 e^4 + 2)
        ("joint", 2.0, (0, 1, 2)),
        ("pairs", 2.0, (0, 2)),  # k-RR per pair (20 < 3 e^2 + 2)
        ("pairs", 0.5, (1,)),  # OUE per pair, three groups summed
    ],
)
def test_marginal_cells_are_unbiased_with_the_stated_exact_variance(
    name: str, epsilon: float, which: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(29)
    rows = simulated_rows(CAMPAIGN, 3000, rng)
    mechanism = BREAKDOWNS[name](epsilon=epsilon, attributes=CAMPAIGN)
    truth = _true_marginal(rows, which)
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


def test_z_scores_of_two_way_cells_against_the_truth() -> None:
    # The criterion at n = 5,000 over 40 runs: z^2 averages 1 (sd ~0.3 a run over
    # 47 cells, so ~0.05 over 40 runs: 5 sd is [0.75, 1.25]); |z| > 5 has probability
    # 6e-7 a cell, ~1e-3 over the 1,880 cells.
    rng = np.random.default_rng(7)
    mechanism, _ = choose_breakdown(2.0, CAMPAIGN, 5000)
    squares = []
    for _ in range(40):
        rows = simulated_rows(CAMPAIGN, 5000, rng)
        state = mechanism.state_of_rows(rows, rng)
        for which in CAMPAIGN.pairs:
            marginal = mechanism.marginal(state, which)
            squares.append(
                ((marginal.estimate - _true_marginal(rows, which)) / marginal.stderr) ** 2
            )
    z2 = np.concatenate(squares)
    assert 0.75 <= z2.mean() <= 1.25
    assert z2.max() < 25


@pytest.mark.parametrize("cls", [JointBreakdown, PairsBreakdown])
@pytest.mark.parametrize("epsilon", [0.5, 2.0, 4.0])
def test_one_reports_exact_privacy_loss_is_the_campaigns_epsilon(cls: type, epsilon: float) -> None:
    mechanism = cls(epsilon=epsilon, attributes=CAMPAIGN)
    assert audit_breakdown(mechanism) == pytest.approx(epsilon, abs=1e-9)
    assert mechanism.epsilon == pytest.approx(epsilon, abs=1e-12)


@pytest.mark.parametrize("cls", [JointBreakdown, PairsBreakdown])
def test_wire_reports_give_the_same_state_as_the_simulation(cls: type) -> None:
    mechanism = cls(epsilon=1.0, attributes=CAMPAIGN)
    rows = [CAMPAIGN.row_of({"os": "1", "plan": "2", "country": "4"})] * 50
    reports = [mechanism.perturb_row(row) for row in rows]
    state = BreakdownReports(mechanism).state(reports)
    assert state.shape == (mechanism.state_size,)
    assert mechanism.marginal(state, (0,)).n == 50


def test_a_report_with_a_bad_pair_is_named() -> None:
    mechanism = PairsBreakdown(epsilon=1.0, attributes=CAMPAIGN)
    good = mechanism.perturb_row((0, 0, 0))
    with pytest.raises(ReportError, match=r"reports\[1\]\.pair"):
        BreakdownReports(mechanism).state([good, {**good, "pair": 3}])
    with pytest.raises(ReportError, match=r"reports\[2\]\.bits: is required"):  # OUE at 1
        BreakdownReports(mechanism).state([good, good, {"pair": good["pair"]}])


def test_pairs_estimates_no_three_way_marginal() -> None:
    mechanism = PairsBreakdown(epsilon=1.0, attributes=CAMPAIGN)
    with pytest.raises(ParameterError, match="attributes"):
        mechanism.marginal(np.zeros(mechanism.state_size, dtype=np.int64), (0, 1, 2))


def test_auto_picks_joint_for_a_small_joint_domain_and_pairs_for_a_large_one() -> None:
    small, choice = choose_breakdown(4.0, Attributes.of_sizes({"a": 2, "b": 3}))
    assert small.name == "joint" and "joint" in choice.reason
    large, choice = choose_breakdown(2.0, Attributes.of_sizes({f"a{i}": 6 for i in range(6)}))
    assert large.name == "pairs" and "joint" not in choice.variances  # 46,656 joint cells
    middle, choice = choose_breakdown(2.0, CAMPAIGN)
    assert choice.variances[middle.name] == min(choice.variances.values())


def test_rows_name_their_missing_or_unknown_attribute() -> None:
    with pytest.raises(ParameterError, match="plan"):
        CAMPAIGN.row_of({"os": "1", "country": "0"})
    with pytest.raises(ParameterError, match="os"):
        CAMPAIGN.row_of({"os": "ios", "plan": "0", "country": "0"})
    with pytest.raises(ParameterError, match="device"):
        CAMPAIGN.row_of({"os": "1", "plan": "0", "country": "0", "device": "x"})


@pytest.mark.parametrize(
    ("attributes", "field"),
    [
        ({"os": ["a", "b"]}, "attributes"),
        ({"os": ["a", "b"], "plan": ["x"]}, "attributes.plan"),
        ({"os": ["a", "a"], "plan": ["x", "y"]}, "attributes.os"),
        ([], "attributes"),
    ],
)
def test_config_attributes_are_validated(attributes: object, field: str) -> None:
    with pytest.raises(ParameterError) as error:
        Attributes.from_config(attributes)
    assert error.value.field == field


def test_consistent_marginals_are_non_negative_sum_to_n_and_agree() -> None:
    rng = np.random.default_rng(3)
    rows = simulated_rows(CAMPAIGN, 2000, rng)
    mechanism = PairsBreakdown(epsilon=1.0, attributes=CAMPAIGN)
    state = mechanism.state_of_rows(rows, rng)
    marginals = [mechanism.marginal(state, w) for w in [(0,), (1,), (2,), *CAMPAIGN.pairs]]
    assert min(m.estimate.min() for m in marginals) < 0  # the case post-processing is for
    result = make_consistent(marginals)
    assert result.biased and result.disagreement <= 1e-6 * 2000
    for counts in result.counts:
        assert counts.min() >= 0 and counts.sum() == pytest.approx(2000)
    os_from_pair = result.counts[3].reshape(4, 3).sum(axis=1)
    np.testing.assert_allclose(os_from_pair, result.counts[0], atol=1e-3)
