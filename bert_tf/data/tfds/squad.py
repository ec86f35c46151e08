"""TFDS's `squad/v1.1` and `squad/v2.0` read back into SQuAD's JSON layout.

A TFDS SQuAD example is one question with its `id`, `title`, `context`, `question` and
`answers` (`text`, `answer_start`; v2.0 adds `is_impossible` and `plausible_answers`). They are
regrouped into the articles (`{"title", "paragraphs": [{"context", "qas"}]}`) that
`bert_tf.data.tasks.squad.read_squad_file` returns, so the tools' SQuAD code (windows, training
labels, the official v1.1/v2.0 evaluation) runs unchanged. TFDS stores the questions shuffled
and keeps no article order: articles come in the order of their first question in the stored
dataset, questions in stored order within a paragraph; the official metric, per question id,
does not depend on it.

Example:
    >>> articles = read_squad_tfds("squad/v1.1", "validation", "~/tensorflow_datasets")
    >>> sum(len(p["qas"]) for a in articles for p in a["paragraphs"])
    10570
"""

from bert_tf.data.tfds.catalog import TfdsInputError, examples, prepared_builder, split_label


def squad_version_2(tfds_name):
    """Whether `tfds_name` is SQuAD v2.0 (questions may have no answer); raises
    `TfdsInputError` for a name that is not squad/v1.1 or squad/v2.0."""
    if tfds_name not in ("squad/v1.1", "squad/v2.0"):
        raise TfdsInputError(f"--tfds_name {tfds_name!r} is not SQuAD; use squad/v1.1 or "
                             f"squad/v2.0")
    return tfds_name == "squad/v2.0"


def _answers(answers):
    return [{"text": text.decode("utf-8"), "answer_start": int(start)}
            for text, start in zip(answers["text"], answers["answer_start"])]


def read_squad_tfds(tfds_name, split, data_dir):
    """The articles (SQuAD's JSON layout) of split `split` of `tfds_name`, and the label
    "squad/<version>:<split>" that names them in messages."""
    version_2 = squad_version_2(tfds_name)
    builder = prepared_builder(tfds_name, data_dir)
    articles, paragraphs = {}, {}
    for example in examples(builder, split):
        title, context = example["title"].decode("utf-8"), example["context"].decode("utf-8")
        article = articles.setdefault(title, {"title": title, "paragraphs": []})
        paragraph = paragraphs.get((title, context))
        if paragraph is None:
            paragraph = paragraphs[title, context] = {"context": context, "qas": []}
            article["paragraphs"].append(paragraph)
        qa = {"id": example["id"].decode("utf-8"), "question": example["question"].decode("utf-8"),
              "answers": _answers(example["answers"])}
        if version_2:
            qa["is_impossible"] = bool(example["is_impossible"])
            qa["plausible_answers"] = _answers(example["plausible_answers"])
        paragraph["qas"].append(qa)
    return list(articles.values()), split_label(builder, split)
