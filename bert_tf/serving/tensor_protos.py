"""A client's TensorProto as a numpy array, checked before anything is allocated.

`tf.make_ndarray` believes a proto's claimed shape: a 35-byte request claiming `[2**30]` floats
and holding none makes it allocate 4 GB of zeros. Here the claimed number of elements must
match what the proto holds (its `tensor_content` bytes, or its typed value list) before the
array is built, so an array is never larger than the request that carried it. Only dtypes a
request can meaningfully carry are taken: numbers, bool and strings, not DT_VARIANT /
DT_RESOURCE handles.

Example:
    >>> tensor_to_array("x", tf.make_tensor_proto([1.0, 2.0]))
    array([1., 2.], dtype=float32)
"""

import math

import grpc
import tensorflow as tf
from tensorflow.core.framework import types_pb2

from bert_tf.serving.errors import ServingError

# dtype -> (the TensorProto field holding its values, entries per element).
_VALUE_FIELDS = {
    types_pb2.DT_FLOAT: ("float_val", 1), types_pb2.DT_DOUBLE: ("double_val", 1),
    types_pb2.DT_INT8: ("int_val", 1), types_pb2.DT_INT16: ("int_val", 1),
    types_pb2.DT_INT32: ("int_val", 1), types_pb2.DT_UINT8: ("int_val", 1),
    types_pb2.DT_UINT16: ("int_val", 1), types_pb2.DT_INT64: ("int64_val", 1),
    types_pb2.DT_UINT32: ("uint32_val", 1), types_pb2.DT_UINT64: ("uint64_val", 1),
    types_pb2.DT_BOOL: ("bool_val", 1), types_pb2.DT_STRING: ("string_val", 1),
    types_pb2.DT_HALF: ("half_val", 1), types_pb2.DT_BFLOAT16: ("half_val", 1),
    types_pb2.DT_COMPLEX64: ("scomplex_val", 2), types_pb2.DT_COMPLEX128: ("dcomplex_val", 2),
}


def _fail(name, problem):
    raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, f"Input '{name}' {problem}.")


def _dtype_name(dtype):
    return types_pb2.DataType.Name(dtype) if dtype in types_pb2.DataType.values() else str(dtype)


def tensor_to_array(name, proto):
    """The numpy array of `proto`; INVALID_ARGUMENT naming input `name` when its dtype cannot
    be a request's or its claimed shape disagrees with its content."""
    if proto.dtype not in _VALUE_FIELDS:
        _fail(name, f"has dtype {_dtype_name(proto.dtype)}, which a request cannot carry "
                    f"(numbers, bool and strings only)")
    if proto.tensor_shape.unknown_rank:
        _fail(name, "has an unknown rank; a request's tensors need a full shape")
    shape = [dim.size for dim in proto.tensor_shape.dim]
    if any(size < 0 for size in shape):
        _fail(name, f"claims shape {shape}, with a negative dimension")
    elements = math.prod(shape)
    field, per_element = _VALUE_FIELDS[proto.dtype]
    if proto.tensor_content:
        if proto.dtype == types_pb2.DT_STRING:
            _fail(name, "holds DT_STRING values in tensor_content; strings go in string_val")
        expected = elements * tf.dtypes.as_dtype(proto.dtype).size
        if len(proto.tensor_content) != expected:
            _fail(name, f"claims shape {shape} ({elements} elements, {expected} bytes) but its "
                        f"tensor_content holds {len(proto.tensor_content)} bytes")
    else:
        held = len(getattr(proto, field))
        if held != elements * per_element:
            _fail(name, f"claims shape {shape} ({elements} elements) but holds "
                        f"{held // per_element} values in {field}")
    try:
        return tf.make_ndarray(proto)
    except (TypeError, ValueError) as error:
        _fail(name, f"is not a valid TensorProto: {error}")
