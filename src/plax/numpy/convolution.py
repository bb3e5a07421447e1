"""convolve and correlate: 1-D discrete convolution and cross-correlation (as jax.numpy's),
each one lax.conv_general_dilated over a batch of one and one feature."""
from __future__ import annotations

from plax.core.trace import get_aval
from plax.first_order import convolution as _conv
from plax.first_order import shapes as _shapes
from plax.numpy import ufuncs
from plax.numpy.util import check_arraylike, promote_dtypes_inexact

__all__ = ["convolve", "correlate"]


def sliding_padding(mode: str, m: int) -> tuple:
    """(lo, hi) of the sliding product with a kernel of length ``m`` for ``mode``."""
    if mode == "full":
        return (m - 1, m - 1)
    if mode == "same":  # the centre of the full result, as NumPy picks it
        return (m // 2, (m - 1) // 2)
    return (0, 0)


def _slide(a, kernel, mode, precision, preferred_element_type):
    """``out[k] = sum_j a[k + j - lo] kernel[j]`` (no flip, no conjugation)."""
    n, m = get_aval(a).shape[0], get_aval(kernel).shape[0]
    out = _conv.conv_general_dilated(
        _shapes.reshape(a, (1, 1, n)), _shapes.reshape(kernel, (1, 1, m)), (1,),
        [sliding_padding(mode, m)], precision=precision,
        preferred_element_type=preferred_element_type)
    return _shapes.reshape(out, get_aval(out).shape[2:])


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
    if correlate:
        if m > n:  # as NumPy: the correlation of the swapped pair, reversed and conjugated
            out = _convolve(name, v, a, mode, precision, preferred_element_type, True)
            return _shapes.rev(ufuncs.conjugate(out), (0,))
        return _slide(a, ufuncs.conjugate(v), mode, precision, preferred_element_type)
    if m > n:  # convolution commutes: slide the shorter one
        a, v = v, a
    return _slide(a, _shapes.rev(v, (0,)), mode, precision, preferred_element_type)


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """The discrete convolution of the 1-D arrays ``a`` and ``v`` (``mode``: 'full', 'same'
    or 'valid', as numpy.convolve)."""
    return _convolve("convolve", a, v, mode, precision, preferred_element_type, False)


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """The cross-correlation of the 1-D arrays ``a`` and ``v`` (``v`` conjugated), as
    numpy.correlate."""
    return _convolve("correlate", a, v, mode, precision, preferred_element_type, True)
