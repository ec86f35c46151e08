"""ModelServer's options and start-up failures, in process."""

import os

import grpc
import pytest
from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc

from bert_tf.serving import ModelServer, ServerOptions


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


def test_a_port_in_use_fails_start_and_releases_everything(server, toy_base_path):
    second = ModelServer(ServerOptions(model_base_path=toy_base_path, port=server.port,
                                       rest_api_port=None, file_system_poll_wait_seconds=0))
    with pytest.raises(RuntimeError, match=f"127.0.0.1:{server.port}"):
        second.start()
    # start() stopped what it had started: the version it loaded is unloaded.
    [status] = second.manager.status("toy").model_version_status
    assert status.state == get_model_status_pb2.ModelVersionStatus.END
