"""plax.experimental.mesh_utils: device grids for meshes (as ``jax.experimental.mesh_utils``).

``create_device_mesh`` lays devices out in their order: CPU and GPU devices have no
physical topology to follow. ``device_kind_handler_dict`` maps a device kind (as
``device.device_kind`` names it) to a function that lays out devices of that kind
(``handler(mesh_shape, devices, **options) -> array``); plax has none of its own (JAX's
are for TPU generations), and ``create_device_mesh`` uses one a program registers.
"""
from __future__ import annotations

import collections
import math

import numpy as np

from plax.sharding.mesh import create_device_mesh as _ordered_mesh

__all__ = ["create_device_mesh", "create_hybrid_device_mesh", "device_kind_handler_dict"]

device_kind_handler_dict: dict = {}


def create_device_mesh(mesh_shape, devices=None, *, contiguous_submeshes: bool = False,
                       allow_split_physical_axes: bool = False):
    """An array of ``devices`` (all devices by default) of shape ``mesh_shape``: laid out by
    the handler ``device_kind_handler_dict`` has for their kind, else in device order."""
    if devices is None:
        from plax.api.devices import devices as all_devices
        devices = all_devices()
    devices = list(devices)
    handler = device_kind_handler_dict.get(getattr(devices[0], "device_kind", None)) \
        if devices else None
    if handler is not None:
        mesh = handler(tuple(int(s) for s in mesh_shape), devices,
                       contiguous_submeshes=contiguous_submeshes,
                       allow_split_physical_axes=allow_split_physical_axes)
        if mesh is not None:
            return mesh
    return _ordered_mesh(mesh_shape, devices, contiguous_submeshes=contiguous_submeshes,
                         allow_split_physical_axes=allow_split_physical_axes)


def create_hybrid_device_mesh(mesh_shape, dcn_mesh_shape, devices=None, *,
                              process_is_granule: bool = False,
                              should_sort_granules_by_key: bool = True,
                              allow_split_physical_axes: bool = False):
    """A device mesh for two networks: the devices are grouped into granules (slices, or
    processes with ``process_is_granule``), each granule laid out as ``mesh_shape`` and the
    granules as ``dcn_mesh_shape``; the result has shape ``mesh_shape * dcn_mesh_shape``
    (elementwise), each granule one block of it."""
    if devices is None:
        from plax.api.devices import devices as all_devices
        devices = all_devices()
    devices = list(devices)
    if len(mesh_shape) != len(dcn_mesh_shape):
        raise ValueError(f"create_hybrid_device_mesh: mesh_shape {list(mesh_shape)} and "
                         f"dcn_mesh_shape {list(dcn_mesh_shape)} must have the same length")
    attr = "process_index" if process_is_granule else "slice_index"
    if not devices or not hasattr(devices[0], attr):
        raise ValueError(f"Device {devices[0] if devices else None} does not have attribute "
                         f"{attr}. See `process_is_granule` option.")
    by_key = collections.defaultdict(list)
    for d in devices:
        by_key[getattr(d, attr)].append(d)
    granules = [by_key[k] for k in sorted(by_key)] if should_sort_granules_by_key \
        else list(by_key.values())
    if math.prod(dcn_mesh_shape) != len(granules):
        raise ValueError(f"Number of slices {len(granules)} must equal the product of "
                         f"dcn_mesh_shape {list(dcn_mesh_shape)}")
    blocks = [create_device_mesh(mesh_shape, g,
                                 allow_split_physical_axes=allow_split_physical_axes)
              for g in granules]
    grid = np.empty(len(blocks), dtype=object)
    grid[:] = blocks
    grid = grid.reshape(tuple(dcn_mesh_shape))
    return np.block(grid.tolist()) if grid.ndim else blocks[0]
