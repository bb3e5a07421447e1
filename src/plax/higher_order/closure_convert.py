"""closure_convert: a function's closed-over traced values made explicit arguments, so a
custom_jvp/custom_vjp rule that needs their tangents can be given them."""
from __future__ import annotations

from plax import tree_util
from plax.core import dtypes
from plax.core.jaxpr import eval_jaxpr
from plax.core.source_info import fun_name
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import Tracer, get_aval

__all__ = ["closure_convert"]


def closure_convert(fun, *example_args):
    """``(converted_fun, consts)``: ``converted_fun(*args, *consts)`` computes ``fun(*args)``
    with the closed-over traced float values ``consts`` as explicit arguments."""
    leaves, in_tree = tree_util.tree_flatten(example_args)
    box = []

    def flat(*xs):
        out = fun(*tree_util.tree_unflatten(in_tree, list(xs)))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        box.append(out_tree)
        return out_leaves

    jaxpr, consts = trace_to_jaxpr(flat, [get_aval(x) for x in leaves],
                                   description=f"closure_convert({fun_name(fun)})")
    out_tree = box[-1]
    hoist = [isinstance(c, Tracer) and dtypes.is_inexact(get_aval(c).dtype) for c in consts]
    kept = [c for c, h in zip(consts, hoist) if not h]
    hoisted = [c for c, h in zip(consts, hoist) if h]
    n = len(leaves)

    def converted_fun(*args_and_consts):
        args, cs = args_and_consts[:len(example_args)], args_and_consts[len(example_args):]
        if len(cs) != len(hoisted):
            raise TypeError(f"closure_convert: the converted function takes {len(example_args)} "
                            f"arguments and {len(hoisted)} constants, got "
                            f"{len(args_and_consts)} values.")
        xs, tree = tree_util.tree_flatten(tuple(args))
        if tree != in_tree or len(xs) != n:
            raise TypeError(f"closure_convert: arguments have structure {tree}, but the function "
                            f"was converted for {in_tree}.")
        k, h = iter(kept), iter(cs)
        all_consts = [next(h) if hz else next(k) for hz in hoist]
        return tree_util.tree_unflatten(out_tree, eval_jaxpr(jaxpr, all_consts, *xs))

    converted_fun.__name__ = fun_name(fun)
    return converted_fun, hoisted
