"""What BERT's basic tokenization does to each Unicode code point, as lookup tables for the graph.

The original `tokenization.py` decides character by character: drop it (NUL, U+FFFD, control
characters), turn it into a space (whitespace), make it a word of its own (punctuation, CJK
ideographs), or keep it inside the current word; with `do_lower_case` it first decomposes the
character (NFD), drops non-spacing marks (the accents) and lower-cases what is left. Because every
decision looks at one character alone, the whole normalisation is a function from one code point
to a short list of (code point, class) pairs, which `CodepointTable` precomputes for all 0x110000
code points so that the graph only needs two gathers per character.

The reference for the ids is Hugging Face `tokenizers` (`BertWordPieceTokenizer`, the same
algorithm as Google's `FullTokenizer`). Its Rust tables are not Python's: categories and NFD come
from an older Unicode release, lower-casing from a newer one, and unassigned code points are kept
rather than dropped. The tables are built from Python's `unicodedata` of Unicode 14.0.0 (Python
3.11), with every code point listed below where the reference decides differently
(tests/text/test_basic_tokenizer.py checks all 1,114,112 code points against it).

The built tables ship with the package (`codepoint_tables.npz`, both cases) and are only loaded
at run time, so the ids do not depend on which Unicode version Python ships. `write_tables`
writes that file (tests/text/test_codepoint_table.py checks that the shipped file is what it
writes).

Example:
    >>> table = CodepointTable(lower_case=True)     # "É" -> "e", "\\u200b" -> nothing, ...
    >>> table.block_index.shape, table.blocks.dtype
    ((4352,), dtype('int32'))
"""

import functools
import os
import unicodedata

import numpy as np

# Classes of an output character. DROP never appears in outputs; it marks removed code points.
DROP, SPACE, ISOLATED, WORD = 0, 1, 2, 3

# Google's _is_chinese_char ranges ("CJK Unified Ideographs" blocks; Hangul, Hiragana and Katakana
# are written with spaces and are not split per character). The reference starts Extension E at
# U+2B920 rather than U+2B820, so U+2B820..U+2B91F stay inside words as there.
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))

# Format characters (Cf) added after the reference's Unicode tables: it keeps them in words.
_NOT_CONTROL = ((0x890, 0x891), (0x8E2, 0x8E2), (0x110CD, 0x110CD), (0x13430, 0x13438))

# Punctuation the reference does not split on (added after its tables) and two characters its
# older tables still call punctuation (U+166D was Po before Unicode 12, U+111C9 before 11).
_NOT_PUNCTUATION = (
    (0x61D, 0x61D), (0x9FD, 0x9FD), (0xA76, 0xA76), (0xC77, 0xC77), (0xC84, 0xC84),
    (0x1B7D, 0x1B7E), (0x2E43, 0x2E4F), (0x2E52, 0x2E5D), (0x10EAD, 0x10EAD), (0x10F55, 0x10F59),
    (0x10F86, 0x10F89), (0x1144B, 0x1144F), (0x1145A, 0x1145B), (0x1145D, 0x1145D),
    (0x11660, 0x1166C), (0x116B9, 0x116B9), (0x1183B, 0x1183B), (0x11944, 0x11946),
    (0x119E2, 0x119E2), (0x11A3F, 0x11A46), (0x11A9A, 0x11A9C), (0x11A9E, 0x11AA2),
    (0x11C41, 0x11C45), (0x11C70, 0x11C71), (0x11EF7, 0x11EF8), (0x11FFF, 0x11FFF),
    (0x12FF1, 0x12FF2), (0x16E97, 0x16E9A), (0x16FE2, 0x16FE2), (0x1E95E, 0x1E95F))
_EXTRA_PUNCTUATION = (0x166D, 0x111C9)

