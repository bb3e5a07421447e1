"""plax.vmap: in_axes/out_axes pytrees, axis_size, JAX's error messages, nesting, and
composition with jit and differentiation."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.test_util import check_grads

from helpers import check_vmap, sample

F32 = np.float32


def xs(*shape, seed=0):
    return sample(shape, F32, seed=seed)


# --- in_axes / out_axes -----------------------------------------------------------------------
def test_in_axes_forms():
    x, y = xs(3, 4), xs(4, 3, seed=1)
    f = lambda a, b: a * 2 + b
    check_vmap(f, x, y, in_axes=(0, 1))
    check_vmap(f, x, y, in_axes=[0, 1])  # a list means the tuple it spells
    check_vmap(f, x, y, in_axes=(-2, -1))
    check_vmap(f, x, y[:, 0], in_axes=(0, None))
    check_vmap(f, x, y, in_axes=(1, 0), out_axes=1)
    check_vmap(f, x, y, in_axes=(0, 1), out_axes=-1)


def test_in_axes_pytree_prefix():
    params = {"w": xs(5, 3), "b": xs(3, seed=1)}
    batch = xs(4, 5, seed=2)

    def f(p, x):
        return jnp.tanh(x @ p["w"] + p["b"])

    out = plax.vmap(f, in_axes=({"w": None, "b": None}, 0))(params, batch)
    want = np.tanh(batch @ params["w"] + params["b"])
    np.testing.assert_allclose(out, want, rtol=1e-5)
    # Prefix: None for the whole dict; and per-leaf axes inside the dict.
    out2 = plax.vmap(f, in_axes=(None, 0))(params, batch)
    np.testing.assert_allclose(out2, want, rtol=1e-5)
    stacked = {"w": np.stack([params["w"]] * 4), "b": xs(4, 3, seed=3)}
    out3 = plax.vmap(f, in_axes=({"w": 0, "b": 0}, 0))(stacked, batch)
    want3 = np.stack([np.tanh(batch[i] @ stacked["w"][i] + stacked["b"][i]) for i in range(4)])
    np.testing.assert_allclose(out3, want3, rtol=1e-5)


def test_nested_tuple_in_axes_and_tuple_out_axes():
    x, y = xs(2, 3), xs(3, 2, seed=1)

    def f(pair):
        a, b = pair
        return a + b, a * b

    s, p = plax.vmap(f, in_axes=((0, 1),), out_axes=(0, 1))((x, y))
    np.testing.assert_allclose(s, x + y.T, rtol=1e-6)
    np.testing.assert_allclose(p, (x * y.T).T, rtol=1e-6)


def test_kwargs_are_mapped_over_axis_0():
    x, k = xs(4, 3), xs(4, 3, seed=1)
    out = plax.vmap(lambda a, scale: a * scale, in_axes=(1,))(x.T, scale=k)
    np.testing.assert_allclose(out, x * k, rtol=1e-6)


def test_out_axes_none_for_unbatched_output_and_dict():
    x = xs(4, 3)
    out, total = plax.vmap(lambda a: (a * 2, 7.0), out_axes=(0, None))(x)
    np.testing.assert_allclose(out, 2 * x, rtol=1e-6)
    assert np.asarray(total).shape == () and float(total) == 7.0
    d = plax.vmap(lambda a: {"u": a, "v": a.sum()}, out_axes={"u": 1, "v": 0})(x)
    np.testing.assert_allclose(d["u"], x.T)
    np.testing.assert_allclose(d["v"], x.sum(1), rtol=1e-5)


def test_unbatched_output_is_broadcast():
    out = plax.vmap(lambda a: jnp.ones(2), in_axes=0)(xs(5, 3))
    assert out.shape == (5, 2)
    np.testing.assert_array_equal(out, np.ones((5, 2)))


def test_axis_size_without_mapped_arguments():
    x = xs(3)
    out = plax.vmap(lambda a: a * 2, in_axes=None, axis_size=4)(x)
    np.testing.assert_allclose(out, np.broadcast_to(2 * x, (4, 3)))
    out = plax.vmap(lambda: jnp.float32(1.5), axis_size=3)()
    np.testing.assert_array_equal(out, np.full(3, 1.5, F32))


def test_size_zero_batch():
    out = plax.vmap(lambda a: a * 2)(np.zeros((0, 3), F32))
    assert out.shape == (0, 3)


# --- errors -----------------------------------------------------------------------------------
def test_in_axes_type_errors():
    with pytest.raises(TypeError, match="vmap in_axes must be an int, None, or a tuple of "
                                        "entries corresponding to the positional arguments"):
        plax.vmap(lambda a: a, in_axes="a")
    with pytest.raises(TypeError, match=r"vmap in_axes must be an int, None, or \(nested\) "
                                        "container with those types as leaves"):
        plax.vmap(lambda a: a, in_axes=(0.5,))
    with pytest.raises(TypeError, match="vmap out_axes must be an int, None"):
        plax.vmap(lambda a: a, out_axes=("x",))


def test_in_axes_length_mismatch():
    with pytest.raises(ValueError, match=r"positional arguments passed to the function, but got "
                                         r"len\(in_axes\)=3, len\(args\)=2"):
        plax.vmap(lambda a, b: a, in_axes=(0, 0, 1))(xs(2), xs(2))


def test_axis_out_of_range():
    x = xs(2, 3)
    for ax in (2, -3):
        with pytest.raises(ValueError, match=f"vmap was requested to map its argument along axis "
                                             f"{ax}, which implies that its rank should be at "
                                             r"least 3, but is only 2 \(its shape is \(2, 3\)\)"):
            plax.vmap(lambda a: a, in_axes=ax)(x)
    with pytest.raises(ValueError, match="rank should be at least 1, but is only 0"):
        plax.vmap(lambda a: a)(1.0)


def test_inconsistent_sizes_lists_each_argument():
    with pytest.raises(ValueError, match="vmap got inconsistent sizes") as e:
        plax.vmap(lambda a, b, c: a, in_axes=(0, 0, 1))(xs(2, 3), xs(3), xs(3, 4))
    msg = str(e.value)
    assert msg.startswith("vmap got inconsistent sizes for array axes to be mapped:\n")
    assert "* one axis had size 2: axis 0 of argument a of type f32[2,3]" in msg
    assert "* one axis had size 3: axis 0 of argument b of type f32[3]" in msg
    assert "* one axis had size 4: axis 1 of argument c of type f32[3,4]" in msg
    with pytest.raises(ValueError, match=r"most axes|some axes \(2 of them\) had size 2"):
        plax.vmap(lambda a, b, c, d: a, in_axes=(0, 0, 1, 0))(xs(2, 3), xs(3), xs(3, 4), xs(2))
    with pytest.raises(ValueError, match="the `axis_size` argument was 5"):
        plax.vmap(lambda a: a, axis_size=5)(xs(2, 3))


def test_nothing_mapped_needs_axis_size():
    with pytest.raises(ValueError, match="vmap must have at least one non-None value in in_axes"):
        plax.vmap(lambda a: a, in_axes=None)(xs(2))
    with pytest.raises(ValueError, match="vmap wrapped function must be passed at least one "
                                         "argument containing an array"):
        plax.vmap(lambda: 1.0)()


def test_out_axes_errors():
    with pytest.raises(ValueError, match="at vmap out_axes, got axis spec None but output was "
                                         "batched on axis 0"):
        plax.vmap(lambda a: a, out_axes=None)(xs(2, 3))
    with pytest.raises(ValueError, match="axis 3 is out of bounds for array of dimension 2"):
        plax.vmap(lambda a: a, out_axes=3)(xs(2, 3))


def test_unmapped_host_outputs_come_back_as_arrays():
    """An output not mapped (out_axes=None) that the function returned as a host value is an
    Array, typed as asarray would type it; a float0 array (no data) stays on the host, as in
    JAX."""
    a = xs(3)
    cases = [(np.arange(2.0), np.float32, False), (1.5, np.float32, True), (2, np.int32, True),
             (np.int64(4), np.int32, False), (True, np.bool_, False)]
    for value, dtype, weak in cases:
        out = plax.vmap(lambda x, v=value: (x, v), out_axes=(0, None))(a)[1]
        assert isinstance(out, plax.Array) and out.dtype == dtype and out.weak_type == weak
        np.testing.assert_array_equal(np.asarray(out), np.asarray(value, dtype))
    zeros = np.zeros((2,), plax.dtypes.float0)
    out = plax.vmap(lambda x: zeros, out_axes=None)(a)
    assert type(out) is np.ndarray and out.dtype == plax.dtypes.float0 and out.shape == (2,)


def test_prefix_mismatch_errors():
    with pytest.raises(ValueError, match="vmap in_axes specification must be a tree prefix of "
                                         "the corresponding value"):
        plax.vmap(lambda a: a, in_axes=({"a": 0},))({"b": xs(2)})
    with pytest.raises(ValueError, match="vmap out_axes specification must be a tree prefix"):
        plax.vmap(lambda a: a, out_axes=(0, 1))(xs(2, 3))


def test_python_control_flow_on_batched_values_raises():
    with pytest.raises(plax.errors.TracerBoolConversionError,
                       match="Attempted boolean conversion of traced array"):
        plax.vmap(lambda a: a if a.sum() > 0 else -a)(xs(2, 3))


# --- nesting ----------------------------------------------------------------------------------
def test_vmap_of_vmap_with_different_axes():
    x, y = xs(3, 4, 5), xs(5, 4, seed=1)
    f = lambda a, b: a @ b
    inner = plax.vmap(f, in_axes=(1, None))      # over a's axis 1 (rows of a 2-d slice)
    outer = plax.vmap(inner, in_axes=(0, None), out_axes=1)
    out = outer(x, y[0])
    want = np.einsum("ijk,j->ki", x, y[0])
    np.testing.assert_allclose(out, want, rtol=1e-5)
    a, b = xs(3, 4, 5), xs(5, 4, 3, seed=2)
    both = plax.vmap(plax.vmap(lambda u, v: u * v, in_axes=(0, 1)), in_axes=(2, 0))
    want = np.stack([np.stack([a[i, :, o] * b[o, :, i] for i in range(3)]) for o in range(5)])
    np.testing.assert_allclose(both(a, b), want, rtol=1e-6)


def test_vmap_of_vmap_matches_loops():
    x = xs(2, 3, 4)
    out = plax.vmap(plax.vmap(lambda r: jnp.sum(r * r), in_axes=1), in_axes=0)(x)
    want = np.array([[np.sum(x[i, :, j] ** 2) for j in range(4)] for i in range(2)])
    np.testing.assert_allclose(out, want, rtol=1e-5)


# --- composition with jit -----------------------------------------------------------------------
def test_jit_of_vmap_and_vmap_of_jit():
    x, w = xs(6, 3), xs(3, 2, seed=1)
    f = lambda a, b: jnp.tanh(a @ b)
    want = np.tanh(x @ w)
    np.testing.assert_allclose(plax.jit(plax.vmap(f, in_axes=(0, None)))(x, w), want, rtol=1e-5)
    np.testing.assert_allclose(plax.vmap(plax.jit(f), in_axes=(0, None))(x, w), want, rtol=1e-5)
    np.testing.assert_allclose(plax.vmap(plax.jit(f), in_axes=(1, None), out_axes=1)(x.T, w),
                               want.T, rtol=1e-5)


def test_vmap_of_jit_batches_the_body_once():
    from plax.transforms.vmap import _batched_jaxprs as _batched_callees
    count = {"n": 0}

    @plax.jit
    def f(a):
        count["n"] += 1
        return a * 3

    g = plax.vmap(f)
    for _ in range(3):
        np.testing.assert_allclose(g(xs(4, 2)), 3 * xs(4, 2), rtol=1e-6)
    assert count["n"] == 1
    (entry,) = f._cache.values()  # (other entries of the cache may come and go with GC)
    assert len(_batched_callees.variants(entry.params["jaxpr"])) == 1
    jaxpr = str(plax.make_jaxpr(g)(xs(4, 2)))
    assert "jit[" in jaxpr and "f32[4,2]" in jaxpr


# --- composition with differentiation -------------------------------------------------------
def _loss(w, x, y):
    return jnp.sum((jnp.tanh(x @ w) - y) ** 2)


def test_per_example_gradients():
    w, x, y = xs(3, 2), xs(5, 3, seed=1), xs(5, 2, seed=2)
    per = plax.vmap(plax.grad(_loss), in_axes=(None, 0, 0))(w, x, y)
    want = np.stack([np.asarray(plax.grad(_loss)(w, x[i], y[i])) for i in range(5)])
    np.testing.assert_allclose(per, want, rtol=1e-5, atol=1e-6)
    jitted = plax.jit(plax.vmap(plax.grad(_loss), in_axes=(None, 0, 0)))(w, x, y)
    np.testing.assert_allclose(jitted, want, rtol=1e-5, atol=1e-6)


def test_grad_of_vmap():
    w, x, y = xs(3, 2), xs(5, 3, seed=1), xs(5, 2, seed=2)
    batched = lambda w: jnp.sum(plax.vmap(_loss, in_axes=(None, 0, 0))(w, x, y))
    g = plax.grad(batched)(w)
    np.testing.assert_allclose(g, plax.grad(lambda w: _loss(w, x, y))(w), rtol=1e-5)
    check_grads(batched, (w,), order=2, modes=("fwd", "rev"), eps=1e-2)


def test_jacobians_match_numeric():
    x = xs(3).astype(np.float64)
    f = lambda v: jnp.sin(v) * jnp.sum(v ** 2)
    with plax.enable_x64():
        jf, jr = plax.jacfwd(f)(x), plax.jacrev(f)(x)
        h = plax.hessian(lambda v: jnp.sum(jnp.sin(v) * v))(x)
    want = np.diag(np.cos(x)) * np.sum(x ** 2) + np.outer(np.sin(x), 2 * x)
    np.testing.assert_allclose(jf, want, rtol=1e-10)
    np.testing.assert_allclose(jr, want, rtol=1e-10)
    np.testing.assert_allclose(h, np.diag(2 * np.cos(x) - x * np.sin(x)), rtol=1e-10)


def test_vmap_of_jacrev_and_jvp():
    x = xs(4, 3)
    f = lambda v: jnp.tanh(v) * v[0]
    jac = plax.vmap(plax.jacrev(f))(x)
    want = np.stack([np.asarray(plax.jacfwd(f)(x[i])) for i in range(4)])
    np.testing.assert_allclose(jac, want, rtol=1e-5, atol=1e-6)
    t = xs(4, 3, seed=5)
    _, tan = plax.vmap(lambda p, d: plax.jvp(f, (p,), (d,)))(x, t)
    np.testing.assert_allclose(tan, np.einsum("bij,bj->bi", want, t), rtol=1e-5, atol=1e-6)


def test_vmap_over_tangents_only():
    x = xs(3)
    basis = np.eye(3, dtype=F32)
    _, cols = plax.vmap(lambda d: plax.jvp(jnp.sin, (x,), (d,)), out_axes=(None, 1))(basis)
    np.testing.assert_allclose(cols, np.diag(np.cos(x)), rtol=1e-6)


def test_custom_jvp_and_custom_vjp_under_vmap():
    @plax.custom_jvp
    def f(x):
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(p, t):
        return jnp.sin(p[0]), 2.0 * jnp.cos(p[0]) * t[0]   # deliberately 2x, to see it is used

    x = xs(4, 3)
    np.testing.assert_allclose(plax.vmap(f)(x), np.sin(x), rtol=1e-6)
    np.testing.assert_allclose(plax.vmap(plax.grad(lambda v: f(v).sum()))(x), 2 * np.cos(x),
                               rtol=1e-6)
    np.testing.assert_allclose(plax.grad(lambda v: plax.vmap(f, in_axes=1)(v).sum())(x),
                               2 * np.cos(x), rtol=1e-6)

    @plax.custom_vjp
    def g(x, y):
        return x * y

    g.defvjp(lambda x, y: (x * y, (x, y)),
             lambda res, ct: (3 * ct * res[1], jnp.sum(5 * ct * res[0])))
    y = F32(2.0)
    np.testing.assert_allclose(plax.vmap(g, in_axes=(0, None))(x, y), 2 * x, rtol=1e-6)
    gx, gy = plax.grad(lambda a, b: plax.vmap(g, in_axes=(0, None))(a, b).sum(),
                       argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, np.full_like(x, 6.0))
    np.testing.assert_allclose(gy, 5 * x.sum(), rtol=1e-5)
    gx, gy = plax.vmap(plax.grad(lambda a, b: g(a, b).sum(), argnums=(0, 1)),
                       in_axes=(0, None))(x, y)
    np.testing.assert_allclose(gy, 5 * x.sum(1), rtol=1e-5)


def test_checkpoint_under_vmap():
    f = plax.checkpoint(lambda v: jnp.sin(jnp.sin(v)))
    x = xs(4, 3)
    g = plax.vmap(plax.grad(lambda v: f(v).sum()))(x)
    np.testing.assert_allclose(g, np.cos(np.sin(x)) * np.cos(x), rtol=1e-5)
    g2 = plax.grad(lambda v: plax.vmap(f)(v).sum())(x)
    np.testing.assert_allclose(g2, g, rtol=1e-6)


def test_make_jaxpr_of_vmap_keeps_batch_where_it_is():
    jaxpr = str(plax.make_jaxpr(plax.vmap(lambda a: jnp.sin(a) * 2, in_axes=1, out_axes=1))(
        xs(3, 4)))
    assert "transpose" not in jaxpr
    assert "sin" in jaxpr


def test_checkpoint_name_and_optimization_barrier_under_vmap():
    from plax.ad_checkpoint import checkpoint_name
    x = xs(4, 3)
    out = plax.vmap(lambda v: checkpoint_name(jnp.sin(v), "s") * 2, in_axes=1)(x.T)
    np.testing.assert_allclose(out, 2 * np.sin(x), rtol=1e-6)
    a, b = plax.vmap(lambda u, v: lax.optimization_barrier((u, v)), in_axes=(1, None))(
        x.T, x[0])
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, np.broadcast_to(x[0], (4, 3)))
    policy = plax.checkpoint_policies.save_only_these_names("s")
    f = plax.checkpoint(lambda v: jnp.sum(checkpoint_name(jnp.sin(v), "s") ** 2), policy=policy)
    g = plax.vmap(plax.grad(f))(x)
    np.testing.assert_allclose(g, 2 * np.sin(x) * np.cos(x), rtol=1e-5)


def test_integer_and_boolean_values_batch():
    i = np.arange(12, dtype=np.int32).reshape(4, 3)
    out = plax.vmap(lambda v: (v * 2 + 1, v > 5))(i)
    np.testing.assert_array_equal(out[0], i * 2 + 1)
    np.testing.assert_array_equal(out[1], i > 5)


def test_spmd_axis_name_is_accepted_and_checked():
    x = xs(4, 3)
    np.testing.assert_allclose(plax.vmap(jnp.sin, spmd_axis_name="data")(x), np.sin(x),
                               rtol=1e-6)
    with pytest.raises(TypeError, match="spmd_axis_name"):
        plax.vmap(jnp.sin, spmd_axis_name=3)


def test_outputs_are_arrays_even_when_passed_through():
    x = xs(3, 2)
    out = plax.vmap(lambda a: a)(x)
    assert isinstance(out, plax.Array)
    np.testing.assert_array_equal(out, x)
    a, b = plax.vmap(lambda u, v: (u, v), in_axes=(0, None), out_axes=(1, None))(x, x[0])
    assert isinstance(a, plax.Array) and isinstance(b, plax.Array)
    np.testing.assert_array_equal(a, x.T)


def test_leaked_batch_tracer_is_caught():
    box = []

    def f(a):
        box.append(a)
        return a * 2

    plax.vmap(f)(xs(3, 2))
    with pytest.raises(plax.errors.UnexpectedTracerError, match="vmap\\(f\\)"):
        box[0] + 1


def test_custom_rules_closing_over_batched_values_under_grad_of_vmap():
    """The rules close over ``s``, batched by the same vmap the rules are batched for."""
    x, scales = xs(2, 3), np.array([3.0, 5.0], F32)
    want = 2 * np.cos(x) * scales[:, None]

    def with_jvp(v, s):
        @plax.custom_jvp
        def g(z):
            return jnp.sin(z) * s

        @g.defjvp
        def g_jvp(p, t):
            return g(p[0]), 2 * jnp.cos(p[0]) * s * t[0]
        return g(v).sum()

    def with_vjp(v, s):
        @plax.custom_vjp
        def g(z):
            return jnp.sin(z) * s

        g.defvjp(lambda z: (g(z), jnp.cos(z)), lambda c, ct: (2 * c * s * ct,))
        return g(v).sum()

    for f in (with_jvp, with_vjp):
        outer = plax.grad(lambda v: plax.vmap(f)(v, scales).sum())
        np.testing.assert_allclose(outer(x), want, rtol=1e-5)
        np.testing.assert_allclose(plax.jit(outer)(x), want, rtol=1e-5)
        np.testing.assert_allclose(plax.vmap(plax.grad(f))(x, scales), want, rtol=1e-5)


def test_broadcasts_keep_a_leading_batch_leading():
    j = str(plax.make_jaxpr(plax.vmap(lambda a: jnp.outer(a, a)))(xs(4, 3)))
    assert "transpose" not in j
    np.testing.assert_allclose(plax.vmap(lambda a: jnp.outer(a, a))(xs(4, 3)),
                               np.einsum("bi,bj->bij", xs(4, 3), xs(4, 3)), rtol=1e-6)
