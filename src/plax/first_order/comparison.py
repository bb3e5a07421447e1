"""Comparisons (eq, ne, lt, le, gt, ge, is_finite) and choosing between values
(select_n, select, clamp)."""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, is_undefined, jvp_rules,
                             not_mapped, register_lowering, tangent_aval, transpose_rules)
from plax.core.trace import get_aval
from plax.first_order import bitwise as _bitwise
from plax.first_order import shapes as _shapes
from plax.first_order.ad_util import broadcast_tangent, defjvp, defzero, instantiate
from plax.first_order.batch_util import batch_size_of, common_dim, move_batch_dim
from plax.first_order.common import check_same_dtypes, weak_of
from plax.first_order.elementwise_util import binop, full_of, standard_lowering, unop

__all__ = ["eq", "ne", "lt", "le", "gt", "ge", "is_finite", "select_n", "select", "clamp"]


# --- comparisons ----------------------------------------------------------------------------
def _comparison(name: str, direction: str, category: str, doc: str, total_order: bool = False):
    prim, fn = binop(name, category, None, doc, out_bool=True)

    def lower(ctx, x, y):
        shape = ctx.avals_out[0].shape
        (ax, ay), full = ctx.avals_in, ctx.avals_in[0].update(shape=shape)
        x = ctx.broadcast(x, ax, full, range(ax.ndim) if ax.ndim else ())
        y = ctx.broadcast(y, ay, full, range(ay.ndim) if ay.ndim else ())
        kind = "TOTALORDER" if total_order and dtypes.is_float(full.dtype) else None
        return ctx.compare(direction, x, y, full, kind)

    register_lowering(prim, lower)
    defzero(prim)
    return prim, fn


eq_p, eq = _comparison("eq", "EQ", "equality", "Elementwise x == y.")
ne_p, ne = _comparison("ne", "NE", "equality", "Elementwise x != y.")
lt_p, lt = _comparison("lt", "LT", "real", "Elementwise x < y.")
le_p, le = _comparison("le", "LE", "real", "Elementwise x <= y.")
gt_p, gt = _comparison("gt", "GT", "real", "Elementwise x > y.")
ge_p, ge = _comparison("ge", "GE", "real", "Elementwise x >= y.")
# JAX's total-order comparisons (primitives only, no public function): floats compare as
# -NaN < -inf < ... < -0.0 < 0.0 < ... < inf < NaN, so NaNs compare equal to themselves.
eq_to_p, _ = _comparison("eq_to", "EQ", "equality", "Elementwise x == y in total order.", True)
le_to_p, _ = _comparison("le_to", "LE", "real", "Elementwise x <= y in total order.", True)
lt_to_p, _ = _comparison("lt_to", "LT", "real", "Elementwise x < y in total order.", True)

is_finite_p, is_finite = unop("is_finite", "float", "stablehlo.is_finite",
                              "Elementwise test for finite (not inf, not NaN) values.",
                              out_dtype=lambda d: np.dtype(np.bool_))
defzero(is_finite_p)


# --- batching of select and clamp, which do not broadcast -----------------------------------
def _full_batched(x, d, dst, size, shape):
    """``x`` as a full array of per-example ``shape`` with its batch dimension at ``dst``
    (select and clamp do not broadcast, so scalars and unbatched values are expanded)."""
    full = shape[:dst] + (size,) + shape[dst:]
    if d is not_mapped:
        if get_aval(x).ndim == 0:
            return _shapes.broadcast_in_dim(x, full, ())
        return move_batch_dim(x, d, dst, size)
    if get_aval(x).ndim == 1 and len(shape) > 0:  # a batched scalar
        return _shapes.broadcast_in_dim(x, full, (dst,))
    return move_batch_dim(x, d, dst, size)


# --- select_n -------------------------------------------------------------------------------
select_n_p = Primitive("select_n")


def _select_n_abstract(which, *cases):
    if not cases:
        raise ValueError("select_n() must have at least one case: pass one or more arrays to "
                         "choose from.")
    if which.dtype != np.bool_ and which.dtype != np.int32:
        raise TypeError(f"select_n's `which` must be bool or int32, got {which.dtype.name}.")
    if which.dtype == np.bool_ and len(cases) > 2:
        raise TypeError(f"select_n with a boolean `which` takes at most 2 cases, got {len(cases)}.")
    check_same_dtypes("select_n", *cases)
    shape = cases[0].shape
    if any(c.shape != shape for c in cases):
        # Unlike arithmetic, select does not broadcast its cases (as in JAX).
        raise TypeError(f"select_n cases must have the same shapes, got "
                        f"{[c.shape for c in cases]}. Broadcast them first (plax.numpy.where does).")
    if which.shape not in ((), shape):
        raise TypeError(f"select_n's `which` must be a scalar or have the cases' shape {shape}, "
                        f"got shape {which.shape}.")
    return ShapedArray(shape, cases[0].dtype, weak_of(*cases))


