"""User-defined derivatives: ``custom_jvp``, ``custom_vjp`` and ``closure_convert``.

Calling a decorated function traces it to a jaxpr and binds a higher-order
primitive holding that jaxpr and the user's rules:

- ``custom_jvp_call`` evaluates, stages and lowers like its jaxpr (the rule
  plays no part there); its JVP rule calls the user's jvp function on the
  primals and tangents, so differentiating it (to any order) differentiates
  the user's rule.
- ``custom_vjp_call`` likewise; its JVP rule runs the user's ``fwd`` and emits
  ``custom_lin``, a linear primitive of the residuals and the input tangents
  whose transpose calls the user's ``bwd``. ``custom_lin`` cannot be
  evaluated, which is why forward mode of a custom_vjp function is an error.

The traced jaxpr takes the values the function closes over as leading
arguments (``num_consts``); if one of them is being differentiated by the
trace applying the rule, the rule would miss its tangent, so that raises
(use ``closure_convert`` and pass them as arguments).
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from plax import lax, tree_util
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.jaxpr import ClosedJaxpr, call_out_avals, consts_as_inputs, eval_jaxpr
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, impl_rules, jvp_rules,
                             lowering_rules, param_printers, partial_eval_rules, tangent_aval,
                             transpose_rules)
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import Tracer, get_aval
from plax.lax.ad_util import zeros_like_aval
from plax.lax.batch_util import batched_aval, move_batch_dim, moveaxis
from plax.lowering.consts import const_operands
from plax.lowering.stablehlo import lower_jaxpr_body
from plax.transforms.vmap import batch_flat, batch_jaxpr

__all__ = ["custom_jvp", "custom_vjp", "closure_convert", "SymbolicZero", "CustomVJPPrimal"]


class SymbolicZero:
    """A zero tangent or cotangent passed to rules defined with ``symbolic_zeros=True``."""

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)

    def __repr__(self):
        return f"SymbolicZero({self.aval.str_short()})"


class CustomVJPPrimal:
    """A primal passed to a ``symbolic_zeros=True`` fwd rule: its value and whether it is
    being differentiated."""

    __slots__ = ("value", "perturbed")

    def __init__(self, value, perturbed: bool):
        self.value = value
        self.perturbed = perturbed

    def __repr__(self):
        return f"CustomVJPPrimal(value={self.value!r}, perturbed={self.perturbed})"


class _Named:
    """A callable param that prints as the user function's name (as JAX shows it)."""

    __slots__ = ("fn", "name")

    def __init__(self, fn, name):
        self.fn = fn
        self.name = name

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self):
        return self.name


def _name(f) -> str:
    return getattr(f, "__name__", None) or type(f).__name__


# --- shared plumbing -----------------------------------------------------------------------
def _resolve_args(fun, args, kwargs):
    """Positional arguments for ``fun(*args, **kwargs)``; rules take arguments by position."""
    if not kwargs:
        return tuple(args)
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{_name(fun)}: {e}") from None
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError("keyword arguments could not be resolved to positions; pass "
                        f"{sorted(bound.kwargs)} positionally to {_name(fun)}.")
    return tuple(bound.args)


def _check_nondiff(nondiff_argnums, nargs, name):
    for i in nondiff_argnums:
        if not -nargs <= i < nargs:
            raise TypeError(f"nondiff_argnums={nondiff_argnums} of {name} refers to argument {i}, "
                            f"but it was called with {nargs} positional arguments.")
    return tuple(sorted({i % nargs for i in nondiff_argnums}))


def _split(args, nondiff):
    return [args[i] for i in nondiff], tuple(a for i, a in enumerate(args) if i not in nondiff)


def _merge(nondiff, static_vals, dyn):
    out, s, d = [], iter(static_vals), iter(dyn)
    for i in range(len(nondiff) + len(dyn)):
        out.append(next(s) if i in nondiff else next(d))
    return out


