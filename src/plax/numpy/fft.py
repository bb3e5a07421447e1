"""plax.numpy.fft: NumPy's discrete Fourier transforms, on ``lax.fft``.

Every transform moves the axes it works on to the end (XLA transforms trailing dimensions
only), crops or zero-pads them to the requested lengths ``s``/``n``, and transforms up to
three of them at once; more axes take successive transforms. ``norm`` is "backward" (the
default: the inverse transforms carry 1/N), "ortho" (1/sqrt(N) both ways) or "forward"
(the forward transforms carry 1/N).
"""
from __future__ import annotations

import math
import operator

import numpy as np

from plax.core import dtypes
from plax.core.trace import get_aval
from plax.first_order import conversion as _conv
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order import arithmetic as _arith
from plax.first_order.common import real_dtype
from plax.first_order.fft import FftType
from plax.first_order.fft import fft as _lax_fft
from plax.numpy import creation, shape_ops, ufuncs
from plax.numpy.util import as_operand, canonicalize_axis, check_arraylike

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
           "rfftn", "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "ortho", "forward")
# hfft/ihfft are irfft/rfft of the conjugate with the scaling the other way round.
_SWAPPED = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _check_norm(norm) -> None:
    if norm is not None and not (isinstance(norm, str) and norm in _NORMS):
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or '
                         '"forward" (or None, meaning "backward").')


def _transpose(x, perm):
    return x if list(perm) == list(range(len(perm))) else _shapes.transpose(x, tuple(perm))


def _fit(x, sizes):
    """``x`` with its trailing dimensions cropped or zero-padded to ``sizes``."""
    shape = get_aval(x).shape
    lead = len(shape) - len(sizes)
    want = shape[:lead] + tuple(sizes)
    if any(w < d for w, d in zip(want, shape)):
        x = _slicing.slice(x, (0,) * len(shape), tuple(min(w, d) for w, d in zip(want, shape)))
    if any(w > d for w, d in zip(want, shape)):
        cfg = tuple((0, max(w - d, 0), 0) for w, d in zip(want, shape))
        x = _shapes.pad(x, np.zeros((), get_aval(x).dtype), cfg)
    return x


def _transform_trailing(x, typ: FftType, lengths: tuple):
    """``typ`` over the trailing ``len(lengths)`` dimensions, three at most per lax.fft call:
    forward transforms do the innermost group first, inverse ones last (so a real side stays
    innermost). Four dimensions go as two pairs."""
    k = len(lengths)
    if k <= 3:
        return _lax_fft(x, typ, lengths)
    inner = 2 if k == 4 else 3
    nd = get_aval(x).ndim
    outer = range(nd - k, nd - inner)
    perm = [d for d in range(nd) if d not in outer] + list(outer)  # outer dims to the end
    back = np.argsort(perm)
    if typ in (FftType.FFT, FftType.RFFT):
        x = _lax_fft(x, typ, lengths[-inner:])
        x = _transpose(_transform_trailing(_transpose(x, perm), FftType.FFT, lengths[:-inner]),
                       back)
        return x
    x = _transpose(_transform_trailing(_transpose(x, perm), FftType.IFFT, lengths[:-inner]), back)
    return _lax_fft(x, typ, lengths[-inner:])


