"""Typed PRNG keys in Pallas TPU kernels: ``pltpu.to_pallas_key`` and the ``"pallas_tpu"``
implementation (its bits are the kernel PRNG's, seeded with the key's words), keys as kernel
operands and results, in interpret mode and lowered for TPU (compared with what JAX 0.10.2
emits for the same kernels, ``lowering_platforms=("tpu",)``)."""
import functools
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import random
from plax._src.pallas.mosaic import random as plrandom
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax.pallas import mosaic_bindings
from plax.pallas.mosaic_lowering import LoweringException
from plax.pallas.mosaic_rules_arith import _erf_inv_f32

call = functools.partial(pl.pallas_call, interpret=True)
SMEM = pl.BlockSpec(memory_space=pltpu.SMEM)
f32, u32 = jnp.float32, jnp.uint32
needs_mosaic = pytest.mark.skipif(not mosaic_bindings.available(),
                                  reason="jaxlib without the Mosaic TPU bindings")


def sds(shape, dtype=f32):
    return plax.ShapeDtypeStruct(shape, dtype)


def rbg_pallas_key(seed=0):
    return pltpu.to_pallas_key(random.key(seed, impl="rbg"))


def _rotl(x, r):
    return ((x << np.uint32(r)) | (x >> np.uint32(32 - r))).astype(np.uint32)


# --- keys ------------------------------------------------------------------------------------
def test_to_pallas_key_draws_the_words_from_the_key():
    key = random.key(0, impl="rbg")
    pk = pltpu.to_pallas_key(key)
    assert str(pk.dtype) == "key<pl>" and pk.shape == ()
    data = np.asarray(random.key_data(pk))
    np.testing.assert_array_equal(data, np.asarray(random.bits(key, (1, 2), u32)))
    # (what JAX 0.10.2 gives for the same rbg key)
    np.testing.assert_array_equal(data, [[1713891541, 3781805453]])


@pytest.mark.parametrize("legacy", [False, True])
def test_to_pallas_key_batched_and_under_vmap(legacy):
    with plax.legacy_prng_key("allow"):
        key = random.PRNGKey(42) if legacy else random.key(42, impl="rbg")
        keys = random.split(key, 4)
        batched = random.key_data(pltpu.to_pallas_key(keys))
        mapped = random.key_data(plax.vmap(pltpu.to_pallas_key)(keys))
    assert batched.shape == (4, 1, 2)
    np.testing.assert_array_equal(batched, mapped)
    assert len({tuple(np.asarray(k).ravel()) for k in batched}) == 4


def test_pallas_key_seed_and_split():
    data = random.key_data(random.key(7, impl="pallas_tpu"))
    np.testing.assert_array_equal(data, [[7, 7]])
    with pytest.raises(NotImplementedError, match="Cannot split a Pallas key"):
        random.split(rbg_pallas_key())


def test_pallas_key_draws_only_in_a_kernel():
    with pytest.raises(NotImplementedError, match="MLIR translation rule .* not found"):
        random.uniform(rbg_pallas_key(), (8, 128))


# --- in kernels (interpret mode) ---------------------------------------------------------------
def test_pallas_key_bits_are_the_prng_seeded_with_its_words():
    key = rbg_pallas_key()
    w0, w1 = np.asarray(random.key_data(key))[0]

    def with_key(key_ref, o_ref):
        o_ref[...] = random.bits(key_ref[...], o_ref.shape)

    def seeded(o_ref):
        pltpu.prng_seed(np.uint32(w0), np.uint32(w1))
        o_ref[...] = plax.lax.bitcast_convert_type(pltpu.prng_random_bits(o_ref.shape), u32)
    a = np.asarray(call(with_key, in_specs=[SMEM], out_shape=sds((8, 128), u32))(key))
    b = np.asarray(call(seeded, out_shape=sds((8, 128), u32))())
    np.testing.assert_array_equal(a, b)
    assert len(np.unique(a)) > 1000


