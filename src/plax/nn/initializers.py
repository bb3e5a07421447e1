"""plax.nn.initializers: functions ``init(key, shape, dtype=None, out_sharding=None) -> array``
for weights, the same constructions as JAX's (so the same key gives the same weights).
"""
from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from plax import numpy as jnp
from plax import random
from plax.core import dtypes
from plax.first_order.sharding_constraint import with_out_sharding

__all__ = ["Initializer", "zeros", "ones", "constant", "uniform", "normal", "truncated_normal",
           "variance_scaling", "glorot_uniform", "glorot_normal", "xavier_uniform",
           "xavier_normal", "lecun_uniform", "lecun_normal", "he_uniform", "he_normal",
           "kaiming_uniform", "kaiming_normal", "orthogonal", "delta_orthogonal"]


class Initializer(Protocol):
    """The type of an initializer: ``init(key, shape, dtype=None, out_sharding=None) -> Array``."""

    def __call__(self, key: Any, shape: Any, dtype: Any = None, out_sharding: Any = None) -> Any:
        ...



def _initializer(draw, default_dtype):
    """``init(key, shape, dtype=default_dtype, out_sharding=None)`` from ``draw(key, shape,
    dtype)``, the result laid out by ``out_sharding`` when given."""
    def init(key, shape, dtype=default_dtype, out_sharding=None):
        out = draw(key, shape, dtype)
        return out if out_sharding is None else with_out_sharding(lambda v: v, out_sharding, out)
    return init


def _dtype(dtype):
    return np.dtype(dtypes.default_float_dtype()) if dtype is None else \
        dtypes.canonicalize_user_dtype(dtype)


def zeros(key, shape, dtype=None, out_sharding=None):
    """An initializer of zeros (the key is not used)."""
    return jnp.zeros(shape, _dtype(dtype), out_sharding=out_sharding)


def ones(key, shape, dtype=None, out_sharding=None):
    """An initializer of ones (the key is not used)."""
    return jnp.ones(shape, _dtype(dtype), out_sharding=out_sharding)


def constant(value, dtype=None):
    """An initializer filling every element with ``value``."""
    def draw(key, shape, dtype):
        return jnp.full(shape, value, dtype=_dtype(dtype))
    return _initializer(draw, dtype)


def uniform(scale=1e-2, dtype=None):
    """An initializer of uniform values in ``[0, scale)``."""
    def draw(key, shape, dtype):
        dtype = _dtype(dtype)
        return random.uniform(key, shape, dtype) * jnp.array(scale, dtype)
    return _initializer(draw, dtype)


def normal(stddev=1e-2, dtype=None):
    """An initializer of normal values of standard deviation ``stddev``."""
    def draw(key, shape, dtype):
        dtype = _dtype(dtype)
        return random.normal(key, shape, dtype) * jnp.array(stddev, dtype)
    return _initializer(draw, dtype)


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """An initializer of standard normals truncated to ``(lower, upper)``, times ``stddev``."""
    def draw(key, shape, dtype):
        dtype = _dtype(dtype)
        return random.truncated_normal(key, lower, upper, shape, dtype) * \
            jnp.array(stddev, dtype)
    return _initializer(draw, dtype)


def _compute_fans(shape, in_axis=-2, out_axis=-1, batch_axis=()):
    """``(fan_in, fan_out)`` of a weight of ``shape``: the input/output sizes times the size
    of the receptive field (every dimension that is not input, output or batch)."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional "
                         "weights tensor with default in_axis. Must be at least 2D or specify "
                         "in_axis explicitly.")

    def size(axes):
        return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)

    in_size, out_size, batch_size = size(in_axis), size(out_axis), size(batch_axis)
    receptive = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive, out_size * receptive


def _complex_uniform(key, shape, dtype):
    """Complex values uniform on the unit disc's area (radius sqrt(2 u), uniform angle)."""
    key_r, key_theta = random.split(key)
    real = np.dtype(np.finfo(dtype).dtype)
    r = jnp.sqrt(2 * random.uniform(key_r, shape, real)).astype(dtype)
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dtype)
    return r * jnp.exp(1j * theta)


