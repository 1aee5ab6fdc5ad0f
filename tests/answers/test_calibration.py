"""Calibrated confidence: the logistic model, its fit, and the measures of how well stated confidence holds."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vigil.answers.calibration import (
    Logistic,
    brier,
    brier_score,
    calibration_error,
    expected_calibration_error,
    fit,
    out_of_fold,
    reliability,
)


def synthetic(weights: tuple[float, ...], bias: float, n: int, seed: int = 7) -> tuple[np.ndarray, list[bool]]:
    """Features drawn at random and labels drawn from the known logistic model."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, len(weights)))
    p = 1.0 / (1.0 + np.exp(-(x @ np.asarray(weights) + bias)))
    return x, [bool(v) for v in rng.random(n) < p]


def test_probability_rises_with_a_positively_weighted_feature_and_falls_with_a_negative_one():
    model = Logistic(weights=(4.0, -2.0), bias=-1.0)
    rising = [model.probability((x, 0.0)) for x in np.linspace(-3, 3, 25)]
    falling = [model.probability((0.0, x)) for x in np.linspace(-3, 3, 25)]
    assert all(a < b for a, b in itertools.pairwise(rising))
    assert all(a > b for a, b in itertools.pairwise(falling))
    assert model.probability((0.25, 0.0)) == pytest.approx(0.5)
    assert 0.0 < model.probability((-1e6, 0.0)) < 1e-12 and 1 - 1e-12 < model.probability((1e6, 0.0)) <= 1.0


def test_a_fit_recovers_the_coefficients_of_the_logistic_the_labels_came_from():
    x, y = synthetic((2.0, -1.5, 0.0), 0.5, 20_000)
    model = fit(x.tolist(), y, l2=1e-6)
    assert model.weights == pytest.approx((2.0, -1.5, 0.0), abs=0.1)
    assert model.bias == pytest.approx(0.5, abs=0.1)


def test_regularisation_shrinks_the_weights_but_not_the_bias():
    x, y = synthetic((3.0,), 1.0, 300)
    loose = fit(x.tolist(), y, l2=1e-6)
    tight = fit(x.tolist(), y, l2=1e3)
    assert abs(tight.weights[0]) < 0.2 * abs(loose.weights[0])
    # With the weight shrunk to almost nothing, the bias alone still matches the base rate.
    base_rate = sum(y) / len(y)
    assert tight.probability((0.0,)) == pytest.approx(base_rate, abs=0.05)


def test_separable_data_still_gives_finite_weights_with_the_penalty():
    x = [[float(v)] for v in range(-5, 6) if v != 0]
    y = [v > 0 for v in range(-5, 6) if v != 0]
    model = fit(x, y, l2=1e-2)
    assert np.isfinite(model.weights[0]) and model.weights[0] > 0
    assert model.probability((3.0,)) > 0.95 and model.probability((-3.0,)) < 0.05


def test_fit_refuses_rows_that_do_not_match_the_labels():
    with pytest.raises(ValueError):
        fit([[1.0], [2.0]], [True])
    with pytest.raises(ValueError):
        fit([], [])


def test_reliability_bins_hold_the_mean_probability_the_share_right_and_the_count():
    p = [0.05, 0.15, 0.85, 0.95, 0.9, 0.92]
    y = [False, True, True, True, False, True]
    table = reliability(p, y, bins=5)
    assert [(b.low, b.count) for b in table] == [(0.0, 2), (0.8, 4)]
    assert table[0].confidence == pytest.approx(0.10) and table[0].accuracy == pytest.approx(0.5)
    assert table[1].confidence == pytest.approx(0.905) and table[1].accuracy == pytest.approx(0.75)
    # ECE weighs each bin's gap by its share of the examples.
    assert calibration_error(p, y, bins=5) == pytest.approx(2 / 6 * 0.4 + 4 / 6 * 0.155)
    assert reliability([1.0], [True], bins=10)[0].high == 1.0  # a probability of 1 falls in the last bin


def test_brier_and_ece_of_a_perfectly_calibrated_model_are_near_zero_and_a_confident_wrong_one_is_far():
    x, y = synthetic((1.5,), 0.0, 20_000, seed=3)
    truth = Logistic(weights=(1.5,), bias=0.0)
    assert expected_calibration_error(truth, x.tolist(), y) < 0.02
    overconfident = Logistic(weights=(15.0,), bias=0.0)
    assert expected_calibration_error(overconfident, x.tolist(), y) > 0.1
    assert brier(overconfident, x.tolist(), y) > brier(truth, x.tolist(), y)
    assert brier_score([1.0, 0.0], [True, False]) == 0.0 and brier_score([0.5], [True]) == 0.25


def test_out_of_fold_probabilities_never_come_from_a_model_that_saw_the_group():
    x, y = synthetic((2.0,), 0.0, 400, seed=11)
    groups = [f"entry-{i % 40}" for i in range(400)]  # ten paraphrases of each of 40 entries
    held = out_of_fold(x.tolist(), y, groups, folds=5)
    # Relabel every paraphrase of one entry: its own probabilities cannot move (no model that saw it scores it),
    # while those of entries in other folds, whose models did see the change, do.
    relabelled = [(not label) if g == "entry-3" else label for label, g in zip(y, groups, strict=True)]
    again = out_of_fold(x.tolist(), relabelled, groups, folds=5)
    mine = [i for i, g in enumerate(groups) if g == "entry-3"]
    assert [again[i] for i in mine] == [held[i] for i in mine]
    assert any(again[i] != held[i] for i in range(400) if i not in mine)
    assert all(0.0 < p < 1.0 for p in held)
    with pytest.raises(ValueError):
        out_of_fold(x.tolist(), y, groups[:-1])
