"""Gather and scatter: XLA's general indexed reads and writes.

``gather`` reads one window (a slice of ``slice_sizes``) of the operand per index
vector; ``scatter`` and its combining variants write (or add, multiply, take the
min/max of) one window of updates per index vector. The last axis of the indices
holds the index vectors. Dimension numbers say which axes play which role, with
StableHLO's meaning; ``operand_batching_dims`` pair operand axes with index axes
elementwise (vmap uses them when both operand and indices are batched).

Out-of-bounds indices follow ``mode``: CLIP clamps each window into bounds,
FILL_OR_DROP fills out-of-bounds gather windows with ``fill_value`` and drops
out-of-bounds scatter windows, and PROMISE_IN_BOUNDS does nothing (XLA then
clamps gathers and drops scatters). The modes are applied when lowering.
"""
from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.caches import BoundedCache
from plax.core.primitive import Primitive
from plax.core.sharding_types import (ShardingTypeError, first_sharding, like, sharding_rules,
                                      spec_of)
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, is_undefined, jvp_rules,
                             lowering_rules, not_mapped, tangent_aval, transpose_rules)
from plax.core.jaxpr import ClosedJaxpr
from plax.core.staging import trace_to_jaxpr
from plax.core.symbolic_shapes import DimExpr, dimension_as_value, min_dim
from plax.core.trace import EvalTrace, fresh_name_stack, get_aval, set_current_trace
from plax.first_order import arithmetic as _arith
from plax.first_order import bitwise as _bitwise
from plax.first_order import comparison as _cmp
from plax.first_order import conversion as _conv
from plax.first_order import shapes as _shapes
# indexing sits below slicing and reductions in the family order (plax/lax/__init__.py):
# the rules built on their ops import them in the function body.
from plax.first_order.common import as_int_tuple, check_same_dtypes, complex_extremum
from plax.first_order.ad_util import instantiate
from plax.first_order.batch_util import batch_size_of, move_batch_dim, moveaxis
from plax.lowering.inline import lower_fun
from plax.lowering.consts import const_operands
from plax.lowering.stablehlo import i64_array, lower_jaxpr_body

__all__ = ["GatherDimensionNumbers", "ScatterDimensionNumbers", "GatherScatterMode", "gather",
           "scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max", "scatter_apply"]


# --- parameters -------------------------------------------------------------------------
class GatherDimensionNumbers(NamedTuple):
    """How the axes of a gather's operand, indices and output correspond.

    offset_dims: output axes holding the (uncollapsed) window axes, in operand order.
    collapsed_slice_dims: operand axes of window size 1 dropped from the output.
    start_index_map: the operand axis each component of an index vector indexes.
    operand_batching_dims / start_indices_batching_dims: operand and index axes
    that correspond one to one (an implicit index, also dropped from the output).
    """
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


class ScatterDimensionNumbers(NamedTuple):
    """How the axes of a scatter's operand, indices and updates correspond.

    update_window_dims: updates axes holding the window axes, in operand order.
    inserted_window_dims: operand axes of window size 1 absent from the updates.
    scatter_dims_to_operand_dims: the operand axis each index vector component indexes.
    operand_batching_dims / scatter_indices_batching_dims: operand and index axes
    that correspond one to one.
    """
    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


class GatherScatterMode(enum.Enum):
    """How gather/scatter treat out-of-bounds indices (see the module docstring)."""
    CLIP = 1
    FILL_OR_DROP = 2
    PROMISE_IN_BOUNDS = 3

    @staticmethod
    def from_any(s):
        """A mode from a GatherScatterMode, its lower-case name ('clip', 'fill', 'drop',
        'promise_in_bounds') or None (FILL_OR_DROP)."""
        if isinstance(s, GatherScatterMode):
            return s
        if s is None or s in ("fill", "drop"):
            return GatherScatterMode.FILL_OR_DROP
        if s == "clip":
            return GatherScatterMode.CLIP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        raise ValueError(f'Unknown gather mode "{s}"')

    def __str__(self):
        return f"GatherScatterMode.{self.name}"


CLIP, FILL_OR_DROP, PROMISE = (GatherScatterMode.CLIP, GatherScatterMode.FILL_OR_DROP,
                               GatherScatterMode.PROMISE_IN_BOUNDS)


def _dimension_numbers(cls, dn, fn: str):
    """``dn`` as a ``cls`` with tuple-of-int fields (hashable, canonical)."""
    if isinstance(dn, dict):
        dn = cls(**dn)
    if not isinstance(dn, tuple) or not 3 <= len(dn) <= 5:
        raise TypeError(f"{fn} dimension_numbers must be a {cls.__name__}, got {dn!r}.")
    return cls(*(as_int_tuple(f, f"{fn} dimension_numbers.{name}")
                 for f, name in zip(dn, cls._fields)))


# --- shape checks -----------------------------------------------------------------------
def _check_dims(op: str, what: str, dims: tuple, bound: int, sort: bool = True) -> None:
    if any(not 0 <= d < bound for d in dims):
        raise TypeError(f"{op} {what} must be in the range [0, {bound}), got {what}={dims}.")
    if len(set(dims)) != len(dims):
        raise TypeError(f"{op} {what} must not contain repeated dimensions, got {what}={dims}.")
    if sort and list(dims) != sorted(dims):
        raise TypeError(f"{what} in {op} op must be sorted; got {dims}.")


def _check_indices(op: str, indices: ShapedArray) -> None:
    if not dtypes.is_integer(indices.dtype):
        raise ValueError(f"{op} indices must have an integer type, got {indices.dtype.name}.")
    if indices.ndim < 1:
        raise TypeError(f"{op} indices must have rank at least 1 (their last axis holds the "
                        f"index vectors), got shape {indices.shape}.")


