"""The confluent (1F1) and Gauss (2F1) hypergeometric functions of scipy.special on plax.

Both are summed as power series (a while loop per call, until every element's next term is
below eps of its sum), after transformations that move the argument where the series
converges well: Kummer's e**x 1F1(b - a; b; -x) for x < 0; Pfaff's (1 - x)**-a 2F1(a, c - b;
c; x / (x - 1)) for x < 0, and the connection formula in 1 - x for 0.9 < x < 1 (where c - a - b
is not within 0.05 of an integer; there the plain series is summed for longer). Derivatives
come from custom JVP rules: in x by the contiguous relations (d/dx 1F1(a; b; x) = a/b 1F1(a+1;
b+1; x), d/dx 2F1 = ab/c 2F1(a+1, b+1; c+1; x)), in the parameters by summing the
differentiated series alongside.
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.higher_order.custom_derivatives import custom_jvp
from plax.scipy.special_common import dtype_of as _dtype, real_args as _real

__all__ = ["hyp1f1", "hyp2f1"]

_MAX_TERMS = 20000          # a cap for the slowest case (2F1 with x close to 1)
_CONNECTION_FROM = 0.9      # 2F1's series in x above it is replaced by the one in 1 - x
_NEAR_INTEGER = 0.05        # ... unless c - a - b is this close to an integer




def _is_nonpositive_integer(x):
    return jnp.logical_and(jnp.less_equal(x, 0), jnp.equal(jnp.floor(x), x))


def _product(factors):
    out = factors[0]
    for f in factors[1:]:
        out = out * f
    return out


@jit(static_argnames="with_derivatives")
def _series(numer, denom, x, with_derivatives=False):
    """sum over k of prod (p)_k / prod (q)_k * x**k / k!, for the parameter lists ``numer`` and
    ``denom`` (arrays of x's shape and dtype); with ``with_derivatives`` also the sum's
    derivatives in each parameter, numerator ones first. A term that reaches exactly 0 (a
    numerator parameter at a non-positive integer) ends its series there."""
    dt = _dtype(x)
    eps = float(dtypes.finfo(dt).eps)
    n_params = len(numer) + len(denom) if with_derivatives else 0

    def small(term, total):
        # NaN counts as settled, so that an invalid element does not hold the loop to its cap
        return jnp.all(jnp.logical_not(jnp.abs(term) > eps * jnp.abs(total)))

    def step(state):
        k, term, total, dterms, dtotals, _ = state
        num = [p + k for p in numer]
        den = [q + k for q in denom]
        scale = x / (k + 1) / _product(den)
        ratio = _product(num) * scale
        zero = jnp.equal(term, 0)
        new_term = jnp.where(zero, 0.0, term * ratio).astype(dt)
        new_dterms = []
        for i in range(len(numer) if with_derivatives else 0):
            others = [f for j, f in enumerate(num) if j != i]
            partial = (_product(others) if others else jnp.ones_like(x)) * scale
            new_dterms.append(dterms[i] * ratio + term * partial)
        for j in range(len(denom) if with_derivatives else 0):
            d_index = len(numer) + j
            new_dterms.append(dterms[d_index] * ratio - jnp.where(zero, 0.0, term * ratio
                                                                  / den[j]))
        total = total + new_term
        dtotals = tuple(dt_ + nd for dt_, nd in zip(dtotals, new_dterms))
        done = small(new_term, total)
        for nd, dtot in zip(new_dterms, dtotals):
            done = jnp.logical_and(done, small(nd, dtot))
        return k + 1, new_term, total, tuple(new_dterms), dtotals, done

    def going(state):
        return jnp.logical_and(jnp.logical_not(state[5]), state[0] < _MAX_TERMS)

    zeros = tuple(jnp.zeros_like(x) for _ in range(n_params))
    init = (jnp.zeros((), dt), jnp.ones_like(x), jnp.ones_like(x), zeros, zeros,
            jnp.zeros((), bool))
    _, _, total, _, dtotals, _ = lax.while_loop(going, step, init)
    return (total, list(dtotals)) if with_derivatives else total


def _gamma_and_reciprocal(x):
    """gamma(x) (inf at the poles) and 1 / gamma(x) (0 at the poles), for real x."""
    pole = _is_nonpositive_integer(x)
    safe = jnp.where(pole, 0.5, x).astype(_dtype(x))
    odd_floor = jnp.not_equal(jnp.remainder(jnp.floor(safe), 2), 0)
    sign = jnp.where(jnp.logical_and(jnp.less(safe, 0), odd_floor), -1.0, 1.0)
    log_abs = lax.lgamma(safe)
    return (jnp.where(pole, np.inf, sign * jnp.exp(log_abs)),
            jnp.where(pole, 0.0, sign * jnp.exp(jnp.negative(log_abs))))


# --- 1F1 --------------------------------------------------------------------------------------
def _hyp1f1_value(a, b, x):
    dt = _dtype(x)
    polynomial = _is_nonpositive_integer(a)
    kummer = jnp.logical_and(jnp.less(x, 0), jnp.logical_not(polynomial))
    p = jnp.where(kummer, b - a, a).astype(dt)
    y = jnp.where(kummer, jnp.negative(x), x).astype(dt)
    # b at a pole of the series (a non-positive integer reached before any zero of (a)_k)
    b_pole = _is_nonpositive_integer(b) & jnp.logical_not(polynomial & jnp.greater(a, b))
    safe_b = jnp.where(b_pole, 1.0, b).astype(dt)
    total = _series([jnp.where(b_pole, 0.0, p).astype(dt)], [safe_b], y)
    out = jnp.where(kummer, jnp.exp(x) * total, total)
    # 1F1(a; b; -inf) = 0 for a > 0 (it decays as (-x)**-a)
    out = jnp.where(jnp.isneginf(x) & jnp.greater(a, 0), 0.0, out)
    out = jnp.where(b_pole, np.inf, out)
    return jnp.where(jnp.isnan(a) | jnp.isnan(b) | jnp.isnan(x), np.nan, out).astype(dt)


@custom_jvp
@jit
def _hyp1f1(a, b, x):
    return _hyp1f1_value(a, b, x)


@_hyp1f1.defjvp
def _hyp1f1_jvp(primals, tangents):
    a, b, x = primals
    a_dot, b_dot, x_dot = tangents
    dt = _dtype(x)
    out = _hyp1f1(a, b, x)
    d_x = a / b * _hyp1f1(a + 1, b + 1, x)
    # the parameter derivatives, through Kummer's transformation where it was used
    kummer = jnp.less(x, 0)
    p = jnp.where(kummer, b - a, a).astype(dt)
    y = jnp.where(kummer, jnp.negative(x), x).astype(dt)
    _, (g_p, g_b) = _series([p], [b], y, with_derivatives=True)
    scale = jnp.exp(x)
    d_a = jnp.where(kummer, jnp.negative(scale * g_p), g_p)
    d_b = jnp.where(kummer, scale * (g_p + g_b), g_b)
    return out, d_a * a_dot + d_b * b_dot + d_x * x_dot


def hyp1f1(a, b, x):
    """Kummer's confluent hypergeometric function 1F1(a; b; x), the sum over k of
    (a)_k / (b)_k x**k / k!, for real arguments. Differentiable in all three."""
    a, b, x = _real("hyp1f1", a, b, x)
    return _hyp1f1(a, b, x)


# --- 2F1 --------------------------------------------------------------------------------------
def _hyp2f1_unit_interval(a, b, c, y):
    """2F1(a, b; c; y) for 0 <= y < 1, c off the poles."""
    dt = _dtype(y)
    s = c - a - b
    off_integer = jnp.greater(jnp.abs(s - jnp.round(s)), _NEAR_INTEGER)
    connect = jnp.logical_and(jnp.greater(y, _CONNECTION_FROM), off_integer)
    y_direct = jnp.where(connect, 0.0, y).astype(dt)
    direct = _series([a, b], [c], y_direct)
    # 2F1(a, b; c; y) = A 2F1(a, b; 1 - s; 1 - y) + B (1 - y)**s 2F1(c - a, c - b; 1 + s; 1 - y),
    # A = G(c) G(s) / (G(c - a) G(c - b)), B = G(c) G(-s) / (G(a) G(b)), G the gamma function
    s_c = jnp.where(connect, s, 0.5).astype(dt)
    w = jnp.where(connect, 1 - y, 0.0).astype(dt)
    g_c, _ = _gamma_and_reciprocal(c)
    g_s, _ = _gamma_and_reciprocal(s_c)
    g_neg_s, _ = _gamma_and_reciprocal(jnp.negative(s_c))
    _, r_ca = _gamma_and_reciprocal(c - a)
    _, r_cb = _gamma_and_reciprocal(c - b)
    _, r_a = _gamma_and_reciprocal(a)
    _, r_b = _gamma_and_reciprocal(b)
    first = _series([a, b], [1 - s_c], w)
    second = _series([c - a, c - b], [1 + s_c], w)
    connected = (g_c * g_s * r_ca * r_cb * first
                 + g_c * g_neg_s * r_a * r_b * jnp.power(w, s_c) * second)
    return jnp.where(connect, connected, direct)


def _hyp2f1_value(a, b, c, x):
    dt = _dtype(x)
    a_zero, b_zero = _is_nonpositive_integer(a), _is_nonpositive_integer(b)
    polynomial = a_zero | b_zero
    # the polynomial's degree: it ends before c's pole when its degree is below -c
    degree = jnp.where(a_zero & b_zero, jnp.maximum(a, b),
                       jnp.where(a_zero, a, jnp.where(b_zero, b, -np.inf)))
    c_pole = _is_nonpositive_integer(c) & jnp.logical_not(polynomial & jnp.greater(degree, c))
    safe_c = jnp.where(c_pole, 1.0, c).astype(dt)
    # a polynomial: its (finite) series, at any x
    poly_x = jnp.where(polynomial, x, 0.0).astype(dt)
    poly = _series([a, b], [safe_c], poly_x)
    # x < 0: Pfaff's transformation onto (0, 1)
    pfaff = jnp.less(x, 0)
    xn = jnp.where(pfaff, x, -1.0).astype(dt)
    y = jnp.where(pfaff, xn / (xn - 1), jnp.where(jnp.less(x, 1), x, 0.0)).astype(dt)
    second = jnp.where(pfaff, safe_c - b, b).astype(dt)
    inner = _hyp2f1_unit_interval(a, second, safe_c, y)
    general = jnp.where(pfaff, jnp.power(1 - xn, jnp.negative(a)) * inner, inner)
    # x = 1: Gauss's sum where it converges (c - a - b > 0)
    gauss_ok = jnp.greater(safe_c - a - b, 0)
    g_c, _ = _gamma_and_reciprocal(safe_c)
    g_s, _ = _gamma_and_reciprocal(jnp.where(gauss_ok, safe_c - a - b, 1.0).astype(dt))
    _, r_ca = _gamma_and_reciprocal(safe_c - a)
    _, r_cb = _gamma_and_reciprocal(safe_c - b)
    at_one = jnp.where(gauss_ok, g_c * g_s * r_ca * r_cb, np.inf)
    out = jnp.where(jnp.equal(x, 1), at_one, jnp.where(jnp.greater(x, 1), np.inf, general))
    out = jnp.where(polynomial, poly, out)
    out = jnp.where(c_pole, np.inf, out)
    any_nan = jnp.isnan(a) | jnp.isnan(b) | jnp.isnan(c) | jnp.isnan(x)
    return jnp.where(any_nan, np.nan, out).astype(dt)


@custom_jvp
@jit
def _hyp2f1(a, b, c, x):
    return _hyp2f1_value(a, b, c, x)


@_hyp2f1.defjvp
def _hyp2f1_jvp(primals, tangents):
    a, b, c, x = primals
    a_dot, b_dot, c_dot, x_dot = tangents
    dt = _dtype(x)
    out = _hyp2f1(a, b, c, x)
    d_x = a * b / c * _hyp2f1(a + 1, b + 1, c + 1, x)
    # the parameter derivatives from the differentiated series (through Pfaff's
    # transformation for x < 0)
    pfaff = jnp.less(x, 0)
    xn = jnp.where(pfaff, x, -1.0).astype(dt)
    y = jnp.where(pfaff, xn / (xn - 1), jnp.where(jnp.less(x, 1), x, 0.0)).astype(dt)
    second = jnp.where(pfaff, c - b, b).astype(dt)
    g, (g_a, g_second, g_c) = _series([a, second], [c], y, with_derivatives=True)
    factor = jnp.where(pfaff, jnp.power(1 - xn, jnp.negative(a)), 1.0)
    d_a = jnp.where(pfaff, factor * (g_a - jnp.log1p(jnp.negative(xn)) * g), g_a)
    d_b = jnp.where(pfaff, jnp.negative(factor * g_second), g_second)
    d_c = jnp.where(pfaff, factor * (g_second + g_c), g_c)
    return out, d_a * a_dot + d_b * b_dot + d_c * c_dot + d_x * x_dot


def hyp2f1(a, b, c, x):
    """The Gauss hypergeometric function 2F1(a, b; c; x), the sum over k of
    (a)_k (b)_k / (c)_k x**k / k!, for real arguments and x <= 1 (x > 1 gives inf unless a or
    b is a non-positive integer, when it is a polynomial). Differentiable in all four."""
    a, b, c, x = _real("hyp2f1", a, b, c, x)
    return _hyp2f1(a, b, c, x)
