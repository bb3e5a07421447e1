"""while_loop and fori_loop: the ``while`` primitive.

``while_p.bind(*cond_consts, *body_consts, *init, cond_jaxpr, body_jaxpr,
cond_nconsts, body_nconsts)`` repeats ``carry = body_jaxpr(*body_consts, *carry)``
while ``cond_jaxpr(*cond_consts, *carry)`` is true. Both jaxprs are const-free.

Rules: jvp carries tangents along (a fixed point finds which carries have
them); partial evaluation runs the known carries in a known loop and stages
the whole loop again for the unknown ones (no per-iteration residuals can be
kept, so it is forward-mode only: transposing raises JAX's error); vmap
batches the bodies, and a batched predicate runs the loop until every member
is done, freezing finished members with ``select_n``; DCE drops the carries
neither the outputs nor the predicate need.

``fori_loop`` with concrete bounds is a ``scan`` (so it is reverse-differentiable),
and a ``while`` otherwise, as JAX decides.

It also gives ``threefry2x32`` its CPU lowering, a loop over the hash's groups of rounds
(JAX's CPU lowering), which ``first_order/prng.py`` cannot write below this layer.
"""
from __future__ import annotations

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core import errors
from plax.core.config import config
from plax.core.dce import dce_closed, jaxpr_has_effects
from plax.core.jaxpr import ClosedJaxpr, open_jaxpr
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, dce_rules, discharge_rules,
                             jaxpr_operand_rules, jvp_rules,
                             not_mapped, param_printers, partial_eval_rules, register_lowering,
                             tangent_aval, transpose_rules, replication_rules)
from plax.core.trace import Tracer, get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import bitwise as _bitwise
from plax.first_order import comparison as _comparison
from plax.first_order import conversion as _conversion
from plax.first_order import prng as _prng
from plax.first_order import reductions as _reductions
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.ad_util import instantiate
from plax.first_order.batch_util import move_batch_dim
from plax.first_order.common import check_same_shapes
from plax.higher_order import ref_effects
from plax.higher_order.bodies import (as_array, avals_of, carry_fixed_point, check_carry,
                                          closed_call, forwarded_inputs, hoist_consts,
                                          index_groups, mask_union, permute_body,
                                          promote_weak_inits, same_type, split, trace_body,
                                          trace_closed, widen_inputs, wrapper_for)
from plax.lowering.consts import const_operands
from plax.lowering.inline import lower_fun
from plax.core.effects import (check_allowed, control_flow_allowed_effects, has_ordered_effects,
                               jaxpr_effects)
from plax.lowering.stablehlo import abstract_token, lower_jaxpr_body
from plax.transforms.discharge import run_discharged
from plax.transforms.toolkit import batch_jaxpr, jvp_jaxpr, partial_eval_jaxpr
from plax.core.tracebacks import api_boundary
from plax.core.hi_types import lower_tree, raise_tree

__all__ = ["while_loop", "fori_loop", "while_p"]

while_p = Primitive("while", multiple_results=True)


# --- the public functions -----------------------------------------------------------------
@api_boundary
def while_loop(cond_fun, body_fun, init_val):
    """Repeat ``val = body_fun(val)`` while ``cond_fun(val)``, starting from ``init_val``;
    returns the final ``val``. Not reverse-differentiable (use ``scan``)."""
    if not (callable(body_fun) and callable(cond_fun)):
        raise TypeError("lax.while_loop: body_fun and cond_fun arguments should be callable.")
    ref_effects.refuse_carried_references("while_loop", init_val)
    lowered = lower_tree(init_val)
    if lowered is not None:  # hi values in the carry: carried as their lo values
        # (one wrapper per function, so that their traces are reused from call to call)
        cond = wrapper_for(cond_fun, "while_loop lo cond",
                           lambda get: lambda c: get()(raise_tree(c)))
        body = wrapper_for(body_fun, "while_loop lo body",
                           lambda get: lambda c: lower_carry(get()(raise_tree(c))))
        return raise_tree(while_loop(cond, body, lowered))
    # References the functions close over from outside are carried through the loop.
    return ref_effects.with_closed_refs(
        lambda: _while_loop(cond_fun, body_fun, init_val),
        lambda refs: _while_carrying_refs(refs, cond_fun, body_fun, init_val))


