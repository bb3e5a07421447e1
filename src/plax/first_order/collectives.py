"""Collectives over named axes: psum, pmax, pmin, pmean, all_gather, psum_scatter,
all_to_all (and pswapaxes on it), ppermute, axis_index and axis_size.

A collective names the mapped axes it communicates over. The names must be
bound by an enclosing ``vmap(axis_name=...)`` (or ``make_jaxpr(axis_env=...)``);
otherwise abstract evaluation raises ``NameError`` ("unbound axis name").
Under vmap a collective is computed across the batch by its batch rule: the
examples of the batch play the part of the devices. The linear collectives
transpose into each other.
"""
from __future__ import annotations

import math

import numpy as np

from plax import tree_util
from plax.core import dtypes, replication
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, collective_axis_names,
                             register_lowering, replication_rules, transpose_rules)
from plax.core.trace import axis_env, get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import conversion as _conv
from plax.first_order import indexing as _indexing
from plax.first_order import reductions as _reductions
from plax.first_order import shapes as _shapes
from plax.first_order.ad_util import deflinear, defzero
from plax.first_order.batch_util import bdim_at_front, move_batch_dim, moveaxis
from plax.first_order.common import canonical_axis


# --- naming axes ------------------------------------------------------------------------------
def _as_names(axis_name) -> tuple:
    names = axis_name if isinstance(axis_name, (tuple, list)) else (axis_name,)
    for n in names:
        if isinstance(n, int):
            raise TypeError(f"collectives take axis names, not positional axes: got {axis_name!r}. "
                            "Reduce over array axes with lax.reduce_sum or plax.numpy.sum.")
    return tuple(names)


def _bound_size(name) -> int:
    """The size of the innermost named axis ``name`` in scope."""
    for n, size in reversed(axis_env()):
        if n == name:
            return size
    raise NameError(f"unbound axis name: {name}. A collective can only name an axis that an "
                    "enclosing vmap (axis_name=...) or make_jaxpr(axis_env=...) has bound.")


def axis_size(axis_name) -> int:
    """The number of examples (or devices) along the named axis (the product for a tuple)."""
    return math.prod(_bound_size(n) for n in _as_names(axis_name))


def _check_bound(names):
    for n in names:
        _bound_size(n)


def _single_name(prim: str, names) -> None:
    if len(names) != 1:
        raise NotImplementedError(f"{prim} over several axis names at once ({names}) is not "
                                  "supported; apply it once per axis name.")


def _axis_names_param(params) -> tuple:
    return _as_names(params["axis_name"])


# --- all-reduce: psum, pmax, pmin -----------------------------------------------------------
def _allreduce(name: str):
    prim = Primitive(name, multiple_results=True)

    def abstract(*avals, axes, axis_index_groups):
        _check_bound(axes)
        return list(avals)

    abstract_eval_rules[prim] = abstract
    collective_axis_names[prim] = lambda params: params["axes"]
    return prim


def _allreduce_batch(prim, reduce_batch, unmapped):
    def rule(axis, vals, dims, *, axes, axis_index_groups):
        if axis.name in axes:
            vals = [unmapped(v, axis.size) if d is None else reduce_batch(v, (d,))
                    for v, d in zip(vals, dims)]
            dims = [None] * len(vals)
        others = tuple(a for a in axes if a != axis.name)
        if others:
            vals = prim.bind(*vals, axes=others, axis_index_groups=axis_index_groups)
        return list(vals), list(dims)
    return rule


def _times(v, n):
    aval = get_aval(v)
    if aval.dtype == bool:
        return _conv.convert_element_type(v, bool)  # any() of n copies of the same value
    return _arith.mul(v, _scalar_like(n, v))


psum_p = _allreduce("psum")
pmax_p = _allreduce("pmax")
pmin_p = _allreduce("pmin")
batch_rules[psum_p] = _allreduce_batch(psum_p, lambda v, axes: _reductions.reduce_sum(v, axes),
                                       _times)
batch_rules[pmax_p] = _allreduce_batch(pmax_p, lambda v, axes: _reductions.reduce_max(v, axes),
                                       lambda v, n: v)
batch_rules[pmin_p] = _allreduce_batch(pmin_p, lambda v, axes: _reductions.reduce_min(v, axes),
                                       lambda v, n: v)


def _psum_transpose(cts, *args, axes, axis_index_groups):
    live = [c for c in cts if type(c) is not Zero]
    summed = iter(psum_p.bind(*live, axes=axes, axis_index_groups=axis_index_groups))
    return [c if type(c) is Zero else next(summed) for c in cts]