def _select_n_lowering(ctx, which, *cases):
    waval, out = ctx.avals_in[0], ctx.avals_out[0]
    if len(cases) == 1:
        return cases[0]
    wfull = waval.update(shape=out.shape)
    which = ctx.broadcast(which, waval, wfull)

    def pick(lo, hi):  # select among cases[lo:hi]
        if hi - lo == 1:
            return cases[lo]
        mid = (lo + hi) // 2
        if wfull.dtype == np.bool_:
            pred = which
        else:
            bound = ctx.broadcast(ctx.constant(mid, ShapedArray((), np.int32)),
                                  ShapedArray((), np.int32), wfull)
            pred = ctx.compare("LT", which, bound, wfull)
            return ctx.op1("stablehlo.select", [pred, pick(lo, mid), pick(mid, hi)],
                           [wfull.update(dtype=np.bool_), out, out])
        return ctx.op1("stablehlo.select", [pred, pick(mid, hi), pick(lo, mid)],
                       [wfull.update(dtype=np.bool_), out, out])

    return pick(0, len(cases))


def _select_n_jvp(primals, tangents):
    which, *cases = primals
    ans = select_n(which, *cases)
    case_t = tangents[1:]
    if all(type(t) is Zero for t in case_t):
        return ans, Zero(tangent_aval(get_aval(ans)))
    return ans, select_n(which, *[instantiate(t) for t in case_t])


def _select_n_transpose(ct, which, *cases):
    if is_undefined(which):
        raise ValueError("select_n's predicate cannot be linear.")
    out = [None]
    for i, c in enumerate(cases):
        if not is_undefined(c):
            out.append(None)
        else:
            zeros = full_of(ct, 0)  # not ct * 0, which is NaN where ct is infinite
            out.append(select_n(which, *[ct if j == i else zeros for j in range(len(cases))]))
    return out


def _select_n_batch(axis, vals, dims):
    which, cases = vals[0], vals[1:]
    wd, case_dims = dims[0], dims[1:]
    size = batch_size_of(vals, dims)
    batched_cases = [(c, d) for c, d in zip(cases, case_dims) if d is not not_mapped]
    dst = common_dim(*zip(*batched_cases)) if batched_cases else 0
    c0, d0 = cases[0], case_dims[0]
    shape = get_aval(c0).shape
    if d0 is not not_mapped:
        shape = shape[:d0] + shape[d0 + 1:]
    cases = [_full_batched(c, d, dst, size, shape) for c, d in zip(cases, case_dims)]
    if wd is not_mapped and get_aval(which).ndim == 0:
        return select_n_p.bind(which, *cases), dst
    return select_n_p.bind(_full_batched(which, wd, dst, size, shape), *cases), dst


abstract_eval_rules[select_n_p] = _select_n_abstract
register_lowering(select_n_p, _select_n_lowering)
jvp_rules[select_n_p] = _select_n_jvp
transpose_rules[select_n_p] = _select_n_transpose
batch_rules[select_n_p] = _select_n_batch


def select_n(which, *cases):
    """``cases[which]`` elementwise; ``which`` is bool (2 cases) or int32."""
    return select_n_p.bind(which, *cases)


def select(pred, on_true, on_false):
    """``on_true`` where ``pred`` else ``on_false`` (note the order differs from select_n)."""
    return select_n_p.bind(pred, on_false, on_true)


# --- clamp ----------------------------------------------------------------------------------
clamp_p = Primitive("clamp")


def _clamp_abstract(lo, x, hi):
    check_same_dtypes("clamp", lo, x, hi)
    for name, b in (("min", lo), ("max", hi)):
        if b.shape not in ((), x.shape):
            raise TypeError(f"clamp's {name} must be a scalar or have the operand's shape "
                            f"{x.shape}, got shape {b.shape}.")
    return x.update(weak_type=weak_of(lo, x, hi))


def _where_tangent(pred, g, ans):
    """``g`` where ``pred``, else 0; ``g`` is broadcast to ``ans``'s shape first (clamp
    broadcasts scalar bounds)."""
    g = broadcast_tangent(g, get_aval(ans).shape)
    return select(pred, g, full_of(g, 0))


def _clamp_batch(axis, vals, dims):
    (lo, x, hi), (dlo, dx, dhi) = vals, dims
    size = batch_size_of(vals, dims)
    dst = 0 if dx is not_mapped else dx
    shape = get_aval(x).shape
    if dx is not not_mapped:
        shape = shape[:dx] + shape[dx + 1:]
    x = _full_batched(x, dx, dst, size, shape)
    bounds = [b if d is not_mapped and get_aval(b).ndim == 0
              else _full_batched(b, d, dst, size, shape) for b, d in ((lo, dlo), (hi, dhi))]
    return clamp_p.bind(bounds[0], x, bounds[1]), dst


abstract_eval_rules[clamp_p] = _clamp_abstract
register_lowering(clamp_p, standard_lowering("stablehlo.clamp"))
defjvp(clamp_p,
       lambda g, ans, lo, x, hi: _where_tangent(_bitwise.bitwise_and(gt(lo, x), lt(lo, hi)), g, ans),
       lambda g, ans, lo, x, hi: _where_tangent(_bitwise.bitwise_and(gt(x, lo), lt(x, hi)), g, ans),
       lambda g, ans, lo, x, hi: _where_tangent(lt(hi, x), g, ans))
batch_rules[clamp_p] = _clamp_batch


def clamp(min, x, max):
    """Elementwise ``min(max(x, min), max)``; the bounds may be scalars."""
    return clamp_p.bind(min, x, max)
