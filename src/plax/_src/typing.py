"""``jax._src.typing``: the annotation types (``plax.typing``)."""
import numpy as _np

from plax import typing as _public
from plax.typing import *  # noqa: F401,F403

from plax._src import _face

DType = _np.dtype
Shape = tuple
__getattr__ = _face.face_getattr(__name__, {}, _public)
