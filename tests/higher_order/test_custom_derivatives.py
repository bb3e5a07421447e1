"""custom_jvp, custom_vjp and closure_convert: rules used by jvp/grad/jit, to higher order."""
from functools import partial

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.test_util import check_grads
from plax.higher_order.custom_derivatives import CustomVJPPrimal, SymbolicZero


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# --- custom_jvp ----------------------------------------------------------------------------
@plax.custom_jvp
def log1pexp(x):
    return jnp.log(1. + jnp.exp(x))


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    x, = primals
    t, = tangents
    return log1pexp(x), t * (1. - 1. / (1. + jnp.exp(x)))


@plax.custom_jvp
def f_sin(x, y):
    return jnp.sin(x) * y


@f_sin.defjvp
def f_sin_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    return f_sin(x, y), jnp.cos(x) * tx * y + jnp.sin(x) * ty


def test_custom_jvp_value_and_stable_gradient():
    close(log1pexp(0.), np.log(2.))
    # Differentiating the naive formula at 100 gives nan (inf/inf); the rule gives 1.
    close(plax.grad(log1pexp)(100.), 1.)
    for x in (-3., 0., 2.5):
        close(plax.grad(log1pexp)(x), 1 / (1 + np.exp(-x)))


def test_custom_jvp_grad_of_grad_differentiates_the_rule():
    for x in (-1., 0., 2.):
        s = 1 / (1 + np.exp(-x))
        close(plax.grad(plax.grad(log1pexp))(x), s * (1 - s))
    close(plax.grad(plax.grad(f_sin))(1., 2.), -np.sin(1.) * 2)


def test_custom_jvp_two_args_jvp_and_grad():
    out, t = plax.jvp(f_sin, (1., 2.), (1., 0.5))
    close(out, np.sin(1.) * 2)
    close(t, np.cos(1.) * 2 + np.sin(1.) * 0.5)
    gx, gy = plax.grad(f_sin, (0, 1))(1., 2.)
    close(gx, np.cos(1.) * 2)
    close(gy, np.sin(1.))


def test_custom_jvp_rule_is_used_not_the_function():
    @plax.custom_jvp
    def f(x):
        return jnp.sin(x)
    f.defjvp(lambda p, t: (f(p[0]), 10. * t[0]))
    close(plax.grad(f)(0.3), 10.)
    close(plax.jvp(f, (0.3,), (2.,))[1], 20.)
    close(plax.jacfwd(f)(jnp.ones(3)), 10 * np.eye(3))
    close(plax.jacrev(f)(jnp.ones(3)), 10 * np.eye(3))
    y, f_lin = plax.linearize(f, 0.3)
    close(y, np.sin(0.3))
    close(f_lin(1.5), 15.)


def test_custom_jvp_check_grads():
    check_grads(log1pexp, (np.float32(0.7),), order=2, modes=("fwd", "rev"), atol=1e-2,
                rtol=1e-2)


def test_custom_jvp_under_jit_and_jaxpr():
    close(plax.jit(f_sin)(1., 2.), np.sin(1.) * 2)
    close(plax.jit(plax.grad(f_sin))(1., 2.), np.cos(1.) * 2)
    close(plax.grad(plax.jit(f_sin))(1., 2.), np.cos(1.) * 2)
    text = str(plax.make_jaxpr(f_sin)(1., 2.))
    assert "custom_jvp_call[" in text
    assert "jvp=f_sin_jvp" in text and "symbolic_zeros=False" in text and "sin" in text


def test_custom_jvp_defjvps():
    @plax.custom_jvp
    def q(x, y):
        return x * y
    q.defjvps(lambda tx, ans, x, y: tx * y * 2., None)
    gx, gy = plax.grad(q, (0, 1))(2., 3.)
    close(gx, 6.)
    close(gy, 0.)
    close(plax.jvp(q, (2., 3.), (1., 1.))[1], 6.)

    @plax.custom_jvp
    def r(x, y):
        return jnp.sin(x) + y
    r.defjvps(lambda t, ans, x, y: jnp.cos(x) * t, lambda t, ans, x, y: 3. * t)
    close(plax.grad(r, (0, 1))(0.5, 1.), (np.cos(0.5), 3.))


