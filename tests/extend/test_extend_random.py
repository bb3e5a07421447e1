"""plax.extend.random: the PRNG implementations as objects, define_prng_impl (a user's
implementation on single keys, used through random.key(impl=...) under jit and vmap) and
the Threefry hash. Expected words are what JAX 0.10.2 gives."""
import math

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import random
from plax.extend import random as xr


def test_surface_is_jax_s():
    assert sorted(n for n in dir(xr) if not n.startswith("_") and n in xr.__all__) == [
        "define_prng_impl", "random_seed", "rbg_prng_impl", "seed_with_impl", "threefry2x32_p",
        "threefry_2x32", "threefry_prng_impl", "unsafe_rbg_prng_impl"]
    for impl, name, tag in [(xr.threefry_prng_impl, "threefry2x32", "fry"),
                            (xr.rbg_prng_impl, "rbg", "rbg"),
                            (xr.unsafe_rbg_prng_impl, "unsafe_rbg", "urbg")]:
        assert (impl.name, impl.tag) == (name, tag)
        assert impl.key_shape == ((2,) if tag == "fry" else (4,))
        assert str(random.key(0, impl=impl).dtype) == f"key<{tag}>"


def test_threefry_hash():
    words = xr.threefry_2x32((np.uint32(1), np.uint32(2)), jnp.arange(5, dtype=jnp.uint32))
    np.testing.assert_array_equal(words, [2052595727, 3504730591, 2527474599, 1880214352,
                                          1914734168])
    grid = xr.threefry_2x32(np.array([1, 2], np.uint32), np.arange(6, dtype=np.uint32).reshape(2, 3))
    np.testing.assert_array_equal(grid, [[2052595727, 3504730591, 1038787879],
                                         [1880214352, 1914734168, 1027009547]])
    a, b = xr.threefry2x32_p.bind(np.uint32(1), np.uint32(2), np.arange(3, dtype=np.uint32),
                                  np.arange(3, dtype=np.uint32))
    np.testing.assert_array_equal(a, [629071667, 2370243775, 2465291277])
    np.testing.assert_array_equal(b, [2343584484, 171891194, 3887034663])
    with pytest.raises(TypeError, match="threefry_2x32 requires uint32 arguments"):
        xr.threefry_2x32((np.uint32(1), np.uint32(2)), jnp.arange(5.0))


def test_random_seed_and_seed_with_impl():
    keys = xr.random_seed(jnp.arange(3), xr.rbg_prng_impl)
    np.testing.assert_array_equal(random.key_data(keys), [[0, 0, 0, 0], [0, 1, 0, 1], [0, 2, 0, 2]])
    np.testing.assert_array_equal(random.key_data(xr.seed_with_impl(xr.threefry_prng_impl, 5)),
                                  [0, 5])


# A toy implementation on single keys of three words (JAX's define_prng_impl contract).
def _seed(s):
    s = jnp.asarray(s).astype(jnp.uint32)
    return jnp.stack([s, s + 1, s + 2])


def _split(k, shape):
    n = math.prod(shape)
    return (k[None, :] + jnp.arange(1, n + 1, dtype=jnp.uint32)[:, None]).reshape(*shape, 3)


def _bits(k, bit_width, shape):
    b = xr.threefry_2x32(k[:2], jnp.arange(math.prod(shape), dtype=jnp.uint32)).reshape(shape)
    return b.astype({8: jnp.uint8, 16: jnp.uint16, 32: jnp.uint32}[bit_width])


TOY = xr.define_prng_impl(key_shape=(3,), seed=_seed, split=_split, fold_in=lambda k, d: k ^ d,
                          random_bits=_bits, name="toy", tag="toy")


def test_define_prng_impl_as_jax_s():
    k = random.key(5, impl=TOY)
    assert str(k.dtype) == "key<toy>" and random.key_impl(k) == "toy"
    np.testing.assert_array_equal(random.key_data(k), [5, 6, 7])
    np.testing.assert_array_equal(random.key_data(random.split(k, 2)), [[6, 7, 8], [7, 8, 9]])
    np.testing.assert_array_equal(random.key_data(random.fold_in(k, 3)), [6, 5, 4])
    np.testing.assert_array_equal(random.bits(k, (4,)),
                                  [3715398119, 3585011447, 1721818882, 10831273])
    np.testing.assert_allclose(random.uniform(k, (3,)), [0.8650584, 0.57092285, 0.40089214],
                               rtol=1e-6)
    batched = plax.vmap(lambda kk: random.bits(kk, (2,)))(random.split(k, 3))
    np.testing.assert_array_equal(batched, [[2613761980, 1206062389], [727937454, 4153487791],
                                            [3204182207, 155230692]])
    jitted = plax.jit(lambda s: random.key_data(random.key(s, impl=TOY)))(7)
    np.testing.assert_array_equal(jitted, [7, 8, 9])
    with pytest.raises(TypeError, match=r"expected key_data.shape to end with \(3,\)"):
        random.wrap_key_data(np.zeros(2, np.uint32), impl=TOY)
