"""Pytrees: nested containers whose leaves can be flattened out and put back.

A pytree is any nesting of *nodes* (tuples, lists, dicts, ``None``,
namedtuples, ``OrderedDict``, ``defaultdict`` and any registered type) with
arbitrary objects as *leaves*.  ``tree_flatten`` splits a pytree into its list
of leaves and a :class:`PyTreeDef` describing the containers, and
``tree_unflatten`` puts them back together.

The registry, flattening and :class:`PyTreeDef` live in ``tree_core.py``; this module
is the public API over them, plus mapping, reductions, prefix broadcasting and
``Partial``.
"""

from __future__ import annotations

import collections
import functools

from plax.core.tree_keys import (DictKey, FlattenedIndexKey, GetAttrKey, KeyEntry, KeyPath,
                            SequenceKey, keystr)

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
    "default_registry",
]

from plax.core.tree_core import (
    PyTreeDef, all_leaves, build_tree, count_leaves, flatten_one_level,
    flatten_one_level_with_keys, is_namedtuple_type, is_tree_node, node_registry,
    node_type_for, register_dataclass, register_pytree_node, register_pytree_node_class,
    register_pytree_with_keys, register_pytree_with_keys_class, register_static, tree_flatten,
    tree_flatten_with_path, tree_leaves, tree_leaves_with_path, tree_structure, tree_unflatten,
    treedef_children, treedef_is_leaf, treedef_tuple)


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
        elif t not in node_registry and is_namedtuple_type(t):
            keys = [GetAttrKey(f) for f in t._fields]
        elif node_registry[t].child_keys is not None:
            keys = node_registry[t].child_keys
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
    entry = node_type_for(type(prefix))
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
        p_keys = keystr([k for k, _ in p_pairs], simple=True, separator=" ")
        f_keys = keystr([k for k, _ in f_pairs], simple=True, separator=" ")
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
        out.extend([next(leaves)] * count_leaves(full))
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


class PyTreeRegistry:
    """The registry of pytree node types, as an object (JAX's ``default_registry``): its
    methods flatten with it and register types into it."""

    def flatten(self, tree, leaf_predicate=None):
        """``(leaves, treedef)``, as ``tree_flatten``."""
        return tree_flatten(tree, is_leaf=leaf_predicate)

    def flatten_with_path(self, tree, leaf_predicate=None):
        """``([(key path, leaf), ...], treedef)``, as ``tree_flatten_with_path``."""
        return tree_flatten_with_path(tree, is_leaf=leaf_predicate)

    def flatten_one_level(self, tree):
        """``(children, aux_data)`` of a node; None for a leaf."""
        return flatten_one_level(tree) if is_tree_node(tree) else None

    def flatten_one_level_with_keys(self, tree):
        """``(((key, child), ...), aux_data)`` of a node; None for a leaf."""
        return flatten_one_level_with_keys(tree) if is_tree_node(tree) else None

    def is_node(self, type):  # noqa: A002 (JAX's parameter name)
        """Whether instances of ``type`` are pytree nodes."""
        return node_type_for(type) is not None or type is _NoneType

    def register_node(self, type, to_iterable, from_iterable,  # noqa: A002
                      to_iterable_with_keys=None):
        """Make ``type`` a node, as ``register_pytree_node``."""
        register_pytree_node(type, to_iterable, from_iterable, to_iterable_with_keys)

    def register_dataclass_node(self, type, data_fields, meta_fields, /):  # noqa: A002
        """Make the dataclass ``type`` a node, as ``register_dataclass``."""
        register_dataclass(type, data_fields, meta_fields)


_NoneType = type(None)
default_registry = PyTreeRegistry()
