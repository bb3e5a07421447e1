"""The checkify rules: the automatic checks of primitives, and the error threaded through
the bodies of higher-order primitives.

A rule is ``rule(trace, args, params) -> outs`` (see ``plax.interpreters.checkify``); it runs
in the parent trace. The checks are JAX's: a NaN in the output of the floating-point
primitives listed below (``nan_checks``), a zero divisor of ``div`` (``div_checks``), and
out-of-bounds indices of ``gather``, ``dynamic_slice``, ``dynamic_update_slice`` and the
scatters (``index_checks``, reporting the first bad index, its axis and the axis size).

A body (of pjit, cond, scan, while, checkpoint, custom_jvp/custom_vjp, the solve of
custom_linear_solve) is checkified by
``checkify_jaxpr`` into a jaxpr taking and returning the error's leaves besides its own
inputs and outputs. Loops and branches need the error to have one type in and out, so
the kinds of error a body can add are found first and added to the incoming error as
placeholders (never failed) before the body is checkified for good.
"""
from __future__ import annotations

import numpy as np

from plax import lax, tree_util
from plax.core import dtypes
from plax.core.caches import WeakKeyCache
from plax.core.dce import dce_closed
from plax.core.jaxpr import ClosedJaxpr, consts_as_inputs, eval_jaxpr
from plax.core.rules import Zero, tangent_aval
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import Tracer, get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import bitwise as _bitwise
from plax.first_order import comparison as _cmp
from plax.first_order import conversion as _conv
from plax.first_order import indexing as _indexing
from plax.first_order import reductions as _red
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.higher_order import special as _special
from plax.higher_order.bodies import (closed_call, hoist_consts, permute_body, split,
                                      trace_closed)
from plax.higher_order.cond import cond_p
from plax.higher_order.loops import while_p
from plax.higher_order.scan import scan_p
from plax.higher_order.pjit import pjit_p
from plax.higher_order.shard_map import body_context, shard_map_p
from plax.sharding.partition_spec import PartitionSpec
from plax.interpreters.checkify import (DivisionByZeroError, NaNError, OOBError, checkify_rules,
                                      effects_of, run_checkified)
from plax.higher_order.custom_derivatives import (NamedCallable, custom_jvp_call_p,
                                                  custom_vjp_call_p)
from plax.higher_order.remat import checkpoint_p
from plax.higher_order.call import bind_body, body_of, call_p, closed_call_p
from plax.higher_order.linear_solve import linear_solve_p


# --- NaN checks ---------------------------------------------------------------------------
# JAX's list of the primitives that can generate a NaN (regularized_incomplete_beta is
# plax's betainc; JAX's rng_uniform has no plax primitive; custom_linear_solve's rule is below).
NAN_PRIMITIVES = (
    "acos", "acosh", "add", "asin", "asinh", "atan2", "atan", "atanh", "bessel_i0e",
    "bessel_i1e", "cbrt", "conv_general_dilated", "cos", "cosh", "cumlogsumexp", "cummax",
    "cummin", "cumprod", "cumsum", "digamma", "dot_general", "erf_inv", "erf", "erfc", "exp",
    "expm1", "fft", "igamma_grad_a", "igamma", "igammac", "integer_pow", "lgamma", "log1p",
    "log", "logistic", "mul", "pad", "pow", "psum", "reduce", "reduce_prod", "reduce_sum",
    "reduce_window", "reduce_window_sum", "betainc", "rem", "rsqrt", "sin", "sinh", "sqrt",
    "sub", "tan", "tanh")


def _all_axes(x):
    return tuple(range(get_aval(x).ndim))


def _any(pred):
    return _red.reduce_or(pred, _all_axes(pred)) if get_aval(pred).ndim else pred


def _any_nan(outs):
    """Whether a floating output holds a NaN (a host False when none is floating)."""
    found = None
    for x in outs:
        aval = get_aval(x)
        if dtypes.is_extended(aval.dtype) or not dtypes.is_inexact(aval.dtype):
            continue
        p = _any(_cmp.ne(x, x))
        found = p if found is None else _bitwise.bitwise_or(found, p)
    return np.bool_(False) if found is None else found


def check_nans(trace, prim, out):
    if NaNError in trace.enabled:
        outs = out if prim.multiple_results else [out]
        trace.add_error(_any_nan(outs), NaNError(trace.source_info(), prim.name))


def _nan_rule(prim):
    def rule(trace, args, params):
        out = prim.bind(*args, **params)
        check_nans(trace, prim, out)
        return out
    return rule


