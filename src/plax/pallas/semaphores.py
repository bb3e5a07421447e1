"""Semaphores of Pallas kernels: their dtypes and the signal, wait and read primitives.

A semaphore is an element of a reference of a semaphore dtype (``semaphore``,
``barrier_semaphore``, or pltpu's ``dma_semaphore``): extended dtypes whose values are
stored as int32 counters. In interpret mode a semaphore is that counter: scratch semaphores
start at 0, ``semaphore_signal`` adds to it, ``semaphore_wait`` subtracts from it (nothing
blocks: a wait with nothing pending leaves a negative count, as JAX's interpret mode does)
and ``semaphore_read`` returns it.

The primitives take the semaphore reference and the dynamic leaves of its transforms
(``sem.at[i]``) as operands::

    semaphore_signal_p.bind(sem, *leaves, inc, *device_id, tree=..., device_id_type=...,
                            has_device_id=..., has_core_index=...)
    semaphore_wait_p.bind(sem, *leaves, value, tree=..., decrement=...)
    semaphore_read_p.bind(sem, *leaves, tree=...)

They print as JAX's (``semaphore_signal a[1] 1``, ``semaphore_wait[dec] a 1``).
"""
from __future__ import annotations

import enum

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.effects import ReadEffect, WriteEffect
from plax.core.primitive import Primitive
from plax.core.refs import AbstractRef, transformed_aval
from plax.core.rules import discharge_rules, pp_eqn_rules
from plax.core.trace import get_aval
from plax.core.tree_core import tree_flatten, tree_unflatten
from plax.first_order import arithmetic, conversion
from plax.first_order.state import (TransformedRef, _pp_index, read_view, ref_get, ref_set,
                                    update_view)
from plax.pallas import remote

__all__ = ["semaphore_dtype", "semaphore", "barrier_semaphore", "dma_semaphore",
           "Semaphore", "BarrierSemaphore", "DMASemaphore", "SEMAPHORE", "BARRIER_SEMAPHORE",
           "DMA_SEMAPHORE", "is_semaphore_dtype", "DeviceIdType", "semaphore_signal",
           "semaphore_wait", "semaphore_read", "semaphore_signal_p", "semaphore_wait_p",
           "semaphore_read_p", "add_to_semaphore", "split_ref", "counts", "as_semaphores", "pp_ref"]


# --- dtypes -------------------------------------------------------------------------------
class semaphore_dtype(dtypes.extended):
    """The scalar type every semaphore dtype derives from (for ``issubdtype``)."""


class semaphore(semaphore_dtype):
    """The scalar type of regular semaphores."""


class barrier_semaphore(semaphore_dtype):
    """The scalar type of barrier semaphores."""


class dma_semaphore(semaphore_dtype):
    """The scalar type of DMA semaphores."""


class _CounterRules:
    """A semaphore is stored as an int32 counter, and converts to and from one."""

    allow_conversion = True

    @staticmethod
    def physical_element_aval(dtype):
        return ShapedArray((), np.dtype(np.int32))

    pallas_interpret_element_aval = physical_element_aval


class _SemaphoreDType(dtypes.ExtendedDType):
    _rules = _CounterRules

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self))


class Semaphore(_SemaphoreDType):
    """The dtype of regular semaphores."""
    name, type = "semaphore", semaphore


class BarrierSemaphore(_SemaphoreDType):
    """The dtype of barrier semaphores."""
    name, type = "barrier_semaphore", barrier_semaphore


class DMASemaphore(_SemaphoreDType):
    """The dtype of DMA semaphores."""
    name, type = "dma_sem", dma_semaphore


# (one instance each: conversions to an extended dtype compare it by identity)
SEMAPHORE, BARRIER_SEMAPHORE, DMA_SEMAPHORE = Semaphore(), BarrierSemaphore(), DMASemaphore()


def canonical(dtype):
    """The shared instance of a semaphore dtype."""
    for d in (SEMAPHORE, BARRIER_SEMAPHORE, DMA_SEMAPHORE):
        if dtype == d:
            return d
    return dtype


def is_semaphore_dtype(dtype) -> bool:
    return isinstance(dtype, _SemaphoreDType)


def counts(x):
    """The int32 counters of semaphore value ``x``."""
    return conversion.convert_element_type(x, np.int32)


def as_semaphores(counters, dtype):
    """Int32 ``counters`` as semaphores of ``dtype``."""
    return conversion.convert_element_type(counters, canonical(dtype))


class DeviceIdType(enum.Enum):
    """How a remote operation's ``device_id`` names a device: by mesh coordinates or by
    logical index."""

    MESH = "mesh"
    LOGICAL = "logical"


# --- operands -----------------------------------------------------------------------------
def split_ref(ref):
    """``(reference, transforms)`` of a reference or a view of one (``ref.at[i]``)."""
    if type(ref) is TransformedRef:
        return ref.ref, ref.transforms
    view = getattr(ref, "_kernel_view", None)  # (a reference box a kernel closes over)
    if view is not None and view() is not None:
        return view(), ()
    return ref, ()


