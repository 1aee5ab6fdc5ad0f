"""Next-step suggestion on STAR (issue 13): mine procedures from the dialogues that started before a cut, replay the
later ones, and before each step the agent took, rank the next step from the conversation so far.

    python -m bench.eval_star --split tune                 # mine before TUNE_CUT, replay [TUNE_CUT, TEST_CUT)
    python -m bench.eval_star --split test                 # mine before TEST_CUT, replay from TEST_CUT (report once)
    python -m bench.eval_star --data DIR --split test      # replay another directory of the same layout
    python -m bench.eval_star --cut 2020-05-22 --data DIR  # mine every dialogue of the history before the cut

Data (``/work/shared/data/README.md``, STAR row; ``VIGIL_SHARED_DATA`` says where): every ``dialogues*.jsonl.gz`` of a
directory (dev: ``dialogues-dev``) and ``tasks/<task>/<task>.json``. A dialogue becomes vigil turns: a User ``utter`` is
a customer turn, a Wizard ``utter`` an unlabelled analyst turn, a Wizard ``pick_suggestion`` an analyst turn whose step
is its ``ActionLabel``. Queries, knowledge-base returns and the Wizard's drafts (``request_suggestions``) are not turns:
a customer never sees them. Each ``pick_suggestion`` is a prediction point: from the turns before it, rank the next
step; the gold is its ``ActionLabel``. Single-task dialogues are mined and scored; multi-task ones (the Wizard switches
task mid-dialogue) are only replayed, on one extra line, with the procedure identified from the text.

Measured, hit@1 and hit@3:
- **vigil**, category given (the task) and identified from the text (``identify``), labelled mining;
- **baselines**: the most frequent step overall, the task's most frequent step, and the most frequent step after the
  previous one (first order, category given);
- **unlabelled**: mining and replay without any step label; the clusters are scored by mapping each to the label most
  of its mined turns carried (majority), so a hit is a cluster whose majority label is the gold.
- **graph agreement**: the mined transitions with support (at least ``EDGE_MIN`` cases and ``EDGE_SHARE`` of the
  step's outgoing ones) against each task's published flowchart, as edge precision and recall. The flowchart's
  pseudo nodes (``query``, ``yes``/``no``, ``available``, ``info_missing``...) are contracted: an edge A -> query ->
  query_success -> B is the edge A -> B. A pseudo node nobody points at (a customer's ``yes``) is a decision whose
  source the chart does not draw; a mined edge into its target counts as drawn. Precision is given over all mined
  edges and over those between steps the chart draws (the charts leave out ``anything_else``, ``goodbye``,
  ``out_of_scope``...).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vigil.progress.procedures import (
    START,
    PredictSettings,
    Procedure,
    Turn,
    identify,
    mine,
    next_steps,
    place,
)

SHARED = Path(os.environ.get("VIGIL_SHARED_DATA") or "/work/shared/data")
STAR = SHARED / "star"

TUNE_CUT = datetime(2020, 5, 16, 6, tzinfo=UTC)
"""Mining for the tune split ends here (about 60% of the dev dialogues by start time)."""
TEST_CUT = datetime(2020, 5, 18, 22, tzinfo=UTC)
"""The tune split ends and the test split starts here (about 80%)."""

EDGE_MIN = 5
EDGE_SHARE = 0.05
PSEUDO = {
    "query",
    "query_check",
    "query_book",
    "query_success",
    "query_failure",
    "available",
    "unavailable",
    "yes",
    "no",
    "info_missing",
    "info_missing2",
    "correct",
    "incorrect",
    "noanswer",
    "done",
}
IMPLICIT = {
    "query": ("query_success", "query_failure"),
    "query_book": ("query_success", "query_failure"),
    "query_check": ("available", "unavailable", "query_success", "query_failure"),
}


@dataclass(frozen=True, slots=True)
class Dialogue:
    """A STAR dialogue as vigil turns, with the index of each turn that is a prediction point."""

    dialogue_id: int
    start: datetime
    tasks: tuple[str, ...]
    turns: tuple[Turn, ...]

    @property
    def task(self) -> str | None:
        return self.tasks[0] if len(self.tasks) == 1 else None

    def unlabelled(self) -> Dialogue:
        turns = tuple(Turn(t.role, t.text) for t in self.turns)
        return Dialogue(self.dialogue_id, self.start, self.tasks, turns)


def to_dialogue(record: Mapping[str, Any]) -> Dialogue:
    """The vigil turns of one STAR record (see the module docstring)."""
    turns = []
    for e in record["events"]:
        if e.get("Action") == "utter" and e.get("Agent") in ("User", "Wizard"):
            turns.append(Turn("customer" if e["Agent"] == "User" else "analyst", e.get("Text") or ""))
        elif e.get("Action") == "pick_suggestion" and e.get("Agent") == "Wizard" and e.get("ActionLabel"):
            turns.append(Turn("analyst", e.get("Text") or "", e["ActionLabel"]))
    start = datetime.fromtimestamp(record["start_unix"], UTC)
    return Dialogue(record["dialogue_id"], start, tuple(record["tasks"]), tuple(turns))


def load(directory: Path) -> list[Dialogue]:
    """The dialogues of every ``dialogues*.jsonl.gz`` in ``directory`` (STAR dev has one, ``dialogues-dev``)."""
    files = sorted(directory.glob("dialogues*.jsonl.gz"))
    if not files:
        raise FileNotFoundError(f"no dialogues*.jsonl.gz in {directory}")
    out: list[Dialogue] = []
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            out.extend(to_dialogue(json.loads(line)) for line in f if line.strip())
    return out


# --- scoring --------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Score:
    """Hits at 1 and 3 over prediction points."""

    n: int = 0
    hit1: int = 0
    hit3: int = 0

    def add(self, gold: str, ranked: Sequence[str]) -> None:
        self.n += 1
        self.hit1 += bool(ranked) and ranked[0] == gold
        self.hit3 += gold in ranked[:3]

    def row(self) -> str:
        if not self.n:
            return "n=0"
        return f"hit@1 {self.hit1 / self.n:.3f}  hit@3 {self.hit3 / self.n:.3f}  (n={self.n})"


@dataclass(slots=True)
class Baselines:
    """The most frequent step overall, per task, and after the previous step (labelled mining)."""

    overall: list[str]
    per_task: dict[str, list[str]]
    after: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    @classmethod
    def of(cls, procedures: Mapping[str, Procedure]) -> Baselines:
        overall: Counter[str] = Counter()
        per_task = {}
        after = {}
        for name, p in procedures.items():
            counts = Counter({s: i.count for s, i in p.steps.items()})
            overall.update(counts)
            per_task[name] = _top(counts)
            after[name] = {prev: _top(Counter(nxt)) for prev, nxt in p.transitions.items()}
        return cls(_top(overall), per_task, after)

    def first_order(self, task: str, turns: Sequence[Turn]) -> list[str]:
        prev = next((t.step for t in reversed(turns) if t.role == "analyst" and t.step), START)
        return self.after.get(task, {}).get(prev) or self.per_task.get(task, self.overall)


def _top(counts: Counter[str], k: int = 3) -> list[str]:
    return [s for s, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


def points(dialogue: Dialogue) -> Iterable[tuple[Sequence[Turn], str]]:
    """Each prediction point: the turns before a labelled analyst turn, and its label."""
    for i, turn in enumerate(dialogue.turns):
        if turn.role == "analyst" and turn.step:
            yield dialogue.turns[:i], turn.step


def replay_labelled(
    procedures: Mapping[str, Procedure], dialogues: Sequence[Dialogue], settings: PredictSettings
) -> dict[str, Score]:
    """vigil with the category and identified, and the baselines, over the single-task dialogues."""
    base = Baselines.of(procedures)
    scores: dict[str, Score] = defaultdict(Score)
    for d in dialogues:
        task = d.task
        if task is None:
            continue
        for context, gold in points(d):
            if task in procedures:
                scores["vigil, category given"].add(gold, _labels(next_steps(procedures[task], context, 3, settings)))
            name, _ = identify(procedures, context, None, settings)
            scores["identified: procedure right"].add(task, [name])
            ranked = _labels(next_steps(procedures[name], context, 3, settings)) if name else []
            scores["vigil, identified from the text"].add(gold, ranked)
            scores["baseline: most frequent step overall"].add(gold, base.overall)
            scores["baseline: task's most frequent step"].add(gold, base.per_task.get(task, base.overall))
            scores["baseline: most frequent after the previous step"].add(gold, base.first_order(task, context))
    return scores


def replay_multi(
    procedures: Mapping[str, Procedure], dialogues: Sequence[Dialogue], settings: PredictSettings
) -> Score:
    """vigil on multi-task dialogues, the procedure identified from the text at each point."""
    score = Score()
    for d in dialogues:
        if d.task is not None:
            continue
        for context, gold in points(d):
            name, _ = identify(procedures, context, None, settings)
            score.add(gold, _labels(next_steps(procedures[name], context, 3, settings)) if name else [])
    return score


def cluster_labels(
    procedures: Mapping[str, Procedure], mined: Sequence[Dialogue], settings: PredictSettings
) -> dict[tuple[str, str], str]:
    """Each (procedure, cluster) -> the gold label most of its mined turns carried."""
    votes: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for d in mined:
        if d.task is None or d.task not in procedures:
            continue
        for turn in d.turns:
            if turn.role == "analyst" and turn.step:
                cluster = place(procedures[d.task], turn.text, settings)
                if cluster is not None:
                    votes[(d.task, cluster)][turn.step] += 1
    return {k: v.most_common(1)[0][0] for k, v in votes.items()}


def replay_unlabelled(
    procedures: Mapping[str, Procedure],
    mapping: Mapping[tuple[str, str], str],
    dialogues: Sequence[Dialogue],
    settings: PredictSettings,
) -> dict[str, Score]:
    """vigil mined and replayed without labels; a predicted cluster stands for its majority label."""
    scores: dict[str, Score] = defaultdict(Score)
    for d in dialogues:
        task = d.task
        if task is None:
            continue
        bare = d.unlabelled().turns
        for i, turn in enumerate(d.turns):
            if not (turn.role == "analyst" and turn.step):
                continue
            context = bare[:i]
            for key, name in (("category given", task), ("identified from the text", None)):
                proc = name if name is not None and name in procedures else identify(procedures, context)[0]
                ranked = [mapping.get((proc, s.label), "") for s in next_steps(procedures[proc], context, 3, settings)]
                scores[f"vigil unlabelled, {key}"].add(turn.step, ranked)
    return scores


def _labels(steps: Iterable[Any]) -> list[str]:
    return [s.label for s in steps]


# --- flowcharts -----------------------------------------------------------------------------------------------------


def chart_edges(graph: Mapping[str, str]) -> tuple[set[tuple[str, str]], set[str], set[str]]:
    """A flowchart's edges between real steps (pseudo nodes contracted), the targets of undrawn decisions, its nodes."""
    succ: dict[str, set[str]] = defaultdict(set)
    for a, b in graph.items():
        succ[a].add(b)
    for p, implicit in IMPLICIT.items():
        if p in succ or p in graph.values():
            succ[p].update(x for x in implicit if x in succ)
    nodes = {n for n in set(graph) | set(graph.values()) if n not in PSEUDO}

    def reach(node: str) -> set[str]:
        out, stack, seen = set(), list(succ.get(node, ())), set()
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if n in PSEUDO:
                stack.extend(succ.get(n, ()))
            else:
                out.add(n)
        return out

    edges = {(a, b) for a in nodes for b in reach(a)}
    pointed = {b for bs in succ.values() for b in bs}
    decisions = {b for p in PSEUDO if p in succ and p not in pointed for b in reach(p)}
    return edges, decisions, nodes


