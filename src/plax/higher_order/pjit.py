"""pjit: a call of a staged jaxpr, the primitive behind nested ``jit``.

A jitted function called inside another trace appears as one ``pjit``
equation holding the callee's jaxpr (without constants: they are its leading
operands), so that transformations have one place to act. Every rule is here,
each built from the jaxpr toolkit: the jvp, batched, split (partial eval) and
transposed bodies are jits again, so a jit stays one compiled call through
every transformation.
"""
from __future__ import annotations

import functools

from plax.core import dtypes
from plax.core.caches import WeakKeyCache
from plax.core.dce import dce_jaxpr, jaxpr_has_effects
from plax.core.jaxpr import ClosedJaxpr, call_out_avals, callee_of, consts_as_inputs
from plax.core.primitive import Primitive
from plax.core.trace import get_aval
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, dce_rules, discharge_rules,
                             impl_rules,
                             is_undefined, jvp_rules, param_printers, partial_eval_rules,
                             register_lowering, tangent_aval, transpose_rules)
from plax.lowering.consts import const_operands
from plax.core.effects import has_ordered_effects
from plax.lowering.stablehlo import (abstract_token, constrain_sharding, define_function,
                                     inlines_calls, lower_jaxpr_body)
from plax.runtime.jitted import JitCall, call_jitted
from plax.sharding.gspmd import as_mesh_sharding
from plax.sharding.named import NamedSharding
from plax.transforms.discharge import call_discharge_rule
from plax.transforms.toolkit import batch_jaxpr, jvp_jaxpr, partial_eval_jaxpr, transpose_jaxpr

pjit_p = Primitive("jit", multiple_results=True)  # printed jit[...], as in JAX 0.10


def _abstract(*avals, jaxpr: ClosedJaxpr, name, donated_invars, keep_unused, inline, device,
              compiler_options, in_shardings=(), out_shardings=()):
    return call_out_avals(f"pjit {name}", jaxpr, avals)


def _impl(*args, **params):
    closed = params["jaxpr"]
    if closed.consts:  # (a nested jit's constants, run now: leading operands again)
        n = len(closed.consts)
        callee, consts = consts_as_inputs(closed)
        shardings = params.get("in_shardings") or ()
        params = dict(params, jaxpr=callee, donated_invars=(False,) * n + tuple(
            params["donated_invars"]), in_shardings=(None,) * n + tuple(shardings)
            if shardings else ())
        args = [*consts, *args]
    return run_call(JitCall.of(params), args)


def run_call(call: JitCall, args):
    """Run ``call`` on concrete ``args`` eagerly (pjit's eager rule), with the eager checks."""
    run = functools.partial(call_jitted, call, args)
    for check in _eager_call_checks:
        run = functools.partial(check, call.jaxpr, args, run)
    return run()


# Checks installed from above around eager calls (api/jit's key-reuse check): each takes
# (jaxpr, args, run) and returns run()'s outputs.
_eager_call_checks: list = []


def add_eager_call_check(check) -> None:
    """Run ``check(jaxpr, args, run)`` around every eager call of a jitted function."""
    _eager_call_checks.append(check)


def _lowering(ctx, *args, jaxpr: ClosedJaxpr, name, donated_invars, keep_unused, inline,
              device, compiler_options, in_shardings=(), out_shardings=()):
    """A private function holding the callee, and a call to it (the body inlined where the
    module needs it: ``inlines_calls``)."""
    if inlines_calls(ctx.fn):
        return lower_jaxpr_body(ctx.fn, jaxpr.jaxpr, [*const_operands(ctx, jaxpr), *args])
    callee = ctx.fn.module.unique_name(name)
    # The body's scopes are relative to the jit: prefix them with this call site's. A nested
    # jit's closed-over constants are constants of its function, as JAX's (XLA folds them
    # there; passed in, they would be arguments).
    define_function(ctx.module_context, callee, jaxpr.jaxpr,
                    scope=ctx.fn.eqn_scope + (f"jit({name})",),
                    consts=list(jaxpr.consts) if jaxpr.consts else None)
    # A nested jit's shardings, inside an SPMD program, constrain its operands and results.
    spmd = ctx.fn.module.devices is not None
    if spmd and in_shardings and len(in_shardings) == len(args):
        args = _constrained(ctx, args, ctx.avals_in, in_shardings)
    outs = call_function(ctx, callee, jaxpr, args, consts_inside=bool(jaxpr.consts))
    if spmd and out_shardings and len(out_shardings) == len(outs):
        outs = _constrained(ctx, outs, ctx.avals_out, out_shardings)
    return outs


