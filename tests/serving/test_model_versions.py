"""Versions under --model_base_path: the newest is served, new ones are picked up without a
restart (requests during the swap all succeed), broken ones are reported and skipped."""

import os
import threading
import time

import grpc
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (get_model_status_pb2, model_service_pb2_grpc, predict_pb2,
                                     prediction_service_pb2_grpc)

from bert_tf.serving import ModelServer, ServerOptions
from tests.serving.toy_models import write_toy_model

State = get_model_status_pb2.ModelVersionStatus.State
TIMEOUT = 30


@pytest.fixture(scope="module")
def staged_versions(tmp_path_factory):
    """Versions 1 and 2 written outside any served directory, ready to be moved in."""
    staging = str(tmp_path_factory.mktemp("staging"))
    return {version: write_toy_model(staging, version) for version in (1, 2)}


@pytest.fixture
def empty_base_path(tmp_path):
    path = tmp_path / "toy"
    path.mkdir()
    return str(path)


@pytest.fixture
def start_server():
    servers = []

    def start(base_path):
        server = ModelServer(ServerOptions(model_base_path=base_path, port=0, rest_api_port=None,
                                           max_batch_size=4, batch_timeout_micros=1000,
                                           file_system_poll_wait_seconds=0.1))
        server.start()
        servers.append(server)
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        return (prediction_service_pb2_grpc.PredictionServiceStub(channel),
                model_service_pb2_grpc.ModelServiceStub(channel))

    yield start
    for server in servers:
        server.stop()


def publish(staged_path, base_path, version):
    """Copies a staged version in under a temporary name, then renames it into place: the
    atomic publication TF Serving expects (a half-copied version would fail to load)."""
    temporary = os.path.join(base_path, f".incoming-{version}")
    tf.io.gfile.makedirs(temporary)
    for root, _, files in tf.io.gfile.walk(staged_path):
        relative = os.path.relpath(root, staged_path)
        tf.io.gfile.makedirs(os.path.join(temporary, relative))
        for name in files:
            tf.io.gfile.copy(os.path.join(root, name), os.path.join(temporary, relative, name))
    os.rename(temporary, os.path.join(base_path, str(version)))


def served_version(prediction_stub, version=None):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "toy"
    if version is not None:
        request.model_spec.version.value = version
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(["abc"]))
    response = prediction_stub.Predict(request, timeout=TIMEOUT)
    return int(tf.make_ndarray(response.outputs["version"])[0]), response.model_spec.version.value


def version_states(model_stub):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "toy"
    response = model_stub.GetModelStatus(request, timeout=TIMEOUT)
    return [(s.version, s.state, s.status.error_message) for s in response.model_version_status]


def wait_for(condition, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"condition not reached within {seconds}s")


def test_new_version_is_picked_up_without_restart_and_without_failed_requests(
        staged_versions, empty_base_path, start_server):
    publish(staged_versions[1], empty_base_path, 1)
    prediction_stub, model_stub = start_server(empty_base_path)
    assert served_version(prediction_stub) == (1, 1)

    # Clients keep calling while version 2 is loaded and swapped in: none may fail.
    failures, answers, stop = [], [], threading.Event()

    def client():
        for _ in range(2000):  # bounded; stops as soon as the swap has been observed
            if stop.is_set():
                return
            try:
                answers.append(served_version(prediction_stub))
            except grpc.RpcError as error:
                failures.append(error)

    clients = [threading.Thread(target=client) for _ in range(3)]
    for thread in clients:
        thread.start()
    publish(staged_versions[2], empty_base_path, 2)
    try:
        wait_for(lambda: answers and answers[-1] == (2, 2))
    finally:
        stop.set()
        for thread in clients:
            thread.join(timeout=TIMEOUT)

    assert failures == []
    assert set(answers) == {(1, 1), (2, 2)}
    wait_for(lambda: version_states(model_stub)[1][1] == State.END)
    assert version_states(model_stub) == [(2, State.AVAILABLE, ""), (1, State.END, "")]
    with pytest.raises(grpc.RpcError) as raised:
        served_version(prediction_stub, version=1)
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    assert "Servable not found for request: Specific(toy, 1). This server serves version 2" in \
        raised.value.details()


def test_a_broken_version_is_reported_and_the_previous_one_keeps_serving(
        staged_versions, empty_base_path, start_server):
    publish(staged_versions[1], empty_base_path, 1)
    prediction_stub, model_stub = start_server(empty_base_path)
    broken = os.path.join(empty_base_path, ".incoming-3")
    os.makedirs(broken)
    with open(os.path.join(broken, "saved_model.pb"), "wb") as f:
        f.write(b"this is not a SavedModel")
    os.rename(broken, os.path.join(empty_base_path, "3"))

    wait_for(lambda: version_states(model_stub)[0][:2] == (3, State.END))
    [(version, state, message), loaded] = version_states(model_stub)
    assert message.startswith("Failed to load version 3: ")
    assert loaded == (1, State.AVAILABLE, "")
    assert served_version(prediction_stub) == (1, 1)


def test_a_server_started_before_any_version_serves_the_first_one_published(
        staged_versions, empty_base_path, start_server, caplog):
    prediction_stub, model_stub = start_server(empty_base_path)
    # It used to say nothing: requests then got "Could not find any versions of model toy".
    assert [(record.levelname, record.getMessage()) for record in caplog.records
            if record.module == "model_manager"] == [(
        "WARNING", f"--model_base_path {empty_base_path} holds no version: expected "
                   f"{empty_base_path}/<version>/saved_model.pb, <version> a positive integer; "
                   f"model 'toy' is served once one appears (looking every 0.1 s)")]
    with pytest.raises(grpc.RpcError) as raised:
        served_version(prediction_stub)
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    assert "This server serves no version yet." in raised.value.details()

    publish(staged_versions[2], empty_base_path, 2)
    wait_for(lambda: version_states_or_none(model_stub) == [(2, State.AVAILABLE, "")])
    assert served_version(prediction_stub) == (2, 2)


def version_states_or_none(model_stub):
    try:
        return version_states(model_stub)
    except grpc.RpcError:
        return None


def test_a_base_path_where_no_version_can_come_is_refused(toy_base_path, empty_base_path):
    version_directory = os.path.join(toy_base_path, "1")
    with pytest.raises(FileNotFoundError) as raised:
        ModelServer(ServerOptions(model_base_path=version_directory, port=0,
                                  rest_api_port=None)).start()
    assert str(raised.value) == (
        f"--model_base_path {version_directory} is a version directory (it holds "
        f"saved_model.pb): pass its parent, {toy_base_path}")
    # Without polling, an empty base path would stay empty.
    with pytest.raises(FileNotFoundError) as raised:
        ModelServer(ServerOptions(model_base_path=empty_base_path, port=0, rest_api_port=None,
                                  file_system_poll_wait_seconds=0)).start()
    assert str(raised.value) == (
        f"--model_base_path {empty_base_path} holds no version: expected "
        f"{empty_base_path}/<version>/saved_model.pb, <version> a positive integer "
        f"(--file_system_poll_wait_seconds=0 looks only once)")
