"""plax's container for an Exported: ``serialize`` writes it, ``deserialize`` reads it back.

Layout (all integers little-endian; docs/export-format.md has the full description)::

    offset  size  field
    0       8     magic  b"PLAXEXP\\x00"
    8       4     format version (uint32), FORMAT_VERSION
    12      8     body length in bytes (uint64)
    20      32    SHA-256 of the body
    52      ...   body:
                    8   header length H (uint64)
                    H   header: UTF-8 JSON (fun_name, pytree structures, types, platforms,
                        calling convention, StableHLO version, lengths below, ...)
                    M   the module: a StableHLO portable artifact (versioned MLIR bytecode)
                    V   the VJP: a complete container of its own (V = 0 when absent)

Reading checks the magic, the version, the lengths and the checksum before it parses
anything, so a truncated, corrupted or foreign file raises ValueError (never reaches jaxlib).
"""
from __future__ import annotations

import collections
import hashlib
import json
import struct

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.symbolic_shapes import SymbolicScope, is_symbolic_dim, parse_shape
from plax.core.tree_core import PyTreeDef
from plax.sharding.mesh import AbstractMesh, AxisType
from plax.sharding.named import NamedSharding
from plax.sharding.partition_spec import UNCONSTRAINED, PartitionSpec
from plax.export.exported import (MAXIMUM_CALLING_CONVENTION, MINIMUM_CALLING_CONVENTION,
                                  DisabledSafetyCheck, Exported)

MAGIC = b"PLAXEXP\x00"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sIQ32s")  # magic, version, body length, sha256 of the body

# Custom pytree nodes that may appear in an exported function's structures:
# type -> (name, serialize_auxdata, deserialize_auxdata), and name -> type.
_node_serializers: dict = {}
_node_types_by_name: dict = {}


def register_pytree_node_serialization(nodetype, *, serialized_name: str,
                                       serialize_auxdata, deserialize_auxdata):
    """Let pytrees with ``nodetype`` nodes be (de)serialized: ``serialize_auxdata(aux) ->
    bytes`` and ``deserialize_auxdata(bytes) -> aux``; ``serialized_name`` names the type in
    the file. ``nodetype`` must be a registered pytree node type. Returns ``nodetype``
    (usable as a decorator)."""
    from plax.core.tree_core import node_registry
    if nodetype not in node_registry and nodetype not in _node_serializers:
        raise ValueError("If `from_children` is not present, you must call first "
                         f"`jax.tree_util.register_pytree_node` for `{nodetype}` (plax "
                         "rebuilds the nodes it reads with the pytree registry).")
    return _register(nodetype, serialized_name, serialize_auxdata, deserialize_auxdata)


def _register(nodetype, serialized_name, serialize_auxdata, deserialize_auxdata):
    if nodetype in _node_serializers:
        raise ValueError(f"Duplicate serialization registration for type {nodetype}. "
                         "Previous registration was with serialized_name "
                         f"{_node_serializers[nodetype][0]}.")
    if serialized_name in _node_types_by_name:
        raise ValueError(f"Duplicate serialization registration for "
                         f"serialized_name {serialized_name}. Previous registration was for "
                         f"type {_node_types_by_name[serialized_name]}.")
    _node_serializers[nodetype] = (serialized_name, serialize_auxdata, deserialize_auxdata)
    _node_types_by_name[serialized_name] = nodetype
    return nodetype


def register_namedtuple_serialization(nodetype, *, serialized_name: str):
    """Let pytrees holding the namedtuple class ``nodetype`` be (de)serialized."""
    if not (isinstance(nodetype, type) and issubclass(nodetype, tuple)
            and hasattr(nodetype, "_fields")):
        raise ValueError("Use `export.register_pytree_node_serialization` for types other "
                         f"than `collections.namedtuple` (got {nodetype}).")
    fields = list(nodetype._fields)

    def fields_back(data: bytes) -> None:
        # (the field names are stored, as JAX stores them, and must still be the class's)
        stored = json.loads(data.decode("utf-8")) if data else fields
        if stored != fields:
            raise ValueError(f"Cannot deserialize a {nodetype.__name__} with the fields "
                             f"{stored}: the registered class {nodetype} has the fields "
                             f"{fields}.")
        return None
    return _register(nodetype, serialized_name,
                     lambda aux: json.dumps(fields).encode("utf-8"), fields_back)


def _ordereddict_keys_to_bytes(keys) -> bytes:
    if not all(isinstance(k, str) for k in keys):
        raise NotImplementedError("Serialization of collections.OrderedDict is supported only "
                                  f"when the keys are strings. Found keys: {list(keys)}.")
    return json.dumps(list(keys)).encode("utf-8")


# Registered from the start, under the name JAX gives it (files move between the two).
register_pytree_node_serialization(
    collections.OrderedDict, serialized_name="collections.OrderedDict",
    serialize_auxdata=_ordereddict_keys_to_bytes,
    deserialize_auxdata=lambda data: tuple(json.loads(data.decode("utf-8"))))


