"""TFDS's squad/v1.1 read back into SQuAD's articles: prepared offline from the real dev file,
the same questions, contexts and answers as the file, and the same official scores."""

import pytest

from bert_tf.data.tasks import squad
from bert_tf.data.tfds.catalog import TfdsInputError
from bert_tf.data.tfds.squad import read_squad_tfds, squad_version_2
from bert_tf.metrics.squad import evaluate_squad_v1
from tests.data.tfds.prepared import prepared_data_dir
from tests.resources import shared_data_path


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """(articles from TFDS, articles from the file)."""
    data_dir = prepared_data_dir(tmp_path_factory, "squad/v1.1", "squad")
    articles, where = read_squad_tfds("squad/v1.1", "validation", data_dir)
    assert where == "squad/v1.1:validation"
    return articles, squad.read_squad_file(shared_data_path("squad/dev-v1.1.json"))


def by_id(examples):
    return sorted(examples, key=lambda example: example.qas_id)


@pytest.mark.parametrize("is_training", [False, True])
def test_same_questions_as_the_file(both, is_training):
    from_tfds, from_file = both
    tfds_skipped, file_skipped = squad.SkippedQuestions(), squad.SkippedQuestions()
    tfds_examples = squad.squad_examples(from_tfds, "tfds", is_training, require_answers=True,
                                         skipped=tfds_skipped)
    file_examples = squad.squad_examples(from_file, "file", is_training, require_answers=True,
                                         skipped=file_skipped)
    assert len(tfds_examples) == len(file_examples) == (10570 - file_skipped.total)
    assert by_id(tfds_examples) == by_id(file_examples)
    assert tfds_skipped.counts() == file_skipped.counts()


def test_articles_and_every_answer(both):
    from_tfds, from_file = both
    assert sorted(a["title"] for a in from_tfds) == sorted(a["title"] for a in from_file)
    questions = {qa["id"]: qa for a in from_file for p in a["paragraphs"] for qa in p["qas"]}
    for article in from_tfds:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                expected = questions.pop(qa["id"])
                assert qa["question"] == expected["question"]
                assert qa["answers"] == [{"text": a["text"], "answer_start": a["answer_start"]}
                                         for a in expected["answers"]]
    assert not questions


def test_same_official_scores(both):
    from_tfds, from_file = both
    # Every third question answered right, the others with a one-word guess.
    ids = sorted(qa["id"] for a in from_file for p in a["paragraphs"] for qa in p["qas"])
    answers = {qa["id"]: qa["answers"][0]["text"]
               for a in from_file for p in a["paragraphs"] for qa in p["qas"]}
    predictions = {qas_id: answers[qas_id] if i % 3 == 0 else "the"
                   for i, qas_id in enumerate(ids)}
    scores = evaluate_squad_v1(from_tfds, predictions)
    assert scores == evaluate_squad_v1(from_file, predictions)
    assert 33.3 < scores["exact_match"] < 34.0


def test_only_squad_names():
    assert squad_version_2("squad/v2.0") and not squad_version_2("squad/v1.1")
    with pytest.raises(TfdsInputError, match=r"--tfds_name 'squad' is not SQuAD; use "
                                             r"squad/v1.1 or squad/v2.0"):
        squad_version_2("squad")
