"""A ``stablehlo.custom_call`` to an XLA FFI target, in both of plax's lowering forms.

plax lowers to StableHLO text: ``emit(ctx, spec, operands)`` writes the op into the
function a plax lowering rule is building. A rule written with jaxlib's MLIR bindings (the
JAX way, through ``plax.interpreters.mlir``) gets the same op as an ``ir.OpView`` from
``build(ctx, spec, operands)``, whose attributes are parsed from the same text. So the
attribute text is made in one place: ``attribute_text`` turns the Python values users pass
as FFI attributes into MLIR attributes as JAX does (Python ints are ``i64``, floats ``f64``,
NumPy scalars keep their dtype, NumPy arrays become dense elements, strings, dicts,
tuples and dtypes their MLIR counterparts).

Typed-FFI calls (``api_version >= 4``) carry their attributes as the dictionary
``mhlo.backend_config`` with ``backend_config = ""`` (as JAX writes them: with
``api_version = 4`` XLA would drop the dictionary); older custom calls carry an opaque string.
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.lowering.stablehlo import abstract_token, dense_elements, element_type

__all__ = ["CustomCallSpec", "HashableArray", "FrozenDict", "attribute_text", "build",
           "convert_layout", "emit", "hashable_attributes", "unwrap_attributes"]


# --- attribute values -----------------------------------------------------------------------
class HashableArray:
    """A NumPy array compared and hashed by value: an FFI attribute in a primitive's params."""

    __slots__ = ("val",)

    def __init__(self, val):
        self.val = np.array(val)  # a private copy: the caller may mutate theirs

    def __hash__(self):
        return hash((self.val.shape, self.val.dtype, self.val.tobytes()))

    def __eq__(self, other):
        return isinstance(other, HashableArray) and self.val.shape == other.val.shape and \
            self.val.dtype == other.val.dtype and self.val.tobytes() == other.val.tobytes()

    def __repr__(self):
        return f"HashableArray({self.val!r})"


class FrozenDict:
    """A dict compared and hashed by its items: a dictionary FFI attribute in params."""

    __slots__ = ("_d", "_items")

    def __init__(self, d):
        self._d = dict(d)
        self._items = tuple(sorted((k, _hashable(k, v)) for k, v in self._d.items()))

    def __hash__(self):
        return hash(self._items)

    def __eq__(self, other):
        return isinstance(other, FrozenDict) and self._items == other._items

    def __repr__(self):
        return f"FrozenDict({self._d!r})"


def _hashable(name: str, value):
    if isinstance(value, np.ndarray):
        return HashableArray(value)
    if isinstance(value, dict):
        return FrozenDict(value)
    try:
        hash(value)
    except TypeError as e:
        raise TypeError(f"Non-hashable keyword argument to ffi_call {name}: {value!r}. FFI "
                        "attributes are numbers, strings, NumPy arrays, dtypes, dicts and "
                        "tuples of these (a list: pass a tuple or a NumPy array).") from e
    return value


def hashable_attributes(kwargs: dict) -> tuple:
    """Keyword attributes as sorted (name, value) pairs that can be a primitive's parameter."""
    return tuple((k, _hashable(k, v)) for k, v in sorted(kwargs.items()))


def unwrap_attributes(pairs) -> dict:
    return {k: v.val if isinstance(v, HashableArray) else v._d if isinstance(v, FrozenDict)
            else v for k, v in pairs}


def _hex_float(value, dtype) -> str:
    """An exact MLIR float literal: the value's bits in hexadecimal."""
    dtype = np.dtype(dtype)
    bits = np.asarray(value, dtype).reshape(1).view(f"u{dtype.itemsize}")[0]
    return f"0x{int(bits):0{2 * dtype.itemsize}X}"


def _string(data) -> str:
    raw = data.encode() if isinstance(data, str) else bytes(data)
    out = []
    for b in raw:
        c = chr(b)
        out.append(c if 32 <= b < 127 and c not in '"\\' else f"\\{b:02X}")
    return '"' + "".join(out) + '"'


_BARE_NAME = re.compile(r"[A-Za-z_][\w$.]*\Z")


def _key(name: str) -> str:
    return name if _BARE_NAME.match(name) else _string(name)


