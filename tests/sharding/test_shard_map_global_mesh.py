"""shard_map as JAX 0.10 has it around a global mesh: the manual axes in the types inside
(ManualAxisType, the context mesh typed Manual), the mesh read from set_mesh when the mapped
function is called, loop carries and branches that become varying, nested shard_map."""
import pickle

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core.avals import ShapedArray
from plax.sharding import AxisType, ManualAxisType, Mesh, NamedSharding, PartitionSpec as P

pytestmark = pytest.mark.needs_devices(8)

X = np.arange(32.0, dtype=np.float32).reshape(8, 4)


@pytest.fixture(scope="module")
def mesh():
    return Mesh(np.array(plax.devices()[:8]).reshape(2, 4), ("x", "y"))


def typeof_inside(f, mesh, in_specs, out_specs, *args):
    seen = []
    plax.shard_map(lambda *a: (seen.append(f(*a)), a[0])[1], mesh=mesh, in_specs=in_specs,
                   out_specs=out_specs)(*args)
    return seen[0]


# --- ManualAxisType -------------------------------------------------------------------------------
def test_manual_axis_type_value():
    m = ManualAxisType(varying={"x"})
    assert m.varying == frozenset({"x"}) and m.unreduced == frozenset() and not m.empty
    assert m == ManualAxisType(varying=frozenset({"x"})) and hash(m) == hash(ManualAxisType(
        varying=("x",)))
    assert ManualAxisType().empty and ManualAxisType() != m
    r = m.update(reduced={"y"})
    assert (r.varying, r.reduced) == ({"x"}, {"y"}) and m.reduced == frozenset()
    assert repr(m) == ("ManualAxisType(varying=frozenset({'x'}), unreduced=frozenset(), "
                       "reduced=frozenset())")
    assert pickle.loads(pickle.dumps(r)) == r
    with pytest.raises(ValueError, match="varying and unreduced cannot have common mesh axes"):
        ManualAxisType(varying={"x"}, unreduced={"x", "y"})
    with pytest.raises(ValueError, match="varying and reduced cannot have common mesh axes"):
        m.update(reduced={"x"})
    with pytest.raises(AttributeError, match="immutable"):
        m.varying = frozenset()


def test_shaped_array_carries_it():
    a = ShapedArray((2,), np.float32, manual_axis_type=ManualAxisType(
        varying={"x"}, unreduced={"z"}, reduced={"y"}))
    assert a.mat is a.manual_axis_type and a.mat.reduced == {"y"}
    assert str(a) == "float32[2]{V:x, U:z, R:y}"
    assert a != ShapedArray((2,), np.float32) and a.update(shape=(3,)).mat == a.mat
    assert ShapedArray((), np.int32).mat.empty
    assert not hasattr(a, "vma")  # JAX 0.10 keeps the varying axes in .mat only
    with pytest.raises(TypeError, match="must be a ManualAxisType"):
        ShapedArray((2,), np.float32, manual_axis_type=frozenset({"x"}))


# --- what typeof shows inside shard_map ---------------------------------------------------------
@pytest.mark.parametrize("fn,text,varying", [
    (lambda a: a, "float32[4,1]{V:(x,y)}", {"x", "y"}),
    (lambda a: lax.psum(a, "y"), "float32[4,1]{V:x}", {"x"}),
    (lambda a: lax.psum(a, ("x", "y")), "float32[4,1]", set()),
    (lambda a: a * jnp.float32(2), "float32[4,1]{V:(x,y)}", {"x", "y"}),
])
def test_typeof_inside_shard_map(mesh, fn, text, varying):
    t = typeof_inside(lambda a: plax.typeof(fn(a)), mesh, P("x", "y"), P("x", "y"), X)
    assert str(t) == text and t.mat.varying == varying and t.manual_axis_type is t.mat


