"""Masked-LM masking: which positions BERT predicts, and what the model sees there.

BERT's recipe (Devlin et al., 2019, section 3.1 and appendix A.1): predict `masked_lm_prob`
(15 %) of the word pieces of a sequence, at most `max_predictions_per_seq`, never `[CLS]` or
`[SEP]`. Of the chosen pieces, 80 % are replaced by `[MASK]`, 10 % by a random piece and 10 %
stay unchanged. Only replacing by `[MASK]` would teach the model that a real piece never needs
a prediction, and `[MASK]` never occurs in fine-tuning; the random and unchanged 10 % make it
keep a good representation of *every* input piece (the random ones are rare enough, 1.5 % of
all pieces, not to hurt its language understanding).

With whole-word masking, the pieces of one word (a piece and the `##` pieces after it) are
chosen together, so the model cannot recover `##able` from an unmasked `un ##aff`; each piece
is still predicted, and replaced 80/10/10, on its own.

There are two implementations, because there are two places masking happens:

- `create_masked_lm_predictions` is Google's offline algorithm, in Python, driven by a
  `random.Random`: `tools/create_pretraining_data.py` masks each instance once, when it
  writes it (`dupe_factor` copies get different masks), and keeps the original's exact
  sequence of random draws, so its output is reproducible from `--random_seed`.
- `mask_batch` does the same on a dense batch as TensorFlow ops, with stateless random numbers
  from a seed: `dynamic_masking_dataset` masks again every time a sequence is read (fresh
  masks each epoch), inside a parallel `tf.data` map, where only stateless randomness is
  deterministic. tf.text's `mask_language_model` is not used: its `RandomItemSelector` draws
  `ceil(rate * selectable)` items and counts whole words, not pieces, against the maximum, and
  both it and `MaskValuesChooser` use stateful random ops.

Both take the rates and the special tokens from here (`MaskedLmVocab`), and count predictions
the same way: `min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob)))`,
where `tokens` includes `[CLS]` and `[SEP]` as in the original, and Python's and
TensorFlow's `round` both round halves to even.

Example:
    >>> vocab = MaskedLmVocab(load_vocab("vocab.txt"))
    >>> ids = [vocab.cls_id, 7592, 1010, 2088, vocab.sep_id]
    >>> masked, positions, labels = create_masked_lm_predictions(
    ...     ids, vocab, 0.15, 20, whole_word_mask=False, rng=random.Random(1))
    >>> positions, labels            # round(5 * 0.15) = 1 prediction
    ([2], [1010])
"""

import tensorflow as tf

MASKED_LM_PROB = 0.15
# Of the pieces chosen for prediction: replaced by [MASK], by a random piece, or kept.
MASK_TOKEN_RATE = 0.8
RANDOM_TOKEN_RATE = 0.1
# The original draws a second number for the 20 % not masked: below this, keep the piece.
_KEEP_SHARE_OF_UNMASKED = (1.0 - MASK_TOKEN_RATE - RANDOM_TOKEN_RATE) / (1.0 - MASK_TOKEN_RATE)
# Pieces that structure the input and are never predicted.
NEVER_MASKED_TOKENS = ("[CLS]", "[SEP]")
CONTINUATION_PREFIX = "##"


class MaskedLmVocab:
    """What masking needs to know of a vocabulary: the ids of `[MASK]`, `[CLS]`, `[SEP]` and
    `[PAD]`, its size (random replacements are drawn uniformly from all of it, as in the
    original), and which pieces continue a word (`##...`, for whole-word masking).

    Args:
        vocab: the tokens, in id order (`BertTokenizer.vocab`, `load_vocab(path)`); one without
            a special token is an error naming it.

    Example:
        >>> vocab = MaskedLmVocab(load_vocab("vocab.txt"))
        >>> vocab.mask_id, vocab.is_continuation[vocab.mask_id]
        (103, False)
    """

    def __init__(self, vocab):
        ids = {token: index for index, token in enumerate(vocab)}
        missing = [t for t in ("[PAD]", "[MASK]", *NEVER_MASKED_TOKENS) if t not in ids]
        if missing:
            raise ValueError(f"The vocabulary ({len(ids)} tokens) lacks {missing}: masked-LM "
                             f"data needs [PAD], [MASK], [CLS] and [SEP].")
        self.mask_id, self.pad_id = ids["[MASK]"], ids["[PAD]"]
        self.cls_id, self.sep_id = (ids[t] for t in NEVER_MASKED_TOKENS)
        self.never_masked_ids = frozenset((self.cls_id, self.sep_id))
        self.vocab_size = len(vocab)
        # A tuple: indexing it is what the offline loop does for every piece.
        self.is_continuation = tuple(token.startswith(CONTINUATION_PREFIX) for token in vocab)


