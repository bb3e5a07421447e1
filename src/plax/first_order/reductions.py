"""Reductions: reduce_{sum,prod,max,min,and,or,xor}, argmax/argmin and cumulative scans.

Full reductions lower to ``stablehlo.reduce`` with an identity init value and a
scalar combiner region; argmax/argmin reduce (value, index) pairs together; the
cumulative ops lower to ``stablehlo.reduce_window`` with a window spanning the
whole scanned axis, padded on one side so that output i sees inputs 0..i.
"""
from __future__ import annotations

import operator

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.config import config
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, jvp_rules,
                             out_sharding_params, register_lowering, tangent_aval,
                             transpose_rules)
from plax.core.sharding_types import (reduction_rule, sharding_rules, spec_of,
                                      unsplit_dimension, with_entry)
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import comparison as _cmp
from plax.first_order import conversion as _conv
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order import transcendental as _trans
from plax.first_order.ad_util import deflinear, defzero
from plax.first_order.common import as_int_tuple, check_dtype, complex_extremum
from plax.lowering.stablehlo import i64_array
from plax.sharding.named import out_sharding_param

__all__ = ["reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and", "reduce_or",
           "reduce_xor", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin",
           "cumlogsumexp"]


# --- scalar combiners, shared by reduce and reduce_window regions ---------------------
def binary_combiner(op: str):
    """A combiner applying the StableHLO binary op ``op`` to two scalars."""
    return lambda ctx, a, b, aval: ctx.op1(op, [a, b], [aval, aval], aval)


def _complex_extremum(direction: str):
    """Max/min of complex numbers ordered lexicographically by (real, imag)."""
    return lambda ctx, a, b, aval: complex_extremum(ctx, direction, a, b, aval)


def extremum_combiner(op: str, bool_op: str, direction: str):
    """max/min: NaN-propagating stablehlo op; and/or for bool; lexicographic for complex."""
    complex_combine = _complex_extremum(direction)

    def combine(ctx, a, b, aval):
        if dtypes.is_bool(aval.dtype):
            return binary_combiner(bool_op)(ctx, a, b, aval)
        if dtypes.is_complex(aval.dtype):
            return complex_combine(ctx, a, b, aval)
        return binary_combiner(op)(ctx, a, b, aval)
    return combine


def _logaddexp(ctx, a, b, aval):
    """log(exp(a) + exp(b)) as JAX's combiner computes it: max + log1p(exp(-|a - b|)), or
    a + b where a - b is NaN (a NaN, or infinities of one sign)."""
    def op(name, *args):
        return ctx.op1(name, list(args), [aval] * len(args), aval)
    hi = op("stablehlo.maximum", a, b)
    delta = op("stablehlo.subtract", a, b)
    nan = ctx.op1("stablehlo.compare", [delta, delta], [aval, aval], aval.update(dtype=np.bool_),
                  props="comparison_direction = #stablehlo<comparison_direction NE>")
    tail = op("stablehlo.log_plus_one", op("stablehlo.exponential", op(
        "stablehlo.negate", op("stablehlo.abs", delta))))
    return ctx.select(nan, op("stablehlo.add", a, b), op("stablehlo.add", hi, tail), aval)


# --- identity values ------------------------------------------------------------------


def all_bits_set(dtype):
    """``dtype``'s value with every bit set (True for bool): the identity of an and-reduction."""
    if dtypes.is_bool(dtype):
        return True
    return dtypes.iinfo(dtype).max if dtypes.is_unsigned(dtype) else -1


def scalar_combiner_region(ctx, aval, combine):
    """A reduction region combining two scalars of ``aval``'s dtype with ``combine``."""
    scalar = ShapedArray((), aval.dtype)
    return ctx.region([scalar, scalar], lambda c, a, b: ([combine(c, a, b, scalar)], [scalar]))


# --- batching: the batch dimension stays where it is; per-example axes shift past it ----------
def _shift(axis: int, bdim: int) -> int:
    """A per-example axis as an axis of the value batched at ``bdim``."""
    return axis if axis < bdim else axis + 1


