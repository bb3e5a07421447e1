"""``jax._src.profiler``: ``plax.profiler`` (traces, annotations, device memory profiles)."""
from plax import profiler as _public

from plax._src import _face

_REFUSED = {"stop_and_get_fdo_profile": "plax's profiler writes traces for TensorBoard/"
                                        "Perfetto; it does not return XLA's FDO profile"}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)