for _name in NAN_PRIMITIVES:
    _prim = getattr(lax, f"{_name}_p", None) or getattr(_special, f"{_name}_p")
    checkify_rules[_prim] = _nan_rule(_prim)


def _div_rule(trace, args, params):
    x, y = args
    if DivisionByZeroError in trace.enabled:
        zero = np.zeros((), get_aval(y).dtype)
        trace.add_error(_any(_cmp.eq(y, zero)), DivisionByZeroError(trace.source_info()))
    out = _arith.div_p.bind(x, y, **params)
    check_nans(trace, _arith.div_p, out)
    return out


checkify_rules[_arith.div_p] = _div_rule


# --- index checks -------------------------------------------------------------------------
def _oob_payload(mask, indices, dims_map, operand_shape):
    """``[index, axis, axis size]`` (int32) of the first true entry of ``mask``; ``indices``
    has its shape and its last axis runs over ``dims_map`` (the operand axes indexed)."""
    shape = get_aval(mask).shape
    n = int(np.prod(shape))
    k = shape[-1]
    flat_mask = _conv.convert_element_type(_shapes.reshape(mask, (n,)), np.int32)
    first = _red.argmax(flat_mask, 0, np.int32)
    flat_idx = _shapes.reshape(_conv.convert_element_type(indices, np.int32), (n,))
    component = _arith.rem(first, np.int32(k))
    index = _slicing.dynamic_slice_p.bind(flat_idx, first, slice_sizes=(1,))
    axis = _slicing.dynamic_slice_p.bind(np.asarray(dims_map, np.int32), component,
                                         slice_sizes=(1,))
    size = _slicing.dynamic_slice_p.bind(np.asarray([operand_shape[d] for d in dims_map], np.int32),
                                         component, slice_sizes=(1,))
    return _shapes.concatenate([index, axis, size], 0)


def _check_bounds(trace, prim_name, indices, upper, dims_map, operand_shape):
    """An OOBError where an entry of ``indices`` (index vectors along the last axis) is
    negative or above ``upper`` (one bound per component)."""
    aval = get_aval(indices)
    if aval.size == 0:
        return
    dtype = aval.dtype
    top = np.minimum(np.asarray(upper, np.int64), np.iinfo(dtype).max).astype(dtype)
    bound = _shapes.broadcast_in_dim(top, aval.shape, (aval.ndim - 1,))
    mask = _bitwise.bitwise_or(_cmp.lt(indices, np.zeros((), dtype)), _cmp.gt(indices, bound))
    payload = _oob_payload(mask, indices, dims_map, operand_shape)
    trace.add_error(_any(mask), OOBError(trace.source_info(), prim_name, operand_shape, payload))


def _start_vector(starts):
    """Scalar start indices as one int32 vector."""
    return _shapes.concatenate(
        [_shapes.reshape(_conv.convert_element_type(s, np.int32), (1,)) for s in starts], 0)


def _dynamic_slice_rule(trace, args, params):
    operand, *starts = args
    out = _slicing.dynamic_slice_p.bind(*args, **params)
    shape = get_aval(operand).shape
    if OOBError in trace.enabled and starts:
        upper = [d - s for d, s in zip(shape, params["slice_sizes"])]
        _check_bounds(trace, "dynamic_slice", _start_vector(starts), upper, range(len(shape)),
                      shape)
    return out


def _dynamic_update_slice_rule(trace, args, params):
    operand, update, *starts = args
    out = _slicing.dynamic_update_slice_p.bind(*args, **params)
    shape = get_aval(operand).shape
    if OOBError in trace.enabled and starts:
        upper = [d - u for d, u in zip(shape, get_aval(update).shape)]
        _check_bounds(trace, "dynamic_update_slice", _start_vector(starts), upper,
                      range(len(shape)), shape)
    return out


def _gather_rule(trace, args, params):
    operand, indices = args
    out = _indexing.gather_p.bind(*args, **params)
    if OOBError in trace.enabled:
        dn, shape = params["dimension_numbers"], get_aval(operand).shape
        upper = [shape[d] - params["slice_sizes"][d] for d in dn.start_index_map]
        _check_bounds(trace, "gather", indices, upper, dn.start_index_map, shape)
    return out


