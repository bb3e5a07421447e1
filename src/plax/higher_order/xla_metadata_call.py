"""``xla_metadata_call``: a function called with XLA metadata on the call.

``xla_metadata_call(f, **meta)(*args)`` traces ``f`` into one ``xla_metadata_call``
equation (its body in the ``jaxpr`` parameter, each ``meta`` pair a parameter of its own).
Every transformation keeps it one equation: the rules are those of a plain call
(``call.register_call_rules``), which carry the metadata through jvp, transpose, vmap,
partial evaluation and dead-code elimination. Lowered, the body becomes a private function
and the call to it carries the pairs as ``mhlo.frontend_attributes`` (string values): a
``scheduling_group`` there is what XLA's schedulers read.
"""
from __future__ import annotations

from plax.core import tree_core
from plax.core.jaxpr import ClosedJaxpr
from plax.core.primitive import Primitive
from plax.core.rules import dce_rules
from plax.core.source_info import fun_name
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import get_aval
from plax.higher_order.call import bind_body, register_call_rules
from plax.higher_order.pjit import call_function
from plax.lowering.stablehlo import define_function

__all__ = ["xla_metadata_call", "xla_metadata_call_p", "scheduling_group",
           "dce_jaxpr_xla_metadata_rule"]

xla_metadata_call_p = Primitive("xla_metadata_call", multiple_results=True)


def xla_metadata_call(f=None, **meta):
    """``f`` called with the XLA metadata ``meta`` on the call (a decorator without ``f``)."""
    if f is None:
        return lambda g: _with_metadata(g, meta)
    return _with_metadata(f, meta)


def scheduling_group(name: str):
    """A decorator: the function's call is in XLA's scheduling group ``name``."""
    return xla_metadata_call(scheduling_group=name)


def _with_metadata(fun, meta: dict):
    def wrapped(*args, **kwargs):
        flat, in_tree = tree_core.tree_flatten((args, kwargs))
        out_trees = []

        def flat_fun(*leaves):
            a, k = tree_core.tree_unflatten(in_tree, leaves)
            outs, out_tree = tree_core.tree_flatten(fun(*a, **k))
            out_trees.append(out_tree)
            return outs
        jaxpr, consts = trace_to_jaxpr(flat_fun, [get_aval(x) for x in flat],
                                       description=f"xla_metadata_call({fun_name(fun)})")
        outs = bind_body(xla_metadata_call_p, ClosedJaxpr(jaxpr, consts), flat, **meta)
        return tree_core.tree_unflatten(out_trees[-1], outs)
    return wrapped


def _lowering(ctx, *args, jaxpr: ClosedJaxpr, **meta):
    """A private function holding the body, and a call to it carrying the metadata."""
    pairs = tuple((k, attribute_value(v)) for k, v in meta.items())
    callee = ctx.fn.module.unique_name("xla_metadata_call")
    define_function(ctx.module_context, callee, jaxpr.jaxpr,
                    scope=ctx.fn.eqn_scope + ("xla_metadata_call",))
    saved = ctx.fn.frontend_attributes
    ctx.fn.frontend_attributes = tuple(p for p in saved if p[0] not in meta) + pairs
    try:
        return call_function(ctx, callee, jaxpr, args)
    finally:
        ctx.fn.frontend_attributes = saved


def attribute_value(x) -> str:
    """A metadata value as the string attribute it lowers to (strings only, as JAX)."""
    if isinstance(x, str):
        return x
    raise NotImplementedError(f"mlir attr handler for type(x)={type(x)}")


register_call_rules(xla_metadata_call_p, body_param="jaxpr", lowering=_lowering)
dce_jaxpr_xla_metadata_rule = dce_rules[xla_metadata_call_p]