def create_masked_lm_predictions(token_ids, vocab, masked_lm_prob, max_predictions_per_seq,
                                 whole_word_mask, rng):
    """Google's `create_masked_lm_predictions`, on ids.

    Args:
        token_ids: the instance, `[CLS] A [SEP] B [SEP]` (list of ints).
        vocab: a `MaskedLmVocab`.
        rng: a `random.Random`; the draws are the original's, in its order.

    Returns:
        `(output_ids, masked_lm_positions, masked_lm_ids)`: the ids the model reads, and the
        predicted positions (ascending) with their original ids.
    """
    # Candidate groups, in order: one per piece, or one per word with whole-word masking (a
    # "##" piece joins the group before it).
    candidates = []
    for index, token_id in enumerate(token_ids):
        if token_id in vocab.never_masked_ids:
            continue
        if whole_word_mask and candidates and vocab.is_continuation[token_id]:
            candidates[-1].append(index)
        else:
            candidates.append([index])
    rng.shuffle(candidates)

    num_to_predict = min(max_predictions_per_seq,
                         max(1, int(round(len(token_ids) * masked_lm_prob))))
    output_ids = list(token_ids)
    positions = []
    for group in candidates:
        if len(positions) >= num_to_predict:
            break
        # A whole word that would exceed the budget is skipped; a shorter one may still fit.
        if len(positions) + len(group) > num_to_predict:
            continue
        for index in group:
            output_ids[index] = _masked_value(token_ids[index], vocab, rng)
            positions.append(index)
    positions.sort()
    return output_ids, positions, [token_ids[index] for index in positions]


def _masked_value(token_id, vocab, rng):
    if rng.random() < MASK_TOKEN_RATE:
        return vocab.mask_id
    if rng.random() < _KEEP_SHARE_OF_UNMASKED:
        return token_id
    return rng.randint(0, vocab.vocab_size - 1)