def _trace_primal(fun, args, nondiff, name):
    """Trace ``fun`` on the differentiable arguments; the others stay fixed Python values.

    Returns ``(jaxpr taking closed-over values then leaves, closed-over values, leaves,
    in_tree, out_tree)``.
    """
    static_vals, dyn = _split(args, nondiff)
    leaves, in_tree = tree_util.tree_flatten(dyn)
    box = []

    def flat(*xs):
        out = fun(*_merge(nondiff, static_vals, tree_util.tree_unflatten(in_tree, list(xs))))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        box.append(out_tree)
        return out_leaves

    jaxpr, consts = trace_to_jaxpr(flat, [get_aval(x) for x in leaves], description=name)
    # Closed-over values become leading arguments, so enclosing traces see them as inputs.
    call, consts = consts_as_inputs(ClosedJaxpr(jaxpr, consts))
    return call, consts, leaves, in_tree, box[-1]


def _call_abstract(*avals, call_jaxpr, name, **_):
    return call_out_avals(name, call_jaxpr, avals)


def _call_impl(*args, call_jaxpr, **_):
    return eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *args)


def _call_lowering(ctx, *args, call_jaxpr, **_):
    return lower_jaxpr_body(ctx.fn, call_jaxpr.jaxpr, [*const_operands(ctx, call_jaxpr), *args])


def _inline(trace, args, params):
    """Partial evaluation (building a linear function) no longer needs the custom rule."""
    return trace.eval_jaxpr(params["call_jaxpr"], args)


def _check_closure(tangents, num_consts, name, kind):
    if any(type(t) is not Zero for t in tangents[:num_consts]):
        raise TypeError(
            f"The {kind} function {name} closes over a value that is being differentiated; "
            f"its custom rule cannot account for that value's tangent. Pass it as an argument, "
            f"or use plax.closure_convert to turn the closed-over values into arguments.")


def _check_primal_outs(outs, out_tree, out_avals, what, name):
    leaves, tree = tree_util.tree_flatten(outs)
    if tree != out_tree:
        raise TypeError(f"{what} must produce primal outputs with equal container (pytree) "
                        f"structures as the function {name}, but got {tree} and {out_tree} "
                        "respectively.")
    for i, (x, want) in enumerate(zip(leaves, out_avals)):
        got = get_aval(x)
        if got.shape != want.shape or got.dtype != want.dtype:
            raise TypeError(f"{what} must produce primal outputs with the same shapes and dtypes "
                            f"as the function {name}, but output {i} has type {got.str_short()} "
                            f"where {name} gives {want.str_short()}.")
    return leaves


# --- custom_jvp ----------------------------------------------------------------------------
custom_jvp_call_p = Primitive("custom_jvp_call", multiple_results=True)


class custom_jvp:
    """A function with a custom JVP rule (``defjvp``), used by every differentiation mode.

    The rule takes ``(primals, tangents)`` (after any ``nondiff_argnums`` values) and returns
    ``(primal_out, tangent_out)``; its tangent output must be linear in the tangents.
    """

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp = None
        self.symbolic_zeros = False

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def defjvp(self, jvp, symbolic_zeros: bool = False):
        """Set the JVP rule ``jvp(*nondiff_args, primals, tangents) -> (out, tangent_out)``."""
        self.jvp = jvp
        self.symbolic_zeros = symbolic_zeros
        return jvp

    def defjvps(self, *jvps):
        """Set one rule per argument, ``fn(tangent, primal_out, *primals)`` (None: no effect);
        the output tangent is the sum of their contributions."""
        if self.nondiff_argnums:
            raise TypeError("Can't use ``defjvps`` with ``nondiff_argnums``.")

        def jvp(primals, tangents):
            # One tangent per argument, None where all of it is zero (_tangents_per_argument);
            # the output's tangent is None when no rule contributes.
            primal_out = self(*primals)
            parts = [fn(t, primal_out, *primals) for fn, t in zip(jvps, tangents)
                     if fn is not None and t is not None]
            if not parts:
                return primal_out, None
            return primal_out, functools.reduce(
                lambda a, b: tree_util.tree_map(_add, a, b), parts)

        jvp.__name__ = f"{_name(self.fun)}_jvps"
        jvp.tangents_per_argument = True
        self.defjvp(jvp, symbolic_zeros=True)

    def __call__(self, *args, **kwargs):
        name = _name(self.fun)
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using defjvp.")
        args = _resolve_args(self.fun, args, kwargs)
        nondiff = _check_nondiff(self.nondiff_argnums, len(args), name)
        call, consts, leaves, in_tree, out_tree = _trace_primal(self.fun, args, nondiff, name)
        static_vals, _ = _split(args, nondiff)
        rule = _Named(_jvp_rule(self.jvp, self.symbolic_zeros, static_vals, in_tree, out_tree,
                                call.out_avals, name), _name(self.jvp))
        outs = custom_jvp_call_p.bind(*consts, *leaves, call_jaxpr=call, jvp=rule,
                                      num_consts=len(consts), symbolic_zeros=self.symbolic_zeros,
                                      name=name)
        return tree_util.tree_unflatten(out_tree, outs)


