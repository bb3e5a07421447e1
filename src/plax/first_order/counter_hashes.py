"""The counter-based hashes behind the threefry4x32, philox2x32 and philox4x32 PRNGs.

Each primitive takes its key words, then its counter words (all uint32; rank-0 operands
broadcast, as lax does), and returns as many hashed words as there are counter words:

- ``threefry4x32_p(k0, k1, k2, k3, x0, x1, x2, x3)``: Threefry-4x32, 20 rounds;
- ``philox2x32_p(k0, x0, x1)``: Philox-2x32, 10 rounds;
- ``philox4x32_p(k0, k1, x0, x1, x2, x3)``: Philox-4x32, 10 rounds.

The algorithms and their constants are those of Salmon, Moraes, Dror and Shaw, "Parallel
random numbers: as easy as 1, 2, 3" (SC 2011) and its Random123 library, whose known-answer
vectors plax's tests check. Each primitive lowers to its unrolled rounds, batches
elementwise and has zero derivatives (``threefry2x32_p`` lives in ``plax.first_order.prng``).
"""
from __future__ import annotations

import numpy as np

from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, register_lowering
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import bitwise as _bitwise
from plax.first_order import shapes as _shapes
from plax.first_order.ad_util import defzero
from plax.first_order.batch_util import broadcasting
from plax.first_order.common import check_same_shapes
from plax.first_order.utility import mulhi
from plax.lowering.inline import lower_fun

__all__ = ["threefry4x32_p", "philox2x32_p", "philox4x32_p"]

U32 = np.uint32

# Threefry-4x32: the rotation distances of the two mixes of each of the eight rounds of a
# cycle, and the constant the fifth key word is derived with.
_ROTATIONS_4X32 = ((10, 26), (11, 21), (13, 27), (23, 5), (6, 20), (17, 11), (25, 10),
                   (18, 20))
_KEY_PARITY = 0x1BD11BDA
# Philox: the round multipliers and the Weyl increments the key words advance by each round.
_PHILOX2_MULTIPLIER = 0xD256D193
_PHILOX4_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
_PHILOX_WEYL = (0x9E3779B9, 0xBB67AE85)


def _broadcast_all(name: str, args):
    shape = check_same_shapes(name, *(get_aval(a) for a in args))
    return [a if get_aval(a).shape == shape else
            _shapes.broadcast_in_dim(a, shape, tuple(range(get_aval(a).ndim))) for a in args]


def _rotl(x, distance: int):
    return _bitwise.bitwise_or(_bitwise.shift_left(x, U32(distance)),
                               _bitwise.shift_right_logical(x, U32(32 - distance)))


def _threefry4x32_rounds(k0, k1, k2, k3, x0, x1, x2, x3):
    k0, k1, k2, k3, x0, x1, x2, x3 = _broadcast_all("threefry4x32",
                                                    (k0, k1, k2, k3, x0, x1, x2, x3))
    xor = _bitwise.bitwise_xor
    ks = (k0, k1, k2, k3, xor(xor(xor(xor(k0, k1), k2), k3), U32(_KEY_PARITY)))
    x = [_arith.add(w, k) for w, k in zip((x0, x1, x2, x3), ks)]
    for r in range(20):
        a, b = _ROTATIONS_4X32[r % 8]
        # Even rounds mix words (0, 1) and (2, 3); odd rounds (0, 3) and (2, 1).
        p, q = (1, 3) if r % 2 == 0 else (3, 1)
        x[0] = _arith.add(x[0], x[p])
        x[p] = xor(_rotl(x[p], a), x[0])
        x[2] = _arith.add(x[2], x[q])
        x[q] = xor(_rotl(x[q], b), x[2])
        if r % 4 == 3:  # key injection s = r // 4 + 1
            s = r // 4 + 1
            x = [_arith.add(x[i], ks[(s + i) % 5]) for i in range(4)]
            x[3] = _arith.add(x[3], U32(s))
    return x


def _philox2x32_rounds(k0, x0, x1):
    k0, x0, x1 = _broadcast_all("philox2x32", (k0, x0, x1))
    m = U32(_PHILOX2_MULTIPLIER)
    for r in range(10):
        if r:
            k0 = _arith.add(k0, U32(_PHILOX_WEYL[0]))
        hi, lo = mulhi(x0, _full_like(x0, m)), _arith.mul(x0, m)
        x0, x1 = _bitwise.bitwise_xor(_bitwise.bitwise_xor(hi, x1), k0), lo
    return [x0, x1]


def _philox4x32_rounds(k0, k1, x0, x1, x2, x3):
    k0, k1, x0, x1, x2, x3 = _broadcast_all("philox4x32", (k0, k1, x0, x1, x2, x3))
    m0, m1 = (U32(m) for m in _PHILOX4_MULTIPLIERS)
    xor = _bitwise.bitwise_xor
    for r in range(10):
        if r:
            k0 = _arith.add(k0, U32(_PHILOX_WEYL[0]))
            k1 = _arith.add(k1, U32(_PHILOX_WEYL[1]))
        hi0, lo0 = mulhi(x0, _full_like(x0, m0)), _arith.mul(x0, m0)
        hi1, lo1 = mulhi(x2, _full_like(x2, m1)), _arith.mul(x2, m1)
        x0, x1, x2, x3 = xor(xor(hi1, x1), k0), lo1, xor(xor(hi0, x3), k1), lo0
    return [x0, x1, x2, x3]


def _full_like(x, value):
    return _shapes.full(get_aval(x).shape, value, np.dtype(U32))


def _hash_primitive(name: str, n_keys: int, n_counters: int, rounds):
    prim = Primitive(name, multiple_results=True)

    def abstract(*args):
        if len(args) != n_keys + n_counters:
            raise TypeError(f"{name} takes {n_keys + n_counters} arguments, got {len(args)}.")
        bad = [a.str_short() for a in args if a.dtype != np.uint32]
        if bad:
            raise TypeError(f"{name} requires uint32 arguments, got ({', '.join(bad)}).")
        shape = check_same_shapes(name, *args)
        return [ShapedArray(shape, np.dtype(np.uint32))] * n_counters

    abstract_eval_rules[prim] = abstract
    register_lowering(prim, lower_fun(rounds, multiple_results=True))
    broadcasting(prim)
    defzero(prim)
    return prim


threefry4x32_p = _hash_primitive("threefry4x32", 4, 4, _threefry4x32_rounds)
philox2x32_p = _hash_primitive("philox2x32", 1, 2, _philox2x32_rounds)
philox4x32_p = _hash_primitive("philox4x32", 2, 4, _philox4x32_rounds)
