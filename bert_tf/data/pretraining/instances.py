"""Google's `create_pretraining_data.py` algorithm: documents of sentences to BERT instances.

An instance is `[CLS] A [SEP] B [SEP]` with masked-LM predictions and a next-sentence label.
Sentences are kept whole where possible: A and B are runs of *actual sentences* of one
document, because cutting a concatenated document at an arbitrary point would make next-
sentence prediction too easy (the cut falls mid-sentence). Half of the time B is the text that
really follows A; otherwise (and always when A took the whole chunk) B is taken from another
document, so that the model has to judge whether B continues A.

Everything works on word-piece ids (the tokenizer has run), with the original's sequence of
draws from a `random.Random`, so that a seed reproduces the output. The one difference is
where "another document" comes from: the original holds the whole corpus in memory; here
`create_training_instances` gets the documents of one chunk (see
`bert_tf.data.pretraining.corpus`), and random next sentences come from that chunk.

A sentence longer than a sequence (a corpus of a paragraph, a web page or a book per line)
gives instances that keep a sequence of it and lose the rest to truncation, as in the
original; with `cut_long_sentences`, `sentence_pieces` cuts it first into pieces of half a
sequence, which pair as sentences do, and nothing of it is lost. Truncation is the default:
on one-sentence-per-line text the pieces of cut sentences, pairs that start and end
mid-sentence, cost held-out accuracy (docs/PERFORMANCE.md, convergence: 1.5-2 points at the
same step with short sequences).

Example:
    >>> builder = PretrainingInstanceBuilder(MaskedLmVocab(tokenizer.vocab), max_seq_length=128,
    ...                                      max_predictions_per_seq=20)
    >>> documents = [[[7592, 2088], [2129, 2024, 2017]], [[2748, 1012]]]  # sentences of ids
    >>> instances = builder.create_training_instances(documents, random.Random(12345))
    >>> record = builder.serialize(instances[0])   # a tf.train.Example, Google's features
"""

import collections

import tensorflow as tf

from bert_tf.data.pretraining.masking import MASKED_LM_PROB, create_masked_lm_predictions

TrainingInstance = collections.namedtuple(
    "TrainingInstance",
    ["input_ids", "segment_ids", "masked_lm_positions", "masked_lm_ids", "is_random_next"])
TrainingInstance.__doc__ = """One sentence pair, unpadded: `input_ids` as the model reads them
(masked), `segment_ids`, the predicted positions (ascending) with their original ids, and whether
B is a random next sentence."""

# How often the original looks for a random document other than the current one: with many
# documents once is nearly always enough, and with one document there is no other.
_RANDOM_DOCUMENT_TRIES = 10


