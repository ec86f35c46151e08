"""Convergence of pre-training: held-out masked-LM accuracy of `bert_mini` pre-trained from
scratch on the Gutenberg sample, against wall-clock time (issue 4: >= 0.30 within 30 minutes
on 2 cores). Writes the curve as CSV and PNG (docs/pretraining_convergence.{csv,png}).

1. The books (`--corpus`) become documents of sentences (`bert_tf.data.prose.read_book`; lines
   that are not UTF-8, e.g. in chesterton-ball.txt and shakespeare-caesar.txt, which are
   latin-1, are skipped and counted), cut into passages of 200 sentences, one in 20 held out.
2. A WordPiece vocabulary is learned from the training text and `create_pretraining_data`'s
   records are written (`bert_tf.data.pretraining_inputs`), in `--output_dir/data`.
3. `tools/run_pretraining.py` trains in a subprocess, with `--eval_every_checkpoint`: every
   `--eval_every` steps it evaluates the held-out records (TensorBoard `eval/`).
4. The curve is read back from the TensorBoard logs: for each evaluation, the seconds since the
   training command started (start-up and XLA compilation included, data preparation not),
   the step, the training loss and the held-out masked-LM accuracy and loss.
5. The plot also marks what counting predictors score on the same records
   (`bench/masked_lm_baselines.py`: most frequent token, bigram, trigram).

A rerun resumes: prepared data is kept and training continues from its last checkpoint (the
time axis then restarts with the resumed command; use a fresh --output_dir for a clean curve).
`--plot_only` redraws the CSV and PNG from an existing run's logs. The PNG needs matplotlib.

Example (the measured run, then a smoke test):
    /work/venv/bin/python bench/pretraining_convergence.py
    /work/venv/bin/python bench/pretraining_convergence.py --output_dir=/tmp/convergence_smoke \\
        --num_train_steps=20 --eval_every=10 --vocab_size=2000 --dupe_factor=1 \\
        --csv=/tmp/convergence_smoke/curve.csv --plot=/tmp/convergence_smoke/curve.png
"""

import csv
import glob
import json
import logging
import os
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)  # runnable as `python bench/pretraining_convergence.py`
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ helpers
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

from bert_tf.data.pretraining_corpus import CorpusStatistics  # noqa: E402
from bert_tf.data.pretraining_inputs import prepare_pretraining_inputs  # noqa: E402
from bert_tf.data.prose import read_book  # noqa: E402
from bert_tf.training.scalar_logs import read_scalars  # noqa: E402
from masked_lm_baselines import baseline_accuracies, read  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", os.path.join(os.path.dirname(REPO_ROOT), "shared", "data",
                                           "gutenberg", "*.txt"), "Glob of plain-text books.")
flags.DEFINE_string("output_dir", "/tmp/bert_tf_convergence", "Prepared data (data/) and the "
                    "training run (model/).")
flags.DEFINE_string("config", "bert_mini", "The official config trained from scratch (its "
                    "vocab_size becomes the learned vocabulary's).")
flags.DEFINE_integer("vocab_size", 8192, "Target size of the learned vocabulary (tf.text's "
                     "learner may stop below or a little above it).")
flags.DEFINE_integer("dupe_factor", 5, "Copies of the training text with different masks.")
flags.DEFINE_integer("train_batch_size", 32, "Sequences per step.")
# About 30 minutes on an idle 2-core machine (~1 s per bert_mini step at batch 32, seq 128,
# without XLA, plus the evaluations).
flags.DEFINE_integer("num_train_steps", 1800, "Training steps (the learning rate decays to 0 "
                     "at the last).")
flags.DEFINE_integer("num_warmup_steps", 180, "Learning-rate warmup steps.")
flags.DEFINE_float("learning_rate", 1e-3, "Peak learning rate.")
flags.DEFINE_integer("eval_every", 200, "Steps between held-out evaluations (checkpoints).")
flags.DEFINE_float("dropout_prob", None, "Overrides the config's hidden and attention dropout "
                   "(0 for a short run from scratch: it underfits, so dropout only slows it).")
