"""Sorting: the variadic ``sort`` primitive (sort, sort_key_val) and ``top_k``.

Floats sort in a total order in which -0.0 equals 0.0 and every NaN equals every
other NaN and sorts after +inf (so a stable sort keeps their input order).
Complex numbers sort lexicographically by (real, imag) under the same rules.
"""
from __future__ import annotations

import operator

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.sharding_types import elementwise_sharding, sharding_rules, unsplit_dimension
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, is_undefined, jvp_rules,
                             not_mapped, register_lowering, tangent_aval, transpose_rules)
from plax.core.trace import get_aval as _aval
from plax.first_order import comparison as _cmp
from plax.first_order import reductions as _reductions
from plax.first_order import shapes as _shapes
from plax.first_order.ad_util import instantiate
from plax.first_order.batch_util import batch_size_of, move_batch_dim, moveaxis
from plax.first_order.common import check_dtype, reject_keys
from plax.lowering.stablehlo import i64_array

__all__ = ["sort", "sort_key_val", "top_k"]


def _canonical_axis(axis, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {ndim}; "
                         f"pass an axis in [{-ndim}, {ndim}).")
    return axis % ndim


# --- the comparator ---------------------------------------------------------------------
def _canonical_float(ctx, x: str, aval: ShapedArray) -> str:
    """``x`` with -0.0 turned into 0.0 and every NaN into one quiet NaN."""
    zero, nan = ctx.constant(0, aval), ctx.constant(np.nan, aval)
    x = ctx.select(ctx.compare("EQ", x, zero, aval), zero, x, aval)
    return ctx.select(ctx.compare("NE", x, x, aval), nan, x, aval)


def _key_parts(ctx, x: str, aval: ShapedArray):
    """The (value, aval, compare type) pieces a key is ordered by, most significant first."""
    if dtypes.is_complex(aval.dtype):
        part = aval.update(dtype=np.float64 if aval.dtype == np.complex128 else np.float32)
        return [(_canonical_float(ctx, ctx.op1(op, [x], [aval], part), part), part, "TOTALORDER")
                for op in ("stablehlo.real", "stablehlo.imag")]
    if dtypes.is_inexact(aval.dtype):
        return [(_canonical_float(ctx, x, aval), aval, "TOTALORDER")]
    kind = "UNSIGNED" if dtypes.is_unsigned(aval.dtype) or dtypes.is_bool(aval.dtype) else "SIGNED"
    return [(x, aval, kind)]


def _less_than(ctx, lhs, rhs, avals) -> str:
    """Lexicographic ``lhs < rhs`` over the key operands, as one i1 value."""
    lparts = [p for x, a in zip(lhs, avals) for p in _key_parts(ctx, x, a)]
    rparts = [p for x, a in zip(rhs, avals) for p in _key_parts(ctx, x, a)]
    pred = ShapedArray((), np.bool_)
    less = None
    for (l, aval, kind), (r, _, _) in reversed(list(zip(lparts, rparts))):
        lt = ctx.compare("LT", l, r, aval, kind)
        if less is None:
            less = lt
            continue
        eq = ctx.compare("EQ", l, r, aval, kind)
        tail = ctx.op1("stablehlo.and", [eq, less], [pred, pred], pred)
        less = ctx.op1("stablehlo.or", [lt, tail], [pred, pred], pred)
    return less


# --- sort -------------------------------------------------------------------------------
sort_p = Primitive("sort", multiple_results=True)


def _sort_abstract(*operands, dimension, is_stable, num_keys):
    if not operands:
        raise TypeError("sort requires at least one operand.")
    reject_keys("sort", *operands)  # keys have no order
    shapes = [o.shape for o in operands]
    if any(s != shapes[0] for s in shapes):
        raise TypeError(f"Arguments to sort must have equal shapes, got: "
                        f"{' '.join(str(s) for s in shapes)}.")
    ndim = len(shapes[0])
    if not 0 <= dimension < ndim:
        raise ValueError(f"sort: dimension {dimension} is out of bounds for operands of shape "
                         f"{shapes[0]}.")
    if not 1 <= num_keys <= len(operands):
        raise ValueError(f"sort: num_keys={num_keys} must be between 1 and the number of operands "
                         f"({len(operands)}).")
    return list(operands)


