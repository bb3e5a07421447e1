"""``jax._src.state.indexing``: slices of references whose start is known at run time
(``Slice``, made by ``ds``: ``plax.ref.ds``)."""
from plax.numpy.indexing import Slice  # noqa: F401
from plax.ref import ds  # noqa: F401

from plax._src import _face
from plax._src.state import _NO_STATE_IR

_REFUSED = {"NDIndexer": _NO_STATE_IR}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
