"""TF Serving's `<base>/<version>/` layout: numbering, atomic appearance, latest version."""

import os

import pytest

from bert_tf.export import latest_version_dir, write_version


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
    assert os.listdir(base) == []


def test_latest_version_ignores_incomplete_and_other_directories(tmp_path):
    base = tmp_path / "model"
    for name in ("2", "7", "30", ".8-incomplete-x", "notes"):
        (base / name).mkdir(parents=True)
    for name in ("2", "7", ".8-incomplete-x"):
        fake_savedmodel(str(base / name))
    assert latest_version_dir(str(base)) == os.path.join(str(base), "7")
