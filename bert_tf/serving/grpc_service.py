"""TF Serving's gRPC services: `PredictionService` (Predict, Classify, Regress,
GetModelMetadata) and `ModelService` (GetModelStatus), over a `ModelManager`.

They implement the servicers generated in `tensorflow-serving-api`, so clients written for
`tensorflow_model_server` (its `PredictionServiceStub`, `ModelServiceStub`) work unchanged.
MultiInference and HandleReloadConfigRequest answer UNIMPLEMENTED, and a request whose bytes
are not its method's message INVALID_ARGUMENT (`UndecodableRequests`), each without a
traceback in the server's log. Every request holds its size of the server's
`Admission` budget while it runs, then its answer until the RPC ends (RESOURCE_EXHAUSTED when
spent), and request tensors are checked against their claimed shapes before any array is built
(`tensor_protos`).

Example:
    >>> server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
    ...                      interceptors=[UndecodableRequests()])
    >>> add_services(server, manager, Admission(max_bytes=256 << 20))
    >>> server.add_insecure_port("127.0.0.1:8500"); server.start()
"""

import functools
import logging

import grpc
import tensorflow as tf
from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2,
                                     model_service_pb2_grpc, predict_pb2,
                                     prediction_service_pb2_grpc, regression_pb2)

from bert_tf.serving import example_requests
from bert_tf.serving.errors import ServingError
from bert_tf.serving.tensor_protos import tensor_to_array

_SIGNATURE_DEF = "signature_def"


def add_services(server, manager, admission):
    """Registers both services, answering from `manager`, on a `grpc.Server`."""
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionService(manager, admission), server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(manager, admission),
                                                              server)


class _Undecodable:
    """A request whose bytes did not parse as its method's message."""

    def __init__(self, message_type, error):
        self.message_type = message_type
        self.error = error


class UndecodableRequests(grpc.ServerInterceptor):
    """Hands the services a request that does not parse as an `_Undecodable`, which they
    answer INVALID_ARGUMENT: gRPC itself answered INTERNAL ("Exception deserializing
    request!") and logged a traceback for every such request."""

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        parse = handler.request_deserializer
        message_type = parse.__self__.DESCRIPTOR.full_name  # the message class's FromString

        def tolerant_parse(data):
            try:
                return parse(data)
            except Exception as error:  # noqa: BLE001 -- protobuf's DecodeError and kin
                return _Undecodable(message_type, error)

        return handler._replace(request_deserializer=tolerant_parse)


def _answers_errors(method):
    """Sends a ServingError as the call's status and message, as TF Serving does; any other
    error is INTERNAL, logged in one line. The answer holds its size of the `Admission` budget
    until the RPC ends (sent, or cancelled): gRPC serializes and sends it after `method`
    returns, as fast as the client reads."""
    @functools.wraps(method)
    def wrapper(self, request, context):
        if isinstance(request, _Undecodable):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"The request is not a valid {request.message_type}: "
                          f"{request.error or 'it does not parse'}")
        try:
            response = method(self, request)
            release = self._admission.take(response.ByteSize(),
                                           f"this answer (a {type(response).__name__})")
        except ServingError as error:
            context.abort(error.code, error.message)
        except Exception as error:  # noqa: BLE001 -- the client gets an answer, the log a line
            logging.error("gRPC %s failed: %s: %s", method.__name__, type(error).__name__,
                          error)
            context.abort(grpc.StatusCode.INTERNAL, f"{type(error).__name__}: {error}")
        if not context.add_callback(release):
            release()  # the RPC has already ended
        return response
    return wrapper


def _version(model_spec):
    return model_spec.version.value if model_spec.HasField("version") else None


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    """Predict, Classify, Regress and GetModelMetadata."""

    def __init__(self, manager, admission):
        self._manager = manager
        self._admission = admission

    @_answers_errors
    def Predict(self, request):  # noqa: N802 -- the generated servicer's method names
        spec = request.model_spec
        with self._admission.admit(request.ByteSize(), "this request"):
            inputs = {name: tensor_to_array(name, proto)
                      for name, proto in request.inputs.items()}
            with self._manager.servable(spec.name, _version(spec),
                                        spec.version_label) as servable:
                signature = servable.signature(spec.signature_name)
                outputs = signature.run(inputs, list(request.output_filter))
        response = predict_pb2.PredictResponse()
        _fill_model_spec(response.model_spec, spec.name, servable.version, signature.name)
        for name, array in outputs.items():
            response.outputs[name].CopyFrom(tf.make_tensor_proto(array))
        return response

    @_answers_errors
    def Classify(self, request):  # noqa: N802
        return self._answer_examples(request, classification_pb2.ClassificationResponse(),
                                     example_requests.CLASSIFY,
                                     example_requests.classification_result)

    @_answers_errors
    def Regress(self, request):  # noqa: N802
        return self._answer_examples(request, regression_pb2.RegressionResponse(),
                                     example_requests.REGRESS,
                                     example_requests.regression_result)

    def _answer_examples(self, request, response, method, to_result):
        """Fills `response` for a Classify or Regress `request` (`method`), its result made by
        `to_result(outputs)`."""
        spec = request.model_spec
        with self._admission.admit(request.ByteSize(), "this request"):
            with self._manager.servable(spec.name, _version(spec),
                                        spec.version_label) as servable:
                signature, outputs = example_requests.run(servable, spec.signature_name,
                                                          request.input, method)
        _fill_model_spec(response.model_spec, spec.name, servable.version, signature.name)
        response.result.CopyFrom(to_result(outputs))
        return response

    @_answers_errors
    def GetModelMetadata(self, request):  # noqa: N802
        if not request.metadata_field:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                               "GetModelMetadataRequest must specify at least one metadata_field")
        for field in request.metadata_field:
            if field != _SIGNATURE_DEF:
                raise ServingError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Metadata field {field} is not supported; the only field is "
                    f"'{_SIGNATURE_DEF}'.")
        spec = request.model_spec
        with self._manager.servable(spec.name, _version(spec), spec.version_label) as servable:
            response = get_model_metadata_pb2.GetModelMetadataResponse()
            _fill_model_spec(response.model_spec, spec.name, servable.version, "")
            response.metadata[_SIGNATURE_DEF].Pack(servable.signature_def_map)
        return response

    def MultiInference(self, request, context):  # noqa: N802
        _unimplemented(context, "MultiInference")


class ModelService(model_service_pb2_grpc.ModelServiceServicer):
    """GetModelStatus."""

    def __init__(self, manager, admission):
        self._manager = manager
        self._admission = admission

    @_answers_errors
    def GetModelStatus(self, request):  # noqa: N802
        if not request.HasField("model_spec"):
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, "Missing ModelSpec")
        return self._manager.status(request.model_spec.name, _version(request.model_spec))

    def HandleReloadConfigRequest(self, request, context):  # noqa: N802
        _unimplemented(context, "HandleReloadConfigRequest")


def _unimplemented(context, method):
    # The generated servicer's default raised NotImplementedError: a traceback in the log.
    context.abort(grpc.StatusCode.UNIMPLEMENTED,
                  f"{method} is not implemented by this server; it serves one model from "
                  f"--model_base_path (Predict, Classify, Regress, GetModelMetadata, "
                  f"GetModelStatus).")


def _fill_model_spec(model_spec, name, version, signature_name):
    model_spec.name = name
    model_spec.version.value = version
    model_spec.signature_name = signature_name
