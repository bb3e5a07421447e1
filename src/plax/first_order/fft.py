"""The ``fft`` primitive: discrete Fourier transforms over 1 to 3 trailing dimensions.

``fft_type`` picks one of four transforms (XLA's): FFT and IFFT (complex to complex; IFFT
carries the 1/N), RFFT (real to complex, keeping the n//2+1 non-negative frequencies of the
last dimension) and IRFFT (the inverse of RFFT: complex to real, the last dimension's length
given by ``fft_lengths[-1]``).

Derivatives: every type is linear over the reals. With plax's convention that the transpose
of a complex-linear map does not conjugate (``Re sum(ct * f(x)) == Re sum(f^T(ct) * x)``):

* FFT and IFFT are their own transposes (the DFT matrix is symmetric);
* RFFT keeps part of a full FFT of a real signal, so its transpose is the real part of the
  FFT of the cotangent zero-padded back to the full length;
* IRFFT reads each bin k of the half spectrum c_k times (c = 1 for the zero frequency and,
  for even n, the Nyquist bin; 2 for the others, which stand for a conjugate pair too) and
  ignores the imaginary parts of the self-conjugate bins, so its transpose is
  ``conj(rfft(ct)) * c / N``.
"""
from __future__ import annotations

import enum
import math

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, register_lowering, transpose_rules
from plax.core.sharding_types import same_as_operand, sharding_rules
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import conversion as _conv
from plax.first_order import shapes as _shapes
from plax.first_order.ad_util import deflinear
from plax.first_order.batch_util import moveaxis
from plax.first_order.common import as_int_tuple, check_dtype, complex_dtype, real_dtype
from plax.lowering.inline import lower_fun
from plax.lowering.stablehlo import i64_array

__all__ = ["fft", "fft_p", "FftType"]


class FftType(enum.IntEnum):
    """Which transform ``lax.fft`` computes."""

    FFT = 0    # complex -> complex, forward
    IFFT = 1   # complex -> complex, inverse (scaled by 1/N)
    RFFT = 2   # real -> complex, forward (the last dimension keeps n//2+1 bins)
    IRFFT = 3  # complex -> real, inverse (scaled by 1/N)


_BY_NAME = {spelling: t for t in FftType for spelling in (t.name, t.name.lower())}


def _fft_type(value) -> FftType:
    if isinstance(value, FftType):
        return value
    if isinstance(value, str):
        if value not in _BY_NAME:
            raise ValueError(f"Unknown FFT type '{value}': pass one of 'fft', 'ifft', 'rfft', "
                             "'irfft' (or a lax.FftType).")
        return _BY_NAME[value]
    raise TypeError(f"Unknown FFT type value '{value}': pass a lax.FftType or one of the "
                    "strings 'fft', 'ifft', 'rfft', 'irfft'.")


# --- the primitive ----------------------------------------------------------------------
fft_p = Primitive("fft")

_REAL_IN = (np.dtype(np.float32), np.dtype(np.float64))


def _fft_abstract(x, *, fft_type, fft_lengths):
    k = len(fft_lengths)
    if not 1 <= k <= 3:
        raise ValueError(f"FFT transforms 1 to 3 trailing dimensions, got fft_lengths="
                         f"{fft_lengths}; transform more dimensions with successive calls.")
    if any(n < 0 for n in fft_lengths):
        raise ValueError(f"FFT lengths must be non-negative, got fft_lengths={fft_lengths}.")
    if k > x.ndim:
        raise ValueError(f"FFT input shape {x.shape} must have at least as many input dimensions "
                         f"as fft_lengths {fft_lengths}.")
    lead, minor = x.shape[:-k], x.shape[-k:]
    name = fft_type.name
    if fft_type == FftType.RFFT:
        if x.dtype not in _REAL_IN:
            raise ValueError(f"RFFT input must be float32 or float64, got {x.dtype}.")
        if minor != fft_lengths:
            raise ValueError(f"RFFT input shape {x.shape} minor dimensions must be equal to "
                             f"fft_lengths {fft_lengths}.")
        return x.update(shape=lead + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,),
                        dtype=complex_dtype(x.dtype), weak_type=False)
    if not dtypes.is_complex(x.dtype):
        raise ValueError(f"{name} input must be complex64 or complex128, got {x.dtype}.")
    if fft_type == FftType.IRFFT:
        if minor[:-1] != fft_lengths[:-1] or minor[-1] != fft_lengths[-1] // 2 + 1:
            raise ValueError(f"IRFFT input shape {x.shape} minor dimensions must be equal to all "
                             f"except the last fft_length, and the last must be "
                             f"fft_lengths[-1] // 2 + 1 = {fft_lengths[-1] // 2 + 1}; got "
                             f"fft_lengths={fft_lengths}.")
        return x.update(shape=lead + fft_lengths, dtype=real_dtype(x.dtype), weak_type=False)
    if minor != fft_lengths:
        raise ValueError(f"{name} input shape {x.shape} minor dimensions must be equal to "
                         f"fft_lengths {fft_lengths}.")
    return x.update(weak_type=False)


def _fft_lowering(ctx, x, *, fft_type, fft_lengths):
    ain, aout = ctx.avals_in[0], ctx.avals_out[0]
    if ain.size == 0 or aout.size == 0:
        # Empty transforms (an RFFT of zero points gives its one zero bin); XLA is not asked.
        zero = ShapedArray((), aout.dtype)  # broadcast: the shape may be symbolic (export)
        return ctx.broadcast(ctx.constant(np.zeros((), aout.dtype), zero), zero, aout)
    return ctx.op1("stablehlo.fft", [x],
                   props=f"fft_type = #stablehlo<fft_type {fft_type.name}>, "
                         f"fft_length = {i64_array(fft_lengths)}")


