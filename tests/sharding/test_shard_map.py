"""shard_map on 8 CPU devices: per-device programs checked against NumPy models of the
blocks each device holds, the collectives, and the checks with JAX's messages."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental.shard_map import shard_map as old_shard_map
from plax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

# Built around meshes of several devices (most of 8): deselected, not skipped, in the
# suite's one-device run (tests/conftest.py); tests marked needs_devices(1) run there too.
pytestmark = pytest.mark.needs_devices(8)

X = np.arange(32.0, dtype=np.float32).reshape(8, 4)


@pytest.fixture(scope="module")
def mesh():
    return Mesh(np.array(plax.devices()[:8]).reshape(2, 4), ("x", "y"))


@pytest.fixture(scope="module")
def line():
    return Mesh(np.array(plax.devices()[:8]), ("i",))


def smap(f, mesh, in_specs, out_specs, **kw):
    return plax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **kw)


def blocks(x, rows, cols):
    """The NumPy model: block [i, j] of x split in rows x cols."""
    r, c = x.shape[0] // rows, x.shape[1] // cols
    return [[x[i * r:(i + 1) * r, j * c:(j + 1) * c] for j in range(cols)] for i in range(rows)]


def test_identity_round_trip_and_local_shapes(mesh):
    seen = []
    f = smap(lambda a: (seen.append(a.shape), a)[1], mesh, P("x", "y"), P("x", "y"))
    out = f(X)
    assert seen == [(4, 1)]
    np.testing.assert_array_equal(np.asarray(out), X)
    assert out.sharding == NamedSharding(mesh, P("x", "y"))
    np.testing.assert_array_equal(np.asarray(smap(lambda a: a, mesh, P("x"), P("x"))(X)), X)
    np.testing.assert_array_equal(np.asarray(smap(lambda a: a, mesh, P(None, "y"), P(None, "y"))(X)), X)
    np.testing.assert_array_equal(np.asarray(smap(lambda a: a, mesh, P(("x", "y")), P(("x", "y")))(X)), X)


def test_per_block_elementwise_and_block_local_reductions(mesh):
    out = smap(lambda a: jnp.sin(a) * 2 + a.sum(0, keepdims=True), mesh, P("x", "y"), P("x", "y"))(X)
    expect = np.block([[np.sin(b) * 2 + b.sum(0, keepdims=True) for b in row]
                       for row in blocks(X, 2, 4)])
    np.testing.assert_allclose(np.asarray(out), expect, rtol=1e-6)


@pytest.mark.parametrize("axes,out_spec,reduce", [
    ("y", P("x"), lambda bs: np.block([[sum(row)] for row in bs])),
    ("x", P(None, "y"), lambda bs: np.block([[bs[0][j] + bs[1][j] for j in range(4)]])),
    (("x", "y"), P(), lambda bs: sum(b for row in bs for b in row)),
])
def test_psum(mesh, axes, out_spec, reduce):
    out = smap(lambda a: lax.psum(a, axes), mesh, P("x", "y"), out_spec)(X)
    np.testing.assert_allclose(np.asarray(out), reduce(blocks(X, 2, 4)))


def test_pmean_pmax_pmin(mesh):
    bs = blocks(X, 2, 4)
    mean = smap(lambda a: lax.pmean(a, "y"), mesh, P("x", "y"), P("x"))(X)
    np.testing.assert_allclose(np.asarray(mean), np.block([[sum(r) / 4] for r in bs]))
    mx = smap(lambda a: lax.pmax(a, "x"), mesh, P("x", "y"), P(None, "y"))(X)
    np.testing.assert_allclose(np.asarray(mx), np.maximum(X[:4], X[4:]))
    mn = smap(lambda a: lax.pmin(a, ("x", "y")), mesh, P("x", "y"), P())(X)
    np.testing.assert_allclose(np.asarray(mn), np.minimum.reduce([b for r in bs for b in r]))


def test_psum_of_an_invariant_value_counts_every_device(mesh):
    out = smap(lambda a: lax.psum(a, "y"), mesh, P("x"), P("x"))(X)
    np.testing.assert_allclose(np.asarray(out), 4 * X)


def test_all_gather_tiled_and_untiled(line):
    v = np.arange(16.0, dtype=np.float32)
    tiled = smap(lambda a: lax.all_gather(a, "i", tiled=True), line, P("i"), P(),
                 check_vma=False)(v)
    np.testing.assert_array_equal(np.asarray(tiled), v)
    stacked = smap(lambda a: lax.all_gather(a, "i")[None], line, P("i"), P("i"))(v)
    np.testing.assert_array_equal(np.asarray(stacked), np.tile(v.reshape(8, 2), (8, 1, 1)))


def test_psum_scatter(line):
    v = np.arange(64.0, dtype=np.float32).reshape(8, 8)  # device d holds row d
    out = smap(lambda a: lax.psum_scatter(a[0], "i", tiled=True), line, P("i"), P("i"))(v)
    np.testing.assert_allclose(np.asarray(out), v.sum(0))
    un = smap(lambda a: lax.psum_scatter(a[0], "i")[None], line, P("i"), P("i"))(v)
    np.testing.assert_allclose(np.asarray(un), v.sum(0))


def test_all_to_all(line):
    v = np.arange(64.0, dtype=np.float32).reshape(8, 8)  # device d holds row d
    out = smap(lambda a: lax.all_to_all(a, "i", 1, 0, tiled=True), line, P("i"), P("i"))(v)
    # device d receives column d of everyone's row: the transpose, stacked by device
    np.testing.assert_array_equal(np.asarray(out).reshape(8, 8), v.T)
    un = smap(lambda a: lax.all_to_all(a[0], "i", 0, 0)[None], line, P("i"), P("i"))(v)
    np.testing.assert_array_equal(np.asarray(un).reshape(8, 8), v.T)


def test_pswapaxes(line):
    v = np.arange(128.0, dtype=np.float32).reshape(8, 8, 2)  # device d holds v[d]
    out = smap(lambda a: lax.pswapaxes(a, "i", 1), line, P("i"), P("i"))(v)
    # device d's block [0, j] is device j's [0, d]: the two axes swapped
    np.testing.assert_array_equal(np.asarray(out), np.swapaxes(v, 0, 1))
    mapped = plax.pmap(lambda a: lax.pswapaxes(a, "i", 0), axis_name="i")(v)
    np.testing.assert_array_equal(np.asarray(mapped), np.swapaxes(v, 0, 1))


def test_ppermute_ring_and_partial_permutation(line):
    v = np.arange(8.0, dtype=np.float32)
    ring = smap(lambda a: lax.ppermute(a, "i", [(j, (j + 1) % 8) for j in range(8)]),
                line, P("i"), P("i"))(v)
    np.testing.assert_array_equal(np.asarray(ring), np.roll(v, 1))
    part = smap(lambda a: lax.ppermute(a, "i", [(0, 3), (5, 1)]), line, P("i"), P("i"))(v)
    expect = np.zeros(8, np.float32)
    expect[3], expect[1] = v[0], v[5]
    np.testing.assert_array_equal(np.asarray(part), expect)


def test_axis_index(mesh):
    out = smap(lambda a: a * 0 + lax.axis_index("x") * 10 + lax.axis_index("y"), mesh,
               P("x", "y"), P("x", "y"))(X)
    expect = np.array([[10 * i + j for j in range(4)] for i in range(2)], np.float32)
    np.testing.assert_array_equal(np.asarray(out), np.repeat(expect, 4, axis=0))


def test_jit_of_shard_map_and_eager_agree(mesh):
    f = smap(lambda a, b: lax.psum(a * b, "y"), mesh, (P("x", "y"), P("x", "y")), P("x"))
    y = np.cos(X)
    eager = f(X, y)
    jitted = plax.jit(f)(X, y)
    model = np.block([[sum(a * b for a, b in zip(ra, rb))]
                      for ra, rb in zip(blocks(X, 2, 4), blocks(y, 2, 4))])
    np.testing.assert_allclose(np.asarray(eager), model, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jitted), model, rtol=1e-6)
    sharded = plax.device_put(X, NamedSharding(mesh, P("x", "y")))
    np.testing.assert_allclose(np.asarray(plax.jit(f)(sharded, y)), model, rtol=1e-6)
    text = plax.jit(f).lower(X, y).as_text()
    assert "sdy.manual_computation" in text and "stablehlo.all_reduce" in text


def test_decorator_form_context_mesh_and_closed_over_values(mesh):
    w = jnp.arange(4.0)

    with plax.set_mesh(mesh):
        @plax.shard_map(in_specs=P("x"), out_specs=P("x"))
        def f(a):
            return a + w  # a constant of the body: replicated

        np.testing.assert_allclose(np.asarray(f(X)), X + np.arange(4.0))
    with pytest.raises(ValueError, match="The context mesh cannot be empty"):
        plax.shard_map(lambda a: a, in_specs=P("x"), out_specs=P("x"))(X)


def test_experimental_form(mesh):
    f = old_shard_map(lambda a: lax.psum(a, "x"), mesh, in_specs=(P("x"),), out_specs=P())
    np.testing.assert_allclose(np.asarray(f(X)), X[:4] + X[4:])
    with pytest.raises(ValueError, match="out_specs which require replication"):
        old_shard_map(lambda a: a, mesh, in_specs=(P("x"),), out_specs=P())(X)
    out = old_shard_map(lambda a: a, mesh, in_specs=(P("x"),), out_specs=P(), check_rep=False)(X)
    np.testing.assert_allclose(np.asarray(out), X[:4])  # device (0, 0)'s block


def test_spec_errors(mesh):
    ident = lambda a: a  # noqa: E731
    with pytest.raises(ValueError, match="was given an in_specs entry which is too long"):
        smap(ident, mesh, P("x", "y", None), P("x"))(X)
    with pytest.raises(ValueError, match="not evenly divisible by the corresponding mesh axis sizes"):
        smap(ident, mesh, P("y"), P("y"))(np.ones((6, 4), np.float32))
    with pytest.raises(ValueError, match="maps array axis 0 \\(of size 6\\) to mesh axis 'y' \\(of size 4\\)"):
        smap(ident, mesh, P("y"), P("y"))(np.ones((6, 4), np.float32))
    with pytest.raises(ValueError, match="must refer to an axis marked as manual"):
        smap(ident, mesh, P("z"), P("x"))
    with pytest.raises(ValueError, match="duplicate entries for `x`"):
        smap(ident, mesh, P("x", "x"), P("x"))
    with pytest.raises(ValueError, match="pytree structure error: different lengths of tuple"):
        smap(lambda a, b: a, mesh, (P("x"),), P("x"))(X, X)
    with pytest.raises(ValueError, match="was given an out_specs entry which is too long"):
        smap(lambda a: a.sum(), mesh, P("x"), P("x"))(X)
    with pytest.raises(TypeError, match="must be a pytree of `plax.sharding.PartitionSpec`"):
        smap(ident, mesh, "x", P("x"))


def test_replication_check_follows_collectives_and_control_flow(mesh):
    with pytest.raises(ValueError, match="possibly varying over \\{x\\}"):
        smap(lambda a: a, mesh, P("x"), P())(X)
    smap(lambda a: lax.psum(a, "x"), mesh, P("x"), P())(X)  # invariant after the psum
    with pytest.raises(ValueError, match="possibly varying over \\{y\\}"):
        smap(lambda a: a * lax.axis_index("y"), mesh, P("x"), P("x"))(X)

    def loop(a):
        return lax.fori_loop(0, 2, lambda i, c: c + lax.axis_index("y"), a)
    with pytest.raises(TypeError, match="so the manual axis types do not match"):
        smap(loop, mesh, P("x"), P("x", "y"))(X)  # the carry starts invariant over y

    def cast_loop(a):  # the fix the error suggests
        return lax.fori_loop(0, 2, lambda i, c: c + lax.axis_index("y"),
                             lax.pcast(a, "y", to="varying"))
    with pytest.raises(ValueError, match="possibly varying over \\{y\\}"):
        smap(cast_loop, mesh, P("x"), P("x"))(X)
    out = smap(cast_loop, mesh, P("x"), P("x", "y"))(X)  # a block per device of y
    expect = np.concatenate([X + 2 * j for j in range(4)], axis=1)
    np.testing.assert_allclose(np.asarray(out), expect)
    cond = lambda a: lax.cond(lax.axis_index("x") == 0, lambda v: v, lambda v: -v, a)  # noqa: E731
    with pytest.raises(ValueError, match="possibly varying over \\{x\\}"):
        smap(cond, mesh, P(), P())(X)


def test_scan_inside_shard_map(line):
    v = np.arange(16.0, dtype=np.float32)

    def body(a):
        def step(c, x):
            c = c + lax.psum(x, "i")
            return c, c
        return lax.scan(step, jnp.zeros(()), a)[1]
    out = smap(body, line, P("i"), P("i"))(v)
    blocks_ = v.reshape(8, 2)
    expect = np.cumsum(blocks_.sum(0))
    np.testing.assert_allclose(np.asarray(out), np.tile(expect, 8))


def test_random_keys_per_device(line):
    def draw(k):
        k = plax.random.fold_in(k, lax.axis_index("i"))
        return plax.random.uniform(k, (1, 3))
    out = plax.jit(smap(draw, line, P(), P("i")))(plax.random.key(0))
    expect = np.concatenate([np.asarray(plax.random.uniform(
        plax.random.fold_in(plax.random.key(0), i), (1, 3))) for i in range(8)])
    np.testing.assert_allclose(np.asarray(out), expect, rtol=1e-6)


# --- transformations ------------------------------------------------------------------------------
W = np.cos(np.arange(4.0, dtype=np.float32))


def _model(a, w):
    """The same computation without shard_map: each row's sum over its y-blocks of sin(a)*w."""
    return (jnp.sin(a) * w).reshape(8, 4, 1).sum(1)


