"""Tests for plax.tree_util and plax.tree."""

import collections
import dataclasses
import functools
import pickle

import pytest

import plax.tree as ptree
import plax.tree_util as tu
from plax.tree_util import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    Partial,
    PyTreeDef,
    SequenceKey,
)

Point = collections.namedtuple("Point", ["x", "y"])
Other = collections.namedtuple("Other", ["x", "y"])


# -- registered test types ----------------------------------------------------


class Box:
    """Custom node registered with register_pytree_node; ``tag`` is aux."""

    def __init__(self, value, tag="t"):
        self.value = value
        self.tag = tag

    def __eq__(self, other):
        return isinstance(other, Box) and (self.value, self.tag) == (other.value, other.tag)

    def __repr__(self):
        return f"Box({self.value!r}, {self.tag!r})"


tu.register_pytree_node(
    Box, lambda b: ((b.value,), b.tag), lambda tag, ch: Box(ch[0], tag)
)


@tu.register_pytree_node_class
class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def tree_flatten(self):
        return (self.a, self.b), "pair"

    @classmethod
    def tree_unflatten(cls, aux, children):
        assert aux == "pair"
        return cls(*children)


@tu.register_pytree_with_keys_class
class Named:
    def __init__(self, left, right):
        self.left, self.right = left, right

    def tree_flatten_with_keys(self):
        return ((GetAttrKey("left"), self.left), (GetAttrKey("right"), self.right)), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


class KeyedDict:
    def __init__(self, items):
        self.items = dict(items)


def _keyed_dict_flatten_with_keys(d):
    keys = sorted(d.items)
    return [(DictKey(k), d.items[k]) for k in keys], tuple(keys)


tu.register_pytree_with_keys(
    KeyedDict, _keyed_dict_flatten_with_keys,
    lambda keys, vals: KeyedDict(zip(keys, vals)),
)


@dataclasses.dataclass
class Params:
    w: object
    b: object
    name: str = dataclasses.field(default="p", metadata=dict(static=True))


tu.register_dataclass(Params)


@dataclasses.dataclass
class Explicit:
    x: object
    mode: str
    scratch: object = None


tu.register_dataclass(Explicit, data_fields=["x"], meta_fields=["mode"],
                      drop_fields=["scratch"])


@tu.register_static
class Config:
    def __init__(self, n):
        self.n = n

    def __eq__(self, other):
        return isinstance(other, Config) and other.n == self.n

    def __hash__(self):
        return hash(self.n)


# -- flatten / unflatten --------------------------------------------------------


def test_flatten_nested_containers_roundtrip():
    tree = {"b": [1, (2, 3)], "a": {"z": 4, "y": None}, "c": ()}
    leaves, treedef = tu.tree_flatten(tree)
    # dict children come in sorted key order
    assert leaves == [4, 1, 2, 3]
    assert treedef.num_leaves == 4
    rebuilt = tu.tree_unflatten(treedef, leaves)
    assert rebuilt == tree
    assert list(rebuilt) == ["a", "b", "c"]  # rebuilt dicts use sorted keys
    assert tu.tree_unflatten(treedef, ["p", "q", "r", "s"]) == {
        "a": {"y": None, "z": "p"}, "b": ["q", ("r", "s")], "c": ()}


def test_leaf_root_and_none():
    assert tu.tree_flatten(5) == ([5], tu.tree_structure(0))
    leaves, treedef = tu.tree_flatten(None)
    assert leaves == []
    assert treedef.num_leaves == 0 and treedef.num_nodes == 1
    assert tu.tree_unflatten(treedef, []) is None
    assert tu.tree_leaves([1, None, 2]) == [1, 2]
    assert tu.tree_leaves([1, None, 2], is_leaf=lambda x: x is None) == [1, None, 2]
    assert tu.tree_unflatten(tu.tree_structure(7), ["x"]) == "x"


def test_unflatten_accepts_iterators():
    treedef = tu.tree_structure([0, (0,)])
    assert tu.tree_unflatten(treedef, iter([1, 2])) == [1, (2,)]
    assert tu.tree_unflatten(treedef, (x for x in "ab")) == ["a", ("b",)]


