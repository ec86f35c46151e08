"""Classify: tf.Examples in, (label, score) lists out, over a classification signature.

A classification signature, as TF Serving defines it, takes one DT_STRING input `inputs`
(serialized tf.Example protos) and returns `classes` (DT_STRING `[batch, k]`) and/or `scores`
(DT_FLOAT `[batch, k]`). Like `tensorflow_model_server` (without
`--enable_signature_method_name_check`), any signature of that shape serves Classify, whatever
its method_name: TF2's `tf.saved_model.save` writes every method_name as predict.

Example:
    >>> examples = serialized_examples(request.input)
    >>> outputs = signature.run({"inputs": examples}, check_classification_signature(signature))
    >>> response.result.CopyFrom(classification_result(outputs, len(examples)))
"""

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import classification_pb2

from bert_tf.serving.errors import ServingError

INPUTS = tf.saved_model.CLASSIFY_INPUTS  # "inputs"
CLASSES = tf.saved_model.CLASSIFY_OUTPUT_CLASSES  # "classes"
SCORES = tf.saved_model.CLASSIFY_OUTPUT_SCORES  # "scores"


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
        raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                           "Input is empty: the ClassificationRequest has no examples.")
    return np.array([example.SerializeToString() for example in examples], dtype=object)


def check_classification_signature(signature):
    """Raises INVALID_ARGUMENT unless `signature` (a ServingSignature) can serve Classify;
    returns the outputs to fetch (`classes` and/or `scores`)."""
    problem = None
    if list(signature.input_specs) != [INPUTS]:
        problem = (f"a classification signature takes exactly one input '{INPUTS}' (serialized "
                   f"tf.Example), but it takes {{{','.join(sorted(signature.input_specs))}}}")
    elif signature.input_specs[INPUTS].dtype != tf.string:
        problem = f"its input '{INPUTS}' must be DT_STRING"
    outputs = [name for name in (CLASSES, SCORES) if name in signature.output_names]
    if problem is None and (not outputs or len(signature.output_names) > 2):
        problem = (f"a classification signature returns '{CLASSES}' and/or '{SCORES}' only, "
                   f"but it returns {{{','.join(signature.output_names)}}}")
    if problem is not None:
        raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                           f"Signature '{signature.name}' cannot serve Classify: {problem}.")
    return outputs


def classification_result(outputs, num_examples):
    """The ClassificationResult for `outputs` (`classes` and/or `scores` arrays)."""
    classes, scores = outputs.get(CLASSES), outputs.get(SCORES)
    for name, array, dtype in ((CLASSES, classes, np.object_), (SCORES, scores, np.float32)):
        if array is None:
            continue
        if array.ndim != 2 or array.shape[0] != num_examples or array.dtype != dtype:
            raise ServingError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Expected {name} output of shape [batch_size={num_examples}, num_classes] and "
                f"dtype {np.dtype(dtype).name}, got {list(array.shape)} {array.dtype.name}.")
    if classes is not None and scores is not None and classes.shape[1] != scores.shape[1]:
        raise ServingError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"Tensors class and score should match in dim_size(1). Got {classes.shape[1]} vs. "
            f"{scores.shape[1]}")
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