def test_custom_jvp_nondiff_argnums():
    @partial(plax.custom_jvp, nondiff_argnums=(0,))
    def app(fn, x):
        return fn(x)

    @app.defjvp
    def app_jvp(fn, primals, tangents):
        return app(fn, primals[0]), 2.0 * tangents[0]

    close(app(jnp.sin, 1.), np.sin(1.))
    close(plax.grad(lambda x: app(jnp.sin, x))(1.), 2.)
    close(plax.jit(plax.grad(lambda x: app(jnp.sin, x)))(1.), 2.)


def test_custom_jvp_pytrees_and_kwargs():
    @plax.custom_jvp
    def f(d, scale=1.):
        return {"p": d["a"] * d["b"] * scale, "q": d["a"]}

    @f.defjvp
    def f_jvp(primals, tangents):
        d, scale = primals
        td, ts = tangents
        out = f(d, scale)
        return out, {"p": (td["a"] * d["b"] + d["a"] * td["b"]) * scale, "q": td["a"]}

    g = plax.grad(lambda d: f(d, scale=2.)["p"])({"a": 3., "b": 4.})
    close(g["a"], 8.)
    close(g["b"], 6.)


def test_custom_jvp_symbolic_zeros():
    seen = []

    @plax.custom_jvp
    def f(x, y):
        return x * y

    @partial(f.defjvp, symbolic_zeros=True)
    def f_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        seen.append((type(tx), type(ty)))
        out_t = SymbolicZero(plax.core.avals.ShapedArray((), np.dtype("float32")))
        if not isinstance(tx, SymbolicZero):
            out_t = tx * y
        if not isinstance(ty, SymbolicZero):
            out_t = ty * x if isinstance(out_t, SymbolicZero) else out_t + ty * x
        return f(x, y), out_t

    close(plax.grad(lambda x: f(x, 3.))(2.), 3.)
    assert seen[-1][1] is SymbolicZero
    close(plax.jvp(lambda y: f(2., y), (3.,), (1.,))[1], 2.)
    assert seen[-1][0] is SymbolicZero


def test_custom_jvp_integer_argument_gets_float0_zero():
    @plax.custom_jvp
    def f(x, n):
        return x * n

    @f.defjvp
    def f_jvp(primals, tangents):
        x, n = primals
        tx, tn = tangents
        assert tn.dtype == plax.float0
        return f(x, n), tx * n

    close(plax.grad(f)(2., 3), 3.)


def test_custom_jvp_errors():
    with pytest.raises(AttributeError, match="No JVP defined for custom_jvp function"):
        plax.custom_jvp(lambda x: x)(1.)

    @plax.custom_jvp
    def w(x):
        return x

    w.defjvp(lambda p, t: (p[0], jnp.ones(3)))
    with pytest.raises(TypeError, match="corresponding shapes and dtypes"):
        plax.jvp(w, (1.,), (1.,))
    w.defjvp(lambda p, t: (p[0], 1))
    with pytest.raises(TypeError, match="corresponding shapes and dtypes"):
        plax.jvp(w, (1.,), (1.,))
    w.defjvp(lambda p, t: ((p[0], p[0]), t[0]))
    with pytest.raises(TypeError, match=r"equal container \(pytree\) structures"):
        plax.jvp(w, (1.,), (1.,))
    w.defjvp(lambda p, t: p[0])
    with pytest.raises(TypeError, match="must produce a pair"):
        plax.jvp(w, (1.,), (1.,))
    w.defjvp(lambda p, t: (p[0] * jnp.ones(2), t[0] * jnp.ones(2)))
    # The rule's primal output is checked against the function's once the function has been
    # traced (under jit); an eager jvp never runs the function, so it cannot check (as in JAX).
    with pytest.raises(TypeError, match="same shapes and dtypes"):
        plax.jvp(plax.jit(w), (1.,), (1.,))
    close(plax.jvp(w, (1.,), (1.,))[0], np.ones(2))


