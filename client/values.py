"""What the value of a report() becomes for its campaign's randomizer (memo.Value), one
function per kind of campaign: a row {attribute: label}'s joint index (breakdown,
Breakdown.row_index), the text in NFC (open domain, CampaignConfig.open_value), a number
(numeric), a label's index in the domain (categorical). `value_of` picks by the config's
kind: a new kind of value is one more function and one more case in it."""

from __future__ import annotations

import math
import numbers

from ldptel.client.campaign_kinds import Breakdown
from ldptel.client.config_cache import Active
from ldptel.client.errors import InvalidValueError, ValueTypeError
from ldptel.client.memo import Value


def value_of(active: Active, value: object) -> Value:
    """What the randomizer of the campaign `active` takes for `value`; raises
    ValueTypeError or InvalidValueError (an LdptelError) for a value the campaign refuses."""
    config = active.config
    if isinstance(config.kind, Breakdown):
        return config.kind.row_index(value)
    if config.open_domain:
        return config.open_value(value)
    if config.numeric:
        return number_of(value)
    return label_index(active, value)


def number_of(value: object) -> float:
    """A numeric campaign's number: any finite or infinite int or float (the mechanism clips
    it into the campaign's range), never NaN nor a bool."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueTypeError("value", f"must be a number, got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:  # an int (or Fraction) beyond a double: clipped as +-inf
        number = math.inf if value > 0 else -math.inf  # type: ignore[operator]
    if math.isnan(number):
        raise InvalidValueError("value", "must be a number, got NaN")
    return number


def label_index(active: Active, value: object) -> int:
    """A categorical campaign's label as its index in the domain (a label outside it counts
    as the campaign's other_label, if it has one)."""
    if not isinstance(value, str):
        raise ValueTypeError("value", f"must be a string label, got {type(value).__name__}")
    index = active.index.get(value)
    if index is None:
        config = active.config
        if config.other_label is None:
            raise InvalidValueError("value", f"not in the domain of campaign {config.name!r}")
        index = active.index[config.other_label]
    return index