class PretrainingInstanceBuilder:
    """Creates and serializes pre-training instances, as Google's script does.

    Args:
        vocab: a `bert_tf.data.pretraining.masking.MaskedLmVocab`.
        max_seq_length: length of the written sequences (`[CLS]`, two `[SEP]` included).
        max_predictions_per_seq: length of the masked-LM arrays.
        masked_lm_prob: share of the pieces predicted.
        short_seq_prob: share of the instances whose target length is drawn uniformly from
            `[2, max_seq_length - 3]` instead of the maximum.
        whole_word_mask: mask all the pieces of a word together.
        dupe_factor: how many times each document is turned into instances (with different
            masks and pairings).
        cut_long_sentences: whether `sentence_pieces` cuts a sentence longer than a sequence
            into pieces of half a sequence (else it stays whole and is truncated).
    """

    def __init__(self, vocab, max_seq_length=128, max_predictions_per_seq=20,
                 masked_lm_prob=MASKED_LM_PROB, short_seq_prob=0.1, whole_word_mask=False,
                 dupe_factor=10, cut_long_sentences=False):
        if max_seq_length < 5:
            raise ValueError(f"max_seq_length must be at least 5 ([CLS] A [SEP] B [SEP] with "
                             f"one piece in A and B), got {max_seq_length}.")
        if max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq must be at least 1, got "
                             f"{max_predictions_per_seq}.")
        if not 0.0 < masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1], got {masked_lm_prob}.")
        if not 0.0 <= short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob must be in [0, 1], got {short_seq_prob}.")
        if dupe_factor < 1:
            raise ValueError(f"dupe_factor must be at least 1, got {dupe_factor}.")
        self.vocab = vocab
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.masked_lm_prob = masked_lm_prob
        self.short_seq_prob = short_seq_prob
        self.whole_word_mask = whole_word_mask
        self.dupe_factor = dupe_factor
        self.cut_long_sentences = cut_long_sentences

    @property
    def max_num_tokens(self):
        """The pieces of text a sequence holds: room is left for `[CLS]`, `[SEP]`, `[SEP]`."""
        return self.max_seq_length - 3

    def is_long(self, sentence):
        """Whether `sentence` (a list of ids) is longer than a sequence holds."""
        return len(sentence) > self.max_num_tokens

    def sentence_pieces(self, sentence):
        """`[sentence]` (a list of ids) when it fits in a sequence or `cut_long_sentences` is
        off, else its consecutive pieces of half a sequence, which the algorithm then takes
        for sentences: two of them fill a sequence exactly (cut at every multiple of half of
        `max_seq_length - 3`, rounded down: their lengths alternate when that is odd), so a
        pair of them is never truncated and nothing of the sentence is lost.

        Example (max_seq_length 10, 7 pieces per sequence, `cut_long_sentences`):
            >>> builder.sentence_pieces(list(range(12)))
            [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9], [10, 11]]
        """
        if not (self.cut_long_sentences and self.is_long(sentence)):
            return [sentence]
        max_num_tokens = self.max_num_tokens
        cuts = [k * max_num_tokens // 2 for k in range(2 * len(sentence) // max_num_tokens + 2)]
        return [sentence[start:end] for start, end in zip(cuts, cuts[1:])
                if start < len(sentence)]

    def create_training_instances(self, documents, rng):
        """All instances of `documents` (lists of sentences, each a non-empty list of ids;
        no empty document), `dupe_factor` times, shuffled. A sentence longer than a sequence
        is truncated, as in the original: to cut it, pass it through `sentence_pieces` first.

        The documents are shuffled first, as in the original; `documents` is not changed.
        """
        documents = list(documents)
        rng.shuffle(documents)
        instances = []
        # Each pass pairs and masks the same text anew: more distinct training signal from one
        # corpus than repeating identical records, at the price of disk space.
        for _ in range(self.dupe_factor):
            for document_index in range(len(documents)):
                instances.extend(self.instances_from_document(documents, document_index, rng))
        rng.shuffle(instances)
        return instances

    def instances_from_document(self, documents, document_index, rng):
        """The instances of `documents[document_index]` (Google's
        `create_instances_from_document`)."""
        document = documents[document_index]
        max_num_tokens = self.max_num_tokens
        # Padding to max_seq_length anyway, short sequences waste computation, so usually the
        # sequence is filled. Sometimes (short_seq_prob) it is made shorter, so that the model
        # also sees the short inputs fine-tuning will give it. The target is only a rough goal;
        # max_seq_length is the hard limit.
        target_seq_length = max_num_tokens
        if rng.random() < self.short_seq_prob:
            target_seq_length = rng.randint(2, max_num_tokens)

        instances = []
        current_chunk = []
        current_length = 0
        i = 0
        while i < len(document):
            current_chunk.append(document[i])
            current_length += len(document[i])
            if i == len(document) - 1 or current_length >= target_seq_length:
                # A is the first a_end sentences of the chunk.
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = [t for sentence in current_chunk[:a_end] for t in sentence]

                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    tokens_b = self._random_next(documents, document_index,
                                                 target_seq_length - len(tokens_a), rng)
                    # The chunk's sentences after A were not used: "put them back", so that
                    # they start the next chunk rather than go to waste.
                    i -= len(current_chunk) - a_end
                else:
                    is_random_next = False
                    tokens_b = [t for sentence in current_chunk[a_end:] for t in sentence]
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                instances.append(self._instance(tokens_a, tokens_b, is_random_next, rng))
                current_chunk = []
                current_length = 0
            i += 1
        return instances

    def _random_next(self, documents, document_index, target_b_length, rng):
        """Sentences from a random point of another document, up to `target_b_length` pieces.

        Taken from a *different* document so that B really does not continue A (the rare
        repeat after all tries, e.g. a single-document chunk, is kept as in the original)."""
        for _ in range(_RANDOM_DOCUMENT_TRIES):
            random_document_index = rng.randint(0, len(documents) - 1)
            if random_document_index != document_index:
                break
        random_document = documents[random_document_index]
        tokens_b = []
        for sentence in random_document[rng.randint(0, len(random_document) - 1):]:
            tokens_b.extend(sentence)
            if len(tokens_b) >= target_b_length:
                break
        return tokens_b

    def _instance(self, tokens_a, tokens_b, is_random_next, rng):
        vocab = self.vocab
        tokens = [vocab.cls_id, *tokens_a, vocab.sep_id, *tokens_b, vocab.sep_id]
        segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        input_ids, positions, labels = create_masked_lm_predictions(
            tokens, vocab, self.masked_lm_prob, self.max_predictions_per_seq,
            self.whole_word_mask, rng)
        return TrainingInstance(input_ids, segment_ids, positions, labels, is_random_next)

    def serialize(self, instance):
        """`instance` as a serialized `tf.train.Example` with Google's features: the sequences
        padded with 0 to `max_seq_length`, the predictions padded with position 0, id 0 and
        weight 0.0 to `max_predictions_per_seq`, `next_sentence_labels` 1 for a random B."""
        sequence_padding = [0] * (self.max_seq_length - len(instance.input_ids))
        num_predictions = len(instance.masked_lm_positions)
        prediction_padding = [0] * (self.max_predictions_per_seq - num_predictions)
        example = tf.train.Example()
        # Filling the message in place is three times as fast as building Feature objects.
        features = example.features.feature
        features["input_ids"].int64_list.value.extend(instance.input_ids + sequence_padding)
        features["input_mask"].int64_list.value.extend(
            [1] * len(instance.input_ids) + sequence_padding)
        features["segment_ids"].int64_list.value.extend(instance.segment_ids + sequence_padding)
        features["masked_lm_positions"].int64_list.value.extend(
            instance.masked_lm_positions + prediction_padding)
        features["masked_lm_ids"].int64_list.value.extend(
            instance.masked_lm_ids + prediction_padding)
        features["masked_lm_weights"].float_list.value.extend(
            [1.0] * num_predictions + [0.0] * len(prediction_padding))
        features["next_sentence_labels"].int64_list.value.append(int(instance.is_random_next))
        # Deterministic: the features map in one order in every process (the same seed must
        # give the same bytes whichever worker wrote them).
        return example.SerializeToString(deterministic=True)


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Shortens the longer of `tokens_a`, `tokens_b` (B on a tie) one piece at a time, in place,
    until both fit in `max_num_tokens`; each piece comes off the front or the back at random,
    so that neither the beginnings nor the ends of the texts are systematically lost.

    The same random draws and pieces as Google's loop, counted first and cut once: deleting
    one front piece at a time made it quadratic (a 1 MB line of text, ~430,000 pieces cut to
    a sequence's, took ~20 s; a 20 MB line did not end in 10 minutes)."""
    lengths = [len(tokens_a), len(tokens_b)]
    cut_front, cut_back = [0, 0], [0, 0]
    while lengths[0] + lengths[1] > max_num_tokens:
        longer = 0 if lengths[0] > lengths[1] else 1
        lengths[longer] -= 1
        if rng.random() < 0.5:
            cut_front[longer] += 1
        else:
            cut_back[longer] += 1
    for tokens, front, back in zip((tokens_a, tokens_b), cut_front, cut_back):
        del tokens[len(tokens) - back:]
        del tokens[:front]

