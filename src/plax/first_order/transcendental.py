"""Transcendental and special functions: exponentials and logarithms, trigonometric and
hyperbolic functions and their inverses, roots, the error and gamma functions, atan2.

Each row declares the primitive (abstract evaluation, lowering, batching); the
line after it is its derivative, written with lax ops so that it differentiates
again.

The unary ops XLA can compute to a requested accuracy (exp, exp2, expm1, log, log1p,
logistic, sin, cos, tan, tanh, sqrt, rsqrt, cbrt) take ``accuracy=``: a ``Tolerance`` or an
``AccuracyMode``. It becomes the primitive's ``accuracy`` parameter (absent when None, so
the common call binds exactly what it did before) and the ``result_accuracy`` attribute of
the StableHLO op.
"""
from __future__ import annotations

import enum
import operator
import struct

import numpy as np

from plax.core.avals import ShapedArray
from plax.core.rules import param_printers, register_lowering
from plax.first_order import arithmetic as _arith
from plax.first_order import comparison as _cmp
from plax.first_order.ad_util import defjvp
from plax.first_order.elementwise_util import binop, const, full_of, named, unop

__all__ = ["exp", "exp2", "log", "expm1", "log1p", "tanh", "logistic", "sin", "cos", "tan", "asin",
           "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "erf",
           "erfc", "erf_inv", "lgamma", "digamma", "atan2", "Tolerance", "AccuracyMode"]


# --- accuracy= ------------------------------------------------------------------------------
class AccuracyMode(enum.Enum):
    """An accuracy for ``accuracy=``: ``HIGHEST`` asks XLA for its most accurate
    implementation of the op, ``DEFAULT`` for its usual one."""
    HIGHEST = 1
    DEFAULT = 2


class Tolerance:
    """An accuracy for ``accuracy=`` as tolerances the result must meet: an absolute
    ``atol``, a relative ``rtol`` and a distance in units in the last place ``ulps``.
    At least one must be set, none negative; XLA honours ``atol`` with ``rtol`` or with
    ``ulps``. Tolerances are values: equal ones compare and hash alike."""

    __slots__ = ("atol", "rtol", "ulps")

    def __init__(self, atol: float = 0.0, rtol: float = 0.0, ulps: int = 0):
        if not (atol >= 0.0 and rtol >= 0.0 and ulps >= 0):  # NaN too: XLA would abort
            raise ValueError(f"Tolerances must be non-negative; got atol={atol}, rtol={rtol}, "
                             f"ulps={ulps}.")
        if atol == 0.0 and rtol == 0.0 and ulps == 0:
            raise ValueError("At least one of atol, rtol, or ulps must be set: a Tolerance of "
                             "all zeros asks for nothing (use accuracy=None for XLA's default).")
        try:
            ulps = operator.index(ulps)
        except TypeError:
            raise TypeError(f"Tolerance's ulps must be an integer (a count of units in the "
                            f"last place), got {ulps!r}.") from None
        object.__setattr__(self, "atol", float(atol))
        object.__setattr__(self, "rtol", float(rtol))
        object.__setattr__(self, "ulps", ulps)

    def __setattr__(self, name, value):
        raise AttributeError("Tolerance is immutable: make a new one.")

    def __reduce__(self):  # (copy and pickle: __setattr__ is closed to them)
        return Tolerance, self._key()

    def _key(self):
        return self.atol, self.rtol, self.ulps

    def __eq__(self, other):
        return type(other) is Tolerance and self._key() == other._key()

    def __hash__(self):
        return hash(("Tolerance",) + self._key())

    def __repr__(self):
        return f"Tolerance(atol={self.atol}, rtol={self.rtol}, ulps={self.ulps})"


def _checked_accuracy(accuracy):
    """``accuracy`` when ``accuracy=`` can take it, else JAX's NotImplementedError."""
    if isinstance(accuracy, (AccuracyMode, Tolerance)):
        return accuracy
    raise NotImplementedError(
        f"Accuracy {accuracy} not supported: accuracy= takes a lax.Tolerance(atol, rtol, ulps), "
        "a lax.AccuracyMode (HIGHEST or DEFAULT) or None.")


def _f64_text(value: float) -> str:
    """``value`` as an MLIR f64 literal that parses back to it exactly: seven significant
    digits when they suffice, else seventeen; infinity in hex (MLIR has no name for it)."""
    if not np.isfinite(value):
        return "0x" + struct.pack(">d", value).hex().upper()
    short = f"{value:.6e}"
    return short if float(short) == value else f"{value:.16e}"


