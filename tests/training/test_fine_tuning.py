"""FineTuner: BERT's fine-tuning optimizer, checkpoints, exact resume, padded prediction."""

import functools
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertClassifier, BertTokenClassifier
from bert_tf.checkpoints import layout
from bert_tf.data.tasks.dynamic_padding import bucketed_batches, padded_batches
from bert_tf.export import load_task_model
from bert_tf.training import fine_tuning
from bert_tf.training.fine_tuning import FineTuner, fine_tuning_optimizer, predict_padded
from tests.models.head_fixtures import TINY, tiny_encoder

SEQ = TINY.max_position_embeddings


def _examples(n=48, seed=0):
    """A learnable toy task: the label is whether word id 5 occurs in the sequence."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, SEQ + 1, size=n)
    mask = (np.arange(SEQ) < lengths[:, None]).astype(np.int32)
    ids = rng.integers(6, TINY.vocab_size, size=(n, SEQ)) * mask
    labels = np.arange(n) % 2
    ids[labels == 1, 1] = 5
    features = {"input_word_ids": ids.astype(np.int32), "input_mask": mask,
                "input_type_ids": np.zeros_like(mask)}
    return tf.data.Dataset.from_tensor_slices((features, {"logits": labels}))


def _dataset_fn(batch_size=8):
    def batches(start_step):
        examples = _examples().shuffle(48, seed=3, reshuffle_each_iteration=True).repeat()
        return bucketed_batches(examples, batch_size, SEQ, pad_to_multiple_of=4).skip(start_step)
    return batches


def _tuner(output_dir, steps=12, **kwargs):
    classifier = BertClassifier(tiny_encoder(seed=1), num_classes=2)
    return FineTuner(classifier, output_dir, num_train_steps=steps, learning_rate=1e-3,
                     loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
                     steps_per_checkpoint=5, **kwargs)


def test_optimizer_follows_bert_recipe():
    classifier = BertClassifier(tiny_encoder(), num_classes=2)
    optimizer = fine_tuning_optimizer(classifier, 1e-2, num_train_steps=100,
                                      warmup_proportion=0.1, weight_decay_rate=0.5)
    optimizer.iterations.assign(5)
    assert float(optimizer.learning_rate) == pytest.approx(5e-3)       # warming up
    optimizer.iterations.assign(100)
    assert float(optimizer.learning_rate) == pytest.approx(0.0)        # decayed to zero
    # With zero gradients only weight decay moves a variable: kernels and embeddings decay,
    # LayerNorm parameters and biases do not.
    optimizer.iterations.assign(50)
    variables = classifier.trainable_variables
    before = [keras.ops.convert_to_numpy(v) for v in variables]
    optimizer.apply([tf.zeros_like(v) for v in variables], variables)
    moved = {v.path for v, old in zip(variables, before) 
             if not np.array_equal(keras.ops.convert_to_numpy(v), old)}
    assert any(p.endswith("kernel") for p in moved)
    assert not any("layer_norm" in p or p.endswith("bias") for p in moved)
    assert {v.path for v in variables if v.path.endswith("kernel")} <= moved


def test_trains_checkpoints_and_exports(tmp_path):
    tuner = _tuner(str(tmp_path))
    before = tuner.model.encoder.get_weights()[0].copy()
    tuner.train(_dataset_fn(), verbose=0)
    assert tuner.step == 12
    assert not np.allclose(before, tuner.model.encoder.get_weights()[0])
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-12")
    # What export_savedmodel.py reads: the whole task model under `model`.
    TINY.to_json_file(os.path.join(tmp_path, "bert_config.json"))
    restored = load_task_model("classifier", str(tmp_path))
    inputs = next(iter(padded_batches(_examples(), 8, SEQ)))[0]
    np.testing.assert_allclose(restored(inputs)["logits"], tuner.model(inputs)["logits"],
                               atol=1e-6)
    assert os.listdir(os.path.join(tmp_path, "train"))  # TensorBoard events


def test_resume_continues_at_the_exact_step(tmp_path):
    straight = _tuner(str(tmp_path / "straight"))
    straight.train(_dataset_fn(), verbose=0)

    interrupted = _tuner(str(tmp_path / "resumed"), steps=12)
    interrupted.num_train_steps = 7          # stops mid-period: checkpoint at 7
    interrupted.train(_dataset_fn(), verbose=0)
    assert interrupted.step == 7
    resumed = _tuner(str(tmp_path / "resumed"))  # a fresh process would build this
    resumed.train(_dataset_fn(), verbose=0)
    assert resumed.step == 12
    for a, b in zip(straight.model.get_weights(), resumed.model.get_weights()):
        np.testing.assert_allclose(a, b, atol=2e-5)
    assert resumed.train(_dataset_fn(), verbose=0) is None  # nothing left to do


def test_several_steps_per_host_call_take_the_same_steps_and_checkpoint_on_passing(tmp_path):
    # 12 steps, 3 per host call: the weights of one step per call; the checkpoints every 5
    # steps fall due at the ends of the calls passing 5 and 10 (steps 6 and 12).
    one = _tuner(str(tmp_path / "one"))
    one.train(_dataset_fn(), verbose=0)
    three = _tuner(str(tmp_path / "three"), steps_per_execution=3)
    three.train(_dataset_fn(), verbose=0)
    assert three.step == 12
    assert [path.rsplit("-", 1)[1] for path in three.manager.checkpoints] == ["6", "12"]
    for a, b in zip(one.model.get_weights(), three.model.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, atol=2e-5)


def _bar_counts(stdout):
    """The (done, total) of each line Keras' progress bar printed to `stdout`."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", stdout)     # Keras' colours
    return [(int(done), int(total)) for done, total in re.findall(r"(\d+)/(\d+) ━", plain)]