def test_types_name_the_axes_in_mesh_order_and_the_context_mesh_is_manual(mesh):
    yx = Mesh(np.array(plax.devices()[:8]).reshape(4, 2), ("y", "x"))
    t = typeof_inside(plax.typeof, yx, P("x", "y"), P("x", "y"), X)
    assert str(t) == "float32[4,1]{V:(y,x)}"
    ctx, sharding = typeof_inside(
        lambda a: (plax.sharding.get_abstract_mesh(), plax.typeof(a).sharding), mesh,
        P("x"), P("x"), X)
    assert ctx.axis_types == (AxisType.Manual, AxisType.Manual)
    assert sharding.mesh == ctx and tuple(sharding.spec) == (None, None)
    assert plax.sharding.get_abstract_mesh().empty  # only inside
    partial = typeof_inside(lambda a: plax.sharding.get_abstract_mesh(), mesh, P("x"), P("x"), X)
    assert partial.axis_types == (AxisType.Manual, AxisType.Manual)


def test_jaxpr_of_shard_map_shows_the_types_and_newly_manual_axes(mesh):
    f = plax.shard_map(lambda a: lax.psum(a, "y"), mesh=mesh, in_specs=P("x", "y"),
                       out_specs=P("x"))
    text = str(plax.make_jaxpr(f)(X))
    assert "f32[4,1]{V:(x,y)}" in text and "f32[4,1]{V:x}" in text
    assert "newly_manual_axes=frozenset({'x', 'y'})" in text


# --- the mesh comes from the context when the function is called -------------------------------
def test_defined_outside_a_mesh_called_under_set_mesh(mesh):
    f = plax.shard_map(lambda a: lax.psum(a, "y"), in_specs=P("x", "y"), out_specs=P("x"))
    with pytest.raises(ValueError, match="The context mesh cannot be empty"):
        f(X)
    with plax.set_mesh(mesh):
        out = f(X)
        jitted = plax.jit(f)(X)
    expect = X.reshape(8, 4).sum(1, keepdims=True)
    np.testing.assert_allclose(np.asarray(out), expect)
    np.testing.assert_allclose(np.asarray(jitted), expect)
    # the mesh is fixed by the first call: under another mesh it no longer matches
    other = plax.make_mesh((8,), ("batch",))
    with plax.set_mesh(other), pytest.raises(ValueError,
                                             match="should match the mesh passed to shard_map"):
        f(X)