# --- writing -------------------------------------------------------------------------------
def serialize(exp: Exported, vjp_order: int = 0) -> bytearray:
    """``exp`` (and its VJPs to order ``vjp_order``) in plax's container format."""
    if vjp_order < 0:
        raise ValueError(f"vjp_order must be >= 0, got {vjp_order}")
    vjp_blob = b""
    if vjp_order > 0:
        if not exp.has_vjp():
            raise ValueError("serialization of an Exported with vjp_order > 0 needs a VJP, "
                             "and this one has none (it was deserialized with a lower order).")
        vjp_blob = bytes(serialize(exp.vjp(), vjp_order - 1))
    module = bytes(exp.mlir_module_serialized)
    header = {
        "fun_name": exp.fun_name,
        "in_tree": _tree_to_json(exp.in_tree._node),
        "out_tree": _tree_to_json(exp.out_tree._node),
        "in_avals": [_aval_to_json(a) for a in exp.in_avals],
        "out_avals": [_aval_to_json(a) for a in exp.out_avals],
        "in_shardings": [_sharding_to_json(x) for x in exp._in_named_shardings],
        "out_shardings": [_sharding_to_json(x) for x in exp._out_named_shardings],
        "constraints": list(_scope_constraints(exp)),
        "nr_devices": exp.nr_devices,
        "platforms": list(exp.platforms),
        "disabled_safety_checks": [str(c) for c in exp.disabled_safety_checks],
        "calling_convention_version": exp.calling_convention_version,
        "module_kept_var_idx": list(exp.module_kept_var_idx),
        "uses_global_constants": exp.uses_global_constants,
        "module_length": len(module),
        "vjp_length": len(vjp_blob),
    }
    if exp.ordered_effects or exp.unordered_effects:
        raise ValueError(f"Cannot serialize {exp.fun_name}: it has effects "
                         f"{[*exp.ordered_effects, *exp.unordered_effects]}, which plax's "
                         "container does not carry.")
    head = json.dumps(header, sort_keys=True).encode()
    body = struct.pack("<Q", len(head)) + head + module + vjp_blob
    return bytearray(_PREFIX.pack(MAGIC, FORMAT_VERSION, len(body),
                                  hashlib.sha256(body).digest()) + body)


def _scope_constraints(exp) -> tuple:
    for a in exp.in_avals:
        for d in a.shape:
            if is_symbolic_dim(d):
                return d.scope._constraints
    return ()


def _aval_to_json(aval) -> dict:
    dtype = "float0" if aval.dtype == dtypes.float0 else np.dtype(aval.dtype).name
    out = {"shape": [d if isinstance(d, int) else str(d) for d in aval.shape],
           "dtype": dtype, "weak_type": bool(aval.weak_type)}
    if getattr(aval, "_sharding", None) is not None:  # (Explicit axes of an SPMD module)
        out["sharding"] = _sharding_to_json(aval._sharding)
    return out


def _sharding_to_json(sharding):
    """A NamedSharding over an AbstractMesh as JSON (None stays None)."""
    if sharding is None:
        return None
    mesh = sharding.mesh
    spec = [e if e is None or isinstance(e, str) else
            {"unconstrained": True} if e is UNCONSTRAINED else list(e) for e in sharding.spec]
    return {"mesh": {"sizes": list(mesh.axis_sizes), "names": list(mesh.axis_names),
                     "types": [t.name for t in mesh.axis_types]},
            "spec": spec, "memory_kind": sharding._kind}


def _tree_to_json(node):
    if node is None:
        return "*"
    kind, aux, children = node
    kids = [_tree_to_json(c) for c in children]
    if kind is tuple:
        return {"t": "tuple", "c": kids}
    if kind is list:
        return {"t": "list", "c": kids}
    if kind is type(None):
        return {"t": "None"}
    if kind is dict:
        keys = list(aux)
        if not all(isinstance(k, str) for k in keys):
            raise TypeError("Serialization is supported only for dictionaries with string "
                            f"keys; found the keys {keys}.")
        return {"t": "dict", "k": keys, "c": kids}
    entry = _node_serializers.get(kind)
    if entry is None:
        raise ValueError(
            f"Cannot serialize PyTreeDef containing an unregistered type {kind}. Use "
            "`export.register_pytree_node_serialization` or "
            "`export.register_namedtuple_serialization`.")
    name, ser, _ = entry
    return {"t": "custom", "n": name, "a": bytes(ser(aux)).hex(), "c": kids}


