"""A tiled matmul kernel for TPUs, as ``jax.experimental.pallas.ops.tpu.matmul``.

The grid is (row blocks, column blocks, contraction blocks); each program adds one product of
tiles into an f32 (int32 for 8- and 4-bit integers) VMEM accumulator and writes the output
tile, so the contraction axis is "arbitrary" and the other two "parallel". On a backend other
than a TPU the kernel runs in interpret mode.
"""
from __future__ import annotations

import functools

import numpy as np

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu

__all__ = ["matmul", "matmul_kernel"]


def matmul_kernel(x_tile_ref, y_tile_ref, o_tile_ref, acc_ref):
    """One grid step: ``acc += x_tile @ y_tile`` (zeroed at the first contraction step),
    the output tile rewritten from the accumulator."""
    @pl.when(pl.program_id(2) == 0)
    def _zero():
        acc_ref[...] = jnp.zeros(acc_ref.shape, acc_ref.dtype)

    acc_ref[...] = acc_ref[...] + jnp.dot(x_tile_ref[...], y_tile_ref[...],
                                          preferred_element_type=acc_ref.dtype)
    o_tile_ref[...] = acc_ref[...].astype(o_tile_ref.dtype)


_NARROW_INTS = ("int8", "uint8", "int4", "uint4")


@functools.partial(plax.jit, static_argnames=["block_shape", "block_k", "debug", "out_dtype"])
def matmul(x, y, *, block_shape, block_k: int = 256, out_dtype=None, debug: bool = False):
    """``x @ y`` ([m, k] by [k, n]) computed in ``block_shape = (bm, bn)`` output tiles,
    ``block_k`` of the contraction at a time; ``out_dtype`` defaults to the inputs' dtype."""
    if out_dtype is None:
        if x.dtype != y.dtype:
            raise TypeError(f"Cannot deduce output dtype for different input dtypes: "
                            f"{x.dtype}, {y.dtype}; pass out_dtype=...")
        out_dtype = x.dtype
    (m, k), (k_y, n) = x.shape, y.shape
    if k != k_y:
        raise ValueError(f"matmul: contraction sizes differ: x is {x.shape}, y is {y.shape}")
    bm, bn = block_shape
    acc_dtype = np.int32 if np.dtype(x.dtype).name in _NARROW_INTS else np.float32
    return pl.pallas_call(
        matmul_kernel,
        out_shape=plax.ShapeDtypeStruct((m, n), out_dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            grid=(m // bm, n // bn, k // block_k),
            in_specs=[pl.BlockSpec((bm, block_k), lambda i, j, kk: (i, kk)),
                      pl.BlockSpec((block_k, bn), lambda i, j, kk: (kk, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
            scratch_shapes=[pltpu.VMEM((bm, bn), acc_dtype)]),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
        interpret=plax.default_backend() != "tpu", debug=debug)(x, y)