def _f(mesh):
    return smap(lambda a, w: lax.psum(jnp.sin(a) * w, "y"), mesh, (P("x", "y"), P("y")), P("x"))


def test_grad_of_shard_map_matches_the_model_and_check_grads(mesh):
    from plax.test_util import check_grads
    x = X / 10
    f = _f(mesh)
    g = plax.grad(lambda a, w: f(a, w).sum(), argnums=(0, 1))(x, W)
    gm = plax.grad(lambda a, w: _model(a, w).sum(), argnums=(0, 1))(x, W)
    for a, b in zip(g, gm):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    gj = plax.jit(plax.grad(lambda a, w: f(a, w).sum(), argnums=(0, 1)))(x, W)
    for a, b in zip(gj, gm):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    check_grads(f, (x, W), order=1, modes=("fwd", "rev"), atol=1e-2, rtol=1e-2)


def test_the_backward_pass_adds_no_collectives(mesh):
    """The efficient transpose: psum becomes psum_invariant (whose transpose is pvary, a
    no-op), so the gradient sums only where an input is replicated: w over x."""
    f = _f(mesh)
    text = str(plax.make_jaxpr(plax.grad(lambda a, w: f(a, w).sum(), argnums=(0, 1)))(X, W))
    # the backward pass's sum over x for w, and nothing else (the forward pass's own sum
    # over y computes an unused primal output: dead code)
    assert text.count("psum_invariant") == 1
    assert text.count("psum_invariant[axes=('x',)]") == 1
    assert "psum[" not in text and text.count("shard_map[") == 2
    fwd = str(plax.make_jaxpr(f)(X, W))
    assert fwd.count("psum_invariant[axes=('y',)]") == 1


