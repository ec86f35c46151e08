"""Exports a fine-tuned task model as a SavedModel that TF Serving runs on raw strings.

Tokenization runs in the graph (tf.text), so the SavedModel needs no Python code of this
package: TF Serving, `tools/serve.py`, or a process importing only `tensorflow` and
`tensorflow_text` can run it. The vocabulary travels with it as the asset `vocab_file`.

Signatures (all inputs are strings, batch dimension first), `serving_default` inputs ->
outputs per task:
* classifier: `text`, or `text_a` + `text_b` -> `logits`, `probabilities` `[batch, C]`,
  `label` (int32 index), `label_name` `[batch]`; one class (regression): `logits`, `score`.
* ner: `text` -> `logits`, `probabilities` `[batch, seq, C]`, `label`, `label_name`,
  `start_offset`, `end_offset`, `first_subword` `[batch, seq]`.
* squad: `question`, `context` -> `answer`, `answer_start`, `answer_end`, `score`,
  `null_score`, `window` (int32) `[batch]`; `start_logits`, `end_logits` `[batch, seq]` of the
  answer's window.
* multiple_choice: `context` `[batch]`, `choices` `[batch, num_choices]` -> `logits`,
  `probabilities` `[batch, num_choices]`, `label` `[batch]`.

NER offsets are bytes of `text` covered by each token (-1 at `[CLS]`, `[SEP]` and padding);
a word's tag is the label of its `first_subword`, as in the paper. SQuAD reads the context as
run_squad does: the question cut to `max_query_length` tokens, the context in windows of what
`seq_length` leaves, `doc_stride` tokens apart, the windows of the batch through the model
(in slices, see below); the answer is the highest-scoring span (start logit + end logit) of at
most `max_answer_length` tokens that starts at a token its window owns (BERT's max-context
rule, `bert_tf.data.tasks.squad_windows`), as `context[answer_start:answer_end]` in bytes, and
`window` numbers the window it came from; `null_score` is "no answer"'s score (start + end logit at
`[CLS]`, in the window where it is least), and a SQuAD v2.0 export (`null_score_diff_threshold`)
answers "" (offsets -1, `score` still the best span's) when it beats the span's by more than
that. A context is read in at most `max_windows` windows: the rest is cut; the export's
`sequences_per_string` (= `max_windows`) tells a server what a request can cost. A classifier
also gets TF Serving's `tensorflow/serving/classify` signature, a regression model (one class)
`tensorflow/serving/regress` (see `example_signatures`). Every export also has the attribute
`serving_default`, for Keras 3's `TFSMLayer(path, call_endpoint="serving_default")` (see
`keras_endpoint`). Texts are cut before tokenization to what `seq_length` tokens (a SQuAD
context: its windows) can use (see `text_inputs`), so a request's memory does not grow with the
size of its texts; and the model runs on at most `max_tokens_per_call` packed positions at a
time (`model_slices`; saved as the variable `max_tokens_per_call`), so neither does one model
call's with the number of its texts, windows or choices.

The classifier, NER and multiple-choice exports run the model on each batch packed only to its
longest text, rounded up to a multiple of `pad_to_multiple_of` (8) and at most `seq_length`,
with the outputs of the full-length model (within float round-off): an SST-2 sentence packs
to 25 tokens at the median, so a request of one runs the encoder on 32 columns instead of 128
(half the latency; docs/performance_serving.md). Within the batch the encoder's dense layers
run on the real tokens only (`skip_padding`, see `bert_tf.layers.real_tokens`): eight SST-2
sentences in one request hold 355 packed positions for 201 tokens (in-process, batch of 8:
46 -> 32 ms, docs/PERFORMANCE.md). NER's per-token outputs stay `[batch, seq_length]`; at padding
(offsets -1 after `[SEP]`) their logits are 0, whatever the batch. SQuAD keeps `seq_length`:
its windows fill it.

Example:
    >>> export_task_model("/models/sst2/1", "classifier", classifier, "vocab.txt",
    ...                   do_lower_case=True, seq_length=128, label_names=["negative", "positive"])
    >>> tf.saved_model.load("/models/sst2/1").signatures["serving_default"](
    ...     text=tf.constant(["a gripping film"]))["label_name"]
    <tf.Tensor: ... numpy=array([b'positive'], dtype=object)>
"""

import contextlib

import tensorflow as tf

