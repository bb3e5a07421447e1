"""Mosaic lowering rules of reference reads and writes (get, swap, addupdate), of
``run_state`` (buffers of a ``tpu.region``) and of control flow (cond as ``scf.if``, scan
and fori loops as ``scf.for`` on their counter, while as ``scf.while``; calls are inlined).

A block in VMEM is read with ``vector.load`` and written with ``tpu.vector_store`` (strided
slices: ``tpu.strided_load``/``strided_store``); an element of an SMEM reference with
``memref.load``/``memref.store``. A reference is indexed by static or dynamic starts
(``pl.ds``, slices) and integer scalars, through chained ``.at[]`` views (their offsets
added); the memref's squeezed block dimensions are indexed at 0. Booleans live in memrefs
as int32. PRNG keys are read and written as their data (the memref's last dimensions), a
``"pallas_tpu"`` key word by word from SMEM.
"""
from __future__ import annotations

import numpy as np

from plax.core.avals import ShapedArray
from plax.core.jaxpr import Literal
from plax.core import dtypes
from plax.core.config import config
from plax.core.refs import NDIndexer, RefBitcaster, RefReshaper, Slice
from plax.core.rules import mosaic_lowering_rules as rules
from plax.core.tree_core import tree_unflatten
from plax.first_order import state
from plax.first_order.arithmetic import add_p
from plax.first_order.comparison import lt_p
from plax.first_order.conversion import convert_element_type_p
from plax.higher_order import (call, cond, custom_derivatives, loops, pjit, platform_dependent,
                               run_state, scan)
from plax.higher_order.platform_dependent import platform_branch
from plax.core.avals import physical_aval
from plax.pallas.mosaic_lowering import (KeyWords, Lit, RefValue, Value, fresh_buffer_value,
                                         is_float, key_kind, memory_space_name, memref_type,
                                         physical, semaphore_type,
                                         static_int, value_type)
from plax.pallas.mosaic_rules_arith import convert, reshape

__all__ = ["window", "viewed", "sliced"]

_I32 = ShapedArray((), np.dtype(np.int32))


# --- references -----------------------------------------------------------------------------
def _offset(ctx, a, b):
    """``a + b`` for starts that are ints or int32 scalars (Values, Lits)."""
    ka, kb = static_int(a), static_int(b)
    if ka is not None and kb is not None:
        return ka + kb
    if ka == 0:
        return b
    if kb == 0:
        return a
    a, b = (Lit(np.int32(k), _I32) if k is not None else x for k, x in ((ka, a), (kb, b)))
    return ctx.op1("arith.addi", [ctx.value(a), ctx.value(b)], _I32)


def _as_i32(ctx, x):
    if static_int(x) is not None or np.dtype(x.aval.dtype) == np.int32:
        return x
    return convert(ctx, ctx.value(x), np.int32)


def _window(ctx, ref: RefValue, leaves, tree):
    """The memref read or written (``ref``, or a view of it), its indices, the sizes read,
    the strides, and which memref dimensions the value keeps: the reference's (chained)
    indexers composed."""
    transforms = tree_unflatten(tree, list(leaves)) if tree is not None else ()
    ref, transforms = viewed(ctx, ref, transforms)
    starts, sizes, strides, keep = window(ctx, ref, transforms)
    return ref, [ctx.index(s) for s in starts], sizes, strides, keep


def viewed(ctx, ref: RefValue, transforms):
    """``ref`` seen through its transforms up to the last reshape or bitcast, as JAX lowers
    them: ``tpu.memref_slice`` (and ``tpu.memref_squeeze``) for indexers,
    ``tpu.memref_reshape``, ``tpu.memref_bitcast``; the memref and the indexers after."""
    transforms = list(transforms)
    last = max((k for k, t in enumerate(transforms) if type(t) is not NDIndexer), default=-1)
    indexers = []
    for t in transforms[:last + 1]:
        if type(t) is NDIndexer:
            indexers.append(t)
            continue
        if indexers:
            ref, indexers = sliced(ctx, ref, indexers), []
        ref = _reshaped(ctx, ref, t) if type(t) is RefReshaper else _bitcast(ctx, ref, t)
    return ref, transforms[last + 1:]


