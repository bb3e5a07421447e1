"""Arithmetic primitives: add, sub, mul, div, rem, pow, integer_pow, square, neg, abs,
sign, max, min, rounding, nextafter, and complex numbers (complex, real, imag, conj).

The linear ones (add, sub, neg, mul and div in one argument, the complex parts)
have transpose rules; lax broadcasts rank-0 and size-1 operands, so their
cotangents are summed back to the operand's shape (``unbroadcast``).
"""
from __future__ import annotations

import builtins
import enum
import operator

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, is_undefined, jvp_rules, register_lowering,
                             transpose_rules)
from plax.core.trace import get_aval
from plax.first_order import comparison as _cmp
from plax.first_order import conversion as _conv
from plax.first_order import shapes as _shapes
# arithmetic sits below transcendental and reductions in the family order
# (plax/lax/__init__.py): the rules built on their ops import them in the function body.
from plax.first_order.ad_util import (add_tangents, broadcast_tangent, defbilinear, defjvp, deflinear,
                              defzero)
from plax.first_order.batch_util import broadcasting, vectorized
from plax.first_order.common import (check_dtype, check_same_dtypes, check_same_shapes, complex_dtype,
                             complex_extremum, real_dtype, weak_of)
from plax.first_order.elementwise_util import binop, const, full_of, named, standard_lowering, unop

__all__ = ["add", "sub", "mul", "div", "rem", "pow", "integer_pow", "square", "neg", "abs", "sign",
           "max", "min", "floor", "ceil", "round", "RoundingMethod", "nextafter", "complex", "real",
           "imag", "conj"]


def unbroadcast(ct, aval: ShapedArray):
    """Sum ``ct`` down to ``aval``'s shape, undoing lax's implicit rank-0/size-1 broadcast."""
    shape = get_aval(ct).shape
    if shape == aval.shape:
        return ct
    from plax.first_order import reductions as _reductions
    if aval.shape == ():
        return _reductions.reduce_sum(ct, tuple(range(len(shape))))
    axes = tuple(i for i, (a, b) in enumerate(zip(aval.shape, shape)) if a == 1 and b != 1)
    return _shapes.reshape(_reductions.reduce_sum(ct, axes), aval.shape)


def _ct_for(arg, ct):
    return unbroadcast(ct, arg.aval) if is_undefined(arg) else None


# --- add, sub, neg ------------------------------------------------------------------------
add_p, add = binop("add", "numeric", "stablehlo.add", "Elementwise x + y.")
sub_p, sub = binop("sub", "numeric", "stablehlo.subtract", "Elementwise x - y.")
neg_p, neg = unop("neg", "numeric", "stablehlo.negate", "Elementwise negation: -x.")


def _add_jvp(primals, tangents):
    ans = add(*primals)
    shape = get_aval(ans).shape
    return ans, add_tangents(broadcast_tangent(tangents[0], shape),
                             broadcast_tangent(tangents[1], shape))


def _sub_jvp(primals, tangents):
    ans = sub(*primals)
    shape = get_aval(ans).shape
    tx, ty = tangents
    ty = ty if type(ty) is Zero else neg(ty)
    return ans, add_tangents(broadcast_tangent(tx, shape), broadcast_tangent(ty, shape))


def _neg_jvp(primals, tangents):
    (t,) = tangents
    return neg(primals[0]), t if type(t) is Zero else neg(t)


jvp_rules[add_p] = _add_jvp
jvp_rules[sub_p] = _sub_jvp
jvp_rules[neg_p] = _neg_jvp
transpose_rules[add_p] = lambda ct, x, y: [_ct_for(x, ct), _ct_for(y, ct)]
transpose_rules[sub_p] = lambda ct, x, y: [_ct_for(x, ct), _ct_for(y, neg(ct))]
transpose_rules[neg_p] = lambda ct, x: [neg(ct)]


# --- mul, div, rem --------------------------------------------------------------------------
mul_p, mul = binop("mul", "numeric", "stablehlo.multiply", "Elementwise x * y.")
div_p, div = binop("div", "numeric", "stablehlo.divide",
                   "Elementwise x / y (rounds toward zero for integers).")
rem_p, rem = binop("rem", "real_numeric", "stablehlo.remainder",
                   "Elementwise remainder with the sign of x (C's fmod).")


def _div_transpose(ct, x, y):
    if is_undefined(y):
        raise ValueError("div is linear in its numerator only.")
    return [unbroadcast(div(ct, y), x.aval), None]


def _trunc(q):
    return _cmp.select(_cmp.lt(q, const(q, 0)), ceil(q), floor(q))


