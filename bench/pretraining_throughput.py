"""Pre-training step throughput of bert_tf against keras-hub's `BertMaskedLM`, with MFU.

For each config, on the same batch (32 sequences of 128 random ids, 20 masked positions, all
real; the config's vocabulary, 30522 for the official ones), interleaved round by round so that
both systems see the same machine load, with XLA ("xla") and without ("plain"):
  * bert_tf: one step of `PretrainingTrainer` (what `tools/run_pretraining.py` runs, here with
    `--strategy=one_device`; AdamW with weight decay and clipping, masked LM + next sentence),
    in this process;
  * keras-hub: one step of `BertMaskedLM` (TF 2.20, `bench/.venvs/keras_hub`) through Keras'
    train function (`compile(jit_compile=...)` + `train_on_batch`, what `fit` runs per step):
    AdamW with weight decay and clipping, masked LM only;
  * a large matmul in --dtype, plain and XLA: the best is the machine's measured peak, the
    denominator of MFU.

--dtype=bfloat16 runs both systems under mixed precision (bf16 matmuls, float32 variables).

Throughput is sequences/s of the best single step; "vs keras-hub" divides by keras-hub's best
mode on that config, and the target line compares each system at its best mode. FLOPs of a
step are 3 x those of the forward pass (the backward pass costs two forwards) counting the
encoder layers' matmuls and the
masked-LM head at the predicted positions (transform H x H, decoder H x vocab); embeddings,
LayerNorm, softmax and the tiny next-sentence head are left out, so MFU is "useful matmul work
/ measured matmul peak".

Example (full run, then a smoke test):
    .venv/bin/python bench/pretraining_throughput.py       # (24 GB: one config a run)
    .venv/bin/python bench/pretraining_throughput.py --configs=bert_tiny --rounds=1 \\
        --steps=2
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ helpers

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402
from benchmarking import (MATMUL_PASSES, PEER_PYTHON, Peer, config_by_name,  # noqa: E402
                          encoder_flops_per_sequence, machine_load, matmul_timer, stopwatch)

from bert_tf.training import distribution  # noqa: E402
from bert_tf.training.distribution import input_iterator  # noqa: E402
from bert_tf.training.pretraining_trainer import PretrainingTrainer  # noqa: E402
from bert_tf.training.strategy_names import STRATEGIES  # noqa: E402

SYSTEMS = ("bert_tf", "keras_hub")
TARGET_RATIO = 1.3  # issue 4: bert_tf >= 1.3x keras-hub

FLAGS = flags.FLAGS
flags.DEFINE_list("configs", ["bert_mini", "bert_base"], "Names of official_configs/*.json.")
flags.DEFINE_list("systems", list(SYSTEMS), "Which of bert_tf, keras_hub to run.")
flags.DEFINE_list("modes", ["plain", "xla"], "tf.function without (plain) and/or with XLA.")
flags.DEFINE_integer("batch_size", 32, "Sequences per step.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.DEFINE_integer("rounds", 3, "Interleaved rounds; every measurement is the best over all.")
flags.DEFINE_integer("steps", 3, "Timed steps per system and round.")
flags.DEFINE_integer("matmul_size", 4096, "n of the n x n x n matmul that measures the peak.")
flags.DEFINE_enum("strategy", "one_device", STRATEGIES, "bert_tf's tf.distribute strategy "
                  "(one device: a MirroredStrategy over one CPU only adds overhead).")
flags.DEFINE_float("learning_rate", 1e-4, "Learning rate of both optimizers.")
flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "Compute dtype of both systems "
                  "(bfloat16: our --mixed_precision=bfloat16, keras-hub's mixed_bfloat16).")
flags.DEFINE_string("output_json", None, "Also write all results to this JSON file.")


def pretraining_flops_per_sequence(config, seq_length, predictions):
    """Matmul FLOPs of one training step per sequence: 3 x (encoder layers + masked-LM head at
    `predictions` positions).

    Example:
        >>> round(pretraining_flops_per_sequence(BertConfig.from_name("bert_base"), 128, 20)
        ...       / 1e9, 1)
        69.9
    """
    h, v = config.hidden_size, config.vocab_size
    head = 2 * predictions * (h * h + h * v)
    return 3 * (encoder_flops_per_sequence(config, seq_length) + head)


def make_batch(config, batch_size, seq_length, predictions, seed=0):
    """A pre-training batch (numpy, the trainer's feature names): full-length random ids in
    two segments, `predictions` distinct masked positions per row (never [CLS] at 0), random
    labels, all weights 1, random next-sentence labels."""
    rng = np.random.default_rng(seed)
    shape = (batch_size, seq_length)
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq_length), predictions,
                                             replace=False) for _ in range(batch_size)]), axis=1)
    return {
        "input_word_ids": rng.integers(5, config.vocab_size, size=shape, dtype=np.int32),
        "input_mask": np.ones(shape, np.int32),
        "input_type_ids": np.broadcast_to(np.arange(seq_length) >= seq_length // 2,
                                          shape).astype(np.int32),
        "masked_lm_positions": positions.astype(np.int32),
        "masked_lm_ids": rng.integers(5, config.vocab_size, size=positions.shape,
                                      dtype=np.int32),
        "masked_lm_weights": np.ones(positions.shape, np.float32),
        "next_sentence_labels": rng.integers(0, 2, size=batch_size, dtype=np.int32),
    }


def our_step_timer(strategy, config, batch, mode):
    """A timer of one `PretrainingTrainer` step on `batch` (repeated), after warm-up."""
    trainer = PretrainingTrainer(
        strategy, config, global_batch_size=FLAGS.batch_size, num_train_steps=10**9,
        learning_rate=FLAGS.learning_rate, jit_compile=mode == "xla",
        mixed_precision=FLAGS.dtype)
    features = {name: tf.constant(value) for name, value in batch.items()}
    iterator = input_iterator(strategy,
                              lambda context: tf.data.Dataset.from_tensors(features).repeat())
    one_step = tf.constant(1)
    for _ in range(2):  # tracing, XLA compilation, optimizer slots
        trainer.train_steps(iterator, one_step).numpy()
    return stopwatch(lambda: trainer.train_steps(iterator, one_step).numpy())


def keras_hub_step_timer(peer, config_name, config, batch, mode):
    key = f"{config_name}/pretraining/{mode}"
    peer.request(op="prepare", task="pretraining", key=key, config=config.to_dict(),
                 mode=mode, learning_rate=FLAGS.learning_rate, dtype=FLAGS.dtype,
                 inputs={name: value.tolist() for name, value in batch.items()})
    return peer.timer(key)


def run_benchmark():
    """Prepares every measurement, then times them interleaved; returns rows, notes, versions."""
    unknown = set(FLAGS.systems) - set(SYSTEMS)
    if unknown:
        raise app.UsageError(f"--systems: unknown {sorted(unknown)}; known: {SYSTEMS}")
    if not FLAGS.modes or set(FLAGS.modes) - {"plain", "xla"}:
        raise app.UsageError(f"--modes: plain and/or xla, got {FLAGS.modes}")
    strategy = distribution.create_strategy(FLAGS.strategy)
    notes, peer = [], None
    if "keras_hub" in FLAGS.systems:
        if os.path.exists(PEER_PYTHON["keras_hub"]):
            peer = Peer("keras_hub")
        else:
            notes.append(f"keras_hub: skipped, {PEER_PYTHON['keras_hub']} is missing "
                         "(run `bash bench/setup_envs.sh`)")
    versions = {"bert_tf": {"tensorflow": tf.__version__, "strategy": FLAGS.strategy}}
    if peer:
        versions["keras_hub"] = peer.versions

    rows, timers = [], {}
    for mode in ("plain", "xla"):
        row = dict(system="matmul", config=f"{FLAGS.matmul_size}^3", mode=mode,
                   flops=2 * FLAGS.matmul_size ** 3, best=float("inf"))
        timers[id(row)] = matmul_timer(FLAGS.dtype, mode, FLAGS.matmul_size)
        rows.append(row)
    for config_name in FLAGS.configs:
        config = config_by_name(config_name)
        if FLAGS.seq_length > config.max_position_embeddings:
            raise app.UsageError(f"--seq_length exceeds {config_name}'s max_position_embeddings")
        batch = make_batch(config, FLAGS.batch_size, FLAGS.seq_length,
                           FLAGS.max_predictions_per_seq)
        flops = FLAGS.batch_size * pretraining_flops_per_sequence(
            config, FLAGS.seq_length, FLAGS.max_predictions_per_seq)
        for system in FLAGS.systems:
            if system == "keras_hub" and not peer:
                continue
            for mode in FLAGS.modes:
                row = dict(system=system, config=config_name, mode=mode, flops=flops,
                           best=float("inf"))
                print(f"preparing {system} {config_name} {mode}", flush=True)
                try:
                    timers[id(row)] = (
                        our_step_timer(strategy, config, batch, mode) if system == "bert_tf"
                        else keras_hub_step_timer(peer, config_name, config, batch, mode))
                except Exception as e:  # reported in the table
                    row["error"] = str(e).splitlines()[0][:120]
                rows.append(row)

    for round_index in range(FLAGS.rounds):
        for row in rows:
            if id(row) in timers:
                passes = MATMUL_PASSES if row["system"] == "matmul" else FLAGS.steps
                for _ in range(passes):
                    row["best"] = min(row["best"], timers[id(row)]())
        print(f"round {round_index + 1}/{FLAGS.rounds} done, {machine_load()}", flush=True)
    if peer:
        peer.close()
    return rows, notes, versions


def summarise(rows):
    """Adds seq/s, GFLOP/s, MFU and the ratio to keras-hub's best mode to the rows; returns the
    peak and `{(system, config): best seq/s over the modes}`."""
    peak = max((row["flops"] / row["best"] / 1e9 for row in rows
                if row["system"] == "matmul" and row["best"] != float("inf")), default=None)
    best_of = {}
    for row in rows:
        if row["best"] == float("inf") or row["system"] == "matmul":
            continue
        row["seq_per_s"] = FLAGS.batch_size / row["best"]
        row["gflops"] = row["flops"] / row["best"] / 1e9
        row["mfu"] = row["gflops"] / peak if peak else None
        key = (row["system"], row["config"])
        best_of[key] = max(best_of.get(key, 0.0), row["seq_per_s"])
    for row in rows:
        reference = best_of.get(("keras_hub", row["config"]))
        if "seq_per_s" in row and reference:
            row["vs_keras_hub"] = row["seq_per_s"] / reference
    return peak, best_of


def format_table(rows, peak, best_of):
    def number(value, pattern):
        return "" if value is None else pattern.format(value)
    header = ("config", "system", "mode", "seq/s", "step s", "GFLOP/s", "MFU", "vs keras-hub")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        if row["system"] == "matmul":
            continue
        if "error" in row:
            cells = [row["config"], row["system"], row["mode"], f"failed: {row['error']}", "",
                     "", "", ""]
        else:
            cells = [row["config"], row["system"], row["mode"],
                     number(row.get("seq_per_s"), "{:.2f}"),
                     number(row["best"], "{:.3f}"), number(row.get("gflops"), "{:.0f}"),
                     number(row.get("mfu"), "{:.0%}"), number(row.get("vs_keras_hub"),
                                                              "{:.2f}x")]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(f"\n{FLAGS.dtype} matmul peak {number(peak, '{:.0f}')} GFLOP/s (best of plain "
                 f"and XLA {FLAGS.matmul_size}^3)")
    for config_name in FLAGS.configs:
        ours, theirs = best_of.get(("bert_tf", config_name)), best_of.get(("keras_hub",
                                                                           config_name))
        if ours and theirs:
            ratio = ours / theirs
            lines.append(f"{config_name}: bert_tf >= {TARGET_RATIO}x keras-hub (best modes): "
                         f"{ratio:.2f}x {'met' if ratio >= TARGET_RATIO else 'MISSED'}")
    return "\n".join(lines)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    start_load = machine_load()
    rows, notes, versions = run_benchmark()
    peak, best_of = summarise(rows)
    print()
    print(f"pre-training step, batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, "
          f"{FLAGS.max_predictions_per_seq} predictions, {FLAGS.dtype}; best of "
          f"{FLAGS.rounds * FLAGS.steps} steps; {os.cpu_count()} CPUs; {start_load} at start, "
          f"{machine_load()} at end")
    print("versions: " + "; ".join(f"{s}: {v}" for s, v in versions.items()))
    print(format_table(rows, peak, best_of))
    for note in notes:
        print(note)
    if FLAGS.output_json:
        with open(FLAGS.output_json, "w", encoding="utf-8") as f:
            json.dump({"flags": {name: FLAGS[name].value for name in (
                "configs", "systems", "modes", "batch_size", "seq_length",
                "max_predictions_per_seq", "rounds", "steps", "matmul_size", "strategy",
                "learning_rate", "dtype")}, "load": [start_load, machine_load()],
                "versions": versions, "peak_gflops": peak, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    app.run(main)
