"""Word-level tagging data (NER) as BERT inputs, and predictions back to words.

As in the paper's CoNLL-2003 setup, each word is tokenized on its own into word pieces and its
tag goes on its FIRST piece; the other pieces, `[CLS]`, `[SEP]` and padding get the label -1,
which the loss ignores (`SparseCategoricalCrossentropy(ignore_class=-1)`). A word is predicted
by the logits at its first piece.

A sentence with more pieces than fit between `[CLS]` and `[SEP]` is split, at word boundaries,
into several consecutive windows, so that every word is predicted exactly once (each window sees
only its own words as context). Two rare cases are counted, never dropped: a word that
tokenizes to nothing (e.g. only control characters) is given `[UNK]`, so that it still has a
position to be predicted from; a single word with more pieces than a window holds keeps its
first pieces.

Example:
    >>> windows = TaggingWindows.build([s.words for s in sentences], tokenizer, 128,
    ...                                tag_ids(sentences, labels, path))
    >>> dataset = tf.data.Dataset.from_tensor_slices((windows.features, windows.labels))
    >>> logits = predict_padded(tagger, padded_batches(dataset, 64, 128), 128, ("logits",))
    >>> windows.word_predictions(logits["logits"])        # [sentence][word] class ids
"""

import dataclasses

import numpy as np
import tensorflow as tf

IGNORED_LABEL = -1
# Words tokenized per tokenizer call: large enough to amortise the call, small enough for memory.
_TOKENIZE_CHUNK = 20_000


def word_pieces(words, tokenizer):
    """The word-piece ids of each word of `words` (a flat list of strings), as a list of lists.

    A word is tokenized alone: BERT's basic tokenizer may split it further ("U.S." -> u . s .),
    and all its pieces belong to it."""
    pieces = []
    for start in range(0, len(words), _TOKENIZE_CHUNK):
        ids = tokenizer.tokenize_to_pieces(tf.constant(words[start:start + _TOKENIZE_CHUNK]))
        values = ids.flat_values.numpy().tolist()
        splits = ids.row_splits.numpy().tolist()
        pieces += [values[a:b] for a, b in zip(splits[:-1], splits[1:])]
    return pieces


@dataclasses.dataclass
class TaggingWindows:
    """Packed windows over tokenized sentences.

    features: the encoder's inputs, int32 `[windows, max_seq_length]` NumPy arrays.
    labels: int32 `[windows, max_seq_length]`, the word's tag id at its first piece, else -1
        (all -1 without tags).
    sentence_index: `[windows]`, the sentence each window comes from (windows of a sentence are
        consecutive and in word order).
    word_positions: per window, the positions of its words' first pieces.
    split_sentences, empty_words, truncated_words: the counts of the rare cases above.
    """

    features: dict
    labels: np.ndarray
    sentence_index: np.ndarray
    word_positions: list
    num_sentences: int
    split_sentences: int = 0
    empty_words: int = 0
    truncated_words: int = 0

    @classmethod
    def build(cls, sentences, tokenizer, max_seq_length, tags=None):
        """Windows for `sentences` (lists of words); `tags` are their class ids
        (`[sentence][word]`), or None for prediction."""
        budget = max_seq_length - 2  # [CLS] and [SEP]
        if budget < 1:
            raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
        cls_id, sep_id = tokenizer.token_id("[CLS]"), tokenizer.token_id("[SEP]")
        pieces = word_pieces([word for sentence in sentences for word in sentence], tokenizer)
        windows = cls(features={}, labels=None, sentence_index=None, word_positions=[],
                      num_sentences=len(sentences))
        rows, sentence_index = [], []
        position = 0
        for index, sentence in enumerate(sentences):
            sentence_pieces = pieces[position:position + len(sentence)]
            position += len(sentence)
            sentence_tags = tags[index] if tags is not None else [IGNORED_LABEL] * len(sentence)
            window, window_length, num_windows = [], 0, 1
            for word, tag in zip(sentence_pieces, sentence_tags, strict=True):
                if not word:
                    windows.empty_words += 1
                    word = [tokenizer.unknown_id]
                if len(word) > budget:
                    windows.truncated_words += 1
                    word = word[:budget]
                if window and window_length + len(word) > budget:
                    rows.append(window)
                    sentence_index.append(index)
                    window, window_length, num_windows = [], 0, num_windows + 1
                window.append((word, tag))
                window_length += len(word)
            rows.append(window)
            sentence_index.append(index)
            windows.split_sentences += num_windows > 1

        ids = np.full([len(rows), max_seq_length], tokenizer.token_id("[PAD]"), np.int32)
        mask = np.zeros_like(ids)
        labels = np.full([len(rows), max_seq_length], IGNORED_LABEL, np.int32)
        for row_index, window in enumerate(rows):
            tokens, positions = [cls_id], []
            for word, tag in window:
                positions.append(len(tokens))
                labels[row_index, len(tokens)] = tag
                tokens += word
            tokens.append(sep_id)
            ids[row_index, :len(tokens)] = tokens
            mask[row_index, :len(tokens)] = 1
            windows.word_positions.append(np.array(positions))
        windows.features = {"input_word_ids": ids, "input_mask": mask,
                            "input_type_ids": np.zeros_like(ids)}
        windows.labels = labels
        windows.sentence_index = np.array(sentence_index)
        return windows

    def __len__(self):
        return len(self.labels)

    def counts(self):
        """The counts to report: windows, sentences and the rare cases."""
        return {"windows": len(self), "sentences": self.num_sentences,
                "split_sentences": self.split_sentences, "empty_words": self.empty_words,
                "truncated_words": self.truncated_words}

    def dataset(self):
        """`(features, labels)` per window, in order."""
        return tf.data.Dataset.from_tensor_slices((self.features, self.labels))

    def word_predictions(self, logits):
        """`[sentence][word]` predicted class ids from per-token `logits`
        `[windows, seq, classes]` (or already arg-maxed `[windows, seq]`)."""
        logits = np.asarray(logits)
        if len(logits) != len(self):
            raise ValueError(f"Got logits for {len(logits)} windows, expected {len(self)}")
        token_classes = logits.argmax(-1) if logits.ndim == 3 else logits
        predictions = [[] for _ in range(self.num_sentences)]
        for window, (sentence, positions) in enumerate(zip(self.sentence_index,
                                                           self.word_positions)):
            predictions[sentence] += token_classes[window, positions].tolist()
        return predictions
