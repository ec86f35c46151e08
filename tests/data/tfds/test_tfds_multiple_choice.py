"""TFDS's hellaswag prepared offline from HellaSwag's files and read into SwagExamples: the
catalog's name, version and splits (its parts by source and domain too), the same examples as
the files, the test split without labels, and datasets or examples that cannot be multiple
choice named."""

import collections
import json

import pytest
import tensorflow_datasets as tfds

from bert_tf.data.tfds.catalog import TfdsInputError
from bert_tf.data.tfds.local_preparation import LocalSourceError, prepare_local
from bert_tf.data.tfds.multiple_choice import read_multiple_choice_tfds
from tests.data.tfds.hellaswag import write_hellaswag


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """(the TFDS data dir, {file key: the examples written})."""
    source = tmp_path_factory.mktemp("hellaswag")
    written = write_hellaswag(source, {"train": 24, "val": 12, "test": 6})
    data_dir = str(tmp_path_factory.mktemp("tfds"))
    prepare_local("hellaswag", str(source), data_dir)
    return data_dir, written


def as_pairs(examples):
    return collections.Counter((context, tuple(choices), label) for context, choices, label
                               in zip(examples.contexts, examples.choices, examples.labels))


def test_the_catalog_builder_reads_every_split(prepared):
    data_dir, written = prepared
    builder = tfds.builder("hellaswag", data_dir=data_dir)
    assert type(builder).__name__ == "Hellaswag" and builder.info.full_name == "hellaswag/1.1.0"

    def count(part, keep=lambda example: True):
        return sum(map(keep, written[part]))

    def source(name):
        return lambda example: example["source_id"].startswith(name)

    def domain(kind, name):
        return lambda example: example["split_type"] == kind and source(name)(example)

    expected = {"train": count("train"),
                "train_activitynet": count("train", source("activitynet")),
                "train_wikihow": count("train", source("wikihow"))}
    for split, part in (("validation", "val"), ("test", "test")):
        expected[split] = count(part)
        for kind, short in (("indomain", "ind"), ("zeroshot", "ood")):
            for name in ("activitynet", "wikihow"):
                expected[f"{split}_{short}_{name}"] = count(part, domain(kind, name))
    assert {name: split.num_examples for name, split in builder.info.splits.items()} == expected
    assert 0 < expected["validation_ood_wikihow"] < expected["validation_ind_activitynet"]


@pytest.mark.parametrize("split, part", [("train", "train"), ("validation", "val")])
def test_same_examples_as_the_files(prepared, split, part):
    data_dir, written = prepared
    examples, where = read_multiple_choice_tfds("hellaswag", split, data_dir, require_labels=True)
    assert where == f"hellaswag:{split}"
    assert len(examples) == len(written[part]) and examples.num_choices == 4
    # TFDS stores the examples shuffled: the same multiset, named by stored position.
    assert as_pairs(examples) == collections.Counter(
        (example["ctx"], tuple(example["endings"]), example["label"])
        for example in written[part])
    assert examples.ids == [str(i) for i in range(len(written[part]))]
    assert examples.lines == list(range(len(written[part])))


def test_a_split_part_reads_its_examples(prepared):
    data_dir, written = prepared
    examples, _ = read_multiple_choice_tfds("hellaswag", "train_wikihow", data_dir, True)
    assert sorted(examples.contexts) == sorted(
        example["ctx"] for example in written["train"]
        if example["source_id"].startswith("wikihow"))


def test_the_test_split_has_no_labels(prepared):
    data_dir, written = prepared
    examples, _ = read_multiple_choice_tfds("hellaswag", "test", data_dir, require_labels=False)
    assert examples.labels is None and len(examples) == len(written["test"])
    with pytest.raises(TfdsInputError, match=r"^hellaswag:test: example 0 has label -1, not a "
                                             r"choice index 0..3 \(-1: the split has no "
                                             r"labels; it can only be predicted\)$"):
        read_multiple_choice_tfds("hellaswag", "test", data_dir, require_labels=True)


def write_lines(directory, examples):
    directory.mkdir()
    with open(directory / "hellaswag_val.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(example) + "\n" for example in examples)
    return str(directory)


EXAMPLE = {"ind": 0, "activity_label": "Painting", "ctx_a": "A man paints.", "ctx_b": "he",
           "ctx": "A man paints. he", "split": "val", "split_type": "indomain",
           "endings": ["stops.", "goes on.", "leaves.", "sits."], "source_id": "wikihow~1",
           "label": 1}
# One example in each of the catalog's parts of a split (in and out of domain, both sources):
# TFDS writes no empty split.
EVERY_PART = [{**EXAMPLE, "split_type": kind, "source_id": f"{name}~{i}"}
              for i, (kind, name) in enumerate([("indomain", "activitynet"),
                                                ("indomain", "wikihow"),
                                                ("zeroshot", "activitynet"),
                                                ("zeroshot", "wikihow")])]


def write_lines(directory, examples):
    directory.mkdir()
    with open(directory / "hellaswag_val.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(example) + "\n" for example in examples)
    return str(directory)


# TFDS stores the examples in an order of its own: the bad one's index is where it landed.
@pytest.mark.parametrize("change, error", [
    ({"endings": ["stops.", "goes on.", "leaves."]},
     r"example \d has (3 endings, the examples before it 4|4 endings, the examples before it 3)"),
    ({"endings": ["stops.", "goes on.", " ", "sits."]}, r"example \d: ending 2 is empty"),
    ({"ctx": " "}, r"example \d: its context is empty"),
    ({"label": 4}, r"example \d has label 4, not a choice index 0..3"),
])
def test_bad_examples_are_named(tmp_path, change, error):
    data_dir = str(tmp_path / "tfds")
    lines = EVERY_PART + [{**EXAMPLE, **change}]
    prepare_local("hellaswag", write_lines(tmp_path / "source", lines), data_dir)
    with pytest.raises(TfdsInputError, match=f"^hellaswag:validation: {error}$"):
        read_multiple_choice_tfds("hellaswag", "validation", data_dir, require_labels=True)


def test_a_part_without_examples_is_named(tmp_path):
    source = write_lines(tmp_path / "source", EVERY_PART[:3])
    with pytest.raises(LocalSourceError, match=f"^hellaswag: {source}/hellaswag_val.jsonl "
                                               f"cannot be read as its "
                                               f"validation_ood_wikihow split: no example "
                                               f"belongs to it"):
        prepare_local("hellaswag", source, str(tmp_path / "tfds"))


def test_a_dataset_without_endings_is_an_error(tmp_path):
    source = tmp_path / "sst2"
    source.mkdir()
    (source / "dev.tsv").write_text("sentence\tlabel\ngood\t1\n", encoding="utf-8")
    prepare_local("glue/sst2", str(source), str(tmp_path / "tfds"))
    with pytest.raises(TfdsInputError, match=r"^glue/sst2:validation: no feature context, "
                                             r"endings \(a multiple-choice dataset has "
                                             r"context, endings, label\); its features are "
                                             r"sentence, label, idx$"):
        read_multiple_choice_tfds("glue/sst2", "validation", str(tmp_path / "tfds"), True)


def test_local_preparation_names_hellaswag_files(tmp_path):
    with pytest.raises(LocalSourceError, match=r"hellaswag: .* has none of the files "
                                        r"hellaswag_test.jsonl, hellaswag_train.jsonl, "
                                        r"hellaswag_val.jsonl"):
        prepare_local("hellaswag", str(tmp_path), str(tmp_path / "tfds"))
