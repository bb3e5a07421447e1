"""plax.scipy.fft: the discrete cosine transform of type 2 and its inverse (``dct``, ``dctn``,
``idct``, ``idctn``), with SciPy's signatures and normalisations (None/"backward", "ortho").

Each 1-D transform is one complex FFT of the same length (Makhoul's reordering): the input's
even-indexed entries followed by its odd-indexed ones reversed, transformed, then turned by a
quarter-sample phase. The inverse runs the same steps backwards. Multi-axis transforms apply
the 1-D one along each axis. Complex inputs are transformed as their real and imaginary parts.
"""
from __future__ import annotations

import operator

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core import dtypes
from plax.numpy.util import canonicalize_axis, check_arraylike

__all__ = ["dct", "dctn", "idct", "idctn"]


def _checked(name: str, x, type, norm):
    """``x`` as an inexact array, after JAX's checks of ``type`` and ``norm``."""
    check_arraylike(name, x)
    if type != 2:
        raise NotImplementedError(f"Only DCT type 2 is implemented: plax.scipy.fft.{name} got "
                                  f"type={type!r}.")
    if norm not in (None, "backward", "ortho"):
        raise ValueError(f"plax.scipy.fft.{name}: norm={norm!r} is not implemented; use None, "
                         "'backward' or 'ortho'.")
    x = jnp.asarray(x)
    if not dtypes.issubdtype(x.dtype, np.inexact) or dtypes.finfo(x.dtype).bits < 32:
        x = x.astype(dtypes.default_float_dtype())  # the FFT's precision at the least, as JAX
    return x


def _resized(name: str, x, n, axis: int):
    """``x`` cut or zero-padded to length ``n`` along ``axis`` (unchanged for None)."""
    if n is None:
        return x
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"plax.scipy.fft.{name}: the length must be an integer, got {n!r}.") \
            from None
    if n < 1:
        raise ValueError(f"plax.scipy.fft.{name}: the length must be at least 1, got {n}.")
    size = x.shape[axis]
    if n <= size:
        return lax.slice_in_dim(x, 0, n, axis=axis)
    config = [(0, n - size if a == axis else 0, 0) for a in range(x.ndim)]
    return lax.pad(x, np.zeros((), x.dtype), config)


