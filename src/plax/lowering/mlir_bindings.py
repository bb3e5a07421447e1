"""Lowering rules written with jaxlib's MLIR Python bindings, run inside plax's lowering.

JAX's lowering rules build ops with jaxlib's MLIR bindings: ``rule(ctx, *values, **params)``
gets ``ir.Value`` operands and a ``LoweringRuleContext`` and returns the result values. plax
lowers to StableHLO *text*. ``bindings_rule(jax_rule)`` is a plax lowering rule that runs such
a rule in a scratch ``ir.Module`` of jaxlib's (a private function whose arguments are the
operands), prints that function and splices it into the module plax is writing, then calls
it with ``func.call``. XLA inlines the call. The printed function is cached by (rule, types,
parameters, platform), so each distinct use builds once; a module holds one copy of it.

This module and ``plax.runtime.xla`` are the only ones that import jaxlib.
"""
from __future__ import annotations

import dataclasses
import io
import re
from typing import Union

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import chlo, func as func_dialect, stablehlo as hlo  # noqa: F401

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.caches import BoundedCache
from plax.core.effects import ordered_effects_of, own_effects
from plax.core.trace import EMPTY_NAME_STACK
from plax.lowering.stablehlo import (AbstractToken, RuleContext, abstract_token,
                                     dense_elements, element_type, tensor_type)
from plax.runtime.xla import mlir_context

__all__ = ["AxisContext", "LoweringRuleContext", "ModuleContext", "SPMDAxisContext",
           "ShardingContext", "TokenSet", "aval_to_ir_type", "bindings_rule",
           "dense_int_array", "dense_int_elements", "dtype_to_ir_type", "flatten_ir_types",
           "flatten_ir_values", "hlo", "i32_attr", "i64_attr", "ir", "ir_constant",
           "ir_constants", "make_ir_context", "module_to_bytecode", "module_to_string",
           "token_type", "unflatten_ir_values_like_types"]


# --- what a rule sees --------------------------------------------------------------------
class ModuleContext:
    """The module a bindings rule builds into: ``context``, ``module`` (a scratch
    ``ir.Module``), ``ip`` (its body's insertion point), ``symbol_table``, ``platforms``."""

    def __init__(self, context, module, platform: str):
        self.context = context
        self.module = module
        self.ip = ir.InsertionPoint(module.body)
        self.symbol_table = ir.SymbolTable(module.operation)
        self.platforms = (platform,)
        self.backend = None
        self.axis_context = None
        self.keepalives: list = []
        self.host_callbacks: list = []
        self.lowering_parameters = None

    def replace(self, **changes):
        for name, value in changes.items():
            setattr(self, name, value)
        return self

    def add_keepalive(self, keepalive) -> None:
        """Keep ``keepalive`` alive as long as the module is."""
        self.keepalives.append(keepalive)

    def add_host_callback(self, callback) -> int:
        """Register a host callback of this rule; its slot number (see ``host_call``)."""
        self.host_callbacks.append(callback)
        return len(self.host_callbacks) - 1


class TokenSet:
    """The effect tokens a bindings rule takes (``ctx.tokens_in``) and gives back
    (``ctx.set_tokens_out``): an ordered mapping from each ordered effect of the equation
    to its token value."""

    def __init__(self, *args, **kwargs):
        self._tokens = dict(*args, **kwargs)

    def __len__(self) -> int:
        return len(self._tokens)

    def __repr__(self) -> str:
        return f"TokenSet({self._tokens!r})"

    def get(self, effect):
        return self._tokens[effect]

    @classmethod
    def create(cls, effects) -> "TokenSet":
        """A fresh token (``stablehlo.create_token``) for each of ``effects``."""
        return cls({e: hlo.create_token() for e in effects})

    def items(self) -> tuple:
        return tuple(self._tokens.items())

    def effects(self) -> set:
        return set(self._tokens)

    def subset(self, effects) -> "TokenSet":
        """The tokens of ``effects``, in that order."""
        return TokenSet({e: self._tokens[e] for e in effects})

    def update_tokens(self, tokens: "TokenSet") -> "TokenSet":
        """These tokens with those of ``tokens`` replacing them (this set when it is
        empty)."""
        if not tokens:
            return self
        return TokenSet({**self._tokens, **tokens._tokens})