defbilinear(mul_p, lambda ct, x, y: unbroadcast(mul(ct, y), x.aval),
            lambda ct, x, y: unbroadcast(mul(x, ct), y.aval))
# div is linear in x only, so it is not bilinear: its own jvp and a numerator-only transpose.
# d(x/y)/dy as JAX writes it, -g * x * y**-2 (not -g * (x/y) / y, which rounds differently).
defjvp(div_p, lambda g, ans, x, y: div(g, y),
       lambda g, ans, x, y: mul(mul(neg(g), x), integer_pow(y, -2)))
defjvp(rem_p, lambda g, ans, x, y: g, lambda g, ans, x, y: mul(neg(g), _trunc(div(x, y))))
transpose_rules[div_p] = _div_transpose


# --- pow, integer_pow, square ---------------------------------------------------------------
pow_p, pow = binop("pow", "inexact", "stablehlo.power",
                   "Elementwise x ** y (y may be an integer array).")


def _pow_abstract(x, y):
    """As JAX: an inexact base, and an exponent of the base's dtype or of any integer dtype."""
    check_dtype("pow", x, "inexact", "x")
    if not dtypes.is_integer(y.dtype):
        check_same_dtypes("pow", x, y)
    return ShapedArray(check_same_shapes("pow", x, y), x.dtype, weak_of(x, y))


def _pow_lowering(ctx, x, y):
    (ax, ay), out = ctx.avals_in, ctx.avals_out[0]
    y_aval = ay.update(dtype=ax.dtype)
    y = ctx.convert(y, ay, y_aval)  # an integer exponent becomes the base's dtype
    x = ctx.broadcast(x, ax, out, range(ax.ndim) if ax.ndim else ())
    y = ctx.broadcast(y, y_aval, out, range(ay.ndim) if ay.ndim else ())
    return ctx.op1("stablehlo.power", [x, y], [out, out])


def _pow_dx(g, ans, x, y):
    if not dtypes.is_inexact(get_aval(y).dtype):
        y = _conv.convert_element_type_p.bind(y, new_dtype=get_aval(x).dtype, weak_type=False,
                                              sharding=None)
    return mul(g, mul(y, pow(x, sub(y, const(y, 1)))))


def _pow_dy(g, ans, x, y):
    from plax.first_order import transcendental as _trans
    safe_log = _cmp.select(_cmp.eq(x, const(x, 0)), mul(x, const(x, 0)),
                           _trans.log(_cmp.select(_cmp.eq(x, const(x, 0)), add(x, const(x, 1)), x)))
    return mul(g, mul(safe_log, ans))


abstract_eval_rules[pow_p] = _pow_abstract  # replaces binop's: the exponent may be an integer
register_lowering(pow_p, _pow_lowering)
defjvp(pow_p, _pow_dx, _pow_dy)

integer_pow_p = Primitive("integer_pow")


def _integer_pow_abstract(x, *, y):
    check_dtype("integer_pow", x, "numeric")
    if dtypes.is_integer(x.dtype) and y < 0:
        raise TypeError(f"integer_pow with a negative exponent ({y}) needs an inexact dtype, "
                        f"got {x.dtype.name}.")
    return x


def _integer_pow_lowering(ctx, x, *, y):
    aval = ctx.avals_in[0]
    if y == 0:
        return ctx.broadcast(ctx.constant(1, ShapedArray((), aval.dtype)), ShapedArray((), aval.dtype), aval)
    # Square-and-multiply on |y|, then invert for a negative exponent.
    acc, base, n = None, x, builtins.abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else ctx.op1("stablehlo.multiply", [acc, base], [aval, aval])
        n >>= 1
        if n:
            base = ctx.op1("stablehlo.multiply", [base, base], [aval, aval])
    if y < 0:
        one = ctx.broadcast(ctx.constant(1, ShapedArray((), aval.dtype)), ShapedArray((), aval.dtype), aval)
        acc = ctx.op1("stablehlo.divide", [one, acc], [aval, aval])
    return acc


abstract_eval_rules[integer_pow_p] = _integer_pow_abstract
register_lowering(integer_pow_p, _integer_pow_lowering)
# x**0 is constant: its tangent is zeros that do not depend on g (as in JAX), so no
# cotangent flows back through it.
defjvp(integer_pow_p, lambda g, ans, x, *, y: (
    full_of(x, 0) if y == 0 else mul(g, mul(const(x, y), integer_pow(x, y - 1)))))
vectorized(integer_pow_p)


