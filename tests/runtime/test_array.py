"""plax.Array, transfers, devices and the data API."""
import pickle

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax


def test_metadata():
    x = plax.device_put(np.arange(6, dtype=np.int16).reshape(2, 3))
    assert x.shape == (2, 3) and x.ndim == 2 and x.size == 6
    assert x.dtype == np.int16 and x.itemsize == 2 and x.nbytes == 12
    assert not x.weak_type and len(x) == 2


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                   np.uint32, np.float16, ml_dtypes.bfloat16, np.float32,
                                   np.complex64, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                   ml_dtypes.int4, ml_dtypes.uint4])
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3)])
def test_roundtrip_every_dtype(dtype, shape):
    host = (np.arange(int(np.prod(shape))) % 5).reshape(shape).astype(dtype)
    x = plax.device_put(host)
    back = np.asarray(x)
    assert back.dtype == np.dtype(dtype) and back.shape == shape
    np.testing.assert_array_equal(back.astype(np.complex64), host.astype(np.complex64))


def test_64_bit_data_is_narrowed_without_x64():
    x = plax.device_put(np.array([1, 2**31 - 1], dtype=np.int64))
    assert x.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(x), [1, 2**31 - 1])
    y = plax.device_put(np.array([0.1], dtype=np.float64))
    assert y.dtype == np.float32
    np.testing.assert_allclose(np.asarray(y), [0.1], rtol=1e-7)


def test_64_bit_data_kept_with_x64():
    with plax.enable_x64():
        x = plax.device_put(np.array([2**40], dtype=np.int64))
        assert x.dtype == np.int64
        assert int(np.asarray(x)[0]) == 2**40
        y = lax.add(plax.device_put(np.array([0.1])), 0.2)
        assert y.dtype == np.float64
        np.testing.assert_array_equal(np.asarray(y), np.array([0.1]) + 0.2)


def test_host_data_is_copied_not_aliased():
    host = np.ones(1 << 16, np.float32)
    x = plax.device_put(host)
    host[:] = 7
    assert float(np.asarray(x)[0]) == 1.0
    back = np.asarray(x)
    with pytest.raises(ValueError, match="assignment destination is read-only"):
        back[0] = 3  # the cached host copy is read-only


def test_repr_and_str():
    assert repr(jnp.array([1.0, 2.0])) == "Array([1., 2.], dtype=float32)"
    assert repr(jnp.array([1, 2])) == "Array([1, 2], dtype=int32)"
    assert repr(jnp.array(1.0)) == "Array(1., dtype=float32, weak_type=True)"
    assert repr(jnp.array([True])) == "Array([ True], dtype=bool)"
    assert str(jnp.array([1, 2])) == "[1 2]"
    assert f"{jnp.array(2.5):.2f}" == "2.50"


def test_scalar_conversions():
    assert bool(jnp.array(True)) is True
    assert int(jnp.array(7)) == 7 and float(jnp.array(2.5)) == 2.5
    assert complex(jnp.array(1.0)) == 1 + 0j
    assert [10, 20, 30][jnp.array(2)] == 30
    with pytest.raises(TypeError, match="integer scalar arrays"):
        [1, 2][jnp.array(1.0)]
    with pytest.raises(ValueError, match="ambiguous"):
        bool(jnp.array([1, 2]))
    assert jnp.array(3).item() == 3
    assert jnp.array([[1, 2]]).tolist() == [[1, 2]]


def test_iteration_and_len():
    x = jnp.array([[1, 2], [3, 4]])
    rows = [np.asarray(r).tolist() for r in x]
    assert rows == [[1, 2], [3, 4]]
    with pytest.raises(TypeError, match="iteration over a 0-d array"):
        iter(jnp.array(1))
    with pytest.raises(TypeError, match="len\\(\\) of unsized object"):
        len(jnp.array(1))


def test_unhashable():
    with pytest.raises(TypeError, match="unhashable type: 'Array'"):
        hash(jnp.array(1))


def test_astype():
    x = jnp.array([1.7, -2.2])
    y = x.astype(np.int32)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(y), [1, -2])
    z = x.astype(ml_dtypes.bfloat16)
    assert z.dtype == ml_dtypes.bfloat16


