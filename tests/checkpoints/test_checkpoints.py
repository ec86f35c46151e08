"""Reading Google TF1 and Hugging Face checkpoints, converting them, bert_tf's own TF2 format,
and the errors. The files are written here under the formats' real names by hand-written
mappings (independent of `bert_tf/checkpoints/names.py`)."""

import json
import logging
import os
import pickle
import struct
import subprocess
import sys

import keras
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertConfig, BertEncoder, checkpoints
from bert_tf.checkpoints import CheckpointMismatchError, UnsupportedCheckpointError, sources
from tests.read_only import read_only
from tests.resources import REPO_ROOT
from tests.tools.tool_runs import error_output, run_tool

SMALL = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=24, max_position_embeddings=20)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)]

# Keras weight path -> Google name, written out by hand.
_BLOCK = {
    "attention/query/kernel": "attention/self/query/kernel",
    "attention/query/bias": "attention/self/query/bias",
    "attention/key/kernel": "attention/self/key/kernel",
    "attention/key/bias": "attention/self/key/bias",
    "attention/value/kernel": "attention/self/value/kernel",
    "attention/value/bias": "attention/self/value/bias",
    "attention_output/kernel": "attention/output/dense/kernel",
    "attention_output/bias": "attention/output/dense/bias",
    "attention_layer_norm/gamma": "attention/output/LayerNorm/gamma",
    "attention_layer_norm/beta": "attention/output/LayerNorm/beta",
    "intermediate/kernel": "intermediate/dense/kernel",
    "intermediate/bias": "intermediate/dense/bias",
    "output_dense/kernel": "output/dense/kernel",
    "output_dense/bias": "output/dense/bias",
    "output_layer_norm/gamma": "output/LayerNorm/gamma",
    "output_layer_norm/beta": "output/LayerNorm/beta",
}
_TOP = {
    "embeddings/word_embeddings": "bert/embeddings/word_embeddings",
    "embeddings/position_embeddings": "bert/embeddings/position_embeddings",
    "embeddings/token_type_embeddings": "bert/embeddings/token_type_embeddings",
    "embeddings/layer_norm/gamma": "bert/embeddings/LayerNorm/gamma",
    "embeddings/layer_norm/beta": "bert/embeddings/LayerNorm/beta",
    "pooler/kernel": "bert/pooler/dense/kernel",
    "pooler/bias": "bert/pooler/dense/bias",
}
# Google name -> Hugging Face name (no `bert.` prefix, as BertModel saves), transposed?
_HF_TOP = {
    "bert/embeddings/word_embeddings": ("embeddings.word_embeddings.weight", False),
    "bert/embeddings/position_embeddings": ("embeddings.position_embeddings.weight", False),
    "bert/embeddings/token_type_embeddings": ("embeddings.token_type_embeddings.weight", False),
    "bert/embeddings/LayerNorm/gamma": ("embeddings.LayerNorm.weight", False),
    "bert/embeddings/LayerNorm/beta": ("embeddings.LayerNorm.bias", False),
    "bert/pooler/dense/kernel": ("pooler.dense.weight", True),
    "bert/pooler/dense/bias": ("pooler.dense.bias", False),
    "cls/predictions/transform/dense/kernel": ("cls.predictions.transform.dense.weight", True),
    "cls/predictions/transform/dense/bias": ("cls.predictions.transform.dense.bias", False),
    "cls/predictions/transform/LayerNorm/gamma": ("cls.predictions.transform.LayerNorm.weight",
                                                  False),
    "cls/predictions/transform/LayerNorm/beta": ("cls.predictions.transform.LayerNorm.bias",
                                                 False),
    "cls/predictions/output_bias": ("cls.predictions.bias", False),
    "cls/seq_relationship/output_weights": ("cls.seq_relationship.weight", False),
    "cls/seq_relationship/output_bias": ("cls.seq_relationship.bias", False),
}
_HF_BLOCK = {
    "attention/self/query/kernel": ("attention.self.query.weight", True),
    "attention/self/query/bias": ("attention.self.query.bias", False),
    "attention/self/key/kernel": ("attention.self.key.weight", True),
    "attention/self/key/bias": ("attention.self.key.bias", False),
    "attention/self/value/kernel": ("attention.self.value.weight", True),
    "attention/self/value/bias": ("attention.self.value.bias", False),
    "attention/output/dense/kernel": ("attention.output.dense.weight", True),
    "attention/output/dense/bias": ("attention.output.dense.bias", False),
    "attention/output/LayerNorm/gamma": ("attention.output.LayerNorm.weight", False),
    "attention/output/LayerNorm/beta": ("attention.output.LayerNorm.bias", False),
    "intermediate/dense/kernel": ("intermediate.dense.weight", True),
    "intermediate/dense/bias": ("intermediate.dense.bias", False),
    "output/dense/kernel": ("output.dense.weight", True),
    "output/dense/bias": ("output.dense.bias", False),
    "output/LayerNorm/gamma": ("output.LayerNorm.weight", False),
    "output/LayerNorm/beta": ("output.LayerNorm.bias", False),
}


