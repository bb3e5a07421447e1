"""``jax._src.xla_metadata``: ``set_xla_metadata`` (``plax.experimental.xla_metadata``)."""
from plax.experimental import xla_metadata as _public
from plax.experimental.xla_metadata import set_xla_metadata  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _public)
