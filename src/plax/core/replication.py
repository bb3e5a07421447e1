"""Which mesh axes a value inside shard_map varies over.

Inside ``shard_map`` every device holds its own block of a value; a value *varies*
over a manual mesh axis when devices along that axis may hold different blocks, and
is *invariant* over it when they hold the same. An output whose out spec does not
mention an axis must be invariant over it (shard_map refuses it otherwise, unless
``check_vma=False``). ``varying_outputs`` walks a body jaxpr with each primitive's rule
(``replication_rules[prim](ins, **params) -> [frozenset]``, registered beside the
primitive; ``ins`` are its operands' varying sets): by default a result varies over
everything any operand varies over; collectives and control flow have their own.
A higher-order primitive without a rule is looked into when it has one body taking
its operands (jit, remat, custom_jvp/vjp calls).
"""
from __future__ import annotations

from plax.core.jaxpr import Literal, open_jaxpr, subjaxprs
from plax.core.rules import replication_rules

__all__ = ["varying_outputs", "union"]


def union(sets) -> frozenset:
    out = frozenset()
    for s in sets:
        out |= s
    return out


def varying_outputs(jaxpr, ins) -> list:
    """The varying set of each output of ``jaxpr`` (its constvars: invariant) when its inputs
    vary over ``ins``."""
    env = {v: frozenset() for v in jaxpr.constvars}
    env.update(zip(jaxpr.invars, ins))

    def read(v):
        return frozenset() if isinstance(v, Literal) else env.get(v, frozenset())

    for eqn in jaxpr.eqns:
        args = [read(v) for v in eqn.invars]
        rule = replication_rules.get(eqn.primitive)
        if rule is not None:
            outs = rule(args, **eqn.params)
        else:
            bodies = [open_jaxpr(j) for j in subjaxprs(eqn.params)]
            if len(bodies) == 1 and len(bodies[0].invars) == len(args) and \
                    len(bodies[0].outvars) == len(eqn.outvars):
                outs = varying_outputs(bodies[0], args)
            else:
                outs = [union(args)] * len(eqn.outvars)
        for v, s in zip(eqn.outvars, outs):
            env[v] = frozenset(s)
    return [read(v) for v in jaxpr.outvars]


def carry_fixed_point(step, carry_in):
    """The varying sets of a loop's carry: ``step(carry) -> carry out`` iterated from
    ``carry_in``, joining, until nothing changes."""
    carry = list(carry_in)
    while True:
        out = step(carry)
        joined = [a | b for a, b in zip(carry, out)]
        if joined == carry:
            return carry
        carry = joined
