"""plax.experimental's smaller modules: shard_alike, compute_on, control_deps, xla_metadata,
key_reuse, mesh_utils' hybrid meshes (values checked against NumPy and closed forms, the
lowered text against what JAX 0.10.2 writes)."""
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import compute_on as compute_on_module
from plax.experimental import control_deps, key_reuse, mesh_utils
from plax.experimental.compute_on import compute_on
from plax.experimental.shard_alike import shard_alike
from plax.experimental.xla_metadata import set_xla_metadata
from plax.sharding import AxisType, NamedSharding, PartitionSpec as P

F32 = np.float32


def _attrs_of(text: str, op: str) -> list:
    """The frontend attributes of each ``op`` in the module text (a dict per op)."""
    out = []
    for line in text.splitlines():
        if f'"{op}"' in line:
            m = re.search(r"mhlo\.frontend_attributes = \{([^}]*)\}", line)
            out.append(dict(re.findall(r'(\w+) = "([^"]*)"', m.group(1))) if m else {})
    return out


# --- shard_alike -------------------------------------------------------------------------
@pytest.mark.needs_devices(8)
def test_shard_alike_gives_the_second_output_the_first_ones_sharding():
    mesh = plax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    xs = np.arange(16, dtype=F32).reshape(8, 2)
    x = plax.device_put(xs, NamedSharding(mesh, P("x", "y")))
    y = np.ones((8, 2), F32)

    def f(x, y):
        return shard_alike(x * 2, y + 1)

    text = plax.jit(f).lower(x, y).as_text()
    assert text.count('"sdy.sharding_group"') == 2
    assert len(set(re.findall(r"group_id = (\d+) : i64", text))) == 1
    a, b = plax.jit(f)(x, y)
    assert a.sharding.spec == P("x", "y") and b.sharding == a.sharding
    np.testing.assert_array_equal(np.asarray(a), xs * 2)
    np.testing.assert_array_equal(np.asarray(b), np.full((8, 2), 2, F32))
    # Eagerly (a one-equation program) the same holds.
    _, b_eager = shard_alike(x, y)
    assert b_eager.sharding == x.sharding


def test_shard_alike_under_grad_and_vmap():
    x = np.arange(6, dtype=F32).reshape(3, 2)
    g = plax.grad(lambda x, y: sum(jnp.sum(t) for t in shard_alike(x * x, y)))(x, 2 * x)
    np.testing.assert_allclose(g, 2 * x)
    a, b = plax.vmap(shard_alike, in_axes=(0, 1))(x, x.T)
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, x)
    assert str(plax.make_jaxpr(shard_alike)(x, x)).count("shard_alike") == 1


@pytest.mark.parametrize("x, y, message", [
    (np.ones(3, F32), np.ones(4, F32), r"leaves shapes of `x` and `y` should match.*\(3,\).*\(4,\)"),
    ((np.ones(3, F32),), np.ones(3, F32), "Trees should be equal"),
])
def test_shard_alike_refuses_unlike_values(x, y, message):
    with pytest.raises(ValueError, match=message):
        shard_alike(x, y)


# --- set_xla_metadata --------------------------------------------------------------------
def test_xla_metadata_block_tags_the_ops_staged_inside():
    def f(x):
        with set_xla_metadata(a="b", n=3, flag=True):
            y = jnp.sin(x)
            with set_xla_metadata(n=4):
                y = y * 2
        return y + 1

    text = plax.jit(f).lower(np.ones(3, F32)).as_text()
    assert _attrs_of(text, "stablehlo.sine") == [{"a": "b", "flag": "true", "n": "3"}]
    assert _attrs_of(text, "stablehlo.multiply") == [{"a": "b", "flag": "true", "n": "4"}]
    assert _attrs_of(text, "stablehlo.add") == [{}]
    np.testing.assert_allclose(plax.jit(f)(np.ones(3, F32)), 2 * np.sin(1) + 1, rtol=1e-6)


