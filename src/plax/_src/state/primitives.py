"""``jax._src.state.primitives``: the state primitives (``plax.first_order.state``), the
functions reading and writing references with them, and pinned buffers (pin/unpin)."""
from plax.first_order.state import (addupdate_p, get_p, pin, pin_p, ref_addupdate,  # noqa: F401
                                    ref_get, ref_set, ref_swap, swap_p, unpin, unpin_p)

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {})
