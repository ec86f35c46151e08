"""bert_tf.training.eval_results: one JSON file and TensorBoard scalars for every job."""

import json

import pytest

from bert_tf.training.eval_results import write_eval_results
from bert_tf.training.scalar_logs import read_scalars


def test_results_are_json_with_the_step_and_their_numbers_are_scalars(tmp_path):
    results = {"masked_lm_accuracy": 0.375, "examples": 96, "data": {"file": "dev.tsv"}}
    path = write_eval_results(str(tmp_path), results, step=40)
    assert path == str(tmp_path / "eval_results.json")
    text = open(path, encoding="utf-8").read()
    assert json.loads(text) == {"data": {"file": "dev.tsv"}, "examples": 96, "global_step": 40,
                                "masked_lm_accuracy": 0.375}
    assert text.index('"data"') < text.index('"examples"') < text.index('"global_step"')
    scalars = read_scalars(str(tmp_path / "eval"))
    assert sorted(scalars) == ["examples", "masked_lm_accuracy"]   # nested values are not
    assert [(e.step, e.value) for e in scalars["masked_lm_accuracy"]] == [
        (40, pytest.approx(0.375))]
    assert [(e.step, e.value) for e in scalars["examples"]] == [(40, 96.0)]
