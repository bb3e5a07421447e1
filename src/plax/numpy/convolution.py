"""convolve and correlate: 1-D discrete convolution and cross-correlation (as jax.numpy's)."""
from __future__ import annotations

import numpy as np

from plax.core.trace import get_aval
from plax.numpy import indexing, products, shape_ops, ufuncs
from plax.numpy.util import check_arraylike, promote_dtypes_inexact

__all__ = ["convolve", "correlate"]


def _full(a, w, precision, preferred_element_type):
    """The full convolution of 1-D ``a`` and ``w``: out[k] = sum_i a[i] w[k - i]."""
    n, m = get_aval(a).shape[0], get_aval(w).shape[0]
    padded = shape_ops.pad(a, (m - 1, m - 1))
    windows = indexing.take(padded, np.arange(n + m - 1)[:, None] + np.arange(m)[None, :],
                            axis=0)
    return products.matmul(windows, w[::-1], precision=precision,
                           preferred_element_type=preferred_element_type)


def _convolve(name, a, v, mode, precision, preferred_element_type, correlate: bool):
    check_arraylike(name, a, v)
    a, v = promote_dtypes_inexact(a, v)
    sa, sv = get_aval(a).shape, get_aval(v).shape
    if len(sa) != 1 or len(sv) != 1:
        raise ValueError(f"{name}() only support 1-dimensional inputs.")
    if not sa[0] or not sv[0]:
        raise ValueError(f"{name}: inputs cannot be empty, got shapes {sa} and {sv}.")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"{name}: mode must be one of 'full', 'same' or 'valid', got {mode!r}.")
    n, m = sa[0], sv[0]
    if correlate and m > n:  # as NumPy: the correlation of the swapped pair, reversed
        out = _convolve(name, v, a, mode, precision, preferred_element_type, True)
        return ufuncs.conjugate(out)[::-1]
    if correlate:  # cross-correlation is convolution with the reversed, conjugated kernel
        v = ufuncs.conjugate(v)[::-1]
    swapped = m > n
    if swapped:  # convolution commutes: slide the shorter one
        a, v, n, m = v, a, m, n
    full = _full(a, v, precision, preferred_element_type)
    if mode == "same":
        start = (m - 1) // 2
        out = full[start:start + n]
    elif mode == "valid":
        out = full[m - 1:n]
    else:
        out = full
    return out


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """The discrete convolution of the 1-D arrays ``a`` and ``v`` (``mode``: 'full', 'same'
    or 'valid', as numpy.convolve)."""
    return _convolve("convolve", a, v, mode, precision, preferred_element_type, False)


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """The cross-correlation of the 1-D arrays ``a`` and ``v`` (``v`` conjugated), as
    numpy.correlate."""
    return _convolve("correlate", a, v, mode, precision, preferred_element_type, True)
