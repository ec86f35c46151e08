"""bert_tf.training.eval_results: one JSON file and TensorBoard scalars for every job; a JSON
file written whole or not at all."""

import json
import os

import pytest

from bert_tf.training.eval_results import write_eval_results, write_json
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


def test_non_finite_results_are_written_as_null(tmp_path):
    # json.dump wrote them as bare NaN / Infinity, which is not JSON: strict readers refuse it.
    results = {"loss": float("nan"), "pearson": float("inf"), "accuracy": 0.5,
               "data": {"losses": [1.0, float("-inf")]}}
    path = write_eval_results(str(tmp_path), results, step=3)

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    assert json.loads(open(path, encoding="utf-8").read(), parse_constant=refuse) == {
        "loss": None, "pearson": None, "accuracy": 0.5, "data": {"losses": [1.0, None]},
        "global_step": 3}
    assert results["loss"] != results["loss"]  # the caller's dict is left as it was


def test_results_that_fail_halfway_leave_the_earlier_file_whole(tmp_path):
    path = tmp_path / "eval_results.json"
    path.write_text('{"accuracy": 0.9}\n')
    with pytest.raises(TypeError, match="not JSON serializable"):  # after "accuracy" is written
        write_json(str(path), {"accuracy": 0.5, "data": object()})
    assert path.read_text() == '{"accuracy": 0.9}\n' and os.listdir(tmp_path) == [path.name]
