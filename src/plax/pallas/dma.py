"""Asynchronous copies (DMAs) between references in a TPU kernel, and their descriptors.

``make_async_copy(src, dst, sem)`` describes a copy from ``src`` to ``dst`` (references or
views of them, of one shape and dtype) signalling DMA semaphore ``sem``; ``.start()`` binds
``dma_start_p`` and ``.wait()`` binds ``dma_wait_p``. Their operands are, in order, each
reference of the copy followed by the dynamic leaves of its transforms: ``src``, ``dst``,
``dst_sem`` and, for a remote copy, ``src_sem`` and the ``device_id`` leaves
(``DMAOperands`` splits them back). Parameters: ``trees`` (the transforms' trees),
``device_id_tree``, ``device_id_type``, ``priority`` and ``add`` for a start, ``send`` for a
wait (a remote copy's wait for its send: the operands swapped, the semaphore ``src_sem``).

In interpret mode (the discharge rules) a start copies (``add``: accumulates) the data at
once and adds the number of elements copied to ``dst_sem``; a wait subtracts the number of
elements of ``dst`` from it: JAX's interpret-mode accounting, with counters that never
block. A remote copy runs between the devices of an enclosing ``shard_map``
(``plax.pallas.remote``); the sender's ``src_sem`` counts what it sent.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from plax.core.effects import ReadEffect, WriteEffect
from plax.core.primitive import Primitive
from plax.core.refs import AbstractRef, transformed_aval
from plax.core.rules import discharge_rules, pp_eqn_rules
from plax.core.trace import Tracer, get_aval
from plax.core.tree_core import tree_flatten, tree_unflatten
from plax.first_order import arithmetic, comparison, conversion
from plax.first_order.state import TransformedRef, read_view, ref_get, ref_set, update_view
from plax.higher_order.run_state import run_state
from plax.pallas import remote, semaphores
from plax.pallas.semaphores import (DeviceIdType, DMASemaphore, flatten_ref, pp_ref,
                                    ref_view_aval, split_ref)

__all__ = ["dma_start_p", "dma_wait_p", "AsyncCopyDescriptor", "make_async_copy",
           "async_copy", "make_async_remote_copy", "async_remote_copy", "sync_copy"]

dma_start_p = Primitive("dma_start", multiple_results=True)
dma_wait_p = Primitive("dma_wait", multiple_results=True)

@dataclasses.dataclass
class DMAOperands:
    """A DMA equation's operands, grouped: each of ``src``, ``dst``, ``dst_sem`` and
    ``src_sem`` is ``(reference, transforms)`` (``src_sem`` None for a local copy), and
    ``device_id`` the device id's pytree (None for a local copy)."""

    src: tuple
    dst: tuple
    dst_sem: tuple
    src_sem: tuple | None
    device_id: Any

    @classmethod
    def split(cls, args, trees, device_id_tree) -> "DMAOperands":
        args, groups = list(args), []
        for tree in trees:
            if tree is None:
                groups.append(None)
                continue
            n = tree.num_leaves
            groups.append((args[0], tree_unflatten(tree, args[1:1 + n])))
            args = args[1 + n:]
        device_id = tree_unflatten(device_id_tree, args) if device_id_tree.num_leaves else None
        return cls(*groups, device_id)

    @staticmethod
    def positions(trees) -> list:
        """The operand index of each reference (None for an absent source semaphore)."""
        out, at = [], 0
        for tree in trees:
            if tree is None:
                out.append(None)
                continue
            out.append(at)
            at += 1 + tree.num_leaves
        return out


def _flatten(src, dst, dst_sem, src_sem, device_id):
    operands, trees = [], []
    for ref in (src, dst, dst_sem, src_sem):
        if ref is None:
            trees.append(None)
            continue
        flat, tree = flatten_ref(ref)
        operands += flat
        trees.append(tree)
    device_leaves, device_tree = tree_flatten(device_id)
    return operands + [_as_int32(d) for d in device_leaves], tuple(trees), device_tree