def test_namedtuple():
    leaves, treedef = tu.tree_flatten(Point(1, [2, 3]))
    assert leaves == [1, 2, 3]
    out = tu.tree_unflatten(treedef, [4, 5, 6])
    assert type(out) is Point and out == Point(4, [5, 6])
    assert repr(treedef) == "PyTreeDef(CustomNode(namedtuple[Point], [*, [*, *]]))"
    assert tu.tree_structure(Point(1, 2)) != tu.tree_structure(Other(1, 2))
    assert tu.tree_structure(Point(1, 2)) != tu.tree_structure((1, 2))


def test_ordered_dict_keeps_insertion_order():
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    leaves, treedef = tu.tree_flatten(od)
    assert leaves == [1, 2]
    out = tu.tree_unflatten(treedef, [10, 20])
    assert type(out) is collections.OrderedDict
    assert list(out.items()) == [("b", 10), ("a", 20)]
    assert treedef.node_data() == (collections.OrderedDict, ("b", "a"))
    assert tu.tree_structure(od) != tu.tree_structure(dict(od))


def test_defaultdict_keeps_factory():
    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    leaves, treedef = tu.tree_flatten(dd)
    assert leaves == [2, 1]
    out = tu.tree_unflatten(treedef, [5, 6])
    assert type(out) is collections.defaultdict
    assert out.default_factory is list and dict(out) == {"a": 5, "b": 6}
    assert treedef.node_data() == (collections.defaultdict, (list, ("a", "b")))
    other = collections.defaultdict(dict, {"b": 1, "a": 2})
    assert tu.tree_structure(other) != treedef


def test_unsortable_dict_keys():
    with pytest.raises(ValueError, match="sorting pytree dictionary keys"):
        tu.tree_flatten({1: "a", "b": 2})


def test_subclasses_of_builtins_are_leaves():
    class MyDict(dict):
        pass

    assert tu.tree_leaves(MyDict(a=1)) == [MyDict(a=1)]


def test_is_leaf_stops_descent():
    tree = {"a": (1, 2), "b": [3, (4, 5)]}
    leaves = tu.tree_leaves(tree, is_leaf=lambda x: isinstance(x, tuple))
    assert leaves == [(1, 2), 3, (4, 5)]
    treedef = tu.tree_structure(tree, is_leaf=lambda x: isinstance(x, tuple))
    assert repr(treedef) == "PyTreeDef({'a': *, 'b': [*, *]})"
    assert tu.tree_leaves(tree, is_leaf=lambda x: x is tree) == [tree]


# -- custom registrations -----------------------------------------------------------


def test_register_pytree_node():
    tree = [Box(1, "u"), Box((2, 3))]
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [1, 2, 3]
    assert tu.tree_unflatten(treedef, [7, 8, 9]) == [Box(7, "u"), Box((8, 9))]
    assert repr(treedef) == "PyTreeDef([CustomNode(Box[u], [*]), CustomNode(Box[t], [(*, *)])])"
    assert treedef.children()[0].node_data() == (Box, "u")
    assert tu.tree_structure(Box(1, "u")) != tu.tree_structure(Box(1, "v"))
    paths = [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(Box((1, 2)))]
    assert paths == ["[<flat index 0>][0]", "[<flat index 0>][1]"]


def test_register_pytree_node_class():
    leaves, treedef = tu.tree_flatten(Pair(1, [2]))
    assert leaves == [1, 2]
    out = tu.tree_unflatten(treedef, ["x", "y"])
    assert isinstance(out, Pair) and out.a == "x" and out.b == ["y"]
    assert repr(treedef) == "PyTreeDef(CustomNode(Pair[pair], [*, [*]]))"


def test_register_pytree_with_keys_class():
    pairs, treedef = tu.tree_flatten_with_path(Named(1, [2]))
    assert [(tu.keystr(p), x) for p, x in pairs] == [(".left", 1), (".right[0]", 2)]
    assert tu.tree_leaves(Named(1, [2])) == [1, 2]
    out = tu.tree_unflatten(treedef, [3, 4])
    assert (out.left, out.right) == (3, [4])