# --- reading -------------------------------------------------------------------------------
def deserialize(blob) -> Exported:
    """An Exported from the bytes ``Exported.serialize`` wrote; ValueError for anything
    else (a truncated, corrupted or foreign file, or a newer format)."""
    data = bytes(blob)
    if len(data) < _PREFIX.size:
        raise ValueError(f"Not a serialized plax Exported: {len(data)} bytes, shorter than the "
                         f"{_PREFIX.size}-byte header of the format.")
    magic, version, length, digest = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise ValueError(f"Not a serialized plax Exported: it starts with {magic!r}, not the "
                         f"magic bytes {MAGIC!r}.")
    if version != FORMAT_VERSION:
        raise ValueError(f"Serialized Exported has format version {version}; this plax reads "
                         f"version {FORMAT_VERSION}. Export it again with this plax.")
    body = data[_PREFIX.size:]
    if len(body) != length:
        raise ValueError(f"Serialized Exported is truncated or has trailing data: the header "
                         f"announces {length} bytes of body, {len(body)} follow.")
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("Serialized Exported is corrupted: its checksum does not match.")
    try:
        return _read_body(body)
    except (KeyError, TypeError, IndexError, json.JSONDecodeError, UnicodeDecodeError,
            struct.error) as e:
        raise ValueError(f"Serialized Exported has a malformed header: {e!r}") from None


def _read_body(body: bytes) -> Exported:
    (hlen,) = struct.unpack_from("<Q", body)
    header = json.loads(body[8:8 + hlen].decode())
    start = 8 + hlen
    mlen, vlen = header["module_length"], header["vjp_length"]
    if start + mlen + vlen != len(body):
        raise ValueError("Serialized Exported has inconsistent section lengths.")
    module = body[start:start + mlen]
    vjp_blob = body[start + mlen:start + mlen + vlen]
    ccv = header["calling_convention_version"]
    if not MINIMUM_CALLING_CONVENTION <= ccv <= MAXIMUM_CALLING_CONVENTION:
        raise ValueError(f"The deserialized Exported uses calling convention version {ccv}, "
                         f"outside the range this plax supports "
                         f"[{MINIMUM_CALLING_CONVENTION}, {MAXIMUM_CALLING_CONVENTION}].")
    scope = SymbolicScope(header["constraints"])
    vjp = deserialize(vjp_blob) if vlen else None
    return Exported(
        fun_name=header["fun_name"],
        in_tree=PyTreeDef._make(_tree_from_json(header["in_tree"])),
        in_avals=tuple(_aval_from_json(a, scope) for a in header["in_avals"]),
        out_tree=PyTreeDef._make(_tree_from_json(header["out_tree"])),
        out_avals=tuple(_aval_from_json(a, scope) for a in header["out_avals"]),
        # (absent from files written before sharded export: all unspecified)
        in_shardings=[_sharding_from_json(x) for x in
                      header.get("in_shardings", [None] * len(header["in_avals"]))],
        out_shardings=[_sharding_from_json(x) for x in
                       header.get("out_shardings", [None] * len(header["out_avals"]))],
        nr_devices=header["nr_devices"], platforms=tuple(header["platforms"]),
        ordered_effects=(), unordered_effects=(),
        disabled_safety_checks=tuple(DisabledSafetyCheck(c)
                                     for c in header["disabled_safety_checks"]),
        mlir_module_serialized=module, calling_convention_version=ccv,
        module_kept_var_idx=tuple(header["module_kept_var_idx"]),
        uses_global_constants=header["uses_global_constants"],
        _get_vjp=(lambda _: vjp) if vjp is not None else None)


def _aval_from_json(d, scope) -> ShapedArray:
    shape = tuple(x if isinstance(x, int) else parse_shape(x, scope)[0] for x in d["shape"])
    dtype = dtypes.float0 if d["dtype"] == "float0" else \
        dtypes.canonicalize_dtype(np.dtype(d["dtype"]))
    return ShapedArray(shape, dtype, weak_type=d["weak_type"],
                       sharding=_sharding_from_json(d.get("sharding")))


def _sharding_from_json(j):
    if j is None:
        return None
    mesh = j["mesh"]
    abstract = AbstractMesh(tuple(mesh["sizes"]), tuple(mesh["names"]),
                            tuple(AxisType[t] for t in mesh["types"]))
    spec = PartitionSpec(*[UNCONSTRAINED if isinstance(e, dict) else
                           tuple(e) if isinstance(e, list) else e for e in j["spec"]])
    return NamedSharding(abstract, spec, memory_kind=j["memory_kind"])


def _tree_from_json(j):
    if j == "*":
        return None
    kind = j["t"]
    kids = tuple(_tree_from_json(c) for c in j.get("c", ()))
    if kind == "tuple":
        return (tuple, None, kids)
    if kind == "list":
        return (list, None, kids)
    if kind == "None":
        return (type(None), None, ())
    if kind == "dict":
        return (dict, tuple(j["k"]), kids)
    if kind == "custom":
        nodetype = _node_types_by_name.get(j["n"])
        if nodetype is None:
            raise ValueError(f"Cannot deserialize a PyTreeDef with the unregistered node type "
                             f"{j['n']!r}: register it with "
                             "`export.register_pytree_node_serialization` first.")
        aux = _node_serializers[nodetype][2](bytes.fromhex(j["a"]))
        return (nodetype, aux, kids)
    raise ValueError(f"Unknown pytree node kind {kind!r} in a serialized Exported.")

