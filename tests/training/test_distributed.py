import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training.distribution import TpuUnavailableError, create_strategy
from tests.data.pretraining.records import write_pretraining_records
from tests.resources import REPO_ROOT
from tests.training.test_pretraining_trainer import PREDICTIONS, SEQ


def free_port():
    """A local TCP port nobody listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mirrored_over_two_cpus_matches_one_device_for_the_same_global_batch(tmp_path):
    records = str(tmp_path / "train.tfrecord")
    write_pretraining_records(records, 48, SEQ, PREDICTIONS, vocab_size=40)
    output = str(tmp_path / "states.npz")
    script = os.path.join(REPO_ROOT, "tests", "training", "two_cpu_replicas.py")
    subprocess.run([sys.executable, script, records, output], check=True, timeout=600)
    states = np.load(output)
    assert int(states["replicas"]) == 2
    # Every step is clipped, so clipping per replica (instead of the summed gradient) or summing
    # twice would show in the weights and in Adam's moments.
    assert float(states["gradient_norm"]) > 4 * float(states["clip_norm"])
    np.testing.assert_allclose(states["mirrored_totals"], states["one_device_totals"], rtol=1e-5)
    count = sum(1 for key in states if key.startswith("one_device_") and key[11:].isdigit())
    assert count > 20
    for i in range(count):
        np.testing.assert_allclose(states[f"mirrored_{i}"], states[f"one_device_{i}"], rtol=2e-4,
                                   atol=1e-6, err_msg=f"variable {i}")


def test_strategies_by_name():
    assert isinstance(create_strategy("cpu"), tf.distribute.OneDeviceStrategy)
    assert create_strategy("one_device").num_replicas_in_sync == 1
    assert isinstance(create_strategy("mirrored"), tf.distribute.MirroredStrategy)
    with pytest.raises(ValueError, match="Unknown strategy 'gpu'; choose one of tpu, mirrored"):
        create_strategy("gpu")
    with pytest.raises(ValueError, match="--tpu=grpc://1.2.3.4:8470 is only used with "
                                         "--strategy=tpu"):
        create_strategy("mirrored", tpu="grpc://1.2.3.4:8470")


def test_unreachable_tpu_is_a_clear_error():
    port = free_port()
    with pytest.raises(TpuUnavailableError, match=f"Cannot reach the TPU worker at "
                                                  f"grpc://127.0.0.1:{port} \\(--tpu\\)"):
        create_strategy("tpu", tpu=f"grpc://127.0.0.1:{port}")
    with pytest.raises(TpuUnavailableError, match="expected grpc://HOST:PORT"):
        create_strategy("tpu", tpu="grpc://no-port")
