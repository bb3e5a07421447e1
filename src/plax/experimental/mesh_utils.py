"""plax.experimental.mesh_utils: device grids for meshes (as ``jax.experimental.mesh_utils``)."""
from plax.sharding.mesh import create_device_mesh

__all__ = ["create_device_mesh"]
