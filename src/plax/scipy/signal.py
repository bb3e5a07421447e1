"""plax.scipy.signal: N-dimensional convolution and correlation (direct, as one
lax.conv_general_dilated, or through the FFT), and detrend, as jax.scipy.signal."""
from __future__ import annotations

import operator

import numpy as np

from plax import lax
from plax.core.trace import get_aval
from plax.numpy import creation, fft as _fft, padding, shape_ops, ufuncs
from plax.numpy.convolution import sliding_padding
from plax.numpy.util import check_arraylike, promote_dtypes_inexact
from plax.scipy.signal_spectral import csd, istft, stft, welch

__all__ = ["convolve", "correlate", "convolve2d", "correlate2d", "fftconvolve", "detrend", "stft",
           "istft", "welch", "csd"]

_MODES = ("full", "same", "valid")


def _check(name, in1, in2, mode):
    check_arraylike(name, in1, in2)
    in1, in2 = promote_dtypes_inexact(in1, in2)
    s1, s2 = get_aval(in1).shape, get_aval(in2).shape
    if len(s1) != len(s2):
        raise ValueError(f"{name}: in1 and in2 must have the same number of dimensions, got "
                         f"shapes {s1} and {s2}.")
    if 0 in s1 or 0 in s2:
        raise ValueError(f"{name}: inputs cannot be empty, got shapes {s1} and {s2}.")
    if mode not in _MODES:
        raise ValueError(f"{name}: mode must be one of 'full', 'same' or 'valid', got "
                         f"{mode!r}.")
    return in1, in2


def _valid_order(name, in1, in2):
    """For 'valid': the pair with the larger array first (one must be at least as large as the
    other in every dimension)."""
    s1, s2 = get_aval(in1).shape, get_aval(in2).shape
    if all(a >= b for a, b in zip(s1, s2)):
        return in1, in2
    if all(b >= a for a, b in zip(s1, s2)):
        return in2, in1
    raise ValueError(f"{name}: One input must be smaller than the other in every dimension "
                     f"for mode='valid', got shapes {s1} and {s2}.")


def _slide(a, kernel, mode, precision):
    """``out[k] = sum_j a[k + j - lo] kernel[j]`` over every dimension (no flip), padded as
    ``mode`` says."""
    return _slide_padded(a, kernel, [sliding_padding(mode, m) for m in get_aval(kernel).shape],
                         precision)


def _slide_padded(a, kernel, widths, precision):
    sa, sk = get_aval(a).shape, get_aval(kernel).shape
    out = lax.conv_general_dilated(
        lax.reshape(a, (1, 1) + sa), lax.reshape(kernel, (1, 1) + sk), (1,) * len(sa),
        [tuple(w) for w in widths], precision=precision)
    return lax.reshape(out, get_aval(out).shape[2:])


def _direct(name, in1, in2, mode, precision):
    """The convolution of in1 and in2 (already checked), computed directly."""
    if mode == "valid":
        in1, in2 = _valid_order(name, in1, in2)
    if get_aval(in1).ndim == 0:
        return ufuncs.multiply(in1, in2)
    return _slide(in1, lax.rev(in2, tuple(range(get_aval(in2).ndim))), mode, precision)


def convolve(in1, in2, mode="full", method="auto", precision=None):
    """The N-dimensional convolution of ``in1`` and ``in2`` (``mode`` 'full', 'same' — the
    size of in1 — or 'valid'); ``method`` 'auto'/'direct' slides one over the other, 'fft'
    multiplies their transforms."""
    in1, in2 = _check("convolve", in1, in2, mode)
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    if method not in ("auto", "direct"):
        raise ValueError(f"convolve: got method={method!r}; expected 'auto', 'direct' or "
                         "'fft'.")
    return _direct("convolve", in1, in2, mode, precision)


def correlate(in1, in2, mode="full", method="auto", precision=None):
    """The N-dimensional cross-correlation of ``in1`` and ``in2`` (``in2`` conjugated):
    the convolution with ``in2`` reversed along every axis."""
    in1, in2 = _check("correlate", in1, in2, mode)
    flipped = lax.rev(ufuncs.conjugate(in2), tuple(range(get_aval(in2).ndim)))
    return convolve(in1, flipped, mode=mode, method=method, precision=precision)


_BOUNDARY_PAD = {"fill": "constant", "wrap": "wrap", "symm": "symmetric"}


def _two_d(name, in1, in2, mode, boundary, fillvalue, precision, flip: bool):
    in1, in2 = _check(name, in1, in2, mode)
    if get_aval(in1).ndim != 2:
        raise ValueError(f"{name}() only supports 2-dimensional inputs, got shapes "
                         f"{get_aval(in1).shape} and {get_aval(in2).shape}.")
    if boundary not in _BOUNDARY_PAD:
        raise ValueError(f"{name}: boundary must be 'fill', 'wrap' or 'symm', got "
                         f"{boundary!r}.")
    if mode == "valid":
        first, second = _valid_order(name, in1, in2)
        if flip and first is in2:  # correlating the other way round: reversed and conjugated
            out = _two_d(name, in2, in1, mode, boundary, fillvalue, precision, flip)
            return lax.rev(ufuncs.conjugate(out), (0, 1))
        in1, in2 = first, second
    # convolve2d slides in2 reversed; correlate2d slides it conjugated, and its 'same' result
    # is centred the other way round for even kernel sizes (as SciPy's).
    kernel = ufuncs.conjugate(in2) if flip else lax.rev(in2, (0, 1))
    widths = [sliding_padding(mode, m)[::-1] if flip else sliding_padding(mode, m)
              for m in get_aval(in2).shape]
    if boundary == "fill" and isinstance(fillvalue, (int, float)) and fillvalue == 0:
        return _slide_padded(in1, kernel, widths, precision)
    # Pad in1 by the boundary rule as far as the kernel reaches, then slide without padding.
    kwargs = {"constant_values": fillvalue} if boundary == "fill" else {}
    padded = padding.pad(in1, widths, mode=_BOUNDARY_PAD[boundary], **kwargs)
    return _slide_padded(padded, kernel, [(0, 0), (0, 0)], precision)


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """The 2-D convolution of ``in1`` and ``in2``; ``boundary`` 'fill' (with ``fillvalue``),
    'wrap' or 'symm' says what lies beyond in1's edges."""
    return _two_d("convolve2d", in1, in2, mode, boundary, fillvalue, precision, flip=False)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """The 2-D cross-correlation of ``in1`` and ``in2`` (see convolve2d for the options)."""
    return _two_d("correlate2d", in1, in2, mode, boundary, fillvalue, precision, flip=True)