def _add(a, b):
    return lax.add(a, b)


def _jvp_rule(user_jvp, symbolic_zeros, static_vals, in_tree, out_tree, out_avals, name):
    """The flat rule: (primal leaves, tangent leaves with Zeros) -> (out leaves, tangents)."""
    rule_name = _name(user_jvp)
    per_argument = getattr(user_jvp, "tangents_per_argument", False)  # (defjvps' rule)

    def rule(primals, tangents):
        if per_argument:
            t_in = _tangents_per_argument(in_tree, tangents)
        else:
            t_in = in_tree.unflatten(
                [(SymbolicZero(t.aval) if symbolic_zeros else _zeros(t.aval))
                 if type(t) is Zero else t for t in tangents])
        res = user_jvp(*static_vals, tree_util.tree_unflatten(in_tree, list(primals)), t_in)
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise TypeError(f"Custom JVP rule {rule_name} for function {name} must produce a "
                            "pair (list or tuple of length two) representing primal and tangent "
                            f"outputs, but got {res}.")
        p_out, t_out = res
        p_tree = tree_util.tree_structure(p_out)
        if per_argument and t_out is None:
            t_leaves, t_tree = [None] * p_tree.num_leaves, p_tree
        else:
            t_leaves, t_tree = tree_util.tree_flatten(
                t_out, is_leaf=lambda x: isinstance(x, SymbolicZero))
        if p_tree != t_tree:
            raise TypeError(f"Custom JVP rule {rule_name} for function {name} must produce "
                            "primal and tangent outputs with equal container (pytree) structures, "
                            f"but got {p_tree} and {t_tree} respectively.")
        p_leaves = _check_primal_outs(p_out, out_tree, out_avals, f"Custom JVP rule {rule_name}",
                                      name)
        return p_leaves, [_check_tangent_out(p, t) for p, t in zip(p_leaves, t_leaves)]

    return rule


def _tangents_per_argument(in_tree, tangents) -> tuple:
    """defjvps' tangents: per argument, None when all of it is zero, else its tree with any
    zero leaves made arrays (a user's node is built only from arrays)."""
    out, it = [], iter(tangents)
    for arg_tree in in_tree.children():
        ts = [next(it) for _ in range(arg_tree.num_leaves)]
        out.append(None if all(type(t) is Zero for t in ts) else
                   arg_tree.unflatten([_zeros(t.aval) if type(t) is Zero else t for t in ts]))
    return tuple(out)


def _zeros(aval):
    """Zeros of a tangent type, as rules without symbolic zeros receive them."""
    return np.zeros(aval.shape, dtypes.float0) if aval.dtype == dtypes.float0 else \
        zeros_like_aval(aval)


def _check_tangent_out(primal, t):
    want = tangent_aval(get_aval(primal))
    if isinstance(t, SymbolicZero) or t is None:
        return Zero(want)
    got = get_aval(t)
    if want.dtype == dtypes.float0 and got.shape == want.shape:
        return Zero(want)  # integer outputs have no tangent; whatever was given is dropped
    if got.shape != want.shape or got.dtype != want.dtype:
        raise TypeError("Custom JVP rule must produce primal and tangent outputs with "
                        f"corresponding shapes and dtypes. Expected {want.str_short()} (tangent "
                        f"type of {get_aval(primal).str_short()}) but got {got.str_short()}.")
    return t


def _custom_jvp_call_jvp(primals, tangents, *, call_jaxpr, jvp, num_consts, symbolic_zeros,
                         name):
    _check_closure(tangents, num_consts, name, "custom_jvp")
    return jvp(list(primals[num_consts:]), list(tangents[num_consts:]))