def lower_carry(tree):
    """A loop body's new carry with its hi values as lo values."""
    lowered = lower_tree(tree)
    return tree if lowered is None else lowered


def _while_carrying_refs(refs, cond_fun, body_fun, init_val):
    def cond(carry):
        held, val = carry
        with ref_effects.bound(refs, held):
            pred = cond_fun(val)
            if not all(map(ref_effects.same_contents, ref_effects.final_values(refs), held)):
                raise ValueError("while_loop's cond_fun wrote to a mutable array reference: "
                                 "only body_fun may update references.")
        return pred

    def body(carry):
        held, val = carry
        with ref_effects.bound(refs, held):
            val = body_fun(val)
            finals = ref_effects.final_values(refs)
        ref_effects.check_types_kept(refs, held, finals, "while_loop")
        return finals, val

    held, val = _while_loop(cond, body, (ref_effects.read_all(refs), init_val))
    ref_effects.write_all(refs, held)
    return val


def _while_loop(cond_fun, body_fun, init_val):
    if config.read("disable_jit"):
        try:
            val = tree_util.tree_map(as_array, init_val)
            while cond_fun(val):
                val = tree_util.tree_map(as_array, body_fun(val))
            return val
        except errors.ConcretizationTypeError:
            pass  # under a transformation that hides the predicate: run the primitive
    leaves, tree = tree_util.tree_flatten(init_val)
    in_tree = tree_util.tree_structure((init_val,))
    avals = avals_of(leaves)

    def trace(avals):
        cond_closed, cond_tree = trace_body(cond_fun, in_tree, avals, "while_loop cond_fun")
        if cond_tree.num_leaves != 1 or not tree_util.treedef_is_leaf(cond_tree):
            raise TypeError(f"cond_fun must return a boolean scalar, but got pytree {cond_tree}.")
        pred = cond_closed.out_avals[0]
        if pred.shape != () or pred.dtype != np.bool_:
            raise TypeError(f"cond_fun must return a boolean scalar, but got output type(s) "
                            f"{list(cond_closed.out_avals)}.")
        body_closed, body_tree = trace_body(body_fun, in_tree, avals, "while_loop body_fun")
        check_allowed(jaxpr_effects(cond_closed) | jaxpr_effects(body_closed),
                      control_flow_allowed_effects, "in `while`")
        return cond_closed, body_closed, body_tree

    cond_closed, body_closed, body_tree = trace(avals)
    if body_tree == tree:
        leaves, changed = promote_weak_inits(leaves, avals, body_closed.out_avals)
        if changed:
            avals = avals_of(leaves)
            cond_closed, body_closed, body_tree = trace(avals)
    check_carry("while_loop body", body_fun, tree, avals, body_tree, body_closed.out_avals,
                init_val)
    (cond_body,), cond_consts = hoist_consts([cond_closed])
    (body,), body_consts = hoist_consts([body_closed])
    # A carry the body returns unchanged and the predicate does not read is a body const
    # (so a batched predicate does not batch it).
    cn, bn = len(cond_consts), len(body_consts)
    _, cond_uses = dce_closed(cond_body, [True])
    moved = [f == bn + i and not cond_uses[cn + i]
             for i, f in enumerate(forwarded_inputs(body))]
    carry = list(leaves)
    if any(moved):
        cond_body, _ = dce_closed(cond_body, [True],
                                  instantiate=[True] * cn + [not m for m in moved])
        body, _ = dce_closed(body, [not m for m in moved], instantiate=True)
        order = ([bn + i for i, m in enumerate(moved) if m] + list(range(bn))
                 + [bn + i for i, m in enumerate(moved) if not m])
        body = permute_body(body, order)
        body_consts = [c for c, m in zip(leaves, moved) if m] + body_consts
        carry = [c for c, m in zip(leaves, moved) if not m]
    outs = iter(while_p.bind(*cond_consts, *body_consts, *carry, cond_jaxpr=cond_body,
                             body_jaxpr=body, cond_nconsts=cn, body_nconsts=len(body_consts)))
    return tree_util.tree_unflatten(tree, [as_array(leaves[i]) if m else next(outs)
                                           for i, m in enumerate(moved)])