def test_global_mesh_of_other_axes_does_not_decide(mesh):
    plax.set_mesh(plax.make_mesh((8,), ("batch",)))
    f = plax.shard_map(lambda a: a * 2, in_specs=P("x"), out_specs=P("x"))
    with plax.set_mesh(mesh):
        np.testing.assert_allclose(np.asarray(f(X)), X * 2)
    with pytest.raises(ValueError, match="should match the mesh passed to shard_map"):
        plax.shard_map(lambda a: a, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(X)


def test_in_specs_checks_over_explicit_and_auto_axes(mesh):
    data = plax.make_mesh((8,), ("batch",))
    with plax.set_mesh(data):
        v = plax.device_put(np.arange(16.0, dtype=np.float32).reshape(8, 2), P("batch"))
        out = plax.shard_map(lambda b: lax.psum(b, "batch"), in_specs=P("batch"),
                             out_specs=P())(v)
        np.testing.assert_allclose(np.asarray(out), np.arange(16.0).reshape(8, 2).sum(0)[None])
        with pytest.raises(ValueError, match="does not match the specs of the input"):
            plax.shard_map(lambda b: b, in_specs=P(None, "batch"), out_specs=P())(v)
    with pytest.raises(TypeError, match="but it was `None` when axis_names"):
        plax.shard_map(lambda a: a, mesh=mesh, out_specs=P())


# --- loops and branches whose values become varying --------------------------------------------
def _cumsum(cast):
    def f(v):
        c0 = jnp.zeros(())
        if cast:
            c0 = lax.pcast(c0, "x", to="varying")
        c, ys = lax.scan(lambda c, e: (c + e, c), c0, v)
        return lax.psum(c, "x"), ys
    return f


def test_scan_carry_that_becomes_varying(mesh):
    v = np.arange(8.0, dtype=np.float32)
    with pytest.raises(TypeError, match=r"(?s)The input carry c has type float32\[\] but the "
                       r"corresponding output carry component has type float32\[\]\{V:x\}.*"
                       r"pcast\(\.\.\., \('x',\), to='varying'\)` to the initial carry value.*"
                       r"#scan-vma"):
        plax.shard_map(_cumsum(False), mesh=mesh, in_specs=P("x"), out_specs=(P(), P("x")))(v)
    f = plax.shard_map(_cumsum(True), mesh=mesh, in_specs=P("x"), out_specs=(P(), P("x")))
    blocks = v.reshape(2, 4)
    want_ys = np.concatenate([np.concatenate([[0.0], np.cumsum(b)[:-1]]) for b in blocks])
    for total, ys in (f(v), plax.jit(f)(v)):
        assert float(total) == v.sum()
        np.testing.assert_allclose(np.asarray(ys), want_ys)


def test_carry_made_like_a_varying_value_varies(mesh):
    # full_like of a varying value varies as it does (so this carry type-checks)
    def f(v):
        c, _ = lax.scan(lambda c, e: (c + e, None), lax.full_like(v[0], 0.0), v)
        return c[None]
    out = plax.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(np.arange(8.0))
    np.testing.assert_allclose(np.asarray(out), [6.0, 22.0])


def test_cond_branches_of_different_variance(mesh):
    def f(a):
        return lax.cond(True, lambda: a, lambda: jnp.zeros(a.shape))
    with pytest.raises(TypeError, match=r"(?s)so the manual axis types do not match.*applying "
                       r"`plax.lax.pcast\(\.\.\., \('x',\), to='varying'\)` to the output of "
                       r"false_fun"):
        plax.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(np.arange(8.0))


# --- nested shard_map ----------------------------------------------------------------------------
def test_nested_shard_map_reads_the_manual_context_mesh(mesh):
    seen = {}

    def outer(a):
        seen["outer"] = (str(plax.typeof(a)), plax.sharding.get_abstract_mesh().axis_types)

        def inner(b):
            seen["inner"] = (str(plax.typeof(b)), plax.sharding.get_abstract_mesh().axis_types)
            return lax.psum(b, "y")
        r = plax.shard_map(inner, in_specs=P(None, "y"), out_specs=P(), axis_names={"y"})(a)
        seen["result"] = str(plax.typeof(r))
        return r * (lax.axis_index("x") + 1)

    a = np.arange(64.0, dtype=np.float32).reshape(8, 8)
    f = plax.shard_map(outer, mesh=mesh, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})
    want = a.reshape(8, 4, 2).sum(1) * np.repeat([1, 2], 4)[:, None]
    np.testing.assert_allclose(np.asarray(f(a)), want)
    np.testing.assert_allclose(np.asarray(plax.jit(f)(a)), want)
    assert seen["outer"] == ("float32[4,8]{V:x}", (AxisType.Manual, AxisType.Auto))
    assert seen["inner"] == ("float32[4,2]{V:(x,y)}", (AxisType.Manual, AxisType.Manual))
    assert seen["result"] == "float32[4,2]{V:x}"


def test_nested_shard_map_cannot_split_again_over_an_outer_manual_axis(mesh):
    def outer(v):
        return plax.shard_map(lambda b: lax.psum(b, "x"), in_specs=P(None, "x"), out_specs=P(),
                              axis_names={"x"})(v)
    f = plax.shard_map(outer, mesh=mesh, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})
    with pytest.raises(plax.sharding.named.DuplicateSpecError,
                       match="has duplicate entries for `x`"):
        f(np.ones((8, 8), np.float32))


@pytest.mark.parametrize("make", [jnp.zeros_like, jnp.ones_like, lambda v: jnp.full_like(v, 2.0)])
def test_numpy_like_functions_vary_as_their_prototype(mesh, make):
    seen = []

    def f(v):
        seen.append(str(plax.typeof(make(v[0]))))
        c, _ = lax.scan(lambda c, e: (c + e, None), make(v[0]), v)
        return c[None]
    v = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    out = plax.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(v)
    start = np.asarray(make(np.zeros(2, np.float32)))
    np.testing.assert_allclose(np.asarray(out), start + v.reshape(2, 4, 2).sum(1))
    assert seen == ["float32[2]{V:x}"]