# Plain TensorFlow ops (Python conditions only on Python values): no AutoGraph conversion.
@tf.autograph.experimental.do_not_convert
def mask_batch(input_ids, input_mask, vocab, masked_lm_prob, max_predictions_per_seq,
               whole_word_mask, seed):
    """Masks a packed batch in the graph, with the offline algorithm's rules.

    Each sequence predicts `min(max_predictions_per_seq, max(1, round(length *
    masked_lm_prob)))` pieces (whole words taken greedily in a random order, a word that does
    not fit any more is skipped), chosen uniformly among its pieces other than `[CLS]`,
    `[SEP]` and padding; 80/10/10 as above. The same `seed` gives the same masks.

    Args:
        input_ids, input_mask: int `[batch, seq_length]` (`BertPacker` outputs); `seq_length`
            must be static.
        vocab: a `MaskedLmVocab`.
        seed: int32/int64 `[2]`, the stateless random seed of this batch.

    Returns:
        A dict: int32 `input_word_ids` (masked) `[batch, seq_length]`, int32
        `masked_lm_positions` (ascending, then 0) and `masked_lm_ids` (then 0), float32
        `masked_lm_weights` (1 for a prediction, 0 for padding), `[batch,
        max_predictions_per_seq]`.
    """
    input_ids = tf.cast(input_ids, tf.int32)
    input_mask = tf.cast(input_mask, tf.int32)
    seq_length = input_ids.shape[1]
    if seq_length is None:
        raise ValueError("mask_batch needs a static sequence length (input_ids [batch, N]).")
    word_seed, value_seed, random_id_seed = tf.unstack(
        tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 3))

    lengths = tf.reduce_sum(input_mask, axis=1)
    num_to_predict = tf.clip_by_value(
        tf.cast(tf.round(tf.cast(lengths, tf.float64) * masked_lm_prob), tf.int32),
        1, max_predictions_per_seq)
    candidate = tf.logical_and(tf.equal(input_mask, 1), tf.reduce_all(
        tf.not_equal(input_ids[..., None], sorted(vocab.never_masked_ids)), axis=-1))

    # Number the candidate words of each row: a candidate starts a word unless whole-word
    # masking joins it to the candidate before it.
    starts_word = candidate
    if whole_word_mask:
        continues = tf.gather(tf.constant(vocab.is_continuation), input_ids)
        previous_is_candidate = tf.pad(candidate[:, :-1], [[0, 0], [1, 0]])
        starts_word = candidate & ~(continues & previous_is_candidate)
    word_of_position = tf.cumsum(tf.cast(starts_word, tf.int32), axis=1) - 1
    word_of_position = tf.where(candidate, word_of_position, seq_length)   # a "no word" slot
    batch_size = tf.shape(input_ids)[0]
    word_slots = word_of_position + (seq_length + 1) * tf.range(batch_size)[:, None]
    word_lengths = tf.reshape(tf.math.unsorted_segment_sum(
        tf.ones_like(word_slots), word_slots, batch_size * (seq_length + 1)),
        [batch_size, seq_length + 1])[:, :seq_length]

    # Words in a random order (empty word slots last); take each that still fits.
    word_keys = tf.random.stateless_uniform(tf.shape(word_lengths), word_seed)
    word_keys = tf.where(word_lengths > 0, word_keys, 2.0)
    word_order = tf.argsort(word_keys, axis=1, stable=True)
    ordered_lengths = tf.gather(word_lengths, word_order, batch_dims=1)

    def take_if_fits(remaining, length):
        return tf.where(length <= remaining, remaining - length, remaining)

    # Scanned in float32, exact for these small counts: TensorFlow 2.21's oneDNN transpose
    # logs an error line ("oneDNN supports DT_INT32 only on platforms with AVX-512") for every
    # integer type, even on AVX-512 machines.
    budget = tf.cast(num_to_predict, tf.float32)
    remaining_after = tf.transpose(tf.scan(
        take_if_fits, tf.transpose(tf.cast(ordered_lengths, tf.float32)), initializer=budget))
    remaining_before = tf.concat([budget[:, None], remaining_after[:, :-1]], axis=1)
    ordered_taken = (remaining_before != remaining_after)
    word_taken = tf.gather(ordered_taken, tf.argsort(word_order, axis=1), batch_dims=1)
    word_taken = tf.pad(word_taken, [[0, 0], [0, 1]])   # the "no word" slot is never taken
    selected = tf.gather(word_taken, word_of_position, batch_dims=1)

    # What the model reads at the selected positions.
    draw = tf.random.stateless_uniform(tf.shape(input_ids), value_seed)
    random_ids = tf.random.stateless_uniform(tf.shape(input_ids), random_id_seed, minval=0,
                                             maxval=vocab.vocab_size, dtype=tf.int32)
    masked_ids = tf.where(draw < MASK_TOKEN_RATE, vocab.mask_id,
                          tf.where(draw < MASK_TOKEN_RATE + RANDOM_TOKEN_RATE, random_ids,
                                   input_ids))
    output_ids = tf.where(selected, masked_ids, input_ids)

    # Selected positions first, ascending; then padding.
    positions = tf.range(seq_length)[None, :]
    order = tf.argsort(tf.where(selected, positions, positions + seq_length), axis=1)
    order = tf.pad(order, [[0, 0], [0, max(0, max_predictions_per_seq - seq_length)]])
    num_selected = tf.reduce_sum(tf.cast(selected, tf.int32), axis=1)
    is_prediction = tf.range(max_predictions_per_seq)[None, :] < num_selected[:, None]
    order = order[:, :max_predictions_per_seq]
    masked_lm_positions = tf.where(is_prediction, order, 0)
    return {
        "input_word_ids": output_ids,
        "masked_lm_positions": masked_lm_positions,
        "masked_lm_ids": tf.where(is_prediction,
                                  tf.gather(input_ids, masked_lm_positions, batch_dims=1), 0),
        "masked_lm_weights": tf.cast(is_prediction, tf.float32),
    }
