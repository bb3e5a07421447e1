"""plax.experimental.array_serialization.pytree_serialization: a pytree of arrays saved to a
directory in JAX's layout and loaded back. tests/data/jax_0.10.2_pytree was written by real
JAX 0.10.2 (``pytree_serialization.save`` of the tree ``_jax_tree`` describes, on 8 CPU
devices, ``w`` sharded over a (2, 4) mesh, with ``Point`` registered as
"plax_tests.Point")."""
import asyncio
import collections
import json
import os
import shutil

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import export
from plax.experimental.array_serialization import pytree_serialization as ps
from plax.experimental.array_serialization import pytree_serialization_utils as utils
from plax.experimental.array_serialization import tensorstore_impl as ts_impl
from plax.experimental.layout import Format
from plax.sharding import NamedSharding, PartitionSpec as P, SingleDeviceSharding

JAX_PYTREE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                          "jax_0.10.2_pytree")
Point = collections.namedtuple("Point", "x y")
export.register_namedtuple_serialization(Point, serialized_name="plax_tests.Point")


def _jax_tree():
    """The tree real JAX saved (values by closed form)."""
    mesh = plax.make_mesh((2, 4), ("x", "y"))
    w = plax.device_put(jnp.arange(48, dtype=jnp.float32).reshape(6, 8),
                        NamedSharding(mesh, P("x", "y")))
    return {"params": {"w": w, "b": jnp.linspace(-1, 1, 5, dtype=jnp.bfloat16)},
            "step": jnp.int32(7), "skip": None,
            "opt": collections.OrderedDict([("mu", jnp.full((2, 3), 0.5)),
                                            ("count", jnp.array([3], jnp.uint8))]),
            "point": Point(jnp.float32(1.5), [jnp.arange(3, dtype=jnp.int16), None])}


def _equal_trees(a, b):
    assert plax.tree.structure(a) == plax.tree.structure(b)
    for x, y in zip(plax.tree.leaves(a), plax.tree.leaves(b)):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert np.array_equal(np.asarray(x).astype(np.float64), np.asarray(y).astype(np.float64))


def test_a_pytree_real_jax_saved_loads_onto_other_shardings():
    mesh = plax.make_mesh((4, 2), ("a", "b"))
    rep = NamedSharding(mesh, P())
    shardings = {"params": {"w": NamedSharding(mesh, P("b", "a")),
                            "b": SingleDeviceSharding(plax.devices()[5])},
                 "step": rep, "skip": None, "opt": rep, "point": rep}
    loaded = ps.load(JAX_PYTREE, shardings)
    _equal_trees(loaded, _jax_tree())
    assert loaded["params"]["w"].sharding == shardings["params"]["w"]
    assert loaded["params"]["b"].devices() == {plax.devices()[5]}
    assert type(loaded["opt"]) is collections.OrderedDict and list(loaded["opt"]) == ["mu",
                                                                                   "count"]
    assert type(loaded["point"]) is Point and loaded["point"].y[1] is None


def test_load_pytreedef_describes_arrays_without_reading_them():
    tree = ps.load_pytreedef(JAX_PYTREE)
    assert tree["params"]["w"] == plax.ShapeDtypeStruct((6, 8), jnp.float32)
    assert tree["params"]["b"] == plax.ShapeDtypeStruct((5,), ml_dtypes.bfloat16)
    assert tree["step"] == plax.ShapeDtypeStruct((), jnp.int32)
    assert tree["skip"] is None and tree["point"].y[1] is None


def test_plax_writes_the_structure_file_jax_writes(tmp_path):
    ps.save(_jax_tree(), tmp_path / "ckpt")
    with open(os.path.join(JAX_PYTREE, "pytreedef.json")) as f:
        theirs = f.read()
    assert (tmp_path / "ckpt" / "pytreedef.json").read_text() == theirs
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["array_store", "pytreedef.json"]


@pytest.mark.parametrize("spec", [P("x", "y"), P("x"), P(None, "y")])
def test_round_trip_of_a_sharded_tree_onto_a_new_sharding(tmp_path, spec):
    tree = _jax_tree()
    ps.save(tree, tmp_path)  # (an empty directory is used as is)
    mesh = plax.make_mesh((2, 4), ("x", "y"))
    loaded = ps.load(tmp_path, {"params": {"w": NamedSharding(mesh, spec),
                                           "b": NamedSharding(mesh, P())},
                                "step": NamedSharding(mesh, P()), "skip": None,
                                "opt": NamedSharding(mesh, P()),
                                "point": SingleDeviceSharding(plax.devices()[0])})
    _equal_trees(loaded, tree)
    assert loaded["params"]["w"].sharding.spec == spec


def test_mask_leaves_parts_unread_and_shape_dtype_structs_choose_shape_and_dtype(tmp_path):
    ps.save({"a": jnp.arange(4.0), "b": jnp.ones((2, 2))}, tmp_path / "c")
    dev = SingleDeviceSharding(plax.devices()[1])
    out = ps.load(tmp_path / "c", {"a": plax.ShapeDtypeStruct((6,), jnp.int32, sharding=dev),
                                   "b": dev}, mask={"a": True, "b": False})
    assert out["b"] is None
    assert out["a"].dtype == jnp.int32 and out["a"].tolist() == [0, 1, 2, 3, 0, 0]


