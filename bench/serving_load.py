"""Load test of tools/serve.py, plus the in-process latency of the same SavedModel.

Starts `tools/serve.py` in its own process on 127.0.0.1 and sends it `--clients` concurrent
clients x `--requests_per_client` Predict requests of one text each (official gRPC stubs, or
REST with `--protocol=rest`); a `--malformed_fraction` of them are bad requests (wrong input
name, wrong dtype, empty batch, oversized batch, unknown version, unknown model) that must get
their INVALID_ARGUMENT / NOT_FOUND. Every valid answer is checked against the SavedModel called
in process. Reports p50/p99 latency and throughput of the valid requests, then the in-process
latency at batch 1 and 32 (measured first, before the server starts, so that nothing competes
for the cores). Then `--big_text_clients` concurrent requests of one `--big_text_megabytes` text
each: how much the server's resident memory grows (VmRSS from /proc), and whether a valid
request afterwards gets exactly the answer it got before. Everything is bounded: request
counts, per-call timeouts and `--time_limit`.

The model is a text classifier with a `serving_default` signature over raw strings `text` ->
`probabilities` (and `label`), as `tools/export_savedmodel.py --export_type=classifier` writes.
Without `--model_base_path` a BERT-sized stand-in is built first: `BertEncoder` from
`official_configs/<--standin_config>.json` with random weights and a 2-way dense head, reading
whitespace words hashed to ids with `tf.strings.to_hash_bucket_fast`, packed `[CLS] ... [SEP]`
and padded to `--seq_length`.

Example:
    python bench/serving_load.py                                  # BERT-base stand-in, seq 128
    python bench/serving_load.py --model_base_path=/tmp/export/sst2 --protocol=rest
    python bench/serving_load.py --model_base_path=/tmp/export/sst2 --texts_tsv=SST-2/dev.tsv
"""

import concurrent.futures
import json
import os
import re
import statistics
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from absl import app, flags  # noqa: E402
from serve_subprocess import (GrpcClient, RestClient, Server,  # noqa: E402
                              process_memory_bytes)

flags.DEFINE_string("model_base_path", None, "TF Serving layout <base>/<version>/saved_model.pb "
                    "of a text classifier; default: build the stand-in in a temporary directory.")
flags.DEFINE_string("standin_config", "bert_base", "official_configs/ name of the stand-in.")
flags.DEFINE_integer("seq_length", 128, "Stand-in sequence length.")
flags.DEFINE_enum("protocol", "grpc", ["grpc", "rest"], "API the clients use.")
flags.DEFINE_integer("clients", 8, "Concurrent clients.")
flags.DEFINE_integer("requests_per_client", 200, "Requests each client sends.")
flags.DEFINE_float("malformed_fraction", 0.1, "Share of requests that are bad on purpose.")
flags.DEFINE_integer("max_batch_size", 32, "Server --max_batch_size.")
flags.DEFINE_integer("batch_timeout_micros", 2000, "Server --batch_timeout_micros.")
flags.DEFINE_integer("num_batch_threads", 1, "Server --num_batch_threads.")
flags.DEFINE_integer("tensorflow_intra_op_parallelism", 0,
                     "Server --tensorflow_intra_op_parallelism.")
flags.DEFINE_integer("inprocess_iterations", 10, "Timed calls per batch size in process.")
flags.DEFINE_float("time_limit", 1200, "Seconds after which clients stop sending.")
flags.DEFINE_integer("big_text_clients", 16, "Concurrent requests of one big text each, after "
                     "the load (0: none).")
flags.DEFINE_integer("big_text_megabytes", 10, "Size of each big text.")
flags.DEFINE_string("texts_tsv", None, "A TSV with a header whose `sentence` column gives the "
                    "request texts (GLUE's SST-2 dev.tsv); default: 64 synthetic review-like "
                    "texts of 6 to 160 words.")
flags.DEFINE_string("output_json", None, "Also write the results here.")
FLAGS = flags.FLAGS

WORDS = ("the film is a quiet and moving portrait of grief that never quite earns its long "
         "running time but the lead performance is remarkable and the score lingers").split()