class LoweringRuleContext:
    """What a bindings rule gets as ``ctx``: its primitive, operand and result types, the
    module context and the platform (JAX's field names)."""

    def __init__(self, module_context, primitive, avals_in, avals_out, platform: str):
        self.module_context = module_context
        self.primitive = primitive
        self.avals_in = list(avals_in)
        self.avals_out = list(avals_out)
        self.name_stack = EMPTY_NAME_STACK
        self.traceback = None
        self.tokens_in = TokenSet()
        self.tokens_out = None
        self.const_lowering = {}
        self.axis_size_env = None
        self.dim_var_values = ()
        self.jaxpr_eqn_ctx = None
        self.platforms = (platform,)

    def replace(self, **changes) -> "LoweringRuleContext":
        new = object.__new__(LoweringRuleContext)
        new.__dict__.update(self.__dict__, **changes)
        return new

    def set_tokens_out(self, tokens_out) -> None:
        self.tokens_out = tokens_out

    def is_forward_compat(self) -> bool:
        return False


# --- helpers rules use (JAX's names) ------------------------------------------------------
def dtype_to_ir_type(dtype) -> ir.Type:
    """The MLIR element type of ``dtype``."""
    return ir.Type.parse(element_type(np.dtype(dtype)))


def aval_to_ir_type(aval) -> ir.Type:
    """The MLIR type of values of ``aval`` (a tensor type, or the token type)."""
    return ir.Type.parse(tensor_type(aval))


def token_type() -> ir.Type:
    return ir.Type.parse("!stablehlo.token")


# A host callback a bindings rule registers is numbered within the rule's scratch module
# (from _SLOT_BASE up, an index no real module reaches); splicing renumbers it.
_SLOT_BASE = 1 << 63
_SLOT = re.compile(r"index = (\d+) : ui64")


def _layout_attr(aval) -> str:
    n = 0 if isinstance(aval, AbstractToken) else len(aval.shape)
    dims = ", ".join(str(d) for d in reversed(range(n)))
    return f"dense<[{dims}]> : tensor<{n}xindex>" if n else "dense<> : tensor<0xindex>"


def host_call(module_context, entry, operands, operand_avals, result_avals, platform: str,
              has_side_effect: bool) -> list:
    """Inside a bindings rule: a ``stablehlo.custom_call`` of jaxlib's Python host-callback
    target that calls ``entry`` (flat NumPy arrays -> flat results) on ``operands`` (of
    ``operand_avals``); returns its results (of ``result_avals``)."""
    slot = _SLOT_BASE + module_context.add_host_callback(entry)
    device = "gpu" if platform in ("cuda", "rocm") else "cpu"
    attrs = {
        "call_target_name": ir.StringAttr.get(f"xla_ffi_python_{device}_callback"),
        "backend_config": ir.StringAttr.get(""),
        "mhlo.backend_config": ir.Attribute.parse(f"{{index = {slot} : ui64}}"),
        "has_side_effect": ir.BoolAttr.get(bool(has_side_effect)),
        "operand_layouts": ir.Attribute.parse(
            f"[{', '.join(_layout_attr(a) for a in operand_avals)}]"),
        "result_layouts": ir.Attribute.parse(
            f"[{', '.join(_layout_attr(a) for a in result_avals)}]")}
    op = ir.Operation.create("stablehlo.custom_call",
                             results=[aval_to_ir_type(a) for a in result_avals],
                             operands=list(operands), attributes=attrs)
    return list(op.results)


def _renumber_slots(text: str, callbacks, module) -> str:
    """``text`` with its host-callback slots replaced by indices of ``module``'s own host
    callbacks (``callbacks`` registered there)."""
    if not callbacks:
        return text
    indices = [module.add_host_callback(cb) for cb in callbacks]

    def renumber(m):
        value = int(m.group(1))
        if value < _SLOT_BASE:
            return m.group(0)
        return f"index = {indices[value - _SLOT_BASE]} : ui64"
    return _SLOT.sub(renumber, text)


def ir_constant(val) -> ir.Value:
    """A ``stablehlo.constant`` holding ``val`` (a NumPy value or Python scalar)."""
    arr = np.asarray(val)
    aval = ShapedArray(arr.shape, dtypes.canonicalize_dtype(arr.dtype))
    return hlo.constant(ir.Attribute.parse(dense_elements(arr, aval)))


