"""What the dashboard reads: a campaign's stored window documents (ldptel.store.reports),
reduced per window to the columns the pages draw, and cached per process by the version the
store's index gives each document (a rebuilt window is read again; the others are not).

A window document holds one report per (config, privacy level); the dashboard shows one
*view* at a time: the level ("" = the combined report of a config with levels, or the only
report of one without). If a window holds that level for two configs (the campaign's config
changed inside the window), the report with more reports is shown and its config id said.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from ldptel.aggregator.model import Item, Report, WindowDocument, from_json
from ldptel.aggregator.reports import OK, ReportOptions, privacy_sentences
from ldptel.dashboard.charts import TrendPoint
from ldptel.store import reports
from ldptel.store.connection import REDIS_ERRORS, RedisClient
from ldptel.store.reports import iso

#: Documents read per round trip on a cold cache.
LOAD_CHUNK = 32


@dataclass(frozen=True)
class Numbers:
    """One report of one window as columns (position = the item's place in `items`)."""

    window: int
    level: str
    config_id: str
    oracle: str
    epsilon: float
    memoization: str
    status: str
    message: str
    n: int
    confidence: float
    consistency: str
    false_flags: float
    items: tuple[str, ...]
    estimate: NDArray[np.float64]
    variance: NDArray[np.float64]
    ci_low: NDArray[np.float64]
    ci_high: NDArray[np.float64]
    consistent: NDArray[np.float64]
    significant: NDArray[np.bool_]
    #: "categorical", "open" (an open-domain report: the strings it lists) or "numeric".
    kind: str
    #: A numeric report's range (its mean's interval is drawn clipped to it), else None.
    bounds: tuple[float, float] | None
    #: The report's privacy statement in words (aggregator/reports/privacy.py, privacy_sentences).
    privacy: tuple[str, ...]
    #: Label -> position (one dict per domain, shared by the windows of a config).
    positions: dict[str, int]

    @property
    def ok(self) -> bool:
        return self.status == OK

    def position(self, item: str) -> int | None:
        """Where `item` is in the columns (None: not in this report's domain)."""
        return self.positions.get(item)

    def scaled(self, factor: float) -> Numbers:
        """Every estimate times `factor` (a constant: its variance times factor^2), e.g.
        100 / n for the percent of the window's reports: n is known exactly, so the scaled
        interval is the interval scaled and the same test holds."""
        return replace(
            self,
            estimate=self.estimate * factor,
            variance=self.variance * factor**2,
            ci_low=self.ci_low * factor,
            ci_high=self.ci_high * factor,
            consistent=self.consistent * factor,
        )

    def percent(self) -> Numbers:
        """The estimates as a percent of the window's reports (n = 0: unchanged)."""
        return self.scaled(100.0 / self.n) if self.n else self


def window_label(start: int) -> str:
    """A window's start for people: the date, with the time unless it is midnight (UTC)."""
    text = iso(start)
    return text[:10] if text.endswith("T00:00:00Z") else text[:16].replace("T", " ")


Domains = dict[tuple[str, ...], tuple[tuple[str, ...], dict[str, int]]]


#: A numeric campaign's one "item": the mean, so trends and changes treat it as any item.
MEAN = "mean"


def _items(report: Report) -> list[Item]:
    """The report's items; a numeric report's mean as the one item MEAN (none while n <
    min_reports), so its trend, CI band and change follow the categorical rules."""
    numeric = report.get("numeric")
    if numeric is None:
        return report["items"]
    mean = numeric["mean"]
    item: Item = {
        "item": MEAN, "index": 0, "estimate": mean["estimate"], "variance": mean["variance"],
        "stderr": mean["stderr"], "ci_low": mean["ci_low"], "ci_high": mean["ci_high"],
        "consistent": mean["estimate"], "threshold": math.inf, "significant": False,
    }  # fmt: skip
    return [item]


def false_flags(report: Report) -> float:
    """The report's expected false flags; a numeric report flags nothing itself, so its
    mean's change is tested at the aggregator's default rate."""
    significance = report.get("significance")
    if significance is None:
        return ReportOptions().false_flags
    return significance["expected_false_flags"]


def kind_of(report: Report) -> str:
    """What a report estimates: "numeric" (a mean), "open" (listed strings) or
    "categorical"."""
    if "numeric" in report:
        return "numeric"
    return "open" if "discovery" in report else "categorical"


def numbers(report: Report, domains: Domains) -> Numbers:
    """A report as columns; `domains` interns equal item tuples (and their positions)."""
    items = _items(report)
    numeric = report.get("numeric")

    def column(field: str) -> NDArray[np.float64]:
        return np.fromiter((item[field] for item in items), np.float64, len(items))  # type: ignore[literal-required]

    labels = tuple(item["item"] for item in items)
    if labels not in domains:
        domains[labels] = (labels, {item: i for i, item in enumerate(labels)})
    labels, positions = domains[labels]
    longitudinal = report["privacy"].get("longitudinal")
    return Numbers(
        window=report["window"]["start_unix"],
        level=report["level"],
        config_id=report["config_id"],
        oracle=report["oracle"],
        epsilon=report["epsilon"],
        memoization=longitudinal["memoization"] if longitudinal else "none",
        status=report["status"],
        message=report["message"],
        n=report["n"],
        confidence=report["confidence"],
        consistency=report["consistency"],
        false_flags=false_flags(report),
        items=labels,
        estimate=column("estimate"),
        variance=column("variance"),
        ci_low=column("ci_low"),
        ci_high=column("ci_high"),
        consistent=column("consistent"),
        significant=np.fromiter((item["significant"] for item in items), np.bool_, len(items)),
        kind=kind_of(report),
        bounds=None if numeric is None else (numeric["low"], numeric["high"]),
        privacy=tuple(privacy_sentences(report)),
        positions=positions,
    )


def views(document: WindowDocument) -> dict[str, Report]:
    """Level -> the report shown for it (the one with more reports if two configs hold it)."""
    chosen: dict[str, Report] = {}
    for report in document["reports"]:
        held = chosen.get(report["level"])
        if held is None or report["n"] > held["n"]:
            chosen[report["level"]] = report
    return chosen


@dataclass(frozen=True)
class WindowNumbers:
    """A stored window: its start, its document's version and its reports as columns, by
    level."""

    window: int
    version: int
    built_at: str
    by_level: dict[str, Numbers]


class Versioned(Protocol):
    @property
    def version(self) -> int: ...


Held = TypeVar("Held", bound=Versioned)


class WindowCache(Generic[Held]):
    """Per (campaign, window) what `build(window, document, version)` makes of a stored
    document, kept while the
    store's index gives the document the same version (thread-safe: one lock)."""

    def __init__(
        self, client: RedisClient, build: Callable[[int, bytes, int], Held | None]
    ) -> None:
        self.client, self.build = client, build
        self._lock = threading.Lock()
        self._windows: dict[tuple[str, int], Held] = {}

    def windows(self, name: str) -> list[Held]:
        """Every stored window of a campaign that `build` keeps, oldest first; only new or
        rebuilt documents are read from Redis, LOAD_CHUNK per round trip (a year of
        documents of 1,000 items is ~90 MB: never all in one reply)."""
        versions = reports.versions(self.client, name)
        with self._lock:
            stale = [
                window
                for window, version in versions.items()
                if (held := self._windows.get((name, window))) is None or held.version != version
            ]
        fresh = {}
        for start in range(0, len(stale), LOAD_CHUNK):
            chunk = stale[start : start + LOAD_CHUNK]
            for window, raw in zip(chunk, reports.load_many(self.client, name, chunk), strict=True):
                built = None if raw is None else self.build(window, raw, versions[window])
                if built is not None:
                    fresh[window] = built
        with self._lock:
            self._windows.update(((name, w), built) for w, built in fresh.items())
            return [w for v in versions if (w := self._windows.get((name, v))) is not None]


class Campaigns:
    """Reads and caches the stored documents of every campaign (thread-safe)."""

    def __init__(self, client: RedisClient) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._domains: Domains = {}
        self._windows = WindowCache(client, self._numbers)
        #: The last full document read per campaign, with its window and version.
        self._documents: dict[str, tuple[int, int, WindowDocument]] = {}

    def document(self, name: str, window: int, version: int) -> WindowDocument | None:
        """One stored document, checked against the model (the latest window's chart); the
        campaign's last one is kept while its version holds."""
        with self._lock:
            held = self._documents.get(name)
        if held is not None and held[:2] == (window, version):
            return held[2]
        raw = reports.load(self.client, name, window)
        if raw is None:
            return None
        document = from_json(raw)
        with self._lock:
            self._documents[name] = (window, version, document)
        return document

    def warm(self, names: list[str]) -> None:
        """Read every campaign's documents into the cache (a Redis error leaves it for the
        pages to try again)."""
        try:
            for name in names:
                self.windows(name)
        except REDIS_ERRORS:
            return

    def windows(self, name: str) -> list[WindowNumbers]:
        """Every stored window of a campaign, oldest first (WindowCache)."""
        return self._windows.windows(name)

    def _numbers(self, window: int, raw: bytes, version: int) -> WindowNumbers:
        document = from_json(raw)
        by_level = {
            level: numbers(report, self._domains) for level, report in views(document).items()
        }
        return WindowNumbers(window, version, document["built_at"], by_level)


def trend(windows: list[WindowNumbers], level: str, item: str) -> list[TrendPoint]:
    """An item across windows, oldest first: numbers where the window's report of `level`
    has enough reports and holds the item, else the status (not plotted)."""
    points = []
    for held in windows:
        report = held.by_level.get(level)
        if report is None:
            continue
        position = report.position(item)
        window, label = report.window, window_label(report.window)
        if not report.ok or position is None:
            status = report.status if not report.ok else "item not in this window's domain"
            points.append(TrendPoint(window, label, report.config_id, report.n, status))
            continue
        points.append(
            TrendPoint(
                window,
                label,
                report.config_id,
                report.n,
                report.status,
                estimate=float(report.estimate[position]),
                stderr=math.sqrt(report.variance[position]),
                ci_low=float(report.ci_low[position]),
                ci_high=float(report.ci_high[position]),
                consistent=float(report.consistent[position]),
            )
        )
    return points
