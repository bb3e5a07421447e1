"""``jax._src.interpreters.batching``: as ``jax.interpreters.batching``
(``plax.interpreters.batching``: plax's batch rules, vmappable types)."""
from plax.interpreters import batching as _public

from plax._src import _face

_REFUSED = {"infer": "plax's vmap takes out_axes as integers or None; it has no marker "
                     "asking it to infer an output's batch axis"}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)
