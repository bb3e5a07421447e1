"""Sorting, searching and set functions as in NumPy: sort, argsort, lexsort, partition,
searchsorted, unique, nonzero, argwhere.

Every function here is written on plax.lax. Ordering follows ``lax.sort``: floats sort in
a total order where -0.0 equals 0.0 and NaNs come last (all NaNs equal); complex numbers
sort lexicographically by (real, imag); booleans sort False first. Functions whose output
shape depends on the data (unique, nonzero, argwhere, flatnonzero) need concrete input,
or a static ``size=`` under transformations, as in JAX.
"""
from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from plax import lax
from plax.core import dtypes
from plax.core.errors import ConcretizationTypeError
from plax.core.trace import Tracer, get_aval
from plax.first_order.indexing import GatherDimensionNumbers
from plax.numpy.util import (as_operand, canonicalize_axis, check_arraylike, convert,
                             promote_dtypes)

__all__ = ["sort", "argsort", "lexsort", "partition", "argpartition", "sort_complex",
           "searchsorted", "unique", "unique_values", "unique_counts", "unique_inverse",
           "unique_all", "nonzero", "flatnonzero", "argwhere", "compress"]


# --- helpers ------------------------------------------------------------------------------
def _arr(name: str, a):
    check_arraylike(name, a)
    return as_operand(a)


def _shape(x) -> tuple:
    return get_aval(x).shape


def _int_dtype(dtype=None) -> np.dtype:
    """The dtype of returned indices: ``dtype`` if given, else the default integer type."""
    if dtype is None:
        return dtypes.default_int_dtype()
    dt = dtypes.canonicalize_user_dtype(dtype)
    if not dtypes.is_integer(dt):
        raise TypeError(f"index dtype must be an integer type, got {dt}.")
    return dt


def _flat(x):
    return lax.reshape(x, (get_aval(x).size,))


def _full(shape, value, dt):
    return lax.broadcast_in_dim(np.asarray(value, dt), tuple(shape), ())


def _iota(dt, n: int):
    return lax.iota(np.dtype(dt), n)


def take_rows(x, idx):
    """``x[idx]`` along axis 0 for a 1-D int array ``idx`` (indices clipped into range)."""
    rest = _shape(x)[1:]
    dn = GatherDimensionNumbers(offset_dims=tuple(range(1, 1 + len(rest))),
                                collapsed_slice_dims=(0,), start_index_map=(0,))
    return lax.gather(x, lax.expand_dims(idx, (get_aval(idx).ndim,)), dn, (1,) + rest,
                      mode="clip")


def _check_kind_order(name: str, kind, order) -> None:
    if kind is not None:
        raise TypeError(f"'kind' argument to {name} is not supported. Use stable=True or "
                        "stable=False to specify sort stability.")
    if order is not None:
        raise TypeError(f"'order' argument to {name} is not supported: plax arrays have no "
                        "structured (record) dtypes.")


def _with_axis(name: str, a, axis):
    """``a`` (flattened when ``axis`` is None) and its non-negative sort axis."""
    a = _arr(name, a)
    if axis is None:
        return _flat(a), 0
    return a, canonicalize_axis(operator.index(axis), get_aval(a).ndim)


def concrete_int(x, context: str) -> int:
    """The value of the scalar ``x``; ConcretizationTypeError while it is only traced."""
    if isinstance(x, Tracer):
        val = x.to_concrete_value()
        if val is None:
            raise ConcretizationTypeError(x, context)
        return int(np.asarray(val))
    return int(np.asarray(x))


def static_size_context(name: str) -> str:
    """The ConcretizationTypeError context for a ``size`` of ``jnp.<name>`` that is traced."""
    return (f"The size argument of jnp.{name} must be statically specified to use jnp.{name} "
            f"within JAX transformations: pass size= (and fill_value=) to plax.numpy.{name} "
            "so that the output shape does not depend on the data.")


def static_size(size, name: str) -> int:
    """``size`` as a non-negative Python int; TypeError or ValueError naming ``name`` otherwise."""
    try:
        size = operator.index(size)
    except TypeError:
        raise TypeError(f"{name}: size must be a non-negative Python integer, got {size!r}.") \
            from None
    if size < 0:
        raise ValueError(f"{name}: size must be non-negative, got {size}.")
    return size


