"""Calibrated confidence: turning raw similarities into the probability that a suggestion is right.

A logistic model ``p = 1 / (1 + exp(-(w · x + b)))`` over a few features of a match, fitted by Newton's method
(iteratively reweighted least squares, with a small L2 penalty) on labelled matches. The coefficients vigil ships
with, and how they were fitted, are recorded in ``docs/evaluation.md``; ``bench/calibrate.py`` refits them.
"""

from __future__ import annotations

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


def brier(model: Logistic, features: Sequence[Sequence[float]], labels: Sequence[bool]) -> float:
    """Mean squared error of the probabilities (0 is perfect; 0.25 is a coin)."""
    return float(np.mean([(model.probability(f) - float(y)) ** 2 for f, y in zip(features, labels, strict=True)]))


def expected_calibration_error(
    model: Logistic, features: Sequence[Sequence[float]], labels: Sequence[bool], bins: int = 10
) -> float:
    """How far stated confidence is from observed accuracy, averaged over confidence bins."""
    p = np.asarray([model.probability(f) for f in features])
    y = np.asarray(labels, dtype=np.float64)
    edges = np.linspace(0.0, 1.0, bins + 1)
    total = 0.0
    for low, high in itertools.pairwise(edges):
        inside = (p >= low) & ((p < high) | (high == 1.0))
        if inside.any():
            total += float(inside.mean()) * abs(float(p[inside].mean()) - float(y[inside].mean()))
    return total
