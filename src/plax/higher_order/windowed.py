"""reduce_window: reductions over sliding (strided, padded, dilated) windows.

``reduce_window`` with lax.add / lax.max / lax.min and the op's identity as the
(concrete) init value uses the specialised primitives reduce_window_sum / _max /
_min, as in JAX; any other computation goes through the generic
``reduce_window`` primitive, whose traced combiner lowers to the region of a
``stablehlo.reduce_window``.

Derivatives: reduce_window_sum is linear (its transpose pads the cotangent with
interior zeros for the strides and sums it over windows again). The max/min and
generic derivatives unroll the window: the operand is padded (and base-dilated),
one strided slice is taken per window offset, and the slices are folded with
the combiner starting from the init value, skipping padding as XLA does (for
max/min a running select that keeps the tangent of the first chosen element),
which is differentiable and transposable with pad/slice/select alone. Without
dilation the max/min tangent is JAX's select_and_gather_add primitive (lowered
as that unrolled select), whose transpose is select_and_scatter_add
(stablehlo.select_and_scatter: the cotangent added at each window's choice);
select_and_scatter is the general form, with traced select and scatter functions.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, jvp_rules,
                             linear_primitives, not_mapped, param_printers, register_lowering,
                             tangent_aval, transpose_rules)
from plax.core.jaxpr import ClosedJaxpr
from plax.core.staging import trace_to_jaxpr
from plax.core.symbolic_shapes import is_symbolic_dim, max_dim
from plax.core.trace import EvalTrace, Tracer, fresh_name_stack, get_aval, set_current_trace
from plax.first_order import arithmetic as _arith
from plax.first_order import comparison as _cmp
from plax.higher_order import generic_reduce as _greduce
from plax.first_order import reductions as _reductions
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.ad_util import deflinear
from plax.first_order.batch_util import bdim_at_front
from plax.first_order.common import as_int_tuple, check_dtype, pads_for, padtype_to_pads
from plax.lowering.consts import const_operands
from plax.lowering.inline import lower_fun
from plax.lowering.stablehlo import i64_array, lower_jaxpr_body
from plax.transforms.jvp import jvp_flat

__all__ = ["reduce_window", "padtype_to_pads", "reduce_window_shape_tuple"]


# --- shapes and padding -----------------------------------------------------------------
def _dilate_shape(shape, dilation):
    return tuple(0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dilation))


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
    """The result shape of a reduce_window with these window parameters."""
    if base_dilation is not None:
        operand_shape = _dilate_shape(operand_shape, base_dilation)
    if window_dilation is not None:
        window_dimensions = _dilate_shape(window_dimensions, window_dilation)
    out = []
    for size, (lo, hi), window, stride in zip(operand_shape, padding, window_dimensions,
                                              window_strides):
        padded = (size if is_symbolic_dim(size) else int(size)) + int(lo) + int(hi)
        out.append(max_dim((padded - int(window)) // int(stride) + 1, 0))
    return tuple(out)


def _check_window(name, shape, window_dimensions, window_strides, padding, base_dilation,
                  window_dilation):
    ndim = len(shape)
    for what, vals, positive in (("window_dimensions", window_dimensions, True),
                                 ("window_strides", window_strides, True),
                                 ("base_dilation", base_dilation, True),
                                 ("window_dilation", window_dilation, True)):
        if len(vals) != ndim:
            raise TypeError(f"{name} got the wrong number of {what} for an operand array with "
                            f"{ndim} dimensions; got {what}={vals}.")
        if positive and any(v < 1 for v in vals):
            raise TypeError(f"{name}: all {what} must be positive, got {what}={vals}.")
    if len(padding) != ndim or any(len(p) != 2 for p in padding):
        raise ValueError(f"{name}: padding must be a sequence of {ndim} (low, high) pairs for an "
                         f"operand with {ndim} dimensions, got padding={padding}.")
    padded = [s + lo + hi for s, (lo, hi) in zip(_dilate_shape(shape, base_dilation), padding)]
    if any(p < 0 for p in padded):
        raise ValueError(f"{name}: negative padding {padding} removes more than the whole "
                         f"(base-dilated) operand of shape {shape}.")
    return reduce_window_shape_tuple(shape, window_dimensions, window_strides, padding,
                                     base_dilation, window_dilation)


def _window_props(window_dimensions, window_strides, padding, base_dilation, window_dilation):
    ndim = len(window_dimensions)
    pad_text = "[" + ", ".join(f"[{lo}, {hi}]" for lo, hi in padding) + "]"
    return (f"window_dimensions = {i64_array(window_dimensions)}, "
            f"window_strides = {i64_array(window_strides)}, "
            f"base_dilations = {i64_array(base_dilation)}, "
            f"window_dilations = {i64_array(window_dilation)}, "
            f"padding = dense<{pad_text}> : tensor<{ndim}x2xi64>")


# --- unrolling a window (for derivatives) ----------------------------------------------
def _window_slices(x, pad_value, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation, out_shape):
    """One array of ``out_shape`` per window offset: element ``o`` of slice ``k`` is the
    element at offset ``k`` of window ``o`` (padding and dilation holes hold ``pad_value``)."""
    config = tuple((lo, hi, b - 1) for (lo, hi), b in zip(padding, base_dilation))
    padded = _shapes.pad(x, pad_value, config)
    out = []
    for offset in itertools.product(*[range(w) for w in window_dimensions]):
        start = tuple(k * r for k, r in zip(offset, window_dilation))
        limit = tuple(s + (o - 1) * st + 1 if o > 0 else s
                      for s, o, st in zip(start, out_shape, window_strides))
        out.append(_slicing.slice(padded, start, limit, window_strides))
    return out


# --- the specialised primitives ------------------------------------------------------------
_PARAMS = ("window_dimensions", "window_strides", "padding", "base_dilation", "window_dilation")


def _make_monoid(name, category, identity, combine):
    prim = Primitive(name)

    def abstract(x, *, window_dimensions, window_strides, padding, base_dilation,
                 window_dilation):
        check_dtype(name, x, category)
        shape = _check_window(name, x.shape, window_dimensions, window_strides, padding,
                              base_dilation, window_dilation)
        return ShapedArray(shape, x.dtype, x.weak_type)

    def lower(ctx, x, **params):
        ain, aout = ctx.avals_in[0], ctx.avals_out[0]
        scalar = ShapedArray((), ain.dtype)
        init = ctx.constant(identity(ain.dtype), scalar)
        return ctx.op1("stablehlo.reduce_window", [x, init], [ain, scalar], aout,
                       props=_window_props(*(params[p] for p in _PARAMS)),
                       regions=_reductions.scalar_combiner_region(ctx, ain, combine))

    def batch(axis, vals, dims, *, window_dimensions, window_strides, padding, base_dilation,
              window_dilation):
        (x,), (d,) = vals, dims
        ins = lambda t, v: t[:d] + (v,) + t[d:]
        return prim.bind(x, window_dimensions=ins(window_dimensions, 1),
                         window_strides=ins(window_strides, 1), padding=ins(padding, (0, 0)),
                         base_dilation=ins(base_dilation, 1),
                         window_dilation=ins(window_dilation, 1)), d

    abstract_eval_rules[prim] = abstract
    register_lowering(prim, lower)
    batch_rules[prim] = batch
    return prim


reduce_window_sum_p = _make_monoid("reduce_window_sum", "numeric", lambda d: 0,
                                   _reductions.binary_combiner("stablehlo.add"))
reduce_window_max_p = _make_monoid(
    "reduce_window_max", "any", dtypes.lowest_value,
    _reductions.extremum_combiner("stablehlo.maximum", "stablehlo.or", "GT"))
reduce_window_min_p = _make_monoid(
    "reduce_window_min", "any", dtypes.highest_value,
    _reductions.extremum_combiner("stablehlo.minimum", "stablehlo.and", "LT"))


def _sum_transpose(ct, x, *, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):
    aval = x.aval
    in_shape = aval.shape
    ct_shape = get_aval(ct).shape
    lhs = _dilate_shape(in_shape, base_dilation)
    rhs = _dilate_shape(window_dimensions, window_dilation)
    out = _dilate_shape(ct_shape, window_strides)
    before = [r - lo - 1 for r, (lo, _) in zip(rhs, padding)]
    after = [l + r - 1 - o - b for l, r, o, b in zip(lhs, rhs, out, before)]
    config = tuple((b, a, s - 1) for b, a, s in zip(before, after, window_strides))
    padded = _shapes.pad(ct, np.zeros((), get_aval(ct).dtype), config)
    ones = (1,) * len(in_shape)
    result = reduce_window_sum_p.bind(padded, window_dimensions=window_dimensions,
                                      window_strides=base_dilation,
                                      padding=((0, 0),) * len(in_shape), base_dilation=ones,
                                      window_dilation=window_dilation)
    assert get_aval(result).shape == in_shape, (get_aval(result).shape, in_shape)
    return [result]


deflinear(reduce_window_sum_p)
transpose_rules[reduce_window_sum_p] = _sum_transpose


def _selected_tangents(t, x, direction, window_dimensions, window_strides, padding,
                       base_dilation, window_dilation):
    """Per window, the tangent ``t`` at the first element of ``x`` attaining the window's
    maximum (``direction`` "GT") or minimum ("LT"), the window unrolled into slices."""
    dt = get_aval(x).dtype
    init = np.array(dtypes.lowest_value(dt) if direction == "GT" else dtypes.highest_value(dt), dt)
    args = (window_dimensions, window_strides, padding, base_dilation, window_dilation)
    out_shape = _check_window("select_and_gather_add", get_aval(x).shape, *args)
    vs = _window_slices(x, init, *args, out_shape)
    ts = _window_slices(t, np.zeros((), get_aval(t).dtype), *args, out_shape)
    better = _cmp.gt if direction == "GT" else _cmp.lt
    cur_v, cur_t = vs[0], ts[0]
    for v, tt in zip(vs[1:], ts[1:]):
        take = better(v, cur_v)
        cur_v = _cmp.select_n(take, cur_v, v)
        cur_t = _cmp.select_n(take, cur_t, tt)
    return cur_t


def _chooser_jvp(prim, direction):
    """max/min: the tangent of the first element of each window attaining the extremum, as
    JAX computes it: select_and_gather_add (whose transpose is select_and_scatter_add). With
    dilations (which those refuse to transpose) the window is unrolled in place."""
    select_prim = _cmp.ge_p if direction == "GT" else _cmp.le_p

    def rule(primals, tangents, **params):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, **params)
        if type(t) is Zero:
            return ans, Zero(tangent_aval(get_aval(ans)))
        if all(d == 1 for d in params["base_dilation"] + params["window_dilation"]):
            return ans, select_and_gather_add_p.bind(t, x, select_prim=select_prim, **params)
        return ans, _selected_tangents(t, x, direction, *(params[p] for p in _PARAMS))
    jvp_rules[prim] = rule


# --- the windowed reductions' gradients, as JAX's primitives ------------------------------------
def _direction(select_prim) -> str:
    if select_prim is _cmp.ge_p:
        return "GT"
    if select_prim is _cmp.le_p:
        return "LT"
    raise ValueError(f"select_prim must be lax.ge_p or lax.le_p, got {select_prim}.")


select_and_gather_add_p = Primitive("select_and_gather_add")


def _gather_add_abstract(t, x, *, select_prim, window_dimensions, window_strides, padding,
                         base_dilation, window_dilation):
    _direction(select_prim)
    if t.shape != x.shape:
        raise TypeError(f"select_and_gather_add: tangents and operand must have one shape, got "
                        f"{t.shape} and {x.shape}.")
    shape = _check_window("select_and_gather_add", x.shape, window_dimensions, window_strides,
                          padding, base_dilation, window_dilation)
    return ShapedArray(shape, t.dtype, t.weak_type)


def _gather_add_composite(t, x, *, select_prim, **params):
    return _selected_tangents(t, x, _direction(select_prim), *(params[p] for p in _PARAMS))


def _gather_add_jvp(primals, tangents, **params):
    (t, x), (tt, _) = primals, tangents
    out = select_and_gather_add_p.bind(t, x, **params)
    if type(tt) is Zero:
        return out, Zero(tangent_aval(get_aval(out)))
    return out, select_and_gather_add_p.bind(tt, x, **params)


def _gather_add_transpose(ct, t, x, *, select_prim, window_dimensions, window_strides, padding,
                          base_dilation, window_dilation):
    if any(d != 1 for d in base_dilation + window_dilation):
        raise NotImplementedError("VJP not implemented for select_and_gather (MaxPool) with "
                                  "dilation.")
    if type(ct) is Zero:
        return [None, None]
    return [select_and_scatter_add_p.bind(ct, x, select_prim=select_prim,
                                          window_dimensions=window_dimensions,
                                          window_strides=window_strides, padding=padding), None]


def _insert_unit_window(params, d):
    ins = lambda t, v: t[:d] + (v,) + t[d:]  # noqa: E731
    out = dict(params)
    for name, unit in (("window_dimensions", 1), ("window_strides", 1), ("padding", (0, 0)),
                       ("base_dilation", 1), ("window_dilation", 1)):
        if name in params:
            out[name] = ins(params[name], unit)
    return out


def _pair_batch(prim):
    """Both operands batched alike (moved to the front), the window 1 wide there."""
    def rule(axis, vals, dims, **params):
        size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not not_mapped)
        a, b = (bdim_at_front(v, d, size) for v, d in zip(vals, dims))
        return prim.bind(a, b, **_insert_unit_window(params, 0)), 0
    batch_rules[prim] = rule


abstract_eval_rules[select_and_gather_add_p] = _gather_add_abstract
register_lowering(select_and_gather_add_p, lower_fun(_gather_add_composite))
jvp_rules[select_and_gather_add_p] = _gather_add_jvp
transpose_rules[select_and_gather_add_p] = _gather_add_transpose
linear_primitives.add(select_and_gather_add_p)
_pair_batch(select_and_gather_add_p)


select_and_scatter_add_p = Primitive("select_and_scatter_add")


def _scatter_add_abstract(source, x, *, select_prim, window_dimensions, window_strides, padding):
    _direction(select_prim)
    ones = (1,) * x.ndim
    shape = _check_window("select_and_scatter_add", x.shape, window_dimensions, window_strides,
                          padding, ones, ones)
    if source.shape != shape:
        raise TypeError(f"select_and_scatter_add: source must have the windows' shape {shape}, "
                        f"got {source.shape}.")
    return ShapedArray(x.shape, source.dtype, source.weak_type)


def _select_and_scatter_op(ctx, x, source, init, select_region, scatter_region,
                           window_dimensions, window_strides, padding, operand_first=False):
    xa, sa = ctx.avals_in[:2] if operand_first else (ctx.avals_in[1], ctx.avals_in[0])
    ndim = len(window_dimensions)
    pad_text = "[" + ", ".join(f"[{lo}, {hi}]" for lo, hi in padding) + "]" if padding else "[]"
    scalar = ShapedArray((), sa.dtype)
    return ctx.op1("stablehlo.select_and_scatter", [x, source, init], [xa, sa, scalar],
                   ctx.avals_out[0],
                   props=f"window_dimensions = {i64_array(window_dimensions)}, "
                         f"window_strides = {i64_array(window_strides)}, "
                         f"padding = dense<{pad_text}> : tensor<{ndim}x2xi64>",
                   regions=f"{select_region}, {scatter_region}")


def _scatter_add_lowering(ctx, source, x, *, select_prim, window_dimensions, window_strides,
                          padding):
    xa, sa = ctx.avals_in[1], ctx.avals_in[0]
    direction = "GE" if _direction(select_prim) == "GT" else "LE"
    xs, ss = ShapedArray((), xa.dtype), ShapedArray((), sa.dtype)
    select = ctx.region([xs, xs], lambda c, a, b: ([c.compare(direction, a, b, xs)],
                                                   [xs.update(dtype=np.dtype(np.bool_))]))
    scatter = ctx.region([ss, ss], lambda c, a, b: (
        [c.op1("stablehlo.add", [a, b], [ss, ss], ss)], [ss]))
    init = ctx.constant(np.zeros((), sa.dtype), ss)
    return _select_and_scatter_op(ctx, x, source, init, select, scatter, window_dimensions,
                                  window_strides, padding)


def _scatter_add_jvp(primals, tangents, **params):
    (s, x), (ts, _) = primals, tangents
    out = select_and_scatter_add_p.bind(s, x, **params)
    if type(ts) is Zero:
        return out, Zero(tangent_aval(get_aval(out)))
    return out, select_and_scatter_add_p.bind(ts, x, **params)


def _scatter_add_transpose(ct, s, x, *, select_prim, window_dimensions, window_strides, padding):
    if type(ct) is Zero:
        return [None, None]
    ones = (1,) * len(window_dimensions)
    return [select_and_gather_add_p.bind(ct, x, select_prim=select_prim,
                                         window_dimensions=window_dimensions,
                                         window_strides=window_strides, padding=padding,
                                         base_dilation=ones, window_dilation=ones), None]


abstract_eval_rules[select_and_scatter_add_p] = _scatter_add_abstract
register_lowering(select_and_scatter_add_p, _scatter_add_lowering)
jvp_rules[select_and_scatter_add_p] = _scatter_add_jvp
transpose_rules[select_and_scatter_add_p] = _scatter_add_transpose
linear_primitives.add(select_and_scatter_add_p)
_pair_batch(select_and_scatter_add_p)


_chooser_jvp(reduce_window_max_p, "GT")
_chooser_jvp(reduce_window_min_p, "LT")


# select_and_scatter: the general form, with traced select (two operand scalars -> bool: keep
# the first?) and scatter (two source scalars -> scalar) functions. As in JAX it has no
# derivative or batching rule: it is what the specialised primitives lower to.
select_and_scatter_p = Primitive("select_and_scatter")


def _scalar_jaxpr(fn, dtype):
    """``fn(a, b)`` on two scalars of ``dtype`` as an open jaxpr and its constants."""
    scalar = ShapedArray((), np.dtype(dtype))
    with set_current_trace(EvalTrace()), fresh_name_stack():
        jaxpr, consts = trace_to_jaxpr(lambda a, b: [fn(a, b)], [scalar, scalar])
    return jaxpr, tuple(consts)


def _select_and_scatter_abstract(x, source, init, *, select_jaxpr, select_consts, scatter_jaxpr,
                                 scatter_consts, window_dimensions, window_strides, padding):
    if len(window_dimensions) != len(window_strides):
        raise TypeError("select_and_scatter got inconsistent window_strides and "
                        f"window_dimensions: got window_strides {window_strides} and "
                        f"window_dimensions {window_dimensions}.")
    ones = (1,) * x.ndim
    shape = _check_window("select_and_scatter", x.shape, window_dimensions, window_strides,
                          padding, ones, ones)
    if source.shape != shape or source.dtype != init.dtype or init.shape != ():
        raise TypeError(f"select_and_scatter: source must have the windows' shape {shape} and "
                        f"init_value be a scalar of its dtype, got source {source.str_short()} "
                        f"and init_value {init.str_short()}.")
    return ShapedArray(x.shape, source.dtype)


def _select_and_scatter_lowering(ctx, x, source, init, *, select_jaxpr, select_consts,
                                 scatter_jaxpr, scatter_consts, window_dimensions,
                                 window_strides, padding):
    xs = ShapedArray((), ctx.avals_in[0].dtype)
    ss = ShapedArray((), ctx.avals_in[1].dtype)

    def body(jaxpr, consts, out_aval):
        closed = ClosedJaxpr(jaxpr, list(consts))
        return lambda c, *args: (lower_jaxpr_body(c.fn, jaxpr, const_operands(c, closed)
                                                  + list(args)), [out_aval])

    select = ctx.region([xs, xs], body(select_jaxpr, select_consts,
                                       xs.update(dtype=np.dtype(np.bool_))))
    scatter = ctx.region([ss, ss], body(scatter_jaxpr, scatter_consts, ss))
    return _select_and_scatter_op(ctx, x, source, init, select, scatter, window_dimensions,
                                  window_strides, padding, operand_first=True)


abstract_eval_rules[select_and_scatter_p] = _select_and_scatter_abstract
register_lowering(select_and_scatter_p, _select_and_scatter_lowering)


def _select_and_scatter(operand, select, window_dimensions, window_strides, padding, source,
                        init_value, scatter):
    """Each window of ``operand`` picks one element (``select(a, b)``: keep ``a``?) and
    ``source``'s entry for that window is combined into the result there with ``scatter``,
    starting from ``init_value`` everywhere."""
    dt = get_aval(operand).dtype
    sel, sel_consts = _scalar_jaxpr(select, dt)
    sct, sct_consts = _scalar_jaxpr(scatter, get_aval(source).dtype)
    return select_and_scatter_p.bind(
        operand, source, init_value, select_jaxpr=sel, select_consts=sel_consts,
        scatter_jaxpr=sct, scatter_consts=sct_consts,
        window_dimensions=as_int_tuple(window_dimensions, "window_dimensions"),
        window_strides=as_int_tuple(window_strides, "window_strides"),
        padding=tuple(as_int_tuple(p, "padding entry") for p in padding))


# --- the generic primitive -------------------------------------------------------------------
reduce_window_p = Primitive("reduce_window", multiple_results=True)


def _generic_abstract(*avals, jaxpr, **params):
    n = len(avals) // 2
    ops, inits = avals[:n], avals[n:]
    if not ops:
        raise ValueError("reduce_window needs at least one operand.")
    if any(i.shape != () for i in inits):
        raise ValueError(f"reduce_window found non-scalar initial value: {[i.shape for i in inits]}")
    if any(o.dtype != i.dtype for o, i in zip(ops, inits)):
        raise TypeError("reduce_window got inconsistent dtypes for operands and init_values: "
                        f"got operand dtypes {[o.dtype for o in ops]} and init_value dtypes "
                        f"{[i.dtype for i in inits]}. Operand dtypes should match their init "
                        "values' dtypes (an init of another dtype is taken only as the identity "
                        "of lax.add, lax.max or lax.min).")
    if any(o.shape != ops[0].shape for o in ops):
        raise ValueError(f"reduce_window operands must all have the same shape, got "
                         f"{[o.shape for o in ops]}.")
    shape = _check_window("reduce_window", ops[0].shape, *(params[p] for p in _PARAMS))
    return [ShapedArray(shape, o.dtype) for o in ops]


def _generic_lowering(ctx, *args, jaxpr, **params):
    n = len(args) // 2
    scalars = [ShapedArray((), a.dtype) for a in ctx.avals_in[:n]]

    def body(c, *region_args):
        consts = const_operands(c, jaxpr)
        return lower_jaxpr_body(c.fn, jaxpr.jaxpr, consts + list(region_args)), scalars

    region = ctx.region(scalars + scalars, body)
    return ctx.op("stablehlo.reduce_window", list(args),
                  props=_window_props(*(params[p] for p in _PARAMS)), regions=region)


def _generic_unrolled(jaxpr, n, params, out_shape):
    def run(*args):
        ops, inits = list(args[:n]), list(args[n:])
        per_op = [_window_slices(x, i, *(params[p] for p in _PARAMS), out_shape)
                  for x, i in zip(ops, inits)]
        # XLA applies the init value once and skips padding and dilation holes.
        valid = _window_slices(_shapes.broadcast_in_dim(np.bool_(True), get_aval(ops[0]).shape, ()),
                               np.bool_(False), *(params[p] for p in _PARAMS), out_shape)
        acc = [_shapes.broadcast_in_dim(i, out_shape, ()) for i in inits]
        for k in range(len(per_op[0])):
            new = _greduce.apply_combiner(jaxpr, acc, [s[k] for s in per_op])
            acc = [_cmp.select_n(valid[k], a, b) for a, b in zip(acc, new)]
        return acc
    return run


def _generic_jvp(primals, tangents, *, jaxpr, **params):
    n = len(primals) // 2
    if any(type(t) is not Zero for t in tangents[n:]):
        raise NotImplementedError("Differentiating lax.reduce_window with non-zero tangents for "
                                  "its initial values is not implemented.")
    outs = reduce_window_p.bind(*primals, jaxpr=jaxpr, **params)
    out_shape = get_aval(outs[0]).shape
    if math.prod(out_shape) == 0 or all(type(t) is Zero for t in tangents):
        return outs, [Zero(tangent_aval(get_aval(o))) for o in outs]
    _, out_t = jvp_flat(_generic_unrolled(jaxpr, n, params, out_shape), list(primals),
                        list(tangents))
    return outs, out_t


def _generic_batch(axis, vals, dims, *, jaxpr, window_dimensions, window_strides, padding,
                   base_dilation, window_dilation):
    n = len(vals) // 2
    if any(d is not not_mapped for d in dims[n:]):
        raise NotImplementedError("vmap of lax.reduce_window with batched init_values is not "
                                  "supported: the init values must be the same for every example.")
    ops = [bdim_at_front(v, d, axis.size) for v, d in zip(vals[:n], dims[:n])]
    outs = reduce_window_p.bind(*ops, *vals[n:], jaxpr=jaxpr,
                                window_dimensions=(1,) + window_dimensions,
                                window_strides=(1,) + window_strides,
                                padding=((0, 0),) + padding, base_dilation=(1,) + base_dilation,
                                window_dilation=(1,) + window_dilation)
    return outs, [0] * n


abstract_eval_rules[reduce_window_p] = _generic_abstract
register_lowering(reduce_window_p, _generic_lowering)
jvp_rules[reduce_window_p] = _generic_jvp
batch_rules[reduce_window_p] = _generic_batch
param_printers[reduce_window_p] = lambda p: {k: p[k] for k in ("jaxpr",) + _PARAMS}


# --- the public function ---------------------------------------------------------------------
def _monoid_prim(computation, init):
    """The specialised primitive for ``computation`` from ``init``, or None. As in JAX, a
    concrete scalar init qualifies when it is the op's identity for the init's own dtype (so
    an integer operand takes -inf or 0.0), and the primitive then uses the operand's."""
    if isinstance(init, Tracer) or np.shape(init) != ():
        return None
    if hasattr(init, "aval"):
        init = np.asarray(init)
    dtype = dtypes.dtype(init, canonicalize=True)
    if computation is _arith.add and _greduce.init_equals(init, 0):
        return reduce_window_sum_p
    if computation is _arith.max and _greduce.init_equals(init, dtypes.lowest_value(dtype)):
        return reduce_window_max_p
    if computation is _arith.min and _greduce.init_equals(init, dtypes.highest_value(dtype)):
        return reduce_window_min_p
    return None


