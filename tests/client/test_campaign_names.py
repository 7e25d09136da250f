"""Campaign and level names are whole-string matches: a trailing newline, which a "$" anchor
lets through, would become part of Redis keys and file names."""

from __future__ import annotations

import pytest

from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError


def config(**overrides: object) -> dict[str, object]:
    return {"name": "screens", "oracle": "de", "epsilon": 1.0, "domain": ["a", "b"], **overrides}


@pytest.mark.parametrize("name", ["screens\n", "screens\n\n", "\nscreens", "Screens", ""])
def test_a_campaign_name_is_refused_unless_it_is_the_whole_pattern(name: str) -> None:
    with pytest.raises(ParameterError, match=r"^name: "):
        CampaignConfig.from_dict(config(name=name))


def test_a_level_name_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(ParameterError, match=r"^levels: "):
        CampaignConfig.from_dict(config(levels={"high\n": 0.5}))
    assert CampaignConfig.from_dict(config(levels={"high": 0.5})).levels == {"high": 0.5}
