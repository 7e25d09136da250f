"""The campaign pages and their downloads: the campaign list, a campaign's windows, trends
with confidence bands and the change between two windows, as HTML, CSV and JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, timezone
from html import escape
from typing import TypedDict

from flask import Blueprint, Response, request

from ldptel.aggregator.csv_export import write_csv
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.dashboard import breakdown_pages, pages
from ldptel.dashboard.change import Change, change
from ldptel.dashboard.charts import TrendPoint
from ldptel.dashboard.context import current
from ldptel.dashboard.series import Numbers, WindowNumbers, trend, views
from ldptel.dashboard.window_charts import clipped
from ldptel.dashboard.window_view import window_section
from ldptel.store.reports import iso

#: Trends drawn at once (each is a chart and a table).
MAX_ITEMS = 12
#: Items whose trend is drawn when none is selected: the largest in the latest window.
DEFAULT_ITEMS = 3
DAY = 86_400

blueprint = Blueprint("campaign_pages", __name__)


class NotFoundError(ParameterError):
    """A campaign or window that does not exist (404)."""


@dataclass(frozen=True)
class View:
    """A campaign page's data: its config, the stored windows shown, the chosen view and
    the two windows compared (their numbers as stored: counts, or a numeric mean)."""

    config: CampaignConfig
    windows: list[WindowNumbers]
    selection: pages.Selection
    levels: tuple[str, ...]
    before: Numbers | None
    after: Numbers | None

    @property
    def starts(self) -> list[int]:
        """The windows holding a report of the shown level."""
        return [w.window for w in self.windows if self.selection.level in w.by_level]

    @property
    def numeric(self) -> bool:
        return self.config.range is not None

    @property
    def unit(self) -> str:
        if self.numeric:
            return "mean"
        return "% of reports" if self.selection.scale == "percent" else "estimated count"

    def scaled(self, numbers: Numbers | None) -> Numbers | None:
        """`numbers` in the page's unit."""
        if numbers is None or self.selection.scale != "percent":
            return numbers
        return numbers.percent()

    def change(self) -> Change | None:
        before, after = self.scaled(self.before), self.scaled(self.after)
        if before is None or after is None or self.before is self.after:
            return None
        return change(before, after)

    def trends(self) -> dict[str, list[TrendPoint]]:
        """The selected items' trends in the page's unit (the downloads' numbers)."""
        found = {
            item: trend(self.windows, self.selection.level, item) for item in self.selection.items
        }
        if self.selection.scale != "percent":
            return found
        return {item: [percent_point(p) for p in points] for item, points in found.items()}

    def drawn(self) -> dict[str, list[TrendPoint]]:
        """The trends as drawn: a numeric mean's interval clipped to the campaign's range,
        and no consistent value (a mean has none)."""
        if self.config.range is None:
            return self.trends()
        bounds = self.config.range
        return {
            item: [clipped_point(p, bounds) for p in points]
            for item, points in self.trends().items()
        }


def percent_point(point: TrendPoint) -> TrendPoint:
    """A trend point as a percent of its window's n (its stderr and interval scaled)."""
    if point.estimate is None or not point.n:
        return point
    factor = 100.0 / point.n
    return replace(
        point,
        estimate=point.estimate * factor,
        stderr=(point.stderr or 0.0) * factor,
        ci_low=(point.ci_low or 0.0) * factor,
        ci_high=(point.ci_high or 0.0) * factor,
        consistent=(point.consistent or 0.0) * factor,
    )


def clipped_point(point: TrendPoint, bounds: tuple[float, float]) -> TrendPoint:
    if point.estimate is None:
        return point
    low, high = clipped(point.ci_low or 0.0, point.ci_high or 0.0, bounds)
    return replace(point, ci_low=low, ci_high=high, consistent=None)


class TrendRow(TypedDict):
    """A trend download's row: one item in one window (numbers None: not plotted)."""

    item: str
    window: int
    window_start: str
    level: str
    unit: str
    config_id: str
    n: int
    status: str
    estimate: float | None
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    consistent: float | None


class ChangeRow(TypedDict):
    """A change download's row: one item's change between the two windows."""

    item: str
    before: float
    after: float
    difference: float
    stderr: float
    z: float
    significant: bool


def render_page(title: str, body: str, script: str = "", footer: str = "list") -> str:
    return pages.page(
        title, body, "/", script, sign_out=current().expected is not None,
        footer=pages.FOOTERS[footer],
    )  # fmt: skip


@blueprint.get("/")
def campaign_list() -> str:
    rows = [campaign_row(name) for name in current().registry.names()]
    body = pages.campaign_list(rows, "/campaigns/{name}")
    return render_page("ldptel campaigns", body)


