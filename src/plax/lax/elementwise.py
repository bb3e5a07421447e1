"""Elementwise primitives: math, comparisons, bitwise ops, select, clamp, conversions.

Each primitive is declared by one row (name, accepted dtypes, StableHLO op),
which registers its abstract evaluation and lowering; the few with special
typing or lowering get their rules written out below the tables.
"""
from __future__ import annotations

import builtins
import enum
import operator

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.jaxpr import param_printers
from plax.core.primitive import Primitive, abstract_eval_rules
from plax.lax.common import complex_extremum, check_dtype, check_same_dtypes, check_same_shapes, weak_of
from plax.lowering.stablehlo import lowering_rules

_PUBLIC: dict = {}


def _public(name: str, fn, doc: str):
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__doc__ = doc
    _PUBLIC[name] = fn
    return fn


def _simple_lowering(op: str):
    """Lower to one StableHLO op, first broadcasting rank-0 and size-1 operands."""
    def rule(ctx, *args, **params):
        out_shape = ctx.avals_out[0].shape
        in_avals = ctx.avals_in
        if any(a.shape != out_shape for a in in_avals):
            args = [ctx.broadcast(x, a, a.update(shape=out_shape), range(a.ndim) if a.ndim else ())
                    for x, a in zip(args, in_avals)]
            in_avals = [a.update(shape=out_shape) for a in in_avals]
        return ctx.op1(op, list(args), in_avals)
    return rule


# --- unary ops ----------------------------------------------------------------------
def _unary(name: str, category: str, hlo_op: str | None, doc: str, public: str | None = None):
    prim = Primitive(name)

    def abstract(x, **params):
        check_dtype(name, x, category)
        return x

    abstract_eval_rules[prim] = abstract
    if hlo_op is not None:
        lowering_rules[prim] = _simple_lowering(hlo_op)
    _public(public or name, lambda x: prim.bind(x), doc)
    return prim


neg_p = _unary("neg", "numeric", "stablehlo.negate", "Elementwise negation: -x.")
floor_p = _unary("floor", "float", "stablehlo.floor", "Elementwise floor.")
ceil_p = _unary("ceil", "float", "stablehlo.ceil", "Elementwise ceiling.")
exp_p = _unary("exp", "inexact", "stablehlo.exponential", "Elementwise e**x.")
exp2_p = _unary("exp2", "inexact", None, "Elementwise 2**x.")
log_p = _unary("log", "inexact", "stablehlo.log", "Elementwise natural logarithm.")
expm1_p = _unary("expm1", "inexact", "stablehlo.exponential_minus_one", "Elementwise e**x - 1.")
log1p_p = _unary("log1p", "inexact", "stablehlo.log_plus_one", "Elementwise log(1 + x).")
tanh_p = _unary("tanh", "inexact", "stablehlo.tanh", "Elementwise hyperbolic tangent.")
logistic_p = _unary("logistic", "inexact", "stablehlo.logistic", "Elementwise 1 / (1 + e**-x).")
sin_p = _unary("sin", "inexact", "stablehlo.sine", "Elementwise sine.")
cos_p = _unary("cos", "inexact", "stablehlo.cosine", "Elementwise cosine.")
tan_p = _unary("tan", "inexact", "stablehlo.tan", "Elementwise tangent.")
asin_p = _unary("asin", "inexact", "chlo.asin", "Elementwise arc sine.")
acos_p = _unary("acos", "inexact", "chlo.acos", "Elementwise arc cosine.")
atan_p = _unary("atan", "inexact", "chlo.atan", "Elementwise arc tangent.")
sinh_p = _unary("sinh", "inexact", "chlo.sinh", "Elementwise hyperbolic sine.")
cosh_p = _unary("cosh", "inexact", "chlo.cosh", "Elementwise hyperbolic cosine.")
asinh_p = _unary("asinh", "inexact", "chlo.asinh", "Elementwise inverse hyperbolic sine.")
acosh_p = _unary("acosh", "inexact", "chlo.acosh", "Elementwise inverse hyperbolic cosine.")
atanh_p = _unary("atanh", "inexact", "chlo.atanh", "Elementwise inverse hyperbolic tangent.")
sqrt_p = _unary("sqrt", "inexact", "stablehlo.sqrt", "Elementwise square root.")
rsqrt_p = _unary("rsqrt", "inexact", "stablehlo.rsqrt", "Elementwise 1 / sqrt(x).")
cbrt_p = _unary("cbrt", "float", "stablehlo.cbrt", "Elementwise cube root.")
erf_p = _unary("erf", "float", "chlo.erf", "Elementwise error function.")
erfc_p = _unary("erfc", "float", "chlo.erfc", "Elementwise complementary error function.")
erf_inv_p = _unary("erf_inv", "float", "chlo.erf_inv", "Elementwise inverse error function.")
lgamma_p = _unary("lgamma", "float", "chlo.lgamma", "Elementwise log of the absolute gamma function.")
digamma_p = _unary("digamma", "float", "chlo.digamma", "Elementwise digamma function.")
not_p = _unary("not", "intbool", "stablehlo.not", "Elementwise bitwise NOT (logical NOT for bool).",
               public="bitwise_not")
population_count_p = _unary("population_count", "int", "stablehlo.popcnt",
                            "Elementwise count of set bits.")
clz_p = _unary("clz", "int", "stablehlo.count_leading_zeros", "Elementwise count of leading zero bits.")
sign_p = _unary("sign", "numeric", None, "Elementwise sign: -1, 0 or 1 (x/|x| for complex).")