def _reshaped(ctx, ref: RefValue, t: RefReshaper) -> RefValue:
    shape = tuple(int(d) for d in t.shape)
    if ref.squeezed:
        raise ctx.error("a reshape of a block with squeezed dimensions is not supported "
                        "on TPU; reshape the loaded value instead")
    out = RefValue(None, shape, ref.dtype, ref.space, (), ref.aval)
    out.name = ctx.fn.op("tpu.memref_reshape", [ref], [out.type])[0]
    return out


def _bitcast(ctx, ref: RefValue, t: RefBitcaster) -> RefValue:
    src, dst = dtypes.itemsize_bits(ref.dtype), dtypes.itemsize_bits(t.dtype)
    if np.bool_ in (np.dtype(ref.dtype), t.dtype):
        raise ctx.error("a bitcast view of a reference of booleans (or to booleans) is not "
                        "supported on TPU")
    shape = list(ref.shape)
    if src != dst:
        if len(shape) < 2:
            raise ctx.error("Bitcast 1D ref with bitwidth change is not supported.")
        if len(shape) - 2 in ref.squeezed:
            raise ctx.error("Bitcast a ref whose 2nd minormost dimension is squeezed when "
                            "bitwidth changes.")
        shape[-2] = shape[-2] * src // dst
    out = RefValue(None, shape, t.dtype, ref.space, ref.squeezed)
    out.name = ctx.fn.op("tpu.memref_bitcast", [ref], [out.type])[0]
    return out


def sliced(ctx, ref: RefValue, indexers) -> RefValue:
    """The memref of ``ref`` seen through ``indexers`` (``.at[...]`` views):
    ``tpu.memref_slice`` at the view's (i32) starts, ``tpu.memref_squeeze`` of the
    dimensions indexed by an integer (and of the block's squeezed ones)."""
    if not indexers and not ref.squeezed:
        return ref
    starts, sizes, strides, keep = window(ctx, ref, indexers)
    if any(s != 1 for s in strides):
        raise ctx.error("a strided view of a reference (pl.ds(..., stride=...)) cannot be "
                        "the source or destination of a DMA or a semaphore operation, nor be "
                        "reshaped or bitcast, on TPU; copy the contiguous rows and stride the "
                        "loads instead")
    view = ref
    if indexers:
        starts = [ctx.constant(k, _I32) if (k := static_int(s)) is not None else s
                  for s in starts]
        view = RefValue(None, sizes, ref.dtype, ref.space)
        view.name = ctx.fn.op("tpu.memref_slice", [ref, *starts], [view.type],
                              f"operandSegmentSizes = array<i32: 1, {len(starts)}, 0>")[0]
    if not all(keep):
        kept = [s for s, k in zip(view.shape, keep) if k]
        squeezed = RefValue(None, kept, ref.dtype, ref.space)
        squeezed.name = ctx.fn.op("tpu.memref_squeeze", [view], [squeezed.type])[0]
        view = squeezed
    return view


def window(ctx, ref: RefValue, transforms):
    """A view of ``ref`` through ``transforms`` (NDIndexers): its start in each memref
    dimension (an int or an int32 Value), sizes, strides and the dimensions it keeps."""
    if any(type(t) is not NDIndexer for t in transforms):
        raise ctx.error("a reshaped or bitcast view of a reference here is not supported on "
                        "TPU")
    n = len(ref.shape)
    starts, sizes, strides = [0] * n, list(ref.shape), [1] * n
    keep = [d not in ref.squeezed for d in range(n)]
    for indexer in transforms:
        kept = [d for d in range(n) if keep[d]]
        for d, i in zip(kept, indexer.indices):
            if type(i) is Slice:
                if i.stride != 1 and strides[d] != 1:
                    raise ctx.error("a strided slice of a strided view is not supported")
                starts[d] = _offset(ctx, starts[d], _as_i32(ctx, i.start))
                sizes[d], strides[d] = int(i.size), int(i.stride) * strides[d]
            else:
                aval = getattr(i, "aval", None)
                if aval is not None and aval.shape:
                    raise ctx.error("indexing a reference with an integer array is not "
                                    "supported on TPU; use scalar indices or pl.ds slices")
                starts[d] = _offset(ctx, starts[d], _as_i32(ctx, i))
                sizes[d], keep[d] = 1, False
    return starts, sizes, strides, keep


def _memref_dtype(dtype):
    return np.dtype(np.int32) if np.dtype(dtype) == np.bool_ else np.dtype(dtype)


def _strides_attr(strides) -> str:
    return f"strides = array<i32: {', '.join(str(int(s)) for s in strides)}>"


