"""The numeric mechanisms' kernel: laws exactly unbiased on every level, the variance the
papers state in the fine-grid limit, epsilon kept by the integer weights, alpha-point
rounding, the wire form and bad input, parameters that round-trip through a config."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from ldptel.client.errors import ParameterError, ReportError
from ldptel.client.numeric import NUMERIC_MECHANISMS, make_mechanism
from ldptel.client.numeric.auto import choose_mechanism
from ldptel.client.numeric.base import alpha_point_level, alpha_point_levels
from ldptel.client.numeric.codes import CodeMechanism
from ldptel.client.numeric.hm import PURE_DUCHI_BELOW
from ldptel.client.randomness import SecureRandom

NAMES = sorted(n for n in NUMERIC_MECHANISMS if n != "auto")
EPSILONS = (0.05, 1.0, 4.0, 20.0)


def build(name: str, epsilon: float = 1.0, **params: Any) -> Any:
    return make_mechanism(name, epsilon=epsilon, low=-3.0, high=17.0, **params)


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("name", NAMES)
def test_the_guarantee_is_at_most_the_requested_epsilon_and_close_to_it(
    name: str, epsilon: float
) -> None:
    mechanism = build(name, epsilon)
    assert mechanism.epsilon <= epsilon
    # Integer weights cost a little: at most 3% of epsilon (eps = 20: P/Q rounds at Q ~ 3).
    assert mechanism.epsilon >= epsilon * 0.97


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("name", [n for n in NAMES if n != "dbitflip"])
def test_each_code_value_averages_to_the_level_exactly(name: str, epsilon: float) -> None:
    mechanism = build(name, epsilon)
    assert isinstance(mechanism, CodeMechanism)
    law = mechanism.law()
    np.testing.assert_allclose(law.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(law @ mechanism.code_values, mechanism.levels, atol=1e-9 * 20)


def test_dbitflip_fractions_average_to_the_level_exactly() -> None:
    # E[support | level s] from the law: d' / d of the reports sample bucket t, and of those
    # the bit is 1 with P / (P + Q) if t = s else Q / (P + Q).
    mechanism = build("dbitflip", 1.0, resolution=7, sampled=3)
    d, k, p, q = mechanism.buckets, mechanism.sampled, mechanism.heavy, mechanism.light
    for s in range(d):
        ones = np.where(np.arange(d) == s, p, q) / (p + q)
        expected = np.concatenate((np.full(d, k / d), k / d * ones))
        np.testing.assert_allclose(mechanism.fractions(expected, 1), np.eye(d)[s], atol=1e-12)


def paper_worst_variance(name: str, epsilon: float) -> float:
    """Worst-case variance of one report on t in [-1, 1] (multiply by (range/2)^2)."""
    e, h = math.exp(epsilon), math.exp(epsilon / 2)
    if name == "duchi":  # Duchi et al. 2018; Wang et al. 2019, eq. (3) at t = 1
        return ((e + 1) / (e - 1)) ** 2
    if name == "pm":  # Wang et al. 2019, eq. (5) at t = 1
        return (h + 3) / (3 * (h - 1) ** 2) + 1 / (h - 1)
    # hm, eps > eps*: Wang et al. 2019, eq. (11)
    return (h + 3) / (3 * h * (h - 1)) + (e + 1) ** 2 / (h * (e - 1) ** 2)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("name", ["duchi", "pm", "hm"])
def test_the_worst_case_variance_is_the_papers_on_a_fine_grid(name: str, epsilon: float) -> None:
    name_for_paper = "duchi" if name == "hm" and epsilon <= PURE_DUCHI_BELOW else name
    fine = {"duchi": {}, "pm": {"resolution": 4096}, "hm": {"resolution": 4096}}[name]
    mechanism = build(name, epsilon, **fine)
    half = (mechanism.high - mechanism.low) / 2
    expected = paper_worst_variance(name_for_paper, epsilon) * half**2
    # The grid's rounding adds <= (range/K)^2/4 and the band width rounds to a cell: 0.5%.
    assert mechanism.worst_report_variance() == pytest.approx(expected, rel=5e-3)


def test_the_worst_case_is_the_maximum_of_the_exact_variance_over_values() -> None:
    for name in NAMES:
        mechanism = build(name, 2.0)
        values = np.linspace(mechanism.low, mechanism.high, 20_001)
        dense = float(mechanism.report_variance(values).max())
        worst = mechanism.worst_report_variance()
        assert dense <= worst * (1 + 1e-12)
        assert dense >= worst * (1 - 1e-4)


@pytest.mark.parametrize("epsilon", [0.3, 0.6, 0.7, 1.0, 4.0])
def test_auto_picks_the_lowest_worst_case_variance_and_says_why(epsilon: float) -> None:
    choice = choose_mechanism(epsilon, 0.0, 100.0)
    variances = {c.mechanism: c.worst_variance for c in choice.candidates}
    assert set(variances) == {"duchi", "pm", "hm"}
    assert variances[choice.mechanism] == min(variances.values())
    # Wang et al. 2019: HM is Duchi up to eps* ~ 0.61 (tie: the earlier candidate, duchi).
    assert choice.mechanism == ("duchi" if epsilon <= PURE_DUCHI_BELOW else "hm")
    assert "lowest exact worst-case variance" in choice.reason
    built = make_mechanism("auto", epsilon=epsilon, low=0.0, high=100.0)
    assert built.name == choice.mechanism
    assert built.auto_choice == choice


# -- alpha-point rounding ------------------------------------------------------------------


def test_alpha_point_rounding_rounds_up_with_probability_the_fraction() -> None:
    # alpha on an even grid of 2^16 points: the share rounding up is f within 2^-16.
    alphas = (np.arange(2**16, dtype=np.uint64) << np.uint64(48)) + np.uint64(12345)
    for fraction in (0.0, 0.1, 0.5, 0.999, 1.0):
        value = 2.0 + fraction  # levels 0..10 over [0, 10]
        levels = alpha_point_levels(np.full(alphas.size, value), alphas, 0.0, 10.0, 10)
        assert set(levels.tolist()) <= {2, 3}
        assert float((levels == 3).mean()) == pytest.approx(fraction, abs=2**-16)


def test_one_kept_alpha_changes_the_level_only_at_its_threshold() -> None:
    alpha = np.uint64(2**63)  # alpha = 1/2: up iff f > 1/2
    values = np.array([4.2, 4.4, 4.49, 4.51, 4.9, 5.2])
    levels = alpha_point_levels(values, np.full(values.size, alpha), 0.0, 10.0, 10)
    assert levels.tolist() == [4, 4, 4, 5, 5, 5]


def test_values_are_clipped_into_the_range_and_nan_is_refused() -> None:
    mechanism = build("pm")
    np.testing.assert_array_equal(
        mechanism.clip([-100.0, 5.0, 1e9, math.inf, -math.inf]), [-3.0, 5.0, 17.0, 17.0, -3.0]
    )
    with pytest.raises(ParameterError, match="value"):
        mechanism.perturb(math.nan)
    with pytest.raises(ParameterError, match="value"):
        mechanism.perturb("3.7")  # type: ignore[arg-type]


# -- wire, storage, parameters --------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_reports_round_trip_through_wire_and_storage(name: str) -> None:
    mechanism = build(name, 1.0)
    batch = mechanism.perturb_batch(np.linspace(-5, 20, 50), np.random.default_rng(1))
    decoded = mechanism.decode(mechanism.encode(batch))
    stored = mechanism.unpack(mechanism.pack(decoded), 50)
    np.testing.assert_array_equal(mechanism.support(stored), mechanism.support(batch))
    # Each report counts once (dbitflip: once in each sampled bucket's n_t).
    counted = mechanism.support(batch)[
        : mechanism.support_size // 2 if name == "dbitflip" else None
    ]
    assert int(counted.sum()) == 50 * (mechanism.sampled if name == "dbitflip" else 1)
    one = mechanism.perturb(3.7)  # the OS CSPRNG
    assert mechanism.support(mechanism.decode([one])).sum() >= 1
    assert mechanism.perturb(3.7, SecureRandom()).keys() == one.keys()


@pytest.mark.parametrize(
    ("name", "report", "field"),
    [
        ("pm", {"y": -1}, "y"),
        ("pm", {"y": 10**6}, "y"),
        ("duchi", {"y": 2}, "y"),
        ("hm", {"y": "1"}, "y"),
        ("sw", {}, "y"),
        ("dbitflip", {"j": list(range(32)), "b": [2] * 32}, "b"),
        ("dbitflip", {"j": [0] * 32, "b": [0] * 32}, "j"),
        ("dbitflip", {"j": list(range(31)), "b": [0] * 31}, "j"),
        ("dbitflip", {"j": list(range(32))}, "b"),
    ],
)
def test_bad_reports_are_refused_naming_the_field(
    name: str, report: dict[str, Any], field: str
) -> None:
    with pytest.raises(ReportError) as caught:
        build(name).decode([report])
    assert caught.value.field == f"reports[0].{field}"


@pytest.mark.parametrize("name", NAMES)
def test_the_config_parameters_rebuild_the_same_law(name: str) -> None:
    mechanism = build(name, 1.3)
    params = {**mechanism.fixed_params(), **mechanism.derived_params()}
    again = build(name, 1.3, **params)
    assert again.epsilon == mechanism.epsilon
    assert again.derived_params() == mechanism.derived_params()
    assert again.support_size == mechanism.support_size


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"low": 5.0, "high": 5.0}, "high"),
        ({"low": math.nan, "high": 1.0}, "low"),
        ({"low": 0.0, "high": math.inf}, "high"),
        ({"low": 0.0, "high": 1.0, "epsilon": 0.0}, "epsilon"),
        ({"low": 0.0, "high": 1.0, "epsilon": 21.0}, "epsilon"),
        ({"low": 0.0, "high": 1.0, "epsilon": 1e-10}, "epsilon"),  # P / Q rounds to 1
        ({"low": 0.0, "high": 1.0, "resolution": 0}, "resolution"),
    ],
)
def test_bad_parameters_are_refused_naming_the_field(params: dict[str, Any], field: str) -> None:
    with pytest.raises(ParameterError) as caught:
        make_mechanism("pm", **{"epsilon": 1.0, **params})
    assert caught.value.field == field


@pytest.mark.parametrize("name", ["pm", "sw", "hm"])
def test_closed_form_second_moments_equal_the_laws(name: str) -> None:
    mechanism = build(name, 1.3)
    values = mechanism.code_values
    np.testing.assert_allclose(
        mechanism.second_moments(), mechanism.law() @ (values * values), rtol=1e-10
    )


def test_the_scalar_rounding_is_the_vectorized_one() -> None:
    rng = np.random.default_rng(0)
    values = np.concatenate((rng.uniform(-10, 2010, 2000), [0.0, 2000.0, -1e300, 1e300]))
    alphas = rng.integers(0, 2**64, values.size, dtype=np.uint64)
    vectorized = alpha_point_levels(values, alphas, 0.0, 2000.0, 256)
    scalar = [
        alpha_point_level(float(v), int(a), 0.0, 2000.0, 256)
        for v, a in zip(values, alphas, strict=True)
    ]
    assert vectorized.tolist() == scalar


@pytest.mark.parametrize("name", ["duchi", "pm", "hm", "sw"])
def test_the_scalar_csprng_path_draws_the_same_law(name: str) -> None:
    # Reports of level 40 from perturb_level_one (the SDK's scalar path), counted in the audit
    # events of the pair {40, 41}, against their exact probabilities: chi-square at 1e-4.
    mechanism = build(name, 2.0, resolution=64)
    draws = 4000
    codes = np.array([mechanism.perturb_level_one(40)["y"] for _ in range(draws)])
    events = mechanism.audit_events({"y": codes}, 40, 41)
    expected = mechanism.audit_probabilities(40, 41) * draws
    observed = np.bincount(events, minlength=expected.size)
    kept = expected > 0
    assert observed[~kept].sum() == 0
    statistic = float(np.sum((observed[kept] - expected[kept]) ** 2 / expected[kept]))
    assert statistic < stats.chi2(int(kept.sum()) - 1).ppf(1 - 1e-4)


@pytest.mark.parametrize("resolution", [1, 3])
@pytest.mark.parametrize("name", NAMES)
def test_coarse_grids_keep_the_law_exact(name: str, resolution: int) -> None:
    mechanism = build(name, 1.0, resolution=resolution)
    assert mechanism.domain_size == resolution + 1
    assert mechanism.epsilon <= 1.0
    if isinstance(mechanism, CodeMechanism):
        np.testing.assert_allclose(
            mechanism.law() @ mechanism.code_values, mechanism.levels, atol=1e-9
        )
    assert mechanism.decode([mechanism.perturb(5.0)])
