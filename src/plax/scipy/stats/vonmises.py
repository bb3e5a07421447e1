"""The von Mises distribution on the circle with concentration ``kappa``."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import LOG_2PI, nan_unless, promote

__all__ = ["logpdf", "pdf"]


def logpdf(x, kappa):
    """Log of exp(kappa cos(x)) / (2 pi I0(kappa)); NaN unless kappa > 0."""
    x, kappa = promote("vonmises.logpdf", x, kappa)
    # I0(k) = exp(k) i0e(k): subtracting k inside keeps large concentrations finite.
    out = jnp.subtract(jnp.multiply(kappa, jnp.subtract(jnp.cos(x), 1)),
                       jnp.add(LOG_2PI, jnp.log(special.i0e(kappa))))
    return nan_unless(jnp.greater(kappa, 0), out)


def pdf(x, kappa):
    """The von Mises density at ``x``."""
    return lax.exp(logpdf(x, kappa))
