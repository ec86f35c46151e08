"""Classify and Regress: tf.Examples in, TF Serving's results out, over gRPC and REST.

A classification signature, as TF Serving defines it, takes one DT_STRING input `inputs`
(serialized tf.Example protos) and returns `classes` (DT_STRING `[batch, k]`) and/or `scores`
(DT_FLOAT `[batch, k]`); a regression signature returns `outputs` (DT_FLOAT `[batch]` or
`[batch, 1]`). A request that names no signature gets the one whose method name is the API's
(`tensorflow/serving/classify` or `tensorflow/serving/regress`), as this package's exports carry
them; a named signature of the right shape serves whatever its method name, as in
`tensorflow_model_server` without `--enable_signature_method_name_check`.

REST bodies are TF Serving's: `{"signature_name": ..., "context": {feature: value},
"examples": [{feature: value}, ...]}`, a value being a string (UTF-8 text), `{"b64": ...}`,
an integer, a number, or a list of one of those; answers are `{"results": [[[label, score],
...], ...]}` (classify) or `{"results": [value, ...]}` (regress).

Example:
    >>> signature, outputs = run(servable, "", request.input, CLASSIFY)
    >>> response.result.CopyFrom(classification_result(outputs))
"""

import collections

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import classification_pb2, input_pb2, regression_pb2

from bert_tf.serving.errors import ServingError
from bert_tf.serving.json_tensors import short_json, string_bytes

INPUTS = tf.saved_model.CLASSIFY_INPUTS  # "inputs"
CLASSES = tf.saved_model.CLASSIFY_OUTPUT_CLASSES  # "classes"
SCORES = tf.saved_model.CLASSIFY_OUTPUT_SCORES  # "scores"
REGRESSION_OUTPUTS = tf.saved_model.REGRESS_OUTPUTS  # "outputs"

# A TF Serving API over tf.Examples: its method name, and what it fetches from a signature.
ExampleMethod = collections.namedtuple("ExampleMethod", ["name", "api", "wanted_outputs"])


def _classification_outputs(output_names):
    outputs = [name for name in (CLASSES, SCORES) if name in output_names]
    if not outputs or len(output_names) > 2:
        return None
    return outputs


def _regression_outputs(output_names):
    return [REGRESSION_OUTPUTS] if list(output_names) == [REGRESSION_OUTPUTS] else None


CLASSIFY = ExampleMethod(tf.saved_model.CLASSIFY_METHOD_NAME, "Classify", _classification_outputs)
REGRESS = ExampleMethod(tf.saved_model.REGRESS_METHOD_NAME, "Regress", _regression_outputs)


def _invalid(message):
    return ServingError(grpc.StatusCode.INVALID_ARGUMENT, message)


def serialized_examples(input_proto):
    """The request's examples as a `[n]` object array of serialized tf.Example; with
    `example_list_with_context`, each example is merged over the shared context (the example's
    features win), which is what TF Serving feeds the model."""
    kind = input_proto.WhichOneof("kind")
    if kind == "example_list":
        examples = list(input_proto.example_list.examples)
    elif kind == "example_list_with_context":
        context = input_proto.example_list_with_context.context
        examples = []
        for example in input_proto.example_list_with_context.examples:
            merged = tf.train.Example()
            merged.CopyFrom(context)
            merged.MergeFrom(example)
            examples.append(merged)
    else:
        examples = []
    if not examples:
        raise _invalid("Input is empty: the request has no examples.")
    return np.array([example.SerializeToString() for example in examples], dtype=object)


def run(servable, signature_name, input_proto, method):
    """`(signature, outputs)`: the request's examples run through the signature `method` uses."""
    examples = serialized_examples(input_proto)
    signature = servable.signature_for_method(signature_name, method.name)
    problem = None
    if list(signature.input_specs) != [INPUTS]:
        problem = (f"it must take exactly one input '{INPUTS}' (serialized tf.Example), but it "
                   f"takes {{{','.join(sorted(signature.input_specs))}}}")
    elif signature.input_specs[INPUTS].dtype != tf.string:
        problem = f"its input '{INPUTS}' must be DT_STRING"
    wanted = method.wanted_outputs(signature.output_names)
    if problem is None and wanted is None:
        expected = (f"'{CLASSES}' and/or '{SCORES}'" if method is CLASSIFY
                    else f"'{REGRESSION_OUTPUTS}'")
        problem = (f"it must return {expected} only, but it returns "
                   f"{{{','.join(signature.output_names)}}}")
    if problem is not None:
        if not signature_name:
            problem += (f"; the request names no signature and none of this model's has method "
                        f"name {method.name}")
        raise _invalid(f"Signature '{signature.name}' cannot serve {method.api}: {problem}.")
    return signature, signature.run({INPUTS: examples}, wanted)