def _as_int32(x):
    return np.asarray(x, np.int32) if isinstance(x, (int, np.integer)) else x


@dataclasses.dataclass
class AsyncCopyDescriptor:
    """A copy from ``src_ref`` to ``dst_ref``: ``start()`` issues it, ``wait()`` waits for it
    (on ``dst_sem``; a remote copy also waits for the send on ``src_sem``)."""

    src_ref: Any
    dst_ref: Any
    dst_sem: Any
    src_sem: Any | None
    device_id: Any
    device_id_type: DeviceIdType = DeviceIdType.MESH

    def __post_init__(self):
        if (self.src_sem is None) ^ (self.device_id is None):
            raise ValueError("Either both or neither `src_sem` and `device_id` can be set.")

    @property
    def is_remote(self) -> bool:
        return self.src_sem is not None

    def _bind(self, prim, swap: bool = False, **params):
        refs = (self.dst_ref, self.src_ref, self.src_sem, self.dst_sem) if swap else (
            self.src_ref, self.dst_ref, self.dst_sem, self.src_sem)
        operands, trees, device_tree = _flatten(*refs, self.device_id)
        prim.bind(*operands, trees=trees, device_id_tree=device_tree,
                  device_id_type=self.device_id_type, **params)

    def start(self, priority: int = 0, *, add: bool = False) -> None:
        """Issue the copy (``add``: accumulate into the destination instead)."""
        self._bind(dma_start_p, priority=int(priority), add=bool(add))

    def wait(self) -> None:
        """Wait for the copy: its send (remote copies) and its arrival."""
        if self.is_remote:
            self.wait_send()
        self.wait_recv()

    def wait_recv(self) -> None:
        """Wait for the copy to arrive (on the destination semaphore)."""
        self._bind(dma_wait_p, send=False)

    def wait_send(self) -> None:
        """Wait for a remote copy to have left (on the source semaphore)."""
        if not self.is_remote:
            raise ValueError("Cannot `wait_send` on a local copy.")
        self._bind(dma_wait_p, swap=True, send=True)


def _check_copy(src, dst) -> None:
    src_aval = ref_view_aval(src, "make_async_copy: src_ref")
    dst_aval = ref_view_aval(dst, "make_async_copy: dst_ref")
    if tuple(src_aval.shape) != tuple(dst_aval.shape) or src_aval.dtype != dst_aval.dtype:
        raise ValueError(f"Cannot copy a reference of type {src_aval.str_short()} into one of "
                         f"type {dst_aval.str_short()}: a DMA's source and destination must "
                         "have the same shape and dtype.")


def make_async_copy(src_ref, dst_ref, sem) -> AsyncCopyDescriptor:
    """A description of a copy from ``src_ref`` to ``dst_ref`` signalling DMA semaphore
    ``sem`` (``.start()`` and ``.wait()`` it)."""
    _check_copy(src_ref, dst_ref)
    return AsyncCopyDescriptor(src_ref, dst_ref, sem, None, None, DeviceIdType.MESH)


def async_copy(src_ref, dst_ref, sem, *, priority: int = 0, add: bool = False):
    """Start a copy from ``src_ref`` to ``dst_ref``; its descriptor (to ``.wait()``)."""
    copy = make_async_copy(src_ref, dst_ref, sem)
    copy.start(priority=priority, add=add)
    return copy


def make_async_remote_copy(src_ref, dst_ref, send_sem, recv_sem, device_id,
                           device_id_type: DeviceIdType = DeviceIdType.MESH):
    """A description of a copy from ``src_ref`` here to ``dst_ref`` on device
    ``device_id``, signalling ``send_sem`` here and ``recv_sem`` there."""
    if device_id_type == DeviceIdType.LOGICAL and isinstance(device_id, (tuple, dict)):
        raise ValueError("LOGICAL device_id_type does not support device_id as a tuple or "
                         "dict.")
    _check_copy(src_ref, dst_ref)
    return AsyncCopyDescriptor(src_ref, dst_ref, recv_sem, send_sem, device_id,
                               device_id_type)


