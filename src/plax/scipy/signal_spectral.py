"""plax.scipy.signal's spectral analysis: the short-time Fourier transform and its inverse
(stft, istft), and Welch's averaged periodograms (welch, csd), as jax.scipy.signal (which
follows SciPy's classic segment-by-segment definitions).

Windows named by string or tuple are SciPy's (scipy.signal.get_window, a constant computed at
trace time); an array window is used as given.
"""
from __future__ import annotations

import operator

import numpy as np

from plax import numpy as jnp
from plax.core import dtypes
from plax.core.trace import get_aval
from plax.numpy.util import check_arraylike, promote_dtypes_inexact

__all__ = ["stft", "istft", "welch", "csd"]

_BOUNDARIES = ("even", "odd", "constant", "zeros", None)


def _shape(x):
    return get_aval(x).shape


def _real_dtype(dtype):
    return np.dtype(np.float64 if np.dtype(dtype) in (np.complex128, np.float64) else np.float32)


def _window_array(window, nperseg, input_length, dtype):
    """The window as a 1-D array and the segment length, as SciPy settles them: a named window
    takes nperseg (256 if None, capped at the input's length); an array window sets nperseg."""
    if isinstance(window, (str, tuple)):
        if nperseg is None:
            nperseg = 256
        nperseg = operator.index(nperseg)
        if nperseg < 1:
            raise ValueError("nperseg must be a positive integer")
        if input_length is not None and nperseg > input_length:
            nperseg = input_length
        from scipy.signal import get_window
        return jnp.asarray(get_window(window, nperseg), dtype), nperseg
    win = jnp.asarray(window)
    if len(_shape(win)) != 1:
        raise ValueError(f"window must be 1-D, got shape {_shape(win)}.")
    if input_length is not None and input_length < _shape(win)[0]:
        raise ValueError("window is longer than input signal")
    if nperseg is None:
        nperseg = _shape(win)[0]
    elif operator.index(nperseg) != _shape(win)[0]:
        raise ValueError("value specified for nperseg is different from length of window")
    return win.astype(dtype), operator.index(nperseg)


def _extend(x, width, kind):
    """``x`` extended by ``width`` samples at each end of its last axis."""
    if width == 0:
        return x
    if kind == "zeros":
        pad = [(0, 0)] * (len(_shape(x)) - 1) + [(width, width)]
        return jnp.pad(x, pad)
    first, last = x[..., :1], x[..., -1:]
    head = jnp.flip(x[..., 1:width + 1], axis=-1)
    tail = jnp.flip(x[..., -width - 1:-1], axis=-1)
    if kind == "even":
        return jnp.concatenate([head, x, tail], axis=-1)
    if kind == "odd":
        return jnp.concatenate([2 * first - head, x, 2 * last - tail], axis=-1)
    # constant: the end values repeated
    return jnp.concatenate([jnp.repeat(first, width, axis=-1), x,
                            jnp.repeat(last, width, axis=-1)], axis=-1)


def _segments(x, nperseg, step):
    """The overlapping segments of the last axis: shape (..., n_segments, nperseg)."""
    n = _shape(x)[-1]
    count = (n - nperseg) // step + 1
    index = np.arange(count)[:, None] * step + np.arange(nperseg)[None, :]
    return x[..., index]


def _detrended(segments, detrend):
    if detrend is False or detrend is None:
        return segments
    if callable(detrend):
        return detrend(segments)
    if isinstance(detrend, str):
        from plax.scipy.signal import detrend as detrend_fn
        return detrend_fn(segments, axis=-1, type=detrend)
    raise ValueError(f"detrend must be False, 'constant', 'linear' or a function, got "
                     f"{detrend!r}.")


