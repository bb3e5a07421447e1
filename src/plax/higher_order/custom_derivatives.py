"""User-defined derivatives: ``custom_jvp`` and ``custom_vjp`` (``closure_convert``, which
makes their closed-over values explicit, is in ``closure_convert.py``).

Calling a decorated function binds a higher-order primitive, ``custom_jvp_call``
or ``custom_vjp_call``, first with the user's Python functions (as JAX does), so
that each trace decides what runs (``_bind_functions``):

- eager evaluation calls the function on the concrete values;
- a JVP trace calls the user's rule (jvp, or fwd then ``custom_lin``) on its
  primals and tangents, never the function; under eager ``grad`` those primals
  are concrete, so both may branch on them with Python ``if``;
- a batch trace binds again below itself with batched versions of the function
  and the rules (arguments the vmap does not map stay plain values;
  ``custom_derivatives_batching.py``);
- partial evaluation with unknown inputs (building a linear function) inlines
  the function: its rule is no longer needed;
- any staging trace (jit, make_jaxpr, checkpoint, loop bodies, checkify) traces
  the function to a jaxpr, and binds the primitive in its staged form holding
  ``call_jaxpr``. Equations always hold that form; its rules are registered in
  the tables as for any primitive.

In the staged form the jaxpr takes the values the function closes over as
leading arguments (``num_consts``); if one of them is being differentiated, the
rule would miss its tangent, so that raises (use ``closure_convert``). While a
rule runs for a JVP trace, that trace is sealed, so a rule (or function) that
closes over one of its values raises the same error.

The staged ``custom_jvp_call`` evaluates and lowers like its jaxpr; its JVP rule
calls the user's jvp function, so differentiating it (to any order)
differentiates the user's rule. ``custom_vjp_call`` likewise; its JVP rule runs
the user's ``fwd`` and emits ``custom_lin``, a linear primitive of the residuals
and the input tangents whose transpose calls the user's ``bwd``. ``custom_lin``
cannot be evaluated, which is why forward mode of a custom_vjp function is an error.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from plax import tree_util
from plax.core import dtypes, errors
from plax.core.avals import ShapedArray
from plax.core.dce import dce_closed, jaxpr_has_effects
from plax.core.effects import (check_allowed, custom_derivatives_allowed_effects,
                               jaxpr_effects)
from plax.core.jaxpr import ClosedJaxpr, call_out_avals, consts_as_inputs, eval_jaxpr
from plax.core.primitive import NamedCallable, Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, dce_rules, impl_rules,
                             jvp_rules, lowering_rules, param_printers, partial_eval_rules,
                             tangent_aval, transpose_rules, transposed_on_zero_cotangents)
from plax.core.source_info import flat_arg_names, fun_name
from plax.core.hi_types import hi_value_types
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import EvalTrace, Tracer, current_trace, get_aval, set_current_trace
from plax.first_order import arithmetic as _arithmetic
from plax.first_order import conversion as _conversion
from plax.first_order.ad_util import zeros_like_aval
from plax.higher_order import custom_derivatives_batching as _batching
from plax.higher_order import ref_effects
from plax.higher_order.remat_opt import remat_opt_fwd
from plax.lowering.consts import const_operands
from plax.lowering.stablehlo import lower_jaxpr_body
from plax.runtime.dispatch import array_from_host
from plax.transforms.jvp import JVPTrace, JVPTracer
from plax.transforms.linearize import PartialEvalTrace
from plax.transforms.vmap import BatchTrace
from plax.core.tracebacks import api_boundary

__all__ = ["custom_jvp", "custom_vjp", "SymbolicZero", "CustomVJPPrimal"]


class SymbolicZero:
    """A zero tangent or cotangent passed to rules defined with ``symbolic_zeros=True``."""

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)

    def __repr__(self):
        return f"SymbolicZero({self.aval.str_short()})"


def zero_from_primal(val, symbolic_zeros: bool = False):
    """Zero tangents for the primal pytree ``val``: arrays of zeros (float0 for integers),
    or ``SymbolicZero``s with ``symbolic_zeros``."""
    def zero(x):
        aval = tangent_aval(get_aval(x))
        return SymbolicZero(aval) if symbolic_zeros else _zeros(aval)
    return tree_util.tree_map(zero, val)


class CustomVJPPrimal:
    """A primal passed to a ``symbolic_zeros=True`` fwd rule: its value and whether it is
    being differentiated."""

    __slots__ = ("value", "perturbed")

    def __init__(self, value, perturbed: bool):
        self.value = value
        self.perturbed = perturbed

    def __repr__(self):
        return f"CustomVJPPrimal(value={self.value!r}, perturbed={self.perturbed})"


def custom_vjp_primal_tree_values(tree):
    """``tree`` with each ``CustomVJPPrimal`` (what a ``symbolic_zeros`` fwd rule receives)
    replaced by its value."""
    return tree_util.tree_map(lambda x: x.value if isinstance(x, CustomVJPPrimal) else x, tree,
                              is_leaf=lambda x: isinstance(x, CustomVJPPrimal))


class ClosedOverTracerError(TypeError, errors.UnexpectedTracerError):
    """A custom function or rule closes over a value being differentiated, whose tangent its
    rule cannot see (a TypeError, and the UnexpectedTracerError JAX raises there)."""


# --- shared plumbing -----------------------------------------------------------------------
def _nondiff_positions(fun, nondiff_argnums, nondiff_argnames) -> tuple:
    """``nondiff_argnums`` joined with the positions of the parameters ``nondiff_argnames``
    names (names of no positional parameter add nothing, as in JAX)."""
    nums = {*nondiff_argnums}
    names = (nondiff_argnames,) if isinstance(nondiff_argnames, str) else tuple(nondiff_argnames)
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"nondiff_argnames must be strings, got {n!r}.")
    if names:
        try:
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):
            raise TypeError(f"nondiff_argnames={names} needs the signature of {fun_name(fun)}, "
                            "which inspect cannot read; use nondiff_argnums.") from None
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        nums.update(i for i, p in enumerate(positional)
                    if p.name in names and p.kind == p.POSITIONAL_OR_KEYWORD)
    return tuple(sorted(nums))


def _signature(fun):
    """The signature arguments are bound with (None: opaque, as for functools.partial)."""
    if isinstance(fun, functools.partial):
        return None
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return None


def _resolve_args(fun, sig, args, kwargs, kind):
    """Positional arguments for ``fun(*args, **kwargs)``, defaults filled in (rules take
    arguments by position, and ``nondiff_argnums`` may name a defaulted one)."""
    if sig is None and not kwargs:
        return tuple(args)
    problem = None
    if sig is None:
        problem = f"its signature is not known, so pass {sorted(kwargs)} positionally"
    else:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            problem = f"binding failed with the error: {e}"
        else:
            bound.apply_defaults()
            passed = [k for k in bound.kwargs if k in kwargs]
            if not passed:
                return tuple(bound.args)
            problem = ("the following keyword arguments could not be resolved to positions: "
                       f"{', '.join(passed)}; pass them positionally")
    raise TypeError(f"The input arguments to the {kind}-decorated function {fun_name(fun)} could "
                    f"not be resolved to positional-only arguments: {problem}.")


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


def _stopped(x):
    """A ``nondiff_argnums`` value as custom_jvp's rule gets it: no tangent flows through it
    (JAX stops its gradient), so where a JVP trace carries it, it is its primal."""
    leaves, tree = tree_util.tree_flatten(x)
    if not any(isinstance(v, Tracer) for v in leaves):
        return x

    def stop(v):
        if not isinstance(v, Tracer):
            return v
        v = _conversion.stop_gradient(v)
        while isinstance(v, JVPTracer) and type(v.tangent) is Zero:
            v = v.primal
        return v
    return tree.unflatten([stop(v) for v in leaves])


def _check_no_tracers(static_vals, name):
    """custom_vjp's ``nondiff_argnums`` values may not be traced (as in JAX)."""
    for v in tree_util.tree_leaves(static_vals):
        if isinstance(v, Tracer):
            raise errors.UnexpectedTracerError(
                "Found a JAX Tracer object passed as an argument to a custom_vjp function in a "
                f"position indicated by nondiff_argnums as non-differentiable ({name} got "
                f"{v!r}). A traced value cannot be a non-differentiable argument of a "
                "custom_vjp function: keep nondiff_argnums for values that are never traced "
                "(functions, Python settings) and pass arrays as differentiable arguments.")


