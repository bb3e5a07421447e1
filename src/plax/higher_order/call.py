"""``closed_call`` and ``call``: JAX's plain call primitives, a jaxpr called on its operands.

Neither is a jit boundary: eagerly the body runs equation by equation, and under ``jit`` it
is lowered inline. Their one parameter is ``call_jaxpr``: a ``ClosedJaxpr`` for
``closed_call``, an open ``Jaxpr`` without constvars for ``call`` (JAX's types, which
interpreters written for JAX read). Each rule (jvp, partial evaluation, transpose, batching,
DCE) transforms the body with the jaxpr toolkit and calls the result with the same
primitive, so a call stays one equation through every transformation.

Both are bound as JAX's are: with a function, ``call_p.bind(fun, *args)`` or
``call_p.bind(*args, subfuns=(fun,))`` (``fun`` a ``linear_util.WrappedFun`` returning a
sequence of arrays): eagerly the function just runs, under a trace it is traced into the
``call_jaxpr`` of one equation. With ``call_jaxpr=`` given (as a jaxpr's evaluation binds
its equations) the body is called as it is.
"""
from __future__ import annotations

from plax.core import dtypes
from plax.core.caches import WeakKeyCache
from plax.core.dce import dce_closed, jaxpr_has_effects
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, call_out_avals, consts_as_inputs, eval_jaxpr
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, dce_rules, discharge_rules,
                             impl_rules,
                             is_undefined, jvp_rules, partial_eval_rules, register_lowering,
                             tangent_aval, transpose_rules)
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import EvalTrace, current_trace, get_aval
from plax.lowering.consts import const_operands
from plax.higher_order.pjit import call_function
from plax.lowering.stablehlo import define_function, inlines_calls, lower_jaxpr_body
from plax.transforms.discharge import call_discharge_rule
from plax.transforms.toolkit import batch_jaxpr, jvp_jaxpr, partial_eval_jaxpr, transpose_jaxpr


class CallPrimitive(Primitive):
    """A primitive calling the jaxpr in its ``call_jaxpr`` parameter, bound with a
    function (traced into that jaxpr) or with the jaxpr itself."""

    call_primitive = True  # JAX's flag: interpreters look for ``call_jaxpr`` in its params

    def __init__(self, name: str):
        super().__init__(name, multiple_results=True)

    def bind(self, *args, **params):
        fun, args, params = _function_of(self, args, params)
        if fun is None:
            return super().bind(*args, **params)
        if isinstance(current_trace(), EvalTrace):
            return list(fun.call_wrapped(*args))  # as JAX: eagerly, the function runs
        jaxpr, consts = trace_to_jaxpr(lambda *xs: list(fun.call_wrapped(*xs)),
                                       [get_aval(x) for x in args],
                                       description=getattr(fun, "__name__", self.name))
        return bind_body(self, ClosedJaxpr(jaxpr, consts), args, **params)


def _function_of(prim, args, params):
    """``(fun or None, args, params)``: the function to call, given first or as ``subfuns``."""
    subfuns = params.pop("subfuns", None)
    if subfuns is not None:
        if len(subfuns) != 1:
            raise TypeError(f"{prim.name} takes one function in subfuns, got {len(subfuns)}")
        fun = subfuns[0]
    elif args and callable(getattr(args[0], "call_wrapped", None)):
        fun, args = args[0], args[1:]
    elif "call_jaxpr" in params:
        return None, args, params
    else:
        raise TypeError(f"{prim.name}.bind needs the function to call, first or as "
                        "subfuns=(fun,), or its jaxpr as call_jaxpr=")
    if "call_jaxpr" in params:
        raise TypeError(f"{prim.name} takes either a function or call_jaxpr=, not both")
    return fun, args, params


closed_call_p = CallPrimitive("closed_call")
call_p = CallPrimitive("call")

_closed_bodies = WeakKeyCache("call bodies")