def _exp2_lowering(ctx, x):
    aval = ctx.avals_in[0]
    ln2 = ctx.broadcast(ctx.constant(np.log(2.0), ShapedArray((), aval.dtype)),
                        ShapedArray((), aval.dtype), aval)
    return ctx.op1("stablehlo.exponential", [ctx.op1("stablehlo.multiply", [x, ln2], [aval, aval])])


lowering_rules[exp2_p] = _exp2_lowering


def _sign_lowering(ctx, x):
    aval = ctx.avals_in[0]
    if dtypes.is_unsigned(aval.dtype):
        zero = ctx.broadcast(ctx.constant(0, ShapedArray((), aval.dtype)),
                             ShapedArray((), aval.dtype), aval)
        nz = ctx.compare("NE", x, zero, aval)
        return ctx.convert(nz, aval.update(dtype=np.bool_), aval)
    return ctx.op1("stablehlo.sign", [x])


lowering_rules[sign_p] = _sign_lowering


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
lowering_rules[round_p] = _round_lowering


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    """Elementwise rounding to the nearest integer-valued float."""
    return round_p.bind(x, rounding_method=RoundingMethod(rounding_method))


# Unary ops whose result dtype differs from the input's.
def _unary_to(name, category, out_dtype_of, hlo_op, doc, public=None):
    prim = Primitive(name)

    def abstract(x):
        check_dtype(name, x, category)
        return ShapedArray(x.shape, out_dtype_of(x.dtype), x.weak_type)

    abstract_eval_rules[prim] = abstract
    lowering_rules[prim] = _simple_lowering(hlo_op)
    _public(public or name, lambda x: prim.bind(x), doc)
    return prim


def _real_dtype(dt):
    return np.dtype(np.float64) if dt == np.complex128 else (
        np.dtype(np.float32) if dt == np.complex64 else dt)


def _complex_dtype(dt):
    return np.dtype(np.complex128) if dt == np.float64 else np.dtype(np.complex64)


is_finite_p = _unary_to("is_finite", "float", lambda d: np.dtype(np.bool_), "stablehlo.is_finite",
                        "Elementwise test for finite (not inf, not NaN) values.")
abs_p = _unary_to("abs", "signed_numeric", _real_dtype, "stablehlo.abs",
                  "Elementwise absolute value (magnitude for complex).")
real_p = _unary_to("real", "complex", _real_dtype, "stablehlo.real", "Real part of a complex array.")
imag_p = _unary_to("imag", "complex", _real_dtype, "stablehlo.imag", "Imaginary part of a complex array.")

conj_p = Primitive("conj")


def _conj_abstract(x, *, input_dtype):
    if not (dtypes.is_complex(x.dtype) or x.dtype in (np.float32, np.float64)):
        raise TypeError(f"conj does not accept dtype {x.dtype.name}. Accepted dtypes are "
                        "float32, float64 and complexfloating.")
    return x.update(dtype=x.dtype if dtypes.is_complex(x.dtype) else _complex_dtype(x.dtype))


def _conj_lowering(ctx, x, *, input_dtype):
    ain, aout = ctx.avals_in[0], ctx.avals_out[0]
    if dtypes.is_complex(ain.dtype):
        return ctx.op1("chlo.conj", [x])
    real = ctx.convert(x, ain, ShapedArray(ain.shape, _real_dtype(aout.dtype)))
    zero = ctx.broadcast(ctx.constant(0, ShapedArray((), _real_dtype(aout.dtype))),
                         ShapedArray((), _real_dtype(aout.dtype)), ShapedArray(ain.shape, _real_dtype(aout.dtype)))
    ravals = [ShapedArray(ain.shape, _real_dtype(aout.dtype))] * 2
    return ctx.op1("stablehlo.complex", [real, zero], ravals)


abstract_eval_rules[conj_p] = _conj_abstract
lowering_rules[conj_p] = _conj_lowering


def conj(x):
    """Elementwise complex conjugate (a real input becomes complex)."""
    from plax.core.trace import get_aval
    return conj_p.bind(x, input_dtype=get_aval(x).dtype)


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
lowering_rules[integer_pow_p] = _integer_pow_lowering


def integer_pow(x, y: int):
    """Elementwise x**y for a static Python integer y."""
    try:
        y = operator.index(y)
    except TypeError:
        raise TypeError(f"integer_pow's exponent y must be a static Python int, got {y!r}. "
                        "Use lax.pow for non-integer exponents.") from None
    return integer_pow_p.bind(x, y=y)


square_p = _unary("square", "numeric", None, "Elementwise x*x.")
lowering_rules[square_p] = lambda ctx, x: ctx.op1("stablehlo.multiply", [x, x],
                                                  [ctx.avals_in[0]] * 2)


# --- binary ops ---------------------------------------------------------------------
def _binary(name: str, category: str, hlo_op: str | None, doc: str, public: str | None = None,
            out_bool: bool = False):
    prim = Primitive(name)

    def abstract(x, y):
        check_dtype(name, x, category)
        check_dtype(name, y, category)
        dt = check_same_dtypes(public or name, x, y)
        shape = check_same_shapes(name, x, y)
        if out_bool:
            return ShapedArray(shape, np.bool_, weak_of(x, y))
        return ShapedArray(shape, dt, weak_of(x, y))

    abstract_eval_rules[prim] = abstract
    if hlo_op is not None:
        lowering_rules[prim] = _simple_lowering(hlo_op)
    _public(public or name, lambda x, y: prim.bind(x, y), doc)
    return prim