# --- comparisons in sort's total order ------------------------------------------------------
def _parts(x):
    dt = get_aval(x).dtype
    if dtypes.is_complex(dt):
        return [lax.real(x), lax.imag(x)]
    if dtypes.is_bool(dt):
        return [convert(x, np.int32)]
    return [x]


def _isnan(x):
    return lax.ne(x, x)


def _lt_part(x, y):
    if dtypes.is_inexact(get_aval(x).dtype):  # NaN sorts after everything but NaN
        return lax.bitwise_or(lax.lt(x, y), lax.bitwise_and(_isnan(y), lax.bitwise_not(_isnan(x))))
    return lax.lt(x, y)


def _eq_part(x, y, equal_nan=True):
    eq = lax.eq(x, y)  # -0.0 == 0.0
    if equal_nan and dtypes.is_inexact(get_aval(x).dtype):
        eq = lax.bitwise_or(eq, lax.bitwise_and(_isnan(x), _isnan(y)))
    return eq


def _less(x, y):
    """Lexicographic ``x < y`` in the order ``lax.sort`` uses."""
    less = None
    for px, py in reversed(list(zip(_parts(x), _parts(y)))):
        lt = _lt_part(px, py)
        less = lt if less is None else lax.bitwise_or(
            lt, lax.bitwise_and(_eq_part(px, py), less))
    return less


def equal_in_sort_order(x, y, equal_nan: bool):
    """Elementwise equality in sort's order (NaNs equal each other only if ``equal_nan``)."""
    out = None
    for px, py in zip(_parts(x), _parts(y)):
        eq = _eq_part(px, py, equal_nan)
        out = eq if out is None else lax.bitwise_and(out, eq)
    return out


# --- sort, argsort, lexsort ----------------------------------------------------------------
def sort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """Sorted copy of ``a`` along ``axis`` (flattened when None); NaNs sort last."""
    _check_kind_order("sort", kind, order)
    a, axis = _with_axis("sort", a, axis)
    out = lax.sort(a, dimension=axis, is_stable=bool(stable))
    return lax.rev(out, (axis,)) if descending else out


def argsort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False, dtype=None):
    """Indices that sort ``a`` along ``axis``; ties keep their input order when ``stable``."""
    _check_kind_order("argsort", kind, order)
    a, axis = _with_axis("argsort", a, axis)
    shape, dt = _shape(a), _int_dtype(dtype)
    iota = lax.broadcasted_iota(dt, shape, axis)
    if not descending:
        return lax.sort_key_val(a, iota, axis, is_stable=bool(stable))[1]
    if not stable:
        return lax.rev(lax.sort_key_val(a, iota, axis, is_stable=False)[1], (axis,))
    # A stable descending order: sort the reversed array stably, then undo the reversal.
    perm = lax.sort_key_val(lax.rev(a, (axis,)), iota, axis)[1]
    last = _full(shape, shape[axis] - 1, dt)
    return lax.sub(last, lax.rev(perm, (axis,)))


def lexsort(keys, axis=-1):
    """Indices that sort by several keys: the last key is the primary one."""
    if isinstance(keys, (list, tuple)):
        keys = [_arr("lexsort", k) for k in keys]
    else:
        arr = _arr("lexsort", keys)
        keys = [lax.index_in_dim(arr, i, 0, keepdims=False) for i in range(_shape(arr)[0])] \
            if get_aval(arr).ndim else [arr]
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    shape = _shape(keys[0])
    if any(_shape(k) != shape for k in keys):
        raise ValueError(f"all keys need to be the same shape, got "
                         f"{[_shape(k) for k in keys]}.")
    axis = canonicalize_axis(operator.index(axis), len(shape))
    iota = lax.broadcasted_iota(_int_dtype(), shape, axis)
    return lax.sort([*keys[::-1], iota], dimension=axis, num_keys=len(keys))[-1]


