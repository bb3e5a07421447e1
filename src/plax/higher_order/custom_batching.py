"""``custom_vmap``: a function with its own batching rule, and ``sequential_vmap``.

Calling a ``custom_vmap`` function traces it to a jaxpr and binds ``custom_vmap_call``
holding that jaxpr (``call``, its constants as leading operands) and the user's rule:

- evaluated, staged (jit) or lowered, it is the function;
- batched, the rule runs (in the enclosing trace) on the inputs with their batch
  dimension in front: ``rule(axis_size, in_batched, *args) -> (out, out_batched)``.
  Under nested vmaps the innermost one calls the rule; the outer ones batch what the rule
  did (a rule calling the custom_vmap function again meets its rule at each level);
- differentiated forward, it is a ``custom_vmap_call`` again: the jvp of the function,
  whose rule is the jvp of the user's rule;
- in reverse mode (partial evaluation with unknown inputs) the custom rule is no
  longer needed and the function is inlined, so ``grad`` of a custom_vmap function
  differentiates the function (JAX refuses ``grad`` outside a vmap).
"""
from __future__ import annotations

import functools

from plax import tree_util
from plax.core import dtypes
from plax.core.jaxpr import ClosedJaxpr, call_out_avals, consts_as_inputs, eval_jaxpr
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, impl_rules, jvp_rules,
                             not_mapped, param_printers, partial_eval_rules, register_lowering,
                             tangent_aval)
from plax.core.source_info import fun_name
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import get_aval
from plax.first_order.ad_util import instantiate
from plax.first_order.batch_util import broadcast_batch, move_batch_dim
from plax.higher_order.custom_derivatives import NamedCallable, _resolve_args, _signature
from plax.higher_order.scan import map as _map
from plax.lowering.consts import const_operands
from plax.lowering.stablehlo import lower_jaxpr_body
from plax.transforms.jvp import jvp_flat
from plax.transforms.toolkit import jvp_jaxpr

__all__ = ["custom_vmap", "sequential_vmap", "custom_vmap_call_p"]

custom_vmap_call_p = Primitive("custom_vmap_call", multiple_results=True)


class custom_vmap:
    """A function whose batching under ``vmap`` is the rule given with ``def_vmap``.

    The rule is called as ``rule(axis_size, in_batched, *args)``: ``in_batched`` holds,
    per argument, a pytree of bools saying which leaves are batched (their batch
    dimension first); it returns ``(out, out_batched)``, ``out_batched`` a pytree (or a
    prefix of one) of bools saying which outputs carry the batch dimension in front.
    """

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vmap_rule = None
        self._sig = _signature(fun)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def def_vmap(self, vmap_rule):
        """Set the batching rule ``vmap_rule(axis_size, in_batched, *args) -> (out,
        out_batched)``; returns it unchanged."""
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args, **kwargs):
        name = fun_name(self.fun)
        if self.vmap_rule is None:
            raise AttributeError(
                f"No batching rule defined for custom_vmap function {name} using def_vmap.")
        args = _resolve_args(self.fun, self._sig, args, kwargs, "custom_vmap")
        leaves, in_tree = tree_util.tree_flatten(args)
        out_tree = []

        def flat(*xs):
            out = self.fun(*tree_util.tree_unflatten(in_tree, list(xs)))
            out_leaves, tree = tree_util.tree_flatten(out)
            out_tree[:] = [tree]
            return out_leaves

        jaxpr, consts = trace_to_jaxpr(flat, [get_aval(x) for x in leaves], description=name)
        call, consts = consts_as_inputs(ClosedJaxpr(jaxpr, consts))
        rule = NamedCallable(_flat_rule(self.vmap_rule, in_tree, out_tree[0], name),
                             fun_name(self.vmap_rule))
        outs = custom_vmap_call_p.bind(*consts, *leaves, call=call, rule=rule,
                                       num_consts=len(consts), name=name)
        return tree_util.tree_unflatten(out_tree[0], outs)


