import dataclasses
import gzip
import os
import shutil

import pytest
import tensorflow as tf

from bert_tf.config import BertConfig, official_config_dir
from bert_tf.text.bert_tokenizer import BertTokenizer
from bert_tf.text.vocab import RESERVED_TOKENS, load_vocab
from tests.data.pretraining.records import write_pretraining_records
from tests.tools.tool_runs import error_output, run_tool

TOOL = "build_vocab.py"

CORPUS = ("The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs!\n"
          "Jumping foxes and sleeping dogs: quickly, quicker, quickest.\n") * 40


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    (root / "a.txt").write_text(CORPUS, encoding="utf-8")
    # A latin-1 file: its lines are skipped, as create_pretraining_data skips them.
    (root / "b.txt").write_bytes("Café CAFÉ naïve Zoë\n".encode("latin-1") * 30)
    return root


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_learns_a_vocabulary_that_tokenizes_its_corpus(corpus, tmp_path, lower_case):
    output = tmp_path / "vocab.txt"
    result = run_tool(TOOL, f"--input_file={corpus}/*.txt", f"--output_file={output}",
                      "--vocab_size=120", "--do_lower_case" if lower_case else "--nodo_lower_case")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Read 2 file(s)" in result.stdout
    assert result.stdout.splitlines()[-1] == f"  {corpus}/b.txt: 30 lines skipped, not valid UTF-8"
    vocab = load_vocab(str(output))
    assert tuple(vocab[:5]) == RESERVED_TOKENS
    assert len(vocab) <= 120
    # Cased keeps capitals and never sees the latin-1 file, whose "Zoë" gave a "Z".
    assert ("The" in vocab) == (not lower_case) and ("T" in vocab) == (not lower_case)
    assert not {"é", "##é", "Z"} & set(vocab)
    # Every character of the corpus is in the vocabulary (alone and as a continuation), so
    # tokenizing the corpus needs no [UNK]; frequent words are whole tokens.
    tokenizer = BertTokenizer(str(output), lower_case=lower_case)
    ids = tokenizer.tokenize(tf.constant(CORPUS.splitlines())).flat_values.numpy()
    assert tokenizer.token_id("[UNK]") not in ids
    assert {"the", "fox", "dog"} <= set(vocab) if lower_case else {"fox", "dog"} <= set(vocab)
    for char in set(CORPUS.lower() if lower_case else CORPUS) - set(" \n"):
        assert char in vocab and ("##" + char in vocab or not char.isalnum()), char


def test_inputs_are_named_in_create_pretraining_datas_words(corpus, tmp_path):
    # The same --input_file, the same problems, the same words: build_vocab had its own
    # ("no file matches" here, "matches no file" there).
    inputs = f"--input_file={tmp_path}/nothing*.txt,{corpus}/a.txt,{tmp_path}"
    vocab = run_tool(TOOL, inputs, f"--output_file={tmp_path}/vocab.txt")
    records = run_tool("create_pretraining_data.py", inputs,
                       f"--output_file={tmp_path}/out.tfrecord", f"--vocab_file={corpus}/a.txt")
    problems = (f"--input_file: '{tmp_path}/nothing*.txt' matches no file; '{tmp_path}' is a "
                f"directory: name its files, e.g. '{tmp_path}/*'")
    assert error_output(vocab) == f"build_vocab: error: {problems}"
    assert error_output(records).endswith(f"create_pretraining_data: error: {problems}")
    assert os.listdir(tmp_path) == []


def test_text_that_is_not_utf8_is_named_with_what_to_do(corpus, tmp_path):
    result = run_tool(TOOL, f"--input_file={corpus}/b.txt", f"--output_file={tmp_path}/v.txt")
    assert error_output(result) == (
        f"build_vocab: error: {corpus}/b.txt: no words to learn a vocabulary from (30 lines, "
        f"600 bytes); 30 lines are not valid UTF-8: convert the text to UTF-8 (e.g. iconv -f "
        f"latin1 -t utf-8)")
    assert not os.path.exists(tmp_path / "v.txt")


def test_too_small_vocab_size_is_named(corpus, tmp_path):
    result = run_tool(TOOL, f"--input_file={corpus}/a.txt", f"--output_file={tmp_path}/v.txt",
                      "--vocab_size=5")
    assert result.returncode == 1
    assert "vocab_size 5 leaves no room after the 5 reserved tokens" in result.stderr