class _OutType:
    """The output structure of one call: ``tree`` from whichever of the function or its rule
    ran first, ``avals`` (per example) once the function itself has run; the rules check
    their primal outputs against these."""

    __slots__ = ("tree", "avals")

    def __init__(self):
        self.tree = None
        self.avals = None


def _flat_fun(fun, nondiff, static_vals, in_tree, out: _OutType):
    """``fun`` on flat differentiable leaves, returning flat output leaves."""
    def flat(*xs):
        res = fun(*_merge(nondiff, static_vals, tree_util.tree_unflatten(in_tree, list(xs))))
        leaves, out.tree = tree_util.tree_flatten(res)
        for x in leaves:
            if ref_effects.is_reference(x):
                raise ValueError(f"custom_vjp primal function {fun_name(fun)} returned a "
                                 f"mutable array reference of type {x.aval} that was not an "
                                 "argument.")
        out.avals = [get_aval(x) for x in leaves]
        return leaves
    return flat


def _call_abstract(*avals, call_jaxpr, name, **_):
    return call_out_avals(name, call_jaxpr, avals)


def _call_impl(*args, call_jaxpr, **_):
    return eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *args)


def _call_lowering(ctx, *args, call_jaxpr, **_):
    return lower_jaxpr_body(ctx.fn, call_jaxpr.jaxpr, [*const_operands(ctx, call_jaxpr), *args])