def integer_pow(x, y: int):
    """Elementwise x**y for a static Python integer y."""
    try:
        y = operator.index(y)
    except TypeError:
        raise TypeError(f"integer_pow's exponent y must be a static Python int, got {y!r}. "
                        "Use lax.pow for non-integer exponents.") from None
    return integer_pow_p.bind(x, y=y)


square_p, square = unop("square", "numeric", None, "Elementwise x*x.")
register_lowering(square_p, lambda ctx, x: ctx.op1("stablehlo.multiply", [x, x],
                                                   [ctx.avals_in[0]] * 2))
defjvp(square_p, lambda g, ans, x: mul(g, mul(const(x, 2), x)))


# --- abs, sign ------------------------------------------------------------------------------
abs_p, abs = unop("abs", "signed_numeric", "stablehlo.abs",
                  "Elementwise absolute value (magnitude for complex).", out_dtype=real_dtype)


def _complex_abs_dx(g, ans, x):
    """Re(conj(x / |x|) g), with 0 at x == 0 (dividing by 1 there instead of 0)."""
    safe = _cmp.select(_cmp.eq(ans, const(ans, 0)), full_of(ans, 1), ans)
    unit = div(x, _conv.convert_element_type_p.bind(safe, new_dtype=get_aval(x).dtype,
                                                    weak_type=False, sharding=None))
    return real(mul(conj(unit), g))


# As in JAX, the derivative of abs at 0 (and -0) is 1 for reals and 0 for complex numbers.
defjvp(abs_p, lambda g, ans, x: _cmp.select(_cmp.ge(x, const(x, 0)), g, neg(g))
       if not dtypes.is_complex(get_aval(x).dtype) else _complex_abs_dx(g, ans, x))

sign_p, sign = unop("sign", "numeric", None, "Elementwise sign: -1, 0 or 1 (x/|x| for complex).")


def _sign_lowering(ctx, x):
    aval = ctx.avals_in[0]
    if dtypes.is_unsigned(aval.dtype):
        zero = ctx.broadcast(ctx.constant(0, ShapedArray((), aval.dtype)),
                             ShapedArray((), aval.dtype), aval)
        nz = ctx.compare("NE", x, zero, aval)
        return ctx.convert(nz, aval.update(dtype=np.bool_), aval)
    return ctx.op1("stablehlo.sign", [x])


register_lowering(sign_p, _sign_lowering)
defzero(sign_p)


# --- max, min -------------------------------------------------------------------------------
def _minmax_lowering(hlo_op: str, direction: str):
    """XLA's own complex maximum/minimum is not lexicographic: compare (real, imag) by hand."""
    real_rule = standard_lowering(hlo_op)

    def rule(ctx, x, y):
        out = ctx.avals_out[0]
        if not dtypes.is_complex(out.dtype):
            return real_rule(ctx, x, y)
        (ax, ay), full = ctx.avals_in, out
        x = ctx.broadcast(x, ax, full, range(ax.ndim) if ax.ndim else ())
        y = ctx.broadcast(y, ay, full, range(ay.ndim) if ay.ndim else ())
        return complex_extremum(ctx, direction, x, y, full)
    return rule


def _balanced_share(wins, x, y, ans):
    """1 where ``wins(x, y)``, 1/2 where x and y tie, 0 elsewhere (max/min gradients).

    The masks compare the operands, not each with the result: compiled code may
    round a fused operand differently in the max and in a comparison with it,
    and then neither side would get the gradient.
    """
    one, half, zero = full_of(ans, 1), full_of(ans, 0.5), full_of(ans, 0)
    return _cmp.select(wins(x, y), one, _cmp.select(_cmp.eq(x, y), half, zero))


max_p, max = binop("max", "any", None,
                   "Elementwise maximum (NaN propagates; complex values compare lexicographically).")
register_lowering(max_p, _minmax_lowering("stablehlo.maximum", "GT"))
defjvp(max_p, lambda g, ans, x, y: mul(g, _balanced_share(_cmp.gt, x, y, ans)),
       lambda g, ans, x, y: mul(g, _balanced_share(_cmp.gt, y, x, ans)))

min_p, min = binop("min", "any", None,
                   "Elementwise minimum (NaN propagates; complex values compare lexicographically).")
register_lowering(min_p, _minmax_lowering("stablehlo.minimum", "LT"))
defjvp(min_p, lambda g, ans, x, y: mul(g, _balanced_share(_cmp.lt, x, y, ans)),
       lambda g, ans, x, y: mul(g, _balanced_share(_cmp.lt, y, x, ans)))