def _reduction_batch(prim):
    def rule(axis_data, vals, dims, *, axes, **params):
        (x,), (d,) = vals, dims
        out_dim = d - sum(a < d for a in axes)
        if params.get("out_sharding") is not None:  # the batch dimension keeps its split
            params = {**params, "out_sharding": with_entry(params["out_sharding"], out_dim,
                                                           spec_of(get_aval(x))[d])}
        out = prim.bind(x, axes=tuple(_shift(a, d) for a in axes), **params)
        return out, out_dim
    return rule


def _cumulative_batch(prim):
    def rule(axis_data, vals, dims, *, axis, reverse):
        (x,), (d,) = vals, dims
        return prim.bind(x, axis=_shift(axis, d), reverse=reverse), d
    return rule


def _expand_back(ct, aval, axes):
    """``ct`` (reduced over ``axes``) broadcast back to ``aval``'s shape."""
    kept = tuple(i for i in range(len(aval.shape)) if i not in axes)
    return _shapes.broadcast_in_dim(ct, aval.shape, kept)


# --- reduce_* ---------------------------------------------------------------------------
def check_reduction_axes(name: str, aval: ShapedArray, axes: tuple) -> None:
    """Raise unless ``axes`` are distinct and in range for ``aval`` (``name``: the reduction)."""
    bad = [a for a in axes if not 0 <= a < aval.ndim]
    if bad:
        raise ValueError(f"{name}: reduction axes {axes} contain out-of-bounds indices for an "
                         f"operand of shape {aval.shape} (rank {aval.ndim}); lax reductions take "
                         "non-negative axes below the rank.")
    if len(set(axes)) != len(axes):
        raise ValueError(f"{name}: duplicate value in reduction axes {axes}; list each axis once.")


def reduced_shape(shape: tuple, axes: tuple) -> tuple:
    """``shape`` without the dimensions ``axes``."""
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduction(name: str, category: str, identity, combine, keeps_weak: bool, extra_params=None):
    """A reduction primitive (abstract evaluation, lowering, batching) and its public function."""
    prim = Primitive(name)
    extra_params = dict(extra_params or {})

    def abstract(x, *, axes, **params):
        if category == "intbool" and not (dtypes.is_integer(x.dtype) or dtypes.is_bool(x.dtype)):
            raise TypeError(f"{name}: logical reductions need an operand of dtype bool or integer, "
                            f"got {x.dtype.name}.")
        check_dtype(name, x, category)
        check_reduction_axes(name, x, axes)
        return ShapedArray(reduced_shape(x.shape, axes), x.dtype, x.weak_type and keeps_weak)

    def lower(ctx, x, *, axes, **params):
        ain, aout = ctx.avals_in[0], ctx.avals_out[0]
        if not axes:
            return x
        scalar = ShapedArray((), ain.dtype)
        init = ctx.constant(identity(ain.dtype), scalar)
        return ctx.op1("stablehlo.reduce", [x, init], [ain, scalar], aout,
                       props=f"dimensions = {i64_array(sorted(axes))}",
                       regions=scalar_combiner_region(ctx, ain, combine))

    abstract_eval_rules[prim] = abstract
    register_lowering(prim, lower)
    batch_rules[prim] = _reduction_batch(prim)
    sharding_rules[prim] = reduction_rule

    if "out_sharding" in extra_params:
        out_sharding_params[prim] = "out_sharding"

        def public(operand, axes, *, out_sharding=None):
            axes = as_int_tuple(axes, "axes")
            ndim = len(get_aval(operand).shape) - len(set(axes))
            return prim.bind(operand, axes=axes, **{
                **extra_params, "out_sharding": out_sharding_param(out_sharding, ndim, name)})
    else:
        def public(operand, axes):
            return prim.bind(operand, axes=as_int_tuple(axes, "axes"), **extra_params)
    public.__name__ = public.__qualname__ = name
    return prim, public


def _chooser_jvp(prim):
    """max/min reductions: the tangent averages over the positions attaining the extremum."""
    def rule(primals, tangents, *, axes, **params):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, axes=axes, **params)
        if type(t) is Zero:
            return ans, Zero(get_aval(ans))
        aval = get_aval(x)
        hit = _conv.convert_element_type(_cmp.eq(x, _expand_back(ans, aval, axes)), aval.dtype)
        counts = reduce_sum(hit, axes)
        return ans, _arith.div(reduce_sum(_arith.mul(t, hit), axes), counts)
    jvp_rules[prim] = rule