def test_custom_jvp_closing_over_differentiated_value_raises():
    def outer(x):
        @plax.custom_jvp
        def h(y):
            return x * y
        h.defjvp(lambda p, t: (x * p[0], x * t[0]))
        return h(x)

    with pytest.raises(TypeError, match="closure_convert"):
        plax.grad(outer)(2.)
    close(plax.jit(outer)(2.), 4.)  # closing over a jit tracer is fine


def test_nested_grads_no_perturbation_confusion():
    close(plax.grad(lambda x: plax.grad(lambda y: f_sin(x, y))(x))(1.), np.cos(1.))


# --- custom_vjp ----------------------------------------------------------------------------
@plax.custom_vjp
def clip_gradient(x):
    return x


clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1., 1.),))


@plax.custom_vjp
def g_sin(x, y):
    return jnp.sin(x) * y


def g_sin_fwd(x, y):
    return g_sin(x, y), {"c": jnp.cos(x), "s": (jnp.sin(x), y)}


def g_sin_bwd(res, ct):
    return (res["c"] * res["s"][1] * ct, res["s"][0] * ct)


g_sin.defvjp(g_sin_fwd, g_sin_bwd)


def test_custom_vjp_clip_gradient():
    close(clip_gradient(3.), 3.)
    close(plax.grad(lambda x: (clip_gradient(x) * 5.).sum())(jnp.ones(3)), np.ones(3))
    close(plax.grad(lambda x: clip_gradient(x * 5.).sum())(jnp.ones(3)), 5 * np.ones(3))
    close(plax.grad(lambda x: (clip_gradient(x) * 0.5).sum())(jnp.ones(3)), 0.5 * np.ones(3))


def test_custom_vjp_residual_pytree_and_values():
    close(g_sin(1., 2.), np.sin(1.) * 2)
    gx, gy = plax.grad(g_sin, (0, 1))(1., 2.)
    close(gx, np.cos(1.) * 2)
    close(gy, np.sin(1.))
    out, f_vjp = plax.vjp(g_sin, 1., 2.)
    close(f_vjp(np.float32(3.)), (3 * np.cos(1.) * 2, 3 * np.sin(1.)))


def test_custom_vjp_bwd_is_used():
    @plax.custom_vjp
    def f(x):
        return jnp.sin(x)
    f.defvjp(lambda x: (f(x), x), lambda x, g: (7. * g,))
    close(plax.grad(f)(0.3), 7.)
    close(plax.jacrev(f)(jnp.ones(2)), 7 * np.eye(2))


def test_custom_vjp_under_jit_and_jaxpr():
    close(plax.jit(g_sin)(1., 2.), np.sin(1.) * 2)
    close(plax.jit(plax.grad(g_sin))(1., 2.), np.cos(1.) * 2)
    close(plax.grad(plax.jit(g_sin))(1., 2.), np.cos(1.) * 2)
    close(plax.jit(plax.value_and_grad(lambda x: (clip_gradient(x) * 5.).sum()))(jnp.ones(3))[1],
          np.ones(3))
    text = str(plax.make_jaxpr(g_sin)(1., 2.))
    assert "custom_vjp_call[" in text
    assert "fwd=g_sin_fwd" in text and "bwd=g_sin_bwd" in text


def test_custom_vjp_grad_of_grad():
    # Second order differentiates through fwd and bwd: d/dx (cos(x) * y) = -sin(x) * y.
    close(plax.grad(plax.grad(g_sin))(1., 2.), -np.sin(1.) * 2)
    close(plax.grad(lambda x: plax.grad(lambda y: g_sin(x, y))(x))(1.), np.cos(1.))


def test_custom_vjp_forward_over_reverse():
    @plax.custom_vjp
    def f(x):
        return jnp.sin(x)
    f.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, ct: (c * ct,))
    x = np.array([0.3, 0.5], np.float32)
    close(plax.hessian(lambda x: f(x).sum())(x), np.diag(-np.sin(x)))
    close(plax.jvp(plax.grad(f), (0.3,), (1.,))[1], -np.sin(0.3))


