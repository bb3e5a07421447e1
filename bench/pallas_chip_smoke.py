"""Pallas kernels compiled by Mosaic on a TPU (interpret=False), each checked against a jnp
reference: one PASS/FAIL line per kernel, every kernel run even when one fails (issue 50).

    PYTHONPATH=src python bench/pallas_chip_smoke.py            # plax (the default backend)
    PYTHONPATH=src python bench/pallas_chip_smoke.py --jax      # the same kernels on JAX
    ... --only a,b      runs only the named kernels
    ... --lower-only    lowers each kernel for TPU without running it (any machine)

(prng_seeded_bits runs only compiled or under pltpu.InterpretParams on JAX: JAX's plain
interpret=True has no rule for prng_seed; nor can it pass semaphores out of a pallas_call,
which the async_copy_* and kernels_closing_over_* kernels do.)

On a machine without a TPU, plax refuses ("Only interpret mode is supported on CPU
backend."), so every kernel FAILs there; ``--interpret`` runs them in interpret mode.
"""
from __future__ import annotations

import argparse
import functools
import sys
import traceback

import numpy as np

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--jax", action="store_true", help="run on real JAX instead of plax")
ARGS.add_argument("--interpret", action="store_true", help="interpret mode (any backend)")
ARGS.add_argument("--only", default=None, help="comma-separated kernel names")
ARGS.add_argument("--lower-only", action="store_true",
                  help="only lower each kernel for TPU (lowering_platforms=('tpu',)): no chip")
OPTS = ARGS.parse_args()

if OPTS.jax:
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
else:
    import plax as jax
    import plax.numpy as jnp
    from plax.experimental import pallas as pl
    from plax.experimental.pallas import tpu as pltpu

INTERPRET = OPTS.interpret
# (pl's names where it has them; pltpu's older ones otherwise)
SEMAPHORES = pl if hasattr(pl, "semaphore_signal") else pltpu
lax = jax.lax
KERNELS = {}


def kernel(fn):
    KERNELS[fn.__name__] = fn
    return fn


class Lowered(Exception):
    """--lower-only: the kernel lowered for TPU (its StableHLO's length)."""


def call(*a, **k):
    f = pl.pallas_call(*a, interpret=INTERPRET, **k)
    if not OPTS.lower_only:
        return f

    def lower(*args):
        text = jax.jit(f).trace(*args).lower(lowering_platforms=("tpu",)).as_text()
        raise Lowered(f"{text.count('tpu_custom_call')} tpu_custom_call, {len(text)} chars")
    return lower


def rand(key, shape, dtype=np.float32, scale=1.0):
    return (np.random.RandomState(key).standard_normal(shape) * scale).astype(dtype)


# --- kernels: each returns (plax/JAX result, reference, tolerance) ------------------------
@kernel
def elementwise():
    def k(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...] * 2.0
    x, y = rand(0, (64, 256)), rand(1, (64, 256))
    spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    f = call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(8, 2),
             in_specs=[spec, spec], out_specs=spec)
    return f(x, y), x + 2 * y, 1e-6


def _matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)
    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


@kernel
def matmul_bf16_scratch():
    m, k_, n, b = 512, 1024, 256, 128
    x = rand(2, (m, k_)).astype(jnp.bfloat16)
    y = rand(3, (k_, n)).astype(jnp.bfloat16)
    f = call(_matmul_kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
             grid=(m // b, n // b, k_ // b),
             in_specs=[pl.BlockSpec((b, b), lambda i, j, kk: (i, kk)),
                       pl.BlockSpec((b, b), lambda i, j, kk: (kk, j))],
             out_specs=pl.BlockSpec((b, b), lambda i, j, kk: (i, j)),
             scratch_shapes=[pltpu.VMEM((b, b), jnp.float32)],
             compiler_params=pltpu.CompilerParams(
                 dimension_semantics=("parallel", "parallel", "arbitrary"),
                 vmem_limit_bytes=32 * 1024 * 1024))
    ref = np.asarray(x, np.float32) @ np.asarray(y, np.float32)
    return f(x, y), ref, 1e-3 * np.abs(ref).max()


@kernel
def softmax_rows():
    def k(x_ref, o_ref):
        x = x_ref[...]
        e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
        o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)
    x = rand(4, (64, 512))
    f = call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(8,),
             in_specs=[pl.BlockSpec((8, 512), lambda i: (i, 0))],
             out_specs=pl.BlockSpec((8, 512), lambda i: (i, 0)))
    e = np.exp(x - x.max(-1, keepdims=True))
    return f(x), e / e.sum(-1, keepdims=True), 1e-5


