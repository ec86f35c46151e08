"""`bert_tf.op_errors`: TensorFlow's message without the op's context."""

import tensorflow as tf

from bert_tf.op_errors import bare_message


def test_the_ops_context_is_left_out():
    with_context = tf.errors.DataLossError(
        None, None, "{{function_node __wrapped__IteratorGetNext_output_types_1_device_/job:"
                    "localhost/replica:0/task:0/device:CPU:0}} corrupted record at 39 "
                    "[Op:IteratorGetNext] name: ")
    assert bare_message(with_context) == "corrupted record at 39"
    graph = tf.errors.InvalidArgumentError(
        None, None, "Graph execution error:\n\nDetected at node x defined at (most recent call "
                    "last):\n  File \"a.py\", line 1\n\nindices[0] = 9 is not in [0, 4)\n\t "
                    "[[{{node x}}]] [Op:__inference_step_12]")
    assert bare_message(graph) == "indices[0] = 9 is not in [0, 4)"
    assert bare_message(ValueError("plain")) == "plain"


def test_a_real_op_error_keeps_its_cause_only():
    try:
        tf.gather(tf.zeros([4]), [9])
    except tf.errors.InvalidArgumentError as error:
        message = bare_message(error)
    assert "is not in [0, 4)" in message and "[Op:" not in message, message
