"""``jax._src.dlpack``: ``plax.dlpack``, and ``SUPPORTED_DTYPES_SET``: the dtypes an array
may have to be exchanged over DLPack."""
import numpy as _np

from plax import dlpack as _public
from plax.core import dtypes as _dtypes

from plax._src import _face

_face_getattr = _face.face_getattr(__name__, {}, _public)


def __getattr__(name):
    if name == "SUPPORTED_DTYPES_SET":  # bfloat16 is ml_dtypes', loaded on first use
        return frozenset(_np.dtype(getattr(_dtypes.ml_dtypes_module(), n) if n == "bfloat16"
                                   else n) for n in _public.SUPPORTED_DTYPES)
    return _face_getattr(name)
