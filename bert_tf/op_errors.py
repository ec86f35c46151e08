"""The message of a TensorFlow op error without the op's context around it, which speaks of
graph internals, not of the user's input.

Example:
    >>> bare_message(tf.errors.DataLossError(None, None, "{{function_node __wrapped__Iterator"
    ...     "GetNext_device_/job:localhost}} corrupted record at 39 [Op:IteratorGetNext]"))
    'corrupted record at 39'
"""

import re

# "{{function_node ...}} " before the message, the graph's "Graph execution error: Detected at
# node ... defined at: File ..." stack before it and " [[{{node ...}}]] [Op:...]" after it.
_OP_CONTEXT = re.compile(r"^(?:Graph execution error:.*\n\n|\{\{function_node [^}]*\}\}\s*)"
                         r"|\s*\[\[\{\{node .*$|\s*\[Op:.*$", re.DOTALL)


def bare_message(error):
    """`error`'s message (a `tf.errors.OpError` keeps it apart from the op's context), without
    that context."""
    message = getattr(error, "message", None)
    return _OP_CONTEXT.sub("", message if isinstance(message, str) else str(error))