def _inline(trace, args, params):
    """Partial evaluation (building a linear function) no longer needs the custom rule: the
    function runs (or its staged jaxpr) on the partially known values."""
    if "fun" in params:
        return params["fun"](*args)
    return trace.eval_jaxpr(params["call_jaxpr"], args)


def _closure_message(name, kind):
    return (f"The {kind} function {name} (or its rule) closes over a value that is being "
            "differentiated; its custom rule cannot account for that value's tangent. Pass it "
            "as an argument, or use plax.closure_convert to turn the closed-over values into "
            "arguments.")


def _check_closure(tangents, num_consts, name, kind):
    if any(type(t) is not Zero for t in tangents[:num_consts]):
        raise ClosedOverTracerError(_closure_message(name, kind))


def _check_primal_outs(outs, out: _OutType, what, name):
    """The flat primal outputs of a rule, checked against the function's (once it has run)."""
    leaves, tree = tree_util.tree_flatten(outs)
    if out.tree is None:
        out.tree = tree
    elif tree != out.tree:
        raise TypeError(f"{what} must produce primal outputs with equal container (pytree) "
                        f"structures as the function {name}, but got {tree} and {out.tree} "
                        "respectively.")
    for i, x in enumerate(leaves):
        got = get_aval(x)  # (also: every output is an array)
        want = got if out.avals is None else out.avals[i]
        if got.shape != want.shape or got.dtype != want.dtype:
            raise TypeError(f"{what} must produce primal outputs with the same shapes and dtypes "
                            f"as the function {name}, but output {i} has type {got.str_short()} "
                            f"where {name} gives {want.str_short()}.")
    return leaves


