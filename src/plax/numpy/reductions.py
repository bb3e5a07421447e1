"""Reductions as in NumPy: sum, mean, var, max, argmax, cumsum, quantile, the nan* family.

Every function here is written on plax.lax. Dtype rules follow JAX: sums of bool
and narrow integers accumulate in the default integer type, means and variances of
integers are floats, half-precision floats are accumulated in float32 and the
results are never weakly typed.
"""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from plax import lax
from plax.api.jit import eager_compiled
from plax.core import dtypes
from plax.core.avals import shape_entries
from plax.core.symbolic_shapes import DimExpr, dimension_as_value
from plax.core.source_info import user_entry_name
from plax.core.trace import get_aval
from plax.first_order.common import real_dtype
from plax.numpy import util
from plax.numpy.util import (as_operand, broadcast_to_shape, canonicalize_axis, check_arraylike,
                             convert, promote_dtypes_inexact, shape_of)

__all__ = ["sum", "prod", "max", "min", "amax", "amin", "all", "any", "mean", "var", "std",
           "argmax", "argmin", "cumsum", "cumprod", "cumulative_sum", "cumulative_prod",
           "nancumsum", "nancumprod", "ptp", "count_nonzero", "average", "nansum", "nanprod",
           "nanmax", "nanmin", "nanmean", "nanvar", "nanstd", "nanargmax", "nanargmin", "median",
           "nanmedian", "quantile", "nanquantile", "percentile", "nanpercentile"]


# --- argument handling ------------------------------------------------------------------
def _check_out(name: str, out) -> None:
    if out is not None:
        raise ValueError(f"plax.numpy.{name}: the 'out' argument must be None. plax arrays are "
                         "immutable, so results are returned rather than written into `out`; "
                         f"write `result = plax.numpy.{name}(...)` instead.")


def _operand(name: str, a, out=None):
    _check_out(name, out)
    check_arraylike(name, a)
    a = as_operand(a)
    return a, get_aval(a)


def _axes(axis, ndim: int) -> tuple:
    """``axis`` (None, an int or a sequence of ints) as a tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    items = shape_entries(axis)  # (a range or other iterable of ints too, as JAX takes)
    try:
        items = tuple(operator.index(a) for a in items)
    except TypeError:
        raise TypeError(f"axis must be None, an integer or a tuple of integers, got {axis!r}.") \
            from None
    out = tuple(canonicalize_axis(a, ndim) for a in items)
    if len(set(out)) != len(out):
        raise ValueError(f"duplicate value in 'axis': {axis}")
    return out


def _single_axis(axis, ndim: int) -> int:
    try:
        return canonicalize_axis(operator.index(axis), ndim)
    except TypeError:
        raise TypeError(f"axis must be None or an integer, got {axis!r}.") from None


def _user_dtype(dtype):
    if dtype is None:
        return None
    return dtypes.canonicalize_user_dtype(dtype)


def _inexact(dt) -> np.dtype:
    return dtypes.to_inexact_dtype(dt)


def _upcast(dt) -> np.dtype:
    """The dtype to accumulate ``dt`` in: half-precision floats use float32."""
    dt = np.dtype(dt)
    if dtypes.is_float(dt) and dtypes.itemsize_bits(dt) < 32:
        return np.dtype(np.float32)
    return dt


def _sum_dtype(dt, promote_integers: bool) -> np.dtype:
    """The default result dtype of sum/prod: bool and narrow integers widen as in JAX."""
    if dtypes.is_extended(dt):
        raise TypeError(f"{user_entry_name()} does not accept dtype {dt}: PRNG keys are not "
                        "numbers.")
    if dtypes.is_bool(dt):
        return dtypes.default_int_dtype()
    if promote_integers and dtypes.is_integer(dt):
        wide = dtypes.canonicalize_dtype(np.uint64 if dtypes.is_unsigned(dt) else np.int64)
        if dtypes.itemsize_bits(dt) < dtypes.itemsize_bits(wide):
            return wide
    return np.dtype(dt)


def _scalar(value, dt):
    return np.asarray(value, dt)


def _full(shape, value, dt):
    v = convert(dimension_as_value(value), dt) if type(value) is DimExpr else _scalar(value, dt)
    return lax.broadcast_in_dim(v, tuple(shape), ())


def _select(pred, on_true, on_false):
    """``lax.select`` with rank-0 cases broadcast to the other operands' shape."""
    shape = builtins.max((shape_of(v) for v in (pred, on_true, on_false)), key=len)
    on_true, on_false = (v if shape_of(v) == shape else lax.broadcast_in_dim(v, shape, ())
                         for v in (on_true, on_false))
    return lax.select(pred, on_true, on_false)