abstract_eval_rules[custom_jvp_call_p] = _call_abstract
impl_rules[custom_jvp_call_p] = _call_impl

lowering_rules[custom_jvp_call_p] = _call_lowering
jvp_rules[custom_jvp_call_p] = _custom_jvp_call_jvp
partial_eval_rules[custom_jvp_call_p] = _inline
param_printers[custom_jvp_call_p] = lambda p: {
    "name": p["name"], "call_jaxpr": p["call_jaxpr"], "jvp": p["jvp"],
    **({"num_consts": p["num_consts"]} if p["num_consts"] else {}),
    "symbolic_zeros": p["symbolic_zeros"]}


# --- custom_vjp ----------------------------------------------------------------------------
custom_vjp_call_p = Primitive("custom_vjp_call", multiple_results=True)
custom_lin_p = Primitive("custom_lin", multiple_results=True)

_JVP_OF_VJP = "can't apply forward-mode autodiff (jvp) to a custom_vjp function."


class custom_vjp:
    """A function with a custom reverse-mode rule: ``defvjp(fwd, bwd)``.

    ``fwd(*args) -> (out, residuals)`` (residuals: any pytree of arrays);
    ``bwd(*nondiff_args, residuals, out_cotangent)`` returns one cotangent per
    differentiable argument, as a tuple.
    """

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd = None
        self.bwd = None
        self.symbolic_zeros = False

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def defvjp(self, fwd, bwd, symbolic_zeros: bool = False, optimize_remat: bool = False):
        """Set the forward (``fwd``) and backward (``bwd``) rules."""
        self.fwd, self.bwd, self.symbolic_zeros = fwd, bwd, symbolic_zeros

    def __call__(self, *args, **kwargs):
        name = _name(self.fun)
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using defvjp.")
        args = _resolve_args(self.fun, args, kwargs)
        nondiff = _check_nondiff(self.nondiff_argnums, len(args), name)
        call, consts, leaves, in_tree, out_tree = _trace_primal(self.fun, args, nondiff, name)
        static_vals, _ = _split(args, nondiff)
        fwd = _Named(_fwd_rule(self, static_vals, nondiff, in_tree, out_tree, call.out_avals,
                               [get_aval(x) for x in leaves], name), _name(self.fwd))
        outs = custom_vjp_call_p.bind(*consts, *leaves, call_jaxpr=call, fwd=fwd,
                                      bwd=_Named(None, _name(self.bwd)), num_consts=len(consts),
                                      symbolic_zeros=self.symbolic_zeros, name=name)
        return tree_util.tree_unflatten(out_tree, outs)


def _fwd_rule(cv, static_vals, nondiff, in_tree, out_tree, out_avals, in_avals, name):
    """The flat forward rule: (primal leaves, which are perturbed) -> (out leaves, residual
    leaves, backward rule)."""
    fwd_name = _name(cv.fwd)

    def fwd(primals, perturbed):
        if cv.symbolic_zeros:
            primals = [CustomVJPPrimal(p, d) for p, d in zip(primals, perturbed)]
        args = _merge(nondiff, static_vals, tree_util.tree_unflatten(in_tree, list(primals)))
        res = cv.fwd(*args)
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise TypeError(
                f"Custom VJP fwd rule {fwd_name} for function {name} must produce a pair (list or "
                "tuple of length two) where the first element represents the primal output "
                f"(equal to those of the custom_vjp-decorated function {name}) and the second "
                "element represents residuals (i.e. values stored from the forward pass for use "
                f"on the backward pass), but instead of a pair the fwd rule {fwd_name} produced "
                f"{res}.")
        outs = _check_primal_outs(res[0], out_tree, out_avals, f"Custom VJP fwd rule {fwd_name}",
                                  name)
        res_leaves, res_tree = tree_util.tree_flatten(res[1])
        for r in res_leaves:
            try:
                get_aval(r)
            except TypeError:
                raise TypeError(f"Custom VJP fwd rule {fwd_name} for function {name} produced a "
                                f"residual that is not an array: {r!r} (of type "
                                f"{type(r).__name__}). Residuals must be pytrees of arrays.") \
                    from None
        bwd = _Named(_bwd_rule(cv, static_vals, res_tree, out_tree, out_avals, in_tree, in_avals,
                               name), _name(cv.bwd))
        return outs, res_leaves, bwd

    return fwd


