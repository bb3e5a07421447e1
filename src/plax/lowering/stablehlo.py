"""Lowering: jaxpr -> StableHLO text.

Each primitive registers a rule next to its definition, for every platform or
for one (``plax.core.rules.register_lowering(prim, rule, platform=None)``):

    rule(ctx: RuleContext, *operands: str, **params) -> str | list[str]

``operands`` are SSA value names; ``ctx.avals_in``/``ctx.avals_out`` give the
types, and ``ctx.op(...)`` emits one operation. Ops are written in MLIR's
generic form, which every op accepts, so rules stay uniform.

``ctx.module_context`` (a ``ModuleContext``) says what the module is built
for: ``platform`` ("cpu", "cuda", ...: the platform of the device it is
compiled for), ``mesh`` and ``manual_axes`` (for manual-SPMD lowering; None
and empty for now). ``ctx.platform``, ``ctx.mesh`` and ``ctx.manual_axes`` are
shortcuts. The rule of an equation is looked up for the module's platform.
"""
from __future__ import annotations

import functools
import re
from typing import Callable, NamedTuple

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray, physical_aval
from plax.core.effects import (has_ordered_effects, jaxpr_effects, lowerable_effects,
                               ordered_effects_of)
from plax.core.jaxpr import Jaxpr, Literal
from plax.core.source_info import op_path, scope_path
from plax.core.rules import (lowering_rule, out_sharding_params, physical_lowering_rules,
                             platform_lowering_rules)
from plax.lowering.consts import host_value
from plax.runtime import platforms


_ELEMENT_TYPES = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "ui8", "uint16": "ui16", "uint32": "ui32", "uint64": "ui64",
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
    "complex64": "complex<f32>", "complex128": "complex<f64>", "int4": "i4", "uint4": "ui4",
    "float8_e4m3fn": "f8E4M3FN", "float8_e4m3fnuz": "f8E4M3FNUZ", "float8_e5m2": "f8E5M2",
    "float8_e5m2fnuz": "f8E5M2FNUZ", "float8_e4m3b11fnuz": "f8E4M3B11FNUZ",
    "float8_e3m4": "f8E3M4", "float8_e4m3": "f8E4M3", "float8_e8m0fnu": "f8E8M0FNU",
    "float4_e2m1fn": "f4E2M1FN", "int2": "i2", "uint2": "ui2",
}


def element_type(dtype) -> str:
    if dtype == dtypes.float0:  # carries no data: XLA holds it as (false) booleans, as in JAX
        return "i1"
    return _ELEMENT_TYPES[np.dtype(dtype).name]


class AbstractToken:
    """The type of the ordered-effect token (``!stablehlo.token``) in lowering rules, and of
    ``lax.create_token``'s values in jaxprs (so it answers what code walking avals reads)."""

    shape, dtype, ndim = (), None, 0
    _sharding, weak_type = None, False

    def __repr__(self):
        return "Token"

    def str_short(self) -> str:
        return "Token"


abstract_token = AbstractToken()


def tensor_type(aval: ShapedArray) -> str:
    """The StableHLO type of values of ``aval``: ``tensor<8x4xf32>``, or the token's type."""
    if aval is abstract_token:
        return "!stablehlo.token"
    if hasattr(aval, "mlir_type"):  # (a type of its own: a pinned buffer's memref)
        return aval.mlir_type()
    return _tensor_type_of(aval.shape, aval.dtype)


@functools.lru_cache(maxsize=4096)
def _tensor_type_of(shape: tuple, dtype) -> str:
    # Keyed on all the text depends on (not on the aval: a hit then costs no aval comparison).
    if isinstance(dtype, dtypes.ExtendedDType):  # a PRNG key is held as its uint32 words
        shape, dtype = shape + dtype.physical_shape, dtype.physical_dtype
    dims = "".join(f"{d}x" if type(d) is int else "?x" for d in shape)  # ?: a symbolic size
    return f"tensor<{dims}{element_type(dtype)}>"


def i64_array(values) -> str:
    """An ``array<i64: ...>`` attribute."""
    values = list(values)
    return "array<i64" + (": " + ", ".join(str(int(v)) for v in values) if values else "") + ">"


