"""``jax._src.export.shape_poly``: symbolic dimensions (``plax.core.symbolic_shapes``: the
integer polynomials ``_DimExpr``, their scope, decisions from bounds) and
``symbolic_shape`` (``plax.export``)."""
from plax.core import symbolic_shapes as _shapes
from plax.core.errors import InconclusiveDimensionOperation  # noqa: F401
from plax.core.symbolic_shapes import DimExpr as _DimExpr, SymbolicScope  # noqa: F401
from plax.export.shape_specs import symbolic_args_specs, symbolic_shape  # noqa: F401

from plax._src import _face

DimSize = int | _DimExpr
_DECIDE = ("plax decides comparisons of symbolic dimensions from their bounds inside "
           "plax.core.symbolic_shapes; it has no separate decision procedure or precision "
           "settings")
_REFUSED = {"BoundsPrecision": _DECIDE, "Comparator": _DECIDE, "_bounds_decision": _DECIDE,
            "_ensure_poly": "plax's dimension arithmetic converts integers itself"}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _shapes)
