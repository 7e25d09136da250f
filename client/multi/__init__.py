"""Breakdowns: one report per user over several categorical attributes, from which every
one-way and two-way marginal (cross-tab) is estimated without bias (docs/breakdowns.md)."""

from ldptel.client.multi.attributes import Attributes
from ldptel.client.multi.auto import Choice, choose_breakdown
from ldptel.client.multi.catalog import BREAKDOWNS
from ldptel.client.multi.consistency import ConsistentMarginals, make_consistent
from ldptel.client.multi.hadamard import HadamardBreakdown
from ldptel.client.multi.mechanisms import Breakdown, JointBreakdown, Marginal, PairsBreakdown
from ldptel.client.multi.split import SplitBreakdown

__all__ = [
    "BREAKDOWNS",
    "Attributes",
    "Breakdown",
    "Choice",
    "ConsistentMarginals",
    "HadamardBreakdown",
    "JointBreakdown",
    "Marginal",
    "PairsBreakdown",
    "SplitBreakdown",
    "choose_breakdown",
    "make_consistent",
]
