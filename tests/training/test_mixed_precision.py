"""warn_if_float16_on_cpu: a float16 job on CPUs is told to use bfloat16, where it starts."""

import logging
import types

import pytest
import tensorflow as tf

from bert_tf.training.fine_tuning_encoder import fine_tuning_encoder
from bert_tf.training.mixed_precision import MIXED_PRECISION, warn_if_float16_on_cpu
from bert_tf.training.pretraining_trainer import PretrainingTrainer
from tests.models.head_fixtures import TINY

CPU_ONLY = not tf.config.list_logical_devices("GPU")


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "float16" in r.getMessage()]


def _strategy_on(*devices):
    """A stand-in with only what the check reads: the strategy's worker devices."""
    return types.SimpleNamespace(extended=types.SimpleNamespace(worker_devices=devices))


@pytest.mark.parametrize("mixed_precision", sorted(MIXED_PRECISION))
def test_only_float16_on_a_cpu_warns(caplog, mixed_precision):
    warned = warn_if_float16_on_cpu(mixed_precision, tf.distribute.OneDeviceStrategy("/cpu:0"))
    assert warned == (mixed_precision == "float16")
    messages = _warnings(caplog)
    assert len(messages) == warned
    if warned:
        assert "--mixed_precision=bfloat16" in messages[0] and "\n" not in messages[0]


def test_the_devices_decide():
    gpus = ("/job:localhost/replica:0/task:0/device:GPU:0",
            "/job:localhost/replica:0/task:0/device:GPU:1")
    cpu = "/job:worker/replica:0/task:1/device:CPU:0"
    tpu = "/job:worker/replica:0/task:0/device:TPU:0"
    assert not warn_if_float16_on_cpu("float16", _strategy_on(*gpus))
    assert not warn_if_float16_on_cpu("float16", _strategy_on(tpu))
    assert warn_if_float16_on_cpu("float16", _strategy_on(cpu))
    assert warn_if_float16_on_cpu("float16", tf.distribute.MirroredStrategy(["/cpu:0"]))


@pytest.mark.skipif(not CPU_ONLY, reason="Keras places the job on this machine's GPU")
def test_jobs_warn_when_they_start(caplog, tmp_path):
    """The fine-tuning tools' encoder and the pre-training trainer both say it, once."""
    config_file = tmp_path / "bert_config.json"
    TINY.to_json_file(str(config_file))
    fine_tuning_encoder(None, str(config_file), mixed_precision="float16")
    assert len(_warnings(caplog)) == 1
    caplog.clear()
    PretrainingTrainer(tf.distribute.get_strategy(), TINY, global_batch_size=2,
                       num_train_steps=1, mixed_precision="float16")
    assert len(_warnings(caplog)) == 1
    caplog.clear()
    fine_tuning_encoder(None, str(config_file), mixed_precision="bfloat16")
    assert not _warnings(caplog)
