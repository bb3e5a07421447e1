"""Explicit sharding as JAX's tutorial writes it, up to a training loop under set_mesh, and
shardings named by an AbstractMesh resolved to the concrete mesh in effect when dispatched.
Values are checked against the same computation on unsharded arrays or NumPy."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core.sharding_types import ShardingTypeError
from plax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P, reshard

pytestmark = pytest.mark.needs_devices(8)


@pytest.fixture
def mesh():
    m = plax.make_mesh((2, 4), ("X", "Y"))
    with plax.set_mesh(m):
        yield m


def typ(x) -> str:
    return str(plax.typeof(x))


# --- the tutorial's examples ---------------------------------------------------------------------
def test_broadcasting_operands_combine_their_splits_under_jit(mesh):
    seen = {}

    @plax.jit
    def add_arrays(x, y):
        ans = x + y
        seen.update(x=typ(x), y=typ(y), ans=typ(ans))
        return ans

    a = plax.device_put(np.arange(4).reshape(4, 1), P("X", None))
    b = plax.device_put(np.arange(8).reshape(1, 8), P(None, "Y"))
    out = add_arrays(a, b)
    assert seen == {"x": "int32[4@X,1]", "y": "int32[1,8@Y]", "ans": "int32[4@X,8@Y]"}
    assert typ(out) == "int32[4@X,8@Y]" and out.sharding.spec == P("X", "Y")
    np.testing.assert_array_equal(np.asarray(out), np.arange(4)[:, None] + np.arange(8))


def test_ambiguous_shardings_raise_until_resolved(mesh):
    x = reshard(np.arange(16.0).reshape(4, 4), P("X", None))
    y = reshard(np.arange(16.0).reshape(4, 4), P(None, "X"))
    with pytest.raises(ShardingTypeError, match="produces an illegally sharded result"):
        x + y
    z = x + reshard(y, P("X", None))
    assert typ(z) == "float32[4@X,4]"
    np.testing.assert_array_equal(np.asarray(z), 2 * np.arange(16.0).reshape(4, 4))


@pytest.mark.parametrize("fn,spec,want", [
    (lambda a, b: jnp.dot(a, b, out_sharding=P("X", None)), ("X", None), "float32[8@X,8]"),
    (lambda a, b: jnp.matmul(a, b, out_sharding=P("X", "Y")), ("X", "Y"), "float32[8@X,8@Y]"),
    (lambda a, b: jnp.einsum("ij,jk->ik", a, b, out_sharding=P(None, "Y")), (None, "Y"),
     "float32[8,8@Y]"),
])
def test_out_sharding_resolves_a_contraction_over_split_dimensions(mesh, fn, spec, want):
    av = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    bv = np.arange(32.0, dtype=np.float32).reshape(4, 8) / 7
    a, b = plax.device_put(av, P("X", "Y")), plax.device_put(bv, P("Y", None))
    with pytest.raises(ShardingTypeError, match="Contracting dimensions are sharded"):
        jnp.dot(a, b)
    for out in (fn(a, b), plax.jit(fn)(a, b)):
        assert typ(out) == want and out.sharding.spec == P(*spec)
        np.testing.assert_allclose(np.asarray(out), av @ bv, rtol=1e-6)


def test_random_and_reshape_take_out_sharding(mesh):
    r = plax.random.normal(plax.random.key(0), (8, 4), out_sharding=P("X", "Y"))
    assert typ(r) == "float32[8@X,4@Y]"
    np.testing.assert_array_equal(np.asarray(r),
                                  np.asarray(plax.random.normal(plax.random.key(0), (8, 4))))
    v = plax.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), P("X", "Y"))
    s = jnp.reshape(v, (2, 4, 4), out_sharding=P("X", None, "Y"))
    assert typ(s) == "float32[2@X,4,4@Y]"
    np.testing.assert_array_equal(np.asarray(s), np.arange(32.0).reshape(2, 4, 4))


def test_reshard_names_explicit_axes_only():
    auto = plax.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)
    v = plax.device_put(np.arange(8.0), NamedSharding(auto, P()))
    with pytest.raises(ValueError, match="PartitionSpec passed to reshard cannot contain axis "
                       "names that are of type Auto or Manual"):
        reshard(v, NamedSharding(auto, P("X")))
    with plax.set_mesh(auto), pytest.raises(ValueError, match="of type Auto or Manual"):
        plax.jit(lambda a: reshard(a, P("Y")))(v)


# --- a training loop under set_mesh ------------------------------------------------------------
def _init(sizes):
    rng = np.random.default_rng(0)
    return [(rng.normal(size=(m, n)).astype(np.float32) / np.sqrt(m),
             rng.normal(size=(n,)).astype(np.float32) * 0.1)
            for m, n in zip(sizes[:-1], sizes[1:])]


def _loss(params, batch, contracted=None):
    (w1, b1), (w2, b2), (w3, b3) = params
    inputs, targets = batch
    h = plax.nn.relu(jnp.dot(inputs, w1) + b1)
    h = plax.nn.relu(jnp.dot(h, w2, out_sharding=contracted) + b2)
    return jnp.mean(jnp.sum((jnp.dot(h, w3) + b3 - targets) ** 2, axis=-1))


def _train(params, batch, contracted, steps=3):
    @plax.jit
    def update(params, batch):
        value, grads = plax.value_and_grad(_loss)(params, batch, contracted)
        return [(w - 0.05 * dw, b - 0.05 * db) for (w, b), (dw, db) in zip(params, grads)], value
    values = []
    for _ in range(steps):
        params, value = update(params, batch)
        values.append(float(value))
    return params, values


def test_training_loop_with_explicitly_sharded_parameters():
    host = _init([16, 32, 16, 4])
    rng = np.random.default_rng(1)
    batch_host = (rng.normal(size=(32, 16)).astype(np.float32),
                  rng.normal(size=(32, 4)).astype(np.float32))
    _, want = _train(host, batch_host, None)
    mesh = plax.make_mesh((4, 2), ("batch", "model"))
    specs = [(P(None, "model"), P("model")), (P("model", None), P()), (P(), P())]
    with plax.set_mesh(mesh):
        params = [(plax.device_put(w, sw), plax.device_put(b, sb))
                  for (w, b), (sw, sb) in zip(host, specs)]
        batch = plax.device_put(batch_host, P("batch", None))
        trained, got = _train(params, batch, P("batch", None))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert got[-1] < got[0]
    assert [typ(w) for w, _ in trained] == ["float32[16,32@model]", "float32[32@model,16]",
                                            "float32[16,4]"]
    assert trained[0][0].sharding.spec == P(None, "model") and typ(trained[0][1]) == \
        "float32[32@model]"


# --- shardings over an AbstractMesh: the concrete mesh in effect ------------------------------
def test_abstract_shardings_resolve_to_the_mesh_in_effect(mesh):
    w = plax.device_put(np.arange(32.0, dtype=np.float32).reshape(4, 8), P(None, "Y"))
    typed = plax.typeof(w).sharding
    assert isinstance(typed.mesh, plax.sharding.AbstractMesh)
    out = plax.jit(lambda v: v * 2, out_shardings=typed)(w)
    assert typ(out) == "float32[4,8@Y]" and out.sharding.mesh == mesh
    np.testing.assert_array_equal(np.asarray(out), 2 * np.arange(32.0).reshape(4, 8))
    moved = reshard(w, typed.update(spec=P("X", None)))
    assert typ(moved) == "float32[4@X,8]"
    with pytest.raises(ValueError, match="is_fully_addressable is not implemented"):
        plax.device_put(np.ones((4, 8), np.float32), typed)
    pinned = plax.jit(lambda v: plax.device_put(v * 1, typed.update(spec=P("X", None))))(w)
    assert typ(pinned) == "float32[4@X,8]"


@pytest.mark.parametrize("kind", [AxisType.Auto, AxisType.Explicit])
def test_abstract_mesh_computations_run_on_the_arguments_devices(kind):
    devices = plax.devices()
    second = Mesh(np.array(devices[4:8]), ("x",), axis_types=(kind,))
    abstract = Mesh(np.array(devices[:4]), ("x",), axis_types=(kind,)).abstract_mesh
    v = plax.device_put(np.arange(8.0, dtype=np.float32), NamedSharding(second, P("x")))
    f = plax.shard_map(lambda b: lax.psum(b, "x"), mesh=abstract, in_specs=P("x"),
                       out_specs=P())
    g = plax.jit(lambda a: a * 3, out_shardings=NamedSharding(abstract, P("x")))
    for out, want in ((f(v), np.arange(8.0).reshape(4, 2).sum(0)),
                      (plax.jit(f)(v), np.arange(8.0).reshape(4, 2).sum(0)),
                      (g(v), 3 * np.arange(8.0))):
        assert {d.id for d in out.sharding.device_set} == {4, 5, 6, 7}
        np.testing.assert_allclose(np.asarray(out), want)


def test_eager_shard_map_splits_committed_arguments_as_its_specs_say():
    m = Mesh(np.array(plax.devices()[:4]), ("x",))
    v = plax.device_put(np.arange(8.0, dtype=np.float32), NamedSharding(m, P()))
    out = plax.shard_map(lambda b: b * lax.axis_index("x"), mesh=m, in_specs=P("x"),
                         out_specs=P("x"))(v)
    np.testing.assert_array_equal(np.asarray(out), np.arange(8.0) * np.repeat(np.arange(4), 2))


@pytest.mark.parametrize("make,value", [(jnp.zeros_like, 0.0), (jnp.ones_like, 1.0)])
def test_like_functions_lay_out_as_a_sharded_prototype_without_a_context_mesh(make, value):
    mesh = plax.make_mesh((2, 4), ("X", "Y"))
    w = plax.device_put(np.ones((8, 16), np.float32), NamedSharding(mesh, P(None, "Y")))
    out = make(w)
    assert typ(out) == "float32[8,16@Y]" and out.sharding == w.sharding
    np.testing.assert_array_equal(np.asarray(out), np.full((8, 16), value, np.float32))
