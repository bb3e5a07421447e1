"""Elementwise NumPy functions (ufuncs) on plax.lax."""
from __future__ import annotations

import functools

import numpy as np

from plax import lax
from plax.api.jit import eager_compiled
from plax.core import dtypes
from plax.numpy import util
from plax.numpy.error_checks import set_error_if_divide_by_zero, set_error_if_nan
from plax.numpy.util import (as_operand, broadcast_shapes, broadcast_to_shape, check_arraylike,
                             convert, promote_args, promote_args_inexact, promote_args_numeric,
                             promote_dtypes, promote_dtypes_inexact, promote_shapes, shape_of)
from plax.core.trace import get_aval
from plax.runtime.array import ARRAY_TYPES
from plax.runtime.dispatch import array_from_host
from plax.higher_order.custom_derivatives import custom_jvp


def _dtype(x):
    return get_aval(x).dtype


def _const(value, like):
    """A weakly typed scalar of ``like``'s dtype: it never changes the result's weak type."""
    return convert(value, _dtype(like), True)


def _promote_full(promote, name, *args):
    """``promote(name, *args)``, then every argument, scalars too, broadcast to the common shape.

    Needed before lax.select, which (as in JAX) does not broadcast its cases.
    """
    args = promote(name, *args)
    shape = broadcast_shapes(*(shape_of(a) for a in args))
    return [broadcast_to_shape(a, shape) for a in args]


def _as_array(x):
    """``x`` as a plax Array; a Python scalar keeps its weak type."""
    if isinstance(x, ARRAY_TYPES):
        return x
    aval = get_aval(x)
    return array_from_host(x, aval.dtype, aval.weak_type)


def _unary_inexact(lax_fn, name, nan_check=False):
    """``lax_fn`` on ``x`` promoted to inexact; ``nan_check``: a NaN it produces is an error
    when NaN checks are on (``error_checks``)."""
    def fn(x, /):
        check_arraylike(name, x)
        (x,) = promote_dtypes_inexact(x)
        out = lax_fn(x)
        if nan_check:
            set_error_if_nan(out)
        return out
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}, as numpy.{name} (integers are promoted to float)."
    return eager_compiled(fn)


def _binary(lax_fn, name, promote=promote_args, nan_check=False):
    def fn(x, y, /):
        out = lax_fn(*promote(name, x, y))
        if nan_check:
            set_error_if_nan(out)
        return out
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}, as numpy.{name}."
    return fn


sin = _unary_inexact(lax.sin, "sin", True)
cos = _unary_inexact(lax.cos, "cos", True)
tan = _unary_inexact(lax.tan, "tan", True)
arcsin = _unary_inexact(lax.asin, "arcsin", True)
arccos = _unary_inexact(lax.acos, "arccos", True)
arctan = _unary_inexact(lax.atan, "arctan")
sinh = _unary_inexact(lax.sinh, "sinh")
cosh = _unary_inexact(lax.cosh, "cosh")
tanh = _unary_inexact(lax.tanh, "tanh")
arcsinh = _unary_inexact(lax.asinh, "arcsinh")
arccosh = _unary_inexact(lax.acosh, "arccosh", True)
arctanh = _unary_inexact(lax.atanh, "arctanh", True)
exp = _unary_inexact(lax.exp, "exp")
exp2 = _unary_inexact(lax.exp2, "exp2")
expm1 = _unary_inexact(lax.expm1, "expm1")
log = _unary_inexact(lax.log, "log", True)
log1p = _unary_inexact(lax.log1p, "log1p", True)
sqrt = _unary_inexact(lax.sqrt, "sqrt", True)
cbrt = _unary_inexact(lax.cbrt, "cbrt")
asin, acos, atan = (_unary_inexact(lax_fn, name, check) for lax_fn, name, check in
                    ((lax.asin, "asin", True), (lax.acos, "acos", True),
                     (lax.atan, "atan", False)))
asinh, acosh, atanh = (_unary_inexact(lax_fn, name, check) for lax_fn, name, check in
                       ((lax.asinh, "asinh", False), (lax.acosh, "acosh", True),
                        (lax.atanh, "atanh", True)))


def log2(x, /):
    """Elementwise base-2 logarithm."""
    check_arraylike("log2", x)
    (x,) = promote_dtypes_inexact(x)
    out = lax.div(lax.log(x), lax.log(convert(2, _dtype(x))))
    set_error_if_nan(out)
    return out


