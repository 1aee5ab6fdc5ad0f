"""eval/irc_match.py: a suggestion matches a helper's answer when it is close in meaning and shares its specifics."""

from __future__ import annotations

import pytest

from eval.irc_match import THRESHOLD, Matcher, Pair, judge, new_words, pieces, unaddressed


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("edreamleo: cat /etc/issue", "cat /etc/issue"),
        ("woodgrain, no, that adds /home/<user>/bin to PATH", "no, that adds /home/<user>/bin to PATH"),
        ("<Berto> depends what you mean", "depends what you mean"),
        ("[ANF] MasterNinja: file names are case sensitive", "[ANF] MasterNinja: file names are case sensitive"),
        ("http://paste.ubuntu.com", "http://paste.ubuntu.com"),
        ("sudo apt-get install vlc", "sudo apt-get install vlc"),
    ],
)
def test_the_person_addressed_is_not_part_of_what_is_said(line, expected):
    assert unaddressed(line) == expected


def test_a_suggestion_is_judged_by_its_lines_and_sentences():
    assert pieces("Open a terminal. Then run df -h!\nnick: or use baobab") == [
        "Open a terminal.",
        "Then run df -h!",
        "or use baobab",
    ]
    assert pieces("   ") == [""]


def test_only_words_the_question_did_not_hold_count_as_shared_specifics():
    question = "how do I check free space on my disk?"
    assert new_words("run df -h to see the free space", "nick: df -h", question) == {"df", "h"}
    assert new_words("free space is shown in the disk app", "nick: check the free space with df", question) == set()
    assert "build-essential" in new_words("install build-essential first", "sudo apt-get install build-essential", "")
    assert new_words("don't do that", "it won't work", "") == set()  # no shared "t"


def test_both_halves_are_needed_for_a_match():
    pair = Pair(suggestion="df -h", answer="df -h", question="how much space is left?")
    assert judge(pair, THRESHOLD) and not judge(pair, THRESHOLD - 0.01)
    echo = Pair(suggestion="disk space", answer="disk space", question="disk space?")
    assert not judge(echo, 1.0)


def test_the_same_advice_in_other_words_matches_and_other_advice_on_the_topic_does_not(embedder):
    question = "how do i see which version of ubuntu i'm running?"
    pairs = [
        Pair(
            "To see your release, run lsb_release -a in a terminal.",
            "paiiiiii: 'lsb_release -a' should tell you.",
            question,
        ),
        Pair(
            "The release notes for each version are on the wiki.",
            "paiiiiii: 'lsb_release -a' should tell you.",
            question,
        ),
        Pair(
            "If you've forgotten your My Brightwave password, you can reset it yourself in a couple of minutes.",
            "goldbond, reset it with passwd username",
            "how do i overwrite a user's password on ubuntu?",
        ),
    ]
    scores = Matcher(embedder).scores(pairs)
    assert Matcher(embedder).matches(pairs) == [True, False, False]
    assert scores[0] > scores[1] and scores[0] > scores[2]