def _flash_kernel(q_ref, k_ref, v_ref, o_ref, *, bq, bk, scale):
    qi = pl.program_id(1)
    q = q_ref[...].astype(jnp.float32) * scale
    d = q.shape[-1]

    def body(j, carry):
        m, l, acc = carry
        kb = k_ref[pl.ds(j * bk, bk), :].astype(jnp.float32)
        vb = v_ref[pl.ds(j * bk, bk), :].astype(jnp.float32)
        s = lax.dot_general(q, kb, (((1,), (1,)), ((), ())),
                            preferred_element_type=jnp.float32)
        rows = qi * bq + lax.broadcasted_iota(jnp.int32, (bq, bk), 0)
        cols = j * bk + lax.broadcasted_iota(jnp.int32, (bq, bk), 1)
        s = jnp.where(cols <= rows, s, -1e30)
        m_new = jnp.maximum(m, jnp.max(s, axis=1, keepdims=True))
        p = jnp.exp(s - m_new)
        alpha = jnp.exp(m - m_new)
        l_new = alpha * l + jnp.sum(p, axis=1, keepdims=True)
        acc_new = alpha * acc + jnp.dot(p, vb, preferred_element_type=jnp.float32)
        return m_new, l_new, acc_new
    init = (jnp.full((bq, 1), -1e30, jnp.float32), jnp.zeros((bq, 1), jnp.float32),
            jnp.zeros((bq, d), jnp.float32))
    nk = lax.div((qi + 1) * bq, bk)
    _, l, acc = lax.fori_loop(0, nk, body, init)
    o_ref[...] = (acc / l).astype(o_ref.dtype)


def _attention_ref(q, k, v):
    q, k, v = (np.asarray(a, np.float32) for a in (q, k, v))
    s = np.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1])
    n = q.shape[1]
    s = np.where(np.tril(np.ones((n, n), bool)), s, -1e30)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bqk,bkd->bqd", p / p.sum(-1, keepdims=True), v)


@kernel
def flash_attention_causal():
    bh, s, d, bq, bk = 4, 512, 128, 128, 128
    q, k_, v = (rand(5 + i, (bh, s, d)).astype(jnp.bfloat16) for i in range(3))
    kern = functools.partial(_flash_kernel, bq=bq, bk=bk, scale=1.0 / np.sqrt(d))
    f = call(kern, out_shape=jax.ShapeDtypeStruct((bh, s, d), jnp.float32),
             grid=(bh, s // bq),
             in_specs=[pl.BlockSpec((None, bq, d), lambda b, i: (b, i, 0)),
                       pl.BlockSpec((None, s, d), lambda b, i: (b, 0, 0)),
                       pl.BlockSpec((None, s, d), lambda b, i: (b, 0, 0))],
             out_specs=pl.BlockSpec((None, bq, d), lambda b, i: (b, i, 0)),
             compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",
                                                                       "parallel")))
    return f(q, k_, v), _attention_ref(q, k_, v), 5e-2


