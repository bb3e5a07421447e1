"""mesh_utils over TPU topologies: the physical mesh from chip coordinates, logical axes given
whole or split physical axes, the ring orders of small slices, contiguous submeshes; with
made-up TPU devices (checked against index arithmetic and brute-force enumerations)."""
import dataclasses
import itertools
import math
import random

import numpy as np
import pytest

import plax
from plax._src import sharding_impls
from plax.sharding import device_mesh as mu
from plax.sharding import Mesh, NamedSharding, PartitionSpec as P


@dataclasses.dataclass(frozen=True)
class _Client:
    def process_index(self):
        return 0


@dataclasses.dataclass(frozen=True)
class FakeTpu:
    id: int
    coords: tuple
    core_on_chip: int = 0
    process_index: int = 0
    device_kind: str = "TPU v4"
    platform: str = "tpu"
    slice_index: int = 0
    client: _Client = _Client()


def fake_slice(x, y, z, kind="TPU v4", cores=1, per_process=(2, 2)):
    """Devices of an x*y*z slice, ids counting cores, then x, y, z; each process holds a
    ``per_process`` block of chips in x and y."""
    px, py = min(x, per_process[0]), min(y, per_process[1])
    out = []
    for k, j, i, c in itertools.product(range(z), range(y), range(x), range(cores)):
        proc = i // px + (x // px) * (j // py + (y // py) * k)
        out.append(FakeTpu(c + cores * (i + x * (j + y * k)), (i, j, k), c, proc, kind))
    return out


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 4), (4, 4, 2)])
def test_physical_mesh_puts_each_chip_at_its_coordinates(shape):
    devices = fake_slice(*shape)
    random.Random(0).shuffle(devices)
    mesh = mu._get_physical_tpu_mesh(devices)
    assert mesh.shape == shape
    for index in np.ndindex(shape):
        assert mesh[index].coords == index


def test_physical_mesh_cores_and_offsets():
    v2 = mu._get_physical_tpu_mesh(fake_slice(2, 1, 1, kind="TPU v2", cores=2))
    assert v2.shape == (2, 1, 2)
    assert [(d.coords[0], d.core_on_chip) for d in v2.reshape(-1)] == \
        [(0, 0), (0, 1), (1, 0), (1, 1)]
    v7 = mu._get_physical_tpu_mesh(fake_slice(2, 2, 1, kind="TPU7x", cores=2))
    assert v7.shape == (2, 2, 1, 2)
    corner = [d for d in fake_slice(4, 4, 1) if d.coords[0] >= 2 and d.coords[1] >= 1]
    sub = mu._get_physical_tpu_mesh(corner)
    assert sub.shape == (2, 3, 1) and sub[0, 0, 0].coords == (2, 1, 0)


def test_physical_mesh_rejects_holes_and_split_chips():
    devices = fake_slice(2, 2, 1)
    with pytest.raises(AssertionError, match="cannot fill a cuboid"):
        mu._get_physical_tpu_mesh(devices[:3])
    with pytest.raises(AssertionError, match="not a contiguous cuboid"):
        mu._get_physical_tpu_mesh(devices[:3] + devices[:1])
    with pytest.raises(AssertionError, match="requires one device per chip"):
        mu._get_physical_tpu_mesh(fake_slice(2, 1, 1, cores=2))


@pytest.mark.parametrize("n", [1, 2, 12, 43, 121, 360, 1024, 9973 * 3])
def test_prime_factors(n):
    factors = mu._get_prime_factors(n)
    assert math.prod(factors) == n and factors == sorted(factors)
    assert all(p > 1 and all(p % q for q in range(2, math.isqrt(p) + 1)) for p in factors)


def test_prime_factors_of_nonpositive():
    with pytest.raises(ValueError, match="positive integer"):
        mu._get_prime_factors(0)


@pytest.mark.parametrize("physical,taken,size", [
    ((12, 4, 4), (2, 2, 1), 6), ((4, 4, 8), (2, 2, 2), 4), ((2, 2, 1), (1, 2, 1), 4),
    ((8, 6, 1), (1, 1, 1), 1), ((16, 9), (2, 3), 12)])
