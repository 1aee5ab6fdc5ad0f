"""The panel's SVG charts: well-formed, escaped, accessible, honest about gaps and empty data, readable axes."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markupsafe import Markup

from vigil.panel import overview_charts
from vigil.panel.charts import Series, count, line_chart, milliseconds, percent, seconds, stacked_bar_chart
from vigil.panel.display import Display
from vigil.panel.overview import Learning, Overview, Tally, Totals
from vigil.panel.svg import BACKGROUND, INK, MUTED, PALETTE

SVG = "{http://www.w3.org/2000/svg}"
T0 = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
HOSTILE = "<script>alert(1)</script> & \"quotes\" 'too'"


def hours(n: int, start: datetime = T0, step: timedelta = timedelta(hours=1)) -> list[datetime]:
    return [start + i * step for i in range(n)]


def parse(chart: Markup) -> ET.Element:
    assert isinstance(chart, Markup)
    return ET.fromstring(str(chart))


def texts(root: ET.Element, tag: str = "text") -> list[str]:
    return ["".join(e.itertext()) for e in root.iter(f"{SVG}{tag}")]


def y_labels(root: ET.Element) -> list[str]:
    return [e.text or "" for e in root.iter(f"{SVG}text") if e.get("text-anchor") == "end"]


def x_labels(root: ET.Element) -> list[str]:
    return [e.text or "" for e in root.iter(f"{SVG}text") if e.get("text-anchor") == "middle"]


def paths(root: ET.Element) -> list[str]:
    return [e.get("d", "") for e in root.iter(f"{SVG}path") if e.get("stroke-width") == "2" and e.get("fill") == "none"]


def a_line_chart(**overrides: object) -> Markup:
    arguments: dict[str, object] = {"title": "Rates", "value_format": percent, "y_max": 1.0}
    arguments |= overrides
    series = [Series("accepted", [0.5, 0.6, 0.7]), Series("dismissed", [0.2, 0.1, 0.3])]
    return line_chart(hours(3), series, **arguments)  # type: ignore[arg-type]


def test_a_line_chart_is_an_accessible_scalable_svg():
    root = parse(a_line_chart(width=500, height=200, chart_id="rates"))
    assert root.tag == f"{SVG}svg"
    assert root.get("role") == "img" and root.get("viewBox") == "0 0 500 200"
    assert (root.get("width"), root.get("height")) == ("500", "200")
    assert root.get("aria-labelledby") == "rates-title rates-desc"
    title, desc = root.find(f"{SVG}title"), root.find(f"{SVG}desc")
    assert title is not None and title.get("id") == "rates-title" and title.text == "Rates"
    assert desc is not None and desc.get("id") == "rates-desc"
    assert "Line chart" in (desc.text or "") and "accepted: latest 70%, highest 70%" in (desc.text or "")
    assert "3 buckets from 2026-11-02 00:00 UTC to 2026-11-02 02:00 UTC" in (desc.text or "")
    assert len(paths(root)) == 2  # one line per series


def test_hostile_text_is_escaped_everywhere():
    series = [Series(HOSTILE, [1, 2, 3])]
    for chart in (
        line_chart(hours(3), series, title=HOSTILE, description=HOSTILE),
        stacked_bar_chart(hours(3), [series], title=HOSTILE, description=HOSTILE),
        line_chart([], series, title=HOSTILE, description=HOSTILE),
    ):
        assert "<script" not in str(chart)
        root = parse(chart)
        assert not list(root.iter(f"{SVG}script")) and not list(root.iter("script"))
        assert root.find(f"{SVG}title").text == HOSTILE  # type: ignore[union-attr]
        assert HOSTILE in (root.find(f"{SVG}desc").text or "")  # type: ignore[union-attr]
    legend = texts(parse(line_chart(hours(3), [Series("<b>x</b>", [1, 2, 3])], title="t")))
    assert "<b>x</b>" in legend


def test_characters_xml_cannot_hold_are_replaced():
    root = parse(line_chart(hours(2), [Series("bad\x00name\x1b", [1, 2])], title="t\x08itle"))
    assert root.find(f"{SVG}title").text == "t\ufffditle"  # type: ignore[union-attr]
    assert "bad\ufffdname\ufffd" in texts(root)


@settings(max_examples=60, deadline=None)
@given(
    name=st.text(max_size=60),
    values=st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)), min_size=1, max_size=60),
)
def test_any_name_and_values_make_well_formed_charts(name: str, values: list[float | None]):
    times = hours(len(values))
    line = parse(line_chart(times, [Series(name, values)], title=name))
    bars = parse(stacked_bar_chart(times, [[Series(name, values)]], title=name))
    for root in (line, bars):
        assert root.get("role") == "img"
        for element in root.iter():
            assert "style" not in element.attrib and not element.tag.endswith(("style", "script"))


def test_nothing_to_draw_says_no_data_yet():
    empty = [
        line_chart([], [], title="Nothing"),
        line_chart(hours(4), [Series("p50", [None] * 4)], title="Gaps only"),
        stacked_bar_chart(hours(4), [[Series("shown", [0, 0, None, 0])]], title="Zeros"),
        stacked_bar_chart([], [], title="Nothing"),
    ]
    for chart in empty:
        root = parse(chart)
        assert "No data yet" in texts(root)
        assert "No data yet" in (root.find(f"{SVG}desc").text or "")  # type: ignore[union-attr]
        assert not paths(root) and not y_labels(root)


def test_a_gap_breaks_the_line_and_a_lone_point_keeps_a_marker():
    root = parse(line_chart(hours(6), [Series("median", [1, None, 3, 4, None, 2])], title="t"))
    (d,) = paths(root)
    assert d.count("M") == 3 and d.count("L") == 1  # [1] [3, 4] [2]
    markers = [e for e in root.iter(f"{SVG}circle") if e.find(f"{SVG}title") is not None]
    tips = ["".join(m.find(f"{SVG}title").itertext()) for m in markers]  # type: ignore[union-attr]
    assert tips[:4] == [
        "median, 2026-11-02 00:00 UTC: 1",
        "median, 2026-11-02 02:00 UTC: 3",
        "median, 2026-11-02 03:00 UTC: 4",
        "median, 2026-11-02 05:00 UTC: 2",
    ]
    assert "median: latest 2, highest 4" in (root.find(f"{SVG}desc").text or "")  # type: ignore[union-attr]


def test_a_long_line_marks_only_its_lone_points():
    values: list[float | None] = [float(i % 5) for i in range(100)]
    values[50] = values[52] = None
    root = parse(line_chart(hours(100), [Series("n", values)], title="t"))
    markers = [e for e in root.iter(f"{SVG}circle") if e.find(f"{SVG}title") is not None]
    assert len(markers) == 2  # the lone point at 51, and the legend's sample


@pytest.mark.parametrize(
    ("highest", "value_format", "labels"),
    [
        (7, count, ["0", "2", "4", "6", "8"]),
        (1.0, percent, ["0%", "20%", "40%", "60%", "80%", "100%"]),
        (400, seconds, ["0 s", "2 min", "4 min", "6 min", "8 min"]),
        (2300, milliseconds, ["0 ms", "500 ms", "1 s", "1.5 s", "2 s", "2.5 s"]),
        (0.4, count, ["0", "1"]),
    ],
)
def test_the_y_axis_has_a_few_round_ticks(highest: float, value_format: object, labels: list[str]):
    chart = line_chart(hours(3), [Series("s", [0, highest / 2, highest])], title="t", value_format=value_format)  # type: ignore[arg-type]
    assert y_labels(parse(chart)) == labels


def test_time_ticks_are_utc_with_the_date_where_it_changes():
    plus_two = timezone(timedelta(hours=2))
    times = hours(24, start=datetime(2026, 11, 2, 14, 0, tzinfo=plus_two))  # 12:00 UTC
    labels = x_labels(parse(line_chart(times, [Series("s", list(range(24)))], title="t")))
    assert labels[:2] == ["12:00", "2 Nov UTC"]
    assert "00:00" in labels and "3 Nov" in labels
    assert 4 <= len([t for t in labels if ":" in t]) <= 7


def test_a_week_of_six_hour_buckets_is_labelled_by_day():
    times = hours(28, step=timedelta(hours=6))
    labels = x_labels(parse(stacked_bar_chart(times, [[Series("faq", [5] * 28)]], title="t", width=800)))
    assert labels[:2] == ["2 Nov", "UTC"] and labels[2:5] == ["3 Nov", "4 Nov", "5 Nov"]


def test_stacked_bars_stack_and_stand_side_by_side():
    shown = Series("shown", [4, 0])
    verdicts = [Series("accepted", [2, 0]), Series("edited", [None, 0]), Series("dismissed", [1, 3])]
    root = parse(stacked_bar_chart(hours(2), [[shown], verdicts], title="t", width=400, height=220, chart_id="v"))
    rects = [e for e in root.iter(f"{SVG}rect") if e.find(f"{SVG}title") is not None]
    tips = ["".join(r.find(f"{SVG}title").itertext()) for r in rects]  # type: ignore[union-attr]
    assert tips == [
        "shown, 2026-11-02 00:00 UTC: 4",
        "accepted, 2026-11-02 00:00 UTC: 2",
        "dismissed, 2026-11-02 00:00 UTC: 1",
        "dismissed, 2026-11-02 01:00 UTC: 3",
    ]
    shown_bar, accepted, dismissed = rects[:3]
    assert float(accepted.get("x", 0)) > float(shown_bar.get("x", 0))  # side by side
    assert accepted.get("x") == dismissed.get("x")  # stacked
    top_of_accepted = float(accepted.get("y", 0))
    assert float(dismissed.get("y", 0)) + float(dismissed.get("height", 0)) == pytest.approx(top_of_accepted, abs=0.2)
    heights = [float(r.get("height", 0)) for r in rects[:3]]
    assert heights[1] == pytest.approx(2 * heights[2], abs=0.2) and heights[0] == pytest.approx(4 * heights[2], abs=0.2)
    patterns = {p.get("id") for p in root.iter(f"{SVG}pattern")}
    assert patterns and all(f"url(#{p})" in str(ET.tostring(root)) for p in patterns)


def test_series_differ_by_more_than_colour():
    series = [Series(f"s{i}", [i, i + 1]) for i in range(4)]
    root = parse(line_chart(hours(2), series, title="t"))
    dashes = {e.get("stroke-dasharray") for e in root.iter(f"{SVG}path") if e.get("fill") == "none"}
    assert len(dashes) >= 4  # solid (None) and three dash patterns
    shapes = [e.tag for e in root.iter() if e.find(f"{SVG}title") is not None and e.tag != f"{SVG}text"]
    assert {f"{SVG}circle", f"{SVG}rect", f"{SVG}polygon"} <= set(shapes)
    legend = texts(root)
    assert all(s.name in legend for s in series)


def contrast(a: str, b: str) -> float:
    def luminance(colour: str) -> float:
        channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_colours_contrast_with_the_background():
    assert all(contrast(colour, BACKGROUND) >= 3.0 for colour in PALETTE)  # graphics: WCAG 1.4.11
    assert contrast(INK, BACKGROUND) >= 4.5 and contrast(MUTED, BACKGROUND) >= 4.5  # text: WCAG 1.4.3


def test_chart_ids_are_unique_and_safe():
    first, second = parse(a_line_chart()), parse(a_line_chart())
    assert first.get("aria-labelledby") != second.get("aria-labelledby")
    unsafe = parse(a_line_chart(chart_id='x" onload="alert(1)'))
    assert re.fullmatch(r"chart-[0-9a-f]{8}-title chart-[0-9a-f]{8}-desc", unsafe.get("aria-labelledby", ""))


def an_overview(buckets: int = 3, kinds: tuple[str, ...] = ("answer", "next_step")) -> Overview:
    times = hours(buckets)
    tallies = [Tally.of(4, 2, 1, 1), Tally.of(2, 0, 0, 0), Tally.of(0, 1, 0, 0)][:buckets]
    return Overview(
        tenants=None,
        since=T0,
        until=T0 + timedelta(hours=buckets),
        bucket_s=3600,
        buckets=times,
        suggestions={kind: tallies for kind in kinds},
        all_kinds=tallies,
        answer_latency_p50_ms=[120.0, None, 90.0][:buckets],
        answer_latency_p90_ms=[300.0, None, 95.0][:buckets],
        first_response_median_s=[30.0, 45.0, None][:buckets],
        conversations=[1] * buckets,
        unanswered=[0] * buckets,
        first_response_met=[0] * buckets,
        first_response_late=[0] * buckets,
        knowledge={"faq": [3, 4, 4][:buckets], HOSTILE: [1, 1, 2][:buckets]},
        knowledge_sources={"mined": [0, 1, 3][:buckets], "imported": [4, 4, 4][:buckets]},
        totals=Totals(
            suggestions={},
            all_kinds=Tally(),
            answer_latency_p50_ms=None,
            answer_latency_p90_ms=None,
            first_response_median_s=None,
            conversations=0,
            unanswered=0,
            first_response_met=0,
            first_response_late=0,
            knowledge={},
            knowledge_sources={},
        ),
        learning=Learning(
            cases_mined=[5, 0, 2][:buckets],
            mined_faqs=[1, 1, 2][:buckets],
            answers=[Tally.of(2, 1, 0, 0), Tally(), Tally.of(1, 0, 0, 1)][:buckets],
            share=[0.5, None, 1.0][:buckets],
            total_cases_mined=7,
            total_answers=Tally.of(3, 1, 0, 1),
            total_share=0.6,
        ),
        truncated=True,
    )


def every_overview_chart(overview: Overview) -> list[Markup]:
    return [
        overview_charts.verdict_rates_chart(overview),
        overview_charts.verdict_rates_chart(overview, "next_step"),
        overview_charts.acceptance_chart(overview),
        overview_charts.verdicts_chart(overview),
        overview_charts.verdicts_chart(overview, "answer"),
        overview_charts.latency_chart(overview, width=480, height=200),
        overview_charts.first_response_chart(overview),
        overview_charts.knowledge_chart(overview),
        overview_charts.knowledge_sources_chart(overview),
        overview_charts.learning_chart(overview),
    ]


def test_every_overview_chart_renders_on_one_page_with_distinct_ids():
    page = [parse(chart) for chart in overview_charts.all_charts(an_overview())]
    assert len(page) == 9  # verdicts, acceptance, answer and next_step rates, latency, response, knowledge x2, learning
    ids = [e.get("id") for root in page for e in root.iter() if e.get("id")]
    assert len(ids) == len(set(ids))
    roots = [parse(chart) for chart in every_overview_chart(an_overview())]
    rates, next_step, acceptance, verdicts, _, latency, first_response, knowledge, sources, learning = roots
    assert texts(rates)[0] == "Verdicts on all suggestions" and texts(next_step)[0] == "Verdicts on next step"
    assert {"answer: 60% (3 of 5)", "next step: 60% (3 of 5)"} <= set(texts(acceptance))
    assert {"shown: 6", "accepted: 3", "edited: 1", "dismissed: 1"} <= set(texts(verdicts))
    assert "more rows than the overview reads" in (latency.find(f"{SVG}desc").text or "")  # type: ignore[union-attr]
    assert "median: latest 45 s, highest 45 s" in (first_response.find(f"{SVG}desc").text or "")  # type: ignore[union-attr]
    assert HOSTILE in texts(knowledge, "title")
    assert texts(sources)[0] == "Knowledge by source"
    assert {"mined: 3", "imported: 4"} <= set(texts(sources))  # the legend says how many at the window's end
    assert "mined, 2026-11-02 01:00 UTC: 1" in texts(sources, "title")
    assert texts(learning)[0] == "Learning from resolved cases"
    assert {"answers from mined knowledge: 60%", "of those, accepted: 50% (1 of 2)"} <= set(texts(learning))
    assert "7 cases mined in the window; 2 mined FAQs served" in (learning.find(f"{SVG}desc").text or "")  # type: ignore[union-attr]


def test_an_empty_overview_draws_honest_empty_charts():
    overview = an_overview(kinds=())
    overview = overview.model_copy(
        update={
            "all_kinds": [Tally()] * 3,
            "answer_latency_p50_ms": [None] * 3,
            "answer_latency_p90_ms": [None] * 3,
            "first_response_median_s": [None] * 3,
            "knowledge": {},
            "knowledge_sources": {"mined": [0, 0, 0], "imported": [0, 0, 0]},
            "learning": Learning(
                cases_mined=[0] * 3,
                mined_faqs=[0] * 3,
                answers=[Tally()] * 3,
                share=[None] * 3,
                total_cases_mined=0,
                total_answers=Tally(),
                total_share=None,
            ),
        }
    )
    for chart in every_overview_chart(overview):
        assert "No data yet" in texts(parse(chart))


def test_a_rate_says_the_count_behind_it_in_the_legend_the_tooltips_and_the_description():
    # Buckets judged 4 (2 accepted), none, 1 (1 accepted): 60% of the 5 judged over the window.
    root = parse(overview_charts.verdict_rates_chart(an_overview(), "answer"))
    assert {"accepted: 60% (3 of 5)", "edited: 20% (1 of 5)", "dismissed: 20% (1 of 5)"} <= set(texts(root))
    tips = texts(root, "title")
    assert "accepted, 2026-11-02 00:00 UTC: 50% (2 of 4)" in tips
    assert "accepted, 2026-11-02 02:00 UTC: 100% (1 of 1)" in tips
    description = root.find(f"{SVG}desc").text or ""  # type: ignore[union-attr]
    assert "accepted: latest 100% (1 of 1), highest 100% (1 of 1). Over the window: 60% (3 of 5)." in description
    assert "edited: latest 0% (0 of 1), highest 25% (1 of 4)." in description
    # A kind without a verdict in the window says so, rather than a rate of nothing.
    unjudged = {"answer": an_overview().all_kinds, "next_step": [Tally.of(2, 0, 0, 0)] * 3}
    acceptance = parse(overview_charts.acceptance_chart(an_overview().model_copy(update={"suggestions": unjudged})))
    assert {"answer: 60% (3 of 5)", "next step: no verdicts"} <= set(texts(acceptance))


def test_overview_charts_are_drawn_at_the_width_the_page_lays_them_out():
    # static/panel.css makes a column at least this wide (plus the box's padding), so the text is not scaled down.
    root = parse(overview_charts.all_charts(an_overview())[0])
    assert root.get("width") == str(overview_charts.WIDTH) == "560" and root.get("font-size") == "12"


def test_buckets_shorter_than_a_minute_are_told_apart_to_the_second():
    times = hours(4, step=timedelta(seconds=15))
    root = parse(line_chart(times, [Series("p50", [1.0, 2.0, 3.0, 4.0])], title="Latency"))
    assert "p50, 2026-11-02 00:00:15 UTC: 2" in texts(root, "title")
    assert "from 2026-11-02 00:00:00 UTC to 2026-11-02 00:00:45 UTC" in (root.find(f"{SVG}desc").text or "")  # type: ignore[union-attr]


def test_time_ticks_follow_the_display_zone_and_its_24_or_12_hour_clock():
    summer = hours(24, start=datetime(2026, 7, 1, 12, 0, tzinfo=UTC))
    uk = x_labels(
        parse(line_chart(summer, [Series("s", list(range(24)))], title="t", display=Display("en-GB", "Europe/London")))
    )
    assert uk[:2] == ["13:00", "1 Jul BST"]  # 12:00 UTC is 13:00 in London in summer
    us = x_labels(
        parse(
            line_chart(summer, [Series("s", list(range(24)))], title="t", display=Display("en-US", "America/New_York"))
        )
    )
    assert us[:2] == ["8:00 AM", "1 Jul EDT"]
    assert any(label.endswith("PM") for label in us)
    tips = texts(
        parse(line_chart(summer[:3], [Series("s", [1, 2, 3])], title="t", display=Display("en-GB", "Europe/London"))),
        "title",
    )
    assert any("2026-07-01 13:00 BST" in tip for tip in tips)


def test_every_overview_chart_labels_its_times_in_the_display_given():
    us = Display("en-US", "America/New_York")
    for chart in overview_charts.all_charts(an_overview(), display=us):
        labels = x_labels(parse(chart))
        assert labels[:2] == ["7:00 PM", "1 Nov EST"], labels  # 00:00 UTC on 2 Nov is the evening before there


def test_a_week_across_the_end_of_summer_time_is_still_labelled_by_day():
    # London leaves summer time at 01:00 UTC on 25 October 2026: the six-hour buckets stay six hours apart.
    times = hours(28, start=datetime(2026, 10, 25, 0, 0, tzinfo=UTC), step=timedelta(hours=6))
    chart = stacked_bar_chart(
        times, [[Series("faq", [5] * 28)]], title="t", width=800, display=Display("en-GB", "Europe/London")
    )
    labels = x_labels(parse(chart))
    assert labels[:2] == ["01:00", "25 Oct BST"] and "26 Oct" in labels and not any(":" in t for t in labels[2:])