def _scatter_rule(prim):
    def rule(trace, args, params):
        operand, indices, updates = args
        out = prim.bind(*args, **params)
        if OOBError not in trace.enabled:
            return out  # (as JAX: a scatter's NaN check comes with its index check)
        dn = params["dimension_numbers"]
        shape, upd_shape = get_aval(operand).shape, get_aval(updates).shape
        window = iter(dn.update_window_dims)
        sizes = [1 if d in dn.inserted_window_dims or d in dn.operand_batching_dims
                 else upd_shape[next(window)] for d in range(len(shape))]
        upper = [shape[d] - sizes[d] for d in dn.scatter_dims_to_operand_dims]
        _check_bounds(trace, prim.name, indices, upper, dn.scatter_dims_to_operand_dims, shape)
        check_nans(trace, prim, out)
        return out
    return rule


checkify_rules[_slicing.dynamic_slice_p] = _dynamic_slice_rule
checkify_rules[_slicing.dynamic_update_slice_p] = _dynamic_update_slice_rule
checkify_rules[_indexing.gather_p] = _gather_rule
for _p in (_indexing.scatter_p, _indexing.scatter_add_p, _indexing.scatter_mul_p,
           _indexing.scatter_min_p, _indexing.scatter_max_p):
    checkify_rules[_p] = _scatter_rule(_p)


# --- bodies -------------------------------------------------------------------------------
_checkified = WeakKeyCache("checkify_jaxpr")


def checkify_jaxpr(closed: ClosedJaxpr, enabled, err_tree, err_avals, description="checkify"):
    """``closed`` with an error threaded through: ``(err leaves, *inputs) -> (err leaves,
    *outputs)``. ``err_tree`` is an error's structure without its metadata (which only
    passes through); returns ``(ClosedJaxpr, out_err_tree)``, whose metadata is that of the
    checks the body adds."""
    key = (enabled, err_tree, tuple(err_avals), description)
    hit = _checkified.get(closed, key)
    if hit is not None:
        return hit
    n_err = len(err_avals)
    box = []

    def body(*args):
        err = tree_util.tree_unflatten(err_tree, list(args[:n_err]))
        err, outs = run_checkified(closed, enabled, err, args[n_err:])
        leaves, tree = tree_util.tree_flatten(err)
        box.append(tree)
        return [*leaves, *outs]

    jaxpr, consts = trace_to_jaxpr(body, [*err_avals, *closed.in_avals], description=description)
    result = (ClosedJaxpr(jaxpr, consts), box[0])
    if not any(isinstance(c, Tracer) for c in consts):
        _checkified.put(closed, key, result)
    return result


def _flat_error(error):
    """An error's leaves, its structure without metadata (so that a body checkified for one
    error is reused for every error of its type) and the leaves' types."""
    leaves, tree = tree_util.tree_flatten(error._replace(_metadata={}))
    return leaves, tree, [get_aval(x) for x in leaves]


def _with_body_effects(trace, bodies, description):
    """The trace's error with a placeholder for each kind of error ``bodies`` can add."""
    leaves, tree, avals = _flat_error(trace.error)
    effects = set()
    for b in bodies:
        effects |= effects_of(checkify_jaxpr(b, trace.enabled, tree, avals, description)[1])
    return trace.error._add_placeholder_effects(effects)


def _checkified_bodies(trace, bodies, description):
    """``(error, its leaves, checkified bodies, their out error trees)``, every body taking and
    returning an error of one type."""
    error = _with_body_effects(trace, bodies, description)
    leaves, tree, avals = _flat_error(error)
    done = [checkify_jaxpr(b, trace.enabled, tree, avals, description) for b in bodies]
    return error, leaves, [d[0] for d in done], [d[1] for d in done]


def _set_error(trace, out_trees, leaves):
    """The trace's error from a call's error outputs; the metadata of the error before the
    call and of the bodies' checks (``out_trees``, one per body) are merged."""
    metadata = dict(trace.error._metadata)
    for t in out_trees:
        metadata.update(tree_util.tree_unflatten(t, [None] * t.num_leaves)._metadata)
    trace.error = tree_util.tree_unflatten(out_trees[0], list(leaves))._replace(
        _metadata=metadata)


def _pad(seq, n, value):
    return (value,) * n + tuple(seq) if seq else ()


def _err_after_consts(closed, n_err, n_consts):
    """A checkified body taking ``(err, consts, rest)`` as a const-free body taking
    ``(its own consts, consts, err, rest)``, and its own consts."""
    body, own = consts_as_inputs(closed)
    no, total = len(own), len(body.in_avals)
    order = [*range(no), *range(no + n_err, no + n_err + n_consts), *range(no, no + n_err),
             *range(no + n_err + n_consts, total)]
    return permute_body(body, order), own


