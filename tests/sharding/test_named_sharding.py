"""NamedSharding: layouts (checked against an independent NumPy model), XLA shardings,
identity, pickling and JAX's error messages."""
import itertools
import math
import pickle

import numpy as np
import pytest

import plax
from plax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec
from plax.sharding.named import DuplicateSpecError, IndivisibleError

# Built around meshes of several devices (most of 8): deselected, not skipped, in the
# suite's one-device run (tests/conftest.py); tests marked needs_devices(1) run there too.
pytestmark = pytest.mark.needs_devices(8)

P = PartitionSpec


def grid(shape, order=None):
    devs = np.array(plax.devices(), dtype=object)
    if order is not None:
        devs = devs[list(order)]
    return devs.reshape(shape)


def mesh_2x4():
    return Mesh(grid((2, 4)), ("a", "b"))


# --- an independent model of the layout ---------------------------------------------------------
def _entry_axes(spec, d):
    if d >= len(spec):
        return ()
    e = spec[d]
    if e is None:
        return ()
    return (e,) if isinstance(e, str) else tuple(e)


def model_layout(mesh, spec, shape):
    """For every device id: (per-dim (start, stop), replica id)."""
    names = list(mesh.axis_names)
    sizes = dict(zip(names, mesh.devices.shape))
    used = [a for d in range(len(shape)) for a in _entry_axes(spec, d)]
    unused = [a for a in names if a not in used]
    out = {}
    for pos in itertools.product(*[range(s) for s in mesh.devices.shape]):
        at = dict(zip(names, pos))
        dev = mesh.devices[pos]
        bounds = []
        for d, n in enumerate(shape):
            axes = _entry_axes(spec, d)
            nblocks, block = 1, 0
            for a in axes:  # mixed radix, the first axis major
                block = block * sizes[a] + at[a]
                nblocks *= sizes[a]
            step = n // nblocks
            bounds.append((block * step, (block + 1) * step))
        rid = 0
        for a in unused:
            rid = rid * sizes[a] + at[a]
        out[dev.id] = (tuple(bounds), rid)
    return out


def _bounds(index, shape):
    return tuple(sl.indices(n)[:2] for sl, n in zip(index, shape))


MESHES = {
    "1d8": lambda: Mesh(grid((8,)), ("x",)),
    "2x4": lambda: Mesh(grid((2, 4)), ("a", "b")),
    "4x2": lambda: Mesh(grid((4, 2)), ("a", "b")),
    "2x2x2": lambda: Mesh(grid((2, 2, 2)), ("a", "b", "c")),
    "2x4rev": lambda: Mesh(grid((2, 4), order=[7, 6, 5, 4, 3, 2, 1, 0]), ("a", "b")),
    "2x2sub": lambda: Mesh(grid((2, 2), order=[5, 1, 6, 2]), ("a", "b")),
}

CASES = [
    ("1d8", P("x"), (16,)),
    ("1d8", P(), (3, 5)),
    ("1d8", P(None, "x"), (3, 8)),
    ("1d8", P(None, None, "x"), (2, 2, 8)),
    ("2x4", P("a", "b"), (4, 8)),
    ("2x4", P("b"), (8, 3)),
    ("2x4", P(("a", "b")), (8,)),
    ("2x4", P(None, "a"), (3, 4)),
    ("2x4", P(), (5,)),
    ("2x4", P(("b", "a"), None), (16, 2)),
    ("2x4", P("b", "a"), (4, 2)),
    ("2x4", P(None, ("b", "a")), (1, 8, 3)),
    ("4x2", P("a", "b"), (8, 4)),
    ("4x2", P("b"), (6, 4)),
    ("4x2", P(("b", "a")), (16,)),
    ("4x2", P(None, "a"), (2, 12)),
    ("2x2x2", P("a", "b", "c"), (2, 4, 6)),
    ("2x2x2", P(("c", "a"), "b"), (4, 2)),
    ("2x2x2", P("c"), (4, 3)),
    ("2x2x2", P(None, ("a", "b", "c")), (1, 8)),
    ("2x2x2", P("b", None, "a"), (2, 5, 4)),
    ("2x2x2", P(("c", "b", "a")), (8,)),
    ("2x4rev", P("a", "b"), (4, 8)),
    ("2x4rev", P("b"), (4,)),
    ("2x2sub", P("b", "a"), (2, 4)),
    ("2x2sub", P(None, "a"), (3, 2)),
]


