"""``plax.experimental.layout``: how an array's elements are laid out in device memory.

``Layout(major_to_minor)`` names a dimension order (``(0, 1)`` is row-major for a matrix);
``Format(layout, sharding)`` pairs a layout with a sharding, as JAX's APIs that take either
accept (they live in plax/sharding/layouts.py). plax lets XLA choose every layout (the
default, row-major on CPU): ``device_put(x, Format(layout, sharding))`` places by the
sharding with the default layout, and refuses another layout with a clear error.

``with_layout_constraint(x, layouts)`` asks XLA to give the values of ``x`` the layouts
``layouts`` where they are computed inside a jitted function (a ``LayoutConstraint`` custom
call, XLA's layout assignment honouring it); the values are unchanged, and an array plax
returns keeps the default layout.
"""
from __future__ import annotations

from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, register_lowering, \
    transpose_rules
from plax.core.trace import get_aval
from plax.core.tree_core import tree_flatten, tree_unflatten
from plax.first_order import ad_util
from plax.sharding.layouts import Format, Layout  # noqa: F401  (this module's public names)


# --- with_layout_constraint -------------------------------------------------------------
layout_constraint_p = Primitive("layout_constraint")


def with_layout_constraint(x, layouts):
    """``x`` (a pytree of arrays) with each array laid out as its entry of ``layouts`` (a
    ``Layout``, or a pytree prefix of ``x`` of them) where XLA computes it."""
    from plax.api.vmap import flatten_axes
    leaves, tree = tree_flatten(x)
    flat = flatten_axes("with_layout_constraint layouts", tree, layouts)
    if any(not isinstance(layout, Layout) for layout in flat):
        raise ValueError("layouts passed to `with_layout_constraint` must be of type "
                         f"`Layout`. Got {[type(layout) for layout in flat]}")
    for leaf, layout in zip(leaves, flat):
        ndim = len(get_aval(leaf).shape)
        order = layout.major_to_minor
        if order is None or sorted(order) != list(range(ndim)):
            raise ValueError(f"with_layout_constraint: the layout {layout} does not fit a "
                             f"value of rank {ndim}: major_to_minor must order its "
                             f"{ndim} dimensions, e.g. {tuple(range(ndim))}")
    return tree_unflatten(tree, [layout_constraint_p.bind(leaf, layout=layout)
                                 for leaf, layout in zip(leaves, flat)])


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