def _flash_grid_kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, bq, bk, scale):
    qi, ki = pl.program_id(1), pl.program_id(2)

    @pl.when(ki == 0)
    def _():
        m_ref[...] = jnp.full(m_ref.shape, -1e30, jnp.float32)
        l_ref[...] = jnp.zeros(l_ref.shape, jnp.float32)
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

    @pl.when(ki * bk <= qi * bq + bq - 1)
    def _():
        q = q_ref[...].astype(jnp.float32) * scale
        s = lax.dot_general(q, k_ref[...].astype(jnp.float32), (((1,), (1,)), ((), ())),
                            preferred_element_type=jnp.float32)
        rows = qi * bq + lax.broadcasted_iota(jnp.int32, (bq, bk), 0)
        cols = ki * bk + lax.broadcasted_iota(jnp.int32, (bq, bk), 1)
        s = jnp.where(cols <= rows, s, -1e30)
        m = m_ref[...]
        m_new = jnp.maximum(m, jnp.max(s, axis=1, keepdims=True))
        p = jnp.exp(s - m_new)
        alpha = jnp.exp(m - m_new)
        l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=1, keepdims=True)
        acc_ref[...] = alpha * acc_ref[...] + jnp.dot(
            p, v_ref[...].astype(jnp.float32), preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    @pl.when(ki == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


@kernel
def flash_attention_kv_grid():
    bh, s, d, bq, bk = 4, 512, 128, 128, 128
    q, k_, v = (rand(8 + i, (bh, s, d)).astype(jnp.bfloat16) for i in range(3))
    kern = functools.partial(_flash_grid_kernel, bq=bq, bk=bk, scale=1.0 / np.sqrt(d))
    f = call(kern, out_shape=jax.ShapeDtypeStruct((bh, s, d), jnp.float32),
             grid=(bh, s // bq, s // bk),
             in_specs=[pl.BlockSpec((None, bq, d), lambda b, i, j: (b, i, 0)),
                       pl.BlockSpec((None, bk, d), lambda b, i, j: (b, j, 0)),
                       pl.BlockSpec((None, bk, d), lambda b, i, j: (b, j, 0))],
             out_specs=pl.BlockSpec((None, bq, d), lambda b, i, j: (b, i, 0)),
             scratch_shapes=[pltpu.VMEM((bq, 1), jnp.float32), pltpu.VMEM((bq, 1), jnp.float32),
                             pltpu.VMEM((bq, d), jnp.float32)],
             compiler_params=pltpu.CompilerParams(
                 dimension_semantics=("parallel", "parallel", "arbitrary")))
    return f(q, k_, v), _attention_ref(q, k_, v), 5e-2


@kernel
def scalar_prefetch_gather():
    def k(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0 + idx_ref[pl.program_id(0)].astype(jnp.float32)
    idx = np.array([3, 0, 2, 1, 3, 3], np.int32)
    x = rand(11, (32, 128))
    f = call(k, out_shape=jax.ShapeDtypeStruct((len(idx) * 8, 128), x.dtype),
             grid_spec=pltpu.PrefetchScalarGridSpec(
                 num_scalar_prefetch=1, grid=(len(idx),),
                 in_specs=[pl.BlockSpec((8, 128), lambda i, idx_ref: (idx_ref[i], 0))],
                 out_specs=pl.BlockSpec((8, 128), lambda i, idx_ref: (i, 0))))
    ref = np.concatenate([x[8 * j:8 * j + 8] * 2 + j for j in idx])
    return f(idx, x), ref, 1e-6


@kernel
def input_output_aliases():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0
    x = rand(12, (32, 128))
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    f = call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(4,),
             in_specs=[spec], out_specs=spec, input_output_aliases={0: 0})
    f = f if OPTS.lower_only else jax.jit(f)
    return f(jnp.asarray(x)), x + 1, 1e-6


@kernel
def dynamic_slice_loop():
    def k(x_ref, o_ref):
        def body(i, c):
            o_ref[pl.ds(i * 8, 8), :] = x_ref[pl.ds(i * 8, 8), :] * 3.0 + c
            return c + 1.0
        lax.fori_loop(0, x_ref.shape[0] // 8, body, 0.0)
    x = rand(13, (64, 128))
    ref = x * 3 + np.repeat(np.arange(8, dtype=np.float32), 8)[:, None]
    return call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x), ref, 1e-6


@kernel
def while_and_cond():
    def k(x_ref, o_ref):
        def cond_fn(c):
            return c[0] < 5

        def body(c):
            return c[0] + 1, c[1] * 1.5
        _, v = lax.while_loop(cond_fn, body, (0, x_ref[...]))
        o_ref[...] = lax.cond(v[0, 0] > 0, lambda a: a + 1.0, lambda a: a - 1.0, v)
    x = np.abs(rand(14, (8, 128))) + 0.1
    return call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x), x * 1.5 ** 5 + 1, 1e-4


@kernel
def elementwise_zoo():
    def k(x_ref, n_ref, o_ref, s_ref):
        x = x_ref[...]
        y = jnp.tanh(x) + jax.nn.sigmoid(x) + jnp.sqrt(jnp.abs(x)) + lax.rsqrt(jnp.abs(x) + 1.0)
        y = y + x ** 3 + jnp.log(jnp.abs(x) + 1.0) + jnp.minimum(x, 0.5) - (-x)
        n = n_ref[...]
        y = jnp.where(n > 2, y, y.T)
        o_ref[...] = y + lax.rem(n, 3).astype(jnp.float32) + lax.div(n, 2).astype(jnp.float32)
        s_ref[...] = jnp.sum(x, axis=0, keepdims=True)
    x = rand(15, (128, 128))
    n = np.random.RandomState(16).randint(0, 6, (128, 128)).astype(np.int32)
    y = (np.tanh(x) + 1 / (1 + np.exp(-x)) + np.sqrt(np.abs(x)) + 1 / np.sqrt(np.abs(x) + 1)
         + x ** 3 + np.log(np.abs(x) + 1) + np.minimum(x, 0.5) + x)
    y = np.where(n > 2, y, y.T) + (n % 3) + (n // 2)
    f = call(k, out_shape=(jax.ShapeDtypeStruct(x.shape, x.dtype),
                           jax.ShapeDtypeStruct((1, 128), x.dtype)))
    out = f(x, n)
    return np.concatenate([np.asarray(out[0]), np.asarray(out[1])]), \
        np.concatenate([y, x.sum(0, keepdims=True)]), 1e-3


@kernel
def strided_views_multiple_of():
    def k(x_ref, o_ref):
        i = pl.multiple_of(pl.program_id(0) * 8, 8)
        o_ref[...] = x_ref[pl.ds(0, 8, stride=2), :] + x_ref.at[pl.ds(16, 16)][pl.ds(i, 8), :]
    x = rand(17, (32, 128))
    spec = pl.BlockSpec((32, 128), lambda i: (0, 0))
    f = call(k, out_shape=jax.ShapeDtypeStruct((16, 128), x.dtype), grid=(2,), in_specs=[spec],
             out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    ref = np.concatenate([x[0:16:2] + x[16:24], x[0:16:2] + x[24:32]])
    return f(x), ref, 1e-6


@kernel
def bool_int8_and_smem_scalars():
    def k(m_ref, x_ref, o_ref, s_ref):
        m = m_ref[...]
        v = jnp.where(m, x_ref[...].astype(jnp.float32), -1.0)
        o_ref[...] = v
        s_ref[0] = jnp.sum(v)
        s_ref[1] = v[0, 0] + v[7, 127]
    m = np.random.RandomState(18).rand(8, 128) > 0.5
    x = np.random.RandomState(19).randint(-100, 100, (8, 128)).astype(np.int8)
    f = call(k, out_shape=(jax.ShapeDtypeStruct((8, 128), jnp.float32),
                           jax.ShapeDtypeStruct((2,), jnp.float32)),
             out_specs=(pl.BlockSpec(memory_space=pltpu.VMEM),
                        pl.BlockSpec(memory_space=pltpu.SMEM)))
    v, s = f(m, x)
    ref = np.where(m, x.astype(np.float32), -1.0)
    return (np.concatenate([np.asarray(v).ravel(), np.asarray(s)]),
            np.concatenate([ref.ravel(), [ref.sum(), ref[0, 0] + ref[7, 127]]]), 1e-3)


@kernel
def dma_hbm_double_buffered():
    n = 4

    def k(x_hbm, o_ref, buf, sem):
        i = pl.program_id(0)
        slot = i % 2

        def copy(j, s):
            return pltpu.make_async_copy(x_hbm.at[pl.ds(j * 8, 8)], buf.at[s], sem.at[s])

        @pl.when(i == 0)
        def _():
            copy(0, 0).start()

        @pl.when(i + 1 < n)
        def _():
            copy(i + 1, 1 - slot).start()
        copy(i, slot).wait()
        o_ref[...] = buf[slot] * 2.0
    x = rand(20, (n * 8, 128))
    f = call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(n,),
             in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
             out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
             scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                             pltpu.SemaphoreType.DMA((2,))])
    return f(x), 2 * x, 1e-6


@kernel
def dma_hbm_to_hbm_rows():
    def k(x_hbm, o_hbm, sem):
        rows = pl.ds(pl.program_id(0) * 8, 8)
        c = pltpu.make_async_copy(x_hbm.at[rows], o_hbm.at[rows], sem)
        c.start()
        c.wait()
    x = rand(21, (16, 128))
    f = call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
             in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
             out_specs=pl.BlockSpec(memory_space=pl.ANY),
             scratch_shapes=[pltpu.SemaphoreType.DMA])
    return f(x), x, 0.0


@kernel
def semaphore_signal_wait_read():
    def k(x_ref, o_ref, sem):
        SEMAPHORES.semaphore_signal(sem.at[1], 3)
        SEMAPHORES.semaphore_wait(sem.at[1], 3)
        SEMAPHORES.semaphore_signal(sem.at[0], 2)
        read = SEMAPHORES.semaphore_read
        seen = read(sem.at[0]) * 10 + read(sem.at[1])
        SEMAPHORES.semaphore_wait(sem.at[0], 2)
        o_ref[...] = x_ref[...] + seen.astype(jnp.float32)
    x = rand(22, (8, 128))
    f = call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
             scratch_shapes=[pltpu.SemaphoreType.REGULAR((2,))])
    return f(x), x + 20.0, 1e-6


