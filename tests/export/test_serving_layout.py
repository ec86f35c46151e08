"""TF Serving's `<base>/<version>/` layout: numbering, atomic appearance, latest version, and
modes a server running as another user can read."""

import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest

from bert_tf import BertEncoder
from bert_tf.export import (export_encoder, export_preprocessor, latest_version_dir,
                            write_version, write_versions)
from bert_tf.export.serving_layout import _staging_name
from bert_tf_hub_names import HUB_DIR_ENV, resolve_model_name, version_numbers
from tests.export.tiny_models import tiny_config, write_vocab
from tests.tools.tool_runs import tool_env


def fake_savedmodel(path):
    with open(os.path.join(path, "saved_model.pb"), "wb") as f:
        f.write(b"pb")


def test_versions_count_up_from_one(tmp_path):
    base = str(tmp_path / "model")
    assert latest_version_dir(base) is None
    assert write_version(base, fake_savedmodel) == os.path.join(base, "1")
    assert write_version(base, fake_savedmodel) == os.path.join(base, "2")
    assert write_version(base, fake_savedmodel, version=10) == os.path.join(base, "10")
    assert write_version(base, fake_savedmodel) == os.path.join(base, "11")
    assert sorted(os.listdir(base)) == ["1", "10", "11", "2"]   # no staging directory left
    assert latest_version_dir(base) == os.path.join(base, "11")


def test_an_existing_version_is_never_overwritten(tmp_path):
    base = str(tmp_path / "model")
    write_version(base, fake_savedmodel, version=3)
    with pytest.raises(FileExistsError, match="version 3"):
        write_version(base, fake_savedmodel, version=3)
    for bad in (0, -1, "2"):
        with pytest.raises(ValueError, match="positive integer"):
            write_version(base, fake_savedmodel, version=bad)


def test_a_failed_export_leaves_nothing_a_server_would_load(tmp_path):
    base = str(tmp_path / "model")

    def fail(path):
        fake_savedmodel(path)
        raise RuntimeError("tracing failed")

    with pytest.raises(RuntimeError, match="tracing failed"):
        write_version(base, fail)
    assert not os.path.exists(base)   # created by the failed call, so removed again
    write_version(base, fake_savedmodel)
    with pytest.raises(RuntimeError, match="tracing failed"):
        write_version(base, fail)
    assert os.listdir(base) == ["1"]


def test_models_written_together_appear_together_or_not_at_all(tmp_path):
    encoder, preprocess = str(tmp_path / "bert"), str(tmp_path / "bert_preprocess")
    write_version(encoder, fake_savedmodel, version=4)
    # One version number for both: one more than the highest of either.
    assert write_versions({encoder: fake_savedmodel, preprocess: fake_savedmodel}) == {
        encoder: os.path.join(encoder, "5"), preprocess: os.path.join(preprocess, "5")}

    def fail(path):
        fake_savedmodel(path)
        raise RuntimeError("tracing failed")

    fresh = str(tmp_path / "other")
    for writers in ({encoder: fake_savedmodel, preprocess: fail},
                    {fresh: fake_savedmodel, preprocess: fail},
                    {encoder: fail, fresh: fake_savedmodel}):
        with pytest.raises(RuntimeError, match="tracing failed"):
            write_versions(writers)
        assert sorted(os.listdir(encoder)) == ["4", "5"]
        assert os.listdir(preprocess) == ["5"]
        assert not os.path.exists(fresh)
    with pytest.raises(FileExistsError, match="version 5"):
        write_versions({fresh: fake_savedmodel, preprocess: fake_savedmodel}, version=5)
    assert not os.path.exists(fresh)


# Writes version 1 under argv[1] as a process of host argv[2], and blocks inside the export.
_BLOCKED_WRITER = """
import os, socket, sys, time
socket.gethostname = lambda: sys.argv[2]
from bert_tf.export import write_version

def write_and_block(path):
    with open(os.path.join(path, "saved_model.pb"), "wb") as f:
        f.write(b"pb")
    time.sleep(600)

write_version(sys.argv[1], write_and_block, version=1)
"""


def killed_writer_staging(base, host):
    """The staging directory a writer on `host` leaves when SIGKILLed inside its export."""
    writer = subprocess.Popen([sys.executable, "-c", _BLOCKED_WRITER, base, host],
                              stderr=subprocess.PIPE, text=True, env=tool_env())
    try:
        deadline = time.monotonic() + 120
        while not [name for name in (os.listdir(base) if os.path.isdir(base) else [])
                   if os.path.exists(os.path.join(base, name, "saved_model.pb"))]:
            assert writer.poll() is None, writer.stderr.read()
            assert time.monotonic() < deadline, "the writer staged nothing within 120 s"
            time.sleep(0.05)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=60)
    (staging,) = os.listdir(base)
    return os.path.join(base, staging)