# --- binding the user's functions: each trace decides what runs ------------------------------
class _CustomCallPrimitive(Primitive):
    """``custom_jvp_call`` / ``custom_vjp_call``: bound with the user's functions (``fun=``)
    until a trace needs a jaxpr, then in the staged form (``call_jaxpr=``)."""

    def bind(self, *args, **params):
        if "subfuns" in params:
            params = _from_subfuns(params)
        if "fun" not in params:
            return super().bind(*args, **params)
        return _bind_functions(self, current_trace(), args, params)

    def get_bind_params(self, params):
        """custom_jvp_call's as JAX's: the function and its JVP rule as ``subfuns``
        (WrappedFuns: ``fun(*args)``, ``jvp(*primals, *tangents)`` giving outputs then
        tangents; constants are leading arguments)."""
        if self is not custom_jvp_call_p or "call_jaxpr" not in params:
            return dict(params)
        from plax.core.debug_info import DebugInfo
        from plax.extend.linear_util import wrap_init
        rest = dict(params)
        call, n, rule = rest.pop("call_jaxpr"), rest.pop("num_consts"), rest.pop("jvp")

        def jvp(*xs):
            half = len(xs) // 2
            outs, tans = rule(list(xs[n:half]), list(xs[half + n:]))
            return [*outs, *tans]
        info = DebugInfo("custom_jvp_call", str(rest.get("name", "fun")), None, None)
        rest["subfuns"] = (wrap_init(lambda *a: eval_jaxpr(call.jaxpr, call.consts, *a),
                                     debug_info=info), wrap_init(jvp, debug_info=info))
        return rest


def _from_subfuns(params):
    """custom_jvp_call's params with JAX's ``subfuns`` as plax's bound-function form."""
    rest = dict(params)
    fun, jvp = rest.pop("subfuns")

    def rule(primals, tangents):
        out = jvp.call_wrapped(*primals, *tangents)
        half = len(out) // 2
        return list(out[:half]), list(out[half:])
    return dict(rest, fun=lambda *a: fun.call_wrapped(*a), jvp=rule)


def _bind_functions(prim, trace, args, params):
    """``prim`` bound with the user's functions, as ``trace`` handles it (see the module doc)."""
    if isinstance(trace, EvalTrace) and not any(isinstance(a, Tracer) for a in args):
        return params["fun"](*args)
    if isinstance(trace, JVPTrace):
        return _jvp_functions(prim, trace, args, params)
    if isinstance(trace, PartialEvalTrace):
        return trace.process_primitive(prim, args, params)  # (known: bound below; else _inline)
    if isinstance(trace, BatchTrace):
        return _batching.batch_functions(prim, trace, args, params)
    return _bind_staged(prim, args, params)


def _bind_staged(prim, args, params):
    """Trace the function to a jaxpr and bind the staged form (for every staging trace)."""
    staged = dict(params)
    fun = staged.pop("fun")
    avals = [get_aval(a) for a in args]
    # References the function reads are constants of its jaxpr (closed-over values, which
    # the custom rule does not differentiate); writing one is refused, as in JAX.
    jaxpr, consts = ref_effects.trace_reading_refs(
        fun, lambda f: trace_to_jaxpr(f, avals, description=params["name"]),
        writes_refused=NotImplementedError(
            f"No state discharge rule implemented for primitive: {prim.name} (the function "
            f"{params['name']} writes a mutable array reference it closes over while being "
            "staged: under jit, write the reference outside the custom_jvp/custom_vjp "
            "function, or return the new value)."))
    check_allowed(jaxpr_effects(jaxpr), custom_derivatives_allowed_effects,
                  f"in `{prim.name.removesuffix('_call')}`")
    # Closed-over values become leading arguments, so enclosing traces see them as inputs.
    call, consts = consts_as_inputs(ClosedJaxpr(jaxpr, consts))
    return Primitive.bind(prim, *consts, *args, call_jaxpr=call, num_consts=len(consts),
                          **staged)


