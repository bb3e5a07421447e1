"""``remat_opt``: a custom_vjp ``fwd`` rule defined with ``optimize_remat=True``.

The equation runs the ``fwd`` rule (``fwd_jaxpr``: residuals first, then the outputs; its
constants the leading ``num_consts`` operands) and remembers how to trace the primal
function (``fun_jaxpr_thunk``). Its dead-code rule is the point: where no residual is
used -- the forward pass of a rematerialised (``checkpoint``) function, whose residuals
are recomputed later -- the equation becomes a ``closed_call`` of the primal function,
which may be much cheaper than ``fwd`` (an opaque kernel computing both).
"""
from __future__ import annotations

from plax.core import dtypes
from plax.core.dce import dce_closed, jaxpr_has_effects
from plax.core.jaxpr import ClosedJaxpr, call_out_avals, consts_as_inputs, eval_jaxpr
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, dce_rules, impl_rules,
                             jvp_rules, not_mapped, param_printers, register_lowering,
                             tangent_aval, transpose_rules)
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import get_aval
from plax.first_order.ad_util import instantiate
from plax.first_order.batch_util import move_batch_dim
from plax.higher_order.bodies import permute_body
from plax.higher_order.call import closed_call_p
from plax.lowering.consts import const_operands
from plax.lowering.stablehlo import lower_jaxpr_body
from plax.transforms.toolkit import batch_jaxpr, jvp_jaxpr

__all__ = ["remat_opt_p", "remat_opt_fwd"]

remat_opt_p = Primitive("remat_opt", multiple_results=True)


class _Thunk:
    """A memoised ``() -> ClosedJaxpr`` (the primal function's body), printed by name."""

    __slots__ = ("make", "value", "name")

    def __init__(self, make, name):
        self.make, self.value, self.name = make, None, name

    def __call__(self):
        if self.value is None:
            self.value = self.make()
        return self.value

    def __repr__(self):
        return self.name


def remat_opt_fwd(fwd_flat, fun_flat, primals, name):
    """Run ``fwd_flat(*primals) -> (out leaves, residual leaves)`` as one ``remat_opt``
    equation whose primal function is ``fun_flat(*primals) -> out leaves``."""
    avals = [get_aval(p) for p in primals]
    box = []

    def fwd_body(*xs):
        outs, res = fwd_flat(*xs)
        box[:] = [len(res)]
        return [*res, *outs]

    jaxpr, consts = trace_to_jaxpr(fwd_body, avals, description=f"{name} fwd")
    fwd, consts = consts_as_inputs(ClosedJaxpr(jaxpr, consts))
    num_res = box[0]

    def trace_fun():
        fun_jaxpr, fun_consts = trace_to_jaxpr(lambda *xs: list(fun_flat(*xs)), avals,
                                               description=name)
        return ClosedJaxpr(fun_jaxpr, fun_consts)

    outs = remat_opt_p.bind(*consts, *primals, num_consts=len(consts), num_res=num_res,
                            fwd_jaxpr=fwd, fun_jaxpr_thunk=_Thunk(trace_fun, name))
    return outs[num_res:], outs[:num_res]


# --- the primitive's rules -----------------------------------------------------------------
def _abstract(*avals, num_consts, num_res, fwd_jaxpr, fun_jaxpr_thunk):
    return call_out_avals("remat_opt", fwd_jaxpr, avals)


def _impl(*args, fwd_jaxpr, **_):
    return eval_jaxpr(fwd_jaxpr.jaxpr, fwd_jaxpr.consts, *args)


def _lowering(ctx, *args, fwd_jaxpr, **_):
    return lower_jaxpr_body(ctx.fn, fwd_jaxpr.jaxpr, [*const_operands(ctx, fwd_jaxpr), *args])


def _batch(axis, vals, dims, *, num_consts, num_res, fwd_jaxpr, fun_jaxpr_thunk):
    vals = [v if d is not_mapped else move_batch_dim(v, d, 0, axis.size)
            for v, d in zip(vals, dims)]
    dims = [not_mapped if d is not_mapped else 0 for d in dims]
    n_out = len(fwd_jaxpr.out_avals)
    body, extra, _ = batch_jaxpr(fwd_jaxpr, axis, dims, description="vmap(remat_opt)",
                                 out_dims=[0] * n_out)
    fwd, extra = consts_as_inputs(ClosedJaxpr(body, extra))
    prim_dims = dims[num_consts:]

    def batched_fun():
        fun = fun_jaxpr_thunk()
        b, c, _ = batch_jaxpr(fun, axis, prim_dims, description="vmap(remat_opt fun)",
                              out_dims=[0] * len(fun.out_avals))
        return ClosedJaxpr(b, c)

    outs = remat_opt_p.bind(*extra, *vals, num_consts=len(extra) + num_consts,
                            num_res=num_res, fwd_jaxpr=fwd,
                            fun_jaxpr_thunk=_Thunk(batched_fun, repr(fun_jaxpr_thunk)))
    return outs, [0] * n_out


