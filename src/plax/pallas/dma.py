"""Asynchronous copies (DMAs) between references in a TPU kernel, and their descriptors.

``make_async_copy(src, dst, sem)`` describes a copy from ``src`` to ``dst`` (references or
views of them, of one shape and dtype) signalling DMA semaphore ``sem``; ``.start()`` binds
``dma_start_p`` and ``.wait()`` binds ``dma_wait_p``. Their operands are, in order, each
reference of the copy followed by the dynamic leaves of its transforms: ``src``, ``dst``,
``dst_sem`` and, for a remote copy, ``src_sem`` and the ``device_id`` leaves
(``DMAOperands`` splits them back). Parameters: ``trees`` (the transforms' trees),
``device_id_tree``, ``device_id_type``, ``priority`` and ``add`` for a start, ``send`` for a
wait (a remote copy's wait for its send: the operands swapped, the semaphore ``src_sem``).
An operand may be a ``pl.select_ref`` (a ``Selected``: its index, then each option's
operands, the views taken after the selection pushed into each option; its tree a
``SelectTree``); the Mosaic lowering branches on the index as JAX does, interpret mode
masks each option's read, write and signal.

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
from plax.first_order import arithmetic, bitwise, comparison, conversion
from plax.first_order.state import TransformedRef, read_view, ref_get, ref_set, update_view
from plax.higher_order.run_state import run_state
from plax.pallas import remote, semaphores
from plax.pallas.semaphores import DeviceIdType, DMASemaphore, pp_ref, split_ref

__all__ = ["dma_start_p", "dma_wait_p", "AsyncCopyDescriptor", "make_async_copy",
           "async_copy", "make_async_remote_copy", "async_remote_copy", "sync_copy"]

dma_start_p = Primitive("dma_start", multiple_results=True)
dma_wait_p = Primitive("dma_wait", multiple_results=True)

class RefView:
    """A DMA operand: reference ``ref`` seen through ``transforms``; ``at``: the operand index
    of ``ref`` in the equation. Unpacks as ``(ref, transforms)``."""

    __slots__ = ("ref", "transforms", "at")

    def __init__(self, ref, transforms, at=None):
        self.ref, self.transforms, self.at = ref, tuple(transforms), at

    def __iter__(self):
        return iter((self.ref, self.transforms))


class Selected:
    """A ``pl.select_ref`` DMA operand: the option (a ``RefView`` or ``Selected``) that the
    scalar ``idx`` picks (the first for 0, ..., the last for any index past the others); the
    views taken after the selection are in each option's transforms."""

    __slots__ = ("idx", "options")

    def __init__(self, idx, options):
        self.idx, self.options = idx, tuple(options)

    def views(self) -> list:
        """Every ``RefView`` among the options (nested ones too)."""
        return [v for o in self.options for v in ([o] if type(o) is RefView else o.views())]


class SelectTree:
    """The static structure of a ``Selected`` operand: its options' trees (a ``RefView``'s
    is its transforms' treedef). Its operands: the index, then each option's."""

    __slots__ = ("options",)

    def __init__(self, options):
        self.options = tuple(options)

    def __eq__(self, other):
        return type(other) is SelectTree and other.options == self.options

    def __hash__(self):
        return hash((SelectTree, self.options))

    def __repr__(self):
        return f"SelectTree({self.options})"


def views_of(group) -> list:
    """The ``RefView``s of a DMA operand (one, or a selection's options)."""
    return [group] if type(group) is RefView else group.views()


def _take(args, tree, at):
    if type(tree) is SelectTree:
        idx, k, options = args[at], at + 1, []
        for t in tree.options:
            option, k = _take(args, t, k)
            options.append(option)
        return Selected(idx, options), k
    n = tree.num_leaves
    return RefView(args[at], tree_unflatten(tree, args[at + 1:at + 1 + n]), at), at + 1 + n