def async_remote_copy(src_ref, dst_ref, send_sem, recv_sem, device_id,
                      device_id_type: DeviceIdType = DeviceIdType.MESH):
    """Start a remote copy (see ``make_async_remote_copy``); its descriptor."""
    copy = make_async_remote_copy(src_ref, dst_ref, send_sem, recv_sem, device_id,
                                  device_id_type)
    copy.start()
    return copy


def sync_copy(src_ref, dst_ref, *, add: bool = False) -> None:
    """Copy (``add``: accumulate) a pytree of references into another, synchronously: as
    JAX does, DMAs on a DMA semaphore scoped to the copy (every copy started, then each
    waited for), so that compiled the data goes straight from source to destination."""
    srcs, tree = tree_flatten(src_ref)
    dsts, dst_tree = tree_flatten(dst_ref)
    if tree != dst_tree:
        raise ValueError(f"sync_copy: the source and destination trees differ: {tree} and "
                         f"{dst_tree}.")
    if not srcs:
        return
    for src, dst in zip(srcs, dsts):
        _check_copy(src, dst)
    if not all(_kernel_ref(r) for r in srcs + dsts):
        # (a buffer of run_scoped is a reference box, which holds its value while the kernel
        # is traced: read it and write it)
        for src, dst in zip(srcs, dsts):
            _write(False, *split_ref(dst), _read(False, *split_ref(src)), accumulate=add)
        return

    def copies(sem):
        for src, dst in zip(srcs, dsts):
            make_async_copy(src, dst, sem).start(add=add)
        for src, dst in zip(srcs, dsts):
            make_async_copy(src, dst, sem).wait()
    run_state(copies)(semaphores.as_semaphores(np.zeros((), np.int32), semaphores.DMA_SEMAPHORE))


def _kernel_ref(ref) -> bool:
    """Whether ``ref`` (or the reference it views) is a reference of the kernel's jaxpr."""
    base = split_ref(ref)[0]
    return isinstance(base, Tracer) and isinstance(get_aval(base), AbstractRef)


# --- abstract evaluation ------------------------------------------------------------------
def _views(avals, trees, device_id_tree):
    ops = DMAOperands.split(avals, trees, device_id_tree)
    views = []
    for group in (ops.src, ops.dst, ops.dst_sem, ops.src_sem):
        if group is None:
            views.append(None)
            continue
        ref, transforms = group
        if not isinstance(ref, AbstractRef):
            raise ValueError("DMA source/destination/semaphore arguments must be Refs.")
        views.append((ref, transforms_aval(ref, transforms)))
    return ops, views


def transforms_aval(ref: AbstractRef, transforms):
    return transformed_aval(ref.inner_aval, transforms)


def _effects(trees):
    at = DMAOperands.positions(trees)
    effs = {ReadEffect(at[0]), WriteEffect(at[1]), ReadEffect(at[2]), WriteEffect(at[2])}
    if at[3] is not None:
        effs |= {ReadEffect(at[3]), WriteEffect(at[3])}
    return effs


def _start_abstract(*avals, trees, device_id_tree, device_id_type, priority, add):
    if priority < 0:
        raise ValueError(f"DMA start priority must be non-negative: {priority}")
    _, views = _views(avals, trees, device_id_tree)
    for sem in views[2:]:
        if sem is not None and tuple(sem[1].shape):
            raise ValueError(f"Cannot signal on a non-()-shaped semaphore: "
                             f"{tuple(sem[1].shape)}")
    return [], _effects(trees)


def _wait_abstract(*avals, trees, device_id_tree, device_id_type, send=False):
    _, views = _views(avals, trees, device_id_tree)
    sem_ref, sem_view = views[2]
    if not isinstance(sem_ref.dtype, DMASemaphore):
        raise ValueError("dma_wait requires a DMA semaphore, but got a regular semaphore."
                         " Use pl.semaphore_wait() instead.")
    if tuple(sem_view.shape):
        raise ValueError(f"Cannot wait on a non-()-shaped semaphore: {tuple(sem_view.shape)}")
    return [], _effects(trees)


