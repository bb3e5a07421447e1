"""Mosaic lowering rules of pltpu's kernel primitives: DMAs (``tpu.enqueue_dma``,
``tpu.wait_dma2``), semaphores (``tpu.sem_signal``, ``tpu.sem_wait``, ``tpu.sem_read``),
``roll`` (``tpu.dynamic_rotate``), ``bitcast`` (``tpu.bitcast``), element packing
(``tpu.pack_elementwise``, ``tpu.unpack_elementwise``), ``stochastic_round``
(``tpu.stochastic_convert``), the kernel PRNG (``tpu.prng_set_seed_32``,
``tpu.prng_random_bits``), ``trace_value`` (``tpu.trace_value``), ``touch`` (nothing: an
ordering dependency only) and ``pl.debug_print`` (``tpu.log`` of scalars, ``tpu.log_buffer``
of a vector stored to a scoped VMEM buffer).

A view of a reference (``x_hbm.at[pl.ds(i, 8)]``, ``sem.at[slot]``) handed to a DMA or a
semaphore op is a memref of its own, as JAX builds it: ``tpu.memref_slice`` at the view's
(i32) starts, then ``tpu.memref_squeeze`` of the dimensions an integer index drops.
Inside a shard_map, ``axis_index`` is computed from ``tpu.device_id`` and the mesh, and
remote DMAs and signals name their device by its logical id (mesh coordinates weighted by
the mesh's strides), as JAX lowers them; outside one they are refused with the fix.

Reads and writes of blocks of references in ANY/HBM memory (what plax's ``emit_pipeline``
does at each step, around the ``run_state`` of its body) become synchronous DMAs through a
scoped VMEM buffer (``tpu.region`` holding ``memref.alloca`` and ``tpu.sem_alloc``, as JAX
lowers ``run_scoped``): the pipeline's steps do not overlap their copies.
"""
from __future__ import annotations

import dataclasses
import string

import numpy as np

from plax.core.avals import ShapedArray
from plax.core.refs import AbstractRef
from plax.core.rules import mosaic_lowering_rules as rules
from plax.core.tree_core import tree_flatten, tree_unflatten
from plax.first_order import collectives, state
from plax.higher_order import callbacks
from plax.pallas import dma, semaphores, tpu_ops, tpu_packing, tpu_prng
from plax.pallas.mosaic_lowering import (Lit, RefValue, Value, _escape, element_type, key_kind,
                                         static_int)
from plax.pallas.mosaic_rules_arith import convert
from plax.pallas.mosaic_rules_refs import _scoped_ref as scoped_ref
from plax.pallas.mosaic_rules_refs import in_region, sliced, viewed

__all__ = ["ref_view", "set_seed", "random_bits"]

_I32 = ShapedArray((), np.dtype(np.int32))


def _segments(*sizes) -> str:
    return f"operandSegmentSizes = array<i32: {', '.join(map(str, sizes))}>"


def _i32(ctx, x) -> Value:
    """An int32 scalar Value from an int, a Lit or an integer scalar Value."""
    k = static_int(x)
    if k is not None:
        return ctx.constant(k, _I32)
    if x.aval.shape:
        raise ctx.error(f"expected an integer scalar, got {x.aval.str_short()}")
    return x if np.dtype(x.aval.dtype) == np.int32 else convert(ctx, x, np.int32)


def ref_view(ctx, ref, transforms) -> RefValue:
    """The memref of ``ref`` seen through ``transforms`` (its ``.at[...]`` indexers, reshapes
    and bitcasts): ``tpu.memref_slice`` at the view's starts, ``tpu.memref_squeeze`` of the
    dimensions indexed by an integer (and of the block's squeezed ones)."""
    if not isinstance(ref, RefValue):
        raise ctx.error("a value was used where a reference is expected")
    ref, transforms = viewed(ctx, ref, transforms)
    return sliced(ctx, ref, transforms)


def _refuse_remote(ctx, what: str):
    return ctx.error(
        f"{what} on another device (a device_id) needs the mesh of an enclosing shard_map: "
        "Cannot use communication in pallas_call without shard_map. Call the pallas_call "
        "inside a shard_map over the devices it talks to (or run it in interpret mode, "
        "pallas_call(..., interpret=True)).")


