"""TPU-style Pallas kernels for tests: each ``make_*(interpret=...)`` returns a ``Kernel``:
the jitted kernel, a jnp reference of it and example inputs. test_kernels.py runs them in
interpret mode on the CPU; a lowering test can build the same kernels with
``interpret=False`` and lower them for a TPU.

The kernels are written as TPU kernels are: a grid with BlockSpecs whose last two block
dimensions are multiples of (8, 128), pltpu.CompilerParams dimension semantics, VMEM scratch,
``pl.when``, ``lax.fori_loop`` and ``dot_general`` with an f32 result.
"""
from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import numpy as np

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu

F32 = np.float32


class Kernel(NamedTuple):
    """A kernel (jitted), its reference (same arguments, same results) and inputs for both."""

    fn: Callable
    reference: Callable
    args: tuple


def _normal(shape, seed, dtype=F32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _params(*semantics):
    return pltpu.CompilerParams(dimension_semantics=semantics)


def make_elementwise(interpret=True, shape=(256, 512), block=(128, 256)):
    """``x * sigmoid(y) + 1`` over a 2D grid of (128, 256) blocks."""
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] * _sigmoid(y_ref[...]) + 1.0

    spec = pl.BlockSpec(block, lambda i, j: (i, j))
    call = pl.pallas_call(
        kernel, out_shape=plax.ShapeDtypeStruct(shape, F32),
        grid=(shape[0] // block[0], shape[1] // block[1]), in_specs=[spec, spec],
        out_specs=spec, compiler_params=_params("parallel", "parallel"), interpret=interpret)
    return Kernel(plax.jit(call), lambda x, y: x * _sigmoid(y) + 1.0,
                  (_normal(shape, 0), _normal(shape, 1)))


def _sigmoid(x):
    """The logistic function, in ops a kernel has."""
    return 1.0 / (1.0 + jnp.exp(-x))


def make_tiled_matmul(interpret=True, m=256, k=512, n=256, bm=128, bk=128, bn=128):
    """A bf16 matmul in (bm, bn) tiles accumulated in an f32 VMEM scratch across the
    "arbitrary" contraction axis of the grid; the output is f32."""
    def kernel(x_ref, y_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _zero():
            acc_ref[...] = jnp.zeros(acc_ref.shape, F32)

        acc_ref[...] += lax.dot_general(x_ref[...], y_ref[...], (((1,), (0,)), ((), ())),
                                        preferred_element_type=F32)

        @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
        def _write():
            o_ref[...] = acc_ref[...]

    call = pl.pallas_call(
        kernel, out_shape=plax.ShapeDtypeStruct((m, n), F32), grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), F32)],
        compiler_params=_params("parallel", "parallel", "arbitrary"), interpret=interpret)
    bf16 = jnp.bfloat16
    return Kernel(plax.jit(call),
                  lambda x, y: jnp.dot(x, y, preferred_element_type=F32),
                  (_normal((m, k), 2).astype(bf16), _normal((k, n), 3).astype(bf16)))


