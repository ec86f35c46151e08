"""The gRPC API through the official tensorflow-serving-api stubs, checked against the
SavedModel called directly."""

import concurrent.futures
import logging

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2,
                                     get_model_status_pb2, inference_pb2, model_management_pb2,
                                     predict_pb2, regression_pb2)

from tests.serving.conftest import MAX_BATCH_SIZE, MAX_REQUEST_BYTES
from tests.serving.toy_models import CLASSIFY_SIGNATURE, REGRESS_SIGNATURE

TEXTS = ["a fine movie", "héllo wörld", "", "日本語のテキスト", "  spaces  "]
TIMEOUT = 30


def predict_request(inputs, name="toy", version=None, signature_name="", output_filter=()):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature_name
    if version is not None:
        request.model_spec.version.value = version
    for key, value in inputs.items():
        request.inputs[key].CopyFrom(value if isinstance(value, tensor_pb2.TensorProto)
                                     else tf.make_tensor_proto(value))
    request.output_filter.extend(output_filter)
    return request


def outputs_of(response):
    return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}


def assert_same_outputs(actual, expected):
    assert sorted(actual) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(actual[name], np.asarray(expected[name]), err_msg=name)
        assert actual[name].dtype == np.asarray(expected[name]).dtype, name


def test_predict_default_signature_matches_the_savedmodel(prediction_stub, toy_savedmodel):
    response = prediction_stub.Predict(predict_request({"text": TEXTS}), timeout=TIMEOUT)
    expected = toy_savedmodel.signatures["serving_default"](text=tf.constant(TEXTS))
    assert_same_outputs(outputs_of(response), {k: v.numpy() for k, v in expected.items()})
    assert response.model_spec.name == "toy"
    assert response.model_spec.version.value == 1
    assert response.model_spec.signature_name == "serving_default"


def test_predict_named_signature_with_two_float_inputs(prediction_stub, toy_savedmodel):
    x = np.array([[1.5, -2.0, 3.25], [0.0, 1e-3, 7.0]], np.float32)
    factor = np.array([2.0, -0.5], np.float32)
    response = prediction_stub.Predict(
        predict_request({"x": x, "factor": factor}, version=1, signature_name="scale"),
        timeout=TIMEOUT)
    expected = toy_savedmodel.signatures["scale"](x=tf.constant(x), factor=tf.constant(factor))
    assert_same_outputs(outputs_of(response), {"y": expected["y"].numpy()})
    assert response.model_spec.signature_name == "scale"


def test_output_filter_returns_only_the_named_outputs(prediction_stub):
    response = prediction_stub.Predict(
        predict_request({"text": ["abc"]}, output_filter=["length"]), timeout=TIMEOUT)
    assert_same_outputs(outputs_of(response), {"length": np.array([3], np.int32)})


def test_concurrent_predicts_each_get_their_own_rows(prediction_stub, toy_savedmodel):
    texts = [f"request {i} " + "x" * i for i in range(24)]

    def call(text):
        return outputs_of(prediction_stub.Predict(predict_request({"text": [text]}),
                                                  timeout=TIMEOUT))

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, texts))
    for text, result in zip(texts, results):
        expected = toy_savedmodel.signatures["serving_default"](text=tf.constant([text]))
        assert_same_outputs(result, {k: v.numpy() for k, v in expected.items()})


def classify_request(xs, context_x=None, signature_name=CLASSIFY_SIGNATURE):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "toy"
    request.model_spec.signature_name = signature_name
    if context_x is None:
        examples = request.input.example_list.examples
    else:
        with_context = request.input.example_list_with_context
        with_context.context.features.feature["x"].float_list.value.append(context_x)
        examples = with_context.examples
    for x in xs:
        example = examples.add()
        if x is not None:
            example.features.feature["x"].float_list.value.append(x)
    return request


def expected_classifications(toy_savedmodel, xs):
    serialized = [tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[x]))})).SerializeToString()
        for x in xs]
    outputs = toy_savedmodel.signatures[CLASSIFY_SIGNATURE](inputs=tf.constant(serialized))
    return [[(label.decode(), float(score)) for label, score in zip(labels, scores)]
            for labels, scores in zip(outputs["classes"].numpy(), outputs["scores"].numpy())]


def classifications_of(response):
    return [[(c.label, c.score) for c in classifications.classes]
            for classifications in response.result.classifications]


def test_classify_matches_the_savedmodel(prediction_stub, toy_savedmodel):
    response = prediction_stub.Classify(classify_request([0.25, 0.9, 0.0]), timeout=TIMEOUT)
    assert classifications_of(response) == expected_classifications(toy_savedmodel,
                                                                     [0.25, 0.9, 0.0])
    assert response.model_spec.signature_name == CLASSIFY_SIGNATURE
    assert response.model_spec.version.value == 1