def log10(x, /):
    """Elementwise base-10 logarithm."""
    check_arraylike("log10", x)
    (x,) = promote_dtypes_inexact(x)
    out = lax.div(lax.log(x), lax.log(convert(10, _dtype(x))))
    set_error_if_nan(out)
    return out


subtract = _binary(lax.sub, "subtract", nan_check=True)
maximum = _binary(lax.max, "maximum")
minimum = _binary(lax.min, "minimum")
arctan2 = _binary(lax.atan2, "arctan2", promote_args_inexact)
atan2 = util.alias(arctan2, "atan2")
nextafter = _binary(lax.nextafter, "nextafter", promote_args_inexact)
equal = _binary(lax.eq, "equal")
not_equal = _binary(lax.ne, "not_equal")


@eager_compiled
def add(x, y, /):
    """Elementwise sum (logical OR for booleans)."""
    x, y = promote_args("add", x, y)
    if _dtype(x) == np.bool_:
        return lax.bitwise_or(x, y)
    out = lax.add(x, y)
    set_error_if_nan(out)
    return out


def _ordering(lax_fn, strict_fn, name):
    """An order comparison; complex numbers compare lexicographically (real part first)."""
    def fn(x, y, /):
        x, y = promote_args(name, x, y)
        if not dtypes.is_complex(_dtype(x)):
            return lax_fn(x, y)
        rx, ry, ix, iy = lax.real(x), lax.real(y), lax.imag(x), lax.imag(y)
        return lax.bitwise_or(strict_fn(rx, ry), lax.bitwise_and(lax.eq(rx, ry), lax_fn(ix, iy)))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}, as numpy.{name} (complex values compare lexicographically)."
    return eager_compiled(fn)


less = _ordering(lax.lt, lax.lt, "less")
less_equal = _ordering(lax.le, lax.lt, "less_equal")
greater = _ordering(lax.gt, lax.gt, "greater")
greater_equal = _ordering(lax.ge, lax.gt, "greater_equal")


@eager_compiled
def multiply(x, y, /):
    """Elementwise product (logical AND for booleans)."""
    x, y = promote_args("multiply", x, y)
    return lax.bitwise_and(x, y) if _dtype(x) == np.bool_ else lax.mul(x, y)


def _bitwise(lax_fn, name):
    def fn(x, y, /):
        x, y = promote_args(name, x, y)
        if not (dtypes.is_integer(_dtype(x)) or dtypes.is_bool(_dtype(x))):
            raise TypeError(f"{name} requires integer or boolean arguments, got {_dtype(x).name}.")
        return lax_fn(x, y)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}, as numpy.{name}."
    return fn


bitwise_and = _bitwise(lax.bitwise_and, "bitwise_and")
bitwise_or = _bitwise(lax.bitwise_or, "bitwise_or")
bitwise_xor = _bitwise(lax.bitwise_xor, "bitwise_xor")


def bitwise_not(x, /):
    """Elementwise bitwise NOT (logical NOT for booleans)."""
    check_arraylike("bitwise_not", x)
    x = as_operand(x)
    if type(x) in (int, bool):
        x = convert(x, dtypes.result_type(x), type(x) is int)
    return lax.bitwise_not(x)


invert = util.alias(bitwise_not, "invert")
bitwise_invert = util.alias(bitwise_not, "bitwise_invert")


def bitwise_count(x, /):
    """The number of 1 bits in the magnitude of each element of integer or boolean ``x``,
    as uint8 (NumPy's ``bitwise_count``)."""
    check_arraylike("bitwise_count", x)
    x = as_operand(x)
    if type(x) in (int, bool):
        x = convert(x, dtypes.result_type(x), type(x) is int)
    dt = get_aval(x).dtype
    if dtypes.is_bool(dt):
        x = lax.convert_element_type(x, np.uint8)
    elif not dtypes.is_unsigned(dt) and dtypes.is_integer(dt):
        x = lax.abs(x)
    return lax.convert_element_type(lax.population_count(x), np.uint8)


def _to_bool(x):
    x = as_operand(x)
    dt = _dtype(x)
    if dt == np.bool_:
        return x
    if dtypes.is_complex(dt):  # a conversion would drop the imaginary part
        return lax.ne(x, _const(0, x))
    return convert(x, np.bool_)