def test_register_pytree_with_keys_function():
    kd = KeyedDict({"y": 2, "x": 1})
    assert tu.tree_leaves(kd) == [1, 2]  # derived plain flatten
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(kd)] == ["['x']", "['y']"]
    out = tu.tree_map(lambda v: v * 10, kd)
    assert out.items == {"x": 10, "y": 20}


def test_duplicate_registration():
    with pytest.raises(ValueError, match="Duplicate custom PyTreeDef type registration"):
        tu.register_pytree_node(Box, lambda b: ((), None), lambda a, c: None)
    with pytest.raises(ValueError, match="Duplicate custom PyTreeDef type registration"):
        tu.register_pytree_node(tuple, lambda b: ((), None), lambda a, c: None)


def test_register_dataclass_inferred():
    p = Params(w=1.0, b=[2.0], name="dense")
    leaves, treedef = tu.tree_flatten(p)
    assert leaves == [1.0, 2.0]
    assert treedef.node_data() == (Params, ("dense",))
    assert tu.tree_unflatten(treedef, [3, 4]) == Params(3, [4], "dense")
    assert tu.tree_structure(Params(1, 2, "a")) != tu.tree_structure(Params(1, 2, "b"))
    keys = [tu.keystr(k) for k, _ in tu.tree_leaves_with_path(p)]
    assert keys == [".w", ".b[0]"]
    assert tu.tree_map(lambda x: x + 1, Params(1, 2)) == Params(2, 3)


def test_register_dataclass_explicit_fields():
    leaves, treedef = tu.tree_flatten(Explicit(x=5, mode="m", scratch="dropped"))
    assert leaves == [5]
    assert tu.tree_unflatten(treedef, [6]) == Explicit(6, "m", None)


def test_register_dataclass_errors():
    @dataclasses.dataclass
    class Two:
        a: int
        b: int

    with pytest.raises(ValueError, match="missing fields"):
        tu.register_dataclass(Two, data_fields=["a"], meta_fields=[])
    with pytest.raises(ValueError, match="unexpected fields"):
        tu.register_dataclass(Two, data_fields=["a", "b", "c"], meta_fields=[])
    with pytest.raises(TypeError, match="both"):
        tu.register_dataclass(Two, data_fields=["a"])

    class Plain:
        def __init__(self, a, b):
            self.a, self.b = a, b

    with pytest.raises(TypeError, match="not a dataclass"):
        tu.register_dataclass(Plain)
    assert tu.register_dataclass(Plain, data_fields=["a"], meta_fields=["b"]) is Plain
    out = tu.tree_map(lambda x: -x, Plain(1, 2))
    assert (out.a, out.b) == (-1, 2)


def test_register_static():
    leaves, treedef = tu.tree_flatten([Config(3), 1])
    assert leaves == [1]
    out = tu.tree_unflatten(treedef, [2])
    assert out[0] == Config(3) and out[1] == 2
    assert tu.tree_structure(Config(3)) == tu.tree_structure(Config(3))
    assert tu.tree_structure(Config(3)) != tu.tree_structure(Config(4))
    assert hash(tu.tree_structure(Config(3))) == hash(tu.tree_structure(Config(3)))


# -- Partial ----------------------------------------------------------------------


def test_partial_call_flatten_and_map():
    def f(a, b, c=0):
        return a + b + c

    p = Partial(f, 1, c=3)
    assert isinstance(p, functools.partial)
    assert p(2) == 6
    leaves, treedef = tu.tree_flatten(p)
    assert leaves == [1, 3]
    assert treedef.node_data() == (Partial, f)
    q = tu.tree_map(lambda x: x * 10, p)
    assert type(q) is Partial and q.func is f
    assert q(2) == 42
    assert tu.tree_structure(Partial(f, 1)) == tu.tree_structure(Partial(f, 2))
    assert tu.tree_structure(Partial(f, 1)) != tu.tree_structure(Partial(print, 1))
    paths = [tu.keystr(k) for k, _ in tu.tree_leaves_with_path(p)]
    assert paths == ["[<flat index 0>][0]", "[<flat index 1>]['c']"]


def test_partial_of_partial_is_not_merged():
    inner = Partial(lambda a, b: a - b, 10)
    outer = Partial(inner, 4)
    assert outer() == 6
    assert outer.args == (4,)
    assert tu.tree_leaves(outer) == [4]
    assert tu.tree_structure(Partial(inner, 1)) == tu.tree_structure(Partial(inner, 2))