def make_row_softmax(interpret=True, rows=64, cols=256, block_rows=16):
    """A numerically stable softmax of each row, ``block_rows`` whole rows a program."""
    def kernel(x_ref, o_ref):
        x = x_ref[...]
        e = jnp.exp(x - jnp.max(x, axis=1, keepdims=True))
        o_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)

    spec = pl.BlockSpec((block_rows, cols), lambda i: (i, 0))
    call = pl.pallas_call(kernel, out_shape=plax.ShapeDtypeStruct((rows, cols), F32),
                          grid=(rows // block_rows,), in_specs=[spec], out_specs=spec,
                          compiler_params=_params("parallel"), interpret=interpret)
    return Kernel(plax.jit(call), lambda x: plax.nn.softmax(x, axis=-1),
                  (3 * _normal((rows, cols), 4),))


def make_causal_flash_forward(interpret=True, seq=256, d=128, block_q=128, block_k=128):
    """One head of causal attention, ``softmax(q k^T / sqrt(d)) v`` with an online softmax:
    the grid walks key blocks on its last ("arbitrary") axis, keeping the row maximum, row sum
    and output accumulator in VMEM; key blocks above the diagonal are skipped."""
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref):
        i, j = pl.program_id(0), pl.program_id(1)

        @pl.when(j == 0)
        def _start():
            m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, F32)
            l_ref[...] = jnp.zeros(l_ref.shape, F32)
            acc_ref[...] = jnp.zeros(acc_ref.shape, F32)

        @pl.when(j * block_k <= (i + 1) * block_q - 1)
        def _visit():
            s = lax.dot_general(q_ref[...], k_ref[...], (((1,), (1,)), ((), ())),
                                preferred_element_type=F32) * scale
            rows = i * block_q + lax.broadcasted_iota(jnp.int32, s.shape, 0)
            cols = j * block_k + lax.broadcasted_iota(jnp.int32, s.shape, 1)
            s = jnp.where(cols <= rows, s, -1e30)
            m_prev = m_ref[...][:, :1]
            m_next = jnp.maximum(m_prev, jnp.max(s, axis=1, keepdims=True))
            p = jnp.exp(s - m_next)
            rescale = jnp.exp(m_prev - m_next)
            l_ref[...] = jnp.broadcast_to(
                rescale * l_ref[...][:, :1] + jnp.sum(p, axis=1, keepdims=True), l_ref.shape)
            m_ref[...] = jnp.broadcast_to(m_next, m_ref.shape)
            acc_ref[...] = acc_ref[...] * rescale + lax.dot_general(
                p, v_ref[...], (((1,), (0,)), ((), ())), preferred_element_type=F32)

        @pl.when(j == pl.num_programs(1) - 1)
        def _finish():
            o_ref[...] = acc_ref[...] / l_ref[...][:, :1]

    q_spec = pl.BlockSpec((block_q, d), lambda i, j: (i, 0))
    kv_spec = pl.BlockSpec((block_k, d), lambda i, j: (j, 0))
    call = pl.pallas_call(
        kernel, out_shape=plax.ShapeDtypeStruct((seq, d), F32),
        grid=(seq // block_q, seq // block_k), in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=q_spec,
        scratch_shapes=[pltpu.VMEM((block_q, 128), F32), pltpu.VMEM((block_q, 128), F32),
                        pltpu.VMEM((block_q, d), F32)],
        compiler_params=_params("parallel", "arbitrary"), interpret=interpret)

    def reference(q, k, v):
        s = (q @ k.T) * scale
        s = jnp.where(np.tril(np.ones((seq, seq), bool)), s, -jnp.inf)
        return plax.nn.softmax(s, axis=-1) @ v
    return Kernel(plax.jit(call), reference,
                  tuple(_normal((seq, d), 5 + n) for n in range(3)))


def make_scalar_prefetch_gather(interpret=True, rows=8, block=(8, 128), table_blocks=6):
    """Row blocks of a table picked by indices prefetched into SMEM (read by the index map),
    each scaled by its index read from SMEM inside the kernel."""
    def kernel(idx_ref, table_ref, o_ref):
        o_ref[...] = table_ref[...] * idx_ref[pl.program_id(0)].astype(F32)

    idx = np.array([3, 0, 5, 5, 1, 2, 4, 0], np.int32)[:rows]
    call = pl.pallas_call(
        kernel, out_shape=plax.ShapeDtypeStruct((rows * block[0], block[1]), F32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(rows,),
            in_specs=[pl.BlockSpec(block, lambda i, idx_ref: (idx_ref[i], 0))],
            out_specs=pl.BlockSpec(block, lambda i, idx_ref: (i, 0))),
        compiler_params=_params("arbitrary"), interpret=interpret)

    def reference(idx, table):
        blocks = table.reshape(table_blocks, *block)[idx]
        return (blocks * idx.astype(F32)[:, None, None]).reshape(-1, block[1])
    return Kernel(plax.jit(call), reference,
                  (idx, _normal((table_blocks * block[0], block[1]), 8)))


def make_aliased_accumulate(interpret=True, shape=(64, 256), block=(16, 256)):
    """``acc + 2 * x`` written into ``acc``'s buffer (``input_output_aliases={0: 0}``)."""
    def kernel(acc_ref, x_ref, o_ref):
        o_ref[...] = acc_ref[...] + 2.0 * x_ref[...]

    spec = pl.BlockSpec(block, lambda i: (i, 0))
    call = pl.pallas_call(
        kernel, out_shape=plax.ShapeDtypeStruct(shape, F32), grid=(shape[0] // block[0],),
        in_specs=[spec, spec], out_specs=spec, input_output_aliases={0: 0},
        compiler_params=_params("parallel"), interpret=interpret)
    return Kernel(plax.jit(call, donate_argnums=0), lambda acc, x: acc + 2.0 * x,
                  (_normal(shape, 9), _normal(shape, 10)))


def make_chunked_prefix_sum(interpret=True, rows=64, cols=128, chunk=8):
    """Running sums down the rows, ``chunk`` rows at a time: a ``fori_loop`` over dynamic
    slices ``pl.ds(t * chunk, chunk)`` of the block, carrying the previous chunk's last row."""
    def kernel(x_ref, o_ref):
        shape = (chunk, chunk)  # (ones on and below the diagonal: row sums by a matmul)
        lower = (lax.broadcasted_iota(jnp.int32, shape, 1)
                 <= lax.broadcasted_iota(jnp.int32, shape, 0)).astype(F32)

        def step(t, carry):
            rows_t = pl.ds(pl.multiple_of(t * chunk, chunk), chunk)
            sums = carry + lax.dot_general(lower, x_ref[rows_t, :], (((1,), (0,)), ((), ())),
                                           preferred_element_type=F32)
            o_ref[rows_t, :] = sums
            return jnp.broadcast_to(sums[chunk - 1:chunk, :], (1, cols))
        lax.fori_loop(0, rows // chunk, step, jnp.zeros((1, cols), F32))

    call = pl.pallas_call(kernel, out_shape=plax.ShapeDtypeStruct((rows, cols), F32),
                          in_specs=[pl.BlockSpec((rows, cols), lambda: (0, 0))],
                          out_specs=pl.BlockSpec((rows, cols), lambda: (0, 0)),
                          interpret=interpret)
    return Kernel(plax.jit(call), lambda x: jnp.cumsum(x, axis=0),
                  (_normal((rows, cols), 11),))


KERNELS = {
    "elementwise": make_elementwise,
    "tiled_matmul": make_tiled_matmul,
    "row_softmax": make_row_softmax,
    "causal_flash_forward": make_causal_flash_forward,
    "scalar_prefetch_gather": make_scalar_prefetch_gather,
    "aliased_accumulate": make_aliased_accumulate,
    "chunked_prefix_sum": make_chunked_prefix_sum,
}


@functools.lru_cache(maxsize=None)
def built(name: str, interpret: bool = True) -> Kernel:
    """``KERNELS[name]`` built once per process."""
    return KERNELS[name](interpret=interpret)
