"""Explicit sharding (sharding in types): on meshes with Explicit axes avals carry their split,
primitives propagate it or raise JAX's ShardingTypeError, reshard/auto_axes/explicit_axes
change it, and jit lays results out as typed. Values are checked against NumPy."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core.sharding_types import ShardingTypeError
from plax.sharding import AxisType, NamedSharding, PartitionSpec as P, auto_axes, explicit_axes, reshard

# Built around meshes of several devices (most of 8): deselected, not skipped, in the
# suite's one-device run (tests/conftest.py); tests marked needs_devices(1) run there too.
pytestmark = pytest.mark.needs_devices(8)

X = np.arange(32.0, dtype=np.float32).reshape(8, 4)


@pytest.fixture
def mesh():
    m = plax.make_mesh((2, 4), ("x", "y"))
    with plax.set_mesh(m):
        yield m


def put(value, *spec):
    return plax.device_put(np.asarray(value, np.float32), P(*spec))


def typ(x) -> str:
    return str(plax.typeof(x))


# --- types ------------------------------------------------------------------------------------
def test_types_print_the_split_dimensions(mesh):
    x = put(X, "x")
    assert typ(x) == "float32[8@x,4]"
    assert repr(plax.typeof(x)) == "ShapedArray(float32[8@x,4])"
    assert plax.typeof(x).sharding.spec == P("x", None)
    assert plax.typeof(x).sharding.mesh == mesh.abstract_mesh
    assert typ(put(X, ("x", "y"))) == "float32[8@(x,y),4]"
    assert typ(put(X)) == "float32[8,4]"
    assert plax.typeof(put(X)).sharding.spec == P(None, None)
    assert "a:f32[8@x,4]" in str(plax.make_jaxpr(lambda a: a * 2)(x))


def test_auto_meshes_keep_shardings_out_of_types():
    auto = plax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    x = plax.device_put(X, NamedSharding(auto, P("x")))
    assert typ(x) == "float32[8,4]"
    assert x.sharding.spec == P("x")


def test_mixed_mesh_types_name_only_explicit_axes():
    mixed = plax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Auto))
    x = plax.device_put(X, NamedSharding(mixed, P("x", "y")))
    assert typ(x) == "float32[8@x,4]"


# --- propagation --------------------------------------------------------------------------------
def test_elementwise_operands_must_agree_or_be_replicated(mesh):
    x, y, r = put(X, "x"), put(X, None, "y"), put(X)
    assert typ(x + y) == "float32[8@x,4@y]"
    assert typ(x * r) == "float32[8@x,4]"
    assert typ(jnp.sin(x)) == "float32[8@x,4]"
    assert typ(x.astype(jnp.int32)) == "int32[8@x,4]"
    assert typ(jnp.where(x > 2, x, 0.0)) == "float32[8@x,4]"
    np.testing.assert_allclose(np.asarray(x + y), X + X)
    with pytest.raises(ShardingTypeError, match="add got incompatible shardings for broadcasting"):
        x + put(X, "y")


def test_reductions_drop_the_reduced_axes(mesh):
    x = put(X, "x")
    assert typ(x.sum(0)) == "float32[4]"
    assert typ(x.sum(1)) == "float32[8@x]"
    assert typ(jnp.argmax(x, 1)) == "int32[8@x]"
    assert typ(jnp.max(x, 0)) == "float32[4]"
    assert typ(jnp.mean(x)) == "float32[]"
    np.testing.assert_allclose(np.asarray(x.sum(1)), X.sum(1))
    jaxpr = str(plax.make_jaxpr(lambda a: a.sum(1))(x))
    assert "c:f32[8@x] = reduce_sum" in jaxpr or "b:f32[8@x] = reduce_sum" in jaxpr


def test_scans_along_a_split_axis_are_refused(mesh):
    x = put(X, "x")
    assert typ(jnp.cumsum(x, 1)) == "float32[8@x,4]"
    with pytest.raises(ShardingTypeError, match="Input should be unsharded over the axis being reduced"):
        jnp.cumsum(x, 0)
    with pytest.raises(ShardingTypeError, match="Arguments to sort must be unsharded over the sorting dimension"):
        jnp.sort(x, 0)
    assert typ(jnp.sort(x, 1)) == "float32[8@x,4]"
    assert typ(lax.top_k(x, 2)[0]) == "float32[8@x,2]"
    with pytest.raises(ValueError, match="0th dimension of all xs should be replicated"):
        lax.scan(lambda c, r: (c + r, r), jnp.zeros(4), x)


def test_dot_general_propagates_batch_and_free_dimensions(mesh):
    x = put(X, "x")
    w = put(np.ones((4, 16)), None, "y")
    out = x @ w
    assert typ(out) == "float32[8@x,16@y]"
    np.testing.assert_allclose(np.asarray(out), X @ np.ones((4, 16)))
    b1, b2 = put(np.ones((8, 4, 4)), "x"), put(np.ones((8, 4, 4)))
    assert typ(jnp.einsum("bij,bjk->bik", b1, b2)) == "float32[8@x,4,4]"
    with pytest.raises(ShardingTypeError, match="consistent sharding"):
        jnp.einsum("bij,bjk->bik", b1, put(np.ones((8, 4, 4)), "y"))


def test_dot_general_contracting_both_split_needs_out_sharding(mesh):
    a, w = put(X, None, "y"), put(np.ones((4, 16)), "y")
    with pytest.raises(ShardingTypeError, match="Contracting dimensions are sharded and it is ambiguous"):
        a @ w
    out = jnp.matmul(a, w, out_sharding=P("x"))
    assert typ(out) == "float32[8@x,16]"
    np.testing.assert_allclose(np.asarray(out), X @ np.ones((4, 16)))
    f = plax.jit(lambda a, w: lax.dot_general(a, w, (([1], [0]), ([], [])), out_sharding=P("x")))
    out = f(a, w)
    assert out.sharding.spec == P("x", None) and typ(out) == "float32[8@x,16]"
    np.testing.assert_allclose(np.asarray(out), X @ np.ones((4, 16)))
    text = f.lower(a, w).as_text()
    assert 'sdy.sharding_constraint' in text and '[{"x"}, {}]' in text


def test_a_result_split_twice_over_one_axis_is_illegal(mesh):
    x = put(X, "x")
    with pytest.raises(ShardingTypeError, match="produces an illegally sharded result: f32\\[8@x,8@x\\]"):
        x @ x.T


def test_shape_operations(mesh):
    x = put(X, "x")
    assert typ(x.T) == "float32[4,8@x]"
    assert typ(x.reshape(2, 4, 4)) == "float32[2@x,4,4]"
    assert typ(x.reshape(32)) == "float32[32@x]"
    assert typ(x[:, None]) == "float32[8@x,1,4]"
    assert typ(jnp.broadcast_to(x[:, None], (8, 3, 4))) == "float32[8@x,3,4]"
    assert typ(jnp.concatenate([x, x], 0)) == "float32[16@x,4]"
    assert typ(jnp.pad(x, ((1, 1), (0, 0)))) == "float32[10@x,4]"
    assert typ(x[:, 1:3]) == "float32[8@x,2]"
    assert typ(x[::-1]) == "float32[8@x,4]"
    assert typ(jnp.take(x, jnp.array([0, 1]), axis=1)) == "float32[8@x,2]"
    np.testing.assert_allclose(np.asarray(x.reshape(2, 4, 4)), X.reshape(2, 4, 4))
    with pytest.raises(ShardingTypeError, match="This reshape is not supported"):
        put(np.ones((4, 8)), None, "x").reshape(32)
    assert typ(jnp.reshape(put(np.ones((4, 8)), None, "x"), (32,), out_sharding=P("y"))) == \
        "float32[32@y]"
    with pytest.raises(ShardingTypeError, match="All operands should have the same sharding"):
        jnp.concatenate([x, put(X)], 0)
    with pytest.raises(ShardingTypeError, match="do not divide it"):
        x[0]
    with pytest.raises(ShardingTypeError, match="Use `.at\\[...\\].get\\(out_sharding=\\)`"):
        x[jnp.array([0, 1])]
    assert typ(x.at[jnp.array([0, 1])].get(out_sharding=P())) == "float32[2,4]"
    with pytest.raises(ShardingTypeError, match="dynamic_update_slice operand sharding must be equal"):
        lax.dynamic_update_slice(x, jnp.ones((8, 2)), (0, 1))


def test_creation_with_out_sharding(mesh):
    z = jnp.zeros((8, 4), out_sharding=P("x"))
    assert typ(z) == "float32[8@x,4]" and z.sharding.spec == P("x", None)
    assert typ(jnp.ones((8, 4), out_sharding=P(None, "y"))) == "float32[8,4@y]"
    assert typ(jnp.full((8, 4), 2.0, out_sharding=P("x"))) == "~float32[8@x,4]"  # weak, as JAX
    assert typ(jnp.zeros_like(put(X, "x"))) == "float32[8@x,4]"
    assert typ(jnp.arange(8, out_sharding=P("x"))) == "int32[8@x]"
    assert typ(lax.broadcasted_iota(jnp.int32, (8, 4), 0, out_sharding=P("x"))) == "int32[8@x,4]"
    n = plax.random.normal(plax.random.key(0), (8, 4), out_sharding=P("x"))
    assert typ(n) == "float32[8@x,4]"
    np.testing.assert_allclose(np.asarray(n), np.asarray(plax.random.normal(plax.random.key(0), (8, 4))))
    np.testing.assert_array_equal(np.asarray(jnp.arange(8, out_sharding=P("x"))), np.arange(8))


@pytest.mark.parametrize("method, want_type, combine", [  # types as JAX 0.10.2 gives them
    ("set", "float32[8,4@y]", lambda a: np.full_like(a, 2.0)),
    ("add", "float32[8,4@y]", lambda a: a + 2), ("subtract", "float32[8,4@y]", lambda a: a - 2),
    ("multiply", "float32[8,4@y]", lambda a: a * 2), ("mul", "float32[8,4@y]", lambda a: a * 2),
    ("min", "float32[8,4@y]", lambda a: np.minimum(a, 2)),
    ("max", "float32[8,4@y]", lambda a: np.maximum(a, 2)),
    # divide/power lay out the scattered divisor/exponent: x's split joins it, as in JAX
    ("divide", "float32[8@x,4@y]", lambda a: a / 2), ("power", "float32[8@x,4@y]", lambda a: a ** 2),
])
def test_at_updates_take_out_sharding(mesh, method, want_type, combine):
    x = put(X, "x")
    out = getattr(x.at[1:3], method)(2.0, out_sharding=P(None, "y"))
    want = X.copy()
    want[1:3] = combine(X[1:3])
    assert typ(out) == want_type and out.sharding.spec == plax.typeof(out).sharding.spec
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
    update_row0 = plax.jit(lambda a: getattr(a.at[0], method)(2.0, out_sharding=P("y")))
    if method in ("divide", "power"):  # x's 8@x meets the divisor's 8@y
        with pytest.raises(ShardingTypeError, match="incompatible shardings for broadcasting"):
            update_row0(x)
    else:
        assert typ(update_row0(x)) == "float32[8@y,4]"
    named = getattr(x.at[1:3], method)(2.0, out_sharding=NamedSharding(mesh, P(None, "y")))
    assert typ(named) == want_type
    with pytest.raises(ValueError, match="Resource axis: z of P\\('z',\\) is not found"):
        getattr(x.at[1], method)(2.0, out_sharding=P("z"))


# --- reshard, auto_axes, explicit_axes ------------------------------------------------------------
def test_reshard_changes_the_type_and_the_layout(mesh):
    x = put(X, "x")
    r = reshard(x, P(None, "x"))
    assert typ(r) == "float32[8,4@x]" and r.sharding.spec == P(None, "x")
    np.testing.assert_allclose(np.asarray(r), X)
    j = plax.jit(lambda a: reshard(a, P(None, "x")))(x)
    assert j.sharding.spec == P(None, "x")
    assert str(plax.make_jaxpr(lambda a: reshard(a, P(None, "x")))(x)) == \
        "{ lambda ; a:f32[8@x,4]. let b:f32[8,4@x] = reshard a in (b,) }"


def test_reshard_differentiates_and_vectorises(mesh):
    x = put(X, "x")
    g = plax.grad(lambda a: (reshard(a, P(None, "y")) ** 2).sum())(x)
    assert typ(g) == "float32[8@x,4]"
    np.testing.assert_allclose(np.asarray(g), 2 * X)
    v = plax.vmap(lambda r: reshard(r, P("y")))(x)
    assert typ(v) == "float32[8@x,4@y]"
    np.testing.assert_allclose(np.asarray(v), X)


def test_with_sharding_constraint_asserts_on_explicit_meshes(mesh):
    x = put(X, "x")
    assert typ(lax.with_sharding_constraint(x, P("x"))) == "float32[8@x,4]"
    with pytest.raises(AssertionError, match="acts as an assert when all axes of mesh are of type `Explicit`"):
        lax.with_sharding_constraint(x, P("y"))


def test_auto_axes_hands_the_layout_to_xla(mesh):
    x = put(X, "x")
    f = auto_axes(lambda a: a * 2, out_sharding=P("x"))
    assert typ(f(x)) == "float32[8@x,4]"
    np.testing.assert_allclose(np.asarray(f(x)), 2 * X)
    jaxpr = str(plax.make_jaxpr(f)(x))
    assert "b:f32[8,4] = reshard a" in jaxpr and "d:f32[8@x,4] = reshard c" in jaxpr
    inner = []
    auto_axes(lambda a: inner.append(typ(a)) or a, out_sharding=P())(x)
    assert inner == ["float32[8,4]"]
    with pytest.raises(TypeError, match="Missing required keyword argument: 'out_sharding'"):
        auto_axes(lambda a: a)(x)
    # (out_sharding may come with the call instead, as in JAX)
    assert typ(auto_axes(lambda a: a * 2)(x, out_sharding=P(None, "y"))) == "float32[8,4@y]"


def test_explicit_axes_types_values_on_an_auto_mesh():
    auto = plax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    with plax.set_mesh(auto):
        seen = []

        @plax.jit
        def f(a):
            def body(b):
                seen.append(typ(b))
                return b * 2
            return explicit_axes(body, in_sharding=P("x"))(a)
        out = f(plax.device_put(X, NamedSharding(auto, P())))
    assert seen == ["float32[8@x,4]"]
    assert typ(out) == "float32[8,4]"
    np.testing.assert_allclose(np.asarray(out), 2 * X)


def test_explicit_axes_takes_in_sharding_with_the_call():
    """Keras's initializers call an explicit_axes function of no arguments with
    in_sharding=None, making their values with out_sharding inside."""
    auto = plax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    with plax.set_mesh(auto):
        made = explicit_axes(lambda: jnp.ones((8, 4), out_sharding=P("x", "y")))(
            in_sharding=None)
        assert made.sharding.spec == P("x", "y") and typ(made) == "float32[8,4]"  # (as JAX)
        np.testing.assert_array_equal(np.asarray(made), np.ones((8, 4)))
        with pytest.raises(TypeError, match="Missing required keyword argument: 'in_sharding'"):
            explicit_axes(lambda a: a)(X)
    with pytest.raises(ValueError, match="Context mesh cannot be empty"):
        explicit_axes(lambda: 1.0)(in_sharding=None)


# --- transformations and jit --------------------------------------------------------------------
def test_jit_lays_results_out_as_typed(mesh):
    x = put(X, "x")
    out = plax.jit(lambda a: a * 2)(x)
    assert out.sharding.spec == P("x", None) and typ(out) == "float32[8@x,4]"
    t = plax.jit(lambda a: a.T)(x)
    assert t.sharding.spec == P(None, "x") and typ(t) == "float32[4,8@x]"
    s = plax.jit(lambda a: a.sum())(x)
    assert s.sharding.is_fully_replicated and typ(s) == "float32[]"
    np.testing.assert_allclose(float(s), X.sum())
    o = plax.jit(lambda a: a, out_shardings=P(None, "y"))(x)
    assert typ(o) == "float32[8,4@y]"
    np.testing.assert_allclose(np.asarray(o), X)


def test_grad_vmap_and_control_flow_keep_types(mesh):
    x = put(X, "x")
    g = plax.grad(lambda a: (a * a).sum())(x)
    assert typ(g) == "float32[8@x,4]"
    np.testing.assert_allclose(np.asarray(g), 2 * X)
    inner = []
    v = plax.vmap(lambda r: inner.append(typ(r)) or r * 2)(x)
    assert typ(v) == "float32[8@x,4]" and inner == ["float32[4]"]
    assert typ(plax.vmap(lambda r: r * 2, in_axes=1)(x)) == "float32[4,8@x]"
    assert typ(lax.fori_loop(0, 3, lambda i, c: c * 2, x)) == "float32[8@x,4]"
    assert typ(lax.cond(True, lambda a: a * 2, lambda a: a, x)) == "float32[8@x,4]"
    w = put(np.ones((4, 16)), None, "y")
    gw = plax.grad(lambda w: (x @ w).sum())(w)
    assert typ(gw) == "float32[4,16@y]"
    np.testing.assert_allclose(np.asarray(gw), np.broadcast_to(X.sum(0)[:, None], (4, 16)))


def test_data_parallel_step_on_an_explicit_mesh(mesh):
    """A small SGD step: batch split over x, parameters replicated; the gradient is typed like
    the parameters and matches NumPy."""
    rng = np.random.default_rng(0)
    xb, yb = rng.normal(size=(16, 4)).astype(np.float32), rng.normal(size=(16, 2)).astype(np.float32)
    w = rng.normal(size=(4, 2)).astype(np.float32)
    xs, ys, ws = put(xb, "x"), put(yb, "x"), put(w)

    def loss(w, xb, yb):
        return ((xb @ w - yb) ** 2).mean()

    step = plax.jit(lambda w, xb, yb: w - 0.1 * plax.grad(loss)(w, xb, yb))
    new = step(ws, xs, ys)
    assert typ(new) == "float32[4,2]" and new.sharding.is_fully_replicated
    expect = w - 0.1 * (2 * xb.T @ (xb @ w - yb) / yb.size)
    np.testing.assert_allclose(np.asarray(new), expect, rtol=1e-5, atol=1e-6)


def test_typed_jits_without_sharded_arguments_run_over_the_mesh(mesh):
    z = plax.jit(lambda: jnp.zeros((8, 4), out_sharding=P("x")))()
    assert z.sharding == NamedSharding(mesh, P("x", None)) and typ(z) == "float32[8@x,4]"
    r = plax.jit(lambda a: reshard(a, P("x")))(X)
    assert r.sharding.spec == P("x", None)
    np.testing.assert_allclose(np.asarray(r), X)
    s = plax.sharding.get_abstract_mesh()
    assert s.axis_types == (AxisType.Explicit, AxisType.Explicit)


def test_shape_dtype_structs_with_shardings_trace_typed(mesh):
    sds = plax.ShapeDtypeStruct((8, 4), jnp.float32, sharding=NamedSharding(mesh, P("x")))
    assert str(plax.jit(lambda a: a * 2).trace(sds).jaxpr) == \
        "{ lambda ; a:f32[8@x,4]. let b:f32[8@x,4] = mul a 2.0:f32[] in (b,) }"
    text = plax.jit(lambda a: a * 2).lower(sds).as_text()
    assert text.count('#sdy.sharding<@mesh, [{"x"}, {}]>') == 2  # the parameter and the result


def test_nested_jit_keeps_types_and_eager_results_are_typed(mesh):
    x = put(X, "x")
    inner = plax.jit(lambda a: a + 1)
    out = plax.jit(lambda a: inner(a) * 2)(x)
    assert typ(out) == "float32[8@x,4]"
    np.testing.assert_allclose(np.asarray(out), (X + 1) * 2)
    s = x.sum(0)
    assert s.sharding == NamedSharding(mesh, P(None)) and s.sharding.spec == P(None)
    assert typ(plax.nn.one_hot(plax.device_put(np.arange(8), P("x")), 4)) == "float32[8@x,4]"


@pytest.mark.needs_devices(1)
def test_get_mesh_is_empty_without_a_context_mesh():
    m = plax.sharding.get_mesh()
    assert m.empty and m.axis_names == () and repr(m) == "Mesh(axis_sizes=(), axis_names=())"


def test_reduce_sum_with_out_sharding(mesh):
    x = put(X, None, "y")
    out = lax.reduce_sum(x, (0,), out_sharding=P("y"))
    assert typ(out) == "float32[4@y]"
    np.testing.assert_allclose(np.asarray(out), X.sum(0))
    full = lax.reduce_sum(x, (1,), out_sharding=P("x"))  # the split axis summed away
    assert typ(full) == "float32[8@x]" and full.sharding.spec == P("x")
    np.testing.assert_allclose(np.asarray(full), X.sum(1))
    v = plax.vmap(lambda r: lax.reduce_sum(r, (0,), out_sharding=P()))(put(X, "x"))
    assert typ(v) == "float32[8@x]"


def test_device_put_under_jit_changes_the_type_or_pins_the_layout(mesh):
    x = put(X, "x")
    out = plax.jit(lambda a: plax.device_put(a, P(None, "y")) * 2)(x)
    assert typ(out) == "float32[8,4@y]" and out.sharding.spec == P(None, "y")
    np.testing.assert_allclose(np.asarray(out), 2 * X)
    auto = plax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    s = NamedSharding(auto, P(None, "y"))
    a = plax.device_put(X, NamedSharding(auto, P("x")))
    f = plax.jit(lambda a: plax.device_put(a, s))
    assert f(a).sharding == s and "sdy.sharding_constraint" in f.lower(a).as_text()


def test_array_and_initializers_take_out_sharding(mesh):
    a = jnp.array(X, out_sharding=P("x"))
    assert typ(a) == "float32[8@x,4]"
    np.testing.assert_allclose(np.asarray(a), X)
    assert typ(jnp.asarray(X, out_sharding=P(None, "y"))) == "float32[8,4@y]"
    key = plax.random.key(0)
    w = plax.nn.initializers.glorot_normal()(key, (8, 4), jnp.float32, P(None, "y"))
    assert typ(w) == "float32[8,4@y]"
    np.testing.assert_allclose(np.asarray(w),
                               np.asarray(plax.nn.initializers.glorot_normal()(key, (8, 4))))
    assert typ(plax.nn.initializers.zeros(key, (8, 4), out_sharding=P("x"))) == "float32[8@x,4]"


def test_tangents_and_cotangents_have_their_primals_types(mesh):
    x = put(X[:, :2], "x")
    jf = plax.jacfwd(lambda a: a.sum(1))(x)
    jr = plax.jacrev(lambda a: a.sum(1))(x)
    assert typ(jf) == "float32[8@x,8,2]" and typ(jr) == "float32[8,8@x,2]"
    expect = np.repeat(np.eye(8)[:, :, None], 2, axis=2)
    np.testing.assert_allclose(np.asarray(jf), expect)
    np.testing.assert_allclose(np.asarray(jr), expect)
    _, t = plax.jvp(lambda a: a.sum(1), (x,), (jnp.ones((8, 2)),))
    assert typ(t) == "float32[8@x]"
    np.testing.assert_allclose(np.asarray(t), 2.0)
    _, f_vjp = plax.vjp(lambda a: a * 2, x)
    (ct,) = f_vjp(jnp.ones((8, 2)))
    assert typ(ct) == "float32[8@x,2]"


def test_loops_and_branches_check_types(mesh):
    x = put(X[:, :2], "x")
    ys = lax.scan(lambda c, _: (c, c * 2), x, length=3)[1]
    assert typ(ys) == "float32[3,8@x,2]"
    np.testing.assert_allclose(np.asarray(ys), np.broadcast_to(2 * X[:, :2], (3, 8, 2)))
    with pytest.raises(TypeError, match="cond branches must have equal output types"):
        lax.cond(True, lambda a: a, lambda a: reshard(a, P()), x)
    with pytest.raises(ValueError, match="cannot contain `P.UNCONSTRAINED` when no mesh axis_types are `Auto`"):
        lax.with_sharding_constraint(x, P("x", P.UNCONSTRAINED))


def test_training_step_on_an_explicit_mesh_without_a_context_mesh():
    m = plax.make_mesh((8,), ("data",))
    rng = np.random.default_rng(1)
    xb, yb = rng.normal(size=(64, 16)).astype(np.float32), rng.normal(size=(64, 4)).astype(np.float32)
    w = (rng.normal(size=(16, 4)) * 0.1).astype(np.float32)
    xs, ys = (plax.device_put(v, NamedSharding(m, P("data"))) for v in (xb, yb))
    ws = plax.device_put(w, NamedSharding(m, P()))

    def loss(w, x, y):
        return jnp.mean(jnp.sum((x @ w - y) ** 2, axis=-1))

    step = plax.jit(lambda w, x, y: w - 0.01 * plax.grad(loss)(w, x, y))
    new = step(ws, xs, ys)
    assert typ(new) == "float32[16,4]" and new.sharding.is_fully_replicated
    expect = w - 0.01 * (2 * xb.T @ (xb @ w - yb) / 64)
    np.testing.assert_allclose(np.asarray(new), expect, rtol=1e-5, atol=1e-6)


def test_shape_dtype_struct_like_a_traced_value_keeps_its_type_sharding():
    mesh = plax.make_mesh((2,), ("x",))
    x = plax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("x")))
    seen = []

    @plax.jit
    def f(a):
        sds = plax.ShapeDtypeStruct.like(a)
        seen.append(sds.sharding.spec)
        return jnp.ones(sds.shape, sds.dtype, out_sharding=sds.sharding)

    with plax.set_mesh(mesh):
        out = f(x)
    assert seen == [P("x")] and out.sharding.spec == P("x")
    np.testing.assert_array_equal(out, np.ones(8))
    assert plax.ShapeDtypeStruct.like(jnp.arange(8)).sharding is None  # uncommitted
    assert plax.ShapeDtypeStruct.like(x).sharding == NamedSharding(mesh, P("x"))