def _reduce_prod_jvp(primals, tangents, *, axes, **params):
    (x,), (t,) = primals, tangents
    ans = reduce_prod_p.bind(x, axes=axes, **params)
    if type(t) is Zero:
        return ans, Zero(get_aval(ans))
    # d prod = sum_i t_i * prod_{j != i} x_j, computed without dividing by x.
    aval = get_aval(x)
    if not axes:
        return ans, t
    if any(aval.shape[i] == 0 for i in axes):
        return ans, reduce_sum(t, axes)  # an empty product is constant: this is zeros
    kept = [i for i in range(aval.ndim) if i not in axes]
    perm = tuple(kept + list(axes))
    n = int(np.prod([aval.shape[i] for i in axes], dtype=np.int64))
    lead = tuple(aval.shape[i] for i in kept)
    xs = _shapes.reshape(_shapes.transpose(x, perm), lead + (n,))
    ts = _shapes.reshape(_shapes.transpose(t, perm), lead + (n,))
    before = cumprod(xs, axis=len(lead), reverse=False)
    after = cumprod(xs, axis=len(lead), reverse=True)
    one = np.ones(lead + (1,), aval.dtype)
    excl_before = _shapes.concatenate(
        [one, _slicing.slice_in_dim(before, 0, n - 1, axis=len(lead))], len(lead))
    excl_after = _shapes.concatenate(
        [_slicing.slice_in_dim(after, 1, n, axis=len(lead)), one], len(lead))
    others = _arith.mul(excl_before, excl_after)
    return ans, reduce_sum(_arith.mul(ts, others), (len(lead),))


reduce_sum_p, reduce_sum = _reduction("reduce_sum", "numeric", lambda d: 0,
                                      binary_combiner("stablehlo.add"), True,
                                      {"out_sharding": None})
reduce_sum.__doc__ = "Sum of ``operand`` over ``axes``."
_reduce_sum_abstract = abstract_eval_rules[reduce_sum_p]


def _reduce_sum_abstract_checked(x, *, axes, **params):
    # jax_allow_f16_reductions=False (plax.allow_f16_reductions) refuses half-precision sums.
    if x.dtype.name in ("float16", "bfloat16") and not config.read("allow_f16_reductions") \
            and not all(x.shape[a] == 1 for a in axes):
        raise ValueError(f"reduce_sum on operand {x.str_short()} is not allowed when "
                         "jax_allow_f16_reductions=False.")
    return _reduce_sum_abstract(x, axes=axes, **params)


abstract_eval_rules[reduce_sum_p] = _reduce_sum_abstract_checked
deflinear(reduce_sum_p)
transpose_rules[reduce_sum_p] = lambda ct, x, *, axes, **p: [_expand_back(ct, x.aval, axes)]

reduce_prod_p, reduce_prod = _reduction("reduce_prod", "numeric", lambda d: 1,
                                        binary_combiner("stablehlo.multiply"), True)
reduce_prod.__doc__ = "Product of ``operand`` over ``axes``."
jvp_rules[reduce_prod_p] = _reduce_prod_jvp

reduce_max_p, reduce_max = _reduction(
    "reduce_max", "any", dtypes.lowest_value,
    extremum_combiner("stablehlo.maximum", "stablehlo.or", "GT"), True)
reduce_max.__doc__ = "Maximum of ``operand`` over ``axes`` (NaN propagates; -inf when empty)."
_chooser_jvp(reduce_max_p)

reduce_min_p, reduce_min = _reduction(
    "reduce_min", "any", dtypes.highest_value,
    extremum_combiner("stablehlo.minimum", "stablehlo.and", "LT"), True)
reduce_min.__doc__ = "Minimum of ``operand`` over ``axes`` (NaN propagates; +inf when empty)."
_chooser_jvp(reduce_min_p)

reduce_and_p, reduce_and = _reduction("reduce_and", "intbool", all_bits_set,
                                      binary_combiner("stablehlo.and"), False)
reduce_and.__doc__ = "Bitwise (logical for bool) AND of ``operand`` over ``axes``."
defzero(reduce_and_p)

reduce_or_p, reduce_or = _reduction("reduce_or", "intbool", lambda d: 0,
                                    binary_combiner("stablehlo.or"), False)
