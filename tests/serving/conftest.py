"""Fixtures: the toy model on disk, a server on free 127.0.0.1 ports, the official stubs."""

import grpc
import pytest
import tensorflow as tf
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from bert_tf.serving import ModelServer, ServerOptions
from tests.serving.serve_process import ServeProcess
from tests.serving.toy_models import write_toy_model

MAX_BATCH_SIZE = 8
MAX_REQUEST_BYTES = 64 * 1024


@pytest.fixture(scope="session")
def toy_base_path(tmp_path_factory):
    base_path = tmp_path_factory.mktemp("models") / "toy"
    write_toy_model(str(base_path), version=1)
    return str(base_path)


@pytest.fixture(scope="session")
def toy_savedmodel(toy_base_path):
    """The SavedModel loaded directly: the reference every served answer is checked against."""
    return tf.saved_model.load(f"{toy_base_path}/1")


@pytest.fixture(scope="session")
def server(toy_base_path):
    server = ModelServer(ServerOptions(
        model_base_path=toy_base_path, port=0, rest_api_port=0, max_batch_size=MAX_BATCH_SIZE,
        batch_timeout_micros=5000, max_request_bytes=MAX_REQUEST_BYTES,
        file_system_poll_wait_seconds=0))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def channel(server):
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield channel


@pytest.fixture(scope="session")
def prediction_stub(channel):
    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


@pytest.fixture(scope="session")
def model_stub(channel):
    return model_service_pb2_grpc.ModelServiceStub(channel)


@pytest.fixture
def serve_process():
    processes = []

    def start(*flags):
        process = ServeProcess(*flags)
        processes.append(process)
        return process

    yield start
    for process in processes:
        process.kill()
