"""Building and editing arrays: append, insert, delete, resize, trim_zeros, block,
row_stack, choose, put, diagflat, vander, packbits, unpackbits, apply_along_axis,
apply_over_axes, extract, place. Arrays are immutable: put and place return new arrays
(``inplace=False``), as in JAX."""
from __future__ import annotations

import operator

import numpy as np

from plax import lax
from plax.core import dtypes
from plax.core.errors import ConcretizationTypeError
from plax.core.trace import Tracer, get_aval
from plax.numpy import creation, padding, products, shape_ops, sorting, ufuncs
from plax.numpy.util import (as_operand, canonicalize_axis, check_arraylike, convert,
                             promote_dtypes, shape_of)

__all__ = ["append", "insert", "delete", "resize", "trim_zeros", "block", "row_stack",
           "choose", "put", "diagflat", "vander", "packbits", "unpackbits",
           "apply_along_axis", "apply_over_axes", "extract", "place"]


def _arr(name, a):
    check_arraylike(name, a)
    return creation.asarray(a)


def _host(x, what: str):
    """The concrete value of ``x``; ConcretizationTypeError while it is only traced."""
    if isinstance(x, Tracer):
        val = x.to_concrete_value()
        if val is None:
            raise ConcretizationTypeError(x, what)
        return np.asarray(val)
    return np.asarray(x)


def _inplace_error(name):
    return ValueError(f"jax.numpy.{name} cannot modify arrays in-place, because JAX arrays are "
                      "immutable. Pass inplace=False to instead return an updated array.")


def _iota(n):
    return lax.iota(np.int32, n)


def append(arr, values, axis=None):
    """``arr`` with ``values`` appended along ``axis`` (both flattened when None)."""
    check_arraylike("append", arr, values)
    arr, values = promote_dtypes(arr, values)
    if axis is None:
        return shape_ops.concatenate([shape_ops.ravel(arr), shape_ops.ravel(values)], 0)
    return shape_ops.concatenate([arr, values], axis)


def _along0(a, axis):
    return shape_ops.moveaxis(a, axis, 0)


def insert(arr, obj, values, axis=None):
    """``arr`` with ``values`` inserted before the index or indices ``obj`` along ``axis``
    (flattened when None). Indices may be traced; out-of-range ones are clipped."""
    check_arraylike("insert", arr, values)
    a = _arr("insert", arr)
    if axis is None:
        a, axis = shape_ops.ravel(a), 0
    aval = get_aval(a)
    axis = canonicalize_axis(axis, aval.ndim)
    n = aval.shape[axis]
    values = convert(as_operand(values), aval.dtype, aval.weak_type)
    if isinstance(obj, slice):
        obj = np.arange(n)[obj]
    if isinstance(obj, (list, tuple)):
        obj = np.asarray(obj, dtype=np.int64 if len(obj) == 0 else None)
    check_arraylike("insert", obj)
    obj = as_operand(obj)
    if not dtypes.is_integer(dtypes.result_type(obj)):
        raise TypeError(f"insert: obj must be integer indices, got dtype "
                        f"{dtypes.result_type(obj)}.")
    vshape = shape_of(values)
    if shape_of(obj) == ():
        # One position: values (with at least arr's rank) fill as many slices as they hold.
        v = creation.array(values, copy=False, ndmin=aval.ndim)
        v = shape_ops.moveaxis(v, 0, axis) if len(vshape) else v
        k = get_aval(v).shape[axis]
        pos = lax.broadcast_in_dim(convert(obj, np.int32), (k,), ())
    else:
        pos = convert(shape_ops.ravel(obj), np.int32)
        k = get_aval(pos).shape[0]
        v = values
    target = list(aval.shape)
    target[axis] = k
    v = shape_ops.broadcast_to(v, tuple(target))
    pos = lax.select(lax.lt(pos, np.int32(0)), lax.add(pos, np.int32(n)), pos)
    pos = lax.clamp(np.int32(0), pos, np.int32(n))
    order = sorting.argsort(pos, stable=True)
    new_pos = lax.add(sorting.take_rows(pos, convert(order, np.int32)), _iota(k))
    keep = lax.broadcast_in_dim(np.bool_(True), (n + k,), ())
    keep = keep.at[new_pos].set(False) if k else keep
    old_pos = sorting.first_true_positions(keep, n)
    a0, v0 = _along0(a, axis), _along0(v, axis)
    out = creation.zeros((n + k,) + get_aval(a0).shape[1:], aval.dtype)
    out = out.at[old_pos].set(a0)
    if k:
        out = out.at[new_pos].set(sorting.take_rows(v0, convert(order, np.int32)))
    return convert(shape_ops.moveaxis(out, 0, axis), aval.dtype, aval.weak_type)


