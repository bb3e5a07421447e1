"""Calling an Exported: ``call_exported_p``, one equation running the exported module.

Its lowering splices the module's functions into the module being written and calls its
``@main`` (a shape-polymorphic module is first refined to the operands' static shapes by
jaxlib's shape refinement, so XLA only ever sees static shapes). Differentiation goes
through the VJPs the Exported carries (a ``custom_vjp``, as in JAX); ``vmap`` runs the
module once per batch element in a loop (``lax.map``), since its body cannot be batched.
"""
from __future__ import annotations

import numpy as np

from plax import tree_util
from plax.core.avals import ShapedArray
from plax.core.dtypes import issubdtype
from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, batch_rules, impl_rules, jvp_rules,
                             not_mapped, register_lowering)
from plax.core.symbolic_shapes import evaluate_shape, is_symbolic_dim, shape_is_symbolic
from plax.core.trace import get_aval
from plax.export import shape_checks
from plax.higher_order.custom_derivatives import custom_vjp
from plax.lowering.stablehlo import tensor_type
from plax.runtime import dispatch

call_exported_p = Primitive("call_exported", multiple_results=True)


# --- checking a call against what was exported ---------------------------------------------
def _leaf_names(tree, n: int) -> list:
    """``args[0]``, ``kwargs['y']``... for the leaves of an ``(args, kwargs)`` structure."""
    try:
        paths = [p for p, _ in tree_util.tree_flatten_with_path(
            tree_util.tree_unflatten(tree, list(range(n))))[0]]
    except Exception:
        return [f"leaf {i}" for i in range(n)]
    names = []
    for path in paths:
        head = "args" if getattr(path[0], "idx", 0) == 0 else "kwargs"
        names.append(head + tree_util.keystr(tuple(path[1:])))
    return names


class _LazyNames:
    """The leaves' names (``args[0]``...), computed on first use."""

    def __init__(self, tree, n: int):
        self._tree, self._n, self._names = tree, n, None

    def __getitem__(self, i):
        if self._names is None:
            self._names = _leaf_names(self._tree, self._n)
        return self._names[i]

    def __iter__(self):
        return (self[i] for i in range(self._n))


def check_call(exp, leaves, tree) -> tuple:
    """The argument types of a call (raising JAX's errors where the call does not fit the
    exported function) and the values of the symbolic dimensions."""
    if tree != exp.in_tree:
        raise ValueError(
            "The invocation args and kwargs must have the same pytree structure as when the "
            f"function '{exp.fun_name}' was exported, but they have the following structural "
            f"differences: exported with {exp.in_tree}, called with {tree}.")
    avals = [get_aval(x) for x in leaves]
    names = _LazyNames(tree, len(leaves))  # built only for an error message
    for i, (got, want) in enumerate(zip(avals, exp.in_avals)):
        if got.dtype == want.dtype and len(got.shape) == len(want.shape):
            continue
        name = names[i]
        if got.dtype != want.dtype:
            raise ValueError(f"Dtype mismatch for {name}: expected {want.dtype} and called "
                             f"with {got.dtype}")
        if len(got.shape) != len(want.shape):
            raise ValueError(f"Rank mismatch for {name}: expected {tuple(want.shape)} and "
                             f"called with {tuple(got.shape)}")
    return avals, dim_values(exp, avals, names)


def dim_values(exp, avals, names=None) -> dict:
    """The values of ``exp``'s dimension variables for a call with argument types ``avals``
    (ints, or the caller's symbolic dimensions); ValueError (JAX's messages) where the
    shapes do not fit the exported ones."""
    if names is None:
        names = _LazyNames(exp.in_tree, len(avals))
    symbolic = False
    for j, (got, want) in enumerate(zip(avals, exp.in_avals)):
        for i, d in enumerate(want.shape):
            if is_symbolic_dim(d):
                symbolic = True
            elif d != got.shape[i]:
                raise ValueError(f"Shape mismatch for {names[j]}.shape[{i}] (expected same "
                                 f"constant): expected {tuple(want.shape)} and called with "
                                 f"{tuple(got.shape)}")
    if not symbolic:
        return {}
    solution = exp.__dict__.get("_solution")
    if solution is None:
        solution = exp.__dict__["_solution"] = shape_checks.solve(
            exp.in_avals, _leaf_names(exp.in_tree, len(exp.in_avals)))
    return solution.for_call([a.shape for a in avals])


def call_exported(exp, args, kwargs):
    """``exp.call(*args, **kwargs)``."""
    leaves, tree = tree_util.tree_flatten((args, kwargs))
    check_call(exp, leaves, tree)
    outs = _differentiable(exp)(*leaves)
    return tree_util.tree_unflatten(exp.out_tree, list(outs))


