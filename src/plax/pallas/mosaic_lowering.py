"""A Pallas kernel jaxpr as a Mosaic TPU module (MLIR text), the form a ``tpu_custom_call``
carries; the rules per primitive are in ``mosaic_rules_*`` (table ``mosaic_lowering_rules``).

The module holds the kernel, ``func.func @<name>``, whose arguments are (as Mosaic expects
them) one ``i32`` per grid axis, the scalar-prefetch arrays (memrefs in SMEM), one memref
per input and output block (in VMEM unless its BlockSpec names another memory space; a
squeezed block dimension stays as a dimension of size 1) and the scratch buffers. Its
attributes tell Mosaic how to run it: ``iteration_bounds`` (the grid),
``dimension_semantics`` (parallel / arbitrary per axis), ``scalar_prefetch`` and
``scratch_operands`` (how many), ``window_params`` (per block: its shape,
``window_bounds``, and ``transform_indices``, the function ``@transform_<k>`` computing its
block indices from the grid indices and the prefetch memrefs: the BlockSpec's index map),
and ``tpu.core_type``. Mosaic pipelines the blocks between HBM and VMEM itself. A mesh
kernel (``GridMapping.unpipelined``: ``pl.core_map``, ``pl.kernel``) has JAX's trivial
windows instead: ``{}`` in ANY, HBM and semaphore memory, else only a ``transform_indices``
affine map to block 0, and no transform functions.

Ops are written in MLIR's generic form. A rule receives ``MosaicContext`` and its operands:
``Value`` (an SSA value: a scalar, or a vector for a shaped array), ``RefValue`` (a memref)
or ``Lit`` (a jaxpr literal, kept static until a rule materialises it with ``ctx.value``),
and returns its results' ``Value``s. Errors raise ``LoweringException`` naming the kernel,
the primitive and the user's source line.

Typed PRNG keys are their uint32 data in a kernel, as in JAX: a reference of keys is a
memref with the key's data dimensions last, and a key value is a vector of its data, but a
``"pallas_tpu"`` key (``key_kind`` "words") is its scalar words (``KeyWords``), read one by
one from SMEM, which ``tpu.prng_set_seed_32`` takes (``mosaic_rules_keys``).
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.config import config
from plax.core.avals import ShapedArray
from plax.core.jaxpr import Literal
from plax.core.refs import AbstractRef
from plax.core.rules import mosaic_lowering_rules
from plax.lowering.inline import trace_rule_fn
from plax.pallas import tpu_prng

__all__ = ["LoweringException", "UnimplementedPrimitiveError", "UnsupportedInKernelError",
           "Value", "RefValue", "Lit", "KeyWords", "MosaicContext", "KernelFunction",
           "element_type", "value_type", "memref_type", "kernel_module_text",
           "memory_space_name", "lower_jaxpr", "semaphore_type", "key_kind", "physical"]


class LoweringException(Exception):
    """A Pallas kernel could not be lowered to Mosaic (as ``pltpu.LoweringException``)."""


class UnsupportedInKernelError(LoweringException, NotImplementedError):
    """A kernel asks for what the Mosaic TPU backend does not support (a NotImplementedError,
    as JAX raises it)."""


class UnimplementedPrimitiveError(UnsupportedInKernelError):
    """A primitive of the kernel has no Mosaic lowering rule."""


# --- types ----------------------------------------------------------------------------------
_ELEMENT = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int32": "i32",
            "uint32": "i32", "int16": "i16", "uint16": "i16", "int8": "i8", "uint8": "i8",
            "bool": "i1", "float8_e4m3fn": "f8E4M3FN", "float8_e5m2": "f8E5M2",
            "float8_e4m3b11fnuz": "f8E4M3B11FNUZ", "float8_e4m3fnuz": "f8E4M3FNUZ",
            "float8_e5m2fnuz": "f8E5M2FNUZ", "float8_e4m3": "f8E4M3", "float8_e3m4": "f8E3M4",
            "float8_e8m0fnu": "f8E8M0FNU", "float4_e2m1fn": "f4E2M1FN", "int4": "i4",
            "uint4": "i4", "int2": "i2", "uint2": "i2"}


def element_type(dtype) -> str:
    """The MLIR element type of ``dtype`` inside a kernel (integers are signless)."""
    name = np.dtype(dtype).name
    if name not in _ELEMENT:
        raise LoweringException(f"The dtype {name} is not supported in Pallas TPU kernels "
                                "(64-bit and complex types have no Mosaic form).")
    return _ELEMENT[name]


def value_type(aval) -> str:
    """A value's type: a scalar type for shape (), else a vector."""
    if not aval.shape:
        return element_type(aval.dtype)
    return f"vector<{'x'.join(map(str, aval.shape))}x{element_type(aval.dtype)}>"