def _pjit_rule(trace, args, params):
    leaves, tree, avals = _flat_error(trace.error)
    body, out_tree = checkify_jaxpr(params["jaxpr"], trace.enabled, tree, avals,
                                    f"checkify({params['name']})")
    callee, consts = consts_as_inputs(body)
    n_in, n_out = len(consts) + len(leaves), out_tree.num_leaves
    outs = pjit_p.bind(*consts, *leaves, *args, **dict(
        params, jaxpr=callee, donated_invars=(False,) * n_in + tuple(params["donated_invars"]),
        in_shardings=_pad(params.get("in_shardings"), n_in, None),
        out_shardings=_pad(params.get("out_shardings"), n_out, None)))
    _set_error(trace, [out_tree], outs[:n_out])
    return outs[n_out:]


checkify_rules[pjit_p] = _pjit_rule


def _shard_map_rule(trace, args, params):
    """Each device checks its own block: the error goes in replicated and comes out with one
    entry per device (a leading dimension split over the manual axes), so ``get()`` names
    the failing devices by index, as for a vmapped check."""
    leaves, tree, avals = _flat_error(trace.error)
    mesh, manual = params["mesh"], params["manual_axes"]
    with body_context(mesh, manual, params["check_vma"]):
        body, out_tree = checkify_jaxpr(params["jaxpr"], trace.enabled, tree, avals,
                                        "checkify(shard_map)")
        n_err = out_tree.num_leaves

        def per_device(*xs):
            outs = eval_jaxpr(body.jaxpr, body.consts, *xs)
            errs = [_shapes.broadcast_in_dim(e, (1,) + get_aval(e).shape,
                                             tuple(range(1, 1 + get_aval(e).ndim)))
                    for e in outs[:n_err]]
            return errs + list(outs[n_err:])
        stacked = trace_closed(per_device, body.in_avals, "checkify(shard_map)")
    callee, consts = consts_as_inputs(stacked)
    axes = tuple(a for a in mesh.axis_names if a in manual)
    replicated = (PartitionSpec(),) * (len(consts) + len(leaves))
    outs = shard_map_p.bind(*consts, *leaves, *args, **dict(
        params, jaxpr=callee, in_specs=replicated + tuple(params["in_specs"]),
        out_specs=(PartitionSpec(axes),) * n_err + tuple(params["out_specs"])))
    _set_error(trace, [out_tree], outs[:n_err])
    return outs[n_err:]


checkify_rules[shard_map_p] = _shard_map_rule


def _checkpoint_rule(trace, args, params):
    leaves, tree, avals = _flat_error(trace.error)
    body, out_tree = checkify_jaxpr(params["jaxpr"], trace.enabled, tree, avals,
                                    "checkify(checkpoint)")
    callee, consts = consts_as_inputs(body)
    outs = checkpoint_p.bind(*consts, *leaves, *args, **dict(params, jaxpr=callee))
    n_out = out_tree.num_leaves
    _set_error(trace, [out_tree], outs[:n_out])
    return outs[n_out:]


checkify_rules[checkpoint_p] = _checkpoint_rule


def _call_rule_for(prim):
    """A call of the checkified body (taking and returning the error's leaves first)."""
    def rule(trace, args, params):
        leaves, tree, avals = _flat_error(trace.error)
        body, out_tree = checkify_jaxpr(body_of(params["call_jaxpr"]), trace.enabled, tree,
                                        avals, f"checkify({prim.name})")
        outs = bind_body(prim, body, [*leaves, *args])
        n_out = out_tree.num_leaves
        _set_error(trace, [out_tree], outs[:n_out])
        return outs[n_out:]
    return rule


checkify_rules[closed_call_p] = _call_rule_for(closed_call_p)
checkify_rules[call_p] = _call_rule_for(call_p)


def _cond_rule(trace, args, params):
    index, ops = args[0], args[1:]
    _, leaves, bodies, out_trees = _checkified_bodies(trace, params["branches"], "checkify(cond)")
    bodies, consts = hoist_consts(bodies)
    outs = cond_p.bind(index, *consts, *leaves, *ops, **dict(params, branches=tuple(bodies)))
    n = len(leaves)
    _set_error(trace, out_trees, outs[:n])
    return outs[n:]


checkify_rules[cond_p] = _cond_rule


