"""``export(jitted)(*args)``: trace a jitted function for argument types and lower it to a
StableHLO module whose ``@main`` takes the arguments' leaves (after the platform's index when
it was exported for several platforms)."""
from __future__ import annotations

import contextlib

import numpy as np

from plax import tree_util
from plax.core.avals import ShapedArray
from plax.core.dtypes import is_extended
from plax.core.errors import InconclusiveDimensionOperation
from plax.core.trace import Tracer
from plax.export.exported import (CURRENT_CALLING_CONVENTION, MAXIMUM_CALLING_CONVENTION,
                                  MINIMUM_CALLING_CONVENTION, DisabledSafetyCheck, Exported,
                                  check_no_ordered_effects)
from plax.lowering.stablehlo import (FunctionBuilder, ModuleBuilder, RuleContext,
                                     define_function, tensor_type)


def default_export_platform() -> str:
    """The platform ``export`` lowers for when none is given: the default device's."""
    from plax.runtime import dispatch
    return dispatch.default_device().platform


def export(fun_jit, *, platforms=None, disabled_checks=(), _override_lowering_rules=None):
    """``export(jit(f))(*args, **kwargs) -> Exported``: ``f`` lowered for the types of the
    arguments (arrays, or ShapeDtypeStructs, whose shapes may be symbolic).
    ``_override_lowering_rules``: ``(primitive, rule)`` pairs, rules (written with jaxlib's
    MLIR bindings, as for ``mlir.register_lowering``) used instead of the registered ones."""
    overrides = _plax_rules(_override_lowering_rules or ())
    if not hasattr(fun_jit, "trace") or not hasattr(fun_jit, "lower"):
        raise ValueError(
            f"Function to be exported must be the result of `jit` but is: {fun_jit!r}")
    for check in disabled_checks:
        if not isinstance(check, DisabledSafetyCheck):
            raise ValueError(f"disabled_checks must hold DisabledSafetyCheck values, got "
                             f"{check!r}.")
    if platforms is None:
        platforms = (default_export_platform(),)
    else:
        platforms = tuple(_canonical(p) for p in
                          ((platforms,) if isinstance(platforms, str) else platforms))
    if len(set(platforms)) != len(platforms):
        raise ValueError(f"export: platforms={platforms} names a platform more than once.")

    def do_export(*args, **kwargs) -> Exported:
        return _export(fun_jit, args, kwargs, platforms, tuple(disabled_checks), overrides)
    return do_export


def _plax_rules(pairs) -> dict:
    from plax.lowering import mlir_bindings
    out = {}
    for prim, rule in pairs:
        out[prim] = getattr(rule, "plax_rule", None) or mlir_bindings.bindings_rule(rule, prim)
    return out


def _canonical(platform: str) -> str:
    from plax.lowering.stablehlo import canonical_platform
    p = canonical_platform(str(platform).lower())
    return "cuda" if p == "gpu" else p


# The platforms whose compilers take buffer donation (JAX's list).
_PLATFORMS_WITH_DONATION = ("cpu", "cuda", "rocm", "tpu", "neuron")


def _calling_convention() -> int:
    """The calling-convention version to write (``jax_export_calling_convention_version``)."""
    from plax.core.config import config
    version = config.read("export_calling_convention_version")
    if version is None:
        return CURRENT_CALLING_CONVENTION
    if not MINIMUM_CALLING_CONVENTION <= version <= MAXIMUM_CALLING_CONVENTION:
        raise ValueError(
            f"The requested export calling convention version {version} is outside the range "
            f"of supported versions [{MINIMUM_CALLING_CONVENTION}..{MAXIMUM_CALLING_CONVENTION}]")
    return version


def _check_one_scope(name: str, args, kwargs) -> None:
    """ValueError (JAX's) when the arguments' symbolic dimensions come from several scopes."""
    from plax.core.symbolic_shapes import DimExpr
    first = None
    leaves = tree_util.tree_leaves((args, kwargs))
    for j, x in enumerate(leaves):
        for d in getattr(x, "shape", ()):
            if not isinstance(d, DimExpr):
                continue
            if first is None:
                first = (d.scope, j)
            elif d.scope is not first[0]:
                from plax.export.calling import _leaf_names
                names = _leaf_names(tree_util.tree_structure((args, kwargs)), len(leaves))
                raise ValueError(
                    f"Invalid mixing of symbolic scopes when exporting {name}. Expected "
                    f"current (from {names[first[1]]}) scope {first[0]} and found for '{d}' "
                    f"({names[j]}) scope {d.scope}")