def test_jvp_and_vmap_of_shard_map(mesh):
    f = _f(mesh)
    _, t = plax.jvp(f, (X, W), (np.ones_like(X), np.ones_like(W)))
    _, tm = plax.jvp(_model, (X, W), (np.ones_like(X), np.ones_like(W)))
    np.testing.assert_allclose(np.asarray(t), np.asarray(tm), rtol=1e-5, atol=1e-5)
    batch = np.stack([X, 2 * X])
    v = plax.vmap(f, in_axes=(0, None))(batch, W)
    np.testing.assert_allclose(np.asarray(v), np.stack([_model(X, W), _model(2 * X, W)]),
                               rtol=1e-5, atol=1e-5)
    vj = plax.jit(plax.vmap(f, in_axes=(0, None)))(batch, W)
    np.testing.assert_allclose(np.asarray(vj), np.asarray(v), rtol=1e-6)


def test_gradient_of_an_invariant_input_sums_over_the_devices(line):
    """w enters replicated (P()) and meets a varying value: its cotangent is summed over i."""
    v = np.arange(16.0, dtype=np.float32)
    f = smap(lambda a, w: a * w, line, (P("i"), P()), P("i"))
    g = plax.grad(lambda w: f(v, w).sum())(np.float32(2.0))
    np.testing.assert_allclose(float(g), v.sum())
    h = smap(lambda a: lax.psum(a, "i"), line, P(), P())  # an invariant value: 8x
    np.testing.assert_allclose(float(plax.grad(lambda a: h(a))(np.float32(1.0))), 8.0)