def _check_batching(op: str, operand: ShapedArray, indices: ShapedArray, obd: tuple, ibd: tuple,
                    inserted: tuple, index_map: tuple, names: tuple) -> None:
    """Checks shared by gather and scatter on the batching dims and the index map."""
    o_name, i_name, ins_name, map_name = names
    _check_dims(op, o_name, obd, operand.ndim)
    if set(obd) & set(inserted):
        raise TypeError(f"{op} {o_name}={obd} and {ins_name}={inserted} must be disjoint.")
    _check_dims(op, i_name, ibd, indices.ndim - 1, sort=False)
    if len(obd) != len(ibd):
        raise TypeError(f"{op} {o_name}={obd} and {i_name}={ibd} must have the same length.")
    o_sizes = tuple(operand.shape[d] for d in obd)
    i_sizes = tuple(indices.shape[d] for d in ibd)
    if o_sizes != i_sizes:
        raise TypeError(f"{op} op requires operand batching dimensions and indices batching "
                        f"dimensions to have the same shape, got {o_sizes} and {i_sizes}.")
    if len(index_map) != indices.shape[-1]:
        raise TypeError(f"{op} op has {len(index_map)} elements in {map_name} and the bound of "
                        f"dimension index_vector_dim={indices.ndim - 1} of indices is "
                        f"{indices.shape[-1]}. These two numbers must be equal.")
    _check_dims(op, map_name, index_map, operand.ndim, sort=False)
    if set(index_map) & set(obd):
        raise TypeError(f"{op} {map_name}={index_map} must not index the operand batching "
                        f"dimensions {obd}.")


def _gather_shape(x: ShapedArray, idx: ShapedArray, dn: GatherDimensionNumbers,
                  slice_sizes: tuple) -> tuple:
    _check_indices("gather", idx)
    if len(slice_sizes) != x.ndim:
        raise TypeError(f"Gather op must have one slice size for every input dimension; got "
                        f"len(slice_sizes)={len(slice_sizes)}, operand shape {x.shape}.")
    # With no indices no window is taken, so (as JAX) the window need not fit the operand.
    for i, (s, n) in enumerate(zip(slice_sizes, x.shape)):
        if s < 0 or (s > n and idx.size != 0):
            raise TypeError(f"Slice size at index {i} in gather op is out of range, must be "
                            f"within [0, {n} + 1), got {s}.")
    _check_dims("gather", "collapsed_slice_dims", dn.collapsed_slice_dims, x.ndim)
    # A batching dim's window is 1, or 0 when vmap batches over an empty axis.
    for name, dims, allowed in (("collapsed_slice_dims", dn.collapsed_slice_dims, (1,)),
                                ("operand_batching_dims", dn.operand_batching_dims, (0, 1))):
        for d in dims:
            if 0 <= d < x.ndim and slice_sizes[d] not in allowed:
                raise TypeError(f"Gather op can only have {name} with slice size "
                                f"{' or '.join(map(str, allowed))}, but slice size is "
                                f"{slice_sizes[d]} for operand dimension {d}.")
    _check_batching("gather", x, idx, dn.operand_batching_dims, dn.start_indices_batching_dims,
                    dn.collapsed_slice_dims, dn.start_index_map,
                    ("operand_batching_dims", "start_indices_batching_dims",
                     "collapsed_slice_dims", "start_index_map"))
    rank = len(dn.offset_dims) + idx.ndim - 1
    _check_dims("gather", "offset_dims", dn.offset_dims, rank)
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    window = [slice_sizes[d] for d in range(x.ndim) if d not in dropped]
    if len(window) != len(dn.offset_dims):
        raise TypeError("All components of the offset index in a gather op must either be an "
                        f"offset dimension or explicitly collapsed/batching; got operand shape "
                        f"{x.shape}, offset_dims={dn.offset_dims}, collapsed_slice_dims="
                        f"{dn.collapsed_slice_dims}, operand_batching_dims="
                        f"{dn.operand_batching_dims}.")
    batch, offset = iter(idx.shape[:-1]), iter(window)
    return tuple(next(offset) if i in dn.offset_dims else next(batch) for i in range(rank))


def _window_sizes(operand_shape: tuple, updates_shape: tuple, dn: ScatterDimensionNumbers) -> tuple:
    """The size of a scatter window along each operand axis."""
    dropped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    sizes = iter(updates_shape[d] for d in dn.update_window_dims)
    return tuple(1 if d in dropped else next(sizes) for d in range(len(operand_shape)))