def sort_complex(a):
    """``a`` sorted along its last axis, as complex numbers (real part first)."""
    a = _arr("sort_complex", a)
    dt = dtypes.promote_types(get_aval(a).dtype, np.complex64)
    return lax.sort(convert(a, dt), dimension=-1)


# --- partition ------------------------------------------------------------------------------
def _split_sorted(s, kth, axis, name, tail):
    """The first ``kth + 1`` entries of ``s`` along ``axis``, then ``tail`` of the rest."""
    n = _shape(s)[axis]
    kth = operator.index(kth)
    if not -n <= kth < n:
        raise ValueError(f"{name}: kth={kth} is out of bounds for an axis of size {n}.")
    kth %= n
    lo = lax.slice_in_dim(s, 0, kth + 1, axis=axis)
    hi = tail(lax.slice_in_dim(s, kth + 1, n, axis=axis))
    return lax.concatenate([lo, hi], axis)


def partition(a, kth, axis=-1):
    """``a`` rearranged so that entry ``kth`` is where a sort puts it, smaller ones before it
    and larger ones after it (as in JAX: the smaller ascending, the larger descending)."""
    a, axis = _with_axis("partition", a, axis)
    return _split_sorted(lax.sort(a, dimension=axis), kth, axis, "partition",
                         lambda hi: lax.rev(hi, (axis,)))


def argpartition(a, kth, axis=-1):
    """Indices that partition ``a`` around its ``kth`` entry (int32, as JAX; the indices
    after ``kth`` come in increasing order)."""
    a, axis = _with_axis("argpartition", a, axis)
    iota = lax.broadcasted_iota(np.int32, _shape(a), axis)
    return _split_sorted(lax.sort_key_val(a, iota, axis)[1], kth, axis, "argpartition",
                         lambda hi: lax.sort(hi, dimension=axis))


