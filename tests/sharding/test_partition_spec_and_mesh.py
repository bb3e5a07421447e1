"""PartitionSpec, Mesh, AbstractMesh, AxisType, make_mesh, create_device_mesh and the
context mesh (set_mesh / use_mesh / get_mesh / get_abstract_mesh)."""
import collections
import pickle

import numpy as np
import pytest

import plax
import plax.experimental.mesh_utils as mesh_utils
from plax.sharding import AbstractMesh, AxisType, Mesh, PartitionSpec
from plax.sharding import get_abstract_mesh, get_mesh, use_mesh

P = PartitionSpec
# Meshes of 8 devices: deselected, not skipped, in the suite's one-device run (tests/conftest.py).
needs_8_devices = pytest.mark.needs_devices(8)


def mesh_2x4(names=("a", "b")):
    return Mesh(np.array(plax.devices()).reshape(2, 4), names)


# --- PartitionSpec -----------------------------------------------------------------------------
def test_partition_spec_is_a_sequence_of_entries():
    p = P("a", None, ("b", "c"))
    assert len(p) == 3
    assert p[0] == "a" and p[1] is None and p[2] == ("b", "c")
    assert list(p) == ["a", None, ("b", "c")]
    assert P() == P() and len(P()) == 0
    assert P("a", ("b", "c")) == P("a", ["b", "c"])  # a list entry becomes a tuple
    assert isinstance(P("a", ["b", "c"])[1], tuple)
    assert PartitionSpec is P


def test_partition_spec_repr_matches_jax():
    assert repr(P("a", None)) == "P('a', None)"
    assert repr(P(("a", "b"),)) == "P(('a', 'b'),)"
    assert repr(P()) == "P()"
    assert repr(P("a")) == "P('a',)"
    assert repr(P(None)) == "P(None,)"
    assert repr(P(None, ("a", "b"), "c")) == "P(None, ('a', 'b'), 'c')"
    assert repr(P(P.UNCONSTRAINED)) == "P(UNCONSTRAINED,)"


def test_unconstrained():
    assert repr(P.UNCONSTRAINED) == "UNCONSTRAINED"
    p = P(P.UNCONSTRAINED, "a")
    assert p[0] is P.UNCONSTRAINED
    assert pickle.loads(pickle.dumps(P.UNCONSTRAINED)) is P.UNCONSTRAINED
    assert p.axes_of(0) == () and p.axes_of(1) == ("a",)


def test_trailing_none_equality_and_hash():
    # JAX 0.10: specs differing by trailing Nones are different specs ...
    assert P("a") != P("a", None)
    assert not (P("a") == P("a", None))
    assert P() != P(None)
    # ... while plax hashes them alike (a layout depends only on the normalized spec).
    assert hash(P("a")) == hash(P("a", None)) == hash(P("a", None, None))
    assert hash(P()) == hash(P(None))
    assert P("a", "b") == P("a", "b") and hash(P("a", "b")) == hash(P("a", "b"))
    assert P("a", "b") != P("b", "a")
    assert P(("a", "b")) != P(("b", "a"))
    assert len({P("a"), P("a", None), P("a")}) == 2


@pytest.mark.parametrize("bad", [1, 1.5, ("a", 1), object()])
def test_bad_entries_raise_type_error(bad):
    with pytest.raises(TypeError, match="PartitionSpec entries must be None, a mesh axis name"):
        P(bad)


def test_partition_spec_pickles():
    p = P("a", None, ("b", "c"), P.UNCONSTRAINED)
    q = pickle.loads(pickle.dumps(p))
    assert q == p and type(q) is PartitionSpec
    assert repr(q) == "P('a', None, ('b', 'c'), UNCONSTRAINED)"


def test_partition_spec_axes_helpers():
    p = P(None, ("b", "a"), "c")
    assert p.axes_of(0) == ()
    assert p.axes_of(1) == ("b", "a")
    assert p.axes_of(2) == ("c",)
    assert p.axes_of(7) == ()
    assert p.mesh_axes() == ["b", "a", "c"]


