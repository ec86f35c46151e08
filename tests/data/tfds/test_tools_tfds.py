"""The tools with --tfds_name, in fresh processes. Fine-tuning on real examples (slices of SST-2,
SQuAD v1.1 dev and CoNLL-2003 prepared offline as the catalog's glue/sst2, squad/v1.1 and
conll2003; HellaSwag-format lines written here as hellaswag): the same example counts, labels,
metrics and predictions as the file path; --num_train_steps overrides --num_train_epochs and is
the progress bar's total. Pre-training on Gutenberg books stored with TFDS's writer: the same
records and training as the same text."""

import json
import re

import pytest

from bert_tf.config import BertConfig
from bert_tf.data.tfds.local_preparation import prepare_local
from bert_tf.data.tfds.multiple_choice import read_multiple_choice_tfds
from bert_tf.data.tfds.pretraining_text import TfdsText
from tests.data.tfds.gutenberg import (GUTENBERG_TFDS_NAME, write_as_text_files,
                                       write_gutenberg_tfds)
from tests.data.tfds.hellaswag import write_as_swag_csv, write_hellaswag
from tests.resources import minilm_dir, shared_data_path
from tests.tools.tool_runs import latest_step, run_tool, scalar_curves

# A tiny random encoder over MiniLM's real vocabulary: the comparisons need the same inputs,
# not a good model.
STEPS = 6
COMMON = ["--train_batch_size=8", "--num_train_epochs=100", f"--num_train_steps={STEPS}",
          "--learning_rate=1e-3", "--save_checkpoints_steps=4"]


@pytest.fixture(scope="module")
def model_flags(tmp_path_factory):
    config = str(tmp_path_factory.mktemp("model") / "bert_config.json")
    BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=32, max_position_embeddings=128).to_json_file(config)
    return [f"--bert_config_file={config}", f"--vocab_file={minilm_dir()}/vocab.txt"]


def first_lines(source, destination, count):
    """The header (if any) and the first `count` rows of a real file."""
    with open(source, encoding="utf-8-sig") as f:
        destination.write_text("".join(line for _, line in zip(range(count), f)),
                               encoding="utf-8")


def read_json(directory, name):
    return json.loads((directory / name).read_text())


def run_ok(tool, *flags):
    result = run_tool(tool, *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_run_classifier_from_glue_sst2_equals_the_tsv_path(tmp_path, model_flags):
    glue = tmp_path / "SST-2"
    glue.mkdir()
    first_lines(shared_data_path("SST-2/train.tsv"), glue / "train.tsv", 81)
    first_lines(shared_data_path("SST-2/dev.tsv"), glue / "dev.tsv", 41)
    # A test file: GLUE's format (index, sentence), an empty text kept for its prediction.
    dev_rows = (glue / "dev.tsv").read_text().splitlines()[1:13]
    (glue / "test.tsv").write_text("index\tsentence\n" + "".join(
        f"{i}\t{row.split(chr(9))[0]}\n" for i, row in enumerate(dev_rows)) + "12\t \n")
    prepare_local("glue/sst2", str(glue), str(tmp_path / "tfds"))
    runs = {}
    for name, data in (("tsv", ["--task_name=SST-2", f"--data_dir={glue}"]),
                       ("tfds", ["--tfds_name=glue/sst2", f"--tfds_data_dir={tmp_path / 'tfds'}"])):
        output_dir = tmp_path / name
        result = run_ok("run_classifier.py", *model_flags, *COMMON, *data, "--do_train",
                        "--do_eval", "--do_predict", f"--output_dir={output_dir}")
        runs[name] = output_dir
        assert latest_step(output_dir) == STEPS      # not 100 epochs
        bar = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)     # Keras' colours
        # The bar counts to the real total, moving by host calls (--steps_per_execution).
        counts = [int(done) for done in re.findall(rf"\b(\d+)/{STEPS}\b", bar)]
        assert counts and counts[-1] == STEPS and counts == sorted(counts)
    tsv, tfds = (read_json(runs[name], "eval_results.json") for name in ("tsv", "tfds"))
    assert tfds["num_examples"] == tsv["num_examples"] == 40
    assert tfds["global_step"] == STEPS
    assert tfds == pytest.approx(tsv, rel=1e-5)   # same examples, order, seed: same training
    predictions = [(runs[name] / "predictions.tsv").read_text() for name in ("tsv", "tfds")]
    assert predictions[0] == predictions[1]       # keyed by GLUE's index = TFDS's idx
    assert [line.split("\t")[0] for line in predictions[1].splitlines()[1:]] == [
        str(i) for i in range(13)]


