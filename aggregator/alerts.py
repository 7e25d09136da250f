"""Alerts on estimates: per campaign, the latest complete window's estimates tested against
configured thresholds, and against the window before it for a significant change, each at a
stated false-alarm rate; aggregator/metrics.py exposes the outcome as Prometheus gauges and
deploy/prometheus/ldptel-alerts.yaml turns them into alerts (docs/operations.md, "Alerts").

The tests, per campaign and pair of windows:

- change: z = (p_t - p_{t-1}) / sqrt(se_t^2 + se_{t-1}^2) for every item estimated in both
  windows (p: the estimated share of the window's reports, or a numeric campaign's mean; se:
  its stated standard error). Fresh randomizations in two windows are independent, so z is
  about N(0, 1) when nothing changed; two-sided p-values. Under memoization (a report
  repeated, or the tree's shared prefix nodes) the windows' estimates are positively
  correlated, the difference varies less than se_t^2 + se_{t-1}^2 says, and the test only
  alarms less often.
- threshold: z = (p_t - T) / se_t, one-sided (an alarm means "significantly above T").

Each family (a campaign's items) is corrected by Holm's step-down, so the chance of any
false alarm in a campaign's window pair is at most `alpha` under any dependence between the
items. Only complete windows are tested: a growing window looked at on every pass would
be tested again and again, and the false-alarm rate would exceed alpha.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ldptel.aggregator.model import Report, WindowDocument, from_json
from ldptel.aggregator.typed_json import DocumentError
from ldptel.client.errors import ParameterError
from ldptel.store import reports
from ldptel.store.connection import RedisClient

#: The false-alarm rate per campaign and window pair when none is configured.
DEFAULT_ALPHA = 0.01
#: The item of a numeric campaign's mean.
MEAN = "mean"


@dataclass(frozen=True)
class AlertSettings:
    """The false-alarm rate and the thresholds: (campaign, item) -> the value an estimate
    must be significantly above to alarm (a share in [0, 1], or a numeric mean)."""

    alpha: float = DEFAULT_ALPHA
    thresholds: dict[tuple[str, str], float] = field(default_factory=dict)

    @classmethod
    def parse(cls, alpha: str, thresholds: str) -> AlertSettings:
        """From `LDPTEL_ALERT_ALPHA` and `LDPTEL_ALERT_THRESHOLDS` (`CAMPAIGN:ITEM=VALUE`,
        comma-separated; the item is a domain item, or `mean` for a numeric campaign); an
        empty alpha is the default."""
        try:
            rate = float(alpha) if alpha.strip() else DEFAULT_ALPHA
        except ValueError:
            raise ParameterError("alert_alpha", "must be a number") from None
        if not 0 < rate < 1:
            raise ParameterError("alert_alpha", "must be in (0, 1)")
        parsed: dict[tuple[str, str], float] = {}
        for rule in filter(None, (part.strip() for part in thresholds.split(","))):
            target, equals, value = rule.rpartition("=")
            campaign, colon, item = target.partition(":")
            if not (equals and colon and campaign and item):
                raise ParameterError(
                    "alert_thresholds", f"expected CAMPAIGN:ITEM=VALUE, got {rule!r}"
                )
            try:
                parsed[campaign, item] = float(value)
            except ValueError:
                raise ParameterError("alert_thresholds", f"{value!r} is not a number") from None
        return cls(rate, parsed)


@dataclass(frozen=True)
class Estimate:
    """One item of a window: the estimated share (or mean) and its standard error."""

    value: float
    stderr: float


@dataclass(frozen=True)
class ItemAlert:
    """One item's tests in the latest complete window."""

    item: str
    estimate: float
    stderr: float
    #: The change from the previous window in standard errors (None: not in both windows).
    change_z: float | None = None
    changed: bool = False
    threshold: float | None = None
    exceeded: bool = False


@dataclass(frozen=True)
class CampaignAlerts:
    """A campaign's latest complete window (and the one before, if any) and its items."""

    campaign: str
    window: int
    previous: int | None
    items: list[ItemAlert]


