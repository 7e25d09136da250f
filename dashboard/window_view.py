"""The shown window of a campaign page (by default the latest): its key numbers as tiles,
its chart (the largest estimates, a numeric campaign's mean and distribution), what an
open-domain report lists with the share of the reports its strings explain, and the
privacy statement collapsed below the numbers (so a phone's first screen holds data)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from statistics import NormalDist

from ldptel.aggregator.model import Report
from ldptel.aggregator.reports import NOT_ENOUGH, privacy_sentences
from ldptel.aggregator.table import discovery_sentence, value_text
from ldptel.dashboard.charts import responsive
from ldptel.dashboard.series import Numbers, window_label
from ldptel.dashboard.window_charts import (
    PHONE_ITEMS,
    bars_svg,
    clipped,
    distribution_svg,
    mean_svg,
)


@dataclass(frozen=True)
class Explained:
    """The share of a window's reports that the listed strings explain, with a conservative
    interval (fractions of n)."""

    strings: int
    share: float
    low: float
    high: float


def explained(numbers: Numbers) -> Explained | None:
    """Sum of the listed strings' unbiased estimates over n. Their estimates are correlated
    (every report's noise touches all of them), so the sum's stderr is bounded by the sum of
    their stderrs (Cauchy-Schwarz: sd(sum) <= sum of sd, whatever the correlation); the
    interval is the estimate +- z times that bound, clipped to [0, 1]: coverage at least the
    stated confidence (normal approximation, as every interval here). The strings listed are
    the ones that cleared the threshold, so the share is slightly optimistic."""
    if numbers.kind != "open" or not numbers.ok or not numbers.n:
        return None
    z = NormalDist().inv_cdf(0.5 + numbers.confidence / 2)
    total = float(numbers.estimate.sum())
    bound = float(sum(math.sqrt(v) for v in numbers.variance))
    low, high = clipped((total - z * bound) / numbers.n, (total + z * bound) / numbers.n, (0, 1))
    return Explained(len(numbers.items), total / numbers.n, low, high)


def explained_sentence(found: Explained, numbers: Numbers) -> str:
    return (
        f"The {found.strings:,} listed strings explain an estimated {found.share:.1%} of the "
        f"{numbers.n:,} reports ({numbers.confidence:.0%} interval {found.low:.1%} to "
        f"{found.high:.1%}: plus or minus z times the sum of their standard errors, which "
        "holds whatever their correlation). The rest are answers not listed: below the "
        "release threshold, or not among the candidates."
    )


def tiles(report: Report, numbers: Numbers | None) -> str:
    """The key numbers of the window as a row of tiles."""
    central = report["privacy"]["central"]
    shuffled = "not claimed"
    if central and central["applies"]:
        shuffled = f"({central['epsilon']:.3g}, {central['delta']:.1g})"
    shown = [("reports", f"{report['n']:,}")]
    if numbers is not None and numbers.ok and numbers.kind == "numeric":
        shown += mean_tiles(numbers)
    elif (discovery := report.get("discovery")) is not None:
        found = f"{discovery['discovered']} of {discovery['candidates']:,}"
        shown.append(("candidates listed (above the release threshold)", found))
        if numbers is not None and (share := explained(numbers)) is not None:
            shown.append(("of the reports explained by them (estimate)", f"{share.share:.1%}"))
    elif report["items"]:
        flagged = sum(1 for i in report["items"] if i["significant"])
        shown.append(("items significantly above 0", f"{flagged} of {len(report['items'])}"))
    shown += [("local epsilon", f"{report['epsilon']:.3g}"), ("central (epsilon, delta)", shuffled)]
    return (
        '<div class="summary">'
        + "".join(
            f'<div class="tile"><div class="value">{escape(value)}</div>'
            f'<div class="label">{escape(label)}</div></div>'
            for label, value in shown
        )
        + "</div>"
    )


def mean_tiles(numbers: Numbers) -> list[tuple[str, str]]:
    """The mean, its standard error (named: a bare ± is ambiguous) and its clipped interval."""
    assert numbers.bounds is not None
    low, high = clipped(float(numbers.ci_low[0]), float(numbers.ci_high[0]), numbers.bounds)
    return [
        ("mean (unbiased estimate)", value_text(float(numbers.estimate[0]))),
        ("standard error of the mean", value_text(math.sqrt(float(numbers.variance[0])))),
        (
            f"{numbers.confidence:.0%} CI, clipped to the range",
            f"[{value_text(low)}, {value_text(high)}]",
        ),
    ]


def sentence(text: str) -> str:
    """A stored phrase as a sentence (its first letter capitalised)."""
    return text[:1].upper() + text[1:]


def numeric_section(report: Report, numbers: Numbers) -> str:
    """The mean on its range and, for distribution mechanisms, the histogram with its CDF
    and the quantiles."""
    assert numbers.bounds is not None and "numeric" in report
    numeric = report["numeric"]
    raw = (float(numbers.ci_low[0]), float(numbers.ci_high[0]))
    shown = clipped(*raw, numbers.bounds)
    note = (
        f"Interval clipped to the range [{value_text(numbers.bounds[0])}, "
        f"{value_text(numbers.bounds[1])}]: the computed one is [{value_text(raw[0])}, "
        f"{value_text(raw[1])}]. Every value is in the range, so the mean is too, and the "
        "clipped interval covers it whenever the computed one does."
        if shown != raw
        else "The interval lies inside the range."
    )
    parts = [
        responsive(lambda width: mean_svg(numbers, numbers.confidence, width)),
        f'<p class="note">Dot: the unbiased estimate of the mean; whiskers: its '
        f"{numbers.confidence:.0%} confidence interval (estimate plus or minus "
        f"{NormalDist().inv_cdf(0.5 + numbers.confidence / 2):.2f} standard errors). "
        f"{escape(note)} {escape(sentence(numeric['mean']['method']))}. Values outside the range: "
        f"{escape(numeric['clipping'])}.</p>",
    ]
    distribution = numeric.get("distribution")
    if distribution is not None:
        quantiles = "".join(
            f'<tr data-q="{q["q"]:g}"><td>{q["q"]:g}</td><td>{value_text(q["value"])}</td></tr>'
            for q in distribution["quantiles"]
        )
        parts += [
            responsive(lambda width: distribution_svg(distribution, width)),
            '<p class="note">Bars: the estimated percent of users whose value is in each '
            "bucket (left axis); line: the estimated CDF, the percent at or below a value "
            f"(right axis). {escape(distribution['method'])}.</p>",
            '<table class="quantiles"><thead><tr><th>quantile</th><th>value</th></tr>'
            f"</thead><tbody>{quantiles}</tbody></table>",
        ]
    return "".join(parts)


def window_section(
    report: Report | None, raw: Numbers | None, shown: Numbers | None, latest: bool, unit: str
) -> str:
    """The shown window: tiles, chart and notes, then the privacy statement collapsed.
    `raw` is the window's report as columns, `shown` the same in the page's unit (counts or
    percent of reports); None when it has no report."""
    if report is None:
        return '<p class="status">No stored report for this view yet.</p>'
    label = window_label(report["window"]["start_unix"])
    head = f"<h2>{'Latest window' if latest else 'Window'}: {escape(label)}</h2>"
    if report["status"] == NOT_ENOUGH or raw is None or shown is None:
        return head + f'<p class="status">{escape(report["message"])}</p>' + privacy(report)
    body = tiles(report, raw)
    if raw.kind == "numeric":
        body += numeric_section(report, raw)
    elif (discovery := report.get("discovery")) is not None:
        if shown.items:
            body += responsive(lambda width: bars_svg(shown, unit, width))
        if (share := explained(raw)) is not None and raw.items:
            body += f'<p class="explained">{escape(explained_sentence(share, raw))}</p>'
        body += (
            f'<p class="discovery">{escape(discovery_sentence(report))}</p>'
            f'<p class="note">{escape(discovery["statement"])}</p>'
        )
    else:
        body += responsive(lambda width: bars_svg(shown, unit, width)) + (
            f'<p class="note">Bars: the largest unbiased estimates ({escape(unit)}; on a phone '
            f"the {PHONE_ITEMS} largest); whiskers: "
            f"{shown.confidence:.0%} confidence intervals. Solid bars are significantly "
            f"above zero (fewer than {shown.false_flags:g} items expected to be flagged by "
            "chance over the whole domain); outlined bars are not.</p>"
        )
    return head + body + privacy(report)


def privacy(report: Report) -> str:
    """The report's privacy statement, collapsed to its first sentence (the local
    epsilon)."""
    first, *rest = privacy_sentences(report)
    more = "".join(f"<p>{escape(s)}</p>" for s in rest)
    return f'<details class="privacy"><summary>Privacy: {escape(first)}</summary>{more}</details>'
