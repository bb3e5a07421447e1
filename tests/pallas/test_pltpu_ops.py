"""pltpu's vector operations, kernel PRNG, emit_pipeline and InterpretParams in interpret mode,
against numpy references."""
import functools
import math

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu

call = functools.partial(pl.pallas_call, interpret=True)


def _sds(shape, dtype=jnp.float32):
    return plax.ShapeDtypeStruct(shape, dtype)


def _on_value(fn, x, out_shape, out_dtype=None, *extra):
    def kernel(x_ref, *refs):
        refs[-1][...] = fn(x_ref[...], *[r[...] for r in refs[:-1]])
    specs = [pl.BlockSpec(memory_space=pltpu.SMEM)] * len(extra)
    return call(kernel, out_shape=_sds(out_shape, out_dtype or x.dtype),
                in_specs=[pl.BlockSpec()] + specs)(x, *extra)


@pytest.mark.parametrize("shift, axis", [(0, 1), (3, 1), (130, 1), (5, 0), (1, 2)])
def test_roll_is_np_roll(shift, axis):
    x = np.arange(8 * 128 * 2, dtype=np.float32).reshape(8, 128, 2)
    out = _on_value(lambda v: pltpu.roll(v, shift, axis), x, x.shape)
    np.testing.assert_array_equal(out, np.roll(x, shift, axis))


def test_roll_dynamic_shift_and_stride():
    x = np.arange(4 * 8 * 16, dtype=np.int32).reshape(4, 8, 16)
    shift = np.array([3], np.int32)
    out = _on_value(lambda v, s: pltpu.roll(v, s[0], 2, stride=2, stride_axis=1), x, x.shape,
                    None, shift)
    want = np.stack([np.roll(x[:, i], 3 + 2 * i, axis=1) for i in range(8)], axis=1)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("kwargs, message", [
    (dict(shift=-1, axis=0), "shift must be non-negative"),
    (dict(shift=1, axis=2), "axis is out of range"),
    (dict(shift=1, axis=0, stride=1), "stride and stride_axis must be both specified"),
    (dict(shift=1, axis=0, stride=1, stride_axis=0), "axis and stride_axis are different"),
])
def test_roll_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        pltpu.roll(jnp.zeros((8, 128)), **kwargs)


@pytest.mark.parametrize("src, dst", [(np.int32, np.float32), (np.int32, np.int16),
                                      (np.int8, np.int32), (np.float32, np.uint8)])
def test_bitcast_packs_along_the_second_minor_axis(src, dst):
    x = (np.arange(2 * 8 * 16) % 100).astype(src).reshape(2, 8, 16)
    ratio = np.dtype(src).itemsize / np.dtype(dst).itemsize
    shape = (2, int(8 * ratio), 16)
    out = np.asarray(_on_value(lambda v: pltpu.bitcast(v, dst), x, shape, dst))
    # rows k * r .. k * r + r - 1 of the narrow type are the bytes of row k of the wide one
    wide, narrow = (x, out) if ratio >= 1 else (out, x)
    r = max(ratio, 1 / ratio)
    regrouped = np.moveaxis(narrow.reshape(2, -1, int(r), 16), 2, 3).copy()
    np.testing.assert_array_equal(regrouped.view(wide.dtype)[..., 0], wide)


def test_bitcast_errors():
    with pytest.raises(ValueError, match="bitcast 1D"):
        pltpu.bitcast(jnp.zeros((8,), jnp.int32), jnp.int16)
    with pytest.raises(ValueError, match="can not be perfectly packed"):
        pltpu.bitcast(jnp.zeros((3, 128), jnp.int8), jnp.int32)


def _draws(seed, kernel_body, shape, dtype, grid=1):
    def kernel(seed_ref, o_ref):
        pltpu.prng_seed(seed_ref[0], pl.program_id(0))
        o_ref[...] = kernel_body(o_ref.shape)
    return np.asarray(call(
        kernel, out_shape=_sds((grid * shape[0],) + shape[1:], dtype), grid=(grid,),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec(shape, lambda i: (i,) + (0,) * (len(shape) - 1)))(
            np.array([seed], np.int32)))


