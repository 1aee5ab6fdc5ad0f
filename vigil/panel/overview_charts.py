"""The lead overview's charts: each draws one part of an ``Overview`` as an SVG chart.

A verdict looks the same in every chart (accepted, edited, dismissed, shown keep their colour and pattern), and
every chart has a fixed element id prefix, so one page can hold them all.
"""

from __future__ import annotations

import re

from markupsafe import Markup

from vigil.panel.charts import Series, count, line_chart, milliseconds, percent, seconds, stacked_bar_chart
from vigil.panel.display import UTC_DISPLAY, Display
from vigil.panel.overview import Overview, Tally

WIDTH = 560
"""The width charts are drawn at, in CSS px: the page lays them out at about this size, so their text keeps its
size (``static/panel.css`` sizes the grid's columns to match)."""
STYLES = {"shown": 0, "accepted": 2, "edited": 1, "dismissed": 3}
_PARTIAL = "The oldest buckets are empty: the window held more rows than the overview reads."


def all_charts(
    overview: Overview, *, width: int = WIDTH, height: int = 260, display: Display = UTC_DISPLAY
) -> list[Markup]:
    """Every chart of the overview, in the order a page shows them: verdicts, acceptance by kind, each kind's
    verdict rates, answer latency, time to first response, knowledge size by kind and by source, the learning
    curve."""
    w, h = width, height
    return [
        verdicts_chart(overview, width=w, height=h, display=display),
        acceptance_chart(overview, width=w, height=h, display=display),
        *(verdict_rates_chart(overview, kind, width=w, height=h, display=display) for kind in overview.suggestions),
        latency_chart(overview, width=w, height=h, display=display),
        first_response_chart(overview, width=w, height=h, display=display),
        knowledge_chart(overview, width=w, height=h, display=display),
        knowledge_sources_chart(overview, width=w, height=h, display=display),
        learning_chart(overview, width=w, height=h, display=display),
    ]


def verdict_rates_chart(
    overview: Overview,
    kind: str | None = None,
    *,
    width: int = WIDTH,
    height: int = 260,
    display: Display = UTC_DISPLAY,
) -> Markup:
    """Accepted, edited and dismissed as shares of the suggestions judged, per bucket, for one kind (None: all)."""
    tallies = _tallies(overview, kind)
    total = Tally.total(tallies)
    series = [
        Series(
            verdict,
            [getattr(t, f"{rate}_rate") for t in tallies],
            style=STYLES[verdict],
            counts=[share(t, verdict) for t in tallies],
            total=rate_of(total, verdict),
        )
        for verdict, rate in (("accepted", "accept"), ("edited", "edit"), ("dismissed", "dismiss"))
    ]
    return line_chart(
        overview.buckets,
        series,
        title=f"Verdicts on {_label(kind)}",
        description="Share of the suggestions judged in each bucket, by their latest verdict.",
        value_format=percent,
        y_max=1.0,
        width=width,
        height=height,
        chart_id=_chart_id("rates", kind),
        display=display,
    )


def acceptance_chart(
    overview: Overview, *, width: int = WIDTH, height: int = 260, display: Display = UTC_DISPLAY
) -> Markup:
    """The accept rate of each suggestion kind, per bucket."""
    series = [
        Series(
            _label(kind),
            [t.accept_rate for t in tallies],
            counts=[share(t, "accepted") for t in tallies],
            total=rate_of(Tally.total(tallies), "accepted"),
        )
        for kind, tallies in overview.suggestions.items()
    ]
    return line_chart(
        overview.buckets,
        series,
        title="Accepted, by kind of suggestion",
        description="Share of the suggestions judged in each bucket that were accepted, one line per kind.",
        value_format=percent,
        y_max=1.0,
        width=width,
        height=height,
        chart_id="overview-acceptance",
        display=display,
    )


def verdicts_chart(
    overview: Overview,
    kind: str | None = None,
    *,
    width: int = WIDTH,
    height: int = 260,
    display: Display = UTC_DISPLAY,
) -> Markup:
    """Per bucket, the suggestions shown next to the verdicts given (accepted, edited, dismissed stacked)."""
    tallies = _tallies(overview, kind)

    def of(name: str) -> Series:
        values = [getattr(t, name) for t in tallies]
        return Series(name, values, style=STYLES[name], total=count(sum(values)))

    return stacked_bar_chart(
        overview.buckets,
        [[of("shown")], [of("accepted"), of("edited"), of("dismissed")]],
        title=f"Shown and judged: {_label(kind)}",
        description="Per bucket, a bar of suggestions shown and a bar of the verdicts given in it.",
        value_format=count,
        width=width,
        height=height,
        chart_id=_chart_id("verdicts", kind),
        display=display,
    )


