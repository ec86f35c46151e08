"""Task exports pack each batch only to its longest text (rounded up to a multiple of 8, at most
seq_length): their outputs equal the Keras model's on full-length packing (BertPreprocessor at
SEQ_LENGTH) for texts of every length, alone or batched with longer and shorter ones, including
texts truncated at SEQ_LENGTH; NER's per-token outputs keep `[batch, SEQ_LENGTH]`. The encoder
runs its dense layers on the real tokens only (`skip_padding`, the default), or on every
padded position with `skip_padding=False`, with the same outputs."""

import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from bert_tf.export import export_task_model, write_version
from bert_tf.export.text_inputs import RawTextPacker
from bert_tf.text.bert_preprocessor import BertPreprocessor
from tests.export.task_examples import EXPORT_OPTIONS, SEQ_LENGTH

ATOL = 1e-5
WORDS = "hello , unaffable world what is the good film ! a bad movie ?".split()
# 0 to 40 words: from [CLS] [SEP] alone to texts truncated at SEQ_LENGTH (16) tokens; "unaffable"
# is 3 pieces, so piece counts are not word counts.
TEXTS = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(n))
         for i, n in enumerate([0, 1, 2, 3, 5, 6, 7, 9, 11, 13, 14, 15, 20, 40])]


@pytest.fixture(scope="module")
def preprocessor(vocab_file):
    return BertPreprocessor(vocab_file, lower_case=True, seq_length=SEQ_LENGTH)


def batches():
    """Each text alone, all of them mixed in one batch, and the short ones without the long."""
    return [[text] for text in TEXTS] + [TEXTS, TEXTS[:6]]


def test_the_texts_cover_every_kind_of_batch(preprocessor):
    lengths = preprocessor(tf.constant(TEXTS))["input_mask"].numpy().sum(axis=1)
    assert lengths.min() == 2 and lengths.max() == SEQ_LENGTH
    assert (lengths == SEQ_LENGTH).sum() >= 2            # truncated texts
    assert lengths[:6].max() <= 8                        # a batch trimmed to 8 columns


def test_trimmed_length_is_the_longest_row_rounded_up(vocab_file):
    def trimmed(texts, multiple):
        packer = RawTextPacker(vocab_file, True, SEQ_LENGTH, pad_to_multiple_of=multiple)
        return int(packer.trimmed_length(packer.pack([tf.constant(texts, tf.string)])))

    # [CLS] hello [SEP] is 3 tokens; "hello , unaffable world" 8; TEXTS[-1] is cut at 16.
    assert trimmed(["hello"], 8) == 8
    assert trimmed(["hello", "hello , unaffable world"], 8) == 8
    assert trimmed(["hello", "hello , unaffable world !"], 8) == 16
    assert trimmed(["hello"], 1) == 3
    assert trimmed(["hello"], 5) == 5
    assert trimmed([TEXTS[-1]], 5) == SEQ_LENGTH           # never beyond seq_length
    assert trimmed(["hello"], SEQ_LENGTH) == SEQ_LENGTH    # the fixed-length export
    assert trimmed([], 8) == 8                             # an empty batch keeps valid shapes


def test_classifier_outputs_equal_full_length_packing(task_exports, preprocessor):
    loaded, model = task_exports["classifier"][1:]
    serving = loaded.signatures["serving_default"]
    for batch in batches():
        # The pairs export: the second text of each pair is the first one of the next.
        pairs = (batch, batch[1:] + batch[:1])
        expected = model(preprocessor(tuple(tf.constant(t) for t in pairs)),
                         training=False)["logits"].numpy()
        outputs = serving(text_a=tf.constant(pairs[0]), text_b=tf.constant(pairs[1]))
        np.testing.assert_allclose(outputs["logits"], expected, atol=ATOL, err_msg=batch)
        np.testing.assert_array_equal(outputs["label"], expected.argmax(-1))


