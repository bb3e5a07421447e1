"""pmap over every CPU device (8 in the suite, 1 in its one-device run), built on shard_map +
jit: values against NumPy per-device models, the errors with JAX's phrases, composition with
the other transformations, caching, and the results' layouts as JAX reports them."""
import functools

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.sharding import NamedSharding, PartitionSpec as P

N = len(plax.devices())
LAST = N - 1
X = np.arange(2.0 * N, dtype=np.float32).reshape(N, 2)
AXIS = "_internal_pmap_axis_name"  # the name JAX gives pmap's axis when it has none


def test_maps_over_the_devices_and_returns_sharded_arrays():
    out = plax.pmap(lambda a: a * 2)(X)
    np.testing.assert_allclose(np.asarray(out), 2 * X)
    assert len(out.addressable_shards) == N and out.addressable_shards[LAST].data.shape == (1, 2)
    assert out.addressable_shards[LAST].device == plax.devices()[LAST]
    np.testing.assert_allclose(np.asarray(out[LAST]), 2 * X[LAST])
    again = plax.pmap(lambda a: a + 1)(out)  # the layout is pmap's own: no copy needed
    assert again.sharding == out.sharding
    np.testing.assert_allclose(np.asarray(jnp.sum(again, 0)), (2 * X + 1).sum(0))


def test_collectives_over_the_axis_name():
    f = plax.pmap(lambda a: (lax.psum(a, "i"), lax.pmean(a, "i"), lax.pmax(a, "i"),
                             lax.axis_index("i"), lax.all_gather(a, "i"),
                             lax.ppermute(a, "i", [(j, (j + 1) % N) for j in range(N)])),
                  axis_name="i")
    s, m, mx, idx, gathered, ring = f(X)
    np.testing.assert_allclose(np.asarray(s), np.broadcast_to(X.sum(0), (N, 2)))
    np.testing.assert_allclose(np.asarray(m), np.broadcast_to(X.mean(0), (N, 2)))
    np.testing.assert_allclose(np.asarray(mx), np.broadcast_to(X.max(0), (N, 2)))
    np.testing.assert_array_equal(np.asarray(idx), np.arange(N))
    np.testing.assert_allclose(np.asarray(gathered), np.broadcast_to(X, (N, N, 2)))
    np.testing.assert_allclose(np.asarray(ring), np.roll(X, 1, axis=0))
    sc = plax.pmap(lambda a: lax.psum_scatter(a, "i", tiled=True), axis_name="i")(
        np.arange(N * N * 2.0, dtype=np.float32).reshape(N, 2 * N))
    np.testing.assert_allclose(np.asarray(sc).reshape(-1),
                               np.arange(N * N * 2.0).reshape(N, 2 * N).sum(0))


