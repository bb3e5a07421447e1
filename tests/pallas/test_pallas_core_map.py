"""``pl.core_map`` / ``pl.kernel`` over a TensorCore mesh, ``pltpu.with_memory_space_constraint``
and ``CompilerParams(has_side_effects=...)``: interpret-mode runs on the CPU, and the
``tpu_custom_call`` lowered for TPU on the CPU, whose backend configs and attributes are the
ones JAX 0.10.2 writes for the same programs (``lowering_platforms=("tpu",)``)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax.experimental.pallas import tpu_sc as plsc
from plax.pallas import mosaic_bindings
from tests.pallas.test_mosaic_memory_spaces import configs

needs_mosaic = pytest.mark.skipif(not mosaic_bindings.available(),
                                  reason="jaxlib without the Mosaic TPU bindings")
X = np.arange(1024, dtype=np.float32).reshape(8, 128)
MESH = pltpu.create_tensorcore_mesh("core", num_cores=1)


def copy_through_refs(space, interpret):
    def f(x):
        x_ref = plax.new_ref(x, memory_space=space)
        y_ref = plax.new_ref(pl.empty_like(x), memory_space=space)
        assert plax.typeof(x_ref).memory_space == space

        @pl.core_map(mesh=MESH, interpret=interpret)
        def _():
            if plax.typeof(x_ref).memory_space is pltpu.VMEM:
                y_ref[...] = x_ref[...] + 1
            else:
                pltpu.sync_copy(x_ref, y_ref)
        return y_ref[...]
    return f


@pytest.mark.parametrize("space", [pltpu.VMEM, pltpu.SMEM, pltpu.HBM, pl.ANY])
def test_core_map_updates_the_references_it_closes_over(space):
    out = plax.jit(copy_through_refs(space, True))(X)
    np.testing.assert_array_equal(out, X + 1 if space is pltpu.VMEM else X)


def test_core_map_smem_writes_and_dma():
    np.testing.assert_array_equal(plax.jit(smem_then_dma(True, wait=True))(), np.arange(8))


def test_kernel_is_the_functional_form():
    @pl.kernel(out_type=plax.ShapeDtypeStruct((8, 128), jnp.float32), mesh=MESH,
               interpret=True)
    def double(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2
    np.testing.assert_array_equal(plax.jit(double)(X), X * 2)


def test_tensorcore_mesh():
    assert MESH.shape == {"core": 1} and MESH.default_memory_space is pl.ANY
    with pytest.raises(ValueError, match="cannot specify both devices and num_cores"):
        pltpu.create_tensorcore_mesh("core", devices=[None], num_cores=1)


def _lowered(f, *args) -> str:
    return plax.jit(f).trace(*args).lower(lowering_platforms=("tpu",)).as_text()


def _signature(module: str) -> str:
    return next(line for line in module.splitlines() if "func.func @" in line)


@needs_mosaic
@pytest.mark.parametrize("space, color, window", [
    (pltpu.VMEM, 1, "{transform_indices = #map}"), (pltpu.SMEM, None, "{transform_indices = #map}"),
    (pltpu.HBM, 0, "{}"), (pl.ANY, None, "{}")])
def test_core_map_lowers_as_jax_discharges_it(space, color, window):
    # JAX 0.10.2: operands x and y (an AllocateBuffer), one result, y's, aliased to it;
    # the kernel takes the core index, both operands' refs and the result's, unpipelined
    text = _lowered(copy_through_refs(space, False), X)
    (cfg,) = configs(copy_through_refs(space, False), X)
    assert text.count("custom_call @AllocateBuffer(") == 1 and "broadcast_in_dim" not in text
    assert text.count("stablehlo.output_operand_alias") == 1
    assert ("output_tuple_indices = [], operand_index = 1, operand_tuple_indices = []"
            in text)
    want = None if color is None else [{"operand_index": 0, "color": color},
                                       {"operand_index": 1, "color": color}]
    assert cfg.get("input_memory_space_colors") == want
    out = {pltpu.VMEM: [{"color": 1}], pltpu.SMEM: [{"color": 4}], pltpu.HBM: [{"color": 0}]}
    assert cfg.get("output_memory_space_colors") == out.get(space)
    sig = _signature(cfg["module"])
    assert sig.count("memref<8x128xf32") == 3 and "%arg4" not in sig
    assert f"window_params = [{window}, {window}, {window}]" in sig
    assert "dimension_semantics = [#tpu.dimension_semantics<parallel>]" in sig
    assert "iteration_bounds = array<i64: 1>" in sig and "@transform_" not in cfg["module"]


def smem_then_dma(interpret, wait=False):
    """Three core_maps: SMEM writes, then a DMA of them started (and, with ``wait``, a third
    waiting for it)."""
    kernel = pl.core_map(mesh=MESH, interpret=interpret)

    def f():
        y_ref = pl.empty_ref_like(pltpu.SMEM((8,), jnp.int32))
        out_ref = pl.empty_ref_like(pltpu.HBM((8,), jnp.int32))
        sem = pl.empty_ref_like(pltpu.SemaphoreType.DMA(()))

        @kernel
        def _():
            for i in range(8):
                y_ref[i] = i

        @kernel
        def _():
            pltpu.make_async_copy(y_ref, out_ref, sem).start()

        if wait:
            @kernel
            def _():
                pltpu.make_async_copy(y_ref, out_ref, sem).wait()
        return out_ref[...]
    return f


@needs_mosaic
def test_core_map_operands_in_first_use_order_results_only_the_written():
    first, dma = configs(smem_then_dma(False))
    # the first kernel writes its one operand; the second reads y (SMEM) and writes the
    # HBM output and the semaphore: its results are those two, coloured HBM and semaphore
    assert first["output_memory_space_colors"] == [{"color": 4}]
    assert dma["output_memory_space_colors"] == [{"color": 0, "shape_index": [0]},
                                                 {"color": 2, "shape_index": [1]}]
    assert dma["input_memory_space_colors"] == [{"operand_index": 1, "color": 0}]
    sig = _signature(dma["module"])
    assert ("%arg1: memref<8xi32, #tpu.memory_space<smem>>, "
            "%arg2: memref<8xi32, #tpu.memory_space<hbm>>, "
            "%arg3: memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>, "
            "%arg4: memref<8xi32, #tpu.memory_space<hbm>>, "
            "%arg5: memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>") in sig
    assert "window_params = [{transform_indices = #map}, {}, {}, {}, {}]" in sig
    text = _lowered(smem_then_dma(False))
    assert text.count("custom_call @AllocateBuffer(") == 3 and "stablehlo.constant" not in text
    aliases = "output_tuple_indices = [0], operand_index = 1, operand_tuple_indices = []>, " \
              "#stablehlo.output_operand_alias<output_tuple_indices = [1], operand_index = 2"
    assert aliases in text
    np.testing.assert_array_equal(plax.jit(smem_then_dma(True))(), np.arange(8))


@needs_mosaic
@pytest.mark.parametrize("space, color", [
    (pltpu.HBM, 0), (pltpu.VMEM, 1), (pltpu.SMEM, 4), (pltpu.SEMAPHORE, 2)])
def test_kernel_lowers_without_aliases(space, color):
    # pl.kernel is JAX's mpmd_map: the inputs as operands, fresh results, nothing aliased
    f = pl.kernel(_copy, out_type=space((8, 128), jnp.int32), mesh=MESH)
    xi = X.astype(np.int32)
    text = _lowered(f, xi)
    (cfg,) = configs(f, xi)
    assert "output_operand_alias" not in text and "AllocateBuffer" not in text
    assert cfg["output_memory_space_colors"] == [{"color": color}]
    assert "input_memory_space_colors" not in cfg
    window = "{}" if space in (pltpu.HBM, pltpu.SEMAPHORE) else "{transform_indices = #map}"
    assert f"window_params = [{{}}, {window}]" in _signature(cfg["module"])


def test_core_map_refuses_dimension_semantics():
    with pytest.raises(ValueError, match="dimension_semantics must be None for TensorCoreMesh"):
        pl.core_map(MESH, compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel",)))


def test_with_memory_space_constraint_types_the_value():
    def f(x):
        y = pltpu.with_memory_space_constraint(x, memory_space=pltpu.VMEM)
        assert plax.typeof(y).memory_space is pltpu.VMEM
        return y
    assert "f32<vmem>[8,128]" in str(plax.make_jaxpr(f)(X))
    np.testing.assert_array_equal(plax.jit(f)(X), X)
    assert plax.typeof(X).memory_space is plax.memory.Space.Device
    assert pltpu.with_memory_space_constraint(X, pl.ANY) is X
    with pytest.raises(ValueError, match="Cannot eagerly run with_memory_space_constraint"):
        pltpu.with_memory_space_constraint(jnp.asarray(X), pltpu.VMEM)
    with pytest.raises(NotImplementedError, match="only supports HBM, VMEM and SMEM"):
        pltpu.with_memory_space_constraint(X, pltpu.CMEM)


def _copy(x_ref, y_ref):
    pltpu.sync_copy(x_ref, y_ref)


@needs_mosaic
@pytest.mark.parametrize("space, color", [
    (pltpu.VMEM, 1), (pltpu.SMEM, None), (pltpu.HBM, 0)])
def test_a_constrained_operand_is_coloured(space, color):
    def f(x):
        x = pltpu.with_memory_space_constraint(x, memory_space=space)
        return pl.pallas_call(_copy, out_shape=x, in_specs=[pl.BlockSpec(memory_space=space)],
                              out_specs=pl.BlockSpec(memory_space=pl.ANY))(x)
    (cfg,) = configs(f, X)
    want = None if color is None else [{"operand_index": 0, "color": color}]
    assert cfg.get("input_memory_space_colors") == want
    assert "output_memory_space_colors" not in cfg


@needs_mosaic
@pytest.mark.parametrize("effect, marks", [
    (pltpu.SideEffectType.PURE, (False, False)),
    (pltpu.SideEffectType.SIDE_EFFECTING, (True, False)),
    (pltpu.SideEffectType.DATAFLOW_SIDE_EFFECTING, (True, True)), (True, (True, False))])
def test_an_unused_kernel_stays_with_its_side_effect_level(effect, marks):
    def f(x):
        pl.pallas_call(_copy, out_shape=plax.ShapeDtypeStruct(x.shape, x.dtype),
                       compiler_params=pltpu.CompilerParams(has_side_effects=effect))(x)
        return x
    text = plax.jit(f).trace(X[:8, :8]).lower(lowering_platforms=("tpu",)).as_text()
    assert text.count("tpu_custom_call") == 1
    assert ("has_side_effect = true" in text, "xla_allow_dce_side_effecting_op" in text) \
        == marks


def test_an_invalid_side_effect_type_is_refused():
    def f(x):
        return pl.pallas_call(_copy, out_shape=plax.ShapeDtypeStruct(x.shape, x.dtype),
                              compiler_params=pltpu.CompilerParams(has_side_effects="no"))(x)
    with pytest.raises(ValueError, match="Invalid side effect type: no"):
        plax.jit(f).trace(X).lower(lowering_platforms=("tpu",))


def test_sparse_core_names_load_and_refuse_without_sparse_cores():
    assert {"VectorSubcoreMesh", "ScalarSubcoreMesh", "get_sparse_core_info"} <= set(dir(plsc))
    assert [c.value for c in pltpu.CoreType] == ["tc", "sc_scalar_subcore", "sc_vector_subcore"]
    with pytest.raises(ValueError, match="Unsupported TPU device kind"):
        plsc.ScalarSubcoreMesh(axis_name="x", num_cores=1)


def copy_in_run_state(interpret, pipelined=False):
    """A core_map over the references of an enclosing run_state (JAX's documented pattern):
    it copies x into y, or adds one to x block by block with emit_pipeline; z is unused."""
    def f(x):
        def inner(refs):
            x_ref, y_ref, z_ref = refs

            @pl.core_map(MESH, interpret=interpret)
            def _():
                if not pipelined:
                    pltpu.sync_copy(x_ref, y_ref)
                    return

                def add_one(x_vmem, y_vmem):
                    y_vmem[...] = x_vmem[...] + 1
                spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
                pltpu.emit_pipeline(add_one, grid=(x.shape[0] // 8,), in_specs=[spec],
                                    out_specs=[spec])(x_ref, y_ref)
        _, y, _ = pl.run_state(inner)((x, jnp.zeros_like(x), x))
        return y
    return f


def test_core_map_over_an_enclosing_run_states_references():
    x2 = np.concatenate([X, -X])
    np.testing.assert_array_equal(plax.jit(copy_in_run_state(True))(X), X)
    np.testing.assert_array_equal(plax.jit(copy_in_run_state(True, True))(x2), x2 + 1)


@needs_mosaic
def test_core_map_over_run_state_references_lowers_as_jax_discharges_it():
    # JAX 0.10.2: one kernel whose operands are x and y (z unused), y aliased to its result
    text = _lowered(copy_in_run_state(False), X)
    assert text.count("custom_call @tpu_custom_call(") == 1
    assert ("output_operand_alias<output_tuple_indices = [], operand_index = 1, "
            "operand_tuple_indices = []>") in text
    (cfg,) = configs(copy_in_run_state(False), X)
    assert ("%arg1: memref<8x128xf32, #tpu.memory_space<any>>, "
            "%arg2: memref<8x128xf32, #tpu.memory_space<any>>") in _signature(cfg["module"])