def test_nonblocking_save_and_load_return_futures_with_the_structure(tmp_path):
    tree = {"w": jnp.arange(6.0).reshape(2, 3), "n": None}
    saving = ps.nonblocking_save(tree, tmp_path / "c")
    assert saving.pytree == {"w": plax.ShapeDtypeStruct((2, 3), jnp.float32), "n": None}
    assert saving.result() is None and saving.done()
    loading = ps.nonblocking_load(tmp_path / "c", SingleDeviceSharding(plax.devices()[0]))
    assert loading.pytree["w"] == plax.ShapeDtypeStruct((2, 3), jnp.float32)
    out = asyncio.run(asyncio.wait_for(loading, 60))
    assert out["n"] is None and out["w"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert repr(loading).startswith("PyTreeFuture(done=True")


def test_ts_specs_override_the_default_spec(tmp_path):
    chunks_of_2 = {"name": "regular", "configuration": {"chunk_shape": [2]}}
    spec = {"driver": "zarr3",
            "metadata": {"shape": [8], "data_type": "float32", "chunk_grid": chunks_of_2}}
    ps.save({"w": jnp.arange(8.0)}, tmp_path / "c", ts_specs={"w": spec})
    store = ts_impl._ts().open(ts_impl.get_tensorstore_spec(
        tmp_path / "c" / "array_store" / "0")).result()
    assert tuple(store.chunk_layout.read_chunk.shape) == (2,)
    out = ps.load(tmp_path / "c", SingleDeviceSharding(plax.devices()[0]))
    assert out["w"].tolist() == list(range(8))


def test_overwriting_replaces_only_a_previous_checkpoint(tmp_path):
    ps.save({"a": jnp.zeros(2)}, tmp_path / "c")
    ps.save({"b": jnp.ones(3)}, tmp_path / "c")
    assert ps.load_pytreedef(tmp_path / "c") == {"b": plax.ShapeDtypeStruct((3,), jnp.float32)}
    with pytest.raises(ValueError, match="Files already exist at path"):
        ps.save({"b": jnp.ones(3)}, tmp_path / "c", overwrite=False)
    (tmp_path / "c" / "notes.txt").write_text("mine")
    with pytest.raises(RuntimeError, match="not a previous checkpoint.*notes.txt"):
        ps.save({"b": jnp.ones(3)}, tmp_path / "c")
    assert (tmp_path / "c" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("tree, error, match", [
    ({"x": 1.0}, ValueError, r"all leaves must be either None or jax.Array-like.*float"),
    ({1: jnp.zeros(1)}, TypeError, r"dictionaries with string keys. Found key 1"),
    (collections.namedtuple("Unregistered", "a")(jnp.zeros(1)), ValueError,
     r"unregistered type .*Unregistered.*register_pytree_node_serialization"),
])
def test_what_cannot_be_saved_is_named(tmp_path, tree, error, match):
    with pytest.raises(error, match=match):
        ps.save(tree, tmp_path / "c")


def test_loading_refuses_a_format_and_a_missing_directory(tmp_path):
    ps.save({"a": jnp.zeros(2)}, tmp_path / "c")
    with pytest.raises(NotImplementedError, match="Format` instead of `Sharding"):
        ps.load(tmp_path / "c", Format(None, SingleDeviceSharding(plax.devices()[0])))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ps.load(tmp_path / "missing", SingleDeviceSharding(plax.devices()[0]))


def test_structure_codec_round_trips_every_node_kind():
    tree = (None, [1, {"b": 2, "a": (3,)}], collections.OrderedDict([("z", 4), ("y", 5)]),
            Point(6, ()))
    treedef = plax.tree.structure(tree, is_leaf=lambda x: x is None)
    encoded = utils.serialize_pytreedef(treedef)
    assert encoded[utils._LEAF_IDS_KEY] == list(range(7))
    assert utils.deserialize_pytreedef(json.loads(json.dumps(encoded))) == treedef


def test_byte_limiter_bounds_reads_in_flight():
    limiter = ts_impl._LimitInFlightBytes(100)
    log = []

    async def read(name, size):
        await limiter.wait_for_bytes(size)
        log.append(("start", name, limiter._available_bytes))
        await asyncio.sleep(0.01)
        await limiter.release_bytes(size)

    async def main():
        await asyncio.gather(read("a", 60), read("b", 60), read("huge", 250))
    asyncio.run(main())
    # b waits for a; the huge read raises the budget to its size and then runs alone.
    assert log == [("start", "a", 40), ("start", "b", 190), ("start", "huge", 0)]
    assert limiter._available_bytes == limiter._max_bytes == 250


def test_run_deserialization_within_a_small_read_budget(tmp_path):
    mesh = plax.make_mesh((8,), ("a",))
    x = plax.device_put(jnp.arange(64.0), NamedSharding(mesh, P("a")))
    spec = ts_impl.get_tensorstore_spec(str(tmp_path / "x"))
    ts_impl._run_serialization([x], [spec])
    (y,) = ts_impl._run_deserialization([NamedSharding(mesh, P("a"))], [spec],
                                        concurrent_gb=1e-7)  # (100 bytes: reads take turns)
    assert np.array_equal(np.asarray(y), np.arange(64.0))
    shutil.rmtree(tmp_path / "x", ignore_errors=True)