def _jvp(primals, tangents, *, num_consts, num_res, fwd_jaxpr, fun_jaxpr_thunk):
    consts, prims = primals[:num_consts], primals[num_consts:]
    const_tans, prim_tans = tangents[:num_consts], tangents[num_consts:]
    const_nz = [type(t) is not Zero for t in const_tans]
    prim_tans = [instantiate(t) for t in prim_tans]
    n_prim, n_out = len(prims), len(fwd_jaxpr.out_avals)
    body, _ = jvp_jaxpr(fwd_jaxpr, const_nz + [True] * n_prim, instantiate=True,
                        description="jvp(remat_opt)")
    # body: (consts, prims, const tangents, prim tangents) -> (res, outs, res_t, outs_t);
    # as a remat_opt: (consts, const tangents | prims, prim tangents) -> (res, res_t | outs,
    # outs_t), so that its primal function is the jvp of the primal function.
    n_c, n_ct = num_consts, sum(const_nz)
    in_order = [*range(n_c), *range(n_c + n_prim, n_c + n_prim + n_ct),
                *range(n_c, n_c + n_prim), *range(n_c + n_prim + n_ct, n_c + 2 * n_prim + n_ct)]
    n_o = n_out - num_res
    out_order = [*range(num_res), *range(n_out, n_out + num_res),
                 *range(num_res, n_out), *range(n_out + num_res, 2 * n_out)]
    jvp_body, jvp_consts = consts_as_inputs(permute_body(body, in_order, out_order))

    def jvp_fun():
        fun = fun_jaxpr_thunk()
        return jvp_jaxpr(fun, [True] * n_prim, instantiate=True,
                         description="jvp(remat_opt fun)")[0]

    outs = remat_opt_p.bind(*jvp_consts, *consts, *(t for t in const_tans if type(t) is not Zero),
                            *prims, *prim_tans, num_consts=len(jvp_consts) + n_c + n_ct,
                            num_res=2 * num_res, fwd_jaxpr=jvp_body,
                            fun_jaxpr_thunk=_Thunk(jvp_fun, f"jvp({fun_jaxpr_thunk!r})"))
    res, res_t = outs[:num_res], outs[num_res:2 * num_res]
    o, o_t = outs[2 * num_res:2 * num_res + n_o], outs[2 * num_res + n_o:]
    avals = fwd_jaxpr.out_avals
    tans = [t if tangent_aval(a).dtype != dtypes.float0 else Zero(tangent_aval(a))
            for t, a in zip([*res_t, *o_t], avals)]
    return [*res, *o], tans


def _transpose(cts, *args, **params):
    raise NotImplementedError("remat optimization for custom_vjp does not support higher-order "
                              "AD")


def _dce(used_outputs, eqn):
    num_consts, num_res = eqn.params["num_consts"], eqn.params["num_res"]
    fwd = eqn.params["fwd_jaxpr"]
    used = [bool(u) for u in used_outputs]
    if not any(used) and not jaxpr_has_effects(fwd):
        return [False] * len(eqn.invars), None
    used_res, used_outs = used[:num_res], used[num_res:]
    outvars = [v for v, u in zip(eqn.outvars, used) if u]
    if any(used_res):
        # fwd still runs here; its primal inputs stay (a later DCE may swap it again).
        n_in = len(eqn.invars)
        pruned, used_in = dce_closed(fwd, used, instantiate=[False] * num_consts +
                                     [True] * (n_in - num_consts))
        return used_in, eqn.replace(
            invars=[v for v, u in zip(eqn.invars, used_in) if u], outvars=outvars,
            params=dict(eqn.params, fwd_jaxpr=pruned, num_res=sum(used_res),
                        num_consts=sum(used_in[:num_consts])))
    # No residual is used: the primal function computes what is.
    fun = eqn.params["fun_jaxpr_thunk"]()
    pruned, used_in = dce_closed(fun, used_outs)
    prim_vars = eqn.invars[num_consts:]
    return [False] * num_consts + list(used_in), eqn.replace(
        primitive=closed_call_p, invars=[v for v, u in zip(prim_vars, used_in) if u],
        outvars=outvars, params={"call_jaxpr": pruned})


abstract_eval_rules[remat_opt_p] = _abstract
impl_rules[remat_opt_p] = _impl
register_lowering(remat_opt_p, _lowering)
batch_rules[remat_opt_p] = _batch
jvp_rules[remat_opt_p] = _jvp
transpose_rules[remat_opt_p] = _transpose
dce_rules[remat_opt_p] = _dce
param_printers[remat_opt_p] = lambda p: {
    "fun_jaxpr_thunk": p["fun_jaxpr_thunk"], "fwd_jaxpr": p["fwd_jaxpr"],
    "num_consts": p["num_consts"], "num_res": p["num_res"]}
