"""The Threefry-2x32 hash, and the primitives on typed PRNG keys.

``threefry2x32(k1, k2, x1, x2)`` hashes the counter pairs ``(x1, x2)`` with the
key ``(k1, k2)`` (all uint32; rank-0 operands broadcast, as lax does) by the
20 rounds of Threefry-2x32 (Salmon, Moraes, Dror and Shaw, "Parallel random
numbers: as easy as 1, 2, 3", SC 2011), returning the two hashed words. The
primitive lowers to the unrolled rounds on uint32 (on CPU, to a loop over the five groups
of rounds: plax.higher_order.loops registers that rule), batches elementwise, and has zero
derivatives.

Typed keys (dtype ``key<fry>``) are made and used by ``random_seed``,
``random_bits``, ``random_split``, ``random_fold_in``, ``random_wrap``,
``random_unwrap`` and ``random_clone``. Each lowers to its ``PRNGImpl``'s
function on the keys' physical data (uint32 words), so a new implementation is
a new ``PRNGImpl``, not new primitives.

With ``jax_debug_key_reuse`` on, eager ``random_bits`` and ``random_split`` consume their
concrete key array: it remembers where, and consuming it again raises ``KeyReuseError``
(``plax.interpreters.key_reuse`` checks jaxprs and jitted calls with the same marks).
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray, physical_aval
from plax.core.config import config
from plax.core.dtypes import KeyType
from plax.core.errors import KeyReuseError
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, impl_rules, register_lowering
from plax.core.source_info import user_frame
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import bitwise as _bitwise
from plax.first_order import shapes as _shapes
from plax.first_order.ad_util import defzero
from plax.first_order.batch_util import bdim_at_front, broadcasting, vectorized
from plax.first_order.common import check_same_shapes
from plax.first_order.key_layout import physical_ctx
from plax.lowering.inline import lower_fun
from plax.runtime import dispatch
from plax.runtime.array import CONCRETE

__all__ = ["threefry2x32", "threefry2x32_p", "PRNGImpl", "random_seed", "random_bits",
           "random_split", "random_fold_in", "random_wrap", "random_unwrap", "random_clone",
           "random_seed_p", "random_bits_p", "random_split_p", "random_fold_in_p",
           "random_wrap_p", "random_unwrap_p", "random_clone_p"]

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


# --- typed keys: the random_* primitives ----------------------------------------------------
class PRNGImpl:
    """A PRNG implementation: how keys are made, split, folded and turned into bits.

    Its functions act on keys' physical data (``uint32`` arrays of shape
    ``batch + key_shape``), batched over the leading dimensions:
    ``seed(seeds) -> keys``, ``split(keys, shape) -> keys`` (shape ``batch + shape +
    key_shape``), ``fold_in(keys, data) -> keys`` and ``random_bits(keys, bit_width,
    shape) -> bits`` (shape ``batch + shape``). Typed keys of this implementation have
    the dtype ``impl.dtype``, printed ``key<tag>``.
    """

    def __init__(self, name: str, tag: str, key_shape: tuple, seed, split, fold_in, random_bits):
        self.name, self.tag, self.key_shape = name, tag, tuple(key_shape)
        self.seed, self.split, self.fold_in, self.random_bits = seed, split, fold_in, random_bits
        self.dtype = KeyType(self)

    def __repr__(self):  # as jaxprs show the parameter: random_wrap[impl=fry]
        return self.tag


def _check_keys(name: str, aval) -> None:
    if not isinstance(aval.dtype, KeyType):
        raise TypeError(f"{name} takes an array of typed PRNG keys, got {aval.str_short()}. Make "
                        "typed keys with jax.random.key or jax.random.wrap_key_data.")


def _lower_impl(method: str):
    """A lowering rule running the key implementation's ``method`` on physical data."""
    def rule(ctx, *operands, **params):
        impl = next(a.dtype._impl for a in (*ctx.avals_in, *ctx.avals_out)
                    if isinstance(a.dtype, KeyType))
        params.pop("impl", None)
        return lower_fun(getattr(impl, method))(physical_ctx(ctx), *operands, **params)
    rule.__name__ = f"lower_{method}"
    return rule


