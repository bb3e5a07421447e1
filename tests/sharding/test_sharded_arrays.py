"""Arrays laid out over meshes by plax.device_put: shards, read-back, resharding, pytrees,
errors, printing and typed PRNG keys."""
import numpy as np
import pytest

import plax
import plax.numpy as pnp
from plax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

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


LAYOUTS = [
    ((8,), ("x",), P("x"), (16,)),
    ((8,), ("x",), P(), (3, 2)),
    ((8,), ("x",), P(None, "x"), (2, 8)),
    ((2, 4), ("a", "b"), P("a", "b"), (4, 8)),
    ((2, 4), ("a", "b"), P("b"), (8, 3)),
    ((2, 4), ("a", "b"), P(("a", "b")), (8,)),
    ((2, 4), ("a", "b"), P(None, "a"), (3, 4)),
    ((2, 4), ("a", "b"), P(("b", "a"), None), (16, 2)),
    ((2, 4), ("a", "b"), P("b", "a"), (4, 2)),
    ((4, 2), ("a", "b"), P("a", "b"), (8, 2)),
    ((4, 2), ("a", "b"), P(None, ("b", "a")), (1, 8)),
    ((2, 2, 2), ("a", "b", "c"), P("c", ("a", "b")), (2, 4, 3)),
    ((2, 2, 2), ("a", "b", "c"), P("b"), (2,)),
]


def _sharding(mesh_shape, names, spec):
    return NamedSharding(Mesh(grid(mesh_shape), names), spec)


@pytest.mark.parametrize("mesh_shape,names,spec,shape", LAYOUTS,
                         ids=[f"{m}-{s}-{sh}" for m, _, s, sh in LAYOUTS])
def test_put_and_read_back(mesh_shape, names, spec, shape):
    s = _sharding(mesh_shape, names, spec)
    host = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) * 1.5 - 3
    x = plax.device_put(host, s)
    assert x.shape == shape and x.dtype == np.float32
    assert x.sharding == s
    np.testing.assert_array_equal(np.asarray(x), host)
    dim = s.devices_indices_map(shape)
    rids = s.replica_ids(shape)
    shards = x.addressable_shards
    assert len(shards) == 8
    assert [sh.device for sh in shards] == list(s.mesh.devices.flat)
    for i, sh in enumerate(shards):
        assert sh.index == dim[sh.device]
        assert sh.replica_id == rids[sh.device]
        assert sh.data.shape == s.shard_shape(shape)
        np.testing.assert_array_equal(np.asarray(sh.data), host[sh.index])
        np.testing.assert_array_equal(np.asarray(x.addressable_data(i)), host[sh.index])
    assert [(g.device, g.index, g.replica_id) for g in x.global_shards] == \
        [(sh.device, sh.index, sh.replica_id) for sh in shards]
    assert x.is_fully_replicated == s.is_fully_replicated
    assert x.is_fully_addressable is True
    assert x.devices() == set(s.mesh.devices.flat)


def test_put_with_partition_spec_under_set_mesh():
    mesh = plax.make_mesh((2, 4), ("x", "y"))
    host = np.arange(32, dtype=np.int32).reshape(4, 8)
    with plax.set_mesh(mesh):
        x = plax.device_put(host, P("x", "y"))
    assert x.sharding == NamedSharding(mesh, P("x", "y"))
    np.testing.assert_array_equal(np.asarray(x), host)
    assert x.sharding.shard_shape(x.shape) == (2, 2)
    np.testing.assert_array_equal(np.asarray(x.addressable_data(5)), host[2:4, 2:4])


def test_put_with_partition_spec_under_global_mesh():
    mesh = plax.make_mesh((8,), ("x",))
    plax.set_mesh(mesh)
    x = plax.device_put(np.arange(8.0), P("x"))
    assert x.sharding == NamedSharding(mesh, P("x"))
    np.testing.assert_array_equal(np.asarray(x), np.arange(8.0))


@pytest.mark.needs_devices(1)
def test_partition_spec_without_mesh():
    with pytest.raises(ValueError, match="set_mesh"):
        plax.device_put(np.zeros(8), P("x"))


