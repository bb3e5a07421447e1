"""The private ``jax._src`` faces JAX's own test files import (``plax._src``): every module
imports, each name plax refuses raises an AttributeError naming it, and the adapters act on
plax's machinery (checked in this process, the modules being the ones ``jax._src`` gives)."""
import importlib
import os
import pkgutil
import subprocess
import sys

import numpy as np
import pytest

import plax
import plax._src
import plax.numpy as jnp

FACES = sorted(m.name for m in pkgutil.walk_packages(plax._src.__path__, "plax._src."))


def test_every_face_imports_and_is_reached_by_its_package():
    assert len(FACES) > 80
    for name in FACES:
        module = importlib.import_module(name)
        package, _, leaf = name.rpartition(".")
        if not leaf.startswith("_"):
            assert getattr(importlib.import_module(package), leaf) is module, name


def _refusals():
    for name in FACES:
        refused = getattr(importlib.import_module(name), "_REFUSED", {})
        for attr in sorted(refused):
            yield name, attr


@pytest.mark.parametrize("module_name, attr", list(_refusals()))
def test_a_refused_name_raises_attribute_error_naming_it(module_name, attr):
    module = importlib.import_module(module_name)
    jax_name = "jax" + module_name[len("plax"):]
    with pytest.raises(AttributeError, match=rf"{jax_name}\.{attr} is not provided by plax: "):
        getattr(module, attr)
    assert attr in module.__doc__  # listed with its reason


def test_an_unknown_name_is_a_plain_attribute_error():
    from plax._src import core
    with pytest.raises(AttributeError, match="'jax._src.core' has no attribute 'no_such'"):
        core.no_such  # noqa: B018


def test_util_helpers_and_caches():
    from plax._src import util
    assert util.safe_map(lambda a, b: a + b, [1, 2], (3, 4)) == [4, 6]
    with pytest.raises(ValueError, match="length"):
        util.safe_zip([1], [1, 2])
    assert util.split_list(range(5), [1, 2]) == [[0], [1, 2], [3, 4]]
    assert util.curry(lambda a, b, c: a * b + c)(2)(3, 4) == 10
    assert util.tuple_insert((1, 2), 1, 9) == (1, 9, 2)
    assert util.merge_lists([True, False], *util.partition_list([True, False], "ab")) == ["a", "b"]
    calls = []
    cached = util.cache()(lambda x: calls.append(x) or x * 2)
    assert cached(3) == cached(3) == 6 and calls == [3]
    util.clear_all_caches()
    assert cached(3) == 6 and calls == [3, 3]


def test_dtypes_and_core_adapters():
    from plax._src import core, dtypes
    assert dtypes.lattice_result_type(int, float) == (np.dtype(np.float32), True)
    assert dtypes.safe_to_cast("int16", "float32") and not dtypes.safe_to_cast("float32", "int16")
    assert dtypes._jax_type(np.dtype(np.float16), True) is float
    assert core.definitely_equal(3, 3) and core.stride_dim(10, 3, 2) == 4
    assert core.call(plax.extend.linear_util.wrap_init(
        lambda x: [x + 1], debug_info=plax.api_util.debug_info("f", len, (1,), {})), 1.0) == [2.0]