def test_numpy_interop_both_ways():
    x = jnp.array([1.0, 2.0, 3.0])
    # NumPy functions see a host copy
    out = np.sin(x)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, np.sin([1.0, 2.0, 3.0]), rtol=1e-6)
    # NumPy arrays on the left defer to plax
    mixed = np.ones(3, np.float32) + x
    assert isinstance(mixed, plax.Array)
    np.testing.assert_array_equal(np.asarray(mixed), [2, 3, 4])
    # np.asarray with a dtype converts
    assert np.asarray(x, dtype=np.int64).dtype == np.int64
    # plax accepts NumPy arrays and scalars anywhere
    np.testing.assert_array_equal(np.asarray(lax.add(np.float32(1), x)), [2, 3, 4])


def test_block_until_ready_and_delete():
    x = jnp.array([1.0, 2.0])
    assert x.block_until_ready() is x
    assert plax.block_until_ready({"a": x, "b": [x, 1]})["a"] is x
    y = lax.sin(x)
    y.delete()
    assert y.is_deleted()
    with pytest.raises(RuntimeError, match=r"has been deleted with shape=float32\[2\]"):
        np.asarray(y)
    with pytest.raises(RuntimeError, match="has been deleted"):
        lax.cos(y)
    with pytest.raises(RuntimeError, match="has been deleted"):
        y._check_if_deleted()
    assert "deleted" in repr(y)
    np.testing.assert_array_equal(x._value, [1.0, 2.0])  # (JAX's property: the host value)


def test_pickle_roundtrip():
    x = jnp.array([[1.5, 2.5]], dtype=ml_dtypes.bfloat16)
    y = pickle.loads(pickle.dumps(x))
    assert isinstance(y, plax.Array) and y.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    w = pickle.loads(pickle.dumps(jnp.array(2.0)))
    assert w.weak_type


def test_copy_is_equal_and_distinct():
    x = jnp.array([1, 2, 3])
    y = x.copy()
    np.testing.assert_array_equal(np.asarray(y), [1, 2, 3])


@pytest.mark.needs_devices(8)
def test_devices_api():
    devs = plax.devices()
    assert len(devs) == plax.device_count() == 8  # tests run with PLAX_NUM_CPU_DEVICES=8
    assert plax.local_devices() == devs and plax.local_device_count() == 8
    assert plax.process_index() == 0 and plax.process_count() == 1
    assert plax.default_backend() == "cpu"
    assert [d.id for d in devs] == list(range(8))
    assert isinstance(devs[0], plax.Device)


@pytest.mark.needs_devices(4)
def test_device_put_commits_and_computation_follows():
    d3 = plax.devices()[3]
    x = plax.device_put(np.arange(4.0, dtype=np.float32), d3)
    assert x.committed and x.devices() == {d3} and x.device == d3
    assert x.sharding.device_set == {d3}
    y = lax.mul(x, 2.0)
    assert y.devices() == {d3} and y.committed
    np.testing.assert_array_equal(np.asarray(y), [0, 2, 4, 6])
    # an uncommitted array moves to the committed one's device
    z = lax.add(y, jnp.ones(4))
    assert z.devices() == {d3}


@pytest.mark.needs_devices(3)
def test_uncommitted_by_default_and_conflicting_commitments_raise():
    x = plax.device_put(np.ones(2, np.float32))
    assert not x.committed and x.devices() == {plax.devices()[0]}
    a = plax.device_put(np.ones(2, np.float32), plax.devices()[1])
    b = plax.device_put(np.ones(2, np.float32), plax.devices()[2])
    with pytest.raises(ValueError, match="incompatible devices"):
        lax.add(a, b)
    moved = plax.device_put(a, plax.devices()[2])
    np.testing.assert_array_equal(np.asarray(lax.add(moved, b)), [2, 2])


@pytest.mark.needs_devices(6)
def test_device_put_pytree_and_sharding_argument():
    d = plax.devices()[5]
    tree = plax.device_put({"a": np.ones(2), "b": (1, 2.0)}, plax.sharding.SingleDeviceSharding(d))
    assert tree["a"].devices() == {d} and tree["b"][0].dtype == np.int32
    with pytest.raises(ValueError, match="device_put only accepts"):
        plax.device_put(1.0, "cpu:0")


def test_device_get():
    x = jnp.array([1, 2])
    out = plax.device_get({"x": x, "n": 3})
    assert isinstance(out["x"], np.ndarray) and out["n"] == 3
    np.testing.assert_array_equal(out["x"], [1, 2])


