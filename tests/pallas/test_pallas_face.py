"""pl's helpers (loop, run_scoped, empty, debug_print, Element blocks, ...) and the GPU
extensions' names (pallas.triton, pallas.mosaic_gpu, mosaic.gpu) in interpret mode on the CPU."""
import functools

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl
from plax.experimental.mosaic import gpu as mgpu
from plax.experimental.pallas import mosaic_gpu as plmgpu
from plax.experimental.pallas import tpu as pltpu
from plax.experimental.pallas import triton as pltriton

call = functools.partial(pl.pallas_call, interpret=True)
F32 = jnp.float32


def _sds(shape, dtype=F32):
    return plax.ShapeDtypeStruct(shape, dtype)


def _rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_loop_with_and_without_carry():
    def kernel(x_ref, o_ref, s_ref):
        @pl.loop(0, 8, step=2)
        def _(i):
            o_ref[pl.ds(i, 2)] = x_ref[pl.ds(i, 2)] * 2

        s_ref[0] = pl.loop(1, 4, init_carry=jnp.float32(0))(lambda i, c: c + x_ref[i])
    x = _rand(8)
    o, s = call(kernel, out_shape=(_sds((8,)), _sds((1,))))(x)
    np.testing.assert_allclose(o, 2 * x, rtol=1e-6)
    np.testing.assert_allclose(s, [x[1:4].sum()], rtol=1e-5)


def test_run_scoped_and_with_scoped_buffers():
    def kernel(x_ref, o_ref):
        def body(tmp_ref, acc_ref):
            tmp_ref[...] = x_ref[...] + 1
            acc_ref[...] = tmp_ref[...] * 3
            return acc_ref[...].sum()
        total = pl.run_scoped(body, pltpu.VMEM((8,), F32), acc_ref=pltpu.VMEM((8,), F32))

        @pl.with_scoped(pltpu.VMEM((8,), F32))
        def twice(scale, buf_ref):
            buf_ref[...] = x_ref[...] * scale
            return buf_ref[...]
        o_ref[...] = twice(2.0) + total
    x = _rand(8)
    out = call(kernel, out_shape=_sds((8,)))(x)
    np.testing.assert_allclose(out, 2 * x + (3 * (x + 1)).sum(), rtol=1e-5)
    with pytest.raises(NotImplementedError, match="collective_axes"):
        call(lambda x_ref, o_ref: pl.run_scoped(lambda r: None, pltpu.VMEM((8,), F32),
                                                collective_axes="x"),
             out_shape=_sds((8,)))(x)


def test_empty_helpers_and_small_utilities():
    e = pl.empty((2, 3), F32)
    assert (e.shape, e.dtype) == ((2, 3), np.float32)
    tree = pl.empty_like({"a": _sds((4,)), "b": _sds((2,), jnp.int32)})
    assert tree["a"].shape == (4,) and tree["b"].dtype == np.int32
    ref = pl.empty_ref_like(pl.ANY((3,), F32))
    assert ref.shape == (3,)
    assert plax.typeof(pl.empty_ref_like(pltpu.VMEM((3,), F32))).memory_space is pltpu.VMEM
    with pytest.raises(ValueError, match="empty_ref_like does not support"):
        pl.empty_ref_like(np.zeros(3))
    assert pl.align_to(13, 8) == 16 and pl.strides_from_shape((2, 3, 4)) == (12, 4, 1)
    np.testing.assert_allclose(pl.reciprocal(jnp.array([2.0, 4.0])), [0.5, 0.25])
    assert pl.broadcast_to(jnp.ones(3), (2, 3)).shape == (2, 3)


def test_debug_print_inside_a_kernel(capsys):
    def kernel(x_ref, o_ref):
        pl.debug_print("block {}", pl.program_id(0))
        o_ref[...] = x_ref[...]
    spec = pl.BlockSpec((4,), lambda i: (i,))
    call(kernel, out_shape=_sds((8,)), grid=(2,), in_specs=[spec], out_specs=spec)(_rand(8))
    plax.effects_barrier()
    assert capsys.readouterr().out.split("\n")[:2] == ["block 0", "block 1"]


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_element_block_dimensions_pad_with_the_uninitialised_value(dtype):
    def copy(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    out = call(copy, out_shape=_sds((6,), dtype), grid=(1,),
               in_specs=[pl.BlockSpec((pl.Element(6, (1, 2)),), lambda i: 0)])(
        np.full((3,), 42, dtype))
    pad = np.nan if dtype == np.float32 else np.iinfo(np.int32).min
    np.testing.assert_array_equal(out, np.array([pad, 42, 42, 42, pad, pad], dtype))


def test_element_offsets_overlap_blocks():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(0, 2)] + x_ref[pl.ds(2, 2)]
    x = _rand((8, 3))
    out = call(kernel, out_shape=_sds((6, 3)), grid=(3,),
               in_specs=[pl.BlockSpec((pl.Element(4), pl.Element(3)), lambda i: (2 * i, 0))],
               out_specs=pl.BlockSpec((2, 3), lambda i: (i, 0)))(x)
    want = np.concatenate([x[2 * i:2 * i + 2] + x[2 * i + 2:2 * i + 4] for i in range(3)])
    np.testing.assert_allclose(out, want, rtol=1e-6)


