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

from plax.core.trace import get_aval
from plax.core.tree_core import tree_flatten, tree_unflatten
from plax.first_order.layout_constraint import check_layout_fits, layout_constraint_p
from plax.sharding.layouts import Format, Layout  # noqa: F401  (this module's public names)


# --- with_layout_constraint -------------------------------------------------------------
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
        check_layout_fits(layout, len(get_aval(leaf).shape))
    return tree_unflatten(tree, [layout_constraint_p.bind(leaf, layout=layout)
                                 for leaf, layout in zip(leaves, flat)])