def google_name(keras_path):
    if keras_path in _TOP:
        return _TOP[keras_path]
    layer, rest = keras_path.split("/", 1)
    return f"bert/encoder/{layer}/{_BLOCK[rest]}"


def hf_name(google):
    if google in _HF_TOP:
        return _HF_TOP[google]
    _, _, layer, rest = google.split("/", 3)
    name, transposed = _HF_BLOCK[rest]
    return f"encoder.layer.{layer[len('layer_'):]}.{name}", transposed


def random_encoder(config=SMALL, seed=0):
    """An encoder whose every weight (LayerNorm included) is random and distinct."""
    keras.utils.set_random_seed(seed)
    encoder = BertEncoder(config)
    rng = np.random.default_rng(seed)
    for w in encoder.weights:
        w.assign(rng.normal(0, 0.5, w.shape).astype(np.float32))
    return encoder


def random_heads(config=SMALL, seed=1):
    rng = np.random.default_rng(seed)
    h, v = config.hidden_size, config.vocab_size
    shapes = {"cls/predictions/transform/dense/kernel": (h, h),
              "cls/predictions/transform/dense/bias": (h,),
              "cls/predictions/transform/LayerNorm/gamma": (h,),
              "cls/predictions/transform/LayerNorm/beta": (h,),
              "cls/predictions/output_bias": (v,),
              "cls/seq_relationship/output_weights": (2, h),
              "cls/seq_relationship/output_bias": (2,)}
    return {k: rng.normal(0, 0.5, s).astype(np.float32) for k, s in shapes.items()}


def google_arrays(encoder):
    return {google_name(w.path): w.numpy() for w in encoder.weights}


def write_google_checkpoint(directory, arrays, config=SMALL, vocab=True):
    """A TF1 checkpoint as Google's run_pretraining.py writes it: tf.compat.v1 variables under
    Google's names, saved by tf.compat.v1.train.Saver to DIR/bert_model.ckpt."""
    os.makedirs(directory, exist_ok=True)
    prefix = os.path.join(directory, "bert_model.ckpt")
    with tf.Graph().as_default():
        variables = [tf.compat.v1.Variable(value, name=name) for name, value in arrays.items()]
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, prefix, write_meta_graph=False, write_state=False)
    with open(os.path.join(directory, "bert_config.json"), "w") as f:
        json.dump({k: v for k, v in config.to_dict().items() if k != "layer_norm_eps"}, f)
    if vocab:
        with open(os.path.join(directory, "vocab.txt"), "w") as f:
            f.write("\n".join(VOCAB) + "\n")
    return prefix


def write_safetensors(path, tensors):
    """The safetensors format by hand (8-byte header size, JSON header, raw little-endian
    data), so float16 and bfloat16 files need nothing but NumPy and ml_dtypes."""
    codes = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
             np.dtype(ml_dtypes.bfloat16): "BF16", np.dtype(np.int64): "I64"}
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": codes[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))


