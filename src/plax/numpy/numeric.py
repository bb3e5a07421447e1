"""Numeric helpers of the NumPy API: closeness tests, float decomposition, finite differences,
interpolation, integer gcd/lcm and dtype queries, written on plax.lax and plax.numpy."""
from __future__ import annotations

import functools

import numpy as np

from plax import lax
from plax.api.jit import eager_compiled
from plax.core import dtypes
from plax.core.trace import get_aval
from plax.numpy import creation, reductions, shape_ops, sorting, ufuncs
from plax.numpy.util import (as_operand, broadcast_shapes, broadcast_to_shape, canonicalize_axis,
                             check_arraylike, convert, filled_like, promote_args, promote_dtypes,
                             promote_dtypes_inexact, promote_dtypes_numeric, shape_of)
from plax.higher_order.custom_derivatives import custom_jvp

__all__ = ["allclose", "isclose", "array_equal", "array_equiv", "nan_to_num", "sinc", "i0", "gcd",
           "lcm", "ldexp", "frexp", "modf", "spacing", "diff", "ediff1d", "gradient", "trapezoid",
           "cross", "interp", "unwrap", "iscomplex", "isreal", "real_if_close", "can_cast",
           "isdtype", "common_type"]


# --- helpers ------------------------------------------------------------------------------
def _arr(name, x):
    check_arraylike(name, x)
    return as_operand(x)


def _dt(x):
    return get_aval(x).dtype


def _c(value, like):
    """A weakly typed scalar in ``like``'s dtype."""
    return convert(value, _dt(like), True)


def _full(shape, x):
    return broadcast_to_shape(x, tuple(shape))


def _real_dtype(dt):
    return np.dtype(dtypes.finfo(dt).dtype) if dtypes.is_complex(dt) else np.dtype(dt)


def _inexact1(name, x):
    (x,) = promote_dtypes_inexact(_arr(name, x))
    return x


def _where(c, x, y):
    return ufuncs.where(c, x, y)


# --- closeness and equality -----------------------------------------------------------------
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|a - b| <= atol + rtol * |b|``; infinities are close only to themselves."""
    check_arraylike("isclose", a, b)
    a, b = promote_dtypes(as_operand(a), as_operand(b))
    if dtypes.is_extended(_dt(a)):  # keys are close only when equal
        return ufuncs.equal(a, b)
    if not dtypes.is_inexact(_dt(a)):
        a, b = promote_dtypes_inexact(a, b)
    rdt = _real_dtype(_dt(a))
    rtol, atol = (convert(as_operand(t), rdt, True) for t in (rtol, atol))
    out = ufuncs.less_equal(ufuncs.abs(ufuncs.subtract(a, b)),
                            ufuncs.add(atol, ufuncs.multiply(rtol, ufuncs.abs(b))))
    a_inf, b_inf = ufuncs.isinf(a), ufuncs.isinf(b)
    out = _where(ufuncs.logical_or(a_inf, b_inf),
                 ufuncs.logical_and(ufuncs.logical_and(a_inf, b_inf), ufuncs.equal(a, b)), out)
    a_nan, b_nan = ufuncs.isnan(a), ufuncs.isnan(b)
    if dtypes.is_complex(_dt(a)):
        a_nan = ufuncs.logical_or(ufuncs.isnan(lax.real(a)), ufuncs.isnan(lax.imag(a)))
        b_nan = ufuncs.logical_or(ufuncs.isnan(lax.real(b)), ufuncs.isnan(lax.imag(b)))
    any_nan = ufuncs.logical_or(a_nan, b_nan)
    nan_value = ufuncs.logical_and(a_nan, b_nan) if equal_nan else False
    return _where(any_nan, nan_value, out)


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of ``a`` is close to ``b`` (see isclose), as a boolean array."""
    return reductions.all(isclose(a, b, rtol, atol, equal_nan))


def _as_arrays(name, a1, a2):
    return tuple(creation.asarray(a) if isinstance(a, (list, tuple)) else _arr(name, a)
                 for a in (a1, a2))


def _equal_arrays(name, a1, a2):
    return promote_dtypes(*_as_arrays(name, a1, a2))


