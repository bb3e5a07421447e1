"""``linear_call``: a call of a function linear in some of its arguments, with a transpose
the user gives (``linear_call_p``).

The equation holds the function as a const-free jaxpr (``callee``, its constants the
leading operands), then the residual operands, then the linear ones. Its jvp is the same
call on the linear tangents (tangents of the residuals are refused: the function need
not be linear in them). Its transpose is a ``linear_call`` of the user's transpose (traced
when first needed, by ``transpose_thunk``) whose own transpose is the original function.
"""
from __future__ import annotations

from plax import tree_util
from plax.core.jaxpr import ClosedJaxpr, call_out_avals, consts_as_inputs, eval_jaxpr
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, impl_rules, is_undefined,
                             jvp_rules,
                             linear_primitives, not_mapped, param_printers, register_lowering,
                             tangent_aval, transpose_rules)
from plax.core.source_info import fun_name
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import get_aval
from plax.first_order.ad_util import instantiate
from plax.first_order.batch_util import move_batch_dim
from plax.higher_order.custom_derivatives import NamedCallable
from plax.lowering.consts import const_operands
from plax.lowering.stablehlo import lower_jaxpr_body
from plax.transforms.toolkit import batch_jaxpr

__all__ = ["linear_call", "linear_call_p"]

linear_call_p = Primitive("linear_call", multiple_results=True)


def linear_call(fun, fun_transpose, residual_args, linear_args):
    """``fun(residual_args, linear_args)``, where ``fun`` is linear in ``linear_args`` and
    ``fun_transpose(residual_args, cotangent)`` is its transpose with respect to them; the
    transpose of the call is a ``linear_call`` of ``fun_transpose``, whose transpose is
    ``fun`` again."""
    res_flat, res_tree = tree_util.tree_flatten(residual_args)
    lin_flat, lin_tree = tree_util.tree_flatten(linear_args)
    lin_avals = [get_aval(x) for x in lin_flat]
    args_tree = tree_util.tree_structure((residual_args, linear_args))
    callee, consts, out_tree = _trace_avals(fun, [get_aval(x) for x in [*res_flat, *lin_flat]],
                                           args_tree, fun_name(fun))

    def transpose_thunk():
        cts = list(callee.out_avals)
        ct_tree = tree_util.tree_structure((residual_args, tree_util.tree_unflatten(
            out_tree, [0] * len(cts))))
        example = [*(get_aval(r) for r in res_flat), *cts]
        body, t_consts, t_out_tree = _trace_avals(fun_transpose, example, ct_tree,
                                                  fun_name(fun_transpose))
        if t_out_tree != lin_tree:
            raise TypeError(f"linear_call: the transpose {fun_name(fun_transpose)} returns a "
                            f"pytree of structure {t_out_tree}, but the linear arguments have "
                            f"structure {lin_tree}.")
        for got, want in zip(body.out_avals, lin_avals):
            if got.shape != want.shape or got.dtype != want.dtype:
                raise TypeError(f"linear_call: the transpose {fun_name(fun_transpose)} returns "
                                f"{got.str_short()} for a linear argument of type "
                                f"{want.str_short()}.")
        return body, t_consts

    outs = linear_call_p.bind(*consts, *res_flat, *lin_flat, callee=callee,
                              transpose_thunk=NamedCallable(_memoized(transpose_thunk),
                                                            fun_name(fun_transpose)),
                              num_callee_consts=len(consts), num_res=len(res_flat))
    return tree_util.tree_unflatten(out_tree, outs)


def _trace_avals(fun, avals, tree, description):
    """``fun`` on the flat leaves of a pytree: (const-free body, consts, output tree)."""
    box = []

    def flat(*xs):
        out = fun(*tree_util.tree_unflatten(tree, list(xs)))
        leaves, out_tree = tree_util.tree_flatten(out)
        box.append(out_tree)
        return leaves

    jaxpr, consts = trace_to_jaxpr(flat, list(avals), description=description)
    body, consts = consts_as_inputs(ClosedJaxpr(jaxpr, consts))
    return body, consts, box[0]


def _memoized(thunk):
    cell = []

    def once():
        if not cell:
            cell.append(thunk())
        return cell[0]
    return once


# --- the primitive's rules -----------------------------------------------------------------
def _abstract(*avals, callee, transpose_thunk, num_callee_consts, num_res):
    return call_out_avals("linear_call", callee, avals)


