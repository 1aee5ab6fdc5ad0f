"""Server-side SVG charts for the panel: a line chart and a stacked bar chart, no JavaScript.

Every chart is a self-contained ``<svg role="img">`` with a ``<title>`` and a ``<desc>`` that summarises the data
for screen readers, a white background, a ``viewBox`` so it scales, and presentation attributes only (the panel's
content security policy allows no ``style``). Series are told apart by colour *and* by a dash pattern and marker
(lines) or a fill pattern (bars), shown in a legend. Every piece of text is escaped: series names and titles come
from data. Times on the x axis are in the chart's ``display`` (a time zone and 12- or 24-hour clock; UTC and 24-hour
unless given). ``None`` is a gap; a chart with nothing to draw says "No data yet".
"""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from markupsafe import Markup

from vigil.panel.display import UTC_DISPLAY, Display
from vigil.panel.svg import BACKGROUND, FONT, GRID, INK, MUTED, Style, clean, element, marker, pattern

CLOCK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
MARKER_LIMIT = 48  # above this many buckets, only isolated points get a marker
LEGEND_ROW = 18
_SAFE_ID = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")


@dataclass(frozen=True, slots=True)
class Series:
    """A named series, one value per bucket (None is a gap); ``style`` pins its colour and pattern."""

    name: str
    values: Sequence[float | None]
    style: int | None = None
    counts: Sequence[str | None] = ()
    """The count behind each value, said beside it in tooltips and the description (a rate's ``3 of 6``)."""
    total: str | None = None
    """The series over the whole window, said beside its name in the legend (``50% (3 of 6)``)."""

    def legend(self) -> str:
        """The series' name in the legend, with its total."""
        return f"{_shorten(self.name)}: {self.total}" if self.total else _shorten(self.name)

    def reading(self, i: int, value: str) -> str:
        """A value of bucket ``i`` as read out, with its count: ``50% (3 of 6)``."""
        behind = self.counts[i] if i < len(self.counts) else None
        return f"{value} ({behind})" if behind else value


def count(value: float) -> str:
    """A count for an axis: ``12``, ``1.5``, ``12k``."""
    if abs(value) >= 10_000:
        return f"{value / 1000:.0f}k"
    if abs(value) >= 1000:
        return f"{value / 1000:.1f}k".replace(".0k", "k")
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def percent(value: float) -> str:
    """A rate between 0 and 1 as a percentage."""
    return f"{value * 100:.0f}%"


def milliseconds(value: float) -> str:
    """A duration in milliseconds: ``250 ms``, ``1.2 s``."""
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.1f} s".replace(".0 s", " s")


def seconds(value: float) -> str:
    """A duration in seconds: ``45 s``, ``2.5 min``, ``3 h``."""
    if value < 120:
        return f"{value:.0f} s"
    if value < 7200:
        return f"{value / 60:.1f} min".replace(".0 min", " min")
    return f"{value / 3600:.1f} h".replace(".0 h", " h")


def line_chart(
    times: Sequence[datetime],
    series: Sequence[Series],
    *,
    title: str,
    description: str = "",
    value_format: Callable[[float], str] = count,
    y_max: float | None = None,
    width: int = 640,
    height: int = 260,
    chart_id: str | None = None,
    display: Display = UTC_DISPLAY,
) -> Markup:
    """A line per series over the buckets starting at ``times``; a gap where a value is None.

    Args:
        times: the buckets' start times (aware); a point sits in the middle of its bucket.
        series: the lines, each with one value per bucket.
        title: the chart's title, shown and read out.
        description: said before the generated summary in ``<desc>``.
        value_format: how a value reads on the axis and in tooltips (``count``, ``percent``, ...).
        y_max: the top of the y axis (say 1.0 for rates); by default a round number above the highest value.
        chart_id: a prefix for the element ids (unique on the page); random by default.
        display: the time zone and clock (12- or 24-hour) of the time labels; UTC and 24-hour by default.
    """
    chart = _Chart(times, series, title, description, value_format, width, height, chart_id, display)
    values = [v for s in series for i in range(len(times)) if (v := _value(s, i)) is not None]
    if not times or not values:
        return chart.empty("Line chart")
    frame = chart.frame(y_max if y_max is not None else max(values))
    body = [chart.grid(frame), *(chart.line(frame, i) for i in range(len(series))), chart.x_axis(frame)]
    return chart.render("Line chart", Markup("").join(body), chart.legend(frame, "line"))