MALFORMED_KINDS = ("wrong input name", "wrong dtype", "empty batch", "oversized batch",
                   "unknown version", "unknown model")


def sentences(count=64):
    """Deterministic review-like texts of 6 to 160 words (so some truncate at seq 128)."""
    return [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(6 + (i * 37) % 155))
            for i in range(count)]


def tsv_sentences(path):
    """The `sentence` column of a GLUE-style TSV with a header (SST-2, CoLA's test file)."""
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    column = rows[0].index("sentence")
    return [row[column] for row in rows[1:]]


def batched_probabilities(serve, texts, batch_size=32):
    """`{text: probabilities}` from `serve`, in batches (all 872 SST-2 dev sentences in one call
    at seq 128 would take gigabytes of attention scores)."""
    import tensorflow as tf
    expected = {}
    for start in range(0, len(texts), batch_size):
        batch = texts[start:start + batch_size]
        expected.update(zip(batch, serve(text=tf.constant(batch))["probabilities"].numpy()))
    return expected


def build_standin(base_path, config_name, seq_length):
    """Writes the BERT-sized stand-in classifier as <base_path>/1 and returns base_path."""
    import keras
    import tensorflow as tf

    import bert_tf

    config = bert_tf.BertConfig.from_name(config_name)
    encoder = bert_tf.BertEncoder(config)
    head = keras.layers.Dense(2, name="classifier")
    head.build((None, config.hidden_size))

    class StandinClassifier(tf.Module):
        def __init__(self):
            super().__init__()
            self.encoder, self.head = encoder, head

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            words = tf.strings.split(tf.strings.lower(text))
            # Ids 0..999 are left to [PAD], [CLS], [SEP] and the like, as in BERT's vocab.
            ids = tf.strings.to_hash_bucket_fast(words, config.vocab_size - 1000) + 1000
            ids = tf.cast(ids[:, :seq_length - 2], tf.int32)
            batch = tf.shape(text)[:1]
            ids = tf.concat([tf.fill(tf.concat([batch, [1]], 0), 101), ids,
                             tf.fill(tf.concat([batch, [1]], 0), 102)], axis=1)
            word_ids = ids.to_tensor(0, shape=[None, seq_length])
            outputs = self.encoder({"input_word_ids": word_ids,
                                    "input_mask": tf.cast(word_ids > 0, tf.int32),
                                    "input_type_ids": tf.zeros_like(word_ids)}, training=False)
            probabilities = tf.nn.softmax(self.head(outputs["pooled_output"]))
            return {"probabilities": probabilities,
                    "label": tf.argmax(probabilities, axis=-1, output_type=tf.int32)}

    module = StandinClassifier()
    tf.saved_model.save(module, os.path.join(base_path, "1"),
                        signatures={"serving_default": module.serve})
    return base_path


def newest_version_path(base_path):
    versions = [int(name) for name in os.listdir(base_path) if re.fullmatch(r"[0-9]+", name)]
    return os.path.join(base_path, str(max(versions)))