@dataclasses.dataclass
class DMAOperands:
    """A DMA equation's operands, grouped: each of ``src``, ``dst``, ``dst_sem`` and
    ``src_sem`` is a ``RefView`` (or a ``Selected``; ``src_sem`` None for a local copy), and
    ``device_id`` the device id's pytree (None for a local copy)."""

    src: Any
    dst: Any
    dst_sem: Any
    src_sem: Any
    device_id: Any

    @classmethod
    def split(cls, args, trees, device_id_tree) -> "DMAOperands":
        groups, at = [], 0
        for tree in trees:
            if tree is None:
                groups.append(None)
                continue
            group, at = _take(args, tree, at)
            groups.append(group)
        rest = list(args[at:])
        device_id = tree_unflatten(device_id_tree, rest) if device_id_tree.num_leaves else None
        return cls(*groups, device_id)

    def groups(self) -> tuple:
        return self.src, self.dst, self.dst_sem, self.src_sem


def _normalized(ref, outer=()):
    """A DMA operand as a ``RefView`` or ``Selected``: the views taken after a selection are
    pushed into each of its options."""
    base, transforms = (ref, ()) if type(ref) is TransformedRef and ref.multiref else (
        (ref.ref, ref.transforms) if type(ref) is TransformedRef
        and type(ref.ref) is TransformedRef else (None, None))
    if base is None:
        base, transforms = split_ref(ref)
        return RefView(base, tuple(transforms) + tuple(outer))
    after = tuple(transforms) + tuple(outer)
    return Selected(base.transforms[0].idx, [_normalized(o, after) for o in base.ref])


def _flatten_group(group):
    if type(group) is Selected:
        operands, trees = [_as_int32(group.idx)], []
        for option in group.options:
            flat, tree = _flatten_group(option)
            operands += flat
            trees.append(tree)
        return operands, SelectTree(trees)
    leaves, tree = tree_flatten(tuple(group.transforms))
    return [group.ref, *leaves], tree


def _flatten(src, dst, dst_sem, src_sem, device_id):
    operands, trees = [], []
    for ref in (src, dst, dst_sem, src_sem):
        if ref is None:
            trees.append(None)
            continue
        flat, tree = _flatten_group(_normalized(ref))
        operands += flat
        trees.append(tree)
    device_leaves, device_tree = tree_flatten(device_id)
    return operands + [_as_int32(d) for d in device_leaves], tuple(trees), device_tree


def _as_int32(x):
    return np.asarray(x, np.int32) if isinstance(x, (int, np.integer)) else x


def group_aval(group, aval_of=lambda ref: ref, what: str = "a DMA operand"):
    """The type seen through a DMA operand (a selection's options must agree on it), and the
    reference type of (the first of) its references; ``aval_of`` gives a reference's type."""
    if type(group) is Selected:
        idx = group.idx
        idx = get_aval(idx) if isinstance(idx, Tracer) else (
            idx if hasattr(idx, "dtype") else np.asarray(idx))
        if tuple(getattr(idx, "shape", ())) or not np.issubdtype(idx.dtype, np.integer):
            raise TypeError(f"pl.select_ref takes a scalar integer index, got {idx}.")
        pairs = [group_aval(o, aval_of, what) for o in group.options]
        views = [v for v, _ in pairs]
        if any((tuple(v.shape), v.dtype) != (tuple(views[0].shape), views[0].dtype)
               for v in views[1:]):
            raise TypeError("Cannot select from Refs of different types: "
                            f"{[v.str_short() for v in views]}")
        return pairs[0]
    ref = aval_of(group.ref)
    if not isinstance(ref, AbstractRef):
        raise ValueError(f"{what} takes a Ref, got a value of type "
                         f"{getattr(ref, 'str_short', lambda: ref)()}.")
    return transformed_aval(ref.inner_aval, group.transforms), ref


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
    src_aval = group_aval(_normalized(src), get_aval, "make_async_copy: src_ref")[0]
    dst_aval = group_aval(_normalized(dst), get_aval, "make_async_copy: dst_ref")[0]
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
            value = ref_get(src, ())
            ref_set(dst, (), arithmetic.add(ref_get(dst, ()), value) if add else value)
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
    for group in ops.groups():
        if group is None:
            views.append(None)
            continue
        view, ref = group_aval(group, what="DMA source/destination/semaphore arguments")
        views.append((ref, view))
    return ops, views