def latency_chart(
    overview: Overview, *, width: int = WIDTH, height: int = 260, display: Display = UTC_DISPLAY
) -> Markup:
    """Answer latency, the 50th and 90th percentile per bucket."""
    series = [Series("p50", overview.answer_latency_p50_ms), Series("p90", overview.answer_latency_p90_ms)]
    return line_chart(
        overview.buckets,
        series,
        title="Answer latency",
        description=f"Time vigil took to suggest an answer, in milliseconds. {_partial(overview)}".strip(),
        value_format=milliseconds,
        width=width,
        height=height,
        chart_id="overview-latency",
        display=display,
    )


def first_response_chart(
    overview: Overview, *, width: int = WIDTH, height: int = 260, display: Display = UTC_DISPLAY
) -> Markup:
    """The median time from a customer's first message to the first analyst reply, per bucket."""
    return line_chart(
        overview.buckets,
        [Series("median", overview.first_response_median_s)],
        title="Time to first response",
        description=f"Median, by the bucket of the first customer message. {_partial(overview)}".strip(),
        value_format=seconds,
        width=width,
        height=height,
        chart_id="overview-first-response",
        display=display,
    )


def knowledge_chart(
    overview: Overview, *, width: int = WIDTH, height: int = 260, display: Display = UTC_DISPLAY
) -> Markup:
    """Active knowledge entries at the end of each bucket, stacked by kind."""
    series = [Series(kind, sizes) for kind, sizes in overview.knowledge.items()]
    return stacked_bar_chart(
        overview.buckets,
        [series],
        title="Knowledge size",
        description="Active knowledge entries at the end of each bucket, by kind (all tenants).",
        value_format=count,
        width=width,
        height=height,
        chart_id="overview-knowledge",
        display=display,
    )


def knowledge_sources_chart(
    overview: Overview, *, width: int = WIDTH, height: int = 260, display: Display = UTC_DISPLAY
) -> Markup:
    """Active knowledge entries at the end of each bucket, stacked by source: mined from resolved cases, and
    imported; each with how many there are at the window's end."""
    series = [
        Series(source, sizes, total=count(sizes[-1] if sizes else 0))
        for source, sizes in overview.knowledge_sources.items()
    ]
    return stacked_bar_chart(
        overview.buckets,
        [series],
        title="Knowledge by source",
        description="Active knowledge entries at the end of each bucket: mined from cases analysts resolved, and "
        "imported from the help centre's files.",
        value_format=count,
        width=width,
        height=height,
        chart_id="overview-knowledge-sources",
        display=display,
    )


def learning_chart(
    overview: Overview, *, width: int = WIDTH, height: int = 260, display: Display = UTC_DISPLAY
) -> Markup:
    """The learning curve: per bucket, the share of the answers shown that were drawn from mined knowledge, and the
    share of those judged that were accepted."""
    learned = overview.learning
    series = [
        Series(
            "answers from mined knowledge",
            learned.share,
            counts=[
                f"{t.shown} of {a.shown}" if a.shown else None
                for t, a in zip(learned.answers, _tallies(overview, "answer"), strict=True)
            ],
            total=percent(learned.total_share) if learned.total_share is not None else "no answers",
        ),
        Series(
            "of those, accepted",
            [t.accept_rate for t in learned.answers],
            style=STYLES["accepted"],
            counts=[share(t, "accepted") for t in learned.answers],
            total=rate_of(learned.total_answers, "accepted"),
        ),
    ]
    return line_chart(
        overview.buckets,
        series,
        title="Learning from resolved cases",
        description=f"Share of the answers shown in each bucket that were drawn from knowledge mined from resolved "
        f"cases, and of those judged, the share accepted. {learned.total_cases_mined} cases mined in the window; "
        f"{learned.mined_faqs[-1] if learned.mined_faqs else 0} mined FAQs served at its end.",
        value_format=percent,
        y_max=1.0,
        width=width,
        height=height,
        chart_id="overview-learning",
        display=display,
    )


def judged(tally: Tally) -> int:
    """The suggestions of a tally that got a verdict: what its rates are shares of."""
    return tally.accepted + tally.edited + tally.dismissed


def share(tally: Tally, verdict: str) -> str | None:
    """The count behind a verdict's rate, ``3 of 6``; None without a verdict."""
    whole = judged(tally)
    return f"{getattr(tally, verdict)} of {whole}" if whole else None


def rate_of(tally: Tally, verdict: str) -> str:
    """A verdict's rate with the count behind it, ``50% (3 of 6)``; ``no verdicts`` without any."""
    part = share(tally, verdict)
    return f"{percent(getattr(tally, verdict) / judged(tally))} ({part})" if part else "no verdicts"


def _tallies(overview: Overview, kind: str | None) -> list[Tally]:
    if kind is None:
        return overview.all_kinds
    return overview.suggestions.get(kind, [Tally()] * len(overview.buckets))


def _label(kind: str | None) -> str:
    return "all suggestions" if kind is None else kind.replace("_", " ")


def _chart_id(chart: str, kind: str | None) -> str:
    return f"overview-{chart}-{re.sub(r'[^A-Za-z0-9_-]', '-', kind or 'all')[:32]}"


def _partial(overview: Overview) -> str:
    return _PARTIAL if overview.truncated else ""