def test_custom_vjp_nondiff_argnums():
    @partial(plax.custom_vjp, nondiff_argnums=(1,))
    def scale(x, k):
        return x * k

    scale.defvjp(lambda x, k: (x * k, None), lambda k, res, g: (g * k * 10,))
    close(scale(2., 3.), 6.)
    close(plax.grad(scale)(1., 3.), 30.)
    close(plax.jit(plax.grad(scale), static_argnums=1)(1., 3.), 30.)


def test_custom_vjp_pytree_args_int_arg_and_kwargs():
    @plax.custom_vjp
    def f(d, n):
        return {"a": d["x"] * d["y"] * n, "n": n}

    def fwd(d, n):
        return f(d, n), (d["x"], d["y"], n)

    def bwd(res, ct):
        x, y, n = res
        return ({"x": ct["a"] * y * n, "y": ct["a"] * x * n}, None)

    f.defvjp(fwd, bwd)
    g = plax.grad(lambda d: f(d, 2)["a"])({"x": 2., "y": 5.})
    close(g["x"], 10.)
    close(g["y"], 4.)
    g = plax.grad(lambda d: f(d, n=2)["a"])({"x": 2., "y": 5.})
    close(g["x"], 10.)


def test_custom_vjp_symbolic_zeros():
    seen = []

    @plax.custom_vjp
    def f(x, y):
        return x * y

    def fwd(x, y):
        seen.append((x, y))
        return f(x.value, y.value), (x.value, y.value)

    f.defvjp(fwd, lambda res, g: (g * res[1], None), symbolic_zeros=True)
    close(plax.grad(f)(2., 3.), 3.)
    x, y = seen[-1]
    assert isinstance(x, CustomVJPPrimal) and x.perturbed and not y.perturbed


def test_custom_vjp_bwd_returning_none_gives_zero():
    g_sin.defvjp(g_sin_fwd, lambda res, ct: (None, res["s"][0] * ct))
    try:
        close(plax.grad(g_sin, (0, 1))(1., 2.), (0., np.sin(1.)))
    finally:
        g_sin.defvjp(g_sin_fwd, g_sin_bwd)


@pytest.mark.parametrize("bwd, err, match", [
    (lambda res, ct: ct, TypeError, r"same container \(pytree\) structure as the args tuple"),
    (lambda res, ct: (ct,), TypeError, r"must produce a tuple of length equal to the number"),
    (lambda res, ct: (ct, jnp.ones(3)), ValueError, r"at output\[1\] the bwd rule produced an "
                                                     r"output of type f32\[3\]"),
    (lambda res, ct: ({"a": ct}, ct), TypeError, r"same container \(pytree\) structure"),
])
def test_custom_vjp_bad_bwd_outputs(bwd, err, match):
    @plax.custom_vjp
    def f(x, y):
        return x * y
    f.defvjp(lambda x, y: (x * y, (x, y)), bwd)
    with pytest.raises(err, match=match):
        plax.grad(f)(1., 2.)


def test_custom_vjp_bad_fwd_outputs():
    @plax.custom_vjp
    def f(x):
        return x
    f.defvjp(lambda x: x, lambda r, g: (g,))
    with pytest.raises(TypeError, match="must produce a pair"):
        plax.grad(f)(1.)
    f.defvjp(lambda x: ((x, x), None), lambda r, g: (g,))
    # Checked against the function once it has been traced (under jit); eager grad runs only
    # fwd, whose tuple output is then not a scalar (as in JAX).
    with pytest.raises(TypeError, match=r"equal container \(pytree\) structures"):
        plax.grad(plax.jit(f))(1.)
    with pytest.raises(TypeError, match="Gradient only defined for scalar-output functions"):
        plax.grad(f)(1.)
    f.defvjp(lambda x: (x, "residual"), lambda r, g: (g,))
    with pytest.raises(TypeError, match="not an array"):
        plax.grad(f)(1.)


