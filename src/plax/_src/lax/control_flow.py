"""``jax._src.lax.control_flow``: plax's control flow and cumulative reductions
(``plax.lax``: cond, while_loop, scan, cumsum, ...)."""
from plax import lax as _public

from plax._src import _face

_REFUSED = {"common": "plax traces control-flow bodies in plax.higher_order.bodies; it has no "
                      "module of JAX's shared helpers and their caches"}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)
