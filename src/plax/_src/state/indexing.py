"""``jax._src.state.indexing``: the indices references are read and written at
(``plax.core.refs``): ``NDIndexer``, and ``Slice`` (made by ``ds``: ``plax.ref.ds``)."""
from plax.core.refs import NDIndexer, Slice  # noqa: F401
from plax.ref import ds  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {})
