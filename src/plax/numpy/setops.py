"""Set operations on 1-D arrays: isin, intersect1d, union1d, setdiff1d, setxor1d.

All of them sort and compare with plax.lax, so they trace. The size of a set result
depends on the data: under transformations pass a static ``size=`` (and ``fill_value=``),
as in JAX. Padding follows JAX: union1d, setxor1d and intersect1d pad with their smallest
entry (intersect1d's padded indices are the input lengths), setdiff1d pads with 0.
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax.core import dtypes
from plax.core.trace import get_aval
from plax.numpy import sorting
from plax.numpy.util import as_operand, check_arraylike, convert, promote_dtypes, shape_of

__all__ = ["isin", "intersect1d", "union1d", "setdiff1d", "setxor1d"]

_ISIN_METHODS = ("auto", "compare_all", "binary_search", "sort")


def _full(shape, value, dt):
    return lax.broadcast_in_dim(np.asarray(value, dt), tuple(shape), ())


def _members(e, t, method: str, equal_nan: bool = False):
    """For each entry of the 1-D ``e``, whether it equals some entry of the 1-D ``t``
    (both of one dtype)."""
    n, m = get_aval(e).shape[0], get_aval(t).shape[0]
    if m == 0 or n == 0:
        return _full((n,), False, np.bool_)
    if method == "auto":
        method = "compare_all" if n * m <= 1 << 16 else "sort"
    if method == "compare_all":
        ee = lax.broadcast_in_dim(e, (n, m), (0,))
        tt = lax.broadcast_in_dim(t, (n, m), (1,))
        return lax.reduce_or(sorting.equal_in_sort_order(ee, tt, equal_nan), (1,))
    s = sorting.sort(t)
    pos = sorting.searchsorted(s, e, method="sort" if method == "sort" else "scan")
    pos = lax.min(pos, _full((n,), m - 1, np.int32))
    return sorting.equal_in_sort_order(sorting.take_rows(s, pos), e, equal_nan)


def isin(element, test_elements, assume_unique: bool = False, invert: bool = False, *,
         method="auto"):
    """Boolean array of ``element``'s shape: whether each entry occurs in ``test_elements``
    (``invert`` negates). ``method``: 'auto', 'compare_all', 'binary_search' or 'sort'."""
    check_arraylike("isin", element, test_elements)
    if method not in _ISIN_METHODS:
        raise ValueError(f"isin: method={method!r} is not implemented; options are "
                         "'compare_all', 'binary_search', 'sort', and 'auto'")
    e, t = promote_dtypes(element, test_elements)
    shape = shape_of(e)
    e, t = lax.reshape(e, (int(np.prod(shape)),)), lax.reshape(t, (int(np.prod(shape_of(t))),))
    out = lax.reshape(_members(e, t, method), shape)
    return lax.bitwise_not(out) if invert else out


def _prepare(name, *arrays):
    check_arraylike(name, *arrays)
    arrays = promote_dtypes(*arrays)
    return [lax.reshape(a, (int(np.prod(shape_of(a))),)) for a in arrays]


def _sorted_groups(x):
    """``x`` stably sorted, the permutation, and where each run of equal entries starts
    (NaNs form one run)."""
    n = get_aval(x).shape[0]
    s, perm = lax.sort([x, lax.iota(np.int32, n)], num_keys=1)
    if n == 0:
        return s, perm, _full((0,), False, np.bool_)
    new = lax.bitwise_not(sorting.equal_in_sort_order(lax.slice_in_dim(s, 1, n),
                                                      lax.slice_in_dim(s, 0, n - 1), True))
    return s, perm, lax.concatenate([_full((1,), True, np.bool_), new], 0)


def _select_sorted(name, s, keep, size, fill_value, pad_first: bool):
    """The entries of the sorted ``s`` where ``keep``, padded to ``size``: with
    ``fill_value``, else the first kept entry (``pad_first``) or 0. Also their positions
    in ``s`` (padding positions are ``len(s)``)."""
    n = get_aval(s).shape[0]
    dt = get_aval(s).dtype
    if size is None:
        size = sorting.concrete_int(lax.reduce_sum(convert(keep, np.int32), (0,)),
                                    sorting.static_size_context(name))
    size = sorting.static_size(size, name)
    if n == 0:
        fill = 0 if fill_value is None else fill_value
        return (lax.broadcast_in_dim(convert(as_operand(fill), dt), (size,), ()),
                _full((size,), 0, np.int32))
    pos = sorting.first_true_positions(keep, size)
    valid = lax.lt(pos, _full((size,), n, np.int32))
    values = sorting.take_rows(s, pos)
    if fill_value is not None:
        fill = lax.broadcast_in_dim(convert(as_operand(fill_value), dt), (size,), ())
    elif pad_first and size:
        first = lax.slice_in_dim(values, 0, 1)
        any_kept = lax.broadcast_in_dim(lax.reduce_or(keep, (0,)), (size,), ())
        fill = lax.select(any_kept, lax.broadcast_in_dim(lax.reshape(first, ()), (size,), ()),
                          _full((size,), 0, dt))
    else:
        fill = _full((size,), 0, dt)
    return lax.select(valid, values, fill), pos


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted unique entries found in either input (both flattened)."""
    a1, a2 = _prepare("union1d", ar1, ar2)
    s, _, starts = _sorted_groups(lax.concatenate([a1, a2], 0))
    return _select_sorted("union1d", s, starts, size, fill_value, True)[0]


