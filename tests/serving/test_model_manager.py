"""ModelManager's start-up: the base path is listed once, whether a version is there or not."""

import pytest

from bert_tf.serving import model_manager
from bert_tf.serving.model_manager import ModelManager


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