def _irfft_by_parts(x, *, fft_type, fft_lengths):
    """A multi-dimensional IRFFT as an IFFT over the outer transformed dimensions, then a 1-D
    IRFFT of the last: cuFFT's multi-dimensional C2R assumes the input is Hermitian in every
    dimension, where XLA's other backends (and NumPy) read the outer ones as they are."""
    k, last = len(fft_lengths), get_aval(x).ndim - 1
    y = moveaxis(x, last, last - k + 1)  # the C2R axis goes in front of the outer ones
    y = fft_p.bind(y, fft_type=FftType.IFFT, fft_lengths=fft_lengths[:-1])
    y = moveaxis(y, last - k + 1, last)
    return fft_p.bind(y, fft_type=FftType.IRFFT, fft_lengths=fft_lengths[-1:])


_irfft_by_parts_rule = lower_fun(_irfft_by_parts)


def _fft_lowering_gpu(ctx, x, *, fft_type, fft_lengths):
    if (fft_type == FftType.IRFFT and len(fft_lengths) > 1 and ctx.avals_in[0].size
            and ctx.avals_out[0].size):
        return _irfft_by_parts_rule(ctx, x, fft_type=fft_type, fft_lengths=fft_lengths)
    return _fft_lowering(ctx, x, fft_type=fft_type, fft_lengths=fft_lengths)


def _rfft_transpose(ct, fft_lengths):
    """Re(FFT(ct zero-padded to the full last length))."""
    aval = get_aval(ct)
    pads = [(0, 0, 0)] * (aval.ndim - 1) + [(0, fft_lengths[-1] - aval.shape[-1], 0)]
    full = _shapes.pad(ct, np.zeros((), aval.dtype), tuple(pads))
    return _arith.real(fft_p.bind(full, fft_type=FftType.FFT, fft_lengths=fft_lengths))


def _irfft_transpose(ct, fft_lengths):
    """conj(RFFT(ct)) * c / N, with c the number of times IRFFT reads each bin."""
    spec = fft_p.bind(ct, fft_type=FftType.RFFT, fft_lengths=fft_lengths)
    aval = get_aval(spec)
    n, m = fft_lengths[-1], aval.shape[-1]
    weights = np.full(m, 2.0)
    weights[0] = 1.0
    if n % 2 == 0 and m > 1:
        weights[-1] = 1.0  # the Nyquist bin
    weights = (weights / math.prod(fft_lengths)).astype(aval.dtype)
    scale = _shapes.broadcast_in_dim(weights, aval.shape, (aval.ndim - 1,))
    return _arith.mul(_arith.conj(spec), scale)


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if fft_type == FftType.RFFT:
        return [_rfft_transpose(ct, fft_lengths)]
    if fft_type == FftType.IRFFT:
        return [_irfft_transpose(ct, fft_lengths)]
    return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]


def _fft_batch(axis, vals, dims, *, fft_type, fft_lengths):
    """The transform acts on trailing dimensions: a batch dimension in front of them stays
    where it is; one among them moves to the front."""
    (x,), (d,) = vals, dims
    if d >= get_aval(x).ndim - len(fft_lengths):
        x, d = moveaxis(x, d, 0), 0
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths), d


abstract_eval_rules[fft_p] = _fft_abstract
register_lowering(fft_p, _fft_lowering)
register_lowering(fft_p, _fft_lowering_gpu, platform="cuda")
register_lowering(fft_p, _fft_lowering_gpu, platform="rocm")
deflinear(fft_p)
transpose_rules[fft_p] = _fft_transpose
batch_rules[fft_p] = _fft_batch
sharding_rules[fft_p] = same_as_operand


# --- the public function -------------------------------------------------------------------
def _inexact_of(dt) -> np.dtype:
    """The floating (or complex) dtype FFTs compute ``dt`` in: 64-bit integers in float64,
    other integers and booleans in float32 (canonicalised: float32 when x64 is off)."""
    dt = np.dtype(dt)
    if not dtypes.is_inexact(dt):
        dt = np.dtype(np.float64 if dt.itemsize == 8 else np.float32)
    return dtypes.canonicalize_dtype(dt)


def fft(x, fft_type, fft_lengths):
    """The discrete Fourier transform ``fft_type`` (a ``FftType`` or 'fft', 'ifft', 'rfft',
    'irfft') over the trailing ``len(fft_lengths)`` dimensions of ``x``.

    RFFT takes real input (integers are converted to floats); the others convert ``x`` to
    complex. An empty ``fft_lengths`` returns the converted ``x``.
    """
    typ = _fft_type(fft_type)
    lengths = as_int_tuple(fft_lengths, "fft_lengths")
    aval = get_aval(x)
    check_dtype("fft", aval, "any")
    if typ == FftType.RFFT:
        if dtypes.is_complex(aval.dtype):
            raise ValueError("only real valued inputs supported for rfft; take the complex "
                             "FFT (fft_type='fft') of complex input.")
        target = _inexact_of(aval.dtype)
    else:
        inexact = _inexact_of(aval.dtype)
        wide = inexact in (np.dtype(np.float64), np.dtype(np.complex128))
        target = dtypes.canonicalize_dtype(np.complex128 if wide else np.complex64)
    x = _conv.convert_element_type(x, target)
    if not lengths:
        return x
    return fft_p.bind(x, fft_type=typ, fft_lengths=lengths)
