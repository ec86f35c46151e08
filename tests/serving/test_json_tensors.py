"""The REST answer's JSON: written in pieces, it is the text json.dumps makes of the same
nested lists, and never longer than the bound the server takes from its budget before writing
it."""

import json

import numpy as np
import pytest

from bert_tf.serving import json_tensors
from bert_tf.serving.errors import ServingError

RNG = np.random.default_rng(0)
# Among the longest texts of their dtypes: 17 significant digits, a sign and a 2- or 3-digit
# exponent (see json_tensors._MAX_VALUE_CHARS).
LONGEST_FLOAT32 = np.float32(-3.2008762202575766e-37)
LONGEST_FLOAT64 = -2.2250738585072014e-308


def random_float32(*shape):
    """float32 values of every magnitude: random bit patterns, without NaN and infinities."""
    values = RNG.integers(0, 1 << 32, size=shape, dtype=np.uint64).astype(np.uint32)
    values = values.view(np.float32)
    return np.where(np.isfinite(values), values, LONGEST_FLOAT32)


def old_json(outputs, row_format):
    """The answer as the server wrote it before it wrote pieces: json.dumps of the nested lists
    `_to_json` makes of whole tensors."""
    values = {name: json_tensors._to_json(name, array) for name, array in outputs.items()}
    if row_format:
        if len(values) == 1:
            body = {"predictions": next(iter(values.values()))}
        else:
            rows = len(next(iter(values.values())))
            body = {"predictions": [{name: value[i] for name, value in values.items()}
                                    for i in range(rows)]}
    else:
        body = {"outputs": next(iter(values.values())) if len(values) == 1 else values}
    return json.dumps(body) + "\n"


def written(outputs, row_format):
    answer = json_tensors.response_json(outputs, row_format)
    text = b"".join(answer.blocks()).decode("ascii")
    return answer, text


WORST_CASES = {
    "float32 of every magnitude, in pieces": {"y": random_float32(3, 70000)},
    "the longest float32, one row over a piece": {"y": np.full([1, 70000], LONGEST_FLOAT32)},
    "a long 1-D float32": {"y": np.full([200000], LONGEST_FLOAT32)},
    "float64, float16, NaN and infinities": {
        "d": np.array([[LONGEST_FLOAT64, np.nan], [-np.inf, 1e300]]),
        "h": np.array([[-6.1e-5, np.inf], [65504, -0.0]], np.float16)},
    "integers at their extremes": {
        "i": np.array([[np.iinfo(np.int64).min] * 3] * 2),
        "u": np.array([[np.iinfo(np.uint64).max] * 3] * 2, np.uint64),
        "b": np.array([[False, True, False]] * 2)},
    "many trailing dimensions of 1": {"y": np.full([4, 1, 1, 1, 1], LONGEST_FLOAT32)},
    "an empty dimension": {"y": np.zeros([2, 0, 3], np.float32), "n": np.array([1, 2])},
    # 6 characters a byte: the longest text a string can have.
    "control characters": {"text": np.array([b"\x01\x1f" * 100] * 3, object)},
    "2- to 4-byte characters": {"text": np.array(["é 日 \U0001f600".encode() * 30] * 2, object)},
    "bytes that are not UTF-8, in base64": {"raw": np.array([b"\xff" * 99, b"\xfe"], object)},
    "empty strings, named *_bytes": {"payload_bytes": np.array([b"", b"", b"a"], object)},
}


@pytest.mark.parametrize("case", sorted(WORST_CASES))
@pytest.mark.parametrize("row_format", [True, False])
def test_the_answer_is_json_dumps_text_within_its_bound(case, row_format):
    outputs = WORST_CASES[case]
    answer, text = written(outputs, row_format)
    assert text == old_json(outputs, row_format)
    assert len(text) <= answer.max_bytes


def test_the_bound_is_close_for_model_outputs():
    # Logits and probabilities: their text is what the bound must not overstate much, or
    # answers that fit would be refused. Measured: 20.6 bytes a N(0, 1) float32 with its ", "
    # against 25 in the bound.
    outputs = {"logits": RNG.standard_normal([8, 512, 64]).astype(np.float32),
               "probabilities": RNG.random([8, 3]).astype(np.float32)}
    answer, text = written(outputs, row_format=True)
    assert len(text) <= answer.max_bytes < 1.3 * len(text)


def test_an_output_json_cannot_carry_is_refused_before_writing():
    with pytest.raises(ServingError) as raised:
        json_tensors.response_json({"z": np.ones([2, 2], np.complex64)}, True)
    assert raised.value.message == ("Output 'z' has dtype complex64, which the REST API cannot "
                                    "encode; use gRPC.")
