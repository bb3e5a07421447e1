"""``jax._src.sharding``: the Sharding protocol (``plax.sharding``) and the device -> index map
of a sharding, cached (``common_devices_indices_map``)."""
import functools

from plax import sharding as _public
from plax.sharding import Sharding  # noqa: F401
from plax.sharding.named import IndivisibleError  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _public)


@functools.lru_cache(maxsize=4096)
def common_devices_indices_map(sharding, global_shape) -> dict:
    """``{device: index}``: the part of an array of ``global_shape`` each device holds."""
    return sharding.devices_indices_map(tuple(global_shape))
