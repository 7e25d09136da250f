"""A breakdown campaign's page and trend download (dashboard/campaign_pages.py hands them
over): the analyst picks two attributes (`rows`, `columns`) and a window (`to`) and sees
that pair's cross-tab, each cell's unbiased estimate with its interval, shaded, with the two
attributes' one-way marginals beside it; then one cell (`cell=ios|pro`, default the largest)
and its trend over the campaign's windows, drawn as every trend of the dashboard. GET
parameters only, so every view has a URL and works without scripts; breakdown.js (a file of
this origin: the CSP allows no inline script) keeps the two attributes different."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from importlib import resources
from typing import TypedDict, cast
from urllib.parse import urlencode

from flask import Blueprint, Response, current_app, request
from flask.blueprints import BlueprintSetupState

from ldptel.aggregator.breakdown_html import SHADES, one_way_html
from ldptel.aggregator.csv_export import ATTRIBUTE_JOIN, VALUE_JOIN
from ldptel.aggregator.model import BreakdownCell, Report
from ldptel.aggregator.reports import NOT_ENOUGH
from ldptel.aggregator.table import count_text
from ldptel.client.campaign import CampaignConfig
from ldptel.client.campaign_kinds import Breakdown
from ldptel.client.errors import ParameterError
from ldptel.dashboard import context, pages
from ldptel.dashboard.breakdown_series import (
    CellSeries,
    CellWindow,
    CrossTab,
    Pick,
    cell_key,
    cross_tab,
    marginal_of,
    parse_cell,
    pick_pair,
)
from ldptel.dashboard.charts import TrendPoint, config_changes, responsive, trend_svg
from ldptel.dashboard.series import views, window_label
from ldptel.dashboard.window_view import privacy, tiles
from ldptel.store.reports import iso

EXTENSION = "ldptel.dashboard.breakdowns"
#: What the trend's y axis shows (as a categorical campaign's counts).
UNIT = "estimated count"
#: The page's own stylesheet and script (files of this origin, served below).
STYLE = '<link rel="stylesheet" href="/assets/breakdown.css">'
SCRIPT = '<script src="/assets/breakdown.js"></script>'

#: The trend's note when its windows come from more than one config.
CONFIG_CHANGED = (
    " Dashed line: the campaign's config changed between two windows (its id is in the numbers "
    "and the downloads); estimates either side come from different configs."
)

blueprint = Blueprint("breakdown_pages", __name__)


@blueprint.record_once
def _cells(state: BlueprintSetupState) -> None:
    """The app's cache of breakdown cells, beside its Dashboard (set before blueprints)."""
    dashboard: context.Dashboard = state.app.extensions[context.EXTENSION]
    state.app.extensions[EXTENSION] = CellSeries(dashboard.campaigns.client)


def cells() -> CellSeries:
    series: CellSeries = current_app.extensions[EXTENSION]
    return series


def asset(name: str) -> str:
    return resources.files("ldptel.dashboard").joinpath(name).read_text()


@blueprint.get("/assets/breakdown.css")
def stylesheet() -> Response:
    return Response(asset("breakdown.css"), mimetype="text/css")


@blueprint.get("/assets/breakdown.js")
def script() -> Response:
    return Response(asset("breakdown.js"), mimetype="text/javascript")


def is_breakdown(config: CampaignConfig) -> bool:
    return isinstance(config.kind, Breakdown)


class CellRow(TypedDict):
    """A breakdown trend download's row: one cell in one window (numbers None: not
    plotted). `attributes` and `values` are joined as in `ldptel report --csv`."""

    attributes: str
    values: str
    window: int
    window_start: str
    config_id: str
    n: int
    status: str
    estimate: float | None
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    consistent: float | None


@dataclass(frozen=True)
class BreakdownView:
    """A breakdown page's data: the config's attributes, the stored windows, the shown one
    and its report, the pick and the pair's cross-tab in that report."""

    config: CampaignConfig
    labels: dict[str, tuple[str, ...]]
    windows: list[CellWindow]
    shown: CellWindow | None
    report: Report | None
    pick: Pick
    tab: CrossTab | None