add_p = _binary("add", "numeric", "stablehlo.add", "Elementwise x + y.")
sub_p = _binary("sub", "numeric", "stablehlo.subtract", "Elementwise x - y.")
mul_p = _binary("mul", "numeric", "stablehlo.multiply", "Elementwise x * y.")
div_p = _binary("div", "numeric", "stablehlo.divide",
                "Elementwise x / y (rounds toward zero for integers).")
rem_p = _binary("rem", "real_numeric", "stablehlo.remainder",
                "Elementwise remainder with the sign of x (C's fmod).")
pow_p = _binary("pow", "inexact", "stablehlo.power", "Elementwise x ** y (y may be an integer array).")


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


abstract_eval_rules[pow_p] = _pow_abstract
lowering_rules[pow_p] = _pow_lowering
max_p = _binary("max", "any", "stablehlo.maximum",
                "Elementwise maximum (NaN propagates; complex values compare lexicographically).")
min_p = _binary("min", "any", "stablehlo.minimum",
                "Elementwise minimum (NaN propagates; complex values compare lexicographically).")
atan2_p = _binary("atan2", "inexact", "stablehlo.atan2", "Elementwise arc tangent of x / y.")
nextafter_p = _binary("nextafter", "float", "chlo.next_after",
                      "The next representable float after x in the direction of y.")
and_p = _binary("and", "intbool", "stablehlo.and", "Elementwise bitwise AND.", public="bitwise_and")
or_p = _binary("or", "intbool", "stablehlo.or", "Elementwise bitwise OR.", public="bitwise_or")
xor_p = _binary("xor", "intbool", "stablehlo.xor", "Elementwise bitwise XOR.", public="bitwise_xor")
shift_left_p = _binary("shift_left", "int", "stablehlo.shift_left", "Elementwise x << y.")
shift_right_arithmetic_p = _binary("shift_right_arithmetic", "int", "stablehlo.shift_right_arithmetic",
                                   "Elementwise arithmetic (sign-filling) right shift.")
shift_right_logical_p = _binary("shift_right_logical", "int", "stablehlo.shift_right_logical",
                                "Elementwise logical (zero-filling) right shift.")

complex_p = Primitive("complex")


def _complex_abstract(x, y):
    check_dtype("complex", x, "float")
    check_same_dtypes("complex", x, y)
    shape = check_same_shapes("complex", x, y)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"complex requires float32 or float64 parts, got {x.dtype.name}.")
    return ShapedArray(shape, _complex_dtype(x.dtype), weak_of(x, y))


abstract_eval_rules[complex_p] = _complex_abstract
lowering_rules[complex_p] = _simple_lowering("stablehlo.complex")
_public("complex", lambda x, y: complex_p.bind(x, y),
        "Build a complex array from real and imaginary parts.")


def _minmax_lowering(hlo_op: str, direction: str):
    """XLA's own complex maximum/minimum is not lexicographic: compare (real, imag) by hand."""
    real_rule = _simple_lowering(hlo_op)

    def rule(ctx, x, y):
        out = ctx.avals_out[0]
        if not dtypes.is_complex(out.dtype):
            return real_rule(ctx, x, y)
        (ax, ay), full = ctx.avals_in, out
        x = ctx.broadcast(x, ax, full, range(ax.ndim) if ax.ndim else ())
        y = ctx.broadcast(y, ay, full, range(ay.ndim) if ay.ndim else ())
        return complex_extremum(ctx, direction, x, y, full)
    return rule


lowering_rules[max_p] = _minmax_lowering("stablehlo.maximum", "GT")
lowering_rules[min_p] = _minmax_lowering("stablehlo.minimum", "LT")


def _comparison(name: str, direction: str, category: str, doc: str):
    prim = _binary(name, category, None, doc, out_bool=True)
    def lower(ctx, x, y):
        shape = ctx.avals_out[0].shape
        (ax, ay), full = ctx.avals_in, ctx.avals_in[0].update(shape=shape)
        x = ctx.broadcast(x, ax, full, range(ax.ndim) if ax.ndim else ())
        y = ctx.broadcast(y, ay, full, range(ay.ndim) if ay.ndim else ())
        return ctx.compare(direction, x, y, full)

    lowering_rules[prim] = lower
    return prim


eq_p = _comparison("eq", "EQ", "any", "Elementwise x == y.")
ne_p = _comparison("ne", "NE", "any", "Elementwise x != y.")
lt_p = _comparison("lt", "LT", "real", "Elementwise x < y.")
le_p = _comparison("le", "LE", "real", "Elementwise x <= y.")
gt_p = _comparison("gt", "GT", "real", "Elementwise x > y.")
ge_p = _comparison("ge", "GE", "real", "Elementwise x >= y.")


# --- select and clamp ---------------------------------------------------------------------
select_n_p = Primitive("select_n")


