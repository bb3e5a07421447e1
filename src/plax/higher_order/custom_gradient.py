"""custom_gradient: a function that returns its value together with its VJP.

``@custom_gradient def f(x): return y, lambda g: (g * dy_dx,)``. It is a ``custom_vjp``
whose forward pass traces the returned VJP function to a jaxpr; the values that
function closes over (tracers of the forward computation) become the residuals.
"""
from __future__ import annotations

from plax import tree_util
from plax.core.jaxpr import eval_jaxpr
from plax.core.rules import tangent_aval
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import get_aval
from plax.higher_order.custom_derivatives import custom_vjp

__all__ = ["custom_gradient"]


class _TracedRule:
    """The residuals of a custom_gradient: the VJP function as a jaxpr (static) and the
    values it closes over (the pytree's leaves)."""

    def __init__(self, jaxpr, consts, cts_tree, out_tree):
        self.jaxpr, self.consts, self.cts_tree, self.out_tree = jaxpr, consts, cts_tree, out_tree


tree_util.register_pytree_node(
    _TracedRule, lambda r: (list(r.consts), (r.jaxpr, r.cts_tree, r.out_tree)),
    lambda aux, consts: _TracedRule(aux[0], list(consts), aux[1], aux[2]))


def custom_gradient(fun):
    """``fun(*args)`` returns ``(value, vjp)`` where ``vjp(cotangent)`` returns one
    cotangent per positional argument; the result differentiates by that ``vjp``."""

    def value_only(*args):
        value, _ = fun(*args)
        return value

    wrapped = custom_vjp(value_only)

    def fwd(*args):
        value, rule = fun(*args)
        leaves, value_tree = tree_util.tree_flatten(value)
        out_tree_box = []

        def flat_rule(*cts):
            out = rule(tree_util.tree_unflatten(value_tree, list(cts)))
            if tree_util.treedef_is_leaf(tree_util.tree_structure(out)):
                out = (out,)  # (one array: the cotangent of the one argument, as in JAX)
            if not isinstance(out, (tuple, list)):
                raise TypeError("The VJP function of a custom_gradient must return a tuple "
                                f"or list with one cotangent per positional argument, got "
                                f"{type(out).__name__}.")
            if len(out) != len(args):
                raise TypeError(f"The VJP function of a custom_gradient returned "
                                f"{len(out)} cotangents for {len(args)} positional arguments.")
            flat, out_tree = tree_util.tree_flatten(tuple(out))
            out_tree_box.append(out_tree)
            return flat

        avals = [tangent_aval(get_aval(x)) for x in leaves]
        jaxpr, consts = trace_to_jaxpr(flat_rule, avals, description="custom_gradient vjp")
        return value, _TracedRule(jaxpr, consts, value_tree, out_tree_box[0])

    def bwd(res, cts):
        flat = tree_util.tree_leaves(cts)
        outs = eval_jaxpr(res.jaxpr, res.consts, *flat)
        return tree_util.tree_unflatten(res.out_tree, list(outs))

    wrapped.defvjp(fwd, bwd)
    return wrapped