def delete(arr, obj, axis=None, *, assume_unique_indices: bool = False):
    """``arr`` without the entries at index, indices, slice or boolean mask ``obj`` along
    ``axis`` (flattened when None). Traced indices need ``assume_unique_indices=True``."""
    a = _arr("delete", arr)
    if axis is None:
        a, axis = shape_ops.ravel(a), 0
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    n = get_aval(a).shape[axis]
    if isinstance(obj, slice):
        keep = np.ones(n, bool)
        keep[obj] = False
        return _take_axis(a, keep, axis)
    if isinstance(obj, (list, tuple)):
        obj = np.asarray(obj, dtype=np.int64 if len(obj) == 0 else None)
    check_arraylike("delete", obj)
    obj = as_operand(obj)
    dt = dtypes.result_type(obj)
    traced = isinstance(obj, Tracer) and obj.to_concrete_value() is None
    if traced and assume_unique_indices and dtypes.is_integer(dt):
        idx = convert(shape_ops.ravel(obj), np.int32)
        idx = lax.select(lax.lt(idx, np.int32(0)), lax.add(idx, np.int32(n)), idx)
        mask = lax.broadcast_in_dim(np.bool_(True), (n,), ()).at[idx].set(False)
        pos = sorting.first_true_positions(mask, n - get_aval(idx).shape[0])
        return _along_take(a, pos, axis)
    host = _host(obj, "'obj' array argument of jnp.delete(): pass concrete indices, or "
                      "assume_unique_indices=True so that the output size is known.")
    if host.dtype == np.bool_:
        if host.shape != (n,):
            raise ValueError(f"delete: boolean obj must have shape ({n},), got {host.shape}.")
        return _take_axis(a, ~host, axis)
    if not np.issubdtype(host.dtype, np.integer):
        raise TypeError(f"delete: obj must be integer indices, got dtype {host.dtype}.")
    flat = host.reshape(-1)
    if np.any((flat < -n) | (flat >= n)):
        bad = flat[(flat < -n) | (flat >= n)][0]
        raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {n}")
    keep = np.ones(n, bool)
    keep[flat] = False
    return _take_axis(a, keep, axis)


def _along_take(a, pos, axis):
    return shape_ops.moveaxis(sorting.take_rows(_along0(a, axis), pos), 0, axis)


def _take_axis(a, keep: np.ndarray, axis: int):
    return _along_take(a, np.nonzero(keep)[0].astype(np.int32), axis)


