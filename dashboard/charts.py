"""Inline SVG for the trend of one item across windows: the unbiased estimate as points and
lines, its confidence interval as a band, and the windows with too few reports marked on the
axis (never plotted). Every point is focusable and carries its numbers as a <title>; the
table beside the chart holds the same numbers as text."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from ldptel.aggregator.html import nice_step

_WIDTH = 900
_HEIGHT = 220
_LEFT = 72
_RIGHT = 16
_TOP = 12
_BOTTOM = 36


@dataclass(frozen=True)
class TrendPoint:
    """One window of an item's trend; `estimate` is None when the window is not plotted."""

    window: int
    label: str
    config_id: str
    n: int
    status: str
    estimate: float | None = None
    stderr: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    consistent: float | None = None


def figure(value: float) -> str:
    """A count or mean for people: whole above 100, else three significant digits (a mean
    of values in [0, 1] must not read 0)."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def runs(points: list[TrendPoint]) -> list[list[int]]:
    """Consecutive plotted windows (a window without numbers breaks the line and band)."""
    found: list[list[int]] = []
    for index, point in enumerate(points):
        if point.estimate is None:
            continue
        if found and found[-1][-1] == index - 1:
            found[-1].append(index)
        else:
            found.append([index])
    return found


def trend_svg(item: str, points: list[TrendPoint], confidence: float) -> str:
    """The chart of one item (points in window order)."""
    plotted = [p for p in points if p.estimate is not None]
    lows = [p.ci_low for p in plotted if p.ci_low is not None]
    highs = [p.ci_high for p in plotted if p.ci_high is not None]
    low, high = min([0.0, *lows]), max([1.0, *highs])
    step = nice_step(high - low)
    low, high = math.floor(low / step) * step, math.ceil(high / step) * step
    inner = _WIDTH - _LEFT - _RIGHT
    gap = inner / max(len(points) - 1, 1)

    def x(index: int) -> float:
        return _LEFT + (index * gap if len(points) > 1 else inner / 2)

    def y(value: float) -> float:
        return _TOP + (high - value) / (high - low) * (_HEIGHT - _TOP - _BOTTOM)

    label = (
        f"{item}: estimate with {confidence:.0%} confidence band over {len(points)} windows, "
        f"{len(plotted)} plotted"
    )
    parts = [
        f'<svg class="trend" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {_WIDTH} {_HEIGHT}" data-item="{escape(item)}" '
        f'aria-label="{escape(label)}">'
    ]
    for tick in range(round(low / step), round(high / step) + 1):
        value = tick * step
        parts.append(
            f'<line class="grid" x1="{_LEFT}" y1="{y(value):.1f}" x2="{_WIDTH - _RIGHT}" '
            f'y2="{y(value):.1f}"/><text x="{_LEFT - 6}" y="{y(value) + 4:.1f}" '
            f'text-anchor="end">{figure(value)}</text>'
        )
    every = max(1, math.ceil(len(points) / 8))  # at most ~8 window labels on the axis
    for index, point in enumerate(points):
        if index % every == 0 or index == len(points) - 1:
            anchor = "end" if index == len(points) - 1 and len(points) > 1 else "middle"
            parts.append(
                f'<text x="{x(index):.1f}" y="{_HEIGHT - 8}" text-anchor="{anchor}">'
                f"{escape(point.label)}</text>"
            )
    for run in runs(points):
        upper = [(x(i), y(points[i].ci_high or 0.0)) for i in run]
        lower = [(x(i), y(points[i].ci_low or 0.0)) for i in reversed(run)]
        if len(run) == 1:  # a lone window: its interval as a narrow box
            (cx, top), (_, bottom) = upper[0], lower[0]
            upper, lower = [(cx - 4, top), (cx + 4, top)], [(cx + 4, bottom), (cx - 4, bottom)]
        outline = " ".join(f"{px:.1f},{py:.1f}" for px, py in upper + lower)
        parts.append(f'<polygon class="band" points="{outline}"/>')
        line = " ".join(f"{x(i):.1f},{y(points[i].estimate or 0.0):.1f}" for i in run)
        parts.append(f'<polyline class="estimate" points="{line}"/>')
    for index, point in enumerate(points):
        if point.estimate is None:
            parts.append(
                f'<text class="gap" x="{x(index):.1f}" y="{y(low) - 4:.1f}" '
                f'text-anchor="middle">×<title>{escape(point.label)}: '
                f"{escape(point.status)} (n = {point.n:,})</title></text>"
            )
            continue
        title = (
            f"{point.label}: estimate {figure(point.estimate)}, {confidence:.0%} CI "
            f"[{figure(point.ci_low or 0.0)}, {figure(point.ci_high or 0.0)}], "
            f"consistent {figure(point.consistent or 0.0)}, n = {point.n:,}"
        )
        parts.append(
            f'<circle class="point" tabindex="0" cx="{x(index):.1f}" '
            f'cy="{y(point.estimate):.1f}" r="3.5" data-window="{point.window}">'
            f"<title>{escape(title)}</title></circle>"
        )
    parts.append("</svg>")
    return "".join(parts)