def call_function(ctx, callee: str, jaxpr: ClosedJaxpr, args, consts_inside=False) -> list:
    """A ``func.call`` of the private function ``callee`` (``jaxpr`` lowered) on ``args``
    after the jaxpr's consts (none with ``consts_inside``: the callee holds them as
    constants), threading the ordered-effect token when the body has one."""
    consts = [] if consts_inside else const_operands(ctx, jaxpr)
    const_avals = [] if consts_inside else [v.aval for v in jaxpr.jaxpr.constvars]
    if has_ordered_effects(jaxpr):  # the callee takes and returns the token first
        outs = ctx.op("func.call", [ctx.fn.token, *consts, *args],
                      [abstract_token, *const_avals, *ctx.avals_in],
                      [abstract_token, *ctx.avals_out], props=f"callee = @{callee}")
        ctx.fn.token, outs = outs[0], outs[1:]
        return outs
    return ctx.op("func.call", [*consts, *args], [*const_avals, *ctx.avals_in],
                  props=f"callee = @{callee}")


def _constrained(ctx, values, avals, shardings) -> list:
    shardings = [as_mesh_sharding(s) for s in shardings]
    return [v if not isinstance(s, NamedSharding) else constrain_sharding(ctx, v, a, s)
            for v, a, s in zip(values, avals, shardings)]


abstract_eval_rules[pjit_p] = _abstract
impl_rules[pjit_p] = _impl
register_lowering(pjit_p, _lowering)
# As JAX shows it: the callee's name and jaxpr (plus donation when any).
param_printers[pjit_p] = lambda p: {
    "name": p["name"], "jaxpr": p["jaxpr"],
    **({"donated_invars": p["donated_invars"]} if any(p["donated_invars"]) else {}),
    **{k: p[k] for k in ("in_shardings", "out_shardings") if p.get(k)}}


def _call(callee: ClosedJaxpr, args, params, name: str):
    """Bind a jit of ``callee`` (its consts become leading operands) with ``params``."""
    body, consts = consts_as_inputs(callee)
    ins = [*consts, *args]
    return pjit_p.bind(*ins, **dict(params, jaxpr=body, name=name,
                                    donated_invars=(False,) * len(ins)))


# A jit built by a transformation (its jvp, transpose, batched or partially evaluated body)
# takes other operands than the user's: its layouts are left to XLA (in_shardings=() and
# out_shardings=() mean unconstrained).
_UNCONSTRAINED = {"in_shardings": (), "out_shardings": ()}


def _params(params):
    return {**{k: v for k, v in params.items() if k not in ("jaxpr", "name", "donated_invars")},
            **_UNCONSTRAINED}


# --- jvp: a jit of the body's jvp --------------------------------------------------------
def _jvp(primals, tangents, *, jaxpr, name, **params):
    nonzeros = [type(t) is not Zero for t in tangents]
    # An output not depending on a nonzero tangent keeps a symbolic-zero tangent (as JAX's).
    out_tan_avals = [tangent_aval(a) for a in jaxpr.out_avals]
    body, out_nonzeros = jvp_jaxpr(jaxpr, nonzeros, instantiate=False,
                                   description=f"jvp({name})")
    outs = _call(body, [*primals, *(t for t in tangents if type(t) is not Zero)],
                 _params(params), name)  # (JAX keeps the name: the name stack says jvp)
    m = len(out_tan_avals)
    it = iter(outs[m:])
    return outs[:m], [next(it) if nz else Zero(a) for a, nz in zip(out_tan_avals, out_nonzeros)]


jvp_rules[pjit_p] = _jvp


