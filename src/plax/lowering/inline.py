"""Lowering rules written as plax functions: ``lower_fun``.

``lower_fun(fn)`` is a lowering rule that traces ``fn`` (plax lax ops on the
equation's operands and parameters) to a jaxpr and emits that jaxpr in place
of the equation, in the function being built. The ops it emits carry the
equation's location. Traced jaxprs are cached per (fn, operand types,
parameters, tracing flags).
"""
from __future__ import annotations

from plax.core.caches import BoundedCache
from plax.core.config import config
from plax.core.jaxpr import ClosedJaxpr
from plax.core.source_info import fun_name
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import EvalTrace, Tracer, fresh_name_stack, set_current_trace
from plax.lowering.consts import const_operands, host_value
from plax.lowering.stablehlo import RuleContext, lower_jaxpr_body

__all__ = ["lower_fun", "lower_jaxpr_inline", "trace_rule_fn"]

# (fn, avals_in, params, multiple_results, tracing flags) -> (jaxpr, host constants)
_traced_jaxprs = BoundedCache("lower_fun jaxprs", maxsize=1024)


def trace_rule_fn(fn, avals_in: tuple, params: dict, multiple_results: bool):
    """``fn(*avals_in, **params)`` traced: ``(jaxpr, consts)``, cached when the key hashes
    (``fn`` returns a list of values when ``multiple_results``)."""
    try:
        key = (fn, avals_in, tuple(sorted(params.items())), multiple_results,
               config.trace_context())
        hash(key)
    except TypeError:  # unhashable parameters: traced each time
        key = None
    if key is not None:
        hit = _traced_jaxprs.get(key)
        if hit is not None:
            return hit

    def flat(*xs):
        out = fn(*xs, **params)
        if not multiple_results:
            return [out]
        if not isinstance(out, (list, tuple)):
            raise TypeError(f"lower_fun({fun_name(fn, qualified=True)}, multiple_results=True): "
                            f"the function must return a list or tuple, got {type(out).__name__}.")
        return list(out)

    # Traced on its own: no enclosing trace to close over, and a fresh name stack (the
    # ops take the location of the equation they lower).
    with set_current_trace(EvalTrace()), fresh_name_stack():
        jaxpr, consts = trace_to_jaxpr(
            flat, list(avals_in), description=f"lowering rule {fun_name(fn, qualified=True)}")
    if any(isinstance(c, Tracer) for c in consts):
        raise TypeError(f"lower_fun({fun_name(fn, qualified=True)}): the function closes over a "
                        "traced value; a lowering rule may close over constants only.")
    consts = tuple(host_value(c) for c in consts)
    entry = (jaxpr, consts)
    if key is not None:
        _traced_jaxprs.put(key, entry)
    return entry


def lower_jaxpr_inline(ctx: RuleContext, jaxpr, consts, operands) -> list[str]:
    """Emit ``jaxpr`` (constvars bound to the values ``consts``, invars to the SSA names
    ``operands``) into the function ``ctx`` is building, with the location of the
    equation being lowered; returns the SSA names of its outputs."""
    const_names = const_operands(ctx, ClosedJaxpr(jaxpr, list(consts)))
    return lower_jaxpr_body(ctx.fn, jaxpr, const_names + list(operands), inherit_location=True)


def lower_fun(fn, multiple_results: bool = False):
    """A lowering rule that computes what ``fn`` computes.

    ``fn(*operands, **params)`` is called with tracers of the equation's operand
    types and the equation's parameters, and returns one value (or, with
    ``multiple_results``, a list of them) built from plax ``lax`` operations.
    The rule emits the traced jaxpr inline, constants included, on the platform
    being lowered for (so ``fn`` may use primitives with platform-specific rules).
    """
    def rule(ctx: RuleContext, *operands, **params):
        jaxpr, consts = trace_rule_fn(fn, tuple(ctx.avals_in), params, multiple_results)
        outs = lower_jaxpr_inline(ctx, jaxpr, consts, operands)
        return outs if multiple_results else outs[0]

    name = fun_name(fn, qualified=True)
    rule.__name__ = rule.__qualname__ = f"lower_fun({name})"
    rule.__doc__ = f"Lowering rule emitting the ops of {name}."
    rule.fn = fn
    return rule