def test_words_fold_in_and_key_results_in_kernels():
    key = rbg_pallas_key()
    w0, w1 = np.asarray(random.key_data(key))[0, :, None]  # (arrays: uint32 sums wrap)

    def words(key_ref, o_ref):
        x0, x1 = plrandom.unwrap_pallas_seed(random.fold_in(key_ref[...], np.uint32(5)))
        o_ref[0, 0], o_ref[0, 1] = x0, x1
    out = np.asarray(call(words, in_specs=[SMEM], out_specs=SMEM,
                          out_shape=sds((1, 2), u32))(key))
    # the second word takes the data, then one threefry round (rotation 13)
    v1 = w1 + np.uint32(5)
    v0 = w0 + v1
    np.testing.assert_array_equal(out, [[v0[0], (_rotl(v1, 13) ^ v0)[0]]])

    def joined(o_ref):
        o_ref[...] = plrandom.wrap_pallas_seed(np.uint32(3), np.uint32(4), impl="pallas_tpu")
    made = call(joined, out_specs=SMEM, out_shape=sds((), key.dtype))()
    assert str(made.dtype) == "key<pl>"
    np.testing.assert_array_equal(random.key_data(made), [[3, 4]])


def test_threefry_key_in_vmem_matches_plax_random():
    key = random.key(0, impl="threefry2x32")

    def body(key_ref, o_ref):
        o_ref[...] = random.uniform(key_ref[...], o_ref.shape)
    with plax.threefry_partitionable(True):
        out = call(body, in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
                   out_shape=sds((16, 128)))(key)
        np.testing.assert_array_equal(out, random.uniform(key, (16, 128)))


def test_stateful_samplers_advance_the_prng():
    def body(o_ref):
        pltpu.prng_seed(3)
        o_ref[0] = pltpu.stateful_uniform(shape=(8, 128))
        o_ref[1] = pltpu.stateful_uniform(shape=(8, 128))
    out = np.asarray(call(body, out_shape=sds((2, 8, 128)))())
    assert ((out >= 0) & (out < 1)).all()
    assert not np.array_equal(out[0], out[1])
    np.testing.assert_array_equal(out, call(body, out_shape=sds((2, 8, 128)))())


def test_erf_inv_of_tpu_kernels_is_close_to_the_inverse_error_function():
    from scipy.special import erfinv
    x = np.linspace(-0.999999, 0.999999, 4001, dtype=np.float32)
    np.testing.assert_allclose(_erf_inv_f32(jnp.asarray(x)), erfinv(x.astype(np.float64)),
                               rtol=2e-6, atol=2e-6)
    edges = np.asarray(_erf_inv_f32(jnp.asarray(np.array([-1, 1], np.float32))))
    np.testing.assert_array_equal(edges, [-np.inf, np.inf])


# --- lowered for TPU ---------------------------------------------------------------------------
def lower(f, *args):
    from tests.pallas.test_mosaic_lowering import lower as lower_for_tpu
    return re.sub(r"%(?!arg)[\w#]+", "%_", lower_for_tpu(f, *args)[2])


def _uniform_kernel(key_spec, grid=()):
    def body(key_ref, o_ref):
        o_ref[...] = random.uniform(key_ref[...], o_ref.shape)
    return pl.pallas_call(body, in_specs=[key_spec], out_shape=sds((8, 128)), grid=grid)


@needs_mosaic
def test_pallas_key_lowers_to_smem_words_seeding_the_prng():
    module = lower(_uniform_kernel(SMEM), rbg_pallas_key())
    assert "%arg0: memref<1x2xi32, #tpu.memory_space<smem>>" in module
    assert module.count("= memref.load %arg0[") == 2
    assert '"tpu.prng_set_seed_32"(%_, %_) : (i32, i32) -> ()' in module
    assert module.count('"tpu.prng_random_bits"() : () -> vector<8x128xi32>') == 1


@needs_mosaic
def test_squeezed_and_gridded_key_blocks_keep_their_word_dimensions():
    squeezed = pl.BlockSpec((pl.squeezed,), lambda: (0,), memory_space=pltpu.SMEM)
    module = lower(_uniform_kernel(squeezed), rbg_pallas_key()[None])
    assert "%arg0: memref<1x1x2xi32, #tpu.memory_space<smem>>" in module
    gridded = lower(_uniform_kernel(SMEM, grid=(2,)), rbg_pallas_key())
    assert "window_bounds = array<i64: 1, 2>" in gridded
    assert "func.func @transform_0(%arg0: i32) -> (i32, i32)" in gridded