def test_fully_replicated_shards():
    x = plax.device_put(np.arange(6).reshape(2, 3), NamedSharding(mesh_2x4(), P()))
    assert x.is_fully_replicated is True
    assert [sh.replica_id for sh in x.addressable_shards] == list(range(8))
    for sh in x.addressable_shards:
        assert sh.index == (slice(None), slice(None))
        np.testing.assert_array_equal(np.asarray(sh.data), np.arange(6).reshape(2, 3))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.uint8, np.float16])
def test_dtypes(dtype):
    host = (np.arange(32).reshape(8, 4) % 3).astype(dtype)
    x = plax.device_put(host, NamedSharding(mesh_2x4(), P("b", "a")))
    assert x.dtype == dtype
    np.testing.assert_array_equal(np.asarray(x), host)
    for sh in x.addressable_shards:
        got = np.asarray(sh.data)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, host[sh.index])


def test_bfloat16():
    host = (np.arange(16, dtype=np.float32) / 4).astype(pnp.bfloat16)
    x = plax.device_put(host, NamedSharding(mesh_2x4(), P(("a", "b"))))
    assert x.dtype == pnp.bfloat16
    back = np.asarray(x)
    assert back.dtype == pnp.bfloat16
    np.testing.assert_array_equal(back.astype(np.float32), np.arange(16, dtype=np.float32) / 4)
    np.testing.assert_array_equal(np.asarray(x.addressable_data(3)).astype(np.float32),
                                  np.array([1.5, 1.75], np.float32))


def test_put_of_plax_array_from_plax_numpy():
    y = pnp.arange(8, dtype=pnp.float32) * 2
    x = plax.device_put(y, NamedSharding(mesh_2x4(), P("b")))
    np.testing.assert_array_equal(np.asarray(x), np.arange(8, dtype=np.float32) * 2)
    assert isinstance(x.sharding, NamedSharding)
    np.testing.assert_array_equal(np.asarray(x.addressable_data(6)), np.array([8.0, 10.0]))


def test_printing_shows_values():
    host = np.arange(8, dtype=np.float32).reshape(4, 2)
    x = plax.device_put(host, NamedSharding(mesh_2x4(), P("a")))
    assert repr(x) == ("Array([[0., 1.],\n       [2., 3.],\n       [4., 5.],\n"
                       "       [6., 7.]], dtype=float32)")
    assert str(x) == "[[0. 1.]\n [2. 3.]\n [4. 5.]\n [6. 7.]]"
    y = plax.device_put(np.array([1, 2, 3, 4], np.int32), NamedSharding(mesh_2x4(), P("b")))
    assert repr(y) == "Array([1, 2, 3, 4], dtype=int32)"


SHARDINGS = [
    lambda: NamedSharding(mesh_2x4(), P("a", "b")),
    lambda: NamedSharding(mesh_2x4(), P("b")),
    lambda: NamedSharding(mesh_2x4(), P()),
    lambda: NamedSharding(mesh_2x4(), P(("b", "a"))),
    lambda: NamedSharding(Mesh(grid((4, 2)), ("a", "b")), P(None, ("a", "b"))),
    lambda: NamedSharding(Mesh(grid((2, 4), order=range(7, -1, -1)), ("a", "b")), P("a", "b")),
    lambda: NamedSharding(Mesh(grid((2, 2), order=[6, 3, 1, 4]), ("a", "b")), P("b")),
    lambda: SingleDeviceSharding(plax.devices()[3]),
]


@pytest.mark.parametrize("src", range(len(SHARDINGS)))
@pytest.mark.parametrize("dst", range(len(SHARDINGS)))
def test_reshard_round_trips(src, dst):
    host = np.arange(64, dtype=np.float32).reshape(8, 8) - 20
    s, t = SHARDINGS[src](), SHARDINGS[dst]()
    x = plax.device_put(host, s)
    y = plax.device_put(x, t)
    assert y.sharding.is_equivalent_to(t, 2)
    assert y.devices() == t.device_set
    np.testing.assert_array_equal(np.asarray(y), host)
    z = plax.device_put(y, s)
    assert z.sharding.is_equivalent_to(s, 2)
    np.testing.assert_array_equal(np.asarray(z), host)
    np.testing.assert_array_equal(np.asarray(x), host)  # the source is untouched
    if isinstance(t, NamedSharding):
        dim = t.devices_indices_map(host.shape)
        for sh in y.addressable_shards:
            assert sh.index == dim[sh.device]
            np.testing.assert_array_equal(np.asarray(sh.data), host[sh.index])