def test_prng_random_bits_shapes_and_determinism():
    a = _draws(7, pltpu.prng_random_bits, (8, 128), jnp.int32, grid=2)
    assert a.dtype == np.int32 and a.shape == (16, 128)
    np.testing.assert_array_equal(a, _draws(7, pltpu.prng_random_bits, (8, 128), jnp.int32, 2))
    assert not np.array_equal(a, _draws(8, pltpu.prng_random_bits, (8, 128), jnp.int32, 2))
    assert not np.array_equal(a[:8], a[8:])  # (seeded per program)
    assert len(np.unique(a)) > 1000


def test_successive_draws_differ_in_loops():
    def body(shape):
        def step(i, acc):
            return acc + pltpu.stateful_uniform(shape)
        first = pltpu.stateful_uniform(shape)
        return plax.lax.fori_loop(0, 3, step, jnp.zeros(shape)) - 3 * first
    out = _draws(1, body, (8, 128), jnp.float32)
    assert np.abs(out).max() > 0.5


@pytest.mark.parametrize("sampler, kwargs, check", [
    (pltpu.stateful_uniform, dict(minval=2.0, maxval=3.0),
     lambda v: v.dtype == np.float32 and 2 <= v.min() and v.max() < 3),
    (pltpu.stateful_normal, {}, lambda v: abs(v.mean()) < 0.1 and 0.9 < v.std() < 1.1),
    (pltpu.stateful_bernoulli, dict(p=0.25), lambda v: 0.2 < v.mean() < 0.3),
    (pltpu.stateful_bits, dict(dtype=jnp.uint32), lambda v: v.dtype == np.uint32),
])
def test_stateful_samplers(sampler, kwargs, check):
    dtype = {pltpu.stateful_bernoulli: jnp.bool_,
             pltpu.stateful_bits: jnp.uint32}.get(sampler, jnp.float32)
    out = _draws(3, lambda shape: sampler(shape=shape, **kwargs), (16, 128), dtype)
    assert out.shape == (16, 128) and check(out)


def test_prng_outside_a_kernel_is_refused():
    with pytest.raises(ValueError, match="inside a pallas_call kernel"):
        pltpu.prng_seed(0)


