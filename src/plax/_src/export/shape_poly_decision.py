"""``jax._src.export.shape_poly_decision``: the decision procedure for comparisons of
symbolic dimensions by elimination of terms (``plax.core.symbolic_decide``)."""
from plax.core.symbolic_decide import Decision as _DecisionByElimination  # noqa: F401
from plax.core.symbolic_decide import bounds as bounds_decision  # noqa: F401

from plax._src import _face

__doc__ = _face.document(__doc__, {})
__getattr__ = _face.face_getattr(__name__, {})