# Non-spacing marks (Mn) added after the reference's tables: lower-casing keeps them, not strips
# them. U+1734 was Mn before Unicode 14 and is stripped there.
_NOT_NONSPACING_MARK = (
    (0x7FD, 0x7FD), (0x898, 0x89F), (0x8CA, 0x8E1), (0x9FE, 0x9FE), (0xAFA, 0xAFF),
    (0xB55, 0xB55), (0xC04, 0xC04), (0xC3C, 0xC3C), (0xD00, 0xD00), (0xD3B, 0xD3C),
    (0xD81, 0xD81), (0xEBA, 0xEBA), (0x180F, 0x180F), (0x1885, 0x1886), (0x1ABF, 0x1ACE),
    (0x1DF6, 0x1DFB), (0xA82C, 0xA82C), (0xA8C5, 0xA8C5), (0xA8FF, 0xA8FF), (0xA9BD, 0xA9BD),
    (0x10D24, 0x10D27), (0x10EAB, 0x10EAC), (0x10F46, 0x10F50), (0x10F82, 0x10F85),
    (0x11070, 0x11070), (0x11073, 0x11074), (0x110C2, 0x110C2), (0x111C9, 0x111C9),
    (0x111CF, 0x111CF), (0x1123E, 0x1123E), (0x1133B, 0x1133B), (0x11438, 0x1143F),
    (0x11442, 0x11444), (0x11446, 0x11446), (0x1145E, 0x1145E), (0x1182F, 0x11837),
    (0x11839, 0x1183A), (0x1193B, 0x1193C), (0x1193E, 0x1193E), (0x11943, 0x11943),
    (0x119D4, 0x119D7), (0x119DA, 0x119DB), (0x119E0, 0x119E0), (0x11A01, 0x11A0A),
    (0x11A33, 0x11A38), (0x11A3B, 0x11A3E), (0x11A47, 0x11A47), (0x11A51, 0x11A56),
    (0x11A59, 0x11A5B), (0x11A8A, 0x11A96), (0x11A98, 0x11A99), (0x11C30, 0x11C36),
    (0x11C38, 0x11C3D), (0x11C3F, 0x11C3F), (0x11C92, 0x11CA7), (0x11CAA, 0x11CB0),
    (0x11CB2, 0x11CB3), (0x11CB5, 0x11CB6), (0x11D31, 0x11D36), (0x11D3A, 0x11D3A),
    (0x11D3C, 0x11D3D), (0x11D3F, 0x11D45), (0x11D47, 0x11D47), (0x11D90, 0x11D91),
    (0x11D95, 0x11D95), (0x11D97, 0x11D97), (0x11EF3, 0x11EF4), (0x16F4F, 0x16F4F),
    (0x16FE4, 0x16FE4), (0x1CF00, 0x1CF2D), (0x1CF30, 0x1CF46), (0x1E000, 0x1E006),
    (0x1E008, 0x1E018), (0x1E01B, 0x1E021), (0x1E023, 0x1E024), (0x1E026, 0x1E02A),
    (0x1E130, 0x1E136), (0x1E2AE, 0x1E2AE), (0x1E2EC, 0x1E2EF), (0x1E944, 0x1E94A))
_EXTRA_NONSPACING_MARK = (0x1734,)

# U+11938 decomposes only since Unicode 13; the reference's NFD leaves it whole.
_NO_DECOMPOSITION = (0x11938,)

# Capital letters from Unicode 15/16, unknown to Python 3.11, that the reference lower-cases:
# (first, last, lower-case of first) with the lower-case letters following in the same order.
_EXTRA_LOWER_CASE = ((0x1C89, 0x1C89, 0x1C8A), (0xA7CB, 0xA7CB, 0x0264), (0xA7CC, 0xA7CC, 0xA7CD),
                     (0xA7CE, 0xA7CE, 0xA7CF), (0xA7D2, 0xA7D2, 0xA7D3), (0xA7D4, 0xA7D4, 0xA7D5),
                     (0xA7DA, 0xA7DA, 0xA7DB), (0xA7DC, 0xA7DC, 0x019B),
                     (0x10D50, 0x10D65, 0x10D70), (0x16EA0, 0x16EB8, 0x16EBB))

