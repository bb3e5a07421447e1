"""Mutable array references: ``plax.new_ref(x)`` holds an array that ``r[idx] = v`` updates
in place (JAX's ``jax.ref``).

A ``Ref`` is a hi value (``plax.core.hi_types``) whose one lo value is the array it holds.
Eagerly it is a box. Passed to a jitted function it enters as its array; inside, reads and
writes are ordinary array operations on a traced value, and when the function returns the
final array is written back into the caller's ``Ref`` (so the update happens in the
compiled program, and a cached call updates it again).

What plax refuses, with an error rather than a wrong answer:
- a Ref read or written inside a traced function (``jit``, ``scan``, ``cond`` bodies, ...)
  that it did not receive as an argument: the value would be baked into the cached
  program. Pass the Ref to the jitted function as an argument.
- writing a value traced by a transformation (a ``grad``/``vmap`` tracer) into a Ref created
  outside it, and returning a Ref from a jitted function, as JAX refuses both.
"""
from __future__ import annotations

import numpy as np

from plax.core.hi_types import MutableHiType, register_hitype
from plax.core.staging import StagingTrace
from plax.core.trace import EvalTrace, Tracer, current_trace, get_aval
from plax.transforms.linearize import PartialEvalTrace

__all__ = ["AbstractRef", "Ref", "new_ref", "freeze", "get", "set", "swap", "addupdate"]


class AbstractRef(MutableHiType):
    """The type of a mutable reference to an array of type ``inner_aval``."""

    __slots__ = ("inner_aval",)

    def __init__(self, inner_aval):
        self.inner_aval = inner_aval

    shape = property(lambda self: self.inner_aval.shape)
    dtype = property(lambda self: self.inner_aval.dtype)
    ndim = property(lambda self: len(self.inner_aval.shape))
    size = property(lambda self: int(np.prod(self.inner_aval.shape, dtype=np.int64)))

    def __eq__(self, other):
        return type(other) is AbstractRef and other.inner_aval == self.inner_aval

    def __hash__(self):
        return hash((AbstractRef, self.inner_aval))

    def __repr__(self):
        return f"Ref{{{self.inner_aval.str_short(short_dtypes=False)}}}"

    def str_short(self, short_dtypes=False, **_):
        return f"Ref{{{self.inner_aval.str_short(short_dtypes)}}}"

    # The hi-type protocol: a Ref is made of the one array it holds; its type never changes.
    def lo_ty_qdd(self, qdd):
        return [self.inner_aval]

    def new_from_loval(self, qdd, value):
        return Ref(value)

    def read_loval(self, qdd, ref):
        return [ref._value]

    def update_from_loval(self, qdd, ref, value):
        ref._value = value

    def to_tangent_aval(self):
        return AbstractRef(self.inner_aval.to_tangent_aval())


class Ref:
    """A mutable reference to an array: ``r[...]`` reads it, ``r[idx] = v`` writes it."""

    __slots__ = ("_value", "_owner", "__weakref__")

    def __init__(self, value):
        self._value = value
        self._owner = current_trace()

    # --- what it holds ---
    @property
    def aval(self) -> AbstractRef:
        return AbstractRef(get_aval(self._value).update(weak_type=False))

    shape = property(lambda self: get_aval(self._value).shape)
    dtype = property(lambda self: get_aval(self._value).dtype)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def cur_qdd(self):
        return None

    def __repr__(self):
        if isinstance(self._value, Tracer):
            return f"Ref({self.aval})"
        text = repr(self._value)
        return "Ref(" + text[text.index("(") + 1:] if text.startswith("Array(") else f"Ref({text})"

    # --- reading and writing ---
    def __getitem__(self, idx):
        return get(self, idx)

    def __setitem__(self, idx, value):
        set(self, idx, value)

    def _check_access(self, writing_value=None) -> None:
        """Refuse an access that would bake the held value into a cached program, or store a
        tracer that outlives its transformation."""
        owner, trace = self._owner, current_trace()
        while trace is not owner:
            if trace is None or (isinstance(owner, EvalTrace) and isinstance(trace, EvalTrace)):
                break
            if isinstance(trace, StagingTrace) and not isinstance(trace, PartialEvalTrace):
                raise ValueError(
                    f"A mutable array reference ({self.aval}) created outside a traced function "
                    "is read or written inside it (while tracing "
                    f"{trace.description or 'a function'}): plax would bake its contents into "
                    "the compiled program. Pass the reference to the jitted function as an "
                    "argument instead.")
            trace = trace.parent
        value = writing_value
        if isinstance(value, Tracer) and value._trace is not owner and not _encloses(
                value._trace, owner):
            raise ValueError(
                "Exception performing a set/swap operation with a differentiated value on a "
                f"non-differentiated array reference of type {self.aval}: the value is traced "
                f"by {value._trace.description or 'a transformation'} and would escape it. "
                "Move the array reference to be an argument of the differentiated function?")


