"""A window document as one self-contained HTML page: an inline SVG bar chart of the estimates
with confidence-interval error bars, the table, and the privacy parameters in words.
No scripts, no external files: it opens anywhere, including offline."""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape
from importlib import resources
from string import Template

from ldptel.aggregator.breakdown_html import breakdown_html
from ldptel.aggregator.model import (
    Combined,
    DistributionEstimate,
    Item,
    LevelRow,
    Numeric,
    Report,
    WindowDocument,
)
from ldptel.aggregator.reports import NOT_ENOUGH, privacy_sentences
from ldptel.aggregator.table import count_text, discovery_sentence, value_text

#: Items drawn in the chart (the largest estimates); the table always lists every item.
CHART_ITEMS = 40
_ROW = 22
_LABEL = 160
_WIDTH = 900
_PAD = 24
_TITLE = 22  # room under the tick labels for the axis title


def _template() -> Template:
    text = resources.files("ldptel.aggregator").joinpath("report_template.html").read_text()
    return Template(text)


def style() -> str:
    """The report's CSS (report.css), which the dashboard's pages share."""
    return resources.files("ldptel.aggregator").joinpath("report.css").read_text()


def nice_step(span: float, ticks: int = 5) -> float:
    """A round tick step (1, 2 or 5 times a power of ten) giving about `ticks` ticks."""
    raw = span / max(ticks - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    return float(next(power * m for m in (1, 2, 5, 10) if power * m >= raw))


def axis_title(confidence: float) -> str:
    """What the chart's numbers are (the x axis's title)."""
    return f"estimated count of reports per item, with {confidence:.0%} confidence interval"


def chart_svg(items: list[Item], confidence: float) -> str:
    """Horizontal bars (estimate) with error bars (confidence interval), largest first; the
    true count as a marker where the items carry one (simulated data). Readable without
    colour: significant bars are solid, the others outlined with a dashed line, the true
    count a diamond, and the x axis has a title."""
    shown = sorted(items, key=lambda i: -i["estimate"])[:CHART_ITEMS]
    truths = [i["true_count"] for i in shown if "true_count" in i]
    low = min(0.0, *(i["ci_low"] for i in shown), *truths)
    high = max(1.0, *(i["ci_high"] for i in shown), *truths)
    step = nice_step(high - low)
    span = _WIDTH - _LABEL - _PAD

    def x(value: float) -> float:
        return float(_LABEL + (value - low) / (high - low) * span)

    bottom = _ROW * len(shown) + 2 * _PAD  # the tick labels' baseline is bottom - 6
    height = bottom + _TITLE
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {_WIDTH} {height}" aria-label="{escape(axis_title(confidence))}">'
    ]
    for tick in range(math.ceil(low / step), math.floor(high / step) + 1):
        value = tick * step  # round values inside the drawn range (0 is always one)
        parts.append(
            f'<line class="grid" x1="{x(value):.1f}" y1="{_PAD - 6}" x2="{x(value):.1f}" '
            f'y2="{bottom - _PAD}"/><text x="{x(value):.1f}" y="{bottom - 6}" '
            f'text-anchor="middle">{count_text(value)}</text>'
        )
    parts.append(
        f'<text class="axis-title" x="{_LABEL + span / 2:.1f}" y="{height - 6}" '
        f'text-anchor="middle">{escape(axis_title(confidence))}</text>'
    )
    for row, item in enumerate(shown):
        top = _PAD + row * _ROW
        middle = top + _ROW / 2
        left, right = sorted((x(0.0), x(item["estimate"])))
        kind = "significant" if item["significant"] else "not-significant"
        ci_low, ci_high = x(item["ci_low"]), x(item["ci_high"])
        parts.append(
            f'<text x="{_LABEL - 8}" y="{middle + 4:.1f}" text-anchor="end">'
            f"{escape(str(item['item']))}</text>"
            f'<rect class="bar {kind}" data-item="{escape(str(item["item"]))}" '
            f'x="{left:.1f}" y="{top + 4}" width="{max(right - left, 0.5):.1f}" '
            f'height="{_ROW - 8}"><title>{escape(str(item["item"]))}: '
            f"{count_text(item['estimate'])} [{count_text(item['ci_low'])}, "
            f"{count_text(item['ci_high'])}]</title></rect>"
            f'<line class="ci" x1="{ci_low:.1f}" y1="{middle:.1f}" x2="{ci_high:.1f}" '
            f'y2="{middle:.1f}"/>'
            f'<line class="ci" x1="{ci_low:.1f}" y1="{middle - 4:.1f}" x2="{ci_low:.1f}" '
            f'y2="{middle + 4:.1f}"/>'
            f'<line class="ci" x1="{ci_high:.1f}" y1="{middle - 4:.1f}" x2="{ci_high:.1f}" '
            f'y2="{middle + 4:.1f}"/>'
        )
        if "true_count" in item:
            truth = x(item["true_count"])
            parts.append(
                f'<path class="truth" d="M{truth:.1f} {middle - 5:.1f} l4 5 l-4 5 l-4 -5 z">'
                f"<title>true count {count_text(item['true_count'])}</title></path>"
            )
    parts.append(
        f'<line class="axis" x1="{x(0.0):.1f}" y1="{_PAD - 6}" x2="{x(0.0):.1f}" '
        f'y2="{bottom - _PAD}"/></svg>'
    )
    return "".join(parts)


