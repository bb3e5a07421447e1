"""``jax._src.shard_map``: ``shard_map`` (``plax.api.shard_map``)."""
from plax.api import shard_map as _shard_map
from plax.api.shard_map import shard_map  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _shard_map)
