"""Primitives and the rule tables every transformation consults.

A primitive is a named operation. ``bind`` hands it to the current trace; each
trace looks up the primitive's rule in its own table. A primitive's rules are
registered next to its definition in ``plax/lax/<family>.py``.
"""
from __future__ import annotations


class Primitive:
    """A named operation that traces can interpret."""

    multiple_results = False

    def __init__(self, name: str, multiple_results: bool = False):
        self.name = name
        self.multiple_results = multiple_results

    def __repr__(self):
        return self.name

    def bind(self, *args, **params):
        from plax.core.trace import current_trace
        return current_trace().process_primitive(self, args, params)

    # Registration helpers, so a rule can be declared with a decorator.
    def def_abstract_eval(self, rule):
        abstract_eval_rules[self] = rule
        return rule

    def def_impl(self, rule):
        impl_rules[self] = rule
        return rule


# Shape/dtype inference: rule(*avals, **params) -> aval, or a list of avals
# when the primitive has multiple results.
abstract_eval_rules: dict = {}
# Eager implementations that are not a one-primitive XLA executable (optional).
impl_rules: dict = {}


def abstract_eval(prim: Primitive, avals, params):
    """Output avals of ``prim`` applied to ``avals`` (always a list)."""
    try:
        rule = abstract_eval_rules[prim]
    except KeyError:
        raise NotImplementedError(f"primitive {prim.name!r} has no abstract evaluation rule") from None
    out = rule(*avals, **params)
    return list(out) if prim.multiple_results else [out]
