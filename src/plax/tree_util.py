"""Pytrees: nested containers whose leaves can be flattened out and put back.

A pytree is any nesting of *nodes* (tuples, lists, dicts, ``None``,
namedtuples, ``OrderedDict``, ``defaultdict`` and any registered type) with
arbitrary objects as *leaves*.  ``tree_flatten`` splits a pytree into its list
of leaves and a :class:`PyTreeDef` describing the containers, and
``tree_unflatten`` puts them back together.

Internally a treedef is a nested tuple: a leaf is ``None`` and a node is the
triple ``(node_type, aux_data, children)``.  Comparing two treedefs is then a
plain tuple comparison done in C, which keeps cache lookups on the dispatch
path cheap.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Callable, NamedTuple

from plax.tree_keys import (DictKey, FlattenedIndexKey, GetAttrKey, KeyEntry, KeyPath,
                            SequenceKey, _simple_key_str, keystr)

__all__ = [
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "KeyEntry",
    "KeyPath",
    "Partial",
    "PyTreeDef",
    "SequenceKey",
    "all_leaves",
    "build_tree",
    "flatten_one_level",
    "flatten_one_level_with_keys",
    "is_tree_node",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "register_pytree_with_keys_class",
    "register_static",
    "tree_all",
    "tree_broadcast",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_reduce_associative",
    "tree_structure",
    "tree_transpose",
    "tree_unflatten",
    "treedef_children",
    "treedef_is_leaf",
    "treedef_tuple",
]

_NoneType = type(None)


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------


class _NodeType(NamedTuple):
    flatten: Callable  # x -> (children, aux)
    unflatten: Callable  # (aux, children_tuple) -> x
    flatten_with_keys: Callable  # x -> ([(key, child), ...], aux)
    child_keys: tuple | None = None  # the children's keys when the type fixes them


_registry: dict[type, _NodeType] = {}
# Called as hook(nodetype, entry) on each registration (jit's C++ dispatch mirrors them).
_registration_hooks: list = []


def _index_keys(flatten):
    """Derive a keyed flatten from a plain one, using FlattenedIndexKey."""

    def flatten_with_keys(x):
        children, aux = flatten(x)
        return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)], aux

    return flatten_with_keys


def _register(nodetype, flatten, unflatten, flatten_with_keys, child_keys=None):
    if nodetype in _registry:
        raise ValueError(
            f"Duplicate custom PyTreeDef type registration for {nodetype}: "
            "a type can only be registered as a pytree node once."
        )
    _registry[nodetype] = entry = _NodeType(flatten, unflatten, flatten_with_keys, child_keys)
    for hook in _registration_hooks:
        hook(nodetype, entry)


def register_pytree_node(
    nodetype, flatten_func, unflatten_func, flatten_with_keys_func=None
):
    """Make ``nodetype`` a pytree node.

    ``flatten_func(x) -> (children, aux_data)`` and
    ``unflatten_func(aux_data, children) -> x``.  ``aux_data`` must be
    hashable-ish and comparable with ``==``; it becomes part of the treedef.
    """
    if flatten_with_keys_func is None:
        flatten_with_keys_func = _index_keys(flatten_func)
    _register(nodetype, flatten_func, unflatten_func, flatten_with_keys_func)


def register_pytree_with_keys(
    nodetype, flatten_with_keys, unflatten_func, flatten_func=None
):
    """Like :func:`register_pytree_node`, but the primary flatten function
    returns ``((key, child), ...)`` pairs so that paths name the children."""
    if flatten_func is None:

        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux

    _register(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls):
    """Class decorator: register ``cls`` using its ``tree_flatten`` method and
    ``tree_unflatten`` classmethod."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls):
    """Class decorator: register ``cls`` using ``tree_flatten_with_keys`` and
    ``tree_unflatten`` (and ``tree_flatten`` when the class defines it)."""
    flatten = None
    if hasattr(cls, "tree_flatten"):
        flatten = lambda x: x.tree_flatten()  # noqa: E731
    register_pytree_with_keys(
        cls, lambda x: x.tree_flatten_with_keys(), cls.tree_unflatten, flatten
    )
    return cls


def register_static(cls):
    """Register ``cls`` as a node without children: instances are carried in
    the treedef itself, so they must be hashable and comparable."""
    register_pytree_node(cls, lambda x: ((), x), lambda aux, _: aux)
    return cls


