"""The peer side of the throughput benchmarks: times keras-hub's `BertBackbone` (forward) and
`BertMaskedLM` (a training step), or Hugging Face's `BertModel` (forward), inside that library's
own virtualenv and answers in JSON lines.

Each peer lives in its own venv (keras-hub pins TensorFlow 2.20; ours is 2.21, and torch is a
different stack), so it cannot be imported by the benchmark. Instead the benchmark starts one
long-lived worker per peer and sends it one JSON request per line on stdin; the worker keeps its
models built between requests, so the benchmark can interleave short timed runs of every system
(fair under a noisy, shared machine) without paying model construction or tracing each time.
Only the standard library, numpy and the peer's own framework are imported here.

Requests (one JSON object per line) and answers (one JSON line on stdout each):
    {"op": "prepare", "key": K, "config": {...}, "dtype": "float32"|"bfloat16"|"bfloat16_weights",
     "mode": M,
     "inputs": {"input_word_ids": [[...]], "input_mask": ..., "input_type_ids": ...}}
        -> {"key": K, "pooled_output": [[...]]}   builds the model (bfloat16 models copy the
                                                   float32 model's weights), warms it up
    {"op": "prepare", "task": "pretraining", "key": K, "config": {...}, "mode": M,
     "inputs": {... the three above, "masked_lm_positions", "masked_lm_ids",
                "masked_lm_weights"}, "learning_rate": LR}
        -> {"key": K, "loss": L}                  builds and compiles a masked-LM train step
                                                   (keras-hub only), runs it once
    {"op": "time", "key": K, "iters": N}  ->  {"key": K, "seconds": [t1, ..., tN]}
    {"op": "exit"}
`config` holds `bert_config.json` fields; `mode` is "plain" or "xla" for keras-hub (a
`tf.function` without or with `jit_compile`) and "eager" for transformers.

Example (what the benchmark does):
    bench/.venvs/torch/bin/python bench/peer_worker.py --system=transformers --intra_op_threads=2
"""

import argparse
import copy
import json
import os
import sys
import time

import numpy as np


class KerasHubPeer:
    """keras-hub `BertBackbone`; bfloat16 is Keras' `mixed_bfloat16` policy, as keras-hub
    recommends for CPU/TPU inference, bfloat16_weights the `bfloat16` policy."""

    POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16",
                "bfloat16_weights": "bfloat16"}

    def __init__(self, intra_op_threads, inter_op_threads):
        os.environ.setdefault("KERAS_BACKEND", "tensorflow")
        import tensorflow as tf
        if intra_op_threads:
            tf.config.threading.set_intra_op_parallelism_threads(intra_op_threads)
        if inter_op_threads:
            tf.config.threading.set_inter_op_parallelism_threads(inter_op_threads)
        self.tf = tf
        import keras_hub
        self.keras_hub = keras_hub
        self.versions = {"tensorflow": tf.__version__, "keras_hub": keras_hub.__version__}
        self.float32_backbones = {}

    def _backbone(self, config, dtype):
        return self.keras_hub.models.BertBackbone(
            vocabulary_size=config["vocab_size"], num_layers=config["num_hidden_layers"],
            num_heads=config["num_attention_heads"], hidden_dim=config["hidden_size"],
            intermediate_dim=config["intermediate_size"], dropout=config["hidden_dropout_prob"],
            max_sequence_length=config["max_position_embeddings"],
            num_segments=config["type_vocab_size"], dtype=self.POLICIES[dtype])

    def build(self, config, dtype, mode, inputs):
        config_key = json.dumps(config, sort_keys=True)
        if config_key not in self.float32_backbones:
            self.float32_backbones[config_key] = self._backbone(config, "float32")
        backbone = self.float32_backbones[config_key]
        if dtype != "float32":
            reference = backbone
            backbone = self._backbone(config, dtype)
            backbone.set_weights(reference.get_weights())
        feed = {"token_ids": self.tf.constant(inputs["input_word_ids"], self.tf.int32),
                "segment_ids": self.tf.constant(inputs["input_type_ids"], self.tf.int32),
                "padding_mask": self.tf.constant(inputs["input_mask"], self.tf.int32)}
        def call(x):
            return backbone(x, training=False)["pooled_output"]
        forward = call if mode == "eager" else self.tf.function(call, jit_compile=(mode == "xla"))
        return lambda: np.asarray(self.tf.cast(forward(feed), self.tf.float32))

    def build_pretraining(self, config, mode, inputs, learning_rate, dtype="float32"):
        """One `BertMaskedLM` training step as keras-hub trains it (`compile` + the Keras train
        function `fit` runs): AdamW with weight decay and global-norm clipping, masked-LM
        cross-entropy weighted by `masked_lm_weights`, XLA when `mode` is "xla", Keras'
        `mixed_bfloat16` policy when `dtype` is "bfloat16"."""
        import keras
        model = self.keras_hub.models.BertMaskedLM(
            backbone=self._backbone(config, dtype), preprocessor=None,
            dtype="mixed_bfloat16" if dtype == "bfloat16" else "float32")
        model.compile(
            optimizer=keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=0.01,
                                             epsilon=1e-6, global_clipnorm=1.0),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()],
            jit_compile=(mode == "xla"))
        tf = self.tf
        features = {"token_ids": inputs["input_word_ids"], "segment_ids": inputs["input_type_ids"],
                    "padding_mask": inputs["input_mask"],
                    "mask_positions": inputs["masked_lm_positions"]}
        features = {name: tf.constant(value, tf.int32) for name, value in features.items()}
        labels = tf.constant(inputs["masked_lm_ids"], tf.int32)
        weights = tf.constant(inputs["masked_lm_weights"], tf.float32)
        return lambda: float(model.train_on_batch(features, labels, sample_weight=weights,
                                                  return_dict=True)["loss"])


