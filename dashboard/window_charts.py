"""Inline SVG for one window: the largest estimates as bars with their confidence intervals
(counts or percent of the window's reports), a numeric campaign's mean on its range with
the interval clipped to the range, and its estimated distribution as a histogram (left
axis: percent of users per bucket) with the CDF (right axis: cumulative percent). Each is
drawn at both widths (charts.responsive); readable without colour: significant bars are
solid, the others outlined with a dashed line."""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape

import numpy as np

from ldptel.aggregator.html import nice_step
from ldptel.aggregator.model import DistributionEstimate
from ldptel.aggregator.table import value_text
from ldptel.dashboard.charts import Frame, figure, value_scale
from ldptel.dashboard.series import Numbers

#: Items drawn as bars (the largest estimates), on a desktop and on a phone; the table
#: lists every item.
CHART_ITEMS, PHONE_ITEMS = 40, 12
_ROW = 22


def clipped(low: float, high: float, bounds: tuple[float, float]) -> tuple[float, float]:
    """An interval clipped to a known range: the true mean lies in the range, so the
    clipped interval covers it whenever the interval did (coverage is kept)."""
    return max(low, bounds[0]), min(high, bounds[1])


def short(label: str, narrow: bool) -> str:
    """An item's label as drawn (a phone's chart has room for about 14 characters; the
    full label is in the bar's title and the table)."""
    return label[:13] + "…" if narrow and len(label) > 14 else label


def ticks(low: float, high: float) -> list[float]:
    """Round values inside [low, high] (0 among them when inside)."""
    step = nice_step(high - low, 4)
    return [t * step for t in range(math.ceil(low / step), math.floor(high / step) + 1)]


def bars_svg(numbers: Numbers, unit: str, width: int) -> str:
    """The window's largest estimates as horizontal bars with interval whiskers."""
    narrow = width < 900
    order = np.argsort(-numbers.estimate, kind="stable")[: PHONE_ITEMS if narrow else CHART_ITEMS]
    frame = Frame(width, _ROW * len(order) + 70, 110 if narrow else 160, 16, 28, 42)
    low, high = value_scale(
        [float(numbers.ci_low[i]) for i in order], [float(numbers.ci_high[i]) for i in order]
    )

    def x(value: float) -> float:
        span = frame.width - frame.left - frame.right
        return frame.left + (value - low) / (high - low) * span

    bottom = frame.height - frame.bottom
    parts = [frame.svg("chart bars", f"{unit} per item, with confidence intervals")]
    parts.append(f'<text class="unit" x="{frame.left}" y="{frame.top - 10}">{escape(unit)}</text>')
    for value in ticks(low, high):
        parts.append(
            f'<line class="grid" x1="{x(value):.1f}" y1="{frame.top - 4}" x2="{x(value):.1f}" '
            f'y2="{bottom}"/><text x="{x(value):.1f}" y="{bottom + 16}" '
            f'text-anchor="middle">{figure(value)}</text>'
        )
    for row, i in enumerate(order):
        item, middle = numbers.items[i], frame.top + row * _ROW + _ROW / 2
        left, right = sorted((x(0.0), x(float(numbers.estimate[i]))))
        kind = "significant" if numbers.significant[i] else "not-significant"
        ci_low, ci_high = x(float(numbers.ci_low[i])), x(float(numbers.ci_high[i]))
        title = (
            f"{item}: {figure(float(numbers.estimate[i]))} "
            f"[{figure(float(numbers.ci_low[i]))}, {figure(float(numbers.ci_high[i]))}]"
        )
        parts.append(
            f'<text x="{frame.left - 6}" y="{middle + 4:.1f}" text-anchor="end">'
            f"{escape(short(item, narrow))}</text>"
            f'<rect class="bar {kind}" data-item="{escape(item)}" x="{left:.1f}" '
            f'y="{middle - _ROW / 2 + 4:.1f}" width="{max(right - left, 0.5):.1f}" '
            f'height="{_ROW - 8}"><title>{escape(title)}</title></rect>'
            f'<path class="ci" d="M{ci_low:.1f} {middle - 4:.1f} v8 M{ci_low:.1f} '
            f'{middle:.1f} H{ci_high:.1f} M{ci_high:.1f} {middle - 4:.1f} v8"/>'
        )
    parts.append(
        f'<line class="axis" x1="{x(0.0):.1f}" y1="{frame.top - 4}" x2="{x(0.0):.1f}" '
        f'y2="{bottom}"/></svg>'
    )
    return "".join(parts)


