"""`optimized_op_types`: the ops TensorFlow actually runs for a function, after grappler.

Fusions (oneDNN's LayerNorm, a matmul with its bias or mask in the epilogue) happen when
TensorFlow optimises a traced graph, and a harmless-looking change can stop them without
changing a single output; tests that guard them look at the optimised graph. TensorFlow hands
it out only through its run metadata (a private module, used here and nowhere in the package).

Example:
    >>> optimized_op_types(lambda x: layer_norm(x), tf.ones([4, 8]))
    Counter({'_Arg': 3, 'ReadVariableOp': 2, '_MklLayerNorm': 1, '_Retval': 1})
"""

import collections

import tensorflow as tf
from tensorflow.python.eager import context


def optimized_op_types(function, *args):
    """A Counter of the op types in the optimised graph of `tf.function(function)(*args)`,
    traced anew."""
    traced = tf.function(function)
    context.enable_run_metadata()
    try:
        context.export_run_metadata()  # drops what earlier calls left in it
        traced(*args)
        metadata = context.export_run_metadata()
    finally:
        context.disable_run_metadata()
    return collections.Counter(node.op for graph in metadata.function_graphs
                               for node in graph.post_optimization_graph.node)
