"""`Servable`: one loaded version of a SavedModel, its signatures ready to run.

Example:
    >>> servable = Servable("/models/toy/1", version=1, max_batch_size=32,
    ...                     batch_timeout_micros=1000, num_batch_threads=1)
    >>> servable.signature("serving_default").run({"text": np.array([b"hi"], dtype=object)})
    >>> servable.unload()
"""

import os
import threading

import grpc
import tensorflow as tf
# The task SavedModels tokenize in-graph with tf.text ops; importing tensorflow_text registers
# those ops, without which loading such a SavedModel fails.
import tensorflow_text  # noqa: F401
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import get_model_metadata_pb2

from bert_tf.serving.errors import ServingError
from bert_tf.serving.signature import ServingSignature

DEFAULT_SIGNATURE = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY


class Servable:
    """A SavedModel version: `signature(name)` to run, `signature_def_map` for metadata.

    Requests hold the servable (`acquire`/`release`) while they run; `unload` waits for them,
    so a version swapped out under load still answers every request that reached it.
    """

    def __init__(self, path, version, max_batch_size, batch_timeout_micros,
                 num_batch_threads):
        self.path = path
        self.version = version
        self.signature_def_map = _read_signature_defs(path)
        self._loaded = tf.saved_model.load(path)
        # What a string of a request can cost: several sequences for a SQuAD export (its
        # windows, `bert_tf.export.task_export`), one for any other model; this package's task
        # exports run them in slices of bounded memory (their variable `max_tokens_per_call`).
        sequences_per_string = getattr(self._loaded, "sequences_per_string", None)
        sequences_per_string = (1 if sequences_per_string is None
                                else int(sequences_per_string.numpy()))
        runs_in_slices = hasattr(self._loaded, "max_tokens_per_call")
        self._signatures = {
            name: ServingSignature(name, function, max_batch_size, batch_timeout_micros,
                                   num_batch_threads, sequences_per_string, runs_in_slices)
            for name, function in self._loaded.signatures.items()}
        self._users = 0
        self._idle = threading.Condition()

    def signature(self, name):
        """The signature `name` ("" means serving_default); FAILED_PRECONDITION if absent, as in
        TF Serving."""
        name = name or DEFAULT_SIGNATURE
        if name not in self._signatures:
            raise ServingError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"Serving signature key \"{name}\" not found. This model's signatures: "
                f"{', '.join(sorted(self._signatures)) or 'none'}.")
        return self._signatures[name]

    def signature_for_method(self, name, method_name):
        """The signature `name`, or when `name` is empty, the one whose method name is
        `method_name` (e.g. "tensorflow/serving/classify"): serving_default if it is one, else
        the only one; serving_default when none is."""
        if name:
            return self.signature(name)
        candidates = sorted(key for key, signature_def in
                            self.signature_def_map.signature_def.items()
                            if signature_def.method_name == method_name and key in self._signatures)
        if len(candidates) > 1 and DEFAULT_SIGNATURE not in candidates:
            raise ServingError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Signatures {', '.join(candidates)} all have method name {method_name}; name "
                f"one in the request's signature_name.")
        if len(candidates) == 1:
            return self.signature(candidates[0])
        return self.signature(DEFAULT_SIGNATURE)

    def acquire(self):
        with self._idle:
            self._users += 1

    def release(self):
        with self._idle:
            self._users -= 1
            self._idle.notify_all()

    def unload(self):
        """Waits until no request holds this version, then stops its batching workers."""
        with self._idle:
            while self._users:
                self._idle.wait()
        for signature in self._signatures.values():
            signature.close()
        self._signatures = {}
        self._loaded = None


def _read_signature_defs(path):
    """The SignatureDefs of `path`'s saved_model.pb as the SignatureDefMap GetModelMetadata
    returns (every entry, `__saved_model_init_op` included, as TF Serving shows them)."""
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    signature_defs = get_model_metadata_pb2.SignatureDefMap()
    for key, signature_def in saved_model.meta_graphs[0].signature_def.items():
        signature_defs.signature_def[key].CopyFrom(signature_def)
    return signature_defs