deflinear(psum_p)
transpose_rules[psum_p] = _psum_transpose
# pmax and pmin have no jvp rule yet (ties across the axis).


def _varying_over(x, names):
    """Inside a shard_map checked for replication: ``x`` pvary'd over those of the manual
    axes ``names`` it does not vary over yet (a collective over them needs it varying)."""
    if not replication.vma_in_types[0]:
        return x
    missing = [n for n in names if n in replication.manual_axes() and
               n not in replication.vma(get_aval(x))]
    return pvary_p.bind(x, axes=tuple(missing))[0] if missing else x


def _bind_allreduce(prim, x, axis_name, axis_index_groups):
    if axis_index_groups is not None:
        raise NotImplementedError("axis_index_groups is not supported: collectives act on the "
                                  "whole named axis.")
    names = _as_names(axis_name)
    leaves, tree = tree_util.tree_flatten(x)
    if not names:
        return x
    manual = replication.manual_axes() if replication.vma_in_types[0] else frozenset()
    if prim is psum_p and manual and all(n in manual for n in names):
        # In a checked shard_map, a sum of varying values into an invariant one: a value
        # that is the same on every device is counted once per device, as in JAX.
        leaves = [_varying_over(v, names) for v in leaves]
        return tree_util.tree_unflatten(tree, psum_invariant_p.bind(*leaves, axes=names))
    leaves = [_varying_over(v, names) for v in leaves]
    outs = prim.bind(*leaves, axes=names, axis_index_groups=None)
    return tree_util.tree_unflatten(tree, outs)


def psum(x, axis_name, *, axis_index_groups=None):
    """Sum ``x`` (a pytree) over the named axis: every example gets the total."""
    return _bind_allreduce(psum_p, x, axis_name, axis_index_groups)


def pmax(x, axis_name, *, axis_index_groups=None):
    """Elementwise maximum of ``x`` (a pytree) over the named axis."""
    return _bind_allreduce(pmax_p, x, axis_name, axis_index_groups)


def pmin(x, axis_name, *, axis_index_groups=None):
    """Elementwise minimum of ``x`` (a pytree) over the named axis."""
    return _bind_allreduce(pmin_p, x, axis_name, axis_index_groups)


def pmean(x, axis_name, *, axis_index_groups=None):
    """Mean of ``x`` (a pytree) over the named axis."""
    total = psum(x, axis_name, axis_index_groups=axis_index_groups)
    n = axis_size(axis_name)
    return tree_util.tree_map(lambda t: _arith.div(t, _scalar_like(n, t)), total)


def _scalar_like(n, t):
    dt = get_aval(t).dtype
    return np.asarray(n, dt) if not get_aval(t).weak_type else (float(n) if dtypes.is_inexact(dt)
                                                                 else int(n))


# --- all_gather and psum_scatter ------------------------------------------------------------
all_gather_p = Primitive("all_gather")


def _all_gather_abstract(x, *, all_gather_dimension, axis_name, axis_index_groups, axis_size,
                         tiled):
    _check_bound(axis_name)
    shape = list(x.shape)
    if tiled:
        shape[all_gather_dimension] *= axis_size
    else:
        shape.insert(all_gather_dimension, axis_size)
    return x.update(shape=tuple(shape))


def _all_gather_batch(axis, vals, dims, *, all_gather_dimension, axis_name, axis_index_groups,
                      axis_size, tiled):
    (x,), (d,) = vals, dims
    dim = all_gather_dimension
    if axis.name not in axis_name:
        if tiled:
            full_dim, out_d = dim + (dim >= d), d
        else:
            full_dim, out_d = (dim, d + 1) if dim <= d else (dim + 1, d)
        return all_gather_p.bind(x, all_gather_dimension=full_dim, axis_name=axis_name,
                                 axis_index_groups=axis_index_groups, axis_size=axis_size,
                                 tiled=tiled), out_d
    _single_name("all_gather", axis_name)
    out = move_batch_dim(x, d, dim, axis.size)
    if tiled:
        shape = get_aval(out).shape
        out = _shapes.reshape(out, shape[:dim] + (shape[dim] * shape[dim + 1],) + shape[dim + 2:])
    return out, None


def _all_gather_transpose(ct, x, *, all_gather_dimension, axis_name, axis_index_groups,
                          axis_size, tiled):
    return [reduce_scatter_p.bind(ct, scatter_dimension=all_gather_dimension,
                                  axis_name=axis_name, axis_index_groups=axis_index_groups,
                                  axis_size=axis_size, tiled=tiled)]