def _load(ctx, ref: RefValue, idx, sizes, out_aval, strides) -> Value:
    stored = _memref_dtype(ref.dtype)
    if ref.space == "smem":
        if any(s != 1 for s in sizes):
            raise ctx.error(f"only scalars can be read from SMEM (a block of {sizes})")
        scalar = ShapedArray((), stored)
        v = Value(ctx.fn.op("memref.load", [ref, *idx], [value_type(scalar)])[0],
                  value_type(scalar), scalar)
    elif any(s != 1 for s in strides):
        v = ctx.op1("tpu.strided_load", [ref, *idx], ShapedArray(tuple(sizes), stored),
                    _strides_attr(strides))
    else:
        v = ctx.op1("vector.load", [ref, *idx], ShapedArray(tuple(sizes), stored))
    v = reshape(ctx, v, out_aval.shape)
    return convert(ctx, v, out_aval.dtype)


def _store(ctx, ref: RefValue, idx, sizes, value, strides) -> None:
    stored = _memref_dtype(ref.dtype)
    if isinstance(value, Lit) or not value.aval.shape:
        value = ctx.value(value)
        value = convert(ctx, value, stored)
        if ref.space != "smem":
            value = ctx.value(value, ShapedArray(tuple(sizes), stored))
    else:
        value = reshape(ctx, convert(ctx, value, stored), sizes)
    if ref.space == "smem":
        if any(s != 1 for s in sizes):
            raise ctx.error(f"only scalars can be written to SMEM (a block of {sizes})")
        ctx.fn.op("memref.store", [value, ref, *idx], [])
        return
    if any(s != 1 for s in strides):
        ctx.fn.op("tpu.strided_store", [value, ref, *idx], [], _strides_attr(strides))
        return
    ctx.fn.op("tpu.vector_store", [value, ref, *idx], [],
              f"operandSegmentSizes = array<i32: 1, 1, {len(idx)}, 0>, strides = array<i32>")


def _word_indices(ctx, ref: RefValue, idx, aval) -> list:
    """The indices of each word of the ``"pallas_tpu"`` key at ``idx`` (in SMEM)."""
    if ref.space != "smem":
        raise ctx.error("PRNG keys must be loaded from SMEM. Did you set the memory space to "
                        "MemorySpace.SMEM in the BlockSpec for the PRNG key input?")
    if aval.shape:
        raise ctx.error(f"Can only load a single key per load (got {aval.str_short()}).")
    return [idx[:-1] + [ctx.index_constant(i)] for i in range(ref.shape[-1])]


def _load_value(ctx, ref: RefValue, idx, sizes, aval, strides):
    """A value of ``aval`` read at the window: a PRNG key as its data (or words)."""
    kind = key_kind(aval.dtype)
    if kind == "words":
        word = ShapedArray((), np.dtype(np.uint32))
        return KeyWords([Value(ctx.fn.op("memref.load", [ref, *at], ["i32"])[0], "i32", word)
                         for at in _word_indices(ctx, ref, idx, aval)], aval)
    return _load(ctx, ref, idx, sizes, physical_aval(aval) if kind else aval, strides)


def _store_value(ctx, ref: RefValue, idx, sizes, value, strides, aval) -> None:
    if isinstance(value, KeyWords):
        for word, at in zip(value.words, _word_indices(ctx, ref, idx, aval)):
            ctx.fn.op("memref.store", [word, ref, *at], [])
        return
    _store(ctx, ref, idx, sizes, value, strides)


def _ref(ctx, ref):
    if not isinstance(ref, RefValue):
        raise ctx.error("a value was used where a reference is expected")
    return ref


def _get(ctx, ref, *leaves, tree=None, **_):
    ref, idx, sizes, strides, _ = _window(ctx, _ref(ctx, ref), leaves, tree)
    return _load_value(ctx, ref, idx, sizes, ctx.avals_out[0], strides)


def _swap(ctx, ref, value, *leaves, tree=None, _used=(True,), **_):
    ref, idx, sizes, strides, _ = _window(ctx, _ref(ctx, ref), leaves, tree)
    aval = ctx.avals_out[0]
    old = _load_value(ctx, ref, idx, sizes, aval, strides) if _used[0] else None
    _store_value(ctx, ref, idx, sizes, value, strides, aval)
    return old