def _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling,
              axis, mode, boundary=None, padded=False):
    """The windowed FFTs of x's segments (mode 'stft'), or the products conj(X) Y (mode
    'psd'), shaped (..., n_freqs, n_segments) with ``axis`` moved last; also the frequencies
    and the segment times."""
    same = y is None
    if same:
        check_arraylike("csd", x)
        (x,) = promote_dtypes_inexact(x)
    else:
        check_arraylike("csd", x, y)
        x, y = promote_dtypes_inexact(x, y)
    ndim = len(_shape(x))
    if ndim == 0:
        raise ValueError("the input must have at least one dimension.")
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for an input of {ndim} dimensions.")
    axis %= ndim
    if mode not in ("psd", "stft"):
        raise ValueError(f"Unknown value for mode {mode}, must be one of: ('psd', 'stft')")
    if boundary not in _BOUNDARIES:
        raise ValueError(f"Unknown boundary option '{boundary}', must be one of: "
                         f"{list(_BOUNDARIES)}")
    x = jnp.moveaxis(x, axis, -1)
    if not same:
        y = jnp.moveaxis(y, axis, -1)
        if len(_shape(y)) != ndim:
            raise ValueError(f"x and y must have the same number of dimensions, got shapes "
                             f"{_shape(x)} and {_shape(y)}.")
        nx, ny = _shape(x)[-1], _shape(y)[-1]
        if nx != ny:  # the shorter is padded with zeros
            if nx < ny:
                x = jnp.pad(x, [(0, 0)] * (ndim - 1) + [(0, ny - nx)])
            else:
                y = jnp.pad(y, [(0, 0)] * (ndim - 1) + [(0, nx - ny)])
        lead = jnp.broadcast_shapes(_shape(x)[:-1], _shape(y)[:-1])
        x = jnp.broadcast_to(x, lead + _shape(x)[-1:])
        y = jnp.broadcast_to(y, lead + _shape(y)[-1:])
    dtype = get_aval(x).dtype if same else dtypes.result_type(x, y)
    real_dtype = _real_dtype(dtype)
    input_length = _shape(x)[-1]
    if nperseg is not None:
        nperseg = operator.index(nperseg)
        if nperseg < 1:
            raise ValueError("nperseg must be a positive integer")
    win, nperseg = _window_array(window, nperseg, input_length, real_dtype)
    if nfft is None:
        nfft = nperseg
    elif operator.index(nfft) < nperseg:
        raise ValueError("nfft must be greater than or equal to nperseg.")
    nfft = operator.index(nfft)
    noverlap = nperseg // 2 if noverlap is None else operator.index(noverlap)
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    step = nperseg - noverlap
    if scaling == "density":
        scale = 1.0 / (fs * jnp.sum(win * win))
    elif scaling == "spectrum":
        scale = 1.0 / jnp.square(jnp.sum(win))
    else:
        raise ValueError(f"Unknown scaling: {scaling}")
    if mode == "stft":
        scale = jnp.sqrt(scale)
    complex_input = dtypes.issubdtype(dtype, np.complexfloating)
    onesided = bool(return_onesided) and not complex_input

    def prepare(data):
        if boundary is not None:
            data = _extend(data, nperseg // 2, boundary)
        if padded:
            extra = -(_shape(data)[-1] - nperseg) % step % nperseg
            data = jnp.pad(data, [(0, 0)] * (ndim - 1) + [(0, extra)])
        return data

    def transform(data):
        segs = _detrended(_segments(data, nperseg, step), detrend)
        segs = segs * _last_axis(win.astype(segs.dtype), segs.ndim)
        return (jnp.fft.rfft(segs, n=nfft, axis=-1) if onesided
                else jnp.fft.fft(segs, n=nfft, axis=-1))

    x = prepare(x)
    result = transform(x)
    if mode == "psd":
        other = result if same else transform(prepare(y))
        result = jnp.conj(result) * other * jnp.asarray(scale, result.dtype)
        if onesided:
            doubled = np.full(nfft // 2 + 1, 2.0)
            doubled[0] = 1.0
            if nfft % 2 == 0:
                doubled[-1] = 1.0
            result = result * _last_axis(jnp.asarray(doubled, result.dtype), result.ndim)
        if same:
            result = jnp.real(result)
    else:
        result = result * jnp.asarray(scale, result.dtype)
    index = jnp.arange(nfft // 2 + 1 if onesided else nfft, dtype=real_dtype)
    if not onesided:  # fftfreq's order: 0, 1, ..., then the negative frequencies
        index = jnp.where(index < (nfft + 1) // 2, index, index - nfft)
    freqs = index * (jnp.asarray(fs, real_dtype) / nfft)
    n_segments = _shape(result)[-2]
    offset = 0.0 if boundary is not None else nperseg / 2
    times = (np.arange(n_segments) * step + offset).astype(real_dtype) / jnp.asarray(
        fs, real_dtype)
    return freqs, times, jnp.moveaxis(result, -1, -2), axis


def _empty_result(x, complex_values):
    """For an empty input, empty arrays of its shape (the frequencies and the spectrum), as
    JAX returns; None otherwise."""
    check_arraylike("signal", x)
    (x,) = promote_dtypes_inexact(x)
    if get_aval(x).size:
        return None
    real = _real_dtype(get_aval(x).dtype)
    values = np.complex128 if real == np.float64 else np.complex64
    return jnp.zeros(_shape(x), real), jnp.zeros(_shape(x), values if complex_values else real)


def _last_axis(v, ndim: int):
    """The vector ``v`` as an array of ``ndim`` dimensions along the last one (the library
    keeps its ranks explicit, so it runs under jax_numpy_rank_promotion='raise')."""
    return v.reshape((1,) * (ndim - 1) + v.shape)


def stft(x, fs=1.0, window="hann", nperseg=256, noverlap=None, nfft=None, detrend=False,
         return_onesided=True, boundary="zeros", padded=True, axis=-1):
    """The short-time Fourier transform of ``x`` along ``axis``: (frequencies, segment times,
    Zxx) with Zxx's frequencies where ``axis`` was and its segments last, as scipy.signal.stft
    (scaled by 1 / sum(window))."""
    empty = _empty_result(x, complex_values=True)
    if empty is not None:
        return empty[0], empty[0], empty[1]
    freqs, times, result, axis = _spectral(x, None, fs, window, nperseg, noverlap, nfft,
                                           detrend, return_onesided, "spectrum", axis, "stft",
                                           boundary=boundary, padded=padded)
    return freqs, times, jnp.moveaxis(result, -2, axis)


def _median_bias(n):
    """The ratio of a chi-squared(2) sample's median over n to its mean (SciPy's
    correction for average='median')."""
    even = 2 * np.arange(1, (n - 1) // 2 + 1)
    return 1 + np.sum(1.0 / (even + 1) - 1.0 / even)


def csd(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
        detrend="constant", return_onesided=True, scaling="density", axis=-1, average="mean"):
    """The cross power spectral density of ``x`` and ``y`` by Welch's method (the average of
    conj(X) Y over overlapping windowed segments): (frequencies, Pxy). With ``y`` None, x's
    own (real) power spectral density."""
    if average not in ("mean", "median"):
        raise ValueError(f'average must be "median" or "mean", got {average}')
    empty = _empty_result(x, complex_values=y is not None)
    if empty is not None:
        return empty
    freqs, _, pxy, axis = _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend,
                                    return_onesided, scaling, axis, "psd")
    n_segments = _shape(pxy)[-1]
    if n_segments > 1:
        if average == "median":
            bias = _median_bias(n_segments)
            if dtypes.issubdtype(get_aval(pxy).dtype, np.complexfloating):
                pxy = (jnp.median(jnp.real(pxy), axis=-1)
                       + 1j * jnp.median(jnp.imag(pxy), axis=-1))
            else:
                pxy = jnp.median(pxy, axis=-1)
            pxy = pxy / bias
        else:
            pxy = jnp.mean(pxy, axis=-1)
    else:
        pxy = jnp.reshape(pxy, _shape(pxy)[:-1])
    return freqs, jnp.moveaxis(pxy, -1, axis)


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          detrend="constant", return_onesided=True, scaling="density", axis=-1,
          average="mean"):
    """The power spectral density of ``x`` by Welch's method: (frequencies, Pxx), the
    average periodogram of overlapping windowed segments (``scaling`` 'density' per unit
    frequency, 'spectrum' as power)."""
    freqs, pxx = csd(x, None, fs=fs, window=window, nperseg=nperseg, noverlap=noverlap,
                     nfft=nfft, detrend=detrend, return_onesided=return_onesided,
                     scaling=scaling, axis=axis, average=average)
    return freqs, jnp.real(pxx)


def istft(Zxx, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          input_onesided=True, boundary=True, time_axis=-1, freq_axis=-2):
    """The inverse short-time Fourier transform: (times, x) from segments Zxx made by stft
    with the same window, nperseg, noverlap and nfft (inverse FFTs overlap-added and divided
    by the summed squared window). ``boundary`` drops the nperseg // 2 samples stft's
    boundary extension added at each end."""
    check_arraylike("istft", Zxx)
    (Zxx,) = promote_dtypes_inexact(Zxx)
    ndim = len(_shape(Zxx))
    if ndim < 2:
        raise ValueError("Input stft must be at least 2d!")
    time_axis, freq_axis = operator.index(time_axis), operator.index(freq_axis)
    for name, ax in (("time_axis", time_axis), ("freq_axis", freq_axis)):
        if not -ndim <= ax < ndim:
            raise ValueError(f"{name}={ax} is out of bounds for Zxx of shape {_shape(Zxx)}.")
    time_axis, freq_axis = time_axis % ndim, freq_axis % ndim
    if time_axis == freq_axis:
        raise ValueError("Must specify differing time and frequency axes!")
    n_freqs = _shape(Zxx)[freq_axis]
    n_default = 2 * (n_freqs - 1) if input_onesided else n_freqs
    if nperseg is None:
        nperseg = n_default
    nperseg = operator.index(nperseg)
    if nperseg < 1:
        raise ValueError("nperseg must be a positive integer")
    if nfft is None:
        nfft = nperseg if (input_onesided and nperseg == n_default + 1) else n_default
    nfft = operator.index(nfft)
    if nfft < nperseg:
        raise ValueError(f"FFT length ({nfft}) must be longer than nperseg ({nperseg}).")
    noverlap = nperseg // 2 if noverlap is None else operator.index(noverlap)
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    step = nperseg - noverlap
    real_dtype = _real_dtype(get_aval(Zxx).dtype)
    # (..., segments, frequencies)
    Zxx = jnp.moveaxis(Zxx, (time_axis, freq_axis), (-2, -1))
    if input_onesided:
        pieces = jnp.fft.irfft(Zxx, n=nfft, axis=-1)[..., :nperseg]
    else:
        pieces = jnp.fft.ifft(Zxx, n=nfft, axis=-1)[..., :nperseg]
    if isinstance(window, (str, tuple)):
        from scipy.signal import get_window
        win = jnp.asarray(get_window(window, nperseg), real_dtype)
    else:
        win = jnp.asarray(window)
        if _shape(win) != (nperseg,):
            raise ValueError(f"window must have length of {nperseg}")
        win = win.astype(real_dtype)
    wp = win.astype(get_aval(pieces).dtype)  # (complex pieces: no implicit real-complex mix)
    pieces = pieces * jnp.sum(wp) * _last_axis(wp, pieces.ndim)
    n_segments = _shape(pieces)[-2]
    length = nperseg + (n_segments - 1) * step
    index = np.arange(n_segments)[:, None] * step + np.arange(nperseg)[None, :]
    out = jnp.zeros(_shape(pieces)[:-2] + (length,), get_aval(pieces).dtype)
    out = out.at[..., index].add(pieces)
    norm = jnp.zeros((length,), real_dtype).at[index].add(
        jnp.broadcast_to(win * win, (n_segments, nperseg)))
    if boundary:
        half = nperseg // 2
        out, norm = out[..., half:length - half], norm[half:length - half]
    norm = jnp.where(norm > 1e-10, norm, 1.0).astype(get_aval(out).dtype)
    out = out / _last_axis(norm, out.ndim)
    if input_onesided:
        out = jnp.real(out)
    if ndim > 2 and time_axis != ndim - 1:
        position = time_axis - 1 if freq_axis < time_axis else time_axis
        out = jnp.moveaxis(out, -1, position)
    # (the times count the output's first axis, which for a batch of signals is the batch:
    # JAX and SciPy both do so)
    times = jnp.arange(_shape(out)[0], dtype=real_dtype) / jnp.asarray(fs, real_dtype)
    return times, out