def test_xla_metadata_on_values_tags_their_producers_and_passes_gradients():
    def f(x):
        z = set_xla_metadata(jnp.cos(x) + 1, tag="t")
        return jnp.sum(z * z)

    text = plax.jit(f).lower(np.ones(3, F32)).as_text()
    assert _attrs_of(text, "stablehlo.add")[0] == {"tag": "t"}
    assert _attrs_of(text, "stablehlo.cosine") == [{}]
    assert "xla_metadata_value" in str(plax.make_jaxpr(f)(np.ones(3, F32)))
    x = np.array([0.1, 0.5, 2.0], F32)
    np.testing.assert_allclose(plax.grad(f)(x), -2 * (np.cos(x) + 1) * np.sin(x), rtol=1e-5)
    np.testing.assert_array_equal(plax.vmap(lambda v: set_xla_metadata(v * 2, p=1))(
        np.ones((2, 3), F32)), np.full((2, 3), 2, F32))


def test_xla_metadata_decorator_and_jit_retrace():
    @set_xla_metadata(k="v")
    @plax.jit
    def g(x):
        return x * 2

    assert _attrs_of(g.lower(np.ones(2, F32)).as_text(), "stablehlo.multiply") == [{"k": "v"}]
    outer = plax.jit(lambda x: g(x)).lower(np.ones(2, F32)).as_text()
    assert _attrs_of(outer, "func.call") == [{"k": "v"}]
    h = plax.jit(lambda x: x + 1)
    assert float(h(1.0)) == 2.0  # traced outside the block first
    with set_xla_metadata(zz=1):
        assert _attrs_of(h.lower(1.0).as_text(), "stablehlo.add") == [{"zz": "1"}]
        assert float(h(1.0)) == 2.0
    assert _attrs_of(h.lower(1.0).as_text(), "stablehlo.add") == [{}]


# --- compute_on --------------------------------------------------------------------------
def test_compute_on_marks_ops_and_calls_innermost_block_winning():
    @compute_on("device_host")
    @plax.jit
    def on_host(x):
        return x * 2

    def f(x):
        with compute_on("device_host"):
            with compute_on("device"):
                y = x * 3
        with compute_on("gpu_stream:2"):
            z = y + 1
        return on_host(z)

    text = plax.jit(f).lower(np.ones(3, F32)).as_text()
    # (one multiply in @main, one in the called private function: any order)
    assert sorted(a["_xla_compute_type"] for a in _attrs_of(text, "stablehlo.multiply")) == \
        ["dense", "host"]
    assert _attrs_of(text, "stablehlo.add") == [{"_xla_stream_annotation": "2",
                                                 "inlineable": "false"}]
    assert _attrs_of(text, "func.call") == [{"_xla_compute_type": "host"}]
    np.testing.assert_array_equal(plax.jit(f)(np.ones(3, F32)), np.full(3, 8, F32))


@pytest.mark.parametrize("compute_type, error, message", [
    ("bad", ValueError, "Invalid compute type bad"),
    (3, TypeError, "compute_type argument must be a string"),
])
def test_compute_on_refuses_unknown_types(compute_type, error, message):
    with pytest.raises(error, match=message):
        with compute_on(compute_type):
            pass


def test_compute_on2_marks_the_ops_and_keeps_results_in_device_memory():
    space = plax.memory.Space

    @compute_on_module.compute_on2(compute_type="device_host", out_memory_spaces=space.Device)
    def g(x):
        return x * 2, x + 1

    text = plax.jit(g).lower(np.ones(3, F32)).as_text()
    assert _attrs_of(text, "stablehlo.multiply") == [{"_xla_compute_type": "host"}]
    a, b = plax.jit(g)(np.ones(3, F32))
    np.testing.assert_array_equal(a, np.full(3, 2, F32))
    np.testing.assert_array_equal(b, np.full(3, 2, F32))
    # composes with grad: d/dx sum(2x) = 2
    np.testing.assert_array_equal(plax.grad(lambda x: g(x)[0].sum())(np.ones(3, F32)),
                                  np.full(3, 2, F32))


