"""TF Serving's REST JSON encoding of tensors: request bodies in, response bodies out.

A predict body holds its tensors in row format (`"instances"`: one element per batch row, an
object keyed by input name when the signature has several inputs) or columnar format
(`"inputs"`: the whole tensor, or an object of them). Strings are JSON strings (UTF-8 text) or
`{"b64": ...}` for arbitrary bytes. The response mirrors the request: `"predictions"` (rows) or
`"outputs"` (columns), the output name omitted when there is just one; string outputs whose name
ends in `_bytes`, and any that are not UTF-8, come back as `{"b64": ...}`.

Example:
    >>> specs = {"text": tf.TensorSpec([None], tf.string)}
    >>> inputs, row_format = request_tensors({"instances": ["a", {"b64": "Yg=="}]}, specs)
    >>> inputs["text"]
    array([b'a', b'b'], dtype=object)
    >>> answer = response_json({"length": np.array([1, 1])}, row_format)
    >>> answer.max_bytes, b"".join(answer.blocks())
    (110, b'{"predictions": [1, 1]}\n')
"""

import base64
import binascii
import json

import grpc
import numpy as np
import tensorflow as tf

from bert_tf.serving.errors import ServingError
from bert_tf.serving.signature import dtype_name

# Most dimensions a JSON tensor may have: deeper nesting is refused before it can exhaust the
# recursion that reads it (a 900-deep `instances` once closed the connection unanswered).
MAX_RANK = 32
# An answer is written this many values at a time: 64 Ki floats are ~2 MB of Python floats and
# ~1.3 MB of text while written.
_PIECE_VALUES = 1 << 16
# and sent in blocks of about this many bytes.
_BLOCK_CHARS = 1 << 20
# The longest JSON text of one value, by numpy kind and item size, as json.dumps writes the
# Python floats and bools `tolist` makes. A float32 is written with the 17 significant digits
# of the float64 it becomes: at most 23 characters ("-3.2008762202575766e-37", the longest of 5
# million random float32 bit patterns, and of every float16), 18.6 on average for N(0, 1)
# values; a float64 at most 24 ("-2.2250738585072014e-308").
_MAX_VALUE_CHARS = {("b", 1): len("false"), ("f", 2): 23, ("f", 4): 23, ("f", 8): 24}
# '{"predictions": ', its closing brace and the final newline.
_DOCUMENT_CHARS = 32


def request_tensors(body, input_specs):
    """(name -> numpy array, row_format) from a predict body, typed by `input_specs` (the
    signature's name -> tf.TensorSpec). Raises INVALID_ARGUMENT naming what is wrong."""
    if "instances" in body and "inputs" in body:
        _fail("Request has both 'instances' and 'inputs'; send exactly one of them.")
    if "instances" in body:
        return _row_tensors(body["instances"], input_specs), True
    if "inputs" in body:
        return _columnar_tensors(body["inputs"], input_specs), False
    _fail("Missing 'inputs' or 'instances' key")


def response_json(outputs, row_format):
    """The predict response body for `outputs` (name -> array sharing dimension 0), as a
    `JsonText` bounded before any of it is written. INVALID_ARGUMENT for an output dtype JSON
    cannot carry."""
    for name, array in outputs.items():
        if (array.dtype != object and array.dtype.kind not in "iu"
                and (array.dtype.kind, array.dtype.itemsize) not in _MAX_VALUE_CHARS):
            _fail(f"Output '{name}' has dtype {array.dtype.name}, which the REST API cannot "
                  f"encode; use gRPC.")
    rows = len(next(iter(outputs.values())))
    names = {name: json.dumps(name) for name in outputs}
    # Per row: "{", "}" and ", " between rows; per output its key, ": " and ", ".
    keys = rows * (4 + sum(len(key) + 4 for key in names.values()))
    max_bytes = _DOCUMENT_CHARS + keys + sum(_max_json_chars(array) for array in outputs.values())
    tensors = ", ".join(f"{name} {list(array.shape)} {dtype_name(array.dtype)}"
                        for name, array in outputs.items())
    return JsonText(_response_pieces(outputs, names, rows, row_format), max_bytes,
                    f"this answer as JSON ({tensors})")