def _check_scatter(op: str, x: ShapedArray, idx: ShapedArray, upd: ShapedArray,
                   dn: ScatterDimensionNumbers) -> None:
    check_same_dtypes("scatter", x, upd)
    _check_indices(op, idx)
    expected = len(dn.update_window_dims) + idx.ndim - 1
    if upd.ndim != expected:
        raise TypeError(f"Updates tensor must be of rank {expected}; got {upd.ndim} (updates "
                        f"shape {upd.shape}, update_window_dims={dn.update_window_dims}, indices "
                        f"shape {idx.shape}).")
    _check_dims(op, "update_window_dims", dn.update_window_dims, upd.ndim)
    _check_dims(op, "inserted_window_dims", dn.inserted_window_dims, x.ndim)
    _check_batching(op, x, idx, dn.operand_batching_dims, dn.scatter_indices_batching_dims,
                    dn.inserted_window_dims, dn.scatter_dims_to_operand_dims,
                    ("operand_batching_dims", "scatter_indices_batching_dims",
                     "inserted_window_dims", "scatter_dims_to_operand_dims"))
    n_window = len(dn.update_window_dims) + len(dn.inserted_window_dims) + \
        len(dn.operand_batching_dims)
    if n_window != x.ndim:
        raise TypeError(f"Scatter op has window of size {n_window}; doesn't match operand of "
                        f"rank {x.ndim} (update_window_dims={dn.update_window_dims}, "
                        f"inserted_window_dims={dn.inserted_window_dims}, operand_batching_dims="
                        f"{dn.operand_batching_dims}).")
    window_ops = [d for d in range(x.ndim)
                  if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
    for od, ud in zip(window_ops, dn.update_window_dims):
        if upd.shape[ud] > x.shape[od]:
            raise TypeError("Bounds of the window dimensions of updates must not exceed the "
                            f"bounds of the corresponding dimensions of operand. For dimension "
                            f"{ud}, updates bound is {upd.shape[ud]}, operand bound is "
                            f"{x.shape[od]}.")
    scatter_dims = [d for d in range(upd.ndim) if d not in dn.update_window_dims]
    for k, (ud, n) in enumerate(zip(scatter_dims, idx.shape[:-1])):
        if upd.shape[ud] != n:
            raise TypeError("Bounds of the scatter dimensions of updates must be the same as "
                            f"the bounds of the corresponding dimensions of scatter indices. For "
                            f"scatter dimension {ud}, updates bound is {upd.shape[ud]}, indices "
                            f"bound is {n}.")


# --- lowering helpers -------------------------------------------------------------------
def _dims_attr(kind: str, fields) -> str:
    """``#stablehlo.<kind><a = [..], ...>``; empty lists are left out, as in StableHLO."""
    parts = [f"{k} = [{', '.join(str(int(d)) for d in v)}]" if isinstance(v, tuple) else
             f"{k} = {v}" for k, v in fields if not (isinstance(v, tuple) and not v)]
    return f"#stablehlo.{kind}<{', '.join(parts)}>"


def _bool_attr(b) -> str:
    return "true" if b else "false"


# CLIP and FILL_OR_DROP are lowered as plax functions of the operands (``lower_fun``):
# the indices clamped, or the windows masked, around a PROMISE_IN_BOUNDS gather/scatter.


def _upper_bounds(indices, operand_shape: tuple, window: tuple, index_map: tuple):
    """Per index-vector component, the largest start keeping the window in bounds, as an
    array of the indices' shape (clipped to the index dtype's range)."""
    aval = get_aval(indices)
    top = int(dtypes.iinfo(aval.dtype).max)
    room = [operand_shape[d] - window[d] for d in index_map]
    if any(type(r) is DimExpr for r in room):  # symbolic sizes (plax.export): their values
        upper = _shapes.concatenate(
            [_shapes.reshape(_conv.convert_element_type(dimension_as_value(r), aval.dtype), (1,))
             if type(r) is DimExpr else np.array([min(r, top)], aval.dtype) for r in room], 0)
    else:
        upper = np.array([min(r, top) for r in room], aval.dtype)
    return _shapes.broadcast_in_dim(upper, aval.shape, (aval.ndim - 1,))


def _clamp_indices(indices, operand_shape, window, index_map):
    zero = np.zeros((), get_aval(indices).dtype)
    return _cmp.clamp(zero, indices, _upper_bounds(indices, operand_shape, window, index_map))


def _windows_in_bounds(indices, operand_shape, window, index_map):
    """bool[indices.shape[:-1]]: whether each index vector's window is in bounds."""
    from plax.first_order import reductions as _reductions
    aval = get_aval(indices)
    ok = _cmp.le(indices, _upper_bounds(indices, operand_shape, window, index_map))
    if not dtypes.is_unsigned(aval.dtype):
        ok = _bitwise.bitwise_and(ok, _cmp.ge(indices, np.zeros((), aval.dtype)))
    return _reductions.reduce_and(ok, (aval.ndim - 1,))


def default_fill_value(dtype):
    """gather's fill for out-of-bounds windows: NaN, the lowest signed / highest unsigned
    integer, or True; None for PRNG keys (their words take their own type's fill)."""
    if dtypes.is_extended(dtype):
        return None
    if dtypes.is_inexact(dtype):
        return np.nan
    if dtypes.is_bool(dtype):
        return True
    info = dtypes.iinfo(dtype)
    return int(info.max if dtypes.is_unsigned(dtype) else info.min)


# --- gather -----------------------------------------------------------------------------
gather_p = Primitive("gather")


def _gather_abstract(x, idx, *, dimension_numbers, slice_sizes, **_):
    return ShapedArray(_gather_shape(x, idx, dimension_numbers, slice_sizes), x.dtype,
                       x.weak_type)


def _gather_clip(x, idx, *, dimension_numbers, slice_sizes, mode, fill_value,
                 indices_are_sorted, unique_indices):
    """CLIP's gather: the indices clamped so that every window is in bounds."""
    dn = dimension_numbers
    idx = _clamp_indices(idx, get_aval(x).shape, slice_sizes, dn.start_index_map)
    return gather_p.bind(x, idx, dimension_numbers=dn, slice_sizes=slice_sizes, mode=PROMISE,
                         fill_value=None, indices_are_sorted=indices_are_sorted,
                         unique_indices=unique_indices)


def _gather_fill_or_drop(x, idx, *, dimension_numbers, slice_sizes, mode, fill_value,
                         indices_are_sorted, unique_indices):
    """FILL_OR_DROP's gather: windows not fully in bounds hold ``fill_value``."""
    params = dict(dimension_numbers=dimension_numbers, slice_sizes=slice_sizes, fill_value=None,
                  indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)
    return _gather_fill(x, idx, fill_value, params)


_lower_gather_clip = lower_fun(_gather_clip)
_lower_gather_fill_or_drop = lower_fun(_gather_fill_or_drop)


def _gather_lowering(ctx, x, idx, *, dimension_numbers, slice_sizes, mode, fill_value,
                     indices_are_sorted, unique_indices):
    dn = dimension_numbers
    out = ctx.avals_out[0]
    if out.size == 0:
        # Nothing is read; XLA is not asked (the windows need not fit an empty operand).
        # (a broadcast zero: the output's size may be symbolic, e.g. under vmap when exported)
        scalar = ShapedArray((), out.dtype)
        return ctx.broadcast(ctx.constant(np.zeros((), out.dtype), scalar), scalar, out)
    if mode is CLIP or mode is FILL_OR_DROP:
        via = _lower_gather_clip if mode is CLIP else _lower_gather_fill_or_drop
        return via(ctx, x, idx, dimension_numbers=dn, slice_sizes=slice_sizes, mode=mode,
                   fill_value=fill_value, indices_are_sorted=indices_are_sorted,
                   unique_indices=unique_indices)
    attr = _dims_attr("gather", [
        ("offset_dims", dn.offset_dims), ("collapsed_slice_dims", dn.collapsed_slice_dims),
        ("operand_batching_dims", dn.operand_batching_dims),
        ("start_indices_batching_dims", dn.start_indices_batching_dims),
        ("start_index_map", dn.start_index_map), ("index_vector_dim", ctx.avals_in[1].ndim - 1)])
    return ctx.op1("stablehlo.gather", [x, idx],
                   props=f"dimension_numbers = {attr}, indices_are_sorted = "
                         f"{_bool_attr(indices_are_sorted)}, slice_sizes = {i64_array(slice_sizes)}")


def _gather_fill(x, idx, fill_value, params):
    """A gather whose windows that are not fully in bounds hold ``fill_value``."""
    xa = get_aval(x)
    dn, sizes = params["dimension_numbers"], params["slice_sizes"]
    out = gather_p.bind(x, idx, mode=PROMISE, **params)
    ok = _windows_in_bounds(idx, xa.shape, sizes, dn.start_index_map)
    shape = get_aval(out).shape
    batch_pos = tuple(d for d in range(len(shape)) if d not in dn.offset_dims)
    fill = default_fill_value(xa.dtype) if fill_value is None else fill_value
    fill = _shapes.broadcast_in_dim(np.asarray(fill).astype(xa.dtype), shape, ())
    return _cmp.select_n(_shapes.broadcast_in_dim(ok, shape, batch_pos), fill, out)


abstract_eval_rules[gather_p] = _gather_abstract
lowering_rules[gather_p] = _gather_lowering


def _gather_sharding(avals_in, avals_out, *, dimension_numbers, slice_sizes, **params):
    """Windows taken whole keep their operand dimension's split and the index batch keeps the
    indices'; indexing into a split dimension would need collectives: JAX's error."""
    x, idx = avals_in
    dn, xs, ids = dimension_numbers, spec_of(x), spec_of(idx)
    if any(xs[d] is not None and slice_sizes[d] != x.shape[d]
           for d in (*dn.start_index_map, *dn.collapsed_slice_dims)) or any(
            xs[d] is not None and xs[d] != ids[i]
            for d, i in zip(dn.operand_batching_dims, dn.start_indices_batching_dims)):
        raise ShardingTypeError(
            "Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather "
            "indexing as out sharding could not be resolved unambiguously (or would require "
            f"collectives on inputs). Got operand={x!r}, indices={idx!r}")
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    window = iter(xs[d] if slice_sizes[d] == x.shape[d] else None
                  for d in range(x.ndim) if d not in dropped)
    batch = iter(ids[:-1])
    rank = len(avals_out[0].shape)
    entries = [next(window) if i in dn.offset_dims else next(batch) for i in range(rank)]
    return [like(first_sharding(avals_in), entries)]


sharding_rules[gather_p] = _gather_sharding


def _scalar_param(v):
    """A hashable Python scalar for a fill value given as a NumPy/array scalar."""
    if v is None or isinstance(v, (bool, int, float, complex)):
        return v
    return np.asarray(v).item()


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """One window of ``slice_sizes`` from ``operand`` per index vector (the last axis of
    ``start_indices``); out-of-bounds windows follow ``mode`` (None: PROMISE_IN_BOUNDS)."""
    mode = PROMISE if mode is None else GatherScatterMode.from_any(mode)
    dn = _dimension_numbers(GatherDimensionNumbers, dimension_numbers, "gather")
    return gather_p.bind(operand, start_indices, dimension_numbers=dn,
                         slice_sizes=as_int_tuple(slice_sizes, "gather slice_sizes"),
                         indices_are_sorted=bool(indices_are_sorted),
                         unique_indices=bool(unique_indices), mode=mode,
                         fill_value=_scalar_param(fill_value) if mode is FILL_OR_DROP else None)


# --- scatter ----------------------------------------------------------------------------
def _combiner(kind: str):
    """The scalar combiner of a scatter region: (ctx, old, new, aval) -> SSA name."""
    ops = {"add": ("stablehlo.add", "stablehlo.or"), "mul": ("stablehlo.multiply", "stablehlo.and"),
           "sub": ("stablehlo.subtract", "stablehlo.xor"),
           "min": ("stablehlo.minimum", "stablehlo.and"),
           "max": ("stablehlo.maximum", "stablehlo.or")}

    def combine(ctx, a, b, aval):
        if kind == "replace":
            return b
        if kind in ("min", "max") and dtypes.is_complex(aval.dtype):
            return complex_extremum(ctx, "LT" if kind == "min" else "GT", a, b, aval)
        op, bool_op = ops[kind]
        return ctx.op1(bool_op if dtypes.is_bool(aval.dtype) else op, [a, b], [aval, aval], aval)
    return combine


_update_jaxprs = BoundedCache("scatter combiner jaxprs", 256)


def _update_jaxpr(kind: str, dtype):
    """The scalar jaxpr of a scatter's combiner (shown in printed jaxprs, as JAX does)."""
    if kind == "replace":
        return None
    dtype = np.dtype(dtype)
    key = (kind, dtype)
    if key not in _update_jaxprs:
        boolean = {"add": _bitwise.bitwise_or, "mul": _bitwise.bitwise_and,
                   "sub": _bitwise.bitwise_xor,
                   "min": _bitwise.bitwise_and, "max": _bitwise.bitwise_or}
        fn = boolean[kind] if dtypes.is_bool(dtype) else getattr(_arith, kind)
        scalar = ShapedArray((), dtype)
        with set_current_trace(EvalTrace()), fresh_name_stack():
            jaxpr, _ = trace_to_jaxpr(lambda a, b: [fn(a, b)], [scalar, scalar])
        _update_jaxprs.put(key, jaxpr)
    return _update_jaxprs.get(key)


def _make_scatter(name: str, kind: str, doc: str):
    prim = Primitive(name)

    def abstract(x, idx, upd, *, dimension_numbers, **_):
        _check_scatter(name, x, idx, upd, dimension_numbers)
        return x

    combine = _combiner(kind)

    def clip(x, idx, upd, *, dimension_numbers, mode, **params):
        """CLIP's scatter: the indices clamped so that every window is in bounds."""
        dn = dimension_numbers
        shape = get_aval(x).shape
        window = _window_sizes(shape, get_aval(upd).shape, dn)
        idx = _clamp_indices(idx, shape, window, dn.scatter_dims_to_operand_dims)
        return prim.bind(x, idx, upd, dimension_numbers=dn, mode=PROMISE, **params)

    lower_clip = lower_fun(clip)

    def lower(ctx, x, idx, upd, *, dimension_numbers, mode, indices_are_sorted, unique_indices,
              update_jaxpr, update_consts):
        dn = dimension_numbers
        if mode is CLIP:
            return lower_clip(ctx, x, idx, upd, dimension_numbers=dn, mode=mode,
                              indices_are_sorted=indices_are_sorted,
                              unique_indices=unique_indices, update_jaxpr=update_jaxpr,
                              update_consts=update_consts)
        # XLA drops windows that are not fully in bounds: FILL_OR_DROP's scatter behaviour.
        attr = _dims_attr("scatter", [
            ("update_window_dims", dn.update_window_dims),
            ("inserted_window_dims", dn.inserted_window_dims),
            ("input_batching_dims", dn.operand_batching_dims),
            ("scatter_indices_batching_dims", dn.scatter_indices_batching_dims),
            ("scatter_dims_to_operand_dims", dn.scatter_dims_to_operand_dims),
            ("index_vector_dim", ctx.avals_in[1].ndim - 1)])
        scalar = ShapedArray((), ctx.avals_in[0].dtype)
        if kind == "replace" and update_jaxpr is not None:  # scatter_apply's function
            closed = ClosedJaxpr(update_jaxpr, list(update_consts))
            region = ctx.region([scalar, scalar], lambda c, a, b: (lower_jaxpr_body(
                c.fn, update_jaxpr, const_operands(c, closed) + [a, b]), [scalar]))
        else:
            region = ctx.region([scalar, scalar],
                                lambda c, a, b: ([combine(c, a, b, scalar)], [scalar]))
        return ctx.op1("stablehlo.scatter", [x, idx, upd],
                       props=f"indices_are_sorted = {_bool_attr(indices_are_sorted)}, "
                             f"scatter_dimension_numbers = {attr}, "
                             f"unique_indices = {_bool_attr(unique_indices)}",
                       regions=region)

    abstract_eval_rules[prim] = abstract
    lowering_rules[prim] = lower

    def public(operand, scatter_indices, updates, dimension_numbers, *,
               indices_are_sorted=False, unique_indices=False, mode=None):
        dn = _dimension_numbers(ScatterDimensionNumbers, dimension_numbers, name)
        return prim.bind(operand, scatter_indices, updates, dimension_numbers=dn,
                         indices_are_sorted=bool(indices_are_sorted),
                         unique_indices=bool(unique_indices),
                         mode=GatherScatterMode.from_any(mode),
                         update_jaxpr=_update_jaxpr(kind, get_aval(operand).dtype),
                         update_consts=())
    public.__name__ = public.__qualname__ = name.replace("-", "_")
    public.__doc__ = doc
    return prim, public


scatter_p, scatter = _make_scatter(
    "scatter", "replace", "``operand`` with one window of ``updates`` written per index vector "
    "(overlapping writes land in an unspecified order).")
scatter_add_p, scatter_add = _make_scatter(
    "scatter-add", "add", "``operand`` with ``updates`` added in at the windows the indices select.")
scatter_mul_p, scatter_mul = _make_scatter(
    "scatter-mul", "mul", "``operand`` with ``updates`` multiplied in at the selected windows.")
scatter_min_p, scatter_min = _make_scatter(
    "scatter-min", "min", "``operand`` with the minimum against ``updates`` at the selected windows.")
scatter_max_p, scatter_max = _make_scatter(
    "scatter-max", "max", "``operand`` with the maximum against ``updates`` at the selected windows.")
_apply_jaxprs = BoundedCache("scatter_apply function jaxprs", 256)


def _apply_jaxpr(func, dtype):
    """``func`` as scatter's combiner ``(old, update) -> func(old)``, traced on scalars."""
    dtype = np.dtype(dtype)

    def trace():
        scalar = ShapedArray((), dtype)
        with set_current_trace(EvalTrace()), fresh_name_stack():
            return trace_to_jaxpr(lambda a, b: [func(a)], [scalar, scalar])
    try:
        hit = _apply_jaxprs.get((func, dtype))
    except TypeError:  # an unhashable callable: traced every time
        return trace()
    if hit is None:
        hit = trace()
        _apply_jaxprs.put((func, dtype), hit)
    return hit


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """``operand`` with the elementwise ``func`` applied at the windows the indices select
    (``update_shape``: their shape, as ``scatter``'s updates); an element selected k times
    gets ``func`` applied k times. Not differentiable (as in JAX)."""
    dn = _dimension_numbers(ScatterDimensionNumbers, dimension_numbers, "scatter_apply")
    dtype = get_aval(operand).dtype
    jaxpr, consts = _apply_jaxpr(func, dtype)
    out = jaxpr.out_avals[0]
    if out.shape != () or out.dtype != dtype:
        raise TypeError(f"scatter_apply's func must map {dtype.name}[] to a value of the same "
                        f"shape and dtype, got {out.str_short()}.")
    unused = _shapes.broadcast_in_dim(np.zeros((), dtype), tuple(update_shape), ())
    return scatter_p.bind(operand, scatter_indices, unused, dimension_numbers=dn,
                          indices_are_sorted=bool(indices_are_sorted),
                          unique_indices=bool(unique_indices),
                          mode=GatherScatterMode.from_any(mode), update_jaxpr=jaxpr,
                          update_consts=tuple(consts))


scatter_sub_p, scatter_sub = _make_scatter(
    "scatter-sub", "sub",
    "``operand`` with ``updates`` subtracted at the windows the indices select.")


# --- differentiation rules --------------------------------------------------------------------

_SCATTERS = {scatter_p: scatter, scatter_add_p: scatter_add, scatter_mul_p: scatter_mul,
             scatter_min_p: scatter_min, scatter_max_p: scatter_max, scatter_sub_p: scatter_sub}


def _zeros(shape, dtype):
    return _shapes.broadcast_in_dim(np.zeros((), dtype), tuple(shape), ())


def _scatter_dn_of(dn: GatherDimensionNumbers) -> ScatterDimensionNumbers:
    """The scatter that writes back where the gather ``dn`` reads."""
    return ScatterDimensionNumbers(dn.offset_dims, dn.collapsed_slice_dims, dn.start_index_map,
                                   dn.operand_batching_dims, dn.start_indices_batching_dims)


def _gather_dn_of(dn: ScatterDimensionNumbers) -> GatherDimensionNumbers:
    """The gather that reads where the scatter ``dn`` writes."""
    return GatherDimensionNumbers(dn.update_window_dims, dn.inserted_window_dims,
                                  dn.scatter_dims_to_operand_dims, dn.operand_batching_dims,
                                  dn.scatter_indices_batching_dims)


def _gather_updates(arr, indices, dn: ScatterDimensionNumbers, updates_shape, mode):
    """For each element of a scatter's updates, the element of ``arr`` (operand-shaped) it
    lands on; 0 for updates the scatter drops."""
    sizes = _window_sizes(get_aval(arr).shape, tuple(updates_shape), dn)
    return gather(arr, indices, _gather_dn_of(dn), sizes, mode=CLIP if mode is CLIP else
                  FILL_OR_DROP, fill_value=0)


def _gather_jvp(primals, tangents, *, fill_value, **params):
    (x, idx), (t, _) = primals, tangents
    out = gather_p.bind(x, idx, fill_value=fill_value, **params)
    if type(t) is Zero:
        return out, Zero(tangent_aval(get_aval(out)))
    zero_fill = 0 if params["mode"] is FILL_OR_DROP else None
    return out, gather_p.bind(t, idx, fill_value=zero_fill, **params)


def _gather_transpose(ct, x, idx, *, dimension_numbers, slice_sizes, mode, fill_value,
                      indices_are_sorted, unique_indices):
    zeros = _zeros(x.aval.shape, x.aval.dtype)
    return [scatter_add(zeros, idx, ct, _scatter_dn_of(dimension_numbers), mode=mode,
                        indices_are_sorted=indices_are_sorted,
                        unique_indices=unique_indices), None]


jvp_rules[gather_p] = _gather_jvp
transpose_rules[gather_p] = _gather_transpose


def _scatter_add_jvp(primals, tangents, **params):
    (x, idx, u), (tx, _, tu) = primals, tangents
    out = scatter_add_p.bind(x, idx, u, **params)
    if type(tx) is Zero and type(tu) is Zero:
        return out, Zero(tangent_aval(get_aval(out)))
    return out, scatter_add_p.bind(instantiate(tx), idx, instantiate(tu), **params)


def _scatter_add_transpose(ct, x, idx, u, *, dimension_numbers, mode, **params):
    u_aval = u.aval if is_undefined(u) else get_aval(u)
    ct_x = ct_u = None
    if is_undefined(x):
        ct_x = ct
    if is_undefined(u):
        ct_u = _gather_updates(ct, idx, dimension_numbers, u_aval.shape, mode)
    return [ct_x, None, ct_u]


jvp_rules[scatter_add_p] = _scatter_add_jvp
transpose_rules[scatter_add_p] = _scatter_add_transpose


def _scatter_sub_jvp(primals, tangents, **params):
    (x, idx, u), (tx, _, tu) = primals, tangents
    out = scatter_sub_p.bind(x, idx, u, **params)
    if type(tx) is Zero and type(tu) is Zero:
        return out, Zero(tangent_aval(get_aval(out)))
    return out, scatter_sub_p.bind(instantiate(tx), idx, instantiate(tu), **params)


def _scatter_sub_transpose(ct, x, idx, u, **params):
    ct_x, _, ct_u = _scatter_add_transpose(ct, x, idx, u, **params)
    return [ct_x, None, None if ct_u is None else _arith.neg(ct_u)]


jvp_rules[scatter_sub_p] = _scatter_sub_jvp
transpose_rules[scatter_sub_p] = _scatter_sub_transpose


# Scatter (replace) with indices that may repeat: scatter each update's 1-based id to learn
# which update wins each element (0: none, the operand's value stays), then rebuild the
# result as a scatter_add of the winners onto the operand with the overwritten places
# zeroed. Primal, tangent and cotangent then agree on the winners.
def _scatter_ids(idx, u_shape, dn: ScatterDimensionNumbers):
    """int32 updates-shaped ids, 1 + the position of each update window."""
    scatter_pos = tuple(d for d in range(len(u_shape)) if d not in dn.update_window_dims)
    scatter_shape = tuple(u_shape[d] for d in scatter_pos)
    n = int(np.prod(scatter_shape, dtype=np.int64))
    ids = _arith.add(_shapes.reshape(_shapes.broadcasted_iota(np.int32, (n,), 0), scatter_shape),
                     np.int32(1))
    return _shapes.broadcast_in_dim(ids, tuple(u_shape), scatter_pos)


def _scatter_winners(x_shape, idx, u_shape, dn, mode):
    """(bool operand-shaped: no update lands here, bool updates-shaped: this update wins)."""
    ids = _scatter_ids(idx, u_shape, dn)
    won = scatter(_zeros(x_shape, np.int32), idx, ids, dn, mode=mode)
    keep = _cmp.eq(won, np.int32(0))
    wins = _cmp.eq(_gather_updates(won, idx, dn, u_shape, mode), ids)
    return keep, wins


def _masked(pred, t, aval):
    """``t`` where ``pred`` holds, else 0."""
    t = instantiate(t)
    return _cmp.select_n(pred, _zeros(aval.shape, aval.dtype), t)


def _scatter_jvp(primals, tangents, *, dimension_numbers, mode, unique_indices, **params):
    if params.get("update_jaxpr") is not None:
        raise NotImplementedError("scatter_apply JVP not implemented (as in JAX): apply the "
                                  "function to a gathered slice and scatter it back instead.")
    (x, idx, u), (tx, _, tu) = primals, tangents
    dn = dimension_numbers
    kw = dict(dimension_numbers=dn, mode=mode, unique_indices=unique_indices, **params)
    if unique_indices:
        out = scatter_p.bind(x, idx, u, **kw)
        return out, scatter_p.bind(instantiate(tx), idx, instantiate(tu), **kw)
    xa, ua = get_aval(x), get_aval(u)
    keep, wins = _scatter_winners(xa.shape, idx, ua.shape, dn, mode)
    add = dict(kw, update_jaxpr=_update_jaxpr("add", xa.dtype))
    out = scatter_add_p.bind(_masked(keep, x, xa), idx, _masked(wins, u, ua), **add)
    t = scatter_add_p.bind(_masked(keep, tx, xa), idx, _masked(wins, tu, ua), **add)
    return out, t


def _scatter_transpose(ct, x, idx, u, *, dimension_numbers, mode, unique_indices, **params):
    dn = dimension_numbers
    xa = x.aval if is_undefined(x) else get_aval(x)
    ua = u.aval if is_undefined(u) else get_aval(u)
    ct_x = ct_u = None
    if unique_indices:
        if is_undefined(x):
            ct_x = scatter(ct, idx, _zeros(ua.shape, ua.dtype), dn, mode=mode,
                           unique_indices=True, indices_are_sorted=params["indices_are_sorted"])
        if is_undefined(u):
            ct_u = _gather_updates(ct, idx, dn, ua.shape, mode)
    else:
        keep, wins = _scatter_winners(xa.shape, idx, ua.shape, dn, mode)
        if is_undefined(x):
            ct_x = _masked(keep, ct, xa)
        if is_undefined(u):
            ct_u = _masked(wins, _gather_updates(ct, idx, dn, ua.shape, mode), ua)
    return [ct_x, None, ct_u]


jvp_rules[scatter_p] = _scatter_jvp
transpose_rules[scatter_p] = _scatter_transpose


def _scatter_mul_jvp(primals, tangents, *, dimension_numbers, mode, **params):
    """d(x * prod u) = dx * prod u + x * sum_j du_j * prod_{k != j} u_k, where the product
    over the other updates landing on the same element is computed without dividing by
    zero: from the product of the nonzero updates and the count of zero ones. (Exact to
    every order away from zero updates; at zero updates of repeated indices, to first order.)"""
    (x, idx, u), (tx, _, tu) = primals, tangents
    dn = dimension_numbers
    kw = dict(dimension_numbers=dn, mode=mode, **params)
    out = scatter_mul_p.bind(x, idx, u, **kw)
    t = None if type(tx) is Zero else scatter_mul_p.bind(tx, idx, u, **kw)
    if type(tu) is not Zero:
        xa, ua = get_aval(x), get_aval(u)
        is_zero = _cmp.eq(u, np.zeros((), ua.dtype))
        one = np.ones((), ua.dtype)
        nonzero_u = _cmp.select_n(is_zero, u, _broadcast_scalar(one, ua.shape))
        n_zeros = scatter_add(_zeros(xa.shape, xa.dtype), idx,
                              _conv.convert_element_type(is_zero, ua.dtype), dn, mode=mode)
        prod_nz = scatter_mul_p.bind(_broadcast_scalar(np.ones((), xa.dtype), xa.shape), idx,
                                     nonzero_u, **kw)
        zg = _gather_updates(n_zeros, idx, dn, ua.shape, mode)
        pg = _gather_updates(prod_nz, idx, dn, ua.shape, mode)
        zero_u = _zeros(ua.shape, ua.dtype)
        others = _cmp.select_n(is_zero,
                               _cmp.select_n(_cmp.eq(zg, np.zeros((), ua.dtype)), zero_u,
                                             _arith.div(pg, nonzero_u)),
                               _cmp.select_n(_cmp.eq(zg, one), zero_u, pg))
        contrib = scatter_add(_zeros(xa.shape, xa.dtype), idx, _arith.mul(tu, others), dn,
                              mode=mode)
        t_u = _arith.mul(x, contrib)
        t = t_u if t is None else _arith.add(t, t_u)
    return out, t


def _broadcast_scalar(v, shape):
    return _shapes.broadcast_in_dim(v, tuple(shape), ())


def _scatter_mul_transpose(ct, x, idx, u, *, dimension_numbers, **params):
    if is_undefined(u):
        raise NotImplementedError("scatter_mul is not linear in its updates: it cannot be "
                                  "transposed with respect to them.")
    return [scatter_mul_p.bind(ct, idx, u, dimension_numbers=dimension_numbers, **params),
            None, None]


jvp_rules[scatter_mul_p] = _scatter_mul_jvp
transpose_rules[scatter_mul_p] = _scatter_mul_transpose


def _scatter_extremum_jvp(prim):
    """Tangent of scatter_min/max: the mean of the tangents of the values (operand element
    and updates) that tie for the result."""
    def rule(primals, tangents, *, dimension_numbers, mode, **params):
        (x, idx, u), (tx, _, tu) = primals, tangents
        dn = dimension_numbers
        out = prim.bind(x, idx, u, dimension_numbers=dn, mode=mode, **params)
        xa, ua = get_aval(x), get_aval(u)
        from_x = _conv.convert_element_type(_cmp.eq(x, out), xa.dtype)
        from_u = _conv.convert_element_type(
            _cmp.eq(u, _gather_updates(out, idx, dn, ua.shape, mode)), ua.dtype)
        count = _arith.add(from_x, scatter_add(_zeros(xa.shape, xa.dtype), idx, from_u, dn,
                                               mode=mode))
        # NaN results tie with nothing: avoid 0/0 there.
        count = _arith.max(count, np.ones((), xa.dtype))
        total = None
        if type(tx) is not Zero:
            total = _arith.mul(tx, from_x)
        if type(tu) is not Zero:
            part = scatter_add(_zeros(xa.shape, xa.dtype), idx, _arith.mul(tu, from_u), dn,
                               mode=mode)
            total = part if total is None else _arith.add(total, part)
        return out, _arith.div(total, count)
    return rule


jvp_rules[scatter_min_p] = _scatter_extremum_jvp(scatter_min_p)
jvp_rules[scatter_max_p] = _scatter_extremum_jvp(scatter_max_p)


# --- batching ---------------------------------------------------------------------------
# The batch dimension becomes one more window dimension (when only the operand is batched)
# or one more index batch dimension (when the indices are); when both are, operand and
# indices batch dimensions are paired by operand_batching_dims. Batched values keep their
# batch dimension where it is where the dimension numbers allow.
def _shift(dims: tuple, at: int) -> tuple:
    """Axis numbers after inserting a new axis at ``at``."""
    return tuple(d + 1 if d >= at else d for d in dims)


def _slot(positions, k: int) -> int:
    """Where to insert a new axis so that it is the k-th of ``positions`` (sorted axes)
    afterwards: just before the current k-th, or just after the last."""
    positions = sorted(positions)
    if k < len(positions):
        return positions[k]
    return positions[-1] + 1 if positions else 0


def _add_batching_pair(obd: tuple, ibd: tuple, bo: int, bi: int):
    """Batching dims with the pair (bo, bi) added, keeping operand dims sorted."""
    pos = sum(d < bo for d in obd)
    return obd[:pos] + (bo,) + obd[pos:], ibd[:pos] + (bi,) + ibd[pos:]


def _indices_batch_dim(idx, bi):
    """The indices' batch dimension, moved off the index-vector (last) axis if it is there."""
    if bi == get_aval(idx).ndim - 1:
        return moveaxis(idx, bi, 0), 0
    return idx, bi


def gather_batch_rule(axis, vals, dims, *, dimension_numbers, slice_sizes, **params):
    """gather's vmap rule (dynamic_slice's too, when its start indices are batched)."""
    (x, idx), (bx, bi) = vals, dims
    dn = dimension_numbers
    out_rank = len(dn.offset_dims) + get_aval(idx).ndim - (1 if bi is not_mapped else 2)
    if bi is not_mapped:
        window = [d for d in range(len(slice_sizes))
                  if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims]
        q = _slot(dn.offset_dims, sum(d < bx for d in window))
        new = GatherDimensionNumbers(
            tuple(sorted(_shift(dn.offset_dims, q) + (q,))), _shift(dn.collapsed_slice_dims, bx),
            _shift(dn.start_index_map, bx), _shift(dn.operand_batching_dims, bx),
            dn.start_indices_batching_dims)
        sizes = slice_sizes[:bx] + (get_aval(x).shape[bx],) + slice_sizes[bx:]
        return gather_p.bind(x, idx, dimension_numbers=new, slice_sizes=sizes, **params), q
    idx, bi = _indices_batch_dim(idx, bi)
    batch_pos = [d for d in range(out_rank) if d not in dn.offset_dims]
    q = _slot(batch_pos, bi)
    ibd = _shift(dn.start_indices_batching_dims, bi)
    if bx is not_mapped:
        new = dn._replace(offset_dims=_shift(dn.offset_dims, q), start_indices_batching_dims=ibd)
        return gather_p.bind(x, idx, dimension_numbers=new, slice_sizes=slice_sizes, **params), q
    obd, ibd = _add_batching_pair(_shift(dn.operand_batching_dims, bx), ibd, bx, bi)
    new = GatherDimensionNumbers(_shift(dn.offset_dims, q), _shift(dn.collapsed_slice_dims, bx),
                                 _shift(dn.start_index_map, bx), obd, ibd)
    # Over an empty batch axis the paired window is empty too: a window of 1 would not fit.
    pair = min_dim(get_aval(x).shape[bx], 1)  # decided for a symbolic batch size (>= 1)
    sizes = slice_sizes[:bx] + (pair,) + slice_sizes[bx:]
    return gather_p.bind(x, idx, dimension_numbers=new, slice_sizes=sizes, **params), q


def scatter_batch_rule(prim):
    """The vmap rule of the scatter primitive ``prim``."""
    def rule(axis, vals, dims, *, dimension_numbers, **params):
        (x, idx, u), (bx, bi, bu) = vals, dims
        dn = dimension_numbers
        size = batch_size_of(vals, dims)
        if bx is not_mapped:
            x, bx = move_batch_dim(x, bx, 0, size), 0
        u_rank = get_aval(u).ndim - (0 if bu is not_mapped else 1)
        inserted, s2o = _shift(dn.inserted_window_dims, bx), _shift(dn.scatter_dims_to_operand_dims, bx)
        obd = _shift(dn.operand_batching_dims, bx)
        if bi is not_mapped:
            window = [d for d in range(get_aval(x).ndim - 1)
                      if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
            q = _slot(dn.update_window_dims, sum(d < bx for d in window))
            new = ScatterDimensionNumbers(tuple(sorted(_shift(dn.update_window_dims, q) + (q,))),
                                          inserted, s2o, obd, dn.scatter_indices_batching_dims)
        else:
            idx, bi = _indices_batch_dim(idx, bi)
            scatter_pos = [d for d in range(u_rank) if d not in dn.update_window_dims]
            q = _slot(scatter_pos, bi)
            obd, ibd = _add_batching_pair(obd, _shift(dn.scatter_indices_batching_dims, bi), bx, bi)
            new = ScatterDimensionNumbers(_shift(dn.update_window_dims, q), inserted, s2o, obd, ibd)
        u = move_batch_dim(u, bu, q, size)
        return prim.bind(x, idx, u, dimension_numbers=new, **params), bx
    return rule


batch_rules[gather_p] = gather_batch_rule
for _prim in _SCATTERS:
    batch_rules[_prim] = scatter_batch_rule(_prim)
