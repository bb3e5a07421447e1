"""Transcendental and special functions: exponentials and logarithms, trigonometric and
hyperbolic functions and their inverses, roots, the error and gamma functions, atan2.

Each row declares the primitive (abstract evaluation, lowering, batching); the
line after it is its derivative, written with lax ops so that it differentiates
again.
"""
from __future__ import annotations

import numpy as np

from plax.core.avals import ShapedArray
from plax.core.rules import register_lowering
from plax.first_order import arithmetic as _arith
from plax.first_order import comparison as _cmp
from plax.first_order.ad_util import defjvp
from plax.first_order.elementwise_util import binop, const, full_of, unop

__all__ = ["exp", "exp2", "log", "expm1", "log1p", "tanh", "logistic", "sin", "cos", "tan", "asin",
           "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "erf",
           "erfc", "erf_inv", "lgamma", "digamma", "atan2"]


# --- exponentials and logarithms ------------------------------------------------------------
exp_p, exp = unop("exp", "inexact", "stablehlo.exponential", "Elementwise e**x.")
defjvp(exp_p, lambda g, ans, x: _arith.mul(g, ans))

exp2_p, exp2 = unop("exp2", "inexact", None, "Elementwise 2**x.")


def _exp2_lowering(ctx, x):
    aval = ctx.avals_in[0]
    ln2 = ctx.broadcast(ctx.constant(np.log(2.0), ShapedArray((), aval.dtype)),
                        ShapedArray((), aval.dtype), aval)
    return ctx.op1("stablehlo.exponential", [ctx.op1("stablehlo.multiply", [x, ln2], [aval, aval])])


register_lowering(exp2_p, _exp2_lowering)
defjvp(exp2_p, lambda g, ans, x: _arith.mul(g, _arith.mul(ans, const(x, np.log(2)))))

log_p, log = unop("log", "inexact", "stablehlo.log", "Elementwise natural logarithm.")
defjvp(log_p, lambda g, ans, x: _arith.div(g, x))
expm1_p, expm1 = unop("expm1", "inexact", "stablehlo.exponential_minus_one",
                      "Elementwise e**x - 1.")
defjvp(expm1_p, lambda g, ans, x: _arith.mul(g, _arith.add(ans, const(x, 1))))
log1p_p, log1p = unop("log1p", "inexact", "stablehlo.log_plus_one", "Elementwise log(1 + x).")
defjvp(log1p_p, lambda g, ans, x: _arith.div(g, _arith.add(x, const(x, 1))))
logistic_p, logistic = unop("logistic", "inexact", "stablehlo.logistic",
                            "Elementwise 1 / (1 + e**-x).")
defjvp(logistic_p, lambda g, ans, x: _arith.mul(g, _arith.mul(ans, _arith.sub(const(x, 1), ans))))


# --- trigonometric functions ----------------------------------------------------------------
sin_p, sin = unop("sin", "inexact", "stablehlo.sine", "Elementwise sine.")
defjvp(sin_p, lambda g, ans, x: _arith.mul(g, cos(x)))
cos_p, cos = unop("cos", "inexact", "stablehlo.cosine", "Elementwise cosine.")
defjvp(cos_p, lambda g, ans, x: _arith.neg(_arith.mul(g, sin(x))))
tan_p, tan = unop("tan", "inexact", "stablehlo.tan", "Elementwise tangent.")
defjvp(tan_p, lambda g, ans, x: _arith.mul(g, _arith.add(const(x, 1), _arith.mul(ans, ans))))
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
tanh_p, tanh = unop("tanh", "inexact", "stablehlo.tanh", "Elementwise hyperbolic tangent.")
defjvp(tanh_p, lambda g, ans, x: _arith.mul(g, _arith.sub(const(x, 1), _arith.mul(ans, ans))))
asinh_p, asinh = unop("asinh", "inexact", "chlo.asinh", "Elementwise inverse hyperbolic sine.")
defjvp(asinh_p, lambda g, ans, x: _arith.mul(g, rsqrt(_arith.add(_arith.mul(x, x), const(x, 1)))))
acosh_p, acosh = unop("acosh", "inexact", "chlo.acosh", "Elementwise inverse hyperbolic cosine.")
defjvp(acosh_p, lambda g, ans, x: _arith.mul(
    g, rsqrt(_arith.mul(_arith.sub(x, const(x, 1)), _arith.add(x, const(x, 1))))))
atanh_p, atanh = unop("atanh", "inexact", "chlo.atanh", "Elementwise inverse hyperbolic tangent.")
defjvp(atanh_p, lambda g, ans, x: _arith.div(g, _arith.sub(const(x, 1), _arith.mul(x, x))))


# --- roots ----------------------------------------------------------------------------------
sqrt_p, sqrt = unop("sqrt", "inexact", "stablehlo.sqrt", "Elementwise square root.")
defjvp(sqrt_p, lambda g, ans, x: _arith.div(g, _arith.mul(const(x, 2), ans)))
rsqrt_p, rsqrt = unop("rsqrt", "inexact", "stablehlo.rsqrt", "Elementwise 1 / sqrt(x).")
defjvp(rsqrt_p, lambda g, ans, x: _arith.mul(g, _arith.mul(const(x, -0.5), _arith.div(ans, x))))
cbrt_p, cbrt = unop("cbrt", "float", "stablehlo.cbrt", "Elementwise cube root.")
defjvp(cbrt_p, lambda g, ans, x: _arith.mul(
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
