"""What orbax-checkpoint needs of JAX, as JAX 0.10.2 has it: jax.Array as a virtual base class
(issubclass), Sharding._addressable_device_assignment, device_put with a Format,
ShapeDtypeStruct.update, jax._src.distributed.global_state, jax._src.tree_util.flatten_one_level."""
from unittest import mock

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.trace import Tracer
from plax.experimental.layout import Format, Layout
from plax.runtime.array import ArrayImpl, KeyArray
from plax.sharding import NamedSharding, PartitionSpec as P, SingleDeviceSharding


class UserArray(plax.Array):
    pass


@pytest.mark.parametrize("sub, want", [
    (plax.Array, True), (ArrayImpl, True), (KeyArray, True), (UserArray, True),
    (Tracer, False), (int, False), (np.ndarray, False)])
def test_issubclass_of_array_answers_as_jax(sub, want):
    assert issubclass(sub, plax.Array) is want


def test_isinstance_of_array_still_holds_for_tracers_and_not_for_numpy():
    seen = []
    plax.grad(lambda x: seen.append(isinstance(x, plax.Array)) or x)(1.0)
    assert seen == [True] and not isinstance(np.ones(2), plax.Array)
    assert isinstance(jnp.ones(2), plax.Array)


def test_addressable_device_assignment_lists_this_processs_devices_in_order():
    devices = plax.devices()
    mesh = plax.make_mesh((2, 4), ("a", "b"))
    named = NamedSharding(mesh, P("a"))
    assert named._addressable_device_assignment == tuple(mesh.devices.flat)
    assert SingleDeviceSharding(devices[3])._addressable_device_assignment == (devices[3],)


def test_device_put_takes_a_format_or_a_pytree_of_them():
    devices = plax.devices()
    x = jnp.arange(6.0).reshape(2, 3)
    one = SingleDeviceSharding(devices[2])
    y = plax.device_put(x, Format(Layout((0, 1)), one))
    assert y.sharding == one and y.committed and y.tolist() == x.tolist()
    mesh = plax.make_mesh((8,), ("x",))
    tree = plax.device_put({"a": np.arange(8.0), "b": x},
                           {"a": Format(None, NamedSharding(mesh, P("x"))), "b": Format()})
    assert tree["a"].sharding == NamedSharding(mesh, P("x"))
    assert tree["a"].tolist() == list(np.arange(8.0)) and not tree["b"].committed


def test_device_put_refuses_a_layout_it_cannot_give():
    x = jnp.ones((2, 3))
    one = SingleDeviceSharding(plax.devices()[0])
    with pytest.raises(NotImplementedError, match=r"default layout .*\(0, 1\).* not in"):
        plax.device_put(x, Format(Layout((1, 0)), one))
    with pytest.raises(ValueError, match="should be concrete"):
        plax.device_put(x, Format(Layout.AUTO, one))


def test_shape_dtype_struct_update():
    mesh = plax.make_mesh((8,), ("x",))
    s = NamedSharding(mesh, P("x"))
    base = plax.ShapeDtypeStruct((8, 3), jnp.float32)
    assert base.update(shape=(16,)) == plax.ShapeDtypeStruct((16,), jnp.float32)
    changed = base.update(dtype=jnp.int32, sharding=s, weak_type=True)
    assert (changed.shape, changed.dtype, changed.sharding, changed.weak_type) == \
        ((8, 3), np.dtype(np.int32), s, True)
    assert base.shape == (8, 3) and base.sharding is None  # the original is unchanged
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['layout'\]"):
        base.update(layout=None)


def test_private_distributed_state_and_flatten_one_level():
    from plax._src import distributed, tree_util
    state = distributed.global_state
    assert (state.process_id, state.num_processes, state.client, state.service) == (0, 1, None,
                                                                                    None)
    assert tree_util.flatten_one_level({"b": 2, "a": (1, 3)}) == (((1, 3), 2), ("a", "b"))
    with pytest.raises(ValueError, match="can't tree-flatten"):
        tree_util.flatten_one_level(3)


def test_each_shard_of_a_replicated_scalar_holds_a_scalar():
    mesh = plax.make_mesh((2, 4), ("a", "b"))
    x = plax.device_put(jnp.int32(7), NamedSharding(mesh, P()))
    for shard in x.addressable_shards:  # (read through the buffer protocol, as NumPy does)
        assert memoryview(shard.data).shape == () and np.asarray(shard.data).shape == ()
        assert int(np.asarray(shard.data)) == 7


def test_private_lib_names_the_jaxlib_extension_version():
    from plax._src import lib  # grain reads it to choose its profiler hooks
    import jaxlib.xla_client
    assert lib.jaxlib_extension_version == jaxlib.xla_client._version >= 448


# --- found by orbax-checkpoint's own suite (make ecosystem) ---------------------------------
def test_shards_and_single_device_placements_keep_their_memory_kind():
    mesh = plax.make_mesh((8,), ("x",))
    x = plax.device_put(np.arange(16.0), NamedSharding(mesh, P("x"), memory_kind="pinned_host"))
    assert {s.data.sharding.memory_kind for s in x.addressable_shards} == {"pinned_host"}
    assert np.asarray(x.addressable_shards[1].data).tolist() == [2.0, 3.0]
    y = plax.device_put(np.ones(4), SingleDeviceSharding(plax.devices()[1],
                                                         memory_kind="pinned_host"))
    assert y.sharding.memory_kind == "pinned_host" and y.devices() == {plax.devices()[1]}
    assert np.asarray(y).tolist() == [1.0] * 4
    # an array on device moved to pinned host memory in the same layout (orbax's transfer)
    on_device = plax.device_put(jnp.arange(4.0), plax.devices()[2])
    moved = plax.device_put(on_device, SingleDeviceSharding(plax.devices()[2],
                                                            memory_kind="pinned_host"))
    assert moved.sharding.memory_kind == "pinned_host" and on_device.sharding.memory_kind == \
        "device" and np.asarray(moved).tolist() == [0.0, 1.0, 2.0, 3.0]
    # partly replicated: each device's piece is put in that memory too
    mesh = plax.make_mesh((4, 2), ("x", "y"))
    z = plax.device_put(np.arange(8.0), NamedSharding(mesh, P("x"), memory_kind="pinned_host"))
    assert {s.data.sharding.memory_kind for s in z.addressable_shards} == {"pinned_host"}
    assert np.asarray(z).tolist() == list(range(8))


def test_the_array_class_declares_what_arrays_have():
    for name in ("shape", "dtype", "ndim", "size", "sharding", "__getitem__", "__add__",
                 "reshape", "addressable_shards", "item"):
        assert hasattr(plax.Array, name), name
    fake = mock.Mock(spec=plax.Array, __getitem__=lambda self, i: 7)
    assert fake[0] == 7 and isinstance(fake, plax.Array)
    assert not isinstance(object(), plax.Array) and not isinstance(3.0, plax.Array)

    class Partial(plax.Array):
        pass
    with pytest.raises(NotImplementedError, match="does not define `shape`"):
        Partial().shape


def test_array_equal_compares_shapes_first():
    assert not bool(jnp.array_equal(plax.random.key(0), plax.random.PRNGKey(0)))
    assert not bool(jnp.array_equal([1, 2], [[1, 2]]))
    assert bool(jnp.array_equal([1, 2], jnp.array([1.0, 2.0])))
