"""``jax.experimental.scheduling_groups``: a function's call tagged for XLA's schedulers.

``scheduling_group(name)(f)`` and ``xla_metadata_call(f, **meta)`` stage ``f`` as one
``xla_metadata_call`` equation whose lowered call carries the metadata as frontend
attributes (``higher_order/xla_metadata_call.py``)."""
from plax.higher_order.xla_metadata_call import (dce_jaxpr_xla_metadata_rule, scheduling_group,
                                                 xla_metadata_call, xla_metadata_call_p)
from plax.higher_order.xla_metadata_call import attribute_value as _attribute_value

__all__ = ["attr_get", "dce_jaxpr_xla_metadata_rule", "scheduling_group", "xla_metadata_call",
           "xla_metadata_call_p"]


def attr_get(x):
    """The MLIR attribute a metadata value lowers to (a StringAttr; strings only), for
    lowering rules written with jaxlib's MLIR bindings (inside an MLIR context)."""
    from plax.lowering.mlir_bindings import ir
    return ir.StringAttr.get(_attribute_value(x))
