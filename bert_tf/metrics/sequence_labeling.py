"""Entity-level precision, recall and F1 for tag sequences, with seqeval's rules (default mode).

Tags are `O` or a prefix `B`, `I`, `E` or `S` and an entity type (`B-PER`, `I-LOC`); IOB1,
IOB2 (CoNLL-2003) and IOBES all decode with the same lenient chunking rules as `conlleval`
and seqeval: an `I-` after `O` or after another type starts a new entity, a type change ends
one. An entity counts as found only if its type, first and last token all match.

Example:
    >>> entity_scores([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "I-PER", "O", "B-ORG"]])
    {'precision': 0.5, 'recall': 0.5, 'f1': 0.5, 'per_type': {...}}
"""

import collections

_PREFIXES = ("O", "B", "I", "E", "S")


def _split_tag(tag):
    """(prefix, entity type) of a tag; seqeval calls the type of a bare `B` "_"."""
    if tag not in _PREFIXES and not (tag[:1] in _PREFIXES[1:] and tag[1:2] == "-"):
        raise ValueError(f"Invalid tag {tag!r}: expected 'O' or B-, I-, E-, S- and a type "
                         f"(IOB/IOB2/IOBES)")
    return tag[0], tag[2:] or "_"


def _ends_chunk(prev_prefix, prefix, prev_type, entity_type):
    """Whether an entity ended at the previous token, seeing the current one."""
    if prev_prefix in ("E", "S"):
        return True
    if prev_prefix in ("B", "I") and prefix in ("B", "S", "O"):
        return True
    return prev_prefix != "O" and prev_type != entity_type


def _starts_chunk(prev_prefix, prefix, prev_type, entity_type):
    """Whether an entity starts at the current token."""
    if prefix in ("B", "S"):
        return True
    if prev_prefix in ("E", "S", "O") and prefix in ("E", "I"):
        return True
    return prefix != "O" and prev_type != entity_type


def get_entities(sequences):
    """The entities of a list of tag sequences, as (type, first, last) with token positions
    counted across the sequences as if they were joined with an `O` between them (so entities
    never span two sentences and positions are unique)."""
    if any(isinstance(sequence, str) for sequence in sequences):
        raise ValueError("Expected a list of tag sequences (one list of tags per sentence), got "
                         "a list with strings in it; wrap a single sentence's tags in a list")
    tags = [tag for sequence in sequences for tag in list(sequence) + ["O"]]
    entities = []
    prev_prefix, prev_type, begin = "O", "", 0
    # A final "O" closes an entity still open at the end.
    for position, tag in enumerate(tags + ["O"]):
        prefix, entity_type = _split_tag(tag)
        if _ends_chunk(prev_prefix, prefix, prev_type, entity_type):
            entities.append((prev_type, begin, position - 1))
        if _starts_chunk(prev_prefix, prefix, prev_type, entity_type):
            begin = position
        prev_prefix, prev_type = prefix, entity_type
    return entities


def _precision_recall_f1(num_correct, num_predicted, num_true):
    # seqeval's zero_division: 0/0 scores 0.
    precision = num_correct / num_predicted if num_predicted else 0.0
    recall = num_correct / num_true if num_true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def entity_scores(true_sequences, predicted_sequences):
    """Micro-averaged entity precision/recall/F1 (seqeval's `f1_score` etc.) and, under
    `per_type`, the same for each entity type found in either side, with `support` (the number
    of true entities of the type).

    Args:
        true_sequences: list of gold tag sequences, one per sentence.
        predicted_sequences: list of predicted tag sequences, same lengths.
    """
    if len(true_sequences) != len(predicted_sequences):
        raise ValueError(f"Got {len(true_sequences)} true and {len(predicted_sequences)} "
                         f"predicted sequences")
    for index, (truth, predicted) in enumerate(zip(true_sequences, predicted_sequences)):
        if len(truth) != len(predicted):
            raise ValueError(f"Sequence {index} has {len(truth)} true and {len(predicted)} "
                             f"predicted tags")
    true_entities = set(get_entities(true_sequences))
    predicted_entities = set(get_entities(predicted_sequences))
    scores = _precision_recall_f1(len(true_entities & predicted_entities),
                                  len(predicted_entities), len(true_entities))
    by_type = collections.defaultdict(lambda: (set(), set()))
    for entity in true_entities:
        by_type[entity[0]][0].add(entity)
    for entity in predicted_entities:
        by_type[entity[0]][1].add(entity)
    scores["per_type"] = {
        entity_type: {**_precision_recall_f1(len(truth & predicted), len(predicted), len(truth)),
                      "support": len(truth)}
        for entity_type, (truth, predicted) in sorted(by_type.items())}
    return scores