@needs_mosaic
def test_threefry_key_lowers_as_its_data():
    from tests.pallas.test_mosaic_lowering import lower as lower_for_tpu
    with plax.threefry_partitionable(True):
        module = lower(_uniform_kernel(pl.BlockSpec(memory_space=pltpu.VMEM)),
                       random.key(0, impl="threefry2x32"))
        hlo = lower_for_tpu(_uniform_kernel(pl.BlockSpec(memory_space=pltpu.VMEM)),
                            random.key(0, impl="threefry2x32"))[0]
    # (the custom call's operand is the key's data, its layout of the data's rank: a chip
    # refuses the module otherwise)
    assert "(tensor<2xui32>) -> tensor<8x128xf32>" in hlo
    assert "operand_layouts = [dense<[0]> : tensor<1xindex>]" in hlo
    assert "%arg0: memref<2xi32, #tpu.memory_space<vmem>>" in module
    assert "vector.load %arg0[%_] : memref<2xi32, #tpu.memory_space<vmem>>, vector<2xi32>" \
        in module
    assert "tpu.prng" not in module and "tpu.iota" in module


@needs_mosaic
def test_stateful_normal_lowers_to_one_draw():
    def body(key_ref, o_ref):
        pltpu.prng_seed(key_ref[...])
        o_ref[...] = pltpu.stateful_normal(shape=o_ref.shape)
    module = lower(pl.pallas_call(body, in_specs=[SMEM], out_shape=sds((8, 128))),
                   rbg_pallas_key())
    assert module.count("tpu.prng_set_seed_32") == 1
    assert module.count("tpu.prng_random_bits") == 1
    assert "math.log1p" in module and "math.sqrt" in module


@needs_mosaic
def test_pallas_key_outside_smem_and_its_data_are_refused():
    with pytest.raises(LoweringException, match="PRNG keys must be loaded from SMEM"):
        lower(_uniform_kernel(pl.BlockSpec(memory_space=pltpu.VMEM)), rbg_pallas_key())

    def data(key_ref, o_ref):
        o_ref[...] = random.key_data(key_ref[...])
    with pytest.raises(LoweringException, match="key_data not supported for Pallas PRNG keys"):
        lower(pl.pallas_call(data, in_specs=[SMEM], out_shape=sds((1, 2), u32)),
              rbg_pallas_key())


def _pipelined_uniform(key_space):
    """The key copied from HBM by an emit_pipeline into a ``key_space`` buffer, drawn from."""
    def kernel(key_ref, o_ref):
        o_ref[...] = random.uniform(key_ref[...], o_ref.shape)

    def pipeline_kernel(key_hbm, o_hbm):
        pltpu.emit_pipeline(kernel, grid=(), in_specs=[pl.BlockSpec(memory_space=key_space)],
                            out_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)])(key_hbm, o_hbm)
    hbm = pl.BlockSpec(memory_space=pltpu.HBM)
    return pl.pallas_call(pipeline_kernel, out_shape=sds((8, 128)), in_specs=[hbm],
                          out_specs=hbm)


@needs_mosaic
@pytest.mark.parametrize("key_space", [pltpu.SMEM, pl.MemorySpace.KEY])
def test_a_pipeline_stages_a_pallas_key_in_smem(key_space):
    module = lower(_pipelined_uniform(key_space), rbg_pallas_key())
    # (the key's words come over by DMA into an SMEM buffer, then seed the PRNG)
    assert re.search(r"memref.alloca\(\) : memref<1x2xi32, #tpu.memory_space<smem>>", module)
    assert "tpu.enqueue_dma" in module
    assert module.count('"tpu.prng_set_seed_32"(%_, %_) : (i32, i32) -> ()') == 1
    # interpreted, the pipeline draws what the kernel given the key in SMEM draws
    with pltpu.force_tpu_interpret_mode():
        piped = _pipelined_uniform(key_space)(rbg_pallas_key(3))
        direct = _uniform_kernel(SMEM)(rbg_pallas_key(3))
    np.testing.assert_array_equal(piped, direct)
    assert 0.4 < float(np.mean(direct)) < 0.6