def write_hf_directory(directory, arrays, dtype=np.float32, prefix="", legacy=False,
                       config=SMALL):
    os.makedirs(directory, exist_ok=True)
    tensors = {"embeddings.position_ids": np.arange(config.max_position_embeddings,
                                                    dtype=np.int64)[None]}
    for google, value in arrays.items():
        name, transposed = hf_name(google)
        if legacy:
            name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
                "LayerNorm.bias", "LayerNorm.beta")
        if not name.startswith("cls."):
            name = prefix + name
        tensors[name] = (value.T if transposed else value).astype(dtype)
    if "cls/predictions/output_bias" in arrays:  # BertForPreTraining's tied decoder copies
        tensors["cls.predictions.decoder.weight"] = arrays[
            "bert/embeddings/word_embeddings"].astype(dtype)
        tensors["cls.predictions.decoder.bias"] = arrays["cls/predictions/output_bias"].astype(
            dtype)
    write_safetensors(os.path.join(directory, "model.safetensors"), tensors)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(dict(config.to_dict(), model_type="bert", architectures=["BertModel"],
                       position_embedding_type="absolute"), f)
    with open(os.path.join(directory, "vocab.txt"), "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    return directory


def make_inputs(config=SMALL, batch=3, seq=9, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, config.vocab_size, (batch, seq)).astype(np.int32)
    lengths = np.array([seq] + list(rng.integers(2, seq, batch - 1)))
    mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
    types = ((np.arange(seq)[None] >= lengths[:, None] // 2) * mask).astype(np.int32)
    return {"input_word_ids": tf.constant(ids * mask), "input_mask": tf.constant(mask),
            "input_type_ids": tf.constant(types)}


def assert_same_outputs(a, b, exact=True, atol=0.0):
    inputs = make_inputs()
    out_a, out_b = a(inputs), b(inputs)
    for key in ("sequence_output", "pooled_output"):
        if exact:
            np.testing.assert_array_equal(out_a[key], out_b[key])
        else:
            np.testing.assert_allclose(out_a[key], out_b[key], rtol=0, atol=atol)


def assert_same_weights(a, b):
    for (name, va), (_, vb) in zip(checkpoints.encoder_weights(a), checkpoints.encoder_weights(b)):
        np.testing.assert_array_equal(va.numpy(), vb.numpy(), err_msg=name)


@pytest.fixture(scope="module")
def encoder():
    return random_encoder()


# --- the naming table -------------------------------------------------------------------------

def test_naming_table_covers_every_encoder_weight_once(encoder):
    pairs = checkpoints.encoder_weights(encoder)
    assert len(pairs) == len(encoder.weights) == 5 + 16 * SMALL.num_hidden_layers + 2
    assert [name for name, _ in pairs] == checkpoints.encoder_weight_names(2)
    for name, variable in pairs:  # agrees with the hand-written mapping of this test
        assert google_name(variable.path) == name


def test_hugging_face_names_are_derived_by_rule():
    assert checkpoints.hf_names("bert/encoder/layer_11/attention/self/query/kernel") == [
        "bert.encoder.layer.11.attention.self.query.weight"]
    assert checkpoints.hf_names("bert/embeddings/LayerNorm/gamma") == [
        "bert.embeddings.LayerNorm.weight", "bert.embeddings.LayerNorm.gamma"]
    assert checkpoints.hf_names("bert/embeddings/word_embeddings") == [
        "bert.embeddings.word_embeddings.weight"]
    assert checkpoints.hf_names("cls/predictions/output_bias") == ["cls.predictions.bias"]
    assert checkpoints.hf_names("cls/seq_relationship/output_weights") == [
        "cls.seq_relationship.weight"]
    assert checkpoints.hf_transposed("bert/pooler/dense/kernel")
    assert not checkpoints.hf_transposed("bert/embeddings/word_embeddings")
    assert not checkpoints.hf_transposed("cls/seq_relationship/output_weights")
    for google in checkpoints.encoder_weight_names(2) + list(checkpoints.PRETRAINING_HEAD_NAMES):
        name, transposed = hf_name(google)
        assert checkpoints.hf_names(google)[0] in (name, "bert." + name)
        assert checkpoints.hf_transposed(google) == transposed


# --- Google TF1 checkpoints ---------------------------------------------------------------------

def test_google_checkpoint_converts_with_the_tool_and_loads_back_exactly(encoder, tmp_path):
    heads = random_heads()
    arrays = dict(google_arrays(encoder), **heads)
    # What Google's pre-training also leaves in the file: optimizer slots and the step.
    arrays["bert/embeddings/word_embeddings/adam_m"] = np.zeros((40, 16), np.float32)
    arrays["bert/embeddings/word_embeddings/adam_v"] = np.zeros((40, 16), np.float32)
    arrays["global_step"] = np.array(7, np.int64)
    arrays["bert/some_unknown_tensor"] = np.ones(3, np.float32)
    prefix = write_google_checkpoint(str(tmp_path / "google"), arrays)
    assert os.path.exists(prefix + ".index")
    assert checkpoints.detect_format(prefix) == (checkpoints.GOOGLE, prefix)
    assert checkpoints.detect_format(str(tmp_path / "google")) == (checkpoints.GOOGLE, prefix)

    output_dir = str(tmp_path / "converted")
    run = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "tools", "convert_checkpoint.py"),
         f"--checkpoint={prefix}", f"--output_dir={output_dir}"],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Converted google checkpoint" in run.stdout
    assert "encoder weights: 39" in run.stdout and "pre-training heads: 7" in run.stdout
    assert "UNUSED source tensors (1): bert/some_unknown_tensor" in run.stdout
    assert "ignored (optimizer slots, counters, buffers): 3" in run.stdout
    assert sorted(os.listdir(output_dir)) == [
        "bert_config.json", "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
        "vocab.txt"]
    assert BertConfig.from_json_file(os.path.join(output_dir, "bert_config.json")) == SMALL

    restored = checkpoints.load_model(output_dir)
    assert_same_weights(restored, encoder)
    assert_same_outputs(restored, encoder)
    weights = checkpoints.read_weights(output_dir)
    assert weights.format == checkpoints.BERT_TF and weights.unused == []
    assert sorted(weights.heads) == sorted(heads)
    for name, value in heads.items():
        np.testing.assert_array_equal(weights.heads[name], value)


def test_google_checkpoint_loads_directly(encoder, tmp_path):
    prefix = write_google_checkpoint(str(tmp_path), google_arrays(encoder), vocab=False)
    restored = checkpoints.load_model(prefix)
    assert_same_outputs(restored, encoder)
    weights = checkpoints.read_weights(prefix + ".index")
    assert weights.vocab_file is None and weights.heads == {}


# --- Hugging Face safetensors -------------------------------------------------------------------

@pytest.mark.parametrize("prefix,legacy", [("", False), ("bert.", False), ("bert.", True)])
def test_hugging_face_round_trip(encoder, tmp_path, prefix, legacy):
    heads = random_heads()
    directory = write_hf_directory(str(tmp_path / "hf"), dict(google_arrays(encoder), **heads),
                                   prefix=prefix, legacy=legacy)
    weights = checkpoints.read_weights(directory)
    assert weights.format == checkpoints.HUGGING_FACE
    assert weights.unused == []
    assert sorted(weights.ignored) == sorted(["embeddings.position_ids",
                                              "cls.predictions.decoder.weight",
                                              "cls.predictions.decoder.bias"])
    for name, value in heads.items():
        np.testing.assert_array_equal(weights.heads[name], value)
    restored = checkpoints.load_model(os.path.join(directory, "model.safetensors"))
    assert_same_weights(restored, encoder)
    assert_same_outputs(restored, encoder)

    result = checkpoints.convert_checkpoint(directory, str(tmp_path / "out"))
    assert result.heads == sorted(heads)
    assert os.path.exists(tmp_path / "out" / "vocab.txt")
    assert_same_outputs(checkpoints.load_model(str(tmp_path / "out")), encoder)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_hugging_face_half_precision_files_are_read_as_float32(encoder, tmp_path, dtype):
    arrays = google_arrays(encoder)
    directory = write_hf_directory(str(tmp_path), arrays, dtype=dtype)
    weights = checkpoints.read_weights(directory)
    for name, value in arrays.items():
        assert weights.arrays[name].dtype == np.float32
        np.testing.assert_array_equal(weights.arrays[name],
                                      value.astype(dtype).astype(np.float32), err_msg=name)
    restored = checkpoints.load_model(directory)
    assert_same_outputs(restored, encoder, exact=False, atol=0.2 if dtype == np.float16 else 0.5)


def test_unknown_source_tensors_are_logged_not_dropped(encoder, tmp_path, caplog):
    directory = write_hf_directory(str(tmp_path), google_arrays(encoder))
    # Re-write the file with an extra task head that the package does not know.
    tensors = {}
    for google, value in google_arrays(encoder).items():
        name, transposed = hf_name(google)
        tensors[name] = value.T.copy() if transposed else value
    tensors["classifier.weight"] = np.ones((3, 16), np.float32)
    write_safetensors(os.path.join(directory, "model.safetensors"), tensors)
    with caplog.at_level(logging.WARNING, logger="bert_tf.checkpoints"):
        report = checkpoints.restore_weights(random_encoder(seed=5), directory)
    assert report.unused == ["classifier.weight"] and report.loaded == 39
    assert "classifier.weight" in caplog.text


# --- bert_tf's own TF2 checkpoint -----------------------------------------------------------------

def test_keras3_encoder_is_tracked_by_tf_train_checkpoint(encoder, tmp_path):
    prefix = checkpoints.save_checkpoint(str(tmp_path), encoder)
    keys = tf.train.list_variables(prefix)
    encoder_keys = [k for k, _ in keys if k.startswith("encoder/")]
    assert len(encoder_keys) == len(encoder.weights)
    # Plain TensorFlow object-based restore works into a fresh Keras 3 encoder...
    fresh = random_encoder(seed=9)
    status = tf.train.Checkpoint(encoder=fresh).restore(prefix)
    status.assert_existing_objects_matched()
    assert_same_weights(fresh, encoder)
    # ...and so does the package's reader, also under mixed precision.
    mixed = BertEncoder(SMALL, dtype="mixed_bfloat16")
    checkpoints.restore_weights(mixed, str(tmp_path))
    assert_same_weights(mixed, encoder)


def test_training_checkpoint_with_optimizer_restores_the_encoder(tmp_path):
    trained = random_encoder(seed=3)
    optimizer = keras.optimizers.Adam(1e-3)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(trained(make_inputs())["pooled_output"] ** 2)
    optimizer.apply_gradients(zip(tape.gradient(loss, trained.trainable_variables),
                                  trained.trainable_variables))
    checkpoint = tf.train.Checkpoint(encoder=trained, optimizer=optimizer,
                                     step=tf.Variable(1, dtype=tf.int64))
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=2)
    manager.save()
    manager.save()
    assert checkpoints.detect_format(str(tmp_path)) == (checkpoints.BERT_TF,
                                                        str(tmp_path / "ckpt-2"))
    fresh = random_encoder(seed=4)
    report = checkpoints.restore_weights(fresh, str(tmp_path))
    assert report.format == checkpoints.BERT_TF and report.unused == [] and report.loaded == 39
    assert_same_weights(fresh, trained)
    assert checkpoints.resolve_prefix(str(tmp_path)) == str(tmp_path / "ckpt-2")
    fresh = random_encoder(seed=4)
    checkpoints.restore_weights(fresh, str(tmp_path / "ckpt-1"))
    assert_same_weights(fresh, trained)
    assert checkpoints.read_weights(str(tmp_path), config=SMALL).unused == []