def _effects(ops):
    effs = set()
    for k, group in enumerate(ops.groups()):
        for view in views_of(group) if group is not None else ():
            effs |= ({ReadEffect(view.at)} if k == 0 else {WriteEffect(view.at)} if k == 1
                     else {ReadEffect(view.at), WriteEffect(view.at)})
    return effs


def _start_abstract(*avals, trees, device_id_tree, device_id_type, priority, add):
    if priority < 0:
        raise ValueError(f"DMA start priority must be non-negative: {priority}")
    ops, views = _views(avals, trees, device_id_tree)
    for sem in views[2:]:
        if sem is not None and tuple(sem[1].shape):
            raise ValueError(f"Cannot signal on a non-()-shaped semaphore: "
                             f"{tuple(sem[1].shape)}")
    return [], _effects(ops)


def _wait_abstract(*avals, trees, device_id_tree, device_id_type, send=False):
    ops, views = _views(avals, trees, device_id_tree)
    sem_ref, sem_view = views[2]
    if not isinstance(sem_ref.dtype, DMASemaphore):
        raise ValueError("dma_wait requires a DMA semaphore, but got a regular semaphore."
                         " Use pl.semaphore_wait() instead.")
    if tuple(sem_view.shape):
        raise ValueError(f"Cannot wait on a non-()-shaped semaphore: {tuple(sem_view.shape)}")
    return [], _effects(ops)


dma_start_p.def_effectful_abstract_eval(_start_abstract)
dma_wait_p.def_effectful_abstract_eval(_wait_abstract)


# --- discharge ----------------------------------------------------------------------------
class _Held:
    """The references of a DMA as its discharge runs: a discharged one is its latest value,
    shared by the operands of one reference (one ``which`` mark: ``sem.at[0]`` and
    ``sem.at[1]``); the others are read and written in place."""

    def __init__(self, which, args):
        self.which, self.args, self.slots = which, args, []

    def _slot(self, at):
        mark = self.which[at]
        for slot in self.slots:
            if slot[0] is mark:
                return slot
        self.slots.append([mark, self.args[at]])
        return self.slots[-1]

    def read(self, view: RefView, transforms=None):
        transforms = view.transforms if transforms is None else transforms
        if self.which[view.at]:
            return read_view(self._slot(view.at)[1], transforms)
        return ref_get(TransformedRef(view.ref, transforms) if transforms else view.ref, ())

    def write(self, view: RefView, value, accumulate=False, transforms=None):
        transforms = view.transforms if transforms is None else transforms
        if self.which[view.at]:
            slot = self._slot(view.at)
            slot[1] = update_view(slot[1], transforms, value, accumulate)
            return
        target = TransformedRef(view.ref, transforms) if transforms else view.ref
        if accumulate:
            value = arithmetic.add(ref_get(target, ()), value)
        ref_set(target, (), value)

    def signal(self, view: RefView, delta):
        if self.which[view.at]:
            slot = self._slot(view.at)
            slot[1] = semaphores.add_to_semaphore(True, slot[1], view.transforms, delta)
        else:
            semaphores.add_to_semaphore(False, view.ref, view.transforms, delta)

    def new(self) -> list:
        return [self._slot(k)[1] if w else None for k, w in enumerate(self.which)]


