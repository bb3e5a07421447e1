"""lax.full and lax.full_like: dtype and weak type of the fill value, shapes, errors."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax


@pytest.mark.parametrize("fill,dtype,expected,weak", [
    (1, None, np.int32, True),
    (1.5, None, np.float32, True),
    (True, None, np.bool_, False),
    (np.float16(2), None, np.float16, False),
    (2.5, np.int32, np.int32, False),
    (2, bool, np.bool_, False),
    (3, np.uint8, np.uint8, False),
])
def test_full_dtypes(fill, dtype, expected, weak):
    out = lax.full((2, 3), fill, dtype)
    assert out.shape == (2, 3) and out.dtype == expected and out.weak_type == weak
    np.testing.assert_array_equal(np.asarray(out), np.full((2, 3), fill).astype(expected))


def test_full_shapes_and_traced_values():
    assert lax.full((), 2.0).shape == ()
    assert lax.full(4, 0).shape == (4,)
    out = plax.jit(lambda v: lax.full((2,), v))(3.0)
    np.testing.assert_array_equal(np.asarray(out), [3.0, 3.0])
    assert out.weak_type  # a Python float argument stays weak
    out = lax.full((2,), jnp.asarray(np.float16(1.5)))
    assert out.dtype == np.float16
    # Python ints wrap around when converted, like any conversion
    np.testing.assert_array_equal(np.asarray(lax.full(2, 2 ** 32 + 5, np.int32)), [5, 5])


def test_full_with_device():
    d = plax.devices()[1]
    out = lax.full((2,), 1.0, sharding=plax.sharding.SingleDeviceSharding(d))
    assert out.devices() == {d}


def test_full_like():
    x = jnp.ones((2, 2), np.int32)
    out = lax.full_like(x, 2.7)
    assert out.dtype == np.int32 and out.shape == (2, 2)
    np.testing.assert_array_equal(np.asarray(out), np.full((2, 2), 2, np.int32))
    assert lax.full_like(x, 1, np.float16).dtype == np.float16
    assert lax.full_like(x, 1, shape=(3,)).shape == (3,)
    weak = jnp.asarray(1.0) * 2  # weakly typed
    assert lax.full_like(weak, 5).weak_type
    assert not lax.full_like(np.float32(1), 5).weak_type


def test_full_errors():
    with pytest.raises(TypeError, match=r"full must be called with scalar fill_value, got "
                                        r"fill_value.shape \(2,\)"):
        lax.full((2,), np.ones(2))
    with pytest.raises(TypeError, match="must have every element be nonnegative"):
        lax.full((-1, 2), 0.0)
    with pytest.raises(TypeError, match="Shapes must be 1D sequences of concrete values"):
        lax.full("a", 0.0)
    with pytest.raises(TypeError, match="Shapes must be 1D sequences of concrete values"):
        plax.jit(lambda n: lax.full((n,), 0.0))(3)
    with pytest.raises(TypeError, match="is not a valid JAX array type"):
        lax.full((2,), 0.0, np.object_)