reduce_or.__doc__ = "Bitwise (logical for bool) OR of ``operand`` over ``axes``."
defzero(reduce_or_p)

reduce_xor_p, reduce_xor = _reduction("reduce_xor", "intbool", lambda d: 0,
                                      binary_combiner("stablehlo.xor"), False)
reduce_xor.__doc__ = "Bitwise (logical for bool) XOR of ``operand`` over ``axes``."
defzero(reduce_xor_p)


# --- argmax / argmin --------------------------------------------------------------------
def _arg_reduction(name: str, direction: str, identity):
    """An index-of-extremum primitive; its integer result has a zero derivative."""
    prim = Primitive(name)

    def abstract(x, *, axes, index_dtype):
        check_dtype(name, x, "real")
        if len(axes) != 1:
            raise ValueError(f"{name} reduces exactly one axis, got axes={axes}.")
        axis = axes[0]
        if not 0 <= axis < x.ndim:
            raise ValueError(f"{name}: invalid axis {axis} for an operand of shape {x.shape}; "
                             f"the axis must be in [0, {x.ndim}).")
        if x.shape[axis] == 0:
            raise ValueError(f"{name} requires a non-empty reduced dimension, got operand shape "
                             f"{x.shape} and axis={axis}.")
        if not dtypes.is_integer(index_dtype):
            raise TypeError(f"{name}: index_dtype must be an integer type, got {index_dtype.name}.")
        return ShapedArray(reduced_shape(x.shape, axes), index_dtype)

    def combine(ctx, va, ia, vb, ib, vaval, iaval):
        """Keep the pair that wins; ties (and two NaNs) go to the lower index."""
        pred = vaval.update(dtype=np.bool_)
        or_, and_ = binary_combiner("stablehlo.or"), binary_combiner("stablehlo.and")
        a_wins = ctx.compare(direction, va, vb, vaval)
        tie = ctx.compare("EQ", va, vb, vaval)
        if dtypes.is_inexact(vaval.dtype):
            a_nan, b_nan = ctx.compare("NE", va, va, vaval), ctx.compare("NE", vb, vb, vaval)
            b_num = ctx.op1("stablehlo.not", [b_nan], [pred], pred)
            a_wins = or_(ctx, a_wins, and_(ctx, a_nan, b_num, pred), pred)
            tie = or_(ctx, tie, and_(ctx, a_nan, b_nan, pred), pred)
        a_first = ctx.compare("LT", ia, ib, iaval)
        take_a = or_(ctx, a_wins, and_(ctx, tie, a_first, pred), pred)
        return [ctx.select(take_a, va, vb, vaval), ctx.select(take_a, ia, ib, iaval)]

    def lower(ctx, x, *, axes, index_dtype):
        ain, aout = ctx.avals_in[0], ctx.avals_out[0]
        iota_aval = ShapedArray(ain.shape, index_dtype)
        iota = ctx.iota(iota_aval, axes[0])
        vs, is_ = ShapedArray((), ain.dtype), ShapedArray((), index_dtype)
        # Identity (the extreme value at index 0): whenever it ties, every element
        # equals it, so index 0 is also the right answer.
        inits = [ctx.constant(identity(ain.dtype), vs), ctx.constant(0, is_)]
        body = ctx.region([vs, is_, vs, is_],
                          lambda c, va, ia, vb, ib: (combine(c, va, ia, vb, ib, vs, is_), [vs, is_]))
        outs = ctx.op("stablehlo.reduce", [x, iota] + inits, [ain, iota_aval, vs, is_],
                      [aout.update(dtype=ain.dtype), aout],
                      props=f"dimensions = {i64_array(axes)}", regions=body)
        return outs[1]

    abstract_eval_rules[prim] = abstract
    register_lowering(prim, lower)
    batch_rules[prim] = _reduction_batch(prim)
    sharding_rules[prim] = reduction_rule
    defzero(prim)
    return prim


argmax_p = _arg_reduction("argmax", "GT", dtypes.lowest_value)
argmin_p = _arg_reduction("argmin", "LT", dtypes.highest_value)


def _index_dtype(index_dtype) -> np.dtype:
    return dtypes.canonicalize_user_dtype(index_dtype, "index_dtype")