def resize(a, new_shape):
    """An array of ``new_shape`` filled with ``a``'s entries repeated in order (zeros when
    ``a`` is empty)."""
    a = _arr("resize", a)
    shape = shape_ops.static_int_tuple(new_shape, "new_shape")
    if any(d < 0 for d in shape):
        raise ValueError(f"resize: new_shape must be non-negative, got {shape}.")
    size = int(np.prod(shape))
    flat = shape_ops.ravel(a)
    n = get_aval(flat).shape[0]
    if n == 0:
        return creation.zeros(shape, get_aval(a).dtype)
    reps = -(-size // n)
    flat = shape_ops.tile(flat, reps) if reps > 1 else flat
    return shape_ops.reshape(lax.slice_in_dim(flat, 0, size), shape)


def trim_zeros(filt, trim: str = "fb", axis=None):
    """``filt`` without its leading ('f') and/or trailing ('b') all-zero slices along
    ``axis`` (all axes when None). Needs concrete input: the result shape depends on it."""
    a = _arr("trim_zeros", filt)
    if not isinstance(trim, str):
        raise TypeError(f"trim_zeros: trim must be a string, got {trim!r}.")
    nz = _host(sorting.nonzero_mask(a), "Error arose in the `filt` argument of trim_zeros(): "
                                         "its value sets the output shape.")
    ndim = nz.ndim
    if ndim == 0:
        raise ValueError("trim_zeros: filt must be at least 1-D.")
    axes = range(ndim) if axis is None else (
        [canonicalize_axis(axis, ndim)] if isinstance(axis, (int, np.integer))
        else [canonicalize_axis(ax, ndim) for ax in axis])
    trim = trim.lower()
    idx = [slice(None)] * ndim
    for ax in axes:
        line = nz.any(axis=tuple(i for i in range(ndim) if i != ax))
        hits = np.nonzero(line)[0]
        if not hits.size:
            idx = [slice(0, 0)] * ndim if axis is None else idx[:ax] + [slice(0, 0)] + idx[ax + 1:]
            break
        lo = int(hits[0]) if "f" in trim else 0
        hi = int(hits[-1]) + 1 if "b" in trim else nz.shape[ax]
        idx[ax] = slice(lo, hi)
    return a[tuple(idx)]


def _block_depth(x, path=()):
    if isinstance(x, tuple):
        raise ValueError(f"jax.numpy.block does not allow tuples, got {x!r}")
    if not isinstance(x, list):
        return len(path), [x]
    if not x:
        raise ValueError("jax.numpy.block does not allow empty list arguments")
    depths, leaves = zip(*[_block_depth(e, path + (i,)) for i, e in enumerate(x)])
    if len(set(depths)) != 1:
        raise ValueError("Mismatched list depths in jax.numpy.block")
    return depths[0], [leaf for ls in leaves for leaf in ls]


def block(arrays):
    """One array assembled from nested lists of blocks: the innermost lists join along the
    last axis, the next ones along the second to last, and so on."""
    depth, leaves = _block_depth(arrays)
    check_arraylike("block", *leaves)
    ndim = max([depth] + [len(shape_of(as_operand(x))) for x in leaves])
    dt, weak = dtypes.lattice_result(*leaves)

    def build(x, level):
        if not isinstance(x, list):
            y = creation.asarray(convert(as_operand(x), dt, weak))
            return creation.array(y, copy=False, ndmin=ndim) if get_aval(y).ndim < ndim else y
        parts = [build(e, level + 1) for e in x]
        return shape_ops.concatenate(parts, axis=-(depth - level))
    return build(arrays, 0)


def row_stack(tup, dtype=None):
    """NumPy's older name for ``vstack``."""
    return shape_ops.vstack(tup, dtype=dtype)


def choose(a, choices, out=None, mode: str = "raise"):
    """Entries picked from ``choices`` by the index array ``a`` (all broadcast together).
    ``mode``: 'raise' (concrete ``a`` only), 'wrap' or 'clip'."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.choose is not supported.")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip'")
    a = _arr("choose", a)
    if isinstance(choices, (list, tuple)):
        check_arraylike("choose", *choices)
        choices = list(choices)
    else:
        choices = shape_ops.unstack(_arr("choose", choices))
    if not dtypes.is_integer(get_aval(a).dtype):
        raise TypeError(f"choose: a must hold integers, got dtype {get_aval(a).dtype}.")
    k = len(choices)
    if k == 0:
        raise ValueError("choose: choices must not be empty.")
    if mode == "raise":
        host = _host(a, "The error occurred because jnp.choose was jit-compiled with "
                        "mode='raise'. Use mode='wrap' or mode='clip' instead.")
        if np.any((host < 0) | (host >= k)):
            raise ValueError("invalid entry in choice array")
    elif mode == "wrap":
        a = ufuncs.remainder(a, k)
    else:
        a = ufuncs.clip(a, 0, k - 1)
    choices = promote_dtypes(*choices) if k > 1 else [as_operand(choices[0])]
    a, *choices = shape_ops.broadcast_arrays(a, *choices)
    out = choices[0]
    for i in range(1, k):
        out = ufuncs.where(ufuncs.equal(a, i), choices[i], out)
    return out


def put(a, ind, v, mode=None, *, inplace: bool = True):
    """A copy of ``a`` whose flat entries ``ind`` are set to ``v`` (repeated as needed).
    ``mode``: None (out-of-range indices are dropped), 'wrap' or 'clip'. Pass
    ``inplace=False``."""
    if inplace:
        raise _inplace_error("put")
    if mode == "raise":
        raise NotImplementedError("The 'raise' mode to jnp.put is not supported.")
    if mode not in (None, "wrap", "clip", "fill", "drop"):
        raise ValueError(f"put: invalid mode={mode!r}; expected None, 'wrap' or 'clip'.")
    check_arraylike("put", a, ind, v)
    a = creation.asarray(a)
    aval = get_aval(a)
    flat = shape_ops.ravel(a)
    n = get_aval(flat).shape[0]
    idx = shape_ops.ravel(creation.asarray(ind))
    if not dtypes.is_integer(get_aval(idx).dtype):
        raise TypeError(f"put: ind must hold integers, got dtype {get_aval(idx).dtype}.")
    m = get_aval(idx).shape[0]
    vals = shape_ops.ravel(creation.asarray(v))
    nv = get_aval(vals).shape[0]
    if m == 0 or n == 0:
        return a
    if nv == 0:
        raise ValueError("put: v must not be empty when ind is not.")
    if nv != m:
        vals = sorting.take_rows(vals, lax.rem(_iota(m), np.int32(nv)))
    if mode == "wrap":
        idx = ufuncs.remainder(idx, n)
    elif mode == "clip":
        idx = ufuncs.clip(idx, 0, n - 1)
    out = flat.at[idx].set(vals, mode=None if mode in ("wrap", "clip") else "drop")
    return shape_ops.reshape(out, aval.shape)


def diagflat(v, k: int = 0):
    """A 2-D array with the flattened ``v`` on its ``k``-th diagonal."""
    v = _arr("diagflat", v)
    return products.diag(shape_ops.ravel(v), operator.index(k))


def vander(x, N=None, increasing: bool = False):
    """The Vandermonde matrix of the 1-D ``x``: columns are powers of ``x`` (decreasing
    unless ``increasing``), ``N`` of them (``len(x)`` by default)."""
    x = _arr("vander", x)
    aval = get_aval(x)
    if aval.ndim != 1:
        raise ValueError("x must be a one-dimensional array")
    if dtypes.is_bool(aval.dtype):
        raise TypeError("vander: x of dtype bool is not supported; use an integer dtype.")
    n = aval.shape[0] if N is None else operator.index(N)
    if n < 0:
        raise ValueError("N must be nonnegative")
    cols, col = [], creation.ones_like(x)
    for i in range(n):
        cols.append(col)
        if i + 1 < n:
            col = ufuncs.multiply(col, x)
    if not cols:
        return creation.zeros((aval.shape[0], 0), aval.dtype)
    out = shape_ops.stack(cols, axis=1)
    return out if increasing else shape_ops.flip(out, 1)


def _bitorder(bitorder):
    if bitorder not in ("big", "little"):
        raise ValueError("'order' must be either 'little' or 'big'")


def packbits(a, axis=None, bitorder: str = "big"):
    """The nonzero-ness of ``a``'s entries packed eight to a uint8 along ``axis``
    (flattened when None), zero-padded at the end."""
    a = _arr("packbits", a)
    dt = get_aval(a).dtype
    if not (dtypes.is_integer(dt) or dtypes.is_bool(dt)):
        raise TypeError("Expected an input array of integer or boolean data type")
    _bitorder(bitorder)
    if axis is None:
        a, axis = shape_ops.ravel(a), 0
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    bits = convert(shape_ops.moveaxis(sorting.nonzero_mask(a), axis, -1), np.uint8)
    n = get_aval(bits).shape[-1]
    pad = -n % 8
    if pad:
        bits = padding.pad(bits, [(0, 0)] * (get_aval(bits).ndim - 1) + [(0, pad)])
    shape = get_aval(bits).shape
    bits = lax.reshape(bits, shape[:-1] + ((n + pad) // 8, 8))
    weights = np.array([1 << (7 - i if bitorder == "big" else i) for i in range(8)], np.uint8)
    out = lax.reduce_sum(lax.mul(bits, lax.broadcast_in_dim(weights, get_aval(bits).shape,
                                                             (len(shape),))), (len(shape),))
    return shape_ops.moveaxis(out, -1, axis)


def unpackbits(a, axis=None, count=None, bitorder: str = "big"):
    """The bits of the uint8 array ``a`` as a uint8 array of 0s and 1s, along ``axis``
    (flattened when None); ``count`` keeps (or zero-pads to) that many bits, negative
    counts drop bits from the end."""
    a = _arr("unpackbits", a)
    if get_aval(a).dtype != np.uint8:
        raise TypeError("Expected an input array of unsigned byte data type")
    _bitorder(bitorder)
    if axis is None:
        a, axis = shape_ops.ravel(a), 0
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    x = shape_ops.moveaxis(a, axis, -1)
    shape = get_aval(x).shape
    shifts = np.array([7 - i if bitorder == "big" else i for i in range(8)], np.uint8)
    full = shape + (8,)
    bits = lax.bitwise_and(
        lax.shift_right_logical(lax.broadcast_in_dim(x, full, tuple(range(len(shape)))),
                                lax.broadcast_in_dim(shifts, full, (len(shape),))),
        lax.broadcast_in_dim(np.uint8(1), full, ()))
    bits = lax.reshape(bits, shape[:-1] + (shape[-1] * 8,))
    if count is not None:
        total = shape[-1] * 8
        count = operator.index(count)
        keep = count if count >= 0 else max(total + count, 0)
        if keep <= total:
            bits = lax.slice_in_dim(bits, 0, keep, axis=len(shape) - 1)
        else:
            bits = padding.pad(bits, [(0, 0)] * (len(shape) - 1) + [(0, keep - total)])
    return shape_ops.moveaxis(bits, -1, axis)


def apply_along_axis(func1d, axis: int, arr, *args, **kwargs):
    """``func1d`` applied to each 1-D slice of ``arr`` along ``axis`` (vectorised with
    vmap); the dimensions of its result replace ``axis``."""
    from plax.api.vmap import vmap
    a = _arr("apply_along_axis", arr)
    ndim = get_aval(a).ndim
    axis = canonicalize_axis(axis, ndim)
    fn = lambda v: func1d(v, *args, **kwargs)  # noqa: E731
    for _ in range(ndim - 1):
        fn = vmap(fn)
    out = creation.asarray(fn(shape_ops.moveaxis(a, axis, -1)))
    extra = get_aval(out).ndim - (ndim - 1)
    if extra == 0:
        return out
    src = list(range(ndim - 1, ndim - 1 + extra))
    return shape_ops.moveaxis(out, src, list(range(axis, axis + extra)))


def apply_over_axes(func, a, axes):
    """``func(a, axis)`` applied for each of ``axes`` in turn, each result keeping (or
    regaining, via expand_dims) the rank of ``a``."""
    a = _arr("apply_over_axes", a)
    for ax in ([axes] if isinstance(axes, (int, np.integer)) else axes):
        nd = get_aval(a).ndim
        res = creation.asarray(func(a, ax))
        if get_aval(res).ndim == nd - 1:
            res = shape_ops.expand_dims(res, canonicalize_axis(ax, nd))
        elif get_aval(res).ndim != nd:
            raise ValueError("function is not returning an array of the correct shape")
        a = res
    return a


def extract(condition, arr, *, size=None, fill_value=0):
    """The entries of the flattened ``arr`` where the flattened ``condition`` is nonzero;
    ``size`` pads (with ``fill_value``) or truncates to a static length."""
    check_arraylike("extract", condition, arr)
    cond = shape_ops.ravel(creation.asarray(condition))
    return sorting.compress(cond, shape_ops.ravel(creation.asarray(arr)), size=size,
                            fill_value=fill_value)


def place(arr, mask, vals, *, inplace: bool = True):
    """A copy of ``arr`` whose entries where ``mask`` is true take the values of ``vals`` in
    order (repeated as needed). Pass ``inplace=False``."""
    if inplace:
        raise _inplace_error("place")
    check_arraylike("place", arr, mask, vals)
    a = creation.asarray(arr)
    aval = get_aval(a)
    m = shape_ops.ravel(sorting.nonzero_mask(creation.asarray(mask)))
    if get_aval(m).shape[0] != aval.size:
        raise ValueError(f"place: mask must have the size of arr ({aval.size}), got "
                         f"{get_aval(m).shape[0]}.")
    v = shape_ops.ravel(creation.asarray(vals))
    nv = get_aval(v).shape[0]
    if nv == 0:
        return a  # NumPy requires values only where the mask is set
    rank = lax.sub(lax.cumsum(convert(m, np.int32), axis=0), np.int32(1))
    rank = lax.rem(lax.max(rank, np.int32(0)), np.int32(nv))
    src = convert(sorting.take_rows(v, rank), aval.dtype, aval.weak_type)
    out = lax.select(m, src, shape_ops.ravel(a))
    return shape_ops.reshape(out, aval.shape)
