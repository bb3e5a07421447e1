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

from plax import tree_util
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Var, dce_jaxpr, eval_jaxpr, param_printers
from plax.core.primitive import Primitive, abstract_eval_rules, impl_rules
from plax.core.staging import StagingTrace, trace_to_jaxpr
from plax.core.trace import get_aval, set_current_trace
from plax.lowering.stablehlo import lower_jaxpr_body, lowering_rules
from plax.transforms.jvp import Zero, instantiate, jvp_flat, jvp_rules, tangent_aval
from plax.transforms.linearize import as_callee, partial_eval_rules
from plax.transforms.transpose import backward_pass, is_undefined, transpose_rules

checkpoint_p = Primitive("checkpoint", multiple_results=True)


def _abstract(*avals, jaxpr, prevent_cse, differentiated, policy):
    return jaxpr.out_avals


def _impl(*args, jaxpr, prevent_cse, differentiated, policy):
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


def _lowering(ctx, *args, jaxpr, prevent_cse, differentiated, policy):
    return lower_jaxpr_body(ctx.fn, jaxpr.jaxpr, list(args))


abstract_eval_rules[checkpoint_p] = _abstract
impl_rules[checkpoint_p] = _impl
lowering_rules[checkpoint_p] = _lowering


def _jvp(primals, tangents, *, jaxpr, prevent_cse, differentiated, policy):
    """A checkpoint of the body's jvp (so the jvp is recomputed, not stored, too)."""
    nonzero = [type(t) is not Zero for t in tangents]
    n = len(primals)

    def body(*xs):
        ps = list(xs[:n])
        it = iter(xs[n:])
        ts = [next(it) if nz else Zero(tangent_aval(get_aval(p))) for p, nz in zip(ps, nonzero)]
        outs, out_t = jvp_flat(lambda *a: eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *a), ps, ts)
        return list(outs) + [instantiate(t) for t in out_t]

    live_t = [t for t, nz in zip(tangents, nonzero) if nz]
    body_jaxpr, consts = trace_to_jaxpr(body, [get_aval(x) for x in (*primals, *live_t)],
                                        description="checkpoint")
    outs = checkpoint_p.bind(*consts, *primals, *live_t, jaxpr=as_callee(body_jaxpr),
                             prevent_cse=prevent_cse, differentiated=True, policy=policy)
    m = len(jaxpr.out_avals)
    return outs[:m], outs[m:]


jvp_rules[checkpoint_p] = _jvp


def _partial_eval(trace, args, params):
    """Known outputs (and policy-saved intermediates) now; the rest staged as a checkpoint."""
    closed, policy = params["jaxpr"], params["policy"]
    j = closed.jaxpr
    unknown_vars = {v for v, a in zip(j.invars, args) if trace.is_unknown(a)}
    saved = []
    for e in j.eqns:
        if any(isinstance(v, Var) and v in unknown_vars for v in e.invars):
            unknown_vars.update(e.outvars)
        elif policy is not None and policy(e.primitive, *[v.aval for v in e.invars], **e.params):
            saved.extend(e.outvars)
    out_unknown = [isinstance(v, Var) and v in unknown_vars for v in j.outvars]
    # 1. Known outputs and saved residuals, computed now in the parent trace.
    known_outs = [v for v, u in zip(j.outvars, out_unknown) if not u]
    known_jaxpr, _ = dce_jaxpr(Jaxpr(j.constvars, j.invars, known_outs + saved, j.eqns))
    with set_current_trace(trace.parent):
        vals = eval_jaxpr(known_jaxpr, closed.consts,
                          *[None if trace.is_unknown(a) else a for a in args])
    known_vals, residuals = vals[:len(known_outs)], vals[len(known_outs):]
    # 2. The unknown outputs: the body with saved values as inputs, everything else recomputed.
    saved_set = set(saved)
    rest = Jaxpr(j.constvars, list(j.invars) + saved,
                 [v for v, u in zip(j.outvars, out_unknown) if u],
                 [e for e in j.eqns if not any(v in saved_set for v in e.outvars)])
    rest, _ = dce_jaxpr(rest)
    unknown_vals = []
    if any(out_unknown):
        unknown_vals = StagingTrace.process_primitive(
            trace, checkpoint_p, [*args, *residuals],
            dict(params, jaxpr=ClosedJaxpr(rest, closed.consts)))
    k, u = iter(known_vals), iter(unknown_vals)
    return [next(u) if unk else next(k) for unk in out_unknown]


partial_eval_rules[checkpoint_p] = _partial_eval