def argmax(operand, axis, index_dtype):
    """Index of the first maximum along ``axis`` (the first NaN, if any)."""
    return argmax_p.bind(operand, axes=(operator.index(axis),), index_dtype=_index_dtype(index_dtype))


def argmin(operand, axis, index_dtype):
    """Index of the first minimum along ``axis`` (the first NaN, if any)."""
    return argmin_p.bind(operand, axes=(operator.index(axis),), index_dtype=_index_dtype(index_dtype))


# --- cumulative reductions ----------------------------------------------------------------
def _cumulative_sharding(avals_in, avals_out, *, axis, reverse):
    unsplit_dimension("Input should be unsharded over the axis being reduced. Got input "
                      "type={type} and axis={dim}: reshard it (plax.sharding.reshard) first.",
                      avals_in[0], axis)
    return [avals_in[0]._sharding]

def _cumulative(name: str, category: str, identity, combine, doc: str):
    prim = Primitive(name)

    def abstract(x, *, axis, reverse):
        check_dtype(name, x, category)
        if not 0 <= axis < x.ndim:
            raise ValueError(f"{name}: axis {axis} is out of bounds for an operand of shape "
                             f"{x.shape}; the axis must be in [0, {x.ndim}) (no negative axes).")
        return x

    def lower(ctx, x, *, axis, reverse):
        aval = ctx.avals_in[0]
        n = aval.shape[axis]
        if aval.size == 0 or n == 1:
            return x
        window = [n if i == axis else 1 for i in range(aval.ndim)]
        pads = [((0, n - 1) if reverse else (n - 1, 0)) if i == axis else (0, 0)
                for i in range(aval.ndim)]
        pad_text = "[" + ", ".join(f"[{lo}, {hi}]" for lo, hi in pads) + "]"
        scalar = ShapedArray((), aval.dtype)
        init = ctx.constant(identity(aval.dtype), scalar)
        props = (f"window_dimensions = {i64_array(window)}, "
                 f"window_strides = {i64_array([1] * aval.ndim)}, "
                 f"padding = dense<{pad_text}> : tensor<{aval.ndim}x2xi64>")
        return ctx.op1("stablehlo.reduce_window", [x, init], [aval, scalar], aval, props=props,
                       regions=scalar_combiner_region(ctx, aval, combine))

    abstract_eval_rules[prim] = abstract
    register_lowering(prim, lower)
    batch_rules[prim] = _cumulative_batch(prim)
    sharding_rules[prim] = _cumulative_sharding

    def public(operand, axis=0, reverse=False):
        return prim.bind(operand, axis=operator.index(axis), reverse=bool(reverse))
    public.__name__ = public.__qualname__ = name
    public.__doc__ = doc
    return prim, public


cumsum_p, cumsum = _cumulative("cumsum", "numeric", lambda d: 0, binary_combiner("stablehlo.add"),
                               "Cumulative sum along ``axis`` (from the end when ``reverse``).")
cumprod_p, cumprod = _cumulative("cumprod", "numeric", lambda d: 1,
                                 binary_combiner("stablehlo.multiply"),
                                 "Cumulative product along ``axis`` (from the end when ``reverse``).")
cummax_p, cummax = _cumulative("cummax", "numeric", dtypes.lowest_value,
                               extremum_combiner("stablehlo.maximum", "stablehlo.or", "GT"),
                               "Cumulative maximum along ``axis`` (from the end when ``reverse``).")
cummin_p, cummin = _cumulative("cummin", "numeric", dtypes.highest_value,
                               extremum_combiner("stablehlo.minimum", "stablehlo.and", "LT"),
                               "Cumulative minimum along ``axis`` (from the end when ``reverse``).")
cumlogsumexp_p, cumlogsumexp = _cumulative(
    "cumlogsumexp", "float", lambda d: -np.inf, _logaddexp,
    "Cumulative log(sum(exp(x))) along ``axis`` (from the end when ``reverse``).")