def _sort_lowering(ctx, *operands, dimension, is_stable, num_keys):
    avals = ctx.avals_in
    scalars = [ShapedArray((), a.dtype) for a in avals]

    def comparator(c, *args):
        lhs, rhs = args[0::2][:num_keys], args[1::2][:num_keys]
        return [_less_than(c, lhs, rhs, scalars[:num_keys])], [ShapedArray((), np.bool_)]

    region = ctx.region([s for s in scalars for _ in (0, 1)], comparator)
    props = f"dimension = {dimension} : i64, is_stable = {'true' if is_stable else 'false'}"
    return ctx.op("stablehlo.sort", list(operands), props=props, regions=region)


# Sorting permutes: tangents follow the operands they belong to. The sort of the primal
# and the sort carrying the tangents are separate equations so that linearize keeps the
# primal result known; reverse mode undoes the permutation by sorting by it.
def _moves(t) -> bool:
    return type(t) is not Zero and dtypes.is_inexact(_aval(t).dtype)


def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    params = dict(dimension=dimension, is_stable=is_stable, num_keys=num_keys)
    outs = sort_p.bind(*primals, **params)
    out_t = [Zero(tangent_aval(_aval(o))) for o in outs]
    moving = [i for i, t in enumerate(tangents) if _moves(t)]
    if moving:
        carried = sort_p.bind(*primals[:num_keys], *[tangents[i] for i in moving], **params)
        for i, t in zip(moving, carried[num_keys:]):
            out_t[i] = t
    return outs, out_t


def _sort_transpose(cts, *args, dimension, is_stable, num_keys):
    keys = args[:num_keys]
    if any(is_undefined(k) for k in keys):
        raise ValueError("sort is linear only in its non-key operands: the keys must be known.")
    undefined = [i for i, a in enumerate(args) if is_undefined(a)]
    shape = _aval(keys[0]).shape
    iota = _shapes.broadcasted_iota(np.int32, shape, dimension)
    perm = sort_p.bind(*keys, iota, dimension=dimension, is_stable=is_stable,
                       num_keys=num_keys)[-1]
    # Sorting by the permutation puts every cotangent back where its operand came from.
    back = sort_p.bind(perm, *[instantiate(cts[i]) for i in undefined], dimension=dimension,
                       is_stable=True, num_keys=1)[1:]
    out = [None] * len(args)
    for i, c in zip(undefined, back):
        out[i] = c
    return out


def _sort_batch(axis_data, vals, dims, *, dimension, is_stable, num_keys):
    """Sort along the shifted dimension. The operands must agree in shape, so they all take
    the batch dimension of the first batched one (unbatched ones are broadcast to it)."""
    size = batch_size_of(vals, dims)
    d = next(b for b in dims if b is not not_mapped)
    vals = [v if b == d else move_batch_dim(v, b, d, size) for v, b in zip(vals, dims)]
    outs = sort_p.bind(*vals, dimension=dimension if dimension < d else dimension + 1,
                       is_stable=is_stable, num_keys=num_keys)
    return outs, [d] * len(outs)


abstract_eval_rules[sort_p] = _sort_abstract
sharding_rules[sort_p] = lambda avals_in, avals_out, *, dimension, **_: (
    unsplit_dimension("Arguments to sort must be unsharded over the sorting dimension. Got arg "
                      "sharding={sharding} and sorting dimension={dim}", avals_in[0], dimension),
    [elementwise_sharding("sort", avals_in, avals_in[0].shape)] * len(avals_out))[1]
register_lowering(sort_p, _sort_lowering)
jvp_rules[sort_p] = _sort_jvp
transpose_rules[sort_p] = _sort_transpose
batch_rules[sort_p] = _sort_batch


def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """Sort an array, or a sequence of same-shape arrays lexicographically by the first ``num_keys``."""
    if isinstance(operand, (list, tuple)):
        operands = tuple(operand)
        if not operands:
            raise TypeError("sort requires at least one operand.")
    else:
        operands = (operand,)
        if num_keys != 1:
            raise ValueError(f"num_keys={num_keys} must equal 1 for a single operand.")
    dim = _canonical_axis(dimension, _aval(operands[0]).ndim)
    outs = sort_p.bind(*operands, dimension=dim, is_stable=bool(is_stable),
                       num_keys=operator.index(num_keys))
    return tuple(outs) if isinstance(operand, (list, tuple)) else outs[0]


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    """Sort ``keys`` along ``dimension`` and permute ``values`` the same way."""
    dim = _canonical_axis(dimension, _aval(keys).ndim)
    k, v = sort_p.bind(keys, values, dimension=dim, is_stable=bool(is_stable), num_keys=1)
    return k, v


# --- top_k ------------------------------------------------------------------------------
top_k_p = Primitive("top_k", multiple_results=True)