def test_custom_vjp_forward_mode_raises():
    msg = r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function."
    with pytest.raises(TypeError, match=msg):
        plax.jvp(g_sin, (1., 2.), (1., 1.))
    with pytest.raises(TypeError, match=msg):
        plax.jit(lambda x: plax.jvp(g_sin, (x, 2.), (1., 1.))[1])(1.)
    with pytest.raises(TypeError, match=msg):
        plax.jacfwd(clip_gradient)(jnp.ones(2))
    # No tangent flows in: nothing to differentiate, no error.
    close(plax.jvp(lambda x: g_sin(2., 3.) + x, (1.,), (1.,))[1], 1.)


def test_custom_vjp_errors():
    with pytest.raises(AttributeError, match="No VJP defined for custom_vjp function"):
        plax.custom_vjp(lambda x: x)(1.)

    def outer(x):
        @plax.custom_vjp
        def h(y):
            return x * y
        h.defvjp(lambda y: (x * y, None), lambda r, g: (g * x,))
        return h(x)

    with pytest.raises(TypeError, match="closure_convert"):
        plax.grad(outer)(2.)


# --- closure_convert ---------------------------------------------------------------------
def test_closure_convert_hoists_traced_values():
    hoisted = []

    def f(x):
        c = np.float32(3.)
        h, consts = plax.closure_convert(lambda y: y * c * x, x)
        hoisted.append(len(consts))
        return h(x, *consts)

    close(f(2.), 12.)
    close(plax.grad(f)(2.), 12.)  # d/dx 3x^2
    # Only the traced x is hoisted (under grad); the NumPy constant stays inside.
    assert hoisted == [0, 1]


def test_closure_convert_without_tracers():
    h, consts = plax.closure_convert(lambda y: y * 3., 2.)
    assert consts == []
    close(h(2.), 6.)


def test_closure_convert_with_custom_vjp():
    # The function argument is static, the hoisted consts differentiable.
    call2 = plax.custom_vjp(lambda fn, x, *cs: fn(x, *cs), nondiff_argnums=(0,))
    call2.defvjp(lambda fn, x, *cs: (fn(x, *cs), (x, cs)),
                 lambda fn, res, g: (g * res[1][0], g * res[0]))

    def loss(a):
        h, consts = plax.closure_convert(lambda x: x * a, 2.)
        return call2(h, 2., *consts)

    close(loss(5.), 10.)
    close(plax.grad(loss)(5.), 2.)


# --- Python control flow on concrete values (JAX runs the functions; staging traces them) ----
@plax.custom_jvp
def kinked(x):
    """sin(x) for x > 0, else x; its rule says 2 for x <= 0 (so the rule is seen at work)."""
    kinked.calls.append("fun")
    if x > 0:
        return jnp.sin(x)
    return x


@kinked.defjvp
def kinked_jvp(primals, tangents):
    kinked.calls.append("rule")
    x, = primals
    t, = tangents
    if x > 0:
        return kinked(x), jnp.cos(x) * t
    return kinked(x), 2. * t


kinked.calls = []


def d_kinked(x):
    return np.cos(x) if x > 0 else 2.


@pytest.mark.parametrize("x", [1., -1.5])
@pytest.mark.parametrize("how, want, runs", [
    ("call", lambda x: np.sin(x) if x > 0 else x, ["fun"]),
    ("grad", d_kinked, ["rule", "fun"]),
    ("jvp", lambda x: 3. * d_kinked(x), ["rule", "fun"]),
    ("vjp", lambda x: 0.5 * d_kinked(x), ["rule", "fun"]),
    ("linearize", lambda x: 2. * d_kinked(x), ["rule", "fun"]),
    ("grad of grad", lambda x: -np.sin(x) if x > 0 else 0., ["rule", "rule", "fun"]),
    ("hessian", lambda x: -np.sin(x) if x > 0 else 0., ["rule", "rule", "fun"]),
])
def test_custom_jvp_branches_on_concrete_values(x, how, want, runs):
    run = {"call": lambda: kinked(x),
           "grad": lambda: plax.grad(kinked)(x),
           "jvp": lambda: plax.jvp(kinked, (x,), (3.,))[1],
           "vjp": lambda: plax.vjp(kinked, x)[1](0.5)[0],
           "linearize": lambda: plax.linearize(kinked, x)[1](2.),
           "grad of grad": lambda: plax.grad(plax.grad(kinked))(x),
           "hessian": lambda: plax.hessian(kinked)(x)}[how]
    kinked.calls.clear()
    close(run(), want(x))
    # The function runs only where its value is needed; differentiation runs the rule.
    assert kinked.calls == runs


