import pytest

from bert_tf.metrics.sequence_labeling import entity_scores, get_entities
from tests.resources import shared_data_path


def test_seqeval_documentation_example():
    truth = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    predicted = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    scores = entity_scores(truth, predicted)
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.5, 0.5, 0.5)
    assert scores["per_type"] == {
        "MISC": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1},
        "PER": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}}


@pytest.mark.parametrize("tags, entities", [
    # IOB2.
    (["B-PER", "I-PER", "O", "B-LOC"], [("PER", 0, 1), ("LOC", 3, 3)]),
    # IOB1: I- after O or another type starts an entity; B- only separates same-type neighbours.
    (["I-PER", "I-PER", "I-LOC", "O", "I-ORG", "B-ORG"],
     [("PER", 0, 1), ("LOC", 2, 2), ("ORG", 4, 4), ("ORG", 5, 5)]),
    # Ill-formed IOB2 is read leniently, as conlleval does.
    (["O", "I-PER", "B-PER", "I-LOC"], [("PER", 1, 1), ("PER", 2, 2), ("LOC", 3, 3)]),
    # IOBES.
    (["S-PER", "B-LOC", "E-LOC", "O", "E-ORG"], [("PER", 0, 0), ("LOC", 1, 2), ("ORG", 4, 4)]),
    # Bare prefixes have type "_".
    (["B", "I", "O"], [("_", 0, 1)]),
])
def test_chunking_rules(tags, entities):
    assert get_entities([tags]) == entities


def test_entities_never_cross_sentences():
    # Positions count an "O" between sentences.
    assert get_entities([["B-PER"], ["I-PER"]]) == [("PER", 0, 0), ("PER", 2, 2)]


def test_a_boundary_error_costs_precision_and_recall():
    truth = [["B-ORG", "I-ORG", "I-ORG", "O", "B-PER"]]
    predicted = [["B-ORG", "I-ORG", "O", "O", "B-PER"]]
    scores = entity_scores(truth, predicted)
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.5, 0.5, 0.5)
    nothing = entity_scores(truth, [["O"] * 5])
    assert (nothing["precision"], nothing["recall"], nothing["f1"]) == (0.0, 0.0, 0.0)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="Invalid tag 'PER'"):
        entity_scores([["PER"]], [["O"]])
    with pytest.raises(ValueError, match="Sequence 1 has 2 true and 1 predicted tags"):
        entity_scores([["O"], ["O", "O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="Got 2 true and 1 predicted sequences"):
        entity_scores([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="list of tag sequences"):
        entity_scores(["B-PER", "O"], ["B-PER", "O"])


def read_conll_tags(path):
    sentences, tags = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if not fields or fields[0] == "-DOCSTART-":
                if tags:
                    sentences.append(tags)
                tags = []
            else:
                tags.append(fields[-1])
    return sentences + ([tags] if tags else [])


def test_real_conll2003_validation_set():
    truth = read_conll_tags(shared_data_path("conll2003/valid.txt"))
    # The CoNLL-2003 English dev set: 5942 entities (1842 PER, 1837 LOC, 1341 ORG, 922 MISC).
    supports = {t: s["support"] for t, s in entity_scores(truth, truth)["per_type"].items()}
    assert supports == {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}
    assert entity_scores(truth, truth)["f1"] == 1.0
    # Dropping every MISC entity keeps precision at 1 and costs exactly its recall.
    without_misc = [[("O" if tag.endswith("MISC") else tag) for tag in s] for s in truth]
    scores = entity_scores(truth, without_misc)
    assert scores["precision"] == 1.0
    assert scores["recall"] == pytest.approx(5020 / 5942)
