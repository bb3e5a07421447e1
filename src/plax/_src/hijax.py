"""``jax._src.hijax``: hi types and hi primitives (``plax.core.hi_types``,
``plax.experimental.hijax``)."""
from plax.core import hi_types as _hi_types
from plax.core.avals import ShapedArray  # noqa: F401
from plax.experimental import hijax as _public

from plax._src import _face

_BOX = "plax's mutable hi values are refs (plax.ref); it has no Box type or box primitives"
_REFUSED = {"Box": _BOX, "new_box": _BOX, "box_get": _BOX, "box_set": _BOX,
            "box_effect": _BOX, "Ty": _BOX, "Log": _BOX,
            "MappingSpec": "plax batches hi values through their lo values; it has no "
                           "mapping specs for hi types",
            "HiPspec": "plax shards hi values through their lo values; it has no "
                       "partition specs for hi types",
            "custom_vjp3": "plax's custom_vjp (plax.custom_derivatives) is the one form"}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public, _hi_types)
