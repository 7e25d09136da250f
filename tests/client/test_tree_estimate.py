"""Memoization "tree": each window's frequency estimate is unbiased for the tracked values, and
its stated variance is the variance of repetitions (tolerances from theory).

- exactly: the expected estimate of every window, from the real code's laws (initial draws,
  `observe`, `node_sign`, `bit_one_probability`) and its estimator (`decomposition`, `scale`),
  equals the mean tracked indicator; with the level drawn non-uniformly (a broken variant) it
  does not;
- over repetitions of a population (the simulation's batch draws, checked against the real
  per-install code): the mean within 4.5 standard errors of the truth per window, the sample
  variance within the chi-square bounds of the stated one, 95% intervals covering ~95%.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from ldptel.analysis.longitudinal import histories, tracked_frequencies, tree_windows
from ldptel.client import tree
from ldptel.client.campaign import CampaignConfig
from ldptel.client.randomness import SecureRandom
from ldptel.client.tree import TreeShape, TreeState, tracked_indicator

POPULATION = [
    (0, 0, 0, 0, 0, 0, 0, 0),
    (1, 1, 1, 1, 1, 1, 1, 1),
    (0, 0, 0, 1, 1, 1, 1, 1),
    (1, 1, 0, 0, 0, 0, 0, 0),
    (0, 1, 0, 1, 0, 1, 0, 1),  # past K: its later changes are not counted
    (1, 0, 0, 1, 1, 0, 0, 1),
]


def expected_estimates(shape: TreeShape, population: list[tuple[int, ...]]) -> list[Fraction]:
    """E[estimate of window t] for every t: scale x E[sum of the read nodes' +-1 bits]."""
    total = [0.0] * shape.horizon_windows
    for history in population:
        for weight, start in shape.initial_law():
            state, signs = start, {}
            for t, value in enumerate(history):
                state = shape.observe(state, t, shape.indicator(state, value))
                sign = tree.node_sign(shape, state, t)
                if sign is not None:
                    signs[t] = 2 * shape.bit_one_probability(sign) - 1
            for t in range(shape.horizon_windows):
                for level, first in shape.decomposition(t):
                    end = first + (1 << level) - 1
                    if level == state.level:
                        total[t] += float(weight) * shape.scale * signs[end]
    return [Fraction(x).limit_denominator(10**6) for x in np.array(total) / len(population)]


@pytest.mark.parametrize("changes", [1, 2, 3])
def test_the_expected_estimate_of_every_window_is_the_tracked_frequency(changes: int) -> None:
    shape = TreeShape(8, changes, 1.0)
    truth = np.mean([tracked_indicator(shape, list(h)) for h in POPULATION], axis=0)
    found = np.array(expected_estimates(shape, POPULATION), dtype=np.float64)
    assert np.allclose(found, truth, atol=1e-9)
    actual = np.mean(POPULATION, axis=0)
    if changes < 3:  # installs past K: the estimate follows their K-th value, not the truth
        assert not np.allclose(found, actual, atol=1e-3)


def test_a_level_drawn_non_uniformly_biases_the_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    shape = TreeShape(8, 2, 1.0)

    def skewed(self: TreeShape):  # type: ignore[no-untyped-def]
        weights = [Fraction(2 * (h + 1), self.levels * (self.levels + 1)) for h in range(4)]
        for level, w in enumerate(weights):
            for change in (1, 2):
                yield w / 2, TreeState(0, level, change)

    monkeypatch.setattr(TreeShape, "initial_law", skewed)
    truth = np.mean([tracked_indicator(shape, list(h)) for h in POPULATION], axis=0)
    found = np.array(expected_estimates(shape, POPULATION), dtype=np.float64)
    assert not np.allclose(found, truth, atol=1e-3)


def test_the_batch_draws_follow_the_real_per_install_code() -> None:
    """The simulation's vectorized change tracking (sampled window and sign) is the state the
    real `observe` reaches, install by install."""
    shape = TreeShape(16, 2, 1.0)
    rng = np.random.default_rng(7)
    values = histories(np.array([0.5, 0.5]), 300, 16, 3, rng)
    for row in values[:300]:
        for change in (1, 2):
            state = TreeState(0, 0, change)
            for t, value in enumerate(row):
                state = shape.observe(state, t, shape.indicator(state, int(value)))
            flips = np.diff(row, prepend=0)
            at = np.flatnonzero(flips)
            expected = at[change - 1] if at.size >= change else -1
            assert state.sampled == expected
            if expected >= 0:
                assert state.sign == flips[expected]


@pytest.mark.parametrize(("domain", "changes"), [(2, 2), (3, 2)])
def test_repetitions_are_unbiased_with_the_stated_variance(domain: int, changes: int) -> None:
    windows, installs, repeats = 16, 4000, 200
    items = 1 if domain == 2 else domain
    shape = TreeShape(windows, changes, 2.0, items=items)
    rng = np.random.default_rng([domain, changes])
    law = np.full(domain, 1.0 / domain)
    values = histories(law, installs, windows, changes - 1, rng)
    truth = tracked_frequencies(values, domain, changes)
    runs = [tree_windows(values, domain, shape, rng) for _ in range(repeats)]
    found = np.stack([r.estimates for r in runs])  # (repeats, windows, d)
    stated = np.stack([r.variances for r in runs]).mean(axis=0)
    # Each label's tracked indicator (binary: label 1's, whose count gives label 0's too).
    indicator = np.repeat(truth[:, 1:], domain, axis=1) if domain == 2 else truth
    exact = np.stack(
        [
            [shape.variance(t, installs, float(indicator[t, i])) for i in range(domain)]
            for t in range(windows)
        ]
    )
    assert np.allclose(stated, exact, rtol=1e-3)  # the estimate plugged in for f: close
    error = found.mean(axis=0) - truth
    assert np.all(np.abs(error) <= 4.5 * np.sqrt(exact / repeats))
    ratio = found.var(axis=0, ddof=1) / exact
    # (repeats - 1) s^2 / sigma^2 ~ chi2(199): [0.62, 1.45] holds each cell with p > 1 - 1e-5.
    assert np.all((ratio > 0.62) & (ratio < 1.45)), ratio
    half = 1.959964 * np.sqrt(np.stack([r.variances for r in runs]))
    covered = np.mean(np.abs(found - truth) <= half)
    # windows x d x 200 intervals (dependent across labels of one run): ~95% within 2 points.
    assert 0.93 <= covered <= 0.97


def test_a_report_draws_its_bit_with_the_stated_law() -> None:
    """The SDK's one-report path (`report`, OS CSPRNG): a kept sign with probability
    e^eps / (1 + e^eps), a fair coin at a node without the sampled change, nothing elsewhere."""
    shape = TreeShape(8, 1, 1.0)
    rng = SecureRandom()
    informative = TreeState(0, 0, 1, last=1, changes=1, sampled=0, sign=1)
    empty = TreeState(0, 0, 1)
    draws = 4000
    kept = sum(shape.report(informative, 0, rng).bit == 1 for _ in range(draws)) / draws
    coin = sum(shape.report(empty, 0, rng).bit == 1 for _ in range(draws)) / draws
    sd_kept = np.sqrt(shape.keep * (1 - shape.keep) / draws)
    assert abs(kept - shape.keep) <= 4.5 * sd_kept
    assert abs(coin - 0.5) <= 4.5 * np.sqrt(0.25 / draws)
    assert shape.report(informative, 1, rng).bit is None  # window 1 reads level 1


def test_a_binary_config_tracks_label_one_and_a_larger_one_samples_a_label() -> None:
    base = {"name": "t", "oracle": "de", "epsilon": 1.0, "memoization": "tree"}
    binary = CampaignConfig.from_dict({**base, "domain": ["no", "yes"]})
    larger = CampaignConfig.from_dict({**base, "domain": ["a", "b", "c"]})

    assert binary.tree_shape() == TreeShape(365, 2, 1.0, items=1)
    assert larger.tree_shape().items == 3