def _select_n_abstract(which, *cases):
    if not cases:
        raise ValueError("select_n() must have at least one case: pass one or more arrays to "
                         "choose from.")
    if which.dtype != np.bool_ and which.dtype != np.int32:
        raise TypeError(f"select_n's `which` must be bool or int32, got {which.dtype.name}.")
    if which.dtype == np.bool_ and len(cases) > 2:
        raise TypeError(f"select_n with a boolean `which` takes at most 2 cases, got {len(cases)}.")
    check_same_dtypes("select_n", *cases)
    shape = cases[0].shape
    if any(c.shape != shape for c in cases):
        # Unlike arithmetic, select does not broadcast its cases (as in JAX).
        raise TypeError(f"select_n cases must have the same shapes, got "
                        f"{[c.shape for c in cases]}. Broadcast them first (plax.numpy.where does).")
    if which.shape not in ((), shape):
        raise TypeError(f"select_n's `which` must be a scalar or have the cases' shape {shape}, "
                        f"got shape {which.shape}.")
    return ShapedArray(shape, cases[0].dtype, weak_of(*cases))


def _select_n_lowering(ctx, which, *cases):
    waval, out = ctx.avals_in[0], ctx.avals_out[0]
    if len(cases) == 1:
        return cases[0]
    wfull = waval.update(shape=out.shape)
    which = ctx.broadcast(which, waval, wfull)

    def pick(lo, hi):  # select among cases[lo:hi]
        if hi - lo == 1:
            return cases[lo]
        mid = (lo + hi) // 2
        if wfull.dtype == np.bool_:
            pred = which
        else:
            bound = ctx.broadcast(ctx.constant(mid, ShapedArray((), np.int32)),
                                  ShapedArray((), np.int32), wfull)
            pred = ctx.compare("LT", which, bound, wfull)
            return ctx.op1("stablehlo.select", [pred, pick(lo, mid), pick(mid, hi)],
                           [wfull.update(dtype=np.bool_), out, out])
        return ctx.op1("stablehlo.select", [pred, pick(mid, hi), pick(lo, mid)],
                       [wfull.update(dtype=np.bool_), out, out])

    return pick(0, len(cases))


abstract_eval_rules[select_n_p] = _select_n_abstract
lowering_rules[select_n_p] = _select_n_lowering


def select_n(which, *cases):
    """``cases[which]`` elementwise; ``which`` is bool (2 cases) or int32."""
    return select_n_p.bind(which, *cases)


def select(pred, on_true, on_false):
    """``on_true`` where ``pred`` else ``on_false`` (note the order differs from select_n)."""
    return select_n_p.bind(pred, on_false, on_true)


clamp_p = Primitive("clamp")


def _clamp_abstract(lo, x, hi):
    check_same_dtypes("clamp", lo, x, hi)
    for name, b in (("min", lo), ("max", hi)):
        if b.shape not in ((), x.shape):
            raise TypeError(f"clamp's {name} must be a scalar or have the operand's shape "
                            f"{x.shape}, got shape {b.shape}.")
    return x.update(weak_type=weak_of(lo, x, hi))


abstract_eval_rules[clamp_p] = _clamp_abstract
lowering_rules[clamp_p] = _simple_lowering("stablehlo.clamp")


def clamp(min, x, max):
    """Elementwise ``min(max(x, min), max)``; the bounds may be scalars."""
    return clamp_p.bind(min, x, max)


# --- conversions ------------------------------------------------------------------------
convert_element_type_p = Primitive("convert_element_type")


def _convert_abstract(x, *, new_dtype, weak_type, sharding=None):
    return ShapedArray(x.shape, new_dtype, weak_type)


def _convert_lowering(ctx, x, *, new_dtype, weak_type, sharding=None):
    ain, aout = ctx.avals_in[0], ctx.avals_out[0]
    if dtypes.is_complex(ain.dtype) and not dtypes.is_complex(aout.dtype):
        real_aval = ain.update(dtype=_real_dtype(ain.dtype))
        x = ctx.op1("stablehlo.real", [x], [ain], real_aval)
        ain = real_aval
    if aout.dtype == np.bool_ and ain.dtype != np.bool_:
        zero = ctx.broadcast(ctx.constant(0, ShapedArray((), ain.dtype)), ShapedArray((), ain.dtype), ain)
        return ctx.compare("NE", x, zero, ain)
    if ain.dtype == aout.dtype:
        return x
    return ctx.op1("stablehlo.convert", [x], [ain], aout)


abstract_eval_rules[convert_element_type_p] = _convert_abstract
lowering_rules[convert_element_type_p] = _convert_lowering
param_printers[convert_element_type_p] = lambda p: {
    k: v for k, v in sorted(p.items()) if not (k == "sharding" and v is None)}


def convert_element_type(operand, new_dtype):
    """Cast ``operand`` elementwise to ``new_dtype`` (as numpy's astype)."""
    from plax.core.trace import get_aval
    new_dtype = dtypes.canonicalize_user_dtype(new_dtype, "new_dtype")
    aval = get_aval(operand)
    host = (np.ndarray, np.generic, int, float, builtins.complex)
    if aval.dtype == new_dtype and not aval.weak_type and not isinstance(operand, host):
        return operand  # an Array or tracer that already has the dtype; host values become Arrays
    return convert_element_type_p.bind(operand, new_dtype=new_dtype, weak_type=False, sharding=None)


def _convert_weak(operand, new_dtype, weak_type: bool):
    """Internal: a conversion that can keep the weak type (used by plax.numpy promotion)."""
    return convert_element_type_p.bind(operand, new_dtype=np.dtype(new_dtype), weak_type=weak_type,
                                       sharding=None)


bitcast_convert_type_p = Primitive("bitcast_convert_type")