def campaign_row(name: str) -> pages.CampaignRow:
    config = current_config(name)
    windows = current().campaigns.windows(name)
    return pages.CampaignRow(
        name=name,
        oracle=config.oracle,
        epsilon=config.epsilon,
        domain=domain_text(config),
        levels=tuple(f"{k} {v:.3g}" for k, v in config.levels.items()),
        windows=len(windows),
        latest=windows[-1].by_level.get("") if windows else None,
        last_built=max((w.built_at for w in windows), default="never"),
    )


def current_config(name: str) -> CampaignConfig:
    config = current().registry.current_config(name)
    if config is None:
        raise NotFoundError("campaign", f"unknown campaign {name!r}")
    return config


def view(name: str) -> View:
    config = current_config(name)
    selection = pages.Selection("", (), None, None, "", *view_arguments(config))
    windows = shown_windows(current().campaigns.windows(name), selection)
    levels = sorted({level for w in windows for level in w.by_level} - {""})
    level = request.args.get("level", "")
    if level and level not in levels:
        raise ParameterError("level", f"no reports of level {level!r}")
    shown = [w.by_level[level] for w in windows if level in w.by_level]
    by_start = {n.window: n for n in shown}
    after = window_argument("to", by_start, shown[-1] if shown else None)
    before = window_argument("from", by_start, shown[-2] if len(shown) > 1 else after)
    items = tuple(dict.fromkeys(request.args.getlist("items")))
    if len(items) > MAX_ITEMS:
        raise ParameterError("items", f"at most {MAX_ITEMS} at once")
    if not items and after is not None and after.ok:
        top = sorted(range(len(after.items)), key=lambda i: -after.estimate[i])
        items = tuple(after.items[i] for i in top[:DEFAULT_ITEMS])
    search = request.args.get("q", "")
    if len(search) > 200:
        raise ParameterError("q", "at most 200 characters")
    selection = replace(
        selection,
        level=level,
        items=items,
        before=None if before is None else before.window,
        after=None if after is None else after.window,
        search=search,
    )
    return View(config, windows, selection, tuple(levels), before, after)


def view_arguments(config: CampaignConfig) -> tuple[str, str, str, str]:
    """The unit and the windows shown: (scale, period, since, until), checked."""
    scale = request.args.get("scale") or "count"
    if scale not in pages.SCALES:
        raise ParameterError("scale", f"one of {', '.join(pages.SCALES)}")
    if scale == "percent" and config.range is not None:
        raise ParameterError("scale", "a numeric campaign's mean has no percent view")
    period = request.args.get("period", "")
    if period not in pages.PERIODS:
        raise ParameterError("period", f"one of {', '.join(p for p in pages.PERIODS if p)}")
    since, until = request.args.get("since", ""), request.args.get("until", "")
    if period and (since or until):
        raise ParameterError("period", "either a relative period or dates (since, until)")
    for field, text in (("since", since), ("until", until)):
        if text:
            day_start(field, text)
    return scale, period, since, until


def day_start(field: str, text: str) -> int:
    """Unix seconds of a YYYY-MM-DD date's midnight (UTC)."""
    try:
        day = date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        day = None
    if day is None:
        raise ParameterError(field, "a date as YYYY-MM-DD (UTC)")
    return int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp())


def shown_windows(windows: list[WindowNumbers], selection: pages.Selection) -> list[WindowNumbers]:
    """The windows of the chosen span: those starting in the last `period` days before now
    (the dashboard's clock), or between the dates (both included)."""
    low, high = -math.inf, math.inf
    if selection.period:
        low = current().clock() - int(selection.period[:-1]) * DAY
    if selection.since:
        low = day_start("since", selection.since)
    if selection.until:
        high = day_start("until", selection.until) + DAY
    return [w for w in windows if low <= w.window < high]


def window_argument(
    field: str, by_start: dict[int, Numbers], default: Numbers | None
) -> Numbers | None:
    """A compared window: one of the shown windows (a stored window outside the span shown,
    as the form sends after the span changed, is the default)."""
    text = request.args.get(field)
    if text is None:
        return default
    if not (text.isascii() and text.isdigit()):
        raise ParameterError(field, "not a stored window of this view (unix seconds)")
    if int(text) not in by_start:
        if int(text) in stored_starts():
            return default
        raise ParameterError(field, "not a stored window of this view (unix seconds)")
    return by_start[int(text)]


def stored_starts() -> set[int]:
    name = request.view_args["name"] if request.view_args else ""
    return {w.window for w in current().campaigns.windows(name)}