# --- devices of the mesh --------------------------------------------------------------------
def _mesh(ctx, what: str):
    if ctx.fn.mesh is None:
        raise _refuse_remote(ctx, what)
    return ctx.fn.mesh


def _axis_position(ctx, name, asked: bool = False) -> Value:
    """This device's position along mesh axis ``name``: (``tpu.device_id`` divided by the
    sizes of the minor axes) modulo the axis's size, as JAX computes it (``asked``: by the
    kernel's ``axis_index``, which the custom call's metadata lists)."""
    names, sizes = ctx.fn.mesh if ctx.fn.mesh is not None else ((), ())
    if name not in names:
        raise ctx.error(f"axis_index({name!r}) in a TPU kernel needs {name!r} to be an axis "
                        f"of the enclosing shard_map's mesh (its axes: {list(names)}); "
                        "call the pallas_call inside a shard_map over that axis.")
    k = names.index(name)
    if asked:
        ctx.fn.used_axes.add(name)
    device = ctx.op1("tpu.device_id", [], _I32)
    minor = ctx.constant(int(np.prod(sizes[k + 1:], dtype=np.int64)), _I32)
    major = ctx.op1("arith.divsi", [device, minor], _I32)
    return ctx.op1("arith.remsi", [major, ctx.constant(sizes[k], _I32)], _I32)


def _axis_index(ctx, *, axis_name):
    return _axis_position(ctx, axis_name, asked=True)


def _logical_device(ctx, device_id, device_id_type, what: str) -> Value:
    """The logical id (i32) of the device ``device_id`` names: its mesh coordinates (a tuple
    of one per mesh axis, or a dict of some axes, the others this device's) weighted by the
    mesh's strides, or a logical id as it is."""
    names, sizes = _mesh(ctx, what)
    if isinstance(device_id, dict):
        if device_id_type != semaphores.DeviceIdType.MESH:
            raise ctx.error(f"`device_id_type` must be MESH if `device_id` is a dict, got: "
                            f"device_id_type = {device_id_type}.")
        unknown = [a for a in device_id if a not in names]
        if unknown:
            raise ctx.error(f"device_id names axes {unknown} that the mesh (axes "
                            f"{list(names)}) does not have.")
        device_id = tuple(device_id[a] if a in device_id else _axis_position(ctx, a)
                          for a in names)
    leaves = tree_flatten(device_id)[0]
    if device_id_type != semaphores.DeviceIdType.MESH:
        return _i32(ctx, leaves[0])
    if len(leaves) != len(names):
        raise ctx.error(f"Number of device ids must match the number of mesh axes, but got "
                        f"{len(leaves)} ids for a {len(names)}D mesh.")
    total = None
    for k, leaf in enumerate(leaves):
        term, stride = _i32(ctx, leaf), int(np.prod(sizes[k + 1:], dtype=np.int64))
        if stride != 1:
            term = ctx.op1("arith.muli", [term, ctx.constant(stride, _I32)], _I32)
        total = term if total is None else ctx.op1("arith.addi", [total, term], _I32)
    return total


# --- DMAs -----------------------------------------------------------------------------------
def _dma_refs(ctx, ops):
    sem, dst, src = (ref_view(ctx, *group) for group in (ops.dst_sem, ops.dst, ops.src))
    return src, dst, sem  # (views made in JAX's order: the semaphore's first)


def _choosing(ctx, ops, emit) -> None:
    """``emit(ops)`` with each ``pl.select_ref`` operand (in the order src, dst, semaphores)
    resolved as JAX lowers it: ``scf.if`` on ``idx == 0`` over the first option, else on
    ``idx - 1`` over the others (the last for any index past them)."""
    for name in ("src", "dst", "dst_sem", "src_sem"):
        group = getattr(ops, name)
        if type(group) is dma.Selected:
            _select(ctx, ops, name, _i32(ctx, group.idx), group.options, emit)
            return
    emit(ops)


