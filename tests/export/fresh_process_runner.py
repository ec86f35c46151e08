"""Runs exported SavedModels in a process that imports only `tensorflow` and `tensorflow_text`.

Usage: python fresh_process_runner.py JOBS.json, where JOBS.json lists
`{"path": ..., "function": "serving_default" | "mlm" | "__call__", "inputs": {name: [dtype,
nested list]}, "outputs": "out.npz"}`; signatures are called with the inputs as keyword
tensors, "__call__" with the dict and training=False (its `encoder_outputs` list is saved as
encoder_outputs_0, 1, ...); with `"loader": "session"`, a signature runs as TF Serving runs it
(`run_in_session`). String outputs are saved as bytes arrays. Exits non-zero if any
module of this package got imported (TensorFlow imports Keras itself, so that one is allowed).
"""

import json
import sys

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tf.text ops the SavedModels use)


def run_in_session(job):
    """As TF Serving does: the session loader (the SavedModel's restore op and init ops), then
    the signature's tensors fetched with the inputs fed."""
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], job["path"])
        signature = meta_graph.signature_def[job["function"]]
        feed = {signature.inputs[name].name: np.array(value, dtype=object if dtype == "string"
                                                       else dtype)
                for name, (dtype, value) in job["inputs"].items()}
        outputs = session.run({name: info.name for name, info in signature.outputs.items()},
                              feed)
    np.savez(job["outputs"], **{name: value.astype(bytes) if value.dtype == object else value
                                for name, value in outputs.items()})


def run(job):
    if job.get("loader") == "session":
        return run_in_session(job)
    loaded = tf.saved_model.load(job["path"])
    inputs = {name: tf.constant(value, dtype=dtype) for name, (dtype, value)
              in job["inputs"].items()}
    if job["function"] == "__call__":
        outputs = dict(loaded(inputs, training=False))
        for i, layer in enumerate(outputs.pop("encoder_outputs")):
            outputs[f"encoder_outputs_{i}"] = layer
    else:
        outputs = loaded.signatures[job["function"]](**inputs)
    np.savez(job["outputs"], **{name: value.numpy().astype(bytes)
                                if value.dtype == tf.string else value.numpy()
                                for name, value in outputs.items()})


def main(jobs_file):
    with open(jobs_file) as f:
        jobs = json.load(f)
    for job in jobs:
        run(job)
    leaked = sorted(name for name in sys.modules if name.split(".")[0] == "bert_tf")
    if leaked:
        sys.exit(f"Loading imported {leaked}")


if __name__ == "__main__":
    main(sys.argv[1])