def setdiff1d(ar1, ar2, assume_unique: bool = False, *, size=None, fill_value=None):
    """The sorted unique entries of ``ar1`` that are not in ``ar2`` (``ar1``'s dtype; the
    entries are compared in the promoted dtype)."""
    check_arraylike("setdiff1d", ar1, ar2)
    a1 = as_operand(ar1)
    a1 = lax.reshape(a1, (int(np.prod(shape_of(a1))),))
    s, _, starts = _sorted_groups(a1)
    s_p, a2 = _prepare("setdiff1d", s, ar2)
    keep = lax.bitwise_and(starts, lax.bitwise_not(_members(s_p, a2, "auto")))
    return _select_sorted("setdiff1d", s, keep, size, fill_value, False)[0]


def setxor1d(ar1, ar2, assume_unique: bool = False, *, size=None, fill_value=None):
    """The sorted unique entries found in exactly one of the inputs. With ``assume_unique``
    the inputs are not deduplicated (as NumPy): the entries occurring exactly once in
    both together."""
    a1, a2 = _prepare("setxor1d", ar1, ar2)
    s, _, starts = _sorted_groups(lax.concatenate([a1, a2], 0))
    n = get_aval(s).shape[0]
    if assume_unique and n:
        ends = lax.concatenate([lax.slice_in_dim(starts, 1, n), _full((1,), True, np.bool_)], 0)
        keep = lax.bitwise_and(starts, ends)
    else:
        in1 = _members(s, a1, "auto", equal_nan=True)
        in2 = _members(s, a2, "auto", equal_nan=True)
        keep = lax.bitwise_and(starts, lax.ne(in1, in2))
    return _select_sorted("setxor1d", s, keep, size, fill_value, True)[0]


def intersect1d(ar1, ar2, assume_unique: bool = False, return_indices: bool = False, *,
                size=None, fill_value=None):
    """The sorted unique entries found in both inputs; with ``return_indices`` also the
    index of each one's first occurrence in the flattened ``ar1`` and ``ar2``."""
    a1, a2 = _prepare("intersect1d", ar1, ar2)
    n1, n2 = get_aval(a1).shape[0], get_aval(a2).shape[0]
    s1, p1, starts = _sorted_groups(a1)
    keep = lax.bitwise_and(starts, _members(s1, a2, "auto"))
    values, pos = _select_sorted("intersect1d", s1, keep, size, fill_value, True)
    if not return_indices:
        return values
    dt = dtypes.default_int_dtype()
    size = get_aval(values).shape[0]
    if n1 == 0 or n2 == 0:
        return values, _full((size,), n1, dt), _full((size,), n2, dt)
    valid = lax.lt(pos, _full((size,), n1, np.int32))
    ind1 = lax.select(valid, sorting.take_rows(p1, pos), _full((size,), n1, np.int32))
    s2, p2 = lax.sort([a2, lax.iota(np.int32, n2)], num_keys=1)
    at2 = lax.min(sorting.searchsorted(s2, values), _full((size,), n2 - 1, np.int32))
    ind2 = lax.select(valid, sorting.take_rows(p2, at2), _full((size,), n2, np.int32))
    return values, convert(ind1, dt), convert(ind2, dt)
