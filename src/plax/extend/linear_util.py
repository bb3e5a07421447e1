"""``plax.extend.linear_util``: functions wrapped together with a stack of transformations
(``jax.extend.linear_util``).

A ``WrappedFun`` holds a function ``f`` and the transformations applied to it. Calling it
(``call_wrapped``) runs the most recently added transformation first: each one may rewrite
the arguments, calls the next, may rewrite the results, and may leave an auxiliary value in
its ``Store`` (read through the thunk ``transformation_with_aux`` returns). A WrappedFun is
hashable and compares equal to another that computes the same thing, so ``cache`` can
memoise functions of it.

Transformations come in two styles: a generator (``transformation``,
``transformation_with_aux``) that yields ``(args, kwargs)``, receives the results and yields
the new results (with the aux value); or a plain function (``transformation2``,
``transformation_with_aux2``) that receives the next function (and its store) first.
"""
from __future__ import annotations

import functools
import time
import warnings
import weakref
from collections.abc import Callable

from plax.core.caches import register_cache
from plax.core.config import config
from plax.core.debug_info import DebugInfo

__all__ = ["Callable", "StoreException", "WrappedFun", "cache", "merge_linear_aux",
           "transformation", "transformation2", "transformation_with_aux",
           "transformation_with_aux2", "wrap_init"]


class StoreException(Exception):
    """A transformation's store was read before it was filled, or filled twice."""


_EMPTY = object()


class Store:
    """Holds one auxiliary value, written once."""

    __slots__ = ("_val",)

    def __init__(self):
        self._val = _EMPTY

    def store(self, val) -> None:
        if self._val is not _EMPTY:
            raise StoreException("Store occupied")
        self._val = val

    def reset(self) -> None:
        self._val = _EMPTY

    @property
    def val(self):
        if self._val is _EMPTY:
            raise StoreException("Store empty")
        return self._val

    def __bool__(self) -> bool:
        return self._val is not _EMPTY


class EqualStore(Store):
    """A Store that accepts a second write of a value equal to the first."""

    __slots__ = ()

    def store(self, val) -> None:
        if self._val is _EMPTY:
            self._val = val
            return
        try:
            same = bool(self._val == val)
        except Exception:
            raise StoreException("Store occupied") from None
        if not same:
            raise StoreException("Store occupied with not-equal value")


def _name_of(f, default: str) -> str:
    while isinstance(f, functools.partial) and getattr(f, "__name__", None) is None:
        f = f.func
    return getattr(f, "__name__", default)


class WrappedFun:
    """A function ``f`` with the transformations to apply when it is called.

    ``f_transformed`` is the composed callable; ``transforms`` the ``(gen, static_args)``
    pairs, newest first; ``stores`` their aux stores (None for those without); ``params``
    sorted ``(name, value)`` keyword arguments always passed to ``f``; ``in_type`` an
    optional tuple of input avals; ``debug_info`` the function's DebugInfo.
    """

    __slots__ = ("f", "f_transformed", "transforms", "stores", "params", "in_type",
                 "debug_info")

    def __init__(self, f, f_transformed, transforms, stores, params, in_type, debug_info):
        self.f = f
        self.f_transformed = f_transformed
        self.transforms = transforms
        self.stores = stores
        self.params = params
        self.in_type = in_type
        self.debug_info = debug_info

    @property
    def __name__(self) -> str:
        return _name_of(self.f, "<unnamed wrapped function>")

    def wrap(self, gen, gen_static_args, out_store) -> WrappedFun:
        """This function with one more transformation ``gen`` on top (and its store)."""
        lead = (self.f_transformed,) if out_store is None else (self.f_transformed, out_store)
        return WrappedFun(self.f, functools.partial(gen, *lead, *gen_static_args),
                          ((gen, gen_static_args),) + self.transforms,
                          (out_store,) + self.stores, self.params, None, self.debug_info)

    def populate_stores(self, stores) -> None:
        """Fill this function's stores with the values held by ``stores`` (a cache hit)."""
        for mine, theirs in zip(self.stores, stores):
            if mine is not None:
                mine.store(theirs.val)

    def call_wrapped(self, *args, **kwargs):
        """Run the transformations and the function on ``args`` and ``kwargs``."""
        return self.f_transformed(*args, **kwargs)

    def replace_debug_info(self, dbg: DebugInfo) -> WrappedFun:
        return WrappedFun(self.f, self.f_transformed, self.transforms, self.stores,
                          self.params, self.in_type, dbg)

    def with_unknown_names(self) -> WrappedFun:
        return self.replace_debug_info(self.debug_info.with_unknown_names())

    def __repr__(self):
        rows = [f"  {i}: {_name_of(gen, repr(gen))} {args!r}"
                for i, (gen, args) in enumerate(self.transforms)]
        return "\n".join(["WrappedFun of " + _name_of(self.f, repr(self.f)), *rows])

    def _identity(self):
        return (self.f, self.transforms, self.params, self.in_type, self.debug_info)

    def __hash__(self):
        return hash(self._identity())

    def __eq__(self, other):
        if not isinstance(other, WrappedFun):
            return NotImplemented
        return self._identity() == other._identity()


def _curried(fn):
    """``fn(a, b, ...)`` as ``_curried(fn)(a)(b, ...)``: the decorator form of a
    transformation maker, ``make(gen)`` giving ``apply(fun, *static_args)``."""
    return functools.partial(functools.partial, fn)


