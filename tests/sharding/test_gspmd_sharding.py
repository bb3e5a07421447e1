"""GSPMDSharding: layouts equal to those of the NamedShardings whose HloSharding it is given,
identity, pickling, programs over it, and its errors (and SingleDeviceSharding's pickling)."""
import numpy as np
import pytest

import plax
from plax.extend.sharding import GSPMDSharding, xla_client as xc
from plax.sharding import Mesh, NamedSharding, PartitionSpec as P
from plax.sharding.named import IndivisibleError

pytestmark = pytest.mark.needs_devices(8)

# (mesh shape, spec, array shape)
CASES = [
    ((4, 2), P("x", "y"), (8, 4)),
    ((4, 2), P("y"), (8, 4)),
    ((4, 2), P(None, ("y", "x")), (4, 8)),
    ((4, 2), P(), (8, 4)),
    ((2, 2, 2), P("z", None, "x"), (4, 6, 2)),
    ((2, 2, 2), P(("x", "z"), "y"), (8, 2, 3)),
]


def mesh_of(shape):
    return Mesh(np.array(plax.devices()).reshape(shape), ("x", "y", "z")[:len(shape)])


@pytest.mark.parametrize("mesh_shape, spec, shape", CASES)
def test_layout_is_the_named_shardings(mesh_shape, spec, shape):
    ns = NamedSharding(mesh_of(mesh_shape), spec)
    gs = GSPMDSharding(ns._device_assignment, ns._to_xla_hlo_sharding(len(shape)))
    assert gs.devices_indices_map(shape) == ns.devices_indices_map(shape)
    assert gs.shard_shape(shape) == ns.shard_shape(shape)
    assert gs.replica_ids(shape) == ns.replica_ids(shape)
    assert gs.is_fully_replicated == ns.is_fully_replicated
    assert gs.is_equivalent_to(ns, len(shape)) and ns.is_equivalent_to(gs, len(shape))
    assert gs != ns and gs.device_set == set(plax.devices()) and gs.num_devices == 8
    data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    x = plax.device_put(data, gs)
    assert x.sharding == gs
    for shard in x.addressable_shards:
        np.testing.assert_array_equal(shard.data, data[ns.devices_indices_map(shape)[shard.device]])
    y = plax.jit(lambda a: a * 2 + 1)(x)
    assert isinstance(y.sharding, GSPMDSharding) and y.sharding.is_equivalent_to(gs, len(shape))
    np.testing.assert_array_equal(y, data * 2 + 1)
    z = plax.jit(lambda a: a - 1, in_shardings=gs, out_shardings=gs)(data)
    assert z.sharding == gs
    np.testing.assert_array_equal(z, data - 1)


def test_identity_repr_and_memory_kind():
    devices = plax.devices()
    one = NamedSharding(Mesh(np.array(devices[:1]).reshape(1, 1, 1), ("x", "y", "z")),
                        P("x", "y", "z"))
    tiled = GSPMDSharding(devices[:1], one._to_xla_hlo_sharding(3))
    replicated = GSPMDSharding.get_replicated(devices[:1])
    assert tiled == replicated and hash(tiled) == hash(replicated)  # one device: replicated
    assert GSPMDSharding.get_replicated(devices) != replicated  # other devices
    assert GSPMDSharding.get_replicated(devices).memory_kind == "device"
    assert GSPMDSharding.get_replicated(devices, memory_kind="device") == \
        GSPMDSharding.get_replicated(devices)
    pinned = GSPMDSharding.get_replicated(devices).with_memory_kind("pinned_host")
    assert pinned.memory_kind == "pinned_host" and pinned != GSPMDSharding.get_replicated(devices)
    assert repr(GSPMDSharding.get_replicated(devices)) == \
        "GSPMDSharding({replicated}, memory_kind=device)"
    op = xc.OpSharding()
    op.type = xc.OpSharding.Type.OTHER
    op.tile_assignment_dimensions = [4, 1, 2]
    op.tile_assignment_devices = list(range(8))
    op.replicate_on_last_tile_dim = True
    gs = GSPMDSharding(devices, op)
    assert repr(gs).startswith("GSPMDSharding({devices=[4,1,2]0,1,2,3,4,5,6,7 "
                               "last_tile_dim_replicate}")
    assert gs.shard_shape((8, 3)) == (2, 3)
    assert gs.replica_ids((8, 3)) == {d: i % 2 for i, d in enumerate(devices)}
    rebuild, args = gs.__reduce__()
    assert rebuild(*args) == gs and hash(rebuild(*args)) == hash(gs)