# --- searchsorted ---------------------------------------------------------------------------
_METHODS = ("compare_all", "scan", "scan_unrolled", "sort")


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Indices where ``v`` would be inserted into the sorted 1-D ``a`` to keep it sorted."""
    if side not in ("left", "right"):
        raise ValueError(f"invalid argument side={side!r}, expected 'left' or 'right'")
    if method not in _METHODS:
        raise ValueError(f"invalid argument method={method!r}, expected one of {list(_METHODS)}")
    check_arraylike("searchsorted", a, v)
    if get_aval(as_operand(a)).ndim != 1:
        raise ValueError(f"a should be 1-dimensional, got shape {_shape(as_operand(a))}.")
    a, v = promote_dtypes(a, v)
    if sorter is not None:
        check_arraylike("searchsorted", sorter)
        a = take_rows(a, convert(as_operand(sorter), np.int32))
    n, shape = _shape(a)[0], _shape(v)
    if n == 0 or 0 in shape:
        return _full(shape, 0, np.int32)
    if method == "compare_all":
        return _search_compare_all(a, v, side)
    if method == "sort":
        return _search_sort(a, v, side)
    return _search_binary(a, v, side)


def _before(av, v, side):
    """Whether ``av`` belongs before ``v``: ``av < v`` (left) or ``av <= v`` (right)."""
    return _less(av, v) if side == "left" else lax.bitwise_not(_less(v, av))


def _search_compare_all(a, v, side):
    shape = _shape(v)
    wide = shape + _shape(a)
    av = lax.broadcast_in_dim(a, wide, (len(shape),))
    vv = lax.broadcast_in_dim(v, wide, tuple(range(len(shape))))
    return lax.reduce_sum(convert(_before(av, vv, side), np.int32), (len(shape),))


def _search_binary(a, v, side):
    """Binary search, unrolled: take each power-of-two step while the predicate holds."""
    n, shape = _shape(a)[0], _shape(v)
    found = _full(shape, 0, np.int32)
    step = 1 << (n.bit_length() - 1)
    while step:
        cand = lax.add(found, _full(shape, step, np.int32))
        probe = take_rows(a, _flat(lax.sub(lax.min(cand, _full(shape, n, np.int32)),
                                           _full(shape, 1, np.int32))))
        take = lax.bitwise_and(lax.le(cand, _full(shape, n, np.int32)),
                               _before(lax.reshape(probe, shape), v, side))
        found = lax.select(take, cand, found)
        step >>= 1
    return found


def _search_sort(a, v, side):
    """Sort ``a`` and ``v`` together (``v`` before equal entries of ``a`` for side='left'):
    the number of ``a`` entries before each ``v`` entry is its insertion index."""
    n, shape = _shape(a)[0], _shape(v)
    m = get_aval(v).size
    keys = lax.concatenate([a, _flat(v)], 0)
    a_tag, v_tag = (1, 0) if side == "left" else (0, 1)
    tags = lax.concatenate([_full((n,), a_tag, np.int32), _full((m,), v_tag, np.int32)], 0)
    perm = lax.sort([keys, tags, _iota(np.int32, n + m)], num_keys=2)[2]
    a_seen = lax.cumsum(convert(lax.lt(perm, _full((n + m,), n, np.int32)), np.int32), axis=0)
    back = lax.sort([perm, a_seen], num_keys=1)[1]  # undo the permutation
    return lax.reshape(lax.slice_in_dim(back, n, n + m), shape)


# --- compaction: nonzero, argwhere ---------------------------------------------------------------
def first_true_positions(mask, size: int):
    """Positions of the first ``size`` true entries of the 1-D ``mask`` in order, padded
    with ``len(mask)`` (int32)."""
    n = _shape(mask)[0]
    key, pos = lax.sort([lax.bitwise_not(mask), _iota(np.int32, n)], num_keys=1)
    pos = lax.select(key, _full((n,), n, np.int32), pos)
    if size <= n:
        return lax.slice_in_dim(pos, 0, size)
    return lax.concatenate([pos, _full((size - n,), n, np.int32)], 0)


def nonzero_mask(a):
    """Where ``a`` is nonzero, as a bool array (``a`` itself when it is bool)."""
    dt = get_aval(a).dtype
    if dtypes.is_bool(dt):
        return a
    return lax.ne(a, _full(_shape(a), 0, dt))


def _fill_values(fill_value, ndim: int, name: str):
    if fill_value is None:
        return [0] * ndim
    if isinstance(fill_value, (tuple, list)):
        if len(fill_value) != ndim:
            raise ValueError(f"{name}: fill_value must be a scalar or a tuple of length {ndim}; "
                             f"got {fill_value!r}.")
        return list(fill_value)
    check_arraylike(name, fill_value)
    if get_aval(as_operand(fill_value)).ndim:
        raise ValueError(f"{name}: fill_value must be a scalar or a tuple of length {ndim}; "
                         f"got an array of shape {_shape(as_operand(fill_value))}.")
    return [fill_value] * ndim


def nonzero(a, *, size=None, fill_value=None):
    """The indices of the nonzero entries of ``a``, one array per dimension."""
    a = _arr("nonzero", a)
    shape = _shape(a)
    if not shape:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use "
                         "jnp.atleast_1d(scalar).nonzero() instead.")
    mask = _flat(nonzero_mask(a))
    if size is None:
        size = concrete_int(lax.reduce_sum(convert(mask, np.int32), (0,)),
                            static_size_context("nonzero"))
    size = static_size(size, "nonzero")
    fills = _fill_values(fill_value, len(shape), "nonzero")
    dt = _int_dtype()
    n = int(np.prod(shape))
    pos = first_true_positions(mask, size)
    valid = lax.lt(pos, _full((size,), n, np.int32))
    pos = convert(pos, dt)
    out = []
    for d, fill in enumerate(fills):
        stride = int(np.prod(shape[d + 1:]))  # coordinate d of a flat index: pos // stride % size
        coord = lax.rem(lax.div(pos, _full((size,), max(stride, 1), dt)),
                        _full((size,), max(shape[d], 1), dt))
        fill = lax.broadcast_in_dim(convert(as_operand(fill), dt), (size,), ())
        out.append(lax.select(valid, coord, fill))
    return tuple(out)


def flatnonzero(a, *, size=None, fill_value=None):
    """Indices of the nonzero entries of ``a`` flattened."""
    a = _arr("flatnonzero", a)
    return nonzero(_flat(a), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """Indices of the nonzero entries of ``a``, one row per entry: shape (N, a.ndim)."""
    a = _arr("argwhere", a)
    ndim = get_aval(a).ndim
    coords = nonzero(a if ndim else lax.reshape(a, (1,)), size=size, fill_value=fill_value)
    out = lax.concatenate([lax.expand_dims(c, (1,)) for c in coords], 1)
    return out if ndim else lax.slice_in_dim(out, 0, 0, axis=1)


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of ``a`` along ``axis`` (of the flattened ``a`` when None) where the 1-d
    ``condition`` is true; ``size`` pads or truncates the result to a static length."""
    from plax.numpy.indexing import take
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.compress is not supported.")
    cond = _arr("compress", condition)
    if get_aval(cond).ndim != 1:
        raise ValueError(f"condition must be a 1D array, got shape {get_aval(cond).shape}.")
    arr = _arr("compress", a)
    if axis is None:
        arr, axis = _flat(arr), 0
    axis = canonicalize_axis(axis, get_aval(arr).ndim)
    n, m = get_aval(arr).shape[axis], get_aval(cond).shape[0]
    if m > n:
        extra = cond[n:]
        if bool(concrete_int(lax.reduce_or(nonzero_mask(extra), (0,)), "compress")):
            raise ValueError("condition contains entries that are out of bounds")
        cond = cond[:n]
    elif m < n:  # as NumPy: a shorter condition selects among the first len(condition) slices
        arr = lax.slice_in_dim(arr, 0, m, axis=axis)
    # Padding positions index one past the end, which take's fill mode fills.
    (idx,) = nonzero(cond, size=size, fill_value=get_aval(arr).shape[axis])
    return take(arr, idx, axis=axis, mode="fill", fill_value=fill_value)