def test_run_squad_from_squad_v11_scores_as_the_file(tmp_path, model_flags):
    with open(shared_data_path("squad/dev-v1.1.json"), encoding="utf-8") as f:
        dataset = json.load(f)
    article = dataset["data"][0]
    small = {"version": "1.1", "data": [{**article, "paragraphs": article["paragraphs"][:4]}]}
    source = tmp_path / "squad"
    source.mkdir()
    (source / "dev-v1.1.json").write_text(json.dumps(small), encoding="utf-8")
    prepare_local("squad/v1.1", str(source), str(tmp_path / "tfds"))
    squad = ["--max_seq_length=96", "--doc_stride=48", "--max_query_length=24"]
    output_dir = tmp_path / "out"
    run_ok("run_squad.py", *model_flags, *COMMON, *squad, "--do_train", "--do_eval",
           f"--train_file={source / 'dev-v1.1.json'}",
           f"--predict_file={source / 'dev-v1.1.json'}", f"--output_dir={output_dir}")
    from_file = read_json(output_dir, "eval_results.json")
    file_predictions = read_json(output_dir, "predictions.json")
    # The same checkpoint evaluated on the TFDS split.
    run_ok("run_squad.py", *model_flags, *squad, "--do_eval", "--tfds_name=squad/v1.1",
           f"--tfds_data_dir={tmp_path / 'tfds'}", f"--output_dir={output_dir}")
    from_tfds = read_json(output_dir, "eval_results.json")
    questions = sum(len(p["qas"]) for p in small["data"][0]["paragraphs"])
    assert read_json(output_dir, "predictions.json") == file_predictions
    assert len(file_predictions) == questions
    # The same answers; the mean over questions summed in another order.
    assert from_tfds == pytest.approx(from_file, rel=1e-12)
    assert from_tfds["global_step"] == STEPS and from_tfds["num_questions"] == questions


