"""``jax._src.sharding``: the Sharding protocol (``plax.sharding``) and the device -> index map
of a sharding, cached (``common_devices_indices_map``)."""
from plax import sharding as _public
from plax.sharding import Sharding  # noqa: F401
from plax.sharding.named import IndivisibleError, common_devices_indices_map  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _public)