def ref_view_aval(ref, what: str):
    """The type seen through a reference or view, checked to be a reference."""
    base, transforms = split_ref(ref)
    aval = get_aval(base)
    if not isinstance(aval, AbstractRef):
        raise ValueError(f"{what} takes a Ref, got a value of type "
                         f"{getattr(aval, 'str_short', lambda: aval)()}.")
    return transformed_aval(aval.inner_aval, transforms)


def flatten_ref(ref):
    """The operands of a reference or view: the reference, then its transforms' leaves."""
    base, transforms = split_ref(ref)
    leaves, tree = tree_flatten(tuple(transforms))
    return [base, *leaves], tree


def _check_semaphore(sem_aval, view, what: str, allowed) -> None:
    if not isinstance(sem_aval, AbstractRef):
        raise ValueError(f"Cannot {what} on a non-semaphore Ref: {sem_aval}")
    if tuple(view.shape):
        raise ValueError(f"Cannot {what} on a non-()-shaped semaphore: {tuple(view.shape)}")
    if not any(isinstance(sem_aval.dtype, t) for t in allowed):
        names = ", ".join(t.name for t in allowed)
        raise ValueError(f"Must {what} semaphores of the following types: {{{names}}}. Got "
                         f"{sem_aval.dtype}.")


def pp_ref(printer, ref, transforms) -> str:
    """A reference and its transforms as the jaxpr printer shows them (``a[1:3]``)."""
    shown = [text for text in (_pp_index(t, printer) for t in transforms) if text != "[...]"]
    return printer.name(ref) + "".join(shown)


