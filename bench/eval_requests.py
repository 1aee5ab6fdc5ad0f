"""Does a customer need something? The question detector on the team's labelled support chats.

    python -m bench.eval_requests [--split tune|test|all] [--errors N]
    python -m bench.eval_requests --learned     # the rules beside a classifier over the sentence embedding
    python -m bench.eval_requests --knowledge   # ... and beside a strong knowledge match (Brightwave only)

Labels: ``bench/data/requests-*.jsonl``: customer messages of four fictional companies' support chats (first
messages and follow-ups, several styles), each labelled ``needs`` (the analyst should answer or act) with a
``kind``, written before any rule was tuned on them. The set is split by conversation into a tune half (for looking
at errors while changing the detector) and a test half (reported, never tuned on); the split is a stable hash, so
it never changes.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from vigil.answers.needs import BUNDLED, ImplicitRequests
from vigil.cases.questions import classify
from vigil.knowledge.embedding import Embedder

DATA = Path(__file__).resolve().parent / "data"
FIELDS = ("id", "company", "conversation", "position", "context", "text", "style", "needs", "kind")


@dataclass(frozen=True, slots=True)
class Labelled:
    id: str
    company: str
    conversation: str
    position: str
    context: str
    text: str
    style: str
    needs: bool
    kind: str


def split_of(conversation: str) -> str:
    """A conversation's half: its messages stay together, and the split never changes."""
    return "tune" if hashlib.sha256(conversation.encode()).digest()[0] % 2 == 0 else "test"


