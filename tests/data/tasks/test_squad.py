"""bert_tf.data.tasks.squad: SQuAD JSON -> examples -> windowed features, exact answer offsets
(non-ASCII contexts included), counted skips and clear errors for bad files.

`VOCAB`, `squad_json`, `write_squad` and `write_vocab` are shared with
tests/tools/test_run_squad.py."""

import json
import os

import numpy as np
import pytest

from bert_tf.data.tasks.squad import (NOT_IN_CONTEXT, SkippedQuestions, SquadFormatError,
                                article_slice, read_squad_file, squad_examples, squad_features)
from bert_tf.text.bert_tokenizer import BertTokenizer
from tests.resources import minilm_dir, shared_data_path

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "zurich", "is", "the", "largest", "city",
         "in", "switzerland", ".", "cafe", "opened", "1998", "and", "was", "un", "##aff",
         "##able", "which", "?", "when", "did", "open", "what", "東", "京", "capital", "of",
         "japan", ";", "naive", "visitors", "love", "it", "who", "river", "flows", "north",
         "lies", "south", "answer", "zebra", "do", "they", "mars", ","]

ZURICH = "Zürich is the largest city in Switzerland. The café opened in 1998 and was unaffable."
TOKYO = "東京 is the capital of Japan; naïve visitors love it 😀."
# Long enough for several windows at max_seq_length 32; the answer is in the last one.
RIVER = "the river flows north and the city lies south . " * 5 + "the answer is zebra ."


def _qa(qas_id, question, context, answer=None, start=None, **extra):
    answers = [] if answer is None else [
        {"text": answer, "answer_start": context.index(answer) if start is None else start}]
    return {"id": qas_id, "question": question, "answers": answers, **extra}


def squad_json(version_2=False, bad_answers=False):
    """A tiny SQuAD file: non-ASCII contexts, an answer that is a sub-word ("unaff" = un ##aff),
    an [UNK] answer, a long context; `version_2` adds an unanswerable question, `bad_answers`
    one answer not at its answer_start and one ending inside a word piece."""
    zurich = [_qa("zurich", "Which city is the largest?", ZURICH, "Zürich"),
              _qa("year", "When did the café open?", ZURICH, "1998"),
              _qa("unaff", "What was the café?", ZURICH, "unaff")]
    if bad_answers:
        zurich += [_qa("shifted", "Which city?", ZURICH, "Zürich", start=3),
                   _qa("inside", "What was it?", ZURICH, "naff")]
    if version_2:
        zurich.append({"id": "mars", "question": "What is the capital of Mars?", "answers": [],
                       "is_impossible": True})
    tokyo = [_qa("tokyo", "What is the capital of Japan?", TOKYO, "東京"),
             _qa("naive", "Who love it?", TOKYO, "naïve visitors"),
             _qa("emoji", "What do they love?", TOKYO, "😀")]
    river = [_qa("zebra", "What is the answer?", RIVER, "zebra")]
    return {"version": "2.0" if version_2 else "1.1", "data": [
        {"title": "Zurich", "paragraphs": [{"context": ZURICH, "qas": zurich}]},
        {"title": "Tokyo", "paragraphs": [{"context": TOKYO, "qas": tokyo}]},
        {"title": "River", "paragraphs": [{"context": RIVER, "qas": river}]}]}


def write_squad(path, dataset):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(dataset, f, ensure_ascii=False)
    return str(path)


def write_vocab(directory):
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(VOCAB) + "\n")
    return path


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB, lower_case=True)


def _features(path, tokenizer, is_training, version_2=False, max_seq_length=32, doc_stride=8,
              articles=slice(None)):
    skipped = SkippedQuestions()
    examples = squad_examples(read_squad_file(path, articles), path, is_training, version_2,
                              skipped=skipped)
    features = squad_features(examples, tokenizer, max_seq_length, doc_stride,
                              max_query_length=6, is_training=is_training, skipped=skipped)
    return examples, features, skipped