def ir_constants(val) -> tuple:
    return (ir_constant(val),)


def i32_attr(i) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(32), int(i))


def i64_attr(i) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(i))


def dense_int_array(xs) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get([int(x) for x in xs])


def dense_int_elements(xs) -> ir.Attribute:
    return ir.DenseIntElementsAttr.get(np.asarray(xs, np.int64))


def lower_with_sharding_in_types(ctx, op, aval):
    """``op`` (an ``ir.Value``) pinned to the sharding ``aval`` carries in its type (an
    ``sdy.sharding_constraint`` naming the mesh inline); ``op`` itself when ``aval`` has
    no such sharding or its mesh has no Explicit axes."""
    sharding = getattr(aval, "_sharding", None)
    if sharding is None:
        return op
    mesh = sharding.mesh
    if mesh.are_all_axes_auto or mesh.are_all_axes_manual:
        return op
    attr = sharding._to_sdy_sharding(len(aval.shape))
    constraint = ir.Operation.create(
        "sdy.sharding_constraint", results=[op.type], operands=[op],
        attributes={"sharding": ir.Attribute.parse(attr)})
    return constraint.result


def flatten_ir_values(xs) -> list:
    """Values, or sequences of them, as one flat list of ``ir.Value``s."""
    out = []
    for x in xs:
        if isinstance(x, ir.Value):
            out.append(x)
        elif isinstance(x, ir.OpView) or isinstance(x, ir.Operation):
            out.extend(x.results)
        else:
            out.extend(flatten_ir_values(x))
    return out


def flatten_ir_types(xs) -> list:
    out = []
    for x in xs:
        if isinstance(x, ir.Type):
            out.append(x)
        else:
            out.extend(x)
    return out


def unflatten_ir_values_like_types(xs, ys) -> list:
    """``xs`` (flat values) grouped as ``ys`` (types, or sequences of types) are."""
    it, out = iter(xs), []
    for y in ys:
        out.append(next(it) if isinstance(y, ir.Type) else [next(it) for _ in y])
    return out


def module_to_string(module, enable_debug_info=None) -> str:
    return module.operation.get_asm(enable_debug_info=bool(enable_debug_info))


def module_to_bytecode(module) -> bytes:
    out = io.BytesIO()
    module.operation.write_bytecode(out)
    return out.getvalue()


def make_ir_context() -> ir.Context:
    """The MLIR context plax lowers in (its dialects registered)."""
    return mlir_context()


# --- JAX's MLIR context type and jaxlib's module functions (jax.extend.lowering/.mlir) ------
def _jax_dialects():
    from jaxlib.mlir._mlir_libs import _jax_mlir_ext
    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    return registry


# The dialects JAX lowers to (func, stablehlo, chlo, sdy, ...), as a registry to append.
upstream_dialects = _jax_dialects()


class JaxIrContext(ir.Context):
    """An MLIR context with the dialects JAX lowers to registered and loaded (StableHLO,
    CHLO, MHLO, Shardy and the upstream ones)."""

    def __init__(self, *args, **kwargs):
        from jaxlib.mlir.dialects import mhlo, sdy
        super().__init__(*args, **kwargs)
        self.append_dialect_registry(upstream_dialects)
        self.load_all_available_dialects()
        for register in (sdy.register_dialect, mhlo.register_mhlo_dialect,
                         chlo.register_dialect, hlo.register_dialect):
            register(self)


def jaxlib_module_functions():
    """jaxlib's functions on MLIR modules: ``serialize_portable_artifact``,
    ``deserialize_portable_artifact``, ``refine_polymorphic_shapes``, ``hlo_to_stablehlo``
    (the ones ``jax.extend.mlir`` re-exports)."""
    from jaxlib import _jax
    return _jax.mlir


# --- where the program runs, as a rule sees it (ctx.module_context.axis_context) ---------
@dataclasses.dataclass(frozen=True)
class ShardingContext:
    """A program over ``num_devices`` devices (one, or an SPMD program), no axis manual."""
    num_devices: int
    device_assignment: tuple | None = None
    abstract_mesh: object = None