def _keep(x, axes: tuple, keepdims: bool):
    return lax.expand_dims(x, tuple(sorted(axes))) if keepdims and axes else x


def _isnan(x):
    return lax.ne(x, x)


def _where_mask(where, shape):
    """The ``where=`` argument as a bool mask that broadcasts to ``shape``."""
    check_arraylike("where", where)
    mask = convert(as_operand(where), np.bool_)
    if shape_of(mask) == ():
        return mask
    try:
        return broadcast_to_shape(mask, tuple(shape))
    except ValueError:
        raise ValueError(f"where= mask of shape {shape_of(mask)} does not broadcast to the shape "
                         f"of the reduced array {tuple(shape)}.") from None


def _initial(initial, dt):
    check_arraylike("initial", initial)
    initial = as_operand(initial)
    if shape_of(initial) != ():
        raise ValueError(f"initial value must be a scalar. Got array of shape {shape_of(initial)}")
    return convert(initial, dt)


# --- the generic reduction ----------------------------------------------------------------
# kind -> (lax reduction, lax combiner, identity of the dtype or None)
_KINDS = {
    "sum": (lax.reduce_sum, lax.add, lambda dt: 0),
    "prod": (lax.reduce_prod, lax.mul, lambda dt: 1),
    "max": (lax.reduce_max, lax.max, None),
    "min": (lax.reduce_min, lax.min, None),
    "all": (lax.reduce_and, lax.bitwise_and, lambda dt: True),
    "any": (lax.reduce_or, lax.bitwise_or, lambda dt: False),
}
_MASK_FILL = {"max": dtypes.lowest_value, "min": dtypes.highest_value}


def _reduce(name: str, kind: str, a, axis, keepdims, where, initial, comp_dtype, out_dtype):
    """Reduce ``a`` over ``axis`` in ``comp_dtype``, then cast to ``out_dtype``."""
    shape = shape_of(a)
    axes = _axes(axis, len(shape))
    if dtypes.is_bool(comp_dtype) and kind in ("sum", "prod"):
        kind = "any" if kind == "sum" else "all"  # bool sums saturate: or / and
    reduce_fn, combine, identity = _KINDS[kind]
    if identity is None and initial is None:
        if where is not None:
            raise ValueError(f"reduction operation {name} does not have an identity, so to use a "
                             "where mask one has to specify 'initial'")
        if builtins.any(shape[i] == 0 for i in axes):
            raise ValueError(f"zero-size array to reduction operation {name} which has no "
                             f"identity (shape {shape}, axis={axis}); pass initial= to give "
                             "empty reductions a value.")
    x = convert(a, comp_dtype)
    if where is not None:
        fill = (identity or _MASK_FILL[kind])(comp_dtype)
        x = _select(_where_mask(where, shape), x, _scalar(fill, comp_dtype))
    y = reduce_fn(x, axes)
    if initial is not None:
        y = combine(y, _initial(initial, comp_dtype))
    return convert(_keep(y, axes, keepdims), out_dtype)


def _count(shape, axes, keepdims, where, dt):
    """How many elements each reduction sees: a Python int, or an array under ``where``."""
    if where is None:
        return math.prod(shape[i] for i in axes)
    mask = broadcast_to_shape(_where_mask(where, shape), shape) if shape else \
        _where_mask(where, shape)
    return _keep(lax.reduce_sum(convert(mask, dt), axes), axes, keepdims)


@eager_compiled(static_argnames=("axis", "dtype", "out", "keepdims", "promote_integers"))
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
        promote_integers=True):
    """Sum of array elements over the given axes."""
    a, aval = _operand("sum", a, out)
    out_dtype = _user_dtype(dtype) or _sum_dtype(aval.dtype, promote_integers)
    return _reduce("sum", "sum", a, axis, keepdims, where, initial, _upcast(out_dtype), out_dtype)


@eager_compiled(static_argnames=("axis", "dtype", "out", "keepdims", "promote_integers"))
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
         promote_integers=True):
    """Product of array elements over the given axes."""
    a, aval = _operand("prod", a, out)
    out_dtype = _user_dtype(dtype) or _sum_dtype(aval.dtype, promote_integers)
    return _reduce("prod", "prod", a, axis, keepdims, where, initial, _upcast(out_dtype), out_dtype)


