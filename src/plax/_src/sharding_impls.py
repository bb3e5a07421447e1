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
    dimension, the local extent times how many distinct parts the processes hold, or
    None where the processes hold unlike parts."""
    if sharding.is_fully_addressable:
        return tuple(local_shape)
    distinct = _process_blocks(sharding, len(local_shape))[1]
    return tuple(None if k is None else n * k for n, k in zip(local_shape, distinct))
