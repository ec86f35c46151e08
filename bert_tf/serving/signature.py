"""`ServingSignature`: one signature of a loaded SavedModel, checked and run in batches.

Requests name their tensors the way the SignatureDef does, so the checks here (names, dtypes,
shapes) are what turn a client's mistake into INVALID_ARGUMENT with a message naming the input,
instead of an error from deep inside the model.

Example:
    >>> loaded = tf.saved_model.load("/models/toy/1")
    >>> signature = ServingSignature("serving_default", loaded.signatures["serving_default"],
    ...                              max_batch_size=32, batch_timeout_micros=1000,
    ...                              num_batch_threads=1)
    >>> signature.run({"text": np.array([b"hello"], dtype=object)})
    {'length': array([5], dtype=int32), ...}
    >>> signature.close()
"""

import grpc
import tensorflow as tf
from tensorflow.core.framework import types_pb2

from bert_tf.serving.batching import BatchingQueue
from bert_tf.serving.errors import ServingError


def dtype_name(dtype):
    """`tf.string` -> "DT_STRING", the name TF Serving's messages and protos use."""
    return types_pb2.DataType.Name(tf.dtypes.as_dtype(dtype).as_datatype_enum)


class ServingSignature:
    """Checks request tensors against a signature's inputs and runs it through a batching queue.

    `input_specs` maps each input name to its `tf.TensorSpec`; `output_names` lists the outputs.
    `sequences_per_string` and `runs_in_slices` say what a request costs (`BatchingQueue`).
    """

    def __init__(self, name, function, max_batch_size, batch_timeout_micros,
                 num_batch_threads, sequences_per_string=1, runs_in_slices=False):
        self.name = name
        self.input_specs = dict(function.structured_input_signature[1])
        self.output_names = sorted(function.structured_outputs)
        self._function = function
        self._queue = BatchingQueue(self._call, max_batch_size, batch_timeout_micros,
                                    num_batch_threads, name=f"batching[{name}]",
                                    sequences_per_string=sequences_per_string,
                                    runs_in_slices=runs_in_slices)

    def run(self, inputs, output_filter=()):
        """Runs the signature on `inputs` (name -> numpy array) and returns name -> array for
        every output, or only those in `output_filter`. Raises `ServingError`."""
        self._check_inputs(inputs)
        wanted = self._check_output_filter(output_filter)
        outputs = self._queue.submit(inputs)
        return {name: outputs[name] for name in wanted}

    def _check_inputs(self, inputs):
        """Raises INVALID_ARGUMENT naming the input when names, dtypes or shapes do not match."""
        expected = set(self.input_specs)
        for name in inputs:
            if name not in expected:
                raise ServingError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"input tensor alias not found in signature: {name}. Inputs expected to be "
                    f"in the set {{{','.join(sorted(expected))}}}.")
        missing = sorted(expected - set(inputs))
        if missing:
            raise ServingError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Missing input(s) {{{','.join(missing)}}} for signature '{self.name}'; it takes "
                f"{{{','.join(sorted(expected))}}}.")
        for name, array in inputs.items():
            spec = self.input_specs[name]
            dtype = tf.dtypes.as_dtype(array.dtype)
            if dtype != spec.dtype:
                raise ServingError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Input '{name}' has dtype {dtype_name(dtype)} but signature '{self.name}' "
                    f"expects {dtype_name(spec.dtype)}.")
            if not spec.shape.is_compatible_with(array.shape):
                raise ServingError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Input '{name}' has shape {list(array.shape)} but signature '{self.name}' "
                    f"expects {_shape_string(spec.shape)}.")

    def close(self):
        """Finishes queued requests and stops the batching worker."""
        self._queue.close()

    def _check_output_filter(self, output_filter):
        if not output_filter:
            return self.output_names
        seen = set()
        for alias in output_filter:
            if alias not in self.output_names:
                raise ServingError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"output tensor alias not found in signature: {alias} Outputs expected to be "
                    f"in the set {{{','.join(self.output_names)}}}.")
            if alias in seen:
                raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                                   f"duplicate output tensor alias: {alias}")
            seen.add(alias)
        return list(output_filter)

    def _call(self, inputs):
        try:
            outputs = self._function(**{name: tf.constant(array) for name, array in inputs.items()})
        except tf.errors.OpError as error:
            cause = ServingError.from_tf_error(error)
            raise ServingError(cause.code, f"Signature '{self.name}' failed on the request's "
                                           f"data: {cause.message}") from error
        return {name: tensor.numpy() for name, tensor in outputs.items()}


def _shape_string(shape):
    if shape.rank is None:
        return "any shape"
    return "[" + ", ".join("-1" if d is None else str(d) for d in shape.as_list()) + "]"
