"""eval/irc_agreement.py: the match's threshold is the one that agrees best with people, measured out of fold."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eval import irc_agreement, irc_match
from eval.irc_agreement import Labelled, agreement, best_threshold, read_labelled
from eval.irc_match import Matcher, Pair

SHARED = Path(os.environ.get("VIGIL_SHARED_DATA", irc_agreement.THREADS.parent.parent))
TRAIN = SHARED / "ubuntu-irc" / "threads-train.jsonl.gz"


def test_agreement_counts_and_kappa():
    said = [True, True, False, False, True, False, False, False]
    truth = [True, False, True, False, True, False, False, False]
    result = agreement(said, truth)
    assert (result.tp, result.fp, result.fn, result.tn) == (2, 1, 1, 4)
    assert result.precision == pytest.approx(2 / 3) and result.recall == pytest.approx(2 / 3)
    assert result.accuracy == pytest.approx(6 / 8)
    # chance agreement: both say yes 3/8 of the time: (3/8)^2 + (5/8)^2 = 34/64
    assert result.kappa == pytest.approx((6 / 8 - 34 / 64) / (1 - 34 / 64))
    assert agreement([True, False], [True, False]).kappa == pytest.approx(1.0)


def labelled(score_and_label: list[tuple[float, bool]]) -> tuple[list[Labelled], list[float]]:
    items = [
        Labelled(Pair("run df -h", "df -h", "space?"), match=label, unsure=False, stratum="s", thread=f"t{i}")
        for i, (_, label) in enumerate(score_and_label)
    ]
    return items, [score for score, _ in score_and_label]


def test_the_threshold_is_the_one_with_the_best_f1():
    items, scores = labelled([(0.9, True), (0.7, True), (0.65, False), (0.5, True), (0.4, False), (0.3, False)])
    # at 0.70: 2 of 3 matches found, no false one (F1 0.8); at 0.50: all 3 and one false (F1 0.857)
    assert best_threshold(items, scores, grid=(0.5, 0.7, 0.95)) == 0.5
    assert best_threshold(items, scores, grid=(0.7, 0.95)) == 0.7


def test_labels_are_read_with_the_texts_of_the_threads_they_name(tmp_path):
    threads = tmp_path / "threads.jsonl"
    lines = [(1, "asker", "how do i see my disk space?"), (2, "helper", "asker: df -h"), (7, "x", "try df -h")]
    threads.write_text(
        json.dumps(
            {
                "thread_id": "2005-01-01.train-a:1",
                "date": "2005-01-01",
                "file": "2005-01-01.train-a",
                "messages": [
                    {"line": n, "time": "10:00", "speaker": s, "text": t, "reply_to": None} for n, s, t in lines
                ],
            }
        )
        + "\n"
    )
    labels = tmp_path / "labels.jsonl"
    rows = [
        {
            "question": "2005-01-01.train-a:1",
            "answer": "2005-01-01.train-a:2",
            "suggestion_lines": ["2005-01-01.train-a:7"],
        },
        {"question": "2005-01-01.train-a:1", "answer": "2005-01-01.train-a:2", "suggestion_text": "Restart the Hub."},
    ]
    labels.write_text(
        "".join(json.dumps(r | {"stratum": "s", "match": i == 0, "unsure": False}) + "\n" for i, r in enumerate(rows))
    )
    read = read_labelled(labels, threads)
    assert [item.pair for item in read] == [
        Pair("try df -h", "asker: df -h", "how do i see my disk space?"),
        Pair("Restart the Hub.", "asker: df -h", "how do i see my disk space?"),
    ]
    assert [item.match for item in read] == [True, False] and read[0].thread == "2005-01-01.train-a:1"


@pytest.mark.skipif(not TRAIN.exists(), reason=f"no {TRAIN} (set VIGIL_SHARED_DATA to ../shared/data)")
def test_the_shipped_threshold_is_the_one_the_labels_choose(embedder):
    items = read_labelled(irc_agreement.LABELS, TRAIN)
    assert len(items) >= 300 and sum(item.match for item in items) >= 50
    result = irc_agreement.report(items, Matcher(embedder).scores([item.pair for item in items]))
    assert result["threshold"] == irc_match.THRESHOLD
    assert result["out_of_fold"]["kappa"] > 0.3
