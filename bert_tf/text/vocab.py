"""Reading and writing WordPiece vocabularies: one token per line, the line number is the id."""

# The tokens BERT's inputs are built with; build_vocab puts them first, in this order, so that
# [PAD] is id 0 (padding must be id 0: input_mask and the embedding of padded positions rely on
# it in the original code).
RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def load_vocab(path):
    """The tokens of the vocabulary file `path`, in id order.

    Like the original `load_vocab`, surrounding whitespace of each line is ignored. Empty lines
    and repeated tokens are errors: the original silently gives a repeated token the later id,
    which leaves an id that nothing maps to.

    Example:
        >>> load_vocab("vocab.txt")[:5]
        ['[PAD]', '[unused0]', '[unused1]', '[unused2]', '[unused3]']
    """
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"Vocabulary file {path} is not valid UTF-8: {error}") from None
    # Only "\n" ends a line: str.splitlines() would also split at characters such as U+0085.
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    tokens, seen = [], {}
    for line_number, line in enumerate(lines, start=1):
        token = line.strip()
        if not token:
            raise ValueError(f"Vocabulary file {path}, line {line_number}: empty token.")
        if token in seen:
            raise ValueError(f"Vocabulary file {path}, line {line_number}: token {token!r} "
                             f"repeats line {seen[token]}.")
        seen[token] = line_number
        tokens.append(token)
    return tokens


def save_vocab(tokens, path):
    """Writes `tokens` to `path`, one per line (UTF-8)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(token + "\n" for token in tokens)
