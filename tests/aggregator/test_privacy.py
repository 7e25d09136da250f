"""A report's central guarantee over an install's life (aggregator/privacy.py): the windows'
central guarantees composed, valid by the accountant's own exact delta, between one window's
figure and their sum, and not claimed under memoization."""

from __future__ import annotations

import pytest

from ldptel.aggregator.privacy import composed_windows, privacy_section, shuffle_amplification
from ldptel.client.accounting import composed_delta
from ldptel.client.campaign import CampaignConfig
from ldptel.client.shuffle import default_delta, shuffled_epsilon


def config_of(**changes: object) -> CampaignConfig:
    data = {"name": "c", "oracle": "oue", "epsilon": 1.0, "domain": list("abcdefgh"), **changes}
    return CampaignConfig.from_dict(data)


def test_an_install_s_windows_compose_to_at_most_their_sum() -> None:
    config = config_of(lifetime_epsilon=10.0)
    section = privacy_section(config, config.build_oracle(), 100_000)
    lifetime = section["central_lifetime"]
    window = section["central"]
    assert window is not None and lifetime["applies"] and lifetime["windows"] == 10
    assert lifetime["delta"] == default_delta(100_000)
    assert lifetime["epsilon"] is not None
    assert "at most 10 windows" in lifetime["statement"]
    # The figure is what its parts give: each window at delta / 20, composed at delta; never
    # more than their sum (basic composition).
    each = lifetime["delta"] / 20
    per_window = shuffled_epsilon(1.0, 100_000, each)
    assert window["epsilon"] < lifetime["epsilon"] <= 10 * per_window
    total = composed_delta([(per_window, 10)], lifetime["epsilon"], each_delta=each)
    assert total <= lifetime["delta"] * (1 + 1e-9)


def test_it_never_exceeds_the_local_lifetime_figure() -> None:
    # Few users: the windows' central guarantees gain little, the local figure bounds them.
    config = config_of(epsilon=0.1, lifetime_epsilon=10.0, lifetime_delta=1e-9)
    epsilon, _ = composed_windows(0.1, 200, 346)
    section = privacy_section(config, config.build_oracle(), 200)
    lifetime = section["central_lifetime"]
    assert lifetime["applies"] and lifetime["epsilon"] is not None
    assert lifetime["epsilon"] <= min(epsilon, 10.0)


def test_it_is_not_claimed_under_memoization_or_without_a_central_guarantee() -> None:
    config = config_of(memoization="exact_discloses_changes")
    lifetime = privacy_section(config, config.build_oracle(), 100_000)["central_lifetime"]
    assert not lifetime["applies"] and lifetime["epsilon"] is None and lifetime["statement"] == ""
    assert not shuffle_amplification(8.0, 1_000)["applies"]
    few = privacy_section(config_of(epsilon=8.0), config_of(epsilon=8.0).build_oracle(), 1_000)
    assert not few["central_lifetime"]["applies"]


@pytest.mark.parametrize("n", [1_000, 100_000])
def test_one_window_composes_to_its_own_guarantee_at_its_share_of_delta(n: int) -> None:
    epsilon, delta = composed_windows(1.0, n, 1)
    window = shuffled_epsilon(1.0, n, delta / 2)  # its delta / 2 left buys a little more
    assert 0.9 * window < epsilon <= window
