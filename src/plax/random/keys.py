"""PRNG keys: typed keys (``key``, dtype ``key<fry>``) and legacy ``uint32[2]`` keys
(``PRNGKey``), and the functions that make, derive, wrap and unwrap them.

The samplers take either kind. A legacy key is wrapped into a typed key on
entry (``random_wrap``, as JAX does), so every draw runs on typed keys; ``split``,
``fold_in`` and ``clone`` give back the kind of key they were given.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from plax.api.vmap import vmap
from plax.core import dtypes
from plax.core.config import config
from plax.core.source_info import user_stacklevel
from plax.core.dtypes import KeyType
from plax.core.trace import Tracer, get_aval
from plax.first_order import conversion as _conversion
from plax.first_order import prng as _prng
from plax.random import counter_prngs, rbg, threefry
from plax.runtime.array import install_key_array_rebuilder
from plax.runtime.dispatch import array_from_host

__all__ = ["PRNGKey", "key", "key_data", "wrap_key_data", "key_impl", "split", "fold_in",
           "clone", "PRNGSpec", "key_dtype"]

_IMPLS = {"threefry2x32": threefry.threefry_prng_impl, "rbg": rbg.rbg_prng_impl,
          "unsafe_rbg": rbg.unsafe_rbg_prng_impl,
          "threefry4x32": counter_prngs.threefry4x32_prng_impl,
          "philox2x32": counter_prngs.philox2x32_prng_impl,
          "philox4x32": counter_prngs.philox4x32_prng_impl}


def register_impl(impl: _prng.PRNGImpl) -> None:
    """Makes ``impl`` known by its name (``impl=name`` anywhere), as JAX's ``register_prng``."""
    if impl.name in _IMPLS:
        raise ValueError(f"PRNG with name {impl.name} already registered: {impl}")
    _IMPLS[impl.name] = impl


def default_impl() -> _prng.PRNGImpl:
    """The implementation ``jax_default_prng_impl`` names (keys made without ``impl=``, and
    legacy uint32 keys, are of it)."""
    return _IMPLS[config.read("default_prng_impl")]


class PRNGSpec:
    """Names a PRNG implementation (what ``key_impl`` returns and ``impl=`` accepts)."""

    __slots__ = ("_impl",)

    def __init__(self, impl: _prng.PRNGImpl):
        self._impl = impl

    def __repr__(self):
        return repr(self._impl.name)

    def __str__(self):
        return self._impl.name

    def __eq__(self, other):
        if isinstance(other, str):
            return other == self._impl.name
        return isinstance(other, PRNGSpec) and other._impl is self._impl

    def __hash__(self):
        return hash(self._impl.name)


def _resolve_impl(impl) -> _prng.PRNGImpl:
    if impl is None:
        return default_impl()
    if isinstance(impl, PRNGSpec):
        return impl._impl
    if isinstance(impl, _prng.PRNGImpl):
        return impl
    if isinstance(impl, str) and impl in ("threefry2x32", "threefry"):
        return _IMPLS["threefry2x32"]
    if isinstance(impl, str) and impl in _IMPLS:
        return _IMPLS[impl]
    names = ", ".join(f'"{n}"' for n in _IMPLS)
    raise ValueError(f'unrecognized PRNG implementation "{impl}". Did you mean one of: '
                     f"{names}?")


def _over_leading(fn, n_lead: int):
    """``fn`` mapped over the first ``n_lead`` dimensions of its first argument (and of the
    second, when given as an array of the same leading shape)."""
    for _ in range(n_lead):
        fn = vmap(fn)
    return fn


