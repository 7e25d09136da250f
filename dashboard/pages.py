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

from ldptel.aggregator.html import style
from ldptel.dashboard.change import Change
from ldptel.dashboard.charts import TrendPoint, config_changes, figure, responsive, trend_svg
from ldptel.dashboard.series import Numbers, window_label

#: Live filtering of the item rows while typing (filter.js; the search also works without it:
#: submit). A file of this origin, not inline: the pages' CSP allows no inline script.
FILTER_SCRIPT = '<script src="/assets/filter.js"></script>'
#: The sign-out button, on every page of a dashboard with an analyst token.
SIGN_OUT = (
    ' · <form method="post" action="/logout" class="sign-out">'
    '<button type="submit">Sign out</button></form>'
)


#: What a page's numbers are, by the kind of campaign it shows (its footer).
FOOTERS = {
    "signin": "ldptel dashboard (read-only): sign in with the analyst token.",
    "list": "ldptel dashboard (read-only). Every number is from the window reports the "
    "aggregator stores; open a campaign for its estimates, intervals and trends.",
    "categorical": "ldptel dashboard (read-only). Estimates are unbiased counts (or percents "
    "of the window's reports) with their exact variance and the confidence intervals each "
    "report states; consistent values are post-processed (non-negative, summing to n), cost "
    "no privacy and are biased. Windows with too few reports are listed, never plotted.",
    "open": "ldptel dashboard (read-only). Each window lists only the candidates whose "
    "unbiased estimate clears its release threshold, with their exact variance and "
    "confidence intervals. Windows with too few reports are listed, never plotted.",
    "breakdown": "ldptel dashboard (read-only). Each cell is an unbiased count of users with "
    "its exact variance and the confidence interval its report states; consistent counts are "
    "post-processed (non-negative, summing to n, agreeing across marginals), cost no privacy "
    "and are biased. Windows with too few reports are listed, never plotted.",
    "numeric": "ldptel dashboard (read-only). The mean is an unbiased estimate with the "
    "standard error and confidence interval each report states, drawn clipped to the "
    "campaign's range. Windows with too few reports are listed, never plotted.",
}