@pytest.mark.needs_devices(3)
def test_addressable_shards_and_sharding():
    x = plax.device_put(np.arange(3.0), plax.devices()[2])
    shards = x.addressable_shards
    assert len(shards) == 1 and shards[0].device == plax.devices()[2]
    np.testing.assert_array_equal(np.asarray(shards[0].data), [0, 1, 2])
    s = x.sharding
    assert s.is_fully_replicated and s.is_fully_addressable and s.num_devices == 1
    assert s.shard_shape((3,)) == (3,)
    assert isinstance(s, plax.sharding.Sharding)


def test_live_arrays():
    x = jnp.array([12345.0])
    assert any(a is x for a in plax.live_arrays())
    x.delete()
    assert not any(a is x for a in plax.live_arrays())


def test_python_int_overflow():
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        jnp.array(2**40)


def test_typeof():
    t = plax.typeof(jnp.array([1.0]))
    assert t.shape == (1,) and t.dtype == np.float32 and t.str_short() == "f32[1]"


def test_transposes():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = jnp.array(a)
    np.testing.assert_array_equal(np.asarray(x.T), a.T)
    np.testing.assert_array_equal(np.asarray(x.mT), np.swapaxes(a, -1, -2))
    with pytest.raises(ValueError, match="ndim >= 2"):
        jnp.array([1.0]).mT


def test_array_type_is_for_checks_not_construction():
    with pytest.raises(TypeError, match="plax.Array is the type to check arrays against"):
        plax.Array(np.ones(2))

    class Tagged(plax.Array):  # subclasses (type-tag classes) still construct
        pass
    assert isinstance(Tagged(), Tagged) and not isinstance(jnp.ones(2), Tagged)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_, np.complex64,
                                   ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn])
def test_np_asarray_is_a_read_only_view_of_the_device_buffer(dtype):
    host = (np.arange(6) % 3).reshape(2, 3).astype(dtype)
    put = plax.device_put(host)
    computed = lax.rev(put, (0,))  # a fresh buffer made by an executable
    for x, want in ((put, host), (computed, host[::-1])):
        a, b = np.asarray(x), np.asarray(x)
        # zero copy on CPU: the host view is the device buffer's memory (as in JAX)
        assert a.__array_interface__["data"][0] == x.unsafe_buffer_pointer()
        assert a.__array_interface__["data"] == b.__array_interface__["data"]
        assert np.shares_memory(a, b) and not a.flags.writeable
        assert a.dtype == np.dtype(dtype) and a.tobytes() == want.tobytes()
        with pytest.raises(ValueError, match="read-only"):
            a[0, 0] = host[0, 0]
    # a copy is the caller's own and writeable, and changing it leaves the array alone
    c = np.array(computed)
    assert c.flags.writeable and not np.shares_memory(c, np.asarray(computed))
    c[...] = host[0, 1]
    assert np.asarray(computed).tobytes() == host[::-1].tobytes()


def test_np_asarray_shares_with_dlpack_export():
    x = jnp.arange(6.0).reshape(2, 3) * 2
    assert np.shares_memory(np.asarray(x), np.from_dlpack(x))
    np.testing.assert_array_equal(np.from_dlpack(x), np.arange(6.0).reshape(2, 3) * 2)
    with pytest.raises(ValueError, match="Unable to avoid"):
        np.asarray(x, dtype=np.int32, copy=False)


def test_array_namespace_is_plax_numpy():
    x = jnp.ones((2, 3))
    assert jnp.__array_api_version__ == "2024.12"
    assert x.__array_namespace__() is jnp and plax.Array.__array_namespace__(x) is jnp
    assert plax.Array.__array_namespace__(x, api_version="2024.12") is jnp
    with pytest.raises(ValueError, match=r"api_version='2023.12' is not available"):
        plax.Array.__array_namespace__(x, api_version="2023.12")
    with pytest.raises(TypeError, match="positional argument"):
        x.__array_namespace__("2024.12")
    seen = []
    plax.jit(lambda t: seen.append(plax.Array.__array_namespace__(t)) or t)(x)
    assert seen == [jnp]
    xp = x.__array_namespace__()  # array-API-generic code: the namespace computes
    np.testing.assert_allclose(np.asarray(xp.sum(xp.exp(x), axis=1)), np.full(2, 3 * np.e),
                               rtol=1e-6)

    class Tagged(plax.Array):
        pass
    with pytest.raises(TypeError, match="Tagged objects are not arrays"):
        Tagged().__array_namespace__()