def _encloses(outer, inner) -> bool:
    """Whether trace ``outer`` is ``inner`` or one of its ancestors."""
    while inner is not None:
        if inner is outer:
            return True
        inner = inner.parent
    return False


def _as_value(ref: Ref, value, idx, what: str):
    import plax.numpy as jnp
    want = get_aval(ref._value[idx] if idx is not None else ref._value)
    value = jnp.asarray(value)
    have = get_aval(value)
    if have.dtype != want.dtype:
        if not have.weak_type:
            raise ValueError(f"Invalid dtype for `{what}`. Ref dtype: {want.dtype}. Value "
                             f"dtype: {have.dtype}. Convert the value with .astype first.")
        value = value.astype(want.dtype)
    if tuple(have.shape) != tuple(want.shape):
        raise ValueError(f"Invalid shape for `{what}`. Ref shape: {ref.shape}. Expected shape: "
                         f"{tuple(want.shape)}. Value shape: {tuple(have.shape)}. (Writes do "
                         "not broadcast: give a value of the indexed shape.)")
    return value


def _whole(idx) -> bool:
    return idx is None or idx is Ellipsis or (type(idx) is tuple and (
        idx == () or idx == (Ellipsis,)))


def get(ref: Ref, idx=None):
    """The array ``ref`` holds (``ref[idx]``)."""
    ref._check_access()
    return ref._value if _whole(idx) else ref._value[idx]


def swap(ref: Ref, idx, value):
    """Write ``value`` at ``ref[idx]`` and return what was there."""
    value = _as_value(ref, value, None if _whole(idx) else idx, "swap")
    ref._check_access(value)
    old = get(ref, idx)
    ref._value = value if _whole(idx) else ref._value.at[idx].set(value)
    return old


def set(ref: Ref, idx, value) -> None:  # noqa: A001 (JAX's name)
    """Write ``value`` at ``ref[idx]``."""
    swap(ref, idx, value)


def addupdate(ref: Ref, idx, x) -> None:
    """Add ``x`` to ``ref[idx]`` in place."""
    x = _as_value(ref, x, None if _whole(idx) else idx, "addupdate")
    ref._check_access(x)
    ref._value = ref._value + x if _whole(idx) else ref._value.at[idx].add(x)


def new_ref(init_val, *, memory_space=None, kind=None) -> Ref:
    """A new mutable reference holding ``init_val`` (an array or array-like)."""
    import plax.numpy as jnp
    if memory_space is not None:
        raise NotImplementedError("new_ref: memory_space is for accelerator kernels; plax "
                                  "places references like any array (leave it None).")
    value = jnp.asarray(init_val)
    return Ref(jnp.asarray(value, value.dtype))  # (a Python scalar's weak type dropped)


def freeze(ref: Ref):
    """The array ``ref`` holds, as an immutable value."""
    return get(ref)


register_hitype(Ref, lambda ref: ref.aval)