def logical_and(x, y, /):
    """Elementwise truth-value AND."""
    x, y = promote_args("logical_and", x, y)
    return lax.bitwise_and(_to_bool(x), _to_bool(y))


def logical_or(x, y, /):
    """Elementwise truth-value OR."""
    x, y = promote_args("logical_or", x, y)
    return lax.bitwise_or(_to_bool(x), _to_bool(y))


def logical_xor(x, y, /):
    """Elementwise truth-value XOR."""
    x, y = promote_args("logical_xor", x, y)
    return lax.bitwise_xor(_to_bool(x), _to_bool(y))


def logical_not(x, /):
    """Elementwise truth-value NOT."""
    check_arraylike("logical_not", x)
    return lax.bitwise_not(_to_bool(x))


def left_shift(x, y, /):
    """Elementwise x << y."""
    x, y = promote_args_numeric("left_shift", x, y)
    return lax.shift_left(x, y)


def right_shift(x, y, /):
    """Elementwise x >> y (arithmetic for signed, logical for unsigned integers)."""
    x, y = promote_args_numeric("right_shift", x, y)
    if dtypes.is_unsigned(_dtype(x)):
        return lax.shift_right_logical(x, y)
    return lax.shift_right_arithmetic(x, y)


bitwise_left_shift = util.alias(left_shift, "bitwise_left_shift")
bitwise_right_shift = util.alias(right_shift, "bitwise_right_shift")


@eager_compiled
def true_divide(x, y, /):
    """Elementwise x / y, always in an inexact dtype."""
    x, y = promote_args_inexact("true_divide", x, y)
    set_error_if_divide_by_zero(y)
    out = lax.div(x, y)
    set_error_if_nan(out)
    return out


divide = util.alias(true_divide, "divide")


def _zero_like(x):
    return _const(0, x)


def floor_divide(x, y, /):
    """Elementwise x // y, rounding toward minus infinity like NumPy."""
    x, y = promote_args_numeric("floor_divide", x, y)
    set_error_if_divide_by_zero(y)
    dt = _dtype(x)
    if dtypes.is_unsigned(dt):
        return lax.div(x, y)
    if dtypes.is_integer(dt):
        q = lax.div(x, y)
        r = lax.rem(x, y)
        fix = lax.bitwise_and(lax.ne(r, _zero_like(r)),
                              lax.ne(lax.lt(x, _zero_like(x)), lax.lt(y, _zero_like(y))))
        return lax.select(fix, lax.sub(q, _const(1, q)), q)
    if dtypes.is_complex(dt):
        raise TypeError("floor_divide does not support complex numbers.")
    return _float_divmod(x, y)[0]


def _float_divmod(x, y):
    """Floor quotient and remainder with NumPy's rounding (the quotient of (x - mod) / y)."""
    mod = lax.rem(x, y)
    x, y = broadcast_to_shape(x, shape_of(mod)), broadcast_to_shape(y, shape_of(mod))
    # x // 0 is x / 0 (+-inf, or nan for 0 // 0) as in NumPy, not the nan of (x - nan) / 0.
    div = lax.div(lax.select(lax.eq(y, _zero_like(y)), x, lax.sub(x, mod)), y)
    fix = lax.bitwise_and(lax.ne(mod, _zero_like(mod)),
                          lax.ne(lax.lt(y, _zero_like(y)), lax.lt(mod, _zero_like(mod))))
    mod = lax.select(fix, lax.add(mod, y), mod)
    div = lax.select(fix, lax.sub(div, _const(1, div)), div)
    floordiv = lax.floor(div)
    floordiv = lax.select(lax.gt(lax.sub(div, floordiv), _const(0.5, div)),
                          lax.add(floordiv, _const(1, div)), floordiv)
    return floordiv, mod


def remainder(x, y, /):
    """Elementwise remainder with the sign of the divisor (NumPy's ``%``)."""
    x, y = promote_args_numeric("remainder", x, y)
    dt = _dtype(x)
    if dtypes.is_complex(dt):
        raise TypeError("remainder does not support complex numbers.")
    set_error_if_divide_by_zero(y)
    r = lax.rem(x, y)
    if dtypes.is_unsigned(dt):
        return r
    fix = lax.bitwise_and(lax.ne(r, _zero_like(r)),
                          lax.ne(lax.lt(r, _zero_like(r)), lax.lt(y, _zero_like(y))))
    out = lax.select(fix, lax.add(r, y), r)
    set_error_if_nan(out)
    return out


