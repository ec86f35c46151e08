"""The one loading API: `restore_weights` / `load_model` for encoders, pre-training models and
task models from every format; the layout writers and readers share; the import direction."""

import ast
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertClassifier, BertEncoder, BertSpanLabeler, BertTokenClassifier
from bert_tf.checkpoints import (CheckpointMismatchError, has_pretraining_heads, load_model,
                                 pretraining_head_weights, restore_weights, save_checkpoint,
                                 training_checkpoint, write_model_files)
from bert_tf.models.bert_pretrainer import BertPretrainer
from tests.checkpoints.test_checkpoints import (SMALL, assert_same_weights, google_arrays,
                                                random_encoder, random_heads,
                                                write_google_checkpoint, write_hf_directory)
from tests.harness import assert_outputs_close
from tests.models.numpy_bert import numpy_weights
from tests.models.test_bert_pretrainer import make_features, numpy_pretrainer
from tests.resources import REPO_ROOT


def head_values(pretrainer):
    return {name: variable.numpy() for name, variable in pretraining_head_weights(pretrainer)}


@pytest.mark.parametrize("source", ["google", "huggingface", "bert_tf"])
def test_a_pretrainer_loads_encoder_and_heads_from_every_format(source, tmp_path):
    encoder, heads = random_encoder(seed=7), random_heads()
    arrays = {**google_arrays(encoder), **heads}
    if source == "google":
        path = write_google_checkpoint(str(tmp_path), arrays)
    elif source == "huggingface":
        path = write_hf_directory(str(tmp_path), arrays, prefix="bert.")
    else:
        path = str(tmp_path)
        save_checkpoint(path, encoder, heads=heads)
    assert has_pretraining_heads(path)
    model = load_model(path, BertPretrainer)
    for name, value in heads.items():
        np.testing.assert_array_equal(head_values(model)[name], value, err_msg=name)
    features = make_features(seed=3)
    expected = numpy_pretrainer(numpy_weights(encoder), heads, SMALL, features)
    assert_outputs_close(model(features), expected, atol=2e-4)


def test_checkpoint_without_heads_keeps_them_and_says_so(tmp_path, caplog):
    prefix = write_google_checkpoint(str(tmp_path / "bare"), google_arrays(random_encoder(seed=8)))
    assert not has_pretraining_heads(prefix)
    model = BertPretrainer(BertEncoder(SMALL))
    before = head_values(model)
    with caplog.at_level(logging.WARNING, logger="bert_tf.checkpoints"):
        report = restore_weights(model, prefix)
    assert report.heads == [] and report.heads_loaded == [] and report.loaded == 39
    assert "has no pre-training heads" in caplog.text
    for name, value in head_values(model).items():
        np.testing.assert_array_equal(before[name], value)
    with pytest.raises(CheckpointMismatchError, match="cls/predictions/output_bias") as e:
        restore_weights(model, prefix, pretraining_heads=True)
    assert "cls/seq_relationship/output_weights" in e.value.missing
    assert str(e.value).splitlines()[-1] == (
        'It has no pre-training heads (cls/...) at all, only an encoder: load a BertEncoder '
        'from it, or pass pretraining_heads="if_present".')


def test_checkpoint_with_some_heads_changes_nothing(tmp_path):
    heads = random_heads()
    del heads["cls/predictions/output_bias"]
    prefix = write_google_checkpoint(str(tmp_path / "partial"),
                                     {**google_arrays(random_encoder(seed=9)), **heads})
    model = BertPretrainer(BertEncoder(SMALL))
    before = model.get_weights()
    with pytest.raises(CheckpointMismatchError, match="cls/predictions/output_bias"):
        restore_weights(model, prefix)
    for old, new in zip(before, model.get_weights()):
        np.testing.assert_array_equal(old, new)


def test_pretraining_heads_written_by_a_training_job_load_into_a_new_pretrainer(tmp_path):
    # What run_pretraining writes (the trainer's live head variables) and a conversion writes
    # (arrays) is the same layout: a new pretrainer reads either.
    trained = BertPretrainer(random_encoder(seed=4))
    for index, (_, variable) in enumerate(pretraining_head_weights(trained)):
        variable.assign(np.full(variable.shape, index + 1.0, np.float32))
    prefix = training_checkpoint(trained.encoder, heads=dict(pretraining_head_weights(trained)),
                                 ).write(str(tmp_path / "ckpt-1"))
    write_model_files(str(tmp_path), SMALL)
    loaded = load_model(prefix, BertPretrainer)
    assert_same_weights(loaded.encoder, trained.encoder)
    for name, value in head_values(trained).items():
        np.testing.assert_array_equal(head_values(loaded)[name], value, err_msg=name)


def fine_tuned_checkpoint(directory, model):
    prefix = training_checkpoint(model.encoder, task_model=model).write(
        os.path.join(directory, "ckpt-1"))
    write_model_files(directory, model.encoder.config)
    return prefix