def _dataclass_fields(nodetype, data_fields, meta_fields, drop_fields):
    """Work out (and check) the data/meta split for register_dataclass."""
    is_dc = dataclasses.is_dataclass(nodetype)
    if data_fields is None and meta_fields is None:
        if not is_dc:
            raise TypeError(
                "register_dataclass: data_fields and meta_fields are required "
                f"for {nodetype}, which is not a dataclass."
            )
        data_fields, meta_fields = [], []
        for f in dataclasses.fields(nodetype):
            if not f.init or f.name in drop_fields:
                continue
            is_static = f.metadata.get("static", False)
            (meta_fields if is_static else data_fields).append(f.name)
        return tuple(data_fields), tuple(meta_fields)
    if data_fields is None or meta_fields is None:
        raise TypeError(
            "register_dataclass: data_fields and meta_fields must both be "
            f"given, or neither; got data_fields={data_fields!r}, "
            f"meta_fields={meta_fields!r}."
        )
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if is_dc:
        expected = {f.name for f in dataclasses.fields(nodetype) if f.init}
        given = set(data_fields) | set(meta_fields)
        missing = expected - given - set(drop_fields)
        unexpected = given - expected
        problems = []
        if missing:
            problems.append(f"missing fields {missing} (list them in "
                            "drop_fields to leave them out on purpose)")
        if unexpected:
            problems.append(f"unexpected fields {unexpected}")
        if problems:
            raise ValueError(
                f"register_dataclass({nodetype.__name__}): data_fields and "
                "meta_fields must name exactly the dataclass fields with "
                "init=True; " + "; ".join(problems) + "."
            )
    return data_fields, meta_fields


def register_dataclass(nodetype, data_fields=None, meta_fields=None, drop_fields=()):
    """Register a (data)class whose ``data_fields`` are children and whose
    ``meta_fields`` are static aux data.

    For a dataclass the split may be inferred: fields declared with
    ``metadata=dict(static=True)`` are meta, the other ``init=True`` fields
    are data.  Returns ``nodetype`` so it can be used as a decorator.
    """
    data_fields, meta_fields = _dataclass_fields(
        nodetype, data_fields, meta_fields, tuple(drop_fields)
    )

    def flatten(x):
        children = [getattr(x, name) for name in data_fields]
        return children, tuple(getattr(x, name) for name in meta_fields)

    def flatten_with_keys(x):
        pairs = [(GetAttrKey(name), getattr(x, name)) for name in data_fields]
        return pairs, tuple(getattr(x, name) for name in meta_fields)

    def unflatten(aux, children):
        kwargs = dict(zip(meta_fields, aux))
        kwargs.update(zip(data_fields, children))
        return nodetype(**kwargs)

    _register(nodetype, flatten, unflatten, flatten_with_keys,
              tuple(GetAttrKey(name) for name in data_fields))
    return nodetype


# -- built-in node types -----------------------------------------------------


def _sorted_keys(d) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError as e:
        raise ValueError(
            "Comparator raised exception while sorting pytree dictionary keys: "
            f"the keys of a dict in a pytree must be mutually orderable ({e})."
        ) from None


def _flatten_dict(d):
    keys = _sorted_keys(d)
    return [d[k] for k in keys], keys


def _flatten_dict_with_keys(d):
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], keys


def _flatten_defaultdict(d):
    keys = _sorted_keys(d)
    return [d[k] for k in keys], (d.default_factory, keys)


def _flatten_defaultdict_with_keys(d):
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], (d.default_factory, keys)


def _seq_with_keys(x):
    return [(SequenceKey(i), c) for i, c in enumerate(x)], None


_register(tuple, lambda x: (x, None), lambda _, ch: tuple(ch), _seq_with_keys)
_register(list, lambda x: (x, None), lambda _, ch: list(ch), _seq_with_keys)
_register(dict, _flatten_dict, lambda keys, ch: dict(zip(keys, ch)),
          _flatten_dict_with_keys)
_register(_NoneType, lambda x: ((), None), lambda _, ch: None,
          lambda x: ((), None))
_register(
    collections.OrderedDict,
    lambda d: (list(d.values()), tuple(d)),
    lambda keys, ch: collections.OrderedDict(zip(keys, ch)),
    lambda d: ([(DictKey(k), v) for k, v in d.items()], tuple(d)),
)
_register(
    collections.defaultdict,
    _flatten_defaultdict,
    lambda aux, ch: collections.defaultdict(aux[0], zip(aux[1], ch)),
    _flatten_defaultdict_with_keys,
)