class _sealed:
    """While the user's code runs for the JVP trace ``trace`` (in its parent), the trace's
    own values may not be used: one reached there was closed over, and its tangent would be
    lost. Marking the trace finished makes any use raise; that becomes the closure error."""

    __slots__ = ("trace", "name", "kind", "was_alive")

    def __init__(self, trace, name, kind):
        self.trace, self.name, self.kind = trace, name, kind

    def __enter__(self):
        self.was_alive, self.trace.alive = self.trace.alive, False

    def __exit__(self, typ, exc, tb):
        self.trace.alive = self.was_alive
        if typ is not None and issubclass(typ, errors.UnexpectedTracerError) \
                and not isinstance(exc, ClosedOverTracerError):
            raise ClosedOverTracerError(_closure_message(self.name, self.kind)) from exc
        return False


def _jvp_functions(prim, trace, args, params):
    primals, tangents = zip(*(trace.to_primal_tangent(x) for x in args)) if args else ((), ())
    kind = "custom_jvp" if prim is custom_jvp_call_p else "custom_vjp"
    with _sealed(trace, params["name"], kind), set_current_trace(trace.parent):
        if all(type(t) is Zero for t in tangents):
            outs = prim.bind(*primals, **params)
            tans = [Zero(tangent_aval(get_aval(o))) for o in outs]
        elif prim is custom_jvp_call_p:
            outs, tans = params["jvp"](list(primals), list(tangents))
        else:
            outs, tans = jvp_by_fwd(params["fwd"], list(primals), list(tangents))
    return [trace.new(o, t) for o, t in zip(outs, tans)]


# --- custom_jvp ----------------------------------------------------------------------------
custom_jvp_call_p = _CustomCallPrimitive("custom_jvp_call", multiple_results=True)


class custom_jvp:
    """A function with a custom JVP rule (``defjvp``), used by every differentiation mode.

    The rule takes ``(primals, tangents)`` (after any ``nondiff_argnums`` values) and returns
    ``(primal_out, tangent_out)``; its tangent output must be linear in the tangents.
    ``nondiff_argnames`` names non-differentiable parameters as ``nondiff_argnums`` numbers
    them. Outside staging (jit, make_jaxpr, ...) the function and the rule run on concrete
    values, so they may use Python control flow on them.
    """

    def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff_positions(fun, nondiff_argnums, nondiff_argnames)
        self.jvp = None
        self.symbolic_zeros = False
        self._sig = _signature(fun)

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

        jvp.__name__ = f"{fun_name(self.fun)}_jvps"
        jvp.tangents_per_argument = True
        self.defjvp(jvp, symbolic_zeros=True)

    @api_boundary
    def __call__(self, *args, **kwargs):
        name = fun_name(self.fun)
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using defjvp.")
        args = _resolve_args(self.fun, self._sig, args, kwargs, "custom_jvp")
        nondiff = _check_nondiff(self.nondiff_argnums, len(args), name)
        static_vals, dyn = _split(args, nondiff)
        static_vals = [_stopped(v) for v in static_vals]
        leaves, in_tree = tree_util.tree_flatten(dyn)
        out = _OutType()
        fun = NamedCallable(_flat_fun(self.fun, nondiff, static_vals, in_tree, out), name)
        rule = NamedCallable(
            _jvp_rule(self.jvp, self.symbolic_zeros, static_vals, in_tree, out, name),
            fun_name(self.jvp))
        outs = custom_jvp_call_p.bind(*leaves, fun=fun, jvp=rule,
                                      symbolic_zeros=self.symbolic_zeros, name=name)
        return tree_util.tree_unflatten(out.tree, outs)


def _add(a, b):
    return _arithmetic.add(a, b)


def _jvp_rule(user_jvp, symbolic_zeros, static_vals, in_tree, out, name):
    """The flat rule: (primal leaves, tangent leaves with Zeros) -> (out leaves, tangents)."""
    rule_name = fun_name(user_jvp)
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
        p_leaves = _check_primal_outs(p_out, out, f"Custom JVP rule {rule_name}", name)
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
custom_vjp_call_p = _CustomCallPrimitive("custom_vjp_call", multiple_results=True)
custom_lin_p = Primitive("custom_lin", multiple_results=True)