# -- paths and keys -------------------------------------------------------------------


def test_key_entries():
    assert str(SequenceKey(0)) == "[0]"
    assert str(DictKey("a")) == "['a']"
    assert str(GetAttrKey("name")) == ".name"
    assert str(FlattenedIndexKey(3)) == "[<flat index 3>]"
    assert repr(DictKey("a")) == "DictKey(key='a')"
    assert SequenceKey(1) == SequenceKey(1) and hash(SequenceKey(1)) == hash(SequenceKey(1))
    assert SequenceKey(0) != FlattenedIndexKey(0)
    assert len({DictKey("a"), DictKey("a"), GetAttrKey("a")}) == 2



def test_key_entries_are_immutable_values_as_in_jax():
    key = SequenceKey(idx=2)
    assert repr(key) == "SequenceKey(idx=2)" and repr(GetAttrKey("x")) == "GetAttrKey(name='x')"
    assert repr(FlattenedIndexKey(1)) == "FlattenedIndexKey(key=1)"
    assert pickle.loads(pickle.dumps(DictKey("a"))) == DictKey("a")
    with pytest.raises(AttributeError, match="immutable"):
        key.idx = 3
    match key:
        case SequenceKey(i):
            assert i == 2
    assert key.idx == 2 and DictKey("a") != "a"

def test_keystr():
    x = object()
    pairs = tu.tree_leaves_with_path({"a": [1, (2, x)]})
    path_to_x = [p for p, v in pairs if v is x][0]
    assert path_to_x == (DictKey("a"), SequenceKey(1), SequenceKey(1))
    assert tu.keystr(path_to_x) == "['a'][1][1]"
    assert tu.keystr(path_to_x, simple=True, separator="/") == "a/1/1"
    assert tu.keystr(path_to_x, separator="/") == "['a']/[1]/[1]"
    assert tu.keystr(()) == ""
    mixed = (GetAttrKey("w"), FlattenedIndexKey(2))
    assert tu.keystr(mixed, simple=True, separator=".") == "w.2"


def test_flatten_with_path():
    tree = {"n": Point(1, 2), "l": [None, 3]}
    pairs, treedef = tu.tree_flatten_with_path(tree)
    assert pairs == [
        ((DictKey("l"), SequenceKey(1)), 3),
        ((DictKey("n"), GetAttrKey("x")), 1),
        ((DictKey("n"), GetAttrKey("y")), 2),
    ]
    assert treedef == tu.tree_structure(tree)
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    assert [p for p, _ in tu.tree_leaves_with_path(od)] == [(DictKey("b"),), (DictKey("a"),)]
    # is_leaf with and without the path argument
    assert tu.tree_leaves_with_path((1, (2,)), is_leaf=lambda x: x == (2,)) == [
        ((SequenceKey(0),), 1), ((SequenceKey(1),), (2,))]
    by_path = tu.tree_leaves_with_path(
        {"a": (1, 2), "b": (3, 4)},
        is_leaf=lambda p, x: p == (DictKey("a"),), is_leaf_takes_path=True)
    assert by_path == [((DictKey("a"),), (1, 2)),
                       ((DictKey("b"), SequenceKey(0)), 3),
                       ((DictKey("b"), SequenceKey(1)), 4)]


def test_map_with_path():
    out = tu.tree_map_with_path(lambda p, x: (tu.keystr(p), x), {"a": [1, (2,)]})
    assert out == {"a": [("['a'][0]", 1), (("['a'][1][0]", 2),)]}
    summed = tu.tree_map_with_path(lambda p, x, y: x + y, [1, 2], [10, 20])
    assert summed == [11, 22]


# -- PyTreeDef ---------------------------------------------------------------------------