def test_feasible_assignments_are_every_divisor_vector(physical, taken, size):
    left = [p // t for p, t in zip(physical, taken)]
    brute = [z for z in itertools.product(*[range(1, n + 1) for n in left])
             if math.prod(z) == size and all(n % d == 0 for n, d in zip(left, z))]
    got = list(mu._enumerate_feasible_logical_axis_assignments(
        physical, np.array([taken]).T, size))
    assert [tuple(int(v) for v in z) for z in got] == sorted(brute, reverse=True)


@pytest.mark.parametrize("first,second,physical,taken", [
    ([1, 2, 1], [1, 1, 2], [2, 2, 4], [1, 1, 1]),   # a whole axis over part of one
    ([4, 4, 1], [1, 1, 16], [4, 4, 16], [1, 1, 1]),  # more whole axes
    ([2, 1], [1, 2], [2, 4], [1, 2])])
def test_preferred_assignment(first, second, physical, taken):
    kw = dict(physical_mesh_shape=physical, assignment=np.array([taken]).T)
    assert mu._prefer_first_logical_axis_assignment(np.array(first), np.array(second), **kw)
    assert not mu._prefer_first_logical_axis_assignment(np.array(second), np.array(first),
                                                         **kw)


@pytest.mark.parametrize("physical,logical,groups", [
    ((2, 2, 1), (1, 1, 4), [(), (), (0, 1, 2)]),
    ((4, 4, 8), (1, 8, 16), [(), (2,), (0, 1)]),
    ((4, 4, 8), (16, 8, 1), [(0, 1), (2,), ()]),
    ((8, 8, 1), (8, 8), [(1,), (0, 2)])])
def test_whole_axes_assignment(physical, logical, groups):
    ids = np.arange(math.prod(physical)).reshape(physical)
    mesh, assignment = mu._create_device_mesh_for_nd_torus(ids, logical)
    expected = np.ones((len(physical), len(logical)), np.int64)
    for axis, group in enumerate(groups):
        expected[list(group), axis] = [physical[p] for p in group]
    np.testing.assert_array_equal(assignment, expected)
    order = [p for g in groups for p in g]
    np.testing.assert_array_equal(mesh, ids.transpose(order).reshape(logical))
    _, split = mu._create_device_mesh_for_nd_torus_splitting_axes(ids, logical)
    np.testing.assert_array_equal(split, expected)


@pytest.mark.parametrize("physical,logical", [
    ((4, 4, 4), (2, 1, 32)), ((4, 4, 8), (2, 2, 8, 4)), ((8, 8, 1), (2, 1, 32, 1)),
    ((12, 4, 8), (2, 8, 24))])
def test_split_axes_assignment_rebuilds_the_physical_mesh(physical, logical):
    ids = np.arange(math.prod(physical)).reshape(physical)
    with pytest.raises(NotImplementedError, match="Failed to find assignment"):
        mu._create_device_mesh_for_nd_torus(ids, logical)
    mesh, assignment = mu._create_device_mesh_for_nd_torus(ids, logical,
                                                           allow_split_physical_axes=True)
    assert mesh.shape == logical
    np.testing.assert_array_equal(assignment.prod(axis=1), physical)
    np.testing.assert_array_equal(assignment.prod(axis=0), logical)
    # Undo: split each logical axis into its physical parts, order them physical-major.
    nphys, nlog = assignment.shape
    parts = mesh.reshape(assignment.T.reshape(-1))
    back = parts.transpose([axis * nphys + p for p in range(nphys) for axis in range(nlog)])
    np.testing.assert_array_equal(back.reshape(-1), ids.reshape(-1))


@pytest.mark.parametrize("kind,shape,cores,mesh_shape,ids", [
    ("TPU v3", (2, 2, 1), 2, (8,), [0, 1, 2, 3, 6, 7, 4, 5]),
    ("TPU v5 lite", (4, 2, 1), 1, (8,), [0, 1, 2, 3, 7, 6, 5, 4]),
    ("TPU v5 lite", (2, 2, 2), 1, (2, 4), [[0, 4, 2, 6], [1, 5, 3, 7]]),
    ("TPU v4 lite", (2, 2, 1), 1, (4,), [0, 1, 3, 2]),
    ("TPU7x", (2, 2, 1), 2, (2, 4), [[0, 1, 2, 3], [6, 7, 4, 5]]),
    ("TPU v4", (2, 2, 1), 1, (4,), [0, 2, 1, 3])])  # no ring: the physical mesh, x major
def test_ring_orders_of_small_slices(kind, shape, cores, mesh_shape, ids):
    devices = fake_slice(*shape, kind=kind, cores=cores)
    mesh = mu.create_device_mesh(mesh_shape, devices)
    assert np.vectorize(lambda d: d.id)(mesh).tolist() == ids


def test_create_device_mesh_errors():
    devices = fake_slice(4, 4, 8)
    with pytest.raises(ValueError, match="should be a sequence of ints"):
        mu.create_device_mesh(((4,), 4), devices[:16])
    with pytest.raises(ValueError, match=r"Number of devices 128 must equal the product of "
                                         r"mesh_shape \(4, 4\)"):
        mu.create_device_mesh((4, 4), devices)
    with pytest.raises(ValueError, match=r"contiguous submeshes for physical mesh topology "
                                         r"\(4, 4, 8\)"):
        mu.create_device_mesh((16, 8), devices, contiguous_submeshes=True)
    with pytest.raises(ValueError, match=r"Available mesh_shapes: \[\(16, 4\)\]"):
        mu.create_device_mesh((8, 8), fake_slice(4, 4, 4), contiguous_submeshes=True)


@pytest.mark.parametrize("topology,mesh_shape", [((2, 2, 4), (4, 4)), ((4, 4, 4), (16, 4)),
                                                 ((4, 4, 4), (1, 16, 1, 4))])
def test_contiguous_submeshes_give_each_process_a_block(topology, mesh_shape):
    mesh = mu.create_device_mesh(mesh_shape, fake_slice(*topology), contiguous_submeshes=True)
    named = Mesh(mesh, [f"a{i}" for i in range(mesh.ndim)])
    for proc in {d.process_index for d in mesh.flat}:
        local = named._local_mesh(proc)
        assert local.devices.size == 4
        assert {d.process_index for d in local.devices.flat} == {proc}


def test_local_mesh_of_a_process_that_is_not_a_block():
    devices = fake_slice(4, 2, 1)  # two processes: x < 2 and x >= 2
    named = Mesh(np.array(devices, dtype=object).reshape(2, 4), ("a", "b"))
    assert named._local_mesh(0).devices.shape == (2, 2)
    scrambled = Mesh(np.array(devices[::3] + devices[1::3] + devices[2::3],
                              dtype=object).reshape(2, 4), ("a", "b"))
    # process 0 holds columns 0 and 3 of both rows: a sub-grid, but not a contiguous one
    with pytest.raises(ValueError, match="must form a contiguous subcube"):
        scrambled._local_mesh(0)
    assert scrambled._process_part(0, contiguous=False).devices.shape == (2, 2)


def test_local_to_global_shape_counts_distinct_process_parts():
    devices = fake_slice(4, 2, 1)  # processes 0 and 1 hold x < 2 and x >= 2
    grid = np.array(sorted(devices, key=lambda d: d.coords[::-1]), dtype=object).reshape(2, 4)
    mesh = Mesh(grid, ("a", "b"))
    # along 'b' each process holds 2 of 4 blocks, 2 distinct parts; along 'a' both hold all
    shape = sharding_impls.local_to_global_shape(NamedSharding(mesh, P("a", "b")), (1, 3))
    assert shape == (1, 6)
    scrambled = Mesh(grid.reshape(-1)[[0, 2, 1, 3, 4, 5, 6, 7]].reshape(2, 4), ("a", "b"))
    shape = sharding_impls.local_to_global_shape(NamedSharding(scrambled, P("a", "b")), (1, 3))
    assert shape == (1, None)


def test_mesh_axis_names_may_be_any_hashable():
    devices = plax.devices()[:2]
    assert Mesh(np.array(devices, dtype=object), [0]).axis_names == (0,)
    with pytest.raises(ValueError, match="Mesh axis names cannot be None"):
        Mesh(np.array(devices, dtype=object), [None])
    with pytest.raises(TypeError, match="Mesh axis names must be hashable"):
        Mesh(np.array(devices, dtype=object), [["a"]])


@pytest.mark.needs_devices(2)
def test_make_mesh_takes_the_first_devices_it_is_given():
    devices = plax.devices()
    mesh = plax.make_mesh((len(devices) // 2,), ("x",), devices=devices[::-1])
    assert list(mesh.devices.flat) == devices[::-1][:len(devices) // 2]
    with pytest.raises(ValueError, match="should be a sequence of ints"):
        plax.make_mesh(((1,), 1), ("x", "y"))
