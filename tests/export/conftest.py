"""Fixtures of the export tests. Exporting is slow (tracing, saving), so each SavedModel is
written once per session: the encoder by the tool in its own process, then moved; the task
models from fine-tuned-style checkpoints through the library."""

import os
import shutil

import keras
import pytest
import tensorflow as tf

from bert_tf.export import export_task_model, load_task_model, write_version
from tests.export.task_examples import EXPORT_OPTIONS, FEEDS, SEQ_LENGTH, new_task_model
from tests.export.tiny_models import write_pretrained_checkpoint, write_task_checkpoint, write_vocab
from tests.tools.tool_runs import run_tool


@pytest.fixture(scope="session")
def vocab_file(tmp_path_factory):
    return write_vocab(tmp_path_factory.mktemp("vocab"))


@pytest.fixture(scope="session")
def pretrained(tmp_path_factory, vocab_file):
    """`(checkpoint_dir, pretrainer)`: a converted-style checkpoint with the MLM/NSP heads and
    vocab.txt beside it, and the Keras model it holds (the reference for every output)."""
    directory = str(tmp_path_factory.mktemp("pretrained"))
    return directory, write_pretrained_checkpoint(directory, vocab_file)


@pytest.fixture(scope="session")
def encoder_export_dir(tmp_path_factory, pretrained):
    """The SavedModel of `tools/export_savedmodel.py --export_type=encoder_with_mlm` (vocab
    from beside the checkpoint), after moving its whole base directory elsewhere."""
    base = tmp_path_factory.mktemp("exported") / "bert"
    result = run_tool("export_savedmodel.py", "--export_type=encoder_with_mlm",
                      f"--init_checkpoint={pretrained[0]}", f"--output_dir={base}")
    assert result.returncode == 0, result.stderr
    assert f"Exported encoder_with_mlm to {base}/1" in result.stdout
    moved = tmp_path_factory.mktemp("moved") / "elsewhere"
    shutil.move(str(base), str(moved))
    return str(moved / "1")


@pytest.fixture(scope="session")
def task_checkpoints(tmp_path_factory):
    """`{task: (checkpoint prefix, the random model written)}`."""
    keras.utils.set_random_seed(1)
    written = {}
    for task in FEEDS:
        model = new_task_model(task)
        written[task] = (write_task_checkpoint(str(tmp_path_factory.mktemp(task)), model), model)
    return written


@pytest.fixture(scope="session")
def task_exports(tmp_path_factory, task_checkpoints, vocab_file):
    """`{task: (SavedModel dir, loaded SavedModel, Keras model restored from the checkpoint)}`."""
    base = tmp_path_factory.mktemp("models")
    exported = {}
    for task, (prefix, _) in task_checkpoints.items():
        # --init_checkpoint takes a checkpoint directory or a prefix: use both.
        checkpoint = prefix if task in ("squad", "multiple_choice") else os.path.dirname(prefix)
        model = load_task_model(task, checkpoint)
        path = write_version(str(base / task), lambda d: export_task_model(
            d, task, model, vocab_file, do_lower_case=True, seq_length=SEQ_LENGTH,
            **EXPORT_OPTIONS[task]))
        exported[task] = (path, tf.saved_model.load(path), model)
    return exported
