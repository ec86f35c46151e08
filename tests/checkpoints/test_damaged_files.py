"""Damaged checkpoints and config files give one line naming the file and what is wrong; saves
interrupted by a kill or a full disk leave nothing behind at the next start."""

import json
import os
import struct

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import (DamagedCheckpointError, checkpoint_manager, load_model,
                                 read_config, read_weights, remove_interrupted_saves,
                                 training_checkpoint)
from tests.checkpoints.test_checkpoints import (SMALL, assert_same_weights, google_arrays,
                                                random_encoder, write_google_checkpoint,
                                                write_hf_directory)
from tests.tools.tool_runs import error_output, run_tool


def one_line(error):
    message = str(error.value)
    assert "\n" not in message, message
    return message


@pytest.fixture(scope="module")
def hf_file(tmp_path_factory):
    directory = write_hf_directory(str(tmp_path_factory.mktemp("hf")),
                                   google_arrays(random_encoder()))
    with open(os.path.join(directory, "model.safetensors"), "rb") as f:
        return f.read()


def lying_header(data):
    """The file with its first tensor's header claiming 100x the bytes the file holds."""
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    name = next(k for k in header if k != "__metadata__")
    start, end = header[name]["data_offsets"]
    header[name]["data_offsets"] = [start, start + 100 * (end - start)]
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    return struct.pack("<Q", len(encoded)) + encoded + data[8 + size:]


