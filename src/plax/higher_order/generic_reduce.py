"""lax.reduce: a reduction whose combiner is a Python function.

The combiner is traced once per operand types into a jaxpr on scalars. When it
is one of lax.add/mul/max/min/bitwise_and/or/xor on a single operand with that
op's identity as the (concrete) init value, the specialised reduction
(reduce_sum, ...) is used instead, as in JAX. Otherwise the ``reduce`` primitive
holds the jaxpr, which lowers to the region of a ``stablehlo.reduce``.

Its derivative is that of a pairwise tree reduction of the differentiated
combiner (so it needs no inverse of the combiner); batching moves the batch
dimension of every operand to the front.
"""
from __future__ import annotations

import math

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.caches import WeakKeyCache
from plax.core.jaxpr import ClosedJaxpr, eval_jaxpr
from plax.core.primitive import Primitive
from plax.core.sharding_types import reduction_rule, sharding_rules
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, jvp_rules, not_mapped,
                             param_printers, register_lowering, tangent_aval)
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import Tracer, get_aval, name_stack
from plax.first_order import arithmetic as _arith
from plax.first_order import bitwise as _bitwise
from plax.first_order import conversion as _conv
from plax.first_order import reductions as _reductions
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.batch_util import bdim_at_front, move_batch_dim
from plax.first_order.common import as_int_tuple
from plax.lowering.consts import const_operands
from plax.lowering.stablehlo import i64_array, lower_jaxpr_body
# A higher-order primitive: its rules differentiate and batch the traced combiner.
from plax.transforms.jvp import jvp_flat
from plax.transforms.vmap import AxisData, batch_flat

__all__ = ["reduce"]

reduce_p = Primitive("reduce", multiple_results=True)


# --- the specialised reductions ---------------------------------------------------------
def init_equals(init, value) -> bool:
    """Whether the initial value ``init`` is known to equal ``value`` (False when it cannot be
    read, e.g. while traced)."""
    try:
        return bool(np.asarray(init) == value)
    except (TypeError, ValueError):
        return False


def _monoid_reducer(computation, init, dtype):
    """The reduce_* function equivalent to reducing with ``computation`` from ``init``,
    or None. Only a concrete init that is the op's identity for ``dtype`` qualifies."""
    if isinstance(init, Tracer) or np.shape(init) != ():
        return None
    if hasattr(init, "aval"):  # a concrete Array
        init = np.asarray(init)
    if computation is _arith.add and init_equals(init, 0):
        return _reductions.reduce_sum
    if computation is _arith.mul and init_equals(init, 1):
        return _reductions.reduce_prod
    if computation is _arith.max and init_equals(init, dtypes.lowest_value(dtype)):
        return _reductions.reduce_max
    if computation is _arith.min and init_equals(init, dtypes.highest_value(dtype)):
        return _reductions.reduce_min
    if dtypes.is_integer(dtype) or dtypes.is_bool(dtype):
        if computation is _bitwise.bitwise_and and \
                init_equals(init, _reductions.all_bits_set(dtype)):
            return _reductions.reduce_and
        if computation is _bitwise.bitwise_or and init_equals(init, 0):
            return _reductions.reduce_or
        if computation is _bitwise.bitwise_xor and init_equals(init, 0):
            return _reductions.reduce_xor
    return None


# --- tracing the combiner -----------------------------------------------------------------
_combiners = WeakKeyCache("reduce computations")


def combiner_jaxpr(computation, scalar_avals: tuple, tree) -> ClosedJaxpr:
    """``computation(a, b)`` on scalar pytrees ``a``, ``b`` of structure ``tree``, as a jaxpr
    taking the leaves of ``a`` then those of ``b`` (cached per computation, held weakly)."""
    key = (scalar_avals, tree, name_stack())
    try:
        hit = _combiners.get(computation, key)
    except TypeError:  # not weakly referenceable, or unhashable: traced every time
        return _trace_combiner(computation, scalar_avals, tree)
    if hit is None:
        hit = _combiners.put(computation, key, _trace_combiner(computation, scalar_avals, tree))
    return hit


