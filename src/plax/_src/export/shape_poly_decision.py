"""``jax._src.export.shape_poly_decision``: JAX's decision procedure for symbolic dimension
comparisons (by elimination); plax decides from bounds in ``plax.core.symbolic_shapes``."""
from plax._src import _face
from plax._src.export.shape_poly import _DECIDE

_REFUSED = {"_DecisionByElimination": _DECIDE}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
