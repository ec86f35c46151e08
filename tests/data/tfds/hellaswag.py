"""HellaSwag's JSON-lines files for the tests, written here (no HellaSwag data is shipped): the
fields of the real files (`ind`, `activity_label`, `ctx_a`, `ctx_b`, `ctx`, `split`,
`split_type`, `endings`, `source_id`, and `label` except in the test file), both sources
(ActivityNet, WikiHow) and both domains, and the same examples as a SWAG CSV for comparing the
two paths of `run_multiple_choice`.

Example:
    write_hellaswag(source_dir, {"train": 40, "val": 12, "test": 6})
"""

import csv
import json
import random

_SUBJECTS = ["A man", "A woman", "The girl", "Two boys", "The chef", "A café owner"]
_ACTIONS = ["is standing in a kitchen", "kneels on the lawn", "holds a paint roller",
            "talks to the camera", "ties a rope to a post"]
_CONTINUATIONS = ["then", "he", "she", "they", "the person"]
_ENDINGS = ["pours the batter into a pan.", "starts mowing the grass in rows.",
            "rolls paint over the wall.", "walks away from the table.", "jumps into the pool.",
            "shows the finished knot to the camera.", "puts the knife in the sink."]
_ACTIVITIES = ["Making a cake", "Cutting the grass", "Painting", "Tying knots"]


def hellaswag_examples(count, seed, labels=True):
    """`count` examples as the dicts of HellaSwag's JSON lines; 5 or more hold one of each
    source and domain (TFDS writes no empty split)."""
    rng = random.Random(seed)
    examples = []
    for index in range(count):
        ctx_a = f"{rng.choice(_SUBJECTS)} {rng.choice(_ACTIONS)}."
        ctx_b = rng.choice(_CONTINUATIONS)
        source = "activitynet~v_" if index % 3 else "wikihow~"
        example = {
            "ind": 1000 * seed + index, "activity_label": rng.choice(_ACTIVITIES),
            "ctx_a": ctx_a, "ctx_b": ctx_b, "ctx": f"{ctx_a} {ctx_b}",
            "split": "train", "split_type": "zeroshot" if index % 4 == 0 else "indomain",
            "endings": rng.sample(_ENDINGS, 4), "source_id": f"{source}{index}"}
        if labels:
            example["label"] = rng.randrange(4)
        examples.append(example)
    return examples


def write_hellaswag(directory, counts):
    """HellaSwag's files in `directory` (`{"train": n, "val": n, "test": n}`, a file per key
    given; the test file without labels); returns `{key: examples}`."""
    written = {}
    for seed, (part, count) in enumerate(sorted(counts.items()), start=1):
        examples = hellaswag_examples(count, seed, labels=part != "test")
        with open(directory / f"hellaswag_{part}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(example) + "\n" for example in examples)
        written[part] = examples
    return written


def write_as_swag_csv(path, examples):
    """`examples` (HellaSwag dicts) as a SWAG CSV whose pairs are the same: `sent1` the
    context, `sent2` empty, the endings and the label."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
                         "ending0", "ending1", "ending2", "ending3", "label"])
        for example in examples:
            writer.writerow([example["source_id"], example["ind"], "", example["ctx"], "",
                             "gold", *example["endings"], example["label"]])
