"""Every breakdown mechanism by its config name (docs/breakdowns.md, "Mechanisms")."""

from __future__ import annotations

from ldptel.client.multi.hadamard import HadamardBreakdown
from ldptel.client.multi.mechanisms import Breakdown, JointBreakdown, PairsBreakdown
from ldptel.client.multi.split import SplitBreakdown

BREAKDOWNS: dict[str, type[Breakdown]] = {
    "joint": JointBreakdown,
    "pairs": PairsBreakdown,
    "split": SplitBreakdown,
    "hadamard": HadamardBreakdown,
}