def test_restoring_into_a_different_encoder_counts_every_problem(encoder, tmp_path):
    checkpoints.save_checkpoint(str(tmp_path), encoder)
    deeper = dict(SMALL.to_dict(), num_hidden_layers=3, vocab_size=41)
    with pytest.raises(CheckpointMismatchError) as error:
        checkpoints.restore_weights(BertEncoder(BertConfig.from_dict(deeper)), str(tmp_path))
    message = str(error.value)
    assert "16 missing, 1 with the wrong shape" in message
    # The first five names of each kind, then a count: the error's attributes hold them all.
    assert len(error.value.missing) == 16
    missing = [line.strip() for line in message.splitlines()[2:8]]
    assert missing == error.value.missing[:5] + ["... and 11 more"], message
    assert all(name.startswith("bert/encoder/layer_2/") for name in error.value.missing)
    assert "bert/embeddings/word_embeddings: expected (41, 16), found (40, 16)" in message
    # A shallower encoder loads what it has and reports the rest as unused.
    shallower = BertEncoder(BertConfig.from_dict(dict(SMALL.to_dict(), num_hidden_layers=1)))
    report = checkpoints.restore_weights(shallower, str(tmp_path))
    assert len(report.unused) == 16 and report.loaded == 23


def test_save_checkpoint_refuses_to_overwrite(encoder, tmp_path):
    checkpoints.save_checkpoint(str(tmp_path), encoder)
    with pytest.raises(FileExistsError, match=f"{tmp_path} is not empty \\(bert_config.json, "
                                              f"checkpoint, ckpt-1.data-00000-of-00001, "
                                              f"ckpt-1.index\\): write the checkpoint into"):
        checkpoints.save_checkpoint(str(tmp_path), encoder)
    # A vocabulary already in place is kept, not copied over itself.
    vocab_file = tmp_path / "beside" / "vocab.txt"
    vocab_file.parent.mkdir()
    vocab_file.write_text("\n".join(VOCAB) + "\n")
    checkpoints.save_checkpoint(str(vocab_file.parent), encoder, vocab_file=str(vocab_file))
    assert sorted(os.listdir(vocab_file.parent)) == [
        "bert_config.json", "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
        "vocab.txt"]