@pytest.mark.parametrize("mesh_name,spec,shape", CASES,
                         ids=[f"{m}-{s}-{sh}" for m, s, sh in CASES])
def test_layout_matches_model(mesh_name, spec, shape):
    mesh = MESHES[mesh_name]()
    s = NamedSharding(mesh, spec)
    model = model_layout(mesh, spec, shape)
    dim = s.devices_indices_map(shape)
    rids = s.replica_ids(shape)
    assert sorted(d.id for d in dim) == sorted(model)
    assert sorted(d.id for d in rids) == sorted(model)
    for dev, index in dim.items():
        assert len(index) == len(shape)
        assert _bounds(index, shape) == model[dev.id][0], dev
        assert rids[dev] == model[dev.id][1], dev
    tiles = [math.prod(mesh.shape[a] for a in _entry_axes(spec, d)) for d in range(len(shape))]
    assert s.shard_shape(shape) == tuple(n // t for n, t in zip(shape, tiles))
    # every element is held by (mesh size / number of blocks) devices
    counts = np.zeros(shape, int)
    for index in dim.values():
        counts[index] += 1
    assert (counts == mesh.size // math.prod(tiles)).all()
    assert s.is_fully_replicated == (math.prod(tiles) == 1)
    assert s.num_devices == mesh.size
    assert s.device_set == set(mesh.devices.flat)


# --- facts from JAX 0.10.2 on a 2x4 mesh ('a', 'b') of devices 0..7 ----------------------------
HLO = [
    (P("a", "b"), 2, "{devices=[2,4]<=[8]}"),
    (P("b"), 2, "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"),
    (P(("a", "b")), 1, "{devices=[8]<=[8]}"),
    (P(None, "a"), 2, "{devices=[1,2,4]<=[8] last_tile_dim_replicate}"),
    (P(), 2, "{replicated}"),
    (P(("b", "a")), 2, "{devices=[8,1]<=[2,4]T(1,0)}"),
    (P("b", "a"), 2, "{devices=[4,2]<=[2,4]T(1,0)}"),
    (P(None, ("b", "a")), 3, "{devices=[1,8,1]<=[2,4]T(1,0)}"),
]


@pytest.mark.parametrize("spec,ndim,text", HLO, ids=[repr(h[0]) for h in HLO])
def test_hlo_sharding_strings(spec, ndim, text):
    assert str(NamedSharding(mesh_2x4(), spec)._to_xla_hlo_sharding(ndim)) == text


def test_hlo_sharding_of_reversed_mesh_is_positional():
    m = Mesh(grid((2, 4), order=[7, 6, 5, 4, 3, 2, 1, 0]), ("a", "b"))
    assert str(NamedSharding(m, P("a", "b"))._to_xla_hlo_sharding(2)) == "{devices=[2,4]<=[8]}"


def test_jax_facts_2d():
    s = NamedSharding(mesh_2x4(), P("a", "b"))
    assert s.shard_shape((4, 8)) == (2, 2)
    dim = s.devices_indices_map((4, 8))
    for d in plax.devices():
        k = d.id
        assert dim[d] == (slice((k // 4) * 2, (k // 4) * 2 + 2), slice((k % 4) * 2, (k % 4) * 2 + 2))
    dev5 = plax.devices()[5]
    assert dim[dev5] == (slice(2, 4, None), slice(2, 4, None))


def test_jax_facts_partially_replicated():
    s = NamedSharding(mesh_2x4(), P("b"))
    dim = s.devices_indices_map((8, 3))
    for d in plax.devices():
        k = d.id
        assert dim[d] == (slice((k % 4) * 2, (k % 4) * 2 + 2), slice(None))
    rids = s.replica_ids((8, 3))
    assert [rids[d] for d in plax.devices()] == [0, 0, 0, 0, 1, 1, 1, 1]
    s = NamedSharding(mesh_2x4(), P(None, "a"))
    rids = s.replica_ids((3, 4))
    assert [rids[d] for d in plax.devices()] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert s.shard_shape((3, 4)) == (3, 2)


def test_jax_facts_multi_axis_dims():
    s = NamedSharding(mesh_2x4(), P(("a", "b")))
    dim = s.devices_indices_map((8,))
    assert [dim[d] for d in plax.devices()] == [(slice(k, k + 1),) for k in range(8)]
    s = NamedSharding(mesh_2x4(), P(("b", "a"), None))
    dim = s.devices_indices_map((16, 2))
    blocks = [dim[d][0].start // 2 for d in plax.devices()]
    assert blocks == [(k % 4) * 2 + k // 4 for k in range(8)]
    assert blocks == [0, 2, 4, 6, 1, 3, 5, 7]
    # the device of row block i, i = 0..7:
    assert [[d.id for d in plax.devices() if dim[d][0].start == 2 * i][0] for i in range(8)] \
        == [0, 4, 1, 5, 2, 6, 3, 7]
    assert all(dim[d][1] == slice(None) for d in plax.devices())


def test_jax_facts_replicated():
    s = NamedSharding(mesh_2x4(), P())
    assert s.is_fully_replicated
    dim = s.devices_indices_map((3, 2))
    assert all(v == (slice(None), slice(None)) for v in dim.values())
    rids = s.replica_ids((3, 2))
    assert [rids[d] for d in plax.devices()] == list(range(8))
    assert s.shard_shape((3, 2)) == (3, 2)


# --- the Sharding protocol -----------------------------------------------------------------------
def test_sharding_properties():
    m = mesh_2x4()
    s = NamedSharding(m, P("a"))
    assert isinstance(s, plax.sharding.Sharding)
    assert s.mesh is m and s.spec == P("a")
    assert s.memory_kind == "device"
    assert s.num_devices == 8
    assert s.device_set == set(plax.devices())
    assert s.addressable_devices == set(plax.devices())
    assert s.is_fully_addressable is True
    assert s.is_fully_replicated is False
    assert NamedSharding(m, P()).is_fully_replicated is True
    assert NamedSharding(m, P(None, None)).is_fully_replicated is True
    one = Mesh(grid((1, 8)), ("u", "v"))
    assert NamedSharding(one, P("u")).is_fully_replicated is True
    assert NamedSharding(one, P("u", "v")).is_fully_replicated is False
    amap = s.addressable_devices_indices_map((4,))
    assert amap == s.devices_indices_map((4,))


def test_spec_given_as_tuple_or_none():
    m = mesh_2x4()
    assert NamedSharding(m, ("a", None)).spec == P("a", None)
    assert NamedSharding(m, None).spec == P()
    assert NamedSharding(m).spec == P()
    with pytest.raises(TypeError, match="NamedSharding's spec must be a PartitionSpec, got 3"):
        NamedSharding(m, 3)
    with pytest.raises(TypeError, match="NamedSharding's mesh must be a Mesh, got str"):
        NamedSharding("mesh", P())


def test_with_memory_kind_and_with_spec():
    m = mesh_2x4()
    s = NamedSharding(m, P("a", None))
    h = s.with_memory_kind("pinned_host")
    assert h.memory_kind == "pinned_host" and h.spec == s.spec and h.mesh == m
    assert repr(h) == ("NamedSharding(mesh=Mesh('a': 2, 'b': 4, axis_types=(Auto, Auto)), "
                       "spec=P('a', None), memory_kind=pinned_host)")
    assert h != s
    t = s.with_spec(P("b"))
    assert t.spec == P("b") and t.mesh == m and t.memory_kind == "device"
    assert t.devices_indices_map((4,))[plax.devices()[5]] == (slice(1, 2),)


def test_update_replaces_only_what_is_named():
    m = mesh_2x4()
    s = NamedSharding(m, P("a", None), memory_kind="pinned_host")
    t = s.update(spec=("b",))
    assert t.spec == P("b") and t.mesh == m and t.memory_kind == "pinned_host"
    other = Mesh(grid((4, 2)), ("x", "y"))
    u = s.update(mesh=other, spec=P("y"), memory_kind="device")
    assert (u.mesh, u.spec, u.memory_kind) == (other, P("y"), "device")
    assert s.update() == s
    assert u.devices_indices_map((4,))[plax.devices()[1]] == (slice(2, 4),)
    with pytest.raises(TypeError, match="unexpected keyword.*'axes'"):
        s.update(axes=("a",))


def test_repr():
    s = NamedSharding(mesh_2x4(), P("a", None))
    assert repr(s) == ("NamedSharding(mesh=Mesh('a': 2, 'b': 4, axis_types=(Auto, Auto)), "
                       "spec=P('a', None), memory_kind=device)")
    s = NamedSharding(plax.make_mesh((8,), ("x",)), P("x"))
    assert repr(s) == ("NamedSharding(mesh=Mesh('x': 8, axis_types=(Explicit,)), spec=P('x',), "
                       "memory_kind=device)")


def test_equality_and_hash():
    m = mesh_2x4()
    a, b = NamedSharding(m, P("a")), NamedSharding(mesh_2x4(), P("a"))
    assert a == b and hash(a) == hash(b)
    assert a != NamedSharding(m, P("b"))
    assert a != NamedSharding(m, P("a", None))  # as JAX: the specs differ
    assert a != NamedSharding(Mesh(grid((2, 4)), ("a", "c")), P("a"))
    assert a != NamedSharding(Mesh(grid((2, 4), order=range(7, -1, -1)), ("a", "b")), P("a"))
    assert len({a, b, NamedSharding(m, P("b"))}) == 2


def test_is_equivalent_to():
    m = mesh_2x4()
    s = NamedSharding(m, P("a", None))
    assert s.is_equivalent_to(NamedSharding(m, P("a")), 2)
    assert not s.is_equivalent_to(NamedSharding(m, P("b")), 2)
    assert NamedSharding(m, P()).is_equivalent_to(NamedSharding(m, P(None, None)), 2)
    m4x2 = Mesh(grid((4, 2)), ("a", "b"))
    # P(('a','b')) over 2x4 and over 4x2 give the same 8-way row split on devices 0..7
    assert NamedSharding(m, P(("a", "b"))).is_equivalent_to(NamedSharding(m4x2, P(("a", "b"))), 1)
    rev = Mesh(grid((2, 4), order=range(7, -1, -1)), ("a", "b"))
    assert not s.is_equivalent_to(NamedSharding(rev, P("a")), 2)
    assert not s.is_equivalent_to("not a sharding", 2)


@pytest.mark.needs_devices(1)
def test_pickle_round_trip_abstract_mesh():
    am = AbstractMesh((2, 4), ("a", "b"))
    s = NamedSharding(am, P("a", None))
    t = pickle.loads(pickle.dumps(s))
    assert t == s and hash(t) == hash(s)
    assert t.spec == P("a", None) and t.mesh == am
    assert s.shard_shape((4, 6)) == (2, 6)


def test_reduce_rebuilds_equal_sharding():
    # Devices themselves do not pickle (in JAX neither); the reconstruction recipe does.
    s = NamedSharding(mesh_2x4(), P("b", "a"), memory_kind="device")
    fn, args = s.__reduce__()
    t = fn(*args)
    assert t == s and hash(t) == hash(s) and t.memory_kind == "device"
    assert t.devices_indices_map((4, 2)) == s.devices_indices_map((4, 2))


def test_shardy_attribute():
    s = NamedSharding(mesh_2x4(), P(("a", "b"), None, P.UNCONSTRAINED))
    assert s.shardy_attribute(3) == '#sdy.sharding<@mesh, [{"a", "b"}, {}, {?}]>'
    assert NamedSharding(mesh_2x4(), P()).shardy_attribute(2, "m") == "#sdy.sharding<@m, [{}, {}]>"


# --- errors --------------------------------------------------------------------------------------
def test_unknown_axis():
    with pytest.raises(ValueError, match=r"Resource axis: z of P\('z',\) is not found in mesh: "
                                         r"\('a', 'b'\)\."):
        NamedSharding(mesh_2x4(), P("z"))
    with pytest.raises(ValueError, match=r"Resource axis: c of P\('a', \('b', 'c'\)\) is not "
                                         r"found in mesh"):
        NamedSharding(mesh_2x4(), P("a", ("b", "c")))


def test_duplicate_axis():
    with pytest.raises(DuplicateSpecError, match=r"but P\('a', 'a'\) has duplicate entries for `a`"):
        NamedSharding(mesh_2x4(), P("a", "a"))
    with pytest.raises(DuplicateSpecError, match="has duplicate entries for `a`"):
        NamedSharding(mesh_2x4(), P("a", ("b", "a")))
    with pytest.raises(ValueError, match="A single NamedSharding spec specification can map every "
                                         "mesh axis to at most one positional dimension"):
        NamedSharding(mesh_2x4(), P(("b", "b")))


def test_indivisible():
    s = NamedSharding(mesh_2x4(), P("b"))
    with pytest.raises(IndivisibleError, match=r"implies that array axis 0 is partitioned 4 "
                                               r"times, but the dimension size is 3"):
        s.shard_shape((3,))
    with pytest.raises(IndivisibleError, match=r"\(full shape: \(3,\), per-dimension tiling "
                                               r"factors: \[4\] should evenly divide the shape\)"):
        s.devices_indices_map((3,))
    with pytest.raises(ValueError, match=r"implies that array axis 1 is partitioned 8 times, but "
                                         r"the dimension size is 4"):
        NamedSharding(mesh_2x4(), P(None, ("a", "b"))).shard_shape((2, 4))


def test_rank_too_small():
    s = NamedSharding(mesh_2x4(), P("a", "b"))
    with pytest.raises(ValueError, match="is only valid for values of rank at least 2, but was "
                                         "applied to a value of rank 1"):
        s.shard_shape((4,))
    with pytest.raises(ValueError, match="is only valid for values of rank at least 2, but was "
                                         "applied to a value of rank 0"):
        s.check_shape(())


def test_constraint_inside_jit_may_split_a_dimension_unevenly():
    # As in JAX (flax's logical partitioning relies on it): XLA pads the last shards inside
    # the program; only storing an array that way (device_put, out_shardings) is refused.
    mesh = Mesh(np.array(plax.devices()[:8]).reshape(8, 1), ("in", "out"))
    s = NamedSharding(mesh, PartitionSpec("in", "out"))
    x = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    y = plax.jit(lambda x: plax.lax.with_sharding_constraint(x * 2, s))(x)
    np.testing.assert_array_equal(y, x * 2)
    with pytest.raises(IndivisibleError, match="partitioned 8 times, but the dimension size is 4"):
        plax.device_put(x, s)
    with pytest.raises(IndivisibleError, match="partitioned 8 times"):
        plax.jit(lambda x: x + 1, out_shardings=s)(x)


def test_a_jit_without_arguments_lays_out_its_results_over_its_constraint_mesh():
    # flax's create_state(): a jit of no arguments whose only sharding is a constraint inside.
    mesh = Mesh(np.array(plax.devices()[:8]).reshape(8, 1), ("in", "out"))
    s = NamedSharding(mesh, PartitionSpec("in", None))
    y = plax.jit(lambda: plax.lax.with_sharding_constraint(plax.numpy.ones((8, 4)), s))()
    assert y.sharding.mesh == mesh and y.sharding.is_equivalent_to(s, 2)
    np.testing.assert_array_equal(y, np.ones((8, 4)))
