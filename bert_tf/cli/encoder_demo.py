"""Runs a BERT encoder built from a config on a batch of ids and prints what comes out.

A placeholder main job until pre-training lands: it proves the install works end to end.

Example:
    python tools/encoder_demo.py --bert_config_file=official_configs/bert_mini.json
"""

import time

from absl import flags

from bert_tf.cli.app import run_tool

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string("bert_config_file", "official_configs/bert_tiny.json", "bert_config.json")
    flags.DEFINE_integer("batch_size", 8, "Sequences per batch.")
    flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")


def main():
    import numpy as np
    import tensorflow as tf

    from bert_tf import BertConfig, BertEncoder

    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    encoder = BertEncoder(config)
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, config.vocab_size, (FLAGS.batch_size, FLAGS.seq_length))
    inputs = {"input_word_ids": tf.constant(ids, tf.int32),
              "input_mask": tf.ones_like(ids, tf.int32),
              "input_type_ids": tf.zeros_like(ids, tf.int32)}
    forward = tf.function(encoder, jit_compile=True)
    forward(inputs)
    start = time.perf_counter()
    outputs = forward(inputs)
    elapsed = time.perf_counter() - start
    print(f"{FLAGS.bert_config_file}: {encoder.count_params():,} parameters")
    for key, value in outputs.items():
        shapes = [tuple(v.shape) for v in value] if isinstance(value, list) else tuple(value.shape)
        print(f"  {key}: {shapes}")
    print(f"  forward pass: {FLAGS.batch_size / elapsed:.1f} sequences/s (XLA, float32)")


def run():
    run_tool(main, define_flags)