# --- unique -----------------------------------------------------------------------------------
def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None, sorted=True):
    """The sorted unique entries of ``ar`` (or unique slices along ``axis``), optionally with
    the index of each one's first occurrence, the inverse mapping and the counts."""
    ar = _arr("unique", ar)
    if size is None and isinstance(ar, Tracer) and ar.to_concrete_value() is None:
        raise ConcretizationTypeError(
            ar, "The error arose for the first argument of jnp.unique(). To make jnp.unique() "
                "compatible with jit and other transformations, pass a static size= (and "
                "fill_value=) to plax.numpy.unique; it determines the output size.")
    shape = _shape(ar)
    if axis is None:
        x, axis = _flat(ar), None
        keys = [x]
    else:
        axis = canonicalize_axis(operator.index(axis), len(shape))
        x = lax.transpose(ar, (axis,) + tuple(i for i in range(len(shape)) if i != axis))
        rows = lax.reshape(x, (shape[axis], int(np.prod(shape[:axis] + shape[axis + 1:]))))
        keys = [lax.index_in_dim(rows, j, 1, keepdims=False) for j in range(_shape(rows)[1])]
    values, index, inverse, counts = _unique(x, keys, bool(equal_nan), size, fill_value)
    if axis is None:
        inverse = lax.reshape(inverse, shape)
    else:
        perm = tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1, len(shape)))
        values = lax.transpose(values, perm)
    extra = [r for r, want in ((index, return_index), (inverse, return_inverse),
                               (counts, return_counts)) if want]
    return (values, *extra) if extra else values


def _unique_keys(k):
    """(sort key, is a NaN flag) pairs standing for ``k`` in unique. As in JAX, a complex
    number with a NaN part counts as NaN: such entries sort last and are all alike (a flag,
    then the number with those entries zeroed)."""
    if not dtypes.is_complex(get_aval(k).dtype):
        return [(k, False)]
    flag = lax.bitwise_or(_isnan(lax.real(k)), _isnan(lax.imag(k)))
    return [(flag, True), (lax.select(flag, _full(_shape(k), 0, get_aval(k).dtype), k), False)]


