"""Procedures: the steps analysts take for one kind of task, mined from resolved conversations, and where a running
case stands in its procedure.

Pure: no I/O, no clock. The caller passes conversations in and stores the result (``Procedure.to_dict`` is JSON).

Mining (``mine``) takes ``(category or None, turns)`` per resolved conversation:

- An analyst turn carrying a step label (``Turn.step``, from ``metadata.step``) is that step.
- In a procedure with labels, an unlabelled analyst turn counts as the labelled step whose replies it resembles
  (TF-IDF cosine to the step's centre at least ``place_threshold``), else as no step (free text between steps).
- In a procedure with no labels at all, the analyst turns are clustered by their words (``vigil.progress.clusters``:
  TF-IDF and a leader pass, no model) and each group is a step named ``step<n>`` (0 the most frequent).
- A conversation with no category joins the procedure its words resemble most (``identify``); when no conversation
  has a category, all form one procedure, ``general``.

A ``Procedure`` keeps per step its count, a few typical replies and a template (the most frequent reply, ties broken
by closeness to the step's centre, then by length); the transitions between steps (from ``<start>``) and between
pairs of steps (second order); the words customers said just before each step (cues); which steps had been taken
before each step (``done``); the steps that always came before a step in at least ``require_support`` cases
(``requires``); the words of its conversations; and term weights to place an unlabelled reply at a step.

Tracking a running case, from its turns so far:

- ``identify(procedures, turns, category)`` -> ``(name, confidence)``: a known category is taken as given
  (confidence 1.0); otherwise naive Bayes over the conversation's words and step labels, prior by mined cases.
- ``locate(procedure, turns)`` -> the latest analyst step (labelled, or placed by ``place``: the nearest step by
  its words), or None.
- ``next_steps(procedure, turns, k)`` -> ``[NextStep(label, probability, template)]``, ranked: a second-order
  transition model backing off to first order and to step frequency (interpolated, Witten-Bell-like weights
  ``backoff``), times naive-Bayes evidence from what the customer said since the last analyst turn
  (weight ``cue_weight``) and from which steps the case has taken already (weight ``done_weight``), normalised
  over the procedure's steps.
- ``skipped(procedure, turns, step)`` -> the steps ``step`` requires that the case has not had yet.
- ``place(procedure, text)`` and ``history(procedure, turns)`` are the pieces: one reply's step, and the case's steps.

``MiningSettings`` and ``PredictSettings`` hold the parameters; their defaults were chosen on STAR's tune split.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vigil.progress import clusters

START = "<start>"
"""The step before a conversation's first analyst step."""

GENERAL = "general"
"""The one procedure mined when no conversation has a category."""


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of a conversation: who said it, what, and the analyst's step label when the platform sent one."""

    role: str  # "customer" | "analyst"
    text: str
    step: str | None = None