def array_equal(a1, a2, equal_nan=False):
    """Whether ``a1`` and ``a2`` have the same shape and elements (NaNs equal with equal_nan).
    Shapes are compared first, as in JAX: different shapes are unequal whatever the dtypes
    (a typed key and its raw key data included)."""
    a1, a2 = _as_arrays("array_equal", a1, a2)
    if shape_of(a1) != shape_of(a2):
        return creation.asarray(False)
    a1, a2 = promote_dtypes(a1, a2)
    eq = ufuncs.equal(a1, a2)
    if equal_nan:
        eq = ufuncs.logical_or(eq, ufuncs.logical_and(ufuncs.isnan(a1), ufuncs.isnan(a2)))
    return reductions.all(eq)


def array_equiv(a1, a2):
    """Whether ``a1`` and ``a2`` broadcast to one shape with equal elements."""
    a1, a2 = _equal_arrays("array_equiv", a1, a2)
    try:
        broadcast_shapes(shape_of(a1), shape_of(a2))
    except ValueError:
        return creation.asarray(False)
    return reductions.all(ufuncs.equal(a1, a2))


# --- elementwise ------------------------------------------------------------------------------
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """Replace NaN by ``nan`` and +-inf by ``posinf``/``neginf`` (default: the largest finite
    values of the dtype); complex parts are treated separately."""
    del copy  # plax arrays are immutable
    x = _arr("nan_to_num", x)
    dt = _dt(x)
    if type(x) in (bool, int, float, complex):
        x = convert(x, dtypes.result_type(x))
        dt = _dt(x)
    if not dtypes.is_inexact(dt):
        return creation.asarray(x)
    if dtypes.is_complex(dt):
        parts = [nan_to_num(p, nan=nan, posinf=posinf, neginf=neginf)
                 for p in (lax.real(x), lax.imag(x))]
        return lax.complex(*parts)
    info = dtypes.finfo(dt)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = _where(ufuncs.isnan(x), _c(nan, x), x)
    out = _where(ufuncs.isposinf(out), _c(posinf, x), out)
    return _where(ufuncs.isneginf(out), _c(neginf, x), out)


