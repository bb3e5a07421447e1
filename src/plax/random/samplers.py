"""The first samplers of plax.random, with JAX's signatures and algorithms, so that
the same key gives the same numbers as JAX."""
from __future__ import annotations

import operator

import numpy as np

from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.core.avals import shape_entries
from plax.core.symbolic_shapes import is_symbolic_dim
from plax.core.trace import get_aval
from plax.first_order.sharding_constraint import takes_out_sharding
from plax.first_order import arithmetic as _arith
from plax.first_order import bitwise as _bitwise
from plax.first_order import conversion as _conversion
from plax.first_order import shapes as _shapes
from plax.first_order import transcendental as _trans
from plax.random import threefry
from plax.random.keys import check_key

__all__ = ["bits", "uniform", "normal", "randint"]


def checked_shape(shape) -> tuple:
    """A shape argument as a tuple of Python ints or symbolic dimensions (under shape
    polymorphism; TypeError for anything else)."""
    try:
        return tuple(d if is_symbolic_dim(d) else operator.index(d)
                     for d in shape_entries(shape))
    except TypeError:
        raise TypeError(f"Shapes must be 1D sequences of concrete values of integer type, got "
                        f"{shape!r}.") from None


def checked_optional_shape(shape):
    """A ``shape=None`` argument (the parameters' shape) kept as None, any other checked."""
    return None if shape is None else checked_shape(shape)


# --- samplers -----------------------------------------------------------------------------
@takes_out_sharding
def bits(key, shape=(), dtype=None):
    """Uniform random bits of an unsigned ``dtype`` (uint32 by default, uint64 with x64)."""
    key = check_key("bits", key)
    if dtype is None:
        dtype = np.dtype(np.uint64 if dtypes.x64_enabled() else np.uint32)
    else:
        dtype = dtypes.canonicalize_user_dtype(dtype)
    if not dtypes.is_unsigned(dtype):
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dtype}")
    return threefry.random_bits(key, dtype.itemsize * 8, checked_shape(shape))


def checked_float_dtype(dtype, name, kinds=("float",)):
    """``dtype`` (the default float when None) canonicalized; ValueError naming ``name``
    unless it is a float dtype (or complex, where ``kinds`` allows)."""
    dtype = np.dtype(dtypes.default_float_dtype()) if dtype is None else \
        dtypes.canonicalize_user_dtype(dtype)
    ok = dtypes.is_float(dtype) or ("complex" in kinds and dtypes.is_complex(dtype))
    if not ok:
        what = "a float or complex dtype" if "complex" in kinds else "a float dtype"
        raise ValueError(f"dtype argument to `{name}` must be {what}, got {dtype}")
    return dtype


