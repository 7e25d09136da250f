"""Inline SVG for the trend of one item across windows: the unbiased estimate as points and
lines, its confidence interval as a band, the windows with too few reports marked on the
axis (never plotted), and a dashed line where the campaign's config changed between two
windows. Every point is focusable and carries its numbers as a <title>; the table beside the
chart holds the same numbers as text.

Every chart is drawn twice, at a desktop's and at a phone's width (`responsive`), and the
stylesheet shows the one that fits: an SVG scales its text with its viewBox, so one drawing
900 units wide would put 12-unit labels at under 5 px on a 390 px screen."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from html import escape

from ldptel.aggregator.html import nice_step

#: The two widths every chart is drawn at (viewBox units; labels are 12 units): a desktop's
#: (the page is at most 1100 px wide) and a phone's (at 340 to 380 px of screen a unit is
#: about a pixel, so labels stay near 12 px).
WIDE, NARROW = 900, 360


@dataclass(frozen=True)
class Frame:
    """A chart's box: its size and the margins around the plot."""

    width: int
    height: int
    left: int
    right: int = 16
    top: int = 22
    bottom: int = 36

    @property
    def narrow(self) -> bool:
        return self.width < WIDE

    def svg(self, css: str, label: str, extra: str = "") -> str:
        """The opening tag (class `wide` or `narrow` picks the one the stylesheet shows)."""
        size = "narrow" if self.narrow else "wide"
        return (
            f'<svg class="{css} {size}" xmlns="http://www.w3.org/2000/svg" role="img" '
            f'viewBox="0 0 {self.width} {self.height}" aria-label="{escape(label)}"{extra}>'
        )


def responsive(draw: Callable[[int], str]) -> str:
    """A chart at both widths (the stylesheet shows one: dashboard.css)."""
    return draw(WIDE) + draw(NARROW)


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


def config_changes(points: list[TrendPoint]) -> list[int]:
    """Indexes i where window i's report is of another config than window i - 1's."""
    return [i for i in range(1, len(points)) if points[i].config_id != points[i - 1].config_id]


def value_scale(lows: list[float], highs: list[float], floor: float = 0.0) -> tuple[float, float]:
    """Round ends of an axis holding every value (and `floor`, e.g. 0)."""
    low, high = min([floor, *lows]), max([floor + 1.0, *highs])
    step = nice_step(high - low)
    return math.floor(low / step) * step, math.ceil(high / step) * step


def trend_svg(
    item: str, points: list[TrendPoint], confidence: float, unit: str, width: int = WIDE
) -> str:
    """The chart of one item (points in window order) at one width; `unit` names the y
    axis (e.g. "estimated count", "% of reports")."""
    frame = Frame(width, 220 if width >= WIDE else 210, 72 if width >= WIDE else 56)
    plotted = [p for p in points if p.estimate is not None]
    low, high = value_scale(
        [p.ci_low for p in plotted if p.ci_low is not None],
        [p.ci_high for p in plotted if p.ci_high is not None],
    )
    inner = frame.width - frame.left - frame.right
    gap = inner / max(len(points) - 1, 1)

    def x(index: float) -> float:
        return frame.left + (index * gap if len(points) > 1 else inner / 2)

    def y(value: float) -> float:
        plot = frame.height - frame.top - frame.bottom
        return frame.top + (high - value) / (high - low) * plot

    label = (
        f"{item}: {unit}, with {confidence:.0%} confidence band over {len(points)} windows, "
        f"{len(plotted)} plotted"
    )
    parts = [frame.svg("trend", label, f' data-item="{escape(item)}"')]
    parts += y_axis(frame, low, high, y, unit)
    parts += x_labels(frame, points, x)
    parts += change_marks(frame, points, x)
    parts += bands(points, x, y)
    parts += marks(points, confidence, x, y, low)
    parts.append("</svg>")
    return "".join(parts)