def _is_namedtuple_type(t) -> bool:
    return issubclass(t, tuple) and hasattr(t, "_fields")


# Namedtuple classes are recognised structurally rather than registered; their
# synthesised entries are cached here, separately from the user registry.
_namedtuple_entries: dict[type, _NodeType] = {}


def _namedtuple_entry(t) -> _NodeType:
    entry = _namedtuple_entries.get(t)
    if entry is None:
        entry = _NodeType(
            lambda x: (x, None),
            lambda _, ch: t(*ch),
            lambda x: ([(GetAttrKey(f), c) for f, c in zip(t._fields, x)], None),
        )
        _namedtuple_entries[t] = entry
    return entry


def _node_type_for(t):
    """The registry entry for type ``t`` (or a namedtuple's), else None."""
    entry = _registry.get(t)
    if entry is None and _is_namedtuple_type(t):
        return _namedtuple_entry(t)
    return entry


# ---------------------------------------------------------------------------
# Flattening
# ---------------------------------------------------------------------------

_NONE_NODE = (_NoneType, None, ())


def _flatten(x, leaves):
    """Append the leaves of ``x`` to ``leaves``; return the structure node.

    This is on the dispatch hot path, so tuples, lists and dicts are handled
    inline and leaf children are appended without a recursive call.
    """
    t = type(x)
    if t is tuple or t is list:
        return (t, None, _flatten_children(x, leaves))
    if t is dict:
        keys = _sorted_keys(x)
        return (dict, keys, _flatten_children([x[k] for k in keys], leaves))
    if t is _NoneType:
        return _NONE_NODE
    entry = _registry.get(t)
    if entry is None:
        if isinstance(x, tuple) and hasattr(t, "_fields"):  # namedtuple
            return (t, None, _flatten_children(x, leaves))
        leaves.append(x)
        return None
    children, aux = entry.flatten(x)
    return (t, aux, _flatten_children(children, leaves))


def _flatten_children(children, leaves):
    nodes = []
    append = nodes.append
    for c in children:
        # Anything that is neither registered nor a tuple subclass is a leaf.
        if type(c) in _registry or isinstance(c, tuple):
            append(_flatten(c, leaves))
        else:
            leaves.append(c)
            append(None)
    return tuple(nodes)


def _flatten_is_leaf(x, leaves, is_leaf):
    """Like :func:`_flatten`, but ``is_leaf(subtree)`` may stop the descent."""
    if is_leaf(x):
        leaves.append(x)
        return None
    entry = _node_type_for(type(x))
    if entry is None:
        leaves.append(x)
        return None
    children, aux = entry.flatten(x)
    return (type(x), aux, tuple([_flatten_is_leaf(c, leaves, is_leaf)
                                 for c in children]))


def _flatten_with_keys(x, path, out, is_leaf, takes_path):
    """Append ``(key_path, leaf)`` pairs to ``out``; return the node."""
    if is_leaf is not None and (is_leaf(path, x) if takes_path else is_leaf(x)):
        out.append((path, x))
        return None
    entry = _node_type_for(type(x))
    if entry is None:
        out.append((path, x))
        return None
    pairs, aux = entry.flatten_with_keys(x)
    children = tuple([
        _flatten_with_keys(c, path + (k,), out, is_leaf, takes_path)
        for k, c in pairs
    ])
    return (type(x), aux, children)


def tree_flatten(tree, is_leaf=None):
    """Split ``tree`` into ``(leaves, treedef)``.

    ``is_leaf``, if given, is called on every subtree; a true result makes
    that subtree a leaf even if it is a container.
    """
    leaves = []
    if is_leaf is None:
        node = _flatten(tree, leaves)
    else:
        node = _flatten_is_leaf(tree, leaves, is_leaf)
    return leaves, PyTreeDef._make(node, len(leaves))


def tree_leaves(tree, is_leaf=None):
    """The leaves of ``tree``, in flattening order."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    """The :class:`PyTreeDef` of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def tree_unflatten(treedef, leaves):
    """Rebuild a pytree with structure ``treedef`` from ``leaves``."""
    return treedef.unflatten(leaves)


def tree_flatten_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """Like :func:`tree_flatten` but each leaf comes with its key path:
    returns ``([(path, leaf), ...], treedef)``."""
    out = []
    node = _flatten_with_keys(tree, (), out, is_leaf, is_leaf_takes_path)
    return out, PyTreeDef._make(node, len(out))


