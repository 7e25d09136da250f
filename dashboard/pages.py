"""The dashboard's pages as HTML: the campaign list and a campaign's page (latest window,
trends of the selected items, the change between two windows, the items with search).
Server-rendered, one form of GET parameters, so every view has a URL and works from the
keyboard without scripts; a few lines of script only filter the item rows as one types."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from importlib import resources
from string import Template
from urllib.parse import urlencode

from ldptel.aggregator.breakdown_html import breakdown_html
from ldptel.aggregator.html import chart_svg, numeric_html, style, summary_html
from ldptel.aggregator.model import Report
from ldptel.aggregator.reports import NOT_ENOUGH, privacy_sentences
from ldptel.aggregator.table import discovery_sentence
from ldptel.dashboard.change import Change
from ldptel.dashboard.charts import TrendPoint, figure, trend_svg
from ldptel.dashboard.series import Numbers, window_label

#: Live filtering of the item rows while typing (filter.js; the search also works without it:
#: submit). A file of this origin, not inline: the pages' CSP allows no inline script.
FILTER_SCRIPT = '<script src="/assets/filter.js"></script>'
#: The sign-out button, on every page of a dashboard with an analyst token.
SIGN_OUT = (
    ' · <form method="post" action="/logout" class="sign-out">'
    '<button type="submit">Sign out</button></form>'
)


def page(title: str, body: str, home: str, script: str = "", *, sign_out: bool = False) -> str:
    text = resources.files("ldptel.dashboard").joinpath("page.html").read_text()
    return Template(text).substitute(
        title=escape(title),
        body=body,
        home=escape(home),
        script=script,
        sign_out=SIGN_OUT if sign_out else "",
    )


def stylesheet() -> str:
    """/assets/dashboard.css: the report's CSS, then the dashboard's own."""
    own = resources.files("ldptel.dashboard").joinpath("dashboard.css").read_text()
    return f"{style()}\n/* The dashboard's own. */\n{own}"


def script_file() -> str:
    """/assets/filter.js."""
    return resources.files("ldptel.dashboard").joinpath("filter.js").read_text()


@dataclass(frozen=True)
class CampaignRow:
    """One line of the campaign list."""

    name: str
    oracle: str
    epsilon: float
    #: The domain in words: its size, a numeric range or an open domain's max_length.
    domain: str
    levels: tuple[str, ...]
    windows: int
    latest: Numbers | None
    last_built: str


def campaign_list(rows: Sequence[CampaignRow], link: str) -> str:
    """The campaign list: `link` is the campaign page URL with `{name}` in it."""
    head = (
        "<tr><th>campaign</th><th>oracle</th><th>epsilon</th><th>domain</th>"
        "<th>windows</th><th>last aggregation</th><th>reports in the last window</th>"
        "<th class='item'>privacy</th></tr>"
    )
    lines = []
    for row in rows:
        epsilon = ", ".join(row.levels) if row.levels else f"{row.epsilon:.3g}"
        latest = row.latest
        if latest is None:
            reports, privacy = "no report yet", ""
        else:
            reports = f"{latest.n:,}" + (" (too few)" if not latest.ok else "")
            privacy = "".join(f"<p>{escape(s)}</p>" for s in latest.privacy)
        href = escape(link.format(name=row.name))
        lines.append(
            f'<tr data-campaign="{escape(row.name)}"><td><a href="{href}">{escape(row.name)}'
            f"</a></td><td>{escape(row.oracle)}</td><td>{escape(epsilon)}</td>"
            f"<td class='domain'>{escape(row.domain)}</td><td class='windows'>{row.windows:,}</td>"
            f"<td>{escape(row.last_built)}</td><td class='reports'>{reports}</td>"
            f"<td class='item privacy-cell'><details><summary>statement</summary>{privacy}"
            "</details></td></tr>"
        )
    if not lines:
        return '<p class="status">No campaigns yet.</p>'
    return f'<table class="campaigns"><thead>{head}</thead><tbody>{"".join(lines)}</tbody></table>'


@dataclass(frozen=True)
class Selection:
    """What a campaign page shows: its GET parameters."""

    level: str
    items: tuple[str, ...]
    before: int | None
    after: int | None
    search: str

    def query(self) -> str:
        """The view as a URL query (what the downloads repeat)."""
        fields: dict[str, object] = {
            "level": self.level,
            "items": list(self.items),
            "from": self.before,
            "to": self.after,
            "q": self.search,
        }
        pairs = [
            (key, value)
            for key, value in fields.items()
            if value not in (None, "", [])
            for value in (value if isinstance(value, list) else [value])
        ]
        return urlencode(pairs)


def level_name(level: str, levels: Sequence[str]) -> str:
    if level:
        return f"level {level}"
    return "combined over levels" if levels else "all reports"


def controls(selection: Selection, levels: Sequence[str], windows: Sequence[int]) -> str:
    """The view's controls: privacy level and the two windows compared."""
    parts = ['<div class="controls">']
    if levels:
        options = "".join(
            f'<option value="{escape(level)}"'
            f"{' selected' if level == selection.level else ''}>"
            f"{escape(level_name(level, levels))}</option>"
            for level in ["", *levels]
        )
        parts.append(f'<label>report<select name="level">{options}</select></label>')
    for name, label, chosen in (
        ("from", "compare window", selection.before),
        ("to", "with window", selection.after),
    ):
        options = "".join(
            f'<option value="{w}"{" selected" if w == chosen else ""}>{window_label(w)}</option>'
            for w in reversed(windows)
        )
        parts.append(f'<label>{label}<select name="{name}">{options}</select></label>')
    parts.append('<button type="submit">Show</button></div>')
    return "".join(parts)