def mined_edges(procedure: Procedure) -> set[tuple[str, str]]:
    """The mined transitions with support (``EDGE_MIN`` cases and ``EDGE_SHARE`` of the step's outgoing ones)."""
    out = set()
    for a, nxt in procedure.transitions.items():
        if a == START:
            continue
        total = sum(nxt.values())
        out |= {(a, b) for b, c in nxt.items() if c >= EDGE_MIN and c >= EDGE_SHARE * total}
    return out


@dataclass(slots=True)
class Agreement:
    """Edge counts of mined graphs against flowcharts."""

    mined: int = 0
    mined_drawn: int = 0
    right: int = 0
    right_drawn: int = 0
    chart: int = 0
    found: int = 0

    def add(self, mined: set[tuple[str, str]], chart: tuple[set[tuple[str, str]], set[str], set[str]]) -> None:
        edges, decisions, nodes = chart
        ok = {e for e in mined if e in edges or e[1] in decisions}
        drawn = {e for e in mined if e[0] in nodes and e[1] in nodes}
        self.mined += len(mined)
        self.mined_drawn += len(drawn)
        self.right += len(ok)
        self.right_drawn += len(ok & drawn)
        self.chart += len(edges)
        self.found += len(edges & mined)

    def row(self) -> str:
        p = self.right / self.mined if self.mined else 0.0
        pd = self.right_drawn / self.mined_drawn if self.mined_drawn else 0.0
        r = self.found / self.chart if self.chart else 0.0
        return (
            f"precision {p:.2f} ({self.right}/{self.mined}), between drawn steps {pd:.2f} "
            f"({self.right_drawn}/{self.mined_drawn}), recall {r:.2f} ({self.found}/{self.chart})"
        )


