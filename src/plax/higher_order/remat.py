"""Checkpointing (remat): trade compute for memory in reverse mode.

``checkpoint(f)`` stages ``f`` as one ``checkpoint`` equation. Its partial
evaluation computes the primal outputs now but saves, as residuals for the
backward pass, only the intermediates that the ``policy`` allows; the backward
pass recomputes everything else from the inputs (visible as repeated
equations in the jaxpr of ``grad``). Without differentiation it is ``f``.
"""
from __future__ import annotations

import functools
import types
from typing import NamedTuple

import numpy as np

from plax import tree_util
from plax.core.dce import dce_closed, jaxpr_has_effects
from plax.core.effects import check_allowed, jaxpr_effects, remat_allowed_effects
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Var, consts_as_inputs, eval_jaxpr
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, dce_rules, discharge_rules,
                             impl_rules,
                             is_undefined, jvp_rules, lowering_rules, param_printers,
                             partial_eval_rules, register_lowering, tangent_aval,
                             transpose_rules)
from plax.core.source_info import scope_path
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import get_aval, set_current_trace
from plax.first_order.batch_util import vectorized
from plax.first_order.dot import dot_general_p
from plax.first_order.utility import optimization_barrier
from plax.higher_order import ref_effects
from plax.lowering.consts import const_operands
from plax.lowering.stablehlo import lower_jaxpr_body
from plax.transforms.discharge import call_discharge_rule
from plax.transforms.toolkit import (batch_jaxpr, jvp_jaxpr, partial_eval_jaxpr,
                                     transpose_jaxpr)

checkpoint_p = Primitive("checkpoint", multiple_results=True)


def _abstract(*avals, jaxpr, prevent_cse, differentiated, policy):
    return jaxpr.out_avals


def _impl(*args, jaxpr, prevent_cse, differentiated, policy):
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


def _lowering(ctx, *args, jaxpr, prevent_cse, differentiated, policy):
    # The body's ops are scoped ``checkpoint/`` (``checkpoint/rematted_computation/`` where
    # it is the recomputation of a differentiated checkpoint), as JAX names them.
    fn = ctx.fn
    scope = ("checkpoint", "rematted_computation") if differentiated else ("checkpoint",)
    saved = fn.scope
    fn.scope = (scope_path(fn.eqn_scope), *scope) if fn.eqn_scope else scope
    try:
        return lower_jaxpr_body(fn, jaxpr.jaxpr, [*const_operands(ctx, jaxpr), *args])
    finally:
        fn.scope = saved


abstract_eval_rules[checkpoint_p] = _abstract
impl_rules[checkpoint_p] = _impl
register_lowering(checkpoint_p, _lowering)


def _bind(body: ClosedJaxpr, args, **params):
    callee, consts = consts_as_inputs(body)
    return checkpoint_p.bind(*consts, *args, jaxpr=callee, **params)


def _jvp(primals, tangents, *, jaxpr, prevent_cse, differentiated, policy):
    """A checkpoint of the body's jvp (so the jvp is recomputed, not stored, too)."""
    nonzeros = [type(t) is not Zero for t in tangents]
    body, out_nonzeros = jvp_jaxpr(jaxpr, nonzeros, instantiate=False,
                                   description="checkpoint")
    outs = _bind(body, [*primals, *(t for t in tangents if type(t) is not Zero)],
                 prevent_cse=prevent_cse, differentiated=True, policy=policy)
    m = len(jaxpr.out_avals)
    # (An output that does not depend on the inputs has a symbolic zero tangent: a
    # reference's final value may then be stored outside the differentiation.)
    nonzero_tangents = iter(outs[m:])
    return outs[:m], [next(nonzero_tangents) if nz else Zero(tangent_aval(a))
                      for nz, a in zip(out_nonzeros, jaxpr.out_avals)]


jvp_rules[checkpoint_p] = _jvp


