"""ModelServer's options and start-up failures, in process."""

import http.client
import json
import os
import threading
import time

import grpc
import pytest
import tensorflow as tf
from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc

from bert_tf.serving import (ModelServer, ServerOptions, ServingError, model_server,
                             rest_service)


def test_model_name_defaults_to_the_base_path_directory_name(toy_base_path):
    assert ServerOptions(model_base_path=toy_base_path + "/").model_name == \
        os.path.basename(toy_base_path)
    assert ServerOptions(model_base_path=toy_base_path, model_name="movies").model_name == \
        "movies"


def test_a_missing_base_path_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError) as raised:
        ModelServer(ServerOptions(model_base_path=str(tmp_path / "nope")))
    assert str(raised.value) == (f"--model_base_path {tmp_path / 'nope'} is not a directory "
                                 f"(expected <model_base_path>/<version>/saved_model.pb)")


def test_rest_off_serves_grpc_only(toy_base_path):
    server = ModelServer(ServerOptions(model_base_path=toy_base_path, port=0, rest_api_port=None,
                                       file_system_poll_wait_seconds=0))
    server.start()
    try:
        assert server.rest_api_port is None
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            request = get_model_status_pb2.GetModelStatusRequest()
            request.model_spec.name = "toy"
            response = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(
                request, timeout=30)
        assert [s.version for s in response.model_version_status] == [1]
    finally:
        server.stop()


@pytest.mark.parametrize("name", ["port", "rest_api_port"])
def test_a_port_in_use_is_refused_before_anything_loads(server, toy_base_path, name):
    taken = getattr(server, name)
    ports = {"port": 0, "rest_api_port": None, name: taken}
    second = ModelServer(ServerOptions(model_base_path=toy_base_path, **ports,
                                       file_system_poll_wait_seconds=0))
    # It was gRPC's "Failed to bind to address ..." (after a C++ error line of its own) or
    # "[Errno 98] Address already in use".
    with pytest.raises(OSError) as raised:
        second.start()
    assert str(raised.value) == (f"--{name} {taken}: 127.0.0.1:{taken} is already in use "
                                 f"(another process listens there); stop it or pick another "
                                 f"port")
    with pytest.raises(ServingError, match="Could not find any versions of model toy"):
        second.manager.status("toy")  # no version was ever loaded


def test_a_port_taken_after_the_check_fails_start_and_releases_everything(
        server, toy_base_path, monkeypatch):
    monkeypatch.setattr(model_server, "_refuse_unusable_addresses", lambda host, ports: None)
    second = ModelServer(ServerOptions(model_base_path=toy_base_path, port=server.port,
                                       rest_api_port=None, file_system_poll_wait_seconds=0))
    with pytest.raises(RuntimeError, match=f"127.0.0.1:{server.port}"):
        second.start()
    # start() stopped what it had started: the version it loaded is unloaded.
    [status] = second.manager.status("toy").model_version_status
    assert status.state == get_model_status_pb2.ModelVersionStatus.END


def test_a_host_not_of_this_machine_is_refused_before_anything_loads(toy_base_path):
    # It was gRPC's "Failed to bind ... set GRPC_VERBOSITY=debug", after loading the model and
    # a C++ log line of gRPC's own. (198.51.100.1 is an address for documentation, RFC 5737.)
    server = ModelServer(ServerOptions(model_base_path=toy_base_path, host="198.51.100.1",
                                       port=0, rest_api_port=0,
                                       file_system_poll_wait_seconds=0))
    with pytest.raises(OSError) as raised:
        server.start()
    assert str(raised.value) == (
        "--host 198.51.100.1: not an address of this machine (Cannot assign requested "
        "address); use 127.0.0.1, 0.0.0.0 or an address of one of its interfaces")
    with pytest.raises(ServingError, match="Could not find any versions of model toy"):
        server.manager.status("toy")


def test_one_port_for_both_apis_is_refused(toy_base_path):
    # The REST server failed with "[Errno 98] Address already in use" once gRPC had the port.
    with pytest.raises(ValueError) as raised:
        ServerOptions(model_base_path=toy_base_path, port=18590, rest_api_port=18590)
    assert str(raised.value) == ("--port and --rest_api_port are both 18590: gRPC and REST "
                                 "need a port each.")
    assert ServerOptions(model_base_path=toy_base_path, port=0, rest_api_port=0).port == 0


def test_a_host_that_does_not_resolve_is_named(toy_base_path):
    server = ModelServer(ServerOptions(model_base_path=toy_base_path, host="no-such-host.invalid",
                                       rest_api_port=None, file_system_poll_wait_seconds=0))
    with pytest.raises(OSError, match=r"^--host no-such-host\.invalid: \w"):
        server.start()


def test_thread_pool_sizes_that_cannot_take_effect_are_refused(toy_base_path):
    tf.constant(1.0) + 1  # this process's TensorFlow runs: its thread pools are fixed
    size = tf.config.threading.get_intra_op_parallelism_threads() + 3
    with pytest.raises(ValueError) as raised:
        ModelServer(ServerOptions(model_base_path=toy_base_path,
                                  tensorflow_intra_op_parallelism=size))
    assert str(raised.value) == (
        f"tensorflow_intra_op_parallelism={size} cannot take effect: TensorFlow already ran in "
        f"this process with {size - 3 or 'default'} threads; set it before the first "
        f"TensorFlow op.")
    with pytest.raises(ValueError, match="tensorflow_inter_op_parallelism must be >= 0"):
        ModelServer(ServerOptions(model_base_path=toy_base_path,
                                  tensorflow_inter_op_parallelism=-1))


def test_num_batch_threads_below_one_is_refused(toy_base_path):
    with pytest.raises(ValueError, match="num_batch_threads must be at least 1, got 0"):
        ServerOptions(model_base_path=toy_base_path, num_batch_threads=0)


def test_stopping_lets_the_requests_in_progress_finish(toy_base_path, monkeypatch):
    # SIGTERM (a rolling restart) cut REST requests in progress off ("Remote end closed
    # connection without response"); gRPC's finished.
    started = threading.Event()
    predict = rest_service._Handler._predict

    def slow_predict(handler, *args):
        started.set()
        time.sleep(1.0)
        return predict(handler, *args)

    monkeypatch.setattr(rest_service._Handler, "_predict", slow_predict)
    server = ModelServer(ServerOptions(model_base_path=toy_base_path, port=0, rest_api_port=0,
                                       file_system_poll_wait_seconds=0))
    server.start()
    answers = []

    def ask():
        connection = http.client.HTTPConnection("127.0.0.1", server.rest_api_port, timeout=30)
        connection.request("POST", "/v1/models/toy:predict",
                           body=json.dumps({"instances": ["abc"]}))
        response = connection.getresponse()
        answers.append((response.status, json.loads(response.read())))
        connection.close()

    client = threading.Thread(target=ask)
    client.start()
    try:
        assert started.wait(30)
    finally:
        server.stop(grace_seconds=10)
        client.join(30)
    [(status, body)] = answers
    assert status == 200 and body["predictions"][0]["length"] == 3, body