def _identity_lowering(ctx, x, **params):
    return x  # wrapping and unwrapping change the type, not the data


def _keys_first(prim):
    """Batching rule: the batch dimension of every operand moved to the front (the
    implementations batch over leading dimensions)."""
    def rule(axis, vals, dims, **params):
        return prim.bind(*[bdim_at_front(v, d, axis.size) for v, d in zip(vals, dims)],
                         **params), 0
    batch_rules[prim] = rule


random_seed_p = Primitive("random_seed")
random_bits_p = Primitive("random_bits")
random_split_p = Primitive("random_split")
random_fold_in_p = Primitive("random_fold_in")
random_wrap_p = Primitive("random_wrap")
random_unwrap_p = Primitive("random_unwrap")
random_clone_p = Primitive("random_clone")


def _seed_abstract(seeds, *, impl):
    if not dtypes.is_integer(seeds.dtype):
        raise TypeError(f"PRNG key seed must be an integer; got {seeds.str_short()}.")
    return ShapedArray(seeds.shape, impl.dtype)


_BIT_WIDTHS = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _bits_abstract(keys, *, bit_width, shape):
    _check_keys("random_bits", keys)
    if bit_width not in _BIT_WIDTHS:
        raise TypeError("requires 8-, 16-, 32- or 64-bit field width.")
    return ShapedArray(keys.shape + tuple(shape), np.dtype(_BIT_WIDTHS[bit_width]))


def _split_abstract(keys, *, shape):
    _check_keys("random_split", keys)
    return ShapedArray(keys.shape + tuple(shape), keys.dtype)


def _fold_in_abstract(keys, msgs):
    _check_keys("random_fold_in", keys)
    if msgs.dtype != np.uint32 or msgs.shape != keys.shape:
        raise TypeError(f"random_fold_in takes uint32 data of the keys' shape {keys.shape}, got "
                        f"{msgs.str_short()}.")
    return keys


def _wrap_abstract(base, *, impl):
    if base.dtype != np.uint32:
        raise TypeError(f"JAX encountered invalid PRNG key data: expected key_data.dtype = uint32; got "
                        f"dtype={base.dtype}.")
    k = len(impl.key_shape)
    if base.ndim < k or base.shape[base.ndim - k:] != impl.key_shape:
        raise TypeError(f"JAX encountered invalid PRNG key data: expected key_data.shape to end with "
                        f"{impl.key_shape}; got shape={base.shape} for impl={impl.name}.")
    return ShapedArray(base.shape[:base.ndim - k], impl.dtype)


def _unwrap_abstract(keys):
    _check_keys("random_unwrap", keys)
    return physical_aval(keys)


def _clone_abstract(keys):
    _check_keys("random_clone", keys)
    return keys


def _wrap_batch(axis, vals, dims, *, impl):
    (base,), (d,) = vals, dims
    if d >= get_aval(base).ndim - len(impl.key_shape):  # batched along a word axis
        base, d = bdim_at_front(base, d, axis.size), 0
    return random_wrap_p.bind(base, impl=impl), d


for _prim, _abstract_rule in [(random_seed_p, _seed_abstract), (random_bits_p, _bits_abstract),
                              (random_split_p, _split_abstract),
                              (random_fold_in_p, _fold_in_abstract),
                              (random_wrap_p, _wrap_abstract), (random_unwrap_p, _unwrap_abstract),
                              (random_clone_p, _clone_abstract)]:
    abstract_eval_rules[_prim] = _abstract_rule
    defzero(_prim)

register_lowering(random_seed_p, _lower_impl("seed"))
register_lowering(random_bits_p, _lower_impl("random_bits"))
register_lowering(random_split_p, _lower_impl("split"))
register_lowering(random_fold_in_p, _lower_impl("fold_in"))
for _prim in (random_wrap_p, random_unwrap_p, random_clone_p):
    register_lowering(_prim, _identity_lowering)