def _scalar_text(value, dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "true" if bool(value) else "false"
    if dtype.kind in "iu":
        return f"{int(value)} : {element_type(dtype)}"
    if dtype.kind == "f" or dtype.name == "bfloat16":
        return f"{_hex_float(value, dtype)} : {element_type(dtype)}"
    raise TypeError(f"Unsupported scalar attribute type: {type(value)} (dtype {dtype}); FFI "
                    "attributes are integer, floating-point or boolean scalars.")


def attribute_text(value) -> str:
    """The MLIR attribute of a Python value, as JAX converts FFI attributes."""
    if isinstance(value, HashableArray):
        value = value.val
    elif isinstance(value, FrozenDict):
        value = value._d
    module = type(value).__module__ or ""
    if module.startswith("jaxlib.mlir"):  # an ir.Attribute or ir.Type given as it is
        return str(value)
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, int):
        return _scalar_text(value, np.int64)
    if isinstance(value, float):
        return _scalar_text(value, np.float64)
    if isinstance(value, complex):
        return _scalar_text(value, np.complex128)
    if isinstance(value, (str, bytes)):
        return _string(value)
    if isinstance(value, np.generic):
        return _scalar_text(value, value.dtype)
    if isinstance(value, np.ndarray):
        if value.size and 0 in value.strides:
            raise ValueError("NumPy arrays with zero strides are not supported as MLIR "
                             "attributes: pass np.ascontiguousarray(x) (a broadcast view "
                             "repeats one element).")
        if value.dtype == dtypes.float0:
            value = np.zeros(value.shape, np.bool_)
        if value.dtype.kind == "c":
            raise TypeError(f"Unsupported array attribute dtype {value.dtype}: complex arrays "
                            "cannot be FFI attributes.")
        return dense_elements(value, ShapedArray(value.shape, value.dtype))
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return element_type(np.dtype(value))
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(str(k))} = {attribute_text(v)}"
                               for k, v in sorted(value.items())) + "}"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(attribute_text(v) for v in value) + "]"
    if hasattr(value, "__jax_array__"):
        return attribute_text(np.asarray(value.__jax_array__()))
    raise TypeError(f"No attribute handler defined for type: {type(value)}. FFI attributes "
                    "are numbers, strings, NumPy arrays and scalars, dtypes, dicts and tuples.")


# --- layouts ----------------------------------------------------------------------------------
def _is_layout(layout) -> bool:
    return hasattr(layout, "major_to_minor")


def convert_layout(aval, layout=None, major_to_minor: bool = False) -> tuple:
    """A layout as XLA's minor-to-major dimension numbers for values of ``aval``: None means
    row-major; a ``Layout`` names its major-to-minor order; a sequence is minor-to-major
    (``major_to_minor``: it is read the other way round, as ``ffi_call`` takes it)."""
    ndim = 0 if aval is abstract_token else len(aval.shape)
    if layout is None:
        return tuple(range(ndim - 1, -1, -1))
    if _is_layout(layout):
        if getattr(layout, "_tiling", None) or getattr(layout, "tiling", None):
            raise ValueError("The FFI does not support layouts with tiling")
        order = tuple(layout.major_to_minor)[::-1]
    else:
        order = tuple(int(d) for d in layout)
        if major_to_minor:
            order = order[::-1]
    if sorted(order) != list(range(ndim)):
        raise ValueError(f"A layout of a value of rank {ndim} must order each of its "
                         f"dimensions 0..{ndim - 1} once, got {layout!r} for "
                         f"{getattr(aval, 'str_short', lambda: aval)()}.")
    return order


def _layouts_text(layouts) -> str:
    parts = []
    for order in layouts:
        n = len(order)
        parts.append(f"dense<[{', '.join(map(str, order))}]> : tensor<{n}xindex>" if n
                     else "dense<> : tensor<0xindex>")
    return "[" + ", ".join(parts) + "]"