# --- AxisType -----------------------------------------------------------------------------------
def test_axis_type_members():
    assert [t.name for t in AxisType] == ["Auto", "Explicit", "Manual"]
    assert repr(AxisType.Auto) == "Auto"
    assert repr(AxisType.Explicit) == "Explicit"
    assert repr(AxisType.Manual) == "Manual"
    assert repr(list(AxisType)) == "[Auto, Explicit, Manual]"


# --- Mesh ---------------------------------------------------------------------------------------
@needs_8_devices
def test_mesh_attributes():
    m = mesh_2x4()
    assert m.shape == collections.OrderedDict([("a", 2), ("b", 4)])
    assert type(m.shape) is collections.OrderedDict
    assert m.axis_names == ("a", "b")
    assert m.size == 8
    assert m.axis_sizes == (2, 4)
    assert m.shape_tuple == (("a", 2), ("b", 4))
    assert m.axis_types == (AxisType.Auto, AxisType.Auto)
    assert m.device_ids.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert m.devices.shape == (2, 4)
    assert [d.id for d in m.devices.flat] == list(range(8))
    assert m.local_devices == plax.devices()
    assert m.is_multi_process is False
    assert m.empty is False
    assert m.auto_axes == ("a", "b") and m.explicit_axes == () and m.manual_axes == ()


@needs_8_devices
def test_mesh_repr_and_str():
    m = mesh_2x4()
    assert repr(m) == "Mesh(axis_sizes=(2, 4), axis_names=('a', 'b'), axis_types=(Auto, Auto))"
    assert str(m) == "Mesh('a': 2, 'b': 4, axis_types=(Auto, Auto))"
    m1 = Mesh(np.array(plax.devices()), ("x",))
    assert repr(m1) == "Mesh(axis_sizes=(8,), axis_names=('x',), axis_types=(Auto,))"
    assert str(m1) == "Mesh('x': 8, axis_types=(Auto,))"


@needs_8_devices
def test_mesh_axis_names_as_string_and_axis_types():
    m = Mesh(np.array(plax.devices()), "x")
    assert m.axis_names == ("x",)
    m2 = Mesh(np.array(plax.devices()).reshape(2, 4), ("a", "b"),
              axis_types=(AxisType.Explicit, AxisType.Auto))
    assert m2.axis_types == (AxisType.Explicit, AxisType.Auto)
    assert m2.explicit_axes == ("a",) and m2.auto_axes == ("b",)
    assert str(m2) == "Mesh('a': 2, 'b': 4, axis_types=(Explicit, Auto))"


@needs_8_devices
def test_mesh_equality_and_hash():
    a, b = mesh_2x4(), mesh_2x4()
    assert a == b and hash(a) == hash(b)
    assert a != mesh_2x4(("a", "c"))
    assert a != Mesh(np.array(plax.devices()).reshape(4, 2), ("a", "b"))
    assert a != Mesh(np.array(plax.devices()[::-1]).reshape(2, 4), ("a", "b"))
    assert a != Mesh(np.array(plax.devices()).reshape(2, 4), ("a", "b"),
                     axis_types=(AxisType.Explicit,) * 2)
    assert len({a, b}) == 1


@needs_8_devices
def test_mesh_device_ids_follow_device_order():
    devs = np.array(plax.devices())[[7, 6, 5, 4, 3, 2, 1, 0]].reshape(4, 2)
    m = Mesh(devs, ("x", "y"))
    assert m.device_ids.tolist() == [[7, 6], [5, 4], [3, 2], [1, 0]]
    assert m.shape == {"x": 4, "y": 2}


