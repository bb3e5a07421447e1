"""``jax._src.mesh_utils``: device grids for meshes (``plax.sharding.device_mesh``: the TPU
topology tables and the rules that give physical axes to logical ones)."""
from plax.sharding import device_mesh as _impl
from plax.sharding.device_mesh import (create_device_mesh,  # noqa: F401
                                       create_hybrid_device_mesh)

from plax._src import _face

_REFUSED: dict = {}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _impl)
