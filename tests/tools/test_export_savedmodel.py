"""`tools/export_savedmodel.py` as a user runs it: TF Serving's layout, the vocabulary flags
alone for `preprocess`, a fine-tuned classifier from its checkpoint, and a clear error for a
checkpoint that holds no task model. (The encoder export runs through the tool in
tests/export/test_encoder_export.py.)"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the preprocessing SavedModel uses tf.text ops)

from bert_tf import BertEncoder
from bert_tf.checkpoints import save_checkpoint
from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.text.bert_preprocessor import BertPreprocessor
from tests.cli.tensorflow_refused import REFUSING_TENSORFLOW
from tests.export.tiny_models import (tiny_config, write_pretrained_checkpoint,
                                      write_task_checkpoint, write_vocab)
from tests.resources import REPO_ROOT
from tests.tools.tool_runs import run_tool

TEXTS = ["Hello unaffable world!", "", "what a good film"]


@pytest.mark.parametrize("special_tokens_in_strings", [False, True])
def test_preprocess_needs_only_the_vocabulary(tmp_path, special_tokens_in_strings):
    vocab_file = write_vocab(tmp_path)
    base = tmp_path / "preprocess"
    flag = ("--" if special_tokens_in_strings else "--no") + "special_tokens_in_strings"
    result = run_tool("export_savedmodel.py", "--export_type=preprocess",
                      f"--vocab_file={vocab_file}", "--do_lower_case", "--seq_length=16",
                      flag, f"--output_dir={base}")
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(base)) == ["1"]
    assert os.path.isfile(base / "1" / "saved_model.pb")
    assert (base / "1" / "assets" / "vocab.txt").read_text() == open(vocab_file).read()
    loaded = tf.saved_model.load(str(base / "1"))
    texts = TEXTS + ["a [SEP] b [CLS]"]
    expected = BertPreprocessor(vocab_file, lower_case=True, seq_length=16,
                                special_tokens_in_strings=special_tokens_in_strings)(
        tf.constant(texts))
    packed = loaded(tf.constant(texts))
    for key, value in expected.items():
        assert packed[key].dtype == tf.int32
        np.testing.assert_array_equal(packed[key], value)


@pytest.mark.parametrize("seq_length", [0, 2])
def test_preprocess_refuses_a_seq_length_too_short_in_one_line(tmp_path, seq_length):
    base = tmp_path / "preprocess"
    result = run_tool("export_savedmodel.py", "--export_type=preprocess",
                      f"--vocab_file={write_vocab(tmp_path)}", f"--seq_length={seq_length}",
                      f"--output_dir={base}")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"export_savedmodel: error: seq_length must be at least 3, got {seq_length}."]
    assert not os.path.exists(base)


# Flags an export refuses only after loading the model, which the tool refuses first, and what
# its one error line says.
REFUSED_BEFORE_LOADING = [
    (["--export_type=encoder", "--seq_length=-3"],
     "--seq_length applies to the preprocess and task exports; the encoder export takes any "
     "length up to the encoder's max_position_embeddings"),
    (["--export_type=classifier", "--version=0"], "--version must be a positive integer, got 0"),
    (["--export_type=ner", "--text_pairs"], "--text_pairs applies to the classifier export, not "
                                            "to ner"),
    (["--export_type=classifier", "--label_names=a,b,a"],
     "--label_names names two classes alike: a,b,a"),
    (["--export_type=classifier", "--doc_stride=64"],
     "--doc_stride applies to the squad export, not to classifier"),
    (["--export_type=ner", "--max_windows=4", "--max_query_length=8"],
     "--max_query_length applies to the squad export, not to ner; --max_windows applies to the "
     "squad export, not to ner"),
    (["--export_type=classifier", "--version_2_with_negative"],
     "--version_2_with_negative applies to the squad export, not to classifier"),
    (["--export_type=preprocess", "--max_tokens_per_call=512"],
     "--max_tokens_per_call applies to the task exports, not to preprocess"),
    (["--export_type=ner", "--max_tokens_per_call=0"],
     "flag --max_tokens_per_call=0: 0 is not a positive integer"),
    (["--export_type=squad", "--null_score_diff_threshold=1"],
     "--null_score_diff_threshold applies with --version_2_with_negative"),
    (["--export_type=squad", "--version_2_with_negative", "--null_score_diff_threshold=nan"],
     "--null_score_diff_threshold must be a number, got nan"),
    (["--export_type=squad", "--max_answer_length=0"],
     "--max_answer_length must be at least 1, got 0"),
    (["--export_type=squad", "--doc_stride=0"], "--doc_stride must be at least 1, got 0."),
    (["--export_type=squad", "--max_windows=0"], "--max_windows must be at least 1, got 0."),
    (["--export_type=squad", "--seq_length=64"],
     "--seq_length (64) must exceed --max_query_length (64) + 3 special tokens, to leave room "
     "for the context."),
]


@pytest.mark.parametrize("flags, message", REFUSED_BEFORE_LOADING)
def test_flags_an_export_would_refuse_after_loading_are_refused_first(tmp_path, flags, message):
    # Before: refused after loading the model and tracing its signatures (5-10 s), or, for the
    # encoder's --seq_length, ignored without a word.
    base = tmp_path / "model"
    result = run_tool("export_savedmodel.py", *flags, f"--init_checkpoint={tmp_path / 'none'}",
                      f"--output_dir={base}")
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr, result.stderr
    assert not os.path.exists(base)


# Parses each command line of the JSON list argv[1] as the tool does and checks its flags, with
# `import tensorflow` refused; prints each one's error, one a line.
_CHECKING_FLAGS_WITHOUT_TENSORFLOW = REFUSING_TENSORFLOW + """
import json
from absl import app, flags
from bert_tf.cli import export_savedmodel