def test_emit_pipeline_matmul_over_hbm_refs():
    m, k, n, bm, bk, bn = 64, 256, 128, 32, 128, 64
    x = np.random.default_rng(0).standard_normal((m, k)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((k, n)).astype(np.float32)

    def inner(x_ref, y_ref, o_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)
        o_ref[...] += x_ref[...] @ y_ref[...]

    def kernel(x_hbm, y_hbm, o_hbm):
        pltpu.emit_pipeline(
            inner, grid=(m // bm, n // bn, k // bk),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                      pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)))(x_hbm, y_hbm, o_hbm)
    any_spec = pl.BlockSpec(memory_space=pl.ANY)
    out = call(kernel, out_shape=_sds((m, n)), in_specs=[any_spec, any_spec],
               out_specs=any_spec)(x, y)
    np.testing.assert_allclose(out, x @ y, rtol=1e-4, atol=1e-4)


def test_emit_pipeline_with_scratches_and_sliced_refs():
    x = np.arange(2 * 512, dtype=np.float32).reshape(2, 512)

    def inner(x_ref, o_ref, count_ref):
        count_ref[0] += 1
        o_ref[...] = x_ref[...] + count_ref[0].astype(jnp.float32)

    def kernel(x_hbm, o_hbm, count_ref):
        count_ref[0] = 0
        pltpu.emit_pipeline(inner, grid=(4,),
                            in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
                            out_specs=[pl.BlockSpec((128,), lambda i: (i,))])(
            x_hbm.at[1], o_hbm, scratches=[count_ref])
    any_spec = pl.BlockSpec(memory_space=pl.ANY)
    out = call(kernel, out_shape=_sds((512,)), in_specs=[any_spec], out_specs=any_spec,
               scratch_shapes=[pltpu.SMEM((1,), jnp.int32)])(x)
    np.testing.assert_array_equal(out, x[1] + np.repeat(np.arange(1, 5), 128))


def test_emit_pipeline_errors():
    with pytest.raises(ValueError, match="strictly positive"):
        pltpu.emit_pipeline(lambda: None, grid=(0,))


def test_interpret_params_run_the_kernel():
    params = pltpu.InterpretParams(dma_execution_mode="eager", detect_races=True)
    assert params.num_cores_per_device == 1 and hash(params) == hash(params)
    with pytest.raises(ValueError, match="Number of cores or threads must be at least 1"):
        pltpu.InterpretParams(num_cores_or_threads=0)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 3
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    out = pl.pallas_call(kernel, out_shape=_sds(x.shape), interpret=params)(x)
    np.testing.assert_array_equal(out, 3 * x)


def test_tpu_info():
    if not pltpu.is_tpu_device():
        with pytest.raises(ValueError, match="Unsupported TPU device kind"):
            pltpu.get_tpu_info()
    v5e = pltpu.get_tpu_info_for_chip(pltpu.ChipVersion.TPU_V5E, 1)
    assert (v5e.generation, v5e.num_lanes, v5e.num_sublanes, v5e.is_lite) == (5, 128, 8, True)
    assert v5e.vmem_capacity_bytes == 128 << 20 and v5e.hbm_capacity_bytes == 17_200_000_000
    assert v5e.is_matmul_supported(jnp.bfloat16, jnp.float32)
    assert not v5e.is_matmul_supported(jnp.int8, jnp.bfloat16)
    assert v5e.get_sublane_tiling(jnp.int8) == 32
    v5p = pltpu.get_tpu_info_for_chip(pltpu.ChipVersion.TPU_V5P, 2)
    assert v5p.is_megacore and v5p.hbm_capacity_bytes == 103_000_000_000 // 2
    assert v5p.sparse_core.num_subcores == 16
    with pytest.raises(ValueError, match="num_tensor_cores_per_logical_device=1"):
        pltpu.get_tpu_info_for_chip(pltpu.ChipVersion.TPU_V6E, 2)
    assert pltpu.Tiling.COMPACT.shape == (8, 128)


def test_pack_and_unpack_elementwise():
    rng = np.random.default_rng(0)
    xs = [rng.integers(-128, 128, (8, 128)).astype(np.int32) for _ in range(4)]
    packed = np.asarray(pltpu.pack_elementwise(xs, packed_dtype=jnp.int8))
    assert packed.dtype == np.uint32
    want = sum((x.astype(np.int64) & 0xFF) << (8 * i) for i, x in enumerate(xs))
    np.testing.assert_array_equal(packed, want.astype(np.uint32))
    for i, x in enumerate(xs):
        out = pltpu.unpack_elementwise(packed, index=i, packed_dtype=jnp.int8,
                                       unpacked_dtype=jnp.int32)
        np.testing.assert_array_equal(out, x)
    f = rng.standard_normal((8, 128)).astype(np.float32)
    halves = pltpu.pack_elementwise([f, 2 * f], packed_dtype=jnp.bfloat16)
    for i, x in enumerate([f, 2 * f]):
        out = pltpu.unpack_elementwise(halves, index=i, packed_dtype=jnp.bfloat16,
                                       unpacked_dtype=jnp.float32)
        np.testing.assert_array_equal(out, np.asarray(jnp.asarray(x).astype(jnp.bfloat16),
                                                      np.float32))
    with pytest.raises(ValueError, match="must match the packing factor"):
        pltpu.pack_elementwise(xs[:2], packed_dtype=jnp.int8)
    with pytest.raises(ValueError, match="out of bounds for packing factor"):
        pltpu.unpack_elementwise(packed, index=4, packed_dtype=jnp.int8,
                                 unpacked_dtype=jnp.int32)


def test_stochastic_round_is_unbiased_between_neighbours():
    x = np.full((64, 128), 1.0 + 2.0 ** -9, np.float32)  # a quarter of the way up
    bits = np.random.default_rng(0).integers(0, 2 ** 32, x.shape, dtype=np.uint32)
    out = np.asarray(pltpu.stochastic_round(x, bits, target_dtype=jnp.bfloat16), np.float32)
    assert set(np.unique(out)) == {1.0, 1.0 + 2.0 ** -7}
    assert abs(out.mean() - x[0, 0]) < 2e-4
    with pytest.raises(ValueError, match="must be uint32"):
        pltpu.stochastic_round(x, bits.astype(np.int32), target_dtype=jnp.bfloat16)


def test_masked_load_store_and_touch():
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)
        pltpu.touch(o_ref)
        value = pltpu.load(x_ref)
        pltpu.store(o_ref, value, mask=value > 500)
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    out = call(kernel, out_shape=_sds(x.shape))(x)
    np.testing.assert_array_equal(out, np.where(x > 500, x, 0))


def test_forced_tpu_interpret_mode():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1
    x = np.ones((8, 128), np.float32)
    f = pl.pallas_call(kernel, out_shape=_sds(x.shape))  # (not interpret=True)
    with pltpu.force_tpu_interpret_mode():
        np.testing.assert_array_equal(f(x), x + 1)
    pltpu.set_tpu_interpret_mode(pltpu.InterpretParams())
    try:
        np.testing.assert_array_equal(f(2 * x), 2 * x + 1)
    finally:
        pltpu.set_tpu_interpret_mode(None)
    pltpu.reset_tpu_interpret_mode_state()
    if plax.default_backend() == "cpu":
        with pytest.raises(ValueError, match="Only interpret mode is supported on CPU"):
            f(3 * x)


@pytest.mark.parametrize("equation, shape, sizes, reference", [
    ("ab->ba", (2, 3), {}, lambda x: x.T),
    ("a(bc)->abc", (4, 6), dict(b=2), lambda x: x.reshape(4, 2, 3)),
    ("abc->(ba)c", (2, 3, 4), {}, lambda x: x.transpose(1, 0, 2).reshape(6, 4)),
    ("a(bc)->(ba)c", (2, 12), dict(c=4), lambda x: x.reshape(2, 3, 4).transpose(
        1, 0, 2).reshape(6, 4)),
])
def test_einshape(equation, shape, sizes, reference):
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    np.testing.assert_array_equal(pltpu.einshape(equation, x, **sizes), reference(x))


def test_einshape_errors():
    with pytest.raises(ValueError, match="Ambiguous split"):
        pltpu.einshape("(ab)->ab", jnp.zeros((6,)))
    with pytest.raises(ValueError, match="exactly one '->'"):
        pltpu.einshape("ab", jnp.zeros((2, 3)))


def test_prng_draws_inside_branches_advance_the_state():
    def kernel(o_ref):
        pltpu.prng_seed(5)

        @pl.when(pl.program_id(0) == 0)  # (a traced condition: a cond)
        def _():
            o_ref[0] = pltpu.prng_random_bits((128,))
        o_ref[1] = pltpu.prng_random_bits((128,))
    out = np.asarray(call(kernel, out_shape=_sds((8, 128), jnp.int32), grid=(1,))())
    assert not np.array_equal(out[0], out[1])


def test_run_on_first_core_of_a_named_axis():
    from plax.experimental.shard_map import shard_map
    from plax.sharding import Mesh, PartitionSpec
    if plax.device_count() < 2:
        pytest.skip("needs 2 devices")

    def kernel(o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)

        @pltpu.run_on_first_core("core")
        def _():
            o_ref[...] = jnp.ones_like(o_ref)
    mesh = Mesh(np.array(plax.devices()[:2]), ("core",))
    f = shard_map(lambda: call(kernel, out_shape=_sds((1, 128)))(), mesh=mesh, in_specs=(),
                  out_specs=PartitionSpec("core"), check_rep=False)
    np.testing.assert_array_equal(plax.jit(f)()[:, 0], [1, 0])
