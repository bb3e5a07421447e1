"""Summary statistics of samples: mode, rankdata and sem (each one compiled program)."""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np

from plax import lax
from plax.api.jit import jit
from plax import numpy as jnp
from plax.core import dtypes
from plax.numpy.util import canonicalize_axis, check_arraylike, promote_dtypes_inexact

__all__ = ["ModeResult", "mode", "rankdata", "sem"]

_NAN_POLICIES = ("propagate", "omit", "raise")


def _check_nan_policy(fn: str, nan_policy: str) -> None:
    if nan_policy not in _NAN_POLICIES:
        raise ValueError(f"Illegal nan_policy value {nan_policy!r}; expected one of "
                         "{'propagate', 'omit', 'raise'}")
    if nan_policy == "omit":
        raise NotImplementedError(f"Logic for `nan_policy` of omit is not implemented in "
                                  f"{fn}: drop the NaNs before calling it.")
    if nan_policy == "raise":
        raise NotImplementedError(f"In order to best JIT compile `{fn}`, we cannot know "
                                  "whether `x` contains nans. Check for NaNs outside of "
                                  f"`{fn}` and pass nan_policy='propagate'.")


def _same_as_previous(s):
    """Along the last axis of sorted ``s``: True where an entry equals the one before it
    (NaNs counting as equal to each other); False at the first entry."""
    prev, cur = s[..., :-1], s[..., 1:]
    eq = jnp.equal(prev, cur)
    if dtypes.is_inexact(s.dtype):
        eq = jnp.logical_or(eq, jnp.logical_and(jnp.isnan(prev), jnp.isnan(cur)))
    return jnp.concatenate([jnp.zeros(s.shape[:-1] + (1,), bool), eq], axis=-1)


def _run_bounds(same):
    """For each position of a sorted last axis, the first and last index of its run of
    equal values."""
    n = same.shape[-1]
    idx = lax.broadcasted_iota(np.int32, same.shape, same.ndim - 1)
    start = lax.cummax(jnp.where(same, 0, idx), axis=same.ndim - 1)
    next_same = jnp.concatenate([same[..., 1:], jnp.zeros(same.shape[:-1] + (1,), bool)], -1)
    end = lax.cummin(jnp.where(next_same, n - 1, idx), axis=same.ndim - 1, reverse=True)
    return start, end


class ModeResult(NamedTuple):
    mode: object
    count: object


def mode(a, axis=0, nan_policy="propagate", keepdims=False):
    """The most frequent value along ``axis`` (the smallest among ties) and its count.

    NaNs count as one value. ``axis=None`` works on the flattened array.
    """
    check_arraylike("mode", a)
    _check_nan_policy("mode", nan_policy)
    x = jnp.asarray(a)
    if axis is None:
        x, axis = jnp.ravel(x), 0
    elif x.ndim == 0:
        x = jnp.reshape(x, (1,))
        axis = canonicalize_axis(axis, 1)
    else:
        axis = canonicalize_axis(axis, x.ndim)
    return ModeResult(*_mode(x, axis, bool(keepdims)))


@partial(jit, static_argnums=(1, 2))
def _mode(x, axis, keepdims):
    moved = jnp.moveaxis(x, axis, -1)
    if moved.shape[-1] == 0:
        float_dt = dtypes.default_float_dtype()
        m = jnp.full(moved.shape[:-1], np.nan, float_dt)
        c = jnp.zeros(moved.shape[:-1], float_dt)
    elif moved.size == 0:  # nothing to reduce: empty results of the usual types
        m = jnp.zeros(moved.shape[:-1], moved.dtype)
        c = jnp.zeros(moved.shape[:-1], dtypes.default_int_dtype())
    else:
        s = jnp.sort(moved, axis=-1)
        start, end = _run_bounds(_same_as_previous(s))
        counts = end - start + 1
        best = jnp.argmax(counts, axis=-1, keepdims=True)
        m = jnp.take_along_axis(s, best, axis=-1)[..., 0]
        c = jnp.take_along_axis(counts, best, axis=-1)[..., 0].astype(dtypes.default_int_dtype())
    if keepdims:
        m, c = jnp.expand_dims(m, axis), jnp.expand_dims(c, axis)
    return m, c


_RANK_METHODS = ("average", "min", "max", "dense", "ordinal")


def rankdata(a, method="average", *, axis=None, nan_policy="propagate"):
    """Ranks (from 1) of the values along ``axis`` (of the flattened array when None), ties
    resolved by ``method``: 'average', 'min', 'max', 'dense' or 'ordinal'. A slice holding
    a NaN ranks as all NaN."""
    check_arraylike("rankdata", a)
    _check_nan_policy("rankdata", nan_policy)
    if method not in _RANK_METHODS:
        raise ValueError(f"unknown method '{method}'")
    x = jnp.asarray(a)
    if axis is None:
        x, axis = jnp.ravel(x), 0
    else:
        axis = canonicalize_axis(axis, x.ndim)
    return _rankdata(x, method, axis)


@partial(jit, static_argnums=(1, 2))
def _rankdata(x, method, axis):
    moved = jnp.moveaxis(x, axis, -1)
    float_dt = dtypes.default_float_dtype()
    if moved.shape[-1] == 0:
        return jnp.moveaxis(jnp.zeros(moved.shape, float_dt), -1, axis)
    order = jnp.argsort(moved, axis=-1, stable=True)
    inverse = jnp.argsort(order, axis=-1, stable=True)
    s = jnp.take_along_axis(moved, order, axis=-1)
    same = _same_as_previous(s)
    if method == "ordinal":
        sorted_rank = lax.broadcasted_iota(np.int32, s.shape, s.ndim - 1) + 1
    elif method == "dense":
        sorted_rank = jnp.cumsum(jnp.logical_not(same), axis=-1)
    else:
        start, end = _run_bounds(same)
        if method == "min":
            sorted_rank = start + 1
        elif method == "max":
            sorted_rank = end + 1
        else:
            sorted_rank = jnp.add(start, end).astype(float_dt) / 2 + 1
    ranks = jnp.take_along_axis(sorted_rank, inverse, axis=-1).astype(float_dt)
    if dtypes.is_inexact(moved.dtype):
        ranks = jnp.where(jnp.any(jnp.isnan(moved), axis=-1, keepdims=True), np.nan, ranks)
    return jnp.moveaxis(ranks, -1, axis)


def sem(a, axis=0, ddof=1, nan_policy="propagate", *, keepdims=False):
    """The standard error of the mean along ``axis``: std(ddof) / sqrt(n).

    With ``nan_policy='omit'`` NaNs are left out (of the deviation and the count).
    """
    check_arraylike("sem", a)
    if nan_policy not in ("propagate", "omit"):
        raise ValueError(f"{nan_policy} is not supported")
    (x,) = promote_dtypes_inexact(jnp.asarray(a))
    if axis is not None:
        axis = canonicalize_axis(axis, jnp.ndim(x))
    return _sem(x, axis, ddof, nan_policy == "omit", bool(keepdims))


@partial(jit, static_argnums=(1, 2, 3, 4))
def _sem(x, axis, ddof, omit, keepdims):
    if omit:
        count = jnp.sum(jnp.logical_not(jnp.isnan(x)), axis=axis, keepdims=keepdims)
        spread = jnp.nanstd(x, axis=axis, ddof=ddof, keepdims=keepdims)
    else:
        count = x.size if axis is None else x.shape[axis]
        spread = jnp.std(x, axis=axis, ddof=ddof, keepdims=keepdims)
    return jnp.divide(spread, jnp.sqrt(count).astype(spread.dtype))