def graph_agreement(procedures: Mapping[str, Procedure], tasks_dir: Path) -> dict[str, Agreement]:
    out: dict[str, Agreement] = {}
    total = Agreement()
    for name, proc in sorted(procedures.items()):
        path = tasks_dir / name / f"{name}.json"
        if not path.exists():
            continue
        chart = chart_edges(json.loads(path.read_text())["graph"])
        out[name] = Agreement()
        out[name].add(mined_edges(proc), chart)
        total.add(mined_edges(proc), chart)
    out["overall"] = total
    return out


# --- the run --------------------------------------------------------------------------------------------------------


def split(
    history: Sequence[Dialogue], replayed: Sequence[Dialogue], cut: datetime, until: datetime | None
) -> tuple[list[Dialogue], list[Dialogue]]:
    """The single-task dialogues of the history before ``cut`` (mined); the replayed ones from ``cut`` to ``until``."""
    mined = [d for d in history if d.start < cut and d.task is not None]
    later = [d for d in replayed if d.start >= cut and (until is None or d.start < until)]
    return mined, later


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=STAR, help="the directory replayed (STAR's layout)")
    parser.add_argument("--history", type=Path, default=STAR, help="the directory mined from (default: STAR dev)")
    parser.add_argument("--split", choices=("tune", "test"), default="tune")
    parser.add_argument(
        "--cut",
        type=lambda s: datetime.fromisoformat(s).replace(tzinfo=UTC),
        default=None,
        help="mine before this instant and replay from it (overrides --split)",
    )
    parser.add_argument("--no-category", action="store_true", help="only the identified-from-text rows")
    parser.add_argument("--unlabelled", action="store_true", help="also mine and replay without step labels")
    parser.add_argument("--cue-weight", type=float, default=None)
    parser.add_argument("--backoff", type=float, default=None)
    args = parser.parse_args(argv)
    began = time.monotonic()

    history = load(args.history)
    replayed = history if args.data.resolve() == args.history.resolve() else load(args.data)
    cut, until = (TUNE_CUT, TEST_CUT) if args.split == "tune" else (TEST_CUT, None)
    if args.cut is not None:
        cut, until = args.cut, None
    mined, later = split(history, replayed, cut, until)
    settings = PredictSettings()
    if args.cue_weight is not None:
        settings = _with(settings, cue_weight=args.cue_weight)
    if args.backoff is not None:
        settings = _with(settings, backoff=args.backoff)
    print(
        f"mined {len(mined)} single-task dialogues before {cut:%Y-%m-%d %H:%M}; replaying {len(later)} "
        f"({sum(d.task is not None for d in later)} single-task) from {args.data}"
    )

    procedures = mine((d.task, d.turns) for d in mined)
    scores = replay_labelled(procedures, later, settings)
    for key, score in scores.items():
        if args.no_category and ("category" in key or "baseline" in key):
            continue
        print(f"  {key:<50} {score.row()}")
    print(f"  {'vigil, multi-task dialogues, identified':<50} {replay_multi(procedures, later, settings).row()}")

    if args.unlabelled:
        bare = mine((d.task, d.unlabelled().turns) for d in mined)
        mapping = cluster_labels(bare, mined, settings)
        print(
            f"  unlabelled: {sum(len(p.steps) for p in bare.values())} clusters for "
            f"{sum(len(p.steps) for p in procedures.values())} labels"
        )
        for key, score in replay_unlabelled(bare, mapping, later, settings).items():
            if args.no_category and "category" in key:
                continue
            print(f"  {key:<50} {score.row()}")

    tasks_dir = args.data / "tasks" if (args.data / "tasks").is_dir() else STAR / "tasks"
    print("graph agreement (labelled mining, edges with support):")
    for name, agreement in graph_agreement(procedures, tasks_dir).items():
        print(f"  {name:<24} {agreement.row()}")
    print(f"({time.monotonic() - began:.0f} s)", file=sys.stderr)


def _with(settings: PredictSettings, **changes: float) -> PredictSettings:
    from dataclasses import replace

    return replace(settings, **changes)


if __name__ == "__main__":
    main()