@pytest.mark.parametrize("dim", [pl.BoundedSlice(4), pl.Indirect(4)])
def test_bounded_slice_and_indirect_dimensions_are_refused(dim):
    f = call(lambda x_ref, o_ref: None, out_shape=_sds((4,)),
             in_specs=[pl.BlockSpec((dim,), lambda: (0,))])
    with pytest.raises(NotImplementedError, match="Unsupported block dimension type"):
        f(_rand(8))


def test_lower_as_mlir_returns_the_module_text():
    f = call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] + 1), out_shape=_sds((8,)))
    text = pl.lower_as_mlir(f, _rand(8), platforms=["cpu"])
    assert "func.func public @main" in text


# --- the GPU extensions ------------------------------------------------------------------
def test_triton_masked_load_store_atomics_and_dot():
    def kernel(x_ref, m_ref, ld_ref, mm_ref, a_ref, old_ref):
        mask = jnp.arange(8) < 5
        pltriton.store(ld_ref, pltriton.load(x_ref, mask=mask, other=-1.0))
        a_ref[...] = jnp.zeros(8, F32)
        pltriton.atomic_add(a_ref, pl.ds(0, 8), x_ref[...], mask=mask)
        old_ref[...] = pltriton.atomic_max(a_ref, pl.ds(0, 8), jnp.full(8, 0.5, F32))
        mm_ref[...] = pltriton.dot(m_ref[...], m_ref[...], trans_b=True)
    x, m = _rand(8), _rand((4, 4), 1)
    ld, mm, a, old = call(kernel, out_shape=(_sds((8,)), _sds((4, 4)), _sds((8,)),
                                             _sds((8,))))(x, m)
    keep = np.where(np.arange(8) < 5, x, 0)
    np.testing.assert_allclose(ld, np.where(np.arange(8) < 5, x, -1.0), rtol=1e-6)
    np.testing.assert_allclose(mm, m @ m.T, rtol=1e-5)
    np.testing.assert_allclose(old, keep, rtol=1e-6)
    np.testing.assert_allclose(a, np.maximum(keep, 0.5), rtol=1e-6)
    assert pltriton.max_contiguous(x, 8) is x


@pytest.mark.parametrize("op", ["approx_tanh", "debug_barrier", "print_layout"])
def test_gpu_instructions_fail_off_a_gpu_as_in_jax(op):
    def kernel(x_ref, o_ref):
        if op == "approx_tanh":
            o_ref[...] = pltriton.approx_tanh(x_ref[...])
        elif op == "debug_barrier":
            pltriton.debug_barrier()
        else:
            plmgpu.print_layout("x: {}", x_ref[...])
        o_ref[...] = x_ref[...]
    with pytest.raises(NotImplementedError, match="MLIR translation rule for primitive"):
        call(kernel, out_shape=_sds((8,)))(_rand(8))
    with pytest.raises(TypeError, match="approx_tanh does not accept int32"):
        pltriton.approx_tanh(jnp.zeros(3, jnp.int32))


@pytest.mark.parametrize("params", [pltriton.CompilerParams(num_warps=2),
                                    plmgpu.CompilerParams()])
def test_gpu_compiler_params_run_in_interpret_mode_and_refuse_compiling_on_cpu(params):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1
    x = _rand(8)
    np.testing.assert_allclose(call(kernel, out_shape=_sds((8,)), compiler_params=params)(x),
                               x + 1, rtol=1e-6)
    with pytest.raises(ValueError, match="Only interpret mode is supported on CPU backend"):
        pl.pallas_call(kernel, out_shape=_sds((8,)), compiler_params=params)(x)


def test_mosaic_gpu_shared_memory_limit_is_scoped():
    core = mgpu.core
    before = core._SMEM_SIZE_BOUND
    with core.artificial_shared_memory_limit(1024):
        assert core._SMEM_SIZE_BOUND == 1024
    assert core._SMEM_SIZE_BOUND == before