@kernel
def roll_static_dynamic_strided():
    def k(x_ref, o_ref):
        v = x_ref[...]
        shift = pl.program_id(0) + 5
        o_ref[0] = pltpu.roll(v, 3, 1)
        o_ref[1] = pltpu.roll(v, shift, 0)
        o_ref[2] = pltpu.roll(v, 1, 1, stride=2, stride_axis=0)
    x = rand(23, (8, 128))
    spec = pl.BlockSpec((8, 128), lambda i: (0, 0))
    f = call(k, out_shape=jax.ShapeDtypeStruct((3, 8, 128), x.dtype), grid=(1,),
             in_specs=[spec], out_specs=pl.BlockSpec((3, 8, 128), lambda i: (0, 0, 0)))
    strided = np.stack([np.roll(x[r], 1 + 2 * r) for r in range(8)])
    return f(x), np.stack([np.roll(x, 3, 1), np.roll(x, 5, 0), strided]), 0.0


@kernel
def bitcast_same_width_and_packing():
    def k(x_ref, i_ref, o_ref, p_ref):
        o_ref[...] = pltpu.bitcast(x_ref[...], jnp.int32)
        p_ref[...] = pltpu.bitcast(i_ref[...], jnp.int16)
    x = rand(24, (8, 128))
    i = np.random.RandomState(25).randint(-2**31, 2**31 - 1, (16, 128)).astype(np.int32)
    f = call(k, out_shape=(jax.ShapeDtypeStruct((8, 128), jnp.int32),
                           jax.ShapeDtypeStruct((32, 128), jnp.int16)))
    same, packed = f(x, i)
    # (an int32 of row r holds rows 2r (low half) and 2r + 1 (high half) of int16s)
    want = i.view(np.int16).reshape(16, 128, 2).transpose(0, 2, 1).reshape(32, 128)
    ok = [np.array_equal(np.asarray(same), x.view(np.int32)),
          np.array_equal(np.asarray(packed), want)]
    return np.array(ok, np.float32), np.ones(2, np.float32), 0.0