def _scan_rule(trace, args, params):
    nk, nc = params["num_consts"], params["num_carry"]
    consts, carry, xs = split(args, [nk, nc])
    _, leaves, (body,), (out_tree,) = _checkified_bodies(trace, [params["jaxpr"]],
                                                          "checkify(scan)")
    ne = len(leaves)
    body, body_consts = _err_after_consts(body, ne, nk)  # the error joins the carry
    nb = len(body_consts)
    operands = [*body_consts, *consts, *leaves, *carry, *xs]
    outs = scan_p.bind(*operands, **dict(
        params, jaxpr=body, num_consts=nb + nk, num_carry=ne + nc,
        linear=(False,) * len(operands)))
    _set_error(trace, [out_tree], outs[:ne])
    return outs[ne:]


checkify_rules[scan_p] = _scan_rule


_while_bodies = WeakKeyCache("checkify while bodies")


def _body_then_cond(cond_jaxpr, body_jaxpr, cn):
    """``(cond consts, body consts, carry) -> carry``: the body, then the predicate on its
    result (computed for its checks only), so each test of the loop is checked."""
    hit = _while_bodies.get(body_jaxpr, (cond_jaxpr, cn))
    if hit is not None:
        return hit

    def run(*args):
        cconsts, rest = args[:cn], args[cn:]
        out = eval_jaxpr(body_jaxpr.jaxpr, body_jaxpr.consts, *rest)
        eval_jaxpr(cond_jaxpr.jaxpr, cond_jaxpr.consts, *cconsts, *out)
        return out

    closed = trace_closed(run, [*cond_jaxpr.in_avals[:cn], *body_jaxpr.in_avals],
                          "checkify(while body)")
    return _while_bodies.put(body_jaxpr, (cond_jaxpr, cn), closed)


def _while_rule(trace, args, params):
    # (A loop vmapped with a batched predicate, checkify(vmap(while)), runs its body on
    # members that are done too, and their checks count: JAX refuses that case, plax cannot
    # tell it from the loop. vmap(checkify(while)) is exact: the error is carried per member.)
    cn, bn = params["cond_nconsts"], params["body_nconsts"]
    cond_jaxpr, body_jaxpr = params["cond_jaxpr"], params["body_jaxpr"]
    cconsts, bconsts, carry = split(args, [cn, bn])
    # The first test of the predicate, before the loop.
    trace.eval_jaxpr(cond_jaxpr.jaxpr, cond_jaxpr.consts, [*cconsts, *carry])
    combined = _body_then_cond(cond_jaxpr, body_jaxpr, cn)
    error, leaves, (body,), (out_tree,) = _checkified_bodies(trace, [combined],
                                                              "checkify(while)")
    ne = len(leaves)
    body, body_consts = _err_after_consts(body, ne, cn + bn)
    # The loop's own tests: the predicate with its checks discharged (the body counts
    # them) and the error passed over.
    _, tree, err_avals = _flat_error(error)
    cond, _ = checkify_jaxpr(cond_jaxpr, trace.enabled, tree, err_avals, "checkify(while)")
    cond, _ = dce_closed(cond, [False] * ne + [True], instantiate=True)
    cond, cond_consts = _err_after_consts(cond, ne, cn)
    outs = while_p.bind(*cond_consts, *cconsts, *body_consts, *cconsts, *bconsts, *leaves,
                        *carry, cond_jaxpr=cond, body_jaxpr=body,
                        cond_nconsts=len(cond_consts) + cn, body_nconsts=len(body_consts) + cn + bn)
    _set_error(trace, [out_tree], outs[:ne])
    return outs[ne:]


checkify_rules[while_p] = _while_rule


# --- custom derivatives: the function checked, its rules passing the error through ----------
def _custom_call(trace, args, params, description):
    """The checkified call_jaxpr of a custom_jvp/custom_vjp call taking ``(consts, err,
    args)``, with the operands and the number of error leaves."""
    nk = params["num_consts"]
    consts, leaves_in = args[:nk], args[nk:]
    _, leaves, (body,), (out_tree,) = _checkified_bodies(trace, [params["call_jaxpr"]],
                                                          description)
    ne = len(leaves)
    body, body_consts = _err_after_consts(body, ne, nk)
    nb = len(body_consts)
    return body, [*body_consts, *consts, *leaves, *leaves_in], nb + nk, ne, out_tree


