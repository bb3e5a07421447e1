"""plax.experimental.mesh_utils: device grids for meshes (as ``jax.experimental.mesh_utils``);
they live in ``plax.sharding.device_mesh``.

``create_device_mesh`` follows the devices' physical topology (TPU chip coordinates, the
ring orders of small TPU slices; GPU devices by id, others in their order);
``device_kind_handler_dict`` maps a device kind to a function laying its devices out
(``handler(mesh_shape, devices, **options) -> array | None``), which a program may extend.
"""
from plax.sharding.device_mesh import (create_device_mesh,  # noqa: F401
                                       create_hybrid_device_mesh, device_kind_handler_dict)

__all__ = ["create_device_mesh", "create_hybrid_device_mesh", "device_kind_handler_dict"]
