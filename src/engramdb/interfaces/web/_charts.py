"""Learning curves as inline SVG, laid out here and drawn by the template (no JavaScript, no image files).

A chart is plain geometry: numbers for the SVG attributes and text labels, which the
template escapes like any other text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from engramdb.models import TimelinePoint

__all__ = ["Chart", "Dot", "Tick", "curve"]

WIDTH: Final = 640
HEIGHT: Final = 220
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 16, 12, 36


@dataclass(frozen=True, slots=True)
class Tick:
    """An axis label at ``pos`` (x for the time axis, y for the rate axis)."""

    pos: float
    label: str


@dataclass(frozen=True, slots=True)
class Dot:
    """One bucket: its point, and its numbers as a tooltip."""

    x: float
    y: float
    title: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Chart:
    """A success-rate curve with its confidence band."""

    width: int = WIDTH
    height: int = HEIGHT
    left: int = _LEFT
    right: int = WIDTH - _RIGHT
    top: int = _TOP
    bottom: int = HEIGHT - _BOTTOM
    #: SVG ``points`` of the line and of the band's polygon.
    line: str = ""
    band: str = ""
    dots: list[Dot] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)


def curve(points: Sequence[TimelinePoint], *, bucket: str) -> Chart:
    """The chart of one category's timeline (success rate per bucket, oldest first)."""
    chart = Chart()
    left, right, top, bottom = chart.left, chart.right, chart.top, chart.bottom
    y_ticks = [Tick(_y(r, top, bottom), f"{r:.0%}") for r in (0.0, 0.25, 0.5, 0.75, 1.0)]
    if not points:
        return Chart(y_ticks=y_ticks)
    mids = [_mid(p) for p in points]
    first, last = mids[0], mids[-1]
    span = (last - first).total_seconds()

    def x(moment: datetime) -> float:
        if span <= 0:
            return (left + right) / 2
        return left + (moment - first).total_seconds() / span * (right - left)

    xs = [x(m) for m in mids]
    line = " ".join(f"{px:.1f},{_y(p.success_rate, top, bottom):.1f}" for px, p in zip(xs, points, strict=True))
    upper = [f"{px:.1f},{_y(p.high, top, bottom):.1f}" for px, p in zip(xs, points, strict=True)]
    lower = [f"{px:.1f},{_y(p.low, top, bottom):.1f}" for px, p in zip(xs, points, strict=True)]
    dots = [
        Dot(
            px,
            _y(p.success_rate, top, bottom),
            f"{_label(p.start, bucket)}: {p.success_rate:.0%} of {p.n} ({p.low:.0%}-{p.high:.0%})",
        )
        for px, p in zip(xs, points, strict=True)
    ]
    x_ticks = [Tick(xs[0], _label(points[0].start, bucket))]
    if len(points) > 1:
        x_ticks.append(Tick(xs[-1], _label(points[-1].start, bucket)))
    return Chart(
        line=line,
        band=" ".join(upper + lower[::-1]),
        dots=dots,
        y_ticks=y_ticks,
        x_ticks=x_ticks,
    )


def _y(rate: float, top: int, bottom: int) -> float:
    return bottom - max(0.0, min(1.0, rate)) * (bottom - top)


def _mid(p: TimelinePoint) -> datetime:
    return p.start + (p.end - p.start) / 2


def _label(moment: datetime, bucket: str) -> str:
    if bucket in ("minute", "hour"):
        return f"{moment:%Y-%m-%d %H:%M}"
    if bucket == "month":
        return f"{moment:%Y-%m}"
    return f"{moment:%Y-%m-%d}"