def _partial_eval(trace, args, params):
    """Known outputs (and policy-saved intermediates) now; the rest staged as a checkpoint."""
    closed, policy = params["jaxpr"], params["policy"]
    check_allowed(jaxpr_effects(closed), remat_allowed_effects,
                  "in partial-eval of `checkpoint`/`remat`")
    j = closed.jaxpr
    unknown_vars = {v for v, a in zip(j.invars, args) if trace.is_unknown(a)}
    saved = []
    for e in j.eqns:
        if any(isinstance(v, Var) and v in unknown_vars for v in e.invars):
            unknown_vars.update(e.outvars)
        elif policy is not None and policy_saves(
                policy(e.primitive, *[v.aval for v in e.invars], **e.params)):
            saved.extend(e.outvars)
    syntactic = [isinstance(v, Var) and v in unknown_vars for v in j.outvars]
    # Which outputs are unknown, seen through nested jits (a jit of primal and tangent work
    # has a known primal output although it takes an unknown tangent).
    known, _, out_unknown, num_res = partial_eval_jaxpr(
        closed, [trace.is_unknown(a) for a in args], instantiate=False, description="checkpoint")
    # 1. Known outputs and saved residuals, computed now in the parent trace.
    with set_current_trace(trace.parent):
        if syntactic == out_unknown:  # one evaluation of the known equations
            known_outs = [v for v, u in zip(j.outvars, out_unknown) if not u]
            both, _ = dce_closed(ClosedJaxpr(Jaxpr(j.constvars, j.invars, known_outs + saved,
                                                   j.eqns), closed.consts), instantiate=True)
            vals = eval_jaxpr(both.jaxpr, both.consts,
                              *[None if trace.is_unknown(a) else a for a in args])
            known_vals, residuals = vals[:len(known_outs)], vals[len(known_outs):]
        else:  # known outputs from the split body; saved values from known equations
            n_known = out_unknown.count(False)
            known, _ = dce_closed(known, [True] * n_known + [False] * num_res, instantiate=True)
            known_vals = eval_jaxpr(known.jaxpr, known.consts,
                                    *[a for a in args if not trace.is_unknown(a)])
            saved_body, _ = dce_closed(ClosedJaxpr(Jaxpr(j.constvars, j.invars, saved, j.eqns),
                                                   closed.consts), instantiate=True)
            residuals = eval_jaxpr(saved_body.jaxpr, saved_body.consts,
                                   *[None if trace.is_unknown(a) else a for a in args])
    # 2. The unknown outputs: the body with saved values as inputs, everything else recomputed.
    saved_set = set(saved)
    rest, _ = dce_closed(ClosedJaxpr(
        Jaxpr(j.constvars, list(j.invars) + saved, [v for v, u in zip(j.outvars, out_unknown) if u],
              [e for e in j.eqns if not any(v in saved_set for v in e.outvars)]), closed.consts),
        instantiate=True)
    unknown_vals = []
    if any(out_unknown):
        callee, consts = consts_as_inputs(rest)
        unknown_vals = trace.stage(checkpoint_p, [*consts, *args, *residuals],
                                   dict(params, jaxpr=callee))
    k, u = iter(known_vals), iter(unknown_vals)
    return [next(u) if unk else next(k) for unk in out_unknown]


partial_eval_rules[checkpoint_p] = _partial_eval



def _transpose(cts, *args, jaxpr, prevent_cse, differentiated, policy):
    """Recompute the non-linear part from the known inputs, then run the backward pass."""
    linear = [is_undefined(a) for a in args]
    known = [a for a in args if not is_undefined(a)]
    if prevent_cse and known:
        known = optimization_barrier(known)  # keep XLA from merging recomputation with forward
    nonzero = [type(c) is not Zero for c in cts]
    body = transpose_jaxpr(jaxpr, linear, nonzero, description="checkpoint")
    outs = iter(eval_jaxpr(body.jaxpr, body.consts, *known,
                           *(c for c in cts if type(c) is not Zero)))
    return [next(outs) if lin else None for lin in linear]


transpose_rules[checkpoint_p] = _transpose
param_printers[checkpoint_p] = lambda p: {
    "jaxpr": p["jaxpr"], "prevent_cse": p["prevent_cse"], "differentiated": p["differentiated"],
    "policy": getattr(p["policy"], "__name__", p["policy"])}


def _batch(axis, vals, dims, *, jaxpr, prevent_cse, differentiated, policy):
    """A checkpoint of the batched body."""
    body, consts, out_dims = batch_jaxpr(jaxpr, axis, dims, description="checkpoint")
    outs = _bind(ClosedJaxpr(body, consts), vals, prevent_cse=prevent_cse,
                 differentiated=differentiated, policy=policy)
    return outs, out_dims


batch_rules[checkpoint_p] = _batch


def _dce(used_outputs, eqn):
    """The checkpoint of the body pruned to the used outputs, taking only the inputs they
    read (an effect in the body keeps the equation, with no outputs if none is used)."""
    body = eqn.params["jaxpr"]
    if not any(used_outputs) and not jaxpr_has_effects(body):
        return [False] * len(eqn.invars), None
    pruned, used_inputs = dce_closed(body, used_outputs)
    if all(used_outputs) and all(used_inputs) and len(pruned.jaxpr.eqns) == len(body.jaxpr.eqns):
        return used_inputs, eqn  # nothing to remove
    return used_inputs, eqn.replace(
        invars=[v for v, u in zip(eqn.invars, used_inputs) if u],
        outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u],
        params=dict(eqn.params, jaxpr=pruned))