def _flat_rule(user_rule, in_tree, out_tree, name):
    """The rule on flat leaves: ``(axis_size, in_batched, args) -> (outs, out_batched)``."""
    def rule(axis_size, in_batched, args):
        tree_args = tree_util.tree_unflatten(in_tree, list(args))
        tree_batched = tree_util.tree_unflatten(in_tree, list(in_batched))
        res = user_rule(axis_size, list(tree_batched), *tree_args)
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise TypeError(f"The custom vmap rule ({fun_name(user_rule)}) of {name} must "
                            f"return a pair (output, output batching specification), got {res!r}.")
        out, out_batched = res
        out_leaves, got_tree = tree_util.tree_flatten(out)
        try:
            batched = tree_util.broadcast_prefix(out_batched, out)
        except ValueError:
            raise ValueError(
                "structure of output value and output batching specification returned by "
                f"custom vmap rule ({fun_name(user_rule)}) do not match.\n"
                f"Output values: {got_tree}\n"
                f"Batching spec: {tree_util.tree_structure(out_batched)}") from None
        if got_tree != out_tree:
            raise ValueError(f"The custom vmap rule ({fun_name(user_rule)}) of {name} returned "
                             f"an output of structure {got_tree}, but {name} returns "
                             f"{out_tree}.")
        return out_leaves, [bool(b) for b in batched]
    return rule


# --- the primitive's rules -----------------------------------------------------------------
def _abstract(*avals, call, rule, num_consts, name):
    return call_out_avals(f"custom_vmap {name}", call, avals)


def _impl(*args, call, **_):
    return eval_jaxpr(call.jaxpr, call.consts, *args)


def _lowering(ctx, *args, call, **_):
    return lower_jaxpr_body(ctx.fn, call.jaxpr, [*const_operands(ctx, call), *args])


def _inline(trace, args, params):
    return trace.eval_jaxpr(params["call"], args)


def _batch(axis, vals, dims, *, call, rule, num_consts, name):
    if any(d is not not_mapped for d in dims[:num_consts]):
        raise ValueError(f"The custom_vmap function {name} closes over a value batched by "
                         "this vmap; pass that value as an argument so that its rule sees it.")
    args = [v if d is not_mapped else move_batch_dim(v, d, 0, axis.size)
            for v, d in zip(vals[num_consts:], dims[num_consts:])]
    in_batched = [d is not not_mapped for d in dims[num_consts:]]
    outs, out_batched = rule(axis.size, in_batched, args)
    avals = call.out_avals
    if len(outs) != len(avals):
        raise ValueError(f"The custom vmap rule of {name} returned {len(outs)} outputs where "
                         f"{name} returns {len(avals)}.")
    out_dims = []
    for i, (o, b, a) in enumerate(zip(outs, out_batched, avals)):
        got = get_aval(o).shape
        want = ((axis.size,) if b else ()) + a.shape
        if got != want:
            raise ValueError(
                f"The custom vmap rule of {name} returned output {i} of shape {got} marked "
                f"{'batched' if b else 'unbatched'}, so its shape should be {want} (the "
                f"function's output has shape {a.shape}, the vmapped axis size {axis.size}).")
        out_dims.append(0 if b else not_mapped)
    return outs, out_dims


def _jvp(primals, tangents, *, call, rule, num_consts, name):
    # Tangents of closed-over values are arguments of the jvp's call (its function uses them);
    # its rule cannot, so batching it with such a tangent is refused (in the rule).
    closure_tangents = any(type(t) is not Zero for t in tangents[:num_consts])
    nonzeros = [type(t) is not Zero for t in tangents]
    differentiable = [tangent_aval(a).dtype != dtypes.float0 for a in call.out_avals]
    body, out_nonzeros = jvp_jaxpr(call, nonzeros, instantiate=differentiable,
                                   description=f"jvp({name})")
    arg_nonzeros = nonzeros[num_consts:]
    jrule = NamedCallable(_jvp_rule(rule, arg_nonzeros, out_nonzeros, call.out_avals,
                                    sum(nonzeros[:num_consts]), closure_tangents, name),
                          f"jvp({rule!r})")
    outs = custom_vmap_call_p.bind(*primals, *(t for t in tangents if type(t) is not Zero),
                                   call=body, rule=jrule, num_consts=num_consts,
                                   name=f"jvp({name})")
    m = len(call.out_avals)
    it = iter(outs[m:])
    return outs[:m], [next(it) if nz else Zero(tangent_aval(a))
                      for a, nz in zip(call.out_avals, out_nonzeros)]