def _picks(group: Selected) -> list:
    """Whether each option of a selection is the one picked (as TPU's lowering picks)."""
    n = len(group.options)
    firsts = [comparison.eq(group.idx, np.asarray(k, get_aval(group.idx).dtype))
              for k in range(n - 1)]
    last = firsts[0]
    for f in firsts[1:]:
        last = bitwise.bitwise_or(last, f)
    return firsts + [bitwise.bitwise_not(last)]


def _read_group(held: _Held, group):
    if type(group) is RefView:
        return held.read(group)
    values = [_read_group(held, o) for o in group.options]
    out = values[-1]
    for pick, value in reversed(list(zip(_picks(group)[:-1], values[:-1]))):
        out = comparison.select_n(pick, out, value)
    return out


def _write_group(held: _Held, group, value, accumulate=False, mask=None):
    if type(group) is Selected:
        for option, pick in zip(group.options, _picks(group)):
            _write_group(held, option, value, accumulate,
                         pick if mask is None else bitwise.bitwise_and(mask, pick))
    elif mask is None:
        held.write(group, value, accumulate)
    else:
        old = held.read(group)
        new = arithmetic.add(old, value) if accumulate else value
        held.write(group, comparison.select_n(mask, old, new))


def _signal_group(held: _Held, group, delta, mask=None):
    if type(group) is Selected:
        for option, pick in zip(group.options, _picks(group)):
            _signal_group(held, option, delta,
                          pick if mask is None else bitwise.bitwise_and(mask, pick))
        return
    if mask is not None:
        delta = arithmetic.mul(conversion.convert_element_type(mask, np.int32), delta)
    held.signal(group, delta)


def _size(value) -> np.int32:
    return np.int32(int(np.prod(value.shape, dtype=np.int64)))


def _start_discharge(which, in_avals, out_avals, *args, trees, device_id_tree,
                     device_id_type, priority, add):
    ops = DMAOperands.split(args, trees, device_id_tree)
    held = _Held(which, args)
    data = _read_group(held, ops.src)
    count = _size(data)
    if ops.src_sem is not None:  # a remote copy: every device sends, each one receives
        if any(type(g) is Selected for g in ops.groups()):
            raise NotImplementedError("pl.select_ref in a remote copy is not supported in "
                                      "interpret mode.")
        axis = remote.remote_axis(ops.device_id, device_id_type)
        target = remote.device_index(ops.device_id, axis)
        received, data, dst_transforms = remote.receive(data, ops.dst.transforms, target, axis)
        held.signal(ops.src_sem, count)
        count = arithmetic.mul(conversion.convert_element_type(received, np.int32), count)
        old = held.read(ops.dst, dst_transforms)
        data = comparison.select_n(received, arithmetic.add(old, data) if add else old, data)
        held.write(ops.dst, data, transforms=dst_transforms)
    else:
        _write_group(held, ops.dst, data, accumulate=add)
    _signal_group(held, ops.dst_sem, count)
    return held.new(), []


def _wait_discharge(which, in_avals, out_avals, *args, trees, device_id_tree,
                    device_id_type, send=False):
    ops = DMAOperands.split(args, trees, device_id_tree)
    dst_view = group_aval(DMAOperands.split(in_avals, trees, device_id_tree).dst)[0]
    held = _Held(which, args)
    _signal_group(held, ops.dst_sem, np.int32(-_size(dst_view)))
    return held.new(), []


discharge_rules[dma_start_p] = _start_discharge
discharge_rules[dma_wait_p] = _wait_discharge


# --- printing -----------------------------------------------------------------------------
def _pp_group(printer, group) -> str:
    if type(group) is RefView:
        return pp_ref(printer, *group)
    options = ", ".join(_pp_group(printer, o) for o in group.options)
    return f"select({printer.name(group.idx)}; {options})"


def _pp_groups(eqn, printer):
    ops = DMAOperands.split(eqn.invars, eqn.params["trees"], eqn.params["device_id_tree"])
    return ops, lambda g: _pp_group(printer, g)


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