def test_an_output_directory_that_cannot_be_written_is_refused_before_reading(tmp_path):
    """Not after reading the weights, with the bare "x/ckpt-1_temp; Read-only file system"."""
    unwritable = tmp_path / "read_only"
    unwritable.mkdir()
    output_dir = os.path.join(unwritable, "converted")
    with read_only(unwritable), pytest.raises(PermissionError) as error:
        checkpoints.convert_checkpoint(str(tmp_path / "no_checkpoint"), output_dir)
    assert str(error.value) == (
        f"Cannot write into {output_dir}: {unwritable} is not writable; "
        f"write the checkpoint into a directory you can write")


def test_the_tool_refuses_an_output_directory_with_files_in_it(encoder, tmp_path):
    prefix = write_google_checkpoint(str(tmp_path / "google"), google_arrays(encoder))
    output_dir = tmp_path / "mymodel"
    output_dir.mkdir()
    own = {"bert_config.json": '{"mine": true}', "vocab.txt": "my vocabulary\n"}
    for name, text in own.items():
        (output_dir / name).write_text(text)
    run = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "tools", "convert_checkpoint.py"),
         f"--checkpoint={prefix}", f"--output_dir={output_dir}"],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == (
        f"convert_checkpoint: error: {output_dir} is not empty (bert_config.json, vocab.txt): "
        f"write the checkpoint into a new or empty directory")
    assert {path.name: path.read_text() for path in output_dir.iterdir()} == own