_SEMAPHORE_TYPES = {"semaphore": "!tpu.semaphore", "barrier_semaphore": "!tpu.semaphore",
                    "dma_semaphore": "!tpu.dma_semaphore"}


def semaphore_type(dtype) -> str | None:
    """The Mosaic type of a semaphore dtype (pltpu's semaphore, dma_semaphore, ...), else
    None."""
    if not dtypes.issubdtype(dtype, dtypes.extended):
        return None
    return _SEMAPHORE_TYPES.get(getattr(getattr(dtype, "type", None), "__name__", None))


def key_kind(dtype) -> str | None:
    """How a kernel holds values of ``dtype``: None (not a PRNG key), "data" (a key's uint32
    data), "words" (a ``"pallas_tpu"`` key's scalar words) or "stateful" (the hardware
    PRNG's state: nothing)."""
    if not isinstance(dtype, dtypes.KeyType):
        return None
    return tpu_prng.KERNEL_IMPLS.get(dtype._impl.name, "data")


def physical(shape, dtype) -> tuple:
    """``(shape, dtype)`` as stored: a PRNG key's data dimensions appended, its uint32."""
    if isinstance(dtype, dtypes.KeyType):
        return tuple(shape) + tuple(dtype.physical_shape), dtype.physical_dtype
    return tuple(shape), dtype


def memref_type(shape, dtype, space: str) -> str:
    """``memref<shape x element, #tpu.memory_space<space>>`` (booleans are stored as i32)."""
    elem = semaphore_type(dtype)
    if elem is None:
        elem = "i32" if np.dtype(dtype) == np.bool_ else element_type(dtype)
    dims = "".join(f"{d}x" for d in shape)
    return f"memref<{dims}{elem}, #tpu.memory_space<{space}>>"


def memory_space_name(space, default: str = "vmem") -> str:
    """The Mosaic name of a memory space (pl.ANY, pltpu.VMEM, ...; None or pl's DEFAULT:
    ``default``)."""
    if space is None or str(space) == "default":
        return default
    name = str(getattr(space, "value", space))
    return "smem" if name in ("error", "index", "key") else name


def is_unsigned(dtype) -> bool:
    return dtypes.issubdtype(np.dtype(dtype), np.unsignedinteger)


def is_float(dtype) -> bool:
    return dtypes.issubdtype(np.dtype(dtype), np.floating)


# --- values ---------------------------------------------------------------------------------
class Value:
    """An SSA value of the kernel: ``name`` (``%3``), its MLIR ``type`` and jaxpr ``aval``."""

    __slots__ = ("name", "type", "aval")

    def __init__(self, name: str, type_: str, aval):
        self.name, self.type, self.aval = name, type_, aval

    def __repr__(self):
        return f"Value({self.name}: {self.type})"


class RefValue:
    """A memref argument (or view): ``shape`` the memref's, ``aval`` the jaxpr's reference
    type; ``squeezed`` the memref dimensions the jaxpr's reference leaves out."""

    __slots__ = ("name", "type", "shape", "dtype", "space", "squeezed", "aval")

    def __init__(self, name, shape, dtype, space, squeezed=(), aval=None):
        shape, dtype = physical(shape, dtype)
        dtype = dtype if semaphore_type(dtype) else np.dtype(dtype)
        self.name, self.shape, self.dtype = name, tuple(shape), dtype
        self.space, self.squeezed, self.aval = space, tuple(squeezed), aval
        self.type = memref_type(self.shape, self.dtype, space)

    def __repr__(self):
        return f"RefValue({self.name}: {self.type})"


class KeyWords:
    """A ``"pallas_tpu"`` key in a kernel: its words, int32 scalar Values (``aval``: the
    key's)."""

    __slots__ = ("words", "aval")

    def __init__(self, words, aval):
        self.words, self.aval = list(words), aval

    def __repr__(self):
        return f"KeyWords({', '.join(w.name for w in self.words)})"