def _trace_combiner(computation, scalar_avals: tuple, tree) -> ClosedJaxpr:
    n = len(scalar_avals)

    def flat(*xs):
        a = tree_util.tree_unflatten(tree, list(xs[:n]))
        b = tree_util.tree_unflatten(tree, list(xs[n:]))
        out = computation(a, b)
        leaves, out_tree = tree_util.tree_flatten(out)
        if out_tree != tree:
            raise ValueError(f"reduce computation must return a value of the operands' structure "
                             f"{tree}, got {out_tree}.")
        fixed = []
        for leaf, want in zip(leaves, scalar_avals):
            got = get_aval(leaf)
            if got.shape != () or (got.dtype != want.dtype and not got.weak_type):
                raise ValueError(f"reduce computation must return scalars of the operand types "
                                 f"({', '.join(a.str_short() for a in scalar_avals)}), got "
                                 f"{got.str_short()}.")
            fixed.append(leaf if got.dtype == want.dtype
                         else _conv.convert_with_weak_type(leaf, want.dtype, False))
        return fixed

    jaxpr, consts = trace_to_jaxpr(flat, list(scalar_avals) * 2,
                                   description=f"reduce computation {getattr(computation, '__name__', '')}")
    if any(isinstance(c, Tracer) for c in consts):
        raise NotImplementedError(
            "Reduction computations can't close over Tracers: the function given to lax.reduce "
            "uses a value traced by an enclosing transformation. Pass that value as an extra "
            "operand (or make it a constant).")
    return ClosedJaxpr(jaxpr, consts)


def reduce(operands, init_values, computation, dimensions):
    """Reduce ``operands`` over ``dimensions`` with ``computation(a, b)``, starting from
    ``init_values`` (a pytree of scalars with the structure of ``operands``).

    ``computation`` should be associative and commutative: XLA combines the
    elements in an unspecified order.
    """
    flat_ops, tree = tree_util.tree_flatten(operands)
    flat_inits, init_tree = tree_util.tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError(f"Operands must have the same tree structure as init_values: {tree} vs. "
                         f"{init_tree}.")
    dims = as_int_tuple(dimensions, "reduce dimensions")
    if len(flat_ops) == 1:
        monoid = _monoid_reducer(computation, flat_inits[0], get_aval(flat_ops[0]).dtype)
        if monoid is not None:
            return tree_util.tree_unflatten(tree, [monoid(flat_ops[0], dims)])
    op_avals = [get_aval(x) for x in flat_ops]
    scalars = tuple(ShapedArray((), a.dtype) for a in op_avals)
    # Check the types before tracing the computation on them.
    abstract_eval_rules[reduce_p](*op_avals, *[get_aval(i) for i in flat_inits], jaxpr=None,
                                  computation=computation, dimensions=dims)
    jaxpr = combiner_jaxpr(computation, scalars, tree)
    outs = reduce_p.bind(*flat_ops, *flat_inits, computation=computation, jaxpr=jaxpr,
                         dimensions=dims)
    return tree_util.tree_unflatten(tree, outs)


# --- rules ---------------------------------------------------------------------------------
def _reduce_abstract(*avals, computation, jaxpr, dimensions):
    n = len(avals) // 2
    ops, inits = avals[:n], avals[n:]
    if not ops:
        raise ValueError("reduce needs at least one operand.")
    if any(i.shape != () for i in inits):
        raise ValueError(f"reduce found non-scalar initial value: {[i.shape for i in inits]}")
    if any(o.dtype != i.dtype for o, i in zip(ops, inits)):
        raise TypeError("reduce operand dtypes should match corresponding initial value dtypes, "
                        f"got operands={list(ops)} and initial_values={list(inits)}. Convert the "
                        "initial values to the operands' dtypes.")
    if any(o.shape != ops[0].shape for o in ops):
        raise ValueError(f"reduce operands must all have the same shape, got "
                         f"{[o.shape for o in ops]}.")
    _reductions.check_reduction_axes("reduce", ops[0], dimensions)
    shape = _reductions.reduced_shape(ops[0].shape, dimensions)
    return [ShapedArray(shape, o.dtype) for o in ops]


def _reduce_lowering(ctx, *args, computation, jaxpr, dimensions):
    n = len(args) // 2
    if not dimensions:
        return list(args[:n])
    scalars = [ShapedArray((), a.dtype) for a in ctx.avals_in[:n]]

    def body(c, *region_args):
        consts = const_operands(c, jaxpr)
        return lower_jaxpr_body(c.fn, jaxpr.jaxpr, consts + list(region_args)), scalars

    region = ctx.region(scalars + scalars, body)
    return ctx.op("stablehlo.reduce", list(args), props=f"dimensions = {i64_array(sorted(dimensions))}",
                  regions=region)