@needs_8_devices
def test_meshes_over_an_old_and_a_new_clients_devices_keep_their_own_programs():
    # Same device ids, names and shape, but one mesh holds the devices of the client that
    # clear_backends() dropped: they must not be equal, or a jitted shard_map over one reuses
    # the program compiled for the other and its result names devices its buffers are not on.
    x = np.linspace(-0.5, 1.0, 8).astype(np.float32)
    old = Mesh(np.array(plax.devices()[:8]), ("i",))
    plax.clear_backends()
    new = Mesh(np.array(plax.devices()[:8]), ("i",))
    assert old != new and old.device_ids.tolist() == new.device_ids.tolist()
    for mesh in (new, old):
        body = lambda b: plax.numpy.sin(b) * plax.lax.psum(b, "i")
        out = plax.jit(lambda a: plax.shard_map(body, mesh=mesh, in_specs=P("i"),
                                                out_specs=P("i"))(a))(x)
        np.testing.assert_allclose(np.asarray(out), np.sin(x) * x.sum(), rtol=1e-6)
        assert out.sharding.mesh == mesh


@needs_8_devices
def test_mesh_ndim_mismatch_error():
    with pytest.raises(ValueError, match=r"Mesh requires the ndim of its first argument \(`devices`\)"
                       r" to equal the length of its second argument \(`axis_names`\), but got "
                       r"devices.ndim == 2 and len\(axis_names\) == 1"):
        Mesh(np.array(plax.devices()).reshape(2, 4), ("a",))


def test_mesh_rejects_repeated_devices():
    d = plax.devices()
    with pytest.raises(ValueError, match="Mesh devices must be distinct"):
        Mesh(np.array([d[0], d[0]]), ("x",))


@needs_8_devices
def test_abstract_mesh_of_mesh():
    m = mesh_2x4()
    am = m.abstract_mesh
    assert isinstance(am, AbstractMesh)
    assert am.axis_names == ("a", "b") and am.axis_sizes == (2, 4) and am.size == 8
    assert am.shape == collections.OrderedDict([("a", 2), ("b", 4)])
    assert am.axis_types == (AxisType.Auto, AxisType.Auto)
    assert repr(am) == ("AbstractMesh('a': 2, 'b': 4, axis_types=(Auto, Auto), device_kind=cpu, "
                        "num_cores=None, platform=cpu)")
    assert am.empty is False
    assert am == AbstractMesh((2, 4), ("a", "b"))
    assert hash(am) == hash(AbstractMesh((2, 4), ("a", "b")))


def test_abstract_mesh_standalone():
    am = AbstractMesh((2, 4), ("a", "b"), (AxisType.Explicit, AxisType.Auto))
    assert repr(am) == "AbstractMesh('a': 2, 'b': 4, axis_types=(Explicit, Auto))"
    assert am.abstract_mesh is am
    assert pickle.loads(pickle.dumps(am)) == am
    assert am != AbstractMesh((2, 4), ("a", "b"))
    empty = AbstractMesh((), ())
    assert empty.empty is True
    assert repr(empty) == "AbstractMesh((), axis_types=())"
    with pytest.raises(ValueError, match="AbstractMesh needs one size per axis name"):
        AbstractMesh((2, 4), ("a",))


@needs_8_devices
def test_update_axis_types():
    m = mesh_2x4()
    m2 = m.update_axis_types({"b": AxisType.Explicit})
    assert m2.axis_types == (AxisType.Auto, AxisType.Explicit)
    assert m.axis_types == (AxisType.Auto, AxisType.Auto)
    assert m2.device_ids.tolist() == m.device_ids.tolist()


