"""Mutable array references: ``plax.new_ref(x)`` holds an array that ``r[idx] = v`` updates
in place (JAX's ``jax.ref``).

A ``Ref`` is a hi value (``plax.core.hi_types``) whose one lo value is the array it holds.
Eagerly it is a box. Passed to a jitted function it enters as its array and the final array
is written back after the call. A reference a traced function closes over (a ``jit``,
``scan``, ``fori_loop``, ``while_loop`` or ``cond`` body) is discharged as JAX does: its
value becomes an implicit input and its final value an implicit output, written back
(``plax.higher_order.ref_effects``). Under ``grad`` a reference may be updated with values
that are not differentiated, or with anything if it was made inside the differentiated
function; ``vmap`` refuses writes to a reference made outside it. A reference cannot be
returned from a jitted function (JAX's error).
"""
from __future__ import annotations

import numpy as np

from plax.core.hi_types import register_hitype
from plax.core.refs import AbstractRef, Slice, install_ref_box
from plax.core.source_info import user_frame
from plax.core.staging import StagingTrace
from plax.core.trace import Tracer, current_trace, get_aval
from plax.first_order import state
from plax.higher_order import ref_effects
from plax.transforms.linearize import PartialEvalTrace

__all__ = ["AbstractRef", "Ref", "new_ref", "freeze", "get", "set", "swap", "addupdate",
           "empty_ref", "free_ref"]


class Ref:
    """A mutable reference to an array: ``r[...]`` reads it, ``r[idx] = v`` writes it."""

    __slots__ = ("_value", "_live", "_made_at", "_memory_space", "__weakref__")

    def __init__(self, value, memory_space=None):
        self._value = value
        self._memory_space = memory_space
        self._live = current_trace()  # the trace its value lives in (see ref_effects)
        f = user_frame()  # (named when a traced function returns it: JAX's error)
        self._made_at = None if f is None else (f.f_code.co_filename, f.f_lineno,
                                                f.f_code.co_qualname)

    # --- what it holds ---
    @property
    def aval(self) -> AbstractRef:
        held = get_aval(self._value)
        if isinstance(held, AbstractRef):  # (inside a kernel: the kernel's reference)
            return held
        return AbstractRef(held.update(weak_type=False), memory_space=self._memory_space)

    def _kernel_view(self):
        """The kernel reference this box stands for while a kernel closing over it is traced
        (``pl.core_map``), else None."""
        value = self._value
        return value if isinstance(value, Tracer) and isinstance(value.aval, AbstractRef) \
            else None

    shape = property(lambda self: get_aval(self._value).shape)
    dtype = property(lambda self: get_aval(self._value).dtype)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    @property
    def sharding(self):
        return ref_effects.read(self).sharding

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def cur_qdd(self):
        return None

    def __repr__(self):
        if isinstance(self._value, Tracer):  # (as JAX shows it: JitTracer(Ref{f32[3]}))
            shown = getattr(self._value._trace, "tracer_repr", "Ref({})")
            return shown.format(self.aval.str_short(short_dtypes=False))
        text = repr(self._value)
        return "Ref(" + text[text.index("(") + 1:] if text.startswith("Array(") else f"Ref({text})"

    # --- reading and writing ---
    def __getitem__(self, idx):
        return get(self, idx)

    def __setitem__(self, idx, value):
        set(self, idx, value)

    def addupdate(self, x, idx=None):
        """Add ``x`` to ``self[idx]`` (the whole reference by default) in place."""
        addupdate(self, idx, x)

    @property
    def at(self):
        """``ref.at[idx]``: a view of part of this reference (a ``TransformedRef``)."""
        return state.RefIndexer(_held(self))

    def reshape(self, *shape):
        """A view of this reference as another shape."""
        return state.reshape_ref(_held(self), *shape)

    def bitcast(self, dtype):
        """A view of this reference's bits as ``dtype`` (TPU's layout: elements of another
        width pack into, or unpack from, the second-minor axis)."""
        return state.bitcast_ref(self, dtype)

    # --- reads and writes through a view (plax.first_order.state calls these) ---
    def _transformed_get(self, transforms):
        return state.read_view(ref_effects.read(self), transforms)

    def _transformed_swap(self, transforms, value):
        current = ref_effects.read(self)
        old = state.read_view(current, transforms)
        value = _as_value(self, value, get_aval(old), "swap")
        ref_effects.write(self, state.update_view(current, transforms, value))
        return old

    def _transformed_addupdate(self, transforms, x):
        current = ref_effects.read(self)
        x = _as_value(self, x, get_aval(state.read_view(current, transforms)), "addupdate")
        ref_effects.write(self, state.update_view(current, transforms, x, accumulate=True),
                          operation="an addupdate")


def ds(start, size=None, stride=None):
    """A slice ``start : start + size`` (``stride`` apart) whose ``start`` may be traced:
    ``ds(None)`` is ``:``, ``ds(j)`` is ``:j``, ``ds(i, j)`` is ``i:i+j``. Use it to index
    references, e.g. ``r[ds(i, 2)]`` inside a loop."""
    if start is None:
        return slice(None, None, None)
    if size is None:
        start, size = 0, start
    return Slice(start, size, 1 if stride is None else stride)