# --- pallas_call's checks and named grids --------------------------------------------------
def _copy(x_ref, o_ref):
    o_ref[...] = x_ref[...]


@pytest.mark.parametrize("case, error, match", [
    ("spec_tree", ValueError, r"(?s)Pytree for `in_specs` and `inputs` do not match\. There "
     r"are 1 mismatches.*at \[0\], `in_specs` is a pytree leaf but `inputs` is a <class "
     r"'tuple'>"),
    ("out_tree", ValueError, r"(?s)`out_specs` is a tuple of length 1 but `out_shape` is a "
     r"tuple of length 2"),
    ("not_a_sequence", ValueError, "`in_specs` must be a tuple or a list"),
    ("returns", ValueError, r"The kernel function in the pallas_call kernel at .*"
     r"test_pallas_face.py:\d+ should return None"),
    ("map_type", ValueError, r"Index map function .* for args\[0\]\['a'\] must return "
     r"integer scalars\. Output\[0\] has type ShapedArray\(float32\[\]"),
    ("map_const", ValueError, r"for args\[0\] must not capture constants"),
    ("ref_into_ref", ValueError, "Cannot store a Ref into another Ref"),
])
def test_pallas_call_argument_errors_as_in_jax(case, error, match):
    x = _rand(8)
    sds = _sds((8,))
    with pytest.raises(error, match=match):
        if case == "spec_tree":
            call(lambda a, b, o: None, out_shape=sds, in_specs=[pl.BlockSpec()])((x, x))
        elif case == "out_tree":
            call(_copy, out_shape=[sds, sds], out_specs=[pl.BlockSpec()])(x)
        elif case == "not_a_sequence":
            call(_copy, out_shape=sds, in_specs=pl.BlockSpec())
        elif case == "returns":
            def kernel(x_ref, o_ref):
                return 0
            call(kernel, out_shape=sds)(x)
        elif case == "map_type":
            call(lambda x_ref, o_ref: None, out_shape=sds, grid=(1,),
                 in_specs=[{"a": pl.BlockSpec((8,), lambda i: 1.0)}])({"a": x})
        elif case == "ref_into_ref":
            call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref), out_shape=sds)(x)
        else:
            table = np.array([0], np.int32)
            call(_copy, out_shape=sds, grid=(1,),
                 in_specs=[pl.BlockSpec((8,), lambda i: jnp.array(table)[i])])(x)


def test_list_out_shape_gives_a_tuple_and_named_grids_bind_axis_sizes():
    sizes = []

    def kernel(x_ref, o_ref):
        sizes.append((plax.lax.axis_size("j"), plax.lax.axis_size("i")))
        o_ref[...] = x_ref[...]
    x = _rand((4, 16, 2))
    spec = pl.BlockSpec((None, 8, 2), lambda i, j: (i, j, 0))
    out = call(kernel, out_shape=[_sds(x.shape)], in_specs=[spec], out_specs=[spec],
               grid=(("j", 4), ("i", 2)))(x)
    assert isinstance(out, tuple)
    np.testing.assert_array_equal(out[0], x)
    assert sizes == [(4, 2)]


@pytest.mark.parametrize("fun, args, want", [
    (lambda x, y: jnp.exp(x + y), [_sds((10,)), _sds((10,))], (10, 10, 4 * 30)),
    (lambda a, b: jnp.matmul(a, b), [_sds((3, 5, 7)), _sds((3, 7, 2))],
     (2 * 3 * 5 * 7 * 2, 0, 4 * (3 * 5 * 7 + 3 * 7 * 2 + 3 * 5 * 2))),
    (lambda x: plax.lax.integer_pow(x, 7), [_sds((10,))], (50, 0, 80)),
    (plax.jit(lambda x: jnp.sin(x) * 2), [_sds((4,))], (4, 4, 32)),
])
def test_estimate_cost(fun, args, want):
    cost = pl.estimate_cost(fun, *args)
    assert (cost.flops, cost.transcendentals, cost.bytes_accessed) == want


