"""Effects: what an equation does besides computing its outputs.

An equation has effects when its primitive says so (``effect_rules[prim](params)``,
or membership of ``effectful_primitives`` for an unnamed effect) or when a jaxpr it
holds has them. ``eqn.effects`` and ``jaxpr.effects`` are frozensets of ``Effect``
objects. What the rest of plax does with them:

- dead-code elimination never removes an equation with effects (``core/dce.py``);
- an *ordered* effect (``effect.ordered``) makes the lowering thread a
  ``!stablehlo.token`` through the program in program order, and the runtime pass
  each device's token from one call of an executable to the next, so that ordered
  callbacks run in the order the Python program issued them;
- any effect lowered to a host callback makes the runtime keep a completion token
  of each run until ``plax.effects_barrier()`` waits for it.
"""
from __future__ import annotations

from plax.core.caches import WeakKeyCache
from plax.core.rules import (aval_effect_rules, effect_rules, effectful_primitives,
                             nested_effect_rules)


class Effect:
    """A kind of side effect. ``ordered`` effects run in program order across calls."""

    ordered = False

    def __init__(self, name: str | None = None):
        # Subclasses defined by libraries (JAX's convention) take no name.
        self.name = name if name is not None else type(self).__name__

    def __repr__(self):
        return self.name


class OrderedEffect(Effect):
    ordered = True


class DebugEffect(Effect):
    """Printing and debug callbacks (``plax.debug.print``/``callback``)."""


class OrderedDebugEffect(DebugEffect, OrderedEffect):
    pass


class IOEffect(Effect):
    """``io_callback``: the callback may read and write outside state."""


class OrderedIOEffect(IOEffect, OrderedEffect):
    pass


class EffectTypeSet:
    """A set of effect classes (JAX's registries in which libraries declare their effects)."""

    def __init__(self):
        self._types: set = set()

    def add_type(self, effect_type) -> None:
        self._types.add(effect_type)

    def contains(self, effect) -> bool:
        return isinstance(effect, tuple(self._types))

    def filter_not_in(self, effects) -> list:
        return [e for e in effects if not self.contains(e)]


# The effects libraries declare allowed inside control flow (JAX's registry). plax lets
# every effect into cond/while/scan bodies, so it records the declarations only.
control_flow_allowed_effects = EffectTypeSet()

debug_effect = DebugEffect("Debug")
ordered_debug_effect = OrderedDebugEffect("OrderedDebug")
io_effect = IOEffect("IO")
ordered_io_effect = OrderedIOEffect("OrderedIO")
# The effect of primitives registered only in ``effectful_primitives`` (checks, probes).
generic_effect = Effect("Effect")

ordered_debug_effect.unordered = debug_effect
ordered_io_effect.unordered = io_effect

no_effects: frozenset = frozenset()

def without_order(effects) -> frozenset:
    """``effects`` with each ordered effect replaced by its unordered counterpart."""
    return frozenset(getattr(e, "unordered", e) if e.ordered else e for e in effects)


def eqn_effects(eqn) -> frozenset:
    """The effects of one equation: its primitive's, and those of the jaxprs it holds."""
    prim, params = eqn.primitive, eqn.params
    if prim not in effect_rules and prim not in effectful_primitives and (
            not params or not _holds_jaxprs(params)) and prim not in aval_effect_rules:
        return no_effects
    from plax.core.jaxpr import subjaxprs  # (jaxpr builds on this module)
    own = own_effects(prim, [v.aval for v in eqn.invars], params)
    if prim in effectful_primitives:
        own = own | {generic_effect}
    inner = no_effects
    for sub in subjaxprs(params):
        found = jaxpr_effects(sub)
        if found:
            inner = inner | found
    if inner:
        nested = nested_effect_rules.get(prim)
        own = own | (nested(inner, params) if nested is not None else inner)
    return own


def own_effects(prim, avals, params) -> frozenset:
    """The effects a primitive declares for itself (not those of jaxprs it holds)."""
    rule = effect_rules.get(prim)
    if rule is not None:
        return rule(params)
    rule = aval_effect_rules.get(prim)
    return rule(avals, params) if rule is not None else no_effects


# {Jaxpr, ClosedJaxpr}, set on first use (core/jaxpr builds on this module).
_jaxpr_types: list = []


def _holds_jaxprs(params) -> bool:
    """Whether ``params`` hold a jaxpr where ``core.jaxpr.subjaxprs`` finds them (a value,
    or an item of a tuple or list value): the quick test before the effects of most
    equations, which hold none, are known to be none."""
    if not _jaxpr_types:
        from plax.core.jaxpr import ClosedJaxpr, Jaxpr
        _jaxpr_types.append(frozenset({Jaxpr, ClosedJaxpr}))
    kinds = _jaxpr_types[0]
    for value in params.values():
        if isinstance(value, (tuple, list)):
            if not kinds.isdisjoint(map(type, value)):
                return True
        elif type(value) in kinds:
            return True
    return False


_jaxpr_effects = WeakKeyCache("jaxpr effects")


def jaxpr_effects(jaxpr) -> frozenset:
    """The effects of the equations of ``jaxpr`` (a Jaxpr or ClosedJaxpr), cached."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    known = _jaxpr_effects.get(jaxpr, None)
    if known is None:
        found = no_effects
        for e in jaxpr.eqns:
            eff = eqn_effects(e)
            if eff:
                found = found | eff
        known = _jaxpr_effects.put(jaxpr, None, found)
    return known


def ordered_effects_of(effects) -> list:
    """The ordered effects among ``effects``, in a stable order."""
    return sorted((e for e in effects if e.ordered), key=lambda e: e.name)


def has_ordered_effects(jaxpr) -> bool:
    return any(e.ordered for e in jaxpr_effects(jaxpr))