_JVP_OF_VJP = "can't apply forward-mode autodiff (jvp) to a custom_vjp function."


class custom_vjp:
    """A function with a custom reverse-mode rule: ``defvjp(fwd, bwd)``.

    ``fwd(*args) -> (out, residuals)`` (residuals: any pytree of arrays);
    ``bwd(*nondiff_args, residuals, out_cotangent)`` returns one cotangent per
    differentiable argument, as a tuple. ``nondiff_argnames`` names non-differentiable
    parameters as ``nondiff_argnums`` numbers them. Outside staging, the function, ``fwd``
    and ``bwd`` run on concrete values.
    """

    def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff_positions(fun, nondiff_argnums, nondiff_argnames)
        self.fwd = None
        self.bwd = None
        self.symbolic_zeros = False
        self.optimize_remat = False
        self._sig = _signature(fun)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def defvjp(self, fwd, bwd, symbolic_zeros: bool = False, optimize_remat: bool = False):
        """Set the forward (``fwd``) and backward (``bwd``) rules. With ``optimize_remat``,
        a rematerialised forward pass whose residuals go unused runs the function instead
        of ``fwd`` (``remat_opt``)."""
        if symbolic_zeros and optimize_remat:
            raise NotImplementedError("remat optimization for custom_vjp does not support "
                                      "symbolic zeros")
        self.fwd, self.bwd, self.symbolic_zeros = fwd, bwd, symbolic_zeros
        self.optimize_remat = optimize_remat

    @api_boundary
    def __call__(self, *args, **kwargs):
        name = fun_name(self.fun)
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using defvjp.")
        args = _resolve_args(self.fun, self._sig, args, kwargs, "custom_vjp")
        nondiff = _check_nondiff(self.nondiff_argnums, len(args), name)
        static_vals, dyn = _split(args, nondiff)
        _check_no_tracers(static_vals, name)
        leaves, in_tree = tree_util.tree_flatten(dyn)
        if hi_value_types:
            _refuse_aliased_references(self.fun, args, nondiff, leaves, name)
        out = _OutType()
        fun = NamedCallable(_flat_fun(self.fun, nondiff, static_vals, in_tree, out), name)
        # The rules, not ``self``: a trace cache keyed by ``self`` would hold it forever.
        fwd = NamedCallable(_fwd_rule(self.fwd, self.bwd, self.symbolic_zeros, static_vals,
                                      nondiff, in_tree, out, [get_aval(x) for x in leaves], name,
                                      fun if self.optimize_remat else None),
                     fun_name(self.fwd))
        outs = custom_vjp_call_p.bind(*leaves, fun=fun, fwd=fwd,
                                      bwd=NamedCallable(None, fun_name(self.bwd)),
                                      symbolic_zeros=self.symbolic_zeros, name=name)
        return tree_util.tree_unflatten(out.tree, outs)


def _refuse_aliased_references(fun, args, nondiff, leaves, name) -> None:
    """JAX's error for one reference given twice to a custom_vjp function."""
    found = ref_effects.aliased_reference(leaves)
    if found is not None:
        x, i, j = found
        names = flat_arg_names(fun, args, {}, set(nondiff))
        raise ValueError(
            "only one reference to a mutable array may be passed as an argument to a "
            f"function, but custom_vjp function {name} got the same mutable array "
            f"reference of type {x.aval} at {ref_effects.leaf_name(names, i)} and "
            f"{ref_effects.leaf_name(names, j)}.")


