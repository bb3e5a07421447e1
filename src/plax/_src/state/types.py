"""``jax._src.state.types``: the abstract type of a mutable array reference (``plax.ref``)."""
from plax.core.effects import AccumEffect, ReadEffect, RefEffect, WriteEffect  # noqa: F401
from plax.ref import AbstractRef  # noqa: F401

from plax._src import _face
from plax._src.state import _NO_STATE_IR

_REFUSED = dict.fromkeys(("TransformedRef", "shaped_array_ref", "uninitialized",
                          "_ref_type_aval_mappings"), _NO_STATE_IR)

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