def _select(ctx, ops, name, idx, options, emit) -> None:
    def region(build):
        def body(_):
            build()
            ctx.fn.op("scf.yield", [], [])
        return ctx.fn.region([], body)

    def first():
        _choosing(ctx, dataclasses.replace(ops, **{name: options[0]}), emit)

    def rest():
        if len(options) > 2:
            one = ctx.constant(1, _I32)
            _select(ctx, ops, name, ctx.op1("arith.subi", [idx, one], _I32), options[1:], emit)
        else:
            _choosing(ctx, dataclasses.replace(ops, **{name: options[1]}), emit)

    pred = ctx.op1("arith.cmpi", [idx, ctx.constant(0, _I32)],
                   ShapedArray((), np.dtype(np.bool_)), "predicate = 0 : i64")
    ctx.fn.op("scf.if", [pred], [], regions=[region(first), region(rest)])


def _dma_start(ctx, *args, trees, device_id_tree, device_id_type, priority, add):
    if add:
        raise ctx.error("DMA with add=True is not supported.")
    ops = dma.DMAOperands.split(args, trees, device_id_tree)
    attrs = f"priority = {int(priority)} : i32, strict_ordering = false"

    def emit(ops):
        src, dst, sem = _dma_refs(ctx, ops)
        if np.dtype(src.dtype) == np.bool_:
            raise ctx.error("DMAs with bool dtypes are not supported.")
        if ops.device_id is None:
            ctx.fn.op("tpu.enqueue_dma", [src, dst, sem], [],
                      f"{_segments(1, 0, 1, 1, 0, 0, 0)}, {attrs}")
            return
        send_sem = ref_view(ctx, *ops.src_sem)
        device = _logical_device(ctx, ops.device_id, device_id_type,
                                 "A remote DMA (make_async_remote_copy)")
        ctx.fn.op("tpu.enqueue_dma", [src, send_sem, dst, sem, device], [],
                  f"{_segments(1, 1, 1, 1, 1, 0, 0)}, {attrs}")
    _choosing(ctx, ops, emit)
    return []


def _dma_wait(ctx, *args, trees, device_id_tree, device_id_type, send=False):
    ops = dma.DMAOperands.split(args, trees, device_id_tree)

    def emit(ops):
        src, dst, sem = _dma_refs(ctx, ops)
        if send:  # (a remote copy's send: JAX names this device, core 0)
            zero = ctx.constant(0, _I32)
            ctx.fn.op("tpu.wait_dma2", [sem, src, dst, zero, zero], [],
                      f"{_segments(1, 1, 1, 1, 1)}, strict_ordering = false")
        elif ops.device_id is not None:
            device = _logical_device(ctx, ops.device_id, device_id_type,
                                     "A remote DMA (make_async_remote_copy)")
            ctx.fn.op("tpu.wait_dma2", [sem, src, dst, device], [],
                      f"{_segments(1, 1, 1, 1, 0)}, strict_ordering = false")
        else:
            ctx.fn.op("tpu.wait_dma2", [sem, src, dst], [],
                      f"{_segments(1, 1, 1, 0, 0)}, strict_ordering = false")
    _choosing(ctx, ops, emit)
    return []


rules[dma.dma_start_p] = _dma_start
rules[dma.dma_wait_p] = _dma_wait


# --- semaphores -----------------------------------------------------------------------------
def _semaphore(ctx, sem, leaves, tree) -> RefValue:
    return ref_view(ctx, sem, tree_unflatten(tree, list(leaves)))