export_savedmodel.define_flags()
for command_line in json.loads(sys.argv[1]):
    flags.FLAGS.unparse_flags()
    try:
        flags.FLAGS(["export_savedmodel", *command_line])
        export_savedmodel._check_flags()
    except (flags.Error, app.UsageError, ValueError) as error:
        print(error)
    else:
        print("accepted")
"""


def test_flags_are_checked_without_importing_tensorflow(tmp_path):
    # A refusal waited for 4 s of `import tensorflow` (Zen 5), which the export needs only after.
    encoder = tmp_path / "encoder"  # version 1 of an encoder export, as the tool records it
    (encoder / "1" / "assets.extra").mkdir(parents=True)
    (encoder / "1" / "saved_model.pb").write_bytes(b"")
    (encoder / "1" / "assets.extra" / "bert_tf_export.json").write_text(
        '{"export_type": "encoder"}')
    refused = REFUSED_BEFORE_LOADING + [
        (["--export_type=preprocess"], f"--output_dir {encoder} holds an --export_type=encoder "
                                       f"model ({encoder}/1)"),
        (["--export_type=encoder", "--version=1"], f"{encoder}/1 already exists: version 1 of "
                                                   f"this model is taken"),
    ]
    # Into the encoder's base path: the other refusals come first, as when nothing is there.
    command_lines = [flags + [f"--output_dir={encoder}"] for flags, _ in refused]
    result = subprocess.run(
        [sys.executable, "-c", _CHECKING_FLAGS_WITHOUT_TENSORFLOW, json.dumps(command_lines)],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(refused), result.stdout
    for line, (_, message) in zip(lines, refused, strict=True):
        assert message in line


def test_an_output_dir_under_a_file_is_refused_first(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    result = run_tool("export_savedmodel.py", "--export_type=classifier",
                      f"--init_checkpoint={tmp_path / 'none'}",
                      f"--output_dir={tmp_path / 'notes.txt' / 'model'}")
    assert result.returncode == 1
    assert "notes.txt is a file, not a directory" in result.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_encoder_with_mlm_says_the_checkpoint_has_no_masked_lm_head(tmp_path):
    checkpoint_dir = str(tmp_path / "encoder_only")
    save_checkpoint(checkpoint_dir, BertEncoder(tiny_config(num_hidden_layers=1)),
                    vocab_file=write_vocab(tmp_path))
    base = tmp_path / "mlm"
    result = run_tool("export_savedmodel.py", "--export_type=encoder_with_mlm",
                      f"--init_checkpoint={checkpoint_dir}", f"--output_dir={base}")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"export_savedmodel: error: --export_type=encoder_with_mlm needs a masked-LM head, and "
        f"{checkpoint_dir} has none (no pre-training heads, cls/...): export its encoder with "
        f"--export_type=encoder, or use a checkpoint written by run_pretraining or converted "
        f"from Google's."]
    assert not os.path.exists(base)


def test_classifier_from_a_fine_tuned_checkpoint(tmp_path):
    vocab_file = write_vocab(tmp_path)
    keras.utils.set_random_seed(3)
    classifier = BertClassifier(BertEncoder(tiny_config(num_hidden_layers=1)), num_classes=2)
    checkpoint_dir = tmp_path / "finetuned"
    write_task_checkpoint(str(checkpoint_dir), classifier)
    base = tmp_path / "sst2"
    result = run_tool("export_savedmodel.py", "--export_type=classifier",
                      f"--init_checkpoint={checkpoint_dir}", f"--vocab_file={vocab_file}",
                      "--seq_length=16", "--label_names=negative,positive", "--version=5",
                      "--max_tokens_per_call=16", f"--output_dir={base}")
    assert result.returncode == 0, result.stderr
    assert f"Exported classifier to {base}/5" in result.stdout
    assert sorted(os.listdir(base)) == ["5"]
    loaded = tf.saved_model.load(str(base / "5"))
    assert loaded.max_tokens_per_call.numpy() == 16   # TEXTS run one or two at a time
    serving = loaded.signatures["serving_default"]
    assert list(serving.structured_input_signature[1]) == ["text"]
    outputs = serving(text=tf.constant(TEXTS))
    inputs = BertPreprocessor(vocab_file, lower_case=True, seq_length=16)(tf.constant(TEXTS))
    logits = classifier(inputs, training=False)["logits"].numpy()
    np.testing.assert_allclose(outputs["logits"], logits, atol=1e-5)
    assert outputs["label_name"].numpy().tolist() == [
        [b"negative", b"positive"][i] for i in logits.argmax(-1)]


def test_a_task_export_defaults_to_the_casing_recorded_beside_the_checkpoint(tmp_path):
    """run_classifier --nodo_lower_case records tokenizer_config.json: the export of that run
    does not lower-case without being told, and refuses --do_lower_case."""
    vocab_file = write_vocab(tmp_path)
    keras.utils.set_random_seed(3)
    classifier = BertClassifier(BertEncoder(tiny_config(num_hidden_layers=1)), num_classes=2)
    checkpoint_dir = tmp_path / "cased"
    write_task_checkpoint(str(checkpoint_dir), classifier)
    (checkpoint_dir / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    flags = ["--export_type=classifier", f"--init_checkpoint={checkpoint_dir}",
             f"--vocab_file={vocab_file}", "--seq_length=16"]
    result = run_tool("export_savedmodel.py", *flags, f"--output_dir={tmp_path / 'ok'}")
    assert result.returncode == 0, result.stderr
    assert not tf.saved_model.load(str(tmp_path / "ok" / "1")).do_lower_case.numpy()

    result = run_tool("export_savedmodel.py", *flags, "--do_lower_case",
                      f"--output_dir={tmp_path / 'refused'}")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"export_savedmodel: error: --do_lower_case contradicts {checkpoint_dir}/"
        f"tokenizer_config.json, which says do_lower_case false (the casing its model was "
        f"trained with); drop --do_lower_case"]
    assert not (tmp_path / "refused").exists()


@pytest.mark.parametrize("export_type, model", [("ner", "BertTokenClassifier"),
                                                 ("squad", "BertSpanLabeler")])
def test_another_tasks_export_type_is_refused(tmp_path, export_type, model):
    classifier = BertClassifier(BertEncoder(tiny_config(num_hidden_layers=1)), num_classes=2)
    checkpoint_dir = tmp_path / "sst2"
    prefix = write_task_checkpoint(str(checkpoint_dir), classifier)
    base = tmp_path / export_type
    result = run_tool("export_savedmodel.py", f"--export_type={export_type}",
                      f"--init_checkpoint={checkpoint_dir}", "--label_names=O,B-X",
                      f"--vocab_file={write_vocab(tmp_path)}", f"--output_dir={base}")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        f"export_savedmodel: error: {prefix} holds a fine-tuned BertClassifier, not a "
        f"{export_type} model ({model}).")
    assert not os.path.exists(base)


def test_a_checkpoint_without_a_task_model_is_a_clear_error(tmp_path):
    vocab_file = write_vocab(tmp_path)
    checkpoint_dir = str(tmp_path / "pretrained")
    write_pretrained_checkpoint(checkpoint_dir, vocab_file, num_hidden_layers=1)
    base = tmp_path / "squad"
    result = run_tool("export_savedmodel.py", "--export_type=squad",
                      f"--init_checkpoint={checkpoint_dir}", f"--output_dir={base}")
    assert result.returncode == 1
    assert "export_savedmodel: " in result.stderr
    assert "holds no fine-tuned task model" in result.stderr
    assert not os.path.exists(base)


def test_an_export_of_another_type_in_the_same_base_path_is_refused_before_loading(tmp_path):
    # The preprocessor became version 2 of an encoder's base path: TF Serving would have
    # served it under the encoder's name. A taken --version was refused only after tracing.
    vocab_file = write_vocab(tmp_path)
    checkpoint = str(tmp_path / "encoder_only")
    save_checkpoint(checkpoint, BertEncoder(tiny_config(num_hidden_layers=1)),
                    vocab_file=vocab_file)
    base = tmp_path / "models" / "bert"
    encoder = run_tool("export_savedmodel.py", "--export_type=encoder",
                       f"--init_checkpoint={checkpoint}", f"--output_dir={base}")
    assert encoder.returncode == 0, encoder.stderr
    assert (base / "1" / "assets.extra" / "bert_tf_export.json").read_text() == (
        '{"export_type": "encoder"}')
    preprocess = ["--export_type=preprocess", f"--vocab_file={vocab_file}", "--seq_length=16"]
    result = run_tool("export_savedmodel.py", *preprocess, f"--output_dir={base}")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"export_savedmodel: error: --output_dir {base} holds an --export_type=encoder model "
        f"({base}/1): an --export_type=preprocess one there would be served in its place under "
        f"the same model name; use another --output_dir"]
    result = run_tool("export_savedmodel.py", *preprocess, f"--output_dir={tmp_path / 'pre'}",
                      "--version=1")
    assert result.returncode == 0, result.stderr
    result = run_tool("export_savedmodel.py", *preprocess, f"--output_dir={tmp_path / 'pre'}",
                      "--version=1")
    assert result.stderr.splitlines() == [
        f"export_savedmodel: error: {tmp_path}/pre/1 already exists: version 1 of this model "
        f"is taken; choose another version or base path."]
    assert sorted(os.listdir(base)) == ["1"] and sorted(os.listdir(tmp_path / "pre")) == ["1"]


def test_a_vocabulary_that_is_no_file_is_named_before_tracing(tmp_path):
    # It was "tracing the signatures ...", then "[Errno 2] No such file or directory: ...".
    result = run_tool("export_savedmodel.py", "--export_type=preprocess",
                      f"--vocab_file={tmp_path}/missing.txt", f"--output_dir={tmp_path}/pre")
    assert result.stderr.splitlines() == [
        f"export_savedmodel: error: --vocab_file {tmp_path}/missing.txt does not exist"]
    assert not os.path.exists(tmp_path / "pre")