@kernel
def prng_seeded_bits():
    def k(a_ref, b_ref, c_ref):
        pltpu.prng_seed(3, pl.program_id(0))
        a_ref[...] = pltpu.prng_random_bits((8, 128))
        pltpu.prng_seed(3, pl.program_id(0))
        b_ref[...] = pltpu.prng_random_bits((8, 128))
        c_ref[...] = pltpu.prng_random_bits((8, 128))
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    shape = jax.ShapeDtypeStruct((16, 128), jnp.int32)
    f = call(k, out_shape=(shape, shape, shape), grid=(2,), out_specs=(spec, spec, spec))
    a, b, c = (np.asarray(r) for r in f())
    ok = [np.array_equal(a, b),                                # a seed replays its bits
          np.mean(a[:8] != a[8:]) > 0.9,                       # programs seed differently
          np.mean(a != c) > 0.9,                               # draws advance the state
          abs(np.mean(a & 1) - 0.5) < 0.1]                     # bits look random
    return np.array(ok, np.float32), np.ones(4, np.float32), 0.0


@kernel
def emit_pipeline_matmul_hbm():
    b = 128

    def inner(x_ref, y_ref, z_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            z_ref[...] = jnp.zeros_like(z_ref)
        z_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    def k(x_hbm, y_hbm, o_hbm):
        pltpu.emit_pipeline(
            inner, grid=(2, 2, 2),
            in_specs=[pl.BlockSpec((b, b), lambda i, j, k: (i, k)),
                      pl.BlockSpec((b, b), lambda i, j, k: (k, j))],
            out_specs=pl.BlockSpec((b, b), lambda i, j, k: (i, j)))(x_hbm, y_hbm, o_hbm)
    x, y = rand(26, (256, 256)), rand(27, (256, 256))
    f = call(k, out_shape=jax.ShapeDtypeStruct((256, 256), jnp.float32),
             in_specs=[pl.BlockSpec(memory_space=pl.ANY)] * 2,
             out_specs=pl.BlockSpec(memory_space=pl.ANY))
    ref = x @ y
    return f(x, y), ref, 1e-2 * np.abs(ref).max()  # (f32 dots may take bf16 passes)


@kernel
def argmax_run_state_pow():
    def k(x_ref, e_ref, o_ref, i_ref):
        def body(refs):
            acc, = refs
            acc[...] = acc[...] * 2.0
        acc, = pl.run_state(body)((x_ref[...],))
        o_ref[...] = lax.pow(jnp.abs(acc) + 1.0, e_ref[...]) + lax.pow(2.0, e_ref[...])
        i_ref[...] = jnp.argmax(x_ref[...], axis=1).reshape(1, 8)
    x = rand(20, (8, 128))
    e = np.random.RandomState(21).randint(0, 4, (8, 128)).astype(np.int32)
    f = call(k, out_shape=(jax.ShapeDtypeStruct((8, 128), jnp.float32),
                           jax.ShapeDtypeStruct((1, 8), jnp.int32)))
    o, i = f(x, e)
    ref = (np.abs(2 * x) + 1) ** e + 2.0 ** e
    out = np.concatenate([np.asarray(o).ravel() / np.maximum(ref.ravel(), 1),
                          np.asarray(i, np.float32).ravel()])
    return out, np.concatenate([ref.ravel() / np.maximum(ref.ravel(), 1),
                                np.argmax(x, axis=1).astype(np.float32)]), 1e-5


def program(fn, *args):
    """``fn`` (a function making several pallas_calls) jitted and run; with --lower-only,
    lowered for TPU instead."""
    if OPTS.lower_only:
        text = jax.jit(fn).trace(*args).lower(lowering_platforms=("tpu",)).as_text()
        raise Lowered(f"{text.count('tpu_custom_call')} tpu_custom_call, {len(text)} chars")
    return jax.jit(fn)(*args)


def _async_copy_pair(space):
    """JAX's async-copy pattern: one call starts a DMA and returns its semaphore (a result
    in semaphore memory) and its destination (``space``); a second call waits for it."""
    def start_kernel(x_ref, aliased_x_ref, o_ref, sem):
        del aliased_x_ref
        pltpu.make_async_copy(x_ref, o_ref, sem).start()

    def done_kernel(x_ref, o_ref, sem, aliased_o_ref):
        del aliased_o_ref
        pltpu.make_async_copy(x_ref, o_ref, sem).wait()

    def f(x):
        x, out, sem = pl.pallas_call(
            start_kernel, interpret=INTERPRET,
            out_shape=(jax.ShapeDtypeStruct(x.shape, x.dtype), space(x.shape, x.dtype),
                       pltpu.SemaphoreType.DMA(())),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=(pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=space),
                       pl.BlockSpec(memory_space=pltpu.SEMAPHORE)),
            input_output_aliases={0: 0})(x)
        return pl.pallas_call(
            done_kernel, out_shape=space(x.shape, x.dtype), interpret=INTERPRET,
            in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=space),
                      pl.BlockSpec(memory_space=pltpu.SEMAPHORE)],
            out_specs=pl.BlockSpec(memory_space=space), input_output_aliases={1: 0})(
                x, out, sem)
    return f