def _response_pieces(outputs, names, rows, row_format):
    """The text of `response_json`'s body, in pieces: what json.dumps wrote of the same answer
    as nested lists, without holding those lists."""
    yield '{"predictions": ' if row_format else '{"outputs": '
    if len(outputs) == 1:
        ((name, array),) = outputs.items()
        yield from _array_pieces(name, array)
    elif row_format:
        yield "["
        for row in range(rows):
            yield ", {" if row else "{"
            for i, (name, array) in enumerate(outputs.items()):
                yield f"{', ' if i else ''}{names[name]}: "
                yield from _array_pieces(name, array[row, ...])
            yield "}"
        yield "]"
    else:
        yield "{"
        for i, (name, array) in enumerate(outputs.items()):
            yield f"{', ' if i else ''}{names[name]}: "
            yield from _array_pieces(name, array)
        yield "}"
    yield "}"


class JsonText:
    """A JSON document to send: `max_bytes` bounds its size before any of it is written, `what`
    names it in messages, and `blocks()` writes it as ASCII bytes (json.dumps escapes the rest)
    ending in a newline, in blocks of about `_BLOCK_CHARS`.

    Example:
        >>> text = JsonText.of({"error": "no"})
        >>> text.max_bytes, b"".join(text.blocks())
        (16, b'{"error": "no"}\n')
    """

    def __init__(self, pieces, max_bytes, what="this answer"):
        self.max_bytes = max_bytes
        self.what = what
        self._pieces = pieces

    @classmethod
    def of(cls, value):
        """`value` as JSON, written at once (a status, metadata, an error: small), its size
        exact."""
        text = json.dumps(value)
        return cls([text], len(text) + 1)

    def blocks(self):
        block, size = [], 0
        for piece in self._pieces:
            block.append(piece)
            size += len(piece)
            if size >= _BLOCK_CHARS:
                yield "".join(block).encode("ascii")
                block, size = [], 0
        block.append("\n")
        yield "".join(block).encode("ascii")


def _row_tensors(instances, input_specs):
    if not isinstance(instances, list):
        _fail("Expecting 'instances' to be a list/array, one element per batch row.")
    if not instances:
        _fail("Empty batch: 'instances' is an empty list; send at least one.")
    names = sorted(input_specs)
    named = _is_named(instances[0])
    if not named and len(names) > 1:
        _fail(f"'instances' is a plain list, but the signature has several inputs "
              f"{{{','.join(names)}}}: send a list of objects keyed by input name.")
    for i, instance in enumerate(instances):
        if _is_named(instance) != named:
            _fail(f"Element {i} of 'instances' is {'a value' if named else 'an object'} but "
                  f"element 0 is {'an object' if named else 'a value'}; use one form.")
        if named and set(instance) != set(names):
            _fail(f"Element {i} of 'instances' has keys {{{','.join(sorted(instance))}}}; "
                  f"the signature's inputs are {{{','.join(names)}}}.")
    if not named:
        return {names[0]: _to_array(instances, input_specs[names[0]].dtype, names[0])}
    return {name: _to_array([instance[name] for instance in instances],
                            input_specs[name].dtype, name) for name in names}


def _columnar_tensors(inputs, input_specs):
    names = sorted(input_specs)
    if not _is_named(inputs):
        if len(names) > 1:
            _fail(f"'inputs' is a plain value/list, but the signature has several inputs "
                  f"{{{','.join(names)}}}: send an object keyed by input name.")
        return {names[0]: _to_array(inputs, input_specs[names[0]].dtype, names[0])}
    if set(inputs) != set(names):
        _fail(f"'inputs' has keys {{{','.join(sorted(inputs))}}}; the signature's inputs are "
              f"{{{','.join(names)}}}.")
    return {name: _to_array(inputs[name], input_specs[name].dtype, name) for name in names}


def _is_named(value):
    return isinstance(value, dict) and set(value) != {"b64"}


def _to_array(value, dtype, name):
    """A nested JSON list (or scalar) as a numpy array of `dtype`; the lists must be
    rectangular."""
    leaves = []
    shape = _collect(value, leaves, name)
    convert = _leaf_converter(dtype, name)
    array = np.array([convert(leaf) for leaf in leaves],
                     dtype=object if dtype == tf.string else dtype.as_numpy_dtype)
    return array.reshape(shape)


def _collect(value, leaves, name, depth=0):
    if not isinstance(value, list):
        leaves.append(value)
        return ()
    if depth == MAX_RANK:
        _fail(f"Input '{name}' nests lists more than {MAX_RANK} deep; a tensor of this API has "
              f"at most {MAX_RANK} dimensions.")
    shapes = [_collect(item, leaves, name, depth + 1) for item in value]
    for shape in shapes[1:]:
        if shape != shapes[0]:
            _fail(f"Input '{name}' is not a rectangular tensor: it holds lists of shapes "
                  f"{list(shapes[0])} and {list(shape)} side by side.")
    return (len(value),) + (shapes[0] if shapes else ())


