"""``jax._src.sharding_impls``: plax's shardings (``plax.sharding``) under JAX's private
module: NamedSharding, SingleDeviceSharding, GSPMDSharding, PartitionSpec, meshes, and the
global shape an array made of this process's data has."""
from plax import sharding as _public
from plax.api.arrays import _process_blocks
from plax.sharding import (NamedSharding, PartitionSpec, SingleDeviceSharding,  # noqa: F401
                           make_single_device_sharding)
from plax.sharding.gspmd import GSPMDSharding  # noqa: F401
from plax.sharding.mesh import make_mesh, set_mesh  # noqa: F401

from plax._src import _face

_REFUSED: dict = {}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)


def local_to_global_shape(sharding, local_shape) -> tuple:
    """The global shape of an array of which this process holds ``local_shape``: per
    dimension, the local extent scaled by how many of the sharding's blocks it holds, or
    None where the processes hold unlike parts."""
    if sharding.is_fully_addressable:
        return tuple(local_shape)
    mine, counts, uniform = _process_blocks(sharding, len(local_shape))
    return tuple(n // len(mine[i]) * counts[i] if uniform[i] and n % len(mine[i]) == 0
                 else None for i, n in enumerate(local_shape))