def y_axis(
    frame: Frame, low: float, high: float, y: Callable[[float], float], unit: str
) -> list[str]:
    """Grid lines with their values, and the axis's unit above them."""
    step = nice_step(high - low)
    parts = [
        f'<text class="unit" x="4" y="{frame.top - 8}" text-anchor="start">{escape(unit)}</text>'
    ]
    for tick in range(round(low / step), round(high / step) + 1):
        value = tick * step
        parts.append(
            f'<line class="grid" x1="{frame.left}" y1="{y(value):.1f}" '
            f'x2="{frame.width - frame.right}" y2="{y(value):.1f}"/>'
            f'<text x="{frame.left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">'
            f"{figure(value)}</text>"
        )
    return parts


def x_labels(frame: Frame, points: list[TrendPoint], x: Callable[[float], float]) -> list[str]:
    """At most ~8 window labels (3 on a phone: a date is about 65 px), the last always."""
    most = 3 if frame.narrow else 8
    every = max(1, math.ceil(len(points) / most))
    parts = []
    for index, point in enumerate(points):
        last = index == len(points) - 1
        if (index % every == 0 and len(points) - 1 - index >= every / 2) or last:
            anchor = "end" if last and len(points) > 1 else "middle"
            if index == 0 and len(points) > 1:
                anchor = "start"
            parts.append(
                f'<text x="{x(index):.1f}" y="{frame.height - 8}" text-anchor="{anchor}">'
                f"{escape(point.label)}</text>"
            )
    return parts


def change_marks(frame: Frame, points: list[TrendPoint], x: Callable[[float], float]) -> list[str]:
    """A dashed line between two windows of different configs, labelled and titled."""
    parts = []
    for index in config_changes(points):
        middle = x(index - 0.5)
        before, after = points[index - 1], points[index]
        title = (
            f"config changed between {before.label} and {after.label}: "
            f"{before.config_id} to {after.config_id}"
        )
        anchor = "end" if middle > frame.width / 2 else "start"
        shift = -4 if anchor == "end" else 4
        parts.append(
            f'<g class="config-change" data-window="{after.window}">'
            f'<line x1="{middle:.1f}" y1="{frame.top - 4}" x2="{middle:.1f}" '
            f'y2="{frame.height - frame.bottom}"/>'
            f'<text x="{middle + shift:.1f}" y="{frame.top + 10}" text-anchor="{anchor}">'
            f"config changed</text><title>{escape(title)}</title></g>"
        )
    return parts


def bands(
    points: list[TrendPoint], x: Callable[[float], float], y: Callable[[float], float]
) -> list[str]:
    """Each run of plotted windows: its interval as a band and its estimates as a line."""
    parts = []
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
    return parts


def marks(
    points: list[TrendPoint],
    confidence: float,
    x: Callable[[float], float],
    y: Callable[[float], float],
    low: float,
) -> list[str]:
    """A focusable point per plotted window, a × on the axis for the others."""
    parts = []
    for index, point in enumerate(points):
        if point.estimate is None:
            parts.append(
                f'<text class="gap" x="{x(index):.1f}" y="{y(low) - 4:.1f}" '
                f'text-anchor="middle">×<title>{escape(point.label)}: '
                f"{escape(point.status)} (n = {point.n:,})</title></text>"
            )
            continue
        consistent = "" if point.consistent is None else f"consistent {figure(point.consistent)}, "
        title = (
            f"{point.label}: estimate {figure(point.estimate)}, {confidence:.0%} CI "
            f"[{figure(point.ci_low or 0.0)}, {figure(point.ci_high or 0.0)}], "
            f"{consistent}n = {point.n:,}"
        )
        parts.append(
            f'<circle class="point" tabindex="0" cx="{x(index):.1f}" '
            f'cy="{y(point.estimate):.1f}" r="3.5" data-window="{point.window}">'
            f"<title>{escape(title)}</title></circle>"
        )
    return parts