def dense_elements(value, aval: ShapedArray) -> str:
    """A ``dense<...> : tensor<...>`` attribute holding ``value`` exactly."""
    if aval.dtype == dtypes.float0:
        aval, value = aval.update(dtype=np.dtype(np.bool_)), np.zeros(aval.shape, np.bool_)
    aval = physical_aval(aval)  # a key constant: ``value`` is its physical data
    arr = np.asarray(value, dtype=aval.dtype)
    ttype = tensor_type(aval)
    flat = arr.reshape(-1)
    if flat.size == 0:
        return f"dense<> : {ttype}"
    if not _has_nan(flat) and (flat == flat[0]).all():
        arr = flat = flat[:1]  # a splat: one element is enough
    if aval.dtype == np.bool_ or aval.dtype in (np.dtype(dtypes.int4), np.dtype(dtypes.uint4)):
        # Sub-byte and boolean types are written as numbers, not as raw bytes.
        items = ["true" if v else "false" for v in flat] if aval.dtype == np.bool_ else \
            [str(int(v)) for v in flat.astype(np.int8)]
        if flat.size == 1:
            return f"dense<{items[0]}> : {ttype}"
        return f"dense<{_nest(items, arr.shape)}> : {ttype}"
    data = np.ascontiguousarray(flat).astype(flat.dtype.newbyteorder("<")).tobytes()
    return f'dense<"0x{data.hex().upper()}"> : {ttype}'


def _has_nan(arr) -> bool:
    return arr.dtype.kind in "fc" and bool(np.isnan(arr).any())


def _nest(items: list, shape) -> str:
    if len(shape) <= 1:
        return "[" + ", ".join(items) + "]"
    step = len(items) // shape[0] if shape[0] else 0
    return "[" + ", ".join(_nest(items[i * step:(i + 1) * step], shape[1:])
                           for i in range(shape[0])) + "]"


def compare_type(dtype) -> str:
    """StableHLO's comparison_type for values of ``dtype``."""
    if dtypes.is_inexact(dtype):
        return "FLOAT"
    if dtypes.is_unsigned(dtype) or dtypes.is_bool(dtype):
        return "UNSIGNED"
    return "SIGNED"


canonical_platform = platforms.canonical  # the lowering name of a platform ("gpu": "cuda")


def platform_of(device) -> str:
    """The platform a computation compiled for ``device`` is lowered for ("cpu", "cuda", ...)."""
    name = str(getattr(device, "platform", "cpu")).lower()
    if name == "gpu":  # PJRT names every GPU "gpu"; the client's version says whose
        client = getattr(device, "client", None)
        version = str(getattr(client, "platform_version", "") or "").lower()
        return "rocm" if "rocm" in version else "cuda"
    return name


class ModuleContext:
    """What the lowering of one module knows beyond the jaxpr: where it will run.

    ``module`` is the ``ModuleBuilder`` collecting the functions; ``platform``
    the platform rules are picked for; ``mesh`` the device mesh of manual-SPMD
    lowering (None when there is none) and ``manual_axes`` the mesh axes that
    are manual in the function being lowered (empty when none are).
    """

    __slots__ = ("module", "platform", "mesh", "manual_axes")

    def __init__(self, module: "ModuleBuilder", platform: str = "cpu", mesh=None,
                 manual_axes=frozenset()):
        self.module = module
        self.platform = canonical_platform(platform)
        self.mesh = mesh
        self.manual_axes = frozenset(manual_axes)

    def replace(self, **changes) -> "ModuleContext":
        """A context for the same module with some fields changed (e.g. ``manual_axes``)."""
        fields = {k: getattr(self, k) for k in self.__slots__}
        unknown = set(changes) - set(fields)
        if unknown:
            raise TypeError(f"ModuleContext has no field(s) {sorted(unknown)}")
        fields.update(changes)
        return ModuleContext(**fields)

    def __repr__(self):
        return (f"ModuleContext(module={self.module.name!r}, platform={self.platform!r}, "
                f"mesh={self.mesh!r}, manual_axes={set(self.manual_axes) or '{}'})")


def _module_context(module) -> ModuleContext:
    """``module`` (a ModuleContext, or a ModuleBuilder: its own context) as a ModuleContext."""
    if isinstance(module, ModuleContext):
        return module
    return module.context


_TARGET = re.compile(r'(?:^|, )call_target_name = "((?:[^"\\]|\\.)*)"')
_BARE_SYMBOL = re.compile(r"[A-Za-z_][\w.$-]*")