def test_named_to_single_device():
    host = np.arange(24, dtype=np.int32).reshape(4, 6)
    x = plax.device_put(host, NamedSharding(mesh_2x4(), P("a", None)))
    dev = plax.devices()[3]
    y = plax.device_put(x, dev)
    assert y.devices() == {dev}
    assert y.sharding.device_set == {dev}
    assert y.is_fully_replicated is True
    np.testing.assert_array_equal(np.asarray(y), host)


def test_single_device_to_named():
    host = np.arange(16, dtype=np.float32)
    x = plax.device_put(host, plax.devices()[2])
    assert x.devices() == {plax.devices()[2]}
    s = NamedSharding(mesh_2x4(), P(("b", "a")))
    y = plax.device_put(x, s)
    assert y.sharding == s
    np.testing.assert_array_equal(np.asarray(y), host)
    # device k holds block (k % 4) * 2 + k // 4 of 8 blocks of 2
    for sh in y.addressable_shards:
        k = sh.device.id
        b = (k % 4) * 2 + k // 4
        np.testing.assert_array_equal(np.asarray(sh.data), host[2 * b:2 * b + 2])


def test_reshard_to_same_sharding_is_identity():
    s = NamedSharding(mesh_2x4(), P("a"))
    x = plax.device_put(np.arange(4.0), s)
    assert plax.device_put(x, s) is x
    y = plax.device_put(x, NamedSharding(mesh_2x4(), P("a")))
    np.testing.assert_array_equal(np.asarray(y), np.arange(4.0))


def test_pytree_with_sharding_prefix():
    m = mesh_2x4()
    tree = {"w": np.arange(8, dtype=np.float32).reshape(4, 2),
            "b": (np.arange(4, dtype=np.int32), np.ones((2, 4), np.float32))}
    shardings = {"w": NamedSharding(m, P("b")), "b": NamedSharding(m, P())}
    out = plax.device_put(tree, shardings)
    assert out["w"].sharding == NamedSharding(m, P("b"))
    assert out["b"][0].sharding == NamedSharding(m, P())
    assert out["b"][1].sharding == NamedSharding(m, P())
    np.testing.assert_array_equal(np.asarray(out["w"]), tree["w"])
    np.testing.assert_array_equal(np.asarray(out["b"][0]), tree["b"][0])
    np.testing.assert_array_equal(np.asarray(out["b"][1]), tree["b"][1])


def test_pytree_with_spec_prefix_under_mesh():
    m = plax.make_mesh((2, 4), ("x", "y"))
    tree = [np.arange(8.0), (np.arange(16.0).reshape(2, 8), np.arange(4.0))]
    with plax.set_mesh(m):
        out = plax.device_put(tree, [P("x"), (P("x", "y"), P())])
    assert out[0].sharding == NamedSharding(m, P("x"))
    assert out[1][0].sharding == NamedSharding(m, P("x", "y"))
    assert out[1][1].sharding == NamedSharding(m, P())
    for got, want in zip([out[0], out[1][0], out[1][1]], [tree[0], tree[1][0], tree[1][1]]):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_one_sharding_for_a_whole_pytree():
    s = NamedSharding(mesh_2x4(), P("a"))
    out = plax.device_put({"p": np.arange(4.0), "q": np.arange(6.0).reshape(2, 3)}, s)
    assert out["p"].sharding == s and out["q"].sharding == s
    np.testing.assert_array_equal(np.asarray(out["q"]), np.arange(6.0).reshape(2, 3))


def test_indivisible_shape_raises_before_transfer():
    s = NamedSharding(mesh_2x4(), P("b"))
    before = len(plax.live_arrays())
    with pytest.raises(ValueError, match="implies that array axis 0 is partitioned 4 times, but "
                                         "the dimension size is 3"):
        plax.device_put(np.zeros(3, np.float32), s)
    assert len(plax.live_arrays()) == before
    x = plax.device_put(np.zeros(6, np.float32), plax.devices()[0])
    with pytest.raises(ValueError, match="implies that array axis 0 is partitioned 4 times, but "
                                         "the dimension size is 6"):
        plax.device_put(x, s)