def _differentiable(exp):
    """``exp``'s flat call as a custom_vjp whose backward pass calls ``exp.vjp()``."""
    fn = exp.__dict__.get("_custom_vjp_call")
    if fn is not None:
        return fn
    def call_flat(*leaves):
        return tuple(call_exported_p.bind(*leaves, exported=exp))

    def fwd(*leaves):
        # The custom_vjp again (not the bare primitive), so that an enclosing
        # differentiation sees a custom_vjp too and uses the next VJP.
        return fn(*leaves), leaves

    def bwd(leaves, cts):
        vjp_exp = exp.vjp()
        in_cts = vjp_exp.call(*leaves, *cts)
        return tuple(None if not _differentiable_dtype(get_aval(x).dtype) else ct
                     for x, ct in zip(leaves, in_cts))

    fn = custom_vjp(call_flat)
    fn.defvjp(fwd, bwd)
    exp.__dict__["_custom_vjp_call"] = fn
    return fn


def _differentiable_dtype(dtype) -> bool:
    return issubdtype(dtype, np.inexact)


# --- the primitive's rules ------------------------------------------------------------------
def _abstract(*avals, exported):
    env = dim_values(exported, avals)
    return [ShapedArray(evaluate_shape(a.shape, env), a.dtype, weak_type=a.weak_type,
                        sharding=getattr(a, "_sharding", None))
            for a in exported.out_avals]


def _impl(*args, exported):
    """An eager call: one program, over the devices of the arguments, or of the context
    mesh for a module exported for several devices (as jit places it)."""
    if exported.nr_devices == 1:
        return dispatch.run_primitive(call_exported_p, args, {"exported": exported})
    jitted = exported.__dict__.get("_jitted_call")
    if jitted is None:
        from plax.api.jit import jit

        def run(*leaves):
            return call_exported_p.bind(*leaves, exported=exported)
        run.__name__ = f"call_exported_{exported.fun_name}"
        jitted = exported.__dict__["_jitted_call"] = jit(run)
    return jitted(*args)


def _devices_check(ctx, exported) -> None:
    """JAX's error for a module exported for several devices, called over another number
    (a one-device module runs anywhere), and for a module with Shardy's shardings called
    with Shardy turned off (``jax_use_shardy_partitioner``)."""
    from plax.core.config import config
    if not config.read("use_shardy_partitioner") and any(
            s is not None for s in (*exported._in_named_shardings,
                                    *exported._out_named_shardings)):
        raise ValueError(
            f"The function {exported.fun_name} was exported with shardy enabled but you are "
            "calling it with Shardy disabled. Please enable Shardy using "
            "`--jax_use_shardy_partitioner=True`.")
    devices = ctx.fn.module.devices
    n = len(devices) if devices else 1
    if exported.nr_devices != 1 and n != exported.nr_devices:
        raise ValueError(
            f"Function {exported.fun_name} was exported for {exported.nr_devices} devices and "
            f"is called in a context with {n} devices, which is not allowed.")


def _constrained(ctx, values, avals, attrs, renames) -> list:
    """``values`` pinned to the layouts the exported module's ``@main`` declares for them
    (``attrs``: its ``sdy.sharding`` attribute texts, None where it declares none)."""
    from plax.lowering import mlir_bindings
    out = []
    for v, aval, attr in zip(values, avals, attrs):
        if attr is not None:
            v = ctx.fn.emit("sdy.sharding_constraint", [v], [tensor_type(aval)],
                            [tensor_type(aval)],
                            props=f"sharding = {mlir_bindings.rename_symbols(attr, renames)}")[0]
        out.append(v)
    return out


def _check_platform(exported, platform: str) -> None:
    if platform in exported.platforms:
        return
    if any(str(c) == "platform" for c in exported.disabled_safety_checks):
        return
    raise ValueError(
        f"Function '{exported.fun_name}' was exported for platforms "
        f"'{exported.platforms}' but it is used on '{(platform,)}'.")


def _platform_index(ctx, exported) -> list:
    """The operands a module exported for several platforms takes first: the index of the
    platform being lowered for among them (the first, where the platform check is off)."""
    if len(exported.platforms) == 1:
        return []
    platforms = exported.platforms
    index = platforms.index(ctx.platform) if ctx.platform in platforms else 0
    return [ctx.constant(np.int32(index), ShapedArray((), np.int32))]


