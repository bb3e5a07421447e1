"""The ``layout_constraint`` primitive: a value given the memory layout ``layout`` (a
``Layout``) where XLA computes it, through a ``LayoutConstraint`` custom call that XLA's
layout assignment honours; the value is unchanged. ``with_layout_constraint``
(plax.experimental.layout) and ``with_sharding_constraint`` given a ``Format`` bind it."""
from __future__ import annotations

from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, register_lowering, \
    transpose_rules
from plax.first_order import ad_util
from plax.sharding.layouts import Layout

layout_constraint_p = Primitive("layout_constraint")


def check_layout_fits(layout, ndim: int, what: str = "with_layout_constraint") -> None:
    """Refuse a layout whose dimension order does not fit a value of rank ``ndim``."""
    order = layout.major_to_minor
    if order is None or sorted(order) != list(range(ndim)):
        raise ValueError(f"{what}: the layout {layout} does not fit a value of rank {ndim}: "
                         f"major_to_minor must order its {ndim} dimensions, e.g. "
                         f"{tuple(range(ndim))}")


def _dense_index(values) -> str:
    return f"dense<[{', '.join(map(str, values))}]> : tensor<{len(values)}xindex>" if values \
        else "dense<> : tensor<0xindex>"


def _lowering(ctx, x, *, layout):
    ndim = len(ctx.avals_in[0].shape)
    props = ('call_target_name = "LayoutConstraint", api_version = 1 : i32, '
             'backend_config = "", '
             f"operand_layouts = [{_dense_index(list(range(ndim)))}], "
             f"result_layouts = [{_dense_index(list(layout.major_to_minor[::-1]))}]")
    return ctx.op1("stablehlo.custom_call", [x], props=props)


def _batch(axis, vals, dims, *, layout):
    (x,), (d,) = vals, dims
    if d is None:
        return layout_constraint_p.bind(x, layout=layout), None
    order = [m + 1 for m in layout.major_to_minor]
    order.insert(d, 0)  # the batch dimension, most major (as JAX places it)
    batched = Layout(tuple(order), layout._tiling, layout._sub_byte_element_size_in_bits)
    return layout_constraint_p.bind(x, layout=batched), d


abstract_eval_rules[layout_constraint_p] = lambda x, *, layout: x
register_lowering(layout_constraint_p, _lowering)
ad_util.deflinear(layout_constraint_p)
transpose_rules[layout_constraint_p] = lambda ct, x, *, layout: [
    layout_constraint_p.bind(ct, layout=layout)]
batch_rules[layout_constraint_p] = _batch

