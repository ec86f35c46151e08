"""For tests of the forms layers pick on a CPU with AMX, on any CPU: `assume_amx_bfloat16`
makes the layers decide as if the CPU had (or lacked) AMX, and `xla_compiled` names the
XLA-compiled functions a graph holds (bfloat16 inference on AMX runs the GELU as one).

Example:
    >>> assume_amx_bfloat16(monkeypatch)
    >>> xla_compiled(concrete_function.graph.as_graph_def().library.function)
    ['__inference__fused_gelu_forward_123']
"""

import tensorflow as tf

from bert_tf.layers import onednn, self_attention


def assume_amx_bfloat16(monkeypatch, available=True):
    """The layers choose their bfloat16 matmul forms (`onednn.amx_matmul_forms`, and the
    attention's projections and scores) as on a CPU with AMX (`available`) or without; the
    few-rows rule still applies without."""
    for module in (onednn, self_attention):  # the attention imports the function by name
        monkeypatch.setattr(module, "amx_bfloat16_matmuls",
                            lambda dtype: available and tf.as_dtype(dtype) == tf.bfloat16)


def xla_compiled(functions):
    """The names of those of `functions` (FunctionDefs) that XLA must compile, sorted."""
    return sorted(function.signature.name for function in functions
                  if function.attr["_XlaMustCompile"].b)
