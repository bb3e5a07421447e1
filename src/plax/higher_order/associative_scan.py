"""associative_scan: an inclusive prefix scan with a user-supplied associative operator.

Unlike ``scan`` this is not a primitive of its own: it unrolls, at trace time, the
odd/even recursive parallel-prefix scheme (Blelloch 1990; Ladner & Fischer 1980) into
plain lax operations -- static slices, ``concatenate``, ``reshape`` and ``rev`` -- around
calls of the combining function on whole slices. It therefore works eagerly and composes
with ``jit``, ``grad`` and ``vmap`` with no rules of its own, and costs O(log n) levels
of ``fn`` applications, O(n) combined elements in total.

One level of the scheme, for elements ``x[0..n)`` along the scanned axis:

* combine neighbours, ``p[j] = fn(x[2j], x[2j+1])`` for ``j < n // 2``;
* scan ``p`` recursively: ``s[j]`` is then the prefix ending at ``x[2j+1]``, i.e. the
  result at every odd position;
* the result at an even position ``2j > 0`` is ``fn(s[j-1], x[2j])``, and at ``0`` it is
  ``x[0]``;
* weave the even and odd results back together.

``fn`` must be associative (it need not be commutative), and vectorised: it is called
with pytrees whose leaves hold many elements stacked along ``axis``.
"""
from __future__ import annotations

from plax import tree_util
from plax.core.trace import get_aval
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.core.tracebacks import api_boundary

__all__ = ["associative_scan"]


def _shape(x) -> tuple:
    return tuple(get_aval(x).shape)  # a TypeError for leaves that are not array values


def _weave(evens, odds, axis: int):
    """Interleave ``evens`` (at positions 0, 2, ...) and ``odds`` (1, 3, ...) along ``axis``.

    ``evens`` has as many elements as ``odds`` or one more. Done by stacking pairs on a
    new axis and merging it into ``axis``, so the values are moved, never recomputed.
    """
    shape = _shape(evens)
    n_odd = _shape(odds)[axis]
    n_even = shape[axis]
    paired = evens if n_even == n_odd else _slicing.slice_in_dim(evens, 0, n_odd, axis=axis)
    stacked = _shapes.concatenate([_shapes.expand_dims(paired, (axis + 1,)),
                                   _shapes.expand_dims(odds, (axis + 1,))], axis + 1)
    merged = _shapes.reshape(stacked, shape[:axis] + (2 * n_odd,) + shape[axis + 1:])
    if n_even == n_odd:
        return merged
    last = _slicing.slice_in_dim(evens, n_odd, n_even, axis=axis)
    return _shapes.concatenate([merged, last], axis)


@api_boundary
def associative_scan(fn, elems, reverse=False, axis=0):
    """Inclusive scan of the pytree ``elems`` along ``axis`` with the associative ``fn``.

    ``fn(a, b)`` takes two pytrees shaped like ``elems`` (each leaf holding a run of
    elements along ``axis``) and combines them elementwise; result ``i`` is
    ``fn(... fn(elems[0], elems[1]) ..., elems[i])``. With ``reverse=True`` the scan runs
    from the end: result ``i`` combines ``elems[i:]``, the later elements being passed
    as ``fn``'s first argument.
    """
    if not callable(fn):
        raise TypeError("lax.associative_scan: fn argument should be callable.")
    leaves, treedef = tree_util.tree_flatten(elems)
    if not leaves:
        raise ValueError("lax.associative_scan: elems must contain at least one array, "
                         f"got a pytree with no leaves: {treedef}.")
    shapes = [_shape(x) for x in leaves]
    ndim = len(shapes[0])
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim} "
                         "(the first leaf of elems) in lax.associative_scan.")
    axis %= ndim
    length = shapes[0][axis]
    if any(len(s) <= axis or s[axis] != length for s in shapes[1:]):
        raise ValueError("Array inputs to associative_scan must have the same first dimension. "
                         f"(scanned axis {axis}; leaf shapes: {shapes})")

    def combine(a_leaves, b_leaves):
        out = fn(tree_util.tree_unflatten(treedef, a_leaves),
                 tree_util.tree_unflatten(treedef, b_leaves))
        out_leaves = tree_util.tree_leaves(out)
        if len(out_leaves) != len(a_leaves):
            raise ValueError("lax.associative_scan: fn must return a pytree with as many "
                            f"leaves as elems ({len(a_leaves)}), got {len(out_leaves)}.")
        return out_leaves

    def cut(xs, start, stop, stride=1):
        return [_slicing.slice_in_dim(x, start, stop, stride, axis) for x in xs]

    def prefix(xs):
        n = _shape(xs[0])[axis]
        if n < 2:
            return list(xs)
        half = n // 2
        pair_scan = prefix(combine(cut(xs, 0, 2 * half, 2), cut(xs, 1, 2 * half, 2)))
        n_tail = (n - 1) // 2  # even positions 2, 4, ... below n
        if n_tail:
            tail = combine(cut(pair_scan, 0, n_tail), cut(xs, 2, n, 2))
            evens = [_shapes.concatenate([head, t], axis)
                     for head, t in zip(cut(xs, 0, 1), tail)]
        else:
            evens = cut(xs, 0, 1)
        return [_weave(e, o, axis) for e, o in zip(evens, pair_scan)]

    if reverse:
        leaves = [_shapes.rev(x, (axis,)) for x in leaves]
    out = prefix(leaves)
    if reverse:
        out = [_shapes.rev(x, (axis,)) for x in out]
    return tree_util.tree_unflatten(treedef, out)