def _transpose(cts, *args, jaxpr, prevent_cse, differentiated, policy):
    """Recompute the non-linear part from the known inputs, then run the backward pass."""
    linear = [is_undefined(a) for a in args]
    known = [a for a in args if not is_undefined(a)]
    if prevent_cse and known:
        known = optimization_barrier(known)  # keep XLA from merging recomputation with forward
    j = jaxpr.jaxpr
    view = Jaxpr(list(j.constvars) + [v for v, lin in zip(j.invars, linear) if not lin],
                 [v for v, lin in zip(j.invars, linear) if lin], j.outvars, j.eqns)
    outs = iter(backward_pass(view, [*jaxpr.consts, *known], [True] * len(view.invars),
                              list(cts)))
    return [next(outs) if lin else None for lin in linear]


transpose_rules[checkpoint_p] = _transpose
param_printers[checkpoint_p] = lambda p: {
    "jaxpr": p["jaxpr"], "prevent_cse": p["prevent_cse"], "differentiated": p["differentiated"],
    "policy": getattr(p["policy"], "__name__", p["policy"])}


# --- optimization_barrier ------------------------------------------------------------------
optimization_barrier_p = Primitive("optimization_barrier", multiple_results=True)
abstract_eval_rules[optimization_barrier_p] = lambda *avals: list(avals)
lowering_rules[optimization_barrier_p] = lambda ctx, *args: ctx.op(
    "stablehlo.optimization_barrier", list(args))


def _barrier_jvp(primals, tangents):
    outs = optimization_barrier_p.bind(*primals)
    return outs, list(tangents)


jvp_rules[optimization_barrier_p] = _barrier_jvp
transpose_rules[optimization_barrier_p] = lambda cts, *args: list(cts)


def optimization_barrier(operand):
    """The identity, but XLA may not move computation across it (a pytree of arrays)."""
    leaves, tree = tree_util.tree_flatten(operand)
    return tree_util.tree_unflatten(tree, optimization_barrier_p.bind(*leaves))


# --- names and policies ---------------------------------------------------------------------
name_p = Primitive("name")
abstract_eval_rules[name_p] = lambda x, *, name: x
lowering_rules[name_p] = lambda ctx, x, *, name: x
jvp_rules[name_p] = lambda primals, tangents, *, name: (name_p.bind(primals[0], name=name),
                                                        tangents[0])
transpose_rules[name_p] = lambda ct, x, *, name: [ct]


def checkpoint_name(x, name: str):
    """Tag the arrays of ``x`` with ``name`` so checkpoint policies can save them by name."""
    return tree_util.tree_map(lambda leaf: name_p.bind(leaf, name=name), x)


def _named(fn, name):
    fn.__name__ = fn.__qualname__ = name
    return fn


def _is_dot(prim):
    from plax.lax.dot import dot_general_p
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


checkpoint_policies.save_only_these_names = save_only_these_names
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
        dyn = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = tree_util.tree_flatten((dyn, kwargs))
        box = []

        def flat(*xs):
            d, kw = tree_util.tree_unflatten(in_tree, list(xs))
            it = iter(d)
            full = [args[i] if i in static else next(it) for i in range(n)]
            out_leaves, out_tree = tree_util.tree_flatten(fun(*full, **kw))
            box.append(out_tree)
            return out_leaves

        jaxpr, consts = trace_to_jaxpr(flat, [get_aval(x) for x in leaves],
                                       description=getattr(fun, "__name__", "checkpoint"))
        outs = checkpoint_p.bind(*consts, *leaves, jaxpr=as_callee(jaxpr),
                                 prevent_cse=prevent_cse, differentiated=False, policy=policy)
        return tree_util.tree_unflatten(box[0], outs)

    return checkpointed


remat = checkpoint


# --- batching -------------------------------------------------------------------------------
def _checkpoint_batch(axis, vals, dims, *, jaxpr, prevent_cse, differentiated, policy):
    """A checkpoint of the batched body."""
    from plax.transforms.vmap import batch_jaxpr
    body, consts, out_dims = batch_jaxpr(jaxpr, axis, dims, description="checkpoint")
    outs = checkpoint_p.bind(*consts, *vals, jaxpr=as_callee(body), prevent_cse=prevent_cse,
                             differentiated=differentiated, policy=policy)
    return outs, out_dims


def _register_batching():
    from plax.transforms.vmap import batch_rules, vectorized_rule
    batch_rules[checkpoint_p] = _checkpoint_batch
    batch_rules[optimization_barrier_p] = lambda axis, vals, dims: (
        optimization_barrier_p.bind(*vals), list(dims))
    vectorized_rule(name_p)


_register_batching()