def reduce_window(operand, init_value, computation, window_dimensions, window_strides, padding,
                  base_dilation=None, window_dilation=None):
    """Reduce each (strided, padded, dilated) window of ``operand`` with
    ``computation(a, b)`` starting from ``init_value`` (pytrees of matching structure).

    ``padding`` is 'VALID', 'SAME', 'SAME_LOWER' or a sequence of (low, high) pairs;
    padding and base-dilation holes hold the init value.
    """
    flat_ops, tree = tree_util.tree_flatten(operand)
    flat_inits, init_tree = tree_util.tree_flatten(init_value)
    if tree != init_tree:
        raise ValueError(f"Operands must have the same tree structure as init_values: {tree} vs. "
                         f"{init_tree}.")
    if not flat_ops:
        raise ValueError("reduce_window needs at least one operand.")
    shape = get_aval(flat_ops[0]).shape
    wdims = as_int_tuple(window_dimensions, "window_dimensions")
    strides = as_int_tuple(window_strides, "window_strides")
    ones = (1,) * len(shape)
    bdil = ones if base_dilation is None else as_int_tuple(base_dilation, "base_dilation")
    wdil = ones if window_dilation is None else as_int_tuple(window_dilation, "window_dilation")
    if isinstance(padding, str):
        if not len(wdims) == len(strides) == len(bdil) == len(wdil) == len(shape):
            raise TypeError(f"reduce_window got the wrong number of window_dimensions, "
                            f"window_strides or dilations for an operand array with {len(shape)} "
                            f"dimensions; got window_dimensions={wdims}, window_strides={strides}.")
        # Like JAX: the padding type applies to the (undilated) operand and dilated window.
        pads = pads_for(shape, _dilate_shape(wdims, wdil), strides, padding)
    else:
        pads = tuple(as_int_tuple(p, "padding entry") for p in padding)
    params = dict(window_dimensions=wdims, window_strides=strides, padding=pads,
                  base_dilation=bdil, window_dilation=wdil)
    if len(flat_ops) == 1:
        prim = _monoid_prim(computation, flat_inits[0])
        if prim is not None:
            return tree_util.tree_unflatten(tree, [prim.bind(flat_ops[0], **params)])
    op_avals = [get_aval(x) for x in flat_ops]
    abstract_eval_rules[reduce_window_p](*op_avals, *[get_aval(i) for i in flat_inits],
                                         jaxpr=None, **params)
    scalars = tuple(ShapedArray((), a.dtype) for a in op_avals)
    jaxpr = _greduce.combiner_jaxpr(computation, scalars, tree)
    outs = reduce_window_p.bind(*flat_ops, *flat_inits, jaxpr=jaxpr, **params)
    return tree_util.tree_unflatten(tree, outs)