def body_of(call_jaxpr) -> ClosedJaxpr:
    """The ClosedJaxpr a call's ``call_jaxpr`` parameter stands for (the same one for the
    same open jaxpr, so the toolkit's caches keyed on it hit)."""
    if isinstance(call_jaxpr, ClosedJaxpr):
        return call_jaxpr
    if not isinstance(call_jaxpr, Jaxpr):
        raise TypeError(f"call_jaxpr must be a Jaxpr or ClosedJaxpr, got "
                        f"{type(call_jaxpr).__name__}")
    if call_jaxpr.constvars:
        raise TypeError(f"call's call_jaxpr has {len(call_jaxpr.constvars)} constvars but no "
                        "values for them: pass their values as leading operands (the jaxpr "
                        "taking them as its first invars), or use closed_call with a "
                        "ClosedJaxpr")
    closed = _closed_bodies.get(call_jaxpr, None)
    if closed is None:  # a new Jaxpr object: the value must not hold its own weak key
        closed = _closed_bodies.put(call_jaxpr, None, ClosedJaxpr(
            Jaxpr([], call_jaxpr.invars, call_jaxpr.outvars, call_jaxpr.eqns), []))
    return closed


# The parameter holding each call primitive's body ("call_jaxpr" unless registered with
# another name); a call's other parameters go through every rule unchanged.
_body_params: dict = {}


def _body_param(prim) -> str:
    return _body_params.get(prim, "call_jaxpr")


def _split(prim, params) -> tuple:
    """``(body, the other parameters)`` of a call's parameters."""
    rest = dict(params)
    return body_of(rest.pop(_body_param(prim))), rest


def bind_body(prim, body: ClosedJaxpr, args, **params):
    """``prim`` bound on ``args`` calling ``body`` (its consts become leading operands)."""
    callee, consts = consts_as_inputs(body)
    return prim.bind(*consts, *args, **_params(prim, callee, params))


def _abstract_for(prim):
    return lambda *avals, **params: call_out_avals(prim.name, _split(prim, params)[0], avals)


def _impl_for(prim):
    def impl(*args, **params):
        body = _split(prim, params)[0]
        return eval_jaxpr(body.jaxpr, body.consts, *args)
    return impl


def _lowering_for(prim):
    def lowering(ctx, *args, **params):
        """The body inlined (no function boundary)."""
        body = _split(prim, params)[0]
        return lower_jaxpr_body(ctx.fn, body.jaxpr, [*const_operands(ctx, body), *args])
    return lowering


def _lowering_as_function(ctx, *args, call_jaxpr):
    """``closed_call``: a private function ``closed_call`` and a ``func.call`` of it, as JAX
    lowers it. The boundary matters to XLA: a constant passed into the call is a parameter
    there, so XLA folds less inside (a scan's body is one; JAX's loops get their bits so).
    Inlined where the module needs it (``inlines_calls``)."""
    if inlines_calls(ctx.fn):
        return lower_jaxpr_body(ctx.fn, call_jaxpr.jaxpr,
                                [*const_operands(ctx, call_jaxpr), *args])
    callee = ctx.fn.module.unique_name("closed_call")
    define_function(ctx.module_context, callee, call_jaxpr.jaxpr,
                    scope=ctx.fn.eqn_scope + ("closed_call",))
    return call_function(ctx, callee, call_jaxpr, args)


# --- jvp: a call of the body's jvp ----------------------------------------------------------
def _jvp_for(prim):
    def jvp(primals, tangents, **params):
        body, rest = _split(prim, params)
        nonzeros = [type(t) is not Zero for t in tangents]
        # Integer and boolean outputs have float0 tangents, which XLA cannot carry: Zero.
        out_tan_avals = [tangent_aval(a) for a in body.out_avals]
        differentiable = [a.dtype != dtypes.float0 for a in out_tan_avals]
        jvp_body, out_nonzeros = jvp_jaxpr(body, nonzeros, instantiate=differentiable,
                                           description=f"jvp({prim.name})")
        outs = bind_body(prim, jvp_body,
                         [*primals, *(t for t in tangents if type(t) is not Zero)], **rest)
        m = len(out_tan_avals)
        it = iter(outs[m:])
        return outs[:m], [next(it) if nz else Zero(a)
                          for a, nz in zip(out_tan_avals, out_nonzeros)]
    return jvp