def _bitcast_abstract(x, *, new_dtype):
    old_bits, new_bits = dtypes.itemsize_bits(x.dtype), dtypes.itemsize_bits(new_dtype)
    special = [d for d in (x.dtype, new_dtype) if d == np.bool_ or dtypes.is_complex(d)]
    if special and x.dtype != new_dtype:
        raise TypeError(f"bitcast_convert_type does not convert to or from {special[0].name} "
                        f"(got {x.dtype.name} to {new_dtype.name}); bool and complex values can "
                        "only be bitcast to their own dtype.")
    if old_bits == new_bits:
        return ShapedArray(x.shape, new_dtype)
    if old_bits > new_bits:
        if old_bits % new_bits:
            raise ValueError(f"bitcast_convert_type cannot split {x.dtype.name} into {new_dtype.name}.")
        return ShapedArray(x.shape + (old_bits // new_bits,), new_dtype)
    ratio = new_bits // old_bits
    if not x.shape or x.shape[-1] != ratio:
        raise ValueError(f"bitcast_convert_type from {x.dtype.name} to {new_dtype.name} needs a "
                        f"last dimension of size {ratio}, got shape {x.shape}.")
    return ShapedArray(x.shape[:-1], new_dtype)


abstract_eval_rules[bitcast_convert_type_p] = _bitcast_abstract
lowering_rules[bitcast_convert_type_p] = lambda ctx, x, *, new_dtype: ctx.op1(
    "stablehlo.bitcast_convert", [x])


def bitcast_convert_type(operand, new_dtype):
    """Reinterpret the bits of ``operand`` as ``new_dtype``."""
    new_dtype = dtypes.canonicalize_user_dtype(new_dtype, "new_dtype")
    return bitcast_convert_type_p.bind(operand, new_dtype=new_dtype)


globals().update(_PUBLIC)
__all__ = sorted(_PUBLIC) + ["stop_gradient", "round", "conj", "integer_pow", "select_n", "select",
                             "clamp", "convert_element_type", "bitcast_convert_type",
                             "RoundingMethod"]


# --- differentiation rules --------------------------------------------------------------------
# jvp rules give each argument's contribution to the output tangent; the linear ops also
# have transpose rules for reverse mode. Constants are built in the operand's dtype.
from plax.core.trace import get_aval as _aval  # noqa: E402
from plax.transforms.jvp import (Zero, defjvp, deflinear, defzero, instantiate,  # noqa: E402
                                 jvp_rules, tangent_aval)
from plax.transforms.transpose import is_undefined, transpose_rules  # noqa: E402


def _c(x, value):
    """``value`` as a scalar of ``x``'s dtype."""
    return np.asarray(value, _aval(x).dtype)


def _full(x, value):
    """``value`` in ``x``'s dtype, broadcast to ``x``'s shape."""
    from plax.lax.shapes import broadcast_in_dim
    return broadcast_in_dim(_c(x, value), _aval(x).shape, ())


def unbroadcast(ct, aval: ShapedArray):
    """Sum ``ct`` down to ``aval``'s shape, undoing lax's implicit rank-0/size-1 broadcast."""
    if type(ct) is Zero:
        return Zero(aval)
    shape = _aval(ct).shape
    if shape == aval.shape:
        return ct
    from plax.lax.reductions import reduce_sum
    from plax.lax.shapes import reshape
    if aval.shape == ():
        return reduce_sum(ct, tuple(range(len(shape))))
    axes = tuple(i for i, (a, b) in enumerate(zip(aval.shape, shape)) if a == 1 and b != 1)
    return reshape(reduce_sum(ct, axes), aval.shape)


defjvp(sin_p, lambda g, ans, x: mul(g, cos(x)))
defjvp(cos_p, lambda g, ans, x: neg(mul(g, sin(x))))
defjvp(tan_p, lambda g, ans, x: mul(g, add(_c(x, 1), mul(ans, ans))))
defjvp(asin_p, lambda g, ans, x: mul(g, rsqrt(sub(_c(x, 1), mul(x, x)))))
defjvp(acos_p, lambda g, ans, x: neg(mul(g, rsqrt(sub(_c(x, 1), mul(x, x))))))
defjvp(atan_p, lambda g, ans, x: div(g, add(_c(x, 1), mul(x, x))))
defjvp(sinh_p, lambda g, ans, x: mul(g, cosh(x)))
defjvp(cosh_p, lambda g, ans, x: mul(g, sinh(x)))
defjvp(asinh_p, lambda g, ans, x: mul(g, rsqrt(add(mul(x, x), _c(x, 1)))))
defjvp(acosh_p, lambda g, ans, x: mul(g, rsqrt(mul(sub(x, _c(x, 1)), add(x, _c(x, 1))))))
defjvp(atanh_p, lambda g, ans, x: div(g, sub(_c(x, 1), mul(x, x))))
defjvp(tanh_p, lambda g, ans, x: mul(g, sub(_c(x, 1), mul(ans, ans))))
defjvp(logistic_p, lambda g, ans, x: mul(g, mul(ans, sub(_c(x, 1), ans))))
defjvp(exp_p, lambda g, ans, x: mul(g, ans))
defjvp(exp2_p, lambda g, ans, x: mul(g, mul(ans, _c(x, np.log(2)))))
defjvp(expm1_p, lambda g, ans, x: mul(g, add(ans, _c(x, 1))))
defjvp(log_p, lambda g, ans, x: div(g, x))
defjvp(log1p_p, lambda g, ans, x: div(g, add(x, _c(x, 1))))
defjvp(sqrt_p, lambda g, ans, x: div(g, mul(_c(x, 2), ans)))
defjvp(rsqrt_p, lambda g, ans, x: mul(g, mul(_c(x, -0.5), div(ans, x))))
defjvp(cbrt_p, lambda g, ans, x: mul(g, mul(_c(x, 1 / 3), integer_pow(ans, -2))))
defjvp(erf_p, lambda g, ans, x: mul(g, mul(_c(x, 2 / np.sqrt(np.pi)), exp(neg(mul(x, x))))))
defjvp(erfc_p, lambda g, ans, x: mul(g, mul(_c(x, -2 / np.sqrt(np.pi)), exp(neg(mul(x, x))))))
defjvp(erf_inv_p, lambda g, ans, x: mul(g, mul(_c(x, np.sqrt(np.pi) / 2), exp(mul(ans, ans)))))
defjvp(lgamma_p, lambda g, ans, x: mul(g, digamma(x)))


def _trigamma(x):
    """polygamma(1, x) from lax ops (so it differentiates again): reflection below 1/2,
    the recurrence psi1(x) = psi1(x + 1) + 1/x**2 up to x + 6, then the asymptotic series."""
    one = _c(x, 1)
    reflect = lt(x, _c(x, 0.5))
    # Both branches stay finite, so the unselected one cannot leak NaNs into gradients.
    y = select(reflect, sub(one, x), x)
    xr = select(reflect, x, _full(x, 0.25))
    acc = _full(x, 0)
    for _ in range(6):
        acc = add(acc, div(one, mul(y, y)))
        y = add(y, one)
    r = div(one, y)
    r2 = mul(r, r)
    series = _c(x, -1 / 30)
    for coeff in (1 / 42, -1 / 30, 1 / 6):
        series = add(_c(x, coeff), mul(r2, series))
    tail = mul(r, add(one, mul(r, add(_c(x, 0.5), mul(r, series)))))
    pos = add(acc, tail)
    s = sin(mul(_c(x, np.pi), xr))
    return select(reflect, sub(div(_c(x, np.pi ** 2), mul(s, s)), pos), pos)


defjvp(digamma_p, lambda g, ans, x: mul(g, _trigamma(x)))
defjvp(square_p, lambda g, ans, x: mul(g, mul(_c(x, 2), x)))


def _complex_abs_dx(g, ans, x):
    """Re(conj(x / |x|) g), with 0 at x == 0 (dividing by 1 there instead of 0)."""
    safe = select(eq(ans, _c(ans, 0)), _full(ans, 1), ans)
    unit = div(x, convert_element_type_p.bind(safe, new_dtype=_aval(x).dtype, weak_type=False,
                                              sharding=None))
    return real(mul(conj(unit), g))


# As in JAX, the derivative of abs at 0 (and -0) is 1 for reals and 0 for complex numbers.
defjvp(abs_p, lambda g, ans, x: select(ge(x, _c(x, 0)), g, neg(g))
       if not dtypes.is_complex(_aval(x).dtype) else _complex_abs_dx(g, ans, x))
# x**0 is constant: its tangent is zeros that do not depend on g (as in JAX), so no
# cotangent flows back through it.
defjvp(integer_pow_p, lambda g, ans, x, *, y: (
    _full(x, 0) if y == 0 else mul(g, mul(_c(x, y), integer_pow(x, y - 1)))))
defjvp(div_p, lambda g, ans, x, y: div(g, y),
       lambda g, ans, x, y: mul(neg(g), div(ans, y)))
defjvp(mul_p, lambda g, ans, x, y: mul(g, y), lambda g, ans, x, y: mul(x, g))
defjvp(atan2_p, lambda g, ans, x, y: mul(g, div(y, add(mul(x, x), mul(y, y)))),
       lambda g, ans, x, y: mul(g, div(neg(x), add(mul(x, x), mul(y, y)))))


def _pow_dy(g, ans, x, y):
    safe_log = select(eq(x, _c(x, 0)), mul(x, _c(x, 0)), log(select(eq(x, _c(x, 0)),
                                                                      add(x, _c(x, 1)), x)))
    return mul(g, mul(safe_log, ans))


def _pow_dx(g, ans, x, y):
    if not dtypes.is_inexact(_aval(y).dtype):
        y = convert_element_type_p.bind(y, new_dtype=_aval(x).dtype, weak_type=False,
                                        sharding=None)
    return mul(g, mul(y, pow(x, sub(y, _c(y, 1)))))


defjvp(pow_p, _pow_dx, _pow_dy)


def _balanced_share(wins, x, y, ans):
    """1 where ``wins(x, y)``, 1/2 where x and y tie, 0 elsewhere (max/min gradients).

    The masks compare the operands, not each with the result: compiled code may
    round a fused operand differently in the max and in a comparison with it,
    and then neither side would get the gradient.
    """
    one, half, zero = _full(ans, 1), _full(ans, 0.5), _full(ans, 0)
    return select(wins(x, y), one, select(eq(x, y), half, zero))


defjvp(max_p, lambda g, ans, x, y: mul(g, _balanced_share(gt, x, y, ans)),
       lambda g, ans, x, y: mul(g, _balanced_share(gt, y, x, ans)))
defjvp(min_p, lambda g, ans, x, y: mul(g, _balanced_share(lt, x, y, ans)),
       lambda g, ans, x, y: mul(g, _balanced_share(lt, y, x, ans)))


def _trunc(q):
    return select(lt(q, _c(q, 0)), ceil(q), floor(q))


defjvp(rem_p, lambda g, ans, x, y: g, lambda g, ans, x, y: mul(neg(g), _trunc(div(x, y))))


def _where_tangent(pred, g, ans):
    """``g`` where ``pred``, else 0; ``g`` is broadcast to ``ans``'s shape first (clamp
    broadcasts scalar bounds)."""
    from plax.transforms.jvp import broadcast_tangent
    g = broadcast_tangent(g, _aval(ans).shape)
    return select(pred, g, _full(g, 0))


defjvp(clamp_p,
       lambda g, ans, lo, x, hi: _where_tangent(bitwise_and(gt(lo, x), lt(lo, hi)), g, ans),
       lambda g, ans, lo, x, hi: _where_tangent(bitwise_and(gt(x, lo), lt(x, hi)), g, ans),
       lambda g, ans, lo, x, hi: _where_tangent(lt(hi, x), g, ans))

for _p in (sign_p, floor_p, ceil_p, round_p, is_finite_p, eq_p, ne_p, lt_p, le_p, gt_p, ge_p,
           and_p, or_p, xor_p, not_p, shift_left_p, shift_right_arithmetic_p,
           shift_right_logical_p, population_count_p, clz_p, nextafter_p, bitcast_convert_type_p):
    defzero(_p)


# The linear ones: tangent = the op on tangents; transposes send cotangents back.
def _add_jvp(primals, tangents):
    ans = add(*primals)
    shape = _aval(ans).shape
    from plax.transforms.jvp import add_tangents, broadcast_tangent
    return ans, add_tangents(broadcast_tangent(tangents[0], shape),
                             broadcast_tangent(tangents[1], shape))


def _sub_jvp(primals, tangents):
    ans = sub(*primals)
    shape = _aval(ans).shape
    from plax.transforms.jvp import add_tangents, broadcast_tangent
    tx, ty = tangents
    ty = ty if type(ty) is Zero else neg(ty)
    return ans, add_tangents(broadcast_tangent(tx, shape), broadcast_tangent(ty, shape))


def _neg_jvp(primals, tangents):
    (t,) = tangents
    return neg(primals[0]), t if type(t) is Zero else neg(t)


jvp_rules[add_p] = _add_jvp
jvp_rules[sub_p] = _sub_jvp
jvp_rules[neg_p] = _neg_jvp


def _ct_for(arg, ct):
    return unbroadcast(ct, arg.aval) if is_undefined(arg) else None


transpose_rules[add_p] = lambda ct, x, y: [_ct_for(x, ct), _ct_for(y, ct)]
transpose_rules[sub_p] = lambda ct, x, y: [
    _ct_for(x, ct), _ct_for(y, ct if type(ct) is Zero else neg(ct))]
transpose_rules[neg_p] = lambda ct, x: [ct if type(ct) is Zero else neg(ct)]


def _mul_transpose(ct, x, y):
    if is_undefined(x) and is_undefined(y):
        raise ValueError("mul is not linear in both arguments at once: one must be known.")
    if type(ct) is Zero:
        return [Zero(x.aval) if is_undefined(x) else None, Zero(y.aval) if is_undefined(y) else None]
    if is_undefined(x):
        return [unbroadcast(mul(ct, y), x.aval), None]
    return [None, unbroadcast(mul(x, ct), y.aval)]


def _div_transpose(ct, x, y):
    if is_undefined(y):
        raise ValueError("div is linear in its numerator only.")
    return [Zero(x.aval) if type(ct) is Zero else unbroadcast(div(ct, y), x.aval), None]


transpose_rules[mul_p] = _mul_transpose
transpose_rules[div_p] = _div_transpose


def _select_n_jvp(primals, tangents):
    which, *cases = primals
    ans = select_n(which, *cases)
    case_t = tangents[1:]
    if all(type(t) is Zero for t in case_t):
        return ans, Zero(tangent_aval(_aval(ans)))
    return ans, select_n(which, *[instantiate(t) for t in case_t])


def _select_n_transpose(ct, which, *cases):
    if is_undefined(which):
        raise ValueError("select_n's predicate cannot be linear.")
    out = [None]
    for i, c in enumerate(cases):
        if not is_undefined(c):
            out.append(None)
        elif type(ct) is Zero:
            out.append(Zero(c.aval))
        else:
            zeros = _full(ct, 0)  # not ct * 0, which is NaN where ct is infinite
            out.append(select_n(which, *[ct if j == i else zeros for j in range(len(cases))]))
    return out


jvp_rules[select_n_p] = _select_n_jvp
transpose_rules[select_n_p] = _select_n_transpose


def _convert_jvp(primals, tangents, *, new_dtype, weak_type, sharding=None):
    (x,), (t,) = primals, tangents
    ans = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type, sharding=sharding)
    if type(t) is Zero or not dtypes.is_inexact(new_dtype) or not dtypes.is_inexact(_aval(x).dtype):
        return ans, Zero(tangent_aval(_aval(ans)))
    return ans, convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type,
                                            sharding=sharding)