@api_boundary
def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """``val = body_fun(i, val)`` for ``i`` in ``range(lower, upper)``.

    With concrete bounds this is a ``scan`` of ``upper - lower`` steps (so it can be
    reverse-differentiated); with traced bounds a ``while_loop``.
    """
    if not callable(body_fun):
        raise TypeError("lax.fori_loop: body_fun argument should be callable.")
    lower_dtype, upper_dtype = dtypes.result_type(lower), dtypes.result_type(upper)
    dtype = lower_dtype if lower_dtype == upper_dtype else None
    if dtype is None and lower_dtype.kind == "i" and upper_dtype.kind == "i":
        lower_weak, upper_weak = _is_weak(lower), _is_weak(upper)
        if lower_weak and not upper_weak:
            dtype = upper_dtype
        elif upper_weak and not lower_weak:
            dtype = lower_dtype
    if dtype is None:
        raise TypeError("lower and upper arguments to fori_loop must have equal types, got "
                        f"{lower_dtype.name} and {upper_dtype.name}")
    bounds = _concrete_ints(lower, upper)
    if bounds is not None:
        from plax.higher_order.scan import scan

        lo, hi = bounds
        length = max(hi - lo, 0)
        if config.read("disable_jit") and length == 0:
            return init_val
        (_, result), _ = scan(_fori_body(body_fun, "scan"), (lo, init_val), None, length=length,
                              unroll=False if unroll is None else unroll)
        return result
    if unroll is not None and unroll is not False and unroll != 1:
        raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are "
                         "statically known.")
    if lower_dtype != dtype:
        lower = _conversion.convert_element_type(lower, dtype)
    if upper_dtype != dtype:
        upper = _conversion.convert_element_type(upper, dtype)
    _, _, result = while_loop(_fori_cond, _fori_body(body_fun, "while"), (lower, upper, init_val))
    return result


def _is_weak(x) -> bool:
    return type(x) in (int, float, complex, bool) or bool(getattr(get_aval(x), "weak_type", False))


def _concrete_ints(lower, upper):
    values = []
    for x in (lower, upper):
        if isinstance(x, Tracer):
            x = x.to_concrete_value()
            if x is None:
                return None
        try:
            values.append(int(x))
        except TypeError:
            return None
    return tuple(values)


def _fori_cond(carry):
    i, upper, _ = carry
    return i < upper


def _fori_body(body_fun, kind: str):
    """``body_fun(i, x)`` as the body of the scan (``kind`` "scan") or while_loop a
    fori_loop becomes (one wrapper per function, so its traced body is reused)."""
    return wrapper_for(body_fun, f"fori_loop {kind}", lambda get: _make_fori_body(get, kind))


def _make_fori_body(get_fun, kind: str):
    if kind == "scan":
        def scan_body(carry, _):
            i, x = carry
            return (i + 1, get_fun()(i, x)), None
        return scan_body

    def while_body(carry):
        i, upper, x = carry
        return i + 1, upper, get_fun()(i, x)
    return while_body


