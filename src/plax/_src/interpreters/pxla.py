"""``jax._src.interpreters.pxla``: as ``jax.interpreters.pxla`` (``plax.interpreters.pxla``)."""
from plax.interpreters import pxla as _public
from plax.interpreters.pxla import *  # noqa: F401,F403

from plax._src import _face

_PUT = "plax puts and reads arrays through plax.runtime.xla, without per-aval handlers"
_REFUSED = {"batched_device_put": _PUT, "global_result_handlers": _PUT,
            "shard_args": _PUT}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)
