"""Task SavedModels for TF Serving: raw strings in, named outputs equal to the Keras task model
on the package's own preprocessing; answers and offsets as text; loading from fine-tuned
checkpoints; saved_model_cli; clear errors. (Fresh process: test_fresh_process.py.)"""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.export import export_task_model, load_task_model
from bert_tf.export.example_signatures import CLASSIFY, REGRESS
from bert_tf.export.task_export import best_spans
from bert_tf.export.text_inputs import MAX_BYTES_PER_TOKEN
from bert_tf.text.bert_preprocessor import BertPreprocessor
from bert_tf.text.bert_tokenizer import BertTokenizer
from tests.export.task_examples import FEEDS, LABELS, SEQ_LENGTH

ATOL = 1e-5


@pytest.fixture(scope="module")
def preprocessor(vocab_file):
    """The package's Keras preprocessing layer: the reference packing."""
    return BertPreprocessor(vocab_file, lower_case=True, seq_length=SEQ_LENGTH)


def serve(task_exports, task):
    signature = task_exports[task][1].signatures["serving_default"]
    return signature(**{name: tf.constant(value) for name, value in FEEDS[task].items()})


def test_checkpoints_restore_every_weight(task_exports, task_checkpoints):
    for task, (_, written) in task_checkpoints.items():
        restored = task_exports[task][2]
        assert type(restored) is type(written)
        assert len(restored.weights) == len(written.weights)
        for got, want in zip(restored.weights, written.weights):
            np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=got.path)


def test_classifier_pairs(task_exports, preprocessor):
    feed = FEEDS["classifier"]
    model = task_exports["classifier"][2]
    logits = model(preprocessor((tf.constant(feed["text_a"]), tf.constant(feed["text_b"]))),
                   training=False)["logits"].numpy()
    outputs = serve(task_exports, "classifier")
    assert sorted(outputs) == ["label", "label_name", "logits", "probabilities"]
    np.testing.assert_allclose(outputs["logits"], logits, atol=ATOL)
    np.testing.assert_allclose(outputs["probabilities"], tf.nn.softmax(logits), atol=ATOL)
    np.testing.assert_array_equal(outputs["label"], logits.argmax(-1))
    assert [name.decode() for name in outputs["label_name"].numpy()] == [
        LABELS[i] for i in logits.argmax(-1)]


def test_classifier_classify_signature_reads_tf_examples(task_exports):
    feed = FEEDS["classifier"]
    examples = [tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[feed[name][i].encode()]))
        for name in ("text_a", "text_b")})).SerializeToString() for i in range(3)]
    classify = task_exports["classifier"][1].signatures[CLASSIFY]
    outputs = classify(inputs=tf.constant(examples))
    np.testing.assert_allclose(outputs["scores"], serve(task_exports, "classifier")["probabilities"],
                               atol=ATOL)
    assert outputs["classes"].numpy().tolist() == [[label.encode() for label in LABELS]] * 3


def test_ner_labels_tokens_with_their_place_in_the_text(task_exports, preprocessor):
    texts = FEEDS["ner"]["text"]
    inputs = preprocessor(tf.constant(texts))
    logits = task_exports["ner"][2](inputs, training=False)["logits"].numpy()
    outputs = serve(task_exports, "ner")
    # At padding the export's logits are 0 (test_trimmed_batches.py).
    is_token = inputs["input_mask"].numpy() == 1
    np.testing.assert_allclose(outputs["logits"].numpy()[is_token], logits[is_token], atol=ATOL)
    np.testing.assert_array_equal(outputs["label"].numpy()[is_token], logits[is_token].argmax(-1))
    starts, ends = outputs["start_offset"].numpy(), outputs["end_offset"].numpy()
    # [CLS] hello , un ##aff ##able world [SEP]: each piece's bytes of "Hello, unaffable world".
    pieces = [texts[0][s:e] for s, e in zip(starts[0], ends[0]) if s >= 0]
    assert pieces == ["Hello", ",", "un", "aff", "able", "world"]
    assert starts[0, 0] == -1 and starts[0, 7:].tolist() == [-1] * (SEQ_LENGTH - 7)
    assert outputs["first_subword"].numpy()[0, :8].tolist() == [
        False, True, True, True, False, False, True, False]
    assert [texts[1][s:e] for s, e in zip(starts[1], ends[1]) if s >= 0] == ["what", "?"]
    assert (starts[2] == -1).all() and not outputs["first_subword"].numpy()[2].any()
    assert outputs["label_name"].numpy()[0, 1] == str(outputs["label"].numpy()[0, 1]).encode()


