"""The Dirichlet distribution on the probability simplex."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.numpy.util import check_arraylike, promote_dtypes_inexact
from plax.scipy import special

__all__ = ["logpdf", "pdf"]

# How far the components' sum may stray from 1 and still count as a point of the simplex.
_SUM_TOLERANCE = 1e-6


def logpdf(x, alpha):
    """Log of the Dirichlet(alpha) density at ``x``.

    ``alpha`` is one-dimensional with K entries; ``x`` has K entries along its first axis
    (further axes are independent points), or K - 1, the last being 1 minus their sum.
    Points off the open simplex, and non-positive concentrations, give -inf.
    """
    check_arraylike("dirichlet.logpdf", x, alpha)
    x, alpha = promote_dtypes_inexact(*_checked_shapes(x, alpha))
    if jnp.shape(x)[0] == jnp.shape(alpha)[0] - 1:
        x = jnp.concatenate([x, jnp.subtract(1, jnp.sum(x, axis=0, keepdims=True))], axis=0)
    a = jnp.reshape(alpha, jnp.shape(alpha) + (1,) * (jnp.ndim(x) - 1))
    norm = jnp.subtract(special.gammaln(jnp.sum(alpha)), jnp.sum(special.gammaln(alpha)))
    out = jnp.add(norm, jnp.sum(special.xlogy(jnp.subtract(a, 1), x), axis=0))
    off_simplex = jnp.logical_or(
        jnp.any(jnp.less_equal(x, 0), axis=0),
        jnp.greater_equal(jnp.abs(jnp.subtract(jnp.sum(x, axis=0), 1)), _SUM_TOLERANCE))
    return jnp.where(jnp.logical_or(off_simplex, jnp.any(jnp.less_equal(alpha, 0))), -np.inf, out)


def pdf(x, alpha):
    """The Dirichlet(alpha) density at ``x`` (see logpdf for the shapes)."""
    return lax.exp(logpdf(x, alpha))


def _checked_shapes(x, alpha):
    x_shape, a_shape = jnp.shape(x), jnp.shape(alpha)
    if len(a_shape) != 1:
        raise ValueError(f"`alpha` must be one-dimensional; got alpha.shape={a_shape}")
    if not x_shape or x_shape[0] not in (a_shape[0], a_shape[0] - 1):
        raise ValueError("`x` must have either the same number of entries as `alpha` or one "
                         f"entry fewer; got x.shape={x_shape}, alpha.shape={a_shape}")
    return x, alpha