flags.DEFINE_string("mixed_precision", "float32", "run_pretraining.py's --mixed_precision.")
flags.DEFINE_bool("jit_compile", False, "run_pretraining.py's --jit_compile (on a CPU its "
                  "oneDNN kernels beat XLA's for BERT's step, see embedded_default.py).")
flags.DEFINE_float("target_accuracy", 0.30, "The held-out masked-LM accuracy to reach.")
flags.DEFINE_float("target_minutes", 30.0, "...within this many minutes.")
flags.DEFINE_string("csv", os.path.join(REPO_ROOT, "docs", "pretraining_convergence.csv"),
                    "Where the curve goes as CSV.")
flags.DEFINE_string("plot", os.path.join(REPO_ROOT, "docs", "pretraining_convergence.png"),
                    "Where the curve goes as PNG (needs matplotlib).")
flags.DEFINE_bool("plot_only", False, "Only redraw the CSV and PNG from --output_dir's logs.")

COLUMNS = ("seconds", "step", "train_loss", "heldout_masked_lm_accuracy",
           "heldout_masked_lm_loss")


def prepare():
    """The corpus, vocabulary and records of the books (kept from an earlier run)."""
    books = sorted(glob.glob(FLAGS.corpus))
    if not books:
        raise app.UsageError(f"--corpus: {FLAGS.corpus!r} matches no file")
    statistics = CorpusStatistics()

    def documents():
        for path in books:
            yield read_book(path, statistics)
        skipped = ", ".join(f"{os.path.basename(path)} {count}" for path, count in
                            sorted(statistics.invalid_utf8_lines.items()))
        print(f"Read {statistics.files} books, {statistics.lines:,} lines "
              f"({statistics.bytes:,} bytes); lines skipped, not UTF-8: "
              f"{sum(statistics.invalid_utf8_lines.values())} ({skipped or 'none'})", flush=True)

    return prepare_pretraining_inputs(
        os.path.join(FLAGS.output_dir, "data"), documents(), config_name=FLAGS.config,
        vocab_size=FLAGS.vocab_size, dupe_factor=FLAGS.dupe_factor, vocab_iterations=2)