@takes_out_sharding
def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform random values in ``[minval, maxval)``."""
    key = check_key("uniform", key)
    dtype = checked_float_dtype(dtype, "uniform")
    return draw_uniform(key, minval, maxval, checked_shape(shape), dtype)


def _uniform(key, minval, maxval, shape, dtype):
    info = dtypes.finfo(dtype)
    nbits, nmant = info.bits, info.nmant
    if nbits not in (8, 16, 32, 64):
        raise TypeError(f"uniform only accepts 8-, 16-, 32-, or 64-bit dtypes, got {dtype}.")
    minval = _to_rank(_conversion.convert_element_type(minval, dtype), len(shape))
    maxval = _to_rank(_conversion.convert_element_type(maxval, dtype), len(shape))
    rng_bits = 8 if nmant < 8 else nbits
    uint = np.dtype(f"uint{nbits}")
    raw = threefry.random_bits(key, rng_bits, shape)
    if rng_bits != nbits:
        raw = _conversion.convert_element_type(raw, uint)
    # Random mantissa bits under the exponent of 1.0 give a float in [1, 2); minus one.
    mantissa = _bitwise.shift_right_logical(raw, np.array(rng_bits - nmant, uint))
    one_bits = np.array(1.0, dtype).view(uint)
    floats = _arith.sub(_conversion.bitcast_convert_type(
        _bitwise.bitwise_or(mantissa, one_bits), dtype), np.array(1.0, dtype))
    scaled = _arith.add(_arith.mul(floats, _arith.sub(maxval, minval)), minval)
    return _arith.max(minval, _shapes.reshape(scaled, shape))


# Uniform values in [minval, maxval) for a checked key, shape and float dtype;
# staged by jit under the name JAX's jaxprs show (``jit[name=_uniform]``).
draw_uniform = jit(_uniform, static_argnums=(3, 4))


def _to_rank(x, rank: int):
    shape = get_aval(x).shape
    if len(shape) >= rank:
        return x
    return _shapes.reshape(x, (1,) * (rank - len(shape)) + shape)


@takes_out_sharding
def normal(key, shape=(), dtype=None):
    """Standard normal values (complex ones have independent parts of variance 1/2)."""
    key = check_key("normal", key)
    dtype = checked_float_dtype(dtype, "normal", kinds=("float", "complex"))
    return draw_normal(key, checked_shape(shape), dtype)


def _normal(key, shape, dtype):
    if dtypes.is_complex(dtype):
        real = np.dtype(np.finfo(dtype).dtype)
        keys = threefry.split(key, (2,))
        re = _normal_real(keys[0], shape, real)
        im = _normal_real(keys[1], shape, real)
        z = _conversion.convert_element_type(re, dtype)
        z = _arith.add(z, _arith.mul(_conversion.convert_element_type(im, dtype),
                                     np.array(1j, dtype)))
        return _arith.div(z, np.array(np.sqrt(2), dtype))
    return _normal_real(key, shape, dtype)


# Standard normal values for a checked key, shape and float or complex dtype;
# staged by jit under the name JAX's jaxprs show (``jit[name=_normal]``).
draw_normal = jit(_normal, static_argnums=(1, 2))


def _normal_real(key, shape, dtype):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype), dtype=dtype)
    u = draw_uniform(key, lo, np.array(1.0, dtype), shape, dtype)
    return _arith.mul(np.array(np.sqrt(2), dtype), _trans.erf_inv(u))


@takes_out_sharding
def randint(key, shape, minval, maxval, dtype=None):
    """Uniform random integers in ``[minval, maxval)`` (JAX's modulus construction from two
    draws of random bits, so values match JAX's)."""
    key = check_key("randint", key)
    dtype = np.dtype(np.int64 if dtypes.x64_enabled() else np.int32) if dtype is None else \
        dtypes.canonicalize_user_dtype(dtype)
    if not dtypes.is_integer(dtype):
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    info = np.iinfo(dtype)
    sampling = dtype
    if info.bits < 32:  # narrow types are drawn at 32 bits, then cast
        sampling = np.dtype(np.int32)
        minval = jnp.clip(jnp.asarray(minval).astype(np.int32), int(info.min), int(info.max))
        maxval = jnp.clip(jnp.asarray(maxval).astype(np.int32), int(info.min), int(info.max) + 1)
    return _randint(key, minval, maxval, checked_shape(shape), sampling).astype(dtype)


@jit(static_argnums=(3, 4))
def _randint(key, minval, maxval, shape, dtype):
    check_param_shapes("randint", shape, np.shape(minval), np.shape(maxval))
    minval, maxval = jnp.asarray(minval), jnp.asarray(maxval)
    if not dtypes.is_integer(minval.dtype):
        minval = minval.astype(int)
    if not dtypes.is_integer(maxval.dtype):
        maxval = maxval.astype(int)
    top = _clip_to(jnp.array(np.iinfo(dtype).max, dtype), maxval.dtype)
    maxval_out_of_range = maxval > top
    minval, maxval = _clip_to(minval, dtype), _clip_to(maxval, dtype)
    minval, maxval = _to_rank(minval, len(shape)), _to_rank(maxval, len(shape))
    nbits = np.iinfo(dtype).bits
    keys = threefry.split(key, (2,))
    higher = threefry.random_bits(keys[0], nbits, shape)
    lower = threefry.random_bits(keys[1], nbits, shape)
    unsigned = np.dtype(f"uint{nbits}")
    span = _conversion.convert_element_type(maxval - minval, unsigned)
    span = jnp.where(maxval <= minval, np.array(1, unsigned), span)
    span = jnp.where(maxval_out_of_range & (maxval > minval), span + np.array(1, unsigned), span)
    # (2**nbits) mod span, as ((2**(nbits/2)) mod span)**2 mod span, without overflow.
    multiplier = jnp.remainder(np.array(2 ** (nbits // 2), unsigned), span)
    multiplier = jnp.remainder(multiplier * multiplier, span)
    offset = jnp.remainder(jnp.remainder(higher, span) * multiplier + jnp.remainder(lower, span),
                           span)
    return minval + _conversion.convert_element_type(offset, dtype)


def _clip_to(x, dtype):
    """Integer ``x`` converted to ``dtype`` saturating at its range instead of wrapping."""
    src, dst = np.iinfo(x.dtype), np.iinfo(dtype)
    lo, hi = max(dst.min, src.min), min(dst.max, src.max)
    return jnp.clip(x, np.array(lo, x.dtype), np.array(hi, x.dtype)).astype(dtype)


def result_shape(name: str, shape, *params) -> tuple:
    """The shape of a draw: ``shape`` (checked against the parameters' shapes), or the
    broadcast of the parameters' shapes when ``shape`` is None."""
    shapes = [tuple(np.shape(p)) for p in params]
    if shape is None:
        return tuple(np.broadcast_shapes(*shapes))
    check_param_shapes(name, tuple(shape), *shapes)
    return tuple(shape)


def check_param_shapes(name: str, shape: tuple, *param_shapes) -> None:
    """Raise unless the parameters' shapes broadcast to exactly ``shape``."""
    if any(param_shapes):  # (scalar parameters fit any shape, symbolic ones too)
        try:
            got = np.broadcast_shapes(shape, *param_shapes)
        except ValueError:
            raise ValueError("Incompatible shapes for broadcasting: shapes="
                             f"{[tuple(shape), *map(tuple, param_shapes)]}") from None
        if got != tuple(shape):
            raise ValueError(f"{name} parameter shapes must be broadcast-compatible with shape "
                             "argument, and the result of broadcasting the shapes must equal the "
                             f"shape argument, but got result {got} for shape argument {shape}.")
