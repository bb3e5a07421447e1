"""ShapedArray: shapes that cannot exist are rejected in Python, before XLA sees them."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core.avals import ShapedArray

HUGE = (2 ** 62, 2 ** 62)


def test_ordinary_shapes():
    a = ShapedArray((2, 3), np.float32)
    assert a.shape == (2, 3) and a.size == 6 and a.ndim == 2
    assert ShapedArray((), np.int32).shape == ()
    assert ShapedArray((0, 5), np.float32).size == 0
    # the largest byte size that fits
    assert ShapedArray((2 ** 61 - 1,), np.float32).size == 2 ** 61 - 1
    assert ShapedArray((2 ** 63 - 1,), np.int8).size == 2 ** 63 - 1


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # NumPy's own product
def test_numpy_integer_sizes_become_python_ints():
    a = ShapedArray((np.int64(2), np.int32(3)), np.float32)
    assert a.shape == (2, 3) and all(type(d) is int for d in a.shape)
    assert a == ShapedArray((2, 3), np.float32) and hash(a) == hash(ShapedArray((2, 3), np.float32))
    # numpy ints would wrap around silently in the size product
    with pytest.raises(ValueError, match="too large to exist"):
        ShapedArray((np.int64(2 ** 62), np.int64(4)), np.int8)


@pytest.mark.parametrize("shape,dtype", [
    (HUGE, np.float32),
    ((2 ** 64,), np.float32),
    ((2 ** 61,), np.float32),          # 2**63 bytes
    ((2 ** 60, 8), np.int8),           # 2**63 elements
    ((2 ** 62, 2 ** 62, 0), np.float32),  # XLA multiplies the sizes before it sees the 0
])
def test_sizes_overflowing_int64_raise_value_error(shape, dtype):
    with pytest.raises(ValueError, match=r"Shape \(.*\) of dtype .* is too large to exist.*int64"):
        ShapedArray(shape, dtype)


@pytest.mark.parametrize("shape", [(-1,), (2, -3), (-1, -1), (0, -2)])
def test_negative_sizes_raise_type_error(shape):
    # a TypeError, as JAX's shape rules raise for negative sizes
    with pytest.raises(TypeError, match="every element be nonnegative"):
        ShapedArray(shape, np.float32)


def test_non_integer_sizes():
    with pytest.raises(TypeError, match="Shapes must be 1D sequences of concrete values of integer"):
        ShapedArray((2.5,), np.float32)


def test_huge_zeros_raises_instead_of_aborting():
    # This used to abort the whole process inside XLA ("overflow in static extent product").
    with pytest.raises(ValueError, match="too large to exist"):
        jnp.zeros(HUGE)
    with pytest.raises(ValueError, match="too large to exist"):
        plax.jit(lambda: jnp.zeros(HUGE))()
    with pytest.raises(ValueError, match="too large to exist"):
        plax.eval_shape(lambda: jnp.ones(HUGE))
    with pytest.raises(ValueError, match="too large to exist"):
        lax.broadcast_in_dim(np.float32(1), HUGE, ())
    with pytest.raises(ValueError, match="too large to exist"):
        plax.jit(lambda x: jnp.tile(x, (2 ** 40, 2 ** 40)))(jnp.ones(2))
    with pytest.raises(ValueError, match="too large to exist"):
        lax.iota(np.int32, 2 ** 64)
    # and nothing broke: ordinary work goes on
    np.testing.assert_array_equal(np.asarray(jnp.zeros((2, 2))), np.zeros((2, 2), np.float32))


@pytest.mark.parametrize("make", [
    lambda: jnp.zeros((-1,)),
    lambda: jnp.ones((2, -3)),
    lambda: jnp.full((-2,), 1.0),
    lambda: jnp.empty((-1, 2)),
    lambda: jnp.zeros_like(jnp.ones(2), shape=(-1,)),
    lambda: lax.broadcast_in_dim(np.float32(1), (-1,), ()),
    lambda: lax.full((-1,), 0.0),
    lambda: plax.jit(lambda: jnp.zeros((3, -1)))(),
])
def test_negative_sizes_at_the_entry_points(make):
    with pytest.raises(TypeError, match="must have every element be nonnegative"):
        make()


def test_eye_negative_is_a_value_error_as_in_jax():
    with pytest.raises(ValueError, match="negative dimensions are not allowed"):
        jnp.eye(-1)
    with pytest.raises(ValueError, match="negative dimensions are not allowed"):
        jnp.eye(2, -1)


@pytest.mark.parametrize("shape,error,match", [
    ((-1, 3), TypeError, "every element be nonnegative"),
    (HUGE, ValueError, "too large to exist"),
    ((2.5,), TypeError, "Shapes must be 1D sequences"),
])
def test_update_checks_a_new_shape(shape, error, match):
    with pytest.raises(error, match=match):
        ShapedArray((2, 3), np.float32).update(shape=shape)


def binop_aval(op, x, y):
    return plax.make_jaxpr(op)(x, y).jaxpr.outvars[0].aval


def test_unchecked_constructions_equal_checked_ones():
    # update's fast path, abstractify of Python and NumPy values, and binary op results skip
    # ShapedArray()'s checks: they must build the same avals (fields, equality, hash).
    from plax.core.avals import abstractify
    made = [
        (ShapedArray((2, 3), np.float32).update(shape=[np.int64(3), 2], weak_type=1),
         ShapedArray((3, 2), np.float32, True)),
        (abstractify(2.0), ShapedArray((), np.float32, True)),
        (abstractify(True), ShapedArray((), np.bool_)),
        (abstractify(np.zeros((4, 0), np.int8)), ShapedArray((4, 0), np.int8)),
        (binop_aval(lax.lt, np.ones((2, 1), np.float32), np.float32(1)),
         ShapedArray((2, 1), np.bool_)),
        (binop_aval(lax.add, 1.0, 2.0), ShapedArray((), np.float32, True)),
    ]
    for got, want in made:
        assert got == want and hash(got) == hash(want), (got, want)
        assert all(type(d) is int for d in got.shape) and type(got.weak_type) is bool
        assert got.dtype == want.dtype and got.manual_axis_type is want.manual_axis_type


def test_a_replicated_sharding_given_to_a_type_is_no_sharding():
    # flax's scan rebuilds its carries' avals with ``sharding=x.aval.sharding`` (the replicated
    # sharding the property gives): that is the plain type, so a jit inside does not retrace.
    plain = ShapedArray((4, 3), np.float32)
    given = ShapedArray((4, 3), np.float32, sharding=plain.sharding)
    assert given == plain and hash(given) == hash(plain) and given._sharding is None
    assert str(given) == "float32[4,3]"
    with pytest.raises(ValueError, match="one entry per dimension"):
        ShapedArray((4,), np.float32, sharding=plain.sharding)
