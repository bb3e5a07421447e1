"""pltpu (plax.experimental.pallas.tpu) in interpret mode: memory spaces, compiler
parameters and scalar prefetch, against numpy references."""
import dataclasses
import functools

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu

call = functools.partial(pl.pallas_call, interpret=True)


def _x(rows=32, cols=128):
    return np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) / 7


def test_memory_spaces_describe_buffers():
    buf = pltpu.VMEM((8, 128), jnp.float32)
    assert buf.shape == (8, 128) and buf.dtype == np.float32
    assert buf.memory_space is pltpu.VMEM is pltpu.MemorySpace.VMEM
    assert pltpu.SMEM((4,), jnp.int32).get_ref_aval().memory_space is pltpu.SMEM
    assert [m.name for m in pltpu.MemorySpace] == ["VMEM", "VMEM_SHARED", "SMEM", "CMEM",
                                                   "SEMAPHORE", "HBM"]
    assert str(pltpu.HBM) == "hbm"


def test_compiler_params_fields_and_interpret_mode_ignores_them():
    names = [f.name for f in dataclasses.fields(pltpu.CompilerParams)]
    assert names[:4] == ["dimension_semantics", "allow_input_fusion", "vmem_limit_bytes",
                         "collective_id"]
    assert "fuse_transposed_lhs_in_matmul" in names
    params = pltpu.CompilerParams(dimension_semantics=["parallel", pltpu.ARBITRARY],
                                  vmem_limit_bytes=1 << 20)
    assert params.dimension_semantics == ("parallel", pltpu.ARBITRARY)
    assert isinstance(params, pl.CompilerParams) and hash(params) == hash(params)
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.vmem_limit_bytes = 0

    def double(x_ref, o_ref):
        o_ref[...] = 2 * x_ref[...]
    spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    x = _x(16, 256)
    f = call(double, out_shape=plax.ShapeDtypeStruct(x.shape, jnp.float32), grid=(2, 2),
             in_specs=[spec], out_specs=spec, compiler_params=params)
    np.testing.assert_array_equal(f(x), 2 * x)


def _gather(idx, x, bias=False):
    """Grid step i copies row-block idx[i] of x (plus i, when ``bias``)."""
    def kernel(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + (pl.program_id(0).astype(jnp.float32) if bias else 0.0)

    def in_map(i, idx_ref):
        return idx_ref[i], 0
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(len(idx),),
        in_specs=[pl.BlockSpec((8, 128), in_map)],
        out_specs=pl.BlockSpec((8, 128), lambda i, idx_ref: (i, 0)))
    return call(kernel, out_shape=plax.ShapeDtypeStruct((8 * len(idx), 128), jnp.float32),
                grid_spec=spec,
                compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(
                    idx, x)


def test_scalar_prefetch_gather_matches_numpy():
    x = _x()
    idx = np.array([3, 0, 2, 2, 1], np.int32)
    want = np.concatenate([x[8 * j:8 * j + 8] for j in idx])
    np.testing.assert_array_equal(_gather(idx, x), want)
    np.testing.assert_array_equal(plax.jit(_gather)(idx, x), want)
    with_bias = np.concatenate([x[8 * j:8 * j + 8] + k for k, j in enumerate(idx)])
    np.testing.assert_array_equal(_gather(idx, x, bias=True), with_bias)


def test_scalar_prefetch_refs_come_first_then_inputs_outputs_scratch():
    x = _x(16)
    seen = []

    def kernel(a_ref, b_ref, x_ref, o_ref, s_ref):
        seen.append([r.aval.memory_space for r in (a_ref, b_ref, s_ref)]
                    + [a_ref.shape, b_ref.shape, x_ref.shape])
        s_ref[...] = x_ref[...]
        o_ref[...] = s_ref[...] + b_ref[0].astype(jnp.float32)
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=2, grid=(2,),
        in_specs=[pl.BlockSpec((8, 128), lambda i, a, b: (a[i], 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, a, b: (i, 0)),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])
    out = call(kernel, out_shape=plax.ShapeDtypeStruct((16, 128), jnp.float32),
               grid_spec=spec)(np.array([1, 0], np.int32), np.array([5], np.int32), x)
    np.testing.assert_array_equal(out, np.concatenate([x[8:], x[:8]]) + 5)
    assert seen == [[pltpu.SMEM, pltpu.SMEM, pltpu.VMEM, (2,), (1,), (8, 128)]]


def test_index_map_must_take_the_prefetch_refs():
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(2,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, idx: (i, 0)))
    f = call(lambda i_ref, x_ref, o_ref: None,
             out_shape=plax.ShapeDtypeStruct((16, 128), jnp.float32), grid_spec=spec)
    with pytest.raises(TypeError, match="positional argument"):
        f(np.array([0, 1], np.int32), _x(16))
    with pytest.raises(ValueError, match="scalar-prefetch operands"):
        f()
    with pytest.raises(ValueError, match="non-negative"):
        pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=-1)


def test_vmem_scratch_accumulates_over_the_grid():
    x = _x()

    def kernel(x_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)
        acc_ref[...] += x_ref[...]

        @pl.when(pl.program_id(0) == pl.num_programs(0) - 1)
        def _():
            o_ref[...] = acc_ref[...]
    f = call(kernel, out_shape=plax.ShapeDtypeStruct((8, 128), jnp.float32), grid=(4,),
             in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0), memory_space=pltpu.VMEM)],
             out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
             scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])
    np.testing.assert_allclose(f(x), x.reshape(4, 8, 128).sum(0), rtol=1e-6)


@pytest.mark.parametrize("space", [pl.ANY, pltpu.HBM])
def test_any_memory_space_passes_the_whole_array(space):
    x = _x()
    shapes = []

    def kernel(x_ref, o_ref):
        shapes.append((x_ref.shape, o_ref.shape, x_ref.aval.memory_space))
        o_ref[...] = x_ref[...] * 2
    f = call(kernel, out_shape=plax.ShapeDtypeStruct(x.shape, jnp.float32), grid=(3,),
             in_specs=[pl.BlockSpec(memory_space=space)],
             out_specs=pl.BlockSpec(memory_space=space))
    np.testing.assert_array_equal(f(x), 2 * x)
    assert shapes == [((32, 128), (32, 128), space)]


def test_smem_input_block_spec():
    x = _x()

    def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] * s_ref[0]
    f = call(kernel, out_shape=plax.ShapeDtypeStruct(x.shape, jnp.float32),
             in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                       pl.BlockSpec(memory_space=pltpu.VMEM)])
    np.testing.assert_array_equal(f(np.array([3.0], np.float32), x), 3 * x)


def test_scalar_prefetch_under_vmap_and_jvp():
    idx = np.array([2, 0], np.int32)
    xs = np.stack([_x(), _x() + 1])
    out = plax.vmap(_gather, in_axes=(None, 0))(idx, xs)
    np.testing.assert_array_equal(out, np.stack([np.concatenate([x[16:24], x[:8]])
                                                 for x in xs]))
    t = _x() + 2
    _, t_out = plax.jvp(lambda x: _gather(idx, x), (_x(),), (t,))
    np.testing.assert_array_equal(t_out, np.concatenate([t[16:24], t[:8]]))