@pytest.mark.parametrize("stage", [
    plax.jit(kinked), plax.jit(plax.grad(kinked)), plax.grad(plax.jit(kinked)),
    plax.make_jaxpr(kinked), plax.checkpoint(kinked),
    lambda x: plax.vmap(kinked)(jnp.ones(2) * x),  # the mapped value is a batched tracer
    lambda x: plax.eval_shape(kinked, x),
    lambda x: plax.lax.scan(lambda c, v: (c, kinked(v)), 0., jnp.ones(2) * x),
], ids=["jit", "jit_of_grad", "grad_of_jit", "make_jaxpr", "checkpoint", "vmap", "eval_shape",
        "scan"])
def test_custom_jvp_branching_on_a_tracer_still_fails_under_staging(stage):
    with pytest.raises(plax.errors.TracerBoolConversionError, match=r"bool\[\]"):
        stage(1.)


@plax.custom_jvp
def signed_scale(x, y):
    if y > 0:
        return x * y
    return -x * y


@signed_scale.defjvp
def signed_scale_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    s = 1. if y > 0 else -1.
    return signed_scale(x, y), s * (tx * y + x * ty)


def test_custom_jvp_vmap_keeps_unmapped_arguments_concrete():
    x = np.array([1., 2., 3.], np.float32)
    close(plax.vmap(signed_scale, in_axes=(0, None))(x, -2.), 2 * x)
    gx, gy = plax.vmap(plax.grad(signed_scale, argnums=(0, 1)), in_axes=(0, None))(x, 2.)
    close(gx, np.full(3, 2.))
    close(gy, x)
    close(plax.grad(lambda v: plax.vmap(signed_scale, in_axes=(0, None))(v, -2.).sum())(x),
          np.full(3, 2.))
    out, t = plax.jvp(lambda v: plax.vmap(signed_scale, in_axes=(0, None))(v, 2.), (x,),
                      (np.ones(3, np.float32),))
    close(out, 2 * x)
    close(t, np.full(3, 2.))
    # A branch on the mapped argument sees a batched tracer, as in JAX.
    with pytest.raises(plax.errors.TracerBoolConversionError, match=r"bool\[\]"):
        plax.vmap(signed_scale, in_axes=(None, 0))(2., x)
    # Nothing mapped: the output stays unbatched (out_axes=None is allowed).
    close(plax.vmap(kinked, in_axes=None, axis_size=2, out_axes=None)(1.), np.sin(1.))


def test_custom_jvp_only_the_rule_branches():
    @plax.custom_jvp
    def branchy_abs(x):
        if x > 0:
            return x
        return -x

    branchy_abs.defjvp(lambda p, t: (jnp.abs(p[0]), jnp.sign(p[0]) * t[0]))
    # Under jit, grad and jvp run the rule on tracers; the function is never traced.
    close(plax.jit(plax.grad(branchy_abs))(-2.), -1.)
    close(plax.jit(lambda x: plax.jvp(branchy_abs, (x,), (1.,))[1])(2.), 1.)
    close(plax.vmap(plax.grad(branchy_abs))(jnp.array([2., -1.])), [1., -1.])
    close(plax.grad(lambda v: plax.vmap(branchy_abs)(v).sum())(jnp.array([2., -1.])), [1., -1.])
    with pytest.raises(plax.errors.TracerBoolConversionError, match=r"bool\[\]"):
        plax.grad(plax.jit(branchy_abs))(2.)  # jit stages the function itself