def _bwd_rule(cv, static_vals, res_tree, out_tree, out_avals, in_tree, in_avals, name):
    """The flat backward rule: (residual leaves, output cotangents with Zeros) -> input cts."""
    def bwd(res, cts):
        if cv.symbolic_zeros:
            cts = [SymbolicZero(c.aval) if type(c) is Zero else c for c in cts]
        else:
            cts = [_zeros(c.aval) if type(c) is Zero else c for c in cts]
        out = cv.bwd(*static_vals, tree_util.tree_unflatten(res_tree, list(res)),
                     tree_util.tree_unflatten(out_tree, cts))
        return _check_bwd_out(out, in_tree, in_avals)

    return bwd


def _check_bwd_out(out, in_tree, in_avals):
    """Flat input cotangents from ``bwd``'s output, checked against the primal arguments."""
    arg_trees = in_tree.children()  # (the arguments' tuple is not rebuilt from types)
    if isinstance(out, list):
        out = tuple(out)
    if not isinstance(out, tuple) or len(out) != len(arg_trees):
        got = tree_util.tree_structure(out)
        raise TypeError(
            "Custom VJP bwd rule must produce an output with the same container (pytree) "
            "structure as the args tuple of the primal function, and in particular must produce "
            "a tuple of length equal to the number of arguments to the primal function, but got "
            f"bwd output structure {got} for primal input structure {in_tree}.")
    flat, avals = [], iter(in_avals)
    for i, (ct, arg_tree) in enumerate(zip(out, arg_trees)):
        arg_avals = [next(avals) for _ in range(arg_tree.num_leaves)]
        if ct is None:
            flat.extend(Zero(tangent_aval(a)) for a in arg_avals)
            continue
        pairs, ct_tree = tree_util.tree_flatten_with_path(ct, is_leaf=lambda x: x is None)
        if ct_tree != arg_tree and tree_util.tree_structure(ct) != arg_tree:
            raise TypeError(
                "Custom VJP bwd rule must produce an output with the same container (pytree) "
                "structure as the args tuple of the primal function, and in particular must "
                "produce a tuple of length equal to the number of arguments to the primal "
                f"function, but got bwd output structure {tree_util.tree_structure(out)} for "
                f"primal input structure {in_tree}.")
        for (path, c), a in zip(pairs, arg_avals):
            flat.append(_check_ct(c, a, f"output[{i}]{tree_util.keystr(path)}"))
    return flat


def _check_ct(c, a, where):
    want = tangent_aval(a)
    if c is None or isinstance(c, SymbolicZero) or want.dtype == dtypes.float0:
        return Zero(want)
    got = get_aval(c)
    if got.shape != want.shape:
        raise ValueError(
            "Custom VJP bwd rule must produce an output with the same type as the args tuple of "
            f"the primal function, but at {where} the bwd rule produced an output of type "
            f"{got.str_short()} corresponding to an input of type {a.str_short()}, so the shapes "
            "do not match.")
    if got.dtype != want.dtype:
        c = lax.convert_element_type(c, want.dtype)
    return c


def _custom_vjp_call_jvp(primals, tangents, *, call_jaxpr, fwd, bwd, num_consts,
                         symbolic_zeros, name):
    _check_closure(tangents, num_consts, name, "custom_vjp")
    tans = tangents[num_consts:]
    nonzero = tuple(type(t) is not Zero for t in tans)
    outs, res, bwd_rule = fwd(list(primals[num_consts:]), nonzero)
    out_avals = tuple(tangent_aval(get_aval(o)) for o in outs)
    diff_out = tuple(a.dtype != dtypes.float0 for a in out_avals)
    lin_outs = iter(custom_lin_p.bind(*res, *[t for t in tans if type(t) is not Zero],
                                      num_res=len(res), bwd=bwd_rule, out_avals=out_avals,
                                      nonzero=nonzero, diff_out=diff_out))
    return outs, [next(lin_outs) if d else Zero(a) for a, d in zip(out_avals, diff_out)]