def mean_svg(numbers: Numbers, confidence: float, width: int) -> str:
    """The mean as a dot on the range's axis, its interval (clipped to the range) as
    whiskers."""
    assert numbers.bounds is not None
    low, high = numbers.bounds
    estimate = float(numbers.estimate[0])
    ci_low, ci_high = clipped(float(numbers.ci_low[0]), float(numbers.ci_high[0]), (low, high))
    frame = Frame(width, 96, 24, 24, 28, 40)

    def x(value: float) -> float:
        return frame.left + (value - low) / (high - low) * (frame.width - frame.left - 24)

    title = (
        f"mean {value_text(estimate)}, {confidence:.0%} CI [{value_text(ci_low)}, "
        f"{value_text(ci_high)}] (clipped to the range)"
    )
    middle, bottom = 44, frame.height - frame.bottom
    parts = [
        frame.svg("chart mean-chart", title),
        f'<text class="unit" x="{frame.left}" y="16">mean of the reported values, on the '
        f"range [{value_text(low)}, {value_text(high)}]</text>",
    ]
    for value in ticks(low, high):
        parts.append(
            f'<line class="grid" x1="{x(value):.1f}" y1="{frame.top}" x2="{x(value):.1f}" '
            f'y2="{bottom + 4}"/><text x="{x(value):.1f}" y="{bottom + 20}" '
            f'text-anchor="middle">{value_text(value)}</text>'
        )
    parts.append(
        f'<path class="ci" d="M{x(ci_low):.1f} {middle - 8} v16 M{x(ci_low):.1f} {middle} '
        f'H{x(ci_high):.1f} M{x(ci_high):.1f} {middle - 8} v16"/>'
        f'<circle class="mean" cx="{x(min(max(estimate, low), high)):.1f}" cy="{middle}" '
        f'r="6"><title>{escape(title)}</title></circle></svg>'
    )
    return "".join(parts)


def distribution_svg(distribution: DistributionEstimate, width: int) -> str:
    """The histogram (left axis: percent of users per bucket) and the CDF (right axis)."""
    buckets = distribution["buckets"]
    low, high = buckets[0]["low"], buckets[-1]["high"]
    top = max(max(b["probability"] for b in buckets) * 100, 1e-9)
    step = nice_step(top, 4)
    top = math.ceil(top / step) * step
    frame = Frame(width, 280, 52, 52, 40, 40)
    plot = frame.height - frame.top - frame.bottom

    def x(value: float) -> float:
        return frame.left + (value - low) / (high - low) * (frame.width - frame.left - frame.right)

    def y(fraction: float) -> float:
        return frame.top + plot - fraction * plot

    parts = [
        frame.svg("chart distribution-chart", "estimated distribution: histogram and CDF"),
        f'<text class="unit" x="4" y="16">% of users per bucket</text>'
        f'<text class="unit cdf-unit" x="{frame.width - 4}" y="16" text-anchor="end">'
        "CDF, % (line)</text>",
    ]
    parts += histogram_axes(frame, low, high, top, step, x, y)
    for bucket in buckets:
        left, right = x(bucket["low"]), x(bucket["high"])
        share = bucket["probability"] * 100
        parts.append(
            f'<rect class="bucket" data-probability="{bucket["probability"]:.6g}" '
            f'x="{left:.2f}" y="{y(share / top):.2f}" width="{max(right - left, 0.2):.2f}" '
            f'height="{share / top * plot:.2f}"><title>[{value_text(bucket["low"])}, '
            f"{value_text(bucket['high'])}): {share:.2f}% of users</title></rect>"
        )
    steps = [f"{x(low):.1f},{y(0.0):.1f}"] + [
        f"{x(b['high']):.1f},{y(min(b['cdf'], 1.0)):.1f}" for b in buckets
    ]
    parts.append(f'<polyline class="cdf" points="{" ".join(steps)}"/></svg>')
    return "".join(parts)


def histogram_axes(
    frame: Frame,
    low: float,
    high: float,
    top: float,
    step: float,
    x: Callable[[float], float],
    y: Callable[[float], float],
) -> list[str]:
    """The value axis below, the bucket share on the left, the CDF's percent on the right."""
    bottom = frame.height - frame.bottom
    parts = [
        f'<line class="grid" x1="{x(value):.1f}" y1="{bottom}" x2="{x(value):.1f}" '
        f'y2="{bottom + 4}"/><text x="{x(value):.1f}" y="{bottom + 18}" '
        f'text-anchor="middle">{value_text(value)}</text>'
        for value in ticks(low, high)
    ]
    for tick in range(round(top / step) + 1):
        share = tick * step
        parts.append(
            f'<line class="grid" x1="{frame.left}" y1="{y(share / top):.1f}" '
            f'x2="{frame.width - frame.right}" y2="{y(share / top):.1f}"/>'
            f'<text x="{frame.left - 6}" y="{y(share / top) + 4:.1f}" text-anchor="end">'
            f"{share:g}</text>"
        )
    for cdf in (0, 25, 50, 75, 100):
        parts.append(
            f'<text class="cdf-tick" x="{frame.width - frame.right + 6}" '
            f'y="{y(cdf / 100) + 4:.1f}" text-anchor="start">{cdf}</text>'
        )
    parts.append(
        f'<text class="axis-title" x="{(frame.left + frame.width - frame.right) / 2:.1f}" '
        f'y="{frame.height - 4}" text-anchor="middle">reported value</text>'
    )
    return parts
