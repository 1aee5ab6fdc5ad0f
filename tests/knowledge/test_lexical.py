"""The BM25 index: searched in the caller's thread."""

from __future__ import annotations

import threading

import bm25s
import pytest

from vigil.knowledge.lexical import LexicalIndex


def test_a_lexical_search_runs_in_the_calling_thread(monkeypatch: pytest.MonkeyPatch):
    # bm25s starts a thread pool for a query unless told not to: per question, a thread started and joined.
    index = LexicalIndex(["x", "y"], ["annual fee waived", "card limit raised"])
    started = threading.active_count()

    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("a lexical search started a thread pool")

    monkeypatch.setattr(bm25s, "ThreadPoolExecutor", no_pool)
    assert index.search("annual fee", 2)[0].passage_id == "x"
    assert threading.active_count() == started