def _convert_transpose(ct, x, *, new_dtype, weak_type, sharding=None):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    return [convert_element_type_p.bind(ct, new_dtype=x.aval.dtype, weak_type=x.aval.weak_type,
                                        sharding=None)]


jvp_rules[convert_element_type_p] = _convert_jvp
transpose_rules[convert_element_type_p] = _convert_transpose

for _p in (real_p, imag_p, complex_p, conj_p):
    deflinear(_p)
transpose_rules[real_p] = lambda ct, x: [
    Zero(x.aval) if type(ct) is Zero else complex_p.bind(ct, _full(ct, 0))]
transpose_rules[imag_p] = lambda ct, x: [
    Zero(x.aval) if type(ct) is Zero else complex_p.bind(_full(ct, 0), neg(ct))]
transpose_rules[complex_p] = lambda ct, x, y: [
    _ct_for(x, real_p.bind(ct)) if type(ct) is not Zero else None,
    _ct_for(y, neg(imag_p.bind(ct))) if type(ct) is not Zero else None]


def _conj_transpose(ct, x, *, input_dtype):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    return [conj(ct) if dtypes.is_complex(input_dtype) else real_p.bind(ct)]


transpose_rules[conj_p] = _conj_transpose


# --- stop_gradient ----------------------------------------------------------------------------
stop_gradient_p = Primitive("stop_gradient")
abstract_eval_rules[stop_gradient_p] = lambda x: x
lowering_rules[stop_gradient_p] = lambda ctx, x: x
defzero(stop_gradient_p)