class Lit:
    """A jaxpr literal (or a closed-over constant): static until a rule needs its value."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval):
        self.val, self.aval = val, aval

    def __repr__(self):
        return f"Lit({self.val})"


def static_int(x):
    """``x`` as a Python int when it is a static integer, else None."""
    if isinstance(x, Lit):
        v = np.asarray(x.val)
        return int(v) if v.dtype.kind in "iub" else None
    if isinstance(x, (int, np.integer)):
        return int(x)
    return None


# --- attribute text -------------------------------------------------------------------------
def _scalar_attr_body(value, dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "true" if bool(value) else "false"
    if dtypes.issubdtype(dtype, np.integer):
        bits = 8 * dtype.itemsize
        v = int(np.asarray(value).astype(np.int64)) & ((1 << bits) - 1)
        return str(v - (1 << bits) if v >= 1 << (bits - 1) else v)
    raw = np.asarray(value, dtype).reshape(1).view(f"u{dtype.itemsize}")[0]
    return f"0x{int(raw):0{2 * dtype.itemsize}X}"


def constant_attr(value, aval) -> str:
    """The ``value`` attribute of an ``arith.constant`` of type ``aval`` (a splat)."""
    body = _scalar_attr_body(value, aval.dtype)
    if aval.shape:
        return f"dense<{body}> : {value_type(aval)}"
    if np.dtype(aval.dtype) == np.bool_:
        return body  # (true / false: the i1 attribute)
    return f"{body} : {element_type(aval.dtype)}"


def _escape(text: str) -> str:
    return "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else f"\\{ord(c):02X}"
                   for c in str(text))


def fresh_buffer_value(dtype):
    """What an unwritten buffer holds in a TPU kernel: with ``jax_pallas_poison_buffers``,
    poison (NaN, True, the integer whose bits are a lone sign bit), else zeros."""
    dtype = np.dtype(dtype)
    if not config.read("pallas_poison_buffers"):
        return np.zeros((), dtype)[()]
    if dtype == np.bool_:
        return np.bool_(True)
    if dtypes.issubdtype(dtype, np.inexact):
        return np.array(np.nan, dtype)[()]
    bits = 4 if dtype.name in ("int4", "uint4") else 8 * dtype.itemsize
    return np.array(-(1 << (bits - 1)), np.int64).astype(dtype)[()]


def _unwritten(fn, eqn, var):
    """An uninitialised value (``lax.empty``, an ``empty_ref``'s contents) read before any
    write: the value of a fresh buffer (a semaphore's initial value cannot be read)."""
    if semaphore_type(var.aval.dtype):
        raise LoweringException(describe(
            fn, eqn, "a semaphore's initial value can only start a scoped buffer "
            "(run_scoped); signal or wait on the semaphore instead of reading it."))
    return Lit(fresh_buffer_value(var.aval.dtype), var.aval)


# --- one function being built ---------------------------------------------------------------
class KernelFunction:
    """The body of one ``func.func`` being written: its lines, fresh SSA names, regions."""

    def __init__(self, kernel_name: str, mesh=None):
        self.kernel_name = kernel_name
        # the device mesh of the enclosing shard_map, ((axis names), (sizes)), or None; the
        # mesh axes the kernel asks its position along (axis_index)
        self.mesh = mesh
        self.used_axes: set = set()
        # the kernel's named grid axes (a core_map's mesh: its cores), name -> grid index
        self.grid_axes: dict = {}
        self.lines: list = []
        self.counter = 0
        self.depth = 1
        self.eqn = None  # the equation being lowered (for error messages)

    def fresh(self) -> str:
        self.counter += 1
        return f"%{self.counter - 1}"

    def op(self, name: str, operands, result_types, attrs: str = "", regions=()) -> list:
        """Emit ``name`` (generic form); ``operands`` are Value/RefValues; returns the result
        SSA names."""
        names = [self.fresh() for _ in result_types]
        lhs = ""
        if len(names) == 1:
            lhs = f"{names[0]} = "
        elif names:
            lhs = f"{names[0]}:{len(names)} = "
            names = [f"{names[0]}#{i}" for i in range(len(names))]
        text = f'{lhs}"{name}"({", ".join(o.name for o in operands)})'
        if regions:
            text += " (" + ", ".join(regions) + ")"
        if attrs:
            text += " {" + attrs + "}"
        outs = result_types[0] if len(result_types) == 1 else f"({', '.join(result_types)})"
        text += f" : ({', '.join(o.type for o in operands)}) -> {outs}"
        self.lines.append("  " * self.depth + text + self.location())
        return names

    def location(self) -> str:
        """`` loc(...)`` of the equation being lowered: its primitive at the user's line (what
        Mosaic's own errors then point at)."""
        info = getattr(self.eqn, "source_info", None)
        if info is None or getattr(info, "file", None) is None or info.line is None:
            return ""
        where = f'"{_escape(info.file)}":{int(info.line)}:{int(info.column or 0)}'
        return f' loc("{_escape(self.eqn.primitive.name)}"({where}))'

    def region(self, arg_types, build) -> str:
        """A one-block region: ``build(args)`` emits its ops (and terminator) given its block
        arguments (names); returns the region's text."""
        saved, self.lines = self.lines, []
        self.depth += 1
        args = [self.fresh() for _ in arg_types]
        try:
            build(args)
        finally:
            body, self.lines = self.lines, saved
            self.depth -= 1
        pad = "  " * self.depth
        head = ""
        if arg_types:
            head = pad + "^bb0(" + ", ".join(f"{a}: {t}" for a, t in zip(args, arg_types)) \
                + "):\n"
        return "{\n" + head + "\n".join(body) + "\n" + pad + "}"


class MosaicContext:
    """What a rule sees: the function being built, its equation's input and output types."""

    def __init__(self, fn: KernelFunction, avals_in, avals_out, eqn=None):
        self.fn, self.avals_in, self.avals_out, self.eqn = fn, avals_in, avals_out, eqn

    def op(self, name, operands, result_avals, attrs: str = "", regions=()) -> list:
        """Emit an op whose results have the jaxpr types ``result_avals``; their Values."""
        names = self.fn.op(name, operands, [value_type(a) for a in result_avals], attrs,
                           regions)
        return [Value(n, value_type(a), a) for n, a in zip(names, result_avals)]

    def op1(self, name, operands, aval, attrs: str = "") -> Value:
        return self.op(name, operands, [aval], attrs)[0]

    def typed_op(self, name, operands, type_: str, attrs: str = "") -> Value:
        """An op with one result of a non-jaxpr type (``index``)."""
        return Value(self.fn.op(name, operands, [type_], attrs)[0], type_, None)

    def constant(self, value, aval) -> Value:
        return self.op1("arith.constant", [], aval, f"value = {constant_attr(value, aval)}")

    def index_constant(self, k: int) -> Value:
        return self.typed_op("arith.constant", [], "index", f"value = {int(k)} : index")

    def value(self, x, aval=None) -> Value:
        """``x`` (Value or Lit) as a Value, broadcast to ``aval``'s shape when given."""
        if isinstance(x, RefValue):
            raise self.error("a reference was used where a value is expected")
        if isinstance(x, Lit):
            target = x.aval if aval is None else aval.update(dtype=x.aval.dtype)
            return self.constant(x.val, ShapedArray(tuple(target.shape), x.aval.dtype))
        if aval is not None and tuple(x.aval.shape) != tuple(aval.shape):
            return self.broadcast(x, tuple(aval.shape))
        return x

    def broadcast(self, x: Value, shape) -> Value:
        """``x`` broadcast to ``shape`` (a scalar, or a vector with unit dimensions)."""
        out = ShapedArray(tuple(shape), x.aval.dtype)
        if x.aval.shape and len(x.aval.shape) != len(shape):
            lead = (1,) * (len(shape) - len(x.aval.shape)) + tuple(x.aval.shape)
            x = self.op1("vector.shape_cast", [x], ShapedArray(lead, x.aval.dtype))
        if tuple(x.aval.shape) == tuple(shape):
            return x
        return self.op1("vector.broadcast", [x], out)

    def index(self, x) -> Value:
        """An index (``index`` type) from an integer scalar Value, Lit or int."""
        k = static_int(x)
        if k is not None:
            return self.index_constant(k)
        if x.aval.shape:
            raise self.error(f"an index must be a scalar, got {x.aval.str_short()}")
        return self.typed_op("arith.index_cast", [x], "index")

    def error(self, message: str, unsupported: bool = False) -> LoweringException:
        """The exception to raise for ``message`` (``unsupported``: a NotImplementedError too,
        where JAX raises one)."""
        kind = UnsupportedInKernelError if unsupported else LoweringException
        return kind(describe(self.fn, self.eqn, message))

    def lower_jaxpr(self, jaxpr, consts, args) -> list:
        return lower_jaxpr(self.fn, jaxpr, consts, args)

    def lower_fun(self, fn, avals, args, params=None, multiple_results=False):
        """Emit what ``fn(*args, **params)`` computes (plax ops, traced on ``avals``)."""
        jaxpr, consts = trace_rule_fn(fn, tuple(avals), params or {}, multiple_results)
        outs = lower_jaxpr(self.fn, jaxpr, consts, args)
        return outs if multiple_results else outs[0]


def _where(eqn) -> str:
    info = getattr(eqn, "source_info", None)
    if info is None or getattr(info, "file", None) is None:
        return ""
    return f" at {info.file}:{info.line}"


def describe(fn: KernelFunction, eqn, message: str) -> str:
    """``message`` with the kernel, the primitive and its source line."""
    if eqn is None:
        return f"In the Pallas kernel `{fn.kernel_name}`: {message}"
    return (f"In the Pallas kernel `{fn.kernel_name}`, lowering `{eqn.primitive.name}`"
            f"{_where(eqn)}: {message}")


# --- jaxprs ---------------------------------------------------------------------------------
def _const(c):
    if isinstance(c, (Value, RefValue, Lit)):
        return c
    arr = np.asarray(c)
    if arr.shape and not (arr == arr.reshape(-1)[0]).all():
        raise LoweringException("A Pallas TPU kernel closes over a non-uniform array "
                                f"constant of shape {arr.shape}; pass it as an input.")
    return Lit(arr.reshape(-1)[0] if arr.shape else arr[()],
               ShapedArray(arr.shape, arr.dtype))


def used_vars(jaxpr) -> set:
    """The ids of the variables some equation or the output reads."""
    used = {id(v) for e in jaxpr.eqns for v in e.invars}
    return used | {id(v) for v in jaxpr.outvars}


def lower_jaxpr(fn: KernelFunction, jaxpr, consts, args) -> list:
    """Emit ``jaxpr``'s equations into ``fn``; ``consts`` and ``args`` bind its constvars and
    invars (Value, RefValue or Lit); returns its outputs (the same kinds)."""
    env = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[id(v)] = _const(x)
    for v, x in zip(jaxpr.invars, args):
        env[id(v)] = x

    def read(a):
        if isinstance(a, Literal):
            return Lit(a.val, a.aval)
        return env[id(a)]

    used = used_vars(jaxpr)
    for eqn in jaxpr.eqns:
        rule = mosaic_lowering_rules.get(eqn.primitive)
        if rule is None:
            raise UnimplementedPrimitiveError(describe(
                fn, eqn, "Unimplemented primitive in Pallas TPU lowering for tc: "
                f"{eqn.primitive.name}."))
        ctx = MosaicContext(fn, [v.aval for v in eqn.invars], [v.aval for v in eqn.outvars],
                            eqn)
        args = list(map(read, eqn.invars))
        if not getattr(rule, "takes_uninitialized", False) and any(x is None for x in args):
            args = [_unwritten(fn, eqn, v) if x is None else x for x, v in zip(args, eqn.invars)]
        saved, fn.eqn = fn.eqn, eqn
        try:
            outs = rule(ctx, *args, **eqn.params,
                        **({"_used": [id(v) in used for v in eqn.outvars]}
                           if getattr(rule, "wants_used", False) else {}))
        except LoweringException:
            raise
        except Exception as e:
            raise LoweringException(describe(fn, eqn, f"{type(e).__name__}: {e}")) from e
        finally:
            fn.eqn = saved
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for v, x in zip(eqn.outvars, outs):
            env[id(v)] = x
    return [read(v) for v in jaxpr.outvars]


# --- the module -----------------------------------------------------------------------------
def _func(name: str, args, result_types, body: list, attrs: str = "") -> str:
    sig = ", ".join(f"{a.name}: {a.type}" for a in args)
    outs = ""
    if result_types:
        outs = " -> (" + ", ".join(result_types) + ")"
    head = f"  func.func @{name}({sig}){outs}"
    if attrs:
        head += f" attributes {{{attrs}}}"
    return head + " {\n" + "\n".join(body) + "\n  }"


def _zero_map(ngrid: int, rank: int) -> str:
    """The affine map from the grid indices to the block index 0 of every dimension."""
    dims = ", ".join(f"d{i}" for i in range(ngrid))
    return f"affine_map<({dims}) -> ({', '.join(['0'] * rank)})>"


def _trivial_window(bm) -> bool:
    """Whether the block is the whole array at block index 0 (JAX's test)."""
    if tuple(bm.sizes) != tuple(bm.array_aval.shape):
        return False
    return all(isinstance(v, Literal) and int(np.asarray(v.val)) == 0
               for v in bm.index_map.jaxpr.outvars)


_SUBLANES, _LANES = 8, 128  # a vector register's tile on every TPU generation so far


def _element_window(bm, name: str) -> str:
    """The window kind of a block of ``Element`` dimensions (the index map gives element
    offsets; the padding is the window's low and high margins), or "" for a blocked one."""
    if not any(bm.is_element(d) for d in range(len(bm.block_shape))):
        return ""
    if not all(bm.is_element(d) for d in range(len(bm.block_shape))):
        raise LoweringException(
            f"In the Pallas kernel `{name}`, the block of {bm.origin}: All block dimensions "
            "must be Elements or none of them can be Elements (mixed Element and blocked "
            "dimensions do not lower for TPU).")
    low = ", ".join(str(p[0]) for p in bm.element)
    high = ", ".join(str(p[1]) for p in bm.element)
    return f", window_kind = #tpu.element_window<[{low}], [{high}]>"


def check_block_shapes(grid_mapping, spaces, name: str) -> None:
    """The block shapes Mosaic can tile (JAX's rules, and its key phrases): a VMEM block's
    last two dimensions divide by 8 and 128 or are the array's; a rank-1 block is the array,
    a multiple of 1024 elements or a power of 2 at least one tile; ANY/HBM blocks are whole."""
    for bm, space in zip(grid_mapping.block_mappings, spaces):
        trivial = _trivial_window(bm)
        if space == "semaphore_mem" or (space == "smem" and trivial):
            continue
        shape, dtype = physical(bm.sizes, bm.array_aval.dtype)
        array = physical(bm.array_aval.shape, bm.array_aval.dtype)[0]

        def details():
            return (f" Block spec for {bm.origin} in pallas_call {name} has block shape "
                    f"{shape}, array shape {array}, in memory space {space}.")
        if not shape:
            raise ValueError("The Pallas TPU lowering currently supports only blocks of "
                             "rank >= 1." + details())
        if space in ("any", "hbm") and not trivial:
            raise ValueError("The Pallas TPU lowering currently supports in memory space ANY "
                             "only blocks having the same block shape as the array shape and "
                             "a trivial index_map (returning all 0s)." + details())
        if len(shape) >= 2:
            if not ((shape[-1] == array[-1] or shape[-1] % _LANES == 0)
                    and (shape[-2] == array[-2] or shape[-2] % _SUBLANES == 0)):
                raise ValueError(
                    "The Pallas TPU lowering currently requires that the last two dimensions "
                    "of your block shape are divisible by 8 and 128 respectively, or be equal "
                    "to the respective dimensions of the overall array." + details())
            continue
        bits = 32 if dtype == np.bool_ else 8 * np.dtype(dtype).itemsize
        tile = _LANES * (32 // bits)
        size = shape[0]
        if not (size == array[0] or size % (_SUBLANES * _LANES) == 0
                or (size >= tile and size & (size - 1) == 0)):
            raise ValueError(
                "The Pallas TPU lowering currently requires that rank 1 block shapes, either "
                "1) the first (and only) dimension of the block shape is equal to the first "
                "(and only) dimension of the array shape, or 2) the first (and only) dimension "
                f"of the block shape is a multiple of {_SUBLANES * _LANES}, or 3) the first "
                "(and only) dimension of the block shape is a power of 2 and at least the "
                f"tiling size ({tile} = 128 * (32 // {bits})) of the array shape." + details())


def _semantics(sem, ngrid: int, name: str) -> list:
    if sem is None:
        return ["arbitrary"] * ngrid
    sem = [str(getattr(s, "value", s)).lower() for s in sem]
    if len(sem) != ngrid:
        raise LoweringException(
            f"In the Pallas kernel `{name}`: dimension_semantics has {len(sem)} entries "
            f"({sem}) for a grid of {ngrid} dimension(s); give one per grid dimension.")
    for s in sem:
        if s not in ("parallel", "arbitrary", "core_parallel", "subcore_parallel"):
            raise LoweringException(f"In the Pallas kernel `{name}`: unknown dimension "
                                    f"semantics {s!r} (parallel or arbitrary).")
    return sem


# (MLIR's dynamic size: an iteration bound known only at run time)
_DYNAMIC = -9223372036854775808


def _run_time_bounds(fn, gm, jaxpr, start: int) -> list:
    """The grid's sizes known only at run time (``jaxpr``'s invars from ``start``), as the
    function reads them: ``tpu.iteration_bound`` of their grid dimension, where used."""
    i32 = ShapedArray((), np.dtype(np.int32))
    dims = [d for d, g in enumerate(gm.grid) if g is None]
    used = used_vars(jaxpr)
    return [Value(fn.op("tpu.iteration_bound", [], ["i32"], f"dim = {d} : i32")[0]
                  if id(v) in used else "%unused", "i32", i32)
            for d, v in zip(dims, jaxpr.invars[start:start + len(dims)])]


def _transform_function(k: int, bm, grid_args, prefetch_args, name: str, gm=None) -> str:
    fn = KernelFunction(name)
    grid = [Value(f"%arg{i}", "i32", ShapedArray((), np.dtype(np.int32)))
            for i in range(len(grid_args))]
    pre = [PrefetchArray(f"%arg{len(grid) + j}", r) for j, r in enumerate(prefetch_args)]
    n_dyn = gm.num_dynamic_grid_bounds if gm is not None else 0
    jaxpr = bm.index_map.jaxpr
    bounds = _run_time_bounds(fn, gm, jaxpr, len(grid)) if n_dyn else []
    outs = lower_jaxpr(fn, jaxpr, bm.index_map.consts, grid + bounds + pre)
    ctx = MosaicContext(fn, [], [])
    i32 = ShapedArray((), np.dtype(np.int32))
    results = []
    for o in outs:
        if isinstance(o, Lit):
            o = ctx.constant(o.val, i32)
        elif o.aval.dtype != np.int32:
            o = convert_scalar_to_i32(ctx, o)
        results.append(o)
    key_dims = len(physical((), bm.array_aval.dtype)[0])
    if key_dims:  # (a key's data dimensions: whole, from 0)
        results += [ctx.constant(0, i32)] * key_dims
    fn.op("func.return", results, [])
    args = grid + [Value(p.name, p.ref.type, None) for p in pre]
    return _func(f"transform_{k}", args, ["i32"] * len(results), fn.lines)


class PrefetchArray:
    """A scalar-prefetch array as an index map sees it: a value backed by an SMEM memref
    (index maps read single elements of it)."""

    __slots__ = ("name", "ref", "aval", "type")

    def __init__(self, name, ref: RefValue):
        self.name, self.ref = name, ref
        self.aval = ShapedArray(ref.shape, ref.dtype)
        self.type = ref.type


def convert_scalar_to_i32(ctx, x: Value) -> Value:
    i32 = ShapedArray((), np.dtype(np.int32))
    width = np.dtype(x.aval.dtype).itemsize
    if width > 4:
        raise ctx.error("index maps must return 32-bit integers")
    op = "arith.extui" if is_unsigned(x.aval.dtype) else "arith.extsi"
    return ctx.op1(op, [x], i32)


def kernel_module_text(jaxpr, grid_mapping, name: str, dimension_semantics=None, *,
                       mesh=None, facts: dict | None = None) -> str:
    """The Mosaic module (MLIR text) of a ``pallas_call``'s kernel: the kernel function and
    the transform functions of its blocks (``dimension_semantics``: per grid axis, default
    all "arbitrary"). ``mesh``: the enclosing shard_map's ((axis names), (sizes)), for
    ``axis_index`` and remote DMAs and signals; ``facts`` (a dict) receives ``mesh_axes``,
    the mesh axes the kernel reads its position along."""
    gm = grid_mapping
    ngrid = len(gm.grid)
    npre = gm.num_scalar_prefetch
    mappings = gm.block_mappings
    n_dyn = gm.num_dynamic_grid_bounds
    ref_vars = jaxpr.invars[ngrid + n_dyn:]
    fn = KernelFunction(name, mesh)
    i32 = ShapedArray((), np.dtype(np.int32))
    args: list = [Value(f"%arg{i}", "i32", i32) for i in range(ngrid)]
    fn.grid_axes = dict(zip(gm.grid_names or (), args))
    bounds = _run_time_bounds(fn, gm, jaxpr, ngrid)
    refs = []
    for k, v in enumerate(ref_vars):
        aval = v.aval
        if not isinstance(aval, AbstractRef):
            raise LoweringException(f"In the Pallas kernel `{name}`: argument {k} is not a "
                                    "reference.")
        inner = aval.inner_aval
        arg = f"%arg{ngrid + k}"
        if k < len(mappings):
            bm = mappings[k]
            default = "smem" if k < npre else "vmem"
            space = memory_space_name(aval.memory_space or bm.memory_space, default)
            squeezed = tuple(d for d, b in enumerate(bm.block_shape) if b is None)
            ref = RefValue(arg, bm.sizes, inner.dtype, space, squeezed, aval)
        else:
            space = memory_space_name(aval.memory_space)
            ref = RefValue(arg, inner.shape, inner.dtype, space, (), aval)
        refs.append(ref)
    args += refs
    check_block_shapes(gm, [r.space for r in refs[:len(mappings)]], name)
    outs = lower_jaxpr(fn, jaxpr, [], args[:ngrid] + bounds + refs)
    del outs
    if facts is not None:
        facts["mesh_axes"] = sorted(fn.used_axes)
    fn.op("func.return", [], [])
    sem = _semantics(dimension_semantics, ngrid, name)
    attrs = [f"dimension_semantics = [{', '.join(f'#tpu.dimension_semantics<{s}>' for s in sem)}]",
             f"scalar_prefetch = {npre} : i64",
             f"scratch_operands = {len(refs) - len(mappings)} : i64",
             "tpu.core_type = #tpu.core_type<tc>"]
    transforms = []
    block_maps = mappings[npre:]
    if ngrid:
        windows = []
        for k, bm in enumerate(block_maps):
            space = refs[npre + k].space
            if gm.unpipelined:  # (JAX's trivial windows of a mesh kernel's whole refs)
                windows.append("{}" if space in ("any", "hbm", "semaphore_mem") else
                               "{transform_indices = " + _zero_map(ngrid, len(bm.sizes)) + "}")
                continue
            if space in ("any", "hbm", "semaphore_mem"):
                if not _trivial_window(bm):
                    raise LoweringException(
                        f"In the Pallas kernel `{name}`: the block of {bm.origin} in memory "
                        f"space {space} must be the whole array (no windowing).")
                windows.append("{}")
                continue
            transforms.append(_transform_function(k, bm, args[:ngrid], refs[:npre], name,
                                                  gm))
            bounds = ", ".join(map(str, physical(bm.sizes, bm.array_aval.dtype)[0]))
            entry = f"transform_indices = @transform_{k}, window_bounds = array<i64: {bounds}>"
            entry += _element_window(bm, name)
            mode = getattr(bm, "pipeline_mode", None)
            count = getattr(mode, "buffer_count", None)
            if space == "vmem" and _trivial_window(bm):
                count = 1
            if count is not None:
                if count not in (1, 2):
                    raise LoweringException(
                        f"In the Pallas kernel `{name}`: only single (1) and double (2) "
                        f"buffering are supported. Got {count}.")
                kind = "synchronous" if count == 1 else "double_buffered"
                entry += f", pipeline_mode = #tpu.pipeline_mode<{kind}>"
            windows.append("{" + entry + "}")
        sizes = [_DYNAMIC if g is None else g for g in gm.grid]
        attrs.append(f"iteration_bounds = array<i64: {', '.join(map(str, sizes))}>")
        attrs.append(f"window_params = [{', '.join(windows)}]")
    else:
        for bm in block_maps:
            if not _trivial_window(bm):
                raise LoweringException(
                    f"In the Pallas kernel `{name}`: non-trivial windowing is not supported "
                    f"for grid-free pallas_call ({bm.origin}).")
    kernel = _func(name, args, [], fn.lines, ", ".join(attrs))
    return ("module {\n"
            + "\n".join([kernel] + transforms) + "\n}\n")