abstract_eval_rules[all_gather_p] = _all_gather_abstract
collective_axis_names[all_gather_p] = _axis_names_param
batch_rules[all_gather_p] = _all_gather_batch
deflinear(all_gather_p)
transpose_rules[all_gather_p] = _all_gather_transpose


def all_gather(x, axis_name, *, axis_index_groups=None, axis=0, tiled=False):
    """Every example gets the stack (``tiled``: the concatenation) of ``x`` over the named
    axis, along a new dimension ``axis``."""
    if axis_index_groups is not None:
        raise NotImplementedError("axis_index_groups is not supported.")
    names = _as_names(axis_name)
    _check_bound(names)

    def one(leaf):
        leaf = _varying_over(leaf, names)
        ndim = get_aval(leaf).ndim
        if tiled and ndim == 0:
            raise ValueError("all_gather with tiled=True needs arrays of rank at least 1, got a "
                             "scalar.")
        dim = canonical_axis(axis, ndim if tiled else ndim + 1)
        if len(names) == 1:
            return all_gather_p.bind(leaf, all_gather_dimension=dim, axis_name=names,
                                     axis_index_groups=None, axis_size=_bound_size(names[0]),
                                     tiled=bool(tiled))
        # Several axes: tiled gathers, innermost name first, give the row-major order.
        out = leaf if tiled else _shapes.expand_dims(leaf, (dim,))
        for n in reversed(names):
            out = all_gather_p.bind(out, all_gather_dimension=dim, axis_name=(n,),
                                    axis_index_groups=None, axis_size=_bound_size(n), tiled=True)
        return out
    return tree_util.tree_map(one, x)


reduce_scatter_p = Primitive("reduce_scatter")


def _reduce_scatter_abstract(x, *, scatter_dimension, axis_name, axis_index_groups, axis_size,
                             tiled):
    _check_bound(axis_name)
    shape = list(x.shape)
    n = shape[scatter_dimension]
    if tiled:
        if n % axis_size:
            raise ValueError(f"psum_scatter: the scatter dimension {scatter_dimension} has size "
                             f"{n}, which does not divide evenly over the {axis_size} members of "
                             f"axis {axis_name}.")
        shape[scatter_dimension] = n // axis_size
    else:
        if n != axis_size:
            raise ValueError(f"reduce_scatter operand scatter dimension size {n} must match "
                             f"shard count {axis_size} (the size of axis {axis_name}); pass "
                             "tiled=True to split a dimension into equal chunks instead.")
        del shape[scatter_dimension]
    return x.update(shape=tuple(shape))