def config_labels(config: CampaignConfig) -> dict[str, tuple[str, ...]]:
    attributes = cast(Breakdown, config.kind).attributes
    return dict(zip(attributes.names, attributes.labels, strict=True))


def picked_pair(labels: dict[str, tuple[str, ...]]) -> tuple[str, str]:
    return pick_pair(list(labels), request.args.get("rows"), request.args.get("columns"))


def shown_window(windows: list[CellWindow]) -> CellWindow | None:
    text = request.args.get("to")
    if text is None:
        return windows[-1] if windows else None
    by_start = {w.window: w for w in windows}
    if not (text.isascii() and text.isdigit()) or int(text) not in by_start:
        raise ParameterError("to", "not a stored window of this campaign (unix seconds)")
    return by_start[int(text)]


def view(name: str, config: CampaignConfig) -> BreakdownView:
    labels = config_labels(config)
    pair = picked_pair(labels)
    windows = cells().windows(name)
    shown = shown_window(windows)
    report = None
    if shown is not None:
        document = context.current().campaigns.document(name, shown.window, shown.version)
        report = None if document is None else views(document).get("")
    section = None if report is None else report.get("breakdown")
    tab = None if section is None else cross_tab(section, pair)
    text = request.args.get("cell")
    if text is not None:
        cell = parse_cell(text, (labels[pair[0]], labels[pair[1]]))
    else:
        cell = tab.largest() if tab else (labels[pair[0]][0], labels[pair[1]][0])
    return BreakdownView(config, labels, windows, shown, report, Pick(*pair, cell), tab)


def body(name: str, config: CampaignConfig) -> str:
    """The page's HTML (inside the dashboard's page frame)."""
    shown = view(name, config)
    base = f"/campaigns/{name}"
    return "".join(
        [
            STYLE,
            f'<p class="meta">{escape(meta_line(shown))}</p>',
            pick_form(shown, base),
            window_html(shown, base),
            privacy(shown.report) if shown.report else "",  # below the numbers, collapsed
            trend_html(shown, base),
        ]
    )


def meta_line(shown: BreakdownView) -> str:
    config = shown.config
    attributes = ", ".join(f"{name} ({len(v)} labels)" for name, v in shown.labels.items())
    return (
        f"{config.oracle.upper()} breakdown, epsilon {config.epsilon:.3g}, attributes "
        f"{attributes}, {len(shown.windows):,} windows stored"
    )


def select(name: str, label: str, options: list[tuple[str, str]], chosen: str) -> str:
    """A labelled <select> of (value, text) options."""
    shown = "".join(
        f'<option value="{escape(value)}"{" selected" if value == chosen else ""}>'
        f"{escape(text)}</option>"
        for value, text in options
    )
    return f'<label>{escape(label)}<select name="{name}">{shown}</select></label>'


def pick_form(shown: BreakdownView, base: str) -> str:
    """Window and the two attributes; Show reloads the page with them."""
    names = [(name, name) for name in shown.labels]
    starts = [(str(w.window), window_label(w.window)) for w in reversed(shown.windows)]
    chosen = "" if shown.shown is None else str(shown.shown.window)
    return (
        f'<form method="get" action="{escape(base)}" class="view pair-pick" data-pair>'
        '<div class="controls">'
        + select("to", "window", starts, chosen)
        + select("rows", "rows (attribute)", names, shown.pick.rows)
        + select("columns", "columns (attribute)", names, shown.pick.columns)
        + '<button type="submit">Show</button></div></form>'
    )


