"""plax.scipy.integrate (JAX's ``jax.scipy.integrate``): the trapezoidal rule."""
from __future__ import annotations

from plax.api.jit import jit
from plax.numpy import trapezoid as _numpy_trapezoid

__all__ = ["trapezoid"]


@jit(static_argnames=("axis",))
def trapezoid(y, x=None, dx=1.0, axis: int = -1):
    """The integral of ``y`` along ``axis`` by the composite trapezoidal rule, at sample points
    ``x`` (or spaced ``dx`` apart); as :func:`scipy.integrate.trapezoid`."""
    return _numpy_trapezoid(y, x, dx, axis)