def _answer_texts(examples, features):
    """{question id: [text of the labelled span in each window that has one]}."""
    texts = {}
    for row, index in enumerate(features.example_index):
        start, end = features.start_positions[row], features.end_positions[row]
        if start:
            offsets = features.token_offsets[row]
            context = examples[index].context.encode("utf-8")
            texts.setdefault(examples[index].qas_id, []).append(
                context[offsets[start, 0]:offsets[end, 1]].decode("utf-8"))
    return texts


def test_training_spans_decode_to_the_exact_answers(tmp_path, tokenizer):
    path = write_squad(tmp_path / "train.json", squad_json())
    examples, features, skipped = _features(path, tokenizer, is_training=True)
    assert skipped.total == 0
    expected = {"zurich": "Zürich", "year": "1998", "unaff": "unaff", "tokyo": "東京",
                "naive": "naïve visitors", "emoji": "😀", "zebra": "zebra"}
    texts = _answer_texts(examples, features)
    assert set(texts) == set(expected)
    for qas_id, windows in texts.items():
        assert windows == [expected[qas_id]] * len(windows), qas_id


def test_packed_layout_and_byte_offsets(tmp_path, tokenizer):
    path = write_squad(tmp_path / "train.json", squad_json())
    examples, features, _ = _features(path, tokenizer, is_training=True, max_seq_length=40)
    row = 0                                   # "Which city is the largest?" about Zürich
    length = features.inputs["input_mask"][row].sum()
    tokens = [VOCAB[i] for i in features.inputs["input_word_ids"][row, :length]]
    assert tokens == ["[CLS]", "which", "city", "is", "the", "largest", "?", "[SEP]", "zurich",
                      "is", "the", "largest", "city", "in", "switzerland", ".", "the", "cafe",
                      "opened", "in", "1998", "and", "was", "un", "##aff", "##able", ".",
                      "[SEP]"]
    assert features.inputs["input_type_ids"][row, :length].tolist() == [0] * 8 + [1] * 20
    assert not features.inputs["input_word_ids"][row, length:].any()
    offsets = features.token_offsets[row]
    assert (offsets[:8] == NOT_IN_CONTEXT).all() and (offsets[length - 1:] == NOT_IN_CONTEXT).all()
    # "Zürich" is 7 bytes (ü is two); "café" 5.
    assert offsets[8].tolist() == [0, 7]
    assert offsets[17].tolist() == [48, 53]
    assert (features.start_positions[row], features.end_positions[row]) == (8, 8)
    assert features.token_is_max_context[row, 8:length - 1].all()


def test_long_context_windows(tmp_path, tokenizer):
    path = write_squad(tmp_path / "train.json", squad_json())
    examples, features, _ = _features(path, tokenizer, is_training=True, max_seq_length=32,
                                      doc_stride=8)
    rows = np.flatnonzero(features.example_index == [e.qas_id for e in examples].index("zebra"))
    assert len(rows) > 2
    context_tokens = len(tokenizer.tokenize_with_offsets(
        np.array([RIVER]))[0].merge_dims(1, 2)[0])
    # Windows start doc_stride pieces apart, all full but the last, which reaches the end;
    # together they own every token exactly once.
    firsts = [features.token_offsets[row][features.token_offsets[row, :, 0] >= 0][0, 0]
              for row in rows]
    assert firsts == sorted(firsts) and len(set(firsts)) == len(firsts)
    owned = sum(int(features.token_is_max_context[row].sum()) for row in rows)
    assert owned == context_tokens
    # Only windows holding "zebra" point at it; the others at [CLS].
    holding = [row for row in rows if b"zebra" in b"".join(
        RIVER.encode()[s:e] for s, e in features.token_offsets[row] if s >= 0)]
    assert holding and all(features.start_positions[row] > 0 for row in holding)
    assert all(features.start_positions[row] == features.end_positions[row] == 0
               for row in rows if row not in holding)