def _addupdate(ctx, ref, value, *leaves, tree=None, **_):
    ref, idx, sizes, strides, _ = _window(ctx, _ref(ctx, ref), leaves, tree)
    aval = ctx.avals_in[1]
    old = _load(ctx, ref, idx, sizes, aval, strides)
    add = "arith.addf" if is_float(aval.dtype) else "arith.addi"
    _store(ctx, ref, idx, sizes, ctx.op1(add, [old, ctx.value(value, aval)], aval), strides)
    return []


_swap.wants_used = True
rules[state.get_p] = _get
rules[state.swap_p] = _swap
rules[state.addupdate_p] = _addupdate


# --- calls ----------------------------------------------------------------------------------
def _inline(param: str):
    def rule(ctx, *args, **params):
        closed = params[param]
        return ctx.lower_jaxpr(closed.jaxpr, closed.consts, list(args))
    return rule


rules[pjit.pjit_p] = _inline("jaxpr")
rules[call.closed_call_p] = _inline("call_jaxpr")
rules[custom_derivatives.custom_jvp_call_p] = _inline("call_jaxpr")
rules[custom_derivatives.custom_vjp_call_p] = _inline("call_jaxpr")


# --- control flow ---------------------------------------------------------------------------
def _materialize(ctx, xs, avals) -> list:
    return [x if isinstance(x, RefValue) else ctx.value(x, a) for x, a in zip(xs, avals)]


def _yield(ctx, outs, avals) -> None:
    ctx.fn.op("scf.yield", _materialize(ctx, outs, avals), [])


def _block_values(names, avals) -> list:
    return [Value(n, value_type(a), a) for n, a in zip(names, avals)]


def _cond(ctx, index, *args, branches, **_):
    avals = ctx.avals_out
    types = [value_type(a) for a in avals]
    known = static_int(index)
    if len(branches) == 1 or known is not None:
        b = branches[min(max(known or 0, 0), len(branches) - 1)]
        return ctx.lower_jaxpr(b.jaxpr, b.consts, list(args))
    idx = ctx.value(index)

    def branch(k):
        def build(_):
            b = branches[k]
            _yield(ctx, ctx.lower_jaxpr(b.jaxpr, b.consts, list(args)), avals)
        return ctx.fn.region([], build)

    def chain(k):
        # branch k when index == k (index <= k for the first), else the next ones
        if k == len(branches) - 1:
            return branch(k)
        pred = ctx.op1("arith.cmpi", [idx, ctx.constant(k, _I32)],
                       ShapedArray((), np.dtype(np.bool_)),
                       "predicate = 3 : i64" if k == 0 else "predicate = 0 : i64")
        names = ctx.fn.op("scf.if", [pred], types, regions=[branch(k), rest(k + 1)])
        return names

    def rest(k):
        if k == len(branches) - 1:
            return branch(k)

        def build(_):
            names = chain(k)
            ctx.fn.op("scf.yield", _block_values(names, avals), [])
        return ctx.fn.region([], build)

    if len(branches) == 2:
        zero = ctx.constant(0, _I32)
        pred = ctx.op1("arith.cmpi", [idx, zero], ShapedArray((), np.dtype(np.bool_)),
                       "predicate = 1 : i64")
        names = ctx.fn.op("scf.if", [pred], types, regions=[branch(1), branch(0)])
    else:
        names = chain(0)
    return _block_values(names, avals)


def _for_loop(ctx, lower, upper, init, avals, body) -> list:
    """``scf.for`` over i32 ``lower``..``upper`` with carries ``init``; ``body(i, carries)``
    returns the next carries."""
    types = [value_type(a) for a in avals]
    one = ctx.constant(1, _I32)

    def build(names):
        outs = body(Value(names[0], "i32", _I32), _block_values(names[1:], avals))
        _yield(ctx, outs, avals)
    region = ctx.fn.region(["i32"] + types, build)
    names = ctx.fn.op("scf.for", [lower, upper, one, *init], types, regions=[region])
    return _block_values(names, avals)


