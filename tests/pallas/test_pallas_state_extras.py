"""Pinned buffers through a ``pallas_call`` (``pin``/``unpin``, aliased), ``pltpu.trace_value``,
and what a ``core_map`` / ``pl.kernel`` body may capture (scalars, as SMEM operands; not arrays)
and ask (``lax.axis_index`` of the mesh axis; a semaphore signal to another core): run in
interpret mode on the CPU, and lowered for TPU on the CPU as JAX 0.10.2 lowers them."""
import functools
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax._src.state.primitives import pin, unpin
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax.pallas import mosaic_bindings
from tests.pallas.test_mosaic_memory_spaces import configs

needs_mosaic = pytest.mark.skipif(not mosaic_bindings.available(),
                                  reason="jaxlib without the Mosaic TPU bindings")
ANY = pl.BlockSpec(memory_space=pl.ANY)
MESH = pltpu.create_tensorcore_mesh("x", num_cores=1)


def pinned_round_trip(aliased=True, interpret=True):
    def f(x):
        p = pin(x)
        p = pl.pallas_call(lambda *_: None, out_shape=p, in_specs=[ANY], out_specs=ANY,
                           input_output_aliases={0: 0} if aliased else {},
                           interpret=interpret)(p)
        return unpin(p)
    return f


def test_a_pinned_buffer_passes_through_an_aliased_kernel():
    x = np.arange(3, dtype=np.float32)
    f = pinned_round_trip()
    assert "LinVal{f32[3]} = pallas_call" in str(plax.make_jaxpr(f)(x))
    np.testing.assert_array_equal(plax.jit(f)(x), x)


def test_a_pinned_buffer_must_be_aliased():
    with pytest.raises(ValueError, match=r"input pinned buffers without input_output_aliases:"
                                         r"\{0\}"):
        plax.jit(pinned_round_trip(aliased=False))(np.arange(3, dtype=np.float32))


@needs_mosaic
def test_a_pinned_kernel_operand_is_a_memref():
    f = pinned_round_trip(interpret=False)
    text = plax.jit(f).trace(np.zeros(3, np.float32)).lower(
        lowering_platforms=("tpu",)).as_text()
    call = [line for line in text.splitlines() if "tpu_custom_call" in line]
    assert len(call) == 1 and call[0].endswith("(memref<3xf32>) -> memref<3xf32>")
    assert "output_operand_aliases" in call[0]


def traced_kernel(x_ref, s_ref, o_ref):
    pltpu.trace_value("constant_value", jnp.float32(42.42))
    scale = s_ref[0]
    o_ref[...] = x_ref[...] + scale.astype(jnp.float32)
    pltpu.trace_value("scale_value", scale)


def traced(interpret):
    return pl.pallas_call(
        traced_kernel, out_shape=plax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec((8, 128), memory_space=pltpu.VMEM),
                  pl.BlockSpec((1,), memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec((8, 128), memory_space=pltpu.VMEM),
        compiler_params=pltpu.CompilerParams(has_side_effects=True), interpret=interpret)


def test_trace_value_leaves_the_results_alone_off_a_tpu():
    x, s = np.ones((8, 128), np.float32), np.array([3], np.int32)
    np.testing.assert_array_equal(plax.jit(traced(True))(x, s), x + 3)


def test_trace_value_takes_an_int32_or_float32_scalar():
    def kernel(x_ref, o_ref, value):
        pltpu.trace_value("v", value)
        o_ref[...] = x_ref[...]
    x = np.ones((8, 128), np.float32)
    for value, match in [(jnp.zeros(2, jnp.float32), "requires a scalar value, got shape"),
                         (jnp.int16(1), "requires i32 or f32, got int16")]:
        call = pl.pallas_call(functools.partial(kernel, value=value), interpret=True,
                              out_shape=plax.ShapeDtypeStruct(x.shape, x.dtype))
        with pytest.raises(ValueError, match=match):
            call(x)


@needs_mosaic
def test_trace_value_lowers_to_tpu_trace_value():
    (cfg,) = configs(traced(False), np.ones((8, 128), np.float32), np.array([3], np.int32))
    module = cfg["module"]
    assert re.search(r'tpu.trace_value %\w+, "constant_value" : f32', module)
    assert re.search(r'tpu.trace_value %\w+, "scale_value" : i32', module)


def copy_row(x, i, interpret=True):
    @pl.kernel(out_type=plax.ShapeDtypeStruct((1, *x.shape[1:]), jnp.int32), mesh=MESH,
               interpret=interpret)
    def kernel(x_ref, out_ref):
        pltpu.sync_copy(x_ref.at[i], out_ref.at[plax.lax.axis_index("x")])
    return kernel(x)


X3 = np.arange(4 * 8 * 128, dtype=np.int32).reshape(4, 8, 128)


def test_a_kernel_may_capture_scalars():
    f = plax.jit(copy_row)
    for i in range(4):
        np.testing.assert_array_equal(f(X3, i)[0], X3[i])


@needs_mosaic
def test_a_captured_scalar_is_an_smem_operand_read_first():
    (cfg,) = configs(functools.partial(copy_row, interpret=False), X3, 2)
    module = cfg["module"]
    first = module.split("func.func @kernel")[1].splitlines()[1:4]
    assert any(re.search(r"memref.load %arg\d+\[%c0\] : memref<1xi32, "
                         r"#tpu.memory_space<smem>>", line) for line in first)
    # lax.axis_index("x") is the core's grid index
    assert re.search(r"tpu.memref_slice %arg\d+\[%arg0, ", module)


def test_a_kernel_may_not_capture_arrays():
    def f(x):
        y = jnp.zeros_like(x)

        @pl.kernel(out_type=x, mesh=MESH, interpret=True)
        def kernel(x_ref, out_ref):
            out_ref[...] = x_ref[...] + y
        return kernel(x)
    with pytest.raises(ValueError, match=r"captures non-Ref constants \[i32\[8,128\]\]"):
        plax.jit(f)(X3[0])


def test_a_core_map_that_updates_no_reference_is_refused():
    def f(x):
        @pl.core_map(MESH)
        def _():
            pass
        return x
    with pytest.raises(ValueError, match="Attempted to lower core_map without discharging"):
        plax.jit(f)(X3[0])


@needs_mosaic
def test_a_signal_to_a_core_of_the_mesh_names_its_core_id():
    def f(x):
        x_ref, y_ref = plax.new_ref(x), plax.new_ref(jnp.empty_like(x))

        @pl.core_map(MESH)
        def _():
            @functools.partial(pl.run_scoped, sem=pltpu.SemaphoreType.REGULAR)
            def _(sem):
                pl.semaphore_signal(sem, device_id={"x": 0})
                pl.semaphore_wait(sem, 1)
                pltpu.sync_copy(x_ref, y_ref)
        return y_ref[...]
    (cfg,) = configs(f, X3[0])
    assert "tpu.sem_signal %0, %c1_i32 core_id %c0_i32" in cfg["module"]
