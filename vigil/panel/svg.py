"""SVG building blocks for the panel's charts: escaped elements, the series styles, markers and fill patterns.

``element`` is the one place markup is made: attribute values and text are escaped (and characters XML forbids
replaced), only ``Markup`` children pass through as they are. Styles are presentation attributes, never ``style``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from markupsafe import Markup, escape

# Okabe-Ito hues, darkened where needed: each has at least 3:1 contrast against the white background.
PALETTE = ("#0072B2", "#D55E00", "#007D5A", "#B4408C", "#8A6100", "#3F3F3F", "#6A3D9A")
DASHES = (None, "7 3", "2 3", "9 3 2 3", "4 2", "1 2", "12 4")
MARKERS = ("circle", "square", "triangle", "diamond", "cross", "plus", "ring")
PATTERNS = ("solid", "diagonal", "dots", "crosshatch", "horizontal", "vertical", "reverse")
INK, MUTED, GRID, BACKGROUND = "#222222", "#555555", "#D9D9D9", "#FFFFFF"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")

Attributes = Mapping[str, object]


def clean(text: str) -> str:
    """``text`` with the characters XML cannot hold replaced by U+FFFD."""
    return _INVALID_XML.sub("\ufffd", text)


def element(tag: str, attributes: Attributes | None = None, *children: str | Markup) -> Markup:
    """``<tag ...>children</tag>``, escaping every attribute value and every child that is not ``Markup``."""
    attrs = "".join(
        f' {name}="{escape(clean(_attribute(value)))}"'
        for name, value in (attributes or {}).items()
        if value is not None
    )
    if not children:
        return Markup(f"<{tag}{attrs}/>")
    inner = "".join(child if isinstance(child, Markup) else escape(clean(child)) for child in children)
    return Markup(f"<{tag}{attrs}>{inner}</{tag}>")


def _attribute(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


@dataclass(frozen=True, slots=True)
class Style:
    """How one series looks: a colour, a dash pattern and a marker (lines), a fill pattern (bars)."""

    index: int

    @property
    def colour(self) -> str:
        return PALETTE[self.index % len(PALETTE)]

    @property
    def dash(self) -> str | None:
        return DASHES[self.index % len(DASHES)]

    @property
    def marker(self) -> str:
        return MARKERS[self.index % len(MARKERS)]

    @property
    def pattern(self) -> str:
        return PATTERNS[self.index % len(PATTERNS)]

    def fill(self, chart_id: str) -> str:
        """The fill of a bar: the colour, or a reference to this style's pattern in the chart's ``<defs>``."""
        return self.colour if self.pattern == "solid" else f"url(#{chart_id}-fill-{self.index})"


def marker(style: Style, x: float, y: float, tooltip: str, r: float = 3.5) -> Markup:
    """A point marker in the style's shape, with a tooltip."""
    tip = element("title", None, tooltip)
    common = {"fill": style.colour, "stroke": style.colour}
    shape = style.marker
    if shape in ("circle", "ring"):
        fill = BACKGROUND if shape == "ring" else style.colour
        return element(
            "circle", {"cx": x, "cy": y, "r": r, "fill": fill, "stroke": style.colour, "stroke-width": 1.5}, tip
        )
    if shape == "square":
        return element("rect", {"x": x - r, "y": y - r, "width": 2 * r, "height": 2 * r, **common}, tip)
    if shape in ("triangle", "diamond"):
        corners = [(x, y - r - 1), (x + r + 1, y + r), (x - r - 1, y + r)]
        if shape == "diamond":
            corners = [(x, y - r - 1), (x + r + 1, y), (x, y + r + 1), (x - r - 1, y)]
        points = " ".join(f"{px:.1f},{py:.1f}" for px, py in corners)
        return element("polygon", {"points": points, **common}, tip)
    if shape == "cross":
        d = f"M{x - r:.1f},{y - r:.1f}L{x + r:.1f},{y + r:.1f}M{x - r:.1f},{y + r:.1f}L{x + r:.1f},{y - r:.1f}"
    else:
        d = f"M{x - r - 1:.1f},{y:.1f}H{x + r + 1:.1f}M{x:.1f},{y - r - 1:.1f}V{y + r + 1:.1f}"
    return element("path", {"d": d, "fill": "none", "stroke": style.colour, "stroke-width": 2}, tip)


def pattern(style: Style, chart_id: str) -> Markup:
    """The ``<pattern>`` a bar of this style is filled with: white lines or dots over the colour."""
    kind = style.pattern
    rotate = {"diagonal": 45, "crosshatch": 45, "reverse": -45}.get(kind)
    white = {"stroke": BACKGROUND, "stroke-width": 2}
    marks = {
        "dots": [element("circle", {"cx": 3, "cy": 3, "r": 1.4, "fill": BACKGROUND})],
        "horizontal": [element("line", {"x1": 0, "y1": 3, "x2": 6, "y2": 3, **white})],
        "crosshatch": [
            element("line", {"x1": 0, "y1": 0, "x2": 0, "y2": 6, **white}),
            element("line", {"x1": 0, "y1": 0, "x2": 6, "y2": 0, **white}),
        ],
    }.get(kind, [element("line", {"x1": 0, "y1": 0, "x2": 0, "y2": 6, **white})])
    attributes = {
        "id": f"{chart_id}-fill-{style.index}",
        "width": 6,
        "height": 6,
        "patternUnits": "userSpaceOnUse",
        "patternTransform": f"rotate({rotate})" if rotate is not None else None,
    }
    return element("pattern", attributes, element("rect", {"width": 6, "height": 6, "fill": style.colour}), *marks)