# --- the op ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CustomCallSpec:
    """What a custom call to an FFI target is, besides its operands and types.

    ``operand_layouts``/``result_layouts``: minor-to-major per value (None: row-major);
    ``backend_config``: attributes (a dict) for ``api_version >= 4``, else an opaque string;
    ``aliases``: (operand index, result index) pairs whose buffers are shared."""

    target: str
    api_version: int = 4
    backend_config: object = None
    has_side_effect: bool = False
    operand_layouts: tuple | None = None
    result_layouts: tuple | None = None
    aliases: tuple = ()

    def properties(self, avals_in, avals_out) -> list:
        """(name, text) of the op's attributes, as JAX writes them."""
        ins = self.operand_layouts or [None] * len(avals_in)
        outs = self.result_layouts or [None] * len(avals_out)
        props = [("call_target_name", _string(self.target))]
        extra = []
        if self.api_version >= 4:
            config = self.backend_config or {}
            if not isinstance(config, dict):
                raise ValueError("When api_version > 4, backend_config must be a dictionary.")
            props.append(("backend_config", '""'))
            extra.append(("mhlo.backend_config", attribute_text(config)))
        else:
            if isinstance(self.backend_config, dict) and self.backend_config:
                raise ValueError(
                    "The use of ffi_call attributes requires a custom call API version of at "
                    f"least 4; got api_version={self.api_version}.")
            config = self.backend_config if isinstance(self.backend_config, (str, bytes)) \
                else ""
            props += [("api_version", f"{int(self.api_version)} : i32"),
                      ("backend_config", _string(config))]
        if self.has_side_effect:
            props.append(("has_side_effect", "true"))
        props.append(("operand_layouts", _layouts_text(
            convert_layout(a, lay) for a, lay in zip(avals_in, ins))))
        props.append(("result_layouts", _layouts_text(
            convert_layout(a, lay) for a, lay in zip(avals_out, outs))))
        if self.aliases:
            single = len(avals_out) == 1
            props.append(("output_operand_aliases", "[" + ", ".join(
                "#stablehlo.output_operand_alias<output_tuple_indices = "
                f"[{'' if single else o}], operand_index = {i}, operand_tuple_indices = []>"
                for i, o in self.aliases) + "]"))
        return props + extra

    def with_attributes(self, attributes: dict) -> "CustomCallSpec":
        """This spec with ``attributes`` added to its dictionary (typed FFI only)."""
        if not attributes:
            return self
        if self.api_version < 4:
            raise ValueError(
                "The use of ffi_call attributes requires a custom call API version of at "
                f"least 4; got api_version={self.api_version}.")
        if self.backend_config is not None and not isinstance(self.backend_config, dict):
            raise ValueError("When api_version > 4, backend_config must be a dictionary.")
        return dataclasses.replace(self, backend_config={**(self.backend_config or {}),
                                                         **attributes})


def emit(ctx, spec: CustomCallSpec, operands) -> list:
    """Write the custom call into the function a plax lowering rule (``ctx``) builds; returns
    the names of its results."""
    if any(a is abstract_token for a in (*ctx.avals_in, *ctx.avals_out)):
        raise NotImplementedError(f"The FFI call to `{spec.target}` takes or returns a token, "
                                  "which plax's FFI lowering does not pass.")
    props = spec.properties(ctx.avals_in, ctx.avals_out)
    inherent = ", ".join(f"{k} = {v}" for k, v in props if not k.startswith("mhlo."))
    discardable = ", ".join(f"{k} = {v}" for k, v in props if k.startswith("mhlo."))
    return ctx.op("stablehlo.custom_call", list(operands), props=inherent, attrs=discardable)


def build(ctx, spec: CustomCallSpec, operands):
    """The custom call as an ``ir.OpView``, inside a rule written with jaxlib's MLIR bindings
    (``ctx`` a ``LoweringRuleContext``; ``operands`` ``ir.Value``s)."""
    from plax.lowering.mlir_bindings import aval_to_ir_type, hlo, ir
    props = dict(spec.properties(ctx.avals_in, ctx.avals_out))
    parse = ir.Attribute.parse
    op = hlo.CustomCallOp(
        [aval_to_ir_type(a) for a in ctx.avals_out], list(operands), spec.target,
        has_side_effect=parse("true") if spec.has_side_effect else None,
        backend_config=parse(props["backend_config"]),
        api_version=parse(props["api_version"]) if "api_version" in props else None,
        operand_layouts=parse(props["operand_layouts"]),
        result_layouts=parse(props["result_layouts"]),
        output_operand_aliases=parse(props["output_operand_aliases"])
        if "output_operand_aliases" in props else None)
    if "mhlo.backend_config" in props:
        op.operation.attributes["mhlo.backend_config"] = parse(props["mhlo.backend_config"])
    return op