def _axis(low: float, high: float, height: int, x: Callable[[float], float]) -> list[str]:
    """Grid lines and labels of round values between low and high on a chart's x axis."""
    step = nice_step(high - low)
    return [
        f'<line class="grid" x1="{x(value):.1f}" y1="{_PAD - 6}" x2="{x(value):.1f}" '
        f'y2="{height - _PAD}"/><text x="{x(value):.1f}" y="{height - 6}" '
        f'text-anchor="middle">{value_text(value)}</text>'
        for value in (
            tick * step for tick in range(math.ceil(low / step), math.floor(high / step) + 1)
        )
    ]


def mean_svg(numeric: Numeric, confidence: float) -> str:
    """The mean as a dot on the range's axis, with its confidence interval as whiskers."""
    mean = numeric["mean"]
    low = min(numeric["low"], mean["ci_low"])
    high = max(numeric["high"], mean["ci_high"])
    span = _WIDTH - 2 * _PAD

    def x(value: float) -> float:
        return float(_PAD + (value - low) / (high - low) * span)

    height, middle = 90, 34
    ci_low, ci_high = x(mean["ci_low"]), x(mean["ci_high"])
    title = (
        f"mean {value_text(mean['estimate'])}, {confidence:.0%} CI "
        f"[{value_text(mean['ci_low'])}, {value_text(mean['ci_high'])}]"
    )
    return "".join(
        [
            f'<svg class="chart mean-chart" xmlns="http://www.w3.org/2000/svg" role="img" '
            f'viewBox="0 0 {_WIDTH} {height}" aria-label="{escape(title)}">',
            *_axis(low, high, height, x),
            f'<line class="ci" x1="{ci_low:.1f}" y1="{middle}" x2="{ci_high:.1f}" y2="{middle}"/>',
            *(
                f'<line class="ci" x1="{end:.1f}" y1="{middle - 8}" x2="{end:.1f}" '
                f'y2="{middle + 8}"/>'
                for end in (ci_low, ci_high)
            ),
            f'<circle class="mean" cx="{x(mean["estimate"]):.1f}" cy="{middle}" r="6">'
            f"<title>{escape(title)}</title></circle></svg>",
        ]
    )


def distribution_svg(distribution: DistributionEstimate) -> str:
    """The estimated distribution: one bar per bucket (its probability, left scale) and the
    CDF as a line (0 to 1, the chart's full height)."""
    buckets = distribution["buckets"]
    low, high = buckets[0]["low"], buckets[-1]["high"]
    top = max(max(b["probability"] for b in buckets), 1e-12)
    span, height = _WIDTH - 2 * _PAD, 260
    plot = height - 2 * _PAD

    def x(value: float) -> float:
        return float(_PAD + (value - low) / (high - low) * span)

    def y(fraction: float) -> float:
        return float(height - _PAD - fraction * plot)

    parts = [
        f'<svg class="chart distribution-chart" xmlns="http://www.w3.org/2000/svg" '
        f'role="img" viewBox="0 0 {_WIDTH} {height}" '
        'aria-label="estimated distribution: histogram and CDF">',
        *_axis(low, high, height, x),
    ]
    for bucket in buckets:
        left, right = x(bucket["low"]), x(bucket["high"])
        parts.append(
            f'<rect class="bucket" data-probability="{bucket["probability"]:.6g}" '
            f'x="{left:.2f}" y="{y(bucket["probability"] / top):.2f}" '
            f'width="{max(right - left, 0.2):.2f}" '
            f'height="{bucket["probability"] / top * plot:.2f}"><title>'
            f"[{value_text(bucket['low'])}, {value_text(bucket['high'])}): "
            f"{bucket['probability']:.4f}</title></rect>"
        )
    steps = [f"{x(low):.1f},{y(0.0):.1f}"] + [
        f"{x(b['high']):.1f},{y(min(b['cdf'], 1.0)):.1f}" for b in buckets
    ]
    parts.append(f'<polyline class="cdf" points="{" ".join(steps)}"/></svg>')
    return "".join(parts)