def stacked_bar_chart(
    times: Sequence[datetime],
    stacks: Sequence[Sequence[Series]],
    *,
    title: str,
    description: str = "",
    value_format: Callable[[float], str] = count,
    width: int = 640,
    height: int = 260,
    chart_id: str | None = None,
    display: Display = UTC_DISPLAY,
) -> Markup:
    """Bars per bucket: one bar per stack, side by side, each stacking its series (None counts as 0).

    ``stacked_bar_chart(times, [[shown], [accepted, edited, dismissed]])`` draws, in every bucket, a bar of
    suggestions shown next to a bar of the verdicts; ``[[faq, article, document]]`` one stacked bar per bucket.
    The other arguments are those of ``line_chart``.
    """
    flat = [s for stack in stacks for s in stack]
    chart = _Chart(times, flat, title, description, value_format, width, height, chart_id, display)
    totals = [sum(max(_value(s, i) or 0.0, 0.0) for s in stack) for stack in stacks for i in range(len(times))]
    if not times or not any(t > 0 for t in totals):
        return chart.empty("Stacked bar chart")
    frame = chart.frame(max(totals))
    bars = chart.bars(frame, stacks)
    body = Markup("").join([chart.patterns(), chart.grid(frame), bars, chart.x_axis(frame)])
    return chart.render("Stacked bar chart", body, chart.legend(frame, "bar"))


@dataclass(frozen=True, slots=True)
class _Frame:
    """The plot area inside the chart, and the y scale."""

    left: float
    top: float
    right: float
    bottom: float
    buckets: int
    y_top: float
    y_step: float

    def x(self, slot: float) -> float:
        return self.left + slot * (self.right - self.left) / self.buckets

    def y(self, value: float) -> float:
        share = min(max(value / self.y_top, 0.0), 1.0)
        return self.bottom - share * (self.bottom - self.top)

    @property
    def slot(self) -> float:
        return (self.right - self.left) / self.buckets