@pytest.mark.parametrize("spaces, error, message", [
    ((plax.memory.Space.Device,), ValueError, "compute_on out_memory_spaces"),
    (plax.memory.Space.Host, NotImplementedError, "device memory only"),
])
def test_compute_on2_checks_its_memory_spaces(spaces, error, message):
    f = compute_on_module.compute_on2(lambda x: x * 2, compute_type="device",
                                      out_memory_spaces=spaces)
    with pytest.raises(error, match=message):
        f(np.ones(3, F32))


# --- control_deps ------------------------------------------------------------------------
def test_control_deps_schedule_lowers_to_control_dep_calls_and_runs():
    def f(x):
        a, b = jnp.sin(x), x * 2
        control_deps.schedule([a, b, a + b])
        return jnp.sum(a + b)

    text = plax.jit(f).lower(np.ones(3, F32)).as_text()
    assert text.count("stablehlo.custom_call @control_dep(") == 2
    assert text.count("has_side_effect = true") == 2
    x = np.array([0.0, 1.0, 2.0], F32)
    np.testing.assert_allclose(plax.jit(f)(x), np.sum(np.sin(x) + 2 * x), rtol=1e-6)
    np.testing.assert_allclose(f(x), np.sum(np.sin(x) + 2 * x), rtol=1e-6)
    with pytest.raises(ValueError, match="FFI call to `control_dep` cannot be differentiated"):
        plax.grad(f)(x)


# --- key_reuse, mesh_utils ---------------------------------------------------------------
def test_key_reuse_module_has_no_public_names():
    assert [n for n in dir(key_reuse) if not n.startswith("_")] == []


