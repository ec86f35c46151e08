import os
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_tf.thread_pools import size_thread_pools
from tests.resources import REPO_ROOT


def test_pools_sized_before_the_first_op_take_effect():
    code = ("from bert_tf.thread_pools import size_thread_pools\n"
            "size_thread_pools(1, 3)\n"
            "import tensorflow as tf\n"
            "tf.constant(1.0) + 1\n"
            "print(tf.config.threading.get_intra_op_parallelism_threads(),"
            " tf.config.threading.get_inter_op_parallelism_threads())\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["1", "3"]


def test_too_late_or_negative_is_an_error_naming_the_setting():
    tf.constant(1.0) + 1  # TensorFlow runs: its pools are fixed
    late = tf.config.threading.get_intra_op_parallelism_threads() + 3
    with pytest.raises(ValueError, match=f"^--threads={late} cannot take effect: TensorFlow "
                                         "already ran in this process"):
        size_thread_pools(late, 0, names=("--threads", "--other"))
    with pytest.raises(ValueError, match="--other must be >= 0"):
        size_thread_pools(0, -1, names=("--threads", "--other"))
    size_thread_pools(0, 0)  # 0 leaves both alone: no error


@pytest.mark.parametrize("intra_op, inter_op, environment, expected", [
    (1, 0, {}, "True False"), (1, 2, {}, "True False"), (0, 0, {}, "False True"),
    (2, 0, {}, "False True"), (2, 1, {}, "False False"), (1, 1, {}, "False False"),
    (0, 0, {"TF_NUM_INTRAOP_THREADS": "1"}, "True False"),
    (0, 0, {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}, "False False")])
def test_ops_side_by_side_on_cores_and_cores_for_two_ops_at_once_follow_the_pools(
        intra_op, inter_op, environment, expected):
    """`ops_side_by_side_on_cores`: one thread per op and several ops at once;
    `cores_for_two_ops_at_once`: several threads in both pools."""
    # On this package's 2-core (or larger) CI machines; 0 is TensorFlow's default (the
    # environment's TF_NUM_*_THREADS, else one per core).
    code = ("from bert_tf.thread_pools import (cores_for_two_ops_at_once,\n"
            "                                  ops_side_by_side_on_cores, size_thread_pools)\n"
            f"size_thread_pools({intra_op}, {inter_op})\n"
            "print(ops_side_by_side_on_cores(), cores_for_two_ops_at_once())\n")
    env = {name: value for name, value in os.environ.items() if not name.startswith("TF_NUM_")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=300, env={**env, **environment})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == expected.split()
