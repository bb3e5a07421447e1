"""Dead-code elimination: the one DCE, used by staging (grad's pruning), partial
evaluation, the jaxpr toolkit and lowering.

A primitive holding a jaxpr (pjit, ...) registers ``dce_rules[prim] =
rule(used_outputs, eqn) -> (used_inputs, new_eqn | None)`` to shrink itself to the
outputs that are used; any other equation is kept whole while one of its outputs
is used. Equations with effects are never removed.
"""
from __future__ import annotations

from plax.core.effects import eqn_effects, jaxpr_effects
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Var, as_mask
from plax.core.rules import dce_rules


def jaxpr_has_effects(jaxpr) -> bool:
    """Whether an equation of ``jaxpr`` (or of a jaxpr inside one) has effects."""
    return bool(jaxpr_effects(jaxpr))


def eqn_has_effects(eqn) -> bool:
    return bool(eqn_effects(eqn))


def dce_jaxpr(jaxpr: Jaxpr, used_outputs=None, instantiate=False):
    """``jaxpr`` computing only the ``used_outputs`` (default: all), without the equations
    they do not need; rules of higher-order primitives shrink their bodies recursively.

    Returns ``(new_jaxpr, used_inputs)``. Inputs that are not used are removed from
    the new jaxpr unless ``instantiate`` (a bool, or one per input) keeps them;
    constvars that are not used are always removed (``dce_closed`` keeps the consts
    in step).
    """
    if used_outputs is None:
        outvars = list(jaxpr.outvars)
    else:
        used_outputs = list(used_outputs)
        if len(used_outputs) != len(jaxpr.outvars):
            raise ValueError(f"dce_jaxpr: used_outputs has {len(used_outputs)} entries for "
                             f"{len(jaxpr.outvars)} outputs")
        outvars = [v for v, u in zip(jaxpr.outvars, used_outputs) if u]
    live = {v for v in outvars if isinstance(v, Var)}
    kept = dce_eqns(jaxpr.eqns, live)
    used_inputs = [v in live for v in jaxpr.invars]
    keep = as_mask(instantiate, len(jaxpr.invars), "dce_jaxpr: instantiate")
    invars = [v for v, u, k in zip(jaxpr.invars, used_inputs, keep) if u or k]
    constvars = [v for v in jaxpr.constvars if v in live]
    return Jaxpr(constvars, invars, outvars, kept), used_inputs


def dce_eqns(eqns, live: set) -> list:
    """The equations of ``eqns`` that compute a variable in ``live`` or have effects, in
    order, each shrunk by its primitive's rule to the outputs used; ``live`` gains the
    variables they read. ``dce_jaxpr`` runs it over a jaxpr; staging prunes a region of a
    trace's equations with it in place (``plax.transforms.dce``)."""
    rules = dce_rules
    kept = []
    for e in reversed(eqns):
        rule = rules.get(e.primitive)
        if rule is not None:
            used_in, new_eqn = rule([v in live for v in e.outvars], e)
            if new_eqn is None:
                continue
            live.update(v for v, u in zip(e.invars, used_in) if u and isinstance(v, Var))
            kept.append(new_eqn)
        elif not live.isdisjoint(e.outvars) or eqn_has_effects(e):
            # Literals join ``live`` too (cheaper than filtering them out); they are never
            # a Var, so no membership test of a Var changes.
            live.update(e.invars)
            kept.append(e)
    kept.reverse()
    return kept


def dce_closed(closed: ClosedJaxpr, used_outputs=None, instantiate=False):
    """``dce_jaxpr`` of a ClosedJaxpr, keeping the consts of the constvars still used."""
    new, used_inputs = dce_jaxpr(closed.jaxpr, used_outputs, instantiate)
    live = set(new.constvars)
    consts = [c for v, c in zip(closed.jaxpr.constvars, closed.consts) if v in live]
    return ClosedJaxpr(new, consts), used_inputs