def fftconvolve(in1, in2, mode="full", axes=None):
    """The convolution of ``in1`` and ``in2`` through the FFT along ``axes`` (default all);
    along the other axes the inputs broadcast."""
    in1, in2 = _check("fftconvolve", in1, in2, mode)
    s1, s2 = get_aval(in1).shape, get_aval(in2).shape
    ndim = len(s1)
    if axes is None:
        axes = tuple(range(ndim))
    else:
        axes = (axes,) if np.ndim(axes) == 0 else tuple(axes)
        axes = tuple(sorted({operator.index(a) % ndim if -ndim <= a < ndim else _bad_axis(a, ndim)
                             for a in axes}))
    for d in range(ndim):
        if d not in axes and s1[d] != s2[d] and 1 not in (s1[d], s2[d]):
            raise ValueError(f"fftconvolve: mapped axes must have same shape (or 1), got in1 "
                             f"{s1} and in2 {s2} along axis {d}, which is not transformed.")
    if mode == "valid" and not (all(s1[d] >= s2[d] for d in axes) or
                                all(s2[d] >= s1[d] for d in axes)):
        raise ValueError(f"fftconvolve: One input must be smaller than the other in every "
                         f"dimension for mode='valid', got shapes {s1} and {s2}.")
    full = [s1[d] + s2[d] - 1 for d in axes]
    complex_input = np.dtype(get_aval(in1).dtype).kind == "c"
    if complex_input:
        prod = ufuncs.multiply(_fft.fftn(in1, full, axes), _fft.fftn(in2, full, axes))
        out = _fft.ifftn(prod, full, axes)
    else:
        prod = ufuncs.multiply(_fft.rfftn(in1, full, axes), _fft.rfftn(in2, full, axes))
        out = _fft.irfftn(prod, full, axes)
    out = out.astype(get_aval(in1).dtype)
    # Crop the full result to the mode's size, centred as SciPy centres it.
    index = [slice(None)] * ndim
    for d, n in zip(axes, full):
        if mode == "same":
            size = s1[d]
        elif mode == "valid":
            size = abs(s1[d] - s2[d]) + 1
        else:
            continue
        start = (n - size) // 2
        index[d] = slice(start, start + size)
    return out[tuple(index)]


def _bad_axis(a, ndim):
    raise ValueError(f"fftconvolve: axis {a} is out of bounds for arrays of {ndim} dimensions.")


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=None):
    """``data`` less its least-squares line (``type='linear'``, fitted separately between the
    breakpoints ``bp``) or its mean (``'constant'``) along ``axis``."""
    del overwrite_data  # arrays are immutable
    check_arraylike("detrend", data)
    (data,) = promote_dtypes_inexact(data)
    if type not in ("linear", "l", "constant", "c"):
        raise ValueError(f"detrend: trend type must be 'linear' or 'constant', got {type!r}.")
    ndim = get_aval(data).ndim
    axis = operator.index(axis) % ndim
    if type in ("constant", "c"):
        return ufuncs.subtract(data, data.mean(axis=axis, keepdims=True))
    n = get_aval(data).shape[axis]
    points = sorted(set([0] + [int(b) for b in np.atleast_1d(bp)] + [n]))
    if points[0] < 0 or points[-1] > n:
        raise ValueError(f"detrend: breakpoints must lie in [0, {n}], got {bp!r}.")
    moved = shape_ops.moveaxis(data, axis, -1)
    pieces = []
    for lo, hi in zip(points[:-1], points[1:]):
        if hi == lo:
            continue
        seg = moved[..., lo:hi]
        t = creation.arange(hi - lo, dtype=get_aval(data).dtype)
        t = ufuncs.subtract(t, t.mean())
        t = t.reshape((1,) * (seg.ndim - 1) + t.shape)  # (ranks explicit, as JAX's code keeps)
        centred = ufuncs.subtract(seg, seg.mean(axis=-1, keepdims=True))
        denom = ufuncs.multiply(t, t).sum()
        denom = ufuncs.where(denom == 0, 1, denom)  # a one-point segment has no slope
        slope = (centred * t).sum(axis=-1, keepdims=True) / denom
        pieces.append(ufuncs.subtract(centred, ufuncs.multiply(slope, t)))
    out = shape_ops.concatenate(pieces, axis=-1) if len(pieces) > 1 else pieces[0]
    return shape_ops.moveaxis(out, -1, axis)