def _custom_call_target(op: str, props: str, attrs: str):
    """For a ``stablehlo.custom_call``: its target as a symbol (``@name``) and ``props`` and
    ``attrs`` without it; else None."""
    if op != "stablehlo.custom_call":
        return None
    for k, text in enumerate((props, attrs)):
        found = _TARGET.search(text)
        if found:
            name = found.group(1)
            symbol = "@" + (name if _BARE_SYMBOL.fullmatch(name) else f'"{name}"')
            rest = (text[:found.start()] + text[found.end():]).lstrip(", ")
            return (symbol, rest, attrs) if k == 0 else (symbol, props, rest)
    return None


def _with_frontend_attributes(line: str, attributes) -> str:
    """``line`` (the last line of an op as ``FunctionBuilder.emit`` writes it) with
    ``attributes`` added to its ``mhlo.frontend_attributes``."""
    cut = line.find(" : (")
    before, after = line[:cut], line[cut:]
    existing = "mhlo.frontend_attributes = {"
    at = before.find(existing)
    if at >= 0:
        start = at + len(existing)
        end = before.index("}", start)
        present = {part.split("=")[0].strip() for part in before[start:end].split(",")}
        extra = [f"{k} = {_quote(v)}" for k, v in attributes if k not in present]
        if not extra:
            return line
        glue = ", " if end > start else ""
        return before[:start] + ", ".join(extra) + glue + before[start:] + after
    tagged = existing + ", ".join(f"{k} = {_quote(v)}" for k, v in attributes) + "}"
    if before.endswith("}") and not before.endswith("}>"):  # it has an attribute dictionary
        depth, j = 0, len(before) - 1
        while j >= 0:
            depth += {"}": 1, "{": -1}.get(before[j], 0)
            if depth == 0:
                break
            j -= 1
        return before[:j + 1] + tagged + ", " + before[j + 1:] + after
    return before + " {" + tagged + "}" + after


class FunctionBuilder:
    """Collects the body of one ``func.func``.

    ``module`` is a ``ModuleContext``, or a ``ModuleBuilder`` (then its context).
    """

    def __init__(self, module):
        self.module_context = _module_context(module)
        self.module = self.module_context.module
        self.lines: list[str] = []
        self.counter = 0
        self.loc = ""  # the location attached to ops being emitted, e.g. loc("f/sin")
        self.scope: tuple = ()  # name-stack prefix of this function's ops (a jit's call site)
        self.eqn_scope: tuple = ()  # full name stack of the equation being lowered
        # The equation's frontend attributes (set_xla_metadata, compute_on): every op
        # emitted for it carries them as ``mhlo.frontend_attributes``.
        self.frontend_attributes: tuple = ()
        # The current ordered-effect token (an SSA name) while lowering a function whose
        # jaxpr has ordered effects: each ordered op takes it and replaces it with its own.
        self.token: str | None = None

    def fresh(self) -> str:
        self.counter += 1
        return f"%{self.counter - 1}"

    def emit(self, op: str, operands, operand_types, result_types, props: str = "",
             attrs: str = "", regions: str = "") -> list[str]:
        results = [self.fresh() for _ in result_types]
        lhs = (", ".join(results) + " = ") if results else ""
        if len(results) > 1:
            base = results[0]
            lhs = f"{base}:{len(results)} = "
            results = [f"{base}#{i}" for i in range(len(results))]
        target = _custom_call_target(op, props, attrs) if not regions else None
        if target is not None:  # (printed as MLIR prints it: ``custom_call @name(...)``)
            symbol, props, attrs = target
            text = f'{lhs}stablehlo.custom_call {symbol}({", ".join(operands)})'
            attrs = ", ".join(filter(None, [props, attrs]))
            props = ""
        else:
            text = f'{lhs}"{op}"({", ".join(operands)})'
        if props:
            text += f" <{{{props}}}>"
        if regions:
            text += f" ({regions})"
        if self.frontend_attributes:
            tagged = "mhlo.frontend_attributes = {" + ", ".join(
                f"{k} = {_quote(v)}" for k, v in self.frontend_attributes) + "}"
            attrs = f"{attrs}, {tagged}" if attrs else tagged
        if attrs:
            text += f" {{{attrs}}}"
        text += f" : ({', '.join(operand_types)}) -> "
        text += (f"({', '.join(result_types)})" if len(result_types) != 1 else result_types[0])
        if self.loc:
            text += " " + self.loc
        self.lines.append(text)
        return results

    def tag_defining_op(self, value: str, attributes) -> bool:
        """Add ``attributes`` ((name, str) pairs) to the ``mhlo.frontend_attributes`` of the
        op of this function that defined ``value`` (names it already has keep their
        value). False when no op here defines it (a function argument)."""
        base = value.split("#")[0]
        for i in range(len(self.lines) - 1, -1, -1):
            entry = self.lines[i]
            if not (entry.startswith(base + " = ") or entry.startswith(base + ":")):
                continue
            head, sep, last = entry.rpartition("\n")  # an op with regions ends on its last line
            self.lines[i] = head + sep + _with_frontend_attributes(last, attributes)
            return True
        return False