def test_rank_too_small_for_spec():
    s = NamedSharding(mesh_2x4(), P("a", "b"))
    with pytest.raises(ValueError, match=r"One of device_put args is incompatible with its "
                                         r"sharding annotation .*is only valid for values of rank "
                                         r"at least 2, but was applied to a value of rank 1"):
        plax.device_put(np.zeros(4), s)


def test_eager_arithmetic_values():
    host = np.arange(32, dtype=np.float32).reshape(4, 8)
    x = plax.device_put(host, NamedSharding(mesh_2x4(), P("a", "b")))
    y = plax.device_put(host * 2, NamedSharding(mesh_2x4(), P("b")))
    np.testing.assert_array_equal(np.asarray(x + 1), host + 1)
    np.testing.assert_array_equal(np.asarray(x * x), host * host)
    np.testing.assert_array_equal(np.asarray(x + y), host * 3)
    np.testing.assert_array_equal(np.asarray(pnp.sum(x, axis=0)), host.sum(0))
    np.testing.assert_array_equal(np.asarray(x.T), host.T)
    np.testing.assert_array_equal(np.asarray(x[1:3, ::2]), host[1:3, ::2])


def test_typed_prng_keys_over_mesh():
    m = plax.make_mesh((8,), ("x",))
    keys = plax.random.split(plax.random.key(0), 8)
    want = np.asarray(plax.random.key_data(keys))
    assert want.shape == (8, 2)
    with plax.set_mesh(m):
        ks = plax.device_put(keys, P("x"))
    assert ks.shape == (8,) and ks.dtype == keys.dtype
    assert ks.sharding == NamedSharding(m, P("x"))
    np.testing.assert_array_equal(np.asarray(plax.random.key_data(ks)), want)
    np.testing.assert_array_equal(
        np.asarray(plax.random.key_data(ks)),
        np.array([[1797259609, 2579123966], [928981903, 3453687069], [4146024105, 2718843009],
                  [2467461003, 3840466878], [2285895361, 433833334], [1524306142, 1887795613],
                  [3792494674, 2909014575], [2716826189, 292468403]], np.uint32))
    # drawing from the laid-out keys gives the same numbers as from the unsharded ones (the
    # mesh's axis is Explicit: picking one key out of the split axis says where it goes)
    with plax.set_mesh(m):
        k3 = ks.at[3].get(out_sharding=P())
    np.testing.assert_array_equal(np.asarray(plax.random.uniform(k3, (4,))),
                                  np.asarray(plax.random.uniform(keys[3], (4,))))


def test_shard_data_are_plax_arrays_on_their_device():
    y = plax.device_put(np.arange(8.0), plax.devices()[2])
    data = y.addressable_shards[0].data
    assert data.devices() == {plax.devices()[2]}
    assert isinstance(data.sharding, plax.sharding.SingleDeviceSharding)
    np.testing.assert_array_equal(np.asarray(data), np.arange(8.0))


@pytest.mark.parametrize("spec", [P(None, "b"), P("b", "a"), P(), P(("a", "b"))])
def test_on_device_reshard_moves_every_block(spec):
    # The path accelerators take (CPU reshards through the host, which is faster there).
    from plax.runtime import spmd
    mesh = Mesh(np.array(plax.devices()[:8]).reshape(2, 4), ("a", "b"))
    base = np.arange(256.0, dtype=np.float32).reshape(16, 16)
    x = plax.device_put(base, NamedSharding(mesh, P("a", "b")))
    y = spmd.reshard_on_device(x, NamedSharding(mesh, spec))
    assert y.sharding == NamedSharding(mesh, spec)
    for shard in y.addressable_shards:
        np.testing.assert_array_equal(np.asarray(shard.data), base[shard.index])
    other = Mesh(np.array(plax.devices()[:4]), ("x",))
    assert spmd.reshard_on_device(x, NamedSharding(other, P("x"))) is None  # other devices


def test_check_compatible_aval_names_the_spec_and_scalars():
    s = NamedSharding(mesh_2x4(), P(None, ("b",), None))
    with pytest.raises(ValueError, match=r"P\(None, 'b', None\).* only valid for values of rank "
                                         r"at least 3, but was applied to a value of rank 2"):
        s.check_compatible_aval((4, 4))
    with pytest.raises(ValueError, match=r"For scalars the PartitionSpec should be P\(\)"):
        NamedSharding(mesh_2x4(), P("a")).check_compatible_aval(())
    s.check_compatible_aval((4, 4, 4))