def stop_gradient(x):
    """The identity on values, with a zero derivative (applies to every leaf of a pytree)."""
    from plax import tree_util

    def stop(leaf):
        if dtypes.is_inexact(_aval(leaf).dtype):
            return stop_gradient_p.bind(leaf)
        return leaf
    return tree_util.tree_map(stop, x)


# --- batching -------------------------------------------------------------------------------
def _register_batching():
    from plax.transforms.vmap import batch_rules, elementwise_rule, vectorized_rule
    for prim in abstract_eval_rules:
        if prim in batch_rules or not _defined_here(prim):
            continue
        if prim in (select_n_p, clamp_p, bitcast_convert_type_p):
            continue
        arity = _ARITY.get(prim.name, 1)
        (elementwise_rule if arity > 1 else vectorized_rule)(prim)
    batch_rules[select_n_p] = _select_n_batch
    batch_rules[clamp_p] = _clamp_batch
    batch_rules[bitcast_convert_type_p] = _bitcast_batch


def _defined_here(prim) -> bool:
    return globals().get(f"{prim.name}_p") is prim


_ARITY = {p.name: 2 for p in (add_p, sub_p, mul_p, div_p, rem_p, pow_p, max_p, min_p, atan2_p,
                              nextafter_p, and_p, or_p, xor_p, shift_left_p,
                              shift_right_arithmetic_p, shift_right_logical_p, complex_p, eq_p,
                              ne_p, lt_p, le_p, gt_p, ge_p)}


