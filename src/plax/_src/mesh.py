"""``jax._src.mesh``: meshes (``plax.sharding.mesh``): Mesh, AbstractMesh, AxisType, the
context mesh."""
from plax.sharding import mesh as _mesh
from plax.sharding.mesh import (AbstractDevice, AbstractMesh, AxisType, Mesh,  # noqa: F401
                                get_abstract_mesh, set_mesh, use_abstract_mesh)

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _mesh)