def _export(fun_jit, args, kwargs, platforms, disabled_checks, overrides=None) -> Exported:
    version = _calling_convention()
    _check_one_scope(getattr(fun_jit, "__name__", "<unnamed>"), args, kwargs)
    try:
        traced = fun_jit.trace(*args, **kwargs)
    except InconclusiveDimensionOperation as e:
        raise _naming_the_operation(e) from None
    entry = traced._entry
    name = getattr(fun_jit, "__name__", None) or entry.params["name"]
    from plax.export.sharded import layout_for
    layout = layout_for(entry, traced._leaves, name)  # (None: a one-device module)
    if len(platforms) > 1 and any(entry.params.get("donated_invars", ())):
        with_donation = [p in _PLATFORMS_WITH_DONATION for p in platforms]
        if any(with_donation) and not all(with_donation):
            raise NotImplementedError(
                "In multi-platform lowering either all or no lowering platforms should support "
                f"donation: {name} donates arguments and is exported for {platforms}, of "
                f"which only {tuple(p for p in platforms if p in _PLATFORMS_WITH_DONATION)} "
                "support it.")
    closed = entry.user_jaxpr
    if any(isinstance(c, Tracer) for c in closed.consts):
        raise ValueError(f"Cannot export {name}: it closes over traced values (export it "
                         "outside any transformation).")
    jaxpr = closed.jaxpr
    check_no_ordered_effects(jaxpr, name)
    # A one-device module's types carry no sharding; an SPMD module's keep their Explicit
    # axes' (over AbstractMeshes).
    keep = (lambda a: a) if layout is not None else _unsharded
    in_avals = tuple(keep(v.aval) for v in jaxpr.invars)
    out_avals = tuple(keep(v.aval) for v in jaxpr.outvars)
    for a in (*in_avals, *out_avals, *(v.aval for v in jaxpr.constvars)):
        if is_extended(a.dtype):
            raise NotImplementedError(f"Cannot export {name}: it takes or returns {a.str_short()}"
                                      " (typed PRNG keys are not supported by export; pass "
                                      "key data, jax.random.key_data, instead).")
    from plax.export.calling import _leaf_names
    poly = dict(arg_names=_leaf_names(entry.in_tree, len(in_avals)), overrides=overrides or {},
                assertions=DisabledSafetyCheck.shape_assertions() not in disabled_checks,
                layout=layout)
    with layout.context() if layout is not None else contextlib.nullcontext():
        if len(platforms) == 1:
            text = lower_for_export(jaxpr, closed.consts, name, platforms[0], **poly)
        else:
            text = lower_for_platforms(jaxpr, closed.consts, name, platforms, **poly)
    from plax.lowering.mlir_bindings import serialize_portable
    try:
        serialized = serialize_portable(text)
    except Exception as e:  # MLIR refused the module: name the op and where it came from
        why = (" An operation above cannot handle the symbolic dimensions of "
               f"{[a.str_short() for a in in_avals]}." if _symbolic(in_avals) else "")
        raise NotImplementedError(f"Cannot export {name}: the lowered module is not valid "
                                  f"StableHLO: {e}.{why}") from None
    exp = Exported(
        fun_name=name, in_tree=entry.in_tree, in_avals=in_avals, out_tree=entry.out_tree,
        out_avals=out_avals,
        in_shardings=layout.abstract_in() if layout else (None,) * len(in_avals),
        out_shardings=layout.abstract_out() if layout else (None,) * len(out_avals),
        nr_devices=len(layout.devices) if layout else 1, platforms=platforms,
        ordered_effects=(), unordered_effects=tuple(jaxpr.effects),
        disabled_safety_checks=disabled_checks, mlir_module_serialized=serialized,
        calling_convention_version=version,
        module_kept_var_idx=tuple(range(len(in_avals))),
        uses_global_constants=module_uses_global_constants(text),
        _get_vjp=lambda exp: _export_vjp(fun_jit, exp, platforms, disabled_checks, layout))
    exp._text = text
    return exp


