"""scipy.special on plax: logsumexp, softmax, the logistic pair, error and gamma functions,
and the x*log(y) family with derivatives that stay finite where SciPy's conventions say so.

Integer and boolean inputs are promoted to the default float type, as in JAX.
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core import dtypes
from plax.core.trace import get_aval
from plax.numpy.util import promote_args_inexact
from plax.transforms.custom_derivatives import custom_jvp

__all__ = ["logsumexp", "softmax", "log_softmax", "expit", "logit", "erf", "erfc", "erfinv",
           "gammaln", "digamma", "xlogy", "xlog1py", "entr"]


def _inexact(name: str, x):
    (x,) = promote_args_inexact(name, x)
    return x


def _dtype(x):
    return get_aval(x).dtype


def _unary(lax_fn, name: str, doc: str):
    def fn(x):
        return lax_fn(_inexact(name, x))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


expit = _unary(lax.logistic, "expit", "The logistic sigmoid 1 / (1 + exp(-x)).")
erf = _unary(lax.erf, "erf", "The error function.")
erfc = _unary(lax.erfc, "erfc", "The complementary error function 1 - erf(x).")
erfinv = _unary(lax.erf_inv, "erfinv", "The inverse of the error function.")
gammaln = _unary(lax.lgamma, "gammaln", "The log of the absolute value of the gamma function.")
digamma = _unary(lax.digamma, "digamma", "The digamma function, the derivative of gammaln.")


def logit(x):
    """The inverse of expit: log(x / (1 - x))."""
    x = _inexact("logit", x)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


# --- logsumexp and softmax -------------------------------------------------------------------
def _finite_shift(m):
    """The stabilising shift: the max, 0 where it is infinite or NaN, with no derivative
    (logsumexp does not depend on the shift, so its gradient must not flow through it)."""
    return lax.stop_gradient(jnp.where(jnp.isfinite(m), m, jnp.zeros_like(m)))


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """log(sum(b * exp(a))) over ``axis``, computed without overflow; with
    ``return_sign`` also the sign of the sum (and the log of its absolute value)."""
    if b is None:
        (a,) = promote_args_inexact("logsumexp", a)
    else:
        shape = jnp.broadcast_shapes(jnp.shape(a), jnp.shape(b))  # ValueError, as in JAX
        a, b = promote_args_inexact("logsumexp", a, b)
        a = jnp.broadcast_to(a, shape)
    is_complex = dtypes.is_complex(_dtype(a))
    real_a = jnp.real(a) if is_complex else a
    shift = _finite_shift(jnp.max(real_a, axis=axis, keepdims=True, where=where,
                                  initial=-np.inf))
    terms = jnp.exp(lax.sub(a, lax.convert_element_type(shift, _dtype(a))) if is_complex
                    else jnp.subtract(a, shift))
    if b is not None:
        terms = jnp.multiply(terms, b)
    total = jnp.sum(terms, axis=axis, keepdims=keepdims, where=where)
    shift = shift if keepdims else jnp.squeeze(shift, axis=axis)
    if is_complex and not return_sign:
        return jnp.add(jnp.log(total), lax.convert_element_type(shift, _dtype(total)))
    out = jnp.add(jnp.log(jnp.abs(total)), shift)
    if return_sign:
        return out, jnp.sign(total)
    if b is not None:  # a negative sum has no real log
        out = jnp.where(jnp.less(total, 0), jnp.full_like(out, np.nan), out)
    return out


def softmax(x, /, *, axis=None):
    """exp(x) / sum(exp(x)) over ``axis`` (all axes when None, as in SciPy)."""
    x = _inexact("softmax", x)
    shift = lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True))
    unnormalized = jnp.exp(jnp.subtract(x, shift))
    return jnp.divide(unnormalized, jnp.sum(unnormalized, axis=axis, keepdims=True))


def log_softmax(x, /, *, axis=None):
    """x - logsumexp(x) over ``axis`` (all axes when None, as in SciPy)."""
    x = _inexact("log_softmax", x)
    shifted = jnp.subtract(x, lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True)))
    return jnp.subtract(shifted, jnp.log(jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True)))


# --- x * log(y) and entropy -----------------------------------------------------------------
# These follow the convention 0 * log(0) = 0 for the value, while the derivatives are the
# plain formulas (log(y) and x / y), as JAX defines them: custom rules, since differentiating
# the select would give the derivative of the constant branch.
@custom_jvp
def _xlogy(x, y):
    keep = jnp.logical_or(jnp.not_equal(x, 0), jnp.isnan(y))
    return jnp.where(keep, jnp.multiply(x, jnp.log(y)), jnp.zeros_like(jnp.multiply(x, y)))


_xlogy.defjvps(lambda tx, ans, x, y: jnp.broadcast_to(jnp.multiply(tx, jnp.log(y)), jnp.shape(ans)),
               lambda ty, ans, x, y: jnp.broadcast_to(jnp.multiply(ty, jnp.divide(x, y)),
                                                      jnp.shape(ans)))


@custom_jvp
def _xlog1py(x, y):
    keep = jnp.logical_or(jnp.not_equal(x, 0), jnp.isnan(y))
    return jnp.where(keep, jnp.multiply(x, jnp.log1p(y)), jnp.zeros_like(jnp.multiply(x, y)))


_xlog1py.defjvps(
    lambda tx, ans, x, y: jnp.broadcast_to(jnp.multiply(tx, jnp.log1p(y)), jnp.shape(ans)),
    lambda ty, ans, x, y: jnp.broadcast_to(
        jnp.multiply(ty, jnp.divide(x, jnp.add(y, jnp.ones_like(y)))), jnp.shape(ans)))


def xlogy(x, y):
    """x * log(y), with 0 where x == 0 (unless y is NaN)."""
    return _xlogy(*promote_args_inexact("xlogy", x, y))


def xlog1py(x, y):
    """x * log1p(y), with 0 where x == 0 (unless y is NaN)."""
    return _xlog1py(*promote_args_inexact("xlog1py", x, y))


@custom_jvp
def _entr(x):
    neg_inf, zero = jnp.full_like(x, -np.inf), jnp.full_like(x, -0.0)  # -0.0 at 0, as JAX
    return jnp.where(jnp.less(x, 0), neg_inf,
                     jnp.where(jnp.equal(x, 0), zero, jnp.negative(jnp.multiply(x, jnp.log(x)))))


_entr.defjvps(lambda t, ans, x: jnp.multiply(t, jnp.negative(jnp.add(jnp.log(x), 1))))


def entr(x):
    """Elementwise entropy term: -x log(x) for x > 0, 0 at 0 and -inf for x < 0."""
    return _entr(_inexact("entr", x))