def _fill_rows(fill_value, dtype, shape):
    """``fill_value`` (a scalar, or one slice: the shape of a row) broadcast to ``shape``."""
    fill = convert(as_operand(fill_value), dtype)
    nd, fd = len(shape), get_aval(fill).ndim
    return lax.broadcast_in_dim(fill, shape, tuple(range(nd - fd, nd)))


def _unique(x, keys, equal_nan, size, fill_value):
    """Unique rows of ``x`` (rows along axis 0, compared by the 1-D ``keys``): values, first
    indices, inverse and counts, padded to ``size`` when it is given."""
    n = _shape(x)[0]
    dt = _int_dtype()
    if n == 0:
        size = 0 if size is None else static_size(size, "unique")
        if size and fill_value is None:
            raise ValueError("jnp.unique: for zero-sized input with nonzero size argument, "
                             "fill_value must be specified")
        values = _full((size,) + _shape(x)[1:], 0, get_aval(x).dtype)
        if size:
            values = _fill_rows(fill_value, get_aval(x).dtype, _shape(values))
        zeros = _full((size,), 0, dt)
        return values, zeros, _full((0,), 0, dt), zeros
    keys, is_flag = zip(*[p for k in keys for p in _unique_keys(k)]) if keys else ((), ())
    *skeys, perm = lax.sort([*keys, _iota(np.int32, n)], num_keys=len(keys)) if keys else \
        [_iota(np.int32, n)]
    starts = _full((n - 1,), False, np.bool_)
    for k, flag in zip(skeys, is_flag):
        # NaNs compare equal here; with equal_nan=False every row holding one starts a group
        k1 = lax.slice_in_dim(k, 1, n)
        new = lax.bitwise_not(equal_in_sort_order(k1, lax.slice_in_dim(k, 0, n - 1), True))
        if not equal_nan and (flag or dtypes.is_float(get_aval(k).dtype)):
            new = lax.bitwise_or(new, k1 if flag else _isnan(k1))
        starts = lax.bitwise_or(starts, new)
    starts = lax.concatenate([_full((1,), True, np.bool_), starts], 0)
    if size is None:
        size = concrete_int(lax.reduce_sum(convert(starts, np.int32), (0,)),
                            static_size_context("unique"))
    size = static_size(size, "unique")
    pos = first_true_positions(starts, size + 1)  # one more: where the last kept group ends
    first = lax.slice_in_dim(pos, 0, size)
    valid = lax.lt(first, _full((size,), n, np.int32))
    # Padding entries repeat the first unique entry (the smallest), as JAX does.
    first_c = lax.select(valid, first, _full((size,), 0, np.int32))
    rows = take_rows(perm, first_c)
    values = take_rows(x, rows)
    if fill_value is not None:
        vshape = _shape(values)
        fill = _fill_rows(fill_value, get_aval(x).dtype, vshape)
        values = lax.select(lax.broadcast_in_dim(valid, vshape, (0,)), values, fill)
    counts = lax.sub(lax.slice_in_dim(pos, 1, size + 1), first)
    group = lax.sub(lax.cumsum(convert(starts, dt), axis=0), _full((n,), 1, dt))
    inverse = lax.sort([perm, group], num_keys=1)[1]
    return values, convert(rows, dt), inverse, convert(counts, dt)


class _UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class _UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class _UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def unique_values(x, /, *, size=None, fill_value=None):
    """The unique entries of ``x`` (NaNs are all distinct), sorted."""
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x, /, *, size=None, fill_value=None):
    """The unique entries of ``x`` and how often each occurs."""
    return _UniqueCountsResult(*unique(x, return_counts=True, equal_nan=False, size=size,
                                       fill_value=fill_value))


def unique_inverse(x, /, *, size=None, fill_value=None):
    """The unique entries of ``x`` and, for each entry of ``x``, the index of its value."""
    return _UniqueInverseResult(*unique(x, return_inverse=True, equal_nan=False, size=size,
                                        fill_value=fill_value))


def unique_all(x, /, *, size=None, fill_value=None):
    """The unique entries of ``x`` with first indices, inverse indices and counts."""
    return _UniqueAllResult(*unique(x, return_index=True, return_inverse=True,
                                    return_counts=True, equal_nan=False, size=size,
                                    fill_value=fill_value))