def inprocess_latency(serve, texts, batch_size, iterations):
    """Median and p90 milliseconds of `iterations` direct calls at `batch_size`, after 2
    warm-up calls."""
    import tensorflow as tf
    batch = tf.constant((texts * (batch_size // len(texts) + 1))[:batch_size])
    for _ in range(2):
        serve(text=batch)
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        serve(text=batch)["probabilities"].numpy()
        times.append((time.perf_counter() - start) * 1000)
    return {"batch_size": batch_size, "median_ms": statistics.median(times),
            "p90_ms": percentile(times, 90), "iterations": iterations}


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def batching_flags(**overrides):
    """tools/serve.py's batching and thread-pool flags: this run's, or `overrides`' values."""
    return [f"--{name}={overrides.get(name, FLAGS[name].value)}" for name in (
        "max_batch_size", "batch_timeout_micros", "num_batch_threads",
        "tensorflow_intra_op_parallelism")]


def malformed_request(kind, text, max_batch_size):
    """(inputs, model_name, version, expected status) of one bad request of `kind`."""
    import numpy as np
    return {
        "wrong input name": ({"sentence": np.array([text], object)}, None, None,
                             "INVALID_ARGUMENT"),
        "wrong dtype": ({"text": np.array([1.0], np.float32)}, None, None, "INVALID_ARGUMENT"),
        "empty batch": ({"text": np.array([], object)}, None, None, "INVALID_ARGUMENT"),
        "oversized batch": ({"text": np.array([text] * (max_batch_size + 1), object)}, None,
                            None, "INVALID_ARGUMENT"),
        "unknown version": ({"text": np.array([text], object)}, None, 999999, "NOT_FOUND"),
        "unknown model": ({"text": np.array([text], object)}, "no_such_model", None,
                          "NOT_FOUND"),
    }[kind]


def run_load(client_factory, texts, expected, deadline):
    """Runs every client; returns the per-request records (kind, ok, latency seconds)."""
    import numpy as np
    every = max(1, round(1 / FLAGS.malformed_fraction)) if FLAGS.malformed_fraction else 0

    def one_client(index):
        client = client_factory()
        records = []
        try:
            for i in range(FLAGS.requests_per_client):
                if time.monotonic() > deadline:
                    break
                n = index * FLAGS.requests_per_client + i
                text = texts[n % len(texts)]
                if every and n % every == every - 1:
                    kind = MALFORMED_KINDS[(n // every) % len(MALFORMED_KINDS)]
                    inputs, model_name, version, want = malformed_request(
                        kind, text, FLAGS.max_batch_size)
                    outputs, status = client.predict(inputs, model_name, version)
                    records.append((kind, status == want, None, status))
                    continue
                start = time.perf_counter()
                outputs, status = client.predict({"text": np.array([text], object)})
                latency = time.perf_counter() - start
                ok = status is None and _matches(outputs, expected[text])
                records.append(("valid", ok, latency, status))
        finally:
            client.close()
        return records

    with concurrent.futures.ThreadPoolExecutor(FLAGS.clients) as pool:
        return [r for records in pool.map(one_client, range(FLAGS.clients)) for r in records]


def warm_up(client_factory, texts):
    """Two untimed rounds of concurrent requests: the server's first calls pay one-off costs
    (kernel selection, memory pools) that a steady-state latency should not include."""
    import numpy as np

    def call(i):
        client = client_factory()
        try:
            client.predict({"text": np.array([texts[i % len(texts)]], object)})
        finally:
            client.close()

    with concurrent.futures.ThreadPoolExecutor(FLAGS.clients) as pool:
        for _ in range(2):
            list(pool.map(call, range(FLAGS.clients)))


def _matches(outputs, expected):
    import numpy as np
    probabilities = np.asarray(outputs["probabilities"], np.float32)
    # Batching changes matmul shapes, so float32 round-off differs from the single-row call.
    return (np.allclose(probabilities, expected, atol=1e-4)
            and int(np.asarray(outputs["label"])[0]) == int(np.argmax(probabilities[0])))


def big_texts(client_factory, server_pid, text):
    """Sends `--big_text_clients` concurrent requests of one big text each; returns the
    server's RSS growth, their statuses, and whether `text` then gets its earlier answer."""
    import numpy as np

    client = client_factory()
    before_answer, _ = client.predict({"text": [text]})
    words = " ".join(WORDS) + " "
    big = (words * (FLAGS.big_text_megabytes * 2**20 // len(words) + 1))[
        :FLAGS.big_text_megabytes * 2**20]
    rss_before = process_memory_bytes(server_pid, "VmRSS")

    def one(_):
        outputs, status = client_factory().predict({"text": [big]})
        return "OK" if outputs is not None else status

    with concurrent.futures.ThreadPoolExecutor(FLAGS.big_text_clients) as pool:
        statuses = list(pool.map(one, range(FLAGS.big_text_clients)))
    rss_after = process_memory_bytes(server_pid, "VmRSS")
    after_answer, _ = client.predict({"text": [text]})
    client.close()
    return {"big_text_requests": FLAGS.big_text_clients,
            "big_text_megabytes": FLAGS.big_text_megabytes,
            "big_text_statuses": {s: statuses.count(s) for s in sorted(set(statuses))},
            "rss_before_mib": rss_before / 2**20, "rss_after_mib": rss_after / 2**20,
            "rss_growth_mib": (rss_after - rss_before) / 2**20,
            "same_answer_after": all(np.array_equal(before_answer[name], after_answer[name])
                                     for name in before_answer)}


def summarize(records, wall_seconds):
    valid = [r for r in records if r[0] == "valid"]
    latencies = [r[2] * 1000 for r in valid if r[1]]
    malformed = [r for r in records if r[0] != "valid"]
    return {
        "requests": len(records), "valid": len(valid),
        "valid_failures": sum(not r[1] for r in valid),
        "valid_failure_statuses": sorted({str(r[3]) for r in valid if not r[1]}),
        "malformed": len(malformed),
        "malformed_wrong_status": sum(not r[1] for r in malformed),
        "p50_ms": percentile(latencies, 50) if latencies else None,
        "p99_ms": percentile(latencies, 99) if latencies else None,
        "mean_ms": statistics.mean(latencies) if latencies else None,
        "valid_per_second": len(latencies) / wall_seconds,
        "requests_per_second": len(records) / wall_seconds,
        "wall_seconds": wall_seconds,
    }


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the WordPiece ops of real exports)

    with tempfile.TemporaryDirectory() as scratch:
        base_path = FLAGS.model_base_path
        if base_path is None:
            print(f"Building the {FLAGS.standin_config} stand-in (seq {FLAGS.seq_length})...",
                  flush=True)
            base_path = build_standin(os.path.join(scratch, "standin"), FLAGS.standin_config,
                                      FLAGS.seq_length)
        model_name = os.path.basename(os.path.normpath(base_path))
        serve = tf.saved_model.load(newest_version_path(base_path)).signatures["serving_default"]
        texts = tsv_sentences(FLAGS.texts_tsv) if FLAGS.texts_tsv else sentences()
        expected = batched_probabilities(serve, texts)
        inprocess = [inprocess_latency(serve, texts, batch_size, FLAGS.inprocess_iterations)
                     for batch_size in (1, 32)]
        for row in inprocess:
            print(f"in-process batch {row['batch_size']}: median {row['median_ms']:.1f} ms, "
                  f"p90 {row['p90_ms']:.1f} ms", flush=True)

        server = Server(base_path, model_name, batching_flags())
        try:
            if FLAGS.protocol == "grpc":
                def client_factory():
                    return GrpcClient(server.port, model_name)
            else:
                def client_factory():
                    return RestClient(server.rest_port, model_name)
            warm_up(client_factory, texts)
            start = time.monotonic()
            records = run_load(client_factory, texts, expected, start + FLAGS.time_limit)
            result = summarize(records, time.monotonic() - start)
            if FLAGS.big_text_clients:
                result.update(big_texts(client_factory, server.process.pid, texts[0]))
        finally:
            server.stop()

    result.update(protocol=FLAGS.protocol, clients=FLAGS.clients,
                  requests_per_client=FLAGS.requests_per_client,
                  max_batch_size=FLAGS.max_batch_size,
                  batch_timeout_micros=FLAGS.batch_timeout_micros,
                  num_batch_threads=FLAGS.num_batch_threads,
                  tensorflow_intra_op_parallelism=FLAGS.tensorflow_intra_op_parallelism,
                  model=FLAGS.model_base_path or f"{FLAGS.standin_config} stand-in, seq "
                                                 f"{FLAGS.seq_length}",
                  texts=FLAGS.texts_tsv or "synthetic",
                  inprocess=inprocess)
    print(json.dumps(result, indent=2))
    if FLAGS.output_json:
        with open(FLAGS.output_json, "w") as f:
            json.dump(result, f, indent=2)
    # The load test's own pass/fail: every valid request answered correctly.
    return 1 if (result["valid_failures"] or result["malformed_wrong_status"]
                 or not result.get("same_answer_after", True)) else 0


if __name__ == "__main__":
    app.run(main)
