"""Older #ubuntu threads as knowledge documents, imported whole: the yardstick a miner of resolved cases should beat.

Issue 12 compares vigil with its miner on and off. With the miner off, vigil knows only the help centre it was
given, which for #ubuntu knows nothing (the bundled one is Brightwave's), so "off" scores zero and any ratio to it is
no measure. This writes the other bound: every thread of the tune period that a helper spoke in, as one document
(``vigil/knowledge/documents.py``'s JSON lines), undistilled, unredacted, never merged. Imported with
``VIGIL_KNOWLEDGE__PATHS`` and replayed on the test period, it shows what knowing the past, without mining it, is
worth. Written outside the repository: the threads are the data set's (CC BY 4.0), not the team's.

- **Title**: the thread's first line (the question as the customer put it), up to 200 characters.
- **Content**: that line, then every helper's line without its addressee, one a line; bots' lines are left out.

    python -m eval.irc_knowledge --until 2009-12-31 --out /tmp/irc-kb/threads.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import date
from pathlib import Path
from typing import Any

from eval.irc_match import unaddressed
from eval.ubuntu_irc import THREADS, Selection, read_threads, role

_NOT_IN_ID = re.compile(r"[^A-Za-z0-9_.-]")


def document(thread: dict[str, Any]) -> dict[str, str] | None:
    """A thread as a knowledge document, or None when no helper spoke in it."""
    asker = thread["messages"][0]["speaker"]
    helpers = [m for m in thread["messages"] if role(m["speaker"], asker) == "analyst"]
    if not helpers:
        return None
    question = thread["messages"][0]["text"].strip()
    return {
        "id": "irc-" + _NOT_IN_ID.sub("-", thread["thread_id"]),
        "title": question[:200],
        "content": "\n".join([question, *(unaddressed(m["text"]) for m in helpers)]),
    }


def main(argv: list[str] | None = None) -> int:
    """Write the documents of the selected threads; say on stderr how many."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--threads", type=Path, default=THREADS, help=f"the threads file (default: {THREADS})")
    parser.add_argument("--out", type=Path, required=True, help="the JSON lines file to write (outside the repo)")
    parser.add_argument("--since", type=date.fromisoformat, help="threads dated on or after (YYYY-MM-DD)")
    parser.add_argument("--until", type=date.fromisoformat, help="threads dated on or before (YYYY-MM-DD)")
    args = parser.parse_args(argv)
    selection = Selection(since=args.since, until=args.until)
    threads = [t for t in read_threads(args.threads) if selection.keeps(t)]
    documents = [d for d in map(document, threads) if d is not None]
    with args.out.open("w", encoding="utf-8") as out:
        for doc in documents:
            out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    print(f"{len(documents)} documents from {len(threads)} threads", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
