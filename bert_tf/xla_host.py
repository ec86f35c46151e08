"""Whether this TensorFlow can XLA-compile for the CPU, found without loading TensorFlow.

tensorflow-tpu (the TPU build, 2.20 the last) links no XLA backend for the CPU: a function
compiled with `jit_compile=True` and run on the host fails there with "could not find registered
transfer manager for platform Host". The package's XLA loops (GELU, LayerNorm, dropout, AdamW,
the pre-training loss) and run_pretraining's step ask `host_jit_compile()` instead, so that on a
TPU VM fine-tuning and CPU jobs run them as TensorFlow ops, while a TPU compiles them with the
rest of its step either way.

Example:
    >>> @tf.function(jit_compile=host_jit_compile(), autograph=False)
    ... def fused_loop(x): ...
"""

import functools
import importlib.metadata


@functools.cache
def host_jit_compile():
    """`jit_compile` for a function XLA should compile on the host: True, or None under
    tensorflow-tpu. None, not False: False would keep it out of an enclosing compilation (a
    TPU's step)."""
    try:
        importlib.metadata.distribution("tensorflow-tpu")
    except importlib.metadata.PackageNotFoundError:
        return True
    return None