def test_inputs_that_are_not_text_files_are_named(corpus, tmp_path):
    # A directory read as empty text: alone it was "the input text is empty", beside a file it
    # was silently counted as a file read.
    (tmp_path / "texts").mkdir()
    result = run_tool(TOOL, f"--input_file={tmp_path}/text*,{corpus}/a.txt,/dev/null",
                      f"--output_file={tmp_path}/vocab.txt")
    assert error_output(result) == (
        f"build_vocab: error: --input_file: '{tmp_path}/texts' is a directory: name its files, "
        f"e.g. '{tmp_path}/texts/*'; /dev/null is not a regular file")
    assert not os.path.exists(tmp_path / "vocab.txt")


def test_inputs_that_are_records_or_compressed_are_named(corpus, tmp_path):
    # Read as text, their bytes made a vocabulary of garbage, silently.
    records = tmp_path / "train.tfrecord"
    write_pretraining_records(records, 20)
    (tmp_path / "corpus.txt.gz").write_bytes(gzip.compress(CORPUS.encode()))
    result = run_tool(TOOL, f"--input_file={records},{corpus}/a.txt,{tmp_path}/corpus.txt.gz",
                      f"--output_file={tmp_path}/vocab.txt")
    assert error_output(result) == (
        f"build_vocab: error: --input_file: {tmp_path}/corpus.txt.gz is GZIP-compressed, not "
        f"text: decompress it (gunzip); {records} is a TFRecord file (pre-training records?), "
        f"not text: give records to run_pretraining's --input_file")
    assert not os.path.exists(tmp_path / "vocab.txt")


def test_an_output_file_that_is_an_input_file_is_refused(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text(CORPUS, encoding="utf-8")
    result = run_tool(TOOL, f"--input_file={text}", f"--output_file={tmp_path}/./corpus.txt")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"build_vocab: error: output file {tmp_path}/./corpus.txt is also an input file: name "
        f"another --output_file")
    assert text.read_text(encoding="utf-8") == CORPUS


def test_max_unique_chars_must_keep_a_character(corpus, tmp_path):
    result = run_tool(TOOL, f"--input_file={corpus}/a.txt", f"--output_file={tmp_path}/v.txt",
                      "--max_unique_chars=0")
    assert result.returncode == 1
    assert "flag --max_unique_chars=0: 0 is not a positive integer" in result.stderr
    assert not os.path.exists(tmp_path / "v.txt")


def test_writes_the_config_sized_to_the_vocabulary(corpus, tmp_path):
    template = BertConfig.from_name("bert_mini")
    output = tmp_path / "model" / "vocab.txt"
    template_file = os.path.join(official_config_dir(), "bert_mini.json")
    result = run_tool(TOOL, f"--input_file={corpus}/a.txt", f"--output_file={output}",
                      "--vocab_size=120", f"--bert_config_file={template_file}")
    assert result.returncode == 0, result.stderr[-3000:]
    config = BertConfig.from_json_file(str(tmp_path / "model" / "bert_config.json"))
    assert config.vocab_size == len(load_vocab(str(output))) < 120 < template.vocab_size
    assert config == dataclasses.replace(template, vocab_size=config.vocab_size)
    assert f"with vocab_size {config.vocab_size}" in result.stdout.splitlines()[-1]


def test_a_bad_config_or_one_it_would_overwrite_is_refused_before_learning(corpus, tmp_path):
    broken = tmp_path / "bert_config.json"
    broken.write_text('{"vocab_size": 30522, "hidden_sizes": 128}', encoding="utf-8")
    output = tmp_path / "vocab.txt"
    result = run_tool(TOOL, f"--input_file={corpus}/a.txt", f"--output_file={output}",
                      f"--bert_config_file={broken}")
    assert error_output(result).startswith(f"build_vocab: error: {broken}: Invalid BertConfig: ")
    assert "did you mean 'hidden_size'?" in error_output(result)
    # A valid config beside the vocabulary would be overwritten by its sized copy.
    shutil.copy(f"{official_config_dir()}/bert_mini.json", broken)
    result = run_tool(TOOL, f"--input_file={corpus}/a.txt", f"--output_file={output}",
                      f"--bert_config_file={broken}")
    assert error_output(result) == (f"build_vocab: error: output file {broken} is also an input "
                                    f"file: name another --output_file")
    assert not output.exists()
    assert BertConfig.from_json_file(str(broken)) == BertConfig.from_name("bert_mini")