@kernel
def async_copy_semaphore_results_any():
    x = rand(40, (8, 128))
    return program(_async_copy_pair(pl.ANY), x), x, 0.0


@kernel
def async_copy_semaphore_results_vmem():
    x = rand(41, (8, 128))
    return program(_async_copy_pair(pltpu.VMEM), x), x, 0.0


@kernel
def sync_copy_into_vmem_smem_hbm_results():
    def k(x_ref, v_ref, s_ref, h_ref):
        pltpu.sync_copy(x_ref, v_ref)
        pltpu.sync_copy(x_ref, s_ref)
        pltpu.sync_copy(x_ref, h_ref)
    x = rand(42, (8, 128))
    spaces = (pltpu.VMEM, pltpu.SMEM, pltpu.HBM)
    f = call(k, out_shape=tuple(m(x.shape, x.dtype) for m in spaces),
             in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
             out_specs=tuple(pl.BlockSpec(memory_space=m) for m in spaces))
    return jnp.stack(f(x)), np.stack([x] * 3), 0.0


@kernel
def kernels_closing_over_run_state_refs():
    def f(x):
        def body(refs):
            x_ref, y_ref = refs

            def start_kernel(sem):
                pltpu.make_async_copy(x_ref, y_ref, sem).start()

            def done_kernel(sem):
                pltpu.make_async_copy(x_ref, y_ref, sem).wait()
            sem = pl.pallas_call(start_kernel, out_shape=pltpu.SemaphoreType.DMA(()),
                                 out_specs=pl.BlockSpec(memory_space=pltpu.SEMAPHORE),
                                 interpret=INTERPRET)()
            pl.pallas_call(done_kernel, out_shape=(), interpret=INTERPRET,
                           in_specs=[pl.BlockSpec(memory_space=pltpu.SEMAPHORE)])(sem)
        return pl.run_state(body)((x, jnp.zeros_like(x)))[1]
    x = rand(43, (8, 128))
    return program(f, x), x, 0.0


