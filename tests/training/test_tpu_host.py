"""`bert_tf.training.tpu_host`: the TensorFlow version a TPU job can use."""

import pytest

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
