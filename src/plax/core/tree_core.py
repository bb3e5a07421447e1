"""The pytree machinery under ``tree_util``: the node registry, flattening and PyTreeDef.

Internally a treedef is a nested tuple: a leaf is ``None`` and a node is the triple
``(node_type, aux_data, children)``. Comparing two treedefs is then a plain tuple
comparison done in C, which keeps cache lookups on the dispatch path cheap.
"""

from __future__ import annotations

import collections
from typing import Callable, NamedTuple

from plax.core.tree_keys import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey


_NoneType = type(None)


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------


class _NodeType(NamedTuple):
    flatten: Callable  # x -> (children, aux)
    unflatten: Callable  # (aux, children_tuple) -> x
    flatten_with_keys: Callable  # x -> ([(key, child), ...], aux)
    child_keys: tuple | None = None  # the children's keys when the type fixes them


# The registered pytree node types (namedtuples, recognised structurally, are not here).
node_registry: dict[type, _NodeType] = {}
# Called as hook(nodetype, entry) on each registration (jit's C++ dispatch mirrors them).
registration_hooks: list = []


def _index_keys(flatten):
    """Derive a keyed flatten from a plain one, using FlattenedIndexKey."""

    def flatten_with_keys(x):
        children, aux = flatten(x)
        return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)], aux

    return flatten_with_keys


def _register(nodetype, flatten, unflatten, flatten_with_keys, child_keys=None):
    if nodetype in node_registry:
        raise ValueError(
            f"Duplicate custom PyTreeDef type registration for {nodetype}: "
            "a type can only be registered as a pytree node once."
        )
    node_registry[nodetype] = entry = _NodeType(flatten, unflatten, flatten_with_keys, child_keys)
    for hook in registration_hooks:
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
    import dataclasses  # (here, not at load: importing it is a cost every import plax paid)
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


def is_namedtuple_type(t) -> bool:
    """Whether class ``t`` is a namedtuple (a tuple subclass with ``_fields``)."""
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


def node_type_for(t):
    """The registry entry for type ``t`` (or a namedtuple's), else None."""
    entry = node_registry.get(t)
    if entry is None and is_namedtuple_type(t):
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
    entry = node_registry.get(t)
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
        if type(c) in node_registry or isinstance(c, tuple):
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
    entry = node_type_for(type(x))
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
    entry = node_type_for(type(x))
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
    entry = node_type_for(type(tree))
    if entry is None:
        raise ValueError(f"can't tree-flatten a leaf of type {type(tree)}")
    children, aux = entry.flatten(tree)
    return tuple(children), aux


def flatten_one_level_with_keys(tree):
    """Split a node into ``(((key, child), ...), aux_data)``."""
    entry = node_type_for(type(tree))
    if entry is None:
        raise ValueError(f"can't tree-flatten a leaf of type {type(tree)}")
    pairs, aux = entry.flatten_with_keys(tree)
    return tuple(pairs), aux


def is_tree_node(x) -> bool:
    """Whether ``x`` is a pytree node (as opposed to a leaf)."""
    return node_type_for(type(x)) is not None


def all_leaves(iterable, is_leaf=None) -> bool:
    """Whether every element of ``iterable`` is a leaf."""
    if is_leaf is None:
        return all(not is_tree_node(x) for x in iterable)
    return all(is_leaf(x) or not is_tree_node(x) for x in iterable)


# ---------------------------------------------------------------------------
# PyTreeDef
# ---------------------------------------------------------------------------


def count_leaves(node) -> int:
    """The number of leaves under the structure node ``node`` (None is one leaf)."""
    if node is None:
        return 1
    return sum(count_leaves(c) for c in node[2])


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
    return node_type_for(t).unflatten(aux, tuple(values))


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
    label = f"namedtuple[{t.__name__}]" if t not in node_registry and is_namedtuple_type(t) \
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
    elif t not in node_registry and is_namedtuple_type(t):
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
        xs, xaux = node_registry[t].flatten(x)
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
    return node_type_for(t).unflatten(aux, values)


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
            self._num_leaves = count_leaves(self._node)
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
