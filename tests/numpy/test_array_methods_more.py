"""Array methods JAX arrays have beyond the operators: view, to_device, ``in``, the Array API
namespace, argpartition/choose, tobytes, flat, DLPack export, and copies that keep layout
and commitment."""
import copy
import warnings

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.sharding import NamedSharding, PartitionSpec


@pytest.mark.parametrize("src,dst,shape", [
    (np.float32, np.int32, (2, 4)), (np.float32, np.uint8, (3,)), (np.uint8, np.uint16, (2, 6)),
    (np.int16, np.float16, (5,)), (np.bool_, np.uint8, (4,)), (np.uint8, np.bool_, (4,)),
])
def test_view_matches_numpy(src, dst, shape):
    host = (np.arange(np.prod(shape)) % 3).astype(src).reshape(shape)
    got = jnp.asarray(host).view(dst)
    want = host.view(dst)
    if dst is np.bool_:
        want = host != 0  # (nonzero bytes read as True, as in JAX)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_view_errors_and_identity():
    x = jnp.arange(3, dtype=jnp.uint8)
    assert x.view() is x and x.view(np.uint8) is x
    with pytest.raises(ValueError, match="its size must be a divisor"):
        x.view(np.uint16)
    with pytest.raises(ValueError, match="view\\(\\) of a 0d array"):
        jnp.float32(1.0).view(np.uint8)
    with pytest.raises(NotImplementedError, match="`type` argument"):
        x.view(np.uint8, type=np.ndarray)
    np.testing.assert_array_equal(plax.jit(lambda a: a.view(np.int32))(jnp.ones(2)),
                                  np.ones(2, np.float32).view(np.int32))


def test_contains_to_device_namespace_and_forwarded_methods():
    x = jnp.arange(6.0)
    assert 3.0 in x and 3.5 not in x
    moved = x.to_device(plax.devices()[1])
    assert moved.devices() == {plax.devices()[1]} and moved.committed
    np.testing.assert_array_equal(moved, np.arange(6.0))
    assert x.__array_namespace__() is jnp and x.__array_namespace__(api_version="2024.12") is jnp
    with pytest.raises(ValueError, match="is not available"):
        x.__array_namespace__(api_version="1999.01")
    a = jnp.array([3, 1, 2, 0])
    part = np.asarray(a.argpartition(1))
    assert sorted(np.asarray(a)[part[:2]]) == [0, 1] and sorted(part) == [0, 1, 2, 3]
    choices = [np.array([1, 2, 3]), np.array([10, 20, 30])]
    np.testing.assert_array_equal(jnp.array([0, 1, 0]).choose(choices),
                                  np.array([0, 1, 0]).choose(choices))


@pytest.mark.needs_devices(2)
def test_device_of_a_sharded_array_is_its_sharding():
    mesh = plax.sharding.Mesh(np.array(plax.devices()[:2]), ("x",))
    sharding = NamedSharding(mesh, PartitionSpec("x"))
    x = jnp.ones((2, 10))
    assert x.device == plax.devices()[0]
    spread = x.to_device(sharding)
    assert spread.device == sharding and plax.device_put(x, sharding).device == sharding
    np.testing.assert_array_equal(spread, np.ones((2, 10)))
    assert x.to_device(plax.devices()[-1]).device == plax.devices()[-1]


def test_an_array_as_a_dtype_is_deprecated():
    x = jnp.arange(4)
    with pytest.warns(DeprecationWarning, match="Implicit conversion of an array to a dtype"):
        assert np.dtype(x) == np.dtype(np.int32)
    with warnings.catch_warnings():  # an array index is not converted to a dtype
        warnings.simplefilter("error", DeprecationWarning)
        assert int(x[jnp.int32(1)]) == 1


def test_tobytes_and_flat():
    host = np.arange(6, dtype=np.int32).reshape(2, 3)
    x = jnp.asarray(host)
    assert x.tobytes() == host.tobytes() and x.tobytes("F") == host.tobytes("F")
    with pytest.raises(NotImplementedError, match="do not implement the arr.flat property"):
        x.flat


def test_copies_keep_devices_layout_and_commitment():
    mesh = plax.make_mesh((8,), ("d",))
    spread = plax.device_put(jnp.arange(16.0), NamedSharding(mesh, PartitionSpec("d")))
    loose = jnp.arange(3.0)
    for make in (copy.copy, copy.deepcopy):
        c = make(spread)
        assert c is not spread and c.sharding == spread.sharding and c.committed
        np.testing.assert_array_equal(c, np.arange(16.0))
        u = make(loose)
        assert u is not loose and not u.committed and u.devices() == loose.devices()
    key = plax.random.key(3)
    np.testing.assert_array_equal(plax.random.key_data(copy.deepcopy({"k": key})["k"]),
                                  plax.random.key_data(key))
    gone = jnp.ones(2)
    gone.delete()
    with pytest.raises(RuntimeError, match="Array has been deleted"):
        copy.copy(gone)


def test_dlpack_export_to_numpy():
    x = plax.device_put(np.arange(6, dtype=np.float32).reshape(2, 3), plax.devices()[3])
    assert tuple(x.__dlpack_device__()) == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(x), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(np.from_dlpack(jnp.arange(4, dtype=jnp.int8)), np.arange(4))
    mesh = plax.make_mesh((8,), ("d",))
    spread = plax.device_put(jnp.arange(16.0), NamedSharding(mesh, PartitionSpec("d")))
    with pytest.raises(BufferError, match="from an array on a singular device"):
        spread.__dlpack__()


def test_traced_operators_methods_and_ufuncs_skip_the_eager_dispatch(monkeypatch):
    # A tracer's operators and methods, and a jnp.ufunc given a tracer, run the Python
    # function behind the compiled eager form: with the eager dispatch's miss handler
    # broken, a gradient through all of them is still right.
    def f(x):
        y = (x * 2.0 + 1.0 - x / 4.0) ** 2
        return -jnp.add(abs(y), jnp.multiply(x, y)).sum() + (y @ x) + x.mean()

    x = np.array([0.5, -1.5, 2.0], np.float32)

    def broken(*args, **kwargs):
        raise AssertionError("a traced operation went through the eager dispatch")

    monkeypatch.setattr(plax.api.jit.JitWrapped, "_cpp_miss", broken)
    got = plax.grad(f)(x)
    y = (x * 2 + 1 - x / 4) ** 2
    dy = 2 * (x * 2 + 1 - x / 4) * (2 - 1 / 4)
    want = -(np.sign(y) * dy + y + x * dy) + (dy * x + y) + 1 / 3
    np.testing.assert_allclose(got, want, rtol=1e-5)