def _int32(x):
    """A Python int or weakly typed integer as int32 (other types are checked later)."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return np.asarray(x, np.int32)
    aval = get_aval(x)
    if aval.dtype != np.int32 and aval.weak_type:
        return conversion.convert_element_type(x, np.int32)
    return x


# --- semaphore_signal ---------------------------------------------------------------------
semaphore_signal_p = Primitive("semaphore_signal", multiple_results=True)


def semaphore_signal(sem_or_view, inc=1, *, device_id=None,
                     device_id_type: DeviceIdType = DeviceIdType.MESH, core_index=None):
    """Add ``inc`` to a semaphore (a ``()``-shaped view of a semaphore reference); with
    ``device_id``, to that semaphore on that device (interpret mode: a device of the named
    axis of an enclosing ``shard_map``, see ``plax.pallas.remote``)."""
    operands, tree = flatten_ref(sem_or_view)
    inc = _int32(inc)
    device_leaves = tree_flatten(device_id)[0] if device_id is not None else []
    extras = [] if core_index is None else [_int32(core_index)]
    semaphore_signal_p.bind(*operands, inc, *device_leaves, *extras, tree=tree,
                            device_id_type=device_id_type,
                            device_id_tree=tree_flatten(device_id)[1],
                            has_core_index=core_index is not None)


def _signal_abstract(sem, *rest, tree, device_id_type, device_id_tree, has_core_index):
    n = tree.num_leaves
    view = transformed_aval(sem.inner_aval, tree_unflatten(tree, rest[:n])) \
        if isinstance(sem, AbstractRef) else sem
    _check_semaphore(sem, view, "signal", (Semaphore, BarrierSemaphore, DMASemaphore))
    if rest[n].dtype != np.int32:
        raise ValueError(f"Must signal an int32 value, but got {rest[n].dtype}")
    for aval in rest[n + 1:n + 1 + device_id_tree.num_leaves]:
        if aval.dtype != np.int32:
            raise ValueError(f"`device_id`s must be an int32 value, but got {aval.dtype}")
    return [], {ReadEffect(0), WriteEffect(0)}


def add_to_semaphore(which, sem, transforms, delta):
    """Add ``delta`` (int32) to the semaphore ``sem`` holds at ``transforms``: the new value
    of ``sem`` if ``which`` (it is discharged, a value), else None (a reference, written
    in place)."""
    if which:
        old = counts(read_view(sem, transforms))
        full = counts(sem)
        return as_semaphores(update_view(full, transforms, arithmetic.add(old, delta)),
                             get_aval(sem).dtype)
    view = TransformedRef(sem, transforms) if transforms else sem
    ref_set(view, (), as_semaphores(arithmetic.add(counts(ref_get(view, ())), delta),
                                    get_aval(sem).inner_aval.dtype))
    return None


def _signal_discharge(which, in_avals, out_avals, sem, *rest, tree, device_id_type,
                      device_id_tree, has_core_index):
    if has_core_index:
        raise NotImplementedError("Multiple core support not implemented: semaphore_signal "
                                  "with a core_index.")
    n = tree.num_leaves
    transforms = tree_unflatten(tree, rest[:n])
    inc = rest[n]
    if device_id_tree.num_leaves:  # every device signals; each adds what is aimed at it
        device_id = tree_unflatten(device_id_tree, rest[n + 1:n + 1 + device_id_tree.num_leaves])
        axis = remote.remote_axis(device_id, device_id_type)
        inc = remote.signals_for_me(inc, remote.device_index(device_id, axis), axis)
    new = add_to_semaphore(which[0], sem, transforms, inc)
    return [new] + [None] * len(rest), []


def _pp_signal(eqn, printer):
    tree = eqn.params["tree"]
    n = tree.num_leaves
    transforms = tree_unflatten(tree, eqn.invars[1:1 + n])
    text = (f"semaphore_signal {pp_ref(printer, eqn.invars[0], transforms)} "
            f"{printer.name(eqn.invars[1 + n])}")
    devices = eqn.invars[2 + n:2 + n + eqn.params["device_id_tree"].num_leaves]
    if devices:
        text += " (" + ", ".join(printer.name(d) for d in devices) + ")"
    return text


semaphore_signal_p.def_effectful_abstract_eval(_signal_abstract)
discharge_rules[semaphore_signal_p] = _signal_discharge
pp_eqn_rules[semaphore_signal_p] = _pp_signal


# --- semaphore_wait -----------------------------------------------------------------------
semaphore_wait_p = Primitive("semaphore_wait", multiple_results=True)


def semaphore_wait(sem_or_view, value=1, *, decrement: bool = True):
    """Wait until a semaphore holds ``value``, then (``decrement``) subtract it. Interpret
    mode runs one program at a time, so nothing waits: the count is decremented."""
    operands, tree = flatten_ref(sem_or_view)
    value = _int32(value)
    semaphore_wait_p.bind(*operands, value, tree=tree, decrement=bool(decrement))


def _wait_abstract(sem, *rest, tree, decrement):
    n = tree.num_leaves
    view = transformed_aval(sem.inner_aval, tree_unflatten(tree, rest[:n])) \
        if isinstance(sem, AbstractRef) else sem
    _check_semaphore(sem, view, "wait", (Semaphore, BarrierSemaphore))
    if rest[n].dtype != np.int32:
        raise ValueError("Must wait an int32 value.")
    return [], {ReadEffect(0), WriteEffect(0)}


def _wait_discharge(which, in_avals, out_avals, sem, *rest, tree, decrement):
    n = tree.num_leaves
    new = None
    if decrement:
        new = add_to_semaphore(which[0], sem, tree_unflatten(tree, rest[:n]),
                                arithmetic.neg(rest[n]))
    return [new] + [None] * len(rest), []


def _pp_wait(eqn, printer):
    tree = eqn.params["tree"]
    n = tree.num_leaves
    transforms = tree_unflatten(tree, eqn.invars[1:1 + n])
    dec = "[dec]" if eqn.params["decrement"] else ""
    return (f"semaphore_wait{dec} {pp_ref(printer, eqn.invars[0], transforms)} "
            f"{printer.name(eqn.invars[1 + n])}")


semaphore_wait_p.def_effectful_abstract_eval(_wait_abstract)
discharge_rules[semaphore_wait_p] = _wait_discharge
pp_eqn_rules[semaphore_wait_p] = _pp_wait


# --- semaphore_read -----------------------------------------------------------------------
semaphore_read_p = Primitive("semaphore_read")


def semaphore_read(sem_or_view):
    """The value of a semaphore, an int32 scalar."""
    operands, tree = flatten_ref(sem_or_view)
    return semaphore_read_p.bind(*operands, tree=tree)


def _read_abstract(sem, *leaves, tree):
    view = transformed_aval(sem.inner_aval, tree_unflatten(tree, leaves)) \
        if isinstance(sem, AbstractRef) else sem
    _check_semaphore(sem, view, "read", (Semaphore, BarrierSemaphore, DMASemaphore))
    return ShapedArray((), np.dtype(np.int32)), {ReadEffect(0)}


def _read_discharge(which, in_avals, out_avals, sem, *leaves, tree):
    transforms = tree_unflatten(tree, leaves)
    if which[0]:
        value = read_view(sem, transforms)
    else:
        value = ref_get(TransformedRef(sem, transforms) if transforms else sem, ())
    return [None] * (1 + len(leaves)), counts(value)


def _pp_read(eqn, printer):
    tree = eqn.params["tree"]
    transforms = tree_unflatten(tree, eqn.invars[1:])
    return (f"{printer.out_binder(eqn.outvars[0])} = semaphore_read "
            f"{pp_ref(printer, eqn.invars[0], transforms)}")


semaphore_read_p.def_effectful_abstract_eval(_read_abstract)
discharge_rules[semaphore_read_p] = _read_discharge
pp_eqn_rules[semaphore_read_p] = _pp_read
