"""The preprocess export cuts texts before tokenization as the task exports do: a 10 MB text
gets the ids of its first words, without the memory that tokenizing all of it takes (measured
in a fresh process that imports only tensorflow and tensorflow_text)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.export.preprocessor_export import export_preprocessor
from bert_tf.text.bert_preprocessor import BertPreprocessor
from tests.export.tiny_models import write_vocab

SEQ_LENGTH = 128
SENTENCE = "hello world, the film is a good movie! "
TEN_MB = 10 * 2**20
# Peak RSS growth while the export handles one 10 MB text, printed in MiB: the peak is reset
# just before the call (Linux's clear_refs "5"), because the process's earlier peak (TensorFlow's
# import, the load) can hide any allocation below it. Measured (TF 2.21): 0 MiB for the call (the
# text is cut to 64 KiB), 223 MiB for `tokenize`, which keeps every token; "calibration"
# allocates 64 MiB instead, to show that the probe sees such growth.
MEMORY_PROBE = f"""
import re, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401
assert not any(name.split(".")[0] == "bert_tf" for name in sys.modules)
def status_kib(field):
    with open("/proc/self/status") as status:
        return int(re.search(field + r":\\s+(\\d+) kB", status.read()).group(1))
model = tf.saved_model.load(sys.argv[1])
function = {{"call": model, "tokenize": model.tokenize,
             "calibration": lambda _: np.ones(64 * 2**20, np.uint8)}}[sys.argv[2]]
function(tf.constant([{SENTENCE!r}]))
text = tf.constant([({SENTENCE!r} * ({TEN_MB} // {len(SENTENCE)} + 1))[:{TEN_MB}]])
with open("/proc/self/clear_refs", "w") as clear_refs:
    clear_refs.write("5")
before = status_kib("VmRSS")
function(text)
print((status_kib("VmHWM") - before) / 1024)
"""


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("preprocess")
    export_preprocessor(str(directory / "model"), write_vocab(directory), do_lower_case=True,
                        seq_length=SEQ_LENGTH)
    return str(directory / "model")


def big_text():
    return (SENTENCE * (TEN_MB // len(SENTENCE) + 1))[:TEN_MB]


def test_a_10_mb_text_gets_the_ids_of_its_first_words(export_dir):
    model = tf.saved_model.load(export_dir)
    text = big_text()
    # 128 tokens come from the first ~60 words: 1,000 bytes hold them all.
    prefix = text[:1000]
    reference = BertPreprocessor(os.path.join(os.path.dirname(export_dir), "vocab.txt"),
                                 lower_case=True, seq_length=SEQ_LENGTH)(tf.constant([prefix]))
    assert reference["input_mask"].numpy().sum() == SEQ_LENGTH   # the prefix fills the row
    for outputs in (model(tf.constant([text])),
                    model.signatures["serving_default"](text=tf.constant([text]))):
        for name in ("input_word_ids", "input_mask", "input_type_ids"):
            np.testing.assert_array_equal(outputs[name], reference[name], err_msg=name)


def test_a_10_mb_text_takes_bounded_memory(export_dir):
    def peak_growth_mib(function):
        result = subprocess.run([sys.executable, "-c", MEMORY_PROBE, export_dir, function],
                                capture_output=True, text=True, timeout=600,
                                env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        assert result.returncode == 0, result.stderr[-3000:]
        return float(result.stdout.strip().splitlines()[-1])

    # The calibration and the uncut tokenization show what the probe sees when memory grows.
    assert peak_growth_mib("call") < 32 < min(peak_growth_mib("calibration"),
                                              peak_growth_mib("tokenize"))