def bert_config_file(inputs):
    """The prepared config, or a copy beside it with --dropout_prob."""
    if FLAGS.dropout_prob is None:
        return inputs.bert_config_file
    with open(inputs.bert_config_file, encoding="utf-8") as f:
        config = json.load(f)
    config.update(hidden_dropout_prob=FLAGS.dropout_prob,
                  attention_probs_dropout_prob=FLAGS.dropout_prob)
    path = os.path.join(FLAGS.output_dir, f"bert_config_dropout_{FLAGS.dropout_prob:g}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    return path


def train(inputs, model_dir):
    """Runs tools/run_pretraining.py; returns the wall-clock time it started at."""
    command = [
        sys.executable, os.path.join(REPO_ROOT, "tools", "run_pretraining.py"),
        f"--bert_config_file={bert_config_file(inputs)}",
        f"--input_file={','.join(inputs.train_records)}",
        f"--eval_input_file={','.join(inputs.heldout_records)}", "--do_eval",
        "--eval_every_checkpoint", f"--vocab_file={inputs.vocab_file}",
        f"--output_dir={model_dir}", f"--train_batch_size={FLAGS.train_batch_size}",
        f"--num_train_steps={FLAGS.num_train_steps}",
        f"--num_warmup_steps={FLAGS.num_warmup_steps}",
        f"--learning_rate={FLAGS.learning_rate}", f"--save_checkpoints_steps={FLAGS.eval_every}",
        f"--steps_per_execution={min(FLAGS.eval_every, 50)}", "--eval_batch_size=64",
        f"--mixed_precision={FLAGS.mixed_precision}", "--strategy=one_device",
        f"--{'' if FLAGS.jit_compile else 'no'}jit_compile"]
    print(" ".join(command), flush=True)
    started = time.time()
    subprocess.run(command, check=True)
    return started


def curve(model_dir, started):
    """The rows of `COLUMNS`, one per held-out evaluation."""
    evaluation = read_scalars(os.path.join(model_dir, "eval"))
    train_loss = {event.step: event.value
                  for event in read_scalars(os.path.join(model_dir, "train")).get("loss", [])}
    losses = {event.step: event.value for event in evaluation.get("masked_lm_loss", [])}
    return [{"seconds": round(event.wall_time - started, 1), "step": event.step,
             "train_loss": train_loss.get(event.step), "heldout_masked_lm_accuracy": event.value,
             "heldout_masked_lm_loss": losses.get(event.step)}
            for event in evaluation.get("masked_lm_accuracy", [])]


def write_csv(rows, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def plot(rows, path, title, baselines):
    try:
        import matplotlib
    except ImportError:
        print(f"matplotlib is not installed: no plot written to {path}")
        return
    matplotlib.use("Agg")  # no display needed
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    minutes = [row["seconds"] / 60 for row in rows]
    axes.plot(minutes, [row["heldout_masked_lm_accuracy"] for row in rows], marker="o",
              label="held-out masked-LM accuracy")
    axes.axhline(FLAGS.target_accuracy, color="grey", linestyle="--",
                 label=f"target {FLAGS.target_accuracy:.2f}")
    for (name, accuracy), color in zip(baselines.items(), ("tab:olive", "tab:orange", "tab:red")):
        axes.axhline(accuracy, color=color, linestyle="-.", linewidth=1,
                     label=f"counting predictor, {name}: {accuracy:.3f}")
    axes.axvline(FLAGS.target_minutes, color="grey", linestyle=":",
                 label=f"{FLAGS.target_minutes:g} minutes")
    axes.set_xlabel("minutes since the training command started (2 CPU cores)")
    axes.set_ylabel("masked-LM accuracy")
    axes.set_ylim(0, max([FLAGS.target_accuracy + 0.1] + [
        row["heldout_masked_lm_accuracy"] + 0.05 for row in rows]))
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", fontsize="small", ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"Wrote {path}")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    logging.getLogger().setLevel(logging.INFO)
    model_dir = os.path.join(FLAGS.output_dir, "model")
    started_file = os.path.join(FLAGS.output_dir, "training_started")
    if not FLAGS.plot_only:
        began = time.monotonic()
        inputs = prepare()
        print(f"Data ready in {time.monotonic() - began:.0f} s: {inputs.train_records}",
              flush=True)
        started = train(inputs, model_dir)
        with open(started_file, "w", encoding="utf-8") as f:
            f.write(f"{started}\n")
    with open(started_file, encoding="utf-8") as f:
        started = float(f.read())
    rows = curve(model_dir, started)
    if not rows:
        raise RuntimeError(f"{model_dir}/eval holds no evaluation")
    write_csv(rows, FLAGS.csv)
    print(f"Wrote {FLAGS.csv}")
    reached = [row for row in rows if row["heldout_masked_lm_accuracy"] >= FLAGS.target_accuracy]
    verdict = (f"reached {FLAGS.target_accuracy:.2f} at {reached[0]['seconds'] / 60:.1f} min "
               f"(step {reached[0]['step']})" if reached else
               f"did not reach {FLAGS.target_accuracy:.2f}")
    title = f"{FLAGS.config} from scratch on Gutenberg: {verdict}"
    records = os.path.join(FLAGS.output_dir, "data", "records")
    baselines, _ = baseline_accuracies(read(os.path.join(records, "train.tfrecord-*")),
                                       read(os.path.join(records, "heldout.tfrecord")))
    plot(rows, FLAGS.plot, title, baselines)
    last = rows[-1]
    print(f"Held-out masked-LM accuracy {last['heldout_masked_lm_accuracy']:.3f} at step "
          f"{last['step']} after {last['seconds'] / 60:.1f} min; {verdict}; target "
          f"{'met' if reached and reached[0]['seconds'] <= 60 * FLAGS.target_minutes else 'MISSED'}"
          f" ({FLAGS.target_accuracy:.2f} within {FLAGS.target_minutes:g} min)")


if __name__ == "__main__":
    app.run(main)