def _sinc_at_zero(k, x):
    """The k-th derivative of sin(x)/x at 0, in ``x``'s shape: 0 for odd k, else
    (-1)**(k/2) / (k + 1)."""
    value = 0.0 if k % 2 else (-1.0) ** (k // 2) / (k + 1)
    return filled_like(x, value)


@functools.lru_cache(maxsize=None)
def _sinc_k(k):
    """sin(x)/x's k-th derivative at 0, differentiable to any order (the (k+1)-th)."""
    @custom_jvp
    def f(x):
        return _sinc_at_zero(k, x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), lax.mul(t, _sinc_k(k + 1)(x))
    return f


def sinc(x, /):
    """The normalised sinc, sin(pi x) / (pi x), with value 1 (and correct derivatives) at 0."""
    x = _inexact1("sinc", x)
    zero = lax.eq(x, _c(0, x))
    pi_x = lax.mul(_c(np.pi, x), x)
    safe = _where(zero, _c(1, x), pi_x)
    return _where(zero, _sinc_k(0)(pi_x), lax.div(lax.sin(safe), safe))


_I0_SWITCH = 20.0  # |x| below: the power series; above: the asymptotic expansion


def i0(x):
    """The modified Bessel function of the first kind, order zero."""
    x = _inexact1("i0", x)
    dt = _dt(x)
    if dtypes.is_complex(dt):
        raise ValueError(f"Unsupported input type to plax.numpy.i0: {dt.name} (x must be real).")
    wide = dt if dtypes.itemsize_bits(dt) >= 32 else np.dtype(np.float32)
    xw = convert(x, wide, get_aval(x).weak_type)
    ax = lax.abs(xw)
    small = lax.le(ax, _c(_I0_SWITCH, ax))
    xs = _where(small, xw, _c(0, xw))
    q = lax.mul(lax.mul(xs, xs), _c(0.25, xs))
    term, total = filled_like(xs, 1.0), filled_like(xs, 1.0)
    for k in range(1, 60):
        term = lax.mul(term, lax.div(q, _c(float(k * k), q)))
        total = lax.add(total, term)
    xl = _where(small, _c(2 * _I0_SWITCH, ax), ax)
    inv8x = lax.div(_c(0.125, xl), xl)
    term, poly = filled_like(xl, 1.0), filled_like(xl, 1.0)
    for k in range(1, 30):
        term = lax.mul(term, lax.mul(inv8x, _c((2.0 * k - 1) ** 2 / k, xl)))
        poly = lax.add(poly, term)
    big = lax.mul(lax.div(lax.exp(xl), lax.sqrt(lax.mul(_c(2 * np.pi, xl), xl))), poly)
    return convert(_where(small, total, big), dt, get_aval(x).weak_type)


def _integer_args(name, x1, x2, check_rank=True):
    x1, x2 = promote_args(name, _arr(name, x1), _arr(name, x2), check_rank=check_rank)
    if not dtypes.is_integer(_dt(x1)):
        raise ValueError(f"Arguments to plax.numpy.{name} must be integers, got {_dt(x1).name}.")
    shape = broadcast_shapes(shape_of(x1), shape_of(x2))
    return _full(shape, x1), _full(shape, x2)


def _gcd(a, b):
    a, b = ufuncs.abs(a), ufuncs.abs(b)

    def body(ab):
        a, b = ab
        nz = lax.ne(b, filled_like(b, 0))
        return lax.select(nz, b, a), lax.select(nz, lax.rem(a, lax.select(nz, b, filled_like(b, 1))),
                                                 filled_like(b, 0))
    return lax.while_loop(lambda ab: lax.reduce_or(lax.ne(ab[1], filled_like(ab[1], 0)), tuple(range(len(shape_of(a))))),
                          body, (a, b))[0]


@eager_compiled  # (its loop compiled once per signature, as JAX's jitted gcd)
def gcd(x1, x2, /):
    """Elementwise greatest common divisor of integers (gcd(0, 0) is 0)."""
    # JAX checks jax_numpy_rank_promotion in lcm but not in gcd
    return _gcd(*_integer_args("gcd", x1, x2, check_rank=False))


@eager_compiled
def lcm(x1, x2, /):
    """Elementwise least common multiple of integers (0 if either is 0)."""
    x1, x2 = _integer_args("lcm", x1, x2)
    g = _gcd(x1, x2)
    zero = lax.eq(g, _c(0, g))
    safe = lax.select(zero, filled_like(g, 1), g)
    out = ufuncs.abs(lax.mul(x1, lax.div(x2, safe)))
    return lax.select(zero, filled_like(g, 0), out)


def _float_layout(dt):
    """(unsigned int dtype of the same width, mantissa bits, exponent bias) of a float dtype."""
    info = dtypes.finfo(dt)
    bits = dtypes.itemsize_bits(dt)
    udt = np.dtype({16: np.uint16, 32: np.uint32, 64: np.uint64}[bits])
    return udt, int(info.nmant), 2 ** (int(info.nexp) - 1) - 1


def _pow2(k, dt):
    """2**k exactly, for an int32 array ``k`` within the normal exponent range of ``dt``."""
    udt, nmant, bias = _float_layout(dt)
    biased = convert(lax.add(k, convert(bias, np.int32)), udt)
    return lax.bitcast_convert_type(lax.shift_left(biased, convert(nmant, udt)), dt)


def ldexp(x1, x2, /):
    """x1 * 2**x2, with integer ``x2``, without intermediate overflow or underflow."""
    check_arraylike("ldexp", x1, x2)
    x1, x2 = as_operand(x1), as_operand(x2)
    if not dtypes.is_integer(dtypes.result_type(x2)) or dtypes.is_complex(dtypes.result_type(x1)):
        raise ValueError("ldexp not supported for input types "
                         f"({dtypes.result_type(x1).name}, {dtypes.result_type(x2).name}): x1 must "
                         "be real and x2 an integer.")
    (x1,) = promote_dtypes_inexact(x1)
    if type(x1) is float:
        x1 = convert(x1, dtypes.default_float_dtype())
    dt = _dt(x1)
    info = dtypes.finfo(dt)
    limit = int(info.maxexp) - int(info.minexp) + int(info.nmant) + 1
    x2 = as_operand(x2)
    lo = None if dtypes.is_unsigned(dtypes.result_type(x2)) else -limit  # no wrap-around for uint
    e = convert(ufuncs.clip(x2, lo, limit), np.int32)
    three = convert(3, np.int32)
    k1 = lax.div(e, three)
    k2 = lax.div(lax.sub(e, k1), convert(2, np.int32))
    k3 = lax.sub(lax.sub(e, k1), k2)
    out = x1
    for k in (k1, k2, k3):
        out = ufuncs.multiply(out, _pow2(k, dt))
    return out


def frexp(x, /):
    """Decompose ``x`` into (mantissa, exponent) with x = mantissa * 2**exponent and
    0.5 <= |mantissa| < 1 (both 0 for x == 0; inf and NaN come back with exponent 0)."""
    x = _inexact1("frexp", x)
    if type(x) is float:
        x = convert(x, dtypes.default_float_dtype())
    dt = _dt(x)
    if dtypes.is_complex(dt):
        raise TypeError("frexp does not support complex-valued inputs (x).")
    udt, nmant, bias = _float_layout(dt)
    info = dtypes.finfo(dt)
    subnormal = lax.lt(lax.abs(x), _c(float(info.smallest_normal), x))
    scaled = _where(subnormal, lax.mul(x, _c(2.0 ** nmant, x)), x)
    bits = lax.bitcast_convert_type(scaled, udt)
    exp_mask = ((1 << int(info.nexp)) - 1) << nmant
    field = lax.shift_right_logical(lax.bitwise_and(bits, convert(exp_mask, udt)), convert(nmant, udt))
    exponent = lax.sub(convert(field, np.int32), convert(bias - 1, np.int32))
    exponent = _where(subnormal, lax.sub(exponent, convert(nmant, np.int32)), exponent)
    mant_bits = lax.bitwise_or(lax.bitwise_and(bits, convert(~exp_mask & ((1 << dtypes.itemsize_bits(dt)) - 1), udt)),
                               convert((bias - 1) << nmant, udt))
    mantissa = lax.bitcast_convert_type(mant_bits, dt)
    special = ufuncs.logical_or(lax.eq(x, _c(0, x)), ufuncs.logical_not(ufuncs.isfinite(x)))
    return _where(special, x, mantissa), _where(special, convert(0, np.int32), exponent)


def modf(x, /, out=None):
    """(fractional part, integral part) of ``x``, both with the sign of ``x``."""
    if out is not None:
        raise ValueError("The 'out' argument to modf is not supported: plax arrays are immutable.")
    x = _inexact1("modf", x)
    if dtypes.is_complex(_dt(x)):
        raise TypeError("modf does not support complex-valued inputs (x).")
    whole = ufuncs.trunc(x)
    return ufuncs.subtract(x, whole), whole


def spacing(x, /):
    """The distance from ``x`` to the next representable value away from zero (negative
    for negative ``x``)."""
    x = _inexact1("spacing", x)
    if type(x) is float:
        x = convert(x, dtypes.default_float_dtype(), True)
    if dtypes.is_complex(_dt(x)):
        raise ValueError("plax.numpy.spacing is not defined for complex inputs (x).")
    inf = _where(lax.lt(x, _c(0, x)), _c(-np.inf, x), _c(np.inf, x))
    nxt = ufuncs.nextafter(x, inf)
    # at 0 the difference is subnormal, which the subtraction may flush to zero
    return _where(lax.eq(x, _c(0, x)), nxt, ufuncs.subtract(nxt, x))


# --- finite differences, integration, interpolation -----------------------------------------
def _sl(x, start, stop, axis):
    return lax.slice_in_dim(x, start, stop, axis=axis)


def _edge(name, value, like, axis):
    """``prepend``/``append`` of diff as an array that joins ``like`` along ``axis``."""
    value = _arr(name, value)
    shape = list(shape_of(like))
    if not shape_of(value):
        shape[axis] = 1
        value = _full(shape, value)
    return value


def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The n-th discrete difference along ``axis`` (``not_equal`` for booleans)."""
    a = _arr("diff", a)
    nd = len(shape_of(a))
    if nd == 0:
        raise ValueError("diff requires input that is at least one dimensional (a).")
    n = int(n)
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative but got {n}.")
    if n == 0:
        return creation.asarray(a)
    axis = canonicalize_axis(axis, nd)
    parts = [a]
    if prepend is not None:
        parts.insert(0, _edge("diff", prepend, a, axis))
    if append is not None:
        parts.append(_edge("diff", append, a, axis))
    if len(parts) > 1:
        a = shape_ops.concatenate(parts, axis=axis)
    for _ in range(n):
        size = shape_of(a)[axis]
        hi, lo = _sl(a, 1, size, axis), _sl(a, 0, max(size - 1, 0), axis)
        a = ufuncs.not_equal(hi, lo) if _dt(a) == np.bool_ else ufuncs.subtract(hi, lo)
    return a


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences between consecutive elements of the flattened ``ary``, with optional
    values before (``to_begin``) and after (``to_end``)."""
    a = shape_ops.ravel(_arr("ediff1d", ary))
    if _dt(a) == np.bool_:
        raise TypeError("ediff1d does not support boolean input (ary): subtraction is undefined.")
    out = diff(a)
    parts = [out]
    if to_begin is not None:
        parts.insert(0, convert(shape_ops.ravel(_arr("ediff1d", to_begin)), _dt(out)))
    if to_end is not None:
        parts.append(convert(shape_ops.ravel(_arr("ediff1d", to_end)), _dt(out)))
    return shape_ops.concatenate(parts) if len(parts) > 1 else out


def _gradient_1d(f, h, axis):
    """The derivative of ``f`` along ``axis`` with spacing ``h`` (scalar or 1-D coordinates)."""
    n = shape_of(f)[axis]
    if not shape_of(h):
        inner = ufuncs.divide(ufuncs.subtract(_sl(f, 2, n, axis), _sl(f, 0, n - 2, axis)),
                              ufuncs.multiply(2, h))
        first = ufuncs.divide(ufuncs.subtract(_sl(f, 1, 2, axis), _sl(f, 0, 1, axis)), h)
        last = ufuncs.divide(ufuncs.subtract(_sl(f, n - 1, n, axis), _sl(f, n - 2, n - 1, axis)), h)
    else:
        shape = [1] * len(shape_of(f))
        shape[axis] = n - 1
        dx = shape_ops.reshape(diff(h), shape)
        dx1, dx2 = _sl(dx, 0, n - 2, axis), _sl(dx, 1, n - 1, axis)
        f0, f1, f2 = _sl(f, 0, n - 2, axis), _sl(f, 1, n - 1, axis), _sl(f, 2, n, axis)
        num = ufuncs.add(ufuncs.subtract(ufuncs.multiply(ufuncs.square(dx1), f2),
                                         ufuncs.multiply(ufuncs.square(dx2), f0)),
                         ufuncs.multiply(ufuncs.subtract(ufuncs.square(dx2), ufuncs.square(dx1)), f1))
        inner = ufuncs.divide(num, ufuncs.multiply(ufuncs.multiply(dx1, dx2), ufuncs.add(dx1, dx2)))
        first = ufuncs.divide(ufuncs.subtract(_sl(f, 1, 2, axis), _sl(f, 0, 1, axis)),
                              _sl(dx, 0, 1, axis))
        last = ufuncs.divide(ufuncs.subtract(_sl(f, n - 1, n, axis), _sl(f, n - 2, n - 1, axis)),
                             _sl(dx, n - 2, n - 1, axis))
    out = shape_ops.concatenate([first, inner, last], axis=axis)
    return convert(out, _dt(f), get_aval(out).weak_type)


def gradient(f, *varargs, axis=None, edge_order=None):
    """The gradient of ``f`` by central differences inside and one-sided differences at the
    edges; ``varargs`` are one scalar spacing, one per axis, or 1-D coordinate arrays. Returns
    one array for a single axis, else a list."""
    if edge_order is not None and edge_order != 1:
        raise NotImplementedError(f"gradient: edge_order={edge_order} is not supported "
                                  "(only edge_order=1).")
    f = _inexact1("gradient", f)
    nd = len(shape_of(f))
    if nd == 0:
        raise ValueError("gradient requires f of at least one dimension.")
    axes = list(range(nd)) if axis is None else (
        [canonicalize_axis(axis, nd)] if isinstance(axis, (int, np.integer))
        else [canonicalize_axis(a, nd) for a in axis])
    if len(varargs) == 0:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and not shape_of(as_operand(varargs[0])):
        spacings = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError(f"gradient: expected 0, 1 or {len(axes)} spacing arguments (varargs), "
                        f"got {len(varargs)}.")
    outs = []
    for ax, h in zip(axes, spacings):
        h = _arr("gradient", h)
        if shape_of(f)[ax] < 2:
            raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                             f"2 elements are required (f has {shape_of(f)[ax]} along axis {ax}).")
        if len(shape_of(h)) > 1 or (shape_of(h) and shape_of(h)[0] != shape_of(f)[ax]):
            raise ValueError(f"gradient: a coordinate array (varargs) must be 1-D with the length "
                             f"of axis {ax} ({shape_of(f)[ax]}), got shape {shape_of(h)}.")
        outs.append(_gradient_1d(f, h, ax))
    return outs[0] if len(outs) == 1 else outs


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of ``y`` along ``axis`` by the trapezoidal rule, at sample points ``x``
    (1-D, or the shape of ``y``) or uniform spacing ``dx``."""
    y = _arr("trapezoid", y)
    if x is None:
        (y,) = promote_dtypes_inexact(y)
        d = _arr("trapezoid", dx)
    else:
        y, x = promote_dtypes_inexact(y, _arr("trapezoid", x))
    nd = len(shape_of(y))
    if nd == 0:
        raise ValueError("trapezoid requires y of at least one dimension.")
    given_axis, axis = axis, canonicalize_axis(axis, nd)
    if x is not None:
        if len(shape_of(x)) == 1:
            shape = [1] * nd
            shape[axis] = shape_of(x)[0]
            x = shape_ops.reshape(x, shape)
            d = diff(x, axis=axis)
        else:  # (as NumPy: the axis as given, counted in x's own dimensions)
            d = diff(x, axis=given_axis)
    n = shape_of(y)[axis]
    avg = ufuncs.multiply(ufuncs.add(_sl(y, 1, n, axis), _sl(y, 0, max(n - 1, 0), axis)), 0.5)
    return reductions.sum(ufuncs.multiply(d, avg), axis=axis)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 2- or 3-vectors along ``axisa``/``axisb`` (``axis`` sets all
    three); for two 2-vectors, the z component alone."""
    check_arraylike("cross", a, b)
    a, b = promote_dtypes(as_operand(a), as_operand(b))
    if _dt(a) == np.bool_:
        raise TypeError("cross does not support boolean inputs (a, b).")
    if axis is not None:
        axisa = axisb = axisc = axis
    a = shape_ops.moveaxis(a, axisa, -1)
    b = shape_ops.moveaxis(b, axisb, -1)
    na, nb = shape_of(a)[-1], shape_of(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError(f"Dimension must be either 2 or 3 for cross product (got a: {na}, b: {nb}).")
    ai = [lax.index_in_dim(a, i, -1, keepdims=False) for i in range(na)]
    bi = [lax.index_in_dim(b, i, -1, keepdims=False) for i in range(nb)]
    mul, sub = ufuncs.multiply, ufuncs.subtract
    z = sub(mul(ai[0], bi[1]), mul(ai[1], bi[0]))
    if na == 2 and nb == 2:
        return z
    zero = filled_like(ai[0], 0)
    a2 = ai[2] if na == 3 else zero
    b2 = bi[2] if nb == 3 else filled_like(bi[0], 0)
    x = sub(mul(ai[1], b2), mul(a2, bi[1]))
    y = sub(mul(a2, bi[0]), mul(ai[0], b2))
    x, y, z = shape_ops.broadcast_arrays(x, y, z)
    out = shape_ops.stack([x, y, z], axis=-1)
    return shape_ops.moveaxis(out, -1, axisc)


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of the points (xp, fp) (xp increasing) at ``x``; outside
    the range, ``left``/``right`` (default fp[0], fp[-1]); with ``period``, x is periodic."""
    check_arraylike("interp", x, xp, fp)
    xp, fp = as_operand(xp), as_operand(fp)
    if len(shape_of(xp)) != 1 or len(shape_of(fp)) != 1 or shape_of(xp) != shape_of(fp):
        raise ValueError(f"xp and fp must be one-dimensional arrays of equal size, got shapes "
                         f"{shape_of(xp)} and {shape_of(fp)}.")
    if shape_of(xp)[0] == 0:
        raise ValueError("interp: xp and fp must not be empty.")
    x, xp = promote_dtypes_inexact(as_operand(x), xp)
    (fp,) = promote_dtypes_inexact(fp)
    xp, fp = creation.asarray(xp), creation.asarray(fp)  # indexable by traced positions
    if period is not None:
        if isinstance(period, (int, float, np.number)) and period == 0:
            raise ValueError("period must be a non-zero value; got 0")
        period = ufuncs.abs(period)
        x = ufuncs.remainder(x, period)
        xp = ufuncs.remainder(xp, period)
        order = sorting.argsort(xp)
        xp, fp = xp[order], fp[order]
        xp = shape_ops.concatenate([ufuncs.subtract(xp[-1:], period), xp, ufuncs.add(xp[0:1], period)])
        fp = shape_ops.concatenate([fp[-1:], fp, fp[0:1]])
    m = shape_of(xp)[0]
    i = ufuncs.clip(sorting.searchsorted(xp, x, side="right"), 1, max(m - 1, 1))
    if m == 1:
        return convert(_full(shape_of(x), fp[0]), _dt(fp))
    x_lo, x_hi, f_lo, f_hi = xp[i - 1], xp[i], fp[i - 1], fp[i]
    dx = ufuncs.subtract(x_hi, x_lo)
    flat = lax.eq(dx, _c(0, dx))
    safe_dx = _where(flat, _c(1, dx), dx)
    t = ufuncs.divide(ufuncs.subtract(x, x_lo), safe_dx)
    t = convert(t, _real_dtype(_dt(fp)))
    f = ufuncs.add(f_lo, ufuncs.multiply(t, ufuncs.subtract(f_hi, f_lo)))
    f = _where(flat, f_hi, f)
    if period is None:
        f = _where(ufuncs.less(x, xp[0]), fp[0] if left is None else left, f)
        f = _where(ufuncs.greater(x, xp[-1]), fp[-1] if right is None else right, f)
    return convert(f, _dt(fp))


def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
    """Unwrap ``p`` along ``axis``: jumps larger than ``discont`` (default period/2) are
    replaced by their equivalent modulo ``period``."""
    p = _arr("unwrap", p)
    if not shape_of(p):
        raise ValueError("unwrap requires p of at least one dimension.")
    p, period = promote_dtypes_numeric(p, as_operand(period))
    if dtypes.is_complex(_dt(p)):
        raise ValueError("unwrap does not support complex input (p).")
    axis = canonicalize_axis(axis, len(shape_of(p)))
    dd = diff(p, axis=axis)
    integer = dtypes.is_integer(_dt(p))
    if discont is None:
        discont = ufuncs.floor_divide(period, 2) if integer else ufuncs.divide(period, 2)
    if integer:
        high = ufuncs.floor_divide(period, 2)
        ambiguous = ufuncs.equal(ufuncs.remainder(period, 2), 0)
    else:
        high, ambiguous = ufuncs.divide(period, 2), True
    low = ufuncs.negative(high)
    ddmod = ufuncs.add(ufuncs.remainder(ufuncs.subtract(dd, low), period), low)
    fix = ufuncs.logical_and(ufuncs.logical_and(ufuncs.equal(ddmod, low), ufuncs.greater(dd, 0)),
                             ambiguous)
    ddmod = _where(fix, high, ddmod)
    correct = _where(ufuncs.less(ufuncs.abs(dd), discont), 0, ufuncs.subtract(ddmod, dd))
    correct = convert(correct, _dt(p))
    cum = reductions.cumsum(correct, axis=axis)
    cum = shape_ops.concatenate([filled_like(_sl(p, 0, 1, axis), 0), cum], axis=axis)
    return ufuncs.add(p, cum)


# --- complex and dtype queries ---------------------------------------------------------------
def iscomplex(x):
    """Elementwise: whether the imaginary part is nonzero."""
    x = _arr("iscomplex", x)
    return ufuncs.not_equal(ufuncs.imag(x), 0)


def isreal(x):
    """Elementwise: whether the imaginary part is zero."""
    x = _arr("isreal", x)
    return ufuncs.equal(ufuncs.imag(x), 0)


def real_if_close(a, tol=100):
    """The real part of complex ``a`` if every imaginary part is below ``tol`` (in machine
    epsilons when tol > 1, else absolute); ``a`` unchanged otherwise. Needs concrete values."""
    a = creation.asarray(_arr("real_if_close", a))
    if not dtypes.is_complex(_dt(a)):
        return a
    eps = float(dtypes.finfo(_dt(a)).eps)
    bound = tol * eps if tol > 1 else tol
    close = reductions.all(ufuncs.less(ufuncs.abs(ufuncs.imag(a)), bound))
    return ufuncs.real(a) if bool(close) else a


_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def _dtype_of(name, x):
    if isinstance(x, (bool, int, float, complex)):
        raise TypeError(f"{name}() does not support Python ints, floats, and complex because the "
                        "result used to depend on the value: pass a dtype or an array.")
    dt = getattr(x, "dtype", None)
    return np.dtype(dt if isinstance(dt, np.dtype) else x)


def can_cast(from_, to, casting="safe"):
    """Whether a cast from the dtype of ``from_`` to ``to`` is allowed under ``casting``."""
    if casting not in _CASTINGS:
        raise ValueError(f"casting must be one of {', '.join(repr(c) for c in _CASTINGS)} "
                         f"(got {casting!r})")
    return bool(np.can_cast(_dtype_of("can_cast", from_), _dtype_of("can_cast", to), casting))


_KINDS = {
    "bool": dtypes.is_bool,
    "signed integer": lambda d: dtypes.is_integer(d) and not dtypes.is_unsigned(d),
    "unsigned integer": lambda d: dtypes.is_integer(d) and dtypes.is_unsigned(d),
    "integral": dtypes.is_integer,
    "real floating": dtypes.is_float,
    "complex floating": dtypes.is_complex,
    "numeric": lambda d: dtypes.is_integer(d) or dtypes.is_inexact(d),
}


def isdtype(dtype, kind):
    """Whether ``dtype`` is of ``kind``: a dtype, one of the Array API kind names ('bool',
    'signed integer', 'unsigned integer', 'integral', 'real floating', 'complex floating',
    'numeric'), or a tuple of these."""
    dt = np.dtype(dtype)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _KINDS:
                try:
                    k = np.dtype(k)
                except TypeError:
                    raise ValueError(f"Unrecognized kind={k!r} expected one of {list(_KINDS)}, "
                                     "or a compatible input for plax.numpy.dtype()") from None
            elif _KINDS[k](dt):
                return True
            else:
                continue
        if isinstance(k, (bool, int, float)) or k is None or isinstance(k, tuple):
            raise TypeError(f"Expected kind to be a dtype, string, or tuple; got kind={k!r}")
        try:
            if np.dtype(k) == dt:
                return True
        except TypeError:
            raise TypeError(f"Expected kind to be a dtype, string, or tuple; got kind={k!r}") from None
    return False


def common_type(*arrays):
    """The inexact scalar type common to ``arrays`` (integers count as the default float)."""
    if not arrays:
        raise TypeError("common_type() needs at least one array argument.")
    dts = []
    for a in arrays:
        dt = dtypes.result_type(_arr("common_type", a))
        if dtypes.is_bool(dt) or not (dtypes.is_integer(dt) or dtypes.is_inexact(dt)):
            raise TypeError(f"can't get common type for non-numeric array of dtype {dt.name}")
        dts.append(dt if dtypes.is_inexact(dt) else dtypes.default_float_dtype())
    return np.dtype(dtypes.result_type(*dts)).type
