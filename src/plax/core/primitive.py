"""Primitives: named operations that traces interpret.

A primitive is a named operation. ``bind`` hands it to the current trace; each
trace looks up the primitive's rule in its table (all tables live in
``plax.core.rules``). A primitive's rules are registered next to its definition.
"""
from __future__ import annotations

from plax.core import replication
from plax.core.avals import sharding_in_types
from plax.core.hi_types import MutableHiType
from plax.core.rules import abstract_eval_rules, all_primitives, impl_rules
from plax.core.sharding_types import propagate
from plax.core.trace import current_trace


class Primitive:
    """A named operation that traces can interpret."""

    multiple_results = False
    # JAX's flags for primitives holding a function or mapping one (plax's higher-order
    # primitives hold jaxprs in their params instead, so these stay False).
    call_primitive = False
    map_primitive = False

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

    def def_effectful_abstract_eval(self, rule):
        """Declare ``rule(*avals, **params) -> (output aval(s), effects)``: this primitive's
        output types and the effects its equations have."""
        from plax.core.rules import aval_effect_rules
        abstract_eval_rules[self] = lambda *avals, **params: rule(*avals, **params)[0]
        aval_effect_rules[self] = lambda avals, params: rule(*avals, **params)[1]
        return rule

    def def_impl(self, rule):
        impl_rules[self] = rule
        return rule

    # JAX's names for running a primitive's rules directly (extension libraries use them).
    def bind_with_trace(self, trace, args, avals_or_params, params=None):
        """Apply this primitive to ``args`` in ``trace`` (JAX's ``(trace, args, avals,
        params)``; the older ``(trace, args, params)`` is accepted too)."""
        if params is None:
            params = avals_or_params
        return trace.process_primitive(self, tuple(args), dict(params))

    def get_bind_params(self, params):
        """The keyword arguments re-binding an equation of this primitive takes, from its
        params (plax's primitives hold their jaxprs in their params: the params as they
        are; JAX's ``subfuns`` functions, where a primitive has any, are in them)."""
        return dict(params)

    def impl(self, *args, **params):
        """Evaluate this primitive: its impl rule called directly (on tracers it traces what
        the rule does, as JAX's ``prim.impl`` does); without one, eagerly on concrete
        values, or bound in the current trace when given tracers."""
        from plax.core.trace import EvalTrace, Tracer
        rule = impl_rules.get(self)
        if rule is not None:
            return rule(*args, **params)
        if any(isinstance(a, Tracer) for a in args):
            return self.bind(*args, **params)
        return EvalTrace().process_primitive(self, args, params)

    def abstract_eval(self, *avals, **params):
        """``(output avals, effects)`` of this primitive on inputs of types ``avals``."""
        from plax.core.effects import own_effects
        out = abstract_eval(self, avals, params)
        return (out if self.multiple_results else out[0]), own_effects(self, avals, params)


def abstract_eval(prim: Primitive, avals, params):
    """Output avals of ``prim`` applied to ``avals`` (always a list)."""
    try:
        rule = abstract_eval_rules[prim]
    except KeyError:
        raise NotImplementedError(f"primitive {prim.name!r} has no abstract evaluation rule") from None
    if not prim.multiple_results and any(isinstance(a, MutableHiType) for a in avals):
        _check_takes_refs(prim, rule, avals)
    out = rule(*avals, **params)
    out = list(out) if prim.multiple_results else [out]
    if sharding_in_types[0]:
        out = propagate(prim, avals, out, params)
    if replication.vma_in_types[0]:
        out = replication.propagate(prim, avals, out, params)
    return out


# The array primitives (plax.lax's, typed by rules in plax.first_order) take arrays, never
# references; the state family there (get/swap/addupdate, ...) is what reads and writes them.
_ARRAY_FAMILY = "plax.first_order."
_STATE_FAMILY = ("plax.first_order.state",)


def _check_takes_refs(prim: Primitive, rule, avals) -> None:
    """Refuse a reference passed to an array primitive, as JAX's standard primitives do
    (other primitives, extensions' included, may take references)."""
    from plax.core.refs import AbstractRef  # (refs sits above this module)
    module = getattr(rule, "__module__", None) or ""
    ref = next((a for a in avals if isinstance(a, AbstractRef)), None)
    if ref is None or not module.startswith(_ARRAY_FAMILY) or module.startswith(_STATE_FAMILY):
        return
    raise ValueError(f"Attempting to pass a Ref {ref} to a primitive: {prim.name} -- did you "
                     "forget to unpack ([...]) the ref? Read it with ref[...] (or a slice of "
                     "it) and pass the array.")


class NamedCallable:
    """A callable param that prints as the user function's name (as JAX shows it)."""

    __slots__ = ("fn", "name")

    def __init__(self, fn, name):
        self.fn = fn
        self.name = name

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self):
        return self.name