def tree_leaves_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """``[(path, leaf), ...]`` for every leaf of ``tree``."""
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def flatten_one_level(tree):
    """Split a node into ``(children, aux_data)``; raise for a leaf."""
    entry = _node_type_for(type(tree))
    if entry is None:
        raise ValueError(f"can't tree-flatten a leaf of type {type(tree)}")
    children, aux = entry.flatten(tree)
    return tuple(children), aux


def flatten_one_level_with_keys(tree):
    """Split a node into ``(((key, child), ...), aux_data)``."""
    entry = _node_type_for(type(tree))
    if entry is None:
        raise ValueError(f"can't tree-flatten a leaf of type {type(tree)}")
    pairs, aux = entry.flatten_with_keys(tree)
    return tuple(pairs), aux


def is_tree_node(x) -> bool:
    """Whether ``x`` is a pytree node (as opposed to a leaf)."""
    return _node_type_for(type(x)) is not None


def all_leaves(iterable, is_leaf=None) -> bool:
    """Whether every element of ``iterable`` is a leaf."""
    if is_leaf is None:
        return all(not is_tree_node(x) for x in iterable)
    return all(is_leaf(x) or not is_tree_node(x) for x in iterable)


# ---------------------------------------------------------------------------
# PyTreeDef
# ---------------------------------------------------------------------------


def _count_leaves(node) -> int:
    if node is None:
        return 1
    return sum(_count_leaves(c) for c in node[2])


def _count_nodes(node) -> int:
    if node is None:
        return 1
    return 1 + sum(_count_nodes(c) for c in node[2])


def _shape_only(node):
    """The node with custom aux data dropped, for hashing unhashable aux."""
    if node is None:
        return None
    t, aux, children = node
    if t is dict or t is collections.OrderedDict:
        kept = aux
    else:
        kept = None
    return (t, kept, tuple(_shape_only(c) for c in children))


def _unflatten(node, it):
    """Rebuild the (non-leaf) ``node`` taking leaves from iterator ``it``."""
    t, aux, children = node
    values = [next(it) if c is None else _unflatten(c, it) for c in children]
    if t is tuple:
        return tuple(values)
    if t is list:
        return values
    if t is dict:
        return dict(zip(aux, values))
    return _node_type_for(t).unflatten(aux, tuple(values))


def _node_repr(node) -> str:
    if node is None:
        return "*"
    t, aux, children = node
    parts = [_node_repr(c) for c in children]
    if t is tuple:
        return "(" + parts[0] + ",)" if len(parts) == 1 else "(" + ", ".join(parts) + ")"
    if t is list:
        return "[" + ", ".join(parts) + "]"
    if t is dict:
        return "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(aux, parts)) + "}"
    if t is _NoneType:
        return "None"
    label = f"namedtuple[{t.__name__}]" if t not in _registry and _is_namedtuple_type(t) \
        else f"{t.__name__}[{aux}]"
    return f"CustomNode({label}, [{', '.join(parts)}])"


def _describe(x, limit=200) -> str:
    text = repr(x)
    return text if len(text) <= limit else text[:limit] + "..."


def _flatten_up_to(node, x, out):
    """Append to ``out`` the subtrees of ``x`` sitting at the leaves of
    ``node``, checking that ``x`` has every container ``node`` has."""
    if node is None:
        out.append(x)
        return
    t, aux, children = node
    xt = type(x)
    if t is tuple or t is list:
        name = t.__name__
        if xt is not t:
            raise ValueError(f"Expected {name}, got {_describe(x)}. The tree "
                             f"has a {xt} where the treedef has a {name}.")
        if len(x) != len(children):
            raise ValueError(
                f"{name.capitalize()} arity mismatch: the treedef expects "
                f"{len(children)} elements but the {name} has {len(x)}; "
                f"{name}: {_describe(x)}."
            )
        xs = x
    elif t is dict:
        if xt is not dict:
            raise ValueError(f"Expected dict, got {_describe(x)}. The tree "
                             f"has a {xt} where the treedef has a dict.")
        keys = _sorted_keys(x)
        if keys != aux:
            raise ValueError(
                f"Dict key mismatch; expected keys: {list(aux)}; "
                f"keys found in the tree: {list(keys)}."
            )
        xs = [x[k] for k in keys]
    elif t is _NoneType:
        if x is not None:
            raise ValueError(
                f"Expected None, got {_describe(x)}. None is a pytree node "
                "with no children, so it only matches None; to treat None as "
                "a leaf pass is_leaf=lambda x: x is None."
            )
        return
    elif t not in _registry and _is_namedtuple_type(t):
        if not (isinstance(x, tuple) and hasattr(xt, "_fields")):
            raise ValueError(f"Expected named tuple, got {_describe(x)}; the "
                             f"treedef has a {t} here.")
        if xt is not t:
            raise ValueError(f"Named tuple type mismatch: the treedef has "
                             f"{t} but the tree has {xt}; tuple: {_describe(x)}.")
        xs = x
    else:
        if xt is not t:
            raise ValueError(
                f"Custom node type mismatch: the treedef has {t} but the tree "
                f"has {xt}; value: {_describe(x)}."
            )
        xs, xaux = _registry[t].flatten(x)
        if xaux != aux:
            raise ValueError(
                f"Mismatch custom node data: the treedef holds {aux!r} but "
                f"the tree's node holds {xaux!r}; value: {_describe(x)}."
            )
        xs = list(xs)
        if len(xs) != len(children):
            raise ValueError(
                f"Custom node arity mismatch: the treedef expects "
                f"{len(children)} children but the node has {len(xs)}; "
                f"value: {_describe(x)}."
            )
    for child_node, child in zip(children, xs):
        _flatten_up_to(child_node, child, out)