class _Chart:
    """One chart being drawn: its size, texts, series styles and legend layout."""

    def __init__(
        self,
        times: Sequence[datetime],
        series: Sequence[Series],
        title: str,
        description: str,
        value_format: Callable[[float], str],
        width: int,
        height: int,
        chart_id: str | None,
        display: Display,
    ) -> None:
        self.display = display
        self.times = [display.local(t) for t in times]
        self.series = list(series)
        self.styles = [Style(s.style if s.style is not None else i) for i, s in enumerate(series)]
        self.title, self.description, self.fmt = title, description, value_format
        self.width, self.height = max(width, 200), max(height, 120)
        self.id = chart_id if chart_id and _SAFE_ID.fullmatch(chart_id) else f"chart-{secrets.token_hex(4)}"
        self.legend_at = _legend_layout([s.legend() for s in series], self.width)

    def frame(self, highest: float) -> _Frame:
        """The plot area, leaving room for the title, the axes' labels and the legend."""
        y_top, y_step = _scale(highest, self.fmt)
        rows = 1 + max((row for row, _ in self.legend_at), default=-1)
        bottom = self.height - 44 - rows * LEGEND_ROW
        return _Frame(58.0, 40.0, self.width - 16.0, max(bottom, 60.0), len(self.times), y_top, y_step)

    def label(self, i: int) -> str:
        """A bucket's start, for tooltips and the description (with seconds when buckets are shorter than a minute)."""
        short = len(self.times) > 1 and self.times[1] - self.times[0] < timedelta(minutes=1)
        return self.display.stamp(self.times[i], seconds=short)

    def grid(self, frame: _Frame) -> Markup:
        """Horizontal grid lines with the y axis labels, and the baseline."""
        parts = []
        ticks = round(frame.y_top / frame.y_step)
        for k in range(ticks + 1):
            value = k * frame.y_step
            y = frame.y(value)
            parts.append(element("line", {"x1": frame.left, "y1": y, "x2": frame.right, "y2": y, "stroke": GRID}))
            text = {"x": frame.left - 6, "y": y, "dy": "0.35em", "text-anchor": "end", "fill": MUTED}
            parts.append(element("text", text, self.fmt(value)))
        base = {"x1": frame.left, "y1": frame.bottom, "x2": frame.right, "y2": frame.bottom, "stroke": INK}
        parts.append(element("line", base))
        return element("g", None, *parts)

    def x_axis(self, frame: _Frame) -> Markup:
        """Tick marks at some buckets' starts, labelled in the display's zone: times, with the date where it changes."""
        n = len(self.times)
        step = math.ceil(n / max(2, int((frame.right - frame.left) // 90)))
        # By the clock, not the wall: across a change to or from summer time two local times differ by an hour more
        # or less than they are apart.
        bucket = (
            timedelta(seconds=self.times[1].timestamp() - self.times[0].timestamp()) if n > 1 else timedelta(hours=1)
        )
        by_day = bucket * step >= timedelta(days=1)
        parts, previous = [], None
        for i in range(0, n, step):
            t, x = self.times[i], frame.x(i)
            parts.append(element("line", {"x1": x, "y1": frame.bottom, "x2": x, "y2": frame.bottom + 4, "stroke": INK}))
            for line, text in enumerate(_tick_lines(t, previous, by_day=by_day, display=self.display)):
                attrs = {"x": x, "y": frame.bottom + 16 + 13 * line, "text-anchor": "middle", "fill": MUTED}
                parts.append(element("text", attrs, text))
            previous = t
        return element("g", None, *parts)

    def line(self, frame: _Frame, index: int) -> Markup:
        """One series' line, broken at gaps, with markers (all of them on short charts, else isolated points)."""
        series, style = self.series[index], self.styles[index]
        points = {i: v for i in range(len(self.times)) if (v := _value(series, i)) is not None}
        path = "".join(
            f"{'L' if i - 1 in points else 'M'}{frame.x(i + 0.5):.1f},{frame.y(v):.1f}" for i, v in points.items()
        )
        stroke = {"d": path, "fill": "none", "stroke": style.colour, "stroke-width": 2, "stroke-dasharray": style.dash}
        parts = [element("path", {**stroke, "stroke-linejoin": "round"})]
        for i, v in points.items():
            if len(self.times) <= MARKER_LIMIT or (i - 1 not in points and i + 1 not in points):
                tip = f"{series.name}, {self.label(i)}: {series.reading(i, self.fmt(v))}"
                parts.append(marker(style, frame.x(i + 0.5), frame.y(v), tip))
        return element("g", None, *parts)

    def bars(self, frame: _Frame, stacks: Sequence[Sequence[Series]]) -> Markup:
        """Per bucket, a bar per stack side by side, each series a segment with a tooltip."""
        width = frame.slot * 0.8 / len(stacks)
        parts = []
        for i in range(len(self.times)):
            index = 0
            for k, stack in enumerate(stacks):
                x, base = frame.x(i) + frame.slot * 0.1 + k * width, 0.0
                for series in stack:
                    value = max(_value(series, i) or 0.0, 0.0)
                    if value > 0:
                        parts.append(self.segment(frame, index, x, width, base, value, i))
                    base += value
                    index += 1
        return element("g", None, *parts)

    def segment(self, frame: _Frame, index: int, x: float, width: float, base: float, value: float, i: int) -> Markup:
        """One series' part of a bar."""
        top, bottom = frame.y(base + value), frame.y(base)
        attrs = {
            "x": x,
            "y": top,
            "width": max(width - 1.0, 0.5),
            "height": max(bottom - top, 0.5),
            "fill": self.styles[index].fill(self.id),
            "stroke": BACKGROUND if width > 4 else None,
            "stroke-width": 0.5,
        }
        tip = f"{self.series[index].name}, {self.label(i)}: {self.series[index].reading(i, self.fmt(value))}"
        return element("rect", attrs, element("title", None, tip))

    def patterns(self) -> Markup:
        """The fill patterns the bars use."""
        used = {style.index: style for style in self.styles if style.pattern != "solid"}
        return element("defs", None, *(pattern(style, self.id) for style in used.values())) if used else Markup("")

    def legend(self, frame: _Frame, kind: str) -> Markup:
        """The series' names with a sample of their line (dash and marker) or their bar fill."""
        entries = []
        for (row, x), series, style in zip(self.legend_at, self.series, self.styles, strict=True):
            y = frame.bottom + 50 + row * LEGEND_ROW
            if kind == "line":
                line = {"x1": x, "y1": y, "x2": x + 24, "y2": y, "stroke": style.colour, "stroke-width": 2}
                sample = element("line", {**line, "stroke-dasharray": style.dash}) + marker(
                    style, x + 12, y, series.name
                )
            else:
                box = {"x": x + 6, "y": y - 6, "width": 12, "height": 12, "fill": style.fill(self.id)}
                sample = element("rect", {**box, "stroke": style.colour})
            text = element("text", {"x": x + 30, "y": y, "dy": "0.35em", "fill": INK}, series.legend())
            entries.append(element("g", None, element("title", None, series.name), sample, text))
        return element("g", None, *entries)

    def empty(self, kind: str) -> Markup:
        """The chart with nothing to show, saying so."""
        box = {"x": 58, "y": 40, "width": self.width - 74, "height": self.height - 76}
        frame = element("rect", {**box, "fill": "none", "stroke": GRID, "stroke-dasharray": "4 4"})
        note = {"x": self.width / 2, "y": self.height / 2 + 2, "text-anchor": "middle", "fill": MUTED}
        body = Markup("").join([frame, element("text", {**note, "font-size": 14}, "No data yet")])
        return self.render(kind, body, Markup(""), summary="No data yet.")

    def render(self, kind: str, body: Markup, legend: Markup, summary: str | None = None) -> Markup:
        """The whole ``<svg>``: accessible name and description, background, title, plot and legend."""
        attrs = {
            "xmlns": "http://www.w3.org/2000/svg",
            "role": "img",
            "aria-labelledby": f"{self.id}-title {self.id}-desc",
            "viewBox": f"0 0 {self.width} {self.height}",
            "width": self.width,
            "height": self.height,
            "font-family": FONT,
            "font-size": 12,
        }
        description = " ".join(p for p in (self.description, f"{kind}.", summary or self.summary()) if p)
        return element(
            "svg",
            attrs,
            element("title", {"id": f"{self.id}-title"}, self.title),
            element("desc", {"id": f"{self.id}-desc"}, description),
            element("rect", {"width": self.width, "height": self.height, "fill": BACKGROUND}),
            element("text", {"x": 12, "y": 22, "font-size": 14, "font-weight": 600, "fill": INK}, self.title),
            body,
            legend,
        )

    def summary(self) -> str:
        """What the chart shows, in words: the window, and each series' latest and highest value."""
        n = len(self.times)
        words = [f"{n} buckets from {self.label(0)} to {self.label(n - 1)}."]
        for series in self.series:
            points = {i: v for i in range(n) if (v := _value(series, i)) is not None}
            total = f" Over the window: {series.total}." if series.total else ""
            if points:
                latest, highest = max(points), max(points, key=lambda i: (points[i], i))
                read = {i: series.reading(i, self.fmt(points[i])) for i in (latest, highest)}
                words.append(f"{series.name}: latest {read[latest]}, highest {read[highest]}.{total}")
            else:
                words.append(f"{series.name}: no data.{total}")
        return " ".join(words)


def _tick_lines(t: datetime, previous: datetime | None, *, by_day: bool, display: Display = UTC_DISPLAY) -> list[str]:
    """A tick's label: ``09:00`` or ``9:00 AM`` by the display's locale (and ``2 Nov`` below when the day changes),
    or just ``2 Nov`` for a midnight tick when ticks are a day or more apart; the first tick names the zone (``UTC``,
    ``BST``). ``t`` is already in the display's zone."""
    date = f"{t.day} {t:%b}"
    if by_day and (t.hour, t.minute) == (0, 0):
        lines = [date, ""]
    else:
        lines = [display.clock(t), date if by_day or previous is None or t.date() != previous.date() else ""]
    if previous is None:
        lines[1] = f"{lines[1]} {t.tzname()}".strip()
    return [line for line in lines if line]


def _value(series: Series, i: int) -> float | None:
    """The series' value in bucket ``i``; None for a gap, a missing or a non-finite value."""
    value = series.values[i] if i < len(series.values) else None
    return float(value) if value is not None and math.isfinite(value) else None


def _scale(highest: float, value_format: Callable[[float], str]) -> tuple[float, float]:
    """A round top for the y axis at or above ``highest``, and a round step giving at most five intervals.

    Counts step in whole numbers, durations in seconds in steps a clock reads well (15 s, 1 min, 5 min, 1 h).
    """
    highest = min(max(highest, 1e-9), 1e300) if highest > 0 else 1.0
    if value_format is seconds and highest <= 5 * CLOCK_STEPS[-1]:
        step = float(next(s for s in CLOCK_STEPS if s * 5 >= highest))
    else:
        magnitude = 10.0 ** math.floor(math.log10(highest / 5))
        multiples = (1, 2, 5, 10) if value_format is count else (1, 2, 2.5, 5, 10)
        step = max(
            next(m * magnitude for m in multiples if m * magnitude * 5 >= highest),
            1.0 if value_format is count else 0.0,
        )
    return max(math.ceil(highest / step - 1e-9), 1) * step, step


def _shorten(name: str, limit: int = 32) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _legend_layout(labels: Sequence[str], width: int) -> list[tuple[int, float]]:
    """Where each legend entry goes: its row, and its x (entries wrap at the chart's width)."""
    places, row, x = [], 0, 16.0
    for label in labels:
        size = 30 + 7 * len(clean(label)) + 18
        if x > 16 and x + size > width - 8:
            row, x = row + 1, 16.0
        places.append((row, x))
        x += size
    return places
