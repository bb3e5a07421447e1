"""``jax._src.layout``: ``Layout`` and ``Format`` (``plax.sharding.layouts``)."""
from plax.sharding import layouts as _layouts
from plax.sharding.layouts import Format, Layout  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _layouts)
