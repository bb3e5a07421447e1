"""A pytree's structure as JAX stores it next to a checkpoint: the ``PyTreeDef`` table of
JAX's export flatbuffer schema, base64-encoded in JSON. Writing the same bytes lets plax
read JAX's ``pytreedef.json`` and JAX read plax's.

The table (field slots in order): ``kind`` (int8: leaf 0, None 1, tuple 2, list 3, dict 4,
custom 5), ``children`` (a vector of tables), ``children_names`` (the dict's string keys),
``custom_name`` and ``custom_auxdata`` (a custom node's registered name and its
serialized aux data, as ``plax.export.register_pytree_node_serialization`` makes them).
The flatbuffer library is imported when first used (``pip install 'plax[checkpoint]'``).
"""
from __future__ import annotations

import base64
from concurrent.futures import Future
from typing import Any

from plax.core.tree_core import PyTreeDef
from plax.export.serialization import (_node_serializers, _node_types_by_name,
                                       register_pytree_node_serialization)

__all__ = ["serialize_pytreedef", "deserialize_pytreedef",
           "register_pytree_node_serialization"]

_TREE_REPR_KEY = "__jax_pytreedef_repr"
_LEAF_IDS_KEY = "__jax_leaf_ids"
_LEAF, _NONE, _TUPLE, _LIST, _DICT, _CUSTOM = range(6)
_KINDS = {tuple: _TUPLE, list: _LIST, dict: _DICT, type(None): _NONE}
_SLOTS = 5  # kind, children, children_names, custom_name, custom_auxdata


def _flatbuffers():
    try:
        import flatbuffers
    except ImportError as e:
        raise ImportError("Saving or loading a pytree's structure needs the flatbuffers "
                          "package, which is not installed: pip install 'plax[checkpoint]' "
                          "(or pip install flatbuffers).") from e
    return flatbuffers


class PyTreeFuture(Future):
    """The result of a nonblocking save or load, awaitable; ``pytree`` shows what is being
    written or read (arrays as ``ShapeDtypeStruct``) before it is done."""

    def __init__(self, future: Future):
        self._future, self.pytree = future, None

    def done(self):
        return self._future.done()

    def result(self, *args, **kwargs):
        return self._future.result(*args, **kwargs)

    def __await__(self):
        while not self.done():
            yield
        return self.result()

    def __repr__(self):
        return f"PyTreeFuture(done={self.done()}, pytree={self.pytree})"


# --- writing -------------------------------------------------------------------------------
def _vector_of_offsets(builder, offsets: list) -> int:
    builder.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    return builder.EndVector()


def _write_node(builder, node) -> int:
    """Write one node (and, first, its children: a table cannot nest another's building)."""
    children, names, custom = (), None, None
    if node is None:
        kind = _LEAF
    else:
        nodetype, aux, children = node
        kind = _KINDS.get(nodetype)
        if kind == _DICT:
            bad = [k for k in aux if not isinstance(k, str)]
            if bad:
                raise TypeError("Serialization is supported only for dictionaries with "
                                f"string keys. Found key {bad[0]!r} of type {type(bad[0])}.")
            names = list(aux)
        elif kind is None:
            entry = _node_serializers.get(nodetype)
            if entry is None:
                raise ValueError(
                    f"Cannot serialize PyTreeDef containing an unregistered type `{nodetype}`."
                    " Register it with `export.register_pytree_node_serialization` (or "
                    "`export.register_namedtuple_serialization` for a namedtuple).")
            kind, (custom_name, serialize_aux, _) = _CUSTOM, entry
            blob = serialize_aux(aux)
            if not isinstance(blob, (bytes, bytearray)):
                raise ValueError(f"The custom serialization function for `{nodetype}` must "
                                 f"return a `bytes` object. It returned a {type(blob)}.")
            custom = (custom_name, bytes(blob))
    child_offsets = [_write_node(builder, c) for c in children]
    children_vector = _vector_of_offsets(builder, child_offsets) if child_offsets else None
    names_vector = None
    if names:
        names_vector = _vector_of_offsets(builder, [builder.CreateString(k) for k in names])
    if custom is not None:
        name_offset = builder.CreateString(custom[0])
        aux_offset = builder.CreateByteVector(custom[1])
    builder.StartObject(_SLOTS)
    builder.PrependInt8Slot(0, kind, 0)
    if children_vector is not None:
        builder.PrependUOffsetTRelativeSlot(1, children_vector, 0)
    if names_vector is not None:
        builder.PrependUOffsetTRelativeSlot(2, names_vector, 0)
    if custom is not None:
        builder.PrependUOffsetTRelativeSlot(3, name_offset, 0)
        builder.PrependUOffsetTRelativeSlot(4, aux_offset, 0)
    return builder.EndObject()


def serialize_pytreedef(treedef: PyTreeDef) -> dict[str, Any]:
    """``treedef`` as JSON-ready data: the encoded structure and one leaf id per leaf."""
    builder = _flatbuffers().Builder(65536)
    builder.Finish(_write_node(builder, treedef._node))
    encoded = base64.b64encode(builder.Output()).decode("utf-8")
    return {_TREE_REPR_KEY: encoded, _LEAF_IDS_KEY: list(range(treedef.num_leaves))}


# --- reading -------------------------------------------------------------------------------
def _read_node(fb, buf: bytes, position: int):
    table = fb.table.Table(buf, position)
    N = fb.number_types

    def field(slot):
        return table.Offset(4 + 2 * slot)

    def vector(slot):
        o = field(slot)
        if not o:
            return []
        start = table.Vector(o)
        return [start + 4 * j for j in range(table.VectorLen(o))]

    o = field(0)
    kind = table.Get(N.Int8Flags, o + table.Pos) if o else _LEAF
    if kind == _LEAF:
        return None
    children = tuple(_read_node(fb, buf, table.Indirect(at)) for at in vector(1))
    if kind == _NONE:
        return (type(None), None, ())
    if kind in (_TUPLE, _LIST):
        return (tuple if kind == _TUPLE else list, None, children)
    if kind == _DICT:
        names = tuple(table.String(at).decode("utf-8") for at in vector(2))
        return (dict, names, children)
    if kind != _CUSTOM:
        raise ValueError(f"Unknown pytree node kind {kind} in a serialized PyTreeDef.")
    name = table.String(field(3) + table.Pos).decode("utf-8")
    nodetype = _node_types_by_name.get(name)
    if nodetype is None:
        raise ValueError(f"Cannot deserialize a PyTreeDef with an unregistered custom node "
                         f"type {name!r}: register it with "
                         "`export.register_pytree_node_serialization` first.")
    o = field(4)
    aux_bytes = b""
    if o:
        start = table.Vector(o)
        aux_bytes = bytes(buf[start:start + table.VectorLen(o)])
    return (nodetype, _node_serializers[nodetype][2](aux_bytes), children)


def deserialize_pytreedef(pytreedef_repr: dict[str, Any]) -> PyTreeDef:
    """The ``PyTreeDef`` that :func:`serialize_pytreedef` (or JAX's) encoded."""
    fb = _flatbuffers()
    buf = base64.b64decode(pytreedef_repr[_TREE_REPR_KEY])
    root = fb.encode.Get(fb.packer.uoffset, buf, 0)
    return PyTreeDef._make(_read_node(fb, buf, root))