# Codes are looked up in two levels: a block index per 256 code points, then a row of 256 codes
# per distinct block. Most blocks (unassigned planes, CJK, private use) are identical, so the two
# tables hold a few hundred kilobytes instead of one entry per code point.
BLOCK_SIZE = 256
_NUM_CODEPOINTS = 0x110000

# The Unicode version of `unicodedata` that the exceptions above correct to the reference: on
# another one the tables would differ (each Unicode release adds characters and categories).
UNICODE_VERSION = "14.0.0"
TABLES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "codepoint_tables.npz")
_TABLE_NAMES = ("block_index", "blocks", "expansion_values", "expansion_splits")


def _expand(ranges):
    return frozenset(cp for first, last in ranges for cp in range(first, last + 1))


_CJK = _expand(_CJK_RANGES)
_NOT_CONTROL = _expand(_NOT_CONTROL)
_NOT_PUNCTUATION = _expand(_NOT_PUNCTUATION)
_NOT_NONSPACING_MARK = _expand(_NOT_NONSPACING_MARK)
_EXTRA_LOWER_CASE = {first + offset: lower + offset for first, last, lower in _EXTRA_LOWER_CASE
                     for offset in range(last - first + 1)}


def _is_control(char):
    # \t, \n and \r are control characters in Unicode but whitespace to BERT. Unassigned code
    # points (Cn) stay: the reference keeps them inside words.
    if char in "\t\n\r":
        return False
    cp = ord(char)
    return (unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs")
            and cp not in _NOT_CONTROL)


def _is_whitespace(char):
    # The Unicode White_Space property; its control characters (\v, \f, U+0085) were already
    # dropped as control characters, as in the reference.
    return char in " \t\n\r" or unicodedata.category(char) in ("Zs", "Zl", "Zp")


def _is_punctuation(char):
    cp = ord(char)
    # All non-letter/number ASCII counts as punctuation, like "^", "$" and "`" that Unicode files
    # under symbols; this keeps BERT's split of e.g. "$5" into "$", "5".
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    if cp in _EXTRA_PUNCTUATION:
        return True
    return unicodedata.category(char).startswith("P") and cp not in _NOT_PUNCTUATION


def _is_nonspacing_mark(char):
    cp = ord(char)
    if cp in _EXTRA_NONSPACING_MARK:
        return True
    return unicodedata.category(char) == "Mn" and cp not in _NOT_NONSPACING_MARK


def _strip_accents_and_lower_case(char):
    # The reference strips accents before lower-casing, one character at a time (so a final
    # capital sigma becomes "σ", not the "ς" that Python's str.lower() would give in context).
    decomposed = char if ord(char) in _NO_DECOMPOSITION else unicodedata.normalize("NFD", char)
    output = []
    for part in decomposed:
        if _is_nonspacing_mark(part):
            continue
        if ord(part) in _EXTRA_LOWER_CASE:
            output.append(chr(_EXTRA_LOWER_CASE[ord(part)]))
        else:
            output.extend(part.lower())
    return output


def _classify(char, lower_case):
    """The (code point, class) pairs that `char` becomes."""
    cp = ord(char)
    if cp == 0 or cp == 0xFFFD or _is_control(char):
        return []
    if _is_whitespace(char):
        return [(0x20, SPACE)]
    is_cjk = cp in _CJK
    parts = _strip_accents_and_lower_case(char) if lower_case else [char]
    return [(ord(part), ISOLATED if is_cjk or _is_punctuation(part) else WORD) for part in parts]