vectorized(random_seed_p)
vectorized(random_unwrap_p)
vectorized(random_clone_p)
_keys_first(random_bits_p)
_keys_first(random_split_p)
_keys_first(random_fold_in_p)
batch_rules[random_wrap_p] = _wrap_batch


# --- eager key consumption (jax_debug_key_reuse) ---------------------------------------------
KEY_REUSE_ADVICE = ("Each key may be used once: split it (jax.random.split) to get as many "
                    "fresh keys as you need, or copy it with jax.random.clone.")


def consumed_at(x) -> str | None:
    """Where the concrete key array ``x`` was consumed, or None (not consumed, or no array)."""
    return getattr(x, "_consumed_at", None) if type(x) in CONCRETE else None


def mark_consumed(x, where: str) -> None:
    """Remember that the concrete key array ``x`` was consumed at ``where`` (first time only)."""
    if type(x) in CONCRETE and isinstance(x.aval.dtype, KeyType) and consumed_at(x) is None:
        x._consumed_at = where


def call_site() -> str:
    """The user's line running now, as ``file:line (function)``."""
    f = user_frame()
    return f"{f.f_code.co_filename}:{f.f_lineno} ({f.f_code.co_name})" if f else "an unknown place"


def previously_consumed(what: str, index: int, where: str) -> KeyReuseError:
    """The error for a consumed key passed again, as argument ``index`` of ``what``."""
    return KeyReuseError(f"Previously-consumed key passed to {what} at index {index}: it was "
                         f"consumed at {where}. {KEY_REUSE_ADVICE}")


def _consuming_impl(prim):
    """Eager rule: run ``prim``; with the key-reuse flag on, its key operand is consumed."""
    def impl(*args, **params):
        if not config.read("debug_key_reuse"):
            return dispatch.run_primitive(prim, args, params)
        where = consumed_at(args[0])
        if where is not None:
            raise previously_consumed(prim.name, 0, where)
        out = dispatch.run_primitive(prim, args, params)
        mark_consumed(args[0], call_site())
        return out
    return impl


impl_rules[random_bits_p] = _consuming_impl(random_bits_p)
impl_rules[random_split_p] = _consuming_impl(random_split_p)


def random_seed(seeds, impl: PRNGImpl):
    """Typed keys of ``impl`` from an integer array of seeds (one key per seed)."""
    return random_seed_p.bind(seeds, impl=impl)


def random_bits(keys, bit_width: int, shape):
    """Random bits (unsigned, ``bit_width`` wide) of shape ``keys.shape + shape``."""
    return random_bits_p.bind(keys, bit_width=int(bit_width), shape=tuple(shape))


def random_split(keys, shape):
    """New keys of shape ``keys.shape + shape`` derived from ``keys``."""
    return random_split_p.bind(keys, shape=tuple(shape))


def random_fold_in(keys, msgs):
    """Keys derived from ``keys`` and the uint32 data ``msgs`` (of the keys' shape)."""
    return random_fold_in_p.bind(keys, msgs)


def random_wrap(base, impl: PRNGImpl):
    """Typed keys of ``impl`` whose data is the uint32 array ``base``."""
    return random_wrap_p.bind(base, impl=impl)


def random_unwrap(keys):
    """The uint32 data of typed keys (shape ``keys.shape + key_shape``)."""
    return random_unwrap_p.bind(keys)


def random_clone(keys):
    """The same keys, as a value of their own (for the key-reuse checker)."""
    return random_clone_p.bind(keys)


def filled_keys(shape, dtype, word: int = 0):
    """Keys of ``dtype`` whose every data word is ``word`` (zeros: a placeholder buffer)."""
    words = _shapes.full(tuple(shape) + dtype.physical_shape, word, dtype.physical_dtype)
    return random_wrap(words, dtype._impl)