def scrolling(html: str) -> str:
    """A chart (or table) that scrolls sideways in its own box when wider than a phone."""
    return f'<div class="scroll">{html}</div>'


def window_section(report: Report | None, latest: bool) -> str:
    """The shown window (by default the latest, today's chart) as the aggregator's bar chart
    of its report."""
    if report is None:
        return '<p class="status">No stored report for this view yet.</p>'
    label = window_label(report["window"]["start_unix"])
    head = f"<h2>{'Latest window' if latest else 'Window'}: {escape(label)}</h2>"
    if report["status"] == NOT_ENOUGH:
        return head + f'<p class="status">{escape(report["message"])}</p>'
    if (numeric := report.get("numeric")) is not None:  # the mean, and the distribution
        return head + summary_html(report) + scrolling(numeric_html(report, numeric))
    if "breakdown" in report:  # every marginal, the two-way ones as heatmaps
        return head + summary_html(report) + breakdown_html(report)
    if (discovery := report.get("discovery")) is not None:  # the strings listed
        chart = (
            scrolling(chart_svg(report["items"], report["confidence"])) if report["items"] else ""
        )
        return (
            head
            + summary_html(report)
            + f'<p class="discovery">{escape(discovery_sentence(report))}</p>'
            + chart
            + f'<p class="note">{escape(discovery["statement"])}</p>'
        )
    significance = report["significance"]
    return (
        head
        + summary_html(report)
        + scrolling(chart_svg(report["items"], report["confidence"]))
        + f'<p class="note">Bars: the largest unbiased estimates; whiskers: '
        f"{report['confidence']:.0%} confidence intervals. Solid bars are significantly above "
        f"zero (fewer than {significance['expected_false_flags']:g} items expected to be "
        "flagged by chance over the whole domain); outlined bars are not.</p>"
    )


def trend_table(points: Sequence[TrendPoint], confidence: float) -> str:
    """The numbers of a trend chart as text (its text alternative)."""
    rows = []
    for point in points:
        if point.estimate is None:
            cells = f'<td colspan="4" class="item">{escape(point.status)}</td>'
        else:
            cells = (
                f'<td class="estimate">{figure(point.estimate)}</td>'
                f"<td>{figure(point.stderr or 0.0)}</td>"
                f"<td>[{figure(point.ci_low or 0.0)}, {figure(point.ci_high or 0.0)}]</td>"
                f"<td>{figure(point.consistent or 0.0)}</td>"
            )
        rows.append(
            f'<tr data-window="{point.window}"><td>{escape(point.label)}</td>'
            f"<td>{point.n:,}</td>{cells}</tr>"
        )
    head = (
        "<tr><th>window</th><th>reports</th><th>estimate (unbiased)</th><th>stderr</th>"
        f"<th>{confidence:.0%} CI</th><th>consistent (biased)</th></tr>"
    )
    return (
        f'<table class="trend-numbers"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'
    )


def trends_section(trends: dict[str, list[TrendPoint]], confidence: float, downloads: str) -> str:
    parts = ["<h2>Trends</h2>"]
    if not trends:
        parts.append('<p class="note">Select items below to draw their trends.</p>')
    for item, points in trends.items():
        parts += [
            f'<figure class="trend" data-item="{escape(item)}">',
            f"<figcaption><h3>{escape(item)}</h3></figcaption>",
            trend_svg(item, points, confidence),
            f"<details><summary>numbers of {escape(item)}</summary>",
            trend_table(points, confidence),
            "</details></figure>",
        ]
    if trends:
        parts.append(
            f'<p class="note">Line and points: the unbiased estimate; band: its '
            f"{confidence:.0%} confidence interval from the exact variance; ×: a window with "
            f"too few reports (not plotted). Download: {downloads}</p>"
        )
    return "".join(parts)


