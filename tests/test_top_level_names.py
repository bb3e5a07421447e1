"""Issue 33's small public names, checked against what JAX 0.10.2 gives: fwd_and_bwd and
jax.ad (vjp's with_refs), smap, reshard, memory.Space, sharding.AbstractDevice /
make_single_device_sharding, stages.ArgInfo / Wrapped, tree.static, tree_util.default_registry,
ad_checkpoint's policy values, and multihost_utils' single-process names."""
import dataclasses

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import ad_checkpoint, stages, tree_util
from plax.experimental import multihost_utils as mh
from plax.sharding import AxisType, NamedSharding, PartitionSpec as P
from plax.test_util import check_grads
from plax.transforms.residuals import saved_residuals

N = plax.device_count()


def _f(x, w):
    return jnp.sin(x @ w)


X = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
W = np.linspace(0.5, 1.5, 6, dtype=np.float32).reshape(3, 2)
CT = np.ones((2, 2), np.float32)


def _closed_form_cts():
    """d/dx and d/dw of sum(ct * sin(x @ w)), in float64."""
    c = np.cos(X.astype(np.float64) @ W) * CT
    return c @ W.T, X.T.astype(np.float64) @ c


# --- fwd_and_bwd -------------------------------------------------------------------------------
@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0)])
@pytest.mark.parametrize("jitted", [True, False])
def test_fwd_and_bwd_matches_closed_form(argnums, jitted):
    fwd, bwd = plax.fwd_and_bwd(_f, argnums=argnums, jitted=jitted)
    y, res = fwd(X, W)
    np.testing.assert_allclose(y, np.sin(X @ W), rtol=1e-6)
    got = bwd(res, CT)
    want = _closed_form_cts()
    if isinstance(argnums, int):
        np.testing.assert_allclose(got, want[argnums], rtol=1e-5)
    else:
        assert isinstance(got, tuple) and len(got) == len(argnums)
        for g, i in zip(got, argnums):
            np.testing.assert_allclose(g, want[i], rtol=1e-5)


def test_fwd_and_bwd_compiles_the_backward_once():
    fwd, bwd = plax.fwd_and_bwd(_f, argnums=(0, 1))
    for scale in (1.0, 2.0, 3.0):
        _, res = fwd(X * scale, W)
        bwd(res, CT)
    assert bwd._cache_size() == 1


def test_fwd_and_bwd_has_aux_and_errors():
    fwd, bwd = plax.fwd_and_bwd(lambda x: (jnp.sin(x), x * 2), argnums=0, has_aux=True)
    y, res, aux = fwd(np.float32(1.0))
    assert float(y) == pytest.approx(np.sin(1.0)) and float(aux) == 2.0
    assert float(bwd(res, np.float32(1.0))) == pytest.approx(np.cos(1.0), rel=1e-6)
    fwd, _ = plax.fwd_and_bwd(_f, argnums=(0, 1))
    with pytest.raises(ValueError, match="must have value greater than or equal to -len"):
        fwd(X)
    with pytest.raises(TypeError, match="Expected a callable"):
        plax.fwd_and_bwd(3, argnums=0)


# --- jax.ad and vjp's with_refs -----------------------------------------------------------------
def test_ad_markers_are_jax_s():
    assert sorted(n for n in vars(plax.ad)) == ["DidntWant", "DontWant", "GradRef", "GradValue"]
    assert plax.ad.DontWant() == plax.ad.DontWant()
    assert tree_util.tree_leaves((plax.ad.DidntWant(), plax.ad.GradRef())) == []
    assert tree_util.tree_leaves(plax.ad.DontWant()) == [plax.ad.DontWant()]


def test_with_refs_returns_skips_and_accumulates():
    _, f_vjp = plax.vjp(_f, X, W)
    want_x, want_w = _closed_form_cts()
    gx, gw = f_vjp.with_refs()(CT)
    np.testing.assert_allclose(gw, want_w, rtol=1e-5)
    skipped, gw = f_vjp.with_refs(plax.ad.DontWant(), plax.ad.GradValue())(CT)
    assert skipped == plax.ad.DidntWant()
    np.testing.assert_allclose(gw, want_w, rtol=1e-5)
    ref = plax.new_ref(jnp.zeros((2, 3)))
    for times in (1, 2):  # the cotangent is added into the Ref each call
        out = f_vjp.with_refs(ref, plax.ad.DontWant())(CT)
        assert out == (plax.ad.GradRef(), plax.ad.DidntWant())
        np.testing.assert_allclose(ref[...], times * want_x, rtol=1e-5)