def load(folder: Path = DATA) -> list[Labelled]:
    """Every labelled message of ``folder``'s ``requests-*.jsonl``, checked.

    Raises:
        ValueError: a line lacks a field, or an id is repeated.
    """
    rows: list[Labelled] = []
    for path in sorted(folder.glob("requests-*.jsonl")):
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if not line.strip():
                continue
            raw = json.loads(line)
            missing = [name for name in FIELDS if name not in raw]
            if missing:
                raise ValueError(f"{path.name}:{number}: missing {', '.join(missing)}")
            rows.append(Labelled(**{name: raw[name] for name in FIELDS}))
    ids = [row.id for row in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("labelled ids repeat")
    return rows


@dataclass(frozen=True, slots=True)
class Scores:
    n: int
    precision: float
    recall: float
    f1: float
    accuracy: float


def scores(rows: Iterable[Labelled], detect: Callable[[str], bool]) -> Scores:
    """Precision and recall of ``detect`` at finding the messages that need something."""
    tp = fp = fn = tn = 0
    for row in rows:
        said = detect(row.text)
        tp += row.needs and said
        fp += not row.needs and said
        fn += row.needs and not said
        tn += not row.needs and not said
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    n = tp + fp + fn + tn
    return Scores(n, precision, recall, f1, (tp + tn) / n if n else 0.0)


def rules(text: str) -> bool:
    """The detector as it is: vigil's rules."""
    return classify(text).asks


def table(rows: list[Labelled], detect: Callable[[str], bool]) -> list[str]:
    lines = ["| subset | n | precision | recall | F1 | accuracy |", "|---|---:|---:|---:|---:|---:|"]
    groups: dict[str, list[Labelled]] = defaultdict(list)
    for row in rows:
        groups["all"].append(row)
        groups[f"{row.position} messages"].append(row)
        groups[f"company: {row.company}"].append(row)
        groups[f"style: {row.style}"].append(row)
    order = {"all": 0, "first messages": 1, "follow_up messages": 2}
    for name, subset in sorted(groups.items(), key=lambda item: (order.get(item[0], 3), item[0])):
        s = scores(subset, detect)
        lines.append(f"| {name} | {s.n} | {s.precision:.3f} | {s.recall:.3f} | {s.f1:.3f} | {s.accuracy:.3f} |")
    return lines


def recall_by_kind(rows: list[Labelled], detect: Callable[[str], bool]) -> list[str]:
    """How often the detector speaks, per kind: the share of ``needs`` kinds it finds, of the others it speaks on."""
    lines = ["| kind | needs | n | detector speaks |", "|---|---|---:|---:|"]
    kinds: dict[tuple[str, bool], list[Labelled]] = defaultdict(list)
    for row in rows:
        kinds[(row.kind, row.needs)].append(row)
    for (kind, needs), subset in sorted(kinds.items(), key=lambda item: (not item[0][1], item[0][0])):
        spoke = sum(detect(row.text) for row in subset)
        lines.append(f"| {kind} | {needs} | {len(subset)} | {spoke / len(subset):.2f} |")
    return lines


def fit_implicit_requests(rows: list[Labelled]) -> ImplicitRequests:
    """A logistic regression over the sentence embedding vigil computes (all-MiniLM-L6-v2), fitted on the tune half
    only: its regularisation chosen by 5-fold cross-validation, its threshold (for the rules OR'd with it) the best
    F1 with precision at least 0.90 on its out-of-fold predictions."""
    import numpy as np
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import cross_val_predict

    model = _embedder()
    tune = [row for row in rows if split_of(row.conversation) == "tune"]
    vectors = np.asarray(model.embed([row.text for row in tune]))
    needs = np.asarray([row.needs for row in tune])
    regression = LogisticRegressionCV(Cs=10, cv=5, max_iter=3000)
    out_of_fold = cross_val_predict(regression, vectors, needs, cv=5, method="predict_proba")[:, 1]
    regression.fit(vectors, needs)
    said_by_rules = np.asarray([rules(row.text) for row in tune])

    def tune_f1(threshold: float) -> float:
        said = said_by_rules | (out_of_fold > threshold)
        tp, fp, fn = (needs & said).sum(), (~needs & said).sum(), (needs & ~said).sum()
        precision, recall = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
        return 0.0 if precision < 0.9 or not precision + recall else 2 * precision * recall / (precision + recall)

    threshold = max((round(float(t), 2) for t in np.arange(0.5, 0.99, 0.01)), key=tune_f1)
    weights = np.asarray(regression.coef_[0], dtype=np.float32)
    return ImplicitRequests(model.name, weights, float(regression.intercept_[0]), threshold)


def learned(rows: list[Labelled], model: ImplicitRequests) -> dict[str, Callable[[str], bool]]:
    """The regression alone (at 0.5), and the rules OR'd with it above its threshold (what vigil ships)."""
    embedder = _embedder()
    cache: dict[str, float] = {}

    def probability(text: str) -> float:
        if text not in cache:
            cache[text] = model.probability(embedder.embed([text])[0])
        return cache[text]

    return {
        "learned: logistic regression over the embedding": lambda text: probability(text) > 0.5,
        f"rules, or the regression above {model.threshold:.2f}": lambda text: (
            rules(text) or probability(text) > model.threshold
        ),
    }


@functools.cache
def _embedder() -> Embedder:
    from vigil.knowledge.embedding import SentenceTransformerEmbedder

    model = SentenceTransformerEmbedder()
    model.load()
    return model


def knowledge_confidences(texts: list[str]) -> dict[str, float]:
    """What the answer skill would propose for each text, as its confidence (0 when it proposes nothing), with the
    bundled Brightwave help centre in a throwaway store: the only company of the set whose knowledge vigil has."""
    import asyncio
    from datetime import UTC, datetime

    from bench.knowledge_env import knowledge_store
    from vigil.answers.settings import AnswerSettings
    from vigil.answers.skill import AnswerSkill
    from vigil.knowledge.documents import discover, read
    from vigil.wire.events import Message

    root = DATA.parent.parent
    entries = [
        e for path in discover([root / "knowledge" / "articles", root / "knowledge" / "faqs"]) for e in read(path)
    ]

    async def confidences() -> dict[str, float]:
        found: dict[str, float] = {}
        async with knowledge_store() as knowledge:
            await knowledge.upsert(entries)
            skill = AnswerSkill(knowledge, AnswerSettings())
            for number, text in enumerate(texts):
                message = Message(
                    type="message",
                    schema_version=1,
                    message_id=f"m-{number}",
                    conversation_id=f"c-{number}",
                    tenant="brightwave",
                    sent_at=datetime.now(UTC),
                    role="customer",
                    text=text,
                )
                proposals = await skill.propose(message, None)
                found[text] = max((p.confidence for p in proposals), default=0.0)
        return found

    return asyncio.run(confidences())


def knowledge_matched(rows: list[Labelled]) -> dict[str, Callable[[str], bool]]:
    """The rules, or a strong knowledge match counted as an implicit request: the threshold is the best F1 (with
    precision at least 0.90) on the tune half's Brightwave messages."""
    brightwave = [row for row in rows if row.company == "brightwave"]
    confidence = knowledge_confidences([row.text for row in brightwave])
    tune = [row for row in brightwave if split_of(row.conversation) == "tune"]

    def detector(threshold: float) -> Callable[[str], bool]:
        return lambda text: rules(text) or confidence.get(text, 0.0) >= threshold

    def tune_f1(threshold: float) -> float:
        s = scores(tune, detector(threshold))
        return s.f1 if s.precision >= 0.9 else 0.0

    threshold = max((t / 100 for t in range(50, 100)), key=tune_f1)
    return {f"rules, or the answer skill's confidence >= {threshold:.2f}": detector(threshold)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=["tune", "test", "all"], default="test")
    parser.add_argument("--errors", type=int, default=0, help="print this many misclassified tune messages")
    parser.add_argument("--learned", action="store_true", help="compare the rules with the learned classifier")
    parser.add_argument(
        "--save", action="store_true", help=f"with --learned: refit on the tune half and save it as {BUNDLED.name}"
    )
    parser.add_argument(
        "--knowledge", action="store_true", help="the three detectors side by side on the Brightwave messages"
    )
    args = parser.parse_args()
    rows = load()
    chosen = [row for row in rows if args.split == "all" or split_of(row.conversation) == args.split]
    if args.knowledge:
        detectors = {"rules": rules, **learned(rows, ImplicitRequests.load()), **knowledge_matched(rows)}
        brightwave = [row for row in chosen if row.company == "brightwave"]
        print(f"Split: {args.split}, Brightwave messages only ({len(brightwave)})\n")
        print("| detector | precision | recall | F1 | accuracy |\n|---|---:|---:|---:|---:|")
        for name, detect in detectors.items():
            s = scores(brightwave, detect)
            print(f"| {name} | {s.precision:.3f} | {s.recall:.3f} | {s.f1:.3f} | {s.accuracy:.3f} |")
        return
    if args.learned:
        from bench import eval_questions

        model = fit_implicit_requests(rows) if args.save else ImplicitRequests.load()
        if args.save:
            model.save(BUNDLED, fitted_by="python -m bench.eval_requests --learned --save", fitted_on="tune half")
        detectors = {"rules": rules, **learned(rows, model)}
        irc = [r for r in eval_questions.load() if eval_questions.split_of(r.thread_id) == "test"]
        as_labelled = [Labelled(r.thread_id, "irc", r.thread_id, "", "", r.text, "", r.asks, "") for r in irc]
        print(f"Split: {args.split} ({len(chosen)} of {len(rows)} messages); IRC: its test half ({len(irc)})\n")
        print("| detector | precision | recall | F1 | accuracy | IRC precision | IRC recall | IRC F1 | IRC accuracy |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, detect in detectors.items():
            s, i = scores(chosen, detect), scores(as_labelled, detect)
            print(
                f"| {name} | {s.precision:.3f} | {s.recall:.3f} | {s.f1:.3f} | {s.accuracy:.3f} "
                f"| {i.precision:.3f} | {i.recall:.3f} | {i.f1:.3f} | {i.accuracy:.3f} |"
            )
        return
    print(f"Split: {args.split} ({len(chosen)} of {len(rows)} messages)\n")
    print("\n".join(table(chosen, rules)), end="\n\n")
    print("\n".join(recall_by_kind(chosen, rules)))
    if args.errors:
        wrong = [r for r in rows if split_of(r.conversation) == "tune" and r.needs != rules(r.text)]
        for row in wrong[: args.errors]:
            verdict = classify(row.text)
            print(f"{'FN' if row.needs else 'FP'} {row.kind:18} {verdict.reason:20} {row.text[:140]!r}")


if __name__ == "__main__":
    main()
