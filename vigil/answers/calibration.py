"""Calibrated confidence: turning raw similarities into the probability that a suggestion is right.

A logistic model ``p = 1 / (1 + exp(-(w · x + b)))`` over a few features of a match, fitted by Newton's method
(iteratively reweighted least squares, with a small L2 penalty) on labelled matches. The coefficients vigil ships
with, and how they were fitted, are recorded in ``docs/evaluation.md``; ``bench/calibrate.py`` refits them.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Logistic:
    """A fitted logistic model: weights per feature and a bias."""

    weights: tuple[float, ...]
    bias: float

    def probability(self, features: Sequence[float]) -> float:
        """The calibrated probability for one match's features."""
        z = self.bias + sum(w * x for w, x in zip(self.weights, features, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


def fit(
    features: Sequence[Sequence[float]], labels: Sequence[bool], *, l2: float = 1e-2, iterations: int = 50
) -> Logistic:
    """Fit a logistic model to labelled matches (Newton's method; converges in a few steps)."""
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if x.ndim != 2 or len(x) != len(y) or len(y) == 0:
        raise ValueError("one feature row per label")
    design = np.hstack([x, np.ones((len(x), 1))])
    theta = np.zeros(design.shape[1])
    penalty = l2 * np.eye(design.shape[1])
    penalty[-1, -1] = 0.0  # the bias is not shrunk
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(design @ theta, -30, 30)))
        gradient = design.T @ (p - y) + penalty @ theta
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, gradient)
        theta -= step
        if float(np.max(np.abs(step))) < 1e-8:
            break
    return Logistic(weights=tuple(float(w) for w in theta[:-1]), bias=float(theta[-1]))


def out_of_fold(
    features: Sequence[Sequence[float]],
    labels: Sequence[bool],
    groups: Sequence[str],
    *,
    folds: int = 5,
    l2: float = 1e-2,
) -> list[float]:
    """Each example's probability from a model fitted without its group: cross-validation by group, so that
    near-duplicates (paraphrases of one FAQ) never sit on both sides. Groups go to folds by a stable hash."""
    if not len(features) == len(labels) == len(groups):
        raise ValueError("one feature row and one group per label")
    fold_of = [int(hashlib.sha256(g.encode()).hexdigest(), 16) % folds for g in groups]
    probabilities = [0.0] * len(labels)
    for fold in range(folds):
        inside = [i for i, f in enumerate(fold_of) if f != fold]
        if not any(f == fold for f in fold_of):
            continue
        model = fit([features[i] for i in inside], [labels[i] for i in inside], l2=l2)
        for i, f in enumerate(fold_of):
            if f == fold:
                probabilities[i] = model.probability(features[i])
    return probabilities


@dataclass(frozen=True, slots=True)
class Bin:
    """One bin of a reliability diagram: the probabilities stated in it, on average, and how often they were right."""

    low: float
    high: float
    confidence: float
    accuracy: float
    count: int


def reliability(probabilities: Sequence[float], labels: Sequence[bool], bins: int = 10) -> list[Bin]:
    """The reliability diagram as a table: for each non-empty bin of stated probability, the mean probability, the
    share that was right, and how many. Calibrated means the first two agree in every bin."""
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if len(p) != len(y):
        raise ValueError("one probability per label")
    table = []
    for low, high in itertools.pairwise(np.linspace(0.0, 1.0, bins + 1)):
        inside = (p >= low) & ((p < high) | (high == 1.0))
        if inside.any():
            table.append(
                Bin(float(low), float(high), float(p[inside].mean()), float(y[inside].mean()), int(inside.sum()))
            )
    return table


def brier_score(probabilities: Sequence[float], labels: Sequence[bool]) -> float:
    """Mean squared error of the probabilities (0 is perfect; 0.25 is a coin)."""
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if len(p) != len(y) or len(p) == 0:
        raise ValueError("one probability per label")
    return float(np.mean((p - y) ** 2))


def calibration_error(probabilities: Sequence[float], labels: Sequence[bool], bins: int = 10) -> float:
    """Expected calibration error: how far stated probability is from observed accuracy, averaged over bins
    weighted by how many examples each holds."""
    total = len(labels)
    return sum(b.count / total * abs(b.confidence - b.accuracy) for b in reliability(probabilities, labels, bins))


def brier(model: Logistic, features: Sequence[Sequence[float]], labels: Sequence[bool]) -> float:
    """Mean squared error of the model's probabilities (0 is perfect; 0.25 is a coin)."""
    return brier_score([model.probability(f) for f in features], labels)


def expected_calibration_error(
    model: Logistic, features: Sequence[Sequence[float]], labels: Sequence[bool], bins: int = 10
) -> float:
    """How far the model's stated confidence is from observed accuracy, averaged over confidence bins."""
    return calibration_error([model.probability(f) for f in features], labels, bins)