@eager_compiled(static_argnames=("axis", "out", "keepdims"))
def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Maximum of array elements over the given axes (NaN propagates)."""
    a, aval = _operand("max", a, out)
    return _reduce("max", "max", a, axis, keepdims, where, initial, aval.dtype, aval.dtype)


@eager_compiled(static_argnames=("axis", "out", "keepdims"))
def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Minimum of array elements over the given axes (NaN propagates)."""
    a, aval = _operand("min", a, out)
    return _reduce("min", "min", a, axis, keepdims, where, initial, aval.dtype, aval.dtype)


amax = util.alias(max, "amax")
amin = util.alias(min, "amin")


@eager_compiled(static_argnames=("axis", "out", "keepdims"))
def all(a, axis=None, out=None, keepdims=False, *, where=None):
    """Whether all elements along the given axes are true (nonzero)."""
    a, _ = _operand("all", a, out)
    return _reduce("all", "all", a, axis, keepdims, where, None, np.bool_, np.bool_)


@eager_compiled(static_argnames=("axis", "out", "keepdims"))
def any(a, axis=None, out=None, keepdims=False, *, where=None):
    """Whether any element along the given axes is true (nonzero)."""
    a, _ = _operand("any", a, out)
    return _reduce("any", "any", a, axis, keepdims, where, None, np.bool_, np.bool_)


# --- mean, var, std -----------------------------------------------------------------------
def _mean_dtypes(name, aval, dtype, upcast=True):
    out_dtype = _user_dtype(dtype) or _inexact(aval.dtype)
    if dtypes.is_bool(out_dtype):
        raise TypeError(f"{name}: dtype=bool is not supported; a mean is a number. Pass a numeric "
                        "dtype, or compare the result afterwards.")
    comp = _inexact(out_dtype)
    return out_dtype, _upcast(comp) if upcast else comp


def _divide(total, count, dt):
    if isinstance(count, int):
        return lax.div(total, _scalar(count, dt))
    if type(count) is DimExpr:  # a symbolic size (plax.export): its value
        count = dimension_as_value(count)
    return lax.div(total, convert(count, dt))


@eager_compiled(static_argnames=("axis", "dtype", "out", "keepdims", "upcast_f16_for_computation"))
def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None,
         upcast_f16_for_computation=True):
    """Arithmetic mean over the given axes (integers give floats)."""
    a, aval = _operand("mean", a, out)
    out_dtype, comp = _mean_dtypes("mean", aval, dtype, upcast_f16_for_computation)
    axes = _axes(axis, aval.ndim)
    total = _reduce("mean", "sum", a, axes, keepdims, where, None, comp, comp)
    count = _count(aval.shape, axes, keepdims, where, comp)
    return convert(_divide(total, count, comp), out_dtype)


def _correction(ddof, correction):
    if correction is None:
        return ddof
    if ddof != 0:
        raise ValueError("ddof and correction can't be provided simultaneously.")
    return correction


def _abs2(x, dt):
    """|x|**2, real for complex ``x``."""
    if dtypes.is_complex(dt):
        return lax.add(lax.square(lax.real(x)), lax.square(lax.imag(x)))
    return lax.square(x)


def _normalize(total, count, correction, dt):
    """``total / (count - correction)``; NaN where that divisor is not positive."""
    if isinstance(count, int):
        n = count - correction
        if n <= 0:
            return _full(shape_of(total), np.nan, dt)
        return lax.div(total, _scalar(n, dt))
    if type(count) is DimExpr:  # a symbolic size (plax.export): its value
        count = dimension_as_value(count)
    n = lax.sub(convert(count, dt), _scalar(correction, dt))
    return _select(lax.gt(n, _scalar(0, dt)), lax.div(total, n), _scalar(np.nan, dt))


def _var_dtypes(aval, dtype):
    """(result dtype, computation dtype) of var/std, as JAX picks them (no promotion, so
    strict dtype promotion has nothing to refuse): a given ``dtype`` is both, else the
    input's real counterpart computed in its inexact dtype; 16-bit floats compute in f32."""
    user = _user_dtype(dtype)
    if user is not None:
        user = _inexact(user)
        if dtypes.is_complex(aval.dtype) and not dtypes.is_complex(user):
            raise ValueError("jax.numpy.var does not yet support real dtype parameters when "
                             "computing the variance of an array of complex values: pass a "
                             f"complex dtype (got {user} for {aval.dtype} values).")
        return user, _upcast(user)
    comp = _inexact(aval.dtype)
    return real_dtype(comp), _upcast(comp)


