"""``jax._src.compute_on``: ``compute_on`` (``plax.experimental.compute_on``: XLA's
compute-type and stream attributes on the ops staged inside)."""
from plax.experimental import compute_on as _public
from plax.experimental.compute_on import compute_on  # noqa: F401

from plax._src import _face

_REFUSED = {"compute_on2": "plax's compute_on is a context manager only; it has no "
                           "decorator form that stages a call"}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)