@pytest.mark.needs_devices(8)
def test_hybrid_device_mesh_by_process_and_by_slice():
    devices = plax.devices()
    mesh = mesh_utils.create_hybrid_device_mesh([4, 2], [1, 1], process_is_granule=True)
    assert mesh.shape == (4, 2) and list(mesh.flat) == devices

    class Slice:  # devices of two slices, as a multi-slice system reports them
        def __init__(self, device, index):
            self.device, self.slice_index, self.device_kind = device, index, "fake"

    fake = [Slice(d, i // 4) for i, d in enumerate(devices)]
    hybrid = mesh_utils.create_hybrid_device_mesh([2, 2], [1, 2], fake)
    assert hybrid.shape == (2, 4)
    assert [[s.slice_index for s in row] for row in hybrid] == [[0, 0, 1, 1], [0, 0, 1, 1]]
    with pytest.raises(ValueError, match="Number of slices 2 must equal the product of "
                                         r"dcn_mesh_shape \[2, 2\]"):
        mesh_utils.create_hybrid_device_mesh([2, 1], [2, 2], fake)
    with pytest.raises(ValueError, match="does not have attribute slice_index"):
        mesh_utils.create_hybrid_device_mesh([4, 2], [1, 1])


def test_device_kind_handler_is_used_for_its_kind():
    devices = plax.devices()[:2]
    kind = devices[0].device_kind
    calls = []

    def reversed_order(shape, devs, **options):
        calls.append(options)
        return np.array(devs[::-1], dtype=object).reshape(shape)

    mesh_utils.device_kind_handler_dict[kind] = reversed_order
    try:
        assert list(mesh_utils.create_device_mesh([2], devices)) == devices[::-1]
    finally:
        del mesh_utils.device_kind_handler_dict[kind]
    assert calls and list(mesh_utils.create_device_mesh([2], devices)) == devices


# --- layout.with_layout_constraint -------------------------------------------------------
def test_layout_constraint_lowers_to_xlas_custom_call_and_keeps_values():
    from plax.experimental.layout import Layout, with_layout_constraint

    def f(x):
        return with_layout_constraint(x * 2, Layout((1, 0)))

    x = np.arange(6, dtype=F32).reshape(2, 3)
    text = plax.jit(f).lower(x).as_text()
    assert "stablehlo.custom_call @LayoutConstraint(" in text
    assert "result_layouts = [dense<[0, 1]> : tensor<2xindex>]" in text
    np.testing.assert_array_equal(plax.jit(f)(x), 2 * x)
    np.testing.assert_array_equal(f(x), 2 * x)
    np.testing.assert_array_equal(plax.grad(lambda x: jnp.sum(f(x) ** 2))(x), 8 * x)
    # vmap puts the batch dimension into the layout, most major.
    batched = plax.jit(plax.vmap(f, in_axes=1)).lower(np.ones((2, 4, 3), F32)).as_text()
    assert "result_layouts = [dense<[1, 0, 2]> : tensor<3xindex>]" in batched
    np.testing.assert_array_equal(plax.vmap(f, in_axes=1)(np.ones((2, 4, 3), F32)),
                                  np.full((4, 2, 3), 2, F32))


def test_layout_constraint_refuses_a_layout_of_another_rank_or_type():
    from plax.experimental.layout import Layout, with_layout_constraint
    with pytest.raises(ValueError, match="does not fit a value of rank 1"):
        with_layout_constraint(np.ones(3, F32), Layout((1, 0)))
    with pytest.raises(ValueError, match="must be of type `Layout`"):
        with_layout_constraint(np.ones(3, F32), "row-major")


# --- experimental.random: the stateful generator -----------------------------------------
def test_stateful_rng_draws_fold_the_counter_into_the_key():
    from plax.experimental import random as xrandom
    rng = xrandom.stateful_rng(42)
    base = plax.random.key(42)
    draws = [float(rng.uniform()) for _ in range(2)]
    want = [float(plax.random.uniform(plax.random.fold_in(base, i))) for i in range(2)]
    assert draws == want
    jitted = plax.jit(rng.uniform)
    assert [float(jitted()), float(jitted())] == [
        float(plax.random.uniform(plax.random.fold_in(base, i))) for i in (2, 3)]
    assert int(rng._counter[...]) == 4
    ints = rng.integers(0, 10, 4)
    assert ints.shape == (4,) and ints.dtype == np.int32 and np.all((0 <= ints) & (ints < 10))
    np.testing.assert_array_equal(ints, plax.random.randint(
        plax.random.fold_in(base, 4), (4,), 0, 10))
    assert rng.normal(size=3).shape == (3,) and rng.random(2).dtype == np.float32
    assert rng.key((2,)).shape == (2,)


def test_stateful_rng_inside_jit_spawn_and_split():
    from plax.experimental import random as xrandom

    def two_draws(seed):
        r = xrandom.stateful_rng(seed)
        return r.uniform() + r.uniform()

    key = plax.random.key(3)
    want = sum(float(plax.random.uniform(plax.random.fold_in(key, i))) for i in (0, 1))
    assert float(plax.jit(two_draws)(3)) == pytest.approx(want, rel=1e-6)
    children = xrandom.stateful_rng(123).spawn(2)
    keys = plax.random.split(plax.random.fold_in(plax.random.key(123), 0), 2)
    for child, k in zip(children, keys):
        np.testing.assert_array_equal(plax.random.key_data(child._base_key),
                                      plax.random.key_data(k))
        assert int(child._counter[...]) == 0
    split = xrandom.stateful_rng(123).split(3)
    assert split._base_key.shape == (3,) and split._counter[...].shape == (3,)
    with pytest.raises(ValueError, match="cannot operate on split stateful generator"):
        split.key()
    with pytest.raises(TypeError, match="requires an explicit seed"):
        plax.jit(lambda: xrandom.stateful_rng().uniform())()
    with pytest.raises(ValueError, match="Expected base_key to be a typed PRNG key"):
        xrandom.StatefulPRNG(np.zeros(2, np.uint32), plax.new_ref(0))