def window_html(shown: BreakdownView, base: str) -> str:
    """The shown window's cross-tab of the picked pair, with its one-way marginals."""
    report, window = shown.report, shown.shown
    if report is None or window is None:
        return '<p class="status">No stored report for this campaign yet.</p>'
    latest = window is shown.windows[-1]
    title = f"{'Latest window' if latest else 'Window'}: {window_label(window.window)}"
    head = f"<h2>{escape(title)}</h2>"
    if report["status"] == NOT_ENOUGH:
        return head + f'<p class="status">{escape(report["message"])}</p>'
    pair = ATTRIBUTE_JOIN.join(shown.pick.pair)
    section = report.get("breakdown")
    if shown.tab is None or section is None:
        return head + f'<p class="status">This window\'s report has no {escape(pair)} marginal.</p>'
    one_way = [marginal_of(section, [name]) for name in shown.pick.pair]
    beside = "".join(f'<div class="one-way">{one_way_html(m)}</div>' for m in one_way if m)
    confidence = f"{report['confidence']:.0%}"
    return (
        head
        + tiles(report, None)
        + f'<div class="pair-view"><div class="crosstab"><h3>{escape(pair)}</h3>'
        + f'<div class="scroll">{crosstab_table(shown, base)}</div></div>{beside}</div>'
        + f'<p class="note">Each cell: the estimated number of users (unbiased) and its '
        f"{confidence} confidence interval; beside it, each attribute's own one-way "
        "marginal (estimated separately, so it need not equal the sum of a row). Shade: the "
        f"consistent count (post-processed; biased) as a share of the largest cell. "
        f"{escape(section['consistency'])}. Pick a cell to draw its trend.</p>"
    )


def cell_label(pair: tuple[str, str], cell: tuple[str, str]) -> str:
    return ", ".join(f"{name} = {label}" for name, label in zip(pair, cell, strict=True))


def crosstab_table(shown: BreakdownView, base: str) -> str:
    """Rows the first attribute's labels, columns the second's; each cell a link to its
    trend."""
    tab, pick = shown.tab, shown.pick
    assert tab is not None
    largest = max(cell["consistent"] for row in tab.cells for cell in row)
    rows_name, columns_name = (escape(name) for name in pick.pair)
    head = f'<tr><th scope="col">{rows_name} \\ {columns_name}</th>' + "".join(
        f'<th scope="col">{escape(label)}</th>' for label in tab.labels[1]
    )
    lines = []
    for r, label in enumerate(tab.labels[0]):
        cells = "".join(
            crosstab_cell(shown, base, (label, column), tab.cells[r][c], largest)
            for c, column in enumerate(tab.labels[1])
        )
        lines.append(f'<tr><th scope="row">{escape(label)}</th>{cells}</tr>')
    name = escape(ATTRIBUTE_JOIN.join(pick.pair))
    return (
        f'<table class="breakdown-heatmap" data-marginal="{name}" data-rows="{rows_name}" '
        f'data-columns="{columns_name}"><thead>{head}</tr></thead>'
        f"<tbody>{''.join(lines)}</tbody></table>"
    )


def crosstab_cell(
    shown: BreakdownView, base: str, values: tuple[str, str], cell: BreakdownCell, largest: float
) -> str:
    shade = 0 if largest <= 0 else min(SHADES - 1, int(SHADES * cell["consistent"] / largest))
    key = cell_key(values)
    chosen = values == shown.pick.cell
    link = escape(f"{base}?{cell_query(shown, values)}#trend")
    label = escape(f"trend of {cell_label(shown.pick.pair, values)}")
    text = (
        f'{count_text(cell["estimate"])}<br><span class="ci">[{count_text(cell["ci_low"])}, '
        f"{count_text(cell['ci_high'])}]</span>"
    )
    current = ' aria-current="true"' if chosen else ""
    return (
        f'<td class="heat-{shade}{" chosen" if chosen else ""}" data-values="{escape(key)}">'
        f'<a href="{link}" title="{label}"{current}>{text}</a></td>'
    )


def cell_query(shown: BreakdownView, values: tuple[str, str]) -> str:
    fields = {"rows": shown.pick.rows, "columns": shown.pick.columns, "cell": cell_key(values)}
    if shown.shown is not None:
        fields = {"to": str(shown.shown.window), **fields}
    return urlencode(fields)