def test_pvary_pcast_mark_values_varying(line):
    f = smap(lambda a: lax.pcast(a, "i", to="varying"), line, P(), P("i"))
    np.testing.assert_array_equal(np.asarray(f(np.ones(2, np.float32))), np.ones(16))
    assert lax.pbroadcast is lax.pvary


def test_types_show_the_varying_axes_and_grad_inside_sums_over_devices(line):
    text = str(plax.make_jaxpr(smap(lambda a: lax.psum(a * 2, "i"), line, P("i"), P()))(
        np.ones(16, np.float32)))
    assert "a:f32[2]{V:i}" in text and "psum_invariant[axes=('i',)]" in text
    assert "manual_axes=frozenset({'i'})" in text
    # A replicated parameter meets the device's data: its gradient comes back summed over
    # the devices (the implicit pvary transposes to a psum), as in JAX.
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(32, 4)).astype(np.float32), rng.normal(size=(32,)).astype(np.float32)
    w = rng.normal(size=(4,)).astype(np.float32)

    def local_grad(w, xb, yb):
        return plax.grad(lambda w: jnp.mean((xb @ w - yb) ** 2))(w)
    g = smap(local_grad, line, (P(), P("i"), P("i")), P())(w, x, y)
    expect = sum(2 * xb.T @ (xb @ w - yb) / 4 for xb, yb in zip(x.reshape(8, 4, 4),
                                                                y.reshape(8, 4)))
    np.testing.assert_allclose(np.asarray(g), expect, rtol=1e-4, atol=1e-5)


