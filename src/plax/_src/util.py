"""``jax._src.util``: the small list and cache helpers JAX's code (and its tests) use.

``safe_map``/``safe_zip``/``foreach``/``toposort`` are jaxlib's own (``jaxlib.utils``), and the
weakref LRU caches are jaxlib's, keyed by plax's trace context; every cache made here is
cleared by ``clear_all_caches`` (``plax.clear_caches``' registry, ``plax.core.caches``).
"""
import functools
import types

from plax.core.caches import clear_all as clear_all_caches, register_cache  # noqa: F401
from plax.core.config import config as _config

from plax._src import lib as _lib

_utils = _lib.utils
safe_map = _utils.safe_map
safe_zip = _utils.safe_zip
foreach = _utils.foreach
Mutex = _utils.Mutex
install_failure_signal_handler = _utils.install_failure_signal_handler
toposort = functools.partial(_utils.topological_sort, "parents")
weakref_cache_key_types: set = set()


def unzip2(pairs) -> tuple:
    """Two tuples from an iterable of pairs."""
    firsts, seconds = [], []
    for a, b in pairs:
        firsts.append(a)
        seconds.append(b)
    return tuple(firsts), tuple(seconds)


def unzip3(triples) -> tuple:
    out = ([], [], [])
    for triple in triples:
        for column, x in zip(out, triple, strict=True):
            column.append(x)
    return tuple(map(tuple, out))


def subvals(seq, replace) -> tuple:
    """``seq`` as a tuple with the ``(index, value)`` pairs of ``replace`` put in."""
    out = list(seq)
    for i, value in replace:
        out[i] = value
    return tuple(out)


def split_list(args, ns) -> list:
    """``args`` cut into pieces of the sizes ``ns``, and the rest as a last piece."""
    args, pieces = list(args), []
    for n in ns:
        pieces.append(args[:n])
        args = args[n:]
    return pieces + [args]


def split_list_checked(args, ns) -> list:
    """``args`` cut into pieces of the sizes ``ns``, which must add up to its length."""
    args = list(args)
    if sum(ns) != len(args):
        raise ValueError(f"split_list_checked: sizes {list(ns)} do not add up to {len(args)}")
    return split_list(args, ns)[:-1]


def partition_list(bs, items) -> tuple:
    """``(items where bs is False, items where bs is True)``."""
    falses, trues = [], []
    for b, x in zip(bs, items, strict=True):
        (trues if b else falses).append(x)
    return falses, trues


def merge_lists(bs, falses, trues) -> list:
    """The inverse of ``partition_list``."""
    falses, trues = iter(falses), iter(trues)
    return [next(trues) if b else next(falses) for b in bs]


def concatenate(lists) -> list:
    return [x for xs in lists for x in xs]


flatten = concatenate


def unflatten(xs, ns) -> list:
    """``xs`` cut into consecutive pieces of the sizes ``ns`` (all of it used)."""
    xs, out = iter(xs), []
    for n in ns:
        out.append([next(xs) for _ in range(n)])
    if next(xs, unflatten) is not unflatten:
        raise ValueError("unflatten: sizes do not use up the items")
    return out


def curry(f):
    """``curry(f)(*a)(*b)`` is ``f(*a, *b)``."""
    return functools.wraps(f)(functools.partial(functools.partial, f))


def tuple_insert(t, idx, val) -> tuple:
    return (*t[:idx], val, *t[idx:])


def tuple_delete(t, idx) -> tuple:
    return (*t[:idx], *t[idx + 1:])


def tuple_update(t, idx, val) -> tuple:
    return (*t[:idx], val, *t[idx + 1:])


def canonicalize_axis(axis, num_dims) -> int:
    """``axis`` in ``[0, num_dims)`` (a negative one counts from the end)."""
    axis = int(axis)
    if not -num_dims <= axis < num_dims:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {num_dims}")
    return axis % num_dims if num_dims else axis


def ceil_of_ratio(x: int, y: int) -> int:
    return -(-x // y)


def wrap_name(transform_name: str, name: str) -> str:
    return f"{transform_name}({name})"


def fun_name(fun, default_name: str = "<unnamed function>") -> str:
    name = getattr(fun, "__name__", None)
    if name is None and isinstance(fun, functools.partial):
        return fun_name(fun.func, default_name)
    return name if name is not None else default_name


def _registered(cached):
    register_cache(types.SimpleNamespace(clear=cached.cache_clear))
    return cached


def _no_context():
    return None


def cache(max_size=4096, trace_context_in_key=True):
    """``functools.lru_cache(max_size)``, also keyed by plax's trace context (the flags a
    trace depends on) unless ``trace_context_in_key`` is False."""
    context = trace_context_in_key if callable(trace_context_in_key) else \
        _config.trace_context if trace_context_in_key else None

    def wrap(f):
        if context is None:
            return _registered(functools.lru_cache(max_size)(f))
        cached = functools.lru_cache(max_size)(lambda _, *args, **kwargs: f(*args, **kwargs))

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            return cached(context(), *args, **kwargs)
        wrapper.cache_clear, wrapper.cache_info = cached.cache_clear, cached.cache_info
        return _registered(wrapper)
    return wrap


memoize = cache(max_size=None)


def weakref_lru_cache(f=None, *, maxsize=2048, trace_context_in_key=True, explain=None):
    """jaxlib's LRU cache holding its first argument weakly (its entries go with it)."""
    del explain
    if f is None:
        return functools.partial(weakref_lru_cache, maxsize=maxsize,
                                 trace_context_in_key=trace_context_in_key)
    context = _config.trace_context if trace_context_in_key else _no_context
    return _registered(_lib.weakref_lru_cache.weakref_lru_cache(context, f, maxsize))


@functools.cache
def _weak_key_registry():
    return _lib.pytree.PyTreeRegistry(enable_none=False, enable_tuple=True,
                                      enable_namedtuple=False, enable_list=False,
                                      enable_dict=True)


def multi_weakref_lru_cache(call, *, maxsize=2048, trace_context_in_key=True):
    """jaxlib's LRU cache holding weakly every argument of a type in
    ``weakref_cache_key_types`` (an entry goes when any of them dies)."""
    context = _config.trace_context if trace_context_in_key else _no_context
    return _registered(_lib.weakref_lru_cache.multi_weakref_lru_cache(
        context, call, maxsize=maxsize, explain=None, registry=_weak_key_registry(),
        weak_types=weakref_cache_key_types))
