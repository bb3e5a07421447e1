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
    kernel = pl.core_map(mesh=MESH, interpret=True)

    @plax.jit
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

        @kernel
        def _():
            pltpu.make_async_copy(y_ref, out_ref, sem).wait()
        return out_ref[...]
    np.testing.assert_array_equal(f(), np.arange(8))


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


@needs_mosaic
@pytest.mark.parametrize("space, color", [
    (pltpu.VMEM, 1), (pltpu.SMEM, None), (pltpu.HBM, 0), (pl.ANY, None)])
def test_core_map_lowers_to_one_tpu_custom_call(space, color):
    (cfg,) = configs(copy_through_refs(space, False), X)
    want = None if color is None else [{"operand_index": 0, "color": color},
                                       {"operand_index": 1, "color": color}]
    assert cfg.get("input_memory_space_colors") == want
    assert "dimension_semantics = [#tpu.dimension_semantics<parallel>]" in cfg["module"]


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
