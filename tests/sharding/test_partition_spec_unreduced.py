"""PartitionSpec's unreduced= and reduced= axes, interning and construction errors; how
NamedSharding and ShapedArray take such specs (checked against JAX 0.10.2's behaviour)."""
import pickle

import numpy as np
import pytest

import plax
from plax.core.avals import ManualAxisType, ShapedArray
from plax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec

P = PartitionSpec
E, A, M = AxisType.Explicit, AxisType.Auto, AxisType.Manual


def test_unreduced_and_reduced_fields_and_repr():
    p = P("a", "b", None, unreduced={"c"}, reduced={"d"})
    assert p.unreduced == frozenset({"c"}) and p.reduced == frozenset({"d"})
    assert type(p.unreduced) is frozenset and P("a").unreduced == frozenset()
    assert p.partitions == ("a", "b", None)
    assert repr(p) == "P('a', 'b', None, unreduced={'c'}, reduced={'d'})"
    assert repr(P(None, unreduced={"x"})) == "P(None, unreduced={'x'})"
    assert repr(P(unreduced={"x"})) == "P(unreduced={'x'})"
    assert repr(P("x", unreduced={"b", "a"})) == "P('x', unreduced={'a', 'b'})"
    assert str(P("a", unreduced={"c"})) == "P('a', unreduced={'c'})"


def test_unreduced_takes_part_in_equality_and_hash():
    assert P("a", unreduced={"c"}) == P("a", unreduced={"c"})
    assert P("a", unreduced={"c"}) != P("a", unreduced={"d"})
    assert P("a", unreduced={"c"}) != P("a")
    assert P("a", reduced={"c"}) != P("a", unreduced={"c"})
    assert P("a", unreduced={"c"}) != ("a",) and P("a") == ("a",)
    assert len({P("a", unreduced={"c"}), P("a", unreduced={"c"}), P("a")}) == 2


def test_specs_are_interned():
    assert P(None, "x", "y") is P((), "x", "y")  # () is not split, as None
    assert hash(P(None, "x")) == hash(P((), "x"))
    assert P("x", unreduced={"a"}) is P("x", unreduced=frozenset({"a"}))
    spec = P("x", ("a", "b"), unreduced={"c"}, reduced={"d"})
    assert pickle.loads(pickle.dumps(spec)) is spec


def test_adding_specs_and_tuples():
    out = P("x", unreduced={"z"}) + P("a", unreduced={"b"})
    assert out == P("x", "a", unreduced={"z", "b"})
    assert P("x", unreduced={"z"}) + P("a", reduced={"b"}) == \
        P("x", "a", unreduced={"z"}, reduced={"b"})
    assert P("x", "y") + ("z",) == P("x", "y", "z") and type(P("x") + ("z",)) is P
    assert ("z",) + P("x") == P("z", "x") and type(("z",) + P("x")) is P
    with pytest.raises(TypeError, match="unreduced in `__add__` of PartitionSpec"):
        P("x", unreduced={"z"}) + (None,) * 2
    with pytest.raises(TypeError, match="unreduced in `__radd__` of PartitionSpec"):
        (None,) * 2 + P("x", unreduced={"y"})


def test_update_and_padding():
    assert P("x", unreduced={"u"}).update(partitions=("a",)) == P("a", unreduced={"u"})
    assert P("x").update(unreduced={"q"}) == P("x", unreduced={"q"})
    assert P("x", reduced={"r"})._normalized_spec_for_aval(3) == \
        P("x", None, None, reduced={"r"})
    with pytest.raises(TypeError, match="unexpected keyword"):
        P("x").update(mesh=None)