dma_start_p.def_effectful_abstract_eval(_start_abstract)
dma_wait_p.def_effectful_abstract_eval(_wait_abstract)


# --- discharge ----------------------------------------------------------------------------
def _read(which: bool, ref, transforms):
    if which:
        return read_view(ref, transforms)
    return ref_get(TransformedRef(ref, transforms) if transforms else ref, ())


def _write(which: bool, ref, transforms, value, accumulate: bool = False):
    """The new value of a discharged ``ref`` with ``value`` written at the view (None when
    ``ref`` is still a reference: written in place)."""
    if which:
        return update_view(ref, transforms, value, accumulate)
    view = TransformedRef(ref, transforms) if transforms else ref
    if accumulate:
        value = arithmetic.add(ref_get(view, ()), value)
    ref_set(view, (), value)
    return None


def _size(value) -> np.int32:
    return np.int32(int(np.prod(value.shape, dtype=np.int64)))


def _start_discharge(which, in_avals, out_avals, *args, trees, device_id_tree,
                     device_id_type, priority, add):
    at = DMAOperands.positions(trees)
    ops = DMAOperands.split(args, trees, device_id_tree)
    data = _read(which[at[0]], *ops.src)
    new = [None] * len(args)
    dst, dst_transforms = ops.dst
    count = _size(data)
    if ops.src_sem is not None:  # a remote copy: every device sends, each one receives
        axis = remote.remote_axis(ops.device_id, device_id_type)
        target = remote.device_index(ops.device_id, axis)
        received, data, dst_transforms = remote.receive(data, dst_transforms, target, axis)
        new[at[3]] = semaphores.add_to_semaphore(which[at[3]], *ops.src_sem, count)
        count = arithmetic.mul(conversion.convert_element_type(received, np.int32), count)
        old = _read(which[at[1]], dst, dst_transforms)
        data = comparison.select_n(received, arithmetic.add(old, data) if add else old, data)
        add = False
    new[at[1]] = _write(which[at[1]], dst, dst_transforms, data, accumulate=add)
    new[at[2]] = semaphores.add_to_semaphore(which[at[2]], *ops.dst_sem, count)
    return new, []


def _wait_discharge(which, in_avals, out_avals, *args, trees, device_id_tree,
                    device_id_type, send=False):
    at = DMAOperands.positions(trees)
    ops = DMAOperands.split(args, trees, device_id_tree)
    dst_view = transformed_aval(in_avals[at[1]].inner_aval, ops.dst[1])
    new = [None] * len(args)
    new[at[2]] = semaphores.add_to_semaphore(which[at[2]], *ops.dst_sem,
                                             np.int32(-_size(dst_view)))
    return new, []


discharge_rules[dma_start_p] = _start_discharge
discharge_rules[dma_wait_p] = _wait_discharge


# --- printing -----------------------------------------------------------------------------
def _pp_groups(eqn, printer):
    ops = DMAOperands.split(eqn.invars, eqn.params["trees"], eqn.params["device_id_tree"])
    return ops, lambda g: pp_ref(printer, *g)


def _pp_start(eqn, printer):
    ops, show = _pp_groups(eqn, printer)
    flags = f"p{eqn.params['priority']}" + (", add" if eqn.params["add"] else "")
    text = f"dma_start({flags}) {show(ops.src)} -> {show(ops.dst)} {show(ops.dst_sem)}"
    if ops.src_sem is not None:
        devices = tree_flatten(ops.device_id)[0]
        text += f" {show(ops.src_sem)} (" + ", ".join(printer.name(d) for d in devices) + ")"
    return text


def _pp_wait(eqn, printer):
    ops, show = _pp_groups(eqn, printer)
    return f"dma_wait {show(ops.dst)} {show(ops.dst_sem)}"


pp_eqn_rules[dma_start_p] = _pp_start
pp_eqn_rules[dma_wait_p] = _pp_wait
