"""``jax._src.array``: plax's arrays: ``ArrayImpl`` (jaxlib's class with plax's methods,
``plax.runtime.array``) and the ways to make them (``plax.api.arrays``)."""
from plax.api import arrays as _arrays
from plax.api.arrays import (make_array_from_callback,  # noqa: F401
                             make_array_from_process_local_data,
                             make_array_from_single_device_arrays)
from plax.runtime.array import ArrayImpl  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _arrays)