def _signal(ctx, sem, *rest, tree, device_id_type, device_id_tree, has_core_index):
    n = tree.num_leaves
    if has_core_index:
        raise ctx.error("semaphore_signal with a core_index (another TensorCore) is not "
                        "supported: plax lowers kernels for a single core.")
    view = _semaphore(ctx, sem, rest[:n], tree)
    amount = _i32(ctx, rest[n])
    if not device_id_tree.num_leaves:
        ctx.fn.op("tpu.sem_signal", [view, amount], [], _segments(1, 1, 0, 0, 0))
        return []
    device_id = tree_unflatten(device_id_tree, list(rest[n + 1:n + 1 + device_id_tree.num_leaves]))
    cores = ctx.fn.grid_axes
    if isinstance(device_id, dict) and device_id and all(a in cores for a in device_id):
        # another core of the kernel's mesh (JAX's core_id; a TensorCoreMesh has one axis)
        (core,) = device_id.values()
        ctx.fn.op("tpu.sem_signal", [view, amount, _i32(ctx, core)], [],
                  _segments(1, 1, 0, 1, 0))
        return []
    device = _logical_device(ctx, device_id, device_id_type, "A semaphore signal")
    ctx.fn.op("tpu.sem_signal", [view, amount, device], [], _segments(1, 1, 1, 0, 0))
    return []


def _wait(ctx, sem, *rest, tree, decrement):
    if not decrement:
        raise ctx.error("Non-decrementing wait is not supported.")
    n = tree.num_leaves
    view = _semaphore(ctx, sem, rest[:n], tree)
    ctx.fn.op("tpu.sem_wait", [view, _i32(ctx, rest[n])], [])
    return []


def _read(ctx, sem, *leaves, tree):
    view = _semaphore(ctx, sem, leaves, tree)
    return ctx.op1("tpu.sem_read", [view], _I32)


rules[semaphores.semaphore_signal_p] = _signal
rules[semaphores.semaphore_wait_p] = _wait
rules[semaphores.semaphore_read_p] = _read
rules[collectives.axis_index_p] = _axis_index


# --- values ---------------------------------------------------------------------------------
def _roll(ctx, x, shift, *, axis, stride, stride_axis):
    attrs = f"dimension = {int(axis)} : si32"
    if stride is not None:
        attrs += f", stride = {int(stride)} : si32, stride_dimension = {int(stride_axis)} : si32"
    return ctx.op1("tpu.dynamic_rotate", [ctx.value(x), _i32(ctx, shift)], ctx.avals_out[0],
                   attrs)


def _bitcast(ctx, x, *, ty):
    return ctx.op1("tpu.bitcast", [ctx.value(x)], ctx.avals_out[0])


def _pack(ctx, *xs, packed_dtype):
    xs = [ctx.value(x, ctx.avals_in[0]) for x in xs]
    return ctx.op1("tpu.pack_elementwise", xs, ctx.avals_out[0],
                   f"target_type = {element_type(packed_dtype)}")


def _unpack(ctx, x, *, index, packed_dtype, unpacked_dtype):
    return ctx.op1("tpu.unpack_elementwise", [ctx.value(x)], ctx.avals_out[0],
                   f"index = {int(index)} : i32, source_type = {element_type(packed_dtype)}")


def _stochastic_round(ctx, x, bits, *, target_dtype):
    return ctx.op1("tpu.stochastic_convert", [ctx.value(x), ctx.value(bits, ctx.avals_in[0])],
                   ctx.avals_out[0])


rules[tpu_ops.roll_p] = _roll
rules[tpu_ops.bitcast_p] = _bitcast
rules[tpu_packing.pack_elementwise_p] = _pack
rules[tpu_packing.unpack_elementwise_p] = _unpack
rules[tpu_packing.stochastic_round_p] = _stochastic_round
rules[tpu_packing.touch_p] = lambda ctx, ref: []


def _trace_value(ctx, value, *, label):
    ctx.fn.op("tpu.trace_value", [ctx.value(value)], [], f'label = "{_escape(label)}"')
    return []


rules[tpu_ops.trace_value_p] = _trace_value
rules[tpu_ops.delay_p] = lambda ctx, nanos: ctx.fn.op("tpu.delay", [_i32(ctx, nanos)], []) or []


