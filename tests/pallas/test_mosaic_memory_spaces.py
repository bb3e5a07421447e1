"""Where a compiled ``pallas_call`` asks XLA to place its results and operands: the
``output_memory_space_colors`` / ``input_memory_space_colors`` of the ``tpu_custom_call``'s
backend config (an ``out_shape`` in VMEM, SMEM, HBM or semaphore memory; an input aliased to
such a result), ``pltpu.sync_copy`` as a DMA, and the collective-id rule. The expected
configs are what JAX 0.10.2 writes for the same kernels (``lowering_platforms=("tpu",)``)."""
import base64
import json
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax.pallas import mosaic_bindings
from tests.pallas.test_mosaic_tpu_lowering import tpu_ops

pytestmark = pytest.mark.skipif(not mosaic_bindings.available(),
                                reason="jaxlib without the Mosaic TPU bindings")
f32 = jnp.float32
X = np.arange(1024, dtype=np.float32).reshape(8, 128)


def configs(f, *args) -> list:
    """The backend config of each ``tpu_custom_call`` of ``f`` lowered for TPU (its Mosaic
    module, decoded, under ``"module"``)."""
    text = plax.jit(f).trace(*args).lower(lowering_platforms=("tpu",)).as_text()
    out = []
    for raw in re.findall(r'backend_config = "((?:[^"\\]|\\.)*)"', text):
        cfg = json.loads(re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)),
                                raw))["custom_call_config"]
        cfg["module"] = mosaic_bindings.read_body(base64.b64decode(cfg.pop("body")))
        out.append(cfg)
    return out


def copy_kernel(x_ref, y_ref):
    pltpu.sync_copy(x_ref, y_ref)


def copy_into(space, interpret=False):
    def f(x):
        return pl.pallas_call(copy_kernel, out_shape=space(x.shape, x.dtype),
                              in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                              out_specs=pl.BlockSpec(memory_space=space),
                              interpret=interpret)(x)
    return f


@pytest.mark.parametrize("space, colors", [
    (pltpu.VMEM, [{"color": 1}]), (pltpu.SMEM, [{"color": 4}]),
    (pltpu.HBM, [{"color": 0}]), (pl.ANY, None)])
def test_an_out_shape_in_a_memory_space_colours_the_result(space, colors):
    (cfg,) = configs(copy_into(space), X)
    assert cfg.get("output_memory_space_colors") == colors
    assert "input_memory_space_colors" not in cfg
    # sync_copy: one DMA on a scoped semaphore, as JAX lowers it (no VMEM staging)
    assert tpu_ops(cfg["module"]) == ["tpu.region", "tpu.sem_alloc", "tpu.enqueue_dma",
                                      "tpu.wait_dma2", "tpu.yield"]
    np.testing.assert_array_equal(plax.jit(copy_into(space, interpret=True))(X), X)


def test_tuple_results_are_coloured_by_shape_index():
    def k(x_ref, y_ref, z_ref):
        pltpu.sync_copy(x_ref, y_ref)
        pltpu.sync_copy(x_ref, z_ref)

    def f(x):
        return pl.pallas_call(
            k, out_shape=(pltpu.VMEM(x.shape, x.dtype), pltpu.VMEM(x.shape, x.dtype)),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=(pl.BlockSpec(memory_space=pltpu.VMEM),) * 2)(x)
    (cfg,) = configs(f, X)
    assert cfg["output_memory_space_colors"] == [{"color": 1, "shape_index": [0]},
                                                 {"color": 1, "shape_index": [1]}]


def async_copy_pair(space, interpret=False):
    """JAX's async-copy test pattern: one call starts a DMA and returns its semaphore (in
    semaphore memory) and destination, a second call waits for it."""
    def start_kernel(x_ref, aliased_x_ref, o_ref, sem):
        del aliased_x_ref
        pltpu.make_async_copy(x_ref, o_ref, sem).start()

    def done_kernel(x_ref, o_ref, sem, aliased_o_ref):
        del aliased_o_ref
        pltpu.make_async_copy(x_ref, o_ref, sem).wait()

    def f(x):
        x, out, sem = pl.pallas_call(
            start_kernel, interpret=interpret,
            out_shape=(plax.ShapeDtypeStruct(x.shape, x.dtype), space(x.shape, x.dtype),
                       pltpu.SemaphoreType.DMA(())),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=(pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=space),
                       pl.BlockSpec(memory_space=pltpu.SEMAPHORE)),
            input_output_aliases={0: 0})(x)
        return pl.pallas_call(
            done_kernel, out_shape=space(x.shape, x.dtype), interpret=interpret,
            in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=space),
                      pl.BlockSpec(memory_space=pltpu.SEMAPHORE)],
            out_specs=pl.BlockSpec(memory_space=space), input_output_aliases={1: 0})(
                x, out, sem)
    return f


