"""Implicit requests: the customer needs something, in words no rule of ``questions.py`` hears.

The rules hear questions, requests and symptom reports by their shape. Customers also state a need as a plain fact
("courtesy car has a flat", "VAT number on my invoices is the old one"). A logistic regression over the sentence
embedding that the answer skill computes anyway hears many of those: a message the rules reject still counts as a
request when its probability is above the model's threshold. The rules decide first, so their reason codes stay;
the model only turns a rejection into ``implicit_request``.

The bundled model is fitted on the tune half of the team's labelled support chats by
``python -m bench.eval_requests --learned --save`` (its threshold is the best F1 with precision at least 0.90 on
out-of-fold predictions); docs/evaluation.md has its figures on the test half and on IRC.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vigil.knowledge.embedding import Vectors

BUNDLED = Path(__file__).with_name("implicit_requests.json")
REASON = "implicit_request"


@dataclass(frozen=True, slots=True)
class ImplicitRequests:
    """A logistic model over one embedding model's vectors, with the threshold above which a message needs help."""

    embedder: str
    """The embedding model whose vectors the weights read (a vector of another model means nothing to them)."""
    weights: Vectors
    bias: float
    threshold: float

    @classmethod
    def load(cls, path: Path = BUNDLED) -> ImplicitRequests:
        """The model saved at ``path``.

        Raises:
            ValueError: the file is not such a model.
        """
        raw = json.loads(path.read_text("utf-8"))
        try:
            weights = np.asarray(raw["weights"], dtype=np.float32)
            model = cls(str(raw["embedder"]), weights, float(raw["bias"]), float(raw["threshold"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path} is not an implicit-request model: {exc}") from exc
        if weights.ndim != 1 or not 0 < model.threshold < 1:
            raise ValueError(f"{path} is not an implicit-request model: weights {weights.shape}, {model.threshold}")
        return model

    def save(self, path: Path, **provenance: str) -> None:
        """Write the model as JSON, with ``provenance`` (how it was fitted) beside it."""
        document = {
            "embedder": self.embedder,
            "bias": self.bias,
            "threshold": self.threshold,
            **provenance,
            "weights": [round(float(w), 7) for w in self.weights],
        }
        path.write_text(json.dumps(document, indent=1) + "\n", "utf-8")

    def probability(self, vector: Vectors) -> float:
        """How likely the message embedded as ``vector`` needs something."""
        if vector.shape != self.weights.shape:
            raise ValueError(f"a vector of {vector.shape[0]} dimensions; the model reads {self.weights.shape[0]}")
        z = float(np.dot(vector, self.weights)) + self.bias
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    def heard(self, vector: Vectors) -> bool:
        """Whether the message embedded as ``vector`` counts as a request."""
        return self.probability(vector) > self.threshold


class ImplicitRequestDetector:
    """Hears a need in a message the rules rejected, through ``model``, on vectors from ``embed`` (the knowledge
    store's: the same vector the answer skill then searches with). ``serving`` names the model ``embed`` embeds
    with now: once the store has switched to another (a tuned one), the model's weights read its vectors as noise,
    so it hears nothing."""

    def __init__(
        self,
        model: ImplicitRequests,
        embed: Callable[[str], Awaitable[Vectors]],
        serving: Callable[[], str] | None = None,
    ) -> None:
        self._model = model
        self._embed = embed
        self._serving = serving

    async def heard(self, text: str) -> bool:
        """Whether ``text`` needs something although no rule says so."""
        if self._serving is not None and self._serving() != self._model.embedder:
            return False
        return self._model.heard(await self._embed(text))
