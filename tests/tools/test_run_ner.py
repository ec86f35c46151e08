"""tools/run_ner.py end to end, in subprocesses: a tiny BERT learns a synthetic CoNLL task
(tags on first word pieces, sentences split into windows), evaluation agrees with its own
predictions file and with an eval-only rerun, the exported `ner` SavedModel agrees with the
tool, bad input fails naming file:line; and a short real run from MiniLM on CoNLL-2003."""

import json
import os
import random

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the exported SavedModel uses tf.text ops)

from bert_tf.cli.run_ner import OUTPUTS
from bert_tf.data.tasks.conll import read_conll
from bert_tf.metrics.sequence_labeling import entity_scores
from bert_tf.training.existing_run import is_run_output
from tests.resources import minilm_dir, shared_data_path
from tests.tools.tool_runs import error_output, run_printed_export, run_tool, scalar_curves

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "john", "smith", "mary", "jones", "new",
         "york", "paris", "acme", "corp", "the", "met", "in", "visited", "today", "and", "a",
         "un", "##aff", "##able", "."]
ENTITIES = {"PER": [["John", "Smith"], ["Mary", "Jones"], ["Mary"]],
            "LOC": [["New", "York"], ["Paris"]], "ORG": [["ACME", "Corp."]]}
FILLER = ["the", "met", "in", "visited", "today", "and", "a", "unaffable"]
CONFIG = {"vocab_size": len(VOCAB), "hidden_size": 32, "num_hidden_layers": 1,
          "num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu",
          "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
          "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}
MAX_SEQ_LENGTH = 24
LABELS = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def synthetic_sentences(count, seed, min_words=2, max_words=8):
    """`count` random sentences of (word, tag) in IOB2: fillers and named entities, some
    words of several pieces ("unaffable", "Corp.")."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(count):
        sentence, length = [], rng.randint(min_words, max_words)
        while len(sentence) < length:
            if rng.random() < 0.35:
                entity_type = rng.choice(sorted(ENTITIES))
                words = rng.choice(ENTITIES[entity_type])
                sentence += [(word, ("B-" if i == 0 else "I-") + entity_type)
                             for i, word in enumerate(words)]
            else:
                sentence.append((rng.choice(FILLER), "O"))
        sentences.append(sentence)
    return sentences


def write_conll(path, sentences, tags=True):
    with open(path, "w", encoding="utf-8") as f:
        f.write("-DOCSTART- -X- -X- O\n\n")
        for sentence in sentences:
            for word, tag in sentence:
                f.write(f"{word} NN B-NP {tag}\n" if tags else f"{word}\n")
            f.write("\n")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    directory = tmp_path_factory.mktemp("conll")
    write_conll(directory / "train.txt", synthetic_sentences(240, seed=1))
    # Two long sentences: split into windows at MAX_SEQ_LENGTH.
    write_conll(directory / "valid.txt", synthetic_sentences(40, seed=2)
                + synthetic_sentences(2, seed=3, min_words=25, max_words=30))
    write_conll(directory / "test.txt", synthetic_sentences(20, seed=4), tags=False)
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (directory / "bert_config.json").write_text(json.dumps(CONFIG))
    return directory


def base_flags(data, output_dir, *flags, data_dir=None):
    return [f"--data_dir={data_dir or data}", f"--output_dir={output_dir}",
            f"--vocab_file={data}/vocab.txt",
            f"--bert_config_file={data}/bert_config.json", f"--max_seq_length={MAX_SEQ_LENGTH}",
            "--do_lower_case", *flags]


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("ner")
    result = run_tool("run_ner.py", *base_flags(
        data, output_dir, "--do_train", "--do_eval", "--do_predict", "--num_train_epochs=12",
        "--train_batch_size=16", "--learning_rate=2e-3", "--save_checkpoints_steps=50"))
    assert result.returncode == 0, result.stderr[-3000:]
    return output_dir, result


def test_trains_evaluates_and_predicts(data, trained):
    output_dir, result = trained
    assert (output_dir / "label_list.txt").read_text().split() == LABELS
    # What the check of a directory holding no run knows (other_files_problem).
    assert all(is_run_output(name, OUTPUTS) for name in os.listdir(output_dir))
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert results["global_step"] == 180  # ceil(240 * 12 / 16)
    assert tf.train.latest_checkpoint(str(output_dir)).endswith("ckpt-180")
    assert results["data"]["split_sentences"] == 2
    assert results["data"]["sentences"] == 42 and results["data"]["windows"] > 42
    # The synthetic task is learnable from the word pieces alone.
    assert results["f1"] > 0.9, results
    assert set(results["per_type"]) == {"LOC", "ORG", "PER"}
    assert f"eval entity F1 = {results['f1']:.4f}" in result.stdout

    # eval_results.json is the seqeval score of the written predictions, which cover every word.
    gold = read_conll(str(data / "valid.txt"))
    written = read_conll(str(output_dir / "eval_predictions.txt"))
    assert [s.words for s in written] == [s.words for s in gold]
    scores = entity_scores([s.tags for s in gold], [s.tags for s in written])
    assert scores["f1"] == results["f1"] and scores["per_type"] == results["per_type"]
    predicted = read_conll(str(output_dir / "test_predictions.txt"))
    assert [s.words for s in predicted] == [s.words for s in read_conll(str(data / "test.txt"))]
    assert all(tag in LABELS for s in predicted for tag in s.tags)

    # TensorBoard: the loss of each checkpoint period (50 steps) falls.
    scalars = scalar_curves(str(output_dir / "train"))
    assert [step for step, _ in scalars["loss"]] == [50, 100, 150, 180]
    assert scalars["loss"][-1][1] < scalars["loss"][0][1] / 4
    assert scalar_curves(str(output_dir / "eval"))["f1"] == [(180, pytest.approx(results["f1"]))]


def test_eval_only_rerun_matches(data, trained, tmp_path):
    output_dir, _ = trained
    before = json.loads((output_dir / "eval_results.json").read_text())
    result = run_tool("run_ner.py", *base_flags(data, output_dir, "--do_eval",
                                                "--eval_batch_size=5"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((output_dir / "eval_results.json").read_text()) == before


def test_exported_ner_model_agrees_with_the_tool(data, trained, tmp_path):
    output_dir, training = trained
    # The command the tool printed, without --label_names: the label_list.txt run_ner wrote
    # names the classes.
    assert f"--seq_length={MAX_SEQ_LENGTH}" in training.stdout.splitlines()[-1]
    result = run_printed_export(training.stdout, tmp_path / "ner")
    assert result.returncode == 0, result.stderr[-3000:]
    serving = tf.saved_model.load(str(tmp_path / "ner" / "1")).signatures["serving_default"]
    sentences = read_conll(str(output_dir / "test_predictions.txt"))
    outputs = serving(text=tf.constant([" ".join(s.words) for s in sentences]))
    for index, sentence in enumerate(sentences):
        # The tool tags each word at its first piece: the token starting at the word's byte.
        starts = np.cumsum([0] + [len(word.encode()) + 1 for word in sentence.words[:-1]])
        token_starts = outputs["start_offset"][index].numpy().tolist()
        positions = [token_starts.index(start) for start in starts]
        exported = [outputs["label_name"][index, p].numpy().decode() for p in positions]
        assert exported == sentence.tags, index


def test_bad_input_names_file_and_line(data, trained, tmp_path):
    output_dir, _ = trained
    (tmp_path / "train.txt").write_text("John NN B-NP B-PER\nsmith NN B-PER\n")
    result = run_tool("run_ner.py", *base_flags(data, tmp_path / "out", "--do_train",
                                                     data_dir=tmp_path))
    assert result.returncode == 1
    assert f"{tmp_path}/train.txt:2: 3 column(s)" in result.stderr

    # Not IOB/IOBES.
    (tmp_path / "valid.txt").write_text("John NN B-NP B-PER\n\nBerlin NN B-NP LOC\n")
    result = run_tool("run_ner.py", *base_flags(data, output_dir, "--do_eval", data_dir=tmp_path))
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].startswith(
        f"run_ner: error: {tmp_path}/valid.txt:3: Invalid tag 'LOC'")

    result = run_tool("run_ner.py", *base_flags(data, tmp_path / "out", "--do_predict",
                                                     data_dir=tmp_path))
    assert result.returncode != 0
    assert f"--do_predict: {tmp_path}/test.txt (--data_dir/--predict_file) does not exist" in (
        result.stderr)
    (tmp_path / "test.txt").mkdir()
    result = run_tool("run_ner.py", *base_flags(data, tmp_path / "out", "--do_predict",
                                                     data_dir=tmp_path))
    assert result.returncode != 0
    assert (f"--do_predict: {tmp_path}/test.txt (--data_dir/--predict_file) is a directory, "
            f"not a file") in result.stderr

    for encoding in ("klingon", "base64"):  # no such codec; a codec of bytes, not of text
        result = run_tool("run_ner.py", *base_flags(data, tmp_path / "out", "--do_train",
                                                         data_dir=tmp_path),
                          f"--conll_encoding={encoding}")
        assert result.returncode == 1
        assert (f"flag --conll_encoding={encoding}: unknown text encoding (e.g. utf-8, latin-1)"
                in result.stderr)
        assert "LookupError" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_eval_tags_the_training_data_never_had_count_as_missed(data, tmp_path):
    """A model trained on a cut of the data without I-LOC is evaluated on dev data with it: a
    warning names the tag and where it is first used, and its entity counts as missed."""
    sentences = synthetic_sentences(60, seed=5)
    write_conll(tmp_path / "train.txt", [s for s in sentences
                                         if "I-LOC" not in [tag for _, tag in s]])
    write_conll(tmp_path / "valid.txt", [[("Paris", "B-LOC")],
                                         [("New", "B-LOC"), ("York", "I-LOC")]])
    result = run_tool("run_ner.py", *base_flags(data, tmp_path / "out", "--do_train", "--do_eval",
                                                "--num_train_steps=2", data_dir=tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    warning = f"run_ner: warning: {tmp_path}/valid.txt:6: 'I-LOC': not one of the model's labels"
    assert any(line.startswith(warning) for line in result.stderr.splitlines()), result.stderr
    labels = (tmp_path / "out" / "label_list.txt").read_text().split()
    assert "I-LOC" not in labels
    # Whatever it predicted, "New York" (B-LOC I-LOC) cannot be found: recall is at most 1/2.
    results = json.loads((tmp_path / "out" / "eval_results.json").read_text())
    assert results["recall"] <= 0.5
    predicted = read_conll(str(tmp_path / "out" / "eval_predictions.txt"))
    assert [s.words for s in predicted] == [["Paris"], ["New", "York"]]


def test_an_output_dir_of_its_outputs_but_no_run_is_refused_and_kept(data, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "eval_predictions.txt").write_text("my tagging")
    result = run_tool("run_ner.py", *base_flags(data, mine, "--do_train", "--do_eval"))
    assert error_output(result) == (
        f"run_ner: error: --output_dir {mine} holds eval_predictions.txt but no run of bert_tf "
        f"(no run.json), and this run would overwrite it; use another --output_dir")
    assert os.listdir(mine) == ["eval_predictions.txt"]
    assert (mine / "eval_predictions.txt").read_text() == "my tagging"


def test_predicting_into_another_tasks_run_names_that_task(data, tmp_path):
    classifier_run = tmp_path / "sst2"
    classifier_run.mkdir()
    (classifier_run / "run.json").write_text('{"tool": "run_classifier", "task": "SST-2"}')
    result = run_tool("run_ner.py", *base_flags(data, classifier_run, "--do_predict"))
    assert error_output(result) == (
        f"run_ner: error: --output_dir {classifier_run} holds a run of another task: trained by "
        f"run_classifier SST-2 (run.json), this run is run_ner; use a new --output_dir")
    assert os.listdir(classifier_run) == ["run.json"]


def test_real_conll2003_from_minilm(tmp_path):
    """~50 training sentences of CoNLL-2003 from the real MiniLM weights (bfloat16, ~1 minute):
    the loss falls and entities start to be found (an untrained head finds ~none)."""
    model_dir = minilm_dir()
    for name in ("train.txt", "valid.txt"):
        with open(shared_data_path(f"conll2003/{name}"), encoding="utf-8") as f:
            blocks = f.read().split("\n\n")  # the first is the -DOCSTART- line
        (tmp_path / name).write_text("\n\n".join(blocks[:51]) + "\n")
    output_dir = tmp_path / "out"
    result = run_tool("run_ner.py", f"--init_checkpoint={model_dir}", f"--data_dir={tmp_path}",
                      f"--output_dir={output_dir}", "--do_train", "--do_eval",
                      "--num_train_epochs=10", "--train_batch_size=8", "--learning_rate=2e-4",
                      "--mixed_precision=bfloat16")
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert results["data"]["sentences"] == len(read_conll(str(tmp_path / "valid.txt")))
    # The mean training loss (TensorBoard), far below ln(9) = 2.2 of a uniform guess.
    losses = [value for _, value in scalar_curves(str(output_dir / "train"))["loss"]]
    assert losses[-1] < 1.0, losses
    assert results["f1"] > 0.1, results