def classification_result(outputs):
    """The ClassificationResult for `outputs` (`classes` and/or `scores` arrays)."""
    classes, scores = outputs.get(CLASSES), outputs.get(SCORES)
    num_examples = len(next(iter(outputs.values())))
    for name, array, dtype in ((CLASSES, classes, np.object_), (SCORES, scores, np.float32)):
        if array is None:
            continue
        if array.ndim != 2 or array.dtype != dtype:
            raise _invalid(f"Expected {name} output of shape [batch_size={num_examples}, "
                           f"num_classes] and dtype {np.dtype(dtype).name}, got "
                           f"{list(array.shape)} {array.dtype.name}.")
    if classes is not None and scores is not None and classes.shape[1] != scores.shape[1]:
        raise _invalid(f"Tensors class and score should match in dim_size(1). Got "
                       f"{classes.shape[1]} vs. {scores.shape[1]}")
    num_classes = (classes if classes is not None else scores).shape[1]
    result = classification_pb2.ClassificationResult()
    for i in range(num_examples):
        classifications = result.classifications.add()
        for c in range(num_classes):
            entry = classifications.classes.add()
            if classes is not None:
                entry.label = classes[i, c].decode("utf-8", errors="replace")
            if scores is not None:
                entry.score = scores[i, c]
    return result


def regression_result(outputs):
    """The RegressionResult for `outputs` (`outputs`: one number per example)."""
    values = outputs[REGRESSION_OUTPUTS]
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1 or values.dtype != np.float32:
        raise _invalid(f"Expected output '{REGRESSION_OUTPUTS}' of shape [batch_size] or "
                       f"[batch_size, 1] and dtype float32, got {list(values.shape)} "
                       f"{values.dtype.name}.")
    result = regression_pb2.RegressionResult()
    for value in values:
        result.regressions.add(value=value)
    return result


def input_from_json(body):
    """The `tensorflow.serving.Input` of a REST classify/regress body."""
    examples = body.get("examples")
    if not isinstance(examples, list) or not examples:
        raise _invalid("Missing or empty 'examples': send a list of objects, one per example, "
                       "mapping feature names to values.")
    input_proto = input_pb2.Input()
    if "context" in body:
        target = input_proto.example_list_with_context
        _fill_example(target.context, body["context"], "'context'")
    else:
        target = input_proto.example_list
    for i, features in enumerate(examples):
        _fill_example(target.examples.add(), features, f"Element {i} of 'examples'")
    return input_proto


def _fill_example(example, features, where):
    if not isinstance(features, dict):
        raise _invalid(f"{where} must be an object mapping feature names to values.")
    for name, value in features.items():
        values = value if isinstance(value, list) else [value]
        feature = example.features.feature[name]
        if all(isinstance(v, (str, dict)) for v in values):
            feature.bytes_list.value.extend(
                string_bytes(v, f"Feature '{name}' of {where}") for v in values)
        elif all(type(v) is int for v in values):
            if any(not -(1 << 63) <= v < (1 << 63) for v in values):
                raise _invalid(f"{where}: feature '{name}' holds an integer outside int64.")
            feature.int64_list.value.extend(values)
        elif all(type(v) in (int, float) for v in values):
            feature.float_list.value.extend(values)
        else:
            raise _invalid(f"{where}: feature '{name}' must hold strings, integers or numbers "
                           f"(one kind per feature), got {short_json(value)}.")


def classification_json(result):
    """TF Serving's REST classify answer for a ClassificationResult."""
    return {"results": [[[entry.label, entry.score] for entry in classifications.classes]
                        for classifications in result.classifications]}


def regression_json(result):
    """TF Serving's REST regress answer for a RegressionResult."""
    return {"results": [regression.value for regression in result.regressions]}
