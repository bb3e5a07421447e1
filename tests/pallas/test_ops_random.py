"""plax.experimental.pallas.ops.tpu.random (JAX's names): the Threefry and Philox kernels in
interpret mode on the CPU, against plax's threefry2x32 PRNG, plax's Philox-4x32 hash and
exact 64-bit products."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import random
from plax.experimental.pallas.ops.tpu.random import philox, prng_utils, threefry
from plax.first_order.counter_hashes import philox4x32_p


@pytest.mark.parametrize("shape", [(), (34,), (8, 16), (137, 275), (2, 20, 300)])
def test_pallas_threefry_bits_equal_threefry2x32s(shape):
    want = random.bits(random.key(3, impl="threefry2x32"), shape)
    got = random.bits(random.key(3, impl="pallas_threefry2x32"), shape)
    assert got.shape == shape and got.dtype == jnp.uint32
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_pallas_threefry_keys_batch_and_sample_as_threefry2x32():
    keys = random.split(random.key(1, impl="pallas_threefry2x32"), 3)
    want_keys = random.split(random.key(1, impl="threefry2x32"), 3)
    np.testing.assert_array_equal(random.key_data(keys), random.key_data(want_keys))
    got = plax.vmap(lambda k: random.uniform(k, (4, 8)))(keys)
    want = plax.vmap(lambda k: random.uniform(k, (4, 8)))(want_keys)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


X_Y = [0x1, 0x10000, 0xABCDEF, 0xFFFFFFFF, 0x80000001]


def test_mul32_hi_lo_is_the_exact_64_bit_product():
    x = np.array(X_Y, np.uint32)
    hi, lo = philox.mul32_hi_lo(jnp.asarray(x)[:, None], jnp.asarray(x)[None, :])
    want = x.astype(np.uint64)[:, None] * x.astype(np.uint64)[None, :]
    got = (np.asarray(hi).astype(np.uint64) << np.uint64(32)) + np.asarray(lo)
    np.testing.assert_array_equal(got, want)


def test_philox_4x32_is_philox_4x32_10():
    counters = [jnp.asarray(np.arange(w, w + 12, dtype=np.uint32) * 977) for w in range(4)]
    key = (jnp.uint32(0x12345678), jnp.uint32(0x9ABCDEF0))
    got = philox.philox_4x32(*counters, *key)
    full_key = [jnp.full((12,), k, jnp.uint32) for k in key]
    want = philox4x32_p.bind(*full_key, *counters)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _philox_words(key_data, counters):
    zeros = jnp.zeros(counters.shape, jnp.uint32)
    k = [jnp.full(counters.shape, w, jnp.uint32) for w in key_data]
    return philox4x32_p.bind(*k, zeros, counters, zeros, zeros)[:2]


@pytest.mark.parametrize("shape,offset", [((), 0), ((3, 7), 5)])
def test_philox_count_hashes_each_elements_flat_index(shape, offset):
    key = jnp.asarray([11, 22], jnp.uint32)
    size = int(np.prod(shape))
    counters = jnp.asarray(np.arange(size, dtype=np.uint32) + offset)
    w1, w2 = (np.asarray(w).reshape(shape) for w in _philox_words([11, 22], counters))
    fused = philox.philox_4x32_count(key, shape, offset=offset)
    np.testing.assert_array_equal(np.asarray(fused), w1 ^ w2)
    both = philox.philox_4x32_count(key, shape, offset=offset, fuse_output=False)
    np.testing.assert_array_equal(np.asarray(both), np.stack([w1, w2]))


@pytest.mark.parametrize("shape,unpadded,block", [((16, 256), (16, 256), (8, 128)),
                                                  ((2, 8, 256), (2, 5, 200), (8, 128))])
def test_philox_kernel_blocks_hash_the_unpadded_flat_index(shape, unpadded, block):
    key = jnp.asarray([3, 4], jnp.uint32)
    got = np.asarray(philox.philox_4x32_kernel(key, shape, unpadded, block, offset=7))
    size = int(np.prod(unpadded))
    w1, w2 = _philox_words([3, 4], jnp.asarray(np.arange(size, dtype=np.uint32) + 7))
    want = (np.asarray(w1) ^ np.asarray(w2)).reshape(unpadded)
    np.testing.assert_array_equal(got[tuple(slice(0, d) for d in unpadded)], want)


def test_pallas_philox_key_splits_folds_and_samples():
    key = random.key(0, impl="pallas_philox4x32")
    data = np.asarray(random.key_data(key))
    k1, k2 = random.split(key)
    folded = random.fold_in(key, 2)
    w1, w2 = _philox_words(data, jnp.asarray(np.array([0, 1, 2], np.uint32)))
    np.testing.assert_array_equal(random.key_data(k1), [w1[0], w2[0]])
    np.testing.assert_array_equal(random.key_data(k2), [w1[1], w2[1]])
    np.testing.assert_array_equal(random.key_data(folded), [w1[2], w2[2]])
    u = np.asarray(random.uniform(key, (300,)))
    assert u.min() >= 0.0 and u.max() < 1.0 and len(np.unique(u)) == 300


def test_blocked_iota_and_scalar_offset_give_flat_indices():
    total, block = (6, 10), (3, 5)
    flat = np.arange(60).reshape(total)
    for i in range(2):
        for j in range(2):
            start = prng_utils.compute_scalar_offset((i, j), total, block)
            got = np.asarray(prng_utils.blocked_iota(block, total)) + start
            np.testing.assert_array_equal(got, flat[3 * i:3 * i + 3, 5 * j:5 * j + 5])
    assert prng_utils.round_up(137, 256) == 256 and prng_utils.round_up(512, 256) == 512


def test_bad_requests_raise():
    with pytest.raises(ValueError, match="Only 32-bit PRNG supported"):
        threefry.plthreefry_random_bits(jnp.zeros((2,), jnp.uint32), 16, (4,))
    with pytest.raises(ValueError, match="must be divisible by"):
        threefry.threefry_2x32_count(jnp.zeros((2,), jnp.uint32), (8, 100), (8, 100),
                                     (8, 128))
    with pytest.raises(ValueError, match="already registered"):
        from plax._src.random import prng
        prng.register_prng(threefry.plthreefry_prng_impl)


def test_the_kernels_lower_for_tpu(monkeypatch):
    monkeypatch.setattr(plax, "default_backend", lambda: "tpu")  # (compiled, not interpreted)
    key = jnp.zeros((2,), jnp.uint32)
    for fn in (lambda k: threefry.plthreefry_random_bits(k, 32, (300, 20)),
               lambda k: philox.philox_4x32_count(k, (2, 8, 256), fuse_output=False)):
        text = plax.jit(fn).trace(key).lower(lowering_platforms=("tpu",)).as_text()
        assert text.count("tpu_custom_call") == 1