# --- abstract evaluation ------------------------------------------------------------------
def _abstract(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cond_consts, body_consts, carry = split(avals, [cond_nconsts, body_nconsts])
    _check_inputs("while cond_jaxpr", cond_jaxpr, cond_consts + carry)
    _check_inputs("while body_jaxpr", body_jaxpr, body_consts + carry)
    pred = cond_jaxpr.out_avals
    if len(pred) != 1 or pred[0].shape != () or pred[0].dtype != np.bool_:
        raise TypeError(f"while cond_jaxpr must return a boolean scalar, got "
                        f"({', '.join(a.str_short() for a in pred)}).")
    outs = body_jaxpr.out_avals
    if len(outs) != len(carry) or not all(same_type(a, b) for a, b in zip(outs, carry)):
        raise TypeError(f"while body_jaxpr must return the carry types "
                        f"({', '.join(a.str_short() for a in carry)}), got "
                        f"({', '.join(a.str_short() for a in outs)}).")
    return outs


def _check_inputs(what, closed, avals):
    ins = closed.in_avals
    if len(ins) != len(avals) or not all(same_type(a, b) for a, b in zip(ins, avals)):
        raise TypeError(f"{what} takes ({', '.join(a.str_short() for a in ins)}) but is given "
                        f"({', '.join(a.str_short() for a in avals)}).")


abstract_eval_rules[while_p] = _abstract
param_printers[while_p] = lambda p: {"body_jaxpr": p["body_jaxpr"],
                                     "body_nconsts": p["body_nconsts"],
                                     "cond_jaxpr": p["cond_jaxpr"],
                                     "cond_nconsts": p["cond_nconsts"]}


# --- jvp: tangents carried along ------------------------------------------------------------
def _jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cond_consts, body_consts, carry = split(primals, [cond_nconsts, body_nconsts])
    _, bconst_t, carry_t = split(tangents, [cond_nconsts, body_nconsts])
    bconst_nz = [type(t) is not Zero for t in bconst_t]
    carry_nz = [type(t) is not Zero and dtypes.is_inexact(get_aval(c).dtype)
                for t, c in zip(carry_t, carry)]
    carry_nz = carry_fixed_point(carry_nz, lambda nz: jvp_jaxpr(
        body_jaxpr, bconst_nz + nz, instantiate=nz, description="jvp(while)")[1])
    jvp_body, _ = jvp_jaxpr(body_jaxpr, bconst_nz + carry_nz, instantiate=carry_nz,
                            description="jvp(while)")
    (jvp_body,), extra = hoist_consts([jvp_body])
    nb, nc = len(body_consts), len(carry)
    nbt, nct = sum(bconst_nz), sum(carry_nz)
    # Inputs are (extra, consts, carry, const tangents, carry tangents): the tangents of
    # the consts join the consts, those of the carry the carry.
    e = len(extra)
    g = index_groups([e, nb, nc, nbt, nct])
    jvp_body = permute_body(jvp_body, g[0] + g[1] + g[3] + g[2] + g[4])
    carry_t_in = [_instantiate(t, c) for t, c, nz in zip(carry_t, carry, carry_nz) if nz]
    cond_avals = cond_jaxpr.in_avals + [get_aval(t) for t in carry_t_in]
    jvp_cond = widen_inputs(cond_jaxpr, cond_avals, list(range(len(cond_jaxpr.in_avals))))
    outs = while_p.bind(*cond_consts, *extra, *body_consts,
                        *(t for t in bconst_t if type(t) is not Zero), *carry, *carry_t_in,
                        cond_jaxpr=jvp_cond, body_jaxpr=jvp_body, cond_nconsts=cond_nconsts,
                        body_nconsts=e + nb + nbt)
    it = iter(outs[nc:])
    return outs[:nc], [next(it) if nz else Zero(tangent_aval(get_aval(c)))
                       for c, nz in zip(carry, carry_nz)]


def _instantiate(t, primal):
    return instantiate(Zero(tangent_aval(get_aval(primal)))) if type(t) is Zero else t


jvp_rules[while_p] = _jvp


# --- partial evaluation: known carries in a known loop, the whole loop staged again ---------
def _partial_eval(trace, args, params):
    cn, bn = params["cond_nconsts"], params["body_nconsts"]
    unknowns = [trace.is_unknown(a) for a in args]
    cond_uk, bconst_uk, carry_uk = split(unknowns, [cn, bn])
    body, cond_jaxpr = params["body_jaxpr"], params["cond_jaxpr"]
    if not any(cond_uk):
        carry_uk = carry_fixed_point(carry_uk, lambda uk: partial_eval_jaxpr(
            body, bconst_uk + uk, instantiate=uk, description="while body")[2])
        pred_uk = partial_eval_jaxpr(cond_jaxpr, cond_uk + carry_uk, False)[2][0]
    if any(cond_uk) or pred_uk or all(carry_uk):
        return trace.stage(while_p, args, params)
    # The known loop: the body and predicate pruned to the known carries.
    known_carry = [not u for u in carry_uk]
    nb = len(bconst_uk)
    known_body, used_b = dce_closed(body, known_carry, instantiate=[False] * nb + known_carry)
    known_cond, used_c = dce_closed(cond_jaxpr, [True], instantiate=[False] * cn + known_carry)
    cond_consts, body_consts, carry = split(args, [cn, bn])
    kc = [c for c, u in zip(cond_consts, used_c[:cn]) if u]
    kb = [c for c, u in zip(body_consts, used_b[:nb]) if u]
    known_out = trace.known(while_p, [*kc, *kb, *(c for c, k in zip(carry, known_carry) if k)],
                            dict(params, cond_jaxpr=known_cond, body_jaxpr=known_body,
                                 cond_nconsts=len(kc), body_nconsts=len(kb)))
    staged = trace.stage(while_p, args, params)
    k = iter(known_out)
    return [s if u else next(k) for s, u in zip(staged, carry_uk)]


partial_eval_rules[while_p] = _partial_eval


def _transpose(cts, *args, **params):
    raise ValueError("Reverse-mode differentiation does not work for lax.while_loop or "
                     "lax.fori_loop with dynamic start/stop values. Try using lax.scan, or "
                     "using fori_loop with static start/stop.")


transpose_rules[while_p] = _transpose


# --- batching -----------------------------------------------------------------------------
def _batch(axis, vals, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cn, bn = cond_nconsts, body_nconsts
    cconsts, bconsts, carry = split(vals, [cn, bn])
    cdims, bdims, carry_dims = split(dims, [cn, bn])

    def batched_out(carry_b):
        _, _, got = batch_jaxpr(body_jaxpr, axis, bdims + [0 if b else None for b in carry_b],
                                description="vmap(while body)")
        return [d is not not_mapped for d in got]

    carry_b = carry_fixed_point([d is not not_mapped for d in carry_dims], batched_out)
    _, _, (pred_dim,) = batch_jaxpr(cond_jaxpr, axis, cdims + [0 if b else None for b in carry_b],
                                    description="vmap(while cond)")
    if pred_dim is not not_mapped:
        carry_b = [True] * len(carry)
    in_carry_dims = [0 if b else None for b in carry_b]
    carry = [move_batch_dim(c, d, 0, axis.size) if b else c
             for c, d, b in zip(carry, carry_dims, carry_b)]
    bj, bc, _ = batch_jaxpr(body_jaxpr, axis, bdims + in_carry_dims, out_dims=in_carry_dims,
                            description="vmap(while body)")
    cj, cc, _ = batch_jaxpr(cond_jaxpr, axis, cdims + in_carry_dims,
                            description="vmap(while cond)")
    body_b, cond_b = ClosedJaxpr(bj, bc), ClosedJaxpr(cj, cc)
    carry_avals = [get_aval(c) for c in carry]
    cconst_avals = [get_aval(c) for c in cconsts]
    if pred_dim is not_mapped:
        (cond_body,), cextra = hoist_consts([cond_b])
        (body,), bextra = hoist_consts([body_b])
        outs = while_p.bind(*cextra, *cconsts, *bextra, *bconsts, *carry, cond_jaxpr=cond_body,
                            body_jaxpr=body, cond_nconsts=len(cextra) + cn,
                            body_nconsts=len(bextra) + bn)
        return outs, in_carry_dims
    # A batched predicate: loop while any member goes on; finished members keep their carry.
    nc = len(carry)

    def any_running(*args):
        (pred,) = closed_call(cond_b)(*args)
        return [_reductions.reduce_or(move_batch_dim(pred, pred_dim, 0, axis.size), (0,))]

    def step(*args):
        cc_args, bc_args, carry_args = split(args, [cn, bn])
        (pred,) = closed_call(cond_b)(*cc_args, *carry_args)
        pred = move_batch_dim(pred, pred_dim, 0, axis.size)
        new = closed_call(body_b)(*bc_args, *carry_args)
        return [_comparison.select_n(_shapes.broadcast_in_dim(pred, get_aval(n).shape, (0,)), old, n)
                for old, n in zip(carry_args, new)]

    bconst_avals = [get_aval(c) for c in bconsts]
    new_cond = trace_closed(any_running, cconst_avals + carry_avals, "vmap(while cond)")
    new_body = trace_closed(step, cconst_avals + bconst_avals + carry_avals, "vmap(while body)")
    (cond_body,), cextra = hoist_consts([new_cond])
    (body,), bextra = hoist_consts([new_body])
    outs = while_p.bind(*cextra, *cconsts, *bextra, *cconsts, *bconsts, *carry,
                        cond_jaxpr=cond_body, body_jaxpr=body, cond_nconsts=len(cextra) + cn,
                        body_nconsts=len(bextra) + cn + bn)
    return outs, [0] * nc


batch_rules[while_p] = _batch


# --- dead code: the whole loop or none of it ------------------------------------------------
def _dce(used_outputs, eqn):
    """A loop some output of which is used (or with effects) is kept whole, carries and all,
    as JAX keeps it: pruning its unused carries changes the program XLA optimizes, and with
    it the bits (blackjax's NUTS)."""
    p = eqn.params
    if any(used_outputs) or jaxpr_has_effects(p["cond_jaxpr"]) or jaxpr_has_effects(
            p["body_jaxpr"]):
        return [True] * len(eqn.invars), eqn
    return [False] * len(eqn.invars), None


dce_rules[while_p] = _dce


# --- lowering: stablehlo.while, the consts threaded through the loop state -----------------
def _lowering(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cn, bn = cond_nconsts, body_nconsts
    if has_ordered_effects(cond_jaxpr):
        raise NotImplementedError("Ordered effects (debug.print(..., ordered=True), ordered "
                                  "io_callback) are not supported in a while_loop's cond_fun; "
                                  "move them into body_fun.")
    # With ordered effects in the body, the token is the first element of the loop state.
    ordered = has_ordered_effects(body_jaxpr)
    t = 1 if ordered else 0
    state_avals = ([abstract_token] if ordered else []) + list(ctx.avals_in)

    def cond_region(c, *state):
        cconsts, _, carry = split(state[t:], [cn, bn])
        (pred,) = lower_jaxpr_body(c.fn, cond_jaxpr.jaxpr,
                                   const_operands(c, cond_jaxpr) + cconsts + carry)
        return [pred], cond_jaxpr.out_avals

    def body_region(c, *state):
        if ordered:
            c.fn.token = state[0]
        cconsts, bconsts, carry = split(state[t:], [cn, bn])
        new = lower_jaxpr_body(c.fn, body_jaxpr.jaxpr,
                               const_operands(c, body_jaxpr) + bconsts + carry)
        return ([c.fn.token] if ordered else []) + cconsts + bconsts + new, state_avals

    regions = ctx.region(state_avals, cond_region, scope=("while", "cond")) + ", " + \
        ctx.region(state_avals, body_region, scope=("while", "body"))
    operands = ([ctx.fn.token] if ordered else []) + list(args)
    outs = ctx.op("stablehlo.while", operands, state_avals, state_avals, regions=regions)
    if ordered:
        ctx.fn.token = outs[0]
    return outs[t + cn + bn:]


register_lowering(while_p, _lowering)


def _replication(ins, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    """Inside shard_map: the carry varies as the body's results, and over what the predicate
    varies over (devices that stop at different trips make every carry vary)."""
    pred = open_jaxpr(cond_jaxpr).outvars[0].aval.mat.varying
    return [v.aval.mat.varying | pred for v in open_jaxpr(body_jaxpr).outvars]


replication_rules[while_p] = _replication


# --- threefry2x32 on CPU: its rounds as a loop ---------------------------------------------
def _threefry_rolled_rounds(k1, k2, x1, x2):
    """The 20 rounds of ``first_order.prng._rounds`` as a loop over the five groups of four:
    threefry2x32's lowering on CPU, as JAX's is. The hashed words then come out of a while
    loop rather than a long chain of integer ops that XLA fuses into the float code using
    them, so that code compiles (and rounds) as in JAX's programs; it also compiles faster."""
    shape = check_same_shapes("threefry2x32", *(get_aval(a) for a in (k1, k2, x1, x2)))
    # One key's words stay scalars through the loop (as in JAX's lowering): broadcast to the
    # counters' shape, they would be three more full-size arrays read and written per group.
    one_key = get_aval(k1).shape == get_aval(k2).shape == ()
    k1, k2, x1, x2 = (_shapes.broadcast_in_dim(a, shape, tuple(range(get_aval(a).ndim)))
                      if get_aval(a).shape != shape and not (one_key and i < 2) else a
                      for i, a in enumerate((k1, k2, x1, x2)))
    k3 = _bitwise.bitwise_xor(_bitwise.bitwise_xor(k1, k2), np.uint32(_prng._KEY_PARITY))
    # Group g rotates by the distances _prng._ROTATIONS[g % 2] and then adds the keys
    # (g + 1) % 3 and (g + 2) % 3: the loop carries the keys and the two tables of distances,
    # each rotated by one place after a group.
    tables = tuple(np.asarray(r, np.uint32) for r in _prng._ROTATIONS)

    def group(g, state):
        (a, b), keys, (table, next_table) = state
        for j in range(4):
            distance = _shapes.reshape(_slicing.slice(table, (j,), (j + 1,)), ())
            a = _arith.add(a, b)
            b = _bitwise.bitwise_xor(a, _bitwise.bitwise_or(
                _bitwise.shift_left(b, distance),
                _bitwise.shift_right_logical(b, _arith.sub(np.uint32(32), distance))))
        step = _arith.add(_conversion.convert_element_type(g, np.dtype(np.uint32)), np.uint32(1))
        a = _arith.add(a, keys[0])
        b = _arith.add(_arith.add(b, keys[1]), step)
        return (a, b), (keys[1], keys[2], keys[0]), (next_table, table)

    x = (_arith.add(x1, k1), _arith.add(x2, k2))
    x, _, _ = fori_loop(0, 5, group, (x, (k2, k3, k1), tables))
    return list(x)


register_lowering(_prng.threefry2x32_p,
                  lower_fun(_threefry_rolled_rounds, multiple_results=True), "cpu")


# --- effects and discharge of references the loop's functions use ---------------------------
def _operands(p):
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    n = len(open_jaxpr(p["body_jaxpr"]).invars) - bn  # the carry
    return [(p["cond_jaxpr"], list(range(cn)) + list(range(cn + bn, cn + bn + n))),
            (p["body_jaxpr"], list(range(cn, cn + bn + n)))]


jaxpr_operand_rules[while_p] = _operands


def _discharge(which, in_avals, out_avals, *args, cond_jaxpr, body_jaxpr, cond_nconsts,
               body_nconsts):
    from plax.higher_order.cond import writes_input
    cn, bn = cond_nconsts, body_nconsts
    cconsts, bconsts, carry = split(list(args), [cn, bn])
    cwhich, bwhich = which[:cn], which[cn:cn + bn]
    # The references, each once (one may be a const of both functions): carried.
    refs, values = [], []
    for x, w in zip(cconsts + bconsts, cwhich + bwhich):
        if w and not any(w is r for r in refs):
            refs.append(w)
            values.append(x)
    slot = lambda w: next(i for i, r in enumerate(refs) if r is w)  # noqa: E731
    cwrites = {slot(w) for k, w in enumerate(cwhich) if w and writes_input(cond_jaxpr, k)}
    bwrites = {slot(w) for k, w in enumerate(bwhich) if w and writes_input(body_jaxpr, k)}
    if cwrites & bwrites:
        raise NotImplementedError("Cannot write to the same ref in both cond and body.")

    def with_refs(consts, mask, held):
        return [held[slot(w)] if w else x for x, w in zip(consts, mask)]

    def run_cond(held, vals):
        outs, finals = run_discharged(cond_jaxpr, cwhich, with_refs(cconsts, cwhich, held)
                                      + list(vals))
        held = list(held)
        for w, f in zip([w for w in cwhich if w], finals):
            held[slot(w)] = f
        return outs[0], held

    def run_body(held, vals):
        outs, finals = run_discharged(body_jaxpr, bwhich, with_refs(bconsts, bwhich, held)
                                      + list(vals))
        held = list(held)
        for w, f in zip([w for w in bwhich if w], finals):
            held[slot(w)] = f
        return held, outs

    def body(state):
        held, vals = state
        if cwrites:  # (what the predicate wrote, once per step taken, as JAX's discharge)
            held = run_cond(held, vals)[1]
        return run_body(held, vals)
    held, outs = while_loop(lambda state: run_cond(*state)[0], body,
                            (list(values), list(carry)))
    finals = [held[slot(w)] if w else None for w in cwhich + bwhich]
    return finals + [None] * len(carry), outs


discharge_rules[while_p] = _discharge