@dataclasses.dataclass(frozen=True)
class SPMDAxisContext:
    """Lowering inside ``shard_map``: ``manual_axes`` of ``mesh`` are per-device."""
    mesh: object
    manual_axes: frozenset = frozenset()


AxisContext = Union[SPMDAxisContext, ShardingContext]


def _axis_context(ctx: RuleContext):
    """The axis context of the equation ``ctx`` lowers."""
    if ctx.manual_axes:
        return SPMDAxisContext(ctx.mesh, frozenset(ctx.manual_axes))
    devices = ctx.fn.module.devices
    return ShardingContext(1 if devices is None else len(devices),
                           None if devices is None else tuple(devices))


# --- running a bindings rule --------------------------------------------------------------
_PLACEHOLDER = "plax_bindings_rule"
_DEFINED = re.compile(r"^\s*func\.func\s+(?:private\s+|public\s+)?@([\w$.]+)", re.M)
_built = BoundedCache("MLIR-bindings lowering functions", maxsize=1024)


def _build(jax_rule, prim, avals_in, avals_out, params, platform: str,
           axis_context=None, ordered=()) -> tuple[str, list]:
    """The text of a private function computing ``jax_rule``'s ops (named _PLACEHOLDER), and
    the host callbacks it calls (by slot). With ``ordered`` effects, the function takes a
    token for each of them first and returns the rule's ``tokens_out`` first."""
    with mlir_context(), ir.Location.unknown():
        module = ir.Module.create()
        tokens = [token_type()] * len(ordered)
        in_types = [aval_to_ir_type(a) for a in avals_in]
        out_types = [aval_to_ir_type(a) for a in avals_out]
        with ir.InsertionPoint(module.body):
            fn = func_dialect.FuncOp(_PLACEHOLDER, ir.FunctionType.get(
                tokens + in_types, tokens + out_types), visibility="private")
        block = fn.add_entry_block()
        module_context = ModuleContext(mlir_context(), module, platform)
        module_context.axis_context = axis_context
        ctx = LoweringRuleContext(module_context, prim, avals_in, avals_out, platform)
        args = list(block.arguments)
        ctx.tokens_in = TokenSet(zip(ordered, args[:len(ordered)]))
        with ir.InsertionPoint(block):
            outs = jax_rule(ctx, *args[len(ordered):], **params)
            try:
                flat = flatten_ir_values(outs)
            except TypeError:
                raise TypeError(f"The lowering rule of {prim} must return a sequence of "
                                f"ir.Value (or of sequences of them), got {outs!r}.") from None
            got = [str(v.type) for v in flat]
            want = [str(t) for t in out_types]
            if got != want:
                raise TypeError(f"The lowering rule of {prim} returned values of types "
                                f"({', '.join(got)}) where the primitive's abstract evaluation "
                                f"says ({', '.join(want)}).")
            func_dialect.ReturnOp(_tokens_out(ctx, prim, ordered) + flat)
        return ("\n".join(op.operation.get_asm(enable_debug_info=False)
                           for op in module.body.operations), module_context.host_callbacks)


def _tokens_out(ctx: LoweringRuleContext, prim, ordered) -> list:
    """The token values a rule set for the equation's ``ordered`` effects, checked."""
    out = ctx.tokens_out
    if not ordered and not out:
        return []
    if out is None:
        raise ValueError(f"Lowering rule for `{prim}` needs to set `tokens_out` because "
                         f"its equation has ordered effects: {list(ordered)}.")
    if out.effects() != set(ordered):
        raise ValueError(f"Lowering rule for `{prim}` returns incorrect set of output tokens: "
                         f"expected tokens for {list(ordered)}, got {list(out.effects())}.")
    return [out.get(e) for e in ordered]


def _splice(module, key, text: str, main_name: str) -> str:
    """Add ``text``'s functions to ``module`` under fresh names (the one built for the rule
    named after ``main_name``); returns the rule function's name."""
    known = module.spliced.get(key)
    if known is not None:
        return known
    renames = {old: module.unique_name(main_name if old == _PLACEHOLDER else old)
               for old in _DEFINED.findall(text)}
    if renames:
        text = re.sub(r"@([\w$.]+)", lambda m: "@" + renames.get(m.group(1), m.group(1)), text)
    module.functions.append("  " + text.replace("\n", "\n  "))
    if key is not None:
        module.spliced[key] = renames[_PLACEHOLDER]
    return renames[_PLACEHOLDER]