def test_questions_are_cut_to_max_query_length(tmp_path, tokenizer):
    path = write_squad(tmp_path / "train.json", squad_json())
    examples = squad_examples(read_squad_file(path), path, is_training=False)
    features = squad_features(examples, tokenizer, 32, 8, max_query_length=3, is_training=False)
    first_sep = [row.tolist().index(VOCAB.index("[SEP]"))
                 for row in features.inputs["input_word_ids"]]
    assert max(first_sep) == 4                 # [CLS] + 3 question pieces
    assert features.start_positions is None


def test_unanswerable_questions_point_at_cls(tmp_path, tokenizer):
    path = write_squad(tmp_path / "train.json", squad_json(version_2=True))
    examples, features, _ = _features(path, tokenizer, is_training=True, version_2=True)
    mars = [e.qas_id for e in examples].index("mars")
    assert examples[mars].is_impossible
    rows = features.example_index == mars
    assert rows.any() and not features.start_positions[rows].any()
    assert not features.end_positions[rows].any()
    with pytest.raises(SquadFormatError, match=r"question mars has no answer.*"
                                               r"--version_2_with_negative"):
        _features(path, tokenizer, is_training=True)


def test_answers_not_in_the_context_are_counted_skips(tmp_path, tokenizer):
    path = write_squad(tmp_path / "train.json", squad_json(bad_answers=True))
    examples, features, skipped = _features(path, tokenizer, is_training=True)
    assert skipped.counts() == {"answer text not found at answer_start": 1,
                                "answer starts or ends inside a word piece": 1}
    assert skipped.ids["answer text not found at answer_start"] == ["shifted"]
    assert skipped.ids["answer starts or ends inside a word piece"] == ["inside"]
    trained = {examples[i].qas_id for i in features.example_index}
    assert not trained & {"shifted", "inside"}
    # Prediction reads every question: nothing to check against.
    predict_examples, _, _ = _features(path, tokenizer, is_training=False)
    assert {"shifted", "inside"} <= {e.qas_id for e in predict_examples}


def test_article_slices(tmp_path):
    path = write_squad(tmp_path / "train.json", squad_json())
    assert [a["title"] for a in read_squad_file(path, article_slice("0:2"))] == ["Zurich",
                                                                                 "Tokyo"]
    assert [a["title"] for a in read_squad_file(path, article_slice("2:"))] == ["River"]
    assert len(read_squad_file(path, article_slice(None))) == 3
    with pytest.raises(SquadFormatError, match="selects none of its 3 articles"):
        read_squad_file(path, article_slice("5:"))
    # No range given: an empty file says so, not "the article range None:None selects none".
    empty = write_squad(tmp_path / "empty.json", {"data": []})
    with pytest.raises(SquadFormatError, match=r"empty.json: its 'data' list holds no article$"):
        read_squad_file(empty, article_slice(None))
    for bad in ("3", "a:b", "1:2:3"):
        with pytest.raises(SquadFormatError, match="start:stop"):
            article_slice(bad)


def _broken(tmp_path, edit):
    dataset = squad_json()
    edit(dataset)
    return write_squad(tmp_path / "broken.json", dataset)