# --- partial-manual and nested shard_map ---------------------------------------------------------
def test_partial_manual_leaves_the_other_axes_to_the_partitioner(mesh):
    f = smap(lambda a: lax.psum(a, "x"), mesh, P("x"), P(), axis_names={"x"})
    np.testing.assert_allclose(np.asarray(plax.jit(f)(X)), X[:4] + X[4:])
    laid_out = plax.device_put(X, NamedSharding(mesh, P("x", "y")))
    np.testing.assert_allclose(np.asarray(plax.jit(f)(laid_out)), X[:4] + X[4:])
    g = smap(lambda a: a * lax.axis_index("x"), mesh, P("x"), P("x"), axis_names={"x"})
    np.testing.assert_allclose(np.asarray(plax.jit(g)(X))[:, 0], [0, 0, 0, 0, 16, 20, 24, 28])
    with pytest.raises(ValueError, match="must refer to an axis marked as manual"):
        smap(lambda a: a, mesh, P("x", "y"), P("x"), axis_names={"x"})
    old = old_shard_map(lambda a: lax.psum(a, "x"), mesh, (P("x"),), P(), auto=frozenset({"y"}))
    np.testing.assert_allclose(np.asarray(plax.jit(old)(X)), X[:4] + X[4:])


def test_nested_shard_map_over_different_axes(mesh):
    def outer(a):
        inner = smap(lambda b: lax.psum(b, "y"), mesh, P(None, "y"), P(), axis_names={"y"})
        return inner(a) * (lax.axis_index("x") + 1)
    f = smap(outer, mesh, P("x"), P("x"), axis_names={"x"})
    expect = X.sum(1, keepdims=True) * np.repeat([1, 2], 4)[:, None]
    np.testing.assert_allclose(np.asarray(plax.jit(f)(X)), expect)
    np.testing.assert_allclose(np.asarray(f(X)), expect)