class CodepointTable:
    """Per-code-point outputs of BERT's basic tokenization, cased or uncased.

    The code of `cp` is `blocks[block_index[cp // BLOCK_SIZE] * BLOCK_SIZE + cp % BLOCK_SIZE]`
    = `row * 4 + class`: row 0 means the character stays itself with that class (DROP, SPACE,
    ISOLATED or WORD); a row > 0 points into `expansion_values` (each `cp * 4 + class`, rows
    split by `expansion_splits`), used when the character changes (lower-casing, NFD) or becomes
    several characters (Hangul syllables become their jamo). Cased tables never need rows.

    Example:
        >>> table = CodepointTable(lower_case=False)
        >>> int(table.blocks[table.block_index[0] * BLOCK_SIZE + ord("!")]) % 4 == ISOLATED
        True
    """

    def __init__(self, lower_case):
        self.lower_case = bool(lower_case)
        self.block_index, self.blocks, self.expansion_values, self.expansion_splits = (
            _load_tables(self.lower_case))


@functools.lru_cache(maxsize=2)
def _load_tables(lower_case):
    # Loaded, not built: every tool start makes a tokenizer, and building classifies all 0x110000
    # code points with unicodedata, 1.0-2.0 s per case; loading takes 2-5 ms (5 fresh
    # processes each, 2-vCPU Intel Xeon with AMX, Python 3.11).
    with np.load(TABLES_FILE) as tables:
        return tuple(tables[_array_name(lower_case, name)] for name in _TABLE_NAMES)


def write_tables(path=TABLES_FILE):
    """Builds the cased and uncased tables and writes them to `path` (an `.npz`), by default the
    file that ships with the package and that `CodepointTable` loads. Run it in a checkout after
    changing the rules above, on Python 3.11:
    `python -c "from bert_tf.text.codepoint_table import write_tables; write_tables()"`.

    Example:
        >>> write_tables("tables.npz")
        >>> sorted(np.load("tables.npz").files)[:2]
        ['cased_block_index', 'cased_blocks']
    """
    if unicodedata.unidata_version != UNICODE_VERSION:
        raise RuntimeError(f"The code point tables are built from Unicode {UNICODE_VERSION} "
                           f"(Python 3.11); this Python's unicodedata is Unicode "
                           f"{unicodedata.unidata_version}.")
    np.savez_compressed(path, **{
        _array_name(lower_case, name): array for lower_case in (False, True)
        for name, array in zip(_TABLE_NAMES, _build_tables(lower_case))})


def _array_name(lower_case, name):
    return ("uncased_" if lower_case else "cased_") + name


def _build_tables(lower_case):
    codes = np.full(_NUM_CODEPOINTS, WORD, np.int32)
    expansion_values, expansion_splits = [], [0, 0]  # row 0 is "unchanged"
    # Unassigned code points stay inside words unchanged (as in the reference), unless they lie in
    # a CJK block or are capitals Python does not know yet: only the rest needs a closer look.
    for cp in sorted(_CJK | _EXTRA_LOWER_CASE.keys() | {
            cp for cp in range(_NUM_CODEPOINTS) if unicodedata.category(chr(cp)) != "Cn"}):
        # Surrogates never come out of UTF-8 decoding; drop them like other C* code points.
        outputs = [] if 0xD800 <= cp <= 0xDFFF else _classify(chr(cp), lower_case)
        if not outputs:
            codes[cp] = DROP
        elif len(outputs) == 1 and outputs[0][0] == cp:
            codes[cp] = outputs[0][1]
        elif len(outputs) == 1 and outputs[0][1] == SPACE:
            # Whitespace is only a separator: which space character it was does not matter.
            codes[cp] = SPACE
        else:
            codes[cp] = (len(expansion_splits) - 1) << 2
            expansion_values.extend((out << 2) | cls for out, cls in outputs)
            expansion_splits.append(len(expansion_values))
    blocks = codes.reshape(-1, BLOCK_SIZE)
    unique_blocks, block_index = np.unique(blocks, axis=0, return_inverse=True)
    return (block_index.reshape(-1).astype(np.int32), unique_blocks.reshape(-1),
            np.asarray(expansion_values, np.int32), np.asarray(expansion_splits, np.int32))
