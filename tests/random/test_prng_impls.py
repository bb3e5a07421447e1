"""The 'rbg' and 'unsafe_rbg' PRNG implementations and the flags that choose implementations
(default_prng_impl, enable_custom_prng, legacy_prng_key). Expected words are what JAX 0.10.2
gives on CPU for the same calls."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import random

IMPLS = ["rbg", "unsafe_rbg"]
TAGS = {"rbg": "rbg", "unsafe_rbg": "urbg"}

# random.bits(key(42, impl=...), (5,), dtype): the same for both (one generator run).
BITS_42 = {np.uint8: [210, 89, 227, 186, 234], np.uint16: [14546, 58969, 995, 41146, 59882],
           np.uint32: [2620864722, 2991908441, 282133475, 2589630650, 1779689962]}
SPLIT_42 = {  # key_data(split(key(42), (2, 2)))[..., first two words]
    "rbg": [[[1832780943, 270669613], [64467757, 2916123636]],
            [[2465931498, 255383827], [3134548294, 894150801]]],
    "unsafe_rbg": [[[2620864722, 2991908441], [4105776319, 298289174]],
                   [[3163845003, 1288433488], [121532186, 92310596]]]}
FOLD_42_7 = {"rbg": [2547012911, 1371500959, 2547012911, 1371500959],
             "unsafe_rbg": [2104303640, 250182049, 1106406590, 1983638428]}
# vmap(lambda k: uniform(k, (2,)))(split(key(42), 3)): JAX draws the whole batch from the
# first key (its batching of the generator), so rows 2 and 3 continue row 1's stream.
VMAPPED_UNIFORM = {"rbg": [[0.42528594, 0.95074904], [0.47966552, 0.2092359],
                           [0.87912536, 0.85283613]],
                   "unsafe_rbg": [[0.6102668, 0.25864732], [0.3331958, 0.7897067],
                                  [0.09988487, 0.836921]]}
RANDINT_42 = {"rbg": [1, 0, 5], "unsafe_rbg": [9, 1, 9]}
PERMUTATION_42 = {"rbg": [2, 1, 3, 4, 5, 0], "unsafe_rbg": [4, 3, 0, 2, 1, 5]}


@pytest.mark.parametrize("impl", IMPLS)
def test_keys_have_jax_s_shape_and_words(impl):
    k = random.key(7, impl=impl)
    assert k.shape == () and str(k.dtype) == f"key<{TAGS[impl]}>"
    np.testing.assert_array_equal(random.key_data(k), [0, 7, 0, 7])
    seeds = random.key_data(plax.vmap(lambda s: random.key(s, impl=impl))(jnp.arange(3)))
    np.testing.assert_array_equal(seeds, [[0, 0, 0, 0], [0, 1, 0, 1], [0, 2, 0, 2]])
    assert random.key_impl(k) == impl
    wrapped = random.wrap_key_data(np.arange(4, dtype=np.uint32), impl=impl)
    np.testing.assert_array_equal(random.key_data(wrapped), [0, 1, 2, 3])
    with pytest.raises(TypeError, match=r"expected key_data.shape to end with \(4,\)"):
        random.wrap_key_data(np.arange(2, dtype=np.uint32), impl=impl)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", sorted(BITS_42, key=lambda t: np.dtype(t).itemsize))
def test_bits_are_jax_s(impl, dtype):
    b = random.bits(random.key(42, impl=impl), (5,), dtype=dtype)
    assert b.dtype == dtype and b.shape == (5,)
    np.testing.assert_array_equal(b, BITS_42[dtype])


@pytest.mark.parametrize("impl", IMPLS)
def test_split_fold_in_and_samplers_are_jax_s(impl):
    k = random.key(42, impl=impl)
    split = random.key_data(random.split(k, (2, 2)))
    assert split.shape == (2, 2, 4)
    np.testing.assert_array_equal(split[..., :2], SPLIT_42[impl])
    if impl == "rbg":  # each half of the key is split alike
        np.testing.assert_array_equal(split[..., 2:], split[..., :2])
    np.testing.assert_array_equal(random.key_data(random.fold_in(k, 7)), FOLD_42_7[impl])
    np.testing.assert_array_equal(random.randint(k, (3,), 0, 10), RANDINT_42[impl])
    np.testing.assert_array_equal(random.permutation(k, 6), PERMUTATION_42[impl])
    vmapped = plax.vmap(lambda kk: random.uniform(kk, (2,)))(random.split(k, 3))
    np.testing.assert_allclose(vmapped, VMAPPED_UNIFORM[impl], rtol=1e-6)
    jitted = plax.jit(lambda kk: random.bits(kk, (5,)))(k)
    np.testing.assert_array_equal(jitted, BITS_42[np.uint32])


@pytest.mark.parametrize("impl", IMPLS)
def test_moments(impl):
    n = 40_000
    k1, k2 = random.split(random.key(3, impl=impl))
    u = np.asarray(random.uniform(k1, (n,)), np.float64)
    z = np.asarray(random.normal(k2, (n,)), np.float64)
    assert u.min() >= 0 and u.max() < 1
    # Five standard errors: mean 1/2 (sd 0.289), variance 1/12; normal mean 0, variance 1.
    assert abs(u.mean() - 0.5) < 5 * 0.289 / np.sqrt(n)
    assert abs(u.var() - 1 / 12) < 5 * np.sqrt(1 / 180) / np.sqrt(n)
    assert abs(z.mean()) < 5 / np.sqrt(n) and abs(z.var() - 1) < 5 * np.sqrt(2 / n)


def test_uint64_bits_with_x64():
    with plax.enable_x64():
        b = random.bits(random.key(42, impl="rbg"), (3,), dtype=np.uint64)
        assert b.dtype == np.uint64 and b.shape == (3,)
        assert len(set(np.asarray(b).tolist())) == 3


def test_default_prng_impl_switches_key_and_prngkey():
    assert str(random.key(0).dtype) == "key<fry>"
    with plax.default_prng_impl("unsafe_rbg"):
        assert plax.config.jax_default_prng_impl == "unsafe_rbg"
        assert str(random.key(3).dtype) == "key<urbg>"
        legacy = random.PRNGKey(3)
        assert legacy.dtype == np.uint32 and legacy.shape == (4,)
        np.testing.assert_array_equal(legacy, [0, 3, 0, 3])
        assert random.key_impl(legacy) == "unsafe_rbg"
        np.testing.assert_array_equal(random.normal(legacy, (2,)),
                                      random.normal(random.key(3), (2,)))
        np.testing.assert_allclose(random.normal(legacy, (2,)), [0.62100786, 0.8047896],
                                   rtol=1e-6)
        with pytest.raises(TypeError, match=r"expected key_data.shape to end with \(4,\)"):
            random.normal(np.zeros(2, np.uint32))
    assert str(random.key(0).dtype) == "key<fry>" and random.PRNGKey(0).shape == (2,)
    with pytest.raises(ValueError, match="must be one of"):
        with plax.default_prng_impl("philox8x32"):
            pass
    with pytest.raises(TypeError, match="requires an argument"):
        plax.default_prng_impl()


def test_enable_custom_prng_and_legacy_prng_key():
    with plax.enable_custom_prng():
        k = random.PRNGKey(0)
        assert str(k.dtype) == "key<fry>" and k.shape == ()
        np.testing.assert_array_equal(random.key_data(random.split(k)),
                                      [[1797259609, 2579123966], [928981903, 3453687069]])
    assert random.PRNGKey(0).dtype == np.uint32
    with plax.legacy_prng_key("error"):
        with pytest.raises(ValueError, match="Legacy uint32 key array passed"):
            random.uniform(random.PRNGKey(0))
        random.uniform(random.key(0))  # typed keys are fine
    with pytest.raises(TypeError, match="requires an argument"):
        plax.legacy_prng_key()


def test_unknown_impl_is_refused():
    with pytest.raises(ValueError, match='unrecognized PRNG implementation "philox8x32"'):
        random.key(0, impl="philox8x32")