def _as_value(ref: Ref, value, want, what: str):
    import plax.numpy as jnp
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


def _check_static_bounds(idx, shape) -> None:
    """JAX's error for a static integer index outside its axis (array indexing would clamp
    it, and ``list(ref)`` would then never end)."""
    items = idx if type(idx) is tuple else (idx,)
    ints = [(k, i) for k, i in enumerate(items)
            if isinstance(i, (int, np.integer)) and not isinstance(i, bool)]
    if not ints:
        return
    n_indexing = sum(1 for i in items if i is not None and i is not Ellipsis)
    ellipsis_at = next((k for k, i in enumerate(items) if i is Ellipsis), None)
    for k, i in ints:
        before = items[:k]
        axis = sum(1 for j in before if j is not None and j is not Ellipsis)
        if ellipsis_at is not None and ellipsis_at < k:
            axis += len(shape) - n_indexing
        if axis < len(shape) and not -shape[axis] <= int(i) < shape[axis]:
            raise ValueError(f"Out of bound indexer: idx={int(i)}, dim={shape[axis]}.")


def _read(value, idx):
    """``value[idx]`` (``Slice``s, traced starts, as dynamic slices)."""
    if _whole(idx):
        return value
    _check_static_bounds(idx, np.shape(value))
    return value[idx]


def _written(value, idx, new):
    """``value`` with ``value[idx]`` replaced by ``new``."""
    if _whole(idx):
        return new
    _check_static_bounds(idx, np.shape(value))
    return value.at[idx].set(new)


def _held(ref):
    """``ref`` itself, or the kernel reference a box stands for inside a kernel."""
    view = ref._kernel_view() if type(ref) is Ref else None
    return ref if view is None else view


def get(ref: Ref, idx=None):
    """The array ``ref`` holds (``ref[idx]``)."""
    ref = _held(ref)
    if type(ref) is not Ref:  # (a reference in a jaxpr, or a view)
        return state.ref_get(ref, idx)
    return _read(ref_effects.read(ref), idx)


def swap(ref: Ref, idx, value, _function_name: str = "swap"):
    """Write ``value`` at ``ref[idx]`` and return what was there."""
    ref = _held(ref)
    if type(ref) is not Ref:
        return state.ref_swap(ref, idx, value, _function_name)
    current = ref_effects.read(ref)
    old = _read(current, idx)
    value = _as_value(ref, value, get_aval(old), _function_name)
    ref_effects.write(ref, _written(current, idx, value))
    return old


def set(ref: Ref, idx, value) -> None:  # noqa: A001 (JAX's name)
    """Write ``value`` at ``ref[idx]``."""
    swap(ref, idx, value)


def addupdate(ref: Ref, idx, x) -> None:
    """Add ``x`` to ``ref[idx]`` in place."""
    ref = _held(ref)
    if type(ref) is not Ref:
        return state.ref_addupdate(ref, idx, x)
    current = ref_effects.read(ref)
    old = _read(current, idx)
    x = _as_value(ref, x, get_aval(old), "addupdate")
    ref_effects.write(ref, _written(current, idx, old + x), operation="an addupdate")


def new_ref(init_val, *, memory_space=None, kind=None) -> Ref:
    """A new mutable reference holding ``init_val`` (an array or array-like); a kernel
    closing over it (``pl.core_map``) finds it in ``memory_space`` (None: the kernel's
    default)."""
    import plax.numpy as jnp
    value = jnp.asarray(init_val)
    # (a Python scalar's weak type dropped)
    return Ref(jnp.asarray(value, value.dtype), memory_space)


def empty_ref(ty, memory_space=None) -> Ref:
    """A new reference of type ``ty`` (anything with ``shape`` and ``dtype``) whose contents
    are unspecified until written. As in JAX it has no eager form: use it inside ``jit``."""
    from plax import lax
    trace = current_trace()
    while trace is not None and not (isinstance(trace, StagingTrace)
                                     and not isinstance(trace, PartialEvalTrace)):
        trace = trace.parent
    if trace is None:
        raise NotImplementedError("Evaluation rule for 'empty_ref' not implemented (an empty "
                                  "reference exists only inside a jitted function: use "
                                  "new_ref(jnp.zeros(shape, dtype)) outside one).")
    # (unspecified contents: zeros on the CPU; in a TPU kernel, a buffer nothing wrote,
    # poisoned under jax_pallas_poison_buffers)
    return Ref(lax.empty(ty.shape, ty.dtype), memory_space)


def free_ref(ref: Ref):
    """Invalidate ``ref`` (a hint that its memory may be reused; reading it afterwards is
    undefined). Returns ``()``, as JAX's does."""
    if type(ref) is not Ref:
        raise TypeError(f"free_ref expects a Ref, got {type(ref).__name__}.")
    return ()


def freeze(ref: Ref):
    """The array ``ref`` holds, as an immutable value."""
    return get(ref)


register_hitype(Ref, lambda ref: ref.aval)
install_ref_box(Ref, ref_effects.read, ref_effects.write)