def test_squad_answers_with_the_best_short_span_of_the_context(task_exports, preprocessor,
                                                               vocab_file):
    feed = FEEDS["squad"]
    inputs = preprocessor((tf.constant(feed["question"]), tf.constant(feed["context"])))
    expected = task_exports["squad"][2](inputs, training=False)
    outputs = serve(task_exports, "squad")
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(outputs[key], expected[key], atol=ATOL)
    tokenizer = BertTokenizer(vocab_file, lower_case=True)
    types, mask = inputs["input_type_ids"].numpy(), inputs["input_mask"].numpy()
    for i, context in enumerate(feed["context"]):
        _, piece_starts, piece_ends = tokenizer.tokenize_with_offsets(tf.constant([context]))
        piece_starts = piece_starts.flat_values.numpy()
        piece_ends = piece_ends.flat_values.numpy()
        first = int(np.argmax(types[i]))                   # the context's first token
        last = int(mask[i].sum()) - 2                      # its last one, before [SEP]
        assert last - first + 1 == len(piece_starts)       # nothing was truncated
        start_logits = outputs["start_logits"].numpy()[i]
        end_logits = outputs["end_logits"].numpy()[i]
        score, start, end = max((start_logits[s] + end_logits[e], s, e)
                                for s in range(first, last + 1)
                                for e in range(s, min(s + 3, last + 1)))
        begin, finish = piece_starts[start - first], piece_ends[end - first]
        assert outputs["answer"].numpy()[i].decode() == context[begin:finish]
        assert (outputs["answer_start"].numpy()[i], outputs["answer_end"].numpy()[i]) == (
            begin, finish)
        np.testing.assert_allclose(outputs["score"].numpy()[i], score, atol=ATOL)


