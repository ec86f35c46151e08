"""`bert_tf.training.tpu_host`: the TensorFlow version a TPU job can use; libtpu skipped on a
machine without TPU chips."""

import os
import subprocess
import sys

import pytest

from bert_tf.training import tpu_host
from bert_tf.training.tpu_host import tpu_tensorflow_version


@pytest.mark.parametrize("installed, for_tpus", [
    ("2.21.0", "2.20"),  # no tensorflow-tpu 2.21: a TPU runtime cannot match it
    ("3.0.1", "2.20"),
    ("2.20.0", "2.20.0"),
    ("2.19.1", "2.19.1"),
    ("2.12.0", "2.12.0"),  # 2.12 > 2.2: versions compare by number, not as text
])
def test_the_version_for_tpus_is_this_one_unless_no_tpu_build_of_it_exists(installed, for_tpus):
    assert tpu_tensorflow_version(installed) == for_tpus


@pytest.mark.skipif(bool(tpu_host.local_tpu_chips()), reason="a machine with TPU chips")
@pytest.mark.parametrize("preset, tensorflow_first, expected", [
    (None, False, "0"),      # set before bert_tf's first import of TensorFlow
    ("1", False, "1"),       # the user's choice stays
    (None, True, "None"),    # too late once TensorFlow is loaded: left alone
])
def test_importing_bert_tf_skips_libtpu_without_a_tpu_chip(preset, tensorflow_first, expected):
    """tensorflow-tpu's `import tensorflow` waits minutes for the cloud metadata server on a
    machine without TPU chips, in every tool and in a script that imports bert_tf first."""
    environment = {key: value for key, value in os.environ.items()
                   if key != tpu_host.LOAD_LIBRARY_VARIABLE}
    if preset is not None:
        environment[tpu_host.LOAD_LIBRARY_VARIABLE] = preset
    script = ("import os\n" + ("import tensorflow\n" if tensorflow_first else "")
              + "import bert_tf\n"
              f"print(os.environ.get({tpu_host.LOAD_LIBRARY_VARIABLE!r}))\n")
    run = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == [expected]
