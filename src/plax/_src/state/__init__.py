"""``jax._src.state``: mutable array references. plax's refs (``plax.ref``) are hi values whose
reads and writes act on the array they hold, with no state primitives, effects or discharge
of their own; the names below that need those refuse (see ``types``, ``primitives``,
``discharge``, ``indexing``)."""
from plax.core.effects import AccumEffect, ReadEffect, RefEffect, WriteEffect  # noqa: F401
from plax.ref import AbstractRef  # noqa: F401

from plax._src import _face

_NO_STATE_IR = ("plax's refs are hi values (plax.ref) without state primitives, effects or "
                "transformed-ref views in jaxprs")
_REFUSED = dict.fromkeys(("TransformedRef",), _NO_STATE_IR)

__doc__ = _face.document(__doc__, _REFUSED)
_SUBMODULES = (
    "types", "primitives", "discharge", "indexing")
__getattr__ = _face.package_getattr(__name__, _SUBMODULES, _face.face_getattr(__name__, _REFUSED))