class HostTransferCallback(NamedTuple):
    """A host callback reached by host transfers (on TPUs): the program sends its operands
    on ``send_channels`` and receives its results on ``recv_channels``; ``fn`` takes the
    sent arrays and returns those to receive. ``sent`` and ``received`` are their
    (shape, dtype) pairs. The runtime makes it jaxlib's host callback when it compiles."""
    fn: Callable
    sent: tuple
    received: tuple
    send_channels: tuple
    recv_channels: tuple


class ModuleBuilder:
    """Collects the functions of one module; ``context`` is the module's ``ModuleContext``."""

    def __init__(self, name: str = "plax_module", platform: str = "cpu", mesh=None,
                 manual_axes=frozenset()):
        self.name = name
        self.functions: list[str] = []
        self.names: set = {"main"}
        self.context = ModuleContext(self, platform, mesh, manual_axes)
        self.preamble: list[str] = []  # module-level declarations (``sdy.mesh @mesh = ...``)
        self.meshes: dict = {}  # Mesh -> its symbol (``mesh``, ``mesh_1``, ...)
        self.devices = None  # the SPMD program's devices, in partition order
        self.channels = 0  # channel handles handed to collectives so far
        self.host_callbacks: list = []  # Python callables of host callbacks, by index
        # Functions built outside this builder and added to it (lowering rules written with
        # jaxlib's MLIR bindings), by what built them: key -> the name given here.
        self.spliced: dict = {}
        # prim -> rule used instead of the registered ones in this module (export's
        # _override_lowering_rules)
        self.override_rules: dict = {}

    def add_host_callback(self, fn) -> int:
        """Register ``fn`` to be handed to XLA with the executable; returns its index."""
        self.host_callbacks.append(fn)
        return len(self.host_callbacks) - 1

    def maximal_mesh_symbol(self, device_index: int = 0) -> str:
        """A mesh of no axes holding only the program's device ``device_index``: an op
        annotated with it runs on that device alone (a host callback in an SPMD program)."""
        name = f"maximal_mesh_{device_index}"
        declaration = f"sdy.mesh @{name} = <[], device_ids=[{device_index}]>"
        if declaration not in self.preamble:
            self.preamble.append(declaration)
        return name

    def next_channel(self) -> int:
        """A channel handle no other collective of this module uses."""
        self.channels += 1
        return self.channels

    def next_sharding_group(self) -> int:
        """A Shardy sharding-group id no other group of this module uses."""
        self.sharding_groups = getattr(self, "sharding_groups", -1) + 1
        return self.sharding_groups

    def mesh_symbol(self, mesh) -> str:
        """The symbol of ``mesh`` in this module, declaring it (``sdy.mesh``) on first use.
        An AbstractMesh (of a type's sharding) names the concrete mesh of its shape that the
        module already uses, or else the context mesh."""
        if getattr(mesh, "devices", None) is None:
            known = [m for m in self.meshes if m.abstract_mesh == mesh]
            if known:
                mesh = known[0]
            else:
                from plax.sharding.named import concrete_sharding
                mesh = concrete_sharding(self._abstract_sharding(mesh)).mesh
        name = self.meshes.get(mesh)
        if name is None:
            axes = ", ".join(f'"{n}"={s}' for n, s in mesh.shape.items())
            flat = list(mesh.devices.flat)
            order = list(range(len(flat))) if self.devices is None else \
                [self.devices.index(d) for d in flat]
            ids = "" if order == list(range(len(order))) else \
                f", device_ids=[{', '.join(map(str, order))}]"
            name = self.meshes[mesh] = self._declare_mesh(
                "mesh" if not self.meshes else f"mesh_{len(self.meshes)}", f"<[{axes}]{ids}>")
        return name

    def declare_mesh(self, name: str, body: str) -> str:
        """The symbol of the mesh ``body`` (``<["x"=2]>``, as ``sdy.mesh`` declares it) in
        this module: one already declared the same, else ``name`` made unique, declared."""
        for line in self.preamble:
            head, _, known = line.partition(" = ")
            if head.startswith("sdy.mesh @") and known == body:
                return head[len("sdy.mesh @"):]
        return self._declare_mesh(name, body)

    def _declare_mesh(self, name: str, body: str) -> str:
        name = self.unique_name(name)
        self.preamble.append(f"sdy.mesh @{name} = {body}")
        return name

    @staticmethod
    def _abstract_sharding(mesh):
        from plax.sharding.named import NamedSharding
        return NamedSharding(mesh)

    def unique_name(self, base: str) -> str:
        """A function name not yet used in this module, derived from ``base``."""
        clean = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "f"
        name, i = clean, 0
        while name in self.names:
            i += 1
            name = f"{clean}_{i}"
        self.names.add(name)
        return name

    def text(self, attrs: str = "") -> str:
        head = f"module @{self.name}" + (f" attributes {{{attrs}}}" if attrs else "")
        return head + " {\n" + "".join(f"  {d}\n" for d in self.preamble) + \
            "\n".join(self.functions) + "\n}\n"


