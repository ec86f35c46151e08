"""Reading checkpoint files so that a damaged one is a one-line error naming the file.

Left alone, a truncated download or a file that is not what its name says fails deep inside
TensorFlow or safetensors with a message that names no file: `not an sstable (bad magic
number)`, `Read less bytes than requested`, `SafetensorError: header too large`. The readers
here name the file, what is wrong with it and the likely cause.

Example:
    >>> reader = open_tf_checkpoint("/tmp/broken/ckpt-1")
    DamagedCheckpointError: /tmp/broken/ckpt-1.index is not a readable TensorFlow checkpoint
    index (not an sstable (bad magic number)); the file is truncated or not a checkpoint
"""

import contextlib
import glob

import tensorflow as tf

from bert_tf.checkpoints.errors import DamagedCheckpointError


def _first_line(error):
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    return message.strip().splitlines()[0]


class _TfCheckpointReader:
    """`tf.train.load_checkpoint`'s reader whose tensor reads name the file on failure."""

    def __init__(self, prefix, reader):
        self.prefix = prefix
        self._reader = reader

    def get_variable_to_shape_map(self):
        return self._reader.get_variable_to_shape_map()

    def get_tensor(self, key):
        try:
            return self._reader.get_tensor(key)
        except (tf.errors.OpError, IndexError, ValueError) as error:
            data_files = ", ".join(sorted(glob.glob(glob.escape(self.prefix) + ".data-*")))
            raise DamagedCheckpointError(
                f"{data_files or self.prefix + '.data-*'}: cannot read tensor {key} "
                f"({_first_line(error)}); the checkpoint's data file is truncated or "
                f"corrupt") from None


def open_tf_checkpoint(prefix):
    """A reader of the TF checkpoint `prefix` (`get_variable_to_shape_map`, `get_tensor`).

    Raises DamagedCheckpointError naming `prefix.index` when the index is unreadable, and,
    from `get_tensor`, naming the data file when a tensor cannot be read.
    """
    try:
        reader = tf.train.load_checkpoint(prefix)
    except tf.errors.NotFoundError:
        raise
    except (tf.errors.OpError, ValueError) as error:
        raise DamagedCheckpointError(
            f"{prefix}.index is not a readable TensorFlow checkpoint index "
            f"({_first_line(error)}); the file is truncated or not a checkpoint") from None
    return _TfCheckpointReader(prefix, reader)


@contextlib.contextmanager
def safetensors_errors_name(path):
    """Turns safetensors' errors inside the `with` block into a DamagedCheckpointError
    naming `path`."""
    from safetensors import SafetensorError
    try:
        yield
    except SafetensorError as error:
        raise DamagedCheckpointError(
            f"{path} is not a valid safetensors file ({_first_line(error)}); the file is "
            f"truncated (an interrupted download?), corrupt, or not safetensors") from None