dce_rules[checkpoint_p] = _dce
discharge_rules[checkpoint_p] = call_discharge_rule("jaxpr")


# --- names and policies ---------------------------------------------------------------------
name_p = Primitive("name")
abstract_eval_rules[name_p] = lambda x, *, name: x
lowering_rules[name_p] = lambda ctx, x, *, name: x
jvp_rules[name_p] = lambda primals, tangents, *, name: (name_p.bind(primals[0], name=name),
                                                        tangents[0])
transpose_rules[name_p] = lambda ct, x, *, name: [ct]
vectorized(name_p)


# --- what a policy returns ------------------------------------------------------------------
class _Decision:
    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return self._name


Recompute = _Decision("Recompute")  # the value is recomputed in the backward pass
Saveable = _Decision("Saveable")  # the value is kept as a residual


class Offloadable(NamedTuple):
    """The value is kept as a residual, moved from memory kind ``src`` to ``dst`` while it
    waits (plax keeps every array in device memory, so it stays where it is)."""

    src: str
    dst: str


def policy_saves(decision) -> bool:
    """Whether a policy's answer keeps the value: True, Saveable or Offloadable(...) do;
    False and Recompute do not."""
    if decision is True or decision is Saveable or isinstance(decision, Offloadable):
        return True
    if decision is False or decision is Recompute:
        return False
    if isinstance(decision, np.bool_):
        return bool(decision)
    raise TypeError("Value returned by a remat policy should be a bool or "
                    "`ad_checkpoint.Recompute`, `ad_checkpoint.Saveable` or "
                    f"`ad_checkpoint.Offloadable(...)`. Got {decision} of type {type(decision)}.")


def checkpoint_name(x, name: str):
    """Tag the arrays of ``x`` with ``name`` so checkpoint policies can save them by name."""
    return tree_util.tree_map(lambda leaf: name_p.bind(leaf, name=name), x)


def _named(fn, name):
    fn.__name__ = fn.__qualname__ = name
    return fn


def _is_dot(prim):
    return prim is dot_general_p


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=_named(lambda prim, *avals, **params: True, "everything_saveable"),
    nothing_saveable=_named(lambda prim, *avals, **params: False, "nothing_saveable"),
    dots_saveable=_named(lambda prim, *avals, **params: _is_dot(prim), "dots_saveable"),
    dots_with_no_batch_dims_saveable=_named(
        lambda prim, *avals, **params: _is_dot(prim)
        and not params["dimension_numbers"][1][0], "dots_with_no_batch_dims_saveable"),
)
checkpoint_policies.checkpoint_dots = checkpoint_policies.dots_saveable
checkpoint_policies.checkpoint_dots_with_no_batch_dims = \
    checkpoint_policies.dots_with_no_batch_dims_saveable


def save_only_these_names(*names):
    """Policy: save exactly the values tagged with one of ``names``."""
    chosen = frozenset(names)
    return _named(lambda prim, *avals, **params: prim is name_p and params["name"] in chosen,
                  "save_only_these_names")


def save_any_names_but_these(*names):
    """Policy: save every named value except those tagged with one of ``names``."""
    excluded = frozenset(names)
    return _named(lambda prim, *avals, **params: prim is name_p and params["name"] not in excluded,
                  "save_any_names_but_these")


def save_from_both_policies(a, b):
    """Policy: save what either policy saves."""
    return _named(lambda prim, *avals, **params: a(prim, *avals, **params)
                  or b(prim, *avals, **params), "save_from_both_policies")


def save_anything_except_these_names(*names):
    """Policy: save every value except those tagged with one of ``names``."""
    excluded = frozenset(names)
    return _named(lambda prim, *avals, **params: prim is not name_p or
                  params["name"] not in excluded, "save_anything_except_these_names")