# cumprod/cummax/cummin/cumlogsumexp differentiate through a parallel prefix scan written
# with differentiable lax ops (pairwise combine, recurse on the halves, interleave), so
# their tangents are well defined at zeros and ties and every order of derivative works.
# The scan runs on (primal, tangent) pairs, each op applying its own jvp rule to them as a
# JVP trace of the scan would: this module needs no differentiation machinery of its own.
def _jvp_of(prim, *pairs, **params):
    """``prim`` applied to (primal, tangent) pairs by its jvp rule: the (primal, tangent)
    of its result."""
    primals = [p for p, _ in pairs]
    tangents = [t for _, t in pairs]
    if all(type(t) is Zero for t in tangents):
        out = prim.bind(*primals, **params)
        return out, Zero(tangent_aval(get_aval(out)))
    return jvp_rules[prim](primals, tangents, **params)


def _constant(x):
    """``x`` as a pair: it does not depend on the differentiated input."""
    return x, Zero(tangent_aval(get_aval(x)))


def _linear(fn, pair, *args, **kwargs):
    """A linear shape op applied to the primal and to the tangent of ``pair``."""
    return fn(pair[0], *args, **kwargs), fn(pair[1], *args, **kwargs)


def _prefix_scan(combine, x, axis: int):
    """Inclusive scan of ``combine`` along ``axis`` in O(log n) steps of lax ops, on the
    (primal, tangent) pair ``x``."""
    slice_in_dim = _slicing.slice_in_dim
    n = get_aval(x[0]).shape[axis]
    if n < 2:
        return x
    pairs = combine(_linear(slice_in_dim, x, 0, n - 1, 2, axis),
                    _linear(slice_in_dim, x, 1, n, 2, axis))
    odd = _prefix_scan(combine, pairs, axis)  # results at positions 1, 3, 5, ...
    m = get_aval(odd[0]).shape[axis]
    even = combine(_linear(slice_in_dim, odd, 0, m - 1 if n % 2 == 0 else m, 1, axis),
                   _linear(slice_in_dim, x, 2, n, 2, axis))
    first = _linear(slice_in_dim, x, 0, 1, 1, axis)
    even = tuple(_shapes.concatenate([f, e], axis) for f, e in zip(first, even))

    def spread(v, lo, hi):  # place v at every other position, zeros between
        cfg = [(0, 0, 0)] * get_aval(v[0]).ndim
        cfg[axis] = (lo, hi, 1)
        zero = _constant(np.zeros((), get_aval(v[0]).dtype))
        return _jvp_of(_shapes.pad_p, v, zero, padding_config=tuple(cfg))
    return _jvp_of(_arith.add_p, spread(even, 0, 1 - n % 2), spread(odd, 1, n % 2))


def _logaddexp_pairs(a, b):
    """log(exp(a) + exp(b)) on pairs, shifted by the max (by 0 where both are infinite)."""
    m = _jvp_of(_arith.max_p, a, b)
    finite = _jvp_of(_cmp.is_finite_p, m)
    zeros = _shapes.broadcast_in_dim(np.zeros((), get_aval(m[0]).dtype), get_aval(m[0]).shape, ())
    safe_m = _jvp_of(_cmp.select_n_p, finite, _constant(zeros), m)
    d = _jvp_of(_arith.add_p, _jvp_of(_trans.exp_p, _jvp_of(_arith.sub_p, a, safe_m)),
                _jvp_of(_trans.exp_p, _jvp_of(_arith.sub_p, b, safe_m)))
    return _jvp_of(_arith.add_p, _jvp_of(_trans.log_p, d), safe_m)


def _scan_jvp(prim, combine):
    def rule(primals, tangents, *, axis, reverse):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, axis=axis, reverse=reverse)
        if type(t) is Zero:
            return ans, Zero(get_aval(ans))
        flip = (lambda v: _linear(_shapes.rev, v, (axis,))) if reverse else (lambda v: v)
        _, out_t = flip(_prefix_scan(combine, flip((x, t)), axis))
        return ans, out_t
    jvp_rules[prim] = rule


deflinear(cumsum_p)
transpose_rules[cumsum_p] = lambda ct, x, *, axis, reverse: [
    cumsum(ct, axis=axis, reverse=not reverse)]
_scan_jvp(cumprod_p, lambda a, b: _jvp_of(_arith.mul_p, a, b))
_scan_jvp(cummax_p, lambda a, b: _jvp_of(_arith.max_p, a, b))
_scan_jvp(cummin_p, lambda a, b: _jvp_of(_arith.min_p, a, b))
_scan_jvp(cumlogsumexp_p, _logaddexp_pairs)