def _top_k_abstract(x, *, k, axis):
    check_dtype("top_k", x, "real")
    if not 0 <= axis < x.ndim:
        raise ValueError(f"top_k: axis {axis} is out of bounds for an operand of shape {x.shape}.")
    if k < 0:
        raise ValueError(f"k argument to top_k must be nonnegative, got {k}.")
    if k > x.shape[axis]:
        raise ValueError(f"k argument to top_k must be no larger than size along axis; got k={k} "
                         f"with shape={list(x.shape)} and axis={axis}.")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    # As in JAX, both results carry the operand's weak type.
    return [ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, np.int32, x.weak_type)]


def _transpose(ctx, x, aval, perm):
    out = aval.update(shape=tuple(aval.shape[p] for p in perm))
    return ctx.op1("stablehlo.transpose", [x], [aval], out, props=f"permutation = {i64_array(perm)}"), out


def _top_k_lowering(ctx, x, *, k, axis):
    ain = ctx.avals_in[0]
    vals_out, idx_out = ctx.avals_out
    if vals_out.size == 0:
        return [ctx.constant(np.zeros(vals_out.shape, vals_out.dtype), vals_out),
                ctx.constant(np.zeros(idx_out.shape, np.int32), idx_out)]
    last = ain.ndim - 1
    perm = list(range(ain.ndim))
    perm[axis], perm[last] = last, axis  # a swap is its own inverse
    if axis != last:
        x, ain = _transpose(ctx, x, ain, perm)
    shape = ain.shape[:-1] + (k,)
    vals, idx = ShapedArray(shape, vals_out.dtype), ShapedArray(shape, np.int32)
    vals_name, idx_name = ctx.op("chlo.top_k", [x], [ain], [vals, idx], props=f"k = {k} : i64")
    if axis != last:
        vals_name, _ = _transpose(ctx, vals_name, vals, perm)
        idx_name, _ = _transpose(ctx, idx_name, idx, perm)
    return [vals_name, idx_name]


def _top_k_jvp(primals, tangents, *, k, axis):
    """The values' tangent picks ``t`` at the returned indices (a one-hot over the axis)."""
    (x,), (t,) = primals, tangents
    vals, idx = top_k_p.bind(x, k=k, axis=axis)
    zero_idx = Zero(tangent_aval(_aval(idx)))
    if type(t) is Zero:
        return [vals, idx], [Zero(tangent_aval(_aval(vals))), zero_idx]
    shape, n = _aval(vals).shape, _aval(x).shape[axis]
    wide = shape[:axis + 1] + (n,) + shape[axis + 1:]  # (..., k, n, ...)
    dims = lambda skip: tuple(d for d in range(len(wide)) if d != skip)  # noqa: E731
    hit = _cmp.eq(_shapes.broadcast_in_dim(idx, wide, dims(axis + 1)),
                  _shapes.broadcasted_iota(np.int32, wide, axis + 1))
    spread = _shapes.broadcast_in_dim(t, wide, dims(axis))
    zeros = _shapes.broadcast_in_dim(np.zeros((), _aval(t).dtype), wide, ())
    out_t = _reductions.reduce_sum(_cmp.select(hit, spread, zeros), (axis + 1,))
    return [vals, idx], [out_t, zero_idx]


def _top_k_batch(axis_data, vals, dims, *, k, axis):
    """top_k runs on the last dimension (others cost a transpose each way in its lowering):
    when the batch dimension is last and the per-example axis was, move the batch to the front."""
    (x,), (d,) = vals, dims
    if d == _aval(x).ndim - 1 and axis == d - 1:
        x, d = moveaxis(x, d, 0), 0
    outs = top_k_p.bind(x, k=k, axis=axis if axis < d else axis + 1)
    return outs, [d, d]


abstract_eval_rules[top_k_p] = _top_k_abstract
sharding_rules[top_k_p] = lambda avals_in, avals_out, *, k, axis: (
    unsplit_dimension("top_k needs its operand unsharded over the axis it selects along. Got "
                      "operand type={type} and axis={dim}", avals_in[0], axis),
    [avals_in[0]._sharding] * 2)[1]
register_lowering(top_k_p, _top_k_lowering)
jvp_rules[top_k_p] = _top_k_jvp
batch_rules[top_k_p] = _top_k_batch


def top_k(operand, k, *, axis=-1):
    """The ``k`` largest entries along ``axis`` (descending) and their int32 indices."""
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"k argument to top_k must be an integer, got {k!r}.") from None
    axis = _canonical_axis(axis, _aval(operand).ndim)
    return list(top_k_p.bind(operand, k=k, axis=axis))