def page(
    title: str,
    body: str,
    home: str,
    script: str = "",
    *,
    sign_out: bool = False,
    footer: str = FOOTERS["list"],
) -> str:
    text = resources.files("ldptel.dashboard").joinpath("page.html").read_text()
    return Template(text).substitute(
        title=escape(title),
        body=body,
        home=escape(home),
        script=script,
        sign_out=SIGN_OUT if sign_out else "",
        footer=escape(footer),
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
    #: "count" (the estimates as counts of reports) or "percent" (of the window's n).
    scale: str = "count"
    #: The windows shown: "" (all), a relative period ("7d", "30d", "90d") or absolute
    #: dates (`since`, `until`: YYYY-MM-DD, UTC, both included).
    period: str = ""
    since: str = ""
    until: str = ""

    def query(self) -> str:
        """The view as a URL query (what the downloads repeat)."""
        fields: dict[str, object] = {
            "level": self.level,
            "items": list(self.items),
            "from": self.before,
            "to": self.after,
            "q": self.search,
            "scale": "" if self.scale == "count" else self.scale,
            "period": self.period,
            "since": self.since,
            "until": self.until,
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


#: The relative periods a page can show (GET `period`): label by value.
PERIODS = {"": "all windows", "7d": "last 7 days", "30d": "last 30 days", "90d": "last 90 days"}
#: The units a frequency campaign's estimates can be shown in (GET `scale`).
SCALES = {"count": "counts of reports", "percent": "percent of the window's reports"}


def select(name: str, label: str, options: dict[str, str], chosen: str) -> str:
    listed = "".join(
        f'<option value="{escape(value)}"{" selected" if value == chosen else ""}>'
        f"{escape(text)}</option>"
        for value, text in options.items()
    )
    return f'<label>{escape(label)}<select name="{name}">{listed}</select></label>'


def controls(
    selection: Selection, levels: Sequence[str], windows: Sequence[int], numeric: bool
) -> str:
    """The view's controls: privacy level, unit, the windows shown (a relative period or
    dates) and the two windows compared."""
    parts = ['<div class="controls">']
    if levels:
        named = {level: level_name(level, levels) for level in ["", *levels]}
        parts.append(select("level", "report", named, selection.level))
    if not numeric:
        parts.append(select("scale", "show estimates as", SCALES, selection.scale))
    parts.append(select("period", "windows shown", PERIODS, selection.period))
    for name, label, value in (
        ("since", "or from date", selection.since),
        ("until", "to date", selection.until),
    ):
        parts.append(
            f'<label>{label}<input type="date" name="{name}" value="{escape(value)}"></label>'
        )
    for name, label, chosen in (
        ("from", "compare window", selection.before),
        ("to", "with window", selection.after),
    ):
        named = {str(w): window_label(w) for w in reversed(windows)}
        parts.append(select(name, label, named, str(chosen)))
    parts.append('<button type="submit">Show</button></div>')
    return "".join(parts)


def trend_table(points: Sequence[TrendPoint], confidence: float, numeric: bool) -> str:
    """The numbers of a trend chart as text (its text alternative)."""
    rows = []
    columns = 3 if numeric else 4
    for point in points:
        if point.estimate is None:
            cells = f'<td colspan="{columns}" class="item">{escape(point.status)}</td>'
        else:
            cells = (
                f'<td class="estimate">{figure(point.estimate)}</td>'
                f"<td>{figure(point.stderr or 0.0)}</td>"
                f"<td>[{figure(point.ci_low or 0.0)}, {figure(point.ci_high or 0.0)}]</td>"
            )
            if not numeric:
                cells += f"<td>{figure(point.consistent or 0.0)}</td>"
        rows.append(
            f'<tr data-window="{point.window}"><td>{escape(point.label)}</td>'
            f"<td>{point.n:,}</td><td>{escape(point.config_id)}</td>{cells}</tr>"
        )
    head = (
        "<tr><th>window</th><th>reports</th><th>config</th><th>estimate (unbiased)</th>"
        f"<th>stderr</th><th>{confidence:.0%} CI</th>"
        + ("" if numeric else "<th>consistent (biased)</th>")
        + "</tr>"
    )
    return (
        f'<table class="trend-numbers"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'
    )


def trends_section(
    trends: dict[str, list[TrendPoint]], confidence: float, unit: str, numeric: bool, downloads: str
) -> str:
    parts = ["<h2>Trends</h2>"]
    if not trends:
        parts.append('<p class="note">Select items below to draw their trends.</p>')
    changed = False
    for item, points in trends.items():
        changed = changed or bool(config_changes(points))
        parts += [
            f'<figure class="trend" data-item="{escape(item)}">',
            f"<figcaption><h3>{escape(item)}</h3></figcaption>",
            responsive(
                lambda width, item=item, points=points: trend_svg(  # type: ignore[misc]
                    item, points, confidence, unit, width
                )
            ),
            f"<details><summary>numbers of {escape(item)}</summary>",
            trend_table(points, confidence, numeric),
            "</details></figure>",
        ]
    if trends:
        clipping = " (clipped to the campaign's range)" if numeric else ""
        marked = (
            " Dashed line: the campaign's config changed between two windows (its id is in "
            "the numbers and the downloads); estimates either side come from different "
            "configs."
            if changed
            else ""
        )
        parts.append(
            f'<p class="note">Line and points: the unbiased estimate ({escape(unit)}); band: '
            f"its {confidence:.0%} confidence interval from the exact variance{clipping}; ×: "
            f"a window with too few reports (not plotted).{marked} Download: {downloads}</p>"
        )
    return "".join(parts)


def change_html(
    change: Change | None, before: Numbers | None, after: Numbers | None, unit: str
) -> str:
    """The change view's statement: what was compared, how, and how many items changed."""
    head = "<h2>Change between windows</h2>"
    if change is None or before is None or after is None:
        return head + '<p class="note">Fewer than two stored windows: nothing to compare yet.</p>'
    span = f"From {window_label(before.window)} to {window_label(after.window)}"
    if change.untested:
        text = f"{span}: not tested, {change.untested}."
    elif not change.items:
        text = f"{span}: no item is listed in both windows, so nothing is compared."
    else:
        rule = (
            f"two-sided, |z| > {change.threshold:.2f}, so that fewer than "
            f"{change.false_flags:g} items are expected to be flagged by chance over the domain"
        )
        counted = f"{change.flagged} of {len(change.items):,} items changed"
        if after.kind == "numeric":
            counted = "the mean " + ("changed" if change.flagged else "did not change")
            rule = (
                f"two-sided, |z| > {change.threshold:.2f}: a false alarm with probability "
                f"{change.false_flags:g} when it did not change"
            )
        text = (
            f"{span}: {counted} significantly ({rule}). "
            f"The change is the difference of the unbiased estimates ({unit}); its stderr is "
            "sqrt(var before + var after), from the exact variances."
        )
    return head + f'<p class="change-summary">{escape(text)}</p>'


def change_cells(change: Change | None) -> dict[str, list[str]]:
    """Each compared item's change cells."""
    cells = {}
    if change is not None:
        for i, item in enumerate(change.items):
            difference, flagged = change.difference[i], change.significant[i]
            mark = ("▲ up" if difference > 0 else "▼ down") if flagged else ""
            cells[item] = [
                f'<td class="change">{figure(difference)}</td>',
                f"<td>{figure(change.stderr[i])}</td>",
                f"<td>{change.z[i]:.2f}</td>",
                f'<td class="flag">{mark}</td>',
            ]
    return cells


def items_section(
    after: Numbers | None, change: Change | None, selection: Selection, unit: str, downloads: str
) -> str:
    """Every item of the shown window, with its change and a box to draw its trend."""
    if after is None:
        return ""
    numeric = after.kind == "numeric"
    differences = change_cells(change)
    head = (
        '<tr><th class="item">trend</th><th class="item">item</th>'
        f"<th>estimate (unbiased, {escape(unit)})</th><th>stderr</th>"
        + ("" if numeric else "<th>consistent (biased)</th>")
        + "<th>change</th><th>stderr of change</th><th>z</th><th>significant change</th></tr>"
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
        consistent = "" if numeric else f"<td>{figure(after.consistent[i])}</td>"
        rows.append(
            f'<tr data-item="{escape(item)}"{hidden}><td><input type="checkbox" name="items" '
            f'id="{box_id}" value="{escape(item)}"{checked}></td>'
            f'<td class="item"><label for="{box_id}">{escape(item)}</label></td>'
            f'<td class="estimate">{figure(after.estimate[i])}</td>'
            f"<td>{figure(after.variance[i] ** 0.5)}</td>{consistent}"
            f"{''.join(differences.get(item, ['<td></td>'] * 4))}</tr>"
        )
    values = (
        "the mean (its interval: the trend and the window above) and its change"
        if numeric
        else f"unbiased estimates, consistent ({escape(after.consistency)}, biased) values, "
        "and the change"
    )
    intro = (
        f'<p class="note">Window {escape(window_label(after.window))}: {values}. '
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