# How RuleContext.broadcast broadcasts to a shape with symbolic sizes (set by plax.export,
# which makes such shapes): ``(ctx, x, aval_in, aval_out, dims) -> value``.
symbolic_broadcast = None
# The value (``tensor<Nxi64>``) of a shape with symbolic sizes, set by plax.export as well:
# ``(ctx, shape) -> value`` (custom calls take their results' shapes so).
symbolic_shape_value = None


class RuleContext:
    """What a lowering rule sees: its types, and a way to emit ops."""

    __slots__ = ("fn", "avals_in", "avals_out")

    def __init__(self, fn: FunctionBuilder, avals_in, avals_out):
        self.fn = fn
        self.avals_in = avals_in
        self.avals_out = avals_out

    @property
    def module_context(self) -> ModuleContext:
        return self.fn.module_context

    @property
    def platform(self) -> str:
        return self.fn.module_context.platform

    @property
    def mesh(self):
        return self.fn.module_context.mesh

    @property
    def manual_axes(self) -> frozenset:
        return self.fn.module_context.manual_axes

    def op(self, name, operands, operand_avals=None, result_avals=None, props="", attrs="",
           regions="") -> list[str]:
        """Emit ``name`` on SSA ``operands``; types default to this equation's."""
        in_avals = self.avals_in if operand_avals is None else operand_avals
        out_avals = self.avals_out if result_avals is None else result_avals
        return self.fn.emit(name, operands, [tensor_type(a) for a in in_avals],
                            [tensor_type(a) for a in out_avals], props, attrs, regions)

    def op1(self, name, operands, operand_avals=None, result_aval=None, **kw) -> str:
        """Like ``op`` for an op with a single result."""
        out = [self.avals_out[0] if result_aval is None else result_aval]
        return self.op(name, operands, operand_avals, out, **kw)[0]

    def constant(self, value, aval: ShapedArray) -> str:
        return self.fn.emit("stablehlo.constant", [], [], [tensor_type(aval)],
                            props=f"value = {dense_elements(value, aval)}")[0]

    def compare(self, direction: str, x: str, y: str, aval: ShapedArray, kind: str | None = None) -> str:
        """``x <direction> y`` elementwise (EQ, NE, LT, LE, GT, GE) on operands of type ``aval``."""
        return self.op1("stablehlo.compare", [x, y], [aval, aval], aval.update(dtype=np.bool_),
                        props=f"comparison_direction = #stablehlo<comparison_direction {direction}>, "
                              f"compare_type = #stablehlo<comparison_type {kind or compare_type(aval.dtype)}>")

    def select(self, pred: str, on_true: str, on_false: str, aval: ShapedArray) -> str:
        """``on_true`` where ``pred`` else ``on_false``; all of shape ``aval.shape``."""
        return self.op1("stablehlo.select", [pred, on_true, on_false],
                        [aval.update(dtype=np.bool_), aval, aval], aval)

    def convert(self, x: str, aval_in: ShapedArray, aval_out: ShapedArray) -> str:
        if aval_in.dtype == aval_out.dtype:
            return x
        return self.op1("stablehlo.convert", [x], [aval_in], aval_out)

    def broadcast(self, x: str, aval_in: ShapedArray, aval_out: ShapedArray, dims=()) -> str:
        if aval_in.shape == aval_out.shape:
            return x
        if symbolic_broadcast is not None and not all(type(d) is int for d in aval_out.shape):
            return symbolic_broadcast(self, x, aval_in, aval_out, dims)
        return self.op1("stablehlo.broadcast_in_dim", [x], [aval_in], aval_out,
                        props=f"broadcast_dimensions = {i64_array(dims)}")

    def iota(self, aval: ShapedArray, dimension: int) -> str:
        """Indices along ``dimension`` of the shape of ``aval`` (of its dtype)."""
        props = f"iota_dimension = {int(dimension)} : i64"
        if symbolic_shape_value is not None and not all(type(d) is int for d in aval.shape):
            n = len(aval.shape)
            return self.op1("stablehlo.dynamic_iota", [symbolic_shape_value(self, aval.shape)],
                            [ShapedArray((n,), np.int64)], aval, props=props)
        return self.op1("stablehlo.iota", [], [], aval, props=props)

    def region(self, arg_avals, build, *, terminator: str = "stablehlo.return",
               module_context=None, scope: tuple = ()) -> str:
        """A region ``^bb0(args): body; stablehlo.return`` built by ``build(ctx, *args)``
        (``terminator`` names another return op; ``module_context`` lowers the body under
        other manual axes, for shard_map).

        Its ops carry the enclosing equation's location, as the ops of the region's owner
        do; the equations of a body jaxpr lowered in it (whose name stacks are relative to
        their body) are scoped under the enclosing equation's scope and ``scope`` (e.g.
        ``("while", "body")``).
        """
        outer = self.fn
        sub = FunctionBuilder(module_context or outer.module_context)
        base = outer.counter  # reserved, so that a region nested in this one names its own
        sub.counter = outer.counter = base + 1
        # (the equation's scope closes before the region's names: ``vmap()/cond/...``)
        sub.scope = (scope_path(outer.eqn_scope), *scope) if outer.eqn_scope else tuple(scope)
        sub.eqn_scope, sub.loc = outer.eqn_scope, outer.loc
        sub.frontend_attributes = outer.frontend_attributes
        sub.token = outer.token  # a region sees the enclosing token; its owner threads it out
        args = [f"%arg_r{base}_{i}" for i in range(len(arg_avals))]
        inner = RuleContext(sub, arg_avals, [])
        outs, out_avals = build(inner, *args)
        self.fn.counter = sub.counter
        sig = ", ".join(f"{a}: {tensor_type(t)}" for a, t in zip(args, arg_avals))
        ret = f'"{terminator}"({", ".join(outs)}) : ({", ".join(tensor_type(a) for a in out_avals)}) -> ()'
        body = "\n".join("    " + line for line in sub.lines + [ret])
        if not arg_avals:  # an entry block without arguments needs no label
            return "{\n" + body + "\n}"
        return "{\n  ^bb0(" + sig + "):\n" + body + "\n}"