def _leaf_converter(dtype, name):
    def fail(leaf, expected):
        _fail(f"Input '{name}' expects {expected} ({dtype_name(dtype)}), got JSON value "
              f"{short_json(leaf)}.")

    if dtype == tf.string:
        def convert(leaf):
            return string_bytes(leaf, f"Input '{name}'")
    elif dtype == tf.bool:
        def convert(leaf):
            return leaf if isinstance(leaf, bool) else fail(leaf, "true/false")
    elif dtype.is_integer:
        def convert(leaf):
            if not isinstance(leaf, int) or isinstance(leaf, bool):
                fail(leaf, "integers")
            if not dtype.min <= leaf <= dtype.max:
                fail(leaf, f"integers in [{dtype.min}, {dtype.max}]")
            return leaf
    elif dtype.is_floating:
        def convert(leaf):
            if not isinstance(leaf, (int, float)) or isinstance(leaf, bool):
                fail(leaf, "numbers")
            return leaf
    else:
        _fail(f"Input '{name}' has dtype {dtype_name(dtype)}, which the REST API cannot "
              f"encode; use gRPC.")
    return convert


def string_bytes(value, what):
    """The bytes of a JSON string value: UTF-8 text, or `{"b64": ...}` for any bytes; `what`
    names the value in the INVALID_ARGUMENT raised for anything else."""
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate escape such as "\ud800"
            _fail(f"{what} holds a string that is not valid UTF-8 text; send bytes as "
                  f"{{\"b64\": ...}}.")
    if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
        try:
            return base64.b64decode(value["b64"], validate=True)
        except (binascii.Error, ValueError):
            _fail(f"{what} holds a 'b64' value that is not valid base64.")
    _fail(f"{what} expects strings or {{\"b64\": ...}} objects (DT_STRING), got JSON value "
          f"{short_json(value)}.")


def _to_json(name, array):
    if array.dtype != object:
        return array.tolist()
    binary = name.endswith("_bytes")

    def encode(item):
        if isinstance(item, list):
            return [encode(x) for x in item]
        if not binary:
            try:
                return item.decode("utf-8")
            except UnicodeDecodeError:
                pass  # not text: fall through to base64 rather than emit invalid JSON
        return {"b64": base64.b64encode(item).decode("ascii")}

    return encode(array.tolist())


def _array_pieces(name, array):
    """`json.dumps(_to_json(name, array))`, in pieces of at most `_PIECE_VALUES` values.
    Written whole, an answer's lists (32 bytes a float), its text and the text's bytes were held
    at once: a peak of +344 MB for 86.5 MB of JSON (4.2M float32), +97 MB in pieces."""
    if array.ndim == 0 or array.size <= _PIECE_VALUES:
        yield json.dumps(_to_json(name, array))
        return
    row_values = array.size // len(array)
    yield "["
    if row_values > _PIECE_VALUES:
        for i, row in enumerate(array):
            if i:
                yield ", "
            yield from _array_pieces(name, row)
    else:
        step = _PIECE_VALUES // row_values
        for start in range(0, len(array), step):
            if start:
                yield ", "
            yield json.dumps(_to_json(name, array[start:start + step]))[1:-1]
    yield "]"


def _max_json_chars(array):
    """The most characters `_array_pieces` can write for `array`: its values at their longest
    (`_MAX_VALUE_CHARS`; a string 6 a byte, as "\\u0001" escapes, or base64 in {"b64": ""},
    plus quotes), and per list its brackets and per item ", "."""
    if array.dtype == object:
        values = sum(6 * len(item) + 13 for item in array.flat)
    elif array.dtype.kind in "iu":
        info = np.iinfo(array.dtype)
        values = array.size * max(len(str(info.min)), len(str(info.max)))
    else:
        values = array.size * _MAX_VALUE_CHARS[array.dtype.kind, array.dtype.itemsize]
    lists = items = 0
    count = 1
    for size in array.shape:
        lists += count
        count *= size
        items += count
    return values + 2 * (lists + items)


def short_json(value):
    """`value` written as JSON, as the client wrote it (`null`, `NaN`, `"a"`, not Python's
    `None`, `nan`, `'a'`), cut to 40 characters for an error message.

    Example:
        >>> short_json([None, float("nan")])
        '[null, NaN]'
    """
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def _fail(message):
    raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, message)