def _centered_sum_of_squares(name, a, aval, axes, keepdims, where, mean_, comp, ignore_nan):
    """(sum of |x - mean|**2 over ``axes``, element count) in ``comp``."""
    x = convert(a, comp)
    valid = None
    if ignore_nan:
        valid = lax.bitwise_not(_isnan(x))
        if where is not None:
            valid = lax.bitwise_and(valid, broadcast_to_shape(_where_mask(where, aval.shape),
                                                              aval.shape))
        where = valid
    if mean_ is None:
        total = _reduce(name, "sum", x, axes, True, where, None, comp, comp)
        mean_ = _divide(total, _count(aval.shape, axes, True, where, comp), comp)
    else:
        mean_ = convert(as_operand(mean_), comp)
    centered = lax.sub(x, broadcast_to_shape(mean_, aval.shape) if aval.shape else mean_)
    if ignore_nan:
        centered = _select(valid, centered, _scalar(0, comp))
    real = real_dtype(comp)
    total = _reduce(name, "sum", _abs2(centered, comp), axes, keepdims, where, None, real, real)
    return total, _count(aval.shape, axes, keepdims, where, real)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """Variance over the given axes; ``correction`` (or ``ddof``) is subtracted from the count."""
    a, aval = _operand("var", a, out)
    corr = _correction(ddof, correction)
    out_dtype, comp = _var_dtypes(aval, dtype)
    axes = _axes(axis, aval.ndim)
    total, count = _centered_sum_of_squares("var", a, aval, axes, keepdims, where, mean, comp,
                                            False)
    return convert(_normalize(total, count, corr, real_dtype(comp)), out_dtype)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """Standard deviation over the given axes: the square root of ``var``."""
    _check_out("std", out)
    return lax.sqrt(var(a, axis, dtype, None, ddof, keepdims, where=where, mean=mean,
                        correction=correction))


# --- argmax / argmin ------------------------------------------------------------------------
def _arg_reduce(name, lax_fn, a, axis, out, keepdims):
    a, aval = _operand(name, a, out)
    if axis is None:
        x, ax = lax.reshape(a, (aval.size,)), 0
    else:
        x, ax = a, _single_axis(axis, aval.ndim)
    if get_aval(x).shape[ax] == 0:
        raise ValueError(f"attempt to get {name} of an empty sequence (shape {aval.shape}, "
                         f"axis={axis}).")
    r = lax_fn(x, ax, dtypes.default_int_dtype())
    if keepdims:
        r = lax.reshape(r, (1,) * aval.ndim) if axis is None else lax.expand_dims(r, (ax,))
    return r


def argmax(a, axis=None, out=None, keepdims=None):
    """Index of the first maximum along ``axis`` (of the flattened array when None)."""
    return _arg_reduce("argmax", lax.argmax, a, axis, out, keepdims)


def argmin(a, axis=None, out=None, keepdims=None):
    """Index of the first minimum along ``axis`` (of the flattened array when None)."""
    return _arg_reduce("argmin", lax.argmin, a, axis, out, keepdims)


def _nan_arg_reduce(name, base, fill, a, axis, out, keepdims):
    a, aval = _operand(name, a, out)
    if not dtypes.is_inexact(aval.dtype):
        return base(a, axis, None, keepdims)
    nan = _isnan(a)
    r = base(_select(nan, _scalar(fill, aval.dtype), a), axis, None, keepdims)
    all_nan = all(nan, axis, keepdims=bool(keepdims))
    return _select(all_nan, _scalar(-1, r.dtype), r)


def nanargmax(a, axis=None, out=None, keepdims=None):
    """argmax ignoring NaNs; -1 where a slice is all NaN."""
    return _nan_arg_reduce("nanargmax", argmax, -np.inf, a, axis, out, keepdims)


def nanargmin(a, axis=None, out=None, keepdims=None):
    """argmin ignoring NaNs; -1 where a slice is all NaN."""
    return _nan_arg_reduce("nanargmin", argmin, np.inf, a, axis, out, keepdims)


# --- cumulative reductions -------------------------------------------------------------------
def _cumulative(name, lax_fn, a, axis, dtype, out, nan_fill=None):
    a, aval = _operand(name, a, out)
    if axis is None:
        a, ax = lax.reshape(a, (aval.size,)), 0
    else:
        ax = _single_axis(axis, aval.ndim)
    out_dtype = _user_dtype(dtype) or (dtypes.default_int_dtype() if dtypes.is_bool(aval.dtype)
                                       else aval.dtype)
    # bool accumulations run on integers: cumsum then means "any so far", cumprod "all so far".
    comp = dtypes.default_int_dtype() if dtypes.is_bool(out_dtype) else out_dtype
    if nan_fill is not None and dtypes.is_inexact(aval.dtype):
        a = _select(_isnan(a), _scalar(nan_fill, aval.dtype), a)
    x = convert(a, comp)
    return convert(lax_fn(x, ax), out_dtype)


