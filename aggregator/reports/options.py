"""How window reports are built (ReportOptions), the candidates an open-domain report
estimates, and the statuses every report carries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ldptel.aggregator.consistency import ALIASES, METHODS
from ldptel.client.errors import ParameterError

OK: Final = "ok"
NOT_ENOUGH: Final = "not_enough_reports"


@dataclass(frozen=True)
class ReportOptions:
    """How reports are built."""

    consistency: str = "norm-sub"
    #: Below this many reports a window says "not enough reports" instead of numbers.
    min_reports: int = 100
    confidence: float = 0.95
    #: Expected number of items wrongly flagged significant over the whole domain.
    false_flags: float = 0.05

    def __post_init__(self) -> None:
        if ALIASES.get(self.consistency, self.consistency) not in METHODS:
            known = ", ".join((*METHODS, *ALIASES))
            raise ParameterError("consistency", f"unknown method; known: {known}")
        if self.min_reports < 1:
            raise ParameterError("min_reports", "must be >= 1")
        if not 0 < self.confidence < 1:
            raise ParameterError("confidence", "must be in (0, 1)")
        if not 0 < self.false_flags < 1:
            raise ParameterError("false_flags", "must be in (0, 1)")


@dataclass(frozen=True)
class Candidates:
    """The strings an open-domain report estimates (checked and deduplicated by
    ldptel.client.campaign.check_candidates), and where they came from."""

    values: tuple[str, ...] = ()
    source: str = "none"