def test_classify_merges_each_example_over_the_context(prediction_stub, toy_savedmodel):
    # The first example has no feature of its own and takes the context's; the second overrides.
    response = prediction_stub.Classify(classify_request([None, 0.5], context_x=0.125),
                                        timeout=TIMEOUT)
    assert classifications_of(response) == expected_classifications(toy_savedmodel, [0.125, 0.5])


def test_classify_without_a_signature_name_finds_the_classify_method(prediction_stub,
                                                                     toy_savedmodel):
    response = prediction_stub.Classify(classify_request([0.75], signature_name=""),
                                        timeout=TIMEOUT)
    assert classifications_of(response) == expected_classifications(toy_savedmodel, [0.75])
    assert response.model_spec.signature_name == CLASSIFY_SIGNATURE


def test_classify_on_a_signature_that_is_not_a_classifier_is_invalid(prediction_stub):
    with pytest.raises(grpc.RpcError) as raised:
        prediction_stub.Classify(classify_request([0.5], signature_name="scale"),
                                 timeout=TIMEOUT)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == (
        "Signature 'scale' cannot serve Classify: it must take exactly one input 'inputs' "
        "(serialized tf.Example), but it takes {factor,x}.")


def test_get_model_metadata_returns_the_savedmodel_signature_defs(prediction_stub, toy_base_path):
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "toy"
    response = prediction_stub.GetModelMetadata(request, timeout=TIMEOUT)
    served = get_model_metadata_pb2.SignatureDefMap()
    assert response.metadata["signature_def"].Unpack(served)
    saved_model = saved_model_pb2.SavedModel()
    with open(f"{toy_base_path}/1/saved_model.pb", "rb") as f:
        saved_model.ParseFromString(f.read())
    assert dict(served.signature_def) == dict(saved_model.meta_graphs[0].signature_def)
    assert {"serving_default", "scale", CLASSIFY_SIGNATURE} <= set(served.signature_def)
    assert response.model_spec.name == "toy" and response.model_spec.version.value == 1


def test_get_model_status_reports_the_available_version(model_stub):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "toy"
    response = model_stub.GetModelStatus(request, timeout=TIMEOUT)
    [status] = response.model_version_status
    assert status.version == 1
    assert status.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE
    assert status.status.error_code == 0 and status.status.error_message == ""


def metadata_request(name="toy", field="signature_def"):
    request = get_model_metadata_pb2.GetModelMetadataRequest(
        metadata_field=[field] if field else [])
    request.model_spec.name = name
    return request


def status_request(name="toy", version=None):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = name
    if version is not None:
        request.model_spec.version.value = version
    return request


def labelled_request():
    request = predict_request({"text": ["a"]})
    request.model_spec.version_label = "stable"
    return request


def malformed_tensor():
    proto = tf.make_tensor_proto(np.array([1.0, 2.0], np.float32))
    proto.tensor_shape.dim[0].size = 1  # two values for a shape of one
    return proto


