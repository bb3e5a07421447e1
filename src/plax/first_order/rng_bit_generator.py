"""XLA's stateful-style generators: ``rng_bit_generator`` (random bits from an explicit key,
which it returns advanced; ``RandomAlgorithm`` picks Threefry, Philox or the platform's
default) and ``rng_uniform`` (uniform values from XLA's own, unkeyed, generator)."""
from __future__ import annotations

import enum
import warnings

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, register_lowering
from plax.core.trace import get_aval
from plax.first_order import shapes, slicing
from plax.first_order.ad_util import defzero
from plax.first_order.batch_util import move_batch_dim
from plax.first_order.common import shape_tuple

__all__ = ["RandomAlgorithm", "rng_bit_generator", "rng_bit_generator_p", "rng_uniform",
           "rng_uniform_p"]


class RandomAlgorithm(enum.IntEnum):
    """The algorithm ``rng_bit_generator`` runs: the platform's default (Philox on CPU),
    Threefry-2x32 or Philox-4x32."""
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2

    def __str__(self):
        return self.name


_HLO_ALGORITHM = {RandomAlgorithm.RNG_DEFAULT: "DEFAULT",
                  RandomAlgorithm.RNG_THREE_FRY: "THREE_FRY",
                  RandomAlgorithm.RNG_PHILOX: "PHILOX"}
_U32, _U64 = np.dtype(np.uint32), np.dtype(np.uint64)
_BIT_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))

# --- rng_bit_generator ---------------------------------------------------------------------
rng_bit_generator_p = Primitive("rng_bit_generator", multiple_results=True)


def _bits_abstract(key, *, shape, dtype, algorithm, out_sharding):
    if not ((key.shape == (4,) and key.dtype == _U32) or (key.shape == (2,) and key.dtype == _U64)):
        raise TypeError("rng_bit_generator: the key must be a uint32[4] array (or uint64[2]), got "
                        f"{key.dtype.name}{list(key.shape)}.")
    return [ShapedArray(key.shape, key.dtype, key.weak_type), ShapedArray(shape, dtype)]


def _bits_lowering(ctx, key, *, shape, dtype, algorithm, out_sharding):
    return lower_bits(ctx, key, algorithm)


def lower_bits(ctx, key, algorithm, shape_value=None):
    """The generator on XLA's u64[2] state; ``shape_value`` (the SSA i64 vector of the bits'
    symbolic shape, in a shape-polymorphic export) makes it XLA's
    ``stablehlo.dynamic_rng_bit_generator`` custom call, which shape refinement makes static."""
    key_aval, out_key_aval, bits_aval = ctx.avals_in[0], *ctx.avals_out
    words = ShapedArray((2,), _U64)
    if key_aval.dtype == _U32:  # XLA's state is u64[2]: the four words, pairwise
        pairs = ShapedArray((2, 2), _U32)
        key = ctx.op1("stablehlo.bitcast_convert",
                      [ctx.op1("stablehlo.reshape", [key], [key_aval], pairs)], [pairs], words)
    alg = f"rng_algorithm = #stablehlo<rng_algorithm {_HLO_ALGORITHM[algorithm]}>"
    if shape_value is None:
        state, bits = ctx.op("stablehlo.rng_bit_generator", [key], [words], [words, bits_aval],
                             props=alg)
    else:
        state, bits = ctx.op(
            "stablehlo.custom_call", [key, shape_value],
            [words, ShapedArray((len(bits_aval.shape),), np.dtype(np.int64))],
            [words, bits_aval], attrs=alg,
            props='api_version = 2 : i32, call_target_name = '
                  '"stablehlo.dynamic_rng_bit_generator"')
    if key_aval.dtype == _U32:
        pairs = ShapedArray((2, 2), _U32)
        state = ctx.op1("stablehlo.reshape", [ctx.op1("stablehlo.bitcast_convert", [state],
                                                      [words], pairs)], [pairs], out_key_aval)
    return [state, bits]