def _from_iterable(node, xs):
    if node is None:
        return xs
    t, aux, children = node
    xs = list(xs)
    if len(xs) != len(children):
        raise ValueError(
            f"Arity mismatch between trees: the treedef node has "
            f"{len(children)} children but {len(xs)} values were given."
        )
    values = tuple(_from_iterable(c, x) for c, x in zip(children, xs))
    return _node_type_for(t).unflatten(aux, values)


def _compose(outer, inner):
    if outer is None:
        return inner
    t, aux, children = outer
    return (t, aux, tuple(_compose(c, inner) for c in children))


class PyTreeDef:
    """The container structure of a pytree, without its leaves.

    Hashable and comparable with ``==``; two treedefs are equal when they
    have the same node types, the same aux data and the same shape.
    """

    __slots__ = ("_node", "_num_leaves", "_num_nodes", "_hash")

    def __init__(self, *args, **kwargs):
        raise TypeError("PyTreeDef objects are created by tree_flatten / "
                        "tree_structure, not constructed directly.")

    @classmethod
    def _make(cls, node, num_leaves=None):
        self = object.__new__(cls)
        self._node = node
        self._num_leaves = num_leaves
        self._num_nodes = None
        self._hash = None
        return self

    # -- pickling (object.__new__ path, since __init__ refuses) ---------------
    def __reduce__(self):
        return (PyTreeDef._make, (self._node, self._num_leaves))

    @property
    def num_leaves(self) -> int:
        """Number of leaves in trees of this structure."""
        if self._num_leaves is None:
            self._num_leaves = _count_leaves(self._node)
        return self._num_leaves

    @property
    def num_nodes(self) -> int:
        """Number of nodes, counting leaves and the root."""
        if self._num_nodes is None:
            self._num_nodes = _count_nodes(self._node)
        return self._num_nodes

    def unflatten(self, leaves):
        """Build a pytree of this structure from an iterable of leaves."""
        leaves = list(leaves)
        n = self.num_leaves
        if len(leaves) < n:
            raise ValueError(f"Too few leaves for PyTreeDef: it needs {n} "
                             f"leaves but only {len(leaves)} were given.")
        if len(leaves) > n:
            raise ValueError(f"Too many leaves for PyTreeDef: it needs {n} "
                             f"leaves but {len(leaves)} were given.")
        if self._node is None:
            return leaves[0]
        return _unflatten(self._node, iter(leaves))

    def flatten_up_to(self, tree):
        """Flatten ``tree`` only as deep as this treedef goes: returns the
        subtrees of ``tree`` found where this treedef has leaves."""
        out = []
        _flatten_up_to(self._node, tree, out)
        return out

    def children(self):
        """Treedefs of the root node's children (empty for a leaf)."""
        if self._node is None:
            return []
        return [PyTreeDef._make(c) for c in self._node[2]]

    def node_data(self):
        """``(node_type, aux_data)`` of the root node, or ``None`` for a leaf."""
        if self._node is None:
            return None
        t, aux, _ = self._node
        if t is dict:
            return (dict, list(aux))
        return (t, aux)

    def compose(self, inner):
        """The treedef obtained by putting ``inner`` at every leaf of self."""
        return PyTreeDef._make(_compose(self._node, inner._node),
                               self.num_leaves * inner.num_leaves)

    def from_iterable_tree(self, xs):
        """Build a pytree of this structure from nested iterables ``xs``,
        where every node is given as an iterable of its children."""
        return _from_iterable(self._node, xs)

    def __eq__(self, other):
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        return self is other or self._node == other._node

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self):
        if self._hash is None:
            try:
                self._hash = hash(self._node)
            except TypeError:  # some custom node carries unhashable aux data
                self._hash = hash(_shape_only(self._node))
        return self._hash

    def __repr__(self):
        return f"PyTreeDef({_node_repr(self._node)})"