def _reduce_scatter_batch(axis, vals, dims, *, scatter_dimension, axis_name, axis_index_groups,
                          axis_size, tiled):
    (x,), (d,) = vals, dims
    sd = scatter_dimension
    if axis.name not in axis_name:
        full_sd = sd + (sd >= d)
        out_d = d if tiled or full_sd > d else d - 1
        return reduce_scatter_p.bind(x, scatter_dimension=full_sd, axis_name=axis_name,
                                     axis_index_groups=axis_index_groups, axis_size=axis_size,
                                     tiled=tiled), out_d
    _single_name("psum_scatter", axis_name)
    total = _times(x, axis.size) if d is None else _reductions.reduce_sum(x, (d,))
    if tiled:  # split the scatter dimension into (member, chunk): the member is the batch
        shape = get_aval(total).shape
        total = _shapes.reshape(total,
                                shape[:sd] + (axis.size, shape[sd] // axis.size) + shape[sd + 1:])
    return total, sd


def _reduce_scatter_transpose(ct, x, *, scatter_dimension, axis_name, axis_index_groups,
                              axis_size, tiled):
    return [all_gather_p.bind(ct, all_gather_dimension=scatter_dimension,
                              axis_name=axis_name, axis_index_groups=axis_index_groups,
                              axis_size=axis_size, tiled=tiled)]


abstract_eval_rules[reduce_scatter_p] = _reduce_scatter_abstract
collective_axis_names[reduce_scatter_p] = _axis_names_param
batch_rules[reduce_scatter_p] = _reduce_scatter_batch
deflinear(reduce_scatter_p)
transpose_rules[reduce_scatter_p] = _reduce_scatter_transpose


def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):
    """Sum over the named axis, each example keeping only its own slice (chunk) of the total
    along ``scatter_dimension``."""
    if axis_index_groups is not None:
        raise NotImplementedError("axis_index_groups is not supported.")
    names = _as_names(axis_name)
    size = axis_size(names)

    def one(leaf):
        leaf = _varying_over(leaf, names)
        dim = canonical_axis(scatter_dimension, get_aval(leaf).ndim)
        return reduce_scatter_p.bind(leaf, scatter_dimension=dim, axis_name=names,
                                     axis_index_groups=None, axis_size=size, tiled=bool(tiled))
    return tree_util.tree_map(one, x)


# --- all_to_all, ppermute, axis_index ----------------------------------------------------------
all_to_all_p = Primitive("all_to_all")


def _check_split(shape, split_axis, size, axis_name, tiled):
    if shape[split_axis] % size if tiled else shape[split_axis] != size:
        raise ValueError(
            f"all_to_all requires the size of the mapped axis {axis_name} to "
            f"{'divide' if tiled else 'equal'} x.shape[split_axis]: the split axis {split_axis} "
            f"has size {shape[split_axis]}, which {'is not divisible by' if tiled else 'must equal'}"
            f" the size {size} of axis {axis_name}.")


def _all_to_all_abstract(x, *, split_axis, concat_axis, axis_name, axis_index_groups, tiled):
    names = _as_names(axis_name)
    _check_bound(names)
    size = axis_size(names)
    shape = list(x.shape)
    _check_split(shape, split_axis, size, axis_name, tiled)
    if tiled:
        shape[split_axis] //= size
        shape[concat_axis] *= size
    else:
        del shape[split_axis]
        shape.insert(concat_axis, size)
    return x.update(shape=tuple(shape))


def _all_to_all_batch(axis, vals, dims, *, split_axis, concat_axis, axis_name, axis_index_groups,
                      tiled):
    (x,), (d,) = vals, dims
    names = _as_names(axis_name)
    x = bdim_at_front(x, d, axis.size)
    if axis.name not in names:
        return all_to_all_p.bind(x, split_axis=split_axis + 1, concat_axis=concat_axis + 1,
                                 axis_name=axis_name, axis_index_groups=axis_index_groups,
                                 tiled=tiled), 0
    _single_name("all_to_all", names)
    s, c, size = split_axis + 1, concat_axis, axis.size
    _check_split(get_aval(x).shape[1:], split_axis, size, axis_name, tiled)
    if tiled:  # split dimension -> (destination member, chunk)
        shape = get_aval(x).shape
        x = _shapes.reshape(x, shape[:s] + (size, shape[s] // size) + shape[s + 1:])
    # The destination member becomes the batch; the source member (old batch) goes to concat.
    x = moveaxis(x, s, 0)
    x = moveaxis(x, 1, 1 + c)
    if tiled:  # merge (source member, chunk) along the concat dimension
        shape = get_aval(x).shape
        x = _shapes.reshape(x, shape[:1 + c] + (shape[1 + c] * shape[2 + c],) + shape[3 + c:])
    return x, 0


def _all_to_all_transpose(ct, x, *, split_axis, concat_axis, axis_name, axis_index_groups, tiled):
    return [all_to_all_p.bind(ct, split_axis=concat_axis, concat_axis=split_axis,
                              axis_name=axis_name, axis_index_groups=axis_index_groups,
                              tiled=tiled)]


abstract_eval_rules[all_to_all_p] = _all_to_all_abstract
collective_axis_names[all_to_all_p] = _axis_names_param
batch_rules[all_to_all_p] = _all_to_all_batch
deflinear(all_to_all_p)
transpose_rules[all_to_all_p] = _all_to_all_transpose


def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None, tiled=False):
    """Split ``x`` along ``split_axis`` into one chunk per member of the named axis, send
    chunk j to member j, and stack what arrives along ``concat_axis`` (``tiled``: concatenate)."""
    if axis_index_groups is not None:
        raise NotImplementedError("axis_index_groups is not supported.")

    def one(leaf):
        leaf = _varying_over(leaf, _as_names(axis_name))
        ndim = get_aval(leaf).ndim
        split = canonical_axis(split_axis, ndim)
        concat = canonical_axis(concat_axis, ndim)
        return all_to_all_p.bind(leaf, split_axis=split, concat_axis=concat, axis_name=axis_name,
                                 axis_index_groups=None, tiled=bool(tiled))
    return tree_util.tree_map(one, x)


def pswapaxes(x, axis_name, axis, *, axis_index_groups=None):
    """Swap the mapped axis ``axis_name`` with axis ``axis`` of ``x`` (whose size must be the
    axis size): ``all_to_all`` splitting and stacking along ``axis``."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


ppermute_p = Primitive("ppermute")


def _ppermute_abstract(x, *, axis_name, perm):
    _check_bound(axis_name)
    return x


def _ppermute_batch(axis, vals, dims, *, axis_name, perm):
    (x,), (d,) = vals, dims
    if axis.name not in axis_name:
        return ppermute_p.bind(x, axis_name=axis_name, perm=perm), d
    _single_name("ppermute", axis_name)
    x = bdim_at_front(x, d, axis.size)
    # Row t of the result is row source[t] of x; rows nobody sends to read out of bounds
    # and are filled with zeros.
    source = np.full((axis.size, 1), axis.size, np.int32)
    for src, dst in perm:
        source[dst, 0] = src
    rest = get_aval(x).shape[1:]
    dn = _indexing.GatherDimensionNumbers(offset_dims=tuple(range(1, 1 + len(rest))),
                                          collapsed_slice_dims=(0,), start_index_map=(0,))
    return _indexing.gather(x, source, dn, (1,) + rest,
                            mode=_indexing.GatherScatterMode.FILL_OR_DROP, fill_value=0), 0


def _ppermute_transpose(ct, x, *, axis_name, perm):
    return [ppermute_p.bind(ct, axis_name=axis_name, perm=tuple((d, s) for s, d in perm))]


abstract_eval_rules[ppermute_p] = _ppermute_abstract
collective_axis_names[ppermute_p] = _axis_names_param
batch_rules[ppermute_p] = _ppermute_batch
deflinear(ppermute_p)
transpose_rules[ppermute_p] = _ppermute_transpose


def checked_perm(prim: str, names, perm) -> tuple:
    """``perm`` as (source, destination) int pairs, each source and destination used once and
    inside the axes ``names`` (whose size is known here)."""
    perm = tuple((int(s), int(d)) for s, d in perm)
    size = axis_size(names)
    srcs, dsts = [s for s, _ in perm], [d for _, d in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"{prim} sources and destinations must be unique, got perm={perm}.")
    if any(not 0 <= i < size for i in srcs + dsts):
        raise ValueError(f"{prim} perm={perm} has an index outside the axis {names} of size "
                         f"{size}.")
    return perm


def ppermute(x, axis_name, perm):
    """Send ``x`` from member ``src`` to member ``dst`` for each ``(src, dst)`` in ``perm``;
    members that receive nothing get zeros."""
    names = _as_names(axis_name)
    perm = checked_perm("ppermute", names, perm)
    return tree_util.tree_map(
        lambda leaf: ppermute_p.bind(_varying_over(leaf, names), axis_name=names, perm=perm), x)


def pshuffle(x, axis_name, perm):
    """Member i receives ``x`` from member ``perm[i]`` (a full permutation)."""
    perm = [int(p) for p in perm]
    if sorted(perm) != list(range(len(perm))):
        raise ValueError(f"pshuffle perm must be a permutation of range({len(perm)}), got {perm}.")
    return ppermute(x, axis_name, [(src, dst) for dst, src in enumerate(perm)])


axis_index_p = Primitive("axis_index")


def _axis_index_abstract(*, axis_name):
    _check_bound(_as_names(axis_name))
    return ShapedArray((), np.dtype(np.int32))


def _axis_index_batch(axis, vals, dims, *, axis_name):
    return _shapes.iota(np.int32, axis.size), 0


abstract_eval_rules[axis_index_p] = _axis_index_abstract
collective_axis_names[axis_index_p] = _axis_names_param
batch_rules[axis_index_p] = _axis_index_batch
defzero(axis_index_p)  # an integer: its derivative is zero


# Functions of an axis name giving its index where something other than the axis environment
# binds it (a Pallas kernel's named grid, while it is traced), else None.
axis_index_resolvers: list = []


def axis_index(axis_name):
    """This example's (or device's) position along the named axis, an int32 scalar."""
    names = _as_names(axis_name)
    if len(names) == 1:
        for resolve in axis_index_resolvers:
            found = resolve(names[0])
            if found is not None:
                return found
        return axis_index_p.bind(axis_name=names[0])
    # Row-major position over several axes.
    out = None
    for n in names:
        i = axis_index_p.bind(axis_name=n)
        out = i if out is None else _arith.add(_arith.mul(out, _bound_size(n)), i)
    return out


# --- lowering inside shard_map: collectives over the manual axes of the mesh -----------------------
# In a manual computation (``ctx.manual_axes``) every device runs the body on its block and a
# collective over mesh axes talks to the devices that differ only along them. XLA names devices
# by partition ids (their place in the SPMD program's device list); replica groups and
# source-target pairs are given in those, with a fresh channel per collective.
def _partition_ids(ctx) -> np.ndarray:
    """The partition id of every device of the mesh, as an array of the mesh's shape."""
    mesh, devices = ctx.mesh, ctx.fn.module.devices
    flat = list(mesh.devices.flat)
    ids = [devices.index(d) for d in flat] if devices is not None else list(range(len(flat)))
    return np.array(ids, np.int64).reshape(mesh.axis_sizes)


def _manual_names(ctx, prim: str, names) -> tuple:
    names = tuple(names)
    outside = [n for n in names if n not in ctx.manual_axes]
    if ctx.mesh is None or outside:
        raise NotImplementedError(
            f"{prim} over axis {outside or names} can only be lowered inside shard_map over "
            "those mesh axes (or computed by vmap over a named axis).")
    return names


def replica_groups(ctx, names) -> np.ndarray:
    """One row per group of devices differing only along mesh axes ``names`` (row-major over
    them, the first name major)."""
    ids = _partition_ids(ctx)
    axes = [ctx.mesh.axis_names.index(n) for n in names]
    rest = [i for i in range(ids.ndim) if i not in axes]
    size = math.prod(ids.shape[a] for a in axes)
    return ids.transpose(rest + axes).reshape(-1, size)


def _channel(ctx) -> str:
    return (f"channel_handle = #stablehlo.channel_handle<handle = {ctx.fn.module.next_channel()}"
            ", type = 1>")


def _groups_text(groups: np.ndarray) -> str:
    rows = ", ".join("[" + ", ".join(str(int(i)) for i in row) + "]" for row in groups)
    return f"replica_groups = dense<[{rows}]> : tensor<{groups.shape[0]}x{groups.shape[1]}xi64>"


def _groups_props(ctx, groups: np.ndarray) -> str:
    return f"{_channel(ctx)}, {_groups_text(groups)}, use_global_device_ids"


def _combiner(op: str):
    def region(ctx, aval):
        scalar = ShapedArray((), aval.dtype)

        def build(c, a, b):
            return [c.op1(op, [a, b], [scalar, scalar], scalar)], [scalar]
        return ctx.region([scalar, scalar], build)
    return region


def _allreduce_lowering(op: str, bool_op: str):
    def rule(ctx, *xs, axes, axis_index_groups):
        names = _manual_names(ctx, "all-reduce", axes)
        groups = replica_groups(ctx, names)
        outs = []
        for x, aval in zip(xs, ctx.avals_in):
            combine = _combiner(bool_op if aval.dtype == np.bool_ else op)
            outs.append(ctx.op1("stablehlo.all_reduce", [x], [aval], aval,
                                props=_groups_props(ctx, groups),
                                regions=combine(ctx, aval)))
        return outs
    return rule


register_lowering(psum_p, _allreduce_lowering("stablehlo.add", "stablehlo.or"))
register_lowering(pmax_p, _allreduce_lowering("stablehlo.maximum", "stablehlo.or"))
register_lowering(pmin_p, _allreduce_lowering("stablehlo.minimum", "stablehlo.and"))


def _all_gather_lowering(ctx, x, *, all_gather_dimension, axis_name, axis_index_groups,
                         axis_size, tiled):
    groups = replica_groups(ctx, _manual_names(ctx, "all_gather", axis_name))
    aval, out = ctx.avals_in[0], ctx.avals_out[0]
    dim = all_gather_dimension
    if not tiled:  # gather along a new size-1 dimension
        shape = aval.shape[:dim] + (1,) + aval.shape[dim:]
        x = ctx.op1("stablehlo.reshape", [x], [aval], aval.update(shape=shape))
        aval = aval.update(shape=shape)
    return ctx.op1("stablehlo.all_gather", [x], [aval], out,
                   props=f"all_gather_dim = {dim} : i64, {_groups_props(ctx, groups)}")


def _reduce_scatter_lowering(ctx, x, *, scatter_dimension, axis_name, axis_index_groups,
                             axis_size, tiled):
    groups = replica_groups(ctx, _manual_names(ctx, "psum_scatter", axis_name))
    aval, out = ctx.avals_in[0], ctx.avals_out[0]
    dim = scatter_dimension
    scattered = out if tiled else out.update(
        shape=out.shape[:dim] + (1,) + out.shape[dim:])
    combine = _combiner("stablehlo.or" if aval.dtype == np.bool_ else "stablehlo.add")
    y = ctx.op1("stablehlo.reduce_scatter", [x], [aval], scattered,
                props=f"scatter_dimension = {dim} : i64, {_groups_props(ctx, groups)}",
                regions=combine(ctx, aval))
    return y if tiled else ctx.op1("stablehlo.reshape", [y], [scattered], out)


def _all_to_all_lowering(ctx, x, *, split_axis, concat_axis, axis_name, axis_index_groups,
                         tiled):
    names = _manual_names(ctx, "all_to_all", _as_names(axis_name))
    groups = replica_groups(ctx, names)
    aval, out = ctx.avals_in[0], ctx.avals_out[0]
    n = groups.shape[1]

    def props(split, concat):
        return (f"{_channel(ctx)}, concat_dimension = {concat} : i64, {_groups_text(groups)}, "
                f"split_count = {n} : i64, split_dimension = {split} : i64")
    if tiled:
        return ctx.op1("stablehlo.all_to_all", [x], [aval], out,
                       props=props(split_axis, concat_axis))
    # Untiled: exchange along the split dimension (size n), then move it to concat_axis.
    y = ctx.op1("stablehlo.all_to_all", [x], [aval], aval, props=props(split_axis, split_axis))
    perm = [d for d in range(aval.ndim) if d != split_axis]
    perm.insert(concat_axis, split_axis)
    return ctx.op1("stablehlo.transpose", [y], [aval], out,
                   props=f"permutation = array<i64: {', '.join(map(str, perm))}>")


def _ppermute_lowering(ctx, x, *, axis_name, perm):
    groups = replica_groups(ctx, _manual_names(ctx, "ppermute", axis_name))
    pairs = [(int(g[s]), int(g[d])) for g in groups for s, d in perm]
    aval = ctx.avals_in[0]
    if not pairs:
        return ctx.op1("stablehlo.broadcast_in_dim", [ctx.constant(0, aval.update(shape=()))],
                       [aval.update(shape=())], aval, props="broadcast_dimensions = array<i64>")
    text = ", ".join(f"[{s}, {d}]" for s, d in pairs)
    return ctx.op1("stablehlo.collective_permute", [x], [aval], aval,
                   props=f"channel_handle = #stablehlo.channel_handle<handle = "
                         f"{ctx.fn.module.next_channel()}, type = 1>, source_target_pairs = "
                         f"dense<[{text}]> : tensor<{len(pairs)}x2xi64>")


def _axis_index_lowering(ctx, *, axis_name):
    (name,) = _manual_names(ctx, "axis_index", (axis_name,))
    mesh = ctx.mesh
    rest = [a for a in mesh.axis_names if a not in ctx.manual_axes]
    if rest:
        # Some axes are left to the partitioner, which cannot place partition_id: read it in
        # a computation manual over those too. The position along ``name`` is the same on
        # every device along them, so it leaves that computation as a replicated value.
        i32 = ShapedArray((), np.dtype(np.int32))
        inner = ctx.module_context.replace(manual_axes=frozenset(mesh.axis_names))
        symbol = ctx.fn.module.mesh_symbol(mesh)

        def build(c):
            return [_axis_index_lowering(c, axis_name=name)], [i32]
        region = ctx.region([], build, terminator="sdy.return", module_context=inner)
        names = ", ".join(f'"{a}"' for a in rest)
        return ctx.op1("sdy.manual_computation", [], [], i32, regions=region, props=(
            "in_shardings = #sdy.sharding_per_value<[]>, out_shardings = "
            f"#sdy.sharding_per_value<[<@{symbol}, []>]>, manual_axes = #sdy<manual_axes{{{names}}}>"))
    ids = _partition_ids(ctx)
    axis = ctx.mesh.axis_names.index(name)
    table = np.zeros(ids.size, np.int32)  # partition id -> position along the axis
    for coords in np.ndindex(*ids.shape):
        table[ids[coords]] = coords[axis]
    table_aval = ShapedArray((ids.size,), np.dtype(np.int32))
    u32, i32 = ShapedArray((), np.dtype(np.uint32)), ShapedArray((), np.dtype(np.int32))
    pid = ctx.op1("stablehlo.partition_id", [], [], u32)
    pid = ctx.op1("stablehlo.convert", [pid], [u32], i32)
    one = ShapedArray((1,), np.dtype(np.int32))
    picked = ctx.op1("stablehlo.dynamic_slice", [ctx.constant(table, table_aval), pid],
                     [table_aval, i32], one, props="slice_sizes = array<i64: 1>")
    return ctx.op1("stablehlo.reshape", [picked], [one], i32)


register_lowering(all_gather_p, _all_gather_lowering)
register_lowering(reduce_scatter_p, _reduce_scatter_lowering)
register_lowering(all_to_all_p, _all_to_all_lowering)
register_lowering(ppermute_p, _ppermute_lowering)
register_lowering(axis_index_p, _axis_index_lowering)


# --- which mesh axes results vary over (shard_map's replication check) ----------------------------
def _reduced(ins, *, axes, axis_index_groups):
    return [s - frozenset(axes) for s in ins]  # every device along ``axes`` gets the same


def _keeps(ins, **params):
    return list(ins)


replication_rules[psum_p] = _reduced
replication_rules[pmax_p] = _reduced
replication_rules[pmin_p] = _reduced
# As JAX's: the gathered, scattered or permuted value still counts as varying over the axis.
for _prim in (all_gather_p, reduce_scatter_p, all_to_all_p, ppermute_p):
    replication_rules[_prim] = _keeps
replication_rules[axis_index_p] = lambda ins, *, axis_name: [frozenset(_as_names(axis_name))]


# --- pvary and psum_invariant: shard_map's explicit changes of replication -------------------------
# Inside a shard_map checked for replication, every value knows the mesh axes it varies over.
# ``pvary(x, axes)`` marks an invariant value as varying (its value does not change: each
# device keeps its copy); ``psum_invariant(x, axes)`` sums a varying value into an invariant
# one. They transpose into each other, which is what makes gradients of shard_map exact and
# cheap: the cotangent of a psum is passed through, that of a pvary summed.
pvary_p = Primitive("pvary", multiple_results=True)
psum_invariant_p = Primitive("psum_invariant", multiple_results=True)


def _marked(*avals, axes):
    _check_bound(axes)
    return list(avals)


def _linear_batch(prim):
    def rule(axis, vals, dims, *, axes):
        others = tuple(a for a in axes if a != axis.name)
        if not others:
            return list(vals), list(dims)
        return list(prim.bind(*vals, axes=others)), list(dims)
    return rule


def _swapped_transpose(prim):
    def rule(cts, *args, axes):
        live = [c for c in cts if type(c) is not Zero]
        out = iter(prim.bind(*live, axes=axes))
        return [c if type(c) is Zero else next(out) for c in cts]
    return rule


for _prim in (pvary_p, psum_invariant_p):
    abstract_eval_rules[_prim] = _marked
    collective_axis_names[_prim] = lambda params: params["axes"]
    deflinear(_prim)
batch_rules[pvary_p] = _linear_batch(pvary_p)
batch_rules[psum_invariant_p] = _linear_batch(psum_invariant_p)
transpose_rules[pvary_p] = _swapped_transpose(psum_invariant_p)
transpose_rules[psum_invariant_p] = _swapped_transpose(pvary_p)
register_lowering(pvary_p, lambda ctx, *xs, axes: list(xs))
register_lowering(psum_invariant_p, lambda ctx, *xs, axes: _allreduce_lowering(
    "stablehlo.add", "stablehlo.or")(ctx, *xs, axes=axes, axis_index_groups=None))
replication_rules[pvary_p] = lambda ins, *, axes: [s | frozenset(axes) for s in ins]
replication.pvary_prim[0] = pvary_p  # the implicit pvary of core.replication.coerce
replication_rules[psum_invariant_p] = lambda ins, *, axes: [s - frozenset(axes) for s in ins]


def pvary(x, axis_name):
    """``x`` (a pytree) marked as varying over the named mesh axes inside shard_map (each
    device keeps its value)."""
    names = _as_names(axis_name)
    if not names:
        return x
    leaves, tree = tree_util.tree_flatten(x)
    return tree_util.tree_unflatten(tree, pvary_p.bind(*leaves, axes=names))


pbroadcast = pvary  # the older name


def pcast(x, axis_name, *, to: str):
    """``x`` cast to varying over the named mesh axes (``to='varying'``), as ``pvary``."""
    if to != "varying":
        raise ValueError(f"pcast: to must be 'varying' (other targets are not supported), got "
                         f"{to!r}.")
    return pvary(x, axis_name)