def bindings_rule(jax_rule, prim, name: str | None = None):
    """A plax lowering rule running ``jax_rule``, a rule written with jaxlib's MLIR bindings
    (``jax_rule(ctx, *ir_values) -> [ir.Value, ...]``); the function it builds is named
    ``name`` (by default after the primitive and "_lowering"). The equation's ordered
    effects reach the rule as ``ctx.tokens_in``, each the current token."""
    def rule(ctx: RuleContext, *operands, **params):
        if any(a is abstract_token or isinstance(a, AbstractToken)
               for a in (*ctx.avals_in, *ctx.avals_out)):
            raise NotImplementedError(f"The MLIR-bindings lowering of {prim} takes or makes "
                                      "an effect token, which plax's adapter does not pass.")
        ordered = tuple(ordered_effects_of(own_effects(prim, ctx.avals_in, params)))
        if ordered and ctx.fn.token is None:
            raise NotImplementedError(f"{prim} has ordered effects but was lowered in a "
                                      "function that has no ordered-effect token.")
        platform = ctx.platform
        axis_context = _axis_context(ctx)
        try:
            key = (jax_rule, tuple(ctx.avals_in), tuple(ctx.avals_out),
                   tuple(sorted(params.items())), platform, axis_context, ordered)
            hash(key)
        except TypeError:  # unhashable parameters: built for each use
            key = None
        text = _built.get(key) if key is not None else None
        if text is None:
            text, callbacks = _build(jax_rule, prim, ctx.avals_in, ctx.avals_out, params,
                                     platform, axis_context, ordered)
            if callbacks:  # each build has callbacks of its own, indexed in this module
                key, text = None, _renumber_slots(text, callbacks, ctx.fn.module)
            elif key is not None:
                _built.put(key, text)
        callee = _splice(ctx.fn.module, key, text, name or f"{prim.name}_lowering")
        n = len(ordered)
        outs = ctx.op("func.call", [ctx.fn.token] * n + list(operands),
                      [abstract_token] * n + list(ctx.avals_in),
                      [abstract_token] * n + list(ctx.avals_out), props=f"callee = @{callee}")
        if n:
            tokens, outs = outs[:n], outs[n:]
            ctx.fn.token = tokens[0] if n == 1 else ctx.fn.emit(
                "stablehlo.after_all", tokens, ["!stablehlo.token"] * n,
                ["!stablehlo.token"])[0]
        return outs if prim.multiple_results else outs[0]
    rule.bindings_rule = jax_rule
    return rule


# --- plax-lowered functions called from a bindings rule -----------------------------------
_fresh = iter(range(1 << 62))


def define_plax_function(module_context, platform: str, plax_rule, avals_in, avals_out,
                         params=None, name: str | None = None):
    """Inside a bindings rule: a private ``func.func`` in ``module_context``'s module that
    computes what the plax rule ``plax_rule`` lowers on operands of types ``avals_in``
    (results ``avals_out``); named ``name`` (made unique) or a fresh name. Returns the
    ``FuncOp``."""
    from plax.lowering.stablehlo import FunctionBuilder, ModuleBuilder
    builder = ModuleBuilder(platform=platform)
    fn = FunctionBuilder(builder)
    names = [f"%arg{i}" for i in range(len(avals_in))]
    outs = plax_rule(RuleContext(fn, list(avals_in), list(avals_out)), *names,
                     **(params or {}))
    outs = [outs] if isinstance(outs, str) else list(outs)
    in_types = [tensor_type(a) for a in avals_in]
    out_types = [tensor_type(a) for a in avals_out]
    sig = ", ".join(f"{n}: {t}" for n, t in zip(names, in_types))
    body = "".join(f"    {line}\n" for line in fn.lines)
    target_table = ir.SymbolTable(module_context.module.operation)
    fresh = f"plax_lowered_{next(_fresh)}"
    if name is not None:
        fresh, i = name, 0
        while fresh in target_table:
            i += 1
            fresh = f"{name}_{i}"
    ret = f"    func.return {', '.join(outs)} : {', '.join(out_types)}\n" if outs else \
        "    func.return\n"
    builder.functions.append(
        f"  func.func private @{fresh}({sig}) -> ({', '.join(out_types)}) {{\n{body}{ret}  }}")
    text = builder.text()
    renames = {old: f"{old}_{next(_fresh)}" for old in _DEFINED.findall(text) if old != fresh}
    if renames:
        text = re.sub(r"@([\w$.]+)", lambda m: "@" + renames.get(m.group(1), m.group(1)), text)
    parsed = ir.Module.parse(text)
    target = module_context.module.body
    for op in list(parsed.body.operations):
        target.append(op.operation)
    return ir.SymbolTable(module_context.module.operation)[fresh]


