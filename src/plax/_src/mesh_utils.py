"""``jax._src.mesh_utils``: device grids for meshes, as ``jax.experimental.mesh_utils``
(``plax.experimental.mesh_utils``: devices laid out in their order)."""
from plax.experimental import mesh_utils as _public
from plax.experimental.mesh_utils import (create_device_mesh,  # noqa: F401
                                          create_hybrid_device_mesh)

from plax._src import _face

_TPU = ("plax lays devices out in their order; it has no tables of TPU physical topologies "
        "or torus layouts")
_REFUSED = dict.fromkeys((
    "_TPU_V2", "_TPU_V3", "_TPU_V4", "_TPU_V5_LITE", "_TPU_V5E", "_TPU_V5P", "_TPU_7",
    "_TPU_7X", "_TRANSPOSE_TRICKS", "_create_device_mesh_for_nd_torus",
    "_create_device_mesh_for_nd_torus_splitting_axes",
    "_enumerate_feasible_logical_axis_assignments", "_generate_logical_mesh",
    "_get_physical_tpu_mesh", "_get_prime_factors", "_prefer_first_logical_axis_assignment"),
    _TPU)

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)