def test_treedef_properties():
    treedef = tu.tree_structure({"a": [1, (2, 3)], "b": None})
    assert treedef.num_leaves == 3
    assert treedef.num_nodes == 7  # dict, list, tuple, None, 3 leaves
    assert repr(treedef) == "PyTreeDef({'a': [*, (*, *)], 'b': None})"
    assert str(treedef) == repr(treedef)
    kids = treedef.children()
    assert kids == [tu.tree_structure([0, (0, 0)]), tu.tree_structure(None)]
    assert tu.treedef_children(treedef) == kids
    assert treedef.node_data() == (dict, ["a", "b"])
    assert tu.tree_structure(1).node_data() is None
    assert tu.tree_structure(1).children() == []
    assert tu.tree_structure((1, 2)).node_data() == (tuple, None)


def test_treedef_reprs():
    assert repr(tu.tree_structure((1, {"a": 2}))) == "PyTreeDef((*, {'a': *}))"
    assert repr(tu.tree_structure((1,))) == "PyTreeDef((*,))"
    assert repr(tu.tree_structure([None, (), []])) == "PyTreeDef([None, (), []])"
    assert repr(tu.tree_structure(3)) == "PyTreeDef(*)"
    od = collections.OrderedDict([("b", 1)])
    assert repr(tu.tree_structure(od)) == "PyTreeDef(CustomNode(OrderedDict[('b',)], [*]))"


def test_treedef_equality_and_hash():
    a = tu.tree_structure({"x": [1, 2], "y": (3,)})
    b = tu.tree_structure({"x": ["p", "q"], "y": ("r",)})
    assert a == b and hash(a) == hash(b)
    assert not (a != b)
    assert a != tu.tree_structure({"x": [1, 2], "y": [3]})
    assert a != tu.tree_structure({"x": [1, 2], "z": (3,)})
    assert tu.tree_structure([1, 2]) != tu.tree_structure((1, 2))
    assert tu.tree_structure(1) == tu.tree_structure("leaf")
    assert tu.tree_structure(None) != tu.tree_structure(1)
    assert (a == 3) is False
    cache = {a: "hit"}
    assert cache[b] == "hit"
    # aux data that cannot be hashed still gives a usable hash
    unhashable = tu.tree_structure(Box(1, tag=["list"]))
    assert unhashable == tu.tree_structure(Box(2, tag=["list"]))
    assert isinstance(hash(unhashable), int)


def test_treedef_pickle_and_no_direct_construction():
    treedef = tu.tree_structure({"a": (1, None), "p": Point(1, 2)})
    assert pickle.loads(pickle.dumps(treedef)) == treedef
    with pytest.raises(TypeError, match="PyTreeDef objects are created by tree_flatten"):
        PyTreeDef()


def test_flatten_up_to():
    treedef = tu.tree_structure({"a": [0, (0, 0)], "b": None})
    subtrees = treedef.flatten_up_to({"a": [[5], ({"k": 6}, 7)], "b": None})
    assert subtrees == [[5], {"k": 6}, 7]
    assert tu.tree_structure(0).flatten_up_to((1, [2])) == [(1, [2])]


@pytest.mark.parametrize("treedef_of, value, phrase", [
    ((1, 2), [1, 2], "Expected tuple"),
    ((1, 2), (1, 2, 3), "Tuple arity mismatch"),
    ([1, 2], [1], "List arity mismatch"),
    ({"a": 1}, {"b": 1}, "Dict key mismatch"),
    ({"a": 1}, collections.OrderedDict(a=1), "Expected dict"),
    (None, 1, "Expected None"),
    (Point(1, 2), (1, 2), "Expected named tuple"),
    (Point(1, 2), Other(1, 2), "Named tuple type mismatch"),
    (Box(1), (1,), "Custom node type mismatch"),
    (Box(1, "a"), Box(1, "b"), "Mismatch custom node data"),
    (collections.OrderedDict(a=1, b=2), collections.OrderedDict(b=1, a=2),
     "Mismatch custom node data"),
])
def test_flatten_up_to_errors(treedef_of, value, phrase):
    with pytest.raises(ValueError, match=phrase):
        tu.tree_structure(treedef_of).flatten_up_to(value)


def test_unflatten_wrong_leaf_count():
    treedef = tu.tree_structure((1, [2, 3]))
    with pytest.raises(ValueError, match="Too few leaves for PyTreeDef"):
        tu.tree_unflatten(treedef, [1, 2])
    with pytest.raises(ValueError, match="Too many leaves for PyTreeDef"):
        tu.tree_unflatten(treedef, [1, 2, 3, 4])
    with pytest.raises(ValueError, match="Too many leaves for PyTreeDef"):
        tu.tree_unflatten(tu.tree_structure(None), [1])