# --- pl.debug_print (jax.debug.print) in a kernel: tpu.log, tpu.log_buffer ----------------
def _debug_print(ctx, *args, callback, effect, **params):
    fmt, placeholders = getattr(getattr(callback, "fn", None), "debug_format", (None, False))
    if fmt is None:
        raise ctx.error("a debug_callback cannot run inside a TPU kernel: only "
                        "pl.debug_print (or jax.debug.print) lowers, to Mosaic's log ops",
                        unsupported=True)
    if getattr(effect, "ordered", False):
        raise NotImplementedError("Ordered debug_print is not supported on Pallas.")
    leaves = [value for _, value in callback.static]
    if tree_unflatten(callback.in_tree, leaves)[1]:
        raise ValueError("Only positional arguments are supported by debug_print on Pallas.")
    if any(is_static for is_static, _ in callback.static):
        raise ctx.error("pl.debug_print in a TPU kernel prints arrays and scalars only")
    avals = ctx.avals_in
    if all(not a.shape for a in avals):
        values = [ctx.value(x) for x in args]
        attrs = f'tag = "{_escape(fmt)}"'
        if placeholders:
            _check_placeholders(fmt, len(args))
            if any(np.dtype(a.dtype) not in (np.dtype(np.int32), np.dtype(np.uint32))
                   for a in avals):
                raise TypeError("All arguments must be 32-bit integers when using "
                                "placeholders (`{...}`) in pl.debug_print on a TPU; to print "
                                "values of other types, remove the placeholders from the "
                                "format string (the values then follow it).")
            parts = string.Formatter().parse(fmt)
            tag = "".join(text + (f"${k}" if field is not None else "")
                          for k, (text, field, _, _) in enumerate(parts))
            attrs = f'formatted = true, tag = "{_escape(tag)}"'
        ctx.fn.op("tpu.log", values, [], attrs)
        return []
    if len(avals) != 1:
        raise ValueError(f"All inputs to debug_print must be all scalars or a single vector, "
                         f"but got {', '.join(a.str_short() for a in avals)}")
    if not placeholders or not fmt.endswith("{}"):
        raise ValueError("For vector input, the format string must end with {}.")
    (aval,) = avals
    shape = ", ".join(map(str, aval.shape))

    def build():  # (the vector goes through a scoped VMEM buffer, as JAX's lowering does)
        buf = _buffer(ctx, aval.shape, aval.dtype)
        _vmem_swap(ctx_for(ctx, [aval, aval], [aval]), buf, args[0], _used=[False])
        ctx.fn.op("tpu.log_buffer", [buf], [],
                  f'shape = array<i64: {shape}>, tag = "{_escape(fmt[:-2])}"')
        return []
    in_region(ctx, [], build)
    return []


def _check_placeholders(fmt: str, count: int) -> None:
    """JAX's checks of a kernel's print format: plain ``{}`` fields, one per value."""
    fields = 0
    for _, field, spec, conversion in string.Formatter().parse(fmt):
        if field is not None:
            fields += 1
        if spec or conversion:
            raise ValueError("The format string should not contain any format specs or "
                             f"conversions (got {fmt!r}): use plain {{}} fields.")
        if field:
            raise ValueError("The format string should not reference arguments by position "
                             f"or name (got {fmt!r}): use plain {{}} fields.")
    if fields != count:
        raise TypeError(f"The format string expects {fields} "
                        f"argument{'' if fields == 1 else 's'}, but got {count}")


rules[callbacks.debug_callback_p] = _debug_print


# --- the kernel PRNG (the hardware's; the threaded state is not needed here) ----------------
def set_seed(ctx, seeds) -> None:
    """``tpu.prng_set_seed_32`` of integer scalars (Values, Lits or ints)."""
    ctx.fn.op("tpu.prng_set_seed_32", [_i32(ctx, s) for s in seeds], [])


def random_bits(ctx, aval) -> Value:
    """``tpu.prng_random_bits``: the PRNG's next bits, of ``aval``'s shape (rank >= 2)."""
    if len(aval.shape) < 2:
        raise ctx.error(f"prng_random_bits draws blocks of rank >= 2 on TPU, got shape "
                        f"{tuple(aval.shape)}; draw a 2-D block and reshape or slice it.")
    return ctx.op1("tpu.prng_random_bits", [], aval)


def _prng_seed(ctx, *seeds):
    set_seed(ctx, seeds)
    return Lit(np.uint32(0), ctx.avals_out[0])  # (a splat stand-in for the state: unused)