# --- rounding, nextafter --------------------------------------------------------------------
floor_p, floor = unop("floor", "float", "stablehlo.floor", "Elementwise floor.")
ceil_p, ceil = unop("ceil", "float", "stablehlo.ceil", "Elementwise ceiling.")
defzero(floor_p)
defzero(ceil_p)


class RoundingMethod(enum.IntEnum):
    """How ``lax.round`` breaks ties."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


round_p = Primitive("round")


def _round_abstract(x, *, rounding_method):
    check_dtype("round", x, "float")
    return x


def _round_lowering(ctx, x, *, rounding_method):
    op = ("stablehlo.round_nearest_even" if rounding_method == RoundingMethod.TO_NEAREST_EVEN
          else "stablehlo.round_nearest_afz")
    return ctx.op1(op, [x])


abstract_eval_rules[round_p] = _round_abstract
register_lowering(round_p, _round_lowering)
defzero(round_p)
vectorized(round_p)


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    """Elementwise rounding to the nearest integer-valued float."""
    return round_p.bind(x, rounding_method=RoundingMethod(rounding_method))


nextafter_p, nextafter = binop("nextafter", "float", "chlo.next_after",
                               "The next representable float after x in the direction of y.")
defzero(nextafter_p)


# --- complex numbers ------------------------------------------------------------------------
# All four are linear: real and imag transpose into complex, complex into real and imag.
complex_p = Primitive("complex")


def _complex_abstract(x, y):
    check_dtype("complex", x, "float")
    check_same_dtypes("complex", x, y)
    shape = check_same_shapes("complex", x, y)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"complex requires float32 or float64 parts, got {x.dtype.name}.")
    return ShapedArray(shape, complex_dtype(x.dtype), weak_of(x, y))


abstract_eval_rules[complex_p] = _complex_abstract
register_lowering(complex_p, standard_lowering("stablehlo.complex"))
deflinear(complex_p)
transpose_rules[complex_p] = lambda ct, x, y: [_ct_for(x, real_p.bind(ct)),
                                                _ct_for(y, neg(imag_p.bind(ct)))]
broadcasting(complex_p)
complex = named("complex", lambda x, y: complex_p.bind(x, y),
                "Build a complex array from real and imaginary parts.")

real_p, real = unop("real", "complex", "stablehlo.real", "Real part of a complex array.",
                    out_dtype=real_dtype)
deflinear(real_p)
transpose_rules[real_p] = lambda ct, x: [complex_p.bind(ct, full_of(ct, 0))]

imag_p, imag = unop("imag", "complex", "stablehlo.imag", "Imaginary part of a complex array.",
                    out_dtype=real_dtype)
deflinear(imag_p)
transpose_rules[imag_p] = lambda ct, x: [complex_p.bind(full_of(ct, 0), neg(ct))]

conj_p = Primitive("conj")


def _conj_abstract(x, **params):  # input_dtype matters to the transpose alone
    if not (dtypes.is_complex(x.dtype) or x.dtype in (np.float32, np.float64)):
        raise TypeError(f"conj does not accept dtype {x.dtype.name}. Accepted dtypes are "
                        "float32, float64 and complexfloating.")
    return x.update(dtype=x.dtype if dtypes.is_complex(x.dtype) else complex_dtype(x.dtype))


def _conj_lowering(ctx, x, **params):
    ain, aout = ctx.avals_in[0], ctx.avals_out[0]
    if dtypes.is_complex(ain.dtype):
        return ctx.op1("chlo.conj", [x])
    real = ctx.convert(x, ain, ShapedArray(ain.shape, real_dtype(aout.dtype)))
    zero = ctx.broadcast(ctx.constant(0, ShapedArray((), real_dtype(aout.dtype))),
                         ShapedArray((), real_dtype(aout.dtype)), ShapedArray(ain.shape, real_dtype(aout.dtype)))
    ravals = [ShapedArray(ain.shape, real_dtype(aout.dtype))] * 2
    return ctx.op1("stablehlo.complex", [real, zero], ravals)


def _conj_transpose(ct, x, *, input_dtype):
    return [conj(ct) if dtypes.is_complex(input_dtype) else real_p.bind(ct)]


abstract_eval_rules[conj_p] = _conj_abstract
register_lowering(conj_p, _conj_lowering)
deflinear(conj_p)
transpose_rules[conj_p] = _conj_transpose
vectorized(conj_p)


def conj(x):
    """Elementwise complex conjugate (a real input becomes complex)."""
    return conj_p.bind(x, input_dtype=get_aval(x).dtype)
