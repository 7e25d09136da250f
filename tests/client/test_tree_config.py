"""A memoization "tree" config: its derived horizon and change cap, and one clear error
naming the field for everything it cannot be."""

from __future__ import annotations

from typing import Any

import pytest

from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError

BASE: dict[str, Any] = {"name": "t", "oracle": "de", "epsilon": 1.0, "domain": ["no", "yes"]}


def created(**changes: Any) -> CampaignConfig:
    return CampaignConfig.from_dict({**BASE, "memoization": "tree", **changes}).as_created()


def test_the_defaults_are_a_year_of_windows_and_two_changes_written_when_created() -> None:
    daily = created()
    assert (daily.horizon_windows, daily.max_changes) == (365, 2)
    assert created(window_seconds=3600).horizon_windows == 365 * 24
    assert created(window_seconds=365 * 86_400 * 2).horizon_windows == 1
    assert created(window_seconds=365 * 86_400 * 2).max_changes == 1
    given = created(horizon_windows=30, max_changes=3)
    assert (given.horizon_windows, given.max_changes) == (30, 3)
    # Served as created: the same config, the same id.
    again = CampaignConfig.from_dict(daily.to_dict(), stored=True)
    assert again.config_id == daily.config_id and again.horizon_windows == 365


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"memoization": "none", "horizon_windows": 30}, "horizon_windows"),
        ({"horizon_windows": 30}, "memoization"),  # a short horizon must choose
        ({"max_changes": 2}, "max_changes"),
        ({"memoization": "tree", "horizon_windows": 0}, "horizon_windows"),
        ({"memoization": "tree", "horizon_windows": 4, "max_changes": 5}, "max_changes"),
        ({"memoization": "tree", "max_changes": 65}, "max_changes"),
        ({"memoization": "tree", "oracle": "olh"}, "oracle"),
        ({"memoization": "tree", "reports_per_window": 2}, "reports_per_window"),
        ({"memoization": "tree", "levels": {"low": 0.5}}, "levels"),
    ],
)
def test_what_a_tree_config_cannot_be_is_one_error_naming_the_field(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(ParameterError) as raised:
        CampaignConfig.from_dict({**BASE, **changes})
    assert raised.value.field == field


def test_a_numeric_or_open_domain_campaign_cannot_track_changes() -> None:
    numeric = {"name": "n", "oracle": "duchi", "epsilon": 1.0, "range": [0, 1]}
    with pytest.raises(ParameterError) as raised:
        CampaignConfig.from_dict({**numeric, "memoization": "tree"})
    assert raised.value.field == "range"
    text = {"name": "o", "oracle": "olh", "epsilon": 1.0, "max_length": 8}
    with pytest.raises(ParameterError) as raised:
        CampaignConfig.from_dict({**text, "memoization": "tree"})
    assert raised.value.field == "max_length"


def test_a_new_campaign_declaring_a_long_horizon_tracks_changes_by_default() -> None:
    """The default chosen from the benchmarks: a horizon of 128 windows or more -> "tree";
    a config that declares none keeps "none" (and its id)."""
    year = CampaignConfig.from_dict({**BASE, "horizon_windows": 365}).as_created()
    assert year.memoization == "tree" and year.horizon_windows == 365
    plain = CampaignConfig.from_dict(BASE).as_created()
    assert plain.memoization == "none" and "memoization" not in plain.to_dict()
