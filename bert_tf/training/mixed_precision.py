"""Mixed precision by name, as the training tools' --mixed_precision takes it: the Keras dtype
policy of the encoder (None keeps float32 everywhere).

bfloat16 computes in bfloat16 with float32 variables: faster on CPUs with AMX/AVX512-BF16 and
on TPUs, and needs no loss scaling; float16 does need it (`PretrainingTrainer` adds dynamic loss
scaling for it), and is for GPUs (`warn_if_float16_on_cpu`).

Example:
    >>> BertEncoder(config, dtype=MIXED_PRECISION["bfloat16"])
"""

import logging

MIXED_PRECISION = {"float32": None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}

logger = logging.getLogger("bert_tf.training")


def warn_if_float16_on_cpu(mixed_precision, strategy=None):
    """Logs a warning when `mixed_precision` is float16 and the job computes on CPUs: the
    devices of `strategy`, or without one (or with TensorFlow's default strategy: Keras'
    placement) whether TensorFlow sees no GPU. Returns whether it warned.

    TensorFlow has no fast float16 kernels on a CPU, with or without XLA: the embedded
    bert_tiny pre-training job's step took 25 s in float16 against 0.56 s in float32 (its
    first step's compilation included; 12 steps, 411 against 35 s for the whole run, 2-vCPU
    Xeon with AVX512_FP16 and AMX), and on CPUs without AVX512_FP16 TensorFlow also prints an
    error line about oneDNN and DT_HALF. A job copied from a GPU recipe is told when it starts.

    Example:
        >>> warn_if_float16_on_cpu("float16", tf.distribute.OneDeviceStrategy("/cpu:0"))
        True
    """
    if mixed_precision != "float16":
        return False
    import tensorflow as tf  # here: the tools read MIXED_PRECISION before importing TensorFlow

    try:
        devices = strategy.extended.worker_devices if strategy is not None else None
    except RuntimeError:  # TensorFlow's default strategy lists none: Keras' placement decides
        devices = None
    if devices is None:
        devices = [device.name for device in tf.config.list_logical_devices("GPU")] or ["/cpu:0"]
    kinds = {tf.DeviceSpec.from_string(device).device_type for device in devices}
    if "CPU" not in kinds:
        return False
    logger.warning("--mixed_precision=float16 on a CPU runs TensorFlow's slow float16 "
                   "fallback kernels (bert_tiny's pre-training step ~45x float32's); use "
                   "--mixed_precision=bfloat16 on CPUs and TPUs, float16 on GPUs")
    return True