@needs_8_devices
def test_identical_meshes_are_one_object():
    d = plax.devices()
    m = Mesh(d, "x")
    assert Mesh(np.array(d), ("x",)) is m
    assert Mesh(d, "x", axis_types=(AxisType.Auto,)) is m
    assert Mesh(d, "x", axis_types=(AxisType.Explicit,)) is not m
    assert Mesh(d[::-1], "x") is not m
    # A shard_map body's mesh is a marked copy: the cached mesh of its types stays unmarked.
    from plax.sharding.mesh import base_mesh, manual_mesh
    inner = manual_mesh(m, {"x"})
    assert base_mesh(inner) is m and inner == Mesh(d, "x", axis_types=(AxisType.Manual,))
    assert base_mesh(Mesh(d, "x", axis_types=(AxisType.Manual,))) is not m


def test_empty_mesh():
    mesh = Mesh(devices=np.empty((), dtype=object), axis_names=[])
    assert mesh.empty and mesh.size == 0 and mesh.axis_names == () and mesh.axis_sizes == ()
    assert mesh.abstract_mesh.empty and mesh.abstract_mesh.size == 0
    assert repr(mesh) == "Mesh(axis_sizes=(), axis_names=())"
    assert mesh == get_mesh()  # what get_mesh gives without a context mesh
    assert AbstractMesh((), ()).size == 0


@pytest.mark.parametrize("make, error, match", [
    (lambda: AbstractMesh((2, 1), ("x", "y"), axis_types=AxisType.Auto), ValueError,
     r"Number of axis names should match the number of axis_types. Got axis_names=\('x', "
     r"'y'\) and axis_types=\(Auto,\)"),
    (lambda: plax.make_mesh((1, 1), ("a", "b"), axis_types=AxisType.Explicit), ValueError,
     "Number of axis names should match the number of axis_types"),
    (lambda: Mesh(np.array(plax.devices()[:1]).reshape(1, 1), ("x", "y"),
                  axis_types=AxisType.Auto), ValueError,
     "Number of axis names should match the number of axis_types"),
    (lambda: AbstractMesh((2,), ("x",), axis_types=("explicit",)), TypeError,
     "axis_types passed to AbstractMesh must be of type `jax.sharding.AxisType`"),
    (lambda: AbstractMesh((2,), ("x",), axis_types="explicit"), TypeError,
     r"axis_types.*must be of type.*Got \('explicit',\)"),
    (lambda: AbstractMesh((2, 2), ("x", "y"), axis_types=("explicit", AxisType.Explicit)),
     TypeError, "axis_types.*must be of type"),
])
def test_axis_types_errors(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_a_lone_axis_type_types_a_one_axis_mesh():
    assert AbstractMesh((2,), "x", axis_types=AxisType.Auto) == \
        AbstractMesh((2,), ("x",), axis_types=(AxisType.Auto,))
    m = plax.make_mesh((1,), ("x",), axis_types=AxisType.Explicit)
    assert m.axis_types == (AxisType.Explicit,)


# --- make_mesh / create_device_mesh ------------------------------------------------------------
@needs_8_devices
def test_make_mesh_defaults_to_explicit():
    m = plax.make_mesh((2, 4), ("x", "y"))
    assert isinstance(m, Mesh)
    assert m.axis_types == (AxisType.Explicit, AxisType.Explicit)
    assert repr(m) == ("Mesh(axis_sizes=(2, 4), axis_names=('x', 'y'), "
                       "axis_types=(Explicit, Explicit))")
    assert m.device_ids.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert m.abstract_mesh.axis_types == (AxisType.Explicit, AxisType.Explicit)


@needs_8_devices
def test_make_mesh_axis_types_and_devices():
    m = plax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Explicit))
    assert m.axis_types == (AxisType.Auto, AxisType.Explicit)
    m = plax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
    assert m.axis_types == (AxisType.Auto,)
    devs = plax.devices()
    m = plax.make_mesh((2, 2), ("x", "y"), devices=[devs[7], devs[5], devs[3], devs[1]])
    assert m.device_ids.tolist() == [[7, 5], [3, 1]]
    assert m.size == 4
    m = plax.make_mesh((2, 2), ("x", "y"))  # fewer than all devices: the first ones
    assert m.device_ids.tolist() == [[0, 1], [2, 3]]


