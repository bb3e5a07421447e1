"""``jax._src.named_sharding``: ``NamedSharding`` (``plax.sharding.named``)."""
from plax.sharding import named as _named
from plax.sharding.named import DuplicateSpecError, NamedSharding  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _named)