mod = util.alias(remainder, "mod")


def fmod(x, y, /):
    """Elementwise remainder with the sign of the dividend (C's fmod)."""
    x, y = promote_args_numeric("fmod", x, y)
    out = lax.rem(x, y)
    set_error_if_nan(out)
    return out


def divmod(x, y, /):
    """``(floor_divide(x, y), remainder(x, y))``."""
    return floor_divide(x, y), remainder(x, y)


def power(x, y, /):
    """Elementwise x ** y; integer powers of integers are computed exactly."""
    check_arraylike("power", x, y)
    if type(y) is int and not isinstance(x, (int, float, complex)):
        # A static exponent: exact repeated multiplication (negative ones need an inexact x).
        x = as_operand(x)
        if dtypes.is_bool(_dtype(x)):
            x = convert(x, dtypes.default_int_dtype())
        return lax.integer_pow(x, y)
    x, y = promote_args_numeric("power", x, y)
    dt = _dtype(x)
    if dtypes.is_inexact(dt):
        out = lax.pow(x, y)
        set_error_if_nan(out)
        return out
    return _integer_power(*_promote_full(promote_args, "power", x, y))


pow = util.alias(power, "pow")


def _integer_power(x, y):
    """x ** y for integer arrays of one shape, by square-and-multiply over the bits of y.

    Negative exponents give 0, except for bases 1 and -1, as in JAX.
    """
    dt = _dtype(x)
    zero, one = _const(0, x), _const(1, x)
    ones = util.filled_like(x, 1)
    negative = lax.lt(y, zero) if not dtypes.is_unsigned(dt) else None
    e = y if negative is None else lax.select(negative, lax.mul(y, zero), y)
    acc, base = ones, x
    for _ in range(dtypes.itemsize_bits(dt)):
        odd = lax.ne(lax.bitwise_and(e, one), zero)
        acc = lax.select(odd, lax.mul(acc, base), acc)
        base = lax.mul(base, base)
        e = lax.shift_right_logical(e, one)
    if negative is None:
        return acc
    y_odd = lax.ne(lax.bitwise_and(y, one), zero)
    minus_one_pow = lax.select(y_odd, lax.neg(ones), ones)
    neg_result = lax.select(lax.eq(x, one), ones,
                            lax.select(lax.eq(x, lax.neg(one)), minus_one_pow,
                                       util.filled_like(x, 0)))
    return lax.select(negative, neg_result, acc)


def float_power(x, y, /):
    """Elementwise x ** y in an inexact dtype (as JAX: not widened to float64)."""
    out = lax.pow(*promote_args_inexact("float_power", x, y))
    set_error_if_nan(out)
    return out


@eager_compiled
def negative(x, /):
    """Elementwise -x."""
    check_arraylike("negative", x)
    (x,) = promote_args("negative", x)
    if _dtype(x) == np.bool_:
        raise TypeError("The numpy boolean negative, the `-` operator, is not supported, "
                        "use the `~` operator or the logical_not function instead.")
    return lax.neg(x)


def positive(x, /):
    """Elementwise +x (a copy of x)."""
    check_arraylike("positive", x)
    (x,) = promote_args("positive", x)
    return _as_array(x)


def absolute(x, /):
    """Elementwise absolute value."""
    check_arraylike("absolute", x)
    (x,) = promote_args("absolute", x)
    dt = _dtype(x)
    if dtypes.is_unsigned(dt) or dtypes.is_bool(dt):
        return _as_array(x)
    return lax.abs(x)


def abs(x, /):  # noqa: A001 (numpy's name; its own function, named abs, as JAX's)
    """Elementwise absolute value (``absolute``)."""
    return absolute(x)


def fabs(x, /):
    """Elementwise absolute value as a float."""
    (x,) = promote_args_inexact("fabs", x)
    if dtypes.is_complex(_dtype(x)):
        raise TypeError("fabs does not support complex numbers.")
    return lax.abs(x)


def sign(x, /):
    """Elementwise sign (-1, 0, 1)."""
    check_arraylike("sign", x)
    (x,) = promote_args("sign", x)
    return lax.sign(x)