from bert_tf.data.tasks.squad_windows import (CLS_POSITION, DEFAULT_DOC_STRIDE,
                                              DEFAULT_MAX_QUERY_LENGTH, DEFAULT_MAX_WINDOWS,
                                              check_answer_rules, check_windows)
from bert_tf.export import example_signatures
from bert_tf.export.backing_variables import backing_variables
from bert_tf.export.export_arguments import (TASK_EXPORT_TYPES, check_seq_length,
                                             repeated_label_names)
from bert_tf.export.keras_endpoint import keras_endpoint
from bert_tf.export.model_slices import DEFAULT_MAX_TOKENS_PER_CALL, run_in_slices
from bert_tf.export.serving_layout import make_world_readable
from bert_tf.export.text_inputs import DEFAULT_PAD_TO_MULTIPLE_OF, NOT_A_TOKEN, RawTextPacker
from bert_tf.layers.portable_graphs import portable_graphs
from bert_tf.layers.real_tokens import real_tokens_only
from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.models.bert_multiple_choice import BertMultipleChoice
from bert_tf.models.bert_span_labeler import BertSpanLabeler
from bert_tf.models.bert_token_classifier import BertTokenClassifier

# The model class of each task export, in TASK_EXPORT_TYPES' order.
TASK_MODEL_CLASSES = dict(zip(TASK_EXPORT_TYPES, (BertClassifier, BertTokenClassifier,
                                                  BertSpanLabeler, BertMultipleChoice),
                              strict=True))
# Google's run_squad.py default for --max_answer_length.
DEFAULT_MAX_ANSWER_LENGTH = 30


def _strings(*names, rank=1):
    return [tf.TensorSpec([None] * rank, tf.string, name=name) for name in names]


def _class_outputs(logits, label_names):
    """Probabilities, the arg-max label and its name, over the last axis of `logits`."""
    label = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits), "label": label,
            "label_name": tf.gather(label_names, label)}


def best_spans(start_logits, end_logits, can_start, can_end, max_answer_length):
    """The best answer span per row: `(start, end, score, found)`, each `[rows]`.

    Considers every span `start <= end < start + max_answer_length` with `can_start[start]` and
    `can_end[end]` (bool `[rows, seq]`), scored `start_logits[start] + end_logits[end]`; `found`
    is False when a row has no such span (start, end and score are then meaningless).

    Example:
        >>> best_spans(tf.constant([[0., 5., 1.]]), tf.constant([[9., 0., 2.]]),
        ...            tf.constant([[False, True, True]]), tf.constant([[True, True, True]]),
        ...            max_answer_length=2)          # 5 + 2 (9 is before any allowed start)
        (<... [1]>, <... [2]>, <... [7.]>, <... [True]>)
    """
    seq_length = tf.shape(start_logits)[1]
    # Spans by start and length: [rows, seq, max_answer_length] scores instead of [rows, seq,
    # seq]. At seq_length 384, 30 instead of 384 per start: a question's 16 windows take 0.7 MB
    # per float tensor, not 9.4 MB.
    ends = tf.range(seq_length)[:, None] + tf.range(max_answer_length)[None, :]
    in_sequence = ends < seq_length
    ends = tf.minimum(ends, seq_length - 1)
    allowed = (in_sequence[None] & can_start[:, :, None] & tf.gather(can_end, ends, axis=1))
    scores = tf.where(allowed, start_logits[:, :, None] + tf.gather(end_logits, ends, axis=1),
                      tf.float32.min)
    flat_scores = tf.reshape(scores, [tf.shape(scores)[0], -1])
    best = tf.argmax(flat_scores, axis=1, output_type=tf.int32)
    start = best // max_answer_length
    return (start, start + best % max_answer_length, tf.reduce_max(flat_scores, axis=1),
            tf.reduce_any(allowed, axis=[1, 2]))


def first_best_rows(score, window_starts):
    """Per example, the row of its highest `score` (`[rows]`), the first one on ties, as
    run_squad ranks the spans of all windows in order; `window_starts` (`RaggedTensor
    [batch, (windows)]`) groups the rows by example. An int64 `[batch]`.

    Example:
        >>> first_best_rows(tf.constant([1., 3., 3., 2.]),
        ...                 tf.RaggedTensor.from_row_lengths([0, 16, 32, 0], [3, 1]))
        <tf.Tensor: ... numpy=array([1, 3])>
    """
    example, batch = window_starts.value_rowids(), window_starts.nrows()
    best = tf.gather(tf.math.unsorted_segment_max(score, example, batch), example)
    rows = tf.range(tf.size(score, out_type=tf.int64))
    return tf.math.unsorted_segment_min(tf.where(score == best, rows, tf.int64.max), example,
                                        batch)