def cumsum(a, axis=None, dtype=None, out=None):
    """Cumulative sum along ``axis`` (of the flattened array when None)."""
    return _cumulative("cumsum", lax.cumsum, a, axis, dtype, out)


def cumprod(a, axis=None, dtype=None, out=None):
    """Cumulative product along ``axis`` (of the flattened array when None)."""
    return _cumulative("cumprod", lax.cumprod, a, axis, dtype, out)


def nancumsum(a, axis=None, dtype=None, out=None):
    """Cumulative sum treating NaNs as zero."""
    return _cumulative("nancumsum", lax.cumsum, a, axis, dtype, out, nan_fill=0)


def nancumprod(a, axis=None, dtype=None, out=None):
    """Cumulative product treating NaNs as one."""
    return _cumulative("nancumprod", lax.cumprod, a, axis, dtype, out, nan_fill=1)


def _cumulative_array_api(name, fn, identity, x, axis, dtype, include_initial):
    x, aval = _operand(name, x)
    if aval.ndim == 0:
        raise ValueError(f"The input must be non-scalar to take a cumulative {name.split('_')[1]}, "
                         "however a scalar value or scalar array was given.")
    if axis is None:
        if aval.ndim > 1:
            raise ValueError(f"The input array has rank {aval.ndim}, however axis was not set to "
                             "an explicit value. The axis argument is only optional for "
                             "one-dimensional arrays.")
        axis = 0
    ax = _single_axis(axis, aval.ndim)
    r = fn(x, ax, _user_dtype(dtype) or _sum_dtype(aval.dtype, True))
    if include_initial:
        config = [(1 if i == ax else 0, 0, 0) for i in range(aval.ndim)]
        r = lax.pad(r, _scalar(identity, r.dtype), config)
    return r


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Array-API cumulative sum; ``include_initial`` prepends a zero."""
    return _cumulative_array_api("cumulative_sum", cumsum, 0, x, axis, dtype, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Array-API cumulative product; ``include_initial`` prepends a one."""
    return _cumulative_array_api("cumulative_prod", cumprod, 1, x, axis, dtype, include_initial)


