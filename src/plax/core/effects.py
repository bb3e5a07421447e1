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
                             jaxpr_operand_rules, nested_effect_rules)


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


class JaxprInputEffect(Effect):
    """An effect on one input of an equation or a jaxpr: ``input`` is that input's ``Var``
    (in an abstract-evaluation rule, which has no variables, the operand's position, which
    ``eqn.effects`` resolves). Equal effects are of the same type on the same input."""

    def __init__(self, input):  # noqa: A002 (JAX's name)
        self.input = input

    name = property(lambda self: type(self).__name__)

    def replace(self, input):  # noqa: A002
        """This effect on another input."""
        return type(self)(input)

    def __eq__(self, other):
        return type(other) is type(self) and other.input == self.input

    def __hash__(self):
        return hash((type(self), self.input))

    def __repr__(self):
        return f"{type(self).__name__}({self.input})"


class RefEffect(JaxprInputEffect):
    """An effect on a mutable reference given as ``input`` (``plax.core.refs``)."""

    def __str__(self):
        return f"{self.name[:-len('Effect')]}<{self.input}>"


class ReadEffect(RefEffect):
    """Reading a reference."""


class WriteEffect(RefEffect):
    """Writing a reference."""


class AccumEffect(RefEffect):
    """Adding into a reference."""


class EffectTypeSet:
    """A set of effect classes: a registry in which libraries declare what their effects
    may do (JAX's registries). plax's own effects may do everything, so every registry
    contains them."""

    def __init__(self):
        self._types: set = set()

    def add_type(self, effect_type) -> None:
        self._types.add(effect_type)

    def contains(self, effect) -> bool:
        return _plax_own(effect) or isinstance(effect, tuple(self._types))

    def filter_in(self, effects) -> list:
        return [e for e in effects if self.contains(e)]

    def filter_not_in(self, effects) -> list:
        return [e for e in effects if not self.contains(e)]


def _plax_own(effect) -> bool:
    return type(effect).__module__.split(".", 1)[0] == "plax"


class _OrderedEffectTypes(EffectTypeSet):
    """Effect types that run in program order: adding one sets its ``ordered``."""

    def add_type(self, effect_type) -> None:
        effect_type.ordered = True
        super().add_type(effect_type)

    def contains(self, effect) -> bool:
        return bool(getattr(effect, "ordered", False))


# The registries of what a library's effect types may do (JAX's): be lowered, occur in
# cond/while/scan bodies, under checkpoint's partial evaluation, in custom_jvp/custom_vjp
# functions, and be ordered (``ordered_effects.add_type`` sets the type's ``ordered``).
lowerable_effects = EffectTypeSet()
control_flow_allowed_effects = EffectTypeSet()
remat_allowed_effects = EffectTypeSet()
custom_derivatives_allowed_effects = EffectTypeSet()
partial_eval_jaxpr_custom_rules_allowed_effects = EffectTypeSet()
ordered_effects = _OrderedEffectTypes()


def check_allowed(effects, registry: EffectTypeSet, where: str) -> None:
    """NotImplementedError when some of ``effects`` are not declared in ``registry`` as
    allowed ``where`` (e.g. "in `cond`")."""
    refused = registry.filter_not_in(effects)
    if refused:
        raise NotImplementedError(f"Effects not supported {where}: {refused}")


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
    return frozenset(getattr(e, "unordered", e) if getattr(e, "ordered", False) else e
                     for e in effects)


def eqn_effects(eqn) -> frozenset:
    """The effects of one equation: its primitive's, and those of the jaxprs it holds (an
    effect on an input of a held jaxpr becomes one on the operand passed to that input)."""
    prim, params = eqn.primitive, eqn.params
    if prim not in effect_rules and prim not in effectful_primitives and (
            prim not in aval_effect_rules) and (not params or not _holds_jaxprs(params)):
        return no_effects
    from plax.core.jaxpr import subjaxprs  # (jaxpr builds on this module)
    own = resolve_input_effects(own_effects(prim, [v.aval for v in eqn.invars], params),
                                eqn.invars)
    if prim in effectful_primitives:
        own = own | {generic_effect}
    inner = no_effects
    maps = jaxpr_operand_rules.get(prim)
    pairs = maps(params) if maps is not None else [(s, None) for s in subjaxprs(params)]
    for sub, positions in pairs:
        found = jaxpr_effects(sub)
        if found:
            inner = inner | _seen_from_outside(found, sub, eqn.invars, positions)
    if inner:
        nested = nested_effect_rules.get(prim)
        own = own | (nested(inner, params) if nested is not None else inner)
    return own


def resolve_input_effects(effects, invars) -> frozenset:
    """``effects`` with each input effect given by position aimed at that operand (dropped
    where the operand is a literal)."""
    if not any(isinstance(e, JaxprInputEffect) and isinstance(e.input, int) for e in effects):
        return frozenset(effects)
    out = set()
    for e in effects:
        if isinstance(e, JaxprInputEffect) and isinstance(e.input, int):
            v = invars[e.input]
            if not hasattr(v, "count"):  # a Literal
                continue
            e = e.replace(v)
        out.add(e)
    return frozenset(out)


def _seen_from_outside(effects, sub, invars, positions) -> frozenset:
    """The effects of jaxpr ``sub`` held by an equation with operands ``invars``: an input
    effect moves to the operand passed to that input (``positions[i]`` for input i; by
    default the inputs are the last operands). One whose operand is not of the input's kind
    (a reference allocated by the equation, fed by a plain value) stays inside."""
    if not any(isinstance(e, JaxprInputEffect) for e in effects):
        return effects
    sub_invars = getattr(sub, "jaxpr", sub).invars
    if positions is None:
        start = len(invars) - len(sub_invars)
        positions = range(start, len(invars)) if start >= 0 else ()
    where = {v: p for v, p in zip(sub_invars, positions)}
    out = set()
    for e in effects:
        if isinstance(e, JaxprInputEffect):
            p = where.get(e.input)
            if p is None:
                continue
            v = invars[p]
            if not hasattr(v, "count") or type(v.aval) is not type(e.input.aval):
                continue
            e = e.replace(v)
        out.add(e)
    return frozenset(out)


def own_effects(prim, avals, params) -> frozenset:
    """The effects ``prim`` itself declares when applied to inputs of types ``avals``."""
    rule = effect_rules.get(prim)
    own = rule(params) if rule is not None else no_effects
    rule = aval_effect_rules.get(prim)
    return own | frozenset(rule(avals, params)) if rule is not None else own


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
    """The effects of the equations of ``jaxpr`` (a Jaxpr or ClosedJaxpr), cached. An effect
    on a reference the jaxpr allocates itself is no effect of the jaxpr."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    known = _jaxpr_effects.get(jaxpr, None)
    if known is None:
        found = no_effects
        for e in jaxpr.eqns:
            eff = eqn_effects(e)
            if eff:
                found = found | eff
        if any(isinstance(e, JaxprInputEffect) for e in found):
            inputs = set(jaxpr.constvars) | set(jaxpr.invars)
            found = frozenset(e for e in found if not isinstance(e, JaxprInputEffect)
                              or e.input in inputs)
        known = _jaxpr_effects.put(jaxpr, None, found)
    return known


def ordered_effects_of(effects) -> list:
    """The ordered effects among ``effects``, in a stable order."""
    return sorted((e for e in effects if getattr(e, "ordered", False)), key=repr)


def has_ordered_effects(jaxpr) -> bool:
    return any(getattr(e, "ordered", False) for e in jaxpr_effects(jaxpr))
