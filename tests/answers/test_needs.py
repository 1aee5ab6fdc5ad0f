"""Implicit requests: the bundled model hears needs stated as plain facts, which the rules reject."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import RememberingEmbedder
from vigil.answers.needs import ImplicitRequests
from vigil.cases.questions import classify


@pytest.fixture(scope="module")
def model() -> ImplicitRequests:
    return ImplicitRequests.load()


def test_the_bundled_model_reads_the_vectors_of_the_default_embedder(model, embedder: RememberingEmbedder):
    assert model.embedder == embedder.name
    assert model.weights.shape == (embedder.dimensions,)
    assert 0.5 <= model.threshold < 1


@pytest.mark.parametrize(
    "text",
    [
        "my landline has had no dial tone since the storm",
        "the engineer never turned up yesterday",
        "parcel marked as returned to sender",
        "the app logs me out every few minutes",
        "payment declined at checkout three times",
        "my claim has been open for six weeks",
    ],
)
def test_a_need_stated_as_a_plain_fact_is_heard_though_the_rules_reject_it(
    model, embedder: RememberingEmbedder, text: str
):
    assert not classify(text).asks
    assert model.heard(embedder.embed([text])[0])


@pytest.mark.parametrize(
    "text",
    ["ok thanks", "great, that worked", "bye for now", "hi there", "07700 900123", "the weather is lovely today"],
)
def test_thanks_greetings_acknowledgements_and_bare_numbers_are_not_heard(
    model, embedder: RememberingEmbedder, text: str
):
    assert not model.heard(embedder.embed([text])[0])


def test_a_vector_of_another_size_is_refused(model):
    with pytest.raises(ValueError, match="384"):
        model.probability(np.zeros(128, dtype=np.float32))


def test_a_saved_model_loads_back_the_same(model, tmp_path: Path):
    path = tmp_path / "model.json"
    model.save(path, fitted_on="a test")
    again = ImplicitRequests.load(path)
    vector = np.linspace(-1, 1, model.weights.shape[0], dtype=np.float32)
    assert again.probability(vector) == pytest.approx(model.probability(vector), abs=1e-6)
    assert json.loads(path.read_text())["fitted_on"] == "a test"


@pytest.mark.parametrize(
    "document",
    [{}, {"embedder": "m", "bias": 0, "threshold": 1.5, "weights": [1.0]}, {"embedder": "m", "bias": "x"}],
)
def test_a_file_that_is_not_a_model_is_refused_naming_it(tmp_path: Path, document):
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=r"broken\.json is not an implicit-request model"):
        ImplicitRequests.load(path)


def test_probabilities_stay_finite_far_from_the_boundary(model):
    far = model.weights * 1e4
    assert model.probability(far) == pytest.approx(1.0)
    assert model.probability(-far) == pytest.approx(0.0)