def treedef_is_leaf(treedef) -> bool:
    """Whether ``treedef`` is a single node (a leaf, or a childless node)."""
    return treedef.num_nodes == 1


def treedef_children(treedef):
    """Treedefs of the root's children."""
    return treedef.children()


def treedef_tuple(treedefs):
    """The treedef of a tuple whose elements have the given treedefs."""
    treedefs = list(treedefs)
    node = (tuple, None, tuple(td._node for td in treedefs))
    return PyTreeDef._make(node, sum(td.num_leaves for td in treedefs))


def build_tree(treedef, xs):
    """Build a pytree of structure ``treedef`` from nested iterables ``xs``."""
    return treedef.from_iterable_tree(xs)


# ---------------------------------------------------------------------------
# Mapping and reductions
# ---------------------------------------------------------------------------


def _mismatch_message(kind, name, path, detail):
    return (f"pytree structure error: {kind} at key path\n"
            f"    {name}{keystr(path)}\n{detail}")


class _NodeView:
    """A node of a treedef standing in for the subtree it describes, so that a structure
    error can be described without building that subtree (a custom node's unflatten
    function never sees stand-in children)."""

    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node

    def node_type(self):
        return None if self.node is None else self.node[0]

    def keyed_children(self):
        t, aux, children = self.node
        if t is dict or t is collections.OrderedDict:
            keys = [DictKey(k) for k in aux]
        elif t is collections.defaultdict:
            keys = [DictKey(k) for k in aux[1]]
        elif t is tuple or t is list:
            keys = [SequenceKey(i) for i in range(len(children))]
        elif t not in _registry and _is_namedtuple_type(t):
            keys = [GetAttrKey(f) for f in t._fields]
        elif _registry[t].child_keys is not None:
            keys = _registry[t].child_keys
        else:
            keys = [FlattenedIndexKey(i) for i in range(len(children))]
        return [(k, _NodeView(c)) for k, c in zip(keys, children)], aux


def treedef_leaf_paths(treedef) -> list:
    """The key path of each leaf of ``treedef``, read off the structure alone: no tree is
    built. A custom node's children get ``FlattenedIndexKey`` keys unless its type fixes
    them (a registered dataclass's field names), as its instance is not at hand."""
    out = []

    def walk(view, path):
        if view.node is None:
            out.append(path)
            return
        for key, child in view.keyed_children()[0]:
            walk(child, path + (key,))

    walk(_NodeView(treedef._node), ())
    return out


def _find_mismatch(prefix, full, is_leaf, takes_path, name, which, path=()):
    """Describe the first place where ``full`` (a pytree, or a ``_NodeView`` of a
    treedef's node) does not extend ``prefix``, or return None when it does."""
    if is_leaf is not None and (is_leaf(path, prefix) if takes_path
                                else is_leaf(prefix)):
        return None
    entry = _node_type_for(type(prefix))
    if entry is None:
        return None
    view = isinstance(full, _NodeView)
    pt, ft = type(prefix), full.node_type() if view else type(full)
    if pt is not ft:
        held = "a pytree leaf" if ft is None else f"a {ft}"
        return _mismatch_message(
            "different types", name, path,
            f"Here the first tree holds a {pt}, but {which} holds {held}.",
        )
    p_pairs, p_aux = entry.flatten_with_keys(prefix)
    f_pairs, f_aux = full.keyed_children() if view else entry.flatten_with_keys(full)
    p_pairs, f_pairs = list(p_pairs), list(f_pairs)
    if pt is tuple or pt is list:
        if len(p_pairs) != len(f_pairs):
            return _mismatch_message(
                f"different lengths of {pt.__name__}", name, path,
                f"Here the first tree's {pt.__name__} has {len(p_pairs)} "
                f"elements, but {which} has one with {len(f_pairs)}.",
            )
    elif len(p_pairs) != len(f_pairs):
        p_keys = " ".join(_simple_key_str(k) for k, _ in p_pairs)
        f_keys = " ".join(_simple_key_str(k) for k, _ in f_pairs)
        return _mismatch_message(
            "different numbers of pytree children", name, path,
            f"Here the first tree's {pt} node has {len(p_pairs)} children "
            f"(keys: {p_keys}), but {which} has {len(f_pairs)} "
            f"(keys: {f_keys}).",
        )
    if p_aux != f_aux:
        import difflib
        diff = "\n".join("    " + line.rstrip("\n") for line in difflib.ndiff(
            [repr(p_aux)], [repr(f_aux)]))
        return _mismatch_message(
            "different pytree metadata", name, path,
            f"Both trees hold a {pt} here, but the first tree's node has "
            f"metadata {p_aux!r} while {which} has {f_aux!r}:\n{diff}",
        )
    for (key, p_child), (_, f_child) in zip(p_pairs, f_pairs):
        found = _find_mismatch(p_child, f_child, is_leaf, takes_path, name,
                               which, path + (key,))
        if found is not None:
            return found
    return None


