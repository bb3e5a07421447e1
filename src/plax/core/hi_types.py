"""High-level types ("hi types"): values made of arrays that plax's transformations see
through, JAX's ``jax.experimental.hijax`` protocol.

A hi type is an aval class a library defines for its own value class (registered with
``register_hitype``). It says how a value is made of ordinary arrays ("lo values"):

- an immutable ``HiType``: ``lo_ty()`` (the lo avals), ``lower_val(hi)`` -> lo values and
  ``raise_val(*lo)`` -> hi value;
- a ``MutableHiType`` (a box whose contents change): its lo types depend on its current
  contents, described by a hashable "quasi-dynamic data" (QDD) object the value reports
  with ``cur_qdd()``: ``lo_ty_qdd(qdd)``, ``read_loval(qdd, hi)``,
  ``new_from_loval(qdd, *lo)`` and ``update_from_loval(qdd, hi, *lo)`` (in place).

How plax uses them: a hi value stays a Python object while plax traces; only its lo values
are traced. ``jit`` takes hi values as arguments and results (``plax.api.hi_values``): they
enter as their lo values, are rebuilt inside, and a mutable one is updated in place from the
lo values it holds when the function returns. A ``HiPrimitive`` (in
``plax.experimental.hijax``) is expanded into its lo operations (``to_lojax``) when bound,
so derivatives and batching come from those operations.
"""
from __future__ import annotations

import dataclasses

from plax.core.avals import AbstractValue, hi_value_types, pytype_aval_mappings
from plax.core.tree_core import register_pytree_node, tree_flatten, tree_unflatten


class QuasiDynamicData:
    """The current type state of a mutable hi value (its lo types depend on it)."""


def _must_override(self, *args, **kwargs):
    raise NotImplementedError(f"{type(self).__name__} must define this method of its hi type.")


class HiType(AbstractValue):
    """The aval of an immutable hi value (see the module docstring for the protocol)."""

    __slots__ = ()
    is_high = True
    has_qdd = False

    lo_ty = lower_val = raise_val = to_tangent_aval = _must_override

    def to_ct_aval(self):
        return self.to_tangent_aval()

    def str_short(self, short_dtypes=False, **_):
        return repr(self)


class MutableHiType(AbstractValue):
    """The aval of a mutable hi value, whose lo types follow its current QDD."""

    __slots__ = ()
    is_high = True
    has_qdd = True
    is_writer = False

    lo_ty_qdd = new_from_loval = read_loval = update_from_loval = _must_override
    to_tangent_aval = _must_override

    def lo_ty(self):
        raise TypeError(f"{type(self).__name__} is mutable: its lo types depend on its "
                        "contents; use lo_ty_qdd(qdd).")

    def read_loval_in(self, qdd, val):
        return self.read_loval(qdd, val)

    def read_loval_out(self, qdd, val):
        """What a jit returns for this argument when it ends (any pytree of lo values; a
        writer's is what it accumulated inside)."""
        return list(self.read_loval(qdd, val))

    def update_from_loval2(self, qdd, val, lo_tree) -> None:
        """Update ``val`` from what ``read_loval_out`` gave inside a jit."""
        self.update_from_loval(qdd, val, *lo_tree)

    def to_ct_aval(self):
        return self.to_tangent_aval()

    def str_short(self, short_dtypes=False, **_):
        return repr(self)


@dataclasses.dataclass(frozen=True)
class AvalQDD:
    """A mutable hi type together with its current QDD (what an abstract eval returns)."""

    aval: AbstractValue
    qdd: QuasiDynamicData | None
    is_high = True
    has_qdd = True

    def lo_ty(self):
        return self.aval.lo_ty_qdd(self.qdd)

    def read_loval(self, val):
        return self.aval.read_loval(self.qdd, val)

    def new_from_loval(self, *lo_vals):
        return self.aval.new_from_loval(self.qdd, *lo_vals)


@dataclasses.dataclass
class AvalMutableQDD:
    """A mutable hi type with a QDD that changes as the value is updated."""

    aval: AbstractValue
    mutable_qdd: object


