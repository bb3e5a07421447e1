"""``jax._src.export.shape_poly``: symbolic dimensions (``plax.core.symbolic_shapes``: the
integer polynomials ``_DimExpr`` of terms ``_DimTerm`` and factors ``_DimFactor``, their
scope; ``plax.core.symbolic_decide``: bounds and decisions) and ``symbolic_shape``."""
import operator as _operator

from plax.core import symbolic_shapes as _shapes
from plax.core.errors import InconclusiveDimensionOperation  # noqa: F401
from plax.core.symbolic_decide import BoundsPrecision, Comparator  # noqa: F401
from plax.core.symbolic_decide import bounds as _bounds_decision  # noqa: F401
from plax.core.symbolic_shapes import DimExpr as _DimExpr, SymbolicScope  # noqa: F401
from plax.core.symbolic_shapes import _Atom as _DimFactor, _DimTerm  # noqa: F401
from plax.export.shape_specs import symbolic_args_specs, symbolic_shape  # noqa: F401

from plax._src import _face

DimSize = int | _DimExpr


def _ensure_poly(p, operation_name: str, scope) -> _DimExpr:
    """``p`` as a dimension expression of ``scope`` (a constant one for an integer)."""
    if isinstance(p, _DimExpr):
        scope._check_same_scope(p, f"for operation {operation_name}")
        return p
    try:
        k = _operator.index(p)
    except TypeError:
        raise TypeError(f"Symbolic dimension {operation_name} not supported for {p}.") from None
    return _DimExpr({(): k}, scope)


__doc__ = _face.document(__doc__, {})
__getattr__ = _face.face_getattr(__name__, {}, _shapes)
