"""pltpu.emit_pipeline's less common forms (references already in VMEM, ...) in interpret
mode against numpy, and lowered for TPU on the CPU."""
import functools

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax.pallas import mosaic_bindings

needs_mosaic = pytest.mark.skipif(not mosaic_bindings.available(),
                                  reason="jaxlib without the Mosaic TPU bindings")


def _sds(shape, dtype=jnp.float32):
    return plax.ShapeDtypeStruct(shape, dtype)


def _lower(f, *args):
    from tests.pallas.test_mosaic_lowering import lower
    return lower(f, *args)[2]


def _vmem_window_copy(interpret):
    """A pipeline over a VMEM scratch buffer whose one block is the whole buffer."""
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

    def kernel(x_hbm, o_hbm):
        @functools.partial(pl.run_scoped, x_vmem=pltpu.VMEM((8, 512), jnp.int32),
                           o_vmem=pltpu.VMEM((8, 512), jnp.int32))
        def _(x_vmem, o_vmem):
            pltpu.sync_copy(x_hbm, x_vmem)
            spec = pl.BlockSpec((8, 512), lambda i: (0, 0), memory_space=pltpu.VMEM)
            pltpu.emit_pipeline(body, grid=(4,), in_specs=spec, out_specs=spec)(x_vmem, o_vmem)
            pltpu.sync_copy(o_vmem, o_hbm)
    return pl.pallas_call(kernel, out_shape=_sds((8, 512), jnp.int32), interpret=interpret)


def test_pipeline_over_vmem_buffers_with_a_static_window():
    x = np.arange(8 * 512, dtype=np.int32).reshape(8, 512)
    np.testing.assert_array_equal(_vmem_window_copy(True)(x), x + 1)


@needs_mosaic
def test_pipeline_over_vmem_buffers_lowers_without_dynamic_slices():
    # the block indices are static, so the window is a static slice of the buffer
    module = _lower(_vmem_window_copy(False), jnp.zeros((8, 512), jnp.int32))
    assert "scf.for" in module and "vector.load" in module
    assert "tpu.dynamic" not in module
