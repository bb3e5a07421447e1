"""``pl.select_ref``: a DMA operand picked among references by a run-time index. Interpret
mode against numpy (sources, destinations and semaphores selected, nested selections, views
after a selection, indices past the last option), the errors JAX gives, and the Mosaic
lowering for TPU on the CPU (``scf.if`` on ``idx == 0``, then ``idx - 1`` over the rest, each
branch its own DMA, as JAX 0.10.2 lowers it)."""
import functools
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax.pallas import mosaic_bindings

HBM = pl.BlockSpec(memory_space=pltpu.HBM)
SMEM = pl.BlockSpec(memory_space=pltpu.SMEM)


def _gather_rows(n, interpret):
    """``n`` (8, 128) inputs copied one after another into a (8n, 128) output, each copy's
    source and semaphore picked by the loop index."""
    def kernel(*refs):
        *xs, y = refs

        def body(sem):
            @pl.loop(0, n)
            def _(i):
                pltpu.async_copy(pl.select_ref(i, *xs), y.at[pl.ds(8 * i, 8)],
                                 pl.select_ref(i, sem.at[0], sem.at[1])).wait()
        pl.run_scoped(body, pltpu.SemaphoreType.DMA(2))
    return pl.pallas_call(kernel, in_specs=[HBM] * n, out_specs=HBM, interpret=interpret,
                          out_shape=plax.ShapeDtypeStruct((8 * n, 128), jnp.int32))


def _pick(interpret):
    def kernel(idx_ref, x0, x1, y):
        def body(sem):
            pltpu.async_copy(pl.select_ref(idx_ref[...], x0.at[0:8], x1), y, sem).wait()
        pl.run_scoped(body, pltpu.SemaphoreType.DMA)
    return pl.pallas_call(kernel, in_specs=[SMEM, HBM, HBM], out_specs=HBM,
                          interpret=interpret,
                          out_shape=plax.ShapeDtypeStruct((8, 128), jnp.float32))


def test_selected_sources_and_semaphores_copy_each_input():
    x = np.arange(4 * 8 * 128, dtype=np.int32).reshape(32, 128)
    np.testing.assert_array_equal(_gather_rows(4, True)(*np.split(x, 4)), x)


@pytest.mark.parametrize("idx", [0, 1, 7, -1])
def test_index_from_smem_picks_like_the_tpu_lowering(idx):
    x0 = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
    x1 = -np.ones((8, 128), np.float32)
    out = _pick(True)(jnp.array(idx, jnp.int32), x0, x1)
    # idx == 0 picks the first; any other index the last (the nested scf.if's else)
    np.testing.assert_array_equal(out, x0[:8] if idx == 0 else x1)


def test_selected_destination_and_views_after_a_nested_selection():
    def kernel(idx_ref, x, y0, y1):
        def body(sem):
            halves = [pl.select_ref(0, r.at[:, :128], r.at[:, 128:]) for r in (y0, y1)]
            dst = pl.select_ref(idx_ref[0], *halves).reshape(8, 128)
            pltpu.async_copy(x, dst, sem).wait()
        pl.run_scoped(body, pltpu.SemaphoreType.DMA)
    out_shape = [plax.ShapeDtypeStruct((8, 256), jnp.float32)] * 2
    f = pl.pallas_call(kernel, in_specs=[SMEM, HBM], out_specs=[HBM, HBM],
                       out_shape=out_shape, interpret=True)
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    for idx in (0, 1):
        y0, y1 = f(jnp.array([idx], jnp.int32), x)
        np.testing.assert_array_equal((y1 if idx else y0)[:, :128], x)


def test_select_ref_errors():
    def kernel(x, y, o):
        with pytest.raises(ValueError, match="At least two refs are required"):
            pl.select_ref(0, x)
        with pytest.raises(TypeError, match="Cannot select from Refs of different types"):
            pl.select_ref(0, x, y)
        with pytest.raises(NotImplementedError, match="ref_get with multi-ref"):
            pl.select_ref(0, x, x.at[...])[...]
        o[...] = x[...]
    pl.pallas_call(kernel, out_shape=plax.ShapeDtypeStruct((8, 128), jnp.float32),
                   interpret=True)(np.zeros((8, 128), np.float32),
                                   np.zeros((8, 256), np.float32))


@pytest.mark.skipif(not mosaic_bindings.available(),
                    reason="jaxlib without the Mosaic TPU bindings")
def test_selection_lowers_to_nested_ifs_of_dmas_as_jax():
    from tests.pallas.test_mosaic_lowering import lower
    _, _, module = lower(_pick(False), jnp.array(0, jnp.int32),
                         jnp.zeros((16, 128), jnp.float32), jnp.zeros((8, 128), jnp.float32))
    ops = re.findall(r"(arith\.cmpi \w+|scf\.if|tpu\.enqueue_dma|tpu\.wait_dma2|"
                     r"tpu\.memref_slice|\} else \{)", module)
    assert ops == ["arith.cmpi eq", "scf.if", "tpu.memref_slice", "tpu.enqueue_dma",
                   "} else {", "tpu.enqueue_dma"] * 1 + [
                   "arith.cmpi eq", "scf.if", "tpu.memref_slice", "tpu.wait_dma2",
                   "} else {", "tpu.wait_dma2"]
    x = [jnp.zeros((8, 128), jnp.int32)] * 3
    _, _, module = lower(_gather_rows(3, False), *x)
    # three sources: idx == 0, else idx - 1 == 0, else the last; inside, the semaphore's
    assert module.count("arith.subi") == 2  # (one per DMA op: start and wait)
    assert module.count("tpu.enqueue_dma") == 6 and module.count("tpu.wait_dma2") == 6