def floor(x, /):
    """Elementwise floor (integers unchanged)."""
    check_arraylike("floor", x)
    (x,) = promote_args("floor", x)
    return lax.floor(x) if dtypes.is_inexact(_dtype(x)) else _as_array(x)


def ceil(x, /):
    """Elementwise ceiling (integers unchanged)."""
    check_arraylike("ceil", x)
    (x,) = promote_args("ceil", x)
    return lax.ceil(x) if dtypes.is_inexact(_dtype(x)) else _as_array(x)


def trunc(x, /):
    """Elementwise rounding toward zero."""
    check_arraylike("trunc", x)
    (x,) = promote_args("trunc", x)
    if not dtypes.is_inexact(_dtype(x)):
        return _as_array(x)
    return lax.select(lax.lt(x, _zero_like(x)), lax.ceil(x), lax.floor(x))


fix = util.alias(trunc, "fix")


def round(a, decimals: int = 0, out=None):
    """Round half to even to ``decimals`` places, as numpy.round."""
    if out is not None:
        raise ValueError("The 'out' argument to round is not supported: plax arrays are immutable.")
    check_arraylike("round", a)
    (a,) = promote_args("round", a)
    dt = _dtype(a)
    if not dtypes.is_inexact(dt):
        if decimals >= 0:
            return _as_array(a)
        as_float = convert(a, dtypes.default_float_dtype())
        return convert(_round_float(as_float, decimals, _dtype(as_float)), dt)
    if dtypes.is_complex(dt):
        return lax.complex(_round_float(lax.real(a), decimals, dt), _round_float(lax.imag(a), decimals, dt))
    return _round_float(a, decimals, dt)


def _round_float(x, decimals, dt):
    if decimals == 0:
        return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
    factor = _const(10.0 ** decimals, x)
    return lax.div(lax.round(lax.mul(x, factor), lax.RoundingMethod.TO_NEAREST_EVEN), factor)


around = util.alias(round, "around")


def rint(x, /):
    """Round to the nearest integer-valued float, half to even."""
    check_arraylike("rint", x)
    (x,) = promote_dtypes_inexact(x)
    return round(x)


def square(x, /):
    """Elementwise x * x."""
    check_arraylike("square", x)
    (x,) = promote_args_numeric("square", x)
    return lax.square(x)


def reciprocal(x, /):
    """Elementwise 1 / x."""
    check_arraylike("reciprocal", x)
    (x,) = promote_args_inexact("reciprocal", x)
    return lax.integer_pow(x, -1)


def deg2rad(x, /):
    """Degrees to radians."""
    (x,) = promote_args_inexact("deg2rad", x)
    return lax.mul(x, _const(np.pi / 180, x))


def rad2deg(x, /):
    """Radians to degrees."""
    (x,) = promote_args_inexact("rad2deg", x)
    return lax.mul(x, _const(180 / np.pi, x))


radians = util.alias(deg2rad, "radians")
degrees = util.alias(rad2deg, "degrees")


def hypot(x, y, /):
    """Elementwise sqrt(x**2 + y**2), without needless overflow (inf if either is inf)."""
    x, y = _promote_full(promote_args_inexact, "hypot", x, y)
    if dtypes.is_complex(_dtype(x)):
        raise ValueError("plax.numpy.hypot is not defined for complex inputs; pass abs(x) instead.")
    x, y = lax.abs(x), lax.abs(y)
    big, small = lax.max(x, y), lax.min(x, y)
    safe = lax.select(lax.eq(big, _zero_like(big)), util.filled_like(big, 1), big)
    ratio = lax.div(small, safe)
    r = lax.mul(big, lax.sqrt(lax.add(_const(1, big), lax.mul(ratio, ratio))))
    r = lax.select(lax.eq(big, _zero_like(big)), big, r)  # keeps 0 * inf out of gradients
    inf = _const(np.inf, x)
    return lax.select(lax.bitwise_or(lax.eq(x, inf), lax.eq(y, inf)),
                      util.filled_like(x, np.inf), r)


def logaddexp(x, y, /):
    """Elementwise log(exp(x) + exp(y)), computed stably."""
    x, y = promote_args_inexact("logaddexp", x, y)
    if dtypes.is_complex(_dtype(x)):
        return _complex_logaddexp(*_promote_full(promote_args, "logaddexp", x, y))
    return _real_logaddexp(x, y)