def _prng_random_bits(ctx, state, *, shape, _used=(True, True)):
    # bits nobody reads are not drawn (the stateful samplers' step of the state off the chip;
    # JAX, whose draw has no effect, drops such a draw too)
    return [state, random_bits(ctx, ctx.avals_out[1]) if _used[1] else None]


_prng_random_bits.wants_used = True
rules[tpu_prng.prng_seed_p] = _prng_seed
rules[tpu_prng.prng_random_bits_p] = _prng_random_bits


# --- blocks of ANY/HBM references, through scoped VMEM buffers -----------------------------
def _buffer(ctx, shape, dtype, space=None) -> RefValue:
    """A scoped buffer (``memref.alloca`` in VMEM, or ``space``; a DMA semaphore:
    ``tpu.sem_alloc``)."""
    return scoped_ref(ctx, AbstractRef(ShapedArray(tuple(shape), dtype), memory_space=space))


def _staging_space(aval):
    """Where a value of ``aval`` read from or written to HBM is staged: SMEM for
    ``"pallas_tpu"`` keys (read as scalar words), else VMEM."""
    return "smem" if key_kind(aval.dtype) == "words" else None


def _sync_copy(ctx, src: RefValue, dst: RefValue) -> None:
    sem = _buffer(ctx, (), semaphores.DMA_SEMAPHORE)
    ctx.fn.op("tpu.enqueue_dma", [src, dst, sem], [],
              f"{_segments(1, 0, 1, 1, 0, 0, 0)}, priority = 0 : i32, strict_ordering = false")
    ctx.fn.op("tpu.wait_dma2", [sem, src, dst], [],
              f"{_segments(1, 1, 1, 0, 0)}, strict_ordering = false")


def ctx_for(ctx, avals_in, avals_out):
    """``ctx`` as a rule of other operand and result types sees it."""
    return type(ctx)(ctx.fn, avals_in, avals_out, ctx.eqn)


def _in_memory(ref) -> bool:
    return isinstance(ref, RefValue) and ref.space in ("any", "hbm")


def _hbm_view(ctx, ref, leaves, tree):
    transforms = tree_unflatten(tree, list(leaves)) if tree is not None else ()
    view = ref_view(ctx, ref, transforms)
    if not view.shape:
        raise ctx.error("a scalar of a reference in ANY/HBM memory cannot be read or written "
                        "in a TPU kernel; copy a block into VMEM or SMEM first")
    if np.dtype(view.dtype) == np.bool_:
        raise ctx.error("DMAs with bool dtypes are not supported.")
    return view


def _get(ctx, ref, *leaves, tree=None, **params):
    if not _in_memory(ref):
        return _vmem_get(ctx, ref, *leaves, tree=tree, **params)
    view = _hbm_view(ctx, ref, leaves, tree)
    aval = ctx.avals_out[0]

    def build():
        buf = _buffer(ctx, view.shape, view.dtype, _staging_space(aval))
        _sync_copy(ctx, view, buf)
        return [_vmem_get(ctx_for(ctx, [aval], [aval]), buf)]
    return in_region(ctx, [aval], build)[0]


def _swap(ctx, ref, value, *leaves, tree=None, _used=(True,), **params):
    if not _in_memory(ref):
        return _vmem_swap(ctx, ref, value, *leaves, tree=tree, _used=_used,
                                          **params)
    old = _get(ctx, ref, *leaves, tree=tree) if _used[0] else None
    view = _hbm_view(ctx, ref, leaves, tree)
    aval = ctx.avals_in[1]

    def build():
        buf = _buffer(ctx, view.shape, view.dtype, _staging_space(aval))
        _vmem_swap(ctx_for(ctx, [aval, aval], [aval]), buf, value,
                                   _used=[False])
        _sync_copy(ctx, buf, view)
        return []
    in_region(ctx, [], build)
    return old


_vmem_get, _vmem_swap = rules[state.get_p], rules[state.swap_p]  # (VMEM and SMEM's)
_swap.wants_used = True
rules[state.get_p] = _get
rules[state.swap_p] = _swap
