"""The threefry4x32, philox2x32 and philox4x32 PRNGs: their hashes against Random123's
known-answer vectors, and their keys and bits against what JAX 0.10.2 gives on CPU."""
import numpy as np
import pytest

import plax
from plax import random
from plax.first_order.counter_hashes import philox2x32_p, philox4x32_p, threefry4x32_p

F = 0xFFFFFFFF
KAT = [  # (primitive, key words + counter words, hashed words): Random123's kat_vectors
    (threefry4x32_p, [0] * 8, [0x9C6CA96A, 0xE17EAE66, 0xFC10ECD4, 0x5256A7D8]),
    (threefry4x32_p, [F] * 8, [0x2A881696, 0x57012287, 0xF6C7446E, 0xA16A6732]),
    (philox2x32_p, [0] * 3, [0xFF1DAE59, 0x6CD10DF2]),
    (philox2x32_p, [F] * 3, [0x2C3F628B, 0xAB4FD7AD]),
    (philox2x32_p, [0x13198A2E, 0x243F6A88, 0x85A308D3], [0xDD7CE038, 0xF62A4C12]),
    (philox4x32_p, [0] * 6, [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    (philox4x32_p, [0xA4093822, 0x299F31D0, 0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
]


@pytest.mark.parametrize("prim,words,expected", KAT)
def test_hashes_match_known_answers(prim, words, expected):
    out = prim.bind(*[np.uint32(w) for w in words])
    np.testing.assert_array_equal(np.asarray(out, np.uint32), np.asarray(expected, np.uint32))
    # a batch of counters hashes elementwise, each as alone
    batched = prim.bind(*[np.full((3,), w, np.uint32) for w in words])
    np.testing.assert_array_equal(np.asarray(batched)[:, 1], np.asarray(expected, np.uint32))


def test_hash_refuses_other_dtypes_and_arities():
    with pytest.raises(TypeError, match="philox2x32 requires uint32 arguments"):
        philox2x32_p.bind(np.int32(0), np.uint32(0), np.uint32(0))
    with pytest.raises(TypeError, match="philox4x32 takes 6 arguments, got 3"):
        philox4x32_p.bind(*[np.uint32(0)] * 3)


# JAX 0.10.2 on CPU, for key(7, impl=...): key_data, key_data(split(k, 3))[:, 0],
# key_data(fold_in(k, 5)), bits(k, (3,)), bits(k, (2,), uint8), bits(k, (2,), uint64).
JAX_7 = {
    "threefry4x32": ("fry4", [4192117462, 4011273671, 3705849684, 2559306090],
                     [1943616406, 242730383, 2675653867],
                     [2369109050, 1296250655, 393845505, 1615665431],
                     [913164468, 1624920463, 412397562], [180, 143],
                     [17109989893676674451, 9528326259287866288]),
    "philox2x32": ("phx2", [2193621824], [2904543977, 3512304938, 3934541079], [2831481926],
                   [1393916649, 765423610, 1943221496], [233, 250],
                   [12474921395270887424, 15085234846530202320]),
    "philox4x32": ("phx4", [1801635674, 389949022], [3390616171, 3426512584, 702893947],
                   [252809835, 1528754437], [1496596757, 1056680277, 1600364730], [21, 85],
                   [14562585570279071781, 2471319663975561974]),
}


@pytest.mark.parametrize("impl", sorted(JAX_7))
def test_keys_and_bits_are_jax_s(impl):
    tag, data, split0, folded, bits, bits8, bits64 = JAX_7[impl]
    k = random.key(7, impl=impl)
    assert str(k.dtype) == f"key<{tag}>" and random.key_impl(k) == impl
    np.testing.assert_array_equal(random.key_data(k), data)
    np.testing.assert_array_equal(random.key_data(random.split(k, 3))[:, 0], split0)
    np.testing.assert_array_equal(random.key_data(random.fold_in(k, 5)), folded)
    np.testing.assert_array_equal(random.bits(k, (3,)), bits)
    np.testing.assert_array_equal(random.bits(k, (2,), np.uint8), bits8)
    with plax.enable_x64(True):
        np.testing.assert_array_equal(random.bits(k, (2,), np.uint64),
                                      np.array(bits64, np.uint64))


@pytest.mark.parametrize("impl", sorted(JAX_7))
def test_batched_keys_act_as_each_key_alone(impl):
    keys = random.split(random.key(7, impl=impl), 3)
    for i in range(3):
        np.testing.assert_array_equal(plax.vmap(lambda k: random.bits(k, (4,)))(keys)[i],
                                      random.bits(keys[i], (4,)))
        np.testing.assert_array_equal(random.key_data(plax.vmap(random.split)(keys))[i],
                                      random.key_data(random.split(keys[i], 2)))
        np.testing.assert_array_equal(
            random.key_data(plax.vmap(random.fold_in)(keys, np.arange(3)))[i],
            random.key_data(random.fold_in(keys[i], i)))
    # split(k, n) is fold_in(k, i) for i < n, as in JAX
    folded = plax.vmap(lambda i: random.fold_in(keys[0], i))(np.arange(4))
    np.testing.assert_array_equal(random.key_data(folded),
                                  random.key_data(random.split(keys[0], 4)))


def test_default_impl_flag_takes_them():
    with plax.default_prng_impl("philox4x32"):
        np.testing.assert_array_equal(random.PRNGKey(3), [3509165040, 3569804951])