@custom_jvp
def _real_logaddexp(x, y):
    amax = lax.max(x, y)
    delta = lax.sub(x, y)
    stable = lax.add(amax, lax.log1p(lax.exp(lax.neg(lax.abs(delta)))))
    return lax.select(lax.ne(delta, delta), lax.add(x, y), stable)


def _finite_or_zero(x):
    """``x`` with +inf replaced by 0 (so that exp(x - out) is 1, not nan, when out is +inf)."""
    return lax.select(lax.eq(x, _const(np.inf, x)), lax.full_like(x, 0), x)


@_real_logaddexp.defjvp
def _real_logaddexp_jvp(primals, tangents):
    # The weights exp(x - out) and exp(y - out) sum to one: at x == y each is 1/2 (the
    # max/abs form of the primal would differentiate to 0 there).
    (x, y), (tx, ty) = primals, tangents
    out = _real_logaddexp(x, y)
    wx = lax.exp(lax.sub(_finite_or_zero(x), _finite_or_zero(out)))
    wy = lax.exp(lax.sub(_finite_or_zero(y), _finite_or_zero(out)))
    return out, lax.add(lax.mul(tx, wx), lax.mul(ty, wy))


def _complex_logaddexp(x, y):
    """a + log1p(exp(b - a)), with a the argument of larger real part."""
    x_first = lax.ge(lax.real(x), lax.real(y))
    a, b = lax.select(x_first, x, y), lax.select(x_first, y, x)
    return lax.add(a, lax.log1p(lax.exp(lax.sub(b, a))))


def logaddexp2(x, y, /):
    """Elementwise log2(2**x + 2**y), computed stably."""
    x, y = promote_args_inexact("logaddexp2", x, y)
    ln2 = _const(np.log(2), x)
    return lax.div(logaddexp(lax.mul(x, ln2), lax.mul(y, ln2)), ln2)  # differentiable through logaddexp


def isnan(x, /):
    """Elementwise test for NaN."""
    check_arraylike("isnan", x)
    x = as_operand(x)
    return lax.ne(x, x)


def isinf(x, /):
    """Elementwise test for positive or negative infinity."""
    check_arraylike("isinf", x)
    (x,) = promote_args("isinf", x)
    dt = _dtype(x)
    if dtypes.is_complex(dt):
        return logical_or(isinf(lax.real(x)), isinf(lax.imag(x)))
    if not dtypes.is_float(dt):
        return lax.ne(x, x)
    return lax.eq(lax.abs(x), _const(np.inf, x))


def _check_not_complex(name, x):
    if dtypes.is_complex(_dtype(x)):
        raise ValueError(f"plax.numpy.{name} is not defined for complex inputs "
                         f"(got {_dtype(x).name}); apply it to the real and imaginary parts.")


def isposinf(x, /):
    """Elementwise test for +inf."""
    (x,) = promote_args("isposinf", x)
    _check_not_complex("isposinf", x)
    if not dtypes.is_float(_dtype(x)):
        return lax.ne(x, x)
    return lax.eq(x, _const(np.inf, x))


def isneginf(x, /):
    """Elementwise test for -inf."""
    (x,) = promote_args("isneginf", x)
    _check_not_complex("isneginf", x)
    if not dtypes.is_float(_dtype(x)):
        return lax.ne(x, x)
    return lax.eq(x, _const(-np.inf, x))


def isfinite(x, /):
    """Elementwise test for finite values."""
    check_arraylike("isfinite", x)
    (x,) = promote_args("isfinite", x)
    dt = _dtype(x)
    if dtypes.is_complex(dt):
        return logical_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    if not dtypes.is_float(dt):
        return lax.eq(x, x)
    return lax.is_finite(x)


def signbit(x, /):
    """Elementwise test for a set sign bit (true for -0.0)."""
    check_arraylike("signbit", x)
    (x,) = promote_args("signbit", x)
    dt = _dtype(x)
    if dtypes.is_unsigned(dt) or dt == np.bool_:
        return lax.ne(x, x)
    if dtypes.is_integer(dt):
        return lax.lt(x, _zero_like(x))
    _check_not_complex("signbit", x)
    int_dt = {16: np.int16, 32: np.int32, 64: np.int64}[dtypes.itemsize_bits(dt)]
    return lax.lt(lax.bitcast_convert_type(x, int_dt), convert(0, int_dt))


