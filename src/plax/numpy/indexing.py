"""Basic NumPy indexing: integers, slices, None and Ellipsis (static or traced integers).

Advanced indexing (integer and boolean arrays) arrives with gather/scatter; until
then such an index raises a TypeError that says so.
"""
from __future__ import annotations

import operator

import numpy as np

from plax import lax
from plax.core import dtypes
from plax.core.trace import Tracer, get_aval
from plax.runtime.array import Array


def _is_scalar_int_value(i) -> bool:
    """A 0-d integer plax value or tracer (used as a dynamic index)."""
    if not isinstance(i, (Array, Tracer)):
        return False
    aval = get_aval(i)
    return aval.ndim == 0 and dtypes.is_integer(aval.dtype)


def _normalize(idx, ndim: int) -> list:
    """The index as a list with Ellipsis expanded to full slices."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    for i in idx:
        if isinstance(i, (list, np.ndarray)) or (
                isinstance(i, (Array, Tracer)) and not _is_scalar_int_value(i)):
            raise TypeError(
                f"Advanced indexing with {type(i).__name__} indices (integer or boolean arrays) "
                "is not supported yet; use integers, slices, None and Ellipsis, or "
                "plax.lax.dynamic_slice.")
        if isinstance(i, (bool, np.bool_)):
            raise TypeError("Indexing with a boolean scalar is not supported; use plax.numpy.where.")
        if not (i is None or i is Ellipsis or isinstance(i, slice) or _is_scalar_int_value(i)
                or hasattr(i, "__index__")):
            raise TypeError(f"Indexing with {i!r} of type {type(i).__name__} is not supported: "
                            "indices must be integers, slices, None or Ellipsis.")
    n_ellipsis = sum(i is Ellipsis for i in idx)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(i is not None and i is not Ellipsis for i in idx)
    if consumed > ndim:
        raise IndexError(f"Too many indices: array is {ndim}-dimensional, but {consumed} were indexed")
    out = []
    for i in idx:
        if i is Ellipsis:
            out.extend([slice(None)] * (ndim - consumed))
        else:
            out.append(i)
    if not n_ellipsis:
        out.extend([slice(None)] * (ndim - consumed))
    return out


def _rewriting_take(arr, idx):
    """``arr[idx]`` for basic indices."""
    shape = get_aval(arr).shape
    items = _normalize(idx, len(shape))
    starts, limits, strides, reverse, squeeze = [], [], [], [], []
    dynamic = {}       # axis -> traced index
    new_axes = []      # positions of None in the output
    axis = 0
    out_pos = 0
    for i in items:
        if i is None:
            new_axes.append(out_pos)
            out_pos += 1
            continue
        size = shape[axis]
        if isinstance(i, slice):
            start, stop, step = i.indices(size)
            count = len(range(start, stop, step))
            if step > 0:
                starts.append(start)
                limits.append(start + max(count - 1, 0) * step + (1 if count else 0))
                strides.append(step)
            else:
                last = start + (count - 1) * step if count else 0
                starts.append(last)
                limits.append(start + 1 if count else 0)
                strides.append(-step)
                reverse.append(axis)
            out_pos += 1
        elif isinstance(i, Tracer):
            dynamic[axis] = i
            starts.append(0)
            limits.append(size)
            strides.append(1)
            squeeze.append(axis)
        else:
            k = operator.index(i)
            if not -size <= k < size:
                raise IndexError(f"index {k} is out of bounds for axis {axis} with size {size}")
            k %= size
            starts.append(k)
            limits.append(k + 1)
            strides.append(1)
            squeeze.append(axis)
        axis += 1
    out = arr
    if any(s != 0 for s in starts) or tuple(limits) != shape or any(s != 1 for s in strides):
        out = lax.slice(out, tuple(starts), tuple(limits),
                        None if all(s == 1 for s in strides) else tuple(strides))
    if reverse:
        out = lax.rev(out, tuple(reverse))
    if dynamic:
        cur = get_aval(out).shape
        idx_operands = [dynamic.get(d, 0) for d in range(len(cur))]
        sizes = [1 if d in dynamic else cur[d] for d in range(len(cur))]
        out = lax.dynamic_slice(out, idx_operands, sizes)
    if squeeze:
        out = lax.squeeze(out, tuple(squeeze))
    if new_axes:
        out = lax.expand_dims(out, tuple(new_axes))
    if out is arr and isinstance(arr, np.ndarray):
        return arr.copy()
    return out