def _lowering(ctx, *args, exported):
    _check_platform(exported, ctx.platform)
    _devices_check(ctx, exported)
    if exported.uses_global_constants:
        ctx.fn.module.embeds_global_constants = True
    from plax.lowering import mlir_bindings
    entry = "plax_exported_main"
    if any(shape_is_symbolic(a.shape) for a in ctx.avals_in):
        # Called inside another shape-polymorphic export: the module stays polymorphic (it
        # reads its own dimension values) and is refined with the caller's module.
        return _call_unrefined(ctx, args, exported, entry)
    args = _platform_index(ctx, exported) + list(args)
    in_types = ("tensor<i32>",) * (len(args) - len(ctx.avals_in)) + \
        tuple(tensor_type(a) for a in ctx.avals_in)
    out_types = [tensor_type(a) for a in ctx.avals_out]
    # The module's functions, refined for these operand types when it is polymorphic; kept
    # with the Exported (they live and die with it).
    texts = exported.__dict__.setdefault("_functions_by_types", {})
    text = texts.get(in_types)
    if text is None:
        if exported.uses_shape_polymorphism():
            text = mlir_bindings.refined_functions(exported.mlir_module(), list(in_types),
                                                   out_types, entry)
        else:
            text = mlir_bindings.module_functions(exported.mlir_module(), entry)
        texts[in_types] = text
    key = ("exported", id(exported), in_types)
    name = mlir_bindings.splice_functions(ctx.fn.module, key, text, entry)
    in_attrs, out_attrs = _main_shardings(exported)
    renames = ctx.fn.module.spliced[("renames", key)]
    n_index = len(args) - len(ctx.avals_in)
    args = args[:n_index] + _constrained(ctx, args[n_index:], ctx.avals_in, in_attrs, renames)
    outs = ctx.fn.emit("func.call", args, list(in_types), out_types, props=f"callee = @{name}")
    return _constrained(ctx, outs, ctx.avals_out, out_attrs, renames)


def _main_shardings(exported) -> tuple:
    """The ``sdy.sharding`` attributes of the exported ``@main``'s function arguments (after
    a platform index) and results; all None for a one-device module."""
    hit = exported.__dict__.get("_main_shardings")
    if hit is None:
        n_in, n_out = len(exported.in_avals), len(exported.out_avals)
        if not any(s is not None for s in (*exported._in_named_shardings,
                                           *exported._out_named_shardings)):
            hit = ([None] * n_in, [None] * n_out)
        else:
            from plax.lowering import mlir_bindings
            ins, outs = mlir_bindings.main_shardings(exported.mlir_module())
            hit = (ins[len(ins) - n_in:], outs)
        exported.__dict__["_main_shardings"] = hit
    return hit


def _call_unrefined(ctx, args, exported, entry: str):
    from plax.lowering import mlir_bindings
    text = exported.__dict__.get("_functions_unrefined")
    if text is None:
        text = exported.__dict__["_functions_unrefined"] = (
            mlir_bindings.module_functions(exported.mlir_module(), entry),
            mlir_bindings.main_signature(exported.mlir_module()))
    functions, (callee_in, callee_out) = text
    key = ("exported", id(exported))
    name = mlir_bindings.splice_functions(ctx.fn.module, key, functions, entry)
    in_attrs, out_attrs = _main_shardings(exported)
    renames = ctx.fn.module.spliced[("renames", key)]
    args = _platform_index(ctx, exported) + \
        _constrained(ctx, list(args), ctx.avals_in, in_attrs, renames)
    arg_types = ["tensor<i32>"] * (len(args) - len(ctx.avals_in)) + \
        [tensor_type(v) for v in ctx.avals_in]
    operands = [a if t == c else ctx.fn.emit("stablehlo.convert", [a], [t], [c])[0]
                for a, t, c in zip(args, arg_types, callee_in)]
    outs = ctx.fn.emit("func.call", operands, callee_in, callee_out, props=f"callee = @{name}")
    outs = [o if t == c else ctx.fn.emit("stablehlo.convert", [o], [c], [t])[0]
            for o, t, c in zip(outs, (tensor_type(v) for v in ctx.avals_out), callee_out)]
    return _constrained(ctx, outs, ctx.avals_out, out_attrs, renames)


def _batch(axis, vals, dims, *, exported):
    from plax.first_order.batch_util import batch_size_of, bdim_at_front
    from plax.higher_order.scan import map as lax_map
    size = batch_size_of(vals, dims)
    batched = [i for i, d in enumerate(dims) if d is not not_mapped]
    moved = [bdim_at_front(vals[i], dims[i], size) for i in batched]

    def one(xs):
        full = list(vals)
        for i, x in zip(batched, xs):
            full[i] = x
        return tuple(call_exported_p.bind(*full, exported=exported))
    outs = lax_map(one, moved)
    return list(outs), [0] * len(outs)


def _jvp(primals, tangents, *, exported):
    # Reached when a transformation differentiates a staged call (the body of a custom_vjp
    # being differentiated again): without a VJP that is JAX's "No VJP is available".
    exported.vjp()
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function: an "
                    f"exported function ({exported.fun_name}) is differentiable in reverse "
                    "mode only, through the VJPs it was exported with.")


abstract_eval_rules[call_exported_p] = _abstract
impl_rules[call_exported_p] = _impl
register_lowering(call_exported_p, _lowering)
batch_rules[call_exported_p] = _batch
jvp_rules[call_exported_p] = _jvp