def test_an_explicit_device_order_runs_too():
    devices = plax.devices()[:4]
    op = xc.OpSharding()
    op.type = xc.OpSharding.Type.OTHER
    op.tile_assignment_dimensions = [2, 2]
    op.tile_assignment_devices = [1, 0, 3, 2]
    gs = GSPMDSharding(devices, op)
    data = np.arange(16.0, dtype=np.float32).reshape(4, 4)
    where = gs.devices_indices_map((4, 4))
    assert where[devices[1]] == (slice(0, 2), slice(0, 2))
    assert where[devices[2]] == (slice(2, 4), slice(2, 4))
    out = plax.jit(lambda a: a + 1, out_shardings=gs)(plax.device_put(data, gs))
    for shard in out.addressable_shards:
        np.testing.assert_array_equal(shard.data, data[where[shard.device]] + 1)


@pytest.mark.parametrize("make, error, match", [
    (lambda d: GSPMDSharding(d[:4], NamedSharding(mesh_of((4, 2)), P("x"))
                             ._to_xla_hlo_sharding(1)).devices_indices_map((8,)), ValueError,
     "over 8 devices, but 4"),
    (lambda d: GSPMDSharding(d, "replicated"), TypeError, "OpSharding or an HloSharding"),
    (lambda d: GSPMDSharding.get_replicated(d, memory_kind="my_host"), ValueError,
     "Could not find memory addressable by device"),
    (lambda d: GSPMDSharding(d, NamedSharding(mesh_of((4, 2)), P("x"))._to_xla_hlo_sharding(
        1)).shard_shape((6,)), IndivisibleError, "axis 0 is partitioned 4 times"),
    (lambda d: GSPMDSharding(d, NamedSharding(mesh_of((4, 2)), P("x", "y"))
                             ._to_xla_hlo_sharding(2)).shard_shape((8,)), ValueError,
     "only valid for values of rank 2"),
])
def test_errors(make, error, match):
    with pytest.raises(error, match=match):
        make(plax.devices())


def test_shardy_attribute_with_the_mesh_inline():
    ns = NamedSharding(mesh_of((4, 2)), P(None, ("y", "x")))
    assert ns._to_sdy_sharding(2) == '#sdy.sharding<mesh<["x"=4, "y"=2]>, [{}, {"y", "x"}]>'
    gs = GSPMDSharding(ns._device_assignment, ns._to_xla_hlo_sharding(2))
    assert gs._to_sdy_sharding(2) == \
        '#sdy.sharding<mesh<["_axis_0"=4, "_axis_1"=2]>, [{}, {"_axis_1", "_axis_0"}]>'
    op = xc.OpSharding()
    op.type = xc.OpSharding.Type.OTHER
    op.tile_assignment_dimensions = [2]
    op.tile_assignment_devices = [1, 0]
    with pytest.raises(TypeError, match="Cannot convert GSPMDSharding"):
        GSPMDSharding(plax.devices()[:2], op)._to_sdy_sharding(1)


def test_single_device_sharding_pickles_by_device_and_memory_kind():
    from plax.sharding import SingleDeviceSharding
    s = SingleDeviceSharding(plax.devices()[1], memory_kind="pinned_host")
    rebuild, args = s.__reduce__()
    assert rebuild(*args) is s
