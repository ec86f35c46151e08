"""What this machine offers a TPU job, found without loading TensorFlow.

`tensorflow-tpu` loads `libtpu` when TensorFlow is imported, and on a machine without TPU
chips libtpu then asks the cloud metadata server for the TPU's topology, retrying each of
several variables 30 times: measured on a machine without TPU, `import tensorflow` took 526 s
(with `TPU_LOAD_LIBRARY=0`: 4 s). `skip_libtpu_without_tpu()` sets that variable when no TPU
chip is attached, before TensorFlow loads; on a TPU VM it changes nothing.

Example:
    >>> from bert_tf.training import tpu_host
    >>> tpu_host.skip_libtpu_without_tpu()      # before `import tensorflow`
    >>> tpu_host.local_tpu_chips()
    []
    >>> tpu_host.tensorflow_distributions()
    ['tensorflow-tpu']
"""

import glob
import importlib.metadata
import os
import sys

# Where a TPU VM's chips appear: /dev/accel<N> (v2-v4) or /dev/vfio/<N> (v5e, v5p, v6e).
_TPU_DEVICE_GLOBS = ("/dev/accel[0-9]*", "/dev/vfio/[0-9]*")

# TensorFlow's switch for loading libtpu at import ("0": don't).
LOAD_LIBRARY_VARIABLE = "TPU_LOAD_LIBRARY"

# tensorflow-tpu's last release, and so the newest TensorFlow a TPU job can run on either side.
LAST_TPU_TENSORFLOW = "2.20"


def tpu_tensorflow_version(version):
    """The TensorFlow version ("2.20.0") a TPU job should use on a machine that has `version`:
    the same, unless no TPU build of it exists.

    Example:
        >>> tpu_host.tpu_tensorflow_version("2.21.0"), tpu_host.tpu_tensorflow_version("2.19.1")
        ('2.20', '2.19.1')
    """
    def major_minor(text):
        return tuple(int(part) for part in text.split(".")[:2])

    newer = major_minor(version) > major_minor(LAST_TPU_TENSORFLOW)
    return LAST_TPU_TENSORFLOW if newer else version


def local_tpu_chips():
    """The device files of the TPU chips attached to this machine (empty without any)."""
    return sorted(path for pattern in _TPU_DEVICE_GLOBS for path in glob.glob(pattern))


def skip_libtpu_without_tpu():
    """Sets `TPU_LOAD_LIBRARY=0` when this machine has no TPU chip and nobody set it, so that
    `import tensorflow` under tensorflow-tpu takes seconds instead of minutes. Returns whether
    it set it; it cannot once TensorFlow is loaded."""
    if (LOAD_LIBRARY_VARIABLE in os.environ or "tensorflow" in sys.modules
            or local_tpu_chips()):
        return False
    os.environ[LOAD_LIBRARY_VARIABLE] = "0"
    return True


def tensorflow_distributions():
    """The installed distributions that provide the `tensorflow` package, e.g.
    `['tensorflow']`, `['tensorflow-tpu']`, or both after a mixed install (then the files of
    whichever was installed last are loaded)."""
    names = importlib.metadata.packages_distributions().get("tensorflow", [])
    return sorted({name.lower().replace("_", "-") for name in names})