def test_with_refs_errors():
    _, f_vjp = plax.vjp(_f, X, W)
    with pytest.raises(ValueError, match="one marker or Ref per input"):
        f_vjp.with_refs(plax.ad.GradValue())
    with pytest.raises(TypeError, match="GradValue"):
        f_vjp.with_refs(3.0, plax.ad.GradValue())
    with pytest.raises(ValueError, match="Accumulator aval mismatch"):
        f_vjp.with_refs(plax.new_ref(jnp.zeros(3)), plax.ad.DontWant())


# --- smap ---------------------------------------------------------------------------------------
@pytest.fixture
def explicit_line():
    mesh = plax.make_mesh((N,), ("x",))
    with plax.set_mesh(mesh):
        yield mesh


@pytest.mark.parametrize("jitted", [False, True])
def test_smap_maps_blocks_and_keeps_types(explicit_line, jitted):
    a = plax.device_put(np.arange(2.0 * N, dtype=np.float32).reshape(N, 2), P("x"))
    g = plax.smap(lambda a, b: a * 2 + b, in_axes=(0, None), out_axes=0, axis_name="x")
    r = (plax.jit(g) if jitted else g)(a, np.float32(1))
    np.testing.assert_array_equal(r, np.arange(2.0 * N).reshape(N, 2) * 2 + 1)
    assert plax.typeof(r).str_short() == f"f32[{N}@x,2]"


def test_smap_collectives_axes_and_inferred_specs(explicit_line):
    v = plax.device_put(np.arange(2.0 * N, dtype=np.float32), P("x"))
    total = plax.smap(lambda x: plax.lax.psum(x.sum(), "x"), in_axes=0, out_axes=None,
                      axis_name="x")(v)
    assert float(total) == sum(range(2 * N))
    m = plax.device_put(np.ones((2, N), np.float32), P(None, "x"))
    idx = plax.smap(lambda x: x * plax.lax.axis_index("x"), in_axes=1, out_axes=1,
                    axis_name="x")(m)
    np.testing.assert_array_equal(idx, np.broadcast_to(np.arange(N, dtype=np.float32), (2, N)))

    @plax.smap(out_axes=0, axis_name="x")  # in_axes read from the arguments' types
    def double(x):
        return x * 2
    np.testing.assert_array_equal(double(v), np.arange(2.0 * N) * 2)


def test_smap_gradient(explicit_line):
    v = plax.device_put(np.linspace(0.1, 1.0, 2 * N, dtype=np.float32), P("x"))
    loss = lambda x: plax.smap(jnp.sin, in_axes=0, out_axes=0, axis_name="x")(x).sum()  # noqa: E731
    np.testing.assert_allclose(plax.grad(loss)(v), np.cos(np.asarray(v)), rtol=1e-6)


@pytest.mark.parametrize("kwargs, err, match", [
    (dict(in_axes=0, out_axes=0, axis_name=("x",)), TypeError, "axis_name should be a `str`"),
    (dict(in_axes="a", out_axes=0, axis_name="x"), TypeError, "in_axes must be an int, None"),
    (dict(in_axes=(0, "a"), out_axes=0, axis_name="x"), TypeError, "container with those types"),
    (dict(in_axes=0, out_axes="a", axis_name="x"), TypeError, "out_axes must be an int, None"),
])
def test_smap_argument_errors(kwargs, err, match):
    with pytest.raises(err, match=match):
        plax.smap(lambda a: a, **kwargs)


def test_smap_mesh_errors():
    f = plax.smap(lambda a: a, in_axes=0, out_axes=0, axis_name="x")
    with pytest.raises(ValueError, match="context mesh cannot be empty"):
        f(np.ones(N, np.float32))
    with plax.set_mesh(plax.make_mesh((N,), ("y",))):
        with pytest.raises(ValueError, match="to be a subset of mesh.axis_names"):
            f(np.ones(N, np.float32))
    with plax.set_mesh(plax.make_mesh((N,), ("x",), axis_types=(AxisType.Auto,))):
        with pytest.raises(TypeError, match="in_axes was not specified"):
            plax.smap(lambda a: a, out_axes=0, axis_name="x")(np.ones(N, np.float32))
        out = plax.smap(lambda a: a * 3, in_axes=0, out_axes=0, axis_name="x")(
            np.arange(N, dtype=np.float32))
        np.testing.assert_array_equal(out, np.arange(N) * 3.0)


# --- reshard ------------------------------------------------------------------------------------
@pytest.mark.needs_devices(8)
def test_reshard_eager_and_jitted():
    mesh = plax.make_mesh((4, 2), ("x", "y"))
    x = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    with plax.set_mesh(mesh):
        y = plax.sharding.reshard(x, P("x"))
        assert plax.typeof(y).str_short() == "f32[8@x,2]"
        z = plax.jit(lambda a: plax.sharding.reshard(a * 2, P("x", "y")))(x)
        assert plax.typeof(z).str_short() == "f32[8@x,2@y]"
        np.testing.assert_array_equal(z, x * 2)
        assert plax.typeof(plax.sharding.reshard(x, NamedSharding(mesh, P(None, "y")))
                           ).str_short() == "f32[8,2@y]"
        with pytest.raises(ValueError, match="is not found in mesh"):
            plax.sharding.reshard(x, P("z"))


