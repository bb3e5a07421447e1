"""The multinomial distribution: counts of ``n`` draws over categories with probabilities p."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core import dtypes
from plax.numpy.util import check_arraylike, promote_dtypes_inexact
from plax.scipy import special

__all__ = ["logpmf", "pmf"]


def logpmf(x, n, p):
    """Log of the probability of the counts ``x`` (categories on the last axis) in ``n``
    draws with category probabilities ``p``; -inf unless the counts are non-negative and
    sum to ``n``. ``x`` and ``n`` must be integers."""
    check_arraylike("multinomial.logpmf", x, n, p)
    x_dt, n_dt = (dtypes.canonicalize_dtype(dtypes.result_type(v)) for v in (x, n))
    if not (dtypes.issubdtype(x_dt, np.integer) and dtypes.issubdtype(n_dt, np.integer)):
        raise ValueError(f"x and n must be of integer type; got x.dtype={x_dt.name}, "
                         f"n.dtype={n_dt.name}")
    # (the counts are compared with n as integers, before the promotion to floats)
    bad = jnp.logical_or(jnp.any(jnp.less(x, 0), axis=-1), jnp.not_equal(jnp.sum(x, axis=-1), n))
    x, p = promote_dtypes_inexact(x, p)
    n = lax.convert_element_type(n, x.dtype)
    log_coef = jnp.subtract(special.gammaln(jnp.add(n, 1)),
                            jnp.sum(special.gammaln(jnp.add(x, 1)), axis=-1))
    out = jnp.add(log_coef, jnp.sum(special.xlogy(x, p), axis=-1))
    return jnp.where(bad, -np.inf, out)


def pmf(x, n, p):
    """The multinomial probability of the counts ``x`` (see logpmf)."""
    return lax.exp(logpmf(x, n, p))

