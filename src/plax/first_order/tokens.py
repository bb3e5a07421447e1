"""Tokens: ``lax.create_token`` and ``lax.after_all``, and their primitives.

A token orders side effects in XLA (``!stablehlo.token``); it carries no data. In plax a
``Token`` is a pytree with no leaves, so it crosses ``jit``, ``vmap`` and ``grad``
boundaries for free (passed in or returned, it is rebuilt on the other side). Under a
trace it holds the traced token value, so the jaxpr and the lowered program show
``create_token``/``after_all`` as JAX's do; evaluated eagerly it holds nothing (no program,
no effect to order).
"""
from __future__ import annotations

from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, impl_rules, jvp_rules,
                             not_mapped,
                             register_lowering)
from plax.core.staging import StagingTrace
from plax.core.trace import EvalTrace, current_trace, set_current_trace
from plax.core.tree_core import register_pytree_node
from plax.lowering.stablehlo import abstract_token

__all__ = ["create_token", "after_all", "create_token_p", "after_all_p"]

create_token_p = Primitive("create_token")
after_all_p = Primitive("after_all")


class Token:
    """A token value: orders effects, holds no data."""

    __slots__ = ("_value",)

    def __init__(self, value=None):
        self._value = value  # the traced token under a trace; None when evaluated

    def __repr__(self):
        return "Token"


register_pytree_node(Token, lambda t: ((), None), lambda _, __: Token())


def _bind_where_staged(prim, *args):
    """Bind ``prim`` in the innermost staging (or evaluating) trace: a token has no tangent
    and no batch dimension, so the transformations in between have nothing to do."""
    trace = current_trace()
    while not isinstance(trace, (StagingTrace, EvalTrace)):
        trace = trace.parent
    with set_current_trace(trace):
        return prim.bind(*args)


def create_token(_=None):
    """A new token (the argument, accepted for compatibility, is ignored)."""
    return Token(_bind_where_staged(create_token_p))


def after_all(*operands):
    """A token that follows every token in ``operands``."""
    for t in operands:
        if not isinstance(t, Token):
            raise TypeError(f"Arguments to after_all must be tokens, got {type(t).__name__} "
                            f"({t!r}); make one with lax.create_token().")
    # An evaluated token orders nothing: only traced ones are operands.
    return Token(_bind_where_staged(after_all_p,
                                    *(t._value for t in operands if t._value is not None)))


abstract_eval_rules[create_token_p] = lambda: abstract_token
abstract_eval_rules[after_all_p] = lambda *tokens: abstract_token
register_lowering(create_token_p, lambda ctx: ctx.op1("stablehlo.create_token", [], []))
register_lowering(after_all_p, lambda ctx, *tokens: ctx.op1("stablehlo.after_all", list(tokens)))
# (Bound only in staging or evaluating traces, so no jvp or batching rule ever runs; these
# say what one would do: a token has no tangent and no batch dimension.)
jvp_rules[create_token_p] = lambda primals, tangents: (create_token_p.bind(), Zero(abstract_token))
jvp_rules[after_all_p] = lambda primals, tangents: (after_all_p.bind(*primals),
                                                    Zero(abstract_token))
batch_rules[create_token_p] = lambda axis, vals, dims: (create_token_p.bind(), not_mapped)
batch_rules[after_all_p] = lambda axis, vals, dims: (after_all_p.bind(*vals), not_mapped)
# Evaluated, a token is nothing (None): there is no effect to order outside a program.
impl_rules[create_token_p] = lambda: None
impl_rules[after_all_p] = lambda *tokens: None