def lower_for_export(jaxpr, consts, name: str, platform: str, overrides=None, layout=None,
                     **poly) -> str:
    """The module text: ``@main`` takes the jaxpr's inputs, holds its constants and calls
    the jaxpr's function (``@_plax_exported``). ``overrides``: prim -> plax lowering rule
    used instead of the registered one; ``layout``: an SPMD module's (sharded.Layout);
    ``poly`` goes to lower_polymorphic."""
    from plax.export.polymorphic import lower_polymorphic, uses_symbolic_dims
    if uses_symbolic_dims(jaxpr):
        return lower_polymorphic(jaxpr, consts, name, platform, overrides=overrides,
                                 layout=layout, **poly)
    module = export_module(name, platform, layout)
    module.override_rules = dict(overrides or {})
    arg_attrs, result_attrs = main_attrs(module, layout, jaxpr)
    body = module.unique_name("_plax_exported")
    define_function(module.context, body, jaxpr)
    fn = FunctionBuilder(module)
    ctx = RuleContext(fn, [], [])
    const_ssa = [ctx.constant(np.asarray(c), v.aval) for c, v in zip(consts, jaxpr.constvars)]
    in_types = [tensor_type(v.aval) for v in jaxpr.invars]
    out_types = [tensor_type(v.aval) for v in jaxpr.outvars]
    args = [f"%arg{i}" for i in range(len(in_types))]
    outs = fn.emit("func.call", const_ssa + args,
                   [tensor_type(v.aval) for v in jaxpr.constvars] + in_types, out_types,
                   props=f"callee = @{body}")
    module.functions.append(main_function(fn, args, in_types, outs, out_types, arg_attrs,
                                          result_attrs))
    if module.host_callbacks:
        raise NotImplementedError(f"Cannot export {name}: it has host callbacks "
                                  "(pure_callback, io_callback, debug.print), whose Python "
                                  "functions cannot be part of an exported module.")
    return module.text(f"jax.uses_shape_polymorphism = {_global_constants(module)}, "
                       + partitions(layout))


def export_module(name: str, platform: str, layout) -> ModuleBuilder:
    """An empty module for exporting ``name``; an SPMD one numbers the layout's devices."""
    module = ModuleBuilder("jit_" + "".join(c if c.isalnum() or c == "_" else "_"
                                            for c in name), platform=platform)
    if layout is not None:
        module.devices = list(layout.devices)
    return module


def main_attrs(module, layout, jaxpr) -> tuple:
    """``@main``'s parameter and result attributes (``sdy.sharding``) for ``layout``."""
    if layout is None:
        return None, None
    return (layout.arg_attrs(module, [v.aval for v in jaxpr.invars]),
            layout.result_attrs(module, [v.aval for v in jaxpr.outvars]))


def partitions(layout) -> str:
    """The module attributes saying over how many devices it runs."""
    n = len(layout.devices) if layout is not None else 1
    return f"mhlo.num_partitions = {n} : i32, mhlo.num_replicas = 1 : i32"


def _global_constants(module) -> str:
    """Whether ``module`` holds functions with ``jax.global_constant`` parameters (of an
    exported module called in it), which the module's attribute says: "true" or "false"."""
    return "true" if getattr(module, "embeds_global_constants", False) else "false"


def module_uses_global_constants(text: str) -> bool:
    """Whether the module ``text`` says it uses global constants (platform index, dimension
    variables), which its callers refine away."""
    return "jax.uses_shape_polymorphism = true" in text.split("\n", 1)[0]


PLATFORM_INDEX_TYPE = 'tensor<i32> {jax.global_constant = "_platform_index"}'


def lower_for_platforms(jaxpr, consts, name: str, platforms, **poly) -> str:
    """The module text for several platforms: its ``@main`` takes the index of the platform
    it runs on (in ``platforms``) first, as JAX's do, and a ``stablehlo.case`` on it calls
    the module lowered for that platform (XLA folds the case, the index being a constant
    where the module is called)."""
    from plax.lowering import mlir_bindings
    layout = poly.get("layout")
    module = export_module(name, platforms[0], layout)
    arg_attrs, result_attrs = main_attrs(module, layout, jaxpr)
    entries = []
    for platform in platforms:
        text = lower_for_export(jaxpr, consts, name, platform, **poly)
        entry = f"_plax_main_{platform}"
        while f"@{entry}(" in text:  # (a module exported for several platforms, called here)
            entry += "_"
        entries.append(mlir_bindings.splice_functions(
            module, ("platform", platform), mlir_bindings.module_functions(text, entry), entry))
    in_types = [tensor_type(v.aval) for v in jaxpr.invars]
    out_types = [tensor_type(v.aval) for v in jaxpr.outvars]
    args = [f"%arg{i + 1}" for i in range(len(in_types))]
    fn = FunctionBuilder(module)
    ctx = RuleContext(fn, [], [])
    out_avals = [v.aval for v in jaxpr.outvars]

    def branch(entry):
        def build(c):
            return c.fn.emit("func.call", args, in_types, out_types,
                             props=f"callee = @{entry}"), out_avals
        return build
    regions = ", ".join(ctx.region([], branch(entry)) for entry in entries)
    index = ShapedArray((), np.int32)
    outs = ctx.op("stablehlo.case", ["%arg0"], [index], out_avals, regions=regions)
    module.functions.append(main_function(
        fn, ["%arg0", *args], [PLATFORM_INDEX_TYPE, *in_types], outs, out_types,
        None if arg_attrs is None else ["", *arg_attrs], result_attrs))
    # The platform index is a global constant (as a dimension variable would be).
    return module.text("jax.uses_shape_polymorphism = true, " + partitions(layout))