class aval_method:
    """A method of a hi value's type that applies to values of that type (JAX's marker:
    ``Aval.method = aval_method(ValueClass.method)``); ``fun`` is the value's method."""

    def __init__(self, fun):
        self.fun = fun

    def __call__(self, value, *args, **kwargs):
        return self.fun(value, *args, **kwargs)


class aval_property:
    """A property of a hi value's type that applies to values of that type."""

    def __init__(self, fget):
        self.fget = fget


class MappingSpec:
    """JAX's base class for how a hi type is mapped by vmap/scan (``in_axes=Spec(...)``).
    plax maps hi values through their lo values instead: its vmap refuses these."""


class HiPspec:
    """JAX's base class for how a hi type is partitioned by shard_map. plax shards hi
    values through their lo values instead: its shard_map refuses these."""

    def to_lo(self) -> tuple:
        raise NotImplementedError(f"{type(self).__name__} must define to_lo")


def register_hitype(value_class, typeof_fn) -> None:
    """Make ``typeof_fn(value)`` the type of ``value_class``'s instances, and let them cross
    ``jit`` boundaries as their lo values."""
    pytype_aval_mappings[value_class] = typeof_fn
    hi_value_types.add(value_class)


def is_hi_value(x) -> bool:
    return type(x) in hi_value_types


def hi_type_of(x):
    """The hi type of a registered hi value."""
    return pytype_aval_mappings[type(x)](x)


def cur_qdd(x):
    """The current QDD of mutable hi value ``x`` (its type state)."""
    return x.cur_qdd()


# --- hi values as lo values inside pytrees (jit arguments, loop carries) ------------------
# A library's aval class -> (map(size, axis, aval), unmap(size, axis, explicit_mesh_axis,
# aval)): its type with a mapped dimension removed / added (JAX's table).
aval_mapping_handlers: dict = {}


class LoValues(tuple):
    """A hi value's lo values in a pytree; the static part (``how``: kind, type, QDD) says
    how to raise it again."""

    def __new__(cls, values, how):
        self = super().__new__(cls, values)
        self.how = how
        return self


register_pytree_node(LoValues, lambda lv: (tuple(lv), lv.how),
                     lambda how, values: LoValues(values, how))


def is_lo_values(x) -> bool:
    return isinstance(x, LoValues)


def lower_hi(x):
    """A hi value as ``LoValues`` (with its type and QDD); any other leaf unchanged."""
    if type(x) not in hi_value_types:
        return x
    ty = hi_type_of(x)
    if ty.has_qdd:
        qdd = x.cur_qdd()
        return LoValues(ty.read_loval(qdd, x), ("mutable", ty, qdd))
    return LoValues(ty.lower_val(x), ("immutable", ty, None))


def raise_hi(lo):
    """The hi value ``lower_hi`` gave ``lo`` for."""
    kind, ty, qdd = lo.how
    return ty.new_from_loval(qdd, *lo) if kind == "mutable" else ty.raise_val(*lo)


def lower_tree(tree):
    """``tree`` with its hi-value leaves as ``LoValues`` (None when it holds none)."""
    leaves, treedef = tree_flatten(tree)
    if not any(type(x) in hi_value_types for x in leaves):
        return None
    return tree_unflatten(treedef, [lower_hi(x) for x in leaves])


def raise_tree(tree, stacked: int | None = None):
    """``tree`` with each ``LoValues`` raised again. With ``stacked``: values a loop stacked
    ``stacked`` times along a new leading axis, raised with the type's ``inc_rank`` where it
    has one, else by its per-iteration type's ``raise_val`` (which then gets the stacked lo
    values)."""
    leaves, treedef = tree_flatten(tree, is_leaf=is_lo_values)
    if not any(map(is_lo_values, leaves)):
        return tree  # (the user's containers are not rebuilt)
    out = []
    for x in leaves:
        if is_lo_values(x) and stacked is not None:
            kind, ty, qdd = x.how
            if hasattr(ty, "inc_rank"):
                x = LoValues(tuple(x), (kind, ty.inc_rank(stacked, 0), qdd))
        out.append(raise_hi(x) if is_lo_values(x) else x)
    return tree_unflatten(treedef, out)