# --- ptp, count_nonzero, average ---------------------------------------------------------------
def ptp(a, axis=None, out=None, keepdims=False):
    """Range (maximum minus minimum) over the given axes."""
    a, aval = _operand("ptp", a, out)
    if dtypes.is_bool(aval.dtype):
        raise TypeError("ptp does not accept dtype bool: max - min is not defined for booleans. "
                        "Convert with astype(int) first.")
    return lax.sub(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


def count_nonzero(a, axis=None, keepdims=False):
    """Number of nonzero elements over the given axes."""
    a, _ = _operand("count_nonzero", a)
    return sum(convert(a, np.bool_), axis, dtype=dtypes.default_int_dtype(), keepdims=keepdims)


def _broadcast_weights(w, a_shape, axis):
    """``weights`` aligned with ``a``: the same shape, or the shape of ``a`` along ``axis``."""
    w_shape = shape_of(w)
    if w_shape == tuple(a_shape):
        return w
    if axis is None:
        raise ValueError("Axis must be specified when shapes of a and weights differ.")
    axes = _axes(axis, len(a_shape))
    if w_shape != tuple(a_shape[i] for i in axes):
        raise ValueError("Shape of weights must be consistent with shape of a along specified "
                         f"axis: a has shape {tuple(a_shape)}, weights {w_shape}, axis={axis}.")
    if list(axes) != sorted(axes):
        w = lax.transpose(w, tuple(sorted(range(len(axes)), key=lambda i: axes[i])))
    return lax.broadcast_in_dim(w, tuple(a_shape), tuple(sorted(axes)))


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """Weighted average over the given axes; with ``returned`` also the sum of weights."""
    if weights is None:
        a, aval = _operand("average", a)
        avg = mean(a, axis, keepdims=keepdims)
        count = _count(aval.shape, _axes(axis, aval.ndim), keepdims, None, avg.dtype)
        wsum = _full(shape_of(avg), count, avg.dtype)
    else:
        check_arraylike("average", a, weights)
        a, w = promote_dtypes_inexact(a, weights)
        shape = shape_of(a)
        w = _broadcast_weights(w, shape, axis)
        dt = _upcast(get_aval(a).dtype)
        wsum = sum(w, axis, dtype=dt, keepdims=keepdims)
        avg = lax.div(sum(lax.mul(convert(a, dt), convert(w, dt)), axis, keepdims=keepdims), wsum)
        out_dt = get_aval(a).dtype
        avg, wsum = convert(avg, out_dt), convert(wsum, out_dt)
    return (avg, wsum) if returned else avg


# --- nan-ignoring reductions -------------------------------------------------------------------
def _nan_to(a, aval, value):
    if not dtypes.is_inexact(aval.dtype):
        return a
    return _select(_isnan(a), _scalar(value, aval.dtype), a)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Sum treating NaNs as zero."""
    a, aval = _operand("nansum", a, out)
    return sum(_nan_to(a, aval, 0), axis, dtype, None, keepdims, initial, where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Product treating NaNs as one."""
    a, aval = _operand("nanprod", a, out)
    return prod(_nan_to(a, aval, 1), axis, dtype, None, keepdims, initial, where)


def _nan_extremum(name, base, fill, a, axis, out, keepdims, initial, where):
    a, aval = _operand(name, a, out)
    if not dtypes.is_inexact(aval.dtype):
        return base(a, axis, None, keepdims, initial, where)
    nan = _isnan(a)
    r = base(_select(nan, _scalar(fill, aval.dtype), a), axis, None, keepdims, initial, where)
    if initial is not None:
        return r
    return _select(all(nan, axis, keepdims=keepdims, where=where), _scalar(np.nan, r.dtype), r)


def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Maximum ignoring NaNs; NaN where a slice is all NaN."""
    return _nan_extremum("nanmax", max, -np.inf, a, axis, out, keepdims, initial, where)


def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Minimum ignoring NaNs; NaN where a slice is all NaN."""
    return _nan_extremum("nanmin", min, np.inf, a, axis, out, keepdims, initial, where)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """Mean of the non-NaN elements."""
    a, aval = _operand("nanmean", a, out)
    if not dtypes.is_inexact(aval.dtype):
        return mean(a, axis, dtype, None, keepdims, where=where)
    out_dtype, comp = _mean_dtypes("nanmean", aval, dtype)
    axes = _axes(axis, aval.ndim)
    x = convert(a, comp)
    valid = lax.bitwise_not(_isnan(x))
    if where is not None:
        mask = broadcast_to_shape(_where_mask(where, aval.shape), aval.shape)
        valid = lax.bitwise_and(valid, mask)
    total = _reduce("nanmean", "sum", _select(valid, x, _scalar(0, comp)), axes, keepdims,
                    None, None, comp, comp)
    count = _count(aval.shape, axes, keepdims, valid, comp)
    return convert(lax.div(total, count), out_dtype)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
    """Variance of the non-NaN elements."""
    a, aval = _operand("nanvar", a, out)
    out_dtype, comp = _var_dtypes(aval, dtype)
    axes = _axes(axis, aval.ndim)
    total, count = _centered_sum_of_squares("nanvar", a, aval, axes, keepdims, where, mean, comp,
                                            dtypes.is_inexact(aval.dtype))
    return convert(_normalize(total, count, ddof, real_dtype(comp)), out_dtype)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
    """Standard deviation of the non-NaN elements."""
    _check_out("nanstd", out)
    return lax.sqrt(nanvar(a, axis, dtype, None, ddof, keepdims, where=where, mean=mean))


# --- quantiles ------------------------------------------------------------------------------
_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def _check_q_range(q, scale):
    """Reject out-of-range quantiles when they are known on the host."""
    if type(q) in (bool, int, float) or isinstance(q, (np.ndarray, np.generic)):
        qs = np.asarray(q, dtype=np.float64)
        if qs.size and not (np.all(qs >= 0) and np.all(qs <= scale)):
            what = "Percentiles must be in the range [0, 100]" if scale == 100 else \
                "Quantiles must be in the range [0, 1]"
            raise ValueError(f"{what}, got {q!r}.")


def _pick(x, idx, full_shape):
    """``x[..., idx]`` along the last axis, for ``idx`` of shape ``full_shape[:-1]``.

    A one-hot select followed by a max: exact for every value, including inf and -0.0.
    """
    nd = len(full_shape)
    vals = lax.broadcast_in_dim(x, full_shape, tuple(range(1, nd)))
    hit = lax.eq(lax.broadcast_in_dim(idx, full_shape, tuple(range(nd - 1))),
                 lax.broadcasted_iota(idx.dtype, full_shape, nd - 1))
    return lax.reduce_max(_select(hit, vals, _scalar(-np.inf, vals.dtype)), (nd - 1,))


def _sorted_last(a, aval, axes, weights):
    """``a`` (and ``weights``) with ``axes`` moved last, merged into one and sorted."""
    keep = [i for i in range(aval.ndim) if i not in axes]
    perm = tuple(keep) + tuple(axes)
    batch = tuple(aval.shape[i] for i in keep)
    n = math.prod(aval.shape[i] for i in axes)
    ops = [a] if weights is None else [a, weights]
    ops = [lax.reshape(lax.transpose(o, perm) if perm != tuple(range(aval.ndim)) else o,
                       batch + (n,)) for o in ops]
    if weights is None:
        return lax.sort(ops[0], dimension=len(batch)), None, batch, n
    x, w = lax.sort(ops, dimension=len(batch), num_keys=1)
    return x, w, batch, n


def _quantile(name, a, q, axis, method, keepdims, ignore_nan, weights, scale):
    if method not in _METHODS:
        raise ValueError("method can only be 'linear', 'lower', 'higher', 'midpoint', 'nearest' "
                         f"or 'inverted_cdf', got {method!r}.")
    if weights is not None and method != "inverted_cdf":
        raise ValueError(f"{name}: only method='inverted_cdf' supports weights, got "
                         f"method={method!r}.")
    check_arraylike(name, a, q)
    _check_q_range(q, scale)
    # Quantiles known on the host need no index arithmetic on the device (the common case).
    host_q = type(q) in (bool, int, float) or isinstance(q, (np.ndarray, np.generic))
    static = host_q and weights is None and not ignore_nan
    qs = np.asarray(q, np.float64).reshape(-1) / scale if static else None
    a, q = as_operand(a), as_operand(q)
    aval, q_shape = get_aval(a), shape_of(q)
    if len(q_shape) > 1:
        raise ValueError(f"q must be have rank <= 1, got shape {q_shape}")
    if dtypes.is_complex(aval.dtype):
        raise ValueError(f"{name} does not support complex input (dtype {aval.dtype.name}): "
                         "complex numbers have no order to take quantiles in.")
    if dtypes.is_complex(get_aval(q).dtype):
        raise TypeError(f"{name}: q must be real, got dtype {get_aval(q).dtype.name}.")
    out_dt = _inexact(aval.dtype)  # the result has a's (inexact) dtype whatever q's is
    a, q = convert(a, out_dt), convert(q, out_dt)
    if scale != 1 and not static:
        q = lax.div(q, _scalar(scale, out_dt))
    axes = _axes(axis, aval.ndim)
    if weights is not None:
        check_arraylike(name, weights)
        weights = convert(_broadcast_weights(as_operand(weights), aval.shape, axis),
                          _upcast(out_dt))
        if ignore_nan:
            weights = _select(_isnan(a), _scalar(0, get_aval(weights).dtype), weights)
    x, w, batch, n = _sorted_last(a, aval, axes, weights)
    k = q_shape[0] if q_shape else 1
    res_shape = (k,) + batch
    if n == 0:
        r = _full(res_shape, np.nan, out_dt)
    elif static:
        r = _quantile_static(x, qs, n, method)
    else:
        r = _quantile_sorted(x, w, lax.reshape(q, (k,)), n, res_shape, method, ignore_nan)
    kept_shape = tuple(1 if i in axes else d for i, d in enumerate(aval.shape)) if keepdims \
        else batch
    return lax.reshape(r, q_shape + kept_shape)


def _take_last(x, idx):
    """``x[..., idx]`` for host integer indices ``idx``, by static slices."""
    last = len(shape_of(x)) - 1
    parts = [lax.slice_in_dim(x, int(i), int(i) + 1, axis=last) for i in idx]
    return parts[0] if len(parts) == 1 else lax.concatenate(parts, last)


def _quantile_static(x, qs, n, method):
    """Quantiles at host-known ``qs`` of ``x`` sorted along its last axis, shape (k, *batch)."""
    dt = get_aval(x).dtype
    last = len(shape_of(x)) - 1
    if method == "inverted_cdf":
        lo = hi = np.clip(np.ceil(qs * n) - 1, 0, n - 1)
    else:
        pos = qs * (n - 1)
        lo, hi = np.floor(pos), np.ceil(pos)
        if method == "lower":
            hi = lo
        elif method == "higher":
            lo = hi
        elif method == "nearest":
            lo = hi = np.round(pos)  # half to even, as NumPy
    r = vlo = _take_last(x, lo)
    if not np.array_equal(lo, hi):
        vhi = _take_last(x, hi)
        if method == "midpoint":
            r = lax.div(lax.add(vlo, vhi), _scalar(2, dt))
        else:
            frac = lax.broadcast_in_dim(np.asarray(pos - lo, dt), shape_of(vlo), (last,))
            lerp = lax.add(vlo, lax.mul(lax.sub(vhi, vlo), frac))
            r = _select(lax.eq(vlo, vhi), vlo, lerp)
    any_nan = lax.broadcast_in_dim(lax.reduce_or(_isnan(x), (last,)), shape_of(r),
                                   tuple(range(last)))
    r = _select(any_nan, _scalar(np.nan, dt), r)
    return lax.transpose(r, (last,) + tuple(range(last))) if last else r


def _quantile_sorted(x, w, q, n, res_shape, method, ignore_nan):
    """Quantiles ``q`` (shape (k,)) of ``x`` sorted along its last axis, shape ``res_shape``."""
    dt = get_aval(x).dtype
    pdt = dtypes.promote_types(_upcast(dt), np.float32)  # positions need more than 16 bits
    nd = len(res_shape)
    qb = lax.broadcast_in_dim(convert(q, pdt), res_shape, (0,))
    nan = _isnan(x)
    if ignore_nan:
        nvalid = lax.reduce_sum(convert(lax.bitwise_not(nan), pdt), (nd - 1,))
        nb = lax.broadcast_in_dim(nvalid, res_shape, tuple(range(1, nd)))
    else:
        nb = _scalar(n, pdt)
    last = lax.sub(nb, _scalar(1, pdt))

    def pick(pos):
        idx = lax.clamp(_scalar(0, pdt), pos, lax.max(last, _scalar(0, pdt)))
        return _pick(x, convert(idx, np.int32), res_shape + (n,))

    if w is not None:
        cw = lax.cumsum(w, get_aval(w).ndim - 1)
        total = lax.slice_in_dim(cw, n - 1, n, axis=nd - 1)
        thresh = lax.mul(qb, lax.broadcast_in_dim(lax.reshape(total, res_shape[1:]), res_shape,
                                                  tuple(range(1, nd))))
        full = res_shape + (n,)
        below = lax.lt(lax.broadcast_in_dim(cw, full, tuple(range(1, nd + 1))),
                       lax.broadcast_in_dim(thresh, full, tuple(range(nd))))
        r = pick(lax.reduce_sum(convert(below, pdt), (nd,)))
    elif method == "inverted_cdf":
        r = pick(lax.sub(lax.ceil(lax.mul(qb, nb)), _scalar(1, pdt)))
    else:
        pos = lax.mul(qb, last)
        lo, hi = lax.floor(pos), lax.ceil(pos)
        if method == "lower":
            r = pick(lo)
        elif method == "higher":
            r = pick(hi)
        elif method == "nearest":
            r = pick(lax.round(pos, lax.RoundingMethod.TO_NEAREST_EVEN))
        else:
            vlo, vhi = pick(lo), pick(hi)
            if method == "midpoint":
                r = lax.div(lax.add(vlo, vhi), _scalar(2, dt))
            else:
                frac = convert(lax.sub(pos, lo), dt)
                lerp = lax.add(vlo, lax.mul(lax.sub(vhi, vlo), frac))
                r = _select(lax.eq(vlo, vhi), vlo, lerp)  # keeps inf when both ends are inf
    if ignore_nan:
        empty = lax.eq(nb, _scalar(0, pdt))
    else:
        any_nan = lax.reduce_or(nan, (nd - 1,))
        empty = lax.broadcast_in_dim(any_nan, res_shape, tuple(range(1, nd)))
    return _select(empty, _scalar(np.nan, dt), r)


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False,
             *, weights=None):
    """The ``q``-th quantiles (0 <= q <= 1) over the given axes; NaN if a slice holds a NaN."""
    _check_out("quantile", out)
    return _quantile("quantile", a, q, axis, method, keepdims, False, weights, 1)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
    """Quantiles ignoring NaNs; NaN where a slice is all NaN."""
    _check_out("nanquantile", out)
    return _quantile("nanquantile", a, q, axis, method, keepdims, True, weights, 1)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None):
    """The ``q``-th percentiles (0 <= q <= 100) over the given axes."""
    _check_out("percentile", out)
    return _quantile("percentile", a, q, axis, method, keepdims, False, weights, 100)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None):
    """Percentiles ignoring NaNs."""
    _check_out("nanpercentile", out)
    return _quantile("nanpercentile", a, q, axis, method, keepdims, True, weights, 100)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """Median over the given axes (the mean of the two middle values for even counts)."""
    _check_out("median", out)
    return _quantile("median", a, 0.5, axis, "midpoint", keepdims, False, None, 1)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """Median ignoring NaNs."""
    _check_out("nanmedian", out)
    return _quantile("nanmedian", a, 0.5, axis, "midpoint", keepdims, True, None, 1)
