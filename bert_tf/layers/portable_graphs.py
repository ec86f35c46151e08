"""Graphs for SavedModels: layers traced inside `portable_graphs()` use TensorFlow's core ops only.

Some inference forms are faster in this process but put an XLA-compiled function into the
graph (the exact GELU after an AMX matmul, see `BertTransformerBlock`). A SavedModel has to
load where XLA may be missing (TF Serving 2.12-2.20 binaries), so the export functions trace
and save under this scope, and the layers then keep forms built from core ops.

The scope is read when a function is traced, like `real_tokens_only()`. Every
`tf.saved_model.save` counts as inside it too (it traces the functions it saves again, in its
save context): a user's own model around an encoder, exported with Keras' `Model.export`,
served the XLA-compiled GELU otherwise.

Example:
    >>> with portable_graphs():
    ...     tf.saved_model.save(module, export_dir)   # no XLA function in the graph
"""

from tensorflow.python.saved_model import save_context

from bert_tf.layers.trace_scope import TraceScope

_SCOPE = TraceScope()


def portable_graphs():
    """Layers traced inside build graphs of core TensorFlow ops only."""
    return _SCOPE.entered()


def portable_graphs_enabled():
    """Whether the calling thread is inside `portable_graphs()` or `tf.saved_model.save`."""
    return _SCOPE.active() or save_context.in_save_context()