@pytest.mark.parametrize("damage,detail", [
    (lambda data: b"<html>404 Not Found</html>" * 4, "header too large"),
    (lambda data: data[:len(data) // 2], "incomplete metadata"),
    (lambda data: data[:6], "header too small"),
    (lying_header, ""),
])
def test_a_damaged_safetensors_file_is_named(hf_file, tmp_path, damage, detail):
    directory = write_hf_directory(str(tmp_path), {})
    path = os.path.join(directory, "model.safetensors")
    with open(path, "wb") as f:
        f.write(damage(hf_file))
    with pytest.raises(DamagedCheckpointError) as error:
        read_weights(directory)
    message = one_line(error)
    assert message.startswith(f"{path} is not a valid safetensors file (")
    assert detail in message and "truncated" in message


@pytest.mark.parametrize("index", [[1, 2], {"weight_map": {"bert.pooler.dense.bias": 5}},
                                   {"weight_map": {"bert.pooler.dense.bias": None}}])
def test_a_sharded_index_without_shard_file_names_is_named(tmp_path, index):
    directory = write_hf_directory(str(tmp_path), {})
    os.remove(os.path.join(directory, "model.safetensors"))
    path = os.path.join(directory, "model.safetensors.index.json")
    with open(path, "w") as f:
        json.dump(index, f)
    with pytest.raises(DamagedCheckpointError) as error:
        read_weights(directory)
    assert one_line(error) == (f"{path} has no `weight_map` object naming the shard of each "
                               f"tensor")


def test_a_damaged_tf_checkpoint_index_or_data_file_is_named(tmp_path):
    prefix = write_google_checkpoint(str(tmp_path), google_arrays(random_encoder()))
    with open(prefix + ".index", "rb") as f:
        index = f.read()
    with open(prefix + ".index", "wb") as f:
        f.write(index[:len(index) // 2])
    with pytest.raises(DamagedCheckpointError) as error:
        read_weights(prefix)
    assert one_line(error).startswith(f"{prefix}.index is not a readable TensorFlow checkpoint "
                                      f"index (not an sstable")
    with open(prefix + ".index", "wb") as f:
        f.write(index)
    data_file = prefix + ".data-00000-of-00001"
    with open(data_file, "r+b") as f:
        f.truncate(100)
    with pytest.raises(DamagedCheckpointError) as error:
        load_model(prefix)
    message = one_line(error)
    assert message.startswith(f"{data_file}: cannot read tensor bert/")
    assert "truncated or corrupt" in message


@pytest.mark.parametrize("contents,problem", [
    ("{\"vocab_size\": 40,", "is not valid JSON"),
    ("[40, 16]", "expected a JSON object of hyper-parameters, got list"),
    (json.dumps(dict(SMALL.to_dict(), hidden_size="16")),
     "hidden_size must be a positive integer, got '16'"),
    (json.dumps(dict(SMALL.to_dict(), hidden_dropout_prob="0.1")),
     "hidden_dropout_prob must be a number in [0, 1), got '0.1'"),
    (json.dumps(dict(SMALL.to_dict(), num_attention_heads=3)),
     "hidden_size 16 is not divisible by num_attention_heads 3"),
    (json.dumps(dict(SMALL.to_dict(), num_hidden_layers=10 ** 9)),
     "num_hidden_layers 1000000000 is larger than this package's limit 256"),
    (json.dumps(dict(SMALL.to_dict(), num_hidden_layers=1e9)),
     "num_hidden_layers must be a positive integer, got 1000000000.0"),
])
@pytest.mark.parametrize("name", ["config.json", "bert_config.json"])
def test_a_bad_config_file_is_named_before_anything_is_built(tmp_path, name, contents, problem):
    prefix = write_google_checkpoint(str(tmp_path), google_arrays(random_encoder()))
    os.remove(tmp_path / "bert_config.json")
    (tmp_path / name).write_text(contents)
    with pytest.raises(ValueError) as error:
        load_model(prefix)
    message = one_line(error)
    assert message.startswith(str(tmp_path / name)) and problem in message, message
    with pytest.raises(ValueError, match="is not valid JSON|Invalid BertConfig"):
        read_config(prefix, bert_config_file=str(tmp_path / name))


def test_convert_checkpoint_prints_one_line_naming_the_damaged_file(hf_file, tmp_path):
    directory = write_hf_directory(str(tmp_path / "hf"), {})
    path = os.path.join(directory, "model.safetensors")
    with open(path, "wb") as f:
        f.write(hf_file[:1000])
    result = run_tool("convert_checkpoint.py", f"--checkpoint={directory}",
                      f"--output_dir={tmp_path / 'out'}")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("convert_checkpoint: ")
    assert f"{path} is not a valid safetensors file" in last_line


def interrupted_save(directory, step):
    """What a save killed half-way leaves: `ckpt-N_temp/` with part of the files."""
    temp = os.path.join(directory, f"ckpt-{step}_temp")
    os.makedirs(temp)
    with open(os.path.join(temp, "part-00000-of-00001.data-00000-of-00001"), "wb") as f:
        f.write(np.zeros(1000, np.float32).tobytes())
    return temp


def test_interrupted_saves_are_removed_at_the_next_save(tmp_path):
    temps = [interrupted_save(str(tmp_path), step) for step in (3, 40)]
    mine = tmp_path / "notes_temp"      # not a checkpoint name: left alone
    mine.mkdir()
    prefix = checkpoint_manager(training_checkpoint(random_encoder()), str(tmp_path),
                                max_to_keep=1).save()
    assert not any(os.path.exists(temp) for temp in temps)
    assert mine.exists() and os.path.exists(prefix + ".index")
    assert remove_interrupted_saves(str(tmp_path)) == []
    assert remove_interrupted_saves(str(tmp_path / "missing")) == []


def test_a_conversion_goes_into_the_directory_a_killed_conversion_left(tmp_path):
    encoder = random_encoder()
    prefix = write_google_checkpoint(str(tmp_path / "google"), google_arrays(encoder))
    output_dir = tmp_path / "killed"
    temp = interrupted_save(str(output_dir), 1)
    run = run_tool("convert_checkpoint.py", f"--checkpoint={prefix}",
                   f"--output_dir={output_dir}")
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"Removed 1 checkpoint save(s) interrupted earlier: {temp}" in run.stderr
    assert sorted(os.listdir(output_dir)) == [
        "bert_config.json", "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
        "vocab.txt"]
    assert_same_weights(load_model(str(output_dir)), encoder)

    # Beside anything else it is still refused, and nothing is removed.
    output_dir = tmp_path / "mine"
    temp = interrupted_save(str(output_dir), 1)
    (output_dir / "notes.txt").write_text("my notes\n")
    run = run_tool("convert_checkpoint.py", f"--checkpoint={prefix}",
                   f"--output_dir={output_dir}")
    assert error_output(run) == (
        f"convert_checkpoint: error: {output_dir} is not empty (notes.txt): write the "
        f"checkpoint into a new or empty directory")
    assert sorted(os.listdir(output_dir)) == ["ckpt-1_temp", "notes.txt"]
    assert os.listdir(temp) == ["part-00000-of-00001.data-00000-of-00001"]


def test_a_fine_tuning_job_clears_interrupted_saves_when_it_starts(tmp_path):
    from bert_tf import BertClassifier
    from bert_tf.training.fine_tuning import FineTuner

    temp = interrupted_save(str(tmp_path), 7)
    FineTuner(BertClassifier(random_encoder(), num_classes=2), str(tmp_path),
              loss=None, num_train_steps=1, learning_rate=1e-3)
    assert not os.path.exists(temp)
    assert tf.train.latest_checkpoint(str(tmp_path)) is None

