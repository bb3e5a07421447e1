"""The Threefry-2x32 hash primitive: published known-answer values, JAX's outputs, and its
behaviour under jit and vmap."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.rules import lowering_rule
from plax.first_order import prng
from plax.first_order.prng import threefry2x32, threefry2x32_p
from plax.higher_order import loops
from plax import random

U32 = np.uint32

# Known-answer tests of Threefry-2x32 with 20 rounds, from the Random123 distribution:
# (key, counter) -> hashed counter.
KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6b200159, 0x99ba4efe)),
    ((0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff), (0x1cb996fc, 0xbb002be7)),
    ((0x13198a2e, 0x03707344), (0x243f6a88, 0x85a308d3), (0xc4923a9c, 0x483df7a0)),
]

# JAX 0.10.2's threefry2x32 of key (42, 7) on the counters (0..5, 6..11), and of key (43, 7).
JAX_KEY_42_7 = ([4278347828, 2234853221, 1975730072, 408536382, 619556139, 804394802],
                [10298914, 1675854452, 717676857, 2576236817, 2333741145, 943705280])
JAX_KEY_43_7 = ([3706277276, 782000526, 719533342, 2489954267, 1095918537, 2661453435],
                [609967304, 816918490, 2754427138, 3775097269, 2742385462, 4170593644])
X1, X2 = np.arange(6, dtype=U32), np.arange(6, 12, dtype=U32)


@pytest.mark.parametrize("key,counter,expected", KNOWN_ANSWERS)
def test_known_answers(key, counter, expected):
    out = threefry2x32(U32(key[0]), U32(key[1]), U32(counter[0]), U32(counter[1]))
    assert [int(v) for v in out] == list(expected)


def test_matches_jax_eagerly_and_under_jit():
    for fn in (threefry2x32, plax.jit(threefry2x32)):
        out = fn(U32(42), U32(7), X1, X2)
        assert [np.asarray(v).tolist() for v in out] == list(JAX_KEY_42_7)
        assert all(np.asarray(v).dtype == U32 for v in out)


def test_vmap_over_keys_equals_the_loop():
    keys = np.array([42, 43], U32)
    out = plax.vmap(threefry2x32, (0, None, None, None))(keys, U32(7), X1, X2)
    np.testing.assert_array_equal(np.asarray(out[0]), [JAX_KEY_42_7[0], JAX_KEY_43_7[0]])
    np.testing.assert_array_equal(np.asarray(out[1]), [JAX_KEY_42_7[1], JAX_KEY_43_7[1]])
    # Batched counters, and keys batched along another axis than the counters.
    c1 = np.stack([X1, X1 + 100]).astype(U32)
    out = plax.vmap(threefry2x32, (None, None, 0, None))(U32(42), U32(7), c1, X2)
    np.testing.assert_array_equal(np.asarray(out[0][0]), JAX_KEY_42_7[0])
    loop = threefry2x32(U32(42), U32(7), X1 + U32(100), X2)
    np.testing.assert_array_equal(np.asarray(out[0][1]), np.asarray(loop[0]))


def test_rank0_keys_broadcast_and_shapes_are_checked():
    out = threefry2x32(U32(42), U32(7), X1.reshape(2, 3), X2.reshape(2, 3))
    assert np.asarray(out[0]).shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(out[0]).ravel(), JAX_KEY_42_7[0])
    with pytest.raises(TypeError, match="threefry2x32 requires uint32 arguments"):
        threefry2x32(np.int32(1), U32(2), X1, X2)
    with pytest.raises(TypeError, match="threefry2x32"):
        threefry2x32(U32(1), U32(2), X1, np.arange(5, dtype=U32))


def test_is_one_equation_and_lowers_to_a_loop_on_cpu_and_unrolled_elsewhere():
    jaxpr = plax.make_jaxpr(threefry2x32)(U32(1), U32(2), X1, X2)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns] == ["threefry2x32"]
    # On CPU (as JAX's lowering) the five groups of four rounds are one while loop.
    text = plax.jit(threefry2x32).lower(U32(1), U32(2), X1, X2).as_text()
    assert text.count("stablehlo.while") == 1 and text.count("stablehlo.xor") < 20
    assert lowering_rule(threefry2x32_p, "cuda").fn is prng._rounds
    assert lowering_rule(threefry2x32_p, "cpu").fn is loops._threefry_rolled_rounds


def test_cpu_loop_carries_one_keys_words_as_scalars():
    """As in JAX's program, the loop of random.uniform's hash carries the two counter words
    at full size and the three key words as scalars (broadcast, they were three more
    full-size arrays read and written per group: 2.3x JAX's time for 10M uniforms)."""
    text = plax.jit(lambda k: random.uniform(k, (1000,))).lower(random.key(0)).as_text()
    loop = next(line for line in text.splitlines() if '"stablehlo.while"' in line)
    carried = text.split(loop, 1)[1].split("^bb0(", 1)[1].split(")", 1)[0]
    assert carried.count("tensor<1000xui32>") == 2 and carried.count("tensor<ui32>") == 3
    # batched keys (vmap) are carried at full size, one word array per key word
    text = plax.jit(plax.vmap(lambda k: random.uniform(k, (1000,)))).lower(
        random.split(random.key(0), 4)).as_text()
    loop = next(line for line in text.splitlines() if '"stablehlo.while"' in line)
    carried = text.split(loop, 1)[1].split("^bb0(", 1)[1].split(")", 1)[0]
    assert carried.count("tensor<4x1000xui32>") == 5


def test_cpu_floats_computed_from_the_bits_round_as_jax():
    """With the hash unrolled, XLA fused it into the float code that consumes the normal
    samples and compiled that differently from JAX's program: a kinetic energy one ulp off
    (numpyro's NUTS drifted from JAX's). The values are JAX 0.10.2's."""
    def f(key, pe):
        r = jnp.ones(3) * plax.random.normal(key, (3,))
        ke = 0.5 * jnp.dot(jnp.ones(3) * r, r)
        return r, ke, pe + ke

    key = plax.random.wrap_key_data(np.array([1897440737, 3988497733], U32))
    pe = np.frombuffer(bytes.fromhex("82b602c1"), np.float32)[0]
    for fn in (f, plax.jit(f)):
        r, ke, e = fn(key, pe)
        assert [np.asarray(v).tobytes().hex() for v in (r, ke, e)] == [
            "5bb1b5bfda2701bf49ee96bf", "ad3aea3f", "59decac0"]