def test_custom_vjp_fwd_and_bwd_branch_on_concrete_values():
    @partial(plax.custom_vjp, nondiff_argnames=("mode",))
    def square(x, mode="plain"):
        if mode == "plain":
            return x * x
        return x

    def square_fwd(x, mode="plain"):
        return square(x, mode), (x, x > 0)

    def square_bwd(mode, res, g):
        x, positive = res
        scale = 10. if positive else 1.  # a Python branch on a concrete residual
        return (scale * 2 * x * g,)

    square.defvjp(square_fwd, square_bwd)
    assert square.nondiff_argnums == (1,)
    close(square(3.), 9.)
    close(square(3., "id"), 3.)
    close(plax.grad(square)(3.), 60.)
    close(plax.grad(square)(-3.), -6.)
    close(plax.vjp(square, 3.)[1](0.5)[0], 30.)
    with pytest.raises(plax.errors.TracerBoolConversionError, match=r"bool\[\]"):
        plax.jit(plax.grad(square))(3.)

    @plax.custom_vjp
    def gate(x):
        return jnp.where(x > 0, x, 0.)

    def gate_bwd(x, g):
        if g > 0:  # the cotangent is concrete too
            return (2. * g,)
        return (g,)

    gate.defvjp(lambda x: (gate(x), x), gate_bwd)
    close(plax.vjp(gate, 1.)[1](-1.)[0], -1.)
    close(plax.vjp(gate, 1.)[1](1.)[0], 2.)
    close(plax.vmap(plax.grad(gate))(jnp.ones(2)), [2., 2.])  # the seed is not batched

    @plax.custom_vjp
    def g(x, y):
        return x * y if y > 0 else -x * y

    g.defvjp(lambda x, y: (g(x, y), (x, y, 1. if y > 0 else -1.)),
             lambda r, ct: (r[2] * r[1] * ct, r[2] * r[0] * ct))
    x = np.array([1., 2., 3.], np.float32)
    close(plax.vmap(g, in_axes=(0, None))(x, -2.), 2 * x)
    gx, gy = plax.grad(lambda a, b: plax.vmap(g, in_axes=(0, None))(a, b).sum(),
                       argnums=(0, 1))(x, -2.)
    close(gx, np.full(3, 2.))
    close(gy, -x.sum())  # the unmapped input's cotangent sums over the batch


@pytest.mark.parametrize("decorate", [plax.custom_jvp, plax.custom_vjp])
def test_nondiff_argnums_at_its_default_and_nondiff_argnames(decorate):
    def power(x, n=2):
        return x ** n

    by_num = decorate(power, nondiff_argnums=(1,))
    by_name = decorate(power, nondiff_argnames=("n",))
    assert by_num.nondiff_argnums == by_name.nondiff_argnums == (1,)
    # Names that are no positional parameter add nothing (as in JAX); both kinds combine.
    assert decorate(power, nondiff_argnames=("k",)).nondiff_argnums == ()
    assert decorate(lambda a, b, c: a, nondiff_argnums=(2,),
                    nondiff_argnames="b").nondiff_argnums == (1, 2)
    for f in (by_num, by_name):
        if decorate is plax.custom_jvp:
            f.defjvp(lambda n, p, t: (f(p[0], n), n * p[0] ** (n - 1) * t[0]))
        else:
            f.defvjp(lambda x, n=2: (f(x, n), x), lambda n, x, g: (n * x ** (n - 1) * g,))
        close(f(3.), 9.)
        close(plax.grad(f)(3.), 6.)  # n left at its default
        close(plax.grad(f)(3., 3), 27.)
        close(plax.grad(lambda x: f(x, n=3))(3.), 27.)
        close(plax.jit(plax.grad(f))(3.), 6.)


def test_traced_nondiff_arguments():
    times = plax.custom_jvp(lambda x, n: x * n, nondiff_argnums=(1,))
    times.defjvp(lambda n, p, t: (times(p[0], n), n * t[0]))
    # custom_jvp stops the gradient through a nondiff argument: d/dx (x * stop(x)) = x.
    close(plax.grad(lambda x: times(x, x))(2.), 2.)
    close(plax.jit(plax.grad(lambda x: times(x, x)))(2.), 2.)
    close(plax.grad(plax.grad(lambda x: times(x, x) * x))(2.), 4.)  # d2/dx2 of x^2 * stop(x)
    close(plax.vmap(lambda x: times(x, x))(jnp.array([2., 3.])), [4., 9.])

    vtimes = plax.custom_vjp(lambda x, n: x * n, nondiff_argnums=(1,))
    vtimes.defvjp(lambda x, n: (vtimes(x, n), None), lambda n, r, g: (n * g,))
    close(plax.grad(lambda x: vtimes(x, 3.))(2.), 3.)
    for transform in (plax.grad, plax.jit, plax.vmap):
        with pytest.raises(plax.errors.UnexpectedTracerError,
                           match="Found a JAX Tracer object passed as an argument to a "
                                 "custom_vjp function in a position indicated by nondiff_argnums"):
            transform(lambda x: vtimes(x, x))(jnp.ones(()) if transform is not plax.vmap
                                              else jnp.ones(2))