def _scan(ctx, *args, jaxpr, num_consts, num_carry, length, **_):
    consts, init = list(args[:num_consts]), list(args[num_consts:num_consts + num_carry])
    if len(args) != num_consts + num_carry or len(ctx.avals_out) != num_carry:
        raise ctx.error("scan over arrays (xs or ys) is not supported on TPU; loop with "
                        "lax.fori_loop and index references instead")
    avals = ctx.avals_out
    init = _materialize(ctx, init, avals)
    if not length:
        return init
    if length == 1:
        return ctx.lower_jaxpr(jaxpr.jaxpr, jaxpr.consts, consts + init)
    if _counts_by_one(jaxpr.jaxpr, num_consts):
        # a fori loop: its counter is the loop's induction variable (as JAX lowers it)
        lower = init[0]
        upper = ctx.op1("arith.addi", [lower, ctx.constant(int(length), _I32)], _I32)

        def counted(i, carries):
            return ctx.lower_jaxpr(jaxpr.jaxpr, jaxpr.consts, consts + [i] + carries)[1:]
        return [upper] + _for_loop(ctx, lower, upper, init[1:], avals[1:], counted)

    def body(_, carries):
        return ctx.lower_jaxpr(jaxpr.jaxpr, jaxpr.consts, consts + carries)
    return _for_loop(ctx, ctx.constant(0, _I32), ctx.constant(int(length), _I32), init, avals,
                     body)


def _producer(jaxpr, var):
    for e in jaxpr.eqns:
        if any(o is var for o in e.outvars):
            return e
    return None


def _counts_by_one(jaxpr, first: int) -> bool:
    """Whether carry ``first`` of a loop body is an int32 counter the body adds 1 to."""
    if len(jaxpr.invars) <= first or not jaxpr.outvars:
        return False
    i = jaxpr.invars[first]
    if i.aval.shape or i.aval.dtype != np.int32:
        return False
    inc = _producer(jaxpr, jaxpr.outvars[0])
    return (inc is not None and inc.primitive is add_p and inc.invars[0] is i
            and isinstance(inc.invars[1], Literal) and int(np.asarray(inc.invars[1].val)) == 1)


def _fori_pattern(cond_jaxpr, body_jaxpr, body_nconsts) -> bool:
    """Whether a while loop is a fori loop: carries (i, upper, ...), the condition
    ``i < upper``, the body adding 1 to ``i`` and passing ``upper`` on."""
    cj, bj = cond_jaxpr.jaxpr, body_jaxpr.jaxpr
    if len(cj.invars) < 2 or len(cj.eqns) > 2 or not cj.outvars:
        return False
    if any(v.aval.dtype != np.int32 or v.aval.shape for v in cj.invars[:2]):
        return False
    lt = _producer(cj, cj.outvars[0])
    if lt is None or lt.primitive is not lt_p:
        return False
    a, b = lt.invars
    if isinstance(a, Literal) or isinstance(b, Literal) or b is not cj.invars[1]:
        return False
    if a is not cj.invars[0]:
        conv = _producer(cj, a)
        if conv is None or conv.primitive is not convert_element_type_p or \
                conv.invars[0] is not cj.invars[0]:
            return False
    return bj.outvars[1] is bj.invars[body_nconsts + 1] and _counts_by_one(bj, body_nconsts)


def _while(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, **_):
    cconsts = list(args[:cond_nconsts])
    bconsts = list(args[cond_nconsts:cond_nconsts + body_nconsts])
    avals = ctx.avals_out
    init = _materialize(ctx, args[cond_nconsts + body_nconsts:], avals)
    if _fori_pattern(cond_jaxpr, body_jaxpr, body_nconsts):
        lower, upper = init[0], init[1]

        def body(i, carries):
            outs = ctx.lower_jaxpr(body_jaxpr.jaxpr, body_jaxpr.consts,
                                   bconsts + [i, upper] + carries)
            return outs[2:]
        rest = _for_loop(ctx, lower, upper, init[2:], avals[2:], body)
        last = ctx.op1("arith.maxsi", [lower, upper], _I32)
        return [last, upper] + rest
    types = [value_type(a) for a in avals]

    def before(names):
        carries = _block_values(names, avals)
        (pred,) = ctx.lower_jaxpr(cond_jaxpr.jaxpr, cond_jaxpr.consts, cconsts + carries)
        ctx.fn.op("scf.condition", [ctx.value(pred), *carries], [])

    def after(names):
        outs = ctx.lower_jaxpr(body_jaxpr.jaxpr, body_jaxpr.consts,
                               bconsts + _block_values(names, avals))
        _yield(ctx, outs, avals)
    regions = [ctx.fn.region(types, before), ctx.fn.region(types, after)]
    return _block_values(ctx.fn.op("scf.while", init, types, regions=regions), avals)


def _platform_index(ctx, *, platforms):
    return Lit(np.int32(platform_branch("tpu", platforms)), _I32)