def _custom_jvp_rule(trace, args, params):
    body, operands, num_consts, ne, out_tree = _custom_call(trace, args, params,
                                                            "checkify(custom_jvp)")
    user_jvp = params["jvp"]

    def jvp(primals, tangents):  # the error passes through the rule unchanged
        outs, out_tangents = user_jvp(list(primals[ne:]), list(tangents[ne:]))
        return [*primals[:ne], *outs], [*tangents[:ne], *out_tangents]

    outs = custom_jvp_call_p.bind(*operands, **dict(
        params, call_jaxpr=body, jvp=NamedCallable(jvp, repr(user_jvp)), num_consts=num_consts))
    _set_error(trace, [out_tree], outs[:ne])
    return outs[ne:]


def _custom_vjp_rule(trace, args, params):
    body, operands, num_consts, ne, out_tree = _custom_call(trace, args, params,
                                                            "checkify(custom_vjp)")
    user_fwd = params["fwd"]

    def fwd(primals, perturbed):  # the error passes through; it gets no cotangent
        outs, res, user_bwd = user_fwd(list(primals[ne:]), tuple(perturbed[ne:]))
        err_avals = [tangent_aval(get_aval(x)) for x in primals[:ne]]

        def bwd(res, cts):
            return [*(Zero(a) for a in err_avals), *user_bwd(res, list(cts[ne:]))]

        return [*primals[:ne], *outs], res, NamedCallable(bwd, repr(user_bwd))

    outs = custom_vjp_call_p.bind(*operands, **dict(
        params, call_jaxpr=body, fwd=NamedCallable(fwd, repr(user_fwd)), num_consts=num_consts))
    _set_error(trace, [out_tree], outs[:ne])
    return outs[ne:]


checkify_rules[custom_jvp_call_p] = _custom_jvp_rule
checkify_rules[custom_vjp_call_p] = _custom_vjp_rule


# --- custom_linear_solve: the solve checked, its error returned after its outputs -----------
def _with_error_operands(body, ne, n_consts, description, keep_error: bool):
    """A checkified solve body ``(err, consts, b) -> (err, outs)`` as a const-free body
    taking ``(own consts, consts, err, b)`` and returning ``(outs, err)`` (or ``outs`` only),
    with its own consts."""
    def solve(*ops):
        outs = closed_call(body)(*ops[n_consts:n_consts + ne], *ops[:n_consts],
                                 *ops[n_consts + ne:])
        return [*outs[ne:], *outs[:ne]] if keep_error else list(outs[ne:])

    ins = body.in_avals
    in_avals = [*ins[ne:ne + n_consts], *ins[:ne], *ins[ne + n_consts:]]
    return consts_as_inputs(trace_closed(solve, in_avals, description))


def _linear_solve_rule(trace, args, params):
    """The solve body checkified: it takes the error's leaves as constants after its own and
    returns them after its outputs (as auxiliary outputs, which carry no derivative); then
    JAX's NaN check of the results. transpose_solve, which only derivatives run (on
    cotangents), is checkified with its error dropped, as are the tangent solves'."""
    lengths, jaxprs = params["const_lengths"], params["jaxprs"]
    consts = []
    i = 0
    for n in lengths:
        consts.append(list(args[i:i + n]))
        i += n
    b = list(args[i:])
    description = "checkify(custom_linear_solve)"
    bodies = [jaxprs.solve] + ([jaxprs.transpose_solve] if jaxprs.transpose_solve else [])
    _, leaves, done, out_trees = _checkified_bodies(trace, bodies, description)
    ne, n_out = len(leaves), len(jaxprs.solve.out_avals)
    solve, own = _with_error_operands(done[0], ne, lengths.solve, description, True)
    new_consts = consts[:2] + [[*own, *consts[2], *leaves], consts[3]]
    new_jaxprs = jaxprs._replace(solve=solve)
    if jaxprs.transpose_solve is not None:
        tsolve, own = _with_error_operands(done[1], ne, lengths.transpose_solve, description,
                                           False)
        new_consts[3] = [*own, *consts[3], *leaves]
        new_jaxprs = new_jaxprs._replace(transpose_solve=tsolve)
    outs = linear_solve_p.bind(*(c for cs in new_consts for c in cs), *b, **dict(
        params, const_lengths=type(lengths)(*(len(c) for c in new_consts)), jaxprs=new_jaxprs))
    _set_error(trace, out_trees[:1], outs[n_out:])
    outs = outs[:n_out]
    check_nans(trace, linear_solve_p, outs)
    return outs


checkify_rules[linear_solve_p] = _linear_solve_rule