def _complex_truncated_normal(key, upper, shape, dtype):
    """Complex normals truncated to modulus ``upper`` (by inverting the radial CDF)."""
    key_r, key_theta = random.split(key)
    real = np.dtype(np.finfo(dtype).dtype)
    t = (1 - jnp.exp(jnp.array(-(upper ** 2), dtype))) * \
        random.uniform(key_r, shape, real).astype(dtype)
    r = jnp.sqrt(-jnp.log(1 - t))
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dtype)
    return r * jnp.exp(1j * theta)


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None):
    """An initializer whose values have variance ``scale / n``, ``n`` the fan chosen by
    ``mode`` ("fan_in", "fan_out", "fan_avg", "fan_geo_avg"), drawn from ``distribution``
    ("truncated_normal", "normal" or "uniform")."""
    def draw(key, shape, dtype):
        shape = tuple(int(d) for d in shape)
        dtype = _dtype(dtype)
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        if mode == "fan_in":
            denominator = fan_in
        elif mode == "fan_out":
            denominator = fan_out
        elif mode == "fan_avg":
            denominator = (fan_in + fan_out) / 2
        elif mode == "fan_geo_avg":
            denominator = (fan_in * fan_out) ** 0.5
        else:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        variance = jnp.array(scale / denominator, dtype=dtype)
        if distribution == "truncated_normal":
            if dtypes.is_float(dtype):
                # The standard deviation of a standard normal truncated to (-2, 2).
                stddev = jnp.sqrt(variance) / jnp.array(.87962566103423978, dtype)
                return random.truncated_normal(key, -2, 2, shape, dtype) * stddev
            # ... and of a complex standard normal truncated to modulus 2.
            stddev = jnp.sqrt(variance) / jnp.array(.95311164380491208, dtype)
            return _complex_truncated_normal(key, 2, shape, dtype) * stddev
        if distribution == "normal":
            return random.normal(key, shape, dtype) * jnp.sqrt(variance)
        if distribution == "uniform":
            if dtypes.is_float(dtype):
                return random.uniform(key, shape, dtype, -1) * jnp.sqrt(3 * variance)
            return _complex_uniform(key, shape, dtype) * jnp.sqrt(variance)
        raise ValueError(f"invalid distribution for variance scaling initializer: "
                         f"{distribution}")
    return _initializer(draw, dtype)


def _scaled(scale, mode, distribution, doc):
    def make(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis=in_axis, out_axis=out_axis,
                                batch_axis=batch_axis, dtype=dtype)
    make.__doc__ = doc
    return make


glorot_uniform = _scaled(1.0, "fan_avg", "uniform", "Glorot/Xavier uniform initializer.")
glorot_normal = _scaled(1.0, "fan_avg", "truncated_normal", "Glorot/Xavier normal initializer.")
lecun_uniform = _scaled(1.0, "fan_in", "uniform", "LeCun uniform initializer.")
lecun_normal = _scaled(1.0, "fan_in", "truncated_normal", "LeCun normal initializer.")
he_uniform = _scaled(2.0, "fan_in", "uniform", "He/Kaiming uniform initializer.")
he_normal = _scaled(2.0, "fan_in", "truncated_normal", "He/Kaiming normal initializer.")
for _name in ("glorot_uniform", "glorot_normal", "lecun_uniform", "lecun_normal", "he_uniform",
              "he_normal"):
    globals()[_name].__name__ = globals()[_name].__qualname__ = _name
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer of (semi-)orthogonal weights times ``scale``: the weight, read as a
    matrix whose columns run along ``column_axis`` (the other axes flattened into rows), has
    orthonormal columns (or rows, when there are fewer rows than columns)."""
    def draw(key, shape, dtype):
        shape = tuple(int(d) for d in shape)
        dtype = _dtype(dtype)
        if len(shape) < 2:
            raise ValueError(f"orthogonal initializer requires at least a 2D shape, got shape "
                             f"{shape}.")
        cols = shape[column_axis]
        rows = math.prod(shape) // cols
        q = random.orthogonal(key, rows, (), dtype, m=cols)
        rest = tuple(d for i, d in enumerate(shape) if i != column_axis % len(shape))
        q = jnp.moveaxis(jnp.reshape(q, rest + (cols,)), -1, column_axis)
        return jnp.array(scale, dtype) * q
    return _initializer(draw, dtype)


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer of convolution kernels (3-D, 4-D or 5-D, spatial dimensions first) that
    are zero except at the spatial centre, which holds an orthogonal (in, out) matrix times
    ``scale`` (the delta-orthogonal construction; needs in <= out)."""
    def draw(key, shape, dtype):
        shape = tuple(int(d) for d in shape)
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"Delta orthogonal initializer requires a 3D, 4D or 5D shape, got "
                             f"shape {shape}.")
        if shape[-2] > shape[-1]:
            raise ValueError(f"`fan_in` must be less or equal than `fan_out`, got fan_in="
                             f"{shape[-2]} and fan_out={shape[-1]} for shape {shape}.")
        centre = orthogonal(scale, column_axis, dtype)(key, shape[-2:], dtype)
        middle = tuple((k - 1) // 2 for k in shape[:-2])
        return jnp.zeros(shape, _dtype(dtype)).at[middle].set(centre)
    return _initializer(draw, dtype)