def _transform(name: str, typ: FftType, a, s, axes, norm):
    """The n-dimensional transform behind every function of this module."""
    full = f"jax.numpy.fft.{name}"
    check_arraylike(full, a)
    _check_norm(norm)
    x = as_operand(a)
    ndim = get_aval(x).ndim
    if s is not None:
        s = tuple(operator.index(v) for v in s)
        if any(v <= 0 for v in s):
            raise ValueError(f"Shape should be positive: {full} got s={s}; every transformed "
                             "length must be at least 1.")
    if s is not None and axes is not None and len(s) != len(axes):
        raise ValueError(f"Shape and axes have different lengths: {full} got s={s} and "
                         f"axes={tuple(axes)}.")
    if axes is None:
        if s is not None and len(s) > ndim:
            raise ValueError(f"{full}: s={s} names more axes than the input has dimensions "
                             f"(shape {get_aval(x).shape}).")
        axes = tuple(range(ndim - (ndim if s is None else len(s)), ndim))
    else:
        given = tuple(axes)
        axes = tuple(canonicalize_axis(ax, ndim) for ax in given)
        if len(set(axes)) != len(axes):
            raise ValueError(f"{full} does not support repeated axes. Got axes {given}.")
    k = len(axes)
    perm = [d for d in range(ndim) if d not in axes] + list(axes)
    x = _transpose(x, perm)
    shape = get_aval(x).shape
    if s is None:
        lengths = shape[ndim - k:]
        if typ == FftType.IRFFT and k:
            lengths = lengths[:-1] + (max(0, 2 * (lengths[-1] - 1)),)
    else:
        lengths = s
    sizes = list(lengths)
    if typ == FftType.IRFFT and k:
        sizes[-1] = lengths[-1] // 2 + 1
    out = _transform_trailing(_fit(x, sizes), typ, tuple(lengths))
    out = _scale(out, norm, math.prod(lengths), typ in (FftType.IFFT, FftType.IRFFT))
    return _transpose(out, np.argsort(perm))


def _scale(out, norm, n: int, inverse: bool):
    if norm in (None, "backward") or n == 0:
        return out
    factor = math.sqrt(n) if norm == "ortho" else float(n)
    if not inverse:
        factor = 1.0 / factor
    return _arith.mul(out, np.asarray(factor, get_aval(out).dtype))


def _one_axis(name: str, axis):
    if isinstance(axis, (list, tuple)):
        full = f"jax.numpy.fft.{name}"
        raise ValueError(f"{full} does not support multiple axes. Please use {full}n. "
                         f"Got axis = {axis!r}.")
    return None if axis is None else (axis,)


def _one_length(n):
    return None if n is None else (n,)


def _two_axes(name: str, axes):
    if len(axes) != 2:
        raise ValueError(f"jax.numpy.fft.{name} only supports 2 axes. Got axes = {axes!r}; "
                         f"use jax.numpy.fft.{name[:-1]}n for other counts.")
    return axes


# --- one axis ------------------------------------------------------------------------------
def fft(a, n=None, axis=-1, norm=None):
    """The 1-D discrete Fourier transform of ``a`` along ``axis`` (cropped/padded to ``n``)."""
    return _transform("fft", FftType.FFT, a, _one_length(n), _one_axis("fft", axis), norm)


def ifft(a, n=None, axis=-1, norm=None):
    """The 1-D inverse discrete Fourier transform of ``a`` along ``axis``."""
    return _transform("ifft", FftType.IFFT, a, _one_length(n), _one_axis("ifft", axis), norm)


def rfft(a, n=None, axis=-1, norm=None):
    """The 1-D transform of real ``a``: the ``n//2 + 1`` non-negative frequencies."""
    return _transform("rfft", FftType.RFFT, a, _one_length(n), _one_axis("rfft", axis), norm)


def irfft(a, n=None, axis=-1, norm=None):
    """The inverse of ``rfft``: ``n`` (default ``2*(m-1)``) real points along ``axis``."""
    return _transform("irfft", FftType.IRFFT, a, _one_length(n), _one_axis("irfft", axis), norm)


def hfft(a, n=None, axis=-1, norm=None):
    """The transform of a signal with Hermitian symmetry given by its first half ``a``: a real
    result of ``n`` (default ``2*(m-1)``) points."""
    axes = _one_axis("hfft", axis)
    check_arraylike("jax.numpy.fft.hfft", a)
    _check_norm(norm)
    return _transform("hfft", FftType.IRFFT, ufuncs.conjugate(as_operand(a)), _one_length(n),
                      axes, _SWAPPED[norm])


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of ``hfft``: the first ``n//2 + 1`` bins of the spectrum of real ``a``."""
    axes = _one_axis("ihfft", axis)
    _check_norm(norm)
    out = _transform("ihfft", FftType.RFFT, a, _one_length(n), axes, _SWAPPED[norm])
    return _arith.conj(out)