def _jvp_rule(rule, arg_nonzeros, out_nonzeros, out_avals, n_closure_tangents,
              closure_tangents, name):
    """The batching rule of the jvp: the jvp of ``rule`` (every output batched)."""
    def jrule(axis_size, in_batched, args):
        if closure_tangents:
            raise TypeError(f"The custom_vmap function {name} closes over a value that is "
                            "being differentiated, and its vmap rule cannot account for that "
                            "value's tangent; pass it as an argument instead.")
        n, k = len(arg_nonzeros), n_closure_tangents
        primals, tans = list(args[:n]), list(args[n + k:])
        p_batched, t_batched = list(in_batched[:n]), list(in_batched[n + k:])
        it_t, it_b = iter(tans), iter(t_batched)
        full_t, batched = [], []
        for p, pb, nz in zip(primals, p_batched, arg_nonzeros):
            t, tb = (next(it_t), next(it_b)) if nz else (None, False)
            batched.append(pb or tb)
            full_t.append((t, tb))
        # A value whose tangent is batched is batched too (and the other way round).
        primals = [broadcast_batch(p, axis_size, 0) if b and not pb else p
                   for p, b, pb in zip(primals, batched, p_batched)]
        tangents = [Zero(tangent_aval(get_aval(p))) if t is None else
                    (broadcast_batch(t, axis_size, 0) if b and not tb else t)
                    for p, (t, tb), b in zip(primals, full_t, batched)]
        box = []

        def primal_rule(*ps):
            outs, ob = rule(axis_size, batched, list(ps))
            box[:] = [ob]
            return outs

        outs, out_tans = jvp_flat(primal_rule, primals, tangents, "custom_vmap jvp rule")
        out_batched = box[0]
        full = []
        for o, b, a in zip(outs, out_batched, out_avals):
            full.append(o if b else broadcast_batch(o, axis_size, 0))
        for t, nz, a in zip(out_tans, out_nonzeros, out_avals):
            if not nz:
                continue
            t = instantiate(t)
            if len(get_aval(t).shape) == len(a.shape):
                t = broadcast_batch(t, axis_size, 0)
            full.append(t)
        return full, [True] * len(full)
    return jrule


abstract_eval_rules[custom_vmap_call_p] = _abstract
impl_rules[custom_vmap_call_p] = _impl
register_lowering(custom_vmap_call_p, _lowering)
batch_rules[custom_vmap_call_p] = _batch
jvp_rules[custom_vmap_call_p] = _jvp
partial_eval_rules[custom_vmap_call_p] = _inline
param_printers[custom_vmap_call_p] = lambda p: {"name": p["name"], "call": p["call"],
                                                "rule": p["rule"]}


def sequential_vmap(f):
    """``f`` as a ``custom_vmap`` whose batching runs it once per example (``lax.map``)."""
    wrapped = custom_vmap(f)

    @wrapped.def_vmap
    def rule(axis_size, in_batched, *args):
        leaves, tree = tree_util.tree_flatten(args)
        batched = tree_util.tree_leaves(in_batched)
        mapped = [x for x, b in zip(leaves, batched) if b]

        def one(xs):
            it = iter(xs)
            return wrapped(*tree.unflatten([next(it) if b else x
                                            for x, b in zip(leaves, batched)]))
        return _map(one, mapped), True

    return wrapped