def test_a_short_last_call_ends_the_job_and_its_progress_bar_at_the_total(tmp_path, capsys,
                                                                           monkeypatch):
    # Every line printed: Keras skips one within 0.05 s of the previous, as a tiny model's
    # 1-step call is, and that is where Keras' own count overshot.
    monkeypatch.setattr(keras.utils.Progbar, "__init__",
                        functools.partialmethod(keras.utils.Progbar.__init__, interval=0))
    # 3 steps per host call, a job stopped at step 7 of 12: its last call runs 1 step and
    # saves it; the bar counts 3, 6, 7 of 7 (Keras' own count: 3, 6, 9), then its final line.
    interrupted = _tuner(str(tmp_path), steps_per_execution=3)
    interrupted.num_train_steps = 7
    interrupted.train(_dataset_fn(), verbose=1)
    assert interrupted.step == 7
    assert [path.rsplit("-", 1)[1] for path in interrupted.manager.checkpoints] == ["6", "7"]
    assert _bar_counts(capsys.readouterr().out) == [(3, 7), (6, 7), (7, 7), (7, 7)]
    # Resumed at 7: the calls run steps 8-10 (passing 10: saved) and 11-12; the bar counts
    # the job's steps from 7 (Keras' own count: 3, 6 of 5).
    resumed = _tuner(str(tmp_path), steps_per_execution=3)
    resumed.train(_dataset_fn(), verbose=1)
    assert resumed.step == 12
    assert [path.rsplit("-", 1)[1] for path in resumed.manager.checkpoints] == ["10", "12"]
    assert _bar_counts(capsys.readouterr().out) == [(10, 12), (12, 12), (12, 12)]


def test_trains_without_tf_data_autotuning(tmp_path, monkeypatch):
    # Deleting an autotuned dataset's iterator waits for tf.data's tuning thread (up to a
    # minute after long runs): `fit` must get the training batches without autotuning.
    tuner = _tuner(str(tmp_path))
    seen = []
    monkeypatch.setattr(tuner.model, "fit", lambda dataset, **kwargs: seen.append(dataset))
    tuner.train(_dataset_fn(), verbose=0)
    assert seen[0].options().autotune.enabled is False


