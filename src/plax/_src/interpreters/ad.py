"""``jax._src.interpreters.ad``: as ``jax.interpreters.ad`` (``plax.interpreters.ad``, whose
tables are plax's jvp and transpose rules)."""
from plax.interpreters import ad as _public
from plax.interpreters.ad import (Zero, instantiate_zeros, is_undefined_primal,  # noqa: F401
                                  primitive_jvps, primitive_transposes, zeros_like_aval)

from plax._src import _face

_ACCUM = ("plax's reverse mode sums cotangents itself (plax.transforms.transpose); it has no "
          "accumulator objects for hi types")
_REFUSED = {"GradAccum": _ACCUM, "NullAccum": _ACCUM, "RefAccum": _ACCUM, "ValAccum": _ACCUM}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)
