"""``plax.experimental.topologies``: the devices a program can lay meshes over, described.

``get_attached_topology()`` describes the devices attached to this process's platform;
``make_mesh(topology, shape, names)`` lays a Mesh over them as ``mesh_utils`` does. A
topology of devices that are not attached (``get_topology_desc``, for compiling ahead of time
for a TPU slice) needs the TPU platform's plugin: without it, it raises as JAX does.
"""
from __future__ import annotations

import math

from plax.api.devices import devices as _devices
from plax.experimental import mesh_utils
from plax.runtime.xla import Device  # noqa: F401  (a name of this module in JAX)
from plax.sharding import Mesh


class TopologyDescription:
    """The devices of a topology, in their platform's order."""

    def __init__(self, devices: list):
        self.devices = list(devices)

    def __repr__(self):
        kinds = sorted({d.device_kind for d in self.devices})
        return f"TopologyDescription({len(self.devices)} devices: {', '.join(kinds)})"


def get_attached_topology(platform=None) -> TopologyDescription:
    """The devices attached to this process of ``platform`` (default: the default one)."""
    return TopologyDescription(_devices(platform))


def get_topology_desc(topology_name: str = "", platform: str | None = None,
                      **kwargs) -> TopologyDescription:
    """A topology by name, for a platform whose devices need not be attached (TPU slices)."""
    if platform == "cpu":
        raise NotImplementedError("topology not implemented for cpu: describe the attached "
                                  "CPU devices with get_attached_topology('cpu').")
    raise RuntimeError("JAX TPU support not installed; cannot generate TPU topology "
                       f"{topology_name!r}. plax describes a TPU slice once the TPU platform's "
                       "plugin (libtpu) is installed; get_attached_topology() describes the "
                       "devices attached now.")


def make_mesh(topo: TopologyDescription, mesh_shape, axis_names, *,
              contiguous_submeshes: bool = False) -> Mesh:
    """A Mesh of ``mesh_shape`` named ``axis_names`` over all of the topology's devices."""
    if len(topo.devices) != math.prod(mesh_shape):
        raise ValueError(f"Number of devices {len(topo.devices)} must equal the product of "
                         f"mesh_shape {tuple(mesh_shape)}")
    grid = mesh_utils.create_device_mesh(tuple(mesh_shape), topo.devices,
                                         contiguous_submeshes=contiguous_submeshes)
    return Mesh(grid, tuple(axis_names))