def _impl(*args, callee, **_):
    return eval_jaxpr(callee.jaxpr, callee.consts, *args)


def _lowering(ctx, *args, callee, **_):
    return lower_jaxpr_body(ctx.fn, callee.jaxpr, [*const_operands(ctx, callee), *args])


def _jvp(primals, tangents, *, callee, transpose_thunk, num_callee_consts, num_res):
    n_fixed = num_callee_consts + num_res
    if any(type(t) is not Zero for t in tangents[:n_fixed]):
        raise TypeError("linear_call: the residual arguments (and the values the linear "
                        "function closes over) cannot be differentiated; only the linear "
                        "arguments carry tangents.")
    params = dict(callee=callee, transpose_thunk=transpose_thunk,
                  num_callee_consts=num_callee_consts, num_res=num_res)
    outs = linear_call_p.bind(*primals, **params)
    lin_tans = tangents[n_fixed:]
    if all(type(t) is Zero for t in lin_tans):
        return outs, [Zero(tangent_aval(get_aval(o))) for o in outs]
    tans = linear_call_p.bind(*primals[:n_fixed], *(instantiate(t) for t in lin_tans), **params)
    return outs, tans


def _transpose(cts, *args, callee, transpose_thunk, num_callee_consts, num_res):
    n_fixed = num_callee_consts + num_res
    if any(is_undefined(a) for a in args[:n_fixed]):
        raise TypeError("linear_call: the transpose is taken with respect to the linear "
                        "arguments only; a residual argument was linear.")
    if all(type(c) is Zero for c in cts):
        return [None] * len(args)
    consts, res = list(args[:num_callee_consts]), list(args[num_callee_consts:n_fixed])
    t_callee, t_consts = transpose_thunk()
    back = NamedCallable(lambda: (callee, consts), fun_name(callee))
    lin_cts = linear_call_p.bind(*t_consts, *res, *(instantiate(c) for c in cts),
                                 callee=t_callee, transpose_thunk=back,
                                 num_callee_consts=len(t_consts), num_res=num_res)
    return [None] * n_fixed + list(lin_cts)


def _batch(axis, vals, dims, *, callee, transpose_thunk, num_callee_consts, num_res):
    """The function and its transpose batched alike: linear inputs and outputs batched at 0."""
    n_fixed = num_callee_consts + num_res
    vals = [v if d is not_mapped else move_batch_dim(v, d, 0, axis.size)
            for v, d in zip(vals, dims)]
    dims = [not_mapped if d is not_mapped else 0 for d in dims]
    lin = [move_batch_dim(v, d, 0, axis.size) for v, d in zip(vals[n_fixed:], dims[n_fixed:])]
    res_dims = dims[num_callee_consts:n_fixed]
    n_out = len(callee.out_avals)
    body, extra, _ = batch_jaxpr(callee, axis, [*dims[:n_fixed], *[0] * len(lin)],
                                 description="vmap(linear_call)", out_dims=[0] * n_out)
    b_callee, extra = consts_as_inputs(ClosedJaxpr(body, extra))

    def batched_thunk():
        t_callee, t_consts = transpose_thunk()
        t_body, t_extra, _ = batch_jaxpr(
            t_callee, axis, [*[not_mapped] * len(t_consts), *res_dims, *[0] * n_out],
            description="vmap(linear_call transpose)", out_dims=[0] * len(lin))
        t_b, t_extra = consts_as_inputs(ClosedJaxpr(t_body, t_extra))
        return t_b, [*t_extra, *t_consts]

    outs = linear_call_p.bind(*extra, *vals[:n_fixed], *lin, callee=b_callee,
                              transpose_thunk=NamedCallable(_memoized(batched_thunk),
                                                            repr(transpose_thunk)),
                              num_callee_consts=len(extra) + num_callee_consts, num_res=num_res)
    return outs, [0] * len(outs)


abstract_eval_rules[linear_call_p] = _abstract
impl_rules[linear_call_p] = _impl
register_lowering(linear_call_p, _lowering)
jvp_rules[linear_call_p] = _jvp
transpose_rules[linear_call_p] = _transpose
batch_rules[linear_call_p] = _batch
linear_primitives.add(linear_call_p)
param_printers[linear_call_p] = lambda p: {
    "callee": p["callee"], "num_callee_consts": p["num_callee_consts"],
    "num_res": p["num_res"], "transpose_thunk": p["transpose_thunk"]}
