"""``symbolic_shape`` and ``symbolic_args_specs``: shapes with dimension variables."""
from __future__ import annotations

from plax import tree_util
from plax.core.shape_dtype_struct import ShapeDtypeStruct
from plax.core.symbolic_shapes import SymbolicScope, parse_shape


def symbolic_shape(shape_spec, *, constraints=(), scope=None, like=None) -> tuple:
    """The shape described by ``shape_spec`` (``"b, 4"``, ``"2*b, b + 1"``): ints and
    symbolic dimensions. ``constraints`` relate them (``"b >= 2"``, ``"a == 2*b"``); ``scope``
    shares variables with earlier shapes; ``like`` fills the ``_`` entries."""
    if scope is None:
        scope = SymbolicScope(constraints)
    elif constraints:
        raise ValueError("Cannot specify both a `scope` and `constraints`.")
    if shape_spec is None:
        shape_spec = "..."
    dims = parse_shape(shape_spec, scope, like)
    return dims


def symbolic_args_specs(args, shapes_specs, constraints=(), scope=None):
    """ShapeDtypeStructs for ``args`` (a pytree of arrays) whose shapes follow
    ``shapes_specs`` (one spec string for all leaves, or a pytree prefix of specs); all in
    one symbolic scope."""
    if scope is None:
        scope = SymbolicScope(constraints)
    elif constraints:
        raise ValueError("Cannot specify both a `scope` and `constraints`.")
    leaves, tree = tree_util.tree_flatten(args)
    if isinstance(shapes_specs, (str, type(None))):
        specs = [shapes_specs] * len(leaves)
    else:
        if isinstance(args, tuple) and isinstance(shapes_specs, list):
            shapes_specs = tuple(shapes_specs)  # (a list of specs for a tuple of arguments)
        specs = tree_util.broadcast_prefix(shapes_specs, args,
                                           is_leaf=lambda x: x is None)
    out = []
    for x, spec in zip(leaves, specs):
        shape = tuple(x.shape)
        dims = symbolic_shape(spec, scope=scope, like=shape)
        out.append(ShapeDtypeStruct(dims, x.dtype, weak_type=getattr(x, "weak_type", False)))
    return tree_util.tree_unflatten(tree, out)