# --- partial evaluation: a known call now, an unknown call of the residuals staged ---------
def _partial_eval_for(prim):
    def partial_eval(trace, args, params):
        body, rest = _split(prim, params)
        unknowns = [trace.is_unknown(a) for a in args]
        known, unknown, out_unknowns, num_res = partial_eval_jaxpr(
            body, unknowns, instantiate=False, description=prim.name)
        callee, consts = consts_as_inputs(known)
        known_out = trace.known(prim, [*consts, *(a for a, u in zip(args, unknowns) if not u)],
                                _params(prim, callee, rest))
        n_known = len(known_out) - num_res
        unknown_out = []
        if any(out_unknowns):
            callee, consts = consts_as_inputs(unknown)
            unknown_out = trace.stage(prim, [*consts, *known_out[n_known:],
                                             *(a for a, u in zip(args, unknowns) if u)],
                                      _params(prim, callee, rest))
        k, u = iter(known_out[:n_known]), iter(unknown_out)
        return [next(u) if unk else next(k) for unk in out_unknowns]
    return partial_eval


def _params(prim, callee: ClosedJaxpr, rest: dict) -> dict:
    return {**rest, _body_param(prim): callee.jaxpr if prim is call_p else callee}


# --- transpose: a call of the body's backward pass -------------------------------------------
def _transpose_for(prim):
    def transpose(cts, *args, **params):
        body, rest = _split(prim, params)
        linear = [is_undefined(a) for a in args]
        nonzero = [type(c) is not Zero for c in cts]
        body = transpose_jaxpr(body, linear, nonzero, description=f"transpose({prim.name})")
        outs = iter(bind_body(prim, body, [*(a for a in args if not is_undefined(a)),
                                           *(c for c in cts if type(c) is not Zero)], **rest))
        return [next(outs) if lin else None for lin in linear]
    return transpose


# --- batching: a call of the batched body ----------------------------------------------------
def _batch_for(prim):
    def batch(axis, vals, dims, **params):
        body, rest = _split(prim, params)
        body, consts, out_dims = batch_jaxpr(body, axis, dims,
                                             description=f"vmap({prim.name})")
        return bind_body(prim, ClosedJaxpr(body, consts), vals, **rest), out_dims
    return batch


# --- dead code: the body pruned to the used outputs, on the inputs they read ----------------
def _dce_for(prim):
    def dce(used_outputs, eqn):
        body, rest = _split(prim, eqn.params)
        if not any(used_outputs) and not jaxpr_has_effects(body):
            return [False] * len(eqn.invars), None
        pruned, used_inputs = dce_closed(body, used_outputs)
        if all(used_outputs) and all(used_inputs) and \
                len(pruned.jaxpr.eqns) == len(body.jaxpr.eqns):
            return used_inputs, eqn  # nothing to remove
        return used_inputs, eqn.replace(
            invars=[v for v, u in zip(eqn.invars, used_inputs) if u],
            outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u],
            params=_params(prim, pruned, rest))
    return dce


def register_call_rules(prim, body_param: str = "call_jaxpr", lowering=None) -> None:
    """Give the call primitive ``prim`` every rule of a plain call of its body (a
    ClosedJaxpr in its parameter ``body_param``), lowered inline unless ``lowering`` is
    given. Its other parameters are kept through every transformation."""
    _body_params[prim] = body_param
    abstract_eval_rules[prim] = _abstract_for(prim)
    impl_rules[prim] = _impl_for(prim)
    register_lowering(prim, lowering or _lowering_for(prim))
    jvp_rules[prim] = _jvp_for(prim)
    partial_eval_rules[prim] = _partial_eval_for(prim)
    transpose_rules[prim] = _transpose_for(prim)
    batch_rules[prim] = _batch_for(prim)
    dce_rules[prim] = _dce_for(prim)
    discharge_rules[prim] = call_discharge_rule(body_param)


register_call_rules(closed_call_p, lowering=_lowering_as_function)
register_call_rules(call_p)
