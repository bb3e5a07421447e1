"""plax.dlpack: arrays from other libraries' memory (zero-copy where XLA can use it)."""
import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import dlpack
from plax.sharding.single import SingleDeviceSharding


def aligned(shape, dtype, align=64):
    """A C-contiguous NumPy array whose data start on an ``align``-byte boundary."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(n + align, np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + n].view(dtype).reshape(shape)


def sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=shape) * 10
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.normal(size=shape)
    return values.astype(dtype)


# (NumPy exports no bfloat16 through DLPack; plax arrays do, tested below.)
DTYPES = [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.float16,
          np.float32, np.complex64, np.bool_]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (2, 0, 3)])
def test_values_dtypes_and_shapes_cross_without_a_copy(dtype, shape):
    x = aligned(shape, dtype)
    x[...] = sample(shape, dtype)
    y = dlpack.from_dlpack(x)
    assert isinstance(y, plax.Array) and y.dtype == np.dtype(dtype) and y.shape == shape
    np.testing.assert_array_equal(np.asarray(y), x)
    if x.size:
        assert y.unsafe_buffer_pointer() == x.ctypes.data  # the same memory
    back = np.from_dlpack(y)  # and back to NumPy through plax's __dlpack__
    np.testing.assert_array_equal(back, x)
    assert y.committed and isinstance(y.sharding, SingleDeviceSharding)


@pytest.mark.parametrize("dtype", [*DTYPES, ml_dtypes.bfloat16])
def test_plax_arrays_of_every_dtype_cross_without_a_copy(dtype):
    a = jnp.asarray(sample((2, 3), dtype))
    b = dlpack.from_dlpack(a)
    assert b.dtype == a.dtype and b.unsafe_buffer_pointer() == a.unsafe_buffer_pointer()
    np.testing.assert_array_equal(np.asarray(b), np.asarray(a))


def test_a_plax_array_crosses_to_numpy_and_back_without_a_copy():
    a = jnp.arange(12.0).reshape(3, 4)
    assert np.from_dlpack(a).ctypes.data == a.unsafe_buffer_pointer()
    b = dlpack.from_dlpack(a)
    assert b.unsafe_buffer_pointer() == a.unsafe_buffer_pointer()
    np.testing.assert_array_equal(b, np.arange(12.0).reshape(3, 4))


@pytest.mark.parametrize("copy", [None, True])
def test_layouts_XLA_cannot_take_as_they_are_are_copied(copy):
    base = aligned((4, 6), np.float32)
    base[...] = np.arange(24, dtype=np.float32).reshape(4, 6)
    unaligned = aligned((25,), np.float32)[1:].reshape(4, 6)  # 4 bytes past a boundary
    unaligned[...] = base
    for x in (unaligned, base[:, ::2], base[::2, 1:4], base.T[::-1]):
        y = dlpack.from_dlpack(x, copy=copy)
        np.testing.assert_array_equal(np.asarray(y), x)
        assert y.unsafe_buffer_pointer() != x.ctypes.data
    # A transposition of aligned memory is a layout XLA takes as it is.
    y = dlpack.from_dlpack(base.T, copy=copy)
    np.testing.assert_array_equal(np.asarray(y), base.T)
    assert (y.unsafe_buffer_pointer() == base.ctypes.data) == (copy is None)
    assert (dlpack.from_dlpack(base, copy=copy).unsafe_buffer_pointer() == base.ctypes.data) \
        == (copy is None)  # copy=True always copies


def test_copy_false_refuses_what_needs_a_copy():
    with pytest.raises(ValueError, match="requires a copy"):
        dlpack.from_dlpack(np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2], copy=False)
    with pytest.raises(ValueError, match="requires a copy"):
        dlpack.from_dlpack(aligned((5,), np.float32)[1:], copy=False)
    x = aligned((3,), np.float32)
    if plax.device_count() > 1:
        with pytest.raises(ValueError, match="requires a copy since the source device"):
            dlpack.from_dlpack(x, device=plax.devices()[1], copy=False)
    assert dlpack.from_dlpack(x, copy=False).unsafe_buffer_pointer() == x.ctypes.data


@pytest.mark.needs_devices(2)
def test_device_places_the_result():
    x = np.arange(4, dtype=np.float32)
    dev = plax.devices()[1]
    for where in (dev, SingleDeviceSharding(dev)):
        y = dlpack.from_dlpack(x, device=where)
        assert y.devices() == {dev} and y.committed
        np.testing.assert_array_equal(y, x)
    mesh_sharding = plax.sharding.NamedSharding(
        plax.make_mesh((2,), ("x",)), plax.sharding.PartitionSpec())
    with pytest.raises(ValueError, match="onto a singular device"):
        dlpack.from_dlpack(x, device=mesh_sharding)


def test_64_bit_data_follow_x64():
    x = np.arange(5, dtype=np.int64)
    y = dlpack.from_dlpack(x)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, x)
    with plax.enable_x64():
        z = dlpack.from_dlpack(np.linspace(0, 1, 5))
        assert z.dtype == np.float64
        np.testing.assert_array_equal(z, np.linspace(0, 1, 5))


def test_results_work_under_transformations():
    x = aligned((4,), np.float32)
    x[...] = [1, 2, 3, 4]
    y = jnp.from_dlpack(x)
    np.testing.assert_allclose(plax.jit(lambda t: jnp.sin(t) * 2)(y), np.sin(x) * 2, rtol=1e-6)
    np.testing.assert_allclose(plax.grad(lambda t: jnp.sum(t ** 2))(y), 2 * x)


class _OnAnotherDevice:
    def __dlpack__(self, stream=None):
        return np.zeros(2).__dlpack__()

    def __dlpack_device__(self):
        return 7, 0  # Vulkan


def test_what_is_not_a_dlpack_array_is_refused():
    with pytest.raises(TypeError, match="must have __dlpack__ and __dlpack_device__"):
        dlpack.from_dlpack([1.0, 2.0])
    with pytest.raises(TypeError, match="unsupported device type"):
        dlpack.from_dlpack(_OnAnotherDevice())


@pytest.mark.parametrize("dtype,supported", [
    (np.float32, True), ("int64", True), (ml_dtypes.bfloat16, True), (np.bool_, True),
    (np.complex128, True), ("float8_e4m3fn", False), (ml_dtypes.int4, False),
    (np.dtype("datetime64[s]"), False)])
def test_is_supported_dtype(dtype, supported):
    if isinstance(dtype, str) and dtype.startswith("float8"):
        dtype = getattr(ml_dtypes, dtype)
    assert dlpack.is_supported_dtype(dtype) is supported


def test_is_supported_dtype_needs_a_dtype():
    with pytest.raises(TypeError, match="Expected a string or dtype-like object"):
        dlpack.is_supported_dtype(None)