def result_accuracy_attr(accuracy) -> str:
    """The ``result_accuracy`` attribute text for ``accuracy`` ("" when it asks nothing:
    None, or DEFAULT, which is the attribute's default)."""
    if accuracy is None or accuracy is AccuracyMode.DEFAULT:
        return ""
    if isinstance(accuracy, AccuracyMode):
        fields = []
        mode = accuracy.name
    else:
        _checked_accuracy(accuracy)  # a parameter bound directly, not through lax's functions
        fields = [f"{k} = {_f64_text(v)}" for k, v in (("atol", accuracy.atol),
                                                        ("rtol", accuracy.rtol)) if v]
        fields += [f"ulps = {accuracy.ulps}"] if accuracy.ulps else []
        mode = "TOLERANCE"
    fields.append(f"mode = #stablehlo.result_accuracy_mode<{mode}>")
    return f"result_accuracy = #stablehlo.result_accuracy<{', '.join(fields)}>"


def _accuracy_lowering(hlo_op: str, real_only: bool = False):
    """Lower to ``hlo_op`` carrying the ``result_accuracy`` attribute (on complex operands
    none when ``real_only``: JAX expands those ops there and drops the accuracy)."""
    def rule(ctx, x, accuracy=None):
        if real_only and np.issubdtype(ctx.avals_in[0].dtype, np.complexfloating):
            accuracy = None
        return ctx.op1(hlo_op, [x], attrs=result_accuracy_attr(accuracy))
    return rule


def _print_params(params):
    """``accuracy`` shown only when set (as JAX shows it)."""
    return {k: v for k, v in sorted(params.items()) if not (k == "accuracy" and v is None)}


_ACCURACY_DOC = ("\n\n``accuracy``: None, a ``lax.Tolerance`` or a ``lax.AccuracyMode``, the "
                 "accuracy XLA is asked to meet (the op's ``result_accuracy``).")


def accuracy_unop(name: str, category: str, hlo_op: str | None, doc: str, *,
                  real_only: bool = False):
    """``unop`` for an op taking ``accuracy=``: its public function binds ``accuracy`` only
    when given, and (with ``hlo_op``) its lowering writes the attribute."""
    prim, _ = unop(name, category, None, doc)
    if hlo_op is not None:
        register_lowering(prim, _accuracy_lowering(hlo_op, real_only))
    param_printers[prim] = _print_params

    def fn(x, *, accuracy=None):
        if accuracy is None:
            return prim.bind(x)
        return prim.bind(x, accuracy=_checked_accuracy(accuracy))
    return prim, named(name, fn, doc + _ACCURACY_DOC)


# --- exponentials and logarithms ------------------------------------------------------------
# Derivatives: as JAX's, those of sin, cos and (under HIGHEST) expm1, tanh and logistic are
# computed by ops asking the same accuracy; the others ignore it.
exp_p, exp = accuracy_unop("exp", "inexact", "stablehlo.exponential", "Elementwise e**x.")
defjvp(exp_p, lambda g, ans, x, accuracy=None: _arith.mul(g, ans))

exp2_p, exp2 = accuracy_unop("exp2", "inexact", None, "Elementwise 2**x.")


def _exp2_lowering(ctx, x, accuracy=None):
    aval = ctx.avals_in[0]
    ln2 = ctx.broadcast(ctx.constant(np.log(2.0), ShapedArray((), aval.dtype)),
                        ShapedArray((), aval.dtype), aval)
    return ctx.op1("stablehlo.exponential", [ctx.op1("stablehlo.multiply", [x, ln2], [aval, aval])],
                   attrs=result_accuracy_attr(accuracy))


register_lowering(exp2_p, _exp2_lowering)
defjvp(exp2_p,
       lambda g, ans, x, accuracy=None: _arith.mul(g, _arith.mul(ans, const(x, np.log(2)))))

log_p, log = accuracy_unop("log", "inexact", "stablehlo.log", "Elementwise natural logarithm.")
defjvp(log_p, lambda g, ans, x, accuracy=None: _arith.div(g, x))
expm1_p, expm1 = accuracy_unop("expm1", "inexact", "stablehlo.exponential_minus_one",
                               "Elementwise e**x - 1.")
defjvp(expm1_p, lambda g, ans, x, accuracy=None: _arith.mul(
    g, exp(x, accuracy=accuracy) if accuracy is AccuracyMode.HIGHEST
    else _arith.add(ans, const(x, 1))))
log1p_p, log1p = accuracy_unop("log1p", "inexact", "stablehlo.log_plus_one",
                               "Elementwise log(1 + x).")