@needs_8_devices
def test_make_mesh_too_large():
    with pytest.raises(ValueError, match=r"Number of devices 8 must be >= the product of "
                                         r"mesh_shape \(4, 4\)"):
        plax.make_mesh((4, 4), ("x", "y"))


@needs_8_devices
def test_create_device_mesh():
    grid = mesh_utils.create_device_mesh((2, 4))
    assert grid.shape == (2, 4)
    assert [[d.id for d in row] for row in grid] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    grid = mesh_utils.create_device_mesh((2, 2, 2))
    assert grid.shape == (2, 2, 2)
    assert [d.id for d in grid.flat] == list(range(8))
    devs = plax.devices()[4:]
    grid = mesh_utils.create_device_mesh((2, 2), devices=devs)
    assert [d.id for d in grid.flat] == [4, 5, 6, 7]
    m = Mesh(mesh_utils.create_device_mesh((4, 2)), ("a", "b"))
    assert m.device_ids.tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]
    with pytest.raises(ValueError, match=r"Number of devices 8 must equal the product of "
                                         r"mesh_shape \(4, 4\)"):
        mesh_utils.create_device_mesh((4, 4))


# --- the context mesh --------------------------------------------------------------------------
def test_no_mesh_by_default():
    am = get_abstract_mesh()
    assert isinstance(am, AbstractMesh)
    assert am.empty is True
    assert am.axis_names == () and am.size == 0  # (as JAX: no axes, no devices)
    assert repr(am) == "AbstractMesh((), axis_types=())"


@needs_8_devices
def test_set_mesh_as_context_manager():
    m = plax.make_mesh((2, 4), ("x", "y"))
    with plax.set_mesh(m) as entered:
        assert entered is m
        assert get_mesh() == m
        assert get_abstract_mesh() == m.abstract_mesh
        assert repr(get_abstract_mesh()) == (
            "AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, "
            "num_cores=None, platform=cpu)")
    assert get_abstract_mesh().empty is True


@needs_8_devices
def test_set_mesh_nested():
    outer = plax.make_mesh((2, 4), ("x", "y"))
    inner = plax.make_mesh((8,), ("z",))
    with plax.set_mesh(outer):
        with plax.set_mesh(inner):
            assert get_mesh() == inner
            assert get_abstract_mesh().axis_names == ("z",)
        assert get_mesh() == outer
    assert get_abstract_mesh().empty


@needs_8_devices
def test_set_mesh_as_global_setter():
    m = plax.make_mesh((8,), ("x",))
    plax.set_mesh(m)
    assert get_mesh() == m
    assert get_abstract_mesh().axis_names == ("x",)
    other = plax.make_mesh((2, 4), ("a", "b"))
    with plax.set_mesh(other):  # a block scopes its mesh and leaves the global one alone
        assert get_mesh() == other
    assert get_mesh() == m
    plax.set_mesh(None)
    assert get_abstract_mesh().empty is True


def test_set_mesh_rejects_non_mesh():
    with pytest.raises(TypeError, match="set_mesh takes a Mesh, got str"):
        plax.set_mesh("x")


@needs_8_devices
def test_use_mesh():
    m = mesh_2x4()
    with use_mesh(m) as entered:
        assert entered is m
        assert get_mesh() == m
        assert get_abstract_mesh().axis_sizes == (2, 4)
    assert get_abstract_mesh().empty


@needs_8_devices
def test_with_mesh_is_deprecated_but_works():
    m = mesh_2x4()
    with pytest.warns(DeprecationWarning, match="`with mesh:` context manager has been deprecated"):
        with m:
            assert get_mesh() == m
    assert get_abstract_mesh().empty


def test_a_one_name_tuple_is_the_name():
    assert P(("a",)) == P("a")
    assert repr(P(("a",), None)) == "P('a', None)"