@pytest.mark.parametrize("dtype, shape, axes", [
    (np.float32, (3, 3), (0, 1)), (np.int32, (2, 4, 2), (0, 2)), (np.float32, (3, 1), (0, 1)),
    (np.bool_, (2, 3), (1,)), (np.float32, (2, 2, 2), (0, 1, 2)),
])
def test_lax_delta_is_the_kronecker_delta_over_axes(dtype, shape, axes):
    from plax._src.lax import lax as lax_internal
    want = np.zeros(shape, dtype)
    for idx in np.ndindex(*shape):
        want[idx] = len({idx[a] for a in axes}) == 1
    got = lax_internal._delta(dtype, shape, axes)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_lax_random_and_sharding_adapters():
    from plax._src import effects, sharding_impls
    from plax._src.lax import windowed_reductions as wr
    from plax._src.numpy import indexing
    from plax._src.random import core as random_core, prng, threefry2x32 as fry
    x = jnp.arange(16.0).reshape(4, 4)
    no_pad = ((0, 0), (0, 0))
    picked = wr._select_and_gather_add(x, x, plax.lax.ge_p, (2, 2), (2, 2), no_pad, (1, 1),
                                       (1, 1))
    np.testing.assert_array_equal(picked, [[5, 7], [13, 15]])
    impl = prng.PRNGImpl(key_shape=(2,), seed=fry.threefry_seed, split=fry.threefry_split,
                         random_bits=fry.threefry_random_bits, fold_in=fry.threefry_fold_in,
                         tag="mine")
    assert str(prng.random_seed(np.uint32(0), impl).dtype) == "key<mine>"
    # its functions take one key's data: arrays of keys map them (a (2, 2) key of two
    # threefry keys whose split maps threefry's over its rows, as JAX's tests write one)
    pair = prng.PRNGImpl(
        key_shape=(2, 2), seed=lambda s: jnp.vstack([fry.threefry_seed(s)] * 2),
        split=lambda k, shape: plax.vmap(fry.threefry_split, (0, None), len(shape))(k, shape),
        random_bits=lambda k, width, shape: fry.threefry_random_bits(k[0], width, shape),
        fold_in=lambda k, d: jnp.vstack([fry.threefry_fold_in(k[0], d)] * 2), tag="pair")
    keys = plax.random.split(prng.random_seed(73, pair), 3)
    split_each = plax.vmap(plax.random.split)(keys)
    assert split_each.shape == (3, 2)
    for i in range(3):
        np.testing.assert_array_equal(plax.random.key_data(split_each[i]),
                                      plax.random.key_data(plax.random.split(keys[i])))
    folded = plax.vmap(plax.vmap(plax.random.fold_in), in_axes=(1, 0))(
        plax.random.split(keys[0], 6).reshape((2, 3)), np.arange(6).reshape(3, 2))
    assert folded.shape == (3, 2)
    with pytest.raises(RuntimeError, match="u32 -> f32"):
        random_core._safe_int_to_float(np.zeros(2, np.int32), np.float32)
    np.testing.assert_array_equal(
        indexing.rewriting_take(x, 0, strategy=indexing.IndexingStrategy.GATHER), x[0])
    mesh = plax.sharding.Mesh(np.array(plax.devices()), ("d",))
    named = sharding_impls.NamedSharding(mesh, sharding_impls.PartitionSpec("d"))
    assert sharding_impls.local_to_global_shape(named, (len(plax.devices()), 3)) \
        == (len(plax.devices()), 3)

    class Ordered(effects.Effect):
        pass
    effects.ordered_effects.add_type(Ordered)
    assert Ordered().ordered and effects.ordered_effects.contains(Ordered())


def test_the_faces_are_jax_src_under_python_m_plax(tmp_path):
    code = ("from jax._src import config, core, dtypes\nfrom jax._src.lib.mlir import ir\n"
            "from jax._src.random import prng\nimport jax.numpy as jnp\n"
            "with config.enable_x64(True):\n    print(jnp.arange(2.0).dtype)\n"
            "print(core.ShapedArray is jax.core.ShapedArray, dtypes.float0 is jax.dtypes.float0,"
            " 'threefry2x32' in prng.prngs)\n"
            "from jax._src.sharding_impls import GSPMDSharding\n"
            "print(GSPMDSharding.get_replicated(jax.devices()).memory_kind)\n"
            # (Keras's flash-attention check: the import alone picks splash on a TPU)
            "from jax._src.cudnn.fused_attention_stablehlo import _normalize_layout, "
            "check_compute_capability, check_cudnn_version, check_is_flash_attention, "
            "check_layout\nprint(check_compute_capability('8.0'))\n")
    src = os.path.dirname(os.path.dirname(plax.__file__))
    env = dict(os.environ, PLAX_NUM_CPU_DEVICES="1",
               PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "plax", "-c", "import jax\n" + code],
                         capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["float64", "True", "True", "True", "device", "False"]