def _bits_batch(axis_data, vals, dims, *, shape, **params):
    """As JAX's: the first key draws for the whole batch (bits of shape ``(B, *shape)``) and
    alone is advanced; the other keys come back unchanged."""
    (keys,), (d,) = vals, dims
    size = get_aval(keys).shape[d]
    keys = move_batch_dim(keys, d, 0, size)
    first = shapes.squeeze(slicing.slice_in_dim(keys, 0, 1, axis=0), (0,))
    new_key, bits = rng_bit_generator_p.bind(first, shape=(size,) + shape, **params)
    keys = slicing.dynamic_update_slice(keys, shapes.expand_dims(new_key, (0,)),
                                        (np.int32(0), np.int32(0)))
    return [keys, bits], [0, 0]


abstract_eval_rules[rng_bit_generator_p] = _bits_abstract
register_lowering(rng_bit_generator_p, _bits_lowering)
defzero(rng_bit_generator_p)
batch_rules[rng_bit_generator_p] = _bits_batch


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT, *,
                      out_sharding=None):
    """Random bits of ``shape`` (an unsigned ``dtype``) from ``key`` (uint32[4]) with XLA's
    RngBitGenerator; returns ``(new_key, bits)``. The bits depend on the platform's
    implementation of ``algorithm``."""
    shape = shape_tuple(shape, "rng_bit_generator shape")
    want = np.dtype(dtype)
    dtype = dtypes.canonicalize_dtype(want)
    if dtype != want:
        warnings.warn(f"Explicitly requested dtype {want.name} requested in rng_bit_generator is "
                      f"not available, and will be truncated to dtype {dtype.name}. To enable "
                      "more dtypes, set the jax_enable_x64 configuration option.", stacklevel=2)
    if dtype not in _BIT_DTYPES:
        raise TypeError(f"rng_bit_generator: unsupported dtype {dtype.name} (an unsigned integer "
                        "dtype: uint8, uint16, uint32 or uint64).")
    if out_sharding is not None:
        raise NotImplementedError("rng_bit_generator: out_sharding is not supported; lay the "
                                  "bits out with lax.with_sharding_constraint.")
    return tuple(rng_bit_generator_p.bind(key, shape=shape, dtype=dtype,
                                          algorithm=RandomAlgorithm(algorithm),
                                          out_sharding=None))


# --- rng_uniform ---------------------------------------------------------------------------
# JAX gives it neither a jvp nor a batching rule: it is XLA's unkeyed generator.
rng_uniform_p = Primitive("rng_uniform")


def _uniform_abstract(a, b, *, shape):
    if a.shape != () or b.shape != ():
        raise ValueError(f"Arguments to rng_uniform must be scalars; got shapes {a.shape} and "
                         f"{b.shape}.")
    if a.dtype != b.dtype:
        raise TypeError(f"Arguments to rng_uniform must have identical dtypes, got {a.dtype} and "
                        f"{b.dtype}.")
    return ShapedArray(shape, a.dtype, a.weak_type and b.weak_type)


def _uniform_lowering(ctx, a, b, *, shape):
    dims = ShapedArray((len(shape),), np.dtype(np.int64))
    sizes = ctx.constant(np.asarray(shape, np.int64).reshape(len(shape)), dims)
    return ctx.op1("stablehlo.rng", [a, b, sizes], [*ctx.avals_in, dims],
                   props="rng_distribution = #stablehlo<rng_distribution UNIFORM>")


abstract_eval_rules[rng_uniform_p] = _uniform_abstract
register_lowering(rng_uniform_p, _uniform_lowering)


def rng_uniform(a, b, shape):
    """Values of ``shape`` drawn uniformly from ``[a, b)`` (scalars of one dtype) by XLA's
    own stateful generator (not reproducible: prefer ``plax.random``)."""
    return rng_uniform_p.bind(a, b, shape=shape_tuple(shape, "rng_uniform shape"))
