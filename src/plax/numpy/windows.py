"""Window functions as in NumPy: bartlett, blackman, hamming, hanning, kaiser.

Each returns ``M`` points of the symmetric window in the default float type (an empty
array for ``M < 1``, ``[1.]`` for ``M == 1``). ``M`` must be concrete; kaiser's ``beta``
may be traced.
"""
from __future__ import annotations

import math

import numpy as np

from plax import lax
from plax.core import dtypes
from plax.core.trace import Tracer
from plax.numpy import creation, shape_ops, ufuncs
from plax.numpy.util import as_operand, check_arraylike, convert

__all__ = ["bartlett", "blackman", "hamming", "hanning", "kaiser"]

# Terms of the power series of log I0 summed in kaiser: enough for beta up to ~400.
_I0_TERMS = 256


def _length(name: str, M) -> int:
    M = shape_ops.static_value(M, "M (the window length)")
    if isinstance(M, (bool, np.bool_)) or not isinstance(M, (int, float, np.integer,
                                                             np.floating, np.ndarray)):
        raise TypeError(f"{name}: M must be an integer, got {M!r}.")
    if np.ndim(M) != 0 or np.iscomplexobj(M):
        raise TypeError(f"{name}: M must be a real scalar, got {M!r}.")
    return int(M)


def _phase(M: int, dt):
    """``2 pi n / (M - 1)`` for n = 0 .. M-1, in ``dt``."""
    n = convert(np.arange(M, dtype=np.float64), dt)
    return ufuncs.multiply(n, convert(2.0 * math.pi / (M - 1), dt))


def _cosine_window(name: str, M, coeffs):
    M = _length(name, M)
    dt = dtypes.default_float_dtype()
    if M < 1:
        return creation.zeros((0,), dt)
    if M == 1:
        return creation.ones((1,), dt)
    t = _phase(M, dt)
    out = creation.full((M,), coeffs[0], dt)
    for j, c in enumerate(coeffs[1:], start=1):
        term = ufuncs.multiply(convert(c, dt), ufuncs.cos(ufuncs.multiply(convert(j, dt), t)))
        out = ufuncs.add(out, term)
    return out


def bartlett(M):
    """The Bartlett (triangular) window of ``M`` points."""
    M = _length("bartlett", M)
    dt = dtypes.default_float_dtype()
    if M < 1:
        return creation.zeros((0,), dt)
    if M == 1:
        return creation.ones((1,), dt)
    n = convert(np.arange(M, dtype=np.float64), dt)
    half = convert((M - 1) / 2.0, dt)
    return ufuncs.subtract(convert(1.0, dt),
                           ufuncs.abs(ufuncs.true_divide(ufuncs.subtract(n, half), half)))


def blackman(M):
    """The Blackman window of ``M`` points: 0.42 - 0.5 cos(2 pi n/(M-1)) + 0.08 cos(4 pi
    n/(M-1))."""
    return _cosine_window("blackman", M, (0.42, -0.5, 0.08))


def hamming(M):
    """The Hamming window of ``M`` points: 0.54 - 0.46 cos(2 pi n/(M-1))."""
    return _cosine_window("hamming", M, (0.54, -0.46))


def hanning(M):
    """The Hann window of ``M`` points: 0.5 - 0.5 cos(2 pi n/(M-1))."""
    return _cosine_window("hanning", M, (0.5, -0.5))


def _log_i0(x, dt):
    """log of the modified Bessel function I0 at ``x >= 0`` from its power series
    sum_k (x/2)^(2k) / (k!)^2, summed in log space so large arguments do not overflow."""
    k = np.arange(_I0_TERMS, dtype=np.float64)
    log_fact2 = convert(2.0 * np.array([math.lgamma(v + 1.0) for v in k]), dt)
    kk = convert(2.0 * k, dt)
    half = ufuncs.multiply(x, convert(0.5, dt))
    tiny = convert(np.finfo(dt).tiny, dt)
    log_half = ufuncs.log(ufuncs.maximum(half, tiny))[..., None]
    terms = ufuncs.subtract(ufuncs.multiply(kk, log_half), log_fact2)
    # k = 0 contributes exactly 1 (also at x = 0, where log(x/2) is clamped)
    terms = ufuncs.where(np.arange(_I0_TERMS) == 0, convert(0.0, dt), terms)
    top = lax.stop_gradient(lax.reduce_max(terms, (terms.ndim - 1,)))
    total = lax.reduce_sum(ufuncs.exp(ufuncs.subtract(terms, top[..., None])), (terms.ndim - 1,))
    return ufuncs.add(ufuncs.log(total), top)


def kaiser(M, beta):
    """The Kaiser window of ``M`` points with shape parameter ``beta``:
    I0(beta sqrt(1 - (2n/(M-1) - 1)^2)) / I0(beta)."""
    M = _length("kaiser", M)
    check_arraylike("kaiser", beta)
    dt = dtypes.default_float_dtype()
    beta = as_operand(beta)
    if np.ndim(beta) if not isinstance(beta, Tracer) else beta.aval.ndim:
        raise ValueError("kaiser: beta must be a scalar.")
    beta = convert(beta, dt)
    if M < 1:
        return creation.zeros((0,), dt)
    if M == 1:
        return creation.ones((1,), dt)
    n = convert(np.arange(M, dtype=np.float64), dt)
    r = ufuncs.subtract(ufuncs.multiply(n, convert(2.0 / (M - 1), dt)), convert(1.0, dt))
    arg = ufuncs.multiply(beta, ufuncs.sqrt(ufuncs.maximum(
        ufuncs.subtract(convert(1.0, dt), ufuncs.multiply(r, r)), convert(0.0, dt))))
    return ufuncs.exp(ufuncs.subtract(_log_i0(ufuncs.abs(arg), dt),
                                      _log_i0(ufuncs.abs(beta), dt)))
