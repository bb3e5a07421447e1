"""Boxes and logs: JAX's mutable hi values of ``jax._src.hijax`` (``Box``, ``Log``).

A ``Box`` holds any pytree (of arrays, Python scalars or hi values) and ``set`` may change
its type: its quasi-dynamic data (``BoxTypeState``) is the tree structure and the leaves'
types. A ``Log`` collects values under string keys (``append``/``extend``); it is only
ever added to.

Both are references as ``plax.ref.Ref`` is: a Python object whose value (``_value``) lives
in one trace (``_live``), read and written through ``ref_effects``, so a jit, loop or cond
body that closes over one carries its value in and its final value out, and a jit taking
one as an argument writes it back after the call (``plax.api.hi_values``: through
``BoxTy``'s QDD protocol). A log is carried in empty and what the body appended is added
to it afterwards; a ``scan`` body's appends come out stacked along the iterations.
"""
from __future__ import annotations

import dataclasses

from plax import tree_util
from plax.core.effects import Effect, control_flow_allowed_effects
from plax.core.hi_types import MutableHiType, QuasiDynamicData, aval_method, register_hitype
from plax.core.trace import current_trace, get_aval
from plax.higher_order import ref_effects

__all__ = ["Box", "BoxTy", "BoxTypeState", "new_box", "box_get", "box_set", "box_effect",
           "Log", "LogTy", "new_log", "log_append", "log_extend", "log_read", "log_effect"]


class BoxEffect(Effect):
    """The effect of reading or writing a box or log."""


box_effect = log_effect = BoxEffect()
control_flow_allowed_effects.add_type(BoxEffect)


def _is_high(aval) -> bool:
    return bool(getattr(aval, "is_high", False))


def _lo_types(aval) -> list:
    return list(aval.lo_ty()) if _is_high(aval) else [aval]


def _lower_leaf(aval, value) -> list:
    return list(aval.lower_val(value)) if _is_high(aval) else [value]


def _raise_leaves(leaf_avals, lo_vals) -> list:
    it = iter(lo_vals)
    out = []
    for aval in leaf_avals:
        if _is_high(aval):
            out.append(aval.raise_val(*[next(it) for _ in aval.lo_ty()]))
        else:
            out.append(next(it))
    if next(it, None) is not None:
        raise ValueError("more lo values than a box's type holds")
    return out


@dataclasses.dataclass(frozen=True)
class BoxTypeState(QuasiDynamicData):
    """A box's current type: the tree structure of its value and the types of its leaves."""

    leaf_avals: tuple
    treedef: object

    def to_tangent_qdd(self):
        return BoxTypeState(tuple(a.to_tangent_aval() for a in self.leaf_avals), self.treedef)

    def normalize(self):
        return BoxTypeState(tuple(a.normalize() for a in self.leaf_avals), self.treedef)


def _type_state(value) -> BoxTypeState:
    leaves, treedef = tree_util.tree_flatten(value)
    return BoxTypeState(tuple(map(get_aval, leaves)), treedef)


class BoxTy(MutableHiType):
    """The type of every box (what it holds now is its QDD)."""

    __slots__ = ()

    def __hash__(self):
        return hash(BoxTy)

    def __eq__(self, other):
        return isinstance(other, BoxTy)

    def __repr__(self):
        return "BoxTy"

    def str_short(self, short_dtypes=False, **_):
        return "BoxTy"

    def lo_ty_qdd(self, state):
        return [lo for a in state.leaf_avals for lo in _lo_types(a)]

    def new_from_loval(self, state, *lo_vals):
        return Box._new(tree_util.tree_unflatten(state.treedef,
                                                 _raise_leaves(state.leaf_avals, lo_vals)))

    def read_loval(self, state, box):
        leaves, treedef = tree_util.tree_flatten(box_get(box))
        if treedef != state.treedef:
            raise TypeError(f"a box holding {treedef} was read as holding {state.treedef}")
        return [lo for a, x in zip(state.leaf_avals, leaves) for lo in _lower_leaf(a, x)]

    def update_from_loval(self, state, box, *lo_vals):
        box_set(box, tree_util.tree_unflatten(state.treedef,
                                              _raise_leaves(state.leaf_avals, lo_vals)))

    def to_tangent_aval(self):
        return BoxTy()