@blueprint.get("/campaigns/<name>")
def campaign_page(name: str) -> str:
    if breakdown_pages.is_breakdown(config := current_config(name)):  # its own page
        body = breakdown_pages.body(name, config)
        return render_page(name, body, breakdown_pages.SCRIPT, "breakdown")
    shown = view(name)
    selection = shown.selection
    report = None
    if shown.after is not None:
        held = next(w for w in shown.windows if w.window == shown.after.window)
        document = current().campaigns.document(name, held.window, held.version)
        report = None if document is None else views(document).get(selection.level)
    found = shown.change()
    base = f"/campaigns/{name}"
    query = selection.query()
    after = shown.scaled(shown.after)
    latest = selection.after == max(shown.starts, default=None)
    body = "".join(
        [
            f'<p class="meta">{escape(meta_line(shown))}</p>',
            window_section(report, shown.after, after, latest, shown.unit),
            f'<form method="get" action="{escape(base)}" class="view">',
            pages.controls(selection, shown.levels, shown.starts, shown.numeric),
            pages.trends_section(
                shown.drawn(),
                shown.after.confidence if shown.after else 0.95,
                shown.unit,
                shown.numeric,
                pages.download_links(f"{base}/trend", query, "trends"),
            ),
            pages.change_html(found, shown.before, after, shown.unit),
            pages.items_section(
                after,
                found,
                selection,
                shown.unit,
                pages.download_links(f"{base}/change", query, "items and changes"),
            ),
            "</form>",
        ]
    )
    kind = "numeric" if shown.numeric else "open" if shown.config.open_domain else "categorical"
    return render_page(name, body, pages.FILTER_SCRIPT, kind)


@blueprint.get("/campaigns/<name>/trend.<kind>")
def trend_download(name: str, kind: str) -> Response:
    if breakdown_pages.is_breakdown(config := current_config(name)):  # one row per cell
        cells, about = breakdown_pages.trend_rows(name, config)
        return download(cells, kind, f"{name}-trend", about)
    shown = view(name)
    rows = [
        trend_row(item, shown.selection.level, shown.unit, point)
        for item, points in shown.trends().items()
        for point in points
    ]
    about = {"campaign": name, "level": shown.selection.level, "unit": shown.unit}
    return download(rows, kind, f"{name}-trend", about)


@blueprint.get("/campaigns/<name>/change.<kind>")
def change_download(name: str, kind: str) -> Response:
    shown = view(name)
    found = shown.change()
    if found is None:
        raise ParameterError("from", "two different windows with reports are needed")
    search = shown.selection.search.lower()
    rows = [change_row(found, i) for i, item in enumerate(found.items) if search in item.lower()]
    about = {
        "campaign": name,
        "level": shown.selection.level,
        "from": shown.selection.before,
        "to": shown.selection.after,
        "threshold": None if math.isinf(found.threshold) else found.threshold,
        "expected_false_flags": found.false_flags,
        "untested": found.untested,
        "unit": shown.unit,
    }
    return download(rows, kind, f"{name}-change", about)


def domain_text(config: CampaignConfig) -> str:
    """What a campaign's reports are about: a numeric range, an open domain's longest value,
    or the domain's size."""
    if config.range is not None:
        low, high = config.range
        return f"range [{low:g}, {high:g}]"
    if config.max_length is not None:
        return f"free text, max_length {config.max_length} bytes"
    return f"{config.domain_size:,} items"


def meta_line(shown: View) -> str:
    config = shown.config
    return (
        f"{config.oracle.upper()}, epsilon {config.epsilon:.3g}, {domain_text(config)}, "
        f"{len(shown.windows):,} windows stored"
    )


def trend_row(item: str, level: str, unit: str, point: TrendPoint) -> TrendRow:
    return {
        "item": item,
        "window": point.window,
        "window_start": iso(point.window),
        "level": level,
        "unit": unit,
        "config_id": point.config_id,
        "n": point.n,
        "status": point.status,
        "estimate": point.estimate,
        "stderr": point.stderr,
        "ci_low": point.ci_low,
        "ci_high": point.ci_high,
        "consistent": point.consistent,
    }


def change_row(found: Change, i: int) -> ChangeRow:
    return {
        "item": found.items[i],
        "before": float(found.before[i]),
        "after": float(found.after[i]),
        "difference": float(found.difference[i]),
        "stderr": float(found.stderr[i]),
        "z": float(found.z[i]),
        "significant": bool(found.significant[i]),
    }


def download(
    rows: list[TrendRow] | list[ChangeRow] | list[breakdown_pages.CellRow],
    kind: str,
    stem: str,
    about: Mapping[str, object],
) -> Response:
    """Rows as CSV (one header line; floats in full precision) or JSON (with `about`)."""
    disposition = {"Content-Disposition": f'attachment; filename="{stem}.{kind}"'}
    if kind == "json":
        body = json.dumps({**about, "rows": rows}, separators=(",", ":"))
        return Response(body, mimetype="application/json", headers=disposition)
    if kind != "csv":
        raise ParameterError("format", "must be .csv or .json")
    text = write_csv(list(rows[0]), [list(row.values()) for row in rows]) if rows else ""
    return Response(text, mimetype="text/csv", headers=disposition)