def _masked_attention_and_grads(q, k, v, keep, w):
    """Softmax attention (no scaling, as splash's) over ``keep`` and the gradients of
    ``sum(out * w)`` with respect to q, k and v, in float64 NumPy."""
    q, k, v, w = (np.asarray(a, np.float64) for a in (q, k, v, w))
    s = np.where(keep, np.einsum("hqd,hkd->hqk", q, k), -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = np.einsum("hqd,hkd->hqk", w, v)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return (np.einsum("hqk,hkd->hqd", p, v), np.einsum("hqk,hkd->hqd", ds, k),
            np.einsum("hqk,hqd->hkd", ds, q), np.einsum("hqk,hqd->hkd", p, w))


@kernel
def splash_attention_fwd_bwd():
    """The ops library's splash attention (two heads, causal, two segments): its output and
    the gradients of a weighted sum of it, each scaled by the reference's largest value."""
    if OPTS.jax:
        from jax.experimental.pallas.ops.tpu.splash_attention import (
            splash_attention_kernel as sk, splash_attention_mask as sm)
    else:
        from plax.experimental.pallas.ops.tpu.splash_attention import (
            splash_attention_kernel as sk, splash_attention_mask as sm)
    h, n, d = 2, 512, 128
    attend = sk.make_splash_mha_single_device(
        sm.MultiHeadMask([sm.CausalMask((n, n))] * h), block_sizes=sk.BlockSizes.get_default(),
        interpret=INTERPRET)
    q, k_, v, w = (rand(50 + i, (h, n, d), scale=0.3 if i < 2 else 1.0) for i in range(4))
    ids = np.repeat(np.arange(2, dtype=np.int32), n // 2)
    segments = sk.SegmentIds(jnp.asarray(ids), jnp.asarray(ids))

    def out_and_grads(q, k_, v, w):
        out, pullback = jax.vjp(lambda q, k_, v: attend(q, k_, v, segments), q, k_, v)
        return (out, *pullback(w))
    backend = jax.default_backend
    if OPTS.lower_only and not OPTS.jax:  # (plax's splash interprets itself off a TPU)
        jax.default_backend = lambda: "tpu"
    try:
        got = program(out_and_grads, q, k_, v, w)
    finally:
        jax.default_backend = backend
    keep = np.tril(np.ones((n, n), bool)) & (ids[:, None] == ids[None, :])
    want = _masked_attention_and_grads(q, k_, v, keep, w)
    scales = [float(np.max(np.abs(r))) for r in want]
    flat = lambda parts: np.concatenate([np.ravel(np.asarray(p, np.float64)) / c
                                         for p, c in zip(parts, scales)])
    return flat(got), flat(want), 3e-2


@kernel
def int4_int8_casts():
    def k(x_ref, o_ref):
        narrow = lax.convert_element_type(x_ref[...], jnp.int4)
        o_ref[...] = lax.convert_element_type(narrow, jnp.int32)
    x = (np.arange(128 * 256) % 15 - 7).astype(np.int8).reshape(128, 256)
    f = call(k, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.int32))
    return f(x), x.astype(np.int32), 0.0


def main():
    backend = jax.default_backend()
    print(f"# {'jax' if OPTS.jax else 'plax'} on {backend} ({jax.devices()[0].device_kind}), "
          f"interpret={INTERPRET}")
    names = OPTS.only.split(",") if OPTS.only else list(KERNELS)
    failed = 0
    for name in names:
        try:
            out, ref, tol = KERNELS[name]()
            out = np.asarray(out, np.float32)
            ref = np.asarray(ref, np.float32)
            err = float(np.max(np.abs(out - ref))) if out.size else 0.0
            ok = out.shape == ref.shape and err <= tol
            print(f"{'PASS' if ok else 'FAIL'} {name}: max |err| {err:.3g} (tol {tol:.3g})"
                  + ("" if out.shape == ref.shape else f" shape {out.shape} != {ref.shape}"))
            failed += not ok
        except Lowered as e:
            print(f"LOWERED {name}: {e}")
        except Exception as e:  # (each kernel on its own: report and go on)
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {str(e)[:2000]}")
            traceback.print_exc(limit=-3, file=sys.stdout)
        sys.stdout.flush()
    print(f"# {len(names) - failed}/{len(names)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