@pytest.mark.parametrize("in_batch_halves", [False, True])
def test_predict_pads_sequence_outputs_back(in_batch_halves, monkeypatch):
    # In batch halves (single-threaded ops side by side on the cores) too: the same outputs.
    monkeypatch.setattr(fine_tuning, "ops_side_by_side_on_cores", lambda: in_batch_halves)
    tagger = BertTokenClassifier(tiny_encoder(), num_classes=3)
    calls = []
    tagger.call = lambda inputs, training=None, call=tagger.call: (
        calls.append(training), call(inputs, training=training))[1]
    examples = _examples().map(lambda features, labels: features)
    outputs = predict_padded(tagger, padded_batches(examples, 7, SEQ, pad_to_multiple_of=4),
                             SEQ, sequence_outputs=("logits",), verbose=0)
    assert outputs["logits"].shape == (48, SEQ, 3)
    assert calls == [False]  # traced once, for every batch and both halves
    full = tagger(next(iter(examples.batch(48))))["logits"].numpy()
    mask = next(iter(examples.batch(48)))["input_mask"].numpy().astype(bool)
    np.testing.assert_allclose(outputs["logits"][mask], full[mask], atol=1e-5)


def test_predicts_without_tf_data_autotuning(monkeypatch):
    # The dev loop's iterator is deleted when the loop ends: same wait as `fit`'s.
    iterated = []
    original_iter = tf.data.Dataset.__iter__

    def recording_iter(dataset):
        iterated.append(dataset.options().autotune.enabled)
        return original_iter(dataset)

    monkeypatch.setattr(tf.data.Dataset, "__iter__", recording_iter)
    tagger = BertTokenClassifier(tiny_encoder(), num_classes=3)
    examples = _examples().map(lambda features, labels: features)
    predict_padded(tagger, padded_batches(examples, 8, SEQ), SEQ, verbose=0)
    assert iterated == [False]


def _files(directory):
    return {name: open(os.path.join(directory, name), "rb").read()
            for name in os.listdir(directory) if os.path.isfile(os.path.join(directory, name))}


def test_resuming_another_task_models_run_names_it_and_keeps_it(tmp_path, monkeypatch):
    # Output directories without run.json (begun before it existed): a BertClassifier's run
    # whose checkpoint records the model's class, and one older than that record.
    recorded, older = str(tmp_path / "recorded"), str(tmp_path / "older")
    _tuner(recorded, steps=1).train(_dataset_fn(), verbose=0)
    with monkeypatch.context() as before_the_record:
        before_the_record.setattr(layout, "task_model_classes", lambda model_class: [])
        _tuner(older, steps=1).train(_dataset_fn(), verbose=0)
    assert [layout.ObjectGraph(f"{directory}/ckpt-1").child_names(
        (layout.TASK_MODEL_CLASSES_KEY,)) for directory in (recorded, older)] == [
        ["BertClassifier"], []]
    before = {directory: _files(directory) for directory in (recorded, older)}

    def resume(output_dir, model):
        return FineTuner(model, output_dir, num_train_steps=4, learning_rate=1e-3,
                         loss={"logits": keras.losses.SparseCategoricalCrossentropy(
                             from_logits=True)}).restore_latest()

    # A token classifier's head has the same names and shapes: it used to resume silently.
    with pytest.raises(ValueError) as error:
        resume(recorded, BertTokenClassifier(tiny_encoder(seed=1), num_classes=2))
    assert str(error.value) == (
        f"{recorded} holds a run this BertTokenClassifier cannot resume: {recorded}/ckpt-1 holds "
        f"a fine-tuned BertClassifier, not a BertTokenClassifier. Use a new --output_dir.")
    # Without the record, the shapes tell: TensorFlow named one variable and two shapes.
    with pytest.raises(ValueError) as error:
        resume(older, BertClassifier(tiny_encoder(seed=1), num_classes=3))
    assert str(error.value) == (
        f"{older} holds a run this BertClassifier cannot resume: Checkpoint {older}/ckpt-1 does "
        f"not fit the model: 0 missing, 2 with the wrong shape.\n"
        f"Wrong shape (2; name: expected, found):\n"
        f"  model/classifier/_kernel: expected (16, 3), found (16, 2)\n"
        f"  model/classifier/bias: expected (3,), found (2,)\n"
        f"Its `model` does not match a BertClassifier with this config. Use a new --output_dir.")
    assert {directory: _files(directory) for directory in (recorded, older)} == before
    # The same task model resumes both.
    for output_dir in (recorded, older):
        assert resume(output_dir, BertClassifier(tiny_encoder(seed=1), num_classes=2)) == (
            f"{output_dir}/ckpt-1")


def test_rejects_bad_settings(tmp_path):
    with pytest.raises(ValueError, match="num_train_steps"):
        _tuner(str(tmp_path), steps=0)
