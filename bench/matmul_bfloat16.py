"""One bfloat16 matmul, the same oneDNN primitive in TensorFlow and in PyTorch: which oneDNN each
library bundles, the kernel it picks (`ONEDNN_VERBOSE`), and how long it takes on 1 and 2
threads. BERT-base's first feed-forward matmul at batch 32 x 128 by default,
`[4096, 768] @ [768, 3072]`: TensorFlow's `tf.matmul` on a bfloat16 variable in a `tf.function`,
PyTorch's `torch.nn.functional.linear` (what a `Linear` under autocast runs). Each library runs
in its own process per thread count (thread pools are fixed at start-up); PyTorch runs in
`bench/.venvs/torch` when `bench/setup_envs.sh` built it.

Example:
    .venv/bin/python bench/matmul_bfloat16.py
    .venv/bin/python bench/matmul_bfloat16.py --shape=4096,3072,768 --threads=2
"""

import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ helpers

from absl import app, flags  # noqa: E402

from benchmarking import PEER_PYTHON, cpu_description, machine_load  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("shape", ["4096", "768", "3072"], "m, k, n of `[m, k] @ [k, n]`.")
flags.DEFINE_list("threads", ["1", "2"], "Thread counts, one process per library each.")
flags.DEFINE_integer("calls", 20, "Timed calls per round.")
flags.DEFINE_integer("rounds", 5, "Rounds; the best round's mean per call is reported.")

# argv: threads, m, k, n, calls, rounds. Prints {"seconds": best mean seconds per call}.
_TENSORFLOW = """
import json, os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
threads, m, k, n, calls, rounds = map(int, sys.argv[1:])
tf.config.threading.set_intra_op_parallelism_threads(threads)
x = tf.cast(tf.random.normal([m, k], seed=0), tf.bfloat16)
kernel = tf.Variable(tf.cast(tf.random.normal([k, n], seed=1), tf.bfloat16))
matmul = tf.function(lambda x: tf.matmul(x, kernel))
matmul(x).numpy()
best = float("inf")
for _ in range(rounds):
    start = time.perf_counter()
    for _ in range(calls):
        result = matmul(x)
    result.numpy()
    best = min(best, (time.perf_counter() - start) / calls)
print(json.dumps({"seconds": best}))
"""

_PYTORCH = """
import json, sys, time
import torch
threads, m, k, n, calls, rounds = map(int, sys.argv[1:])
torch.set_num_threads(threads)
x = torch.randn(m, k).to(torch.bfloat16)
weight = torch.randn(n, k).to(torch.bfloat16)  # Linear's [out, in]
with torch.inference_mode():
    torch.nn.functional.linear(x, weight)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            torch.nn.functional.linear(x, weight)
        best = min(best, (time.perf_counter() - start) / calls)
print(json.dumps({"seconds": best}))
"""


def run(python, code, threads, verbose):
    """`(seconds per call, oneDNN verbose lines)` of one process running `code`."""
    shape = [int(n) for n in FLAGS.shape]
    env = {**os.environ, "ONEDNN_VERBOSE": "1" if verbose else "0"}
    result = subprocess.run(
        [python, "-c", code, str(threads), *map(str, shape), str(FLAGS.calls),
         str(FLAGS.rounds)], capture_output=True, text=True, env=env, check=True)
    lines = result.stdout.splitlines()
    return json.loads(lines[-1])["seconds"], [line for line in lines
                                              if line.startswith("onednn_verbose")]


def onednn_summary(lines):
    """`(version, matmul kernel, median exec ms)` from `ONEDNN_VERBOSE=1` output."""
    version = next((m.group(1) for line in lines
                    for m in [re.search(r"oneDNN (v[0-9.]+)", line)] if m), "?")
    executions = [line.split(",") for line in lines if ",exec,cpu,matmul," in line]
    kernel = executions[-1][6] if executions else "?"
    milliseconds = statistics.median(float(fields[-1]) for fields in executions) \
        if executions else float("nan")
    return version, kernel, milliseconds


def main(argv):
    del argv
    m, k, n = (int(x) for x in FLAGS.shape)
    libraries = {"TensorFlow": sys.executable, "PyTorch": PEER_PYTHON["transformers"]}
    print(f"{cpu_description()}; bfloat16 [{m}, {k}] @ [{k}, {n}], best of {FLAGS.rounds} x "
          f"{FLAGS.calls} calls; {machine_load()}")
    print("| library | oneDNN | kernel | threads | ms per call | oneDNN exec ms (median) "
          "| GFLOP/s |")
    print("|---|---|---|---|---|---|---|")
    for threads in (int(t) for t in FLAGS.threads):
        for library, python in libraries.items():
            if not os.path.exists(python):
                print(f"| {library} | {python} missing (run bash bench/setup_envs.sh) |")
                continue
            code = _TENSORFLOW if library == "TensorFlow" else _PYTORCH
            seconds, _ = run(python, code, threads, verbose=False)
            version, kernel, exec_ms = onednn_summary(run(python, code, threads, True)[1])
            print(f"| {library} | {version} | {kernel} | {threads} | {seconds * 1e3:.2f} | "
                  f"{exec_ms:.2f} | {2 * m * k * n / seconds / 1e9:.0f} |", flush=True)
    print(machine_load())


if __name__ == "__main__":
    app.run(main)