def test_dispatch_runtime_tokens_clear_waits_and_ordered_effects_go_on():
    from plax._src import dispatch
    from plax.experimental import io_callback
    seen = []

    def f(x):
        io_callback(lambda v: seen.append(int(v)), None, x, ordered=True)
        return x + 1
    plax.jit(f)(1)
    dispatch.runtime_tokens.clear()  # JAX's tests call it in tearDown
    assert seen == [1]
    assert dispatch.runtime_tokens.current_tokens == {}
    plax.jit(f)(2)
    (effect, first), = dispatch.runtime_tokens.current_tokens.items()
    assert effect.ordered
    plax.jit(f)(3)
    dispatch.runtime_tokens.block_until_ready()
    assert seen == [1, 2, 3]
    # Each run having the effect leaves a new token for it.
    assert dispatch.runtime_tokens.current_tokens[effect] is not first


@pytest.mark.parametrize("value,dtype,weak", [
    (1, np.int32, True), (2.5, np.float32, True), (np.float32(3), np.float32, False),
    (np.arange(6, dtype=np.int16).reshape(2, 3), np.int16, False)])
def test_batched_device_put_builds_the_array_from_pieces(value, dtype, weak):
    from plax._src.interpreters import pxla
    from plax.core.avals import ShapedArray
    from plax.sharding import SingleDeviceSharding
    device = plax.devices()[1]
    aval = ShapedArray(np.shape(value), np.dtype(dtype), weak)
    for piece in (value, jnp.asarray(value)):  # host data, or an array copied across
        out = pxla.batched_device_put(aval, SingleDeviceSharding(device), [piece], [device])
        np.testing.assert_array_equal(np.asarray(out), np.asarray(value, dtype))
        assert out.dtype == dtype and out.sharding.device_set == {device}
    out = pxla.batched_device_put(aval, SingleDeviceSharding(device), [value], [device])
    assert out.aval.weak_type == weak
    with pytest.raises(ValueError, match="one piece per device"):
        pxla.batched_device_put(aval, SingleDeviceSharding(device), [value, value], [device])


def test_tpu_svd_face_is_one_compiled_program():
    """jax._src.tpu.linalg.svd.svd is jitted with static options, as JAX's: values as NumPy's,
    and a repeated eager call compiles nothing."""
    from plax._src.test_util_parts.events import count_primitive_compile_misses
    from plax._src.tpu.linalg import svd
    a = np.random.RandomState(0).randn(5, 3).astype(np.float32)
    u, s, vh = svd.svd(a, True, True)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-5)
    np.testing.assert_allclose((u[:, :3] * s) @ vh, a, atol=1e-5)
    with count_primitive_compile_misses() as compiles:
        svd.svd(a, True, True)
    assert compiles() == 0


def test_spec_and_index_map_adapters():
    from plax._src import core
    from plax._src.sharding import common_devices_indices_map
    from plax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec as P
    E, A, M = AxisType.Explicit, AxisType.Auto, AxisType.Manual
    mesh = AbstractMesh((2, 2, 2, 2), ("a", "b", "c", "d"), axis_types=(E, E, M, A))
    assert core.modify_spec_for_auto_manual(P(("a", "c"), "b"), mesh) == P("a", "b")
    assert core.modify_spec_for_auto_manual(P("c", "d", unreduced={"a"}), mesh) == \
        P(None, None, unreduced={"a"})
    assert core.modify_spec_for_auto_manual(
        P(unreduced={"a", "c"}, reduced={"b", "d"}), mesh) == P(unreduced={"a"}, reduced={"b"})
    one = plax.sharding.Mesh(np.array(plax.devices()[:1]), ("x",))
    s = NamedSharding(one, P())
    s.devices_indices_map((8,))
    plax.clear_caches()
    assert common_devices_indices_map.cache_info().currsize == 0
    assert s.devices_indices_map((8,)) == {plax.devices()[0]: (slice(None),)}
    assert common_devices_indices_map.cache_info().currsize == 1
