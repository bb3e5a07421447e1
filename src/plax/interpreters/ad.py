"""``plax.interpreters.ad``: forward and reverse differentiation rules, as ``jax.interpreters.ad``.

``primitive_jvps`` and ``primitive_transposes`` *are* plax's tables (``plax.core.rules``):
a rule written here is the rule plax's jvp, linearize, grad and vjp run. The calling
conventions are JAX's, which are plax's own:

- ``primitive_jvps[p] = rule(primals, tangents, **params) -> (primal_out, tangent_out)``;
  a tangent may be a symbolic ``Zero``;
- ``primitive_transposes[p] = rule(ct, *args, **params) -> [ct for each arg]``; the linear
  arguments are ``UndefinedPrimal``s, and a result may be ``None`` or a ``Zero``.
"""
from __future__ import annotations

from plax.core.rules import (UndefinedPrimal, Zero, is_undefined as is_undefined_primal,  # noqa: F401
                             jvp_rules as primitive_jvps, transpose_rules as primitive_transposes)
from plax.first_order import ad_util as _ad_util
from plax.first_order.ad_util import (add_tangents, defbilinear,  # noqa: F401
                                      instantiate as instantiate_zeros, zeros_like_aval)
from plax.transforms.jvp import JVPTrace, JVPTracer  # noqa: F401


def add_jaxvals(x, y):
    """``x + y`` for two values of the same type (tangents, cotangents)."""
    from plax.first_order.arithmetic import add
    return add(x, y)


def defjvp(primitive, *jvp_rules):
    """A jvp rule from one function per argument, ``rule(g, *primals, **params)``: the
    output tangent for input tangent ``g`` (``None`` for an argument with no tangent)."""
    _ad_util.defjvp(primitive, *(
        None if rule is None else
        (lambda g, ans, *primals, _rule=rule, **params: _rule(g, *primals, **params))
        for rule in jvp_rules))


def defjvp2(primitive, *jvp_rules):
    """As ``defjvp``, each rule also given the primal output: ``rule(g, ans, *primals)``."""
    _ad_util.defjvp(primitive, *jvp_rules)


def deflinear(primitive, transpose_rule):
    """A primitive linear in all its arguments; ``transpose_rule(ct, **params)`` gives the
    cotangents of all of them."""
    def transpose(ct, *args, **params):
        if type(ct) is Zero:
            return [Zero(a.aval) if is_undefined_primal(a) else None for a in args]
        return transpose_rule(ct, **params)
    _ad_util.deflinear(primitive)
    primitive_transposes[primitive] = transpose


def deflinear2(primitive, transpose_rule):
    """As ``deflinear``, the transpose rule also given the arguments:
    ``transpose_rule(ct, *args, **params)``."""
    def transpose(ct, *args, **params):
        if type(ct) is Zero:
            return [Zero(a.aval) if is_undefined_primal(a) else None for a in args]
        return transpose_rule(ct, *args, **params)
    _ad_util.deflinear(primitive)
    primitive_transposes[primitive] = transpose


def get_primitive_transpose(p):
    """The transpose rule of ``p``; NotImplementedError when it has none."""
    try:
        return primitive_transposes[p]
    except KeyError:
        raise NotImplementedError(
            f"Transpose rule (for reverse-mode differentiation) for '{p}' not implemented"
        ) from None