def test_a_task_model_loads_with_its_number_of_classes(tmp_path):
    classifier = BertClassifier(random_encoder(seed=2), num_classes=5)
    fine_tuned_checkpoint(str(tmp_path), classifier)
    loaded = load_model(str(tmp_path), BertClassifier)
    assert loaded.num_classes == 5
    np.testing.assert_array_equal(loaded.classifier.kernel.numpy(),
                                  classifier.classifier.kernel.numpy())
    assert_same_weights(loaded.encoder, classifier.encoder)
    with pytest.raises(ValueError, match="5 classes, but 3 were asked for"):
        load_model(str(tmp_path), BertClassifier, num_classes=3)
    # Another task's model: refused by the class the checkpoint records, nothing assigned.
    labeler = BertSpanLabeler(random_encoder(seed=6))
    before = labeler.get_weights()
    with pytest.raises(ValueError) as error:
        restore_weights(labeler, str(tmp_path))
    assert str(error.value) == (f"{tmp_path}/ckpt-1 holds a fine-tuned BertClassifier, not a "
                                f"BertSpanLabeler.")
    for old, new in zip(before, labeler.get_weights()):
        np.testing.assert_array_equal(old, new)
    # Its encoder alone is what a fine-tuning job initialised from it restores.
    encoder = random_encoder(seed=3)
    assert restore_weights(encoder, str(tmp_path)).loaded == 39
    assert_same_weights(encoder, classifier.encoder)


class SentimentClassifier(BertClassifier):
    """A user's own classifier: the checkpoints of either class load into the other."""


def test_a_sentence_classifier_is_not_taken_for_a_token_classifier(tmp_path):
    # Their heads have the same names and shapes: the checkpoint records the class.
    classifier = BertClassifier(random_encoder(seed=2), num_classes=3)
    fine_tuned_checkpoint(str(tmp_path / "classifier"), classifier)
    with pytest.raises(ValueError) as error:
        load_model(str(tmp_path / "classifier"), BertTokenClassifier, model_name="ner model")
    assert str(error.value) == (f"{tmp_path}/classifier/ckpt-1 holds a fine-tuned "
                                f"BertClassifier, not a ner model (BertTokenClassifier).")
    loaded = load_model(str(tmp_path / "classifier"), SentimentClassifier)
    np.testing.assert_array_equal(loaded.classifier.kernel.numpy(),
                                  classifier.classifier.kernel.numpy())
    fine_tuned_checkpoint(str(tmp_path / "own"), SentimentClassifier(random_encoder(), 3))
    assert load_model(str(tmp_path / "own"), BertClassifier).num_classes == 3
    with pytest.raises(ValueError, match="holds a fine-tuned SentimentClassifier, not a "
                                         "BertTokenClassifier"):
        load_model(str(tmp_path / "own"), BertTokenClassifier)


def test_a_checkpoint_that_does_not_record_its_class_still_loads_and_resumes(tmp_path):
    # What fine-tuning wrote before checkpoints recorded the task model's class.
    classifier = BertClassifier(random_encoder(seed=2), num_classes=2)
    prefix = tf.train.CheckpointManager(
        tf.train.Checkpoint(encoder=classifier.encoder, model=classifier), str(tmp_path),
        max_to_keep=1, checkpoint_name="ckpt").save()
    write_model_files(str(tmp_path), SMALL)
    assert load_model(str(tmp_path), BertClassifier).num_classes == 2
    # Another task's model: every difference listed, nothing assigned.
    labeler = BertSpanLabeler(random_encoder(seed=6))
    before = labeler.get_weights()
    with pytest.raises(CheckpointMismatchError) as error:
        restore_weights(labeler, str(tmp_path))
    message = str(error.value)
    assert "2 missing, 0 with the wrong shape" in message
    assert "model/span_logits/bias" in message and "does not match a BertSpanLabeler" in message
    for old, new in zip(before, labeler.get_weights()):
        np.testing.assert_array_equal(old, new)
    # A fine-tuning run resumed from it matches every object that has values.
    resumed = BertClassifier(random_encoder(seed=5), num_classes=2)
    training_checkpoint(resumed.encoder, task_model=resumed).restore(
        prefix).assert_existing_objects_matched()
    assert_same_weights(resumed.encoder, classifier.encoder)


def test_a_task_model_from_a_pretrained_checkpoint_is_refused(tmp_path):
    save_checkpoint(str(tmp_path), random_encoder())
    classifier = BertClassifier(random_encoder(seed=1), num_classes=2)
    before = classifier.get_weights()
    with pytest.raises(ValueError, match="holds no fine-tuned task model"):
        restore_weights(classifier, str(tmp_path))
    with pytest.raises(ValueError, match="holds no fine-tuned task model"):
        load_model(str(tmp_path), BertClassifier)
    for old, new in zip(before, classifier.get_weights()):
        np.testing.assert_array_equal(old, new)


def _imports(path):
    """The `bert_tf` modules a source file imports, at any depth of the file."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bert_tf"):
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("bert_tf"))
    return names


def _package_modules():
    modules = {}
    root = os.path.join(REPO_ROOT, "bert_tf")
    for directory, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                relative = os.path.relpath(os.path.join(directory, name), REPO_ROOT)
                module = relative[:-3].replace(os.sep, ".").removesuffix(".__init__")
                modules[module] = _imports(os.path.join(directory, name))
    return modules


def test_models_never_import_checkpoints_and_checkpoints_has_no_cycle():
    modules = _package_modules()
    for module, imported in modules.items():
        if module.startswith("bert_tf.models"):
            assert not any(i.startswith("bert_tf.checkpoints") for i in imported), module
    # Inside bert_tf.checkpoints, the module graph (imports at any depth) has no cycle.
    inside = {m: {i for i in imported if i in modules and i.startswith("bert_tf.checkpoints.")}
              for m, imported in modules.items()
              if m.startswith("bert_tf.checkpoints.")}
    visiting, done = [], set()

    def visit(module):
        if module in done:
            return
        assert module not in visiting, " -> ".join(visiting[visiting.index(module):] + [module])
        visiting.append(module)
        for target in inside[module]:
            visit(target)
        visiting.pop()
        done.add(module)

    for module in inside:
        visit(module)