@dataclass(slots=True)
class StepInfo:
    """One step of a procedure: how often it was taken, typical replies, the template suggested, and its centre."""

    count: int
    template: str
    examples: list[str]
    centre: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class Procedure:
    """The mined graph of steps for one task. JSON-serialisable through ``to_dict`` / ``from_dict``."""

    name: str
    cases: int
    steps: dict[str, StepInfo]
    transitions: dict[str, dict[str, int]]
    requires: dict[str, list[str]]
    pairs: dict[str, dict[str, int]] = field(default_factory=dict)
    """Second order: ``"<a> <b>"`` (the two latest steps) -> next step -> count."""
    cues: dict[str, dict[str, int]] = field(default_factory=dict)
    """Step -> word -> in how many cases the customer said it just before the step."""
    done: dict[str, dict[str, int]] = field(default_factory=dict)
    """Step -> earlier step -> how many times the step was taken with the earlier one already done."""
    words: dict[str, int] = field(default_factory=dict)
    """Word (and ``step:<label>``) counts of the procedure's conversations, for ``identify``."""
    idf: dict[str, float] = field(default_factory=dict)
    """Term weights over its analyst turns, to place an unlabelled turn at a step."""
    _centres: clusters.Centres | None = field(default=None, init=False, repr=False, compare=False)
    """The steps' centres, indexed on first use (a procedure is not changed once mined or read)."""
    _undone: dict[str, float] | None = field(default=None, init=False, repr=False, compare=False)
    """Per step, the log-likelihood that no other step was done before it (``_done_scores``), made on first use."""

    def centres(self) -> tuple[list[str], clusters.Centres]:
        """The step names and their centres, in the same order, indexed to place a reply."""
        if self._centres is None:
            self._centres = clusters.Centres(info.centre for info in self.steps.values())
        return list(self.steps), self._centres

    def to_dict(self) -> dict[str, Any]:
        """The procedure as plain JSON-able data."""
        return {
            "name": self.name,
            "cases": self.cases,
            "steps": {
                k: {"count": s.count, "template": s.template, "examples": s.examples, "centre": s.centre}
                for k, s in self.steps.items()
            },
            "transitions": self.transitions,
            "requires": self.requires,
            "pairs": self.pairs,
            "cues": self.cues,
            "done": self.done,
            "words": self.words,
            "idf": self.idf,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Procedure:
        """The procedure ``to_dict`` wrote."""
        return cls(
            name=data["name"],
            cases=data["cases"],
            steps={k: StepInfo(**v) for k, v in data["steps"].items()},
            transitions=data["transitions"],
            requires=data["requires"],
            pairs=data.get("pairs", {}),
            cues=data.get("cues", {}),
            done=data.get("done", {}),
            words=data.get("words", {}),
            idf=data.get("idf", {}),
        )


@dataclass(frozen=True, slots=True)
class MiningSettings:
    """How procedures are mined. Defaults chosen on STAR's tune split (``bench/eval_star.py``)."""

    examples: int = 3
    """Typical replies kept per step."""
    place_threshold: float = 0.5
    """Cosine to a step's centre at which an unlabelled analyst turn counts as that step."""
    cluster_threshold: float = 0.5
    """Cosine to a group's centre at which an unlabelled turn joins it (procedures without labels)."""
    min_cluster: int = 2
    """Smaller groups are folded into their nearest group."""
    require_support: int = 5
    """A step must occur in this many cases before anything is required before it."""
    require_ratio: float = 1.0
    """The share of a step's cases in which another step came before it, for that step to be required."""
    vocabulary: int = 3000
    """Words kept per procedure for identification."""
    cue_vocabulary: int = 200
    """Customer words kept per step."""


@dataclass(frozen=True, slots=True)
class PredictSettings:
    """How the next step is ranked. Defaults chosen on STAR's tune split."""

    backoff: float = 1.0
    """Weight of the lower-order estimate against an observed context's counts (higher: trust context less)."""
    cue_weight: float = 3.0
    """Weight of the customer's words since the last analyst turn against the transition model."""
    done_weight: float = 0.3
    """Weight of which steps the case has already taken (naive Bayes over the set) against the transition model."""
    smoothing: float = 0.1
    """Additive smoothing of the word distributions (cues and identification)."""
    place_threshold: float = 0.5
    """Cosine to a step's centre at which an unlabelled analyst turn counts as that step."""


@dataclass(frozen=True, slots=True)
class NextStep:
    """A suggested next step of a procedure."""

    label: str
    probability: float
    template: str


# --- mining ---------------------------------------------------------------------------------------------------------


def mine(
    conversations: Iterable[tuple[str | None, Sequence[Turn]]], settings: MiningSettings = MiningSettings()
) -> dict[str, Procedure]:
    """Mine one procedure per category from resolved conversations (see the module docstring)."""
    groups: dict[str, list[Sequence[Turn]]] = defaultdict(list)
    loose: list[Sequence[Turn]] = []
    for category, turns in conversations:
        (groups[category] if category else loose).append(turns)
    if not groups and loose:
        groups[GENERAL] = loose
        loose = []
    if loose:
        first = {name: _mine_one(name, convs, settings) for name, convs in groups.items()}
        for turns in loose:
            groups[identify(first, turns)[0]].append(turns)
    return {name: _mine_one(name, convs, settings) for name, convs in sorted(groups.items())}


def _mine_one(name: str, conversations: Sequence[Sequence[Turn]], settings: MiningSettings) -> Procedure:
    steps_of = _label_turns(conversations, settings)
    proc = Procedure(name=name, cases=len(conversations), steps={}, transitions={}, requires={})
    analyst_texts: dict[str, list[str]] = defaultdict(list)
    transitions: dict[str, Counter[str]] = defaultdict(Counter)
    pairs: dict[str, Counter[str]] = defaultdict(Counter)
    cues: dict[str, Counter[str]] = defaultdict(Counter)
    done: dict[str, Counter[str]] = defaultdict(Counter)
    before: dict[str, Counter[str]] = defaultdict(Counter)
    occurs: Counter[str] = Counter()
    words: Counter[str] = Counter()
    for conv, steps in zip(conversations, steps_of, strict=True):
        words.update(_identity_words(conv, steps))
        seen: list[str] = []
        a, b = START, START
        said: set[str] = set()
        for turn, step in zip(conv, steps, strict=True):
            if turn.role != "analyst":
                said.update(clusters.tokens(turn.text))
                continue
            if step is None:
                said = set()
                continue
            analyst_texts[step].append(turn.text)
            transitions[b][step] += 1
            pairs[f"{a} {b}"][step] += 1
            cues[step].update(said)
            done[step].update(set(seen))
            if step not in seen:
                occurs[step] += 1
                before[step].update(set(seen))
                seen.append(step)
            a, b, said = b, step, set()
    proc.idf = clusters.idf(clusters.tokens(t) for texts in analyst_texts.values() for t in texts)
    proc.steps = {s: _step_info(texts, proc.idf, settings) for s, texts in sorted(analyst_texts.items())}
    proc.transitions = {k: dict(v) for k, v in transitions.items()}
    proc.pairs = {k: dict(v) for k, v in pairs.items()}
    proc.cues = {k: dict(v.most_common(settings.cue_vocabulary)) for k, v in cues.items()}
    proc.done = {k: dict(v) for k, v in done.items()}
    proc.words = dict(words.most_common(settings.vocabulary))
    proc.requires = {
        s: sorted(p for p, c in before[s].items() if c >= settings.require_ratio * n)
        for s, n in occurs.items()
        if n >= settings.require_support and any(c >= settings.require_ratio * n for c in before[s].values())
    }
    return proc


def _label_turns(conversations: Sequence[Sequence[Turn]], settings: MiningSettings) -> list[list[str | None]]:
    """Each turn's step: its label; for an unlabelled analyst turn, the labelled step it resembles or its group."""
    labels = [[t.step if t.role == "analyst" else None for t in conv] for conv in conversations]
    unlabelled = [
        (i, j)
        for i, conv in enumerate(conversations)
        for j, t in enumerate(conv)
        if t.role == "analyst" and t.step is None
    ]
    if not unlabelled:
        return labels
    texts = [conversations[i][j].text for i, j in unlabelled]
    if any(t.step for conv in conversations for t in conv if t.role == "analyst"):
        placed = _place_by_labels(conversations, texts, settings.place_threshold)
    else:
        groups = clusters.cluster(texts, settings.cluster_threshold, settings.min_cluster)
        placed = [f"step{g}" for g in groups]
    for (i, j), step in zip(unlabelled, placed, strict=True):
        labels[i][j] = step
    return labels


def _place_by_labels(
    conversations: Sequence[Sequence[Turn]], texts: Sequence[str], threshold: float
) -> list[str | None]:
    by_step: dict[str, list[str]] = defaultdict(list)
    for conv in conversations:
        for t in conv:
            if t.role == "analyst" and t.step:
                by_step[t.step].append(t.text)
    weights = clusters.idf(clusters.tokens(t) for ts in by_step.values() for t in ts)
    names = list(by_step)
    centres = clusters.Centres(
        clusters.centre(clusters.vector(clusters.tokens(t), weights) for t in by_step[s]) for s in names
    )
    return [_nearest_step(clusters.vector(clusters.tokens(t), weights), names, centres, threshold) for t in texts]


def _step_info(texts: Sequence[str], weights: Mapping[str, float], settings: MiningSettings) -> StepInfo:
    vecs = {t: clusters.vector(clusters.tokens(t), weights) for t in set(texts)}
    centre = clusters.centre(vecs[t] for t in texts)
    freq = Counter(texts)
    ranked = sorted(freq, key=lambda t: (-freq[t], -clusters.cosine(vecs[t], centre), len(t), t))
    return StepInfo(count=len(texts), template=ranked[0], examples=ranked[: settings.examples], centre=centre)


def _identity_words(conv: Sequence[Turn], steps: Sequence[str | None]) -> Counter[str]:
    words: Counter[str] = Counter()
    for turn, step in zip(conv, steps, strict=True):
        words.update(clusters.tokens(turn.text))
        if turn.step:  # only a platform's label names the procedure; a clustered group's name does not
            words[f"step:{step}"] += 1
    return words


# --- tracking a running case ------------------------------------------------------------------------------------------


def identify(
    procedures: Mapping[str, Procedure],
    turns: Sequence[Turn],
    category: str | None = None,
    settings: PredictSettings = PredictSettings(),
) -> tuple[str, float]:
    """The procedure a conversation follows, and the confidence in it (0..1).

    A category naming a mined procedure is taken as given. Otherwise the procedures are ranked by naive Bayes over
    the conversation's words and step labels; with no procedures, ``("", 0.0)``.
    """
    if category is not None and category in procedures:
        return category, 1.0
    if not procedures:
        return "", 0.0
    words: Counter[str] = Counter()
    for turn in turns:
        words.update(clusters.tokens(turn.text))
        if turn.step:
            words[f"step:{turn.step}"] += 1
    vocab = {w for p in procedures.values() for w in p.words}
    words = Counter({w: c for w, c in words.items() if w in vocab})
    total_cases = sum(p.cases for p in procedures.values())
    alpha = settings.smoothing
    scores = {}
    for name, p in procedures.items():
        total = sum(p.words.values()) + alpha * len(vocab)
        s = math.log((p.cases + 1) / (total_cases + len(procedures)))
        s += sum(c * math.log((p.words.get(w, 0) + alpha) / total) for w, c in words.items())
        scores[name] = s
    probs = _softmax(scores)
    best = max(probs, key=lambda n: (probs[n], n))
    return best, probs[best]


def place(procedure: Procedure, text: str, settings: PredictSettings = PredictSettings()) -> str | None:
    """The step an unlabelled analyst reply resembles most (cosine to its centre), or None below the threshold."""
    names, centres = procedure.centres()
    vec = clusters.vector(clusters.tokens(text), procedure.idf)
    return _nearest_step(vec, names, centres, settings.place_threshold)


def history(procedure: Procedure, turns: Sequence[Turn], settings: PredictSettings = PredictSettings()) -> list[str]:
    """The steps a case has taken so far, in order: labelled analyst turns, and unlabelled ones placed by words."""
    out = []
    for turn in turns:
        if turn.role != "analyst":
            continue
        step = turn.step or place(procedure, turn.text, settings)
        if step is not None:
            out.append(step)
    return out


def locate(procedure: Procedure, turns: Sequence[Turn], settings: PredictSettings = PredictSettings()) -> str | None:
    """The step the case is at: its latest analyst step, or None before the first."""
    steps = history(procedure, turns, settings)
    return steps[-1] if steps else None


def next_steps(
    procedure: Procedure, turns: Sequence[Turn], k: int = 3, settings: PredictSettings = PredictSettings()
) -> list[NextStep]:
    """The ``k`` likeliest next steps of a case, with their probabilities and templates (see the module docstring)."""
    if not procedure.steps:
        return []
    steps = [START, START, *history(procedure, turns, settings)]
    a, b = steps[-2], steps[-1]
    taken = set(steps[2:])
    said = _customer_since_analyst(turns)
    scores = {s: math.log(p) for s, p in _transition_probs(procedure, a, b, settings.backoff).items()}
    if said and settings.cue_weight:
        for s, cue in _cue_scores(procedure, said, settings.smoothing).items():
            scores[s] += settings.cue_weight * cue
    if settings.done_weight:
        for s, evidence in _done_scores(procedure, taken).items():
            scores[s] += settings.done_weight * evidence
    probs = _softmax(scores)
    ranked = sorted(probs, key=lambda s: (-probs[s], s))[:k]
    return [NextStep(s, probs[s], procedure.steps[s].template) for s in ranked]


def skipped(
    procedure: Procedure, turns: Sequence[Turn], step: str, settings: PredictSettings = PredictSettings()
) -> list[str]:
    """The steps ``step`` requires (always came before it in the mined cases) that the case has not had yet."""
    seen = set(history(procedure, turns, settings))
    return [r for r in procedure.requires.get(step, []) if r not in seen]


def _transition_probs(procedure: Procedure, a: str, b: str, backoff: float) -> dict[str, float]:
    """P(next | a, b), interpolated down to P(next | b) and to step frequency (add-one)."""
    total = sum(s.count for s in procedure.steps.values())
    p0 = {s: (info.count + 1) / (total + len(procedure.steps)) for s, info in procedure.steps.items()}
    p1 = _interpolate(procedure.transitions.get(b, {}), p0, backoff)
    return _interpolate(procedure.pairs.get(f"{a} {b}", {}), p1, backoff)


def _interpolate(counts: Mapping[str, int], lower: Mapping[str, float], backoff: float) -> dict[str, float]:
    n = sum(counts.values())
    # Witten-Bell-like: a context followed by many different steps leans more on the lower order.
    weight = backoff * max(len(counts), 1)
    return {s: (counts.get(s, 0) + weight * p) / (n + weight) for s, p in lower.items()}


def _cue_scores(procedure: Procedure, said: set[str], alpha: float) -> dict[str, float]:
    """Mean log-likelihood of the customer's words under each step's cue words (naive Bayes, per word)."""
    vocab = {w for c in procedure.cues.values() for w in c}
    words = [w for w in said if w in vocab]
    if not words:
        return {s: 0.0 for s in procedure.steps}
    out = {}
    for s in procedure.steps:
        cue = procedure.cues.get(s, {})
        total = sum(cue.values()) + alpha * len(vocab)
        out[s] = sum(math.log((cue.get(w, 0) + alpha) / total) for w in words) / len(words)
    # Centred, so the weight scales evidence rather than a constant shared by every step.
    mean = sum(out.values()) / len(out)
    return {s: v - mean for s, v in out.items()}


def _done_scores(procedure: Procedure, taken: set[str]) -> dict[str, float]:
    """Log-likelihood of which steps are done (and which not) before each candidate step (Bernoulli naive Bayes).

    Per candidate: the likelihood that none was done, kept with the procedure, then for each step taken the odds of
    its having been done. Linear in the steps a case has taken, not quadratic in the procedure's."""
    if procedure._undone is None:
        procedure._undone = {}
        for s, info in procedure.steps.items():
            n, done = info.count, {x: d for x, d in procedure.done.get(s, {}).items() if x in procedure.steps}
            never = math.log((n + 0.5) / (n + 1))  # a step never done before s
            procedure._undone[s] = (len(procedure.steps) - len(done)) * never + sum(
                math.log((n - d + 0.5) / (n + 1)) for d in done.values()
            )
    taken = {x for x in taken if x in procedure.steps}
    out = {}
    for s, info in procedure.steps.items():
        done = procedure.done.get(s, {})
        n = info.count
        out[s] = procedure._undone[s] + sum(
            math.log((done.get(x, 0) + 0.5) / (n + 1)) - math.log((n - done.get(x, 0) + 0.5) / (n + 1)) for x in taken
        )
    return out


def _customer_since_analyst(turns: Sequence[Turn]) -> set[str]:
    said: set[str] = set()
    for turn in reversed(turns):
        if turn.role == "analyst":
            break
        said.update(clusters.tokens(turn.text))
    return said


def _nearest_step(
    vec: Mapping[str, float], names: Sequence[str], centres: clusters.Centres, threshold: float
) -> str | None:
    """The step whose centre is nearest ``vec`` at ``threshold`` or above (the last of equals), or None."""
    k, _ = centres.nearest(vec, threshold, last=True)
    return names[k] if k >= 0 else None


def _softmax(scores: Mapping[str, float]) -> dict[str, float]:
    top = max(scores.values())
    exp = {k: math.exp(v - top) for k, v in scores.items()}
    z = sum(exp.values())
    return {k: v / z for k, v in exp.items()}