class TransformersPeer:
    """Hugging Face `BertModel` in PyTorch eager mode; bfloat16 is `torch.autocast`, the way
    Hugging Face documents mixed-precision CPU inference, bfloat16_weights a bfloat16 copy of
    the model (`model.to(torch.bfloat16)`)."""

    def __init__(self, intra_op_threads, inter_op_threads):
        import torch
        import transformers
        if intra_op_threads:
            torch.set_num_threads(intra_op_threads)
        if inter_op_threads:
            torch.set_num_interop_threads(inter_op_threads)
        self.torch = torch
        self.transformers = transformers
        self.versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                         "threads": torch.get_num_threads()}
        self.float32_models = {}

    def build(self, config, dtype, mode, inputs):
        if mode != "eager":
            raise ValueError(f"transformers runs in eager mode only, not {mode!r}")
        torch = self.torch
        config_key = json.dumps(config, sort_keys=True)
        if config_key not in self.float32_models:
            hf_config = self.transformers.BertConfig(**config)
            self.float32_models[config_key] = self.transformers.BertModel(hf_config).eval()
        model = self.float32_models[config_key]
        if dtype == "bfloat16_weights":
            model = copy.deepcopy(model).to(torch.bfloat16)
        feed = {"input_ids": torch.tensor(inputs["input_word_ids"], dtype=torch.long),
                "attention_mask": torch.tensor(inputs["input_mask"], dtype=torch.long),
                "token_type_ids": torch.tensor(inputs["input_type_ids"], dtype=torch.long)}

        def forward():
            with torch.inference_mode(), torch.autocast(
                    "cpu", dtype=torch.bfloat16, enabled=(dtype == "bfloat16")):
                return model(**feed).pooler_output.float().numpy()
        return forward


def serve(peer, requests, answers):
    """Answers each request line; a failing request answers {"key", "error"} instead of dying,
    so one unsupported combination does not take the whole benchmark down."""
    forwards = {}
    for line in requests:
        request = json.loads(line)
        if request["op"] == "exit":
            return
        key = request["key"]
        try:
            if request["op"] == "prepare" and request.get("task") == "pretraining":
                if not hasattr(peer, "build_pretraining"):
                    raise ValueError(f"{type(peer).__name__} has no pre-training step")
                step = peer.build_pretraining(request["config"], request["mode"],
                                              request["inputs"], request["learning_rate"],
                                              request.get("dtype", "float32"))
                step()  # tracing / compilation / optimizer slots
                forwards[key] = step
                answer = {"key": key, "loss": step()}
            elif request["op"] == "prepare":
                forward = peer.build(request["config"], request["dtype"], request["mode"],
                                     request["inputs"])
                forward()  # tracing / compilation / oneDNN primitive creation
                forwards[key] = forward
                answer = {"key": key, "pooled_output": forward().tolist()}
            elif request["op"] == "time":
                forward, seconds = forwards[key], []
                for _ in range(request["iters"]):
                    start = time.perf_counter()
                    forward()
                    seconds.append(time.perf_counter() - start)
                answer = {"key": key, "seconds": seconds}
            else:
                raise ValueError(f"unknown op {request['op']!r}")
        except Exception as e:  # reported to the benchmark, which prints it in the table
            answer = {"key": key, "error": f"{type(e).__name__}: {e}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--system", required=True, choices=["keras_hub", "transformers"])
    parser.add_argument("--intra_op_threads", type=int, default=0,
                        help="threads inside one op; 0 keeps the framework's default")
    parser.add_argument("--inter_op_threads", type=int, default=0,
                        help="ops run concurrently; 0 keeps the framework's default")
    args = parser.parse_args()
    # The framework's own start-up chatter goes to stderr; stdout carries only answers.
    peer_class = KerasHubPeer if args.system == "keras_hub" else TransformersPeer
    peer = peer_class(args.intra_op_threads, args.inter_op_threads)
    answers = sys.stdout
    answers.write(json.dumps({"ready": args.system, "versions": peer.versions}) + "\n")
    answers.flush()
    serve(peer, sys.stdin, answers)


if __name__ == "__main__":
    main()