def test_treedef_helpers():
    assert tu.treedef_is_leaf(tu.tree_structure(1))
    assert tu.treedef_is_leaf(tu.tree_structure(None))
    assert not tu.treedef_is_leaf(tu.tree_structure((1,)))
    tup = tu.treedef_tuple([tu.tree_structure(1), tu.tree_structure((1, 2))])
    assert tup == tu.tree_structure((0, (0, 0)))
    assert tup.num_leaves == 3
    outer = tu.tree_structure([0, 0])
    composed = outer.compose(tu.tree_structure((0, None)))
    assert repr(composed) == "PyTreeDef([(*, None), (*, None)])"
    assert composed.num_leaves == 2
    assert tu.build_tree(tu.tree_structure((1, [2])), [10, (20,)]) == (10, [20])
    with pytest.raises(ValueError, match="Arity mismatch"):
        tu.build_tree(tu.tree_structure((1, [2])), [10, (20, 30)])


def test_all_leaves_and_is_tree_node():
    assert tu.all_leaves([1, "a", 2.0])
    assert not tu.all_leaves([1, (2,)])
    assert not tu.all_leaves([None])
    assert tu.all_leaves([1, (2,)], is_leaf=lambda x: isinstance(x, tuple))
    assert tu.is_tree_node(None) and tu.is_tree_node([]) and tu.is_tree_node(Box(1))
    assert tu.is_tree_node(Point(1, 2))
    assert not tu.is_tree_node(1)


def test_flatten_one_level():
    assert tu.flatten_one_level({"b": 1, "a": 2}) == ((2, 1), ("a", "b"))
    assert tu.flatten_one_level((1, [2])) == ((1, [2]), None)
    assert tu.flatten_one_level_with_keys([5]) == (((SequenceKey(0), 5),), None)
    with pytest.raises(ValueError, match="leaf"):
        tu.flatten_one_level(1)


# -- map / reduce / transpose ---------------------------------------------------------


def test_tree_map_single_and_multi():
    assert tu.tree_map(lambda x: x * 2, {"a": [1, 2], "b": (3, None)}) == {
        "a": [2, 4], "b": (6, None)}
    assert tu.tree_map(lambda x, y, z: x + y + z, [1, (2,)], [10, (20,)], [100, (200,)]) == [
        111, (222,)]
    # later trees only need the first tree's structure as a prefix
    assert tu.tree_map(lambda x, y: (x, y), [1, 2], [3, (4, 5)]) == [(1, 3), (2, (4, 5))]
    assert tu.tree_map(lambda x, y: x + y, [None, 1], [None, 2]) == [None, 3]


def test_tree_map_is_leaf():
    tree = [(1, 2), (3, 4)]
    assert tu.tree_map(sum, tree, is_leaf=lambda x: isinstance(x, tuple)) == [3, 7]
    filled = tu.tree_map(lambda x: 0 if x is None else x, [None, 1],
                         is_leaf=lambda x: x is None)
    assert filled == [0, 1]


@pytest.mark.parametrize("first, second, phrase", [
    ((1, 2), [1, 2], "different types at key path"),
    ((1, 2, 3), (1, 2), "different lengths of tuple at key path"),
    ({"a": [1, 2]}, {"a": [1, 2, 3]}, "different lengths of list at key path"),
    ({"a": 1}, {"b": 1}, "different pytree metadata at key path"),
    ({"a": 1}, {"a": 1, "b": 2}, "different numbers of pytree children at key path"),
    ([1, None], [1, 2], "different types at key path"),
    (Box(1, "a"), Box(1, "b"), "different pytree metadata at key path"),
])
def test_tree_map_structure_errors(first, second, phrase):
    with pytest.raises(ValueError, match=phrase):
        tu.tree_map(lambda *xs: None, first, second)


def test_tree_map_error_names_key_path():
    with pytest.raises(ValueError, match="pytree structure error") as info:
        tu.tree_map(lambda x, y: x, {"x": {"y": [1, None]}}, {"x": {"y": [1, 2]}})
    msg = str(info.value)
    assert msg.startswith("pytree structure error: different types at key path")
    assert "tree_map tree['x']['y'][1]" in msg
    assert "NoneType" in msg and "<class 'int'>" in msg


