"""cond and switch: the ``cond`` primitive, which runs one of several branch jaxprs.

``cond_p.bind(index, *operands, branches=(b0, b1, ...))`` runs ``branches[index]``
on the operands (``index`` an int32 scalar in range: ``switch`` clamps it,
``cond`` passes its boolean predicate as 0/1, the false branch first). Every
branch takes the same operands and returns the same types; what a branch
closes over is among the operands.

Rules: jvp differentiates every branch with the same output tangents;
partial evaluation splits every branch and joins their residuals (each
branch returns zeros in the other branches' residual slots) so the known and
the unknown conds each have branches of one type; transpose transposes every
branch; vmap batches the branches, or, when the index itself is batched,
runs every branch and picks each member's result with ``select_n``; DCE
drops the outputs no one uses from every branch.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from plax import tree_util
from plax.core.source_info import flat_arg_names, fun_name
from plax.core import dtypes
from plax.core.config import config
from plax.core.dce import dce_closed, jaxpr_has_effects
from plax.core.jaxpr import ClosedJaxpr, open_jaxpr
from plax.core.primitive import Primitive
from plax.core.replication import union
from plax.core.effects import (AccumEffect, WriteEffect, check_allowed,
                               control_flow_allowed_effects, jaxpr_effects)
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, dce_rules, discharge_rules,
                             is_undefined,
                             jvp_rules, not_mapped, param_printers, partial_eval_rules,
                             register_lowering, tangent_aval, transpose_rules, replication_rules)
from plax.core.trace import Tracer, get_aval
from plax.first_order import comparison as _comparison
from plax.first_order import conversion as _conversion
from plax.first_order import shapes as _shapes
from plax.first_order.ad_util import zeros_like_aval
from plax.first_order.batch_util import move_batch_dim
from plax.higher_order import ref_effects
from plax.higher_order.bodies import (as_array, avals_of, check_branch_outputs,
                                          closed_call, forwarded_inputs, hoist_consts,
                                          mask_union, same_type, trace_body, trace_closed,
                                          widen_inputs)
from plax.lowering.consts import const_operands
from plax.core.effects import has_ordered_effects
from plax.lowering.stablehlo import abstract_token, lower_jaxpr_body
from plax.transforms.discharge import run_discharged
from plax.transforms.toolkit import batch_jaxpr, jvp_jaxpr, partial_eval_jaxpr, transpose_jaxpr
from plax.transforms.vmap import batch_flat
from plax.core.tracebacks import api_boundary

__all__ = ["cond", "switch", "cond_p"]

cond_p = Primitive("cond", multiple_results=True)
_NO_OPERAND = object()


# --- the public functions -----------------------------------------------------------------
def _is_concrete(x) -> bool:
    return not isinstance(x, Tracer) or x.to_concrete_value() is not None


def _single_operand(operands, operand):
    if operand is _NO_OPERAND:
        return operands
    if operands:
        raise TypeError("if 'operand' keyword is passed then no positional operands can be "
                        f"passed, got operand={operand!r} and positional operands {operands!r}")
    return (operand,)


@api_boundary
def switch(index, branches, *operands, operand=_NO_OPERAND):
    """Apply ``branches[index](*operands)``; ``index`` is clamped into range, as in JAX."""
    if not isinstance(branches, Sequence) or not all(callable(b) for b in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    operands = _single_operand(operands, operand)
    if np.ndim(index) != 0:
        raise TypeError(f"Branch index must be scalar, got {index} of shape {np.shape(index)}.")
    try:
        index_dtype = dtypes.result_type(index)
    except TypeError as err:
        raise TypeError(f"Index type must be an integer, got {index}.") from err
    if index_dtype.kind not in "iu":
        raise TypeError(f"Index type must be an integer, got {index} as {index_dtype}")
    branches = tuple(branches)
    if not branches:
        raise ValueError("Empty branch sequence")
    if len(branches) == 1:
        return branches[0](*operands)
    index = _conversion.convert_element_type(index, np.int32)
    index = _comparison.clamp(np.int32(0), index, np.int32(len(branches) - 1))
    names = ["branch 0"] + [f"branch{i}" for i in range(1, len(branches))]
    return _bind_cond(index, branches, names, operands, "switch")


def platform_switch(index, branches, platforms, *operands):
    """``switch`` on a ``platform_index`` for ``lax.platform_dependent``: the equation keeps
    ``branches_platforms``, so lowering for a platform emits only that platform's branch."""
    names = ["branch 0"] + [f"branch{i}" for i in range(1, len(branches))]
    return _bind_cond(index, branches, names, operands, "switch", platforms)


