"""``jax._src.interpreters.ad``: as ``jax.interpreters.ad`` (``plax.interpreters.ad``, whose
tables are plax's jvp and transpose rules); the accumulators a VJPHiPrimitive's backward
rule adds into."""
from plax.interpreters import ad as _public
from plax.interpreters.ad import (Zero, instantiate_zeros, is_undefined_primal,  # noqa: F401
                                  primitive_jvps, primitive_transposes, zeros_like_aval)

from plax.api.hi_primitive import GradAccum, NullAccum  # noqa: F401 (VJPHiPrimitive's)

from plax._src import _face

_ACCUM = ("plax's reverse mode sums cotangents itself (plax.transforms.transpose); its only "
          "accumulators are VJPHiPrimitive's (GradAccum, NullAccum)")
_REFUSED = {"RefAccum": _ACCUM, "ValAccum": _ACCUM}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)
