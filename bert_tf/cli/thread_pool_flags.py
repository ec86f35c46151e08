"""--tensorflow_intra_op_parallelism and --tensorflow_inter_op_parallelism
(tensorflow_model_server's names), shared by serve and the fine-tuning tools; see
`bert_tf.thread_pools` for when to set them.

Example (inside a tool):
    def define_flags():
        define_thread_pool_flags()

    def main():
        size_thread_pools_from_flags()   # before the first TensorFlow op
"""

from absl import flags

FLAGS = flags.FLAGS

FLAG_NAMES = ("tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism")


def define_thread_pool_flags(intra_op_note=""):
    """Defines both flags (default 0: TensorFlow's one thread per core); `intra_op_note` ends
    the intra-op flag's help."""
    flags.DEFINE_integer(FLAG_NAMES[0], 0, "Threads one op may use; 0: one per core."
                         + (" " + intra_op_note if intra_op_note else ""), lower_bound=0)
    flags.DEFINE_integer(FLAG_NAMES[1], 0, "Threads running independent ops; 0: one per core.",
                         lower_bound=0)


def size_thread_pools_from_flags():
    """Sizes TensorFlow's thread pools from the flags (`bert_tf.thread_pools`)."""
    from bert_tf.thread_pools import size_thread_pools

    size_thread_pools(FLAGS[FLAG_NAMES[0]].value, FLAGS[FLAG_NAMES[1]].value, FLAG_NAMES)