def _fwd_rule(user_fwd, user_bwd, symbolic_zeros, static_vals, nondiff, in_tree, out, in_avals,
              name, remat_fun=None):
    """The flat forward rule: (primal leaves, which are perturbed) -> (out leaves, residual
    leaves, backward rule). With ``remat_fun`` (the flat primal function: optimize_remat),
    ``fwd`` runs as a ``remat_opt`` equation."""
    fwd_name = fun_name(user_fwd)

    def fwd(primals, perturbed):
        if symbolic_zeros:
            primals = [CustomVJPPrimal(p, d) for p, d in zip(primals, perturbed)]
        if remat_fun is None:
            outs, res_leaves, res_tree = run(primals)
        else:
            box = []

            def fwd_flat(*ps):
                o, r, t = run(list(ps))
                box[:] = [t]
                return o, r

            outs, res_leaves = remat_opt_fwd(fwd_flat, remat_fun, list(primals), name)
            res_tree = box[0]
        bwd = NamedCallable(_bwd_rule(user_bwd, symbolic_zeros, static_vals, res_tree, out.tree,
                                      in_tree, in_avals), fun_name(user_bwd))
        return outs, res_leaves, bwd

    def run(primals):
        args = _merge(nondiff, static_vals, tree_util.tree_unflatten(in_tree, list(primals)))
        res = user_fwd(*args)
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise TypeError(
                f"Custom VJP fwd rule {fwd_name} for function {name} must produce a pair (list or "
                "tuple of length two) where the first element represents the primal output "
                f"(equal to those of the custom_vjp-decorated function {name}) and the second "
                "element represents residuals (i.e. values stored from the forward pass for use "
                f"on the backward pass), but instead of a pair the fwd rule {fwd_name} produced "
                f"{res}.")
        outs = _check_primal_outs(res[0], out, f"Custom VJP fwd rule {fwd_name}", name)
        res_leaves, res_tree = tree_util.tree_flatten(res[1])
        if hi_value_types:
            for path, r in tree_util.tree_flatten_with_path(res)[0]:
                if ref_effects.is_reference(r) and not any(r is p for p in primals):
                    raise ValueError(
                        f"custom_vjp fwd function {fwd_name} returned a mutable array "
                        f"reference of type {r.aval} at output tree path "
                        f"{tree_util.keystr(path)} that was not an argument.")
        for r in res_leaves:
            try:
                get_aval(r)
            except TypeError:
                raise TypeError(f"Custom VJP fwd rule {fwd_name} for function {name} produced a "
                                f"residual that is not an array: {r!r} (of type "
                                f"{type(r).__name__}). Residuals must be pytrees of arrays.") \
                    from None
        return outs, res_leaves, res_tree

    return fwd