def numeric_html(report: Report, numeric: Numeric) -> str:
    """A numeric report's mean (chart and row) and, for distribution mechanisms, the
    histogram with its CDF and the quantiles."""
    mean = numeric["mean"]
    confidence = f"{report['confidence']:.0%} CI"
    parts = [
        f'<p class="note">Range [{value_text(numeric["low"])}, {value_text(numeric["high"])}]'
        f": {escape(numeric['clipping'])}.</p>",
        mean_svg(numeric, report["confidence"]),
        '<table class="mean"><thead><tr><th></th><th>estimate</th><th>stderr</th>'
        f"<th>{confidence}</th><th>worst-case stderr</th></tr></thead><tbody>"
        f'<tr><td>mean</td><td class="estimate">{value_text(mean["estimate"])}</td>'
        f'<td>{value_text(mean["stderr"])}</td><td class="ci">'
        f"[{value_text(mean['ci_low'])}, {value_text(mean['ci_high'])}]</td>"
        f"<td>{value_text(mean['worst_case_stderr'])}</td></tr></tbody></table>",
        f'<p class="note">{escape(mean["method"])}.</p>',
    ]
    distribution = numeric.get("distribution")
    if distribution is not None:
        quantiles = "".join(
            f'<tr data-q="{q["q"]:g}"><td>{q["q"]:g}</td><td>{value_text(q["value"])}</td></tr>'
            for q in distribution["quantiles"]
        )
        parts += [
            distribution_svg(distribution),
            f'<p class="note">Bars: the estimated probability of each bucket; line: the '
            f"estimated CDF (0 at the bottom, 1 at the top). {escape(distribution['method'])}."
            "</p>",
            '<table class="quantiles"><thead><tr><th>quantile</th><th>value</th></tr></thead>'
            f"<tbody>{quantiles}</tbody></table>",
        ]
    return "\n".join(parts)


def table_html(report: Report) -> str:
    """Every item with its numbers, largest estimate first (and the true count, if known)."""
    confidence = f"{report['confidence']:.0%} CI"
    truth = any("true_count" in i for i in report["items"])
    head = (
        "<tr><th>item</th><th>estimate</th><th>stderr</th>"
        f"<th>{confidence}</th><th>consistent ({escape(report['consistency'])})</th>"
        "<th>significant</th>" + ("<th>true count</th>" if truth else "") + "</tr>"
    )
    rows = [
        f'<tr data-item="{escape(str(i["item"]))}"><td>{escape(str(i["item"]))}</td>'
        f'<td class="estimate">{count_text(i["estimate"])}</td><td>{count_text(i["stderr"])}</td>'
        f"<td>[{count_text(i['ci_low'])}, {count_text(i['ci_high'])}]</td>"
        f'<td class="consistent">{count_text(i["consistent"])}</td>'
        f'<td class="sig">{"&#10003;" if i["significant"] else ""}</td>'
        + (f'<td class="truth">{count_text(i["true_count"])}</td>' if truth else "")
        + "</tr>"
        for i in sorted(report["items"], key=lambda i: -i["estimate"])
    ]
    return f'<table class="items"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def epsilon_used(row: LevelRow) -> str:
    """A level's epsilon in use, or why it has none."""
    used = row["epsilon_used"]
    return "does not report" if used is None else f"{used:.3g}"


def levels_table_html(combined: Combined) -> str:
    """The privacy levels of a combined report: epsilons, reports and weights."""
    head = (
        "<tr><th>level</th><th>epsilon</th><th>epsilon used</th><th>reports</th>"
        "<th>weight</th></tr>"
    )
    rows = [
        f'<tr data-level="{escape(row["level"])}"><td>{escape(row["level"])}</td>'
        f"<td>{row['epsilon']:.3g}</td><td>{epsilon_used(row)}</td><td>{row['n']:,}</td>"
        f'<td class="weight">{row["weight"]:.3f}</td></tr>'
        for row in combined["levels"]
    ]
    return f'<table class="levels"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def report_heading(report: Report) -> str:
    """A report's title line (plain text)."""
    config = f"config {report['config_id']}"
    if (combined := report.get("combined")) is not None:
        strategy = combined["strategy"]
        return (
            f"{report['oracle'].upper()}, combined over privacy levels ({strategy}), "
            f"n = {report['n']:,} ({config})"
        )
    level = f", level {report['level']}" if report["level"] else ""
    return (
        f"{report['oracle'].upper()}, epsilon {report['epsilon']:.3g}, "
        f"n = {report['n']:,} ({config}{level})"
    )