def _flatten_rest(treedef, tree, rest, is_leaf, name, takes_path=False):
    """``treedef.flatten_up_to`` for each extra tree, with errors that point
    at the key path of the first structural difference."""
    out = []
    for i, other in enumerate(rest):
        try:
            out.append(treedef.flatten_up_to(other))
        except ValueError as e:
            which = f"tree argument {i + 2} of {name}"
            msg = _find_mismatch(tree, other, is_leaf, takes_path,
                                 f"{name} tree", which)
            if msg is None:
                raise
            raise ValueError(msg) from e
    return out


def tree_map(f, tree, *rest, is_leaf=None):
    """Apply ``f`` leaf-wise: ``f(x, *ys)`` for each leaf ``x`` of ``tree`` and
    the corresponding subtrees ``ys`` of ``rest`` (which must have ``tree``'s
    structure as a prefix).  Returns a tree with ``tree``'s structure."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return treedef.unflatten([f(x) for x in leaves])
    others = _flatten_rest(treedef, tree, rest, is_leaf, "tree_map")
    return treedef.unflatten([f(*xs) for xs in zip(leaves, *others)])


def tree_map_with_path(f, tree, *rest, is_leaf=None, is_leaf_takes_path=False):
    """Like :func:`tree_map`, but ``f`` also receives the key path as its
    first argument."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    paths = [p for p, _ in pairs]
    leaves = [x for _, x in pairs]
    others = _flatten_rest(treedef, tree, rest, is_leaf, "tree_map_with_path",
                           is_leaf_takes_path)
    return treedef.unflatten([f(*xs) for xs in zip(paths, leaves, *others)])


class _NoInitializer:
    def __repr__(self):
        return "<no initializer>"


_NO_INITIALIZER = _NoInitializer()


