"""A squad export served by tools/serve.py in its own process, as a user runs it: REST and gRPC
answer a question about a context as the SavedModel does in process, also in a request whose
contexts could make more sequences than a batch holds (the export's windows per context, the
server's --max_batch_size: the export runs them in slices), and a request of more questions than
--max_batch_size is refused in words naming it."""

import http.client
import json
import signal

import grpc
import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from bert_tf.export import export_task_model
from tests.export.task_examples import EXPORT_OPTIONS, SEQ_LENGTH, new_task_model
from tests.export.tiny_models import write_vocab
from tests.serving.serve_process import free_port

# A context costs MAX_WINDOWS sequences: a batch of MAX_BATCH_SIZE merges two questions.
MAX_WINDOWS = 2
MAX_BATCH_SIZE = 4
# The first context needs both windows (14 tokens, 10 beside the question, 4 apart); the model of
# SEED answers its question from the second ("a" of "what a film").
SEED = 6
QUESTIONS = ["what film?", "is the movie good?"]
CONTEXTS = ["hello world, the good film! a bad movie, what a film", "unaffable film"]
ANSWER = ("answer", "answer_start", "answer_end", "window")


@pytest.fixture(scope="module")
def squad_base_path(tmp_path_factory):
    directory = tmp_path_factory.mktemp("models")
    keras.utils.set_random_seed(SEED)
    export_task_model(str(directory / "squad" / "1"), "squad", new_task_model("squad"),
                      write_vocab(directory), do_lower_case=True, seq_length=SEQ_LENGTH,
                      **{**EXPORT_OPTIONS["squad"], "max_windows": MAX_WINDOWS})
    return str(directory / "squad")


def rest_predict(port, instances):
    """(HTTP status, decoded JSON body) of a row-format predict request."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/v1/models/squad:predict",
                           body=json.dumps({"instances": instances}))
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def grpc_predict(port, questions, contexts):
    """The outputs of a gRPC Predict, as numpy arrays."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "squad"
    request.inputs["question"].CopyFrom(tf.make_tensor_proto(questions))
    request.inputs["context"].CopyFrom(tf.make_tensor_proto(contexts))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
            request, timeout=30)
    return {name: tf.make_ndarray(tensor) for name, tensor in response.outputs.items()}


def test_the_server_answers_as_the_export_more_windows_than_a_batch_too(
        serve_process, squad_base_path):
    serve = tf.saved_model.load(f"{squad_base_path}/1").signatures["serving_default"]
    expected = {name: value.numpy() for name, value in serve(
        question=tf.constant(QUESTIONS), context=tf.constant(CONTEXTS)).items()}
    assert expected["window"].tolist() == [1, 0]
    three = {"question": ["what film?", "what?", "is it good?"], "context": [CONTEXTS[0]] * 3}
    expected_three = serve(**{name: tf.constant(texts) for name, texts in three.items()})
    rest_port = free_port()
    process = serve_process(f"--model_base_path={squad_base_path}", "--port=0",
                            f"--rest_api_port={rest_port}", f"--max_batch_size={MAX_BATCH_SIZE}",
                            "--tensorflow_intra_op_parallelism=1",
                            "--file_system_poll_wait_seconds=0")
    ready = process.ready()
    assert ready is not None, "".join(process.output)

    # Two questions: MAX_BATCH_SIZE sequences at most, one call.
    status, body = rest_predict(rest_port, [{"question": question, "context": context}
                                            for question, context in zip(QUESTIONS, CONTEXTS)])
    assert status == 200, body
    served = body["predictions"]
    assert [[row[name] for name in ANSWER] for row in served] == [
        [expected["answer"][i].decode(), *(int(expected[name][i]) for name in ANSWER[1:])]
        for i in range(len(QUESTIONS))]
    np.testing.assert_allclose([row["score"] for row in served], expected["score"], rtol=1e-5)
    outputs = grpc_predict(ready["port"], QUESTIONS, CONTEXTS)
    for name in ANSWER:
        np.testing.assert_array_equal(outputs[name], expected[name], err_msg=name)

    # Three questions of two windows each: 6 sequences, more than a batch of 4 holds; the
    # export runs them in slices, so the server takes them (it refused them before the slices).
    outputs = grpc_predict(ready["port"], three["question"], three["context"])
    for name in ANSWER:
        np.testing.assert_array_equal(outputs[name], expected_three[name].numpy(), err_msg=name)

    # Five questions: more rows than --max_batch_size.
    refusal = ("Batch of 5 rows is larger than the maximum batch size 4 (--max_batch_size); "
               "split the request.")
    status, body = rest_predict(rest_port, [{"question": "what?", "context": "a film"}] * 5)
    assert (status, body) == (400, {"error": refusal})
    with pytest.raises(grpc.RpcError) as raised:
        grpc_predict(ready["port"], ["what?"] * 5, ["a film"] * 5)
    assert (raised.value.code(), raised.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT, refusal)

    process.process.send_signal(signal.SIGTERM)
    code, output = process.finish()
    assert code == 0, output
