"""rng_bit_generator (JAX 0.10.2's bits from XLA's RngBitGenerator, per algorithm) and
rng_uniform (XLA's unkeyed generator): shapes, dtypes, the advanced key, jit and vmap."""
import numpy as np
import pytest

import plax
from plax import lax

KEY = np.array([1, 2, 3, 4], np.uint32)
# JAX 0.10.2 on CPU: (algorithm, dtype, shape) -> (new key, bits).
JAX_VALUES = [
    (lax.RandomAlgorithm.RNG_DEFAULT, np.uint32, (2, 3), [1, 2, 5, 4],
     [[512747620, 1298009047, 1267190206], [761827841, 1383286907, 1639995030]]),
    (lax.RandomAlgorithm.RNG_THREE_FRY, np.uint32, (2, 3), [1, 2, 6, 4],
     [[1576285164, 740599976, 2436392515], [2249660814, 2425682526, 1497962777]]),
    (lax.RandomAlgorithm.RNG_PHILOX, np.uint32, (2, 3), [1, 2, 5, 4],
     [[512747620, 1298009047, 1267190206], [761827841, 1383286907, 1639995030]]),
    (lax.RandomAlgorithm.RNG_DEFAULT, np.uint8, (3,), [1, 2, 4, 4], [100, 215, 190]),
    (lax.RandomAlgorithm.RNG_DEFAULT, np.uint16, (2,), [1, 2, 4, 4], [59492, 3031]),
]


@pytest.mark.parametrize("algorithm,dtype,shape,new_key,bits", JAX_VALUES,
                         ids=[f"{r[0]}-{np.dtype(r[1]).name}" for r in JAX_VALUES])
def test_bits_match_jax(algorithm, dtype, shape, new_key, bits):
    f = lambda k: lax.rng_bit_generator(k, shape, dtype, algorithm)  # noqa: E731
    for k, b in (f(KEY), plax.jit(f)(KEY)):
        assert b.dtype == np.dtype(dtype) and b.shape == shape and k.dtype == np.uint32
        np.testing.assert_array_equal(np.asarray(k), new_key)
        np.testing.assert_array_equal(np.asarray(b), bits)
    assert [e.primitive for e in plax.make_jaxpr(f)(KEY).jaxpr.eqns] == [lax.rng_bit_generator_p]


def test_vmap_draws_from_the_first_key_as_jax_does():
    keys, bits = plax.vmap(lambda k: lax.rng_bit_generator(k, (3,)))(np.stack([KEY, KEY + 1]))
    np.testing.assert_array_equal(np.asarray(keys), [[1, 2, 5, 4], [2, 3, 4, 5]])
    np.testing.assert_array_equal(np.asarray(bits), JAX_VALUES[0][4])


def test_uniform_bits_statistics():
    _, bits = lax.rng_bit_generator(KEY, (20000,))
    u = np.asarray(bits).astype(np.float64) / 2.0 ** 32
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005


@pytest.mark.parametrize("call,exc,match", [
    (lambda: lax.rng_bit_generator(KEY, (3,), np.float32), TypeError, "unsupported dtype float32"),
    (lambda: lax.rng_bit_generator(KEY, (3,), np.int32), TypeError, "unsupported dtype int32"),
    (lambda: lax.rng_bit_generator(KEY[:2], (3,)), TypeError, "key must be a uint32"),
    (lambda: lax.rng_uniform(np.zeros(2, np.float32), 1.0, (3,)), ValueError,
     "Arguments to rng_uniform must be scalars"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_rng_uniform():
    u = lax.rng_uniform(0.0, 1.0, (1000,))
    assert u.shape == (1000,) and u.dtype == np.float32 and u.aval.weak_type
    v = np.asarray(u)
    assert v.min() >= 0 and v.max() < 1 and abs(v.mean() - 0.5) < 0.05
    i = np.asarray(plax.jit(lambda: lax.rng_uniform(2, 5, (100,)))())
    assert i.dtype == np.int32 and i.min() >= 2 and i.max() < 5
    assert [e.primitive for e in plax.make_jaxpr(
        lambda: lax.rng_uniform(0.0, 1.0, (2,)))().jaxpr.eqns] == [lax.rng_uniform_p]
