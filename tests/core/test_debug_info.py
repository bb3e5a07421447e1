"""DebugInfo (plax.core.debug_info): JAX 0.10.2's fields and methods. Expected strings were
printed by real JAX on the same values."""
import pytest

from plax.core.debug_info import DebugInfo, initial_result_paths
from plax.core.tree_core import register_pytree_node

DBG = DebugInfo("jit", "g at /tmp/prog.py:8", ("a", "b", "c"), None)


def test_fields_and_source_parts():
    assert DBG._fields == ("traced_for", "func_src_info", "arg_names", "result_paths")
    assert (DBG.func_name, DBG.func_filename, DBG.func_lineno) == ("g", "/tmp/prog.py", 8)
    bare = DBG._replace(func_src_info="max")
    assert (bare.func_name, bare.func_filename, bare.func_lineno) == ("max", None, None)
    assert DBG.replace_func_name("h").func_src_info == "h at /tmp/prog.py:8"
    assert DBG.with_unknown_names() == DebugInfo("jit", "g at /tmp/prog.py:8", None, None)
    assert hash(DBG) == hash(DebugInfo(*DBG))


class _Opaque:
    def __init__(self, kids):
        self.kids = kids


register_pytree_node(_Opaque, lambda o: (o.kids, None), lambda _, kids: _Opaque(kids))


def test_set_result_paths():
    assert DBG.set_result_paths({"a": 1, "b": [2, 3]}).result_paths == (
        "result['a']", "result['b'][0]", "result['b'][1]")
    assert DBG.set_result_paths(1.).result_paths == ("result",)
    # a node registered without keys: "[<flat index 1>]" is shortened to "[1]"
    assert DBG.set_result_paths((_Opaque([5, 6]),)).result_paths == (
        "result[0][0]", "result[0][1]")


def test_arg_names_checked_and_filtered():
    assert DBG.safe_arg_names(3) == ("a", "b", "c")
    assert DBG.filter_arg_names([True, False, True]) == ("a", "c")
    unknown = DBG.with_unknown_names()
    assert unknown.safe_arg_names(2) == ("", "") and unknown.filter_arg_names([True]) is None
    with pytest.raises(ValueError, match="has 3 arg_names but 2 arguments were expected"):
        DBG.safe_arg_names(2)


def test_result_paths_resolved_checked_and_filtered():
    thunk = DBG._replace(result_paths=lambda: ["result[0]", "result[1]"])
    with pytest.raises(ValueError, match="not resolved yet"):
        thunk.safe_result_paths(2)
    resolved = thunk.resolve_result_paths()
    assert resolved.result_paths == ("result[0]", "result[1]")
    assert resolved.safe_result_paths(2) == ("result[0]", "result[1]")
    assert resolved.filter_result_paths([False, True]) == ("result[1]",)
    assert DBG.safe_result_paths(2) == ("", "") and DBG.filter_result_paths([True]) is None
    with pytest.raises(ValueError, match="has 2 result_paths but 3 results were expected"):
        resolved.safe_result_paths(3)
    with pytest.raises(ValueError, match="still initial_result_paths"):
        DBG._replace(result_paths=initial_result_paths).resolve_result_paths()