def missing_rule_error(prim, platform: str) -> NotImplementedError:
    """The error for a primitive without a lowering rule on ``platform`` (JAX's words: a
    primitive JAX does not lower for TPUs, such as ``eig``, raises this there)."""
    others = sorted(platform_lowering_rules.get(prim, {}))
    has = f" (it has lowering rules for: {', '.join(others)})" if others else ""
    return NotImplementedError(
        f"MLIR translation rule for primitive {prim.name!r} not found for platform "
        f"{platform}{has}")


def inlines_calls(fn: FunctionBuilder) -> bool:
    """Whether a call lowered into ``fn`` inlines its body rather than calling a private
    function: so in a shape-polymorphic export, where bodies read the dimension variables
    that only the exported function has."""
    return bool(getattr(fn.module, "dim_values", None))


def lower_jaxpr_body(fn: FunctionBuilder, jaxpr: Jaxpr, args, *,
                     inherit_location: bool = False) -> list[str]:
    """Emit the equations of ``jaxpr`` into ``fn``; ``args`` name constvars then invars.

    Each equation's rule is the one for ``fn``'s platform. Its ops carry the
    equation's location, unless ``inherit_location``: then they keep the location
    (and scope) ``fn`` has now, that of the equation being lowered in their place.
    """
    env = dict(zip(list(jaxpr.constvars) + list(jaxpr.invars), args))
    platform = fn.module_context.platform

    def read(v) -> str:
        if isinstance(v, Literal):
            return RuleContext(fn, [], []).constant(v.val, v.aval)
        return env[v]

    saved = fn.loc, fn.eqn_scope, fn.frontend_attributes
    overrides = fn.module.override_rules
    try:
        for eqn in jaxpr.eqns:
            if not inherit_location:
                info = eqn.source_info
                fn.eqn_scope = fn.scope + (info.name_stack if info else ())
                fn.loc = location(eqn, fn.scope)
                fn.frontend_attributes = info.frontend_attributes if info else ()
            rule = lowering_rule(eqn.primitive, platform) if eqn.primitive not in overrides \
                else overrides[eqn.primitive]
            if eqn.primitive in physical_lowering_rules and _has_extended(eqn):
                rule = physical_lowering_rules[eqn.primitive]
            if rule is None:
                raise missing_rule_error(eqn.primitive, platform)
            ctx = RuleContext(fn, [v.aval for v in eqn.invars], [v.aval for v in eqn.outvars])
            outs = rule(ctx, *[read(v) for v in eqn.invars], **eqn.params)
            if isinstance(outs, str):
                outs = [outs]
            pinned = out_sharding_params.get(eqn.primitive)
            if pinned is not None and eqn.params.get(pinned) is not None:
                # An out_sharding= chosen by the user: XLA's partitioner must follow it.
                outs = [constrain_sharding(ctx, o, v.aval, eqn.params[pinned])
                        for o, v in zip(outs, eqn.outvars)]
            for v, o in zip(eqn.outvars, outs):
                env[v] = o
    finally:
        fn.loc, fn.eqn_scope, fn.frontend_attributes = saved
    return [read(v) for v in jaxpr.outvars]


