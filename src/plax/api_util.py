"""``plax.api_util``: the helpers JAX's transformations are written with (``jax.api_util``):
flattening a wrapped function's pytree arguments and results, naming arguments for debug
info, static and donated argument bookkeeping, and abstract values of arguments.

``flatten_fun``, ``flatten_fun_nokwargs`` and ``argnums_partial`` are transformations of a
``plax.extend.linear_util.WrappedFun``.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence

from plax.api.jit import _shape_dtype_aval  # the one conversion jit applies to its arguments
from plax.api.vmap import flatten_axes
from plax.core.avals import AbstractValue, ShapedArray
from plax.core.debug_info import debug_info, resolve_argnums_in_range
from plax.core.trace import concrete_or_error
from plax.core.tree_core import tree_flatten, tree_unflatten, treedef_children
from plax.extend import linear_util as lu

__all__ = ["argnums_partial", "debug_info", "donation_vector", "flatten_axes", "flatten_fun",
           "flatten_fun_nokwargs", "rebase_donate_argnums", "safe_map", "shaped_abstractify"]


def safe_map(f, *args) -> list:
    """``list(map(f, *args))``, raising ValueError when the iterables' lengths differ."""
    lists = [list(a) for a in args]
    n = len(lists[0])
    for i, a in enumerate(lists[1:], start=2):
        if len(a) != n:
            raise ValueError(f"safe_map() argument {i} is {'shorter' if len(a) < n else 'longer'}"
                             f" than argument 1 ({len(a)} items vs {n}).")
    return list(map(f, *lists))


@lu.transformation_with_aux2
def flatten_fun(f, store, in_tree, *args_flat):
    """A function of the leaves of ``(args, kwargs)`` (structure ``in_tree``) returning the
    leaves of ``f``'s result; the thunk gives the result's treedef after a call."""
    args, kwargs = tree_unflatten(in_tree, args_flat)
    out_leaves, out_tree = tree_flatten(f(*args, **kwargs))
    store.store(out_tree)
    return out_leaves


@lu.transformation_with_aux2
def flatten_fun_nokwargs(f, store, in_tree, *args_flat):
    """As ``flatten_fun`` with ``in_tree`` the structure of the positional ``args`` alone."""
    out_leaves, out_tree = tree_flatten(f(*tree_unflatten(in_tree, args_flat)))
    store.store(out_tree)
    return out_leaves


def shaped_abstractify(x) -> ShapedArray:
    """The ShapedArray of an argument as jit sees it: an array, a NumPy value, a Python
    scalar (weakly typed), a tracer, or anything with ``shape`` and ``dtype``
    (``ShapeDtypeStruct``); an abstract value is returned as is."""
    if isinstance(x, AbstractValue):
        return x
    try:
        return _shape_dtype_aval(x)
    except TypeError:
        raise TypeError(f"Cannot interpret value of type {type(x)} as an abstract array; it is "
                        "not a valid JAX type (an array, a NumPy value, a Python scalar or "
                        "something with shape and dtype).") from None


# --- static and donated arguments ----------------------------------------------------------

def _index_tuple(nums) -> tuple[int, ...]:
    nums = concrete_or_error(None, nums, "expected a static index or sequence of indices.")
    try:
        return (operator.index(nums),)
    except TypeError:
        return tuple(operator.index(i) for i in nums)


def _hashable(x) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


class _StaticArg:
    """A static argument inside a transformation's key: equal only to one of the very same
    type with an equal value (so ``1`` and ``1.0`` trace separately)."""

    __slots__ = ("val",)

    def __init__(self, val):
        self.val = val

    def __hash__(self):
        return hash(self.val)

    def __eq__(self, other):
        return type(self.val) is type(other.val) and self.val == other.val


class _UnhashableArg:
    """A static argument kept by value: compared with ``==``, never hashed."""

    __slots__ = ("val",)
    __hash__ = None

    def __init__(self, val):
        self.val = val

    def __eq__(self, other):
        return self.val == other.val


@lu.transformation2
def _insert_static_args(f, dyn_argnums, static_args, *dyn_args, **kwargs):
    args = [None] * (len(static_args) + len(dyn_args))
    dynamic = dict(zip(dyn_argnums, dyn_args))
    statics = iter(static_args)
    for i in range(len(args)):
        args[i] = dynamic[i] if i in dynamic else next(statics).val
    return f(*args, **kwargs)


def argnums_partial(f: lu.WrappedFun, dyn_argnums, args: Sequence,
                    require_static_args_hashable: bool = True):
    """Fix the arguments of ``args`` not numbered in ``dyn_argnums`` as static: returns the
    WrappedFun taking only the dynamic ones (in ``dyn_argnums``'s order) and those values."""
    dyn_argnums = resolve_argnums_in_range(_index_tuple(dyn_argnums), len(args),
                                           drop_too_large=False)
    static = []
    for i, arg in enumerate(args):
        if i in dyn_argnums:
            continue
        if not require_static_args_hashable:
            static.append(_UnhashableArg(arg))
        elif _hashable(arg):
            static.append(_StaticArg(arg))
        else:
            raise ValueError(
                "Non-hashable static arguments are not supported, as this can lead to "
                f"unexpected cache-misses. Static argument (index {i}) of type {type(arg)} for "
                f"function {f.__name__} is non-hashable; make it hashable (a tuple instead of "
                "a list) or pass it as a dynamic argument.")
    dyn_args = tuple(args[i] for i in dyn_argnums)
    return _insert_static_args(f, dyn_argnums, tuple(static)), dyn_args


def donation_vector(donate_argnums, donate_argnames, in_tree, kws: bool = True
                    ) -> tuple[bool, ...]:
    """One bool per leaf of ``in_tree`` (the structure of ``(args, kwargs)``, or of ``args``
    alone with ``kws=False``): whether that leaf's argument is donated, by position
    (``donate_argnums``) or keyword (``donate_argnames``)."""
    args_tree, kwargs_tree = treedef_children(in_tree) if kws else (in_tree, None)
    out: list[bool] = []
    for i, arg in enumerate(args_tree.children()):
        out += [i in donate_argnums] * arg.num_leaves
    if kwargs_tree is not None:
        for name, value in zip(kwargs_tree.node_data()[1], kwargs_tree.children()):
            out += [name in donate_argnames] * value.num_leaves
    return tuple(out)


def rebase_donate_argnums(donate_argnums, static_argnums) -> tuple[int, ...]:
    """``donate_argnums`` renumbered among the non-static arguments (sorted, unique): with
    ``static_argnums=(0, 1)``, argument 3 becomes 1. They may not share an index."""
    donate = sorted(set(donate_argnums))
    static = sorted(set(static_argnums))
    both = set(donate) & set(static)
    if both:
        raise ValueError(f"`static_argnums` {static} and `donate_argnums` {donate} cannot "
                         f"intersect (both hold {sorted(both)}).")
    return tuple(d - sum(s < d for s in static) for d in donate)