class _ServingFunctions:
    """Builds the signatures of one task model; each `<task>()` returns them as a dict."""

    def __init__(self, model, packer, label_names, text_pairs, skip_padding, max_answer_length,
                 windows, null_score_diff_threshold, max_tokens_per_call):
        self.model = model
        self.max_tokens_per_call = max_tokens_per_call
        self.skip_padding = skip_padding
        self.packer = packer
        self.label_names = label_names
        self.text_pairs = text_pairs
        self.max_answer_length = max_answer_length
        # squad: RawTextPacker.pack_windows' max_query_length, doc_stride and max_windows.
        self.windows = windows
        self.null_score_diff_threshold = null_score_diff_threshold  # squad v2.0; None: v1.1

    def _function(self, python_function, input_signature):
        return tf.function(python_function, input_signature=input_signature,
                           autograph=False).get_concrete_function()

    def _model_outputs(self, inputs, shapes, trimmed=True, call=None):
        """The float32 outputs `shapes` (`{name: a slice's output shape}`) of `call(part)`
        (default: the model on `part`) on `inputs`, a slice of at most `max_tokens_per_call`
        packed positions at a time (`run_in_slices`). `trimmed`: a batch packed to its longest
        text, whose dense layers, with `skip_padding`, run on the real tokens only (outputs at
        padding are not returned: NER zeroes its logits there)."""
        call = call or (lambda part: self.model(part, training=False))

        def run_slice(part):
            with (real_tokens_only() if trimmed and self.skip_padding
                  else contextlib.nullcontext()):
                outputs = call(part)
            return tuple(outputs[name] for name in shapes)

        specs = [tf.TensorSpec(shape, tf.float32) for shape in shapes.values()]
        return dict(zip(shapes, run_in_slices(run_slice, inputs, self.max_tokens_per_call,
                                              specs)))

    def classifier(self):
        names = ("text_a", "text_b") if self.text_pairs else ("text",)
        label_names = tf.constant(self.label_names)

        def classify_texts(*texts):
            inputs = self.packer.pack(texts)
            inputs = self.packer.trim(inputs, self.packer.trimmed_length(inputs))
            logits = self._model_outputs(
                inputs, {"logits": [None, self.model.num_classes]})["logits"]
            if self.model.num_classes == 1:  # regression (e.g. STS-B): the logit is the score
                return {"logits": logits, "score": logits[:, 0]}
            return _class_outputs(logits, label_names)

        serving_default = self._function(classify_texts, _strings(*names))
        # Classify / Regress call the traced serving_default graph, not the model again.
        if self.model.num_classes == 1:
            return {"serving_default": serving_default, example_signatures.REGRESS:
                    example_signatures.regress_function(serving_default, names)}
        return {"serving_default": serving_default, example_signatures.CLASSIFY:
                example_signatures.classify_function(serving_default, names, self.label_names)}

    def ner(self):
        label_names = tf.constant(self.label_names)

        def serving_default(text):
            inputs, tokens = self.packer.pack_with_offsets([text])
            length = self.packer.trimmed_length(inputs)
            logits = self._model_outputs(self.packer.trim(inputs, length), {
                "logits": [None, None, len(self.label_names)]})["logits"]
            # Per-token outputs keep their [batch, seq_length] shape. Padding positions get
            # logits 0 (uniform probabilities), so no output depends on how long the other
            # texts of the batch are.
            is_token = tf.cast(inputs["input_mask"][:, :length, None], logits.dtype)
            logits = tf.pad(logits * is_token,
                            [[0, 0], [0, self.packer.seq_length - length], [0, 0]])
            logits.set_shape([None, self.packer.seq_length, len(self.label_names)])
            return {**_class_outputs(logits, label_names), **tokens}

        return {"serving_default": self._function(serving_default, _strings("text"))}

    def squad(self):
        def serving_default(question, context):
            inputs, tokens, window_starts = self.packer.pack_windows(question, context,
                                                                     **self.windows)
            seq_length = self.packer.seq_length
            outputs = self._model_outputs(inputs, {"start_logits": [None, seq_length],
                                                   "end_logits": [None, seq_length]},
                                          trimmed=False)
            # An answer lies in the window's context tokens and starts at one the window owns.
            in_context = tokens["start_offset"] != NOT_A_TOKEN
            start, end, score, found = best_spans(
                outputs["start_logits"], outputs["end_logits"], in_context & tokens["max_context"],
                in_context, self.max_answer_length)
            # Each example answers from its best window.
            row = first_best_rows(score, window_starts)
            start, end, score, found = (tf.gather(value, row) for value in (start, end, score,
                                                                           found))
            # "No answer" scores at [CLS], in the window where it scores least (as run_squad).
            null = (outputs["start_logits"][:, CLS_POSITION]
                    + outputs["end_logits"][:, CLS_POSITION])
            null_score = tf.math.unsorted_segment_min(null, window_starts.value_rowids(),
                                                      window_starts.nrows())
            answered = found
            if self.null_score_diff_threshold is not None:  # v2.0: no answer beats the span
                answered &= null_score - score <= self.null_score_diff_threshold
            starts, ends = (tf.gather(tokens[name], row) for name in ("start_offset", "end_offset"))
            answer_start = tf.where(answered, tf.gather(starts, start, batch_dims=1), -1)
            answer_end = tf.where(answered, tf.gather(ends, end, batch_dims=1), -1)
            # Without an answer, an empty substring at 0 (substr refuses position -1).
            answer = tf.strings.substr(context, tf.maximum(answer_start, 0),
                                       answer_end - answer_start)
            return {"start_logits": tf.gather(outputs["start_logits"], row),
                    "end_logits": tf.gather(outputs["end_logits"], row),
                    "window": tf.cast(row - window_starts.row_starts(), tf.int32),
                    "answer": answer, "answer_start": answer_start, "answer_end": answer_end,
                    "score": tf.where(found, score, tf.float32.min), "null_score": null_score}

        return {"serving_default": self._function(serving_default,
                                                  _strings("question", "context"))}

    def multiple_choice(self):
        def serving_default(context, choices):
            # One sequence per (context, choice), as BertMultipleChoice reads them.
            contexts = tf.broadcast_to(context[:, None], tf.shape(choices))
            packed = self.packer.pack([tf.reshape(contexts, [-1]), tf.reshape(choices, [-1])])
            inputs = self.packer.trim(packed, self.packer.trimmed_length(packed))

            def one_choice_per_example(part):
                # Each pair as an example of one choice (a choice's logit does not depend on
                # the others), so that a slice may hold part of an example's choices.
                rows = tf.shape(part["input_word_ids"])[0]
                logits = self.model({key: tf.reshape(value, [rows, 1, -1])
                                     for key, value in part.items()}, training=False)["logits"]
                return {"logits": logits[:, 0]}

            logits = tf.reshape(self._model_outputs(inputs, {"logits": [None]},
                                                    call=one_choice_per_example)["logits"],
                                tf.shape(choices))
            return {"logits": logits, "probabilities": tf.nn.softmax(logits),
                    "label": tf.argmax(logits, axis=-1, output_type=tf.int32)}

        return {"serving_default": self._function(
            serving_default, _strings("context") + _strings("choices", rank=2))}