def call_plax_lowering(ctx: LoweringRuleContext, plax_rule, args, params) -> list:
    """Inside a bindings rule: lower with the plax rule ``plax_rule`` (e.g. a ``lower_fun``
    rule) on ``ctx``'s types, parse the result into the rule's module and call it on the
    ``ir.Value``s ``args``; returns the results (a list)."""
    fn = define_plax_function(ctx.module_context, ctx.platforms[0], plax_rule, ctx.avals_in,
                              ctx.avals_out, params)
    call = func_dialect.CallOp([aval_to_ir_type(a) for a in ctx.avals_out],
                               ir.FlatSymbolRefAttr.get(fn.name.value), list(args))
    return list(call.results)


# --- exported modules (plax.export): portable artifacts, splicing, shape refinement -------
def stablehlo_version_range() -> tuple[str, str]:
    """(oldest, newest) StableHLO versions jaxlib's serializer can target."""
    return hlo.get_minimum_version(), hlo.get_current_version()


def serialize_portable(text: str, target_version: str | None = None) -> bytes:
    """A StableHLO module's text as a StableHLO portable artifact (versioned MLIR bytecode),
    for ``target_version`` (default: the newest jaxlib writes). Shardy's ops and attributes
    (an SPMD module's meshes and shardings) are kept as they are (mixed serialization, as
    JAX writes them), not turned into XLA's older sharding attributes."""
    from jaxlib import _jax
    module = ir.Module.parse(text, context=mlir_context())
    with mlir_context():
        return _jax.mlir.serialize_portable_artifact(
            module, target_version or hlo.get_current_version(), "sdy." in text)


def deserialize_portable(artifact: bytes) -> str:
    """The text of the module in a StableHLO portable artifact, with its locations (as
    JAX's ``mlir_module()`` shows them); ValueError when jaxlib cannot read it."""
    from jaxlib import _jax
    try:
        module = _jax.mlir.deserialize_portable_artifact(bytes(artifact), mlir_context())
    except Exception as e:  # jaxlib reports a bad artifact as RuntimeError or its own type
        raise ValueError(f"The StableHLO portable artifact could not be read: {e}") from None
    return module.operation.get_asm(enable_debug_info=True)


def module_functions(text: str, entry_name: str) -> str:
    """The ``func.func``s of the module ``text``, printed one after another, with its public
    ``@main`` made private and named ``entry_name`` (the caller renames them on splicing)."""
    module = ir.Module.parse(text, context=mlir_context())
    out = "\n".join(op.operation.get_asm(enable_debug_info=False)
                    for op in module.body.operations)
    out = re.sub(r"func\.func public @", "func.func private @", out)
    if re.search(rf"@{re.escape(entry_name)}\b", out):
        # A function of that name is already there (a module spliced into this one when it
        # was lowered): it takes a name not in the text, so that @main can take this one.
        n = 0
        while re.search(rf"@{re.escape(entry_name)}_inner{n}\b", out):
            n += 1
        out = re.sub(rf"@{re.escape(entry_name)}\b", f"@{entry_name}_inner{n}", out)
    return re.sub(r"@main\b", "@" + entry_name, out)


def main_signature(text: str) -> tuple[list, list]:
    """The argument and result types (MLIR type texts) of the module's ``@main``."""
    module = ir.Module.parse(text, context=mlir_context())
    main = ir.SymbolTable(module.operation)["main"]
    return [str(t) for t in main.type.inputs], [str(t) for t in main.type.results]


