"""``smap``: shard_map over one mesh axis, its specs written as vmap-style axis numbers.

``smap(f, in_axes=..., out_axes=..., axis_name='x')`` is ``shard_map`` over the context
mesh with only ``'x'`` manual: an argument's ``in_axes`` entry ``i`` is the spec that splits
dimension ``i`` over ``'x'`` (``None``: replicated), likewise ``out_axes`` for the results,
and the varying-axes check is on. Left out, ``in_axes`` is read from the arguments' types
(only when ``'x'`` is an Explicit axis).
"""
from __future__ import annotations

import functools

from plax import tree_util
from plax.core.source_info import wraps
from plax.api.shard_map import shard_mapped
from plax.sharding.mesh import AxisType, get_abstract_mesh
from plax.sharding.partition_spec import Infer, PartitionSpec

__all__ = ["smap"]


def smap(f=None, /, *, in_axes=Infer, out_axes, axis_name):
    """``f`` mapped over mesh axis ``axis_name`` one block per device (a single-axis
    shard_map over the context mesh); used bare or as a decorator (``f`` left out)."""
    if f is None:
        return functools.partial(_smap, in_axes=in_axes, out_axes=out_axes,
                                 axis_name=axis_name)
    return _smap(f, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)


def _is_axis(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _spec(axis_name, axis):
    """The spec splitting dimension ``axis`` over ``axis_name`` (None: replicated)."""
    return PartitionSpec() if axis is None else PartitionSpec(*[None] * axis, axis_name)


def _smap(f, *, in_axes, out_axes, axis_name):
    if isinstance(axis_name, (list, tuple)):
        raise TypeError(f"smap axis_name should be a `str` or a `Hashable`, but got {axis_name}")
    if in_axes is not None and in_axes is not Infer and not isinstance(in_axes, (int, tuple)):
        raise TypeError("smap in_axes must be an int, None, jax.sharding.Infer, or a tuple of "
                        "entries corresponding to the positional arguments passed to the "
                        f"function, but got {in_axes}.")
    if in_axes is not Infer and not all(map(_is_axis, tree_util.tree_leaves(in_axes))):
        raise TypeError("smap in_axes must be an int, None, jax.sharding.Infer, or (nested) "
                        f"container with those types as leaves, but got {in_axes}.")
    if not all(map(_is_axis, tree_util.tree_leaves(out_axes))):
        raise TypeError("smap out_axes must be an int, None, or (nested) container with those "
                        f"types as leaves, but got {out_axes}.")
    for a in tree_util.tree_leaves((in_axes if in_axes is not Infer else (), out_axes)):
        if a < 0:
            raise ValueError(f"smap in_axes and out_axes name a dimension counted from the "
                             f"front (0, 1, ...), got {a}.")
    to_spec = lambda a: _spec(axis_name, a)  # noqa: E731
    is_none = lambda x: x is None  # noqa: E731
    in_specs = (Infer if in_axes is Infer else
                tree_util.tree_map(to_spec, in_axes, is_leaf=is_none))
    out_specs = tree_util.tree_map(to_spec, out_axes, is_leaf=is_none)
    mapped = shard_mapped(f, None, in_specs, out_specs, True, frozenset({axis_name}))

    @wraps(f)
    def wrapped(*args):
        mesh = get_abstract_mesh()
        if mesh.empty:
            raise ValueError("The context mesh cannot be empty. Use `jax.set_mesh(mesh)` to "
                             "enter into a mesh context")
        if axis_name not in mesh.axis_names:
            raise ValueError(f"jax.shard_map requires axis_names={frozenset({axis_name})} to "
                             f"be a subset of mesh.axis_names={frozenset(mesh.axis_names)}")
        kind = dict(zip(mesh.axis_names, mesh.axis_types))[axis_name]
        if in_axes is Infer and kind is not AxisType.Explicit:
            raise TypeError(f"in_axes was not specified when axis_name={frozenset({axis_name})} "
                            f"was of type {kind}: pass in_axes, or make {axis_name!r} an "
                            "Explicit mesh axis so the arguments' types say how they are "
                            "split.")
        return mapped(*args)
    return wrapped