def platform_branch(platform: str, platforms) -> int:
    """The branch ``lax.platform_dependent`` takes on ``platform``: the one naming it, else
    the default (``None``); NotImplementedError when there is neither."""
    for i, names in enumerate(platforms):
        if names is not None and platform in names:
            return i
    for i, names in enumerate(platforms):
        if names is None:
            return i
    listed = sorted(n for names in platforms if names is not None for n in names)
    raise NotImplementedError(
        f"lax.platform_dependent has no branch for the platform '{platform}' being lowered "
        f"for (branches: {listed}) and no default; pass default=.")


@api_boundary
def cond(pred, true_fun, false_fun, *operands, operand=_NO_OPERAND):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, as one ``cond``
    equation (both branches are traced; only one runs)."""
    if not (callable(true_fun) and callable(false_fun)):
        # The old form: cond(pred, true_operand, true_fun, false_operand, false_fun).
        if callable(false_fun) and len(operands) == 2 and callable(operands[1]):
            x_true, f_true, x_false, f_false = true_fun, false_fun, *operands
            return cond(pred, lambda x, _: f_true(x), lambda _, x: f_false(x), x_true, x_false)
        raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    operands = _single_operand(operands, operand)
    if pred is None:
        raise TypeError("cond predicate is None")
    if isinstance(pred, Sequence) or np.ndim(pred) != 0:
        raise TypeError(f"Pred must be a scalar, got {pred} of "
                        + (f"type {type(pred)}" if isinstance(pred, Sequence)
                           else f"shape {np.shape(pred)}."))
    try:
        pred_dtype = dtypes.result_type(pred)
    except TypeError as err:
        raise TypeError(f"Pred type must be either boolean or number, got {pred}.") from err
    if pred_dtype.kind != "b":
        if pred_dtype.kind not in "iuf":
            raise TypeError(f"Pred type must be either boolean or number, got {pred_dtype}.")
        pred = pred != 0
    if config.read("disable_jit") and _is_concrete(pred):
        return true_fun(*operands) if bool(pred) else false_fun(*operands)
    index = _conversion.convert_element_type(pred, np.int32)
    return _bind_cond(index, (false_fun, true_fun), ["false_fun", "true_fun"], operands, "cond")


def _bind_cond(index, funs, names, operands, api, platforms=None):
    if config.read("disable_jit") and _is_concrete(index):
        return funs[int(index)](*operands)
    passed = ref_effects.refs_passed_in(tuple(operands))
    if passed is not None:  # references among the operands: closed over by the branches
        ref_effects.refuse_aliased_references(
            tree_util.tree_leaves(tuple(operands)), lambda: flat_arg_names(funs[-1], operands, {}),
            fun_name(funs[-1]), api)
        operands, put_back = passed
        operands = tuple(operands)
        funs = [_with_refs_put_back(f, put_back) for f in funs]
    # References the branches close over from outside: each branch returns their values.
    return ref_effects.with_closed_refs(
        lambda: _bind_cond_plain(index, funs, names, operands, api, platforms),
        lambda refs: _cond_carrying_refs(refs, index, funs, names, operands, api, platforms))


def _with_refs_put_back(fun, put_back):
    return lambda *ops: fun(*put_back(ops))


def _cond_carrying_refs(refs, index, funs, names, operands, api, platforms=None):
    def carrying(fun):
        def branch(held, *ops):
            with ref_effects.bound(refs, held):
                return fun(*ops), ref_effects.final_values(refs)
        return branch

    out, held = _bind_cond_plain(index, [carrying(f) for f in funs], names,
                                 (ref_effects.read_all(refs), *operands), api, platforms)
    ref_effects.write_all(refs, held)
    return out


def _bind_cond_plain(index, funs, names, operands, api, platforms=None):
    leaves, in_tree = tree_util.tree_flatten(tuple(operands))
    avals = avals_of(leaves)
    traced = [trace_body(f, in_tree, avals, f"{api} branch") for f in funs]
    check_allowed(frozenset().union(*(jaxpr_effects(c) for c, _ in traced)),
                  control_flow_allowed_effects, f"in `{api}`")
    # JAX reports cond's mismatches as true_fun against false_fun, switch's against branch 0.
    ref = len(funs) - 1 if api == "cond" else 0
    for i, (closed, tree) in enumerate(traced):
        if i != ref:
            check_branch_outputs(api, names[ref], names[i], funs[ref], funs[i],
                                 traced[ref][1], traced[ref][0].out_avals, tree, closed.out_avals)
    bodies, consts = hoist_consts([c for c, _ in traced])
    # An output every branch returns straight from the same input is that input.
    in_fwd = [f[0] if all(x == f[0] for x in f) else None
              for f in zip(*(forwarded_inputs(b) for b in bodies))]
    if any(f is not None for f in in_fwd):
        keep = [f is None for f in in_fwd]
        bodies = [dce_closed(b, keep, instantiate=True)[0] for b in bodies]
    extra = {} if platforms is None else {"branches_platforms": platforms}
    outs = iter(cond_p.bind(index, *consts, *leaves, branches=tuple(bodies), **extra))
    inputs = [*consts, *leaves]
    outs = [next(outs) if f is None else as_array(inputs[f]) for f in in_fwd]
    return tree_util.tree_unflatten(traced[0][1], outs)


# --- abstract evaluation ------------------------------------------------------------------
def _abstract(index, *avals, branches, branches_platforms=None):
    if index.shape != () or index.dtype != np.int32:
        raise TypeError(f"cond index must be an int32 scalar, got {index.str_short()}.")
    if not branches:
        raise TypeError("cond requires at least one branch")
    outs = branches[0].out_avals
    for i, b in enumerate(branches):
        ins = b.in_avals
        if len(ins) != len(avals) or not all(same_type(a, e) for a, e in zip(avals, ins)):
            raise TypeError(
                f"cond branch {i} takes ({', '.join(a.str_short() for a in ins)}) but is given "
                f"({', '.join(a.str_short() for a in avals)}).")
        if len(b.out_avals) != len(outs) or not all(
                same_type(a, e) for a, e in zip(b.out_avals, outs)):
            raise TypeError(f"cond branches must have equal output types, but branch {i} "
                            f"returns ({', '.join(a.str_short() for a in b.out_avals)}) and "
                            f"branch 0 ({', '.join(a.str_short() for a in outs)}).")
    return list(outs)  # the types of branch 0, weak types included (as JAX)


abstract_eval_rules[cond_p] = _abstract
param_printers[cond_p] = lambda p: {k: p[k] for k in ("branches", "branches_platforms") if k in p}


# --- jvp: every branch differentiated, with the same nonzero output tangents ---------------
def _jvp(primals, tangents, *, branches, **params):
    index, ops = primals[0], primals[1:]
    nonzeros = [type(t) is not Zero for t in tangents[1:]]
    out_nz = mask_union(*(jvp_jaxpr(b, nonzeros, instantiate=False, description="jvp(cond)")[1]
                          for b in branches))
    jvps = [jvp_jaxpr(b, nonzeros, instantiate=out_nz, description="jvp(cond)")[0]
            for b in branches]
    bodies, consts = hoist_consts(jvps)
    outs = cond_p.bind(index, *consts, *ops, *(t for t in tangents[1:] if type(t) is not Zero),
                       branches=tuple(bodies), **params)
    n = len(out_nz)
    it = iter(outs[n:])
    return outs[:n], [next(it) if nz else Zero(tangent_aval(a))
                      for a, nz in zip(branches[0].out_avals, out_nz)]


jvp_rules[cond_p] = _jvp


# --- partial evaluation: a known cond now, an unknown cond of the joined residuals ---------
def _residual_slots(res_avals_per_branch):
    """Slots shared by the branches' residuals (a slot per type is reused by each branch):
    ``(slot avals, per branch the slot of each of its residuals)``."""
    slots, placements = [], []
    for avals in res_avals_per_branch:
        taken, placement = set(), []
        for a in avals:
            k = next((i for i, s in enumerate(slots) if i not in taken and same_type(s, a)
                      and s.weak_type == a.weak_type), None)
            if k is None:
                k = len(slots)
                slots.append(a)
            taken.add(k)
            placement.append(k)
        placements.append(placement)
    return slots, placements


def _with_residual_slots(known: ClosedJaxpr, n_out: int, slots, placement) -> ClosedJaxpr:
    """``known`` (known inputs -> outputs, residuals) returning its residuals in ``slots``,
    with zeros in the slots of other branches."""
    def run(*args):
        outs = closed_call(known)(*args)
        filled = [None] * len(slots)
        for r, k in zip(outs[n_out:], placement):
            filled[k] = r
        return outs[:n_out] + [zeros_like_aval(s) if f is None else f
                               for s, f in zip(slots, filled)]
    return trace_closed(run, known.in_avals, "cond branch (known)")


def _partial_eval(trace, args, params):
    branches = params["branches"]
    index, ops = args[0], args[1:]
    if trace.is_unknown(index):
        return trace.stage(cond_p, args, params)
    unknowns = [trace.is_unknown(a) for a in ops]
    out_uk = mask_union(*(partial_eval_jaxpr(b, unknowns, False)[2] for b in branches))
    splits = [partial_eval_jaxpr(b, unknowns, out_uk, description="cond") for b in branches]
    n_known = out_uk.count(False)
    slots, placements = _residual_slots(
        [s[0].out_avals[n_known:] for s in splits])
    known_bodies, known_consts = hoist_consts(
        [_with_residual_slots(s[0], n_known, slots, p) for s, p in zip(splits, placements)])
    known_ops = [a for a, u in zip(ops, unknowns) if not u]
    known_out = trace.known(cond_p, [index, *known_consts, *known_ops],
                            dict(params, branches=tuple(known_bodies)))
    unknown_out = []
    if any(out_uk):
        uk_ops = [a for a, u in zip(ops, unknowns) if u]
        uk_avals = slots + [get_aval(a) for a in uk_ops]
        unknown_bodies = [
            widen_inputs(s[1], uk_avals, p + [len(slots) + i for i in range(len(uk_ops))])
            for s, p in zip(splits, placements)]
        unknown_out = trace.stage(cond_p, [index, *known_out[n_known:], *uk_ops],
                                  dict(params, branches=tuple(unknown_bodies)))
    k, u = iter(known_out[:n_known]), iter(unknown_out)
    return [next(u) if unk else next(k) for unk in out_uk]


partial_eval_rules[cond_p] = _partial_eval


# --- transpose: every branch transposed ---------------------------------------------------
def _transpose(cts, index, *ops, branches, **params):
    if is_undefined(index):
        raise ValueError("cond cannot be transposed with respect to its index.")
    linear = [is_undefined(a) for a in ops]
    nonzero = [type(c) is not Zero for c in cts]
    transposed = [transpose_jaxpr(b, linear, nonzero, description="transpose(cond)")
                  for b in branches]
    bodies, consts = hoist_consts(transposed)
    res = [a for a in ops if not is_undefined(a)]
    outs = iter(cond_p.bind(index, *consts, *res, *(c for c in cts if type(c) is not Zero),
                            branches=tuple(bodies), **params))
    return [None] + [next(outs) if lin else None for lin in linear]


transpose_rules[cond_p] = _transpose


# --- batching -----------------------------------------------------------------------------
def _batch(axis, vals, dims, *, branches, **params):
    index, ops = vals[0], vals[1:]
    index_dim, op_dims = dims[0], list(dims[1:])
    if index_dim is not not_mapped:
        return _batch_as_select(axis, index, index_dim, ops, op_dims, branches)
    out_batched = mask_union(*(
        [d is not not_mapped for d in batch_jaxpr(b, axis, op_dims, description="vmap(cond)")[2]]
        for b in branches))
    out_dims = [0 if b else not_mapped for b in out_batched]
    batched = []
    for b in branches:
        jaxpr, consts, _ = batch_jaxpr(b, axis, op_dims, description="vmap(cond)",
                                       out_dims=out_dims)
        batched.append(ClosedJaxpr(jaxpr, consts))
    bodies, consts = hoist_consts(batched)
    return cond_p.bind(index, *consts, *ops, branches=tuple(bodies), **params), out_dims


def _batch_as_select(axis, index, index_dim, ops, op_dims, branches):
    """A batched index: every branch runs on the whole batch, and each member takes the
    result of its own branch (as ``select_n``)."""
    index = move_batch_dim(index, index_dim, 0, axis.size)
    per_branch = []
    for b in branches:
        outs, got = batch_flat(closed_call(b), list(ops), op_dims, axis, "cond branch")
        per_branch.append([move_batch_dim(o, d, 0, axis.size) for o, d in zip(outs, got)])
    results = []
    for outs in zip(*per_branch):
        shape = get_aval(outs[0]).shape
        which = _shapes.broadcast_in_dim(index, shape, (0,))
        results.append(_comparison.select_n(which, *outs))
    return results, [0] * len(results)


batch_rules[cond_p] = _batch


# --- dead code ----------------------------------------------------------------------------
def _dce(used_outputs, eqn):
    branches = eqn.params["branches"]
    effects = any(jaxpr_has_effects(b) for b in branches)
    if not any(used_outputs) and not effects:
        return [False] * len(eqn.invars), None
    used_in = mask_union(*(dce_closed(b, used_outputs)[1] for b in branches))
    if all(used_in) and all(used_outputs):
        return [True] * len(eqn.invars), eqn
    pruned = tuple(dce_closed(b, used_outputs, instantiate=used_in)[0] for b in branches)
    new = eqn.replace(invars=[eqn.invars[0]] + [v for v, u in zip(eqn.invars[1:], used_in) if u],
                      outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u],
                      params=dict(eqn.params, branches=pruned))
    return [True] + used_in, new


dce_rules[cond_p] = _dce


# --- lowering: stablehlo.case, its branches reading the operands from above ----------------
def _lowering(ctx, index, *ops, branches, branches_platforms=None):
    if branches_platforms is not None:
        # platform_dependent: only the platform's branch is lowered (another may use what
        # this platform cannot lower); the index is a constant, a one-region case takes it.
        branches = [branches[platform_branch(ctx.platform, branches_platforms)]]
    # With ordered effects, each branch returns the token it ends with, first.
    ordered = any(has_ordered_effects(b) for b in branches)
    regions = []
    for i, b in enumerate(branches):
        def build(c, b=b):
            outs = lower_jaxpr_body(c.fn, b.jaxpr, const_operands(c, b) + list(ops))
            if ordered:
                return [c.fn.token, *outs], [abstract_token, *b.out_avals]
            return outs, b.out_avals
        regions.append(ctx.region([], build, scope=("cond", f"branch_{i}_fun")))
    out_avals = [abstract_token, *ctx.avals_out] if ordered else ctx.avals_out
    outs = ctx.op("stablehlo.case", [index], [ctx.avals_in[0]], out_avals,
                  regions=", ".join(regions))
    if ordered:
        ctx.fn.token, outs = outs[0], outs[1:]
    return outs


register_lowering(cond_p, _lowering)


def _replication(ins, *, branches, **params):
    """Inside shard_map: what any branch's results vary over, and the index's (devices may
    take different branches)."""
    outs = [[v.aval.mat.varying for v in open_jaxpr(b).outvars] for b in branches]
    return [union(col) | ins[0] for col in zip(*outs)]


replication_rules[cond_p] = _replication


# --- discharge: references the branches use become operands, those written results -------
def writes_input(closed, k: int) -> bool:
    """Whether jaxpr ``closed`` writes (or adds into) its reference input ``k``."""
    v = open_jaxpr(closed).invars[k]
    return any(isinstance(e, (WriteEffect, AccumEffect)) and e.input is v
               for e in closed.effects)


def _discharge(which, in_avals, out_avals, index, *ops, branches, **params):
    which = which[1:]
    written = [w and any(writes_input(b, k) for b in branches) for k, w in enumerate(which)]

    def branch(b):
        def run(*vals):
            outs, finals = run_discharged(b, which, vals)
            kept = iter(finals)
            return list(outs) + [f for f, w in zip(kept, (w for w, m in zip(written, which)
                                                           if m)) if w]
        return run
    outs = switch(index, [branch(b) for b in branches], *ops)
    finals = iter(outs[len(out_avals):])
    return [None] + [next(finals) if w else None for w in written], outs[:len(out_avals)]


discharge_rules[cond_p] = _discharge