def test_masked_swap_past_the_end_and_masked_load():
    from plax._src.pallas import primitives as pallas_primitives
    n, m = 4, 8

    def kernel(mask_ref, start_ref, x_ref, y_ref, xo_ref, yo_ref, ld_ref):
        yo_ref[...] = y_ref[...]
        got = pallas_primitives.swap(yo_ref, pl.ds(start_ref[0], n), x_ref[...],
                                     mask=mask_ref[...])
        xo_ref[...] = got
        ld_ref[...] = pallas_primitives.load(y_ref, pl.ds(start_ref[0], n),
                                             mask=mask_ref[...], other=-1.0)
    x, y = _rand(n), _rand(m, 1)
    start = 6
    mask = np.arange(n) + start < m
    xo, yo, ld = call(kernel, out_shape=(_sds((n,)), _sds((m,)), _sds((n,))))(
        mask, np.array([start], np.int32), x, y)
    np.testing.assert_array_equal(xo, np.where(mask, np.concatenate([y[start:], [0, 0]]), x))
    np.testing.assert_array_equal(yo, np.concatenate([y[:start], x[:2]]))
    np.testing.assert_array_equal(ld, np.where(mask, np.concatenate([y[start:], [0, 0]]), -1))


def test_debug_print_of_a_reference_prints_its_value(capsys):
    def kernel(x_ref, o_ref):
        plax.debug.print("x = {}", x_ref)
        o_ref[...] = x_ref[...]
    call(kernel, out_shape=_sds((2,)))(np.array([4.5, 2.5], np.float32))
    plax.effects_barrier()
    assert "x = [4.5 2.5]" in capsys.readouterr().out


def test_nested_scratch_shapes_reach_the_kernel_as_their_tree():
    seen = []

    def kernel(x_ref, o_ref, pair, single):
        seen.append((type(pair), len(pair)))
        pair[0][...] = x_ref[...] + 1
        pair[1][...] = pair[0][...] * 2
        single[...] = pair[1][...]
        o_ref[...] = single[...]
    x = _rand(8)
    out = call(kernel, out_shape=_sds((8,)),
               scratch_shapes=[[pltpu.VMEM((8,), F32), pltpu.VMEM((8,), F32)],
                               pltpu.VMEM((8,), F32)])(x)
    np.testing.assert_allclose(out, 2 * (x + 1), rtol=1e-6)
    assert seen == [(list, 2)]


def test_index_maps_may_ask_the_grid():
    def index_map(i):
        return (pl.num_programs(0) - 1 - i,)
    spec = pl.BlockSpec((4,), index_map)
    x = _rand(8)
    out = call(_copy, out_shape=_sds((8,)), grid=(2,), in_specs=[spec],
               out_specs=pl.BlockSpec((4,), lambda i: (i,)))(x)
    np.testing.assert_array_equal(out, np.concatenate([x[4:], x[:4]]))


def _copy_halves(x_ref, o_ref, send_sems, recv_sems):
    """Two local DMAs, one on a semaphore of each nested scratch tuple."""
    first = pltpu.make_async_copy(x_ref.at[0:4], o_ref.at[0:4], send_sems[0])
    second = pltpu.make_async_copy(x_ref.at[4:8], o_ref.at[4:8], recv_sems[1])
    first.start()
    second.start()
    first.wait()
    second.wait()


@pytest.mark.parametrize("with_grid_spec", [False, True])
def test_nested_semaphore_scratch_reaches_the_kernel_as_two_tuples(with_grid_spec):
    seen = []

    def kernel(x_ref, o_ref, send_sems, recv_sems):
        seen.append((type(send_sems), len(send_sems), type(recv_sems), len(recv_sems)))
        _copy_halves(x_ref, o_ref, send_sems, recv_sems)
    sem = pltpu.SemaphoreType.DMA
    scratch = ((sem, sem), (sem, sem))
    any_space = pl.BlockSpec(memory_space=pl.ANY)
    if with_grid_spec:
        grid_spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=0, in_specs=[any_space],
                                                 out_specs=any_space, scratch_shapes=scratch)
        f = call(kernel, out_shape=_sds((8, 128)), grid_spec=grid_spec)
    else:
        f = call(kernel, out_shape=_sds((8, 128)), in_specs=[any_space], out_specs=any_space,
                 scratch_shapes=scratch)
    x = _rand((8, 128))
    np.testing.assert_array_equal(np.asarray(f(x)), x)
    assert seen == [(tuple, 2, tuple, 2)]


def test_scratch_shapes_as_a_dict_reach_the_kernel_by_keyword():
    def kernel(x_ref, o_ref, *, buf, sems):
        buf[...] = x_ref[...] * 2
        copy = pltpu.make_async_copy(buf, o_ref, sems[1])
        copy.start()
        copy.wait()
    sem = pltpu.SemaphoreType.DMA
    x = _rand((8, 128))
    out = call(kernel, out_shape=_sds((8, 128)),
               scratch_shapes={"buf": pltpu.VMEM((8, 128), F32), "sems": (sem, sem)})(x)
    np.testing.assert_allclose(np.asarray(out), 2 * x, rtol=1e-6)