def test_in_specs_inferred_from_explicit_types():
    m = plax.make_mesh((8,), ("i",))
    with plax.set_mesh(m):
        v = plax.device_put(np.arange(16.0, dtype=np.float32), P("i"))
        seen = []
        f = plax.shard_map(lambda a: (seen.append(a.shape), a * 2)[1], out_specs=P("i"))
        np.testing.assert_allclose(np.asarray(f(v)), 2 * np.arange(16.0))
        assert seen == [(2,)]


def test_cond_while_and_remat_inside_shard_map(line):
    v = np.arange(16.0, dtype=np.float32)

    def body(a, loop):
        a = lax.cond(a.sum() > 10, lambda b: b * 2, lambda b: b, a)
        a = loop(a)
        return plax.checkpoint(lambda b: jnp.sin(b) * b)(a)

    def while_three(a):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + 1.0), (0, a))[1]

    def fori_three(a):  # reverse-differentiable: static bounds
        return lax.fori_loop(0, 3, lambda i, b: b + 1.0, a)
    out = plax.jit(smap(lambda a: body(a, while_three), line, P("i"), P("i")))(v)
    blocks_ = v.reshape(8, 2)
    expect = np.concatenate([np.where(b.sum() > 10, b * 2, b) + 3 for b in blocks_])
    np.testing.assert_allclose(np.asarray(out), np.sin(expect) * expect, rtol=1e-5)
    g = plax.grad(lambda a: smap(lambda b: body(b, fori_three), line, P("i"), P("i"))(a).sum())(v)
    gm = plax.grad(lambda a: jnp.sum(jnp.sin(a) * a))(expect)  # d/dz of sin(z) z at z
    scale = np.concatenate([np.where(b.sum() > 10, 2.0, 1.0) * np.ones(2) for b in blocks_])
    np.testing.assert_allclose(np.asarray(g), np.asarray(gm) * scale, rtol=1e-4)


def test_vmap_with_spmd_axis_name_splits_the_batch_over_the_mesh(line):
    f = smap(lambda a: a * 2 + lax.axis_index("i"), line, P(), P(), check_vma=False)
    batch = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    out = plax.jit(plax.vmap(f, spmd_axis_name="i"))(batch)
    # each device batches its own row: device i adds i
    np.testing.assert_allclose(np.asarray(out), batch * 2 + np.arange(8)[:, None])
    plain = plax.vmap(f)(batch)  # the batch whole on every device: device 0's values
    np.testing.assert_allclose(np.asarray(plain), batch * 2)


def test_transformations_nest_and_eager_takes_sharded_inputs(mesh):
    f = _f(mesh)
    batch = np.stack([X, X / 2]) / 10

    def total(a, w):
        return plax.vmap(f, in_axes=(0, None))(a, w).sum()

    g = plax.jit(plax.grad(total, argnums=(0, 1)))(batch, W)
    gm = plax.grad(lambda a, w: plax.vmap(_model, in_axes=(0, None))(a, w).sum(),
                   argnums=(0, 1))(batch, W)
    for a, b in zip(g, gm):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    laid_out = plax.device_put(X, NamedSharding(mesh, P("x", "y")))
    np.testing.assert_allclose(np.asarray(f(laid_out, W)), np.asarray(_model(X, W)), rtol=1e-5)


@pytest.mark.needs_devices(1)
def test_callable_out_specs_and_custom_jvp_inside(line):
    v = np.linspace(-1, 1, 16, dtype=np.float32)
    f = smap(lambda a: plax.nn.relu(a) * 3, line, P("i"), lambda: P("i"))
    np.testing.assert_allclose(np.asarray(f(v)), np.maximum(v, 0) * 3)
    g = plax.grad(lambda a: f(a).sum())(v)
    np.testing.assert_allclose(np.asarray(g), (v > 0) * 3.0)