defjvp(log1p_p, lambda g, ans, x, accuracy=None: _arith.div(g, _arith.add(x, const(x, 1))))
logistic_p, logistic = accuracy_unop("logistic", "inexact", None, "Elementwise 1 / (1 + e**-x).")


def _logistic_lowering(ctx, x, accuracy=None):
    """``1 / (1 + exp(-x))`` spelled out, as JAX lowers it (not stablehlo.logistic, which XLA
    compiles to other bits inside larger fusions); the accuracy is dropped, as in JAX."""
    aval = ctx.avals_in[0]
    one = ctx.broadcast(ctx.constant(1.0, ShapedArray((), aval.dtype)),
                        ShapedArray((), aval.dtype), aval)
    e = ctx.op1("stablehlo.exponential", [ctx.op1("stablehlo.negate", [x], [aval])], [aval])
    return ctx.op1("stablehlo.divide", [one, ctx.op1("stablehlo.add", [one, e], [aval, aval])],
                   [aval, aval])


register_lowering(logistic_p, _logistic_lowering)
defjvp(logistic_p, lambda g, ans, x, accuracy=None: _arith.mul(g, _arith.mul(
    ans, logistic(_arith.neg(x)) if accuracy is AccuracyMode.HIGHEST
    else _arith.sub(const(x, 1), ans))))


# --- trigonometric functions ----------------------------------------------------------------
sin_p, sin = accuracy_unop("sin", "inexact", "stablehlo.sine", "Elementwise sine.",
                           real_only=True)
defjvp(sin_p, lambda g, ans, x, accuracy=None: _arith.mul(g, cos(x, accuracy=accuracy)))
cos_p, cos = accuracy_unop("cos", "inexact", "stablehlo.cosine", "Elementwise cosine.",
                           real_only=True)
defjvp(cos_p, lambda g, ans, x, accuracy=None: _arith.neg(_arith.mul(g, sin(x, accuracy=accuracy))))
tan_p, tan = accuracy_unop("tan", "inexact", "stablehlo.tan", "Elementwise tangent.")
defjvp(tan_p, lambda g, ans, x, accuracy=None: _arith.mul(
    g, _arith.add(const(x, 1), _arith.mul(ans, ans))))
asin_p, asin = unop("asin", "inexact", "chlo.asin", "Elementwise arc sine.")
defjvp(asin_p, lambda g, ans, x: _arith.mul(g, rsqrt(_arith.sub(const(x, 1), _arith.mul(x, x)))))
acos_p, acos = unop("acos", "inexact", "chlo.acos", "Elementwise arc cosine.")
defjvp(acos_p, lambda g, ans, x: _arith.neg(
    _arith.mul(g, rsqrt(_arith.sub(const(x, 1), _arith.mul(x, x))))))
atan_p, atan = unop("atan", "inexact", "chlo.atan", "Elementwise arc tangent.")
defjvp(atan_p, lambda g, ans, x: _arith.div(g, _arith.add(const(x, 1), _arith.mul(x, x))))
atan2_p, atan2 = binop("atan2", "inexact", "stablehlo.atan2", "Elementwise arc tangent of x / y.")
defjvp(atan2_p,
       lambda g, ans, x, y: _arith.mul(g, _arith.div(y, _arith.add(_arith.mul(x, x),
                                                                   _arith.mul(y, y)))),
       lambda g, ans, x, y: _arith.mul(g, _arith.div(_arith.neg(x), _arith.add(_arith.mul(x, x),
                                                                               _arith.mul(y, y)))))


# --- hyperbolic functions -------------------------------------------------------------------
sinh_p, sinh = unop("sinh", "inexact", "chlo.sinh", "Elementwise hyperbolic sine.")
defjvp(sinh_p, lambda g, ans, x: _arith.mul(g, cosh(x)))
cosh_p, cosh = unop("cosh", "inexact", "chlo.cosh", "Elementwise hyperbolic cosine.")
defjvp(cosh_p, lambda g, ans, x: _arith.mul(g, sinh(x)))
tanh_p, tanh = accuracy_unop("tanh", "inexact", "stablehlo.tanh",
                             "Elementwise hyperbolic tangent.")


def _tanh_jvp(g, ans, x, accuracy=None):
    if accuracy is AccuracyMode.HIGHEST:  # 1 - tanh(x)**2 == 4 logistic(2x) logistic(-2x)
        return _arith.mul(g, _arith.mul(const(x, 4), _arith.mul(
            logistic(_arith.mul(const(x, 2), x), accuracy=accuracy),
            logistic(_arith.mul(const(x, -2), x), accuracy=accuracy))))
    return _arith.mul(g, _arith.sub(const(x, 1), _arith.mul(ans, ans)))


