"""``jax._src.interpreters.pxla``: as ``jax.interpreters.pxla`` (``plax.interpreters.pxla``),
and ``batched_device_put`` (an array from its per-device pieces, through plax.runtime)."""
from plax.interpreters import pxla as _public
from plax.interpreters.pxla import *  # noqa: F401,F403

from plax._src import _face

_PUT = "plax puts and reads arrays through plax.runtime.xla, without per-aval handlers"
_REFUSED = {"global_result_handlers": _PUT, "shard_args": _PUT}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)


def batched_device_put(aval, sharding, xs, devices, committed=True, enable_x64=None):
    """One array typed ``aval`` and laid out by ``sharding``, from one piece per device of
    ``devices`` (``xs[i]`` on ``devices[i]``: host data, or an array, copied there when it
    lives elsewhere). ``enable_x64`` is accepted: the pieces take ``aval``'s dtype."""
    del enable_x64
    from plax.api.arrays import assemble_shards
    from plax.runtime import dispatch
    from plax.runtime.array import CONCRETE
    xs, devices = list(xs), list(devices)
    if len(xs) != len(devices):
        raise ValueError(f"batched_device_put takes one piece per device: got {len(xs)} "
                         f"pieces for {len(devices)} devices.")
    pieces = {}
    for x, d in zip(xs, devices):
        if type(x) in CONCRETE:
            piece = dispatch.to_device(x, d, committed=committed)
        else:
            piece = dispatch.array_from_host(x, aval.dtype, aval.weak_type, d, committed)
        if piece.dtype != aval.dtype:
            raise ValueError(f"batched_device_put: a piece of dtype {piece.dtype} for an array "
                             f"of dtype {aval.dtype}.")
        pieces[d] = piece
    if len(pieces) == 1 and sharding.is_fully_addressable and \
            next(iter(pieces.values())).sharding == sharding:
        return next(iter(pieces.values()))
    return assemble_shards(aval.shape, sharding, pieces, aval.dtype, aval.weak_type)