def _along(values: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """The 1-D ``values`` shaped to broadcast along ``axis`` of an ``ndim``-array."""
    return values.reshape([-1 if a == axis else 1 for a in range(ndim)])


def _ortho_scale(n: int) -> np.ndarray:
    """The factors taking the unnormalised DCT-II to the orthonormal one."""
    scale = np.full(n, np.sqrt(1.0 / (2 * n)))
    scale[0] = np.sqrt(1.0 / (4 * n))
    return scale


def _dct_1d(x, axis: int, ortho: bool):
    """The DCT-II of the real array ``x`` along ``axis``."""
    n = x.shape[axis]
    order = np.concatenate([np.arange(0, n, 2), np.arange(1, n, 2)[::-1]])
    spectrum = jnp.fft.fft(jnp.take(x, order, axis=axis), axis=axis)
    phase = np.exp(-0.5j * np.pi * np.arange(n) / n).astype(spectrum.dtype)
    out = 2 * jnp.real(spectrum * _along(phase, axis, x.ndim))
    if ortho:
        out = out * _along(_ortho_scale(n).astype(out.dtype), axis, x.ndim)
    return out


def _idct_1d(y, axis: int, ortho: bool):
    """The inverse of ``_dct_1d`` along ``axis``, for a real ``y``."""
    n = y.shape[axis]
    if ortho:
        y = y / _along(_ortho_scale(n).astype(y.dtype), axis, y.ndim)
    # y[n - k] beside each y[k] (0 beside y[0]) recovers the spectrum of the reordered input.
    mirrored = jnp.take(y, (n - np.arange(n)) % n, axis=axis)
    mirrored = mirrored * _along((np.arange(n) > 0).astype(y.dtype), axis, y.ndim)
    phase = np.exp(0.5j * np.pi * np.arange(n) / n) / 2
    spectrum = lax.complex(y, -mirrored)
    spectrum = spectrum * _along(phase.astype(spectrum.dtype), axis, y.ndim)
    reordered = jnp.real(jnp.fft.ifft(spectrum, axis=axis))
    # Entry 2m came from position m, entry 2m + 1 from position n - 1 - m.
    j = np.arange(n)
    source = np.where(j % 2 == 0, j // 2, n - 1 - j // 2)
    return jnp.take(reordered, source, axis=axis)


def _real_parts(transform, x):
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        return lax.complex(transform(jnp.real(x)), transform(jnp.imag(x)))
    return transform(x)


def _lengths_and_axes(name: str, x, s, axes):
    """dctn's ``s`` and ``axes`` as a list of (axis, length or None), SciPy's defaults."""
    if s is not None:
        s = [operator.index(v) for v in (s if np.iterable(s) else [s])]
        if len(s) > x.ndim:
            raise ValueError(f"plax.scipy.fft.{name}: s must have at most x.ndim ({x.ndim}) "
                             f"elements, got {len(s)}.")
    if axes is None:
        axes = range(x.ndim - len(s), x.ndim) if s is not None else range(x.ndim)
    axes = [canonicalize_axis(a, x.ndim) for a in (axes if np.iterable(axes) else [axes])]
    if len(set(axes)) != len(axes):
        raise ValueError(f"plax.scipy.fft.{name}: repeated axis in axes={tuple(axes)}.")
    if s is not None and len(s) != len(axes):
        raise ValueError(f"plax.scipy.fft.{name}: s and axes must have the same length when "
                         f"both are given, got s={tuple(s)} and axes={tuple(axes)}.")
    return list(zip(axes, s if s is not None else [None] * len(axes)))


def dct(x, type=2, n=None, axis=-1, norm=None):
    """The discrete cosine transform (type 2) of ``x`` along ``axis``, ``x`` first cut or
    zero-padded to length ``n``; as ``scipy.fft.dct``."""
    x = _checked("dct", x, type, norm)
    axis = canonicalize_axis(axis, x.ndim)
    x = _resized("dct", x, n, axis)
    return _real_parts(lambda v: _dct_1d(v, axis, norm == "ortho"), x)


def idct(x, type=2, n=None, axis=-1, norm=None):
    """The inverse of ``dct`` (type 2) along ``axis``, ``x`` first cut or zero-padded to
    length ``n``; as ``scipy.fft.idct``."""
    x = _checked("idct", x, type, norm)
    axis = canonicalize_axis(axis, x.ndim)
    x = _resized("idct", x, n, axis)
    return _real_parts(lambda v: _idct_1d(v, axis, norm == "ortho"), x)


def dctn(x, type=2, s=None, axes=None, norm=None):
    """The type-2 DCT of ``x`` over ``axes`` (all by default; the last ``len(s)`` with ``s``),
    each cut or zero-padded to its length in ``s``; as ``scipy.fft.dctn``."""
    x = _checked("dctn", x, type, norm)
    for axis, n in _lengths_and_axes("dctn", x, s, axes):
        x = _resized("dctn", x, n, axis)
        x = _real_parts(lambda v, a=axis: _dct_1d(v, a, norm == "ortho"), x)
    return x


def idctn(x, type=2, s=None, axes=None, norm=None):
    """The inverse of ``dctn`` (type 2) over ``axes``; as ``scipy.fft.idctn``."""
    x = _checked("idctn", x, type, norm)
    for axis, n in _lengths_and_axes("idctn", x, s, axes):
        x = _resized("idctn", x, n, axis)
        x = _real_parts(lambda v, a=axis: _idct_1d(v, a, norm == "ortho"), x)
    return x