def test_a_killed_writers_staging_is_removed_by_the_next_write_on_its_host(
        tmp_path, monkeypatch, caplog):
    # A host name with '-', '.' and digits; another host's name is a prefix of it.
    host, other_host = "gpu-12.rack-3", "gpu-12.rack"
    base = str(tmp_path / "model")
    dead = killed_writer_staging(base, host)
    assert os.path.basename(dead).startswith(f".1-incomplete-{host}-")
    # The same dead writer on another host (a shared file system): it may be alive there.
    elsewhere = os.path.join(base, os.path.basename(dead).replace(host, other_host))
    shutil.copytree(dead, elsewhere)
    monkeypatch.setattr(socket, "gethostname", lambda: host)
    live = os.path.join(base, _staging_name(1))          # this process's: it is writing
    old_format = os.path.join(base, ".1-incomplete-5f2a0b1c2d3e")  # whose writer is unknown
    for kept in (live, old_format):
        os.mkdir(kept)
    with caplog.at_level(logging.WARNING, logger="bert_tf.export"):
        assert write_version(base, fake_savedmodel) == os.path.join(base, "1")
    assert sorted(os.listdir(base)) == sorted(
        ["1", os.path.basename(elsewhere), os.path.basename(live), os.path.basename(old_format)])
    assert caplog.messages == [
        f"Removed 1 model version(s) whose writing was interrupted earlier: {dead}"]


def test_latest_version_ignores_incomplete_and_other_directories(tmp_path):
    base = tmp_path / "model"
    for name in ("2", "7", "30", ".8-incomplete-x", "notes"):
        (base / name).mkdir(parents=True)
    for name in ("2", "7", ".8-incomplete-x"):
        fake_savedmodel(str(base / name))
    assert latest_version_dir(str(base)) == os.path.join(str(base), "7")


def test_hub_names_resolve_to_the_latest_version_dir(tmp_path, monkeypatch):
    # One listing serves both: TF Serving's layout here, installed hub models by name there.
    base = tmp_path / "bert_tf_tiny"
    for name in ("1", "3", "9", "0", "\u00b2", ".12-incomplete-x", "notes"):
        (base / name).mkdir(parents=True)
        if name != "9":
            fake_savedmodel(str(base / name))
    monkeypatch.setenv(HUB_DIR_ENV, str(tmp_path))
    assert latest_version_dir(str(base)) == os.path.join(str(base), "3")
    assert resolve_model_name("bert_tf_tiny") == os.path.join(str(base), "3")
    # "²" is a digit to str.isdigit but no version; gfile lists bucket directories with "/".
    assert version_numbers(["1", "12/", "\u00b2", "0", ".3-incomplete-x"]) == [1, 12]
    # TF Serving's versions are int64; "010" would name version 10, whose directory is "10".
    assert version_numbers([str(2**63 - 1), str(2**63), "010", "00"]) == [2**63 - 1]


@pytest.fixture
def private_umask():
    """The umask of a locked-down account or service: nothing for group and others."""
    previous = os.umask(0o077)
    yield
    os.umask(previous)


def modes(top):
    """{path relative to `top`: permission bits} of `top` and everything under it."""
    found = {".": stat.S_IMODE(os.stat(top).st_mode)}
    for directory, subdirectories, files in os.walk(top):
        for name in subdirectories + files:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, top)] = stat.S_IMODE(os.stat(path).st_mode)
    return found


def assert_world_readable(top):
    found = modes(top)
    assert "saved_model.pb" in found and "variables" in found, sorted(found)
    for path, mode in found.items():
        wanted = 0o755 if os.path.isdir(os.path.join(top, path)) else 0o644
        assert mode == wanted, f"{path}: {oct(mode)}, wanted {oct(wanted)}"


def test_versions_are_world_readable_whatever_the_umask(tmp_path, private_umask):
    vocab_file = write_vocab(str(tmp_path))
    base = str(tmp_path / "models" / "bert")
    path = write_version(base, lambda directory: export_encoder(
        directory, BertEncoder(tiny_config(num_hidden_layers=1)), vocab_file, True))
    assert path == os.path.join(base, "1")
    assert modes(base)["."] == 0o755   # created by write_version: servers list versions in it
    # So is the directory made for it (a --hub_dir made for its first model), or the server's
    # user could not reach the models under it.
    assert modes(str(tmp_path / "models"))["."] == 0o755
    assert_world_readable(path)
    assert "assets/vocab.txt" in modes(path)


def test_a_savedmodel_exported_directly_is_world_readable_too(tmp_path, private_umask):
    vocab_file = write_vocab(str(tmp_path))
    export_dir = str(tmp_path / "bert_preprocess")
    export_preprocessor(export_dir, vocab_file, do_lower_case=True)
    assert_world_readable(export_dir)