@pytest.mark.parametrize("edit, is_training, message", [
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][1].pop("question"), False,
     r"article 0 \(Zurich\), paragraph 0, question year has no 'question'"),
    (lambda d: d["data"][1]["paragraphs"][0]["qas"][0].pop("answers"), True,
     r"question tokyo has no 'answers'"),
    (lambda d: d["data"][1]["paragraphs"][0]["qas"][0]["answers"][0].pop("answer_start"), True,
     r"question tokyo, answer 0 has no 'answer_start'"),
    (lambda d: d["data"][1]["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start="0"),
     True, r"question tokyo, answer 0: 'answer_start' must be int, got str"),
    (lambda d: d["data"][1]["paragraphs"][0]["qas"][1].pop("id"), False,
     r"article 1 \(Tokyo\), paragraph 0, question 1 has no 'id'"),
    (lambda d: d["data"][1]["paragraphs"][0]["qas"][1].update(id=7), False,
     r"article 1 \(Tokyo\), paragraph 0, question 1: 'id' must be str, got int"),
    (lambda d: d["data"][1]["paragraphs"][0].update(context="  "), False,
     r"article 1 \(Tokyo\), paragraph 0: empty context \(question tokyo\)"),
    (lambda d: d["data"][2]["paragraphs"][0]["qas"][0].update(id="zurich"), False,
     r"question zurich: the id is used by an earlier question"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].update(question=" "), False,
     r"question zurich: empty question"),
    (lambda d: d["data"][2].pop("paragraphs"), False, r"article 2 \(River\) has no 'paragraphs'"),
])
def test_malformed_questions_name_the_place_and_key(tmp_path, edit, is_training, message):
    path = _broken(tmp_path, edit)
    with pytest.raises(SquadFormatError, match=message) as error:
        squad_examples(read_squad_file(path), path, is_training)
    assert str(error.value).startswith(path)


def test_files_in_the_wrong_format(tmp_path):
    tsv = tmp_path / "train.tsv"
    tsv.write_text("sentence\tlabel\nit is good\t1\n")
    with pytest.raises(SquadFormatError, match=r"train.tsv: not valid JSON at line 1, column 1"):
        read_squad_file(str(tsv))
    truncated = tmp_path / "truncated.json"
    truncated.write_text(json.dumps(squad_json())[:-40])
    with pytest.raises(SquadFormatError, match=r"truncated.json: not valid JSON at line 1"):
        read_squad_file(str(truncated))
    no_data = write_squad(tmp_path / "list.json", [{"paragraphs": []}])
    with pytest.raises(SquadFormatError, match=r"list.json: not a SQuAD file.*'data'"):
        read_squad_file(no_data)
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes(json.dumps(squad_json(), ensure_ascii=False).encode("latin-1",
                                                                           errors="replace"))
    with pytest.raises(SquadFormatError, match=r"latin1.json: not UTF-8"):
        read_squad_file(str(latin1))
    with pytest.raises(SquadFormatError, match=r"missing.json: no such file"):
        read_squad_file(str(tmp_path / "missing.json"))
    with pytest.raises(SquadFormatError, match=r"squad: a directory, not a SQuAD JSON file"):
        read_squad_file(str(tmp_path.joinpath("squad").mkdir() or tmp_path / "squad"))


def test_a_byte_order_mark_is_read_past(tmp_path):
    # Windows editors start a UTF-8 file with one: "Unexpected UTF-8 BOM" refused the file.
    marked = tmp_path / "bom.json"
    marked.write_bytes(b"\xef\xbb\xbf" + json.dumps(squad_json()).encode())
    assert read_squad_file(str(marked)) == squad_json()["data"]


def test_real_dev_answers_round_trip_with_minilm():
    """Every training answer of the first 38 dev articles (the required training split) maps to
    tokens that cut exactly the answer text out of the context; the few whose edges fall
    inside a word piece (e.g. "8" of "20–18") are the only skips."""
    path = shared_data_path("squad/dev-v1.1.json")
    tokenizer = BertTokenizer(os.path.join(minilm_dir(), "vocab.txt"), lower_case=True)
    examples, features, skipped = _features(path, tokenizer, is_training=True,
                                            max_seq_length=384, doc_stride=128,
                                            articles=article_slice("0:38"))
    assert set(skipped.counts()) <= {"answer starts or ends inside a word piece"}
    assert skipped.total < 0.01 * (len(examples))
    by_id = {e.qas_id: e for e in examples}
    texts = _answer_texts(examples, features)
    assert len(texts) == len(examples) - skipped.total
    for qas_id, windows in texts.items():
        assert set(windows) == {by_id[qas_id].answer_text.strip()}, qas_id