def _custom_lin_abstract(*avals, num_res, bwd, out_avals, nonzero, diff_out):
    return [a for a, d in zip(out_avals, diff_out) if d]


def _custom_lin_impl(*args, **params):
    raise TypeError(_JVP_OF_VJP)


def _custom_lin_lowering(ctx, *args, **params):
    raise TypeError(_JVP_OF_VJP)


def _custom_lin_jvp(primals, tangents, **params):
    raise TypeError(_JVP_OF_VJP)


def _custom_lin_transpose(cts, *args, num_res, bwd, out_avals, nonzero, diff_out):
    res = args[:num_res]
    it = iter(cts)
    # Outputs without tangents (integers) get (float0) zero cotangents.
    full = [next(it) if d else Zero(a) for a, d in zip(out_avals, diff_out)]
    in_cts = bwd(list(res), full)
    picked = [c for c, nz in zip(in_cts, nonzero) if nz]
    return [None] * num_res + [None if type(c) is Zero else c for c in picked]


abstract_eval_rules[custom_vjp_call_p] = _call_abstract
impl_rules[custom_vjp_call_p] = _call_impl
lowering_rules[custom_vjp_call_p] = _call_lowering
jvp_rules[custom_vjp_call_p] = _custom_vjp_call_jvp
partial_eval_rules[custom_vjp_call_p] = _inline
param_printers[custom_vjp_call_p] = lambda p: {
    "name": p["name"], "bwd": p["bwd"], "call_jaxpr": p["call_jaxpr"], "fwd": p["fwd"],
    **({"num_consts": p["num_consts"]} if p["num_consts"] else {}),
    "symbolic_zeros": p["symbolic_zeros"]}

abstract_eval_rules[custom_lin_p] = _custom_lin_abstract
impl_rules[custom_lin_p] = _custom_lin_impl
lowering_rules[custom_lin_p] = _custom_lin_lowering
jvp_rules[custom_lin_p] = _custom_lin_jvp
transpose_rules[custom_lin_p] = _custom_lin_transpose
param_printers[custom_lin_p] = lambda p: {"num_res": p["num_res"], "bwd": p["bwd"]}


# --- closure_convert -------------------------------------------------------------------------
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
                                   description=f"closure_convert({_name(fun)})")
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

    converted_fun.__name__ = _name(fun)
    return converted_fun, hoisted


# --- batching: the custom rules are batched along with the function --------------------------
# Mapped inputs move their batch to 0 and every output is batched at 0, so the custom rules'
# outputs line up with the function's whatever they leave unbatched.
def _front(vals, dims):
    return ([v if d is None else moveaxis(v, d, 0) for v, d in zip(vals, dims)],
            [None if d is None else 0 for d in dims])


def _per_example_zero(t, d):
    """A symbolic zero tangent/cotangent of a value batched at ``d`` (or unbatched)."""
    a = t.aval
    return Zero(a if d is None else a.update(shape=a.shape[1:]))


def _batch_with_zeros(fn, vals, dims, axis):
    """Batch ``fn(*vals) -> list`` where some inputs are symbolic ``Zero``s (passed through,
    per example) and some outputs may be ``Zero``s. Outputs come back batched at 0."""
    live = [type(v) is not Zero for v in vals]
    zeros_out = []

    def flat(*xs):
        it = iter(xs)
        full = [next(it) if lv else _per_example_zero(v, d) for v, d, lv in zip(vals, dims, live)]
        outs = fn(*full)
        zeros_out[:] = [o if type(o) is Zero else None for o in outs]
        return [o for o in outs if type(o) is not Zero]

    outs, out_dims = batch_flat(flat, [v for v, lv in zip(vals, live) if lv],
                                [d for d, lv in zip(dims, live) if lv], axis)
    it = iter(move_batch_dim(o, d, 0, axis.size) for o, d in zip(outs, out_dims))
    return [next(it) if z is None else Zero(batched_aval(z.aval, 0, axis.size))
            for z in zeros_out]