def trend_html(shown: BreakdownView, base: str) -> str:
    """The picked cell's trend over every stored window, its cell picker and downloads."""
    pick = shown.pick
    label = cell_label(pick.pair, pick.cell)
    confidence = shown.report["confidence"] if shown.report else 0.95
    points = cells().trend(shown.config.name, pick.pair, pick.cell)
    rows, columns = (shown.labels[name] for name in pick.pair)
    options = [(cell_key((a, b)), cell_label(pick.pair, (a, b))) for a in rows for b in columns]
    hidden = "".join(
        f'<input type="hidden" name="{key}" value="{escape(value)}">'
        for key, value in (("to", str(shown.shown.window) if shown.shown else ""),
                           ("rows", pick.rows), ("columns", pick.columns))
        if value
    )  # fmt: skip
    this = urlencode({"rows": pick.rows, "columns": pick.columns, "cell": cell_key(pick.cell)})
    every = urlencode({"rows": pick.rows, "columns": pick.columns})
    pair = ATTRIBUTE_JOIN.join(pick.pair)
    return (
        '<h2 id="trend">Trend of a cell across the windows</h2>'
        f'<form method="get" action="{escape(base)}" class="cell-pick">{hidden}'
        '<div class="controls">'
        + select("cell", "cell", options, cell_key(pick.cell))
        + '<button type="submit">Draw trend</button></div></form>'
        + f'<figure class="trend" data-cell="{escape(cell_key(pick.cell))}">'
        f"<figcaption><h3>{escape(label)}</h3></figcaption>"
        + trend_figure(label, points, confidence)
        + "</figure>"
        + f'<p class="note">Line and points: the unbiased estimate of the cell in each window; '
        f"band: its {confidence:.0%} confidence interval from the exact variance; ×: a window "
        "with too few reports, or without this cell (not plotted)."
        + (CONFIG_CHANGED if config_changes(points) else "")
        + " Download: "
        + pages.download_links(f"{base}/trend", this, "this cell's trend")
        + " "
        + pages.download_links(f"{base}/trend", every, f"every cell of {pair}")
        + "</p>"
    )


def trend_figure(label: str, points: list[TrendPoint], confidence: float) -> str:
    """The chart at both widths and its numbers, as the dashboard draws every trend."""
    return (
        responsive(lambda width: trend_svg(label, points, confidence, UNIT, width))
        + f"<details><summary>numbers of {escape(label)}</summary>"
        + pages.trend_table(points, confidence, False)
        + "</details>"
    )


def trend_rows(name: str, config: CampaignConfig) -> tuple[list[CellRow], dict[str, object]]:
    """trend.csv / trend.json: one row per cell and window, for the picked cell (`cell`) or
    every cell of the picked pair, cell after cell in row-major order."""
    labels = config_labels(config)
    pair = picked_pair(labels)
    text = request.args.get("cell")
    rows_labels, columns_labels = labels[pair[0]], labels[pair[1]]
    if text is not None:
        picked = [parse_cell(text, (rows_labels, columns_labels))]
    else:
        picked = [(a, b) for a in rows_labels for b in columns_labels]
    series = cells()
    rows = [
        cell_row(pair, cell, point) for cell in picked for point in series.trend(name, pair, cell)
    ]
    about: dict[str, object] = {"campaign": name, "rows": pair[0], "columns": pair[1]}
    return rows, about


def cell_row(pair: tuple[str, str], cell: tuple[str, str], point: TrendPoint) -> CellRow:
    return {
        "attributes": ATTRIBUTE_JOIN.join(pair),
        "values": VALUE_JOIN.join(cell),
        "window": point.window,
        "window_start": iso(point.window),
        "config_id": point.config_id,
        "n": point.n,
        "status": point.status,
        "estimate": point.estimate,
        "stderr": point.stderr,
        "ci_low": point.ci_low,
        "ci_high": point.ci_high,
        "consistent": point.consistent,
    }
