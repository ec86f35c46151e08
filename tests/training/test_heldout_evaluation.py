"""`HeldOutEvaluation` on records: every record evaluated once, a file of another vocabulary
named."""

import json
import re

import pytest

from bert_tf.data.pretraining.records_dataset import InputFileError
from bert_tf.training.heldout_evaluation import HeldOutEvaluation
from tests.data.pretraining.records import write_pretraining_records
from tests.training.test_pretraining_trainer import BATCH, CONFIG, PREDICTIONS, SEQ, make_trainer


def test_evaluates_every_record_and_names_a_file_beyond_the_vocab_size(tmp_path):
    good = str(tmp_path / "heldout-0.tfrecord")
    write_pretraining_records(good, 11, SEQ, PREDICTIONS, vocab_size=CONFIG.vocab_size, seed=1)
    other_vocab = str(tmp_path / "heldout-1.tfrecord")
    instances = write_pretraining_records(other_vocab, 5, SEQ, PREDICTIONS,
                                          vocab_size=CONFIG.vocab_size + 20, seed=2)
    largest = max(max(i["input_ids"] + i["masked_lm_ids"]) for i in instances)
    assert largest >= CONFIG.vocab_size
    trainer = make_trainer()
    metrics = HeldOutEvaluation(trainer, [good], SEQ, PREDICTIONS, BATCH, str(tmp_path))()
    assert metrics["examples"] == 11
    assert json.load(open(tmp_path / "eval_results.json"))["examples"] == 11
    # The embedding lookup used to stop it with an error naming neither the file nor the limit.
    with pytest.raises(InputFileError, match="^" + re.escape(
            f"{other_vocab}: holds token id {largest}, but the model's vocab_size is "
            f"{CONFIG.vocab_size}: the records were made with another vocabulary; use its "
            f"config") + "$"):
        HeldOutEvaluation(trainer, [good, other_vocab], SEQ, PREDICTIONS, BATCH,
                          str(tmp_path / "other"))()
