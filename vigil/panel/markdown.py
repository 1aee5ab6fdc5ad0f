"""A knowledge entry's text as safe HTML: Markdown rendered by markdown-it-py, then cleaned by nh3 (ammonia).

Help-centre exports mix Markdown with inline HTML, so the renderer passes HTML through and the sanitiser decides
what stays: an allow-list of text tags, ``href`` on links (http, https, mailto or relative only), no ``style``,
no event handlers, no scripts, frames, forms or images. What is left needs nothing the panel's CSP forbids (it
allows no inline script or style). The body's headings are shifted so the first level is ``h2``: the page's
``h1`` is the entry's title.
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

TAGS = frozenset(
    "p br hr h2 h3 h4 h5 h6 strong em b i del s code pre kbd blockquote ul ol li a table thead tbody tr th td".split()
)
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"colspan", "rowspan"}, "td": {"colspan", "rowspan"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
_TOP_LEVEL = 2  # h1 is the page's title

_PARSER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def render(text: str) -> Markup:
    """``text`` (Markdown, perhaps with HTML in it) as HTML safe to put in a panel page."""
    tokens = _PARSER.parse(text)
    _shift_headings(tokens)
    html = _PARSER.renderer.render(tokens, _PARSER.options, {})
    cleaned = nh3.clean(html, tags=set(TAGS), attributes=ATTRIBUTES, url_schemes=set(URL_SCHEMES))
    return Markup(cleaned)  # trusted: nh3 kept only the allow-list above


def _shift_headings(tokens: list[Token]) -> None:
    levels = [int(t.tag[1]) for t in tokens if t.type == "heading_open"]
    if not levels:
        return
    shift = _TOP_LEVEL - min(levels)
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, max(_TOP_LEVEL, int(token.tag[1]) + shift))}"