def _bwd_rule(user_bwd, symbolic_zeros, static_vals, res_tree, out_tree, in_tree, in_avals):
    """The flat backward rule: (residual leaves, output cotangents with Zeros) -> input cts."""
    def bwd(res, cts):
        if symbolic_zeros:
            cts = [SymbolicZero(c.aval) if type(c) is Zero else c for c in cts]
        else:
            cts = [_zeros(c.aval) if type(c) is Zero else c for c in cts]
        # grad's seed may be a host scalar; the user's rule sees Arrays, as in JAX.
        cts = [c if isinstance(c, (Tracer, SymbolicZero)) or hasattr(c, "aval")
               or np.result_type(c) == dtypes.float0 else array_from_host(c) for c in cts]
        out = user_bwd(*static_vals, tree_util.tree_unflatten(res_tree, list(res)),
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
        if tree_util.tree_structure(ct) == arg_tree:  # None only where the argument has None
            pairs = [(f"output[{i}]{tree_util.keystr(path)}", c)
                     for path, c in tree_util.tree_flatten_with_path(ct)[0]]
        else:  # a None standing for the zero cotangent of a whole subtree
            try:
                leaves = tree_util.broadcast_prefix_to_treedef(ct, arg_tree,
                                                               is_leaf=lambda x: x is None)
            except ValueError:
                raise TypeError(
                    "Custom VJP bwd rule must produce an output with the same container "
                    "(pytree) structure as the args tuple of the primal function, and in "
                    "particular must produce a tuple of length equal to the number of arguments "
                    "to the primal function, but got bwd output structure "
                    f"{tree_util.tree_structure(out)} for primal input structure {in_tree}."
                ) from None
            pairs = [(f"output[{i}], leaf {j}", c) for j, c in enumerate(leaves)]
        for (where, c), a in zip(pairs, arg_avals):
            flat.append(_check_ct(c, a, where))
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
    # A cotangent of an extended dtype passes as it is (as in JAX): a user's dtype whose rules
    # accumulate cotangents their own way (e.g. by max) may stand in for a float's.
    if got.dtype != want.dtype and not dtypes.is_extended(got.dtype):
        c = _conversion.convert_element_type(c, want.dtype)
    return c


def _custom_vjp_call_jvp(primals, tangents, *, call_jaxpr, fwd, bwd, num_consts,
                         symbolic_zeros, name):
    _check_closure(tangents, num_consts, name, "custom_vjp")
    return jvp_by_fwd(fwd, primals[num_consts:], tangents[num_consts:])


def jvp_by_fwd(fwd, primals, tans):
    """Outputs and output tangents from the flat ``fwd`` rule and ``custom_lin``."""
    nonzero = tuple(type(t) is not Zero for t in tans)
    outs, res, bwd_rule = fwd(list(primals), nonzero)
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
transposed_on_zero_cotangents.add(custom_lin_p)
param_printers[custom_lin_p] = lambda p: {"num_res": p["num_res"], "bwd": p["bwd"]}


# --- dead code: unused outputs pruned from the function and from its rules ------------------
# Every input stays, as in JAX: the rule may read one the pruned function does not. The rule
# still computes the dropped outputs; staged, that work is dead and pruned in turn.
def _dce_with(prune_rules):
    """The DCE rule of a custom call whose rules ``prune_rules(params, used_outputs)``
    (a dict of new rule params) narrows to the used outputs."""
    def dce(used_outputs, eqn):
        call = eqn.params["call_jaxpr"]
        if not any(used_outputs) and not jaxpr_has_effects(call):
            return [False] * len(eqn.invars), None
        if all(used_outputs):
            return [True] * len(eqn.invars), eqn
        used = [bool(u) for u in used_outputs]
        pruned, _ = dce_closed(call, used, instantiate=True)
        return [True] * len(eqn.invars), eqn.replace(
            outvars=[v for v, u in zip(eqn.outvars, used) if u],
            params=dict(eqn.params, call_jaxpr=pruned, **prune_rules(eqn.params, used)))
    return dce


def _jvp_of_used(params, used):
    """The jvp rule returning the used outputs and their tangents."""
    jvp = params["jvp"]

    def rule(primals, tangents):
        outs, tans = jvp(primals, tangents)
        return [o for o, u in zip(outs, used) if u], [t for t, u in zip(tans, used) if u]
    return {"jvp": NamedCallable(rule, repr(jvp))}


def _fwd_of_used(params, used):
    """The fwd rule returning the used outputs (and every residual); its backward rule
    gets zero cotangents for the dropped outputs."""
    fwd, out_avals = params["fwd"], params["call_jaxpr"].out_avals

    def rule(primals, perturbed):
        outs, res, bwd = fwd(primals, perturbed)

        def bwd_of_used(res, cts):
            it = iter(cts)
            return bwd(res, [next(it) if u else Zero(tangent_aval(a))
                             for a, u in zip(out_avals, used)])
        return [o for o, u in zip(outs, used) if u], res, NamedCallable(bwd_of_used, repr(bwd))
    return {"fwd": NamedCallable(rule, repr(fwd))}


dce_rules[custom_jvp_call_p] = _dce_with(_jvp_of_used)
dce_rules[custom_vjp_call_p] = _dce_with(_fwd_of_used)

batch_rules[custom_jvp_call_p] = _batching.staged_jvp_call_rule(custom_jvp_call_p)
batch_rules[custom_vjp_call_p] = _batching.staged_vjp_call_rule(custom_vjp_call_p)
batch_rules[custom_lin_p] = _batching.custom_lin_rule(custom_lin_p)