def test_tree_map_with_path_error():
    with pytest.raises(ValueError, match="different types at key path"):
        tu.tree_map_with_path(lambda p, x, y: x, (1, 2), [1, 2])


def test_tree_reduce():
    assert tu.tree_reduce(lambda a, b: a + b, [1, (2, 3)]) == 6
    assert tu.tree_reduce(lambda a, b: a + b, [1, (2, 3)], 10) == 16
    assert tu.tree_reduce(lambda a, b: a + b, [], 7) == 7
    assert tu.tree_reduce(lambda a, b: a + [b], [1, 2], []) == [1, 2]
    assert tu.tree_reduce(max, [(1, 5), (3,)], is_leaf=lambda x: isinstance(x, tuple)) == (3,)
    with pytest.raises(TypeError, match="empty iterable with no initial value"):
        tu.tree_reduce(lambda a, b: a + b, [])


def test_tree_reduce_associative():
    assert tu.tree_reduce_associative(lambda a, b: a + b, [1, 2, 3, 4, 5]) == 15
    assert tu.tree_reduce_associative(lambda a, b: a + b, [], identity=0) == 0
    with pytest.raises(TypeError, match="an empty tree needs an identity"):
        tu.tree_reduce_associative(lambda a, b: a + b, [])


def test_tree_all():
    assert tu.tree_all([True, (1, "x")])
    assert not tu.tree_all([True, (0,)])
    assert tu.tree_all([])
    assert tu.tree_all({"a": None})  # None has no leaves
    assert not tu.tree_all([None], is_leaf=lambda x: x is None)


def test_tree_broadcast():
    out = tu.tree_broadcast((1, {"a": 2}), ((0, 0), {"a": [0, 0]}))
    assert out == ((1, 1), {"a": [2, 2]})


def test_tree_transpose():
    outer = tu.tree_structure([0, 0, 0])
    inner = tu.tree_structure((0, 0))
    assert tu.tree_transpose(outer, inner, [(1, 2), (3, 4), (5, 6)]) == ([1, 3, 5], [2, 4, 6])
    assert tu.tree_transpose(outer, None, [(1, 2), (3, 4), (5, 6)]) == ([1, 3, 5], [2, 4, 6])
    dict_inner = tu.tree_structure({"a": 0, "b": 0})
    out = tu.tree_transpose(tu.tree_structure((0, 0)), dict_inner,
                            ({"a": 1, "b": 2}, {"a": 3, "b": 4}))
    assert out == {"a": (1, 3), "b": (2, 4)}
    with pytest.raises(TypeError, match="mismatch"):
        tu.tree_transpose(tu.tree_structure([0, 0]), inner, [(1, 2), (3, 4), (5, 6)])


# -- plax.tree aliases -------------------------------------------------------------------------


def test_tree_module_aliases():
    tree = {"a": [1, 2], "b": 3}
    assert ptree.leaves(tree) == [1, 2, 3]
    leaves, treedef = ptree.flatten(tree)
    assert ptree.unflatten(treedef, leaves) == tree
    assert ptree.structure(tree) == treedef
    assert ptree.map(lambda x: x + 1, tree) == {"a": [2, 3], "b": 4}
    assert ptree.reduce(lambda a, b: a * b, tree) == 6
    assert ptree.all(tree)
    assert [tu.keystr(p) for p, _ in ptree.leaves_with_path(tree)] == [
        "['a'][0]", "['a'][1]", "['b']"]
    assert ptree.flatten_with_path(tree)[1] == treedef
    assert ptree.map_with_path(lambda p, x: len(p), tree) == {"a": [2, 2], "b": 1}
    assert ptree.transpose(ptree.structure([0, 0]), ptree.structure((0, 0)),
                           [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    assert ptree.broadcast([1, 2], [(0, 0), 0]) == [(1, 1), 2]
    assert ptree.reduce_associative(lambda a, b: a + b, tree) == 6
    assert ptree.map is tu.tree_map and ptree.all is tu.tree_all