def _custom_jvp_call_batch(axis, vals, dims, *, call_jaxpr, jvp, num_consts, symbolic_zeros,
                           name):
    vals, dims = _front(vals, dims)
    n_out = len(call_jaxpr.out_avals)
    body, consts, _ = batch_jaxpr(call_jaxpr, axis, dims, description=name, out_dims=[0] * n_out)
    callee, _ = consts_as_inputs(ClosedJaxpr(body, consts))
    leaf_dims = dims[num_consts:]
    n = len(leaf_dims)

    def batched_jvp(primals, tangents):
        def per_example(*xs):
            outs, tans = jvp(list(xs[:n]), list(xs[n:]))
            return list(outs) + list(tans)
        res = _batch_with_zeros(per_example, list(primals) + list(tangents), leaf_dims * 2, axis)
        return res[:n_out], res[n_out:]

    outs = custom_jvp_call_p.bind(*consts, *vals, call_jaxpr=callee,
                                  jvp=_Named(batched_jvp, repr(jvp)),
                                  num_consts=len(consts) + num_consts,
                                  symbolic_zeros=symbolic_zeros, name=name)
    return outs, [0] * n_out


def _custom_vjp_call_batch(axis, vals, dims, *, call_jaxpr, fwd, bwd, num_consts, symbolic_zeros,
                           name):
    vals, dims = _front(vals, dims)
    n_out = len(call_jaxpr.out_avals)
    body, consts, _ = batch_jaxpr(call_jaxpr, axis, dims, description=name, out_dims=[0] * n_out)
    callee, _ = consts_as_inputs(ClosedJaxpr(body, consts))
    leaf_dims = dims[num_consts:]

    def batched_fwd(primals, perturbed):
        box = {}

        def per_example(*ps):
            outs, res, bwd_rule = fwd(list(ps), perturbed)
            box["bwd"], box["n_res"] = bwd_rule, len(res)
            return list(outs) + list(res)

        got, got_dims = batch_flat(per_example, list(primals), leaf_dims, axis)
        outs = [move_batch_dim(o, d, 0, axis.size) for o, d in zip(got[:n_out], got_dims[:n_out])]
        res, res_dims = got[n_out:], got_dims[n_out:]
        return outs, res, _Named(_batched_bwd(box["bwd"], res_dims, leaf_dims, axis), repr(bwd))

    outs = custom_vjp_call_p.bind(*consts, *vals, call_jaxpr=callee,
                                  fwd=_Named(batched_fwd, repr(fwd)), bwd=bwd,
                                  num_consts=len(consts) + num_consts,
                                  symbolic_zeros=symbolic_zeros, name=name)
    return outs, [0] * n_out


def _batched_bwd(bwd_rule, res_dims, leaf_dims, axis):
    """The backward rule run per example; cotangents of unbatched inputs sum over the batch."""

    def bwd(res, cts):
        n_res = len(res)
        in_cts = _batch_with_zeros(lambda *xs: bwd_rule(list(xs[:n_res]), list(xs[n_res:])),
                                   list(res) + list(cts), list(res_dims) + [0] * len(cts), axis)
        out = []
        for c, d in zip(in_cts, leaf_dims):
            if d is None:
                c = Zero(c.aval.update(shape=c.aval.shape[1:])) if type(c) is Zero else \
                    lax.reduce_sum(c, (0,))
            out.append(c)
        return out
    return bwd


def _custom_lin_batch(axis, vals, dims, *, num_res, bwd, out_avals, nonzero, diff_out):
    """The linear part of a custom_vjp function, for batched residuals or tangents."""
    vals, dims = _front(vals, dims)
    tan_dims = iter(dims[num_res:])
    # Cotangents come back for every primal input; those without a tangent are dropped.
    in_dims = [next(tan_dims) if nz else None for nz in nonzero]
    batched = tuple(batched_aval(a, 0, axis.size) for a in out_avals)
    outs = custom_lin_p.bind(*vals, num_res=num_res,
                             bwd=_Named(_batched_bwd(bwd, dims[:num_res], in_dims, axis),
                                        repr(bwd)),
                             out_avals=batched, nonzero=nonzero, diff_out=diff_out)
    return outs, [0] * len(outs)


batch_rules[custom_jvp_call_p] = _custom_jvp_call_batch
batch_rules[custom_vjp_call_p] = _custom_vjp_call_batch
batch_rules[custom_lin_p] = _custom_lin_batch
