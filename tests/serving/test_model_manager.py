"""ModelManager's start-up: the base path is listed once, whether a version is there or not."""

import shutil

import pytest
from tensorflow_serving.apis import get_model_status_pb2

from bert_tf.serving import model_manager
from bert_tf.serving.model_manager import ModelManager

State = get_model_status_pb2.ModelVersionStatus.State


@pytest.fixture
def listings(monkeypatch):
    """The base paths `saved_model_versions` was asked to list, in order."""
    listed = []
    list_versions = model_manager.saved_model_versions

    def counting(base_path):
        listed.append(base_path)
        return list_versions(base_path)

    monkeypatch.setattr(model_manager, "saved_model_versions", counting)
    return listed


def manager(base_path, poll_wait):
    return ModelManager("toy", base_path, max_batch_size=4, batch_timeout_micros=1000,
                        num_batch_threads=1, file_system_poll_wait_seconds=poll_wait)


def test_start_lists_the_versions_once_and_serves_the_newest(toy_base_path, listings):
    served = manager(toy_base_path, poll_wait=0)
    served.start()
    try:
        with served.servable("toy") as servable:
            assert servable.version == 1
    finally:
        served.stop()
    assert listings == [toy_base_path]


def test_start_without_a_version_lists_once_warns_and_waits(tmp_path, listings, caplog):
    empty = str(tmp_path)
    waiting = manager(empty, poll_wait=3600)
    waiting.start()
    waiting.stop()
    assert listings == [empty]
    assert [record.levelname for record in caplog.records
            if record.module == "model_manager"] == ["WARNING"]


def test_a_version_that_failed_half_copied_is_loaded_once_its_copy_is_complete(
        toy_base_path, tmp_path):
    # A `cp -r` seen by a poll before the variables arrived failed, and was never tried again.
    base = tmp_path / "toy"
    shutil.copytree(f"{toy_base_path}/1", base / "1")
    (base / "2").mkdir()
    shutil.copy(f"{toy_base_path}/1/saved_model.pb", base / "2")
    served = manager(str(base), poll_wait=0)
    served.start()
    try:
        [failed, serving] = served.status("toy").model_version_status
        assert (failed.version, failed.state, serving.version) == (2, State.END, 1)
        assert "Failed to load version 2" in failed.status.error_message
        served.poll_once()  # nothing changed: not tried again
        assert served.status("toy").model_version_status[0].state == State.END
        for name in ["variables", "assets"]:
            shutil.copytree(f"{toy_base_path}/1/{name}", base / "2" / name)
        served.poll_once()
        with served.servable("toy") as servable:
            assert servable.version == 2
        assert [(s.version, s.state) for s in served.status("toy").model_version_status] == [
            (2, State.AVAILABLE), (1, State.END)]
    finally:
        served.stop()


def test_directories_named_like_numbers_that_are_no_versions_are_ignored_with_a_warning(
        toy_base_path, tmp_path, caplog):
    # 99999999999999999999 (beyond int64) replaced version 1, then broke every status call
    # ("Value out of range"); "010" was ignored without a word.
    base = tmp_path / "toy"
    shutil.copytree(f"{toy_base_path}/1", base / "1")
    for name in ["99999999999999999999", "010"]:
        shutil.copytree(f"{toy_base_path}/1", base / name)
    served = manager(str(base), poll_wait=0)
    served.start()
    try:
        served.poll_once()
        with served.servable("toy") as servable:
            assert servable.version == 1
        assert [s.version for s in served.status("toy").model_version_status] == [1]
    finally:
        served.stop()
    warnings = sorted(record.getMessage() for record in caplog.records
                      if record.levelname == "WARNING")
    assert warnings == [f"Ignoring {base / name}: not a version number (versions are positive "
                        f"integers below 2**63, written without leading zeros)"
                        for name in ["010", "99999999999999999999"]]