def constrain_sharding(ctx, value: str, aval, sharding) -> str:
    """``value`` (of type ``aval``) pinned to ``sharding`` (``sdy.sharding_constraint``)."""
    attr = sharding.shardy_attribute(physical_aval(aval).ndim,
                                     ctx.fn.module.mesh_symbol(sharding.mesh))
    return ctx.op1("sdy.sharding_constraint", [value], [aval], aval, props=f"sharding = {attr}")


def _has_extended(eqn) -> bool:
    return any(dtypes.is_extended(v.aval.dtype) for v in (*eqn.invars, *eqn.outvars))


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def location(eqn, prefix: tuple = ()) -> str:
    """``loc("scope/prim"("file":line:column))``: the op's name-stack path and the user's
    source line and column (0 when unknown)."""
    info = eqn.source_info
    if info is None:
        return f"loc({_quote(op_path(prefix, eqn.primitive.name))})"
    name = _quote(op_path((*prefix, *info.name_stack), eqn.primitive.name))
    if info.file is None:
        return f"loc({name})"
    return f"loc({name}({_quote(info.file)}:{info.line}:{info.column or 0}))"


def define_function(module, name: str, jaxpr: Jaxpr, public: bool = False,
                    arg_attrs=None, scope: tuple = (), result_attrs=None,
                    consts=None) -> None:
    """Add ``func.func @name`` computing ``jaxpr`` (parameters: constvars, then invars; with
    ``consts``, the constvars' values, which the body holds as constants instead).

    ``module`` is the ``ModuleContext`` to lower under, or a ``ModuleBuilder``
    (lowered under its own context). ``scope`` prefixes the name-stack path of
    every op's location.
    """
    fn = FunctionBuilder(module)
    module = fn.module
    fn.scope = scope
    params = list(jaxpr.invars) if consts is not None else \
        list(jaxpr.constvars) + list(jaxpr.invars)
    arg_names = [f"%arg{i}" for i in range(len(params))]
    threaded = has_ordered_effects(jaxpr)
    if threaded:  # an ordered-effect token comes in first and goes out first
        fn.token = "%arg_token"
    const_names = [] if consts is None else [
        RuleContext(fn, [], []).constant(host_value(c), v.aval)
        for v, c in zip(jaxpr.constvars, consts)]
    outs = lower_jaxpr_body(fn, jaxpr, const_names + arg_names)
    attrs = arg_attrs or [""] * len(params)
    sig = ", ".join(f"{a}: {tensor_type(v.aval)}" + (f" {{{at}}}" if at else "")
                    for a, v, at in zip(arg_names, params, attrs))
    out_types = [tensor_type(v.aval) for v in jaxpr.outvars]
    rattrs = result_attrs or [""] * len(out_types)
    if threaded:
        sig = "%arg_token: !stablehlo.token" + (", " + sig if sig else "")
        outs, out_types, rattrs = [fn.token, *outs], ["!stablehlo.token", *out_types], \
            ["", *rattrs]
    results = ", ".join(t + (f" {{{at}}}" if at else "") for t, at in zip(out_types, rattrs))
    body = "\n".join("    " + line.replace("\n", "\n    ") for line in fn.lines)
    ret = f"    func.return {', '.join(outs)} : {', '.join(out_types)}" if outs else "    func.return"
    text = (f"  func.func {'public' if public else 'private'} @{name}({sig}) -> ({results}) {{\n"
            + (body + "\n" if body else "") + ret + "\n  }")
    # The public entry comes first (as in JAX's modules), the functions it calls after it.
    if public:
        module.functions.insert(0, text)
    else:
        module.functions.append(text)