def export_task_model(export_dir, task, model, vocab_file, do_lower_case, seq_length=128,
                      text_pairs=False, label_names=None,
                      max_answer_length=DEFAULT_MAX_ANSWER_LENGTH,
                      pad_to_multiple_of=DEFAULT_PAD_TO_MULTIPLE_OF, skip_padding=True,
                      doc_stride=DEFAULT_DOC_STRIDE, max_query_length=DEFAULT_MAX_QUERY_LENGTH,
                      max_windows=DEFAULT_MAX_WINDOWS, null_score_diff_threshold=None,
                      max_tokens_per_call=DEFAULT_MAX_TOKENS_PER_CALL):
    """Writes `model` with in-graph preprocessing as a serving SavedModel to `export_dir`.

    Args:
        export_dir: the directory to write (for TF Serving, `<model_base_path>/<version>`).
        task: "classifier", "ner", "squad" or "multiple_choice".
        model: the matching task model (`BertClassifier`, `BertTokenClassifier`,
            `BertSpanLabeler`, `BertMultipleChoice`).
        vocab_file, do_lower_case: the encoder's vocabulary and casing.
        seq_length: the longest input, in tokens (longer texts are truncated); squad packs
            every window to it. At most the encoder's `max_position_embeddings`.
        text_pairs: classifier only: inputs `text_a`, `text_b` instead of `text`.
        label_names: classifier / ner: a name per class, for `label_name` and `classes`;
            defaults to "0", "1", ...
        max_answer_length: squad only: the longest answer, in tokens.
        pad_to_multiple_of: classifier, ner, multiple_choice: a batch is packed to its longest
            input rounded up to a multiple of this; `seq_length` packs every batch to
            `seq_length`, as squad does.
        doc_stride, max_query_length: squad only: context windows start `doc_stride` tokens
            apart; the question keeps its first `max_query_length` tokens (as run_squad).
        max_windows: squad only: the most windows read per context (the rest is cut).
        null_score_diff_threshold: squad only, SQuAD v2.0: no answer (`answer` "", offsets -1)
            when `null_score` exceeds the best span's score by more than this (run_squad's
            rule; 0.0 is its default); None (v1.1): always the best span.
        max_tokens_per_call: the model runs on at most this many packed positions at a time
            (at least one sequence), so a request's size does not bound what one model call
            allocates (`bert_tf.export.model_slices`).
    """
    if task not in TASK_MODEL_CLASSES:
        raise ValueError(f"Unknown task {task!r}; expected one of {sorted(TASK_MODEL_CLASSES)}.")
    if not isinstance(model, TASK_MODEL_CLASSES[task]):
        raise TypeError(f"The {task} export takes a {TASK_MODEL_CLASSES[task].__name__}, got "
                        f"{type(model).__name__}.")
    check_seq_length(seq_length, model.encoder.config.max_position_embeddings)
    if task == "squad":
        check_answer_rules(max_answer_length, null_score_diff_threshold)
        check_windows(seq_length, doc_stride, max_query_length, max_windows)
    if text_pairs and task != "classifier":
        raise ValueError(f"text_pairs applies to the classifier export only, not to {task}.")
    if max_tokens_per_call < 1:
        raise ValueError(f"max_tokens_per_call must be at least 1, got {max_tokens_per_call}.")
    num_classes = getattr(model, "num_classes", None)
    if label_names is None:
        label_names = [str(i) for i in range(num_classes or 0)]
    elif num_classes is None or len(label_names) != num_classes:
        raise ValueError(f"label_names gives {len(label_names)} name(s) but the {task} model "
                         f"has {num_classes or 'no'} classes.")
    if repeated := repeated_label_names(label_names):
        raise ValueError(f"label_names names two classes alike ({', '.join(repeated)}): a "
                         f"served label_name would not tell them apart.")

    packer = RawTextPacker(vocab_file, do_lower_case, seq_length, pad_to_multiple_of)
    functions = _ServingFunctions(
        model, packer, list(label_names), text_pairs, skip_padding, max_answer_length,
        windows={"max_query_length": max_query_length, "doc_stride": doc_stride,
                 "max_windows": max_windows}, null_score_diff_threshold=null_score_diff_threshold,
        max_tokens_per_call=max_tokens_per_call)
    with portable_graphs():
        signatures = getattr(functions, task)()
        root = tf.__internal__.tracking.AutoTrackable()
        root.vocab_file = tf.saved_model.Asset(vocab_file)
        root.do_lower_case = tf.Variable(bool(do_lower_case), trainable=False,
                                         name="do_lower_case")
        root.seq_length = tf.Variable(seq_length, trainable=False, name="seq_length")
        root.max_tokens_per_call = tf.Variable(max_tokens_per_call, trainable=False,
                                               name="max_tokens_per_call")
        if task == "squad":  # a context makes up to max_windows sequences (tools/serve.py)
            root.sequences_per_string = tf.Variable(max_windows, trainable=False,
                                                    name="sequences_per_string")
        # Tracked so that the SavedModel holds every variable the signatures capture (Keras
        # does not track its dropout RNG states for TensorFlow).
        root.model_variables = backing_variables(model.variables)
        root.serving_default = keras_endpoint(signatures["serving_default"])
        tf.saved_model.save(root, export_dir, signatures=signatures)
    example_signatures.set_method_names(export_dir, {
        key: key for key in (example_signatures.CLASSIFY, example_signatures.REGRESS)
        if key in signatures})
    make_world_readable(export_dir)