def change_html(change: Change | None, before: Numbers | None, after: Numbers | None) -> str:
    """The change view's statement: what was compared, how, and how many items changed."""
    head = "<h2>Change between windows</h2>"
    if change is None or before is None or after is None:
        return head + '<p class="note">Fewer than two stored windows: nothing to compare yet.</p>'
    span = f"From {window_label(before.window)} to {window_label(after.window)}"
    if change.untested:
        text = f"{span}: not tested, {change.untested}."
    else:
        text = (
            f"{span}: {change.flagged} of {len(change.items):,} items changed significantly "
            f"(two-sided, |z| > {change.threshold:.2f}, so that fewer than "
            f"{change.false_flags:g} items are expected to be flagged by chance over the "
            "domain). The change is the difference of the unbiased estimates; its stderr is "
            "sqrt(var before + var after), from the exact variances."
        )
    return head + f'<p class="change-summary">{escape(text)}</p>'


def items_section(
    after: Numbers | None, change: Change | None, selection: Selection, downloads: str
) -> str:
    """Every item of the shown window, with its change and a box to draw its trend."""
    if after is None:
        return ""
    differences = {}
    if change is not None:
        for i, item in enumerate(change.items):
            differences[item] = (
                change.difference[i],
                change.stderr[i],
                change.z[i],
                change.significant[i],
            )
    head = (
        '<tr><th class="item">trend</th><th class="item">item</th><th>estimate (unbiased)</th>'
        "<th>stderr</th><th>consistent (biased)</th><th>change</th><th>stderr of change</th>"
        "<th>z</th>"
        "<th>significant change</th></tr>"
    )
    order = sorted(range(len(after.items)), key=lambda i: -after.estimate[i])
    chosen = set(selection.items)
    search = selection.search.lower()
    rows = []
    for i in order:
        item = after.items[i]
        box_id = f"pick-{i}"
        checked = " checked" if item in chosen else ""
        hidden = " hidden" if search and search not in item.lower() else ""
        cells = ["<td></td>"] * 4
        if item in differences:
            difference, stderr, z, flagged = differences[item]
            mark = ("▲ up" if difference > 0 else "▼ down") if flagged else ""
            cells = [
                f'<td class="change">{figure(difference)}</td>',
                f"<td>{figure(stderr)}</td>",
                f"<td>{z:.2f}</td>",
                f'<td class="flag">{mark}</td>',
            ]
        rows.append(
            f'<tr data-item="{escape(item)}"{hidden}><td><input type="checkbox" name="items" '
            f'id="{box_id}" value="{escape(item)}"{checked}></td>'
            f'<td class="item"><label for="{box_id}">{escape(item)}</label></td>'
            f'<td class="estimate">{figure(after.estimate[i])}</td>'
            f"<td>{figure(after.variance[i] ** 0.5)}</td>"
            f"<td>{figure(after.consistent[i])}</td>{''.join(cells)}</tr>"
        )
    intro = (
        f'<p class="note">Window {escape(window_label(after.window))}: unbiased estimates, '
        f"consistent ({escape(after.consistency)}, biased) values, and the change. "
        f"Tick items and press Show to draw their trends. Download: {downloads}</p>"
        '<div class="controls"><label>search items<input type="search" name="q" '
        f'data-filter="table.items" value="{escape(selection.search)}" aria-controls="items">'
        '</label><button type="submit">Show</button></div>'
    )
    if not after.ok:
        intro = f'<p class="status">{escape(after.message)}</p>' + intro
    table = (
        f'<table class="items" id="items"><thead>{head}</thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    return "<h2>Items</h2>" + intro + table


def download_links(base: str, query: str, what: str) -> str:
    """Links to `base`.csv and `base`.json with the page's parameters: what is shown."""
    return (
        f'<a href="{escape(base)}.csv?{escape(query)}" download>{escape(what)} as CSV</a>, '
        f'<a href="{escape(base)}.json?{escape(query)}" download>{escape(what)} as JSON</a>.'
    )


def privacy_section(report: Report | None) -> str:
    """The report's privacy statement: its first sentence (the local epsilon) always shown,
    the rest a click away, so that on a phone the first screen also holds the data."""
    if report is None:
        return ""
    first, *rest = privacy_sentences(report)
    if not rest:
        return f'<div class="privacy"><p>{escape(first)}</p></div>'
    more = "".join(f"<p>{escape(s)}</p>" for s in rest)
    return (
        f'<div class="privacy"><p>{escape(first)}</p><details><summary>the full privacy '
        f"statement ({len(rest)} more)</summary>{more}</details></div>"
    )
