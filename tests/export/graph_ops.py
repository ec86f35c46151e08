"""The ops a SavedModel's graphs use that TensorFlow alone does not define, found in a fresh
process that imports only `tensorflow`: what TF Serving builds without tf.text cannot run.

Usage: python graph_ops.py SAVED_MODEL_DIR... prints a JSON list, one sorted list per model.

Example:
    >>> non_core_ops(["/models/sst2/1"])
    [['FastWordpieceTokenizeWithOffsets']]
"""

import json
import os
import subprocess
import sys


def non_core_ops(paths):
    """For each SavedModel directory, the sorted ops it uses beyond TensorFlow's own."""
    result = subprocess.run([sys.executable, os.path.abspath(__file__), *paths],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _main(paths):
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.framework import op_def_registry

    found = []
    for path in paths:
        saved_model = saved_model_pb2.SavedModel()
        with open(os.path.join(path, "saved_model.pb"), "rb") as f:
            saved_model.ParseFromString(f.read())
        graph = saved_model.meta_graphs[0].graph_def
        ops = {node.op for node in graph.node}
        ops |= {node.op for function in graph.library.function for node in function.node_def}
        functions = {function.signature.name for function in graph.library.function}
        found.append(sorted(op for op in ops - functions if op_def_registry.get(op) is None))
    print(json.dumps(found))


if __name__ == "__main__":
    _main(sys.argv[1:])