def impl_from_key_functions(name: str, tag: str, key_shape, seed, split, random_bits,
                            fold_in) -> _prng.PRNGImpl:
    """A PRNG implementation from functions on one key's uint32 data (of ``key_shape``), as
    JAX's ``PRNGImpl`` takes them: ``seed(seed) -> key``, ``split(key, shape) -> keys``,
    ``random_bits(key, bit_width, shape) -> bits``, ``fold_in(key, data) -> key``; arrays of
    keys map them with ``vmap``."""
    key_shape = tuple(int(d) for d in key_shape)
    k = len(key_shape)

    def batched_seed(seeds):
        return _over_leading(seed, get_aval(seeds).ndim)(seeds)

    def batched_split(keys, shape):
        return _over_leading(lambda key: split(key, tuple(shape)), get_aval(keys).ndim - k)(keys)

    def batched_fold_in(keys, data):
        return _over_leading(fold_in, get_aval(keys).ndim - k)(keys, data)

    def batched_bits(keys, bit_width, shape):
        one = lambda key: random_bits(key, bit_width, tuple(shape))  # noqa: E731
        return _over_leading(one, get_aval(keys).ndim - k)(keys)

    return _prng.PRNGImpl(name, tag, key_shape, seed=batched_seed, split=batched_split,
                          fold_in=batched_fold_in, random_bits=batched_bits)


# --- making keys ----------------------------------------------------------------------------
def _seed_array(name: str, seed):
    """An integer seed as an array; 64-bit Python seeds keep their low 32 bits unless 64-bit
    types are enabled, as in JAX."""
    if np.ndim(seed):
        raise TypeError(f"{name} accepts a scalar seed, but was given an array of shape "
                        f"{np.shape(seed)} != (). Use jax.vmap for batching")
    if isinstance(seed, (int, np.integer, np.bool_)):  # bools count as the ints 0 and 1
        seed = int(seed)
        if not -2 ** 63 <= seed < 2 ** 63:
            raise OverflowError("Python int too large to convert to C long")
        value = np.array(seed, np.int64)
        return array_from_host(value if dtypes.x64_enabled() else value.astype(np.int32))
    if not isinstance(seed, Tracer) and not hasattr(seed, "aval"):
        seed = array_from_host(np.asarray(seed))
    aval = get_aval(seed)
    if isinstance(aval.dtype, KeyType) or not dtypes.is_integer(aval.dtype):
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    return seed


def key(seed, *, impl=None):
    """A typed PRNG key (dtype ``key<fry>``, shape ``()``) from an integer seed."""
    return _prng.random_seed(_seed_array("key", seed), _resolve_impl(impl))


def PRNGKey(seed, *, impl=None):
    """A legacy key: the uint32 data of ``key(seed)`` (``uint32[2]`` for Threefry); with
    ``jax_enable_custom_prng`` on, the typed key itself."""
    keys = _prng.random_seed(_seed_array("PRNGKey", seed), _resolve_impl(impl))
    return keys if config.read("enable_custom_prng") else _prng.random_unwrap(keys)


def key_data(keys):
    """The uint32 data of typed keys (shape ``keys.shape + (2,)``); legacy keys unchanged."""
    if is_typed(keys):
        return _prng.random_unwrap(keys)
    return _as_legacy("key_data", keys)


def wrap_key_data(key_bits_array, *, impl=None):
    """Typed keys whose data is the uint32 array ``key_bits_array`` (last axis: the words)."""
    if is_typed(key_bits_array):
        raise TypeError("wrap_key_data accepts only uint32 key data, got an array of typed "
                        f"keys ({get_aval(key_bits_array).str_short()}).")
    if not isinstance(key_bits_array, Tracer) and not hasattr(key_bits_array, "aval"):
        key_bits_array = array_from_host(np.asarray(key_bits_array))
    return _prng.random_wrap(key_bits_array, _resolve_impl(impl))


def rebuild_key_array(key_bits, impl_name: str):
    """The key array a pickle holds: its uint32 data and its implementation's name."""
    return wrap_key_data(key_bits, impl=impl_name)


install_key_array_rebuilder(rebuild_key_array)  # pickles of key arrays name this function


def key_dtype(impl_spec=None):
    """The dtype of typed keys of the implementation ``impl_spec`` names (a name, a
    ``PRNGSpec``, or None for the default one): ``key<fry>`` for Threefry."""
    return _resolve_impl(impl_spec).dtype


def key_impl(keys) -> PRNGSpec:
    """The implementation of ``keys`` (the default one for legacy keys)."""
    if is_typed(keys):
        return PRNGSpec(get_aval(keys).dtype._impl)
    _as_legacy("key_impl", keys)
    return PRNGSpec(default_impl())


def is_typed(x) -> bool:
    aval = getattr(x, "aval", None)
    return aval is not None and isinstance(getattr(aval, "dtype", None), KeyType)