def _scoped_ref(ctx, aval) -> RefValue:
    """A buffer for a reference ``aval`` living in the enclosing ``tpu.region``: a
    ``memref.alloca`` (a scalar as one element of SMEM), or a ``tpu.sem_alloc``."""
    inner = aval.inner_aval
    if semaphore_type(inner.dtype):
        t = memref_type(inner.shape, inner.dtype, "semaphore_mem")
        return RefValue(ctx.fn.op("tpu.sem_alloc", [], [t])[0], inner.shape, inner.dtype,
                        "semaphore_mem")
    if inner.shape:
        shape, squeezed, space = inner.shape, (), memory_space_name(aval.memory_space)
    else:
        shape, squeezed, space = (1,), (0,), memory_space_name(aval.memory_space, "smem")
    t = memref_type(*physical(shape, inner.dtype), space)  # (a PRNG key: its data)
    name = ctx.fn.op("memref.alloca", [], [t], "operandSegmentSizes = array<i32: 0, 0>")[0]
    return RefValue(name, shape, inner.dtype, space, squeezed, aval)


def _whole(ctx, ref: RefValue):
    zeros = [ctx.index_constant(0) for _ in ref.shape]
    return zeros, list(ref.shape), [1] * len(ref.shape)


def _run_state(ctx, *args, jaxpr, num_consts, _used=None, **_):
    """The references as buffers of a ``tpu.region``, set to the initial values; the body;
    the final values of those the program reads."""
    body = getattr(jaxpr, "jaxpr", jaxpr)
    body_consts = list(getattr(jaxpr, "consts", ()))
    consts, inits = list(args[:num_consts]), list(args[num_consts:])
    avals = [v.aval for v in body.invars[num_consts:]]
    used = list(_used) if _used is not None else [True] * len(inits)
    out_avals = [a for a, u in zip(ctx.avals_out, used) if u]
    poison = config.read("pallas_poison_buffers")

    def build():
        refs = []
        for aval, init in zip(avals, inits):
            ref = _scoped_ref(ctx, aval)
            if not semaphore_type(ref.dtype) and init is None and poison:
                init = Lit(fresh_buffer_value(ref.dtype), aval.inner_aval)
            if not semaphore_type(ref.dtype) and init is not None:
                idx, sizes, strides = _whole(ctx, ref)
                _store_value(ctx, ref, idx, sizes, init, strides, aval.inner_aval)
            refs.append(ref)
        ctx.lower_jaxpr(body, body_consts, consts + refs)
        finals = []
        for ref, u, aval in zip(refs, used, ctx.avals_out):
            if not u:
                continue
            if semaphore_type(ref.dtype):
                raise ctx.error("the final value of a semaphore cannot be read")
            idx, sizes, strides = _whole(ctx, ref)
            finals.append(_load_value(ctx, ref, idx, sizes, aval, strides))
        return finals
    results = iter(in_region(ctx, out_avals, build))
    return [next(results) if u else None for u in used]


def in_region(ctx, avals, build) -> list:
    """``build()`` inside a ``tpu.region`` (the buffers it allocates live until the region
    ends); the values of ``avals`` it returns are the region's results (a ``"pallas_tpu"``
    key passes out as its words)."""
    def body(_):
        values = build()
        ctx.fn.op("tpu.yield", [w for v in values
                                for w in (v.words if isinstance(v, KeyWords) else [v])], [])
    region = ctx.fn.region([], body)
    names = iter(ctx.fn.op("tpu.region", [], [t for a in avals for t in _region_types(a)],
                           regions=[region]))
    outs = []
    for a in avals:
        types = _region_types(a)
        if key_kind(a.dtype) == "words":
            word = ShapedArray((), np.dtype(np.uint32))
            outs.append(KeyWords([Value(next(names), "i32", word) for _ in types], a))
        else:
            outs.append(Value(next(names), types[0], a))
    return outs


def _region_types(aval) -> list:
    """The MLIR types a value of ``aval`` passes out of a region as (a ``"pallas_tpu"`` key:
    its words; another key: its data)."""
    kind = key_kind(aval.dtype)
    if kind == "words":
        return ["i32"] * int(np.prod(aval.dtype.physical_shape))
    return [value_type(physical_aval(aval) if kind else aval)]


_run_state.wants_used = _run_state.takes_uninitialized = True
rules[run_state.run_state_p] = _run_state
rules[platform_dependent.platform_index_p] = _platform_index
rules[cond.cond_p] = _cond
rules[scan.scan_p] = _scan
rules[loops.while_p] = _while
