"""The rules of an export's arguments that need neither its model nor TensorFlow: which task
models there are to export, the shortest `seq_length` (`check_seq_length`, the one rule every
export's `seq_length` obeys, checked before anything is traced or written) and label names that
tell classes apart. They are kept apart from `task_export` and `text_inputs`, which import
TensorFlow, so that export_savedmodel refuses bad flags without waiting for it (4 s).

Example:
    >>> "ner" in TASK_EXPORT_TYPES
    True
    >>> repeated_label_names(["a", "b", "a"])
    ['a']
"""

# The fine-tuned task models an export takes; `task_export.TASK_MODEL_CLASSES` gives their
# classes.
TASK_EXPORT_TYPES = ("classifier", "ner", "squad", "multiple_choice")
# The shortest packed input that holds any text: [CLS], one word piece and [SEP].
MIN_SEQ_LENGTH = 3


def check_seq_length(seq_length, max_position_embeddings=None):
    """Raises a one-line ValueError unless `seq_length` is an integer from `MIN_SEQ_LENGTH` to
    `max_position_embeddings` (the encoder's positions; no upper bound when None, as for a
    preprocessor exported without its encoder).

    Example:
        >>> check_seq_length(4096, max_position_embeddings=512)
        ValueError: seq_length must be between 3 and the encoder's max_position_embeddings
        (512), got 4096.
    """
    is_int = isinstance(seq_length, int) and not isinstance(seq_length, bool)
    if not is_int or seq_length < MIN_SEQ_LENGTH or seq_length > (
            max_position_embeddings or seq_length):
        bound = (f"at least {MIN_SEQ_LENGTH}" if max_position_embeddings is None else
                 f"between {MIN_SEQ_LENGTH} and the encoder's max_position_embeddings "
                 f"({max_position_embeddings})")
        raise ValueError(f"seq_length must be {bound}, got {seq_length!r}.")


def repeated_label_names(label_names):
    """The names `label_names` gives more than one class, sorted: a served `label_name` could
    not tell those classes apart.

    Example:
        >>> repeated_label_names(["a", "b", "a"])
        ['a']
    """
    return sorted({name for name in label_names if list(label_names).count(name) > 1})