def test_best_spans_respects_order_length_and_candidates():
    start = tf.constant([[9.0, 1.0, 0.0, 5.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    end = tf.constant([[9.0, 0.0, 2.0, 0.0, 8.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    candidates = tf.constant([[False, True, True, True, True], [False] * 5])
    # Position 0 is no candidate; end 4 after start 3 is the best pair (5 + 8); start 1 with
    # end 4 (1 + 8) loses; an end before its start (3 with 2) is not allowed.
    begin, finish, score, found = best_spans(start, end, candidates, candidates,
                                             max_answer_length=2)
    assert (begin[0].numpy(), finish[0].numpy(), score[0].numpy()) == (3, 4, 13.0)
    assert found.numpy().tolist() == [True, False]
    # With one-token answers only: 4 (0 + 8) beats 3 (5 + 0), 2 (0 + 2) and 1 (1 + 0).
    begin, finish, score, _ = best_spans(start, end, candidates, candidates, max_answer_length=1)
    assert (begin[0].numpy(), finish[0].numpy(), score[0].numpy()) == (4, 4, 8.0)
    # Starts and ends have candidates of their own (a token another window owns may end a span
    # but not start one): without start 3 the best is 4-4 (0 + 8); without end 4 too, 1-2.
    can_start = candidates & tf.constant([[True, True, True, False, True]] * 2)
    begin, finish, score, _ = best_spans(start, end, can_start, candidates, max_answer_length=2)
    assert (begin[0].numpy(), finish[0].numpy(), score[0].numpy()) == (4, 4, 8.0)
    can_end = candidates & tf.constant([[True, True, True, True, False]] * 2)
    begin, finish, score, _ = best_spans(start, end, can_start, can_end, max_answer_length=2)
    assert (begin[0].numpy(), finish[0].numpy(), score[0].numpy()) == (1, 2, 3.0)


def test_squad_without_context_answers_nothing(task_exports):
    outputs = task_exports["squad"][1].signatures["serving_default"](
        question=tf.constant(["what?"]), context=tf.constant([""]))
    assert outputs["answer"].numpy().tolist() == [b""]
    assert outputs["answer_start"].numpy().tolist() == [-1]
    assert outputs["answer_end"].numpy().tolist() == [-1]


def test_multiple_choice_scores_each_choice(task_exports, preprocessor):
    feed = FEEDS["multiple_choice"]
    contexts = np.repeat(np.array(feed["context"], dtype=object)[:, None], 3, axis=1)
    packed = preprocessor((tf.constant(contexts.reshape(-1)),
                           tf.constant(np.array(feed["choices"], dtype=object).reshape(-1))))
    inputs = {key: tf.reshape(value, [2, 3, SEQ_LENGTH]) for key, value in packed.items()}
    logits = task_exports["multiple_choice"][2](inputs, training=False)["logits"]
    outputs = serve(task_exports, "multiple_choice")
    np.testing.assert_allclose(outputs["logits"], logits, atol=ATOL)
    np.testing.assert_allclose(outputs["probabilities"], tf.nn.softmax(logits), atol=ATOL)
    np.testing.assert_array_equal(outputs["label"], np.argmax(logits, -1))


def test_every_model_carries_its_vocab_and_settings(task_exports, vocab_file):
    with open(vocab_file) as f:
        vocab = f.read()
    for path, loaded, _ in task_exports.values():
        with open(loaded.vocab_file.asset_path.numpy().decode()) as f:
            assert f.read() == vocab
        assert loaded.do_lower_case.numpy() and loaded.seq_length.numpy() == SEQ_LENGTH
        assert os.path.isfile(os.path.join(path, "saved_model.pb"))


def test_non_string_input_is_refused(task_exports):
    signature = task_exports["ner"][1].signatures["serving_default"]
    with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError)):
        signature(text=tf.constant([1, 2]))


def test_saved_model_cli_lists_the_classifier_signatures(task_exports):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    result = subprocess.run([cli, "show", "--dir", task_exports["classifier"][0], "--all"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    serving = result.stdout.split("signature_def['serving_default']")[1].split("signature_def[")[0]
    for name in ("text_a", "text_b"):
        assert f"inputs['{name}'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1)" \
            in serving
    for name in ("logits", "probabilities", "label", "label_name"):
        assert f"outputs['{name}']" in serving
    classify = result.stdout.split(f"signature_def['{CLASSIFY}']")[1]
    assert "inputs['inputs']" in classify and "outputs['classes']" in classify
    assert "outputs['scores']" in classify
    # The method name TF Serving's Classify looks for; the predict signature keeps its own.
    assert "Method name is: tensorflow/serving/classify" in classify
    assert "Method name is: tensorflow/serving/predict" in serving


def test_a_checkpoint_without_a_task_model_is_refused(pretrained):
    with pytest.raises(ValueError, match="holds no fine-tuned task model"):
        load_task_model("classifier", pretrained[0])


def test_a_checkpoint_of_another_task_is_refused(task_checkpoints):
    classifier_prefix, squad_prefix = (task_checkpoints[task][0]
                                       for task in ("classifier", "squad"))
    classifier_dir = os.path.dirname(classifier_prefix)
    with pytest.raises(ValueError) as error:
        load_task_model("squad", classifier_dir)
    assert str(error.value) == (f"{classifier_prefix} holds a fine-tuned BertClassifier, not a "
                                f"squad model (BertSpanLabeler).")
    with pytest.raises(ValueError, match="3 classes, but 5"):
        load_task_model("classifier", classifier_dir, num_classes=5)
    with pytest.raises(ValueError) as error:
        load_task_model("ner", os.path.dirname(squad_prefix))
    assert str(error.value) == (f"{squad_prefix} holds a fine-tuned BertSpanLabeler, not a ner "
                                f"model (BertTokenClassifier).")


def test_bad_export_arguments_are_named(task_checkpoints, vocab_file, tmp_path):
    classifier = task_checkpoints["classifier"][1]
    def export(task, model, seq_length=SEQ_LENGTH, **options):
        export_task_model(str(tmp_path / "x"), task, model, vocab_file, True,
                          seq_length=seq_length, **options)

    with pytest.raises(ValueError, match="max_position_embeddings \\(64\\), got 65"):
        export("classifier", classifier, seq_length=65)
    with pytest.raises(ValueError, match="2 name\\(s\\) but the classifier model has 3"):
        export("classifier", classifier, label_names=["a", "b"])
    with pytest.raises(ValueError, match=r"names two classes alike \(a\)"):
        export("classifier", classifier, label_names=["a", "b", "a"])
    with pytest.raises(TypeError, match="squad export takes a BertSpanLabeler"):
        export("squad", classifier)
    with pytest.raises(ValueError, match="text_pairs applies to the classifier"):
        export("ner", task_checkpoints["ner"][1], text_pairs=True)
    with pytest.raises(ValueError, match="max_answer_length must be at least 1, got 0"):
        export("squad", task_checkpoints["squad"][1], max_answer_length=0)
    with pytest.raises(ValueError, match="Unknown task 'qa'"):
        export("qa", classifier)
    assert not os.path.exists(tmp_path / "x")


def _example(**features):
    return tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        for name, value in features.items()})).SerializeToString()


def test_a_regression_model_gets_the_regress_signature(vocab_file, tmp_path):
    import keras
    from bert_tf import BertEncoder
    from bert_tf.models.bert_classifier import BertClassifier
    from tests.export.tiny_models import tiny_config

    keras.utils.set_random_seed(3)
    model = BertClassifier(BertEncoder(tiny_config(num_hidden_layers=1)), num_classes=1)
    export_task_model(str(tmp_path / "stsb"), "classifier", model, vocab_file, True,
                      seq_length=SEQ_LENGTH)
    loaded = tf.saved_model.load(str(tmp_path / "stsb"))
    assert sorted(loaded.signatures) == ["serving_default", REGRESS]
    texts = ["Hello world!", "a bad movie"]
    scores = loaded.signatures["serving_default"](text=tf.constant(texts))["score"]
    outputs = loaded.signatures[REGRESS](inputs=tf.constant([_example(text=t) for t in texts]))
    assert sorted(outputs) == ["outputs"]
    np.testing.assert_allclose(outputs["outputs"], scores, atol=ATOL)
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    shown = subprocess.run([cli, "show", "--dir", str(tmp_path / "stsb"), "--all"],
                           capture_output=True, text=True, timeout=600).stdout
    assert "Method name is: tensorflow/serving/regress" in shown.split(f"['{REGRESS}']")[1]


def test_classify_names_a_missing_feature(task_exports):
    classify = task_exports["classifier"][1].signatures[CLASSIFY]
    with pytest.raises(tf.errors.InvalidArgumentError, match="text_b"):
        classify(inputs=tf.constant([_example(text_a="hello")]))


def test_texts_are_cut_before_tokenization_without_changing_outputs(task_exports):
    # seq_length 16 keeps 16 * 512 bytes of each text; what the model reads (16 tokens) comes
    # from far fewer, so the outputs of a 1 MB text equal those of its first 100 bytes.
    words = "Hello, unaffable world! " * ((1 << 20) // 24)
    assert len(words) > 100 * MAX_BYTES_PER_TOKEN * SEQ_LENGTH
    ner = task_exports["ner"][1].signatures["serving_default"]
    long, short = ner(text=tf.constant([words])), ner(text=tf.constant([words[:100]]))
    for name in long:
        np.testing.assert_array_equal(long[name], short[name], err_msg=name)
    # SQuAD reads at most 3 windows of 10 tokens, 4 apart: 18 tokens, which the first 96 bytes
    # hold (28 tokens); what they cost: test_squad_windows_export.py.
    squad = task_exports["squad"][1].signatures["serving_default"]
    long = squad(question=tf.constant(["what world?"]), context=tf.constant([words]))
    short = squad(question=tf.constant(["what world?"]), context=tf.constant([words[:96]]))
    for name in long:
        np.testing.assert_array_equal(long[name], short[name], err_msg=name)


def test_keras3_tfsm_layer_runs_every_task_model_on_serving_default(task_exports):
    import keras

    for task, (path, loaded, _) in task_exports.items():
        layer = keras.layers.TFSMLayer(path, call_endpoint="serving_default")
        feed = {name: tf.constant(value) for name, value in FEEDS[task].items()}
        expected = loaded.signatures["serving_default"](**feed)
        outputs = layer(feed)
        assert sorted(outputs) == sorted(expected), task
        for name in expected:
            np.testing.assert_array_equal(outputs[name], expected[name], err_msg=f"{task} {name}")
    # A model with one input also takes the tensor itself.
    ner = keras.layers.TFSMLayer(task_exports["ner"][0], call_endpoint="serving_default")
    np.testing.assert_array_equal(ner(tf.constant(FEEDS["ner"]["text"]))["label"],
                                  serve(task_exports, "ner")["label"])