@pytest.mark.parametrize("make, error, match", [
    (lambda: P("x", "y", unreduced={"x"}), ValueError,
     "partitions cannot overlap with unreduced"),
    (lambda: P("x", None, ("y", "w"), unreduced={"z", "y"}), ValueError,
     "partitions cannot overlap with unreduced"),
    (lambda: P("x", reduced={"x"}), ValueError, "partitions cannot overlap with reduced"),
    (lambda: P(unreduced={"x"}, reduced={"x"}), ValueError,
     "`unreduced` and `reduced` argument to PartitionSpec cannot overlap"),
    (lambda: P("x", unreduced={"y", None}), ValueError, "unreduced cannot contain None"),
    (lambda: P("x", unreduced=["y"]), TypeError, "should of type `frozenset` or `set`"),
    (lambda: P("x", "y", ("z", ("a",))), ValueError,
     "A tuple inside PartitionSpec cannot contain a nested tuple"),
    (lambda: P((("a", "b"), "c")), ValueError,
     "A tuple inside PartitionSpec cannot contain a nested tuple"),
])
def test_construction_errors(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_partition_spec_cannot_be_subclassed():
    with pytest.raises(TypeError, match="Subclassing `jax.P` is prohibited"):
        class MyP(P):
            pass


# --- NamedSharding -------------------------------------------------------------------------------
def test_named_sharding_checks_unreduced_and_reduced_axes():
    mesh = AbstractMesh((2, 2, 2), ("x", "y", "z"), axis_types=(E, E, E))
    s = NamedSharding(mesh, P("x", unreduced={"y", "z"}))
    assert s.spec.unreduced == {"y", "z"}
    assert s != NamedSharding(mesh, P("x"))
    with pytest.raises(ValueError, match="Unreduced axes a is not found in mesh"):
        NamedSharding(mesh, P("x", unreduced={"a"}))
    with pytest.raises(ValueError, match="Reduced axes a is not found in mesh"):
        NamedSharding(mesh, P("x", reduced={"a"}))
    auto = AbstractMesh((2, 2), ("x", "y"), axis_types=(E, A))
    with pytest.raises(ValueError, match="Unreduced axes can only refer to mesh axes.*Explicit"):
        NamedSharding(auto, P("x", unreduced={"y"}))
    with pytest.raises(ValueError, match="Reduced axes can only refer to mesh axes.*Explicit"):
        NamedSharding(auto, P(reduced={"y"}))


@pytest.mark.needs_devices(8)
def test_unreduced_xla_sharding_and_no_index_map():
    mesh = plax.make_mesh((2, 4), ("x", "y"))
    s = NamedSharding(mesh, P("x", unreduced={"y"}))
    assert str(s._to_xla_hlo_sharding(2)) == "{devices=[2,1,4]<=[8] last_tile_dims={unreduced}}"
    assert not s.is_fully_replicated and s.shard_shape((4, 4)) == (2, 4)
    both = NamedSharding(mesh, P(unreduced={"x"}, reduced={"y"}))
    assert str(both._to_xla_hlo_sharding(2)) == \
        "{devices=[1,1,2,4]<=[8] last_tile_dims={unreduced, replicated}}"
    assert str(NamedSharding(mesh, P(unreduced={"x", "y"}))._to_xla_hlo_sharding(2)) == \
        "{unreduced}"
    reduced = NamedSharding(mesh, P("x", reduced={"y"}))  # laid out as copies
    assert str(reduced._to_xla_hlo_sharding(2)) == "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"
    assert len(reduced.devices_indices_map((4, 4))) == 8
    with pytest.raises(NotImplementedError, match="doesn't work with unreduced"):
        s.devices_indices_map((4, 4))


def test_memory_kind_over_an_abstract_mesh():
    mesh = AbstractMesh((2,), ("x",))
    assert NamedSharding(mesh, P(), memory_kind="pinned_host").memory_kind == "pinned_host"
    assert NamedSharding(mesh, P(), memory_kind="unpinned_host").memory_kind == "unpinned_host"
    assert NamedSharding(mesh, P()).memory_kind is None
    with pytest.raises(ValueError, match="Got invalid memory kind: weird_device"):
        NamedSharding(mesh, P(), memory_kind="weird_device")


# --- types -----------------------------------------------------------------------------------
def test_a_types_sharding_is_padded_and_keeps_explicit_axes_only():
    mesh = AbstractMesh((2, 2, 2, 2), ("a", "b", "c", "d"), axis_types=(E, E, A, M))
    aval = ShapedArray((16, 8, 4, 2), np.float32)
    cases = [(P(("a", "b", "c"), "d"), P(("a", "b"), None, None, None)),
             (P(("a", "c"), "b", "d"), P("a", "b", None, None)),
             (P(("c", "a")), P("a", None, None, None)),
             (P("c", ("d", "a")), P(None, "a", None, None))]
    for given, want in cases:
        out = aval.update(sharding=NamedSharding(mesh, given))
        assert out.sharding.spec == want, (given, out.sharding.spec)
    out = aval.update(sharding=NamedSharding(mesh, P("a", unreduced={"b"})))
    assert out.sharding.spec == P("a", None, None, None, unreduced={"b"})
    assert out.str_short() == "f32[16@a,8,4,2]{U:b}"
    assert aval.update(sharding=NamedSharding(mesh, P("c", "d")))._sharding is None


def test_str_short_shows_unreduced_and_reduced_axes():
    mesh = AbstractMesh((2, 2, 2), ("a", "b", "c"), axis_types=(E, E, M))
    varying = ManualAxisType(varying={"c"})

    def short(spec, mat=ManualAxisType()):
        return ShapedArray((1, 1), np.float32, sharding=NamedSharding(mesh, spec),
                           manual_axis_type=mat).str_short(True)

    assert short(P(unreduced={"a"}, reduced={"b"}), varying) == "f32[1,1]{V:c, U:a, R:b}"
    assert short(P(unreduced={"a"}), varying) == "f32[1,1]{V:c, U:a}"
    assert short(P(unreduced={"a"})) == "f32[1,1]{U:a}"
    assert short(P(reduced={"b", "a"})) == "f32[1,1]{R:(a,b)}"
    assert short(P(), varying) == "f32[1,1]{V:c}"
    assert ShapedArray((1, 1), np.float32).str_short(True) == "f32[1,1]"