@pytest.mark.parametrize("space, start_colors, done_out, done_in", [
    (pl.ANY, [{"color": 2, "shape_index": [2]}], None, None),
    (pltpu.VMEM, [{"color": 1, "shape_index": [1]}, {"color": 2, "shape_index": [2]}],
     [{"color": 1}], [{"operand_index": 1, "color": 1}])])
def test_a_semaphore_result_lives_in_semaphore_memory(space, start_colors, done_out, done_in):
    start, done = configs(async_copy_pair(space), X)
    assert start["output_memory_space_colors"] == start_colors
    assert "input_memory_space_colors" not in start
    assert done.get("output_memory_space_colors") == done_out
    assert done.get("input_memory_space_colors") == done_in
    # interpret mode: the semaphore (a 0-d array of an extended dtype) passes between calls
    np.testing.assert_array_equal(plax.jit(async_copy_pair(space, interpret=True))(X), X)


def test_collective_id_only_with_the_barrier_semaphore():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def f(x):
        return pl.pallas_call(k, out_shape=plax.ShapeDtypeStruct(x.shape, x.dtype),
                              compiler_params=pltpu.CompilerParams(collective_id=3))(x)
    with pytest.raises(ValueError, match="collective_id has to be unspecified or None"):
        configs(f, X)


def stateful_copy(interpret=False):
    """JAX's stateful async-copy pattern: kernels that close over the references of an
    enclosing ``run_state`` (they become inputs in ANY aliased to extra first outputs)."""
    def f(x):
        def body(refs):
            x_ref, y_ref = refs

            def start_kernel(sem):
                pltpu.make_async_copy(x_ref, y_ref, sem).start()

            def done_kernel(sem):
                pltpu.make_async_copy(x_ref, y_ref, sem).wait()
            sem = pl.pallas_call(start_kernel, out_shape=pltpu.SemaphoreType.DMA(()),
                                 out_specs=pl.BlockSpec(memory_space=pltpu.SEMAPHORE),
                                 interpret=interpret)()
            pl.pallas_call(done_kernel, out_shape=(), interpret=interpret,
                           in_specs=[pl.BlockSpec(memory_space=pltpu.SEMAPHORE)])(sem)
        return pl.run_state(body)((x, jnp.zeros_like(x)))[1]
    return f


def test_references_a_kernel_closes_over_become_aliased_operands():
    text = plax.jit(stateful_copy()).trace(X).lower(lowering_platforms=("tpu",)).as_text()
    aliases = ("output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices "
               "= [0], operand_index = 0, operand_tuple_indices = []>, #stablehlo.output_"
               "operand_alias<output_tuple_indices = [1], operand_index = 1, "
               "operand_tuple_indices = []>]")
    assert text.count(aliases) == 2
    start, done = configs(stateful_copy(), X)
    assert start["output_memory_space_colors"] == [{"color": 2, "shape_index": [2]}]
    signature = re.search(r"func.func @done_kernel\((.*?)\) attributes", done["module"])[1]
    assert re.findall(r"memory_space<(\w+)>", signature) == ["any", "any", "semaphore_mem",
                                                             "any", "any"]
    np.testing.assert_array_equal(plax.jit(stateful_copy(interpret=True))(X), X)


def test_a_kernel_capturing_a_value_is_refused():
    c = jnp.ones((8, 128), f32)

    def k(o_ref):
        o_ref[...] = c
    with pytest.raises(ValueError, match="captures constants"):
        plax.jit(lambda: pl.pallas_call(k, out_shape=plax.ShapeDtypeStruct((8, 128), f32),
                                        interpret=True)())()