def estimates(document: WindowDocument) -> dict[str, Estimate]:
    """Item -> estimate of a window's main report (level "": the only one, or the levels
    combined; the config with the most reports if the config changed within the window).
    Empty while it has too few reports, and for a report whose stderr is not calibrated
    (full RAPPOR's LASSO selection): a z test on it would not hold its rate."""
    main = [r for r in document["reports"] if r["level"] == "" and r["status"] == "ok"
            and "uncalibrated" not in r]  # fmt: skip
    if not main:
        return {}
    report: Report = max(main, key=lambda r: r["n"])
    if "numeric" in report:
        mean = report["numeric"]["mean"]
        return {MEAN: Estimate(mean["estimate"], mean["stderr"])}
    n = report["n"]
    return {i["item"]: Estimate(i["estimate"] / n, i["stderr"] / n) for i in report["items"]}


def normal_tail(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def holm(p_values: list[float], alpha: float) -> list[bool]:
    """Holm's step-down: which hypotheses are rejected, with family-wise error <= alpha."""
    rejected = [False] * len(p_values)
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    for rank, index in enumerate(order):
        if p_values[index] > alpha / (len(p_values) - rank):
            break
        rejected[index] = True
    return rejected


def change_z(current: Estimate, previous: Estimate) -> float | None:
    """The difference of two independent estimates in standard errors (None: no spread)."""
    spread = math.hypot(current.stderr, previous.stderr)
    return (current.value - previous.value) / spread if spread > 0 else None


def change_tests(
    current: dict[str, Estimate], previous: dict[str, Estimate], alpha: float
) -> dict[str, tuple[float, bool]]:
    """Item -> (z, significant) for every item with a spread in both windows: two-sided
    p-values, Holm across the items."""
    changes = {item: change_z(e, previous[item]) for item, e in current.items() if item in previous}
    tested = {item: z for item, z in changes.items() if z is not None}
    p_values = [2 * normal_tail(abs(z)) for z in tested.values()]
    significant = holm(p_values, alpha)
    return {item: (z, flag) for (item, z), flag in zip(tested.items(), significant, strict=True)}


def threshold_tests(
    current: dict[str, Estimate], limits: dict[str, float], alpha: float
) -> dict[str, bool]:
    """Item -> whether it is significantly above its limit: one-sided p-values, Holm."""
    tested = [item for item in limits if item in current and current[item].stderr > 0]
    p_values = [normal_tail((current[i].value - limits[i]) / current[i].stderr) for i in tested]
    return dict(zip(tested, holm(p_values, alpha), strict=True))


def evaluate(
    campaign: str,
    current: dict[str, Estimate],
    previous: dict[str, Estimate],
    settings: AlertSettings,
) -> list[ItemAlert]:
    """Every item's change test (against `previous`) and threshold test."""
    changes = change_tests(current, previous, settings.alpha)
    limits = {i: t for (c, i), t in settings.thresholds.items() if c == campaign and i in current}
    exceeded = threshold_tests(current, limits, settings.alpha)
    alerts = []
    for item, estimate in current.items():
        z, changed = changes.get(item, (None, False))
        alerts.append(ItemAlert(item, estimate.value, estimate.stderr, z, changed,
                                limits.get(item), exceeded.get(item, False)))  # fmt: skip
    return alerts


def complete_documents(client: RedisClient, name: str, now: float) -> list[WindowDocument]:
    """The stored documents of a campaign's last two complete windows, oldest first."""
    stored = list(reports.versions(client, name))[-3:]  # the current window, maybe, and two
    complete: list[WindowDocument] = []
    for raw in reports.load_many(client, name, stored):
        try:
            document = None if raw is None else from_json(raw)
        except DocumentError:  # written by another version: no estimates to alert on
            continue
        if document is not None:
            window = document["window"]
            if window["start_unix"] + window["seconds"] <= now:
                complete.append(document)
    return complete[-2:]


def campaign_alerts(
    client: RedisClient, name: str, settings: AlertSettings, now: float
) -> CampaignAlerts | None:
    """The tests of a campaign's latest complete window with a stored report (None: none)."""
    documents = complete_documents(client, name, now)
    if not documents:
        return None
    *before, latest = documents
    previous = estimates(before[0]) if before else {}
    items = evaluate(name, estimates(latest), previous, settings)
    start = before[0]["window"]["start_unix"] if before else None
    return CampaignAlerts(name, latest["window"]["start_unix"], start, items)
