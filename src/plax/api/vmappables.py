"""vmap over containers registered with ``interpreters.batching.register_vmappable``.

Such a container is mapped as a whole: its handlers say which arrays inside it are mapped
along which axis (``to_elt``) and how a per-example container becomes a batched one
(``from_elt``). plax runs each handler twice: once on the values as given, with ``cont``
recording the (array, axis) pairs it is called with, which become ordinary mapped
arguments (and results) of a plain ``vmap``; and once inside (after) that vmap, with
``cont`` answering with those arguments' per-example values (results' batched values) in
the same order. The handlers must therefore make the same calls for the same container
(they restructure; they do not compute on the arrays).
"""
from __future__ import annotations

from plax import tree_util
from plax.core import dtypes
from plax.interpreters import batching


class _Recorded:
    """What ``cont`` gives back on the recording run: a stand-in for a value to come."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def _example_index(size):
    """The index of each example: ``make_iota`` for a registered axis-size type, else iota."""
    handler = batching.make_iota_handlers.get(type(size))
    if handler is not None:
        return handler(size)
    from plax.first_order.shapes import iota
    return iota(dtypes.canonicalize_dtype("int32"), int(size))


def call(vmap, fun, in_axes, out_axes, vmap_kwargs, args, kwargs):
    """``vmap(fun, in_axes, out_axes, **vmap_kwargs)(*args, **kwargs)`` where some leaves
    are registered containers (``vmap`` is plax's plain vmap)."""
    from plax.api.vmap import flatten_axes
    leaves, in_tree = tree_util.tree_flatten((args, kwargs), is_leaf=batching.is_vmappable)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    axes = flatten_axes("vmap in_axes", in_tree, (in_axes, 0), kws=True)

    # The recording run: the arrays inside each container, with their axes.
    flat_vals, flat_axes, index_used = [], [], [False]

    def record(x, axis):
        flat_vals.append(x)
        flat_axes.append(axis)
        return _Recorded(len(flat_vals) - 1)

    def record_idx():
        index_used[0] = True
        return _Recorded(-1)

    spans = []  # per leaf: (start, stop) of its arrays among flat_vals
    for x, ax in zip(leaves, axes):
        start = len(flat_vals)
        if batching.is_vmappable(x):
            batching.to_elt_handlers[type(x)](record, record_idx, x, ax)
        else:
            record(x, ax)
        spans.append((start, len(flat_vals)))
    axis_size = vmap_kwargs.get("axis_size")
    if axis_size is None:
        axis_size = next((_size_along(v, a) for v, a in zip(flat_vals, flat_axes)
                          if a is not None), None)
    if index_used[0]:  # the example index is one more mapped argument
        if axis_size is None:
            raise ValueError("vmap over a registered container needs the axis size: pass "
                             "axis_size= or map an array argument")
        flat_vals.append(_example_index(axis_size))
        flat_axes.append(0)

    out_axes_flat, out_spans, out_info = [], [], []

    def per_example(*xs):
        it_idx = xs[-1] if index_used[0] else None
        rebuilt = []
        for x, ax, (start, stop) in zip(leaves, axes, spans):
            if batching.is_vmappable(x):
                rebuilt.append(batching.to_elt_handlers[type(x)](
                    _replaying(xs, start, stop), lambda: it_idx, x, ax))
            else:
                rebuilt.append(xs[start])
        a, kw = tree_util.tree_unflatten(in_tree, rebuilt)
        out = fun(*a, **kw)
        out_leaves, out_tree = tree_util.tree_flatten(out, is_leaf=batching.is_vmappable)
        dst = flatten_axes("vmap out_axes", out_tree, out_axes)
        flat_out = []
        for leaf, d in zip(out_leaves, dst):
            start = len(flat_out)
            if batching.is_vmappable(leaf):
                def record_out(size, part, axis, _flat=flat_out):
                    _flat.append(part)
                    out_axes_flat.append(axis)
                    return _Recorded(len(_flat) - 1)
                batching.from_elt_handlers[type(leaf)](record_out, axis_size, leaf, d)
            else:
                flat_out.append(leaf)
                out_axes_flat.append(d)
            out_spans.append((start, len(flat_out)))
        out_info.append((out_tree, out_leaves, dst))
        return flat_out

    per_example.plax_flat_vmap = True  # (vmap's plain road: no container among these)
    # out_axes_flat is filled while per_example is traced: vmap reads it afterwards.
    outs = vmap(per_example, in_axes=tuple(flat_axes), out_axes=out_axes_flat,
                **vmap_kwargs)(*flat_vals)
    out_tree, out_leaves, dst = out_info[0]
    rebuilt = []
    for leaf, d, (start, stop) in zip(out_leaves, dst, out_spans):
        if batching.is_vmappable(leaf):
            it = iter(outs[start:stop])
            rebuilt.append(batching.from_elt_handlers[type(leaf)](
                lambda size, part, axis: next(it), axis_size, leaf, d))
        else:
            rebuilt.append(outs[start])
    return tree_util.tree_unflatten(out_tree, rebuilt)


def _size_along(x, axis):
    from plax.core.trace import get_aval
    shape = get_aval(x).shape
    return shape[axis % len(shape)]


def _replaying(xs, start, stop):
    """A ``cont`` answering with ``xs[start:stop]`` in order."""
    it = iter(xs[start:stop])

    def cont(x, axis):
        return next(it)
    return cont
