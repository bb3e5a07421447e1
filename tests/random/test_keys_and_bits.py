"""plax.random keys, split, fold_in, bits, uniform and normal: bit for bit JAX 0.10.2's values
for fixed seeds (hard-coded here as the reference), in both threefry layouts, eagerly and
under jit and vmap."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import random

# JAX 0.10.2, jax_threefry_partitionable=True (the default).
SPLIT_0 = [[1797259609, 2579123966], [928981903, 3453687069]]
SPLIT_42_3 = [[1832780943, 270669613], [64467757, 2916123636], [2465931498, 255383827]]
SPLIT_0_2x2 = [[[1797259609, 2579123966], [928981903, 3453687069]],
               [[4146024105, 2718843009], [2467461003, 3840466878]]]
FOLD_0_3 = [2467461003, 3840466878]
FOLD_7_BIG = [3129736998, 445282630]          # fold_in(PRNGKey(7), 2**31 + 5)
BITS_0 = [4070199207, 4202968722, 1427181096, 2012915765, 2447653815]
BITS8_0 = [167, 146, 40, 53, 183, 67, 125]
UNIFORM_0 = [0.9476670026779175, 0.9785798788070679, 0.33229148387908936, 0.46866846084594727]
NORMAL_0 = [1.622642159461975, 2.0252647399902344, -0.4335944354534149, -0.07861734926700592,
            0.17609089612960815]
NORMAL_C64_2 = [(0.24647463858127594 + 1.857014536857605j),
                (0.2588290274143219 + 0.01543897669762373j)]  # normal(PRNGKey(2), (2,), complex64)
# jax_threefry_partitionable=False (JAX's original layout).
SPLIT_0_OLD = [[4146024105, 967050713], [2718843009, 1272950319]]
BITS_0_OLD = [2467461003, 428148500, 1688610540, 3840466878, 2562233961]
UNIFORM_0_OLD = [0.96532142162323, 0.2251589298248291, 0.6330299377441406, 0.2963818311691284]


def as_list(x):
    return np.asarray(x).tolist()


@pytest.mark.parametrize("seed,want", [(0, [0, 0]), (42, [0, 42]), (-1, [0, 4294967295]),
                                       (2 ** 32 + 7, [0, 7]), (np.int32(-5), [0, 4294967291])])
def test_prng_key_from_seeds(seed, want):
    key = random.PRNGKey(seed)
    assert key.dtype == np.uint32 and as_list(key) == want


def test_prng_key_errors():
    with pytest.raises(TypeError, match="PRNGKey accepts a scalar seed"):
        random.PRNGKey(np.arange(2))
    with pytest.raises(TypeError, match="PRNG key seed must be an integer"):
        random.PRNGKey(1.5)
    with pytest.raises(ValueError, match="accepts a single key"):
        random.normal(random.split(random.PRNGKey(0)), (2,))
    with pytest.raises(ValueError, match="dtype argument to `uniform` must be a float dtype"):
        random.uniform(random.PRNGKey(0), (2,), jnp.int32)
    with pytest.raises(ValueError, match="dtype argument to `bits` must be an unsigned int"):
        random.bits(random.PRNGKey(0), (2,), jnp.int32)
    # Python seeds must fit int64, as NumPy converts them
    assert as_list(random.PRNGKey(2 ** 63 - 1)) == [0, 2 ** 32 - 1]
    for seed in (2 ** 63, 2 ** 64 - 1, -2 ** 63 - 1):
        with pytest.raises(OverflowError, match="Python int too large to convert to C long"):
            random.key(seed)


def test_element_indices_past_2_32_are_64_bit():
    """The counters of arrays of more than 2**32 elements are 64-bit row-major indices,
    computed as uint32 (high, low) word pairs."""
    from plax.random import threefry
    hi, lo = threefry.iota_2x32((3, 4, 5), wide=True)
    assert not np.any(hi) and as_list(lo) == np.arange(60).reshape(3, 4, 5).tolist()
    x = np.array([0, 1, 7, 2 ** 31, 2 ** 32 - 1], np.uint32)
    for c in (1, 12345, 2 ** 32 - 1, 2 ** 32, 2 ** 40 + 98765, 2 ** 64 - 1):
        hi, lo = threefry.times_u64(x, c)
        got = [(h << 32) | w for h, w in zip(as_list(hi), as_list(lo))]
        assert got == [int(v) * c % 2 ** 64 for v in x]
    a = (np.array([0, 1, 2 ** 32 - 1], np.uint32), np.array([2 ** 32 - 1, 2 ** 31, 5], np.uint32))
    b = (np.array([0, 3, 0], np.uint32), np.array([1, 2 ** 31, 2 ** 32 - 1], np.uint32))
    assert [as_list(w) for w in threefry.add_u64(a, b)] == [[1, 5, 0], [0, 0, 4]]
    # a draw of 2**35 elements lowers (running it would need 64 GiB)
    lowered = plax.jit(lambda: random.uniform(random.key(3), (2 ** 20, 2 ** 15))).lower()
    assert "stablehlo" in lowered.as_text()


def test_split_fold_in_bits_uniform_normal_match_jax():
    k = random.PRNGKey(0)
    assert as_list(random.split(k)) == SPLIT_0
    assert as_list(random.split(random.PRNGKey(42), 3)) == SPLIT_42_3
    assert as_list(random.split(k, (2, 2))) == SPLIT_0_2x2
    assert as_list(random.fold_in(k, 3)) == FOLD_0_3
    assert as_list(random.fold_in(random.PRNGKey(7), 2 ** 31 + 5)) == FOLD_7_BIG
    assert as_list(random.bits(k, (5,))) == BITS_0
    b8 = random.bits(k, (7,), jnp.uint8)
    assert b8.dtype == np.uint8 and as_list(b8) == BITS8_0
    u = random.uniform(k, (4,))
    assert u.dtype == np.float32 and as_list(u) == UNIFORM_0
    assert as_list(random.normal(k, (5,))) == NORMAL_0
    assert as_list(random.normal(random.PRNGKey(2), (2,), jnp.complex64)) == NORMAL_C64_2


def test_original_layout_matches_jax_with_the_flag_off():
    k = random.PRNGKey(0)
    with plax.config.override("threefry_partitionable", False):
        assert as_list(random.split(k)) == SPLIT_0_OLD
        assert as_list(random.bits(k, (5,))) == BITS_0_OLD
        assert as_list(random.uniform(k, (4,))) == UNIFORM_0_OLD
    assert as_list(random.split(k)) == SPLIT_0  # the default again


def test_jit_and_vmap_give_the_same_numbers():
    k = random.PRNGKey(0)
    assert as_list(plax.jit(lambda k: random.normal(k, (5,)))(k)) == NORMAL_0
    keys = random.split(k, 4)
    batched = plax.vmap(lambda k: random.normal(k, (3,)))(keys)
    loop = np.stack([np.asarray(random.normal(keys[i], (3,))) for i in range(4)])
    np.testing.assert_array_equal(np.asarray(batched), loop)
    folded = plax.vmap(lambda d: random.fold_in(k, d))(jnp.arange(3))
    assert as_list(folded[0]) == as_list(random.fold_in(k, 0))


def test_uniform_range_dtypes_and_moments():
    k = random.PRNGKey(1)
    u = random.uniform(k, (20000,), minval=-2.0, maxval=3.0)
    assert float(u.min()) >= -2.0 and float(u.max()) < 3.0
    assert abs(float(u.mean()) - 0.5) < 0.05
    for dt in (jnp.float16, jnp.bfloat16, jnp.float32):
        v = random.uniform(k, (1000,), dt)
        assert v.dtype == dt and 0.0 <= float(v.min()) and float(v.max()) < 1.0
    n = random.normal(k, (20000,))
    assert abs(float(n.mean())) < 0.03 and abs(float(n.std()) - 1.0) < 0.03
    z = random.normal(k, (20000,), jnp.complex64)
    assert z.dtype == np.complex64 and abs(float(jnp.mean(jnp.abs(z) ** 2)) - 1.0) < 0.05


def test_key_and_data_errors_as_jax_words_them():
    with pytest.raises(TypeError, match="unexpected PRNG key type <class 'list'>"):
        random.normal([0, 1], (2,))
    with pytest.raises(TypeError, match=r"expected key_data.shape to end with \(2,\); got "
                                        r"shape=\(3,\)"):
        random.normal(np.array([0, 1, 2], np.uint32), (2,))
    with pytest.raises(TypeError, match="expected key_data.dtype = uint32; got dtype=int32"):
        random.normal(np.array([0, 1], np.int32), (2,))
    with pytest.raises(OverflowError, match="Python integer -1 out of bounds for uint32"):
        random.fold_in(random.PRNGKey(0), -1)
    assert as_list(random.PRNGKey(True)) == [0, 1]  # a bool seed is the int 1, as in JAX