def test_ner_outputs_equal_full_length_packing_at_every_token(task_exports, preprocessor):
    loaded, model = task_exports["ner"][1:]
    serving = loaded.signatures["serving_default"]
    for batch in batches():
        inputs = preprocessor(tf.constant(batch))
        expected = model(inputs, training=False)["logits"].numpy()
        outputs = serving(text=tf.constant(batch))
        is_token = inputs["input_mask"].numpy() == 1
        for name in ("logits", "probabilities", "label", "label_name", "start_offset"):
            assert outputs[name].shape[:2] == (len(batch), SEQ_LENGTH), name
        logits = outputs["logits"].numpy()
        np.testing.assert_allclose(logits[is_token], expected[is_token], atol=ATOL,
                                   err_msg=batch)
        np.testing.assert_array_equal(outputs["label"].numpy()[is_token],
                                      expected[is_token].argmax(-1))
        # Padding: logits 0, uniform probabilities, no offsets.
        assert (logits[~is_token] == 0).all()
        np.testing.assert_allclose(outputs["probabilities"].numpy()[~is_token], 1 / 3)
        assert (outputs["start_offset"].numpy()[~is_token] == -1).all()


def test_ner_answer_of_a_text_does_not_depend_on_its_batch(task_exports):
    serving = task_exports["ner"][1].signatures["serving_default"]
    alone = serving(text=tf.constant(TEXTS[3:4]))
    mixed = serving(text=tf.constant(TEXTS))
    for name in alone:
        if alone[name].dtype == tf.string:
            np.testing.assert_array_equal(alone[name][0], mixed[name][3], err_msg=name)
        else:
            np.testing.assert_allclose(alone[name][0], mixed[name][3], atol=ATOL, err_msg=name)


def test_multiple_choice_outputs_equal_full_length_packing(task_exports, preprocessor):
    loaded, model = task_exports["multiple_choice"][1:]
    serving = loaded.signatures["serving_default"]
    for contexts, choices in [(TEXTS[:1], [TEXTS[1:4]]),                     # short
                              (TEXTS[2:4], [TEXTS[4:7], [TEXTS[-1], "", "a"]]),  # mixed
                              (TEXTS[-2:], [TEXTS[-3:], TEXTS[:3]])]:          # truncated
        flat_contexts = np.repeat(np.array(contexts, object), 3)
        packed = preprocessor((tf.constant(flat_contexts),
                               tf.constant(np.array(choices, object).reshape(-1))))
        inputs = {key: tf.reshape(value, [len(contexts), 3, SEQ_LENGTH])
                  for key, value in packed.items()}
        expected = model(inputs, training=False)["logits"].numpy()
        outputs = serving(context=tf.constant(contexts), choices=tf.constant(choices))
        np.testing.assert_allclose(outputs["logits"], expected, atol=ATOL, err_msg=contexts)
        np.testing.assert_array_equal(outputs["label"], expected.argmax(-1))


def test_empty_batches_keep_their_shapes(task_exports):
    ner = task_exports["ner"][1].signatures["serving_default"](text=tf.constant([], tf.string))
    assert ner["logits"].shape == (0, SEQ_LENGTH, 3) and ner["label"].shape == (0, SEQ_LENGTH)
    classifier = task_exports["classifier"][1].signatures["serving_default"](
        text_a=tf.constant([], tf.string), text_b=tf.constant([], tf.string))
    assert classifier["probabilities"].shape == (0, 3)


def test_bad_pad_to_multiple_of_is_named(vocab_file):
    with pytest.raises(ValueError, match="pad_to_multiple_of must be at least 1, got 0"):
        RawTextPacker(vocab_file, True, SEQ_LENGTH, pad_to_multiple_of=0)


def graph_ops(export_dir):
    """Every op type in the SavedModel's graph and its functions."""
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    graph = saved_model.meta_graphs[0].graph_def
    return ({node.op for node in graph.node}
            | {node.op for function in graph.library.function for node in function.node_def})


def test_padded_positions_are_computed_only_without_skip_padding(task_exports, vocab_file,
                                                                  tmp_path):
    path, loaded, model = task_exports["classifier"]
    padded_path = write_version(str(tmp_path / "padded"), lambda d: export_task_model(
        d, "classifier", model, vocab_file, do_lower_case=True, seq_length=SEQ_LENGTH,
        skip_padding=False, **EXPORT_OPTIONS["classifier"]))
    # The real tokens' rows are gathered from the padded layout by GatherNd.
    assert "GatherNd" in graph_ops(path)
    assert "GatherNd" not in graph_ops(padded_path)
    padded = tf.saved_model.load(padded_path).signatures["serving_default"]
    pairs = {"text_a": tf.constant(TEXTS), "text_b": tf.constant(TEXTS[::-1])}
    np.testing.assert_allclose(loaded.signatures["serving_default"](**pairs)["logits"],
                               padded(**pairs)["logits"], atol=ATOL)