# --- memory, sharding -------------------------------------------------------------------------
def test_memory_space_enum():
    space = plax.memory.Space
    assert [s.name for s in space] == ["Device", "Host", "Any"]
    assert repr(space.Host) == "MemorySpace.Host" and space["Device"] is space.Device
    assert len({space.Device, space.Host, space.Any}) == 3


def test_abstract_device_and_single_device_sharding():
    dev = plax.sharding.AbstractDevice("cpu", None, "cpu")
    assert repr(dev) == "AbstractDevice(device_kind=cpu, num_cores=None, platform=cpu)"
    assert dev == plax.sharding.AbstractDevice("cpu", None, "cpu") and hash(dev) is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        dev.platform = "gpu"
    mesh = plax.make_mesh((1,), ("x",), devices=plax.devices()[:1])
    assert mesh.abstract_mesh.abstract_device == plax.sharding.AbstractDevice(
        plax.devices()[0].device_kind, None, "cpu")
    assert plax.sharding.AbstractMesh((2,), ("x",)).abstract_device is None
    given = plax.sharding.AbstractMesh((2,), ("x",), abstract_device=dev)
    assert given.abstract_device == dev
    s = plax.sharding.make_single_device_sharding(plax.devices()[-1])
    assert s == plax.sharding.SingleDeviceSharding(plax.devices()[-1])
    placed = plax.device_put(np.ones(3), s)
    assert placed.devices() == {plax.devices()[-1]}


# --- stages -------------------------------------------------------------------------------------
def test_args_info_on_every_stage():
    f = plax.jit(lambda x, n, *, k: x * n * k, static_argnums=1, donate_argnums=0)
    traced = f.trace(np.ones(2, np.float32), 3, k=np.float32(2))
    lowered = traced.lower()
    for info in (traced.args_info, lowered.args_info, lowered.compile().args_info):
        (x_info,), kw = info
        assert isinstance(x_info, stages.ArgInfo) and set(kw) == {"k"}
        assert x_info.shape == (2,) and x_info.dtype == np.float32 and x_info.donated
        assert kw["k"].shape == () and not kw["k"].donated
    with pytest.raises(TypeError, match="No shape attribute"):
        stages.ArgInfo(object(), False).shape


def test_wrapped_protocol():
    assert isinstance(plax.jit(lambda x: x), stages.Wrapped)
    assert not isinstance(lambda x: x, stages.Wrapped)


# --- tree ---------------------------------------------------------------------------------------
def test_tree_static_field():
    @tree_util.register_dataclass
    @dataclasses.dataclass
    class Op:
        x: object
        y: object
        op: str = plax.tree.static(default="add")
    m = Op(x=np.ones(3, np.float32), y=np.arange(3.0, dtype=np.float32))
    leaves, treedef = plax.tree.flatten(m)
    assert len(leaves) == 2 and "('add',)" in str(treedef)
    assert plax.tree.unflatten(treedef, leaves).op == "add"
    np.testing.assert_array_equal(plax.jit(lambda m: m.x + m.y if m.op == "add" else m.x)(m),
                                  [1, 2, 3])
    field = plax.tree.static(default=3, metadata={"m": 1})
    assert dict(field.metadata) == {"static": True, "m": 1} and field.default == 3


def test_default_registry():
    r = tree_util.default_registry
    leaves, treedef = r.flatten({"a": 1, "b": (2, 3)})
    assert leaves == [1, 2, 3] and treedef == tree_util.tree_structure({"a": 0, "b": (0, 0)})
    assert r.flatten([1, None], lambda x: x == 1)[0] == [1]
    assert r.flatten_one_level((1, (2, 3))) == ((1, (2, 3)), None)
    assert r.flatten_one_level(1) is None and r.flatten_one_level_with_keys(1) is None
    assert r.flatten_one_level({"a": 1, "b": 2}) == ((1, 2), ("a", "b"))
    assert r.flatten_one_level_with_keys({"a": 1}) == (((tree_util.DictKey("a"), 1),), ("a",))
    paths, _ = r.flatten_with_path({"a": 1, "b": [2]})
    assert [tree_util.keystr(p) for p, _ in paths] == ["['a']", "['b'][0]"]
    assert r.is_node(tuple) and r.is_node(type(None)) and not r.is_node(int)

    class Box:
        def __init__(self, v):
            self.v = v
    r.register_node(Box, lambda b: ((b.v,), None), lambda _, c: Box(*c))
    assert r.is_node(Box) and tree_util.tree_leaves(Box(5)) == [5]

    @dataclasses.dataclass
    class Pair:
        a: int
        tag: str
    r.register_dataclass_node(Pair, ["a"], ["tag"])
    assert tree_util.tree_leaves(Pair(1, "t")) == [1]