def test_in_axes_out_axes_and_static_arguments():
    np.testing.assert_allclose(np.asarray(plax.pmap(lambda a: a.sum(), in_axes=1)(X.T)),
                               X.sum(1))
    np.testing.assert_allclose(np.asarray(plax.pmap(lambda a: a, in_axes=-1)(X.T)), X)
    np.testing.assert_allclose(np.asarray(plax.pmap(lambda a: a, out_axes=1)(X)), X.T)
    both = plax.pmap(lambda a, b: a * b, in_axes=(0, None))(X, np.float32(3))
    np.testing.assert_allclose(np.asarray(both), 3 * X)
    tree = plax.pmap(lambda d: d["a"] + d["b"], in_axes=({"a": 0, "b": None},))(
        {"a": X, "b": np.ones(2, np.float32)})
    np.testing.assert_allclose(np.asarray(tree), X + 1)
    rep = plax.pmap(lambda a: lax.psum(a, "i"), axis_name="i", out_axes=None)(X)
    np.testing.assert_allclose(np.asarray(rep), X.sum(0))

    @functools.partial(plax.pmap, static_broadcasted_argnums=1)
    def scaled(a, power):
        return a ** power if power > 1 else a  # Python control flow on the static value

    np.testing.assert_allclose(np.asarray(scaled(X, 2)), X ** 2)
    np.testing.assert_allclose(np.asarray(scaled(X, 1)), X)
    tail = plax.devices()[N // 2:]
    small = plax.pmap(lambda a: a + 1, devices=tail)(np.ones((len(tail), 2), np.float32))
    assert {s.device for s in small.addressable_shards} == set(tail)
    sized = plax.pmap(lambda a, b: a + b, in_axes=(0, None), axis_size=N)(X, np.float32(1))
    np.testing.assert_allclose(np.asarray(sized), X + 1)


def test_errors_with_jax_phrases():
    with pytest.raises(ValueError, match=f"requires {N + 1} logical devices, but only {N} XLA "
                                         "devices"):
        plax.pmap(lambda a: a)(np.ones((N + 1, 2)))
    with pytest.raises(ValueError, match="pmap got inconsistent sizes for array axes to be mapped"):
        plax.pmap(lambda a, b: a + b)(np.ones((N, 2)), np.ones((N + 1, 2)))
    # As in JAX 0.10, axis_size does not stand in for a mapped argument: it is checked
    # against the mapped arguments' size.
    for kwargs in ({}, {"axis_size": N}):
        with pytest.raises(ValueError,
                           match="pmap requires at least one argument with a mapped axis"):
            plax.pmap(lambda a: a, in_axes=None, **kwargs)(np.ones((N, 2)))
    with pytest.raises(ValueError, match="pmap requires at least one argument with a mapped axis"):
        plax.pmap(lambda: 1.0)()
    with pytest.raises(ValueError, match=f"Specified axis_size {N + 1} doesn't match received "
                                         f"axis_size {N}"):
        plax.pmap(lambda a: a, axis_size=N + 1)(X)
    with pytest.raises(ValueError, match="its rank should be at least 1, but is only 0"):
        plax.pmap(lambda a: a)(np.float32(1))
    with pytest.raises(ValueError, match="axis 5 is out of bounds for array of dimension 2"):
        plax.pmap(lambda a: a, out_axes=5)(X)
    with pytest.raises(ValueError, match="Non-hashable static arguments are not supported"):
        plax.pmap(lambda a, s: a, static_broadcasted_argnums=1)(X, [1])
    with pytest.raises(ValueError, match="pmap of pmap is not supported"):
        plax.pmap(plax.pmap(lambda a: a))(np.ones((1, 1, 3)))


def test_composition_with_grad_vmap_and_jit():
    def f(a):
        return jnp.sin(a) * lax.psum(a, "i")
    pf = plax.pmap(f, axis_name="i")

    def model(a):  # the same without pmap: every row sees the column sums
        return jnp.sin(a) * a.sum(0)
    np.testing.assert_allclose(np.asarray(pf(X / 10)), np.asarray(model(X / 10)), rtol=1e-5)
    g = plax.grad(lambda a: pf(a).sum())(X / 10)
    gm = plax.grad(lambda a: model(a).sum())(X / 10)
    np.testing.assert_allclose(np.asarray(g), np.asarray(gm), rtol=1e-5)
    inner = plax.pmap(plax.grad(lambda a: jnp.sum(jnp.sin(a))))(X)
    np.testing.assert_allclose(np.asarray(inner), np.cos(X), rtol=1e-5)
    batch = np.stack([X, 2 * X])
    v = plax.vmap(pf)(batch / 10)
    np.testing.assert_allclose(np.asarray(v), np.stack([model(X / 10), model(2 * X / 10)]),
                               rtol=1e-5)
    named = plax.pmap(plax.vmap(lambda r: lax.psum(r, "j"), axis_name="j"))(
        X.reshape(N, 2, 1))
    np.testing.assert_allclose(np.asarray(named), np.broadcast_to(X.sum(1)[:, None, None],
                                                                  (N, 2, 1)))
    np.testing.assert_allclose(np.asarray(plax.jit(pf)(X / 10)), np.asarray(model(X / 10)),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(plax.pmap(plax.jit(lambda a: a * 3))(X)), 3 * X)


def test_second_call_does_not_retrace():
    traces = []

    def f(a):
        traces.append(a.shape)
        return a * 2
    pf = plax.pmap(f)
    pf(X)
    pf(X + 1)
    assert traces == [(2,)]
    pf(np.ones((N, 3), np.float32))
    assert traces == [(2,), (3,)]


def test_lower_and_data_parallel_step():
    rng = np.random.default_rng(0)
    xb = rng.normal(size=(N, 4, 3)).astype(np.float32)
    yb = rng.normal(size=(N, 4)).astype(np.float32)
    w = rng.normal(size=(3,)).astype(np.float32)

    def loss(w, x, y):
        return jnp.mean((x @ w - y) ** 2)

    def step(w, x, y):
        return w - 0.1 * lax.pmean(plax.grad(loss)(w, x, y), "batch")

    pstep = plax.pmap(step, axis_name="batch", in_axes=(None, 0, 0), out_axes=None)
    new = pstep(w, xb, yb)
    full = w - 0.1 * plax.grad(loss)(w, xb.reshape(4 * N, 3), yb.reshape(4 * N))
    np.testing.assert_allclose(np.asarray(new), np.asarray(full), rtol=1e-5, atol=1e-6)
    text = pstep.lower(w, xb, yb).as_text()
    # (over one device the body is inlined, as JAX lowers manual axes of size 1)
    assert ("sdy.manual_computation" in text) == (N > 1) and "stablehlo.all_reduce" in text
    # Host arguments are lowered split over the devices, as a call places them: each device's
    # program takes its own slice, never the whole batch to slice itself.
    main = next(line for line in text.splitlines() if "func.func public @main" in line)
    assert main.count('[{"batch"}, {}, {}]') == 1 and main.count('[{"batch"}, {}]') == 1
    assert "dynamic-slice" not in pstep.lower(w, xb, yb).compile().as_text()


@pytest.mark.parametrize("fun, kw, args", [
    # None leaves (no buffers) among the mapped pytree's, as a filtering wrapper passes them
    (lambda t: 2 * t[1][0] + 4, {}, ((None, (X, None), None, None),)),
    (lambda d, z: d["a"] * z, dict(in_axes=({"a": 0}, None)), ({"a": X}, np.float32(2))),
    (lambda x, s: x * s, dict(static_broadcasted_argnums=(1,)), (X, 3.0)),
    (lambda x, y: x + y, dict(donate_argnums=0), (X, X)),
])
def test_compiled_takes_the_arguments_as_pmap_does(fun, kw, args):
    f = plax.pmap(fun, **kw)
    statics = kw.get("static_broadcasted_argnums", ())
    dyn = tuple(a for i, a in enumerate(args) if i not in statics)
    compiled = f.lower(*args).compile()
    assert compiled.in_tree == plax.tree.structure((dyn, {}))
    assert plax.tree.structure(compiled.args_info) == compiled.in_tree
    want = np.asarray(f(*args))
    np.testing.assert_allclose(np.asarray(compiled(*plax.tree.map(jnp.asarray, dyn))), want)
    with pytest.raises(TypeError, match="does not match the input pytree"):
        compiled(*dyn, None)


def test_device_arrays_are_split_before_the_call():
    whole = jnp.asarray(X)  # on one device
    out = plax.pmap(lambda a: a * 3)(whole)
    np.testing.assert_allclose(np.asarray(out), 3 * X)
    assert out.sharding.spec == P(AXIS)
    assert whole.devices() == {plax.devices()[0]} and not whole.is_deleted()


def test_donation():
    pf = plax.pmap(lambda a: a + 1, donate_argnums=0)
    a = plax.pmap(lambda v: v)(X)
    out = pf(a)
    np.testing.assert_allclose(np.asarray(out), X + 1)
    assert a.is_deleted()  # its buffers went to the result


def test_keyword_arguments_are_mapped_along_their_leading_axis():
    out = plax.pmap(lambda a, *, b: a * b)(X, b=X + 1)
    np.testing.assert_allclose(np.asarray(out), X * (X + 1))


def test_pmap_after_clear_backends_runs_on_the_new_devices():
    f = plax.pmap(lambda a: a + 1)
    f(X)
    plax.clear_backends()
    out = plax.pmap(lambda a: a + 1)(X)
    np.testing.assert_allclose(np.asarray(out), X + 1)
    assert out.addressable_shards[LAST].device == plax.devices()[LAST]
    assert out.sharding.mesh.devices.flat[0] == plax.devices()[0]


def test_a_one_long_axis_runs_on_the_first_device():
    # optax's tests map over x[None] on any machine: a mesh of one device.
    x = jnp.arange(3.0)
    out = plax.pmap(lambda a: a * 2 + 1)(x[None])
    np.testing.assert_allclose(np.asarray(out), 2 * np.arange(3.0)[None] + 1)
    assert out.devices() == {plax.devices()[0]}
    assert out.sharding.spec == P(AXIS) and out.sharding.mesh.shape == {AXIS: 1}
    assert out.sharding.mesh.devices.tolist() == [plax.devices()[0]]

    stats = plax.pmap(lambda a: (lax.psum(a, "i"), lax.pmean(a, "i"), lax.axis_index("i")),
                      axis_name="i")(x[None])
    np.testing.assert_allclose(np.asarray(stats[0]), np.arange(3.0)[None])
    np.testing.assert_allclose(np.asarray(stats[1]), np.arange(3.0)[None])
    np.testing.assert_array_equal(np.asarray(stats[2]), [0])

    g = plax.pmap(plax.grad(lambda a: jnp.sum(jnp.sin(a) * a)))(x[None])
    xs = np.arange(3.0)
    np.testing.assert_allclose(np.asarray(g), (np.cos(xs) * xs + np.sin(xs))[None], rtol=1e-6)
    outer = plax.grad(lambda a: plax.pmap(lambda r: lax.psum(r ** 2, "i"), axis_name="i")(
        a).sum())(np.ones((1, 3), np.float32) * 3)
    np.testing.assert_allclose(np.asarray(outer), np.full((1, 3), 6.0))

    jitted = plax.jit(lambda a: plax.pmap(lambda r: r - 1)(a) * 2)(x[None])
    np.testing.assert_allclose(np.asarray(jitted), 2 * (np.arange(3.0)[None] - 1))

    donor = plax.pmap(lambda a: a)(x[None])
    bumped = plax.pmap(lambda a: a + 1, donate_argnums=0)(donor)
    np.testing.assert_allclose(np.asarray(bumped), np.arange(3.0)[None] + 1)
    assert donor.is_deleted()

    both = plax.pmap(lambda a, b: a * b, in_axes=(1, None), out_axes=1)(
        x[:, None], np.float32(4))
    np.testing.assert_allclose(np.asarray(both), 4 * np.arange(3.0)[:, None])
    assert both.sharding.spec == P(None, AXIS)


def test_results_are_laid_out_as_jax_lays_them_out():
    # pmap pins its results along their out_axes, on any number of devices (as JAX's).
    split, whole, moved = plax.pmap(lambda a: (a, lax.psum(a, "i"), a), axis_name="i",
                                    out_axes=(0, None, 1))(X)
    assert (split.sharding.spec, whole.sharding.spec, moved.sharding.spec) == (
        P("i"), P(), P(None, "i"))
    np.testing.assert_allclose(np.asarray(whole), X.sum(0))
    np.testing.assert_allclose(np.asarray(moved), X.T)
    assert moved.sharding.mesh.shape == {"i": N}
    # Inside jit the enclosing program decides: XLA keeps the split over several devices;
    # on one device JAX reports the layout of the program's first argument.
    inside = plax.jit(plax.pmap(lambda a: a * 3))(X)
    np.testing.assert_allclose(np.asarray(inside), 3 * X)
    assert inside.sharding.spec == (P(AXIS) if N > 1 else P())


def test_argument_checks_with_jax_phrases():
    # At definition, as JAX checks them.
    with pytest.raises(TypeError, match="Expected a callable value, got 3"):
        plax.pmap(3)
    with pytest.raises(TypeError, match="pmap in_axes must be an int, None, or \\(nested\\) "
                                        "container with those types as leaves, but got 0.0"):
        plax.pmap(lambda a: a, in_axes=0.0)
    with pytest.raises(TypeError, match="pmap out_axes must be an int, None, or \\(nested\\) "
                                        "container with those types as leaves"):
        plax.pmap(lambda a: a, out_axes=(0, "x"))
    with pytest.raises(ValueError, match="'devices' argument to pmap must be non-empty, or None"):
        plax.pmap(lambda a: a, devices=[])
    with pytest.raises(ValueError, match=r"`static_argnums` \[1\] and `donate_argnums` \[1\] "
                                         "cannot intersect"):
        plax.pmap(lambda a, s: a, static_broadcasted_argnums=1, donate_argnums=1)
    # At the call: structures named by the user's argument (pmap in_axes / out_axes).
    with pytest.raises(ValueError, match=r"(?s)different lengths of tuple at key path\n"
                                         r"    pmap in_axes\[0\].*tree prefix of the tuple of "
                                         "arguments passed positionally"):
        plax.pmap(lambda a, b: a, in_axes=(0, 0, 0))(X, X)
    with pytest.raises(ValueError, match=r"different lengths of tuple at key path\n"
                                         r"    pmap out_axes\n"):
        plax.pmap(lambda a: (a, a), out_axes=(0, 0, 0))(X)
    with pytest.raises(ValueError, match="static_broadcasted_argnums=\\(3,\\) but was called "
                                         "with only 2 positional arguments"):
        plax.pmap(lambda a, s: a, static_broadcasted_argnums=3)(X, 1)
    # Valid forms still map: nested containers with None leaves.
    out = plax.pmap(lambda d, s: d["a"] * s + d["b"], in_axes=({"a": 0, "b": None}, None))(
        {"a": X, "b": np.float32(1)}, np.float32(2))
    np.testing.assert_allclose(np.asarray(out), X * 2 + 1)