BAD_REQUESTS = {
    "wrong input name": (
        "Predict", lambda: predict_request({"txt": ["a"]}), grpc.StatusCode.INVALID_ARGUMENT,
        "input tensor alias not found in signature: txt. Inputs expected to be in the set {text}."),
    "missing input": (
        "Predict", lambda: predict_request({"x": np.ones([1, 3], np.float32)},
                                           signature_name="scale"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "Missing input(s) {factor} for signature 'scale'; it takes {factor,x}."),
    "wrong dtype": (
        "Predict", lambda: predict_request({"text": np.array([1.0], np.float32)}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "Input 'text' has dtype DT_FLOAT but signature 'serving_default' expects DT_STRING."),
    "wrong shape": (
        "Predict", lambda: predict_request({"x": np.ones([1, 4], np.float32),
                                            "factor": np.ones([1], np.float32)},
                                           signature_name="scale"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "Input 'x' has shape [1, 4] but signature 'scale' expects [-1, 3]."),
    "malformed tensor": (
        "Predict", lambda: predict_request({"text": malformed_tensor()}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "Input 'text' claims shape [1] (1 elements, 4 bytes) but its tensor_content holds 8 "
        "bytes."),
    "non-UTF-8 bytes": (
        "Predict", lambda: predict_request({"text": [b"ok", b"\xff\xfe bad"]}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "Signature 'serving_default' failed on the request's data: Invalid formatting on "
        "input string"),
    "empty batch": (
        "Predict", lambda: predict_request({"text": np.array([], object)}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "Empty batch: the request has 0 rows; send at least one."),
    "oversized batch": (
        "Predict", lambda: predict_request({"text": ["a"] * (MAX_BATCH_SIZE + 1)}),
        grpc.StatusCode.INVALID_ARGUMENT,
        f"Batch of {MAX_BATCH_SIZE + 1} rows is larger than the maximum batch size "
        f"{MAX_BATCH_SIZE} (--max_batch_size); split the request."),
    "unknown output": (
        "Predict", lambda: predict_request({"text": ["a"]}, output_filter=["logits"]),
        grpc.StatusCode.INVALID_ARGUMENT, "output tensor alias not found in signature: logits"),
    "unknown signature": (
        "Predict", lambda: predict_request({"text": ["a"]}, signature_name="nope"),
        grpc.StatusCode.FAILED_PRECONDITION, 'Serving signature key "nope" not found.'),
    "unknown model": (
        "Predict", lambda: predict_request({"text": ["a"]}, name="bert"),
        grpc.StatusCode.NOT_FOUND,
        "Servable not found for request: Latest(bert). This server serves version 1 of model "
        "'toy'."),
    "unknown version": (
        "Predict", lambda: predict_request({"text": ["a"]}, version=7),
        grpc.StatusCode.NOT_FOUND, "Servable not found for request: Specific(toy, 7)."),
    "version label": (
        "Predict", labelled_request, grpc.StatusCode.INVALID_ARGUMENT,
        "Unrecognized servable version label: stable."),
    "request too large": (
        "Predict", lambda: predict_request({"text": ["x" * MAX_REQUEST_BYTES]}),
        grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max"),
    "classify without examples": (
        "Classify", lambda: classify_request([]), grpc.StatusCode.INVALID_ARGUMENT,
        "Input is empty: the request has no examples."),
    "metadata without field": (
        "GetModelMetadata", lambda: metadata_request(field=None),
        grpc.StatusCode.INVALID_ARGUMENT,
        "GetModelMetadataRequest must specify at least one metadata_field"),
    "metadata field unknown": (
        "GetModelMetadata", lambda: metadata_request(field="warmup"),
        grpc.StatusCode.INVALID_ARGUMENT, "Metadata field warmup is not supported"),
    "metadata of unknown model": (
        "GetModelMetadata", lambda: metadata_request(name="bert"), grpc.StatusCode.NOT_FOUND,
        "Servable not found for request: Latest(bert)."),
    "status of unknown model": (
        "GetModelStatus", lambda: status_request(name="bert"), grpc.StatusCode.NOT_FOUND,
        "Could not find any versions of model bert"),
    "status of unknown version": (
        "GetModelStatus", lambda: status_request(version=3), grpc.StatusCode.NOT_FOUND,
        "Could not find version 3 of model toy"),
}


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_bad_request_gets_its_status_and_the_server_keeps_serving(case, prediction_stub,
                                                                   model_stub):
    method, make_request, code, message = BAD_REQUESTS[case]
    stub = model_stub if method == "GetModelStatus" else prediction_stub
    with pytest.raises(grpc.RpcError) as raised:
        getattr(stub, method)(make_request(), timeout=TIMEOUT)
    assert raised.value.code() == code
    assert message in raised.value.details()
    response = prediction_stub.Predict(predict_request({"text": ["still here"]}), timeout=TIMEOUT)
    assert outputs_of(response)["length"].tolist() == [10]


def test_regress_finds_the_regress_method(prediction_stub):
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "toy"
    for x in (0.25, -1.5):
        request.input.example_list.examples.add().features.feature["x"].float_list.value.append(x)
    response = prediction_stub.Regress(request, timeout=TIMEOUT)
    assert [r.value for r in response.result.regressions] == [0.5, -3.0]
    assert response.model_spec.signature_name == REGRESS_SIGNATURE
    # A classifier's signature is not a regression's.
    request.model_spec.signature_name = CLASSIFY_SIGNATURE
    with pytest.raises(grpc.RpcError) as raised:
        prediction_stub.Regress(request, timeout=TIMEOUT)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == (
        f"Signature '{CLASSIFY_SIGNATURE}' cannot serve Regress: it must return 'outputs' only, "
        f"but it returns {{classes,scores}}.")


def test_bytes_that_are_no_request_are_invalid_argument_without_a_traceback(
        channel, prediction_stub, caplog):
    # gRPC answered INTERNAL ("Exception deserializing request!") and logged a traceback for
    # each: any client could fill the server's log.
    predict = channel.unary_unary("/tensorflow.serving.PredictionService/Predict")
    with pytest.raises(grpc.RpcError) as raised:
        predict(b"\xff\xff\xff\xff\x0f", timeout=TIMEOUT)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details().startswith(
        "The request is not a valid tensorflow.serving.PredictRequest: "), raised.value.details()
    # The service still answers well-formed requests on the same channel.
    response = prediction_stub.Predict(predict_request({"text": ["abc"]}), timeout=TIMEOUT)
    assert outputs_of(response)["length"].tolist() == [3]
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


def test_methods_this_server_does_not_offer_answer_unimplemented_without_a_traceback(
        prediction_stub, model_stub, caplog):
    calls = [(prediction_stub.MultiInference, inference_pb2.MultiInferenceRequest()),
             (model_stub.HandleReloadConfigRequest, model_management_pb2.ReloadConfigRequest())]
    for method, request in calls:
        with pytest.raises(grpc.RpcError) as raised:
            method(request, timeout=TIMEOUT)
        assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert "is not implemented by this server" in raised.value.details()
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