def refined_functions(text: str, arg_types: list, result_types: list, entry_name: str) -> str:
    """The functions of the shape-polymorphic module ``text`` refined for static argument
    types ``arg_types`` (MLIR type texts) with jaxlib's shape refinement, the entry
    (taking ``arg_types`` and returning ``result_types``) named ``entry_name``."""
    from jaxlib import _jax
    inner = module_functions(text, "plax_polymorphic_main")
    module = ir.Module.parse(text, context=mlir_context())
    main = ir.SymbolTable(module.operation)["main"]
    poly_in = [str(t) for t in main.type.inputs]
    poly_out = [str(t) for t in main.type.results]
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(arg_types))
    lines = [f"func.func public @main({args}) -> ({', '.join(result_types)}) {{"]
    casts = []
    for i, (t, p) in enumerate(zip(arg_types, poly_in)):
        lines.append(f"  %c{i} = stablehlo.convert %a{i} : ({t}) -> {p}")
        casts.append(f"%c{i}")
    lines.append(f"  %r:{len(poly_out)} = func.call @plax_polymorphic_main({', '.join(casts)}) "
                 f": ({', '.join(poly_in)}) -> ({', '.join(poly_out)})" if poly_out else
                 f"  func.call @plax_polymorphic_main({', '.join(casts)}) : "
                 f"({', '.join(poly_in)}) -> ()")
    rets = []
    for j, (t, p) in enumerate(zip(result_types, poly_out)):
        lines.append(f"  %o{j} = stablehlo.convert %r#{j} : ({p}) -> {t}")
        rets.append(f"%o{j}")
    lines.append(f"  func.return {', '.join(rets)} : {', '.join(result_types)}" if rets
                 else "  func.return")
    lines.append("}")
    wrapper = "module {\n" + "\n".join(lines) + "\n" + inner + "\n}\n"
    parsed = ir.Module.parse(wrapper, context=mlir_context())
    try:
        refined = _jax.mlir.refine_polymorphic_shapes(module_to_bytecode(parsed),
                                                      enable_shape_assertions=True,
                                                      validate_static_shapes=True)
    except Exception as e:
        raise ValueError(f"The exported module's polymorphic shapes could not be refined for "
                         f"arguments ({', '.join(arg_types)}): {e}") from None
    return module_functions(_bytecode_text(refined), entry_name)


def _bytecode_text(bytecode: bytes) -> str:
    return ir.Module.parse(bytecode, context=mlir_context()).operation.get_asm(
        enable_debug_info=False)


_MESH = re.compile(r"^\s*sdy\.mesh\s+@([\w$.]+)\s*=\s*(<.*>)\s*$", re.M)


def splice_functions(module, key, text: str, entry_name: str) -> str:
    """Add the functions ``text`` (one of them named ``entry_name``) to the ModuleBuilder
    ``module`` under fresh names, once per ``key``; returns the entry's name there. The
    text's meshes (``sdy.mesh``) join the module's declarations: one the module declares
    alike is shared, the others are declared under fresh names."""
    known = module.spliced.get(key)
    if known is not None:
        return known
    renames = {name: module.declare_mesh(name, body) for name, body in _MESH.findall(text)}
    text = _MESH.sub("", text).strip("\n")
    renames.update({old: module.unique_name(old) for old in _DEFINED.findall(text)})
    text = rename_symbols(text, renames)
    module.functions.append("  " + text.replace("\n", "\n  "))
    module.spliced[key] = renames[entry_name]
    module.spliced[("renames", key)] = renames
    return renames[entry_name]


def rename_symbols(text: str, renames: dict) -> str:
    """``text`` with its symbol references (``@name``) renamed as ``renames`` says."""
    return re.sub(r"@([\w$.]+)", lambda m: "@" + renames.get(m.group(1), m.group(1)), text)


def main_shardings(text: str) -> tuple[list, list]:
    """The ``sdy.sharding`` attributes (texts, None where absent) of the parameters and the
    results of the module's ``@main``."""
    module = ir.Module.parse(text, context=mlir_context())
    main = ir.SymbolTable(module.operation)["main"]

    def of(name, n):
        if name not in main.attributes:
            return [None] * n
        out = []
        for d in ir.ArrayAttr(main.attributes[name]):
            d = ir.DictAttr(d)
            out.append(str(d["sdy.sharding"]) if "sdy.sharding" in d else None)
        return out
    return (of("arg_attrs", len(main.type.inputs)), of("res_attrs", len(main.type.results)))