def copysign(x, y, /):
    """The magnitude of x with the sign of y."""
    x, y = _promote_full(promote_args_inexact, "copysign", x, y)
    if dtypes.is_complex(_dtype(x)):
        raise TypeError("copysign does not support complex numbers.")
    return lax.select(signbit(y), lax.neg(lax.abs(x)), lax.abs(x))


def fmax(x, y, /):
    """Elementwise maximum that ignores NaNs (ties pick ``y``, gradients included)."""
    x, y = _promote_full(promote_args, "fmax", x, y)
    return lax.select(lax.bitwise_or(greater(x, y), lax.ne(y, y)), x, y)


def fmin(x, y, /):
    """Elementwise minimum that ignores NaNs (ties pick ``y``, gradients included)."""
    x, y = _promote_full(promote_args, "fmin", x, y)
    return lax.select(lax.bitwise_or(less(x, y), lax.ne(y, y)), x, y)


def real(x, /):
    """The real part (real inputs are returned unchanged)."""
    check_arraylike("real", x)
    x = as_operand(x)
    return lax.real(x) if dtypes.is_complex(_dtype(x)) else _as_array(x)


def imag(x, /):
    """The imaginary part (zeros for real inputs)."""
    check_arraylike("imag", x)
    x = as_operand(x)
    return lax.imag(x) if dtypes.is_complex(_dtype(x)) else _as_array(util.filled_like(x, 0))


def conjugate(x, /):
    """The complex conjugate (real inputs are returned unchanged)."""
    check_arraylike("conjugate", x)
    x = as_operand(x)
    return lax.conj(x) if dtypes.is_complex(_dtype(x)) else _as_array(x)


conj = util.alias(conjugate, "conj")


def angle(z, deg: bool = False):
    """The argument of complex numbers, in radians (or degrees)."""
    (z,) = promote_dtypes_inexact(z)
    if dtypes.is_complex(_dtype(z)):
        re, im = lax.real(z), lax.imag(z)
    else:
        re, im = z, util.filled_like(z, 0)  # not z * 0, which is -0.0 (angle -pi) for negative z
    out = lax.atan2(im, re)
    return rad2deg(out) if deg else out


def heaviside(x1, x2, /):
    """0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0."""
    # JAX broadcasts heaviside's arguments without the jax_numpy_rank_promotion check
    x1, x2 = _promote_full(functools.partial(promote_args_inexact, check_rank=False),
                           "heaviside", x1, x2)
    zero = _zero_like(x1)
    out = lax.select(lax.lt(x1, zero), util.filled_like(x1, 0),
                     lax.select(lax.eq(x1, zero), x2, util.filled_like(x1, 1)))
    return lax.select(lax.ne(x1, x1), x1, out)  # NaN stays NaN


def clip(arr=None, /, min=None, max=None, *, a=None, a_min=None, a_max=None):
    """Limit values to ``[min, max]`` (either bound may be None)."""
    if arr is None:
        arr = a
    if min is None:
        min = a_min
    if max is None:
        max = a_max
    if arr is None:
        raise TypeError("clip() needs an array argument.")
    check_arraylike("clip", arr)
    if any(isinstance(v, complex) or (hasattr(v, "dtype") and dtypes.is_complex(v.dtype))
           for v in (arr, min, max)):
        raise ValueError("Clip received a complex value either through the input or the "
                         "min/max keywords. Complex values have no ordering and cannot be "
                         "clipped. Take the real or imaginary part first (jnp.real/jnp.imag).")
    if min is not None:
        arr = maximum(min, arr)
    if max is not None:
        arr = minimum(max, arr)
    return as_operand(arr)


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """``x`` where ``condition`` is true, else ``y`` (with broadcasting and promotion)."""
    if x is None and y is None:  # the one-argument form is nonzero
        from plax.numpy.sorting import nonzero
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise TypeError("where requires ndarray or scalar arguments, got <class 'NoneType'> at "
                        f"position {1 if x is None else 2}: pass both x and y, or neither.")
    check_arraylike("where", condition, x, y)
    x, y = promote_dtypes(x, y)
    cond = _to_bool(condition)
    # NumPy broadcasting with no jax_numpy_rank_promotion check: JAX's where makes none.
    shape = broadcast_shapes(*(shape_of(v) for v in (cond, x, y)))
    cond, x, y = (broadcast_to_shape(v, shape) for v in (cond, x, y))
    return lax.select(cond, x, y)