def tree_reduce(function, tree, initializer=_NO_INITIALIZER, is_leaf=None):
    """``functools.reduce`` over the leaves of ``tree``."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIALIZER:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_reduce_associative(operation, tree, *, identity=_NO_INITIALIZER, is_leaf=None):
    """Reduce the leaves pairwise (balanced), for an associative operation."""
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _NO_INITIALIZER:
            raise TypeError("tree_reduce_associative: an empty tree needs an "
                            "identity to return.")
        return identity
    while len(leaves) > 1:
        paired = [operation(a, b) for a, b in zip(leaves[::2], leaves[1::2])]
        if len(leaves) % 2:
            paired.append(leaves[-1])
        leaves = paired
    return leaves[0]


def tree_all(tree, *, is_leaf=None) -> bool:
    """Whether every leaf of ``tree`` is truthy."""
    return all(tree_leaves(tree, is_leaf))


def tree_broadcast(prefix_tree, full_tree, is_leaf=None, *, name: str = "tree_broadcast"):
    """Replicate each leaf of ``prefix_tree`` over the matching subtree of
    ``full_tree``; the result has ``full_tree``'s structure. ``name`` is what a structure
    error calls the prefix tree."""
    return tree_structure(full_tree).unflatten(
        broadcast_prefix(prefix_tree, full_tree, is_leaf, name=name))


def _broadcast_nodes(prefix, full, leaves, out) -> None:
    """Walk prefix node ``prefix`` and full node ``full`` together, appending each prefix
    leaf (taken from iterator ``leaves``) once per leaf of the full subtree under it."""
    if prefix is None:
        out.extend([next(leaves)] * _count_leaves(full))
        return
    if full is None or prefix[0] is not full[0] or len(prefix[2]) != len(full[2]) \
            or prefix[1] != full[1]:
        raise ValueError("not a tree prefix")
    for p, f in zip(prefix[2], full[2]):
        _broadcast_nodes(p, f, leaves, out)


def _broadcast_prefix(prefix_tree, full_def, full_shown, is_leaf, name, which) -> list:
    leaves, prefix_def = tree_flatten(prefix_tree, is_leaf)
    out = []
    try:
        _broadcast_nodes(prefix_def._node, full_def._node, iter(leaves), out)
    except ValueError:
        msg = _find_mismatch(prefix_tree, full_shown, is_leaf, False, name, which)
        raise ValueError(msg or f"{name} is not a tree prefix of {which}.") from None
    return out


def broadcast_prefix(prefix_tree, full_tree, is_leaf=None, *, name: str = "broadcast_prefix",
                     which: str | None = None) -> list:
    """The leaves of ``prefix_tree`` (a tree prefix of ``full_tree``), each repeated once per
    leaf of the subtree of ``full_tree`` it covers: one entry per leaf of ``full_tree``.

    Only flattens: no node of ``full_tree`` is rebuilt, so a custom node's unflatten function
    never sees the prefix's values (axis specs, shardings). A structure error names the
    place as ``name`` (default ``"<name> tree"``) and the full tree as ``which``."""
    return _broadcast_prefix(prefix_tree, tree_structure(full_tree), full_tree, is_leaf,
                             f"{name} tree" if which is None else name,
                             which or f"tree argument 2 of {name}")


def broadcast_prefix_to_treedef(prefix_tree, full_treedef, is_leaf=None, *,
                                name: str = "broadcast_prefix", which: str | None = None) -> list:
    """:func:`broadcast_prefix` against a structure alone: one entry per leaf of
    ``full_treedef``. No tree of that structure is built, not even for an error message."""
    return _broadcast_prefix(prefix_tree, full_treedef, _NodeView(full_treedef._node), is_leaf,
                             f"{name} tree" if which is None else name,
                             which or f"tree argument 2 of {name}")


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """Turn a tree of structure ``outer`` of trees of structure ``inner`` into
    a tree of structure ``inner`` of trees of structure ``outer``.

    ``inner_treedef`` may be None, in which case it is read off the first
    outer leaf.
    """
    if inner_treedef is None:
        first = outer_treedef.flatten_up_to(pytree_to_transpose)[0]
        inner_treedef = tree_structure(first)
    leaves, treedef = tree_flatten(pytree_to_transpose)
    expected = outer_treedef.compose(inner_treedef)
    if treedef != expected:
        raise TypeError(
            "tree_transpose: structure mismatch; the tree has structure\n"
            f"{treedef}\nbut outer/inner treedefs describe\n{expected}"
        )
    n_inner = inner_treedef.num_leaves
    rows = [leaves[i:i + n_inner] for i in range(0, len(leaves), n_inner)]
    columns = [outer_treedef.unflatten(col) for col in zip(*rows)]
    if not rows:  # empty outer: every inner leaf gets an empty outer tree
        columns = [outer_treedef.unflatten([]) for _ in range(n_inner)]
    return inner_treedef.unflatten(columns)


# ---------------------------------------------------------------------------
# Partial
# ---------------------------------------------------------------------------


class _WrappedPartial:
    """Holds a partial used as the ``func`` of a :class:`Partial`.

    ``functools.partial`` merges a partial ``func`` into the new object,
    which would move the inner partial's (static) arguments into the outer
    one's children.  Wrapping prevents that merge; equality and hashing are
    forwarded so treedefs still compare as expected.
    """

    __slots__ = ("func",)

    def __init__(self, func):
        self.func = func

    def __call__(self, *args, **kwargs):
        return self.func(*args, **kwargs)

    def __eq__(self, other):
        if isinstance(other, _WrappedPartial):
            other = other.func
        return self.func == other

    def __hash__(self):
        return hash(self.func)

    def __repr__(self):
        return repr(self.func)


class Partial(functools.partial):
    """A ``functools.partial`` that is also a pytree.

    The wrapped function is static (part of the treedef); the bound
    positional and keyword arguments are children, so a ``Partial`` can be
    passed through transformations like any other pytree.
    """

    def __new__(cls, func, *args, **kwargs):
        if isinstance(func, functools.partial):
            func = _WrappedPartial(func)
        return super().__new__(cls, func, *args, **kwargs)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, children: Partial(func, *children[0], **children[1]),
)