@_curried
def transformation2(gen, fun: WrappedFun, *gen_static_args) -> WrappedFun:
    """Put ``gen(next_fun, *gen_static_args, *args, **kwargs)`` on top of ``fun``."""
    return fun.wrap(gen, gen_static_args, None)


@_curried
def transformation_with_aux2(gen, fun: WrappedFun, *gen_static_args, use_eq_store: bool = False,
                             unk_names: bool = False):
    """Put ``gen(next_fun, store, *gen_static_args, *args, **kwargs)`` on top of ``fun``;
    returns the new function and a thunk reading what ``gen`` stored in ``store``."""
    out_store = EqualStore() if use_eq_store else Store()
    fun = fun.wrap(gen, gen_static_args, out_store)
    if unk_names:
        fun = fun.with_unknown_names()
    return fun, lambda: out_store.val


class _GeneratorStep:
    """A generator transformation as a function-style one: ``gen`` yields ``(args, kwargs)``
    for the next function, receives its results, and yields the new results (with
    ``has_aux``: ``(results, aux)``, the aux going to the store). Equal for equal ``gen``, so
    two applications of one transformation hit the same ``cache`` entry."""

    __slots__ = ("gen", "has_aux", "__name__")

    def __init__(self, gen, has_aux: bool):
        self.gen, self.has_aux = gen, has_aux
        self.__name__ = getattr(gen, "__name__", "transformation")

    def __call__(self, f, *args, **kwargs):
        store = None
        if self.has_aux:
            store, *args = args
        steps = self.gen(*args, **kwargs)
        new_args, new_kwargs = next(steps)
        out = steps.send(f(*new_args, **new_kwargs))
        if store is None:
            return out
        ans, aux = out
        store.store(aux)
        return ans

    def __eq__(self, other):
        return (type(other) is _GeneratorStep and self.gen == other.gen
                and self.has_aux == other.has_aux)

    def __hash__(self):
        return hash((self.gen, self.has_aux))


@_curried
def transformation(gen, fun: WrappedFun, *gen_static_args) -> WrappedFun:
    """Put the generator transformation ``gen(*gen_static_args, *args, **kwargs)`` on top of
    ``fun``: it yields ``(args, kwargs)`` for the next function, then its results."""
    return fun.wrap(_GeneratorStep(gen, False), gen_static_args, None)


@_curried
def transformation_with_aux(gen, fun: WrappedFun, *gen_static_args):
    """As ``transformation``, but ``gen``'s second yield is ``(results, aux)``; returns the
    new function and a thunk giving ``aux`` once it has been called."""
    return transformation_with_aux2(_GeneratorStep(gen, True))(fun, *gen_static_args)


def _missing_debug_info(for_what: str) -> DebugInfo:
    warnings.warn(
        f"{for_what} is missing a DebugInfo object. This use is deprecated: build one with "
        "plax.api_util.debug_info() and pass it as debug_info=.", DeprecationWarning,
        stacklevel=3)
    return DebugInfo("missing_debug_info", "<missing_debug_info>", None, None)


def wrap_init(f: Callable, params=None, *, debug_info: DebugInfo | None = None) -> WrappedFun:
    """``f`` as a WrappedFun with no transformations; ``params`` (a dict) are keyword
    arguments every call passes to ``f``. Without ``debug_info`` a DeprecationWarning is
    given, as in JAX."""
    if debug_info is None:
        debug_info = _missing_debug_info("linear_util.wrap_init")
    params = {} if params is None else params
    return WrappedFun(f, functools.partial(f, **params), (), (), tuple(sorted(params.items())),
                      None, debug_info._replace(result_paths=None))


def cache(call: Callable, *, explain: Callable | None = None):
    """Memoise ``call(fun, *args)`` on ``fun`` (its function, transformations, params and
    input type), ``args`` and the tracing config. A hit fills ``fun``'s stores with the
    values the first call left. ``explain(fun, first_use, per_function_cache, key,
    seconds)`` is called on a miss while ``jax_explain_cache_misses`` is on."""
    by_function: weakref.WeakKeyDictionary = register_cache(weakref.WeakKeyDictionary())

    def memoized(fun: WrappedFun, *args):
        entries = by_function.get(fun.f)
        first_use = entries is None
        if first_use:
            entries = by_function[fun.f] = {}
        key = (fun.transforms, fun.params, fun.in_type, args, config.trace_context())
        hit = entries.get(key)
        if hit is not None:
            ans, stores = hit
            fun.populate_stores(stores)
            return ans
        start = time.time()
        ans = call(fun, *args)
        if explain is not None and config.read("explain_cache_misses"):
            explain(fun, first_use, entries, key, time.time() - start)
        entries[key] = (ans, fun.stores)
        return ans

    memoized.cache_clear = by_function.clear
    memoized.evict_function = lambda f: by_function.pop(f, None)
    return memoized


def merge_linear_aux(aux1, aux2):
    """Of two aux thunks exactly one of which has a value: ``(True, value)`` if it is the
    first's, ``(False, value)`` if the second's; StoreException if none or both have one."""
    def read(thunk):
        try:
            return True, thunk()
        except StoreException:
            return False, None
    has1, out1 = read(aux1)
    has2, out2 = read(aux2)
    if has1 and has2:
        raise StoreException("both stores occupied")
    if not (has1 or has2):
        raise StoreException("neither store occupied")
    return (True, out1) if has1 else (False, out2)