# --- checkpoint policy values -------------------------------------------------------------------
def _named_fn(x):
    a = ad_checkpoint.checkpoint_name(jnp.sin(x), "a")
    b = ad_checkpoint.checkpoint_name(jnp.cos(a), "b")
    return jnp.sum(b * a)


def _grad_closed_form(x):
    a = np.sin(x)
    return (np.cos(a) - a * np.sin(a)) * np.cos(x)


POLICIES = {
    "Saveable": lambda *a, **k: ad_checkpoint.Saveable,
    "Recompute": lambda *a, **k: ad_checkpoint.Recompute,
    "Offloadable": lambda *a, **k: ad_checkpoint.Offloadable("device", "pinned_host"),
    "save_and_offload": plax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"],
        offload_src="device", offload_dst="pinned_host"),
    "offload_dots": plax.checkpoint_policies.offload_dot_with_no_batch_dims("device",
                                                                            "pinned_host"),
    "all_but_b": plax.checkpoint_policies.save_anything_except_these_names("b"),
}
# How many residuals each keeps (JAX 0.10.2 keeps as many, offloaded ones in host memory).
RESIDUALS = {"Saveable": 4, "Recompute": 1, "Offloadable": 4, "save_and_offload": 3,
             "offload_dots": 1, "all_but_b": 4}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_policy_values(name):
    x = np.linspace(0.1, 2.0, 3).astype(np.float32)
    g = plax.checkpoint(_named_fn, policy=POLICIES[name])
    np.testing.assert_allclose(plax.grad(g)(x), _grad_closed_form(x.astype(np.float64)),
                               rtol=1e-5)
    np.testing.assert_allclose(plax.jit(plax.grad(g))(x), _grad_closed_form(x.astype(np.float64)),
                               rtol=1e-5)
    assert len(saved_residuals(g, x)) == RESIDUALS[name]
    check_grads(g, (x,), order=1, modes=["rev"])


def test_policy_value_errors():
    assert repr(ad_checkpoint.Recompute) == "Recompute"
    assert ad_checkpoint.Offloadable("device", "pinned_host").dst == "pinned_host"
    g = plax.checkpoint(_named_fn, policy=lambda *a, **k: 3)
    with pytest.raises(TypeError, match="Value returned by a remat policy should be a bool"):
        plax.grad(g)(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="should not intersect"):
        plax.checkpoint_policies.save_and_offload_only_these_names(
            names_which_can_be_saved=["a"], names_which_can_be_offloaded=["a"],
            offload_src="device", offload_dst="pinned_host")


# --- multihost_utils in one process -------------------------------------------------------------
def test_multihost_primitives_under_transformations():
    mesh = plax.sharding.Mesh(np.array(plax.devices()), ("x",))
    to_global = lambda x: mh.host_local_array_to_global_array(x, mesh, P("x"))  # noqa: E731
    to_local = lambda x: mh.global_array_to_host_local_array(x, mesh, P("x"))  # noqa: E731
    v = np.arange(float(N), dtype=np.float32)
    for f, prim in ((to_global, mh.host_local_array_to_global_array_p),
                    (to_local, mh.global_array_to_host_local_array_p)):
        jaxpr = plax.make_jaxpr(f)(v)
        assert [e.primitive for e in jaxpr.eqns] == [prim]
        np.testing.assert_array_equal(plax.jit(f)(v), v)
        np.testing.assert_array_equal(plax.grad(lambda x: (f(x) * x).sum())(v), 2 * v)
        np.testing.assert_array_equal(plax.vmap(f)(np.stack([v, v + 1])), np.stack([v, v + 1]))
    eager = mh.host_local_array_to_global_array_p.bind(v, global_mesh=mesh, pspec=P("x"))
    assert eager.sharding == NamedSharding(mesh, P("x"))


def test_multihost_single_process_names():
    assert mh.reached_preemption_sync_point(3) is False
    err = mh.ProcessFailureError({plax.devices()[0]})
    assert err.failed_devices == {plax.devices()[0]} and "Devices failed" in str(err)
    with pytest.raises(RuntimeError, match="Distributed JAX not initialized"):
        with mh.live_devices(plax.devices()):
            pass


def test_lib_version_is_the_jaxlib_version():
    import jaxlib
    import plax.lib
    assert plax.lib.__version__ == jaxlib.__version__ == "0.10.2"
