"""Primitives: named operations that traces interpret.

A primitive is a named operation. ``bind`` hands it to the current trace; each
trace looks up the primitive's rule in its table (all tables live in
``plax.core.rules``). A primitive's rules are registered next to its definition.
"""
from __future__ import annotations

from plax.core import replication
from plax.core.avals import sharding_in_types
from plax.core.rules import abstract_eval_rules, all_primitives, impl_rules
from plax.core.sharding_types import propagate
from plax.core.trace import current_trace


class Primitive:
    """A named operation that traces can interpret."""

    multiple_results = False

    def __init__(self, name: str, multiple_results: bool = False):
        self.name = name
        self.multiple_results = multiple_results
        all_primitives.append(self)

    def __repr__(self):
        return self.name

    def bind(self, *args, **params):
        if replication.vma_in_types[0] and len(args) > 1:  # inside shard_map: implicit pvary
            args = replication.coerce(self, args, params)
        return current_trace().process_primitive(self, args, params)

    # Registration helpers, so a rule can be declared with a decorator.
    def def_abstract_eval(self, rule):
        abstract_eval_rules[self] = rule
        return rule

    def def_impl(self, rule):
        impl_rules[self] = rule
        return rule


def abstract_eval(prim: Primitive, avals, params):
    """Output avals of ``prim`` applied to ``avals`` (always a list)."""
    try:
        rule = abstract_eval_rules[prim]
    except KeyError:
        raise NotImplementedError(f"primitive {prim.name!r} has no abstract evaluation rule") from None
    out = rule(*avals, **params)
    out = list(out) if prim.multiple_results else [out]
    if sharding_in_types[0]:
        out = propagate(prim, avals, out, params)
    if replication.vma_in_types[0]:
        out = replication.propagate(prim, avals, out, params)
    return out