defjvp(tanh_p, _tanh_jvp)
asinh_p, asinh = unop("asinh", "inexact", "chlo.asinh", "Elementwise inverse hyperbolic sine.")
defjvp(asinh_p, lambda g, ans, x: _arith.mul(g, rsqrt(_arith.add(_arith.mul(x, x), const(x, 1)))))
acosh_p, acosh = unop("acosh", "inexact", "chlo.acosh", "Elementwise inverse hyperbolic cosine.")
defjvp(acosh_p, lambda g, ans, x: _arith.mul(
    g, rsqrt(_arith.mul(_arith.sub(x, const(x, 1)), _arith.add(x, const(x, 1))))))
atanh_p, atanh = unop("atanh", "inexact", "chlo.atanh", "Elementwise inverse hyperbolic tangent.")
defjvp(atanh_p, lambda g, ans, x: _arith.div(g, _arith.sub(const(x, 1), _arith.mul(x, x))))


# --- roots ----------------------------------------------------------------------------------
sqrt_p, sqrt = accuracy_unop("sqrt", "inexact", "stablehlo.sqrt", "Elementwise square root.")
defjvp(sqrt_p, lambda g, ans, x, accuracy=None: _arith.div(g, _arith.mul(const(x, 2), ans)))
rsqrt_p, rsqrt = accuracy_unop("rsqrt", "inexact", "stablehlo.rsqrt", "Elementwise 1 / sqrt(x).")
defjvp(rsqrt_p, lambda g, ans, x, accuracy=None: _arith.mul(
    g, _arith.mul(const(x, -0.5), _arith.div(ans, x))))
cbrt_p, cbrt = accuracy_unop("cbrt", "float", "stablehlo.cbrt", "Elementwise cube root.")
defjvp(cbrt_p, lambda g, ans, x, accuracy=None: _arith.mul(
    g, _arith.mul(const(x, 1 / 3), _arith.integer_pow(ans, -2))))


# --- error and gamma functions --------------------------------------------------------------
erf_p, erf = unop("erf", "float", "chlo.erf", "Elementwise error function.")
defjvp(erf_p, lambda g, ans, x: _arith.mul(
    g, _arith.mul(const(x, 2 / np.sqrt(np.pi)), exp(_arith.neg(_arith.mul(x, x))))))
erfc_p, erfc = unop("erfc", "float", "chlo.erfc", "Elementwise complementary error function.")
defjvp(erfc_p, lambda g, ans, x: _arith.mul(
    g, _arith.mul(const(x, -2 / np.sqrt(np.pi)), exp(_arith.neg(_arith.mul(x, x))))))
erf_inv_p, erf_inv = unop("erf_inv", "float", "chlo.erf_inv", "Elementwise inverse error function.")
defjvp(erf_inv_p, lambda g, ans, x: _arith.mul(
    g, _arith.mul(const(x, np.sqrt(np.pi) / 2), exp(_arith.mul(ans, ans)))))
lgamma_p, lgamma = unop("lgamma", "float", "chlo.lgamma",
                        "Elementwise log of the absolute gamma function.")
defjvp(lgamma_p, lambda g, ans, x: _arith.mul(g, digamma(x)))
digamma_p, digamma = unop("digamma", "float", "chlo.digamma", "Elementwise digamma function.")


def _trigamma(x):
    """polygamma(1, x) from lax ops (so it differentiates again): reflection below 1/2,
    the recurrence psi1(x) = psi1(x + 1) + 1/x**2 up to x + 6, then the asymptotic series."""
    add, sub, mul, div, select = _arith.add, _arith.sub, _arith.mul, _arith.div, _cmp.select
    one = const(x, 1)
    reflect = _cmp.lt(x, const(x, 0.5))
    # Both branches stay finite, so the unselected one cannot leak NaNs into gradients.
    y = select(reflect, sub(one, x), x)
    xr = select(reflect, x, full_of(x, 0.25))
    acc = full_of(x, 0)
    for _ in range(6):
        acc = add(acc, div(one, mul(y, y)))
        y = add(y, one)
    r = div(one, y)
    r2 = mul(r, r)
    series = const(x, -1 / 30)
    for coeff in (1 / 42, -1 / 30, 1 / 6):
        series = add(const(x, coeff), mul(r2, series))
    tail = mul(r, add(one, mul(r, add(const(x, 0.5), mul(r, series)))))
    pos = add(acc, tail)
    s = sin(mul(const(x, np.pi), xr))
    return select(reflect, sub(div(const(x, np.pi ** 2), mul(s, s)), pos), pos)


defjvp(digamma_p, lambda g, ans, x: _arith.mul(g, _trigamma(x)))
