"""The Poisson distribution with mean ``mu`` on loc, loc + 1, ..."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import is_integer_valued, promote

__all__ = ["logpmf", "pmf", "cdf", "entropy"]


def logpmf(k, mu, loc=0):
    """Log of the Poisson probability of ``k`` (-inf off the non-negative integers)."""
    k, mu, loc = promote("poisson.logpmf", k, mu, loc)
    n = jnp.subtract(k, loc)
    out = jnp.subtract(jnp.subtract(special.xlogy(n, mu), special.gammaln(jnp.add(n, 1))), mu)
    on_support = jnp.logical_and(jnp.greater_equal(n, 0), is_integer_valued(n))
    return jnp.where(jnp.logical_or(on_support, jnp.isnan(n)), out, -np.inf)


def pmf(k, mu, loc=0):
    """The Poisson probability of ``k``."""
    return lax.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    """The Poisson CDF P(K <= k) = Q(floor(k - loc) + 1, mu)."""
    k, mu, loc = promote("poisson.cdf", k, mu, loc)
    n = jnp.floor(jnp.subtract(k, loc))
    return jnp.where(jnp.less(n, 0), 0, special.gammaincc(jnp.add(jnp.maximum(n, 0), 1), mu))


# Above this mean the entropy is its large-mu expansion; below it the sum over k < _TERMS
# (which holds all but a negligible tail of the probability there).
_ASYMPTOTIC_FROM = 50.0
_TERMS = 180
# H(mu) ~ log(2 pi e mu) / 2 + sum_j _COEFFS[j] / mu**(j + 1); the terms from mu**-4 on were
# fitted to the exact sum at high precision (the first four are the classical ones).
_COEFFS = (-1 / 12, -1 / 24, -19 / 360, -9 / 80, -863 / 2520, -6875 / 5040, -33953 / 5040,
           -39.77847222)


def entropy(mu, loc=0):
    """The entropy (in nats) of the Poisson distribution with mean ``mu``."""
    mu, loc = promote("poisson.entropy", mu, loc)
    mu = jnp.broadcast_to(mu, jnp.broadcast_shapes(jnp.shape(mu), jnp.shape(loc)))
    small = jnp.less_equal(mu, _ASYMPTOTIC_FROM)
    ms = jnp.where(jnp.logical_and(small, jnp.greater(mu, 0)), mu, 1)
    log_mu = jnp.log(ms)

    def body(i, total):
        k = lax.convert_element_type(i, ms.dtype)
        log_p = jnp.subtract(jnp.subtract(jnp.multiply(k, log_mu), ms), lax.lgamma(jnp.add(k, 1)))
        return jnp.subtract(total, jnp.multiply(jnp.exp(log_p), log_p))

    summed = lax.fori_loop(0, _TERMS, body, jnp.zeros_like(ms))
    ml = jnp.where(small, _ASYMPTOTIC_FROM * 2, mu)
    inv = jnp.reciprocal(ml)
    series = jnp.zeros_like(ml)
    for c in reversed(_COEFFS):
        series = jnp.multiply(jnp.add(series, c), inv)
    asym = jnp.add(jnp.multiply(0.5, jnp.log(jnp.multiply(2 * np.pi * np.e, ml))), series)
    out = jnp.where(small, summed, asym)
    out = jnp.where(jnp.equal(mu, 0), 0, out)
    return jnp.where(jnp.less(mu, 0), np.nan, out)