# --- partial evaluation: a known jit now, an unknown jit of residuals staged --------------
# An inline jit (plax.numpy's functions) is inlined when staged under a jit; under an eager
# linearize its known part still runs as one program, as JAX's does.
def _partial_eval(trace, args, params):
    closed = params["jaxpr"]
    inline = params["inline"]
    if inline and not trace.parent.evaluates_eagerly():
        return trace.eval_jaxpr(closed, args)
    unknowns = [trace.is_unknown(a) for a in args]
    known, unknown, out_unknowns, num_res = partial_eval_jaxpr(
        closed, unknowns, instantiate=False, description=params["name"])
    known_body, known_consts = consts_as_inputs(known)
    known_in = [*known_consts, *(a for a, u in zip(args, unknowns) if not u)]
    known_out = trace.known(pjit_p, known_in, dict(
        params, jaxpr=known_body, donated_invars=(False,) * len(known_in), **_UNCONSTRAINED))
    n_known = len(known_out) - num_res
    unknown_out = []
    if any(out_unknowns):
        unknown_in = [*known_out[n_known:], *(a for a, u in zip(args, unknowns) if u)]
        if inline:  # (its known part ran as one program; the rest is staged op by op)
            unknown_out = trace.eval_jaxpr(unknown, unknown_in)
        else:
            unknown_out = trace.stage(pjit_p, unknown_in, dict(
                params, jaxpr=unknown, donated_invars=(False,) * len(unknown_in),
                **_UNCONSTRAINED))
    k, u = iter(known_out[:n_known]), iter(unknown_out)
    return [next(u) if unk else next(k) for unk in out_unknowns]


partial_eval_rules[pjit_p] = _partial_eval


# --- transpose: a jit of the backward pass of the body -------------------------------------
def _transpose(cts, *args, jaxpr, name, **params):
    linear = [is_undefined(a) for a in args]
    nonzero = [type(c) is not Zero for c in cts]
    body = transpose_jaxpr(jaxpr, linear, nonzero, description=f"transpose({name})")
    res = [a for a in args if not is_undefined(a)]
    outs = iter(_call(body, [*res, *(c for c in cts if type(c) is not Zero)], _params(params),
                      name))
    return [next(outs) if lin else None for lin in linear]


transpose_rules[pjit_p] = _transpose


# --- batching: a jit of the batched body ------------------------------------------------------
def _batch(axis, vals, dims, *, jaxpr, name, donated_invars, **params):
    body, consts, out_dims = batch_jaxpr(jaxpr, axis, dims, description=f"vmap({name})",
                                         in_avals=[get_aval(v) for v in vals])
    callee = callee_of(body)
    outs = pjit_p.bind(*consts, *vals, jaxpr=callee, name=name,
                       donated_invars=(False,) * len(consts) + tuple(donated_invars),
                       **dict(params, **_UNCONSTRAINED))
    return outs, out_dims


batch_rules[pjit_p] = _batch


# --- dead code: a jit returning only its used outputs, on the inputs they need ----------------
def _dce(used_outputs, eqn):
    closed = eqn.params["jaxpr"]
    keep_unused = eqn.params["keep_unused"]
    if not any(used_outputs) and not keep_unused and not jaxpr_has_effects(closed):
        return [False] * len(eqn.invars), None
    key = (tuple(used_outputs), keep_unused)
    hit = _pruned_bodies.get(closed, key)
    if hit is None:
        body, used_inputs = dce_jaxpr(closed.jaxpr, used_outputs, instantiate=keep_unused)
        kept = [u or keep_unused for u in used_inputs]
        if all(kept) and len(body.eqns) == len(closed.jaxpr.eqns) and all(used_outputs):
            # Nothing to remove: keep the body (and its compiled executable). None, not
            # ``closed``: a value holding its own weak key would keep the entry forever.
            pruned = None
        else:
            live = set(body.constvars)
            pruned = ClosedJaxpr(body, [c for v, c in zip(closed.jaxpr.constvars, closed.consts)
                                        if v in live])
        hit = _pruned_bodies.put(closed, key, (pruned, kept))
    pruned, kept = hit
    if pruned is None:
        return kept, eqn
    new = eqn.replace(
        invars=[v for v, k in zip(eqn.invars, kept) if k],
        outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u],
        params=dict(eqn.params, jaxpr=pruned,
                    donated_invars=tuple(d for d, k in zip(eqn.params["donated_invars"], kept)
                                         if k),
                    in_shardings=tuple(s for s, k in zip(eqn.params.get("in_shardings") or
                                                         (None,) * len(kept), kept) if k)
                    if eqn.params.get("in_shardings") else (),
                    out_shardings=tuple(s for s, u in zip(eqn.params["out_shardings"],
                                                          used_outputs) if u)
                    if eqn.params.get("out_shardings") else ()))
    return kept, new


_pruned_bodies = WeakKeyCache("pjit dce")
dce_rules[pjit_p] = _dce
# References a nested jit reads or writes are discharged with its body, inlined.
discharge_rules[pjit_p] = call_discharge_rule("jaxpr")