def _full_batched(x, d, dst, size, shape):
    """``x`` as a full array of per-example ``shape`` with its batch dimension at ``dst``
    (select and clamp do not broadcast, so scalars and unbatched values are expanded)."""
    from plax.lax.shapes import broadcast_in_dim
    from plax.transforms.vmap import move_batch_dim, not_mapped
    from plax.core.trace import get_aval
    full = shape[:dst] + (size,) + shape[dst:]
    if d is not_mapped:
        if get_aval(x).ndim == 0:
            return broadcast_in_dim(x, full, ())
        return move_batch_dim(x, d, dst, size)
    if get_aval(x).ndim == 1 and len(shape) > 0:  # a batched scalar
        return broadcast_in_dim(x, full, (dst,))
    return move_batch_dim(x, d, dst, size)


def _select_n_batch(axis, vals, dims):
    from plax.transforms.vmap import batch_size_of, common_dim, not_mapped
    from plax.core.trace import get_aval
    which, cases = vals[0], vals[1:]
    wd, case_dims = dims[0], dims[1:]
    size = batch_size_of(vals, dims)
    batched_cases = [(c, d) for c, d in zip(cases, case_dims) if d is not not_mapped]
    dst = common_dim(*zip(*batched_cases)) if batched_cases else 0
    c0, d0 = cases[0], case_dims[0]
    shape = get_aval(c0).shape
    if d0 is not not_mapped:
        shape = shape[:d0] + shape[d0 + 1:]
    cases = [_full_batched(c, d, dst, size, shape) for c, d in zip(cases, case_dims)]
    if wd is not_mapped and get_aval(which).ndim == 0:
        return select_n_p.bind(which, *cases), dst
    return select_n_p.bind(_full_batched(which, wd, dst, size, shape), *cases), dst


def _clamp_batch(axis, vals, dims):
    from plax.transforms.vmap import batch_size_of, not_mapped
    from plax.core.trace import get_aval
    (lo, x, hi), (dlo, dx, dhi) = vals, dims
    size = batch_size_of(vals, dims)
    dst = 0 if dx is not_mapped else dx
    shape = get_aval(x).shape
    if dx is not not_mapped:
        shape = shape[:dx] + shape[dx + 1:]
    x = _full_batched(x, dx, dst, size, shape)
    bounds = [b if d is not_mapped and get_aval(b).ndim == 0
              else _full_batched(b, d, dst, size, shape) for b, d in ((lo, dlo), (hi, dhi))]
    return clamp_p.bind(bounds[0], x, bounds[1]), dst


def _bitcast_batch(axis, vals, dims, *, new_dtype):
    from plax.transforms.vmap import moveaxis
    from plax.core.trace import get_aval
    (x,), (d,) = vals, dims
    aval = get_aval(x)
    if dtypes.itemsize_bits(new_dtype) > dtypes.itemsize_bits(aval.dtype) and d == aval.ndim - 1:
        x, d = moveaxis(x, d, 0), 0  # the last dimension is consumed: keep the batch out of it
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype), d


_register_batching()