class Box:
    """A mutable box holding a pytree: ``get()``, ``set(value)`` (of any type)."""

    __slots__ = ("_value", "_live", "__weakref__")

    def __new__(cls, init_val=None):
        return cls._new(init_val)

    @classmethod
    def _new(cls, init_val):
        box = object.__new__(cls)
        box._value = init_val
        box._live = current_trace()  # the trace its value lives in (see ref_effects)
        return box

    @property
    def _val(self):
        return ref_effects.read(self)

    aval = property(lambda self: BoxTy())
    ty = aval

    def get(self):
        return box_get(self)

    def set(self, val):
        box_set(self, val)

    def type_state(self) -> BoxTypeState:
        return _type_state(ref_effects.read(self))

    cur_qdd = type_state

    def __repr__(self):
        return f"Box({self._value!r})"


BoxTy.get = aval_method(Box.get)
BoxTy.set = aval_method(Box.set)


def new_box() -> Box:
    """A new box holding None."""
    return Box._new(None)


def box_get(box: Box):
    """What ``box`` holds."""
    _check_box(box, "box_get")
    return ref_effects.read(box)


def box_set(box: Box, val) -> None:
    """Make ``box`` hold ``val`` (its type may change, except inside a loop body)."""
    _check_box(box, "box_set")
    ref_effects.write(box, val, operation="a box_set")


def _check_box(box, what):
    if not isinstance(box, Box):
        raise TypeError(f"{what} expects a Box, got {type(box).__name__}")


register_hitype(Box, lambda b: BoxTy())


# --- logs ------------------------------------------------------------------------------------
class LogTy(MutableHiType):
    """The type of every log (a writer: its contents only grow)."""

    __slots__ = ()
    is_writer = True

    def __hash__(self):
        return hash(LogTy)

    def __eq__(self, other):
        return isinstance(other, LogTy)

    def __repr__(self):
        return "Log"

    def str_short(self, short_dtypes=False, **_):
        return "Log"

    def to_tangent_aval(self):
        return LogTy()

    # A jit taking a log as an argument: in empty, what it appended comes out and is added.
    def lo_ty_qdd(self, qdd):
        return []

    def read_loval(self, qdd, log):
        return []

    def new_from_loval(self, qdd, *lo_vals):
        return Log._new()

    def update_from_loval(self, qdd, log, *lo_vals):
        raise TypeError("a Log's appends come back from a jit as its contents "
                        "(read_loval_out), not as lo values")

    def read_loval_out(self, qdd, log):
        return ref_effects.read(log)

    def update_from_loval2(self, qdd, log, appended):
        log_extend(log, appended)


class Log:
    """Values collected under string keys: ``append(key, value)``, ``extend(dict)``; the
    contents as a dict of lists are ``_dct`` (``read()``)."""

    __slots__ = ("_value", "_live", "__weakref__")

    def __new__(cls):
        return cls._new()

    @classmethod
    def _new(cls):
        log = object.__new__(cls)
        log._value = {}
        log._live = current_trace()
        return log

    @property
    def _dct(self):
        return ref_effects.read(self)

    aval = property(lambda self: LogTy())

    def cur_qdd(self):
        return ()

    # (ref_effects) A body carrying a log starts from an empty one; what it appended is
    # added afterwards.
    def _carry_in(self):
        return {}

    def _carried_out(self, appended):
        return merged(ref_effects.read(self), appended)

    def append(self, key, val):
        log_append(self, key, val)

    def extend(self, dct):
        log_extend(self, dct)

    def read(self):
        return log_read(self)

    def __repr__(self):
        return f"Log({self._value!r})"


def merged(dct, more) -> dict:
    """Log contents ``dct`` with the lists of ``more`` appended (new dicts and lists)."""
    out = {k: list(v) for k, v in dct.items()}
    for k, v in more.items():
        out.setdefault(k, []).extend(v)
    return out


def log_extend(log: Log, dct) -> None:
    """Append each list of ``dct`` (key -> list of values) to ``log``."""
    if not isinstance(log, Log):
        raise TypeError(f"log_extend expects a Log, got {type(log).__name__}")
    for k, v in dct.items():
        if not isinstance(k, str) or not isinstance(v, list):
            raise TypeError(f"log_extend takes a dict of str -> list, got {k!r}: {v!r}")
    ref_effects.write(log, merged(ref_effects.read(log), dct), operation="a log_extend")


def log_append(log: Log, key, val) -> None:
    """Append ``val`` under ``key``."""
    log_extend(log, {key: [val]})


def log_read(log: Log) -> dict:
    """The log's contents (key -> list of values)."""
    return ref_effects.read(log)


def new_log() -> Log:
    return Log._new()


LogTy.append = aval_method(log_append)
LogTy.extend = aval_method(log_extend)
LogTy.read = aval_method(log_read)
register_hitype(Log, lambda _: LogTy())
