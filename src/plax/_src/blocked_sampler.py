"""``jax._src.blocked_sampler``: JAX's blocked random sampling; plax has no such sampler."""
from plax._src import _face

_REFUSED = dict.fromkeys(("blocked_fold_in", "sample_block"),
                         "plax has no blocked sampler (draw with plax.random directly)")

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