def test_custom_jvp_argument_resolution_errors():
    def kw_only(x, *, s=2.):
        return x * s

    f = plax.custom_jvp(kw_only)
    f.defjvp(lambda p, t: (kw_only(*p), 2. * t[0]))
    close(f(3.), 6.)  # a keyword-only parameter keeps its default
    with pytest.raises(TypeError, match="could not be resolved to positional-only arguments: "
                                        "the following keyword arguments.*: s"):
        f(3., s=1.)
    with pytest.raises(TypeError, match="kinked could not be resolved to positional-only"):
        kinked(1., 2.)
    p = plax.custom_jvp(partial(lambda a, b: a * b, 2.))
    p.defjvp(lambda pr, t: (pr[0] * 2., t[0] * 2.))
    close(p(3.), 6.)
    with pytest.raises(TypeError, match="function <lambda> could not be resolved"):
        p(b=3.)


def test_closing_over_a_differentiated_value_is_also_an_unexpected_tracer_error():
    def outer(x):
        @plax.custom_jvp
        def h(y):
            return x * y
        h.defjvp(lambda p, t: (x * p[0], x * t[0]))
        return h(3.)  # no tangent flows in through the argument: the function itself runs

    with pytest.raises(plax.errors.UnexpectedTracerError, match="closure_convert"):
        plax.grad(outer)(2.)
    # Closing over a value batched by the same vmap is fine, under jit too.
    close(plax.vmap(outer)(jnp.array([1., 2.])), [3., 6.])
    close(plax.jit(plax.vmap(outer))(jnp.array([1., 2.])), [3., 6.])


def test_custom_derivatives_module():
    import plax.custom_derivatives as cd
    assert plax.custom_derivatives is cd
    assert cd.custom_jvp is plax.custom_jvp and cd.custom_vjp is plax.custom_vjp
    assert cd.SymbolicZero is SymbolicZero and cd.CustomVJPPrimal is CustomVJPPrimal
    assert cd.custom_gradient is plax.custom_gradient
    assert "custom_jvp_call[" in str(plax.make_jaxpr(log1pexp)(1.))
    assert cd.custom_jvp_call_p.name == "custom_jvp_call"


def test_custom_vjp_bwd_none_placeholders_line_up_with_the_arguments():
    """A bwd output may hold None where the argument holds None (equinox partitions trees
    that way) and None for the zero cotangent of a whole subtree: each real cotangent must
    still meet its own argument leaf (a None counted as a leaf once shifted them)."""
    @plax.custom_vjp
    def f(tree, scale):
        return tree["a"].sum() * scale + tree["b"][1].sum()

    def fwd(tree, scale):
        return f(tree, scale), (tree, scale)

    def bwd(res, g):
        tree, scale = res
        # None where the argument has None (tree["b"][0]); None for all of `scale`.
        return {"a": g * scale * jnp.ones_like(tree["a"]),
                "b": (None, 2.0 * g * jnp.ones_like(tree["b"][1]))}, None

    f.defvjp(fwd, bwd)
    tree = {"a": jnp.ones((5, 2)), "b": (None, jnp.ones(3))}
    g_tree, g_scale = plax.grad(f, argnums=(0, 1))(tree, 3.0)
    np.testing.assert_allclose(g_tree["a"], np.full((5, 2), 3.0))
    np.testing.assert_allclose(g_tree["b"][1], np.full(3, 2.0))
    assert g_tree["b"][0] is None and float(g_scale) == 0.0
