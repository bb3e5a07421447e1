"""The Threefry-2x32 hash: the counter-based generator under plax.random.

``threefry2x32(k1, k2, x1, x2)`` hashes the counter pairs ``(x1, x2)`` with the
key ``(k1, k2)`` (all uint32; rank-0 operands broadcast, as lax does) by the
20 rounds of Threefry-2x32 (Salmon, Moraes, Dror and Shaw, "Parallel random
numbers: as easy as 1, 2, 3", SC 2011), returning the two hashed words. The
primitive lowers to the unrolled rounds on uint32, batches elementwise, and
has zero derivatives.
"""
from __future__ import annotations

import numpy as np

from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, register_lowering
from plax.core.trace import get_aval
from plax.lax import arithmetic as _arith
from plax.lax import bitwise as _bitwise
from plax.lax import shapes as _shapes
from plax.lax.ad_util import defzero
from plax.lax.batch_util import broadcasting
from plax.lax.common import check_same_shapes
from plax.lowering.inline import lower_fun

__all__ = ["threefry2x32", "threefry2x32_p"]

threefry2x32_p = Primitive("threefry2x32", multiple_results=True)

# The rotation distances of the even and odd groups of four rounds, and the constant the
# third key word is derived with (both from the Threefry specification).
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_KEY_PARITY = 0x1BD11BDA


def threefry2x32(k1, k2, x1, x2):
    """The Threefry-2x32 hash of the counters ``(x1, x2)`` under the key ``(k1, k2)``."""
    return threefry2x32_p.bind(k1, k2, x1, x2)


def _abstract(k1, k2, x1, x2):
    args = (k1, k2, x1, x2)
    bad = [a.str_short() for a in args if a.dtype != np.uint32]
    if bad:
        raise TypeError(f"threefry2x32 requires uint32 arguments, got ({', '.join(bad)}).")
    shape = check_same_shapes("threefry2x32", *args)
    return [ShapedArray(shape, np.dtype(np.uint32))] * 2


def _rotate_left(x, distance: int):
    left = _bitwise.shift_left(x, np.uint32(distance))
    return _bitwise.bitwise_or(left, _bitwise.shift_right_logical(x, np.uint32(32 - distance)))


def _rounds(k1, k2, x1, x2):
    """The 20 rounds, unrolled: five groups of four, a key injection after each group."""
    shape = check_same_shapes("threefry2x32", *(get_aval(a) for a in (k1, k2, x1, x2)))
    k1, k2, x1, x2 = (_shapes.broadcast_in_dim(a, shape, tuple(range(get_aval(a).ndim)))
                      if get_aval(a).shape != shape else a for a in (k1, k2, x1, x2))
    keys = (k1, k2, _bitwise.bitwise_xor(_bitwise.bitwise_xor(k1, k2), np.uint32(_KEY_PARITY)))
    x = [_arith.add(x1, keys[0]), _arith.add(x2, keys[1])]
    for group in range(5):
        for distance in _ROTATIONS[group % 2]:
            x[0] = _arith.add(x[0], x[1])
            x[1] = _bitwise.bitwise_xor(_rotate_left(x[1], distance), x[0])
        x[0] = _arith.add(x[0], keys[(group + 1) % 3])
        x[1] = _arith.add(_arith.add(x[1], keys[(group + 2) % 3]), np.uint32(group + 1))
    return x


abstract_eval_rules[threefry2x32_p] = _abstract
register_lowering(threefry2x32_p, lower_fun(_rounds, multiple_results=True))
broadcasting(threefry2x32_p)
defzero(threefry2x32_p)
