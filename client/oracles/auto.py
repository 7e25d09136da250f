"""`auto`: the oracle with the lowest exact variance for a campaign's (d, epsilon, size limit).

Every registered oracle whose estimate is exactly unbiased is built with its default
parameters; those whose report fits the size limit compete on the f_v = 0 term of their exact
per-report variance, and candidates within 2% of the best are ranked by client + server cost.
With Wang et al.'s formulas DE beats OUE/OLH below 3 e^eps + 2 categories (where
(d - 2 + e^eps) < 4 e^eps); Subset Selection is DE when its k rounds to 1 (d < 1.5 (e^eps+1),
where the tie goes to DE) and beats DE above that; past 3 e^eps + 2 it is SS / OUE / OLH / HR
by size and cost (OLH's 8-byte report and HR's 4-byte one under a tight size limit).
Apple's sketches (cms, hcms) are not candidates for a categorical campaign: their `variance`
is over the reports' randomness only, and a campaign's fixed public hash family adds a term
that depends on the other values' counts (SketchOracle.family_variance), so ranking them on
the same footing as the exact oracles would understate their error. On their report variance
alone they would lose anyway except CMS below eps ~ 0.5 and d above ~1,800: OUE's variance
times about cosh^2(eps/4) (m/(m-1))^2, within the 2% tie. (Their window state, k m = 2^20
cells at the defaults, is now a packed array: aggregator/state.py.)

An open-domain campaign (free text, no domain list) can only use an oracle whose report does
not depend on a list of labels: the sketches and OLH (OPEN_DOMAIN_ORACLES; OLH's window state
is then a log of its reports). There `auto` ranks them the same way (`choose_open_oracle`).
Per report and times (m/(m-1))^2 for the sketches: CMS has (c^2 - 1)/4 = e^(eps/2) /
(e^(eps/2) - 1)^2, HCMS c^2 with c = (e^eps + 1)/(e^eps - 1), and OLH 4 e^eps / (e^eps - 1)^2
at g = e^eps + 1 (Wang et al. 2017, eq. (2)): OLH / CMS = 4 e^(eps/2) / (e^(eps/2) + 1)^2 <= 1
(AM-GM), and OLH has no fixed-family term either. At the integer g = round(e^eps + 1) it
keeps the lowest variance from eps = 0.5 up (0.8% under CMS there, 58% at eps = 4); below
about 0.3 the three tie within 2% and the cheapest, HCMS, is chosen. So `auto` picks OLH
from eps ~ 0.5 unless the size limit excludes its 8-byte report (HCMS's is 5 bytes, CMS's
m/8 + 2). Its costs are
elsewhere, and recorded in the choice's reason (OLH_OPEN_COSTS): the state grows 6 bytes a
report, and a report hashes every logged report for every candidate.

The report size is the compact (stored) size of one report, sum of its fields' bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ldptel.client.errors import ParameterError
from ldptel.client.oracles.base import FrequencyOracle, WireMechanism, check_epsilon, check_int
from ldptel.client.oracles.catalogue import FREQUENCY_ORACLES, OPEN_DOMAIN_CLASSES

#: Candidates whose variance is within this factor of the best count as tied.
NEAR_TIE = 1.02

#: Work per report in "items touched", as (client, server) per item of the domain plus a
#: constant: a bit-vector report is counted a byte (8 items) at a time on the server, and
#: local hashing hashes every candidate for every report.
COSTS: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    "de": ((1, 0), (1, 0)),
    "hr": ((1, 0), (1, 0)),
    "olh": ((1, 0), (0, 1)),
    "blh": ((1, 0), (0, 1)),
    "oue": ((0, 1), (0, 1 / 8)),
    "sue": ((0, 1), (0, 1 / 8)),
    "ss": ((0, 1), (0, 1 / 8)),
    # The sketches at their default m = 1024: CMS draws and counts m bits, HCMS one.
    "cms": ((1024, 0), (128, 0)),
    "hcms": ((1, 0), (1, 0)),
}
#: The sketches: the oracles of open-domain campaigns `auto` chooses among, and not
#: candidates of a categorical one (see the module docstring).
OPEN_SKETCHES = ("cms", "hcms")
NOT_CANDIDATES = frozenset(OPEN_SKETCHES)
#: The oracles an open-domain campaign may name (their key mechanisms: OPEN_DOMAIN_CLASSES):
#: the sketches, and OLH with its window state a log of the reports (OpenDomainOLH).
OPEN_DOMAIN_ORACLES = (*OPEN_SKETCHES, "olh")
#: Oracles missing from COSTS touch every item on both sides.
DEFAULT_COST = ((0.0, 1.0), (0.0, 1.0))


@dataclass(frozen=True)
class Candidate:
    oracle: str
    variance: float  # Var[estimated count] / n at f_v = 0 (the worst item)
    report_bytes: int
    cost: float
    fits: bool


def cost(name: str, domain_size: int) -> float:
    """Client + server work per report (see COSTS)."""
    return sum(fixed + per_item * domain_size for fixed, per_item in COSTS.get(name, DEFAULT_COST))


def _categorical(name: str, epsilon: float, domain_size: int) -> tuple[WireMechanism, float]:
    """A categorical candidate and its largest variance per report at f_v = 0 (oracles that
    hash labels default to "0", "1", ...: base.default_labels)."""
    oracle = FREQUENCY_ORACLES[name](epsilon=epsilon, domain_size=domain_size)
    return oracle, float(np.max(oracle.variance(1)))


def _open(name: str, epsilon: float, domain_size: int) -> tuple[WireMechanism, float]:
    """An open-domain candidate (a key mechanism) and its variance per report of a candidate
    nobody holds (f_v = 0)."""
    mechanism = OPEN_DOMAIN_CLASSES[name](epsilon=epsilon)
    return mechanism, float(mechanism.key_variance(1, np.zeros(1))[0])


def choose_oracle(
    domain_size: int, epsilon: float, max_report_bytes: int | None = None
) -> dict[str, Any]:
    """The choice and the numbers behind it, JSON-ready (a campaign config can embed it):
    {"oracle", "params", "reason", "candidates": [{"oracle", "variance", "report_bytes",
    "cost", "fits"}, ...]}, where variance is Var[estimated count] / n at f_v = 0."""
    names = [
        name
        for name, cls in FREQUENCY_ORACLES.items()
        if name not in NOT_CANDIDATES and cls.exact_estimator
    ]
    d = check_int(domain_size, "domain_size", 2, 2**24)
    return _choose(names, d, epsilon, max_report_bytes, _categorical)


#: What choosing OLH for an open domain costs, in the choice's reason.
OLH_OPEN_COSTS = (
    "costs: its window state is the reports themselves, 6 bytes each (more than a default "
    "8 MiB sketch past about 1.4 million reports per window and shard), and a report with C "
    "candidates hashes every logged report C times; name cms for larger windows"
)


#: The open-domain choice's work per report (`cost`) is counted for this many candidates:
#: the choices stored in configs were, and a config keeps its id.
OPEN_COST_CANDIDATES = 2


def choose_open_oracle(epsilon: float, max_report_bytes: int | None = None) -> dict[str, Any]:
    """The choice of `choose_oracle` for an open-domain campaign, among its key mechanisms
    (OPEN_DOMAIN_CLASSES: no domain); "domain_size" is None. Choosing OLH, the reason states
    its costs (OLH_OPEN_COSTS)."""
    choice = _choose(
        list(OPEN_DOMAIN_ORACLES), OPEN_COST_CANDIDATES, epsilon, max_report_bytes, _open
    )
    choice["domain_size"] = None
    if choice["oracle"] == "olh":
        choice["reason"] += "; " + OLH_OPEN_COSTS
    return choice


def _choose(
    names: Sequence[str],
    d: int,
    epsilon: float,
    max_report_bytes: int | None,
    build: Callable[[str, float, int], tuple[WireMechanism, float]],
) -> dict[str, Any]:
    eps = check_epsilon(epsilon)
    limit = None if max_report_bytes is None else check_int(max_report_bytes, "max_report_bytes", 1)
    rows = []
    for name in names:
        oracle, variance = build(name, eps, d)
        size = sum(f.nbytes(1) for f in oracle.fields)
        fits = limit is None or size <= limit
        rows.append(Candidate(name, variance, size, cost(name, d), fits))
    rows.sort(key=lambda row: (row.variance, row.cost))
    fitting = [row for row in rows if row.fits]
    if not fitting:
        smallest = min(row.report_bytes for row in rows)
        raise ParameterError(
            "max_report_bytes", f"no oracle's report fits {limit} bytes (smallest: {smallest})"
        )
    tied = [row for row in fitting if row.variance <= fitting[0].variance * NEAR_TIE]
    chosen = min(tied, key=lambda row: (row.cost, row.variance))
    reason = (
        f"lowest variance at f_v = 0 ({chosen.variance:.6g} n)"
        if len(tied) == 1
        else f"cheapest (work per report {chosen.cost:g}) of {', '.join(r.oracle for r in tied)}, "
        f"within {NEAR_TIE - 1:.0%} of the lowest variance at f_v = 0 "
        f"({fitting[0].variance:.6g} n; {chosen.oracle}: {chosen.variance:.6g} n)"
    )
    if limit is not None:
        reason += f" among reports of at most {limit} bytes"
    return {
        "oracle": chosen.oracle,
        "params": {},
        "epsilon": eps,
        "domain_size": d,
        "max_report_bytes": limit,
        "reason": reason,
        "candidates": [asdict(row) for row in rows],
    }


class AutoOracle(FrequencyOracle):
    """`make_oracle("auto", ...)` builds the oracle `choose_oracle` picks (with its default
    parameters); the returned oracle carries the explanation as `auto_choice`."""

    name = "auto"
    takes_labels = True

    def __new__(  # type: ignore[misc]
        cls,
        *,
        epsilon: float,
        domain_size: int,
        max_report_bytes: int | None = None,
        labels: Sequence[str] | None = None,
    ) -> FrequencyOracle:
        choice = choose_oracle(domain_size, epsilon, max_report_bytes)
        chosen = FREQUENCY_ORACLES[choice["oracle"]]
        extra = {"labels": labels} if chosen.takes_labels and labels is not None else {}
        oracle = chosen(epsilon=epsilon, domain_size=domain_size, **extra)
        oracle.auto_choice = choice  # type: ignore[attr-defined]
        return oracle


#: The registry entry: AutoOracle is abstract (it is never itself instantiated), but calling
#: it builds a concrete oracle, which is all the registry needs of a class.
AUTO_ORACLE: type[FrequencyOracle] = AutoOracle  # type: ignore[type-abstract]