def test_run_ner_from_conll2003_scores_as_the_files(tmp_path, model_flags):
    source = tmp_path / "conll"
    source.mkdir()
    first_lines(shared_data_path("conll2003/train.txt"), source / "train.txt", 400)
    first_lines(shared_data_path("conll2003/valid.txt"), source / "valid.txt", 300)
    prepare_local("conll2003", str(source), str(tmp_path / "tfds"))
    output_dir = tmp_path / "out"
    tfds = ["--tfds_name=conll2003", f"--tfds_data_dir={tmp_path / 'tfds'}"]
    run_ok("run_ner.py", *model_flags, *COMMON, *tfds, "--do_train", "--do_eval",
           f"--output_dir={output_dir}")
    from_tfds = read_json(output_dir, "eval_results.json")
    # The dataset's ClassLabel names are the model's labels.
    assert (output_dir / "label_list.txt").read_text().split() == [
        "O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    # The same checkpoint evaluated on the same sentences read from the file.
    run_ok("run_ner.py", *model_flags, "--do_eval", f"--data_dir={source}",
           f"--output_dir={output_dir}")
    from_file = read_json(output_dir, "eval_results.json")
    # The same words, windows and entity scores; only where the data came from differs.
    assert from_tfds.pop("data").pop("file") == "conll2003/conll2003:dev"
    assert from_file.pop("data").pop("file") == str(source / "valid.txt")
    assert from_tfds == from_file and from_tfds["global_step"] == STEPS


def test_run_multiple_choice_from_hellaswag_scores_as_the_csv(tmp_path, model_flags):
    source = tmp_path / "hellaswag"
    source.mkdir()
    written = write_hellaswag(source, {"train": 24, "val": 12, "test": 6})
    prepare_local("hellaswag", str(source), str(tmp_path / "tfds"))
    swag = tmp_path / "swag"
    swag.mkdir()
    write_as_swag_csv(swag / "val.csv", written["val"])
    output_dir = tmp_path / "out"
    tfds = ["--tfds_name=hellaswag", f"--tfds_data_dir={tmp_path / 'tfds'}"]
    result = run_ok("run_multiple_choice.py", *model_flags, *COMMON, *tfds, "--do_train",
                    "--do_eval", "--do_predict", "--max_seq_length=32",
                    f"--output_dir={output_dir}")
    from_tfds = read_json(output_dir, "eval_results.json")
    tfds_rows = (output_dir / "eval_predictions.csv").read_text().splitlines()
    assert from_tfds["global_step"] == STEPS
    assert "Wrote predictions for 6 examples" in result.stdout
    assert len((output_dir / "test_predictions.csv").read_text().splitlines()) == 1 + 6
    # The same checkpoint evaluated on the same examples read from a SWAG CSV.
    run_ok("run_multiple_choice.py", *model_flags, "--do_eval", f"--data_dir={swag}",
           "--max_seq_length=32", f"--output_dir={output_dir}")
    from_csv = read_json(output_dir, "eval_results.json")
    assert from_tfds.pop("data") == {"file": "hellaswag:validation", "examples": 12,
                                     "num_choices": 4, "truncated_pairs": 0}
    assert from_csv.pop("data")["file"] == str(swag / "val.csv")
    # The mean over examples summed in another order (TFDS stores them shuffled).
    assert from_tfds == pytest.approx(from_csv, rel=1e-6)
    # Each example's probabilities, whichever order: TFDS rows are named by stored position.
    stored, _ = read_multiple_choice_tfds("hellaswag", "validation", str(tmp_path / "tfds"),
                                          True)
    by_context = {stored.contexts[int(row.split(",")[0])]: row.split(",")[2:]
                  for row in tfds_rows[1:]}
    csv_rows = (output_dir / "eval_predictions.csv").read_text().splitlines()[1:]
    assert {example["ctx"]: row.split(",")[2:] for example, row in
            zip(written["val"], csv_rows)} == by_context


@pytest.fixture(scope="module")
def gutenberg(tmp_path_factory):
    """(the TFDS data dir of the Gutenberg dataset, the same documents as text files)."""
    data_dir = write_gutenberg_tfds(str(tmp_path_factory.mktemp("tfds")))
    source = TfdsText(GUTENBERG_TFDS_NAME, "train", data_dir)
    return data_dir, write_as_text_files(source, tmp_path_factory.mktemp("text"))


def test_create_pretraining_data_from_tfds_equals_the_text_files(tmp_path, gutenberg):
    data_dir, text_files = gutenberg
    options = [f"--vocab_file={minilm_dir()}/vocab.txt", "--max_seq_length=64",
               "--max_predictions_per_seq=10", "--dupe_factor=1", "--chunk_size_mb=0.1"]
    # Two worker processes for TFDS, none for the text: the records depend on neither.
    from_tfds = run_ok("create_pretraining_data.py", *options, "--num_workers=2",
                       f"--tfds_name={GUTENBERG_TFDS_NAME}", f"--tfds_data_dir={data_dir}",
                       f"--output_file={tmp_path / 'tfds.tfrecord'}")
    run_ok("create_pretraining_data.py", *options, "--num_workers=0",
           f"--input_file={','.join(text_files)}", f"--output_file={tmp_path / 'text.tfrecord'}")
    tfds_bytes, text_bytes = ((tmp_path / f"{name}.tfrecord").read_bytes()
                              for name in ("tfds", "text"))
    assert tfds_bytes == text_bytes and len(tfds_bytes) > 100_000
    assert "Read 3 files" in from_tfds.stderr and "4 documents" in from_tfds.stderr


def test_create_pretraining_data_needs_one_input(tmp_path, gutenberg):
    result = run_tool("create_pretraining_data.py", f"--vocab_file={minilm_dir()}/vocab.txt",
                      f"--output_file={tmp_path / 'x.tfrecord'}")
    assert result.returncode == 1
    assert ("create_pretraining_data: error: give --input_file (text files) or --tfds_name (a "
            "TFDS text dataset), one of them") in result.stderr
    result = run_tool("create_pretraining_data.py", f"--vocab_file={minilm_dir()}/vocab.txt",
                      f"--output_file={tmp_path / 'x.tfrecord'}", "--tfds_name=nothing_here",
                      f"--tfds_data_dir={tmp_path}")
    assert result.returncode == 1 and "TFDS dataset 'nothing_here'" in result.stderr


def test_run_pretraining_from_tfds_trains_as_on_the_text_files(tmp_path, gutenberg,
                                                               model_flags):
    data_dir, text_files = gutenberg
    common = [*model_flags, "--max_seq_length=32", "--max_predictions_per_seq=5",
              "--train_batch_size=8", "--num_train_steps=6", "--num_warmup_steps=1",
              "--learning_rate=1e-3", "--save_checkpoints_steps=3", "--steps_per_execution=3",
              "--strategy=cpu", "--nojit_compile"]
    curves = {}
    for name, data in (("tfds", [f"--tfds_name={GUTENBERG_TFDS_NAME}",
                                 f"--tfds_data_dir={data_dir}"]),
                       ("text", [f"--input_text_file={','.join(text_files)}"])):
        output_dir = tmp_path / name
        result = run_ok("run_pretraining.py", *common, *data, f"--output_dir={output_dir}")
        assert latest_step(output_dir) == 6
        source = (f"{GUTENBERG_TFDS_NAME} (train, 3 TFDS file(s))" if name == "tfds"
                  else "3 text file(s)")
        assert f"Training on {source} on 1 replica(s)" in result.stderr
        curves[name] = scalar_curves(str(output_dir / "train"))["loss"]
    # The same batches (files, documents, masks): the same losses.
    assert [step for step, _ in curves["tfds"]] == [3, 6]
    assert [loss for _, loss in curves["tfds"]] == pytest.approx(
        [loss for _, loss in curves["text"]], rel=1e-5)