def lower_jaxpr_to_module(jaxpr: Jaxpr, name: str = "main", module_name: str = "plax_module",
                          num_partitions: int = 1, num_replicas: int = 1,
                          arg_attrs=None, *, platform: str = "cpu", mesh=None,
                          manual_axes=frozenset(), result_attrs=None, devices=None,
                          consts=None) -> str:
    """A complete StableHLO module whose public ``@main`` takes constvars then invars (only
    the invars when ``consts``, the constvars' values, are given: they are constants then).

    Rules are picked for ``platform`` (that of the device the module is compiled
    for); ``mesh`` and ``manual_axes`` are what rules see as ``ctx.mesh`` and
    ``ctx.manual_axes``. ``arg_attrs``/``result_attrs`` are attribute texts of ``@main``'s
    parameters and results (donation), or functions ``attr(module) -> text`` for those
    that name a mesh (``sdy.sharding``); ``devices`` are an SPMD program's devices.
    """
    refused = lowerable_effects.filter_not_in(jaxpr_effects(jaxpr))
    if refused:
        raise ValueError(f"Cannot lower jaxpr with effects: {set(refused)} (an effect type "
                         "a library defines is lowered once it is added to "
                         "jax._src.effects.lowerable_effects)")
    module = ModuleBuilder("".join(c if c.isalnum() or c == "_" else "_" for c in module_name),
                           platform=platform, mesh=mesh, manual_axes=manual_axes)
    module.devices = None if devices is None else list(devices)
    arg_attrs, result_attrs = ([a(module) if callable(a) else a for a in attrs]
                               if attrs is not None else None
                               for attrs in (arg_attrs, result_attrs))
    define_function(module.context, name, jaxpr, public=True, arg_attrs=arg_attrs,
                    result_attrs=result_attrs, consts=consts)
    mattrs = f"mhlo.num_partitions = {num_partitions} : i32, mhlo.num_replicas = {num_replicas} : i32"
    return ModuleText(module.text(mattrs), module.host_callbacks,
                      tuple(ordered_effects_of(jaxpr_effects(jaxpr))))


class ModuleText(str):
    """A module's StableHLO text, with what compiling and running it needs besides the
    text: the Python callables of its host callbacks (handed to XLA at compile time, by
    index) and its ordered effects: with some, ``@main`` takes and returns an ordered-effect
    token first (``takes_token``)."""

    host_callbacks: tuple = ()
    ordered_effects: tuple = ()

    def __new__(cls, text: str, host_callbacks=(), ordered_effects=()):
        self = super().__new__(cls, text)
        self.host_callbacks = tuple(host_callbacks)
        self.ordered_effects = tuple(ordered_effects)
        return self

    @property
    def takes_token(self) -> bool:
        return bool(self.ordered_effects)