def apply_combiner(jaxpr: ClosedJaxpr, xs: list, ys: list) -> list:
    """The combiner applied elementwise to equal-shape arrays ``xs`` and ``ys``."""
    shape = get_aval(xs[0]).shape
    size = math.prod(shape)
    flat = [_shapes.reshape(v, (size,)) for v in xs + ys]
    outs, out_dims = batch_flat(lambda *s: eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *s), flat,
                                [0] * len(flat), AxisData(None, size), "reduce computation")
    return [_shapes.reshape(move_batch_dim(o, d, 0, size), shape) for o, d in zip(outs, out_dims)]


def _tree_reduce(jaxpr, dimensions, n_ops):
    """A function of (operands, init values) computing the reduction as a pairwise tree of
    the combiner (then combined with the init values): differentiable like the combiner."""
    def run(*args):
        ops, inits = list(args[:n_ops]), list(args[n_ops:])
        shape = get_aval(ops[0]).shape
        kept = tuple(i for i in range(len(shape)) if i not in dimensions)
        rest = tuple(shape[i] for i in kept)
        m = math.prod(shape[d] for d in dimensions)
        perm = tuple(sorted(dimensions)) + kept
        xs = [_shapes.reshape(x, (m,) + rest, perm) for x in ops]
        while m > 1:
            h = m // 2
            pairs = apply_combiner(jaxpr, [_slicing.slice_in_dim(x, 0, h, axis=0) for x in xs],
                                   [_slicing.slice_in_dim(x, h, 2 * h, axis=0) for x in xs])
            if m % 2:
                pairs = [_shapes.concatenate([p, _slicing.slice_in_dim(x, 2 * h, m, axis=0)], 0)
                         for p, x in zip(pairs, xs)]
            xs, m = pairs, h + m % 2
        start = [_shapes.broadcast_in_dim(i, rest, ()) for i in inits]
        if m == 0:
            return start
        return apply_combiner(jaxpr, start, [_shapes.reshape(x, rest) for x in xs])
    return run


def _reduce_jvp(primals, tangents, *, computation, jaxpr, dimensions):
    n = len(primals) // 2
    if any(type(t) is not Zero for t in tangents[n:]):
        raise NotImplementedError("Differentiating lax.reduce with non-zero tangents for its "
                                  "initial values is not implemented: make the init values "
                                  "constants and combine the result with them afterwards.")
    outs = reduce_p.bind(*primals, computation=computation, jaxpr=jaxpr, dimensions=dimensions)
    if not dimensions:
        return outs, list(tangents[:n])
    if get_aval(outs[0]).size == 0:
        return outs, [Zero(tangent_aval(get_aval(o))) for o in outs]
    _, out_t = jvp_flat(_tree_reduce(jaxpr, dimensions, n), list(primals), list(tangents))
    return outs, out_t


def _reduce_batch(axis, vals, dims, *, computation, jaxpr, dimensions):
    n = len(vals) // 2
    if any(d is not not_mapped for d in dims[n:]):
        raise NotImplementedError("vmap of lax.reduce with batched init_values is not "
                                  "supported: the init values must be the same for every "
                                  "example.")
    ops = [bdim_at_front(v, d, axis.size) for v, d in zip(vals[:n], dims[:n])]
    outs = reduce_p.bind(*ops, *vals[n:], computation=computation, jaxpr=jaxpr,
                         dimensions=tuple(d + 1 for d in dimensions))
    return outs, [0] * n


abstract_eval_rules[reduce_p] = _reduce_abstract
sharding_rules[reduce_p] = lambda avals_in, avals_out, *, dimensions, **_: reduction_rule(
    avals_in, avals_out, axes=dimensions)
register_lowering(reduce_p, _reduce_lowering)
param_printers[reduce_p] = lambda p: {"computation": p["computation"],
                                      "dimensions": p["dimensions"], "jaxpr": p["jaxpr"]}
jvp_rules[reduce_p] = _reduce_jvp
batch_rules[reduce_p] = _reduce_batch