def main_function(fn, args, in_types, outs, out_types, arg_attrs=None,
                  result_attrs=None) -> str:
    """The text of the public ``@main`` whose body ``fn`` holds; ``arg_attrs`` and
    ``result_attrs`` are attribute texts of its parameters and results ("" for none)."""
    arg_attrs = arg_attrs or [""] * len(args)
    result_attrs = result_attrs or [""] * len(out_types)
    sig = ", ".join(f"{a}: {t}" + (f" {{{at}}}" if at else "")
                    for a, t, at in zip(args, in_types, arg_attrs))
    results = ", ".join(f'{t} {{jax.result_info = "result[{i}]"' + (f", {at}}}" if at else "}")
                        for i, (t, at) in enumerate(zip(out_types, result_attrs)))
    body = "".join(f"    {line}\n" for line in fn.lines)
    ret = f"    func.return {', '.join(outs)} : {', '.join(out_types)}" if outs else \
        "    func.return"
    return f"  func.func public @main({sig}) -> ({results}) {{\n{body}{ret}\n  }}"


def _export_vjp(fun_jit, exp: Exported, platforms, disabled_checks, layout) -> Exported:
    """The VJP of the exported function, exported: ``(*primals, *out_cts) -> in_cts``; an
    SPMD function's takes the primals and cotangents laid out as the primals and results
    were, and gives the input cotangents laid out as the primals."""
    from plax.api.autodiff import vjp
    from plax.api.jit import jit
    n_in = len(exp.in_avals)

    def fun_vjp_jax(*primals_and_cts):
        primals, cts = primals_and_cts[:n_in], primals_and_cts[n_in:]

        def flat_fun(*flat):
            a, kw = tree_util.tree_unflatten(exp.in_tree, list(flat))
            return tree_util.tree_leaves(fun_jit(*a, **kw))
        _, pullback = vjp(flat_fun, *primals)
        return tuple(pullback(list(cts)))

    fun_vjp_jax.__name__ = "fun_vjp_jax"
    # cotangents are typed as tangents: float0 for integer results, as in JAX
    specs = [_spec(a) for a in (*exp.in_avals, *(a.to_tangent_aval() for a in exp.out_avals))]
    shardings = {} if layout is None else dict(
        in_shardings=(*layout.in_shardings, *layout.out_shardings),
        out_shardings=tuple(layout.in_shardings))
    with layout.context() if layout is not None else contextlib.nullcontext():
        return export(jit(fun_vjp_jax, **shardings), platforms=platforms,
                      disabled_checks=disabled_checks)(*specs)


def _naming_the_operation(error) -> Exception:
    """``error`` (a symbolic dimension met where plax needs a concrete one, while tracing)
    saying which primitive's shape rule, or which plax function, met it."""
    from plax.core.primitive import abstract_eval
    where, tb = None, error.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code is abstract_eval.__code__:
            avals = ", ".join(a.str_short() for a in frame.f_locals.get("avals", ()))
            where = f"the shape rule of '{frame.f_locals['prim'].name}' on ({avals})"
        elif where is None or not where.startswith("the shape rule"):
            module = frame.f_globals.get("__name__", "")
            if module.startswith("plax.") and not module.startswith(
                    ("plax.core.", "plax.api.", "plax.export.")):
                code = frame.f_code
                where = f"{module}.{getattr(code, 'co_qualname', code.co_name)}"
        tb = tb.tb_next
    if where is None:
        return error
    lines = str(error).split("\n", 1)
    return InconclusiveDimensionOperation(
        f"{lines[0]} (in {where}).\n" + (lines[1] if len(lines) > 1 else ""))


def _unsharded(aval) -> ShapedArray:
    if getattr(aval, "_sharding", None) is None:
        return aval
    return ShapedArray(aval.shape, aval.dtype, weak_type=aval.weak_type)


def _symbolic(avals) -> bool:
    from plax.core.symbolic_shapes import shape_is_symbolic
    return any(shape_is_symbolic(a.shape) for a in avals)


def _spec(aval: ShapedArray):
    from plax.core.shape_dtype_struct import ShapeDtypeStruct
    return ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type,
                            sharding=getattr(aval, "_sharding", None))
