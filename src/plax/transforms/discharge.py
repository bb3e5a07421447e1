"""Discharge: a jaxpr that reads and writes references, turned into one on plain values.

``discharge_state(closed, should_discharge=...)`` replaces each chosen reference input (all
of them by default) by an input of the value it holds, and returns, after the jaxpr's own
outputs, the values those references hold at the end. References not chosen stay
references, with their effects.

The work is an interpreter (``eval_discharged``) staged into a new jaxpr: it keeps the
current value of every discharged reference and runs each equation touching one through
its primitive's discharge rule (``discharge_rules``, in ``plax.core.rules``)::

    rule(should_discharge, in_avals, out_avals, *args, **params) -> (new_values, outs)

``should_discharge[i]`` says whether operand i is a discharged reference, given as its
value in ``args`` (a true value identifying the reference: two operands with the same one
are the same reference; False otherwise); ``new_values[i]`` is its value afterwards (None:
unchanged). The state
primitives' rules are in ``plax.first_order.state``; each higher-order primitive registers
its own (a call's: ``call_discharge_rule``, which discharges the body in place).
"""
from __future__ import annotations

from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Literal, as_mask
from plax.core.refs import AbstractRef
from plax.core.rules import discharge_rules
from plax.core.source_info import staging_location
from plax.core.staging import trace_to_jaxpr

__all__ = ["discharge_state", "eval_discharged", "register_discharge_rule",
           "call_discharge_rule", "discharge_mask"]


def register_discharge_rule(prim):
    """Decorator: make the function ``prim``'s discharge rule (see the module docstring)."""
    def register(rule):
        discharge_rules[prim] = rule
        return rule
    return register


def discharge_mask(avals, should_discharge=True) -> list:
    """Per input of types ``avals``: whether it is a reference to discharge."""
    mask = as_mask(should_discharge, len(avals), "discharge_state: should_discharge")
    return [m and isinstance(a, AbstractRef) for m, a in zip(mask, avals)]


def discharge_state(closed, *, should_discharge=True, lower: bool = True) -> ClosedJaxpr:
    """``closed`` (a ClosedJaxpr, or a Jaxpr without constants) with the references among its
    inputs chosen by ``should_discharge`` (a bool, or one per input) passed as values; their
    final values follow its outputs."""
    del lower  # (JAX's option for its lowering-only rules; plax's rules serve both)
    if isinstance(closed, Jaxpr):
        closed = ClosedJaxpr(closed, ())
    jaxpr = closed.jaxpr
    mask = discharge_mask(jaxpr.in_avals, should_discharge)
    avals = [a.inner_aval if m else a for a, m in zip(jaxpr.in_avals, mask)]

    def run(*args):
        outs, finals = eval_discharged(jaxpr, closed.consts, mask, args)
        return list(outs) + list(finals)
    new, consts = trace_to_jaxpr(run, avals, description="discharge_state")
    return ClosedJaxpr(new, consts)


def eval_discharged(jaxpr: Jaxpr, consts, should_discharge, args):
    """Run ``jaxpr`` in the current trace with its inputs marked in ``should_discharge`` (its
    leading inputs; the rest are not) given as the values of references: ``(outputs, final
    values of those references)``."""
    should_discharge = list(should_discharge)
    should_discharge += [False] * (len(jaxpr.invars) - len(should_discharge))
    env = dict(zip(jaxpr.constvars, consts))
    held = {}  # discharged input -> what identifies its reference (given, or the input)
    for v, x, m in zip(jaxpr.invars, args, should_discharge):
        env[v] = x
        if m:
            held[v] = v if m is True else m

    def read(v):
        return v.value() if type(v) is Literal else env[v]

    location = staging_location
    outer = location.at
    try:
        for e in jaxpr.eqns:
            location.at = e.source_info or outer
            ins = [read(v) for v in e.invars]
            which = [type(v) is not Literal and held.get(v, False) for v in e.invars]
            if any(which):
                rule = discharge_rules.get(e.primitive)
                if rule is None:
                    raise NotImplementedError(
                        f"No state discharge rule implemented for primitive: {e.primitive}")
                new, out = rule(which, [v.aval for v in e.invars], [v.aval for v in e.outvars],
                                *ins, **e.params)
                for v, w, x in zip(e.invars, which, new):
                    if w and x is not None:
                        env[v] = x
            else:
                out = e.primitive.bind(*ins, **e.params)
            if e.primitive.multiple_results:
                for v, x in zip(e.outvars, out):
                    env[v] = x
            else:
                env[e.outvars[0]] = out
    finally:
        location.at = outer
    return [read(v) for v in jaxpr.outvars], [env[v] for v in jaxpr.invars if v in held]


def call_discharge_rule(param: str):
    """The discharge rule of a call primitive holding its body in ``params[param]`` (a
    ClosedJaxpr or Jaxpr taking the operands): the body runs discharged, in place."""
    def rule(should_discharge, in_avals, out_avals, *args, **params):
        body = params[param]
        if isinstance(body, Jaxpr):
            body = ClosedJaxpr(body, ())
        outs, finals = eval_discharged(body.jaxpr, body.consts, should_discharge, args)
        it = iter(finals)
        return [next(it) if w else None for w in should_discharge], outs
    return rule


def run_discharged(closed: ClosedJaxpr, should_discharge, args) -> tuple:
    """``eval_discharged`` of a ClosedJaxpr."""
    return eval_discharged(closed.jaxpr, closed.consts, should_discharge, args)
