"""``jax._src.literals``: JAX's typed Python-scalar literals. plax has none: a Python scalar
is weakly typed, and a value of an explicit dtype is a NumPy scalar or an array."""
from plax._src import _face

_REFUSED = dict.fromkeys(("TypedInt", "TypedFloat", "TypedComplex", "TypedNdArray"),
                         "plax has no typed Python-scalar literals (a NumPy scalar carries a "
                         "dtype; a Python scalar is weakly typed)")

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
