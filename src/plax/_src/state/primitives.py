"""``jax._src.state.primitives``: reading and writing mutable array references: plax's
``plax.ref.get``/``set``/``swap``/``addupdate`` under JAX's ``ref_*`` names."""
from plax.ref import addupdate as ref_addupdate  # noqa: F401
from plax.ref import get as ref_get  # noqa: F401
from plax.ref import set as ref_set  # noqa: F401
from plax.ref import swap as ref_swap  # noqa: F401

from plax._src import _face
from plax._src.state import _NO_STATE_IR

_REFUSED = dict.fromkeys(("get_p", "swap_p", "addupdate_p", "pin", "unpin", "pin_p",
                          "unpin_p"), _NO_STATE_IR)

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
