"""Asks for `--strategy=tpu` in each way named on the command line, in this fresh process, and
prints one line per way: `<way>\t<error type>\t<message>` (or `<way>\tok`). For
`test_distributed.py`: connecting to a TPU changes the process's TensorFlow runtime for good.

    python tests/training/tpu_failures.py local closed=grpc://127.0.0.1:9 unregistered_op=grpc://127.0.0.1:8470

Ways: `local`, `none` (no --tpu), `<address>` (grpc://HOST:PORT or a name), `local_on_tpu_build`
and `two_builds` (`--tpu=local` as if tensorflow-tpu, or it and tensorflow, were installed),
`unregistered_op=<address>` (runs a tensorflow-text op on the worker at <address> and explains
TensorFlow's error as for a TPU there).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bert_tf.training import distribution, tpu_host  # noqa: E402

FAKE_BUILDS = {"local_on_tpu_build": ["tensorflow-tpu"],
               "two_builds": ["tensorflow", "tensorflow-tpu"]}


def unregistered_op_error(address):
    """TensorFlow's error for an op the worker at `address` has no kernel for."""
    import tensorflow as tf
    import tensorflow_text  # registers its ops here only

    tf.config.experimental_connect_to_host(address.replace("grpc://", ""), job_name="worker")
    try:
        with tf.device("/job:worker/replica:0/task:0/device:CPU:0"):
            tensorflow_text.normalize_utf8(tf.constant(["Ünïcode"]), "NFD").numpy()
    except tf.errors.OpError as e:
        return e
    raise AssertionError(f"the worker at {address} ran a tensorflow-text op")


def attempt(way):
    if way.startswith("unregistered_op="):
        address = way.split("=", 1)[1]
        raise distribution.explain_tpu_error(address, unregistered_op_error(address))
    installed = tpu_host.tensorflow_distributions
    if way in FAKE_BUILDS:
        builds = FAKE_BUILDS[way]
        tpu_host.tensorflow_distributions = lambda: builds
        way = "local"
    try:
        distribution.create_strategy("tpu", tpu=None if way == "none" else way)
    finally:
        tpu_host.tensorflow_distributions = installed


def main(ways):
    for way in ways:
        try:
            attempt(way)
            print(f"{way}\tok", flush=True)
        except Exception as e:  # noqa: BLE001 (every outcome is reported)
            print(f"{way}\t{type(e).__name__}\t{e}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
