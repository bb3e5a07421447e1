"""pjit: a call of a staged jaxpr, the primitive behind nested ``jit``.

A jitted function called inside another trace appears as one ``pjit``
equation holding the callee's jaxpr, so that transformations have one
place to act. Its rules: abstract evaluation from the jaxpr, eager
execution as one compiled executable, and lowering as a private
``func.func`` called from the parent module.
"""
from __future__ import annotations

from plax.core import dtypes
from plax.core.jaxpr import ClosedJaxpr, call_out_avals, param_printers
from plax.core.primitive import Primitive, abstract_eval_rules, impl_rules
from plax.lowering.stablehlo import define_function, lowering_rules

pjit_p = Primitive("pjit", multiple_results=True)


def _pjit_abstract(*avals, jaxpr: ClosedJaxpr, name, donated_invars, keep_unused, inline, device,
                   compiler_options):
    return call_out_avals(f"pjit {name}", jaxpr, avals)


def _pjit_impl(*args, jaxpr, name, donated_invars, keep_unused, inline, device, compiler_options):
    from plax.runtime.dispatch import call_jitted
    return call_jitted(jaxpr, name, donated_invars, keep_unused, device, args, compiler_options)


def _pjit_lowering(ctx, *args, jaxpr: ClosedJaxpr, name, donated_invars, keep_unused, inline,
                   device, compiler_options):
    """A private function holding the callee, and a call to it."""
    callee = ctx.fn.module.unique_name(name)
    # The body's scopes are relative to the jit: prefix them with this call site's.
    define_function(ctx.fn.module, callee, jaxpr.jaxpr, scope=ctx.fn.eqn_scope + (f"jit({name})",))
    return ctx.op("func.call", list(args), props=f"callee = @{callee}")


abstract_eval_rules[pjit_p] = _pjit_abstract
impl_rules[pjit_p] = _pjit_impl
lowering_rules[pjit_p] = _pjit_lowering
# As JAX shows it: the callee's name and jaxpr (plus donation when any).
param_printers[pjit_p] = lambda p: {"name": p["name"], "jaxpr": p["jaxpr"],
                                    **({"donated_invars": p["donated_invars"]}
                                       if any(p["donated_invars"]) else {})}


# --- differentiation ------------------------------------------------------------------------
def _pjit_jvp(primals, tangents, *, jaxpr, name, donated_invars, keep_unused, inline, device,
              compiler_options):
    """A jit of the jvp of the body: takes primals and (non-zero) tangents, returns both."""
    from plax.core.jaxpr import Jaxpr, eval_jaxpr
    from plax.core.staging import trace_to_jaxpr
    from plax.core.trace import Tracer, get_aval
    from plax.transforms.jvp import Zero, instantiate, jvp_flat, tangent_aval
    nonzero = [type(t) is not Zero for t in tangents]
    n = len(primals)
    # Integer/boolean outputs have float0 tangents, which XLA cannot carry: they stay Zero.
    out_tan_avals = [tangent_aval(a) for a in jaxpr.out_avals]
    diff_out = [a.dtype != dtypes.float0 for a in out_tan_avals]

    def body(*args):
        ps = list(args[:n])
        it = iter(args[n:])
        ts = [next(it) if nz else Zero(tangent_aval(get_aval(p))) for p, nz in zip(ps, nonzero)]
        outs, out_t = jvp_flat(lambda *xs: eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *xs), ps, ts)
        return list(outs) + [instantiate(t) for t, d in zip(out_t, diff_out) if d]

    in_avals = [get_aval(p) for p in primals] + [get_aval(t) for t, nz in zip(tangents, nonzero) if nz]
    # The same jit differentiated the same way reuses its jvp callee (and so its executable).
    key = (jaxpr, tuple(nonzero), tuple(in_avals))
    cached = _jvp_callees.get(key)
    if cached is None:
        body_jaxpr, consts = trace_to_jaxpr(body, in_avals, description=f"jvp({name})")
        callee = ClosedJaxpr(Jaxpr([], list(body_jaxpr.constvars) + list(body_jaxpr.invars),
                                   body_jaxpr.outvars, body_jaxpr.eqns), [])
        if not any(isinstance(c, Tracer) for c in consts):
            _jvp_callees[key] = (callee, consts)
    else:
        callee, consts = cached
    outs = pjit_p.bind(*consts, *primals, *[t for t, nz in zip(tangents, nonzero) if nz],
                       jaxpr=callee, name=f"jvp({name})",
                       donated_invars=(False,) * len(callee.jaxpr.invars), keep_unused=keep_unused,
                       inline=inline, device=device, compiler_options=compiler_options)
    m = len(jaxpr.out_avals)
    it = iter(outs[m:])
    return outs[:m], [next(it) if d else Zero(a) for a, d in zip(out_tan_avals, diff_out)]


_jvp_callees: dict = {}  # (jaxpr, primal and non-zero tangent avals) -> (callee, consts)


def _register_jvp():
    from plax.transforms.jvp import jvp_rules
    jvp_rules[pjit_p] = _pjit_jvp


_register_jvp()



def _prune_pjit_outputs(eqn, used):
    """A jit call returning only its ``used`` outputs, its body without what they do not need
    (e.g. the primal value a split jit computes for grad)."""
    from plax.core.jaxpr import dce_jaxpr
    callee = eqn.params["jaxpr"]
    body, _ = dce_jaxpr(callee.jaxpr, used)
    live = set(body.constvars)
    consts = [c for v, c in zip(callee.jaxpr.constvars, callee.consts) if v in live]
    return eqn.replace(outvars=[v for v, u in zip(eqn.outvars, used) if u],
                       params=dict(eqn.params, jaxpr=ClosedJaxpr(body, consts)))


def _register_dce():
    from plax.transforms.dce import dce_rules
    dce_rules[pjit_p] = _prune_pjit_outputs


_register_dce()


# --- batching -------------------------------------------------------------------------------
def _pjit_batch(axis, vals, dims, *, jaxpr, name, donated_invars, keep_unused, inline, device,
                compiler_options):
    """A jit of the batched body; each (jaxpr, batch layout, axis) is batched once."""
    from plax.core.trace import Tracer, axis_env
    from plax.transforms.linearize import as_callee
    from plax.transforms.vmap import batch_jaxpr
    key = (jaxpr, tuple(dims), axis.name, axis.size, axis.spmd_name, axis_env())
    cached = _batched_callees.get(key)
    if cached is None:
        body, consts, out_dims = batch_jaxpr(jaxpr, axis, dims, description=f"vmap({name})")
        cached = (as_callee(body), consts, out_dims)
        if not any(isinstance(c, Tracer) for c in consts):
            _batched_callees[key] = cached
    callee, consts, out_dims = cached
    outs = pjit_p.bind(*consts, *vals, jaxpr=callee, name=name,
                       donated_invars=(False,) * len(consts) + tuple(donated_invars),
                       keep_unused=keep_unused, inline=inline, device=device,
                       compiler_options=compiler_options)
    return outs, out_dims


_batched_callees: dict = {}  # (jaxpr, batch dims, axis) -> (callee, consts, out_dims)


def _register_batching():
    from plax.transforms.vmap import batch_rules
    batch_rules[pjit_p] = _pjit_batch


_register_batching()