def _stated_casing(directory):
    path = os.path.join(directory, "tokenizer_config.json")
    return json.load(open(path)) if os.path.exists(path) else None


def test_conversion_carries_the_stated_casing_and_refuses_a_contradicting_flag(encoder,
                                                                                tmp_path):
    """Hugging Face states its casing in tokenizer_config.json: the conversion records it as
    fine-tuning runs do, so that every tool reading the converted checkpoint follows it."""
    cased = write_hf_directory(str(tmp_path / "hf_cased"), google_arrays(encoder))
    with open(os.path.join(cased, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": False, "tokenizer_class": "BertTokenizer"}, f)
    result = checkpoints.convert_checkpoint(cased, str(tmp_path / "from_hf"))
    assert result.do_lower_case is False
    assert _stated_casing(tmp_path / "from_hf") == {"do_lower_case": False}

    run = run_tool("convert_checkpoint.py", f"--checkpoint={cased}",
                   f"--output_dir={tmp_path / 'refused'}", "--do_lower_case")
    assert error_output(run) == (
        f"convert_checkpoint: error: --do_lower_case contradicts {cased}/tokenizer_config.json, "
        f"which says do_lower_case false (the casing its model was trained with); drop "
        "--do_lower_case")
    assert not os.path.exists(tmp_path / "refused")

    # A Google checkpoint in a directory of another name states nothing: the flag records the
    # casing, and without it none is.
    prefix = write_google_checkpoint(str(tmp_path / "google"), google_arrays(encoder))
    run = run_tool("convert_checkpoint.py", f"--checkpoint={prefix}",
                   f"--output_dir={tmp_path / 'google_cased'}", "--nodo_lower_case")
    assert run.returncode == 0, run.stderr
    assert "  casing: do_lower_case false" in run.stdout.splitlines()
    assert _stated_casing(tmp_path / "google_cased") == {"do_lower_case": False}
    checkpoints.convert_checkpoint(prefix, str(tmp_path / "google_unknown"))
    assert _stated_casing(tmp_path / "google_unknown") is None


def test_the_name_of_googles_download_states_its_casing(encoder, tmp_path):
    # Original BERT's validate_case_matches_checkpoint: Google's directories name their casing.
    cased = tmp_path / "multi_cased_L-2_H-16_A-2"
    prefix = write_google_checkpoint(str(cased), google_arrays(encoder))
    where = f"the name of Google's download {cased}"
    assert sources.lower_case_beside_checkpoint(prefix) == (False, where)
    assert sources.lower_case_beside_checkpoint(str(cased)) == (False, where)
    for name in ("uncased_L-12_H-768_A-12", "wwm_uncased_L-24_H-1024_A-16",
                 "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12"):
        (tmp_path / name).mkdir()
        assert sources.lower_case_beside_checkpoint(str(tmp_path / name / "bert_model.ckpt"))[0]
    assert sources.lower_case_beside_checkpoint(str(tmp_path / "my_cased_model")) is None

    run = run_tool("convert_checkpoint.py", f"--checkpoint={prefix}",
                   f"--output_dir={tmp_path / 'refused'}", "--do_lower_case")
    assert error_output(run) == (
        f"convert_checkpoint: error: --do_lower_case contradicts {where}, which says "
        "do_lower_case false (the casing its model was trained with); drop --do_lower_case")
    assert not os.path.exists(tmp_path / "refused")
    checkpoints.convert_checkpoint(prefix, str(tmp_path / "converted"))
    assert _stated_casing(tmp_path / "converted") == {"do_lower_case": False}

def test_conversion_refuses_a_vocab_with_more_tokens_than_the_config_embeds(encoder, tmp_path):
    prefix = write_google_checkpoint(str(tmp_path / "google"), google_arrays(encoder))
    vocab_file = tmp_path / "google" / "vocab.txt"
    with open(vocab_file, "a") as f:
        f.write("".join(f"extra{i}\n" for i in range(5)))
    with pytest.raises(ValueError) as error:
        checkpoints.convert_checkpoint(prefix, str(tmp_path / "out"))
    assert str(error.value) == (
        f"the config of {prefix}: vocab_size 40 is smaller than the 45 tokens of {vocab_file}; "
        f"the ids of the last 5 tokens have no embedding (use the config that belongs to this "
        f"vocabulary)")
    assert not os.path.exists(tmp_path / "out")


def test_the_tool_names_a_missing_config_file_with_its_flag_and_all_problems_at_once(tmp_path):
    output_dir = tmp_path / "taken"
    output_dir.write_text("not a directory")
    run = run_tool("convert_checkpoint.py", f"--checkpoint={tmp_path}",
                   f"--output_dir={output_dir}", f"--bert_config_file={tmp_path / 'no.json'}")
    assert error_output(run) == (
        f"convert_checkpoint: error: --output_dir {output_dir} is a file, not a directory; "
        f"--bert_config_file {tmp_path / 'no.json'} does not exist")


# --- errors ---------------------------------------------------------------------------------------

def test_missing_variables_and_wrong_shapes_are_listed_together(encoder, tmp_path):
    arrays = google_arrays(encoder)
    del arrays["bert/encoder/layer_1/attention/self/query/kernel"]
    del arrays["bert/embeddings/LayerNorm/gamma"]
    prefix = write_google_checkpoint(str(tmp_path / "g"), arrays)
    target = BertEncoder(BertConfig.from_dict(dict(SMALL.to_dict(), intermediate_size=32)))
    before = [v.numpy() for v in target.weights]
    with pytest.raises(CheckpointMismatchError) as error:
        checkpoints.restore_weights(target, prefix)
    e = error.value
    assert e.missing == ["bert/embeddings/LayerNorm/gamma",
                         "bert/encoder/layer_1/attention/self/query/kernel"]
    assert ("bert/encoder/layer_0/intermediate/dense/kernel", (16, 32), (16, 24)) in e.mismatched
    assert len(e.mismatched) == 6  # intermediate kernel, bias and output kernel in 2 layers
    message = str(e)
    assert "2 missing, 6 with the wrong shape" in message
    assert "bert/encoder/layer_0/output/dense/kernel: expected (32, 16), found (24, 16)" in message
    assert "... and 1 more" in message  # the sixth, in the attributes only
    for v, old in zip(target.weights, before):  # nothing was assigned
        np.testing.assert_array_equal(v.numpy(), old)


def test_wrong_config_file_fails_the_conversion_with_the_listing(encoder, tmp_path):
    directory = write_hf_directory(str(tmp_path / "hf"), google_arrays(encoder))
    config_file = str(tmp_path / "big.json")
    BertConfig.from_dict(dict(SMALL.to_dict(), hidden_size=32)).to_json_file(config_file)
    with pytest.raises(CheckpointMismatchError, match=r"37 with the wrong shape") as error:
        checkpoints.convert_checkpoint(directory, str(tmp_path / "out"), config_file)
    assert ("bert/pooler/dense/kernel", (32, 32), (16, 16)) in [
        (name, tuple(expected), tuple(found)) for name, expected, found in error.value.mismatched]
    assert not os.path.exists(tmp_path / "out" / "checkpoint")


@pytest.mark.parametrize("source_format", ["google", "huggingface", "bert_tf"])
def test_a_config_of_fewer_layers_fails_the_conversion(encoder, tmp_path, source_format):
    """Read with a one-layer config, the two-layer checkpoint's second layer would be dropped
    from the converted model (loading into a shallower model on purpose stays possible)."""
    arrays = google_arrays(encoder)
    source = {
        "google": lambda: write_google_checkpoint(str(tmp_path / "google"), arrays),
        "huggingface": lambda: os.path.join(write_hf_directory(str(tmp_path / "hf"), arrays),
                                            "model.safetensors"),
        "bert_tf": lambda: checkpoints.save_checkpoint(str(tmp_path / "bert_tf"), encoder),
    }[source_format]()
    config_file = str(tmp_path / "one_layer.json")
    BertConfig.from_dict(dict(SMALL.to_dict(), num_hidden_layers=1)).to_json_file(config_file)
    with pytest.raises(ValueError) as error:
        checkpoints.convert_checkpoint(source, str(tmp_path / "out"), config_file)
    assert str(error.value) == (
        f"{source} has 2 transformer layers, but {config_file} has num_hidden_layers 1: the "
        f"conversion would leave out the last 1; use the config the checkpoint was trained with")
    assert not os.path.exists(tmp_path / "out")


def test_pytorch_pickles_are_refused_without_unpickling(tmp_path):
    marker = tmp_path / "unpickled"

    class Trap:  # unpickling this would create the marker file
        def __reduce__(self):
            return (open, (str(marker), "w"))

    with open(tmp_path / "pytorch_model.bin", "wb") as f:
        pickle.dump(Trap(), f)
    with open(tmp_path / "config.json", "w") as f:
        json.dump(SMALL.to_dict(), f)
    with pytest.raises(UnsupportedCheckpointError, match="PyTorch pickle.*never unpickles"):
        checkpoints.read_weights(str(tmp_path))  # a directory with only the pickle
    with pytest.raises(UnsupportedCheckpointError, match="never unpickles"):
        checkpoints.load_model(str(tmp_path / "pytorch_model.bin"))
    assert not marker.exists()


def test_unknown_paths_and_contents_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="No checkpoint at"):
        checkpoints.detect_format(str(tmp_path / "nothing" / "bert_model.ckpt"))
    with pytest.raises(FileNotFoundError, match="No checkpoint in directory"):
        checkpoints.detect_format(str(tmp_path))
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(UnsupportedCheckpointError, match="not a checkpoint bert_tf reads"):
        checkpoints.detect_format(str(tmp_path / "notes.txt"))
    other = tf.train.Checkpoint(model=tf.Module())
    other.model.v = tf.Variable(1.0)
    prefix = other.write(str(tmp_path / "other" / "x"))
    with pytest.raises(UnsupportedCheckpointError, match="neither Google's BERT names"):
        checkpoints.detect_format(prefix)


def test_missing_config_names_the_flag(encoder, tmp_path):
    prefix = write_google_checkpoint(str(tmp_path), google_arrays(encoder))
    os.remove(tmp_path / "bert_config.json")
    with pytest.raises(FileNotFoundError, match="--bert_config_file"):
        checkpoints.read_weights(prefix)
    config_file = str(tmp_path / "elsewhere.json")
    SMALL.to_json_file(config_file)
    assert checkpoints.read_weights(prefix, bert_config_file=config_file).config == SMALL


def test_non_bert_hugging_face_configs_are_refused(tmp_path):
    write_safetensors(str(tmp_path / "model.safetensors"), {"x": np.zeros(2, np.float32)})
    with open(tmp_path / "config.json", "w") as f:
        json.dump(dict(SMALL.to_dict(), position_embedding_type="relative_key"), f)
    with pytest.raises(UnsupportedCheckpointError, match="relative_key"):
        checkpoints.read_weights(str(tmp_path))


# --- the API a pre-training model uses for the heads ----------------------------------------------

def test_assign_weights_with_a_transform_loads_heads_into_keras_layers(encoder, tmp_path):
    heads = random_heads()
    prefix = write_google_checkpoint(str(tmp_path), dict(google_arrays(encoder), **heads))
    weights = checkpoints.read_weights(prefix)
    transform = keras.layers.Dense(16)
    transform.build((None, 16))
    next_sentence = keras.layers.Dense(2)
    next_sentence.build((None, 16))
    output_bias = keras.Variable(np.zeros(40, np.float32))
    names = checkpoints.assign_weights([
        (transform.kernel, "cls/predictions/transform/dense/kernel"),
        (transform.bias, "cls/predictions/transform/dense/bias"),
        (output_bias, "cls/predictions/output_bias"),
        (next_sentence.kernel, "cls/seq_relationship/output_weights", np.transpose),
        (next_sentence.bias, "cls/seq_relationship/output_bias"),
    ], weights.arrays)
    assert len(names) == 5
    np.testing.assert_array_equal(next_sentence.kernel.numpy(),
                                  heads["cls/seq_relationship/output_weights"].T)
    np.testing.assert_array_equal(output_bias.numpy(), heads["cls/predictions/output_bias"])
    with pytest.raises(CheckpointMismatchError, match=r"cls/seq_relationship/output_weights: "
                                                      r"expected \(16, 2\), found \(2, 16\)"):
        checkpoints.assign_weights([(next_sentence.kernel,
                                     "cls/seq_relationship/output_weights")], weights.arrays)