# --- checking keys --------------------------------------------------------------------------
def _as_legacy(name: str, key, flag_checked: bool = True):
    """A legacy key array (any shape ending in 2), checked (and, unless ``flag_checked`` is
    False, refused or warned about as jax_legacy_prng_key says)."""
    if not (isinstance(key, (Tracer, np.ndarray, np.generic)) or hasattr(key, "aval")):
        raise TypeError(f"unexpected PRNG key type {type(key)}")
    aval = get_aval(key)
    impl = default_impl()
    k = len(impl.key_shape)
    if aval.ndim < k or aval.shape[aval.ndim - k:] != impl.key_shape:
        raise TypeError(f"{name}: JAX encountered invalid PRNG key data: expected "
                        f"key_data.shape to end with {impl.key_shape}; got shape={aval.shape} "
                        f"for impl={impl.name}. A key is a typed key made by jax.random.key, "
                        f"or a uint32{list(impl.key_shape)} array made by PRNGKey.")
    if aval.dtype != np.uint32:
        raise TypeError(f"{name}: invalid PRNG key data: expected key_data.dtype = uint32; got "
                        f"dtype={aval.dtype}.")
    if flag_checked:
        _check_legacy_flag()
    if not isinstance(key, Tracer) and not hasattr(key, "aval"):
        key = array_from_host(np.asarray(key))
    return key


def _check_legacy_flag() -> None:
    mode = config.read("legacy_prng_key")
    if mode in ("warn", "error"):
        msg = ("Legacy uint32 key array passed as key to jax.random function. Make keys with "
               "jax.random.key() (typed keys), or set jax_legacy_prng_key='allow' to accept "
               "uint32 key arrays.")
        if mode == "error":
            raise ValueError(msg)
        warnings.warn(msg, stacklevel=user_stacklevel())


def typed_keys(name: str, keys, flag_checked: bool = True) -> tuple:
    """``keys`` as typed keys (legacy ones wrapped), and whether they came as legacy keys."""
    if is_typed(keys):
        return keys, False
    return _prng.random_wrap(_as_legacy(name, keys, flag_checked), default_impl()), True


def check_key(name: str, key):
    """A single key as a typed key (legacy keys wrapped); errors name the function."""
    typed, legacy = typed_keys(name, key)
    _check_single(name, typed, key, legacy)
    return typed


def _returned(keys, legacy: bool):
    return _prng.random_unwrap(keys) if legacy else keys


# --- deriving keys --------------------------------------------------------------------------
def split(key, num=2):
    """``num`` new keys from ``key`` (``num`` an int, or a tuple for a shape of keys); the
    same kind of key as ``key``."""
    typed, legacy = typed_keys("split", key)
    _check_single("split", typed, key, legacy)
    shape = tuple(int(n) for n in num) if isinstance(num, Sequence) else (int(num),)
    return _returned(threefry.split(typed, shape), legacy)


def fold_in(key, data):
    """A new key from ``key`` and the integer ``data`` (folded in as 32 bits)."""
    typed, legacy = typed_keys("fold_in", key)
    _check_single("fold_in", typed, key, legacy)
    if np.ndim(data):
        raise TypeError(f"fold_in accepts a scalar, but was given an array of shape "
                        f"{np.shape(data)} != (). Use jax.vmap for batching.")
    if isinstance(data, (int, np.integer)) and not 0 <= int(data) < 2 ** 32:
        raise OverflowError(f"Python integer {data} out of bounds for uint32")
    if not isinstance(data, Tracer) and not hasattr(data, "aval"):
        data = array_from_host(np.asarray(data).astype(np.uint32))
    data = _conversion.convert_element_type(data, np.uint32)
    return _returned(threefry.fold_in(typed, data), legacy)


def clone(key):
    """A copy of ``key`` that the key-reuse checker treats as a fresh key."""
    typed, legacy = typed_keys("clone", key, flag_checked=False)  # JAX's clone takes any key
    return _returned(_prng.random_clone(typed), legacy)


def _check_single(name, typed, key, legacy) -> None:
    if get_aval(typed).shape != ():
        shown = get_aval(key).shape
        raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                         f"{shown} != {default_impl().key_shape if legacy else ()}. Use jax.vmap "
                         "for batching.")