# --- two axes ------------------------------------------------------------------------------
def fft2(a, s=None, axes=(-2, -1), norm=None):
    """The 2-D discrete Fourier transform over ``axes``."""
    return _transform("fft2", FftType.FFT, a, s, _two_axes("fft2", axes), norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """The 2-D inverse discrete Fourier transform over ``axes``."""
    return _transform("ifft2", FftType.IFFT, a, s, _two_axes("ifft2", axes), norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """The 2-D transform of real ``a`` (the last axis keeps its non-negative frequencies)."""
    return _transform("rfft2", FftType.RFFT, a, s, _two_axes("rfft2", axes), norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """The inverse of ``rfft2``: a real result of shape ``s`` over ``axes``."""
    return _transform("irfft2", FftType.IRFFT, a, s, _two_axes("irfft2", axes), norm)


# --- any number of axes ---------------------------------------------------------------------
def fftn(a, s=None, axes=None, norm=None):
    """The n-D discrete Fourier transform over ``axes`` (default: all, or the last ``len(s)``)."""
    return _transform("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm=None):
    """The n-D inverse discrete Fourier transform over ``axes``."""
    return _transform("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
    """The n-D transform of real ``a``; the last of ``axes`` keeps its non-negative
    frequencies."""
    return _transform("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
    """The inverse of ``rfftn``: a real result of shape ``s`` over ``axes`` (the last one
    defaults to ``2*(m-1)``)."""
    return _transform("irfftn", FftType.IRFFT, a, s, axes, norm)


# --- frequencies and shifts -------------------------------------------------------------------
def _check_freq_args(name: str, n, d) -> None:
    if isinstance(n, (list, tuple)):
        raise ValueError(f"The n argument of jax.numpy.fft.{name} only takes an int. "
                         f"Got n = {list(n)}.")
    if isinstance(d, (list, tuple)):
        raise ValueError(f"The d argument of jax.numpy.fft.{name} only takes a single value. "
                         f"Got d = {list(d)}.")


def _placed(x, device):
    return x if device is None else creation.asarray(x, device=device)


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an ``n``-point transform with sample spacing ``d``:
    ``[0, 1, ..., ceil(n/2)-1, -floor(n/2), ..., -1] / (d*n)``, in ``dtype``."""
    _check_freq_args("fftfreq", n, d)
    out_dtype = _freq_dtype(dtype)
    n = operator.index(n)
    # Computed in the real floating type of dtype's kind (float32 for int32 or complex64).
    work = dtypes.canonicalize_dtype(real_dtype(_inexact(out_dtype)))
    k = (np.arange(n) + n // 2) % n - n // 2
    result = ufuncs.true_divide(creation.asarray(k.astype(work)),
                                creation.asarray(d * n, dtype=work))
    return _placed(_conv.convert_element_type(result, out_dtype), device)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of the bins ``rfft`` keeps: ``[0, 1, ..., n//2] / (d*n)``."""
    _check_freq_args("rfftfreq", n, d)
    dtype = _freq_dtype(dtype)
    n = operator.index(n)
    k = creation.arange(n // 2 + 1, dtype=dtype)
    return _placed(ufuncs.true_divide(k, creation.asarray(d * n, dtype=dtype)), device)


def _freq_dtype(dtype) -> np.dtype:
    if dtype is None:
        return dtypes.default_float_dtype()
    return dtypes.canonicalize_user_dtype(dtype, "dtype")


def _inexact(dt) -> np.dtype:
    dt = np.dtype(dt)
    if dtypes.is_inexact(dt):
        return dt
    return np.dtype(np.float64 if dt.itemsize == 8 else np.float32)


def _shifts(name: str, x, axes, sign: int):
    check_arraylike(name, x)
    x = as_operand(x)
    shape = get_aval(x).shape
    if axes is None:
        axes = tuple(range(len(shape)))
        shift = [sign * (dim // 2) for dim in shape]
    elif isinstance(axes, (int, np.integer)):
        shift = sign * (shape[axes] // 2)
    else:
        shift = [sign * (shape[ax] // 2) for ax in axes]
    return shape_ops.roll(x, shift, axes)


def fftshift(x, axes=None):
    """Roll the zero frequency to the centre of ``axes`` (default: all)."""
    return _shifts("fftshift", x, axes, 1)


def ifftshift(x, axes=None):
    """Undo ``fftshift``."""
    return _shifts("ifftshift", x, axes, -1)
