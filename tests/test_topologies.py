"""plax.experimental.topologies: the attached devices described, meshes laid over them."""
import numpy as np
import pytest

import plax
from plax.experimental import topologies


def test_attached_topology_is_the_platforms_devices():
    topo = topologies.get_attached_topology()
    assert topo.devices == plax.devices() and len(topo.devices) == 8
    assert topologies.get_attached_topology("cpu").devices == plax.devices("cpu")
    assert "8 devices: cpu" in repr(topo)


def test_make_mesh_over_a_topology():
    topo = topologies.get_attached_topology()
    mesh = topologies.make_mesh(topo, (2, 4), ("a", "b"))
    assert mesh.axis_names == ("a", "b") and mesh.devices.shape == (2, 4)
    assert sorted(d.id for d in mesh.devices.flat) == list(range(8))
    assert (topologies.make_mesh(topo, (2, 4), ("a", "b"), contiguous_submeshes=True)
            .devices.shape == (2, 4))
    s = plax.sharding.NamedSharding(mesh, plax.sharding.PartitionSpec("a", "b"))
    x = plax.device_put(np.arange(16.0).reshape(4, 4), s)
    assert x.sharding == s and x.sum() == 120.0
    with pytest.raises(ValueError, match=r"Number of devices 8 must equal the product of "
                                         r"mesh_shape \(3, 4\)"):
        topologies.make_mesh(topo, (3, 4), ("a", "b"))


def test_a_topology_not_attached_needs_the_tpu_plugin():
    with pytest.raises(NotImplementedError, match="topology not implemented for cpu"):
        topologies.get_topology_desc("", "cpu")
    with pytest.raises(RuntimeError, match="TPU support not installed"):
        topologies.get_topology_desc("v5e:2x2", "tpu")
    assert isinstance(plax.devices()[0], topologies.Device)