def save_and_offload_only_these_names(*, names_which_can_be_saved, names_which_can_be_offloaded,
                                      offload_src, offload_dst):
    """Policy: save the values tagged with ``names_which_can_be_saved``, offload (from memory
    kind ``offload_src`` to ``offload_dst``) those tagged with ``names_which_can_be_offloaded``,
    recompute the rest."""
    saved, offloaded = frozenset(names_which_can_be_saved), frozenset(names_which_can_be_offloaded)
    both = saved & offloaded
    if both:
        raise ValueError("The names should be exclusive and should not intersect in "
                         "`names_which_can_be_saved` and `names_which_can_be_offloaded`. Got "
                         f"names_which_can_be_saved={saved}, names_which_can_be_offloaded="
                         f"{offloaded} and the intersection={both}")

    def policy(prim, *avals, **params):
        if prim is name_p and params["name"] in saved:
            return Saveable
        if prim is name_p and params["name"] in offloaded:
            return Offloadable(src=offload_src, dst=offload_dst)
        return Recompute
    return _named(policy, "save_and_offload_only_these_names")


def offload_dot_with_no_batch_dims(offload_src, offload_dst):
    """Policy: offload (from ``offload_src`` to ``offload_dst``) the results of dot products
    without batch dimensions, recompute the rest."""
    def policy(prim, *avals, **params):
        if _is_dot(prim) and not params["dimension_numbers"][1][0]:
            return Offloadable(src=offload_src, dst=offload_dst)
        return Recompute
    return _named(policy, "offload_dot_with_no_batch_dims")


checkpoint_policies.save_only_these_names = save_only_these_names
checkpoint_policies.save_anything_except_these_names = save_anything_except_these_names
checkpoint_policies.save_and_offload_only_these_names = save_and_offload_only_these_names
checkpoint_policies.offload_dot_with_no_batch_dims = offload_dot_with_no_batch_dims
checkpoint_policies.save_any_names_but_these = save_any_names_but_these
checkpoint_policies.save_from_both_policies = save_from_both_policies


def checkpoint(fun=None, *, prevent_cse: bool = True, policy=None, static_argnums=()):
    """``fun`` whose intermediates are recomputed in the backward pass instead of stored
    (except those ``policy(prim, *avals, **params)`` allows to be saved)."""
    if fun is None:
        return lambda f: checkpoint(f, prevent_cse=prevent_cse, policy=policy,
                                    static_argnums=static_argnums)
    statics = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun)
    def checkpointed(*args, **kwargs):
        n = len(args)
        static = {i % n for i in statics if -n <= i < n}
        given = ([a for i, a in enumerate(args) if i not in static], kwargs)
        rebuild = None
        passed = ref_effects.refs_passed_in(given)
        if passed is not None:  # references among the arguments: closed over by the body
            given, rebuild = passed

        def call(dyn_kw):
            d, kw = dyn_kw if rebuild is None else rebuild(dyn_kw)
            it = iter(d)
            return fun(*[args[i] if i in static else next(it) for i in range(n)], **kw)

        leaves, in_tree = tree_util.tree_flatten(given)
        name = getattr(fun, "__name__", "checkpoint")
        params = dict(prevent_cse=prevent_cse, differentiated=False, policy=policy)
        # References the body closes over (or was given) are discharged as a loop body's
        # are: their values are extra inputs, their final values extra outputs, written back.
        return ref_effects.with_closed_refs(
            lambda: _checkpoint_call(call, name, leaves, in_tree, (), params),
            lambda refs: _checkpoint_call(call, name, leaves, in_tree, refs, params))

    return checkpointed


def _checkpoint_call(call, name, leaves, in_tree, refs, params):
    """``call`` (of the unflattened ``leaves``) staged as one checkpoint equation (the values
    ``refs`` hold passed in first; the final values of those it writes returned last and
    written back)."""
    box, written = [], []
    k = len(refs)

    def flat(*xs):
        held, xs = xs[:k], xs[k:]
        with ref_effects.bound(refs, held):
            out_leaves, out_tree = tree_util.tree_flatten(
                call(tree_util.tree_unflatten(in_tree, list(xs))))
            finals = ref_effects.final_values(refs)
        ref_effects.refuse_carried_references("checkpoint", out_leaves)
        # Only the references the body wrote come out (a read-only one stays as it was).
        written[:] = [r for r, f, h in zip(refs, finals, held) if f is not h]
        box.append(out_tree)
        return out_leaves + [f for f, h in zip(finals, held) if f is not h]

    held = ref_effects.read_all(refs)
    jaxpr, consts = trace_to_jaxpr(flat, [get_aval(x) for x in (*held, *leaves)],
                                   description=name)
    outs = _bind(ClosedJaxpr(jaxpr, consts), [*held, *leaves], **params)
    m = len(outs) - len(written)
    ref_effects.write_all(written, outs[m:])
    return tree_util.tree_unflatten(box[0], outs[:m])


remat = checkpoint