def summary_html(report: Report) -> str:
    """The key numbers of a report as a row of tiles."""
    central = report["privacy"]["central"]
    if central and central["applies"]:
        shuffled = f"({central['epsilon']:.3g}, {central['delta']:.1g})"
    else:
        shuffled = "not claimed"
    tiles = [
        ("reports", f"{report['n']:,}"),
        ("local epsilon", f"{report['epsilon']:.3g}"),
        ("central (epsilon, delta)", shuffled),
    ]
    if (discovery := report.get("discovery")) is not None:
        found = f"{discovery['discovered']} of {discovery['candidates']:,} candidates"
        tiles.append(("discovered (above the release threshold)", found))
    elif "breakdown" in report:
        marginals = report["breakdown"]["marginals"]
        tiles.append(("marginals", f"{len(marginals)} ({report['breakdown']['mechanism']})"))
    elif "numeric" in report:
        mean = report["numeric"]["mean"]
        tiles.append(("mean", f"{value_text(mean['estimate'])} ± {value_text(mean['stderr'])}"))
    elif report["items"]:
        flagged = sum(1 for i in report["items"] if i["significant"])
        tiles.append(("significantly above 0", f"{flagged} of {len(report['items'])} items"))
    return (
        '<div class="summary">'
        + "".join(
            f'<div class="tile"><div class="value">{escape(value)}</div>'
            f'<div class="label">{escape(label)}</div></div>'
            for label, value in tiles
        )
        + "</div>"
    )


def report_section(report: Report) -> str:
    """One config's report: heading, privacy in words, then chart and table (or the status)."""
    combined = report.get("combined")
    kind = ' data-combined="true"' if combined else ""
    parts = [
        f'<section class="report" data-config="{escape(report["config_id"])}"'
        f' data-level="{escape(report["level"])}"{kind}>',
        f"<h2>{escape(report_heading(report))}</h2>",
        summary_html(report),
        '<div class="privacy">',
        *(f"<p>{escape(sentence)}</p>" for sentence in privacy_sentences(report)),
        "</div>",
    ]
    if combined:
        parts.append(levels_table_html(combined))
    if report["status"] == NOT_ENOUGH:
        parts.append(f'<p class="status">{escape(report["message"])}</p>')
    elif "discovery" in report:
        parts += [
            f'<p class="discovery">{escape(discovery_sentence(report))}</p>',
            f'<p class="note">{escape(report["discovery"]["statement"])}</p>',
        ]
        if report["items"]:
            parts += [chart_svg(report["items"], report["confidence"]), table_html(report)]
    elif "numeric" in report:
        parts.append(numeric_html(report, report["numeric"]))
    elif "breakdown" in report:
        parts.append(breakdown_html(report))
    else:
        shown = min(CHART_ITEMS, len(report["items"]))
        significance = report["significance"]
        parts += [
            chart_svg(report["items"], report["confidence"]),
            f'<p class="note">Bars: the {shown} largest estimates; whiskers: '
            f"{report['confidence']:.0%} confidence intervals. Solid bars are significantly "
            f"above zero (z = {significance['z']:.2f}, so that fewer than "
            f"{significance['expected_false_flags']:g} items are expected to be flagged "
            "by chance over the whole domain); outlined bars are not."
            + (
                " Diamonds: the true counts of the simulated data."
                if any("true_count" in i for i in report["items"])
                else ""
            )
            + "</p>",
            *(
                [f'<p class="status">{escape(report["uncalibrated"])}.</p>']
                if "uncalibrated" in report
                else []
            ),
            table_html(report),
        ]
    parts.append("</section>")
    return "\n".join(parts)


def render_html(document: WindowDocument) -> str:
    """The page for a window document (see report.build_window)."""
    window = document["window"]
    body = "\n".join(report_section(r) for r in document["reports"]) or (
        '<p class="status">No reports in this window.</p>'
    )
    return _template().substitute(
        title=escape(f"ldptel report: {document['campaign']}"),
        subtitle=escape(f"Window {window['start']} to {window['end']} (UTC)"),
        body=body,
        built_at=escape(document["built_at"]),
        style=style(),
    )
