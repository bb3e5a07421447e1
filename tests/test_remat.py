"""checkpoint / remat: same derivatives, recomputation instead of storage, policies."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.ad_checkpoint import checkpoint_name
from plax.core.jaxpr import ClosedJaxpr, subjaxprs


def f(x):
    return jnp.sin(jnp.sin(x)) * 2.0


def eqns(jaxpr):
    """The equations of ``jaxpr`` (a Jaxpr or ClosedJaxpr) and, recursively, those of the
    jaxprs in their params (a jit's or a checkpoint's body, cond branches, ...)."""
    jaxpr = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    for e in jaxpr.eqns:
        yield e
        for sub in subjaxprs(e.params):
            yield from eqns(sub)


def count(jaxpr, name):
    """How many equations of ``name`` run, nested jaxprs included."""
    return sum(e.primitive.name == name for e in eqns(jaxpr))


def test_checkpoint_values_and_derivatives_match():
    g = plax.checkpoint(f)
    x = 0.7
    assert float(g(x)) == pytest.approx(float(f(x)))
    assert float(plax.grad(g)(x)) == pytest.approx(float(plax.grad(f)(x)), rel=1e-6)
    assert float(plax.grad(plax.grad(g))(x)) == pytest.approx(float(plax.grad(plax.grad(f))(x)),
                                                              rel=1e-5)
    assert float(plax.jit(plax.grad(g))(x)) == pytest.approx(float(plax.grad(f)(x)), rel=1e-6)
    np.testing.assert_allclose(np.asarray(plax.jvp(g, (x,), (1.0,))[1]),
                               np.asarray(plax.jvp(f, (x,), (1.0,))[1]), rtol=1e-6)


def test_backward_pass_recomputes_instead_of_storing():
    vg = lambda fun: plax.make_jaxpr(plax.value_and_grad(fun))(0.3)  # noqa: E731
    plain, remat = vg(f), vg(plax.checkpoint(f))
    # Without checkpointing sin(x) runs once; with it, again in the backward pass (the
    # derivative needs only the inner sin, so that is the one recomputed).
    assert count(plain, "sin") == 2 and count(remat, "sin") == 3
    assert count(remat, "optimization_barrier") == 1
    saved = vg(plax.checkpoint(f, policy=plax.checkpoint_policies.everything_saveable))
    assert count(saved, "sin") == 2
    no_cse = vg(plax.checkpoint(f, prevent_cse=False))
    assert count(no_cse, "optimization_barrier") == 0


def test_counts_include_nested_jaxprs():
    # Under an outer jit everything is inside one pjit equation: the same counts as above.
    for fun, sins, barriers in ((f, 2, 0), (plax.checkpoint(f), 3, 1)):
        j = plax.make_jaxpr(plax.jit(plax.value_and_grad(fun)))(0.3)
        assert [e.primitive.name for e in j.jaxpr.eqns] == ["pjit"], str(j)
        assert count(j, "sin") == sins and count(j, "optimization_barrier") == barriers, str(j)
    # A checkpoint equation holds its body.
    j = plax.make_jaxpr(plax.checkpoint(f))(0.3)
    assert count(j, "checkpoint") == 1 and count(j, "sin") == 2 and count(j, "mul") == 1


def test_checkpoint_of_a_jitted_function_recomputes_in_the_backward_jit():
    fj = plax.jit(f)
    plain = plax.make_jaxpr(plax.grad(fj))(0.3)
    remat = plax.make_jaxpr(plax.grad(plax.checkpoint(fj)))(0.3)
    # Without checkpointing a forward jit computes the residuals (sin x, cos x, cos sin x)
    # and a backward jit multiplies them; with it, only the backward jit is left, and it
    # recomputes them from the (barriered) input.
    assert count(plain, "pjit") == 2 and count(plain, "optimization_barrier") == 0
    assert count(remat, "pjit") == 1 and count(remat, "optimization_barrier") == 1
    for j in (plain, remat):
        assert count(j, "sin") == 1 and count(j, "cos") == 2, str(j)
        assert not [e for e in j.jaxpr.eqns if e.primitive.name in ("sin", "cos")]
    (backward,) = [e for e in remat.jaxpr.eqns if e.primitive.name == "pjit"]
    assert count(backward.params["jaxpr"], "sin") == 1
    assert float(plax.grad(plax.checkpoint(fj))(0.3)) == pytest.approx(float(plax.grad(f)(0.3)),
                                                                        rel=1e-6)


def test_dots_saveable_keeps_the_dot_and_recomputes_the_rest():
    def layer(W, x):
        return jnp.tanh(x @ W).sum()
    W, x = jnp.ones((3, 2)) * 0.1, jnp.arange(3.0)
    for policy, dots, tanhs in ((None, 2, 2), (plax.checkpoint_policies.dots_saveable, 1, 2)):
        j = plax.make_jaxpr(plax.value_and_grad(plax.checkpoint(layer, policy=policy)))(W, x)
        forward_dots = count(j, "dot_general")
        assert forward_dots == dots + 1, str(j)  # + the backward pass's own dot
        assert count(j, "tanh") == tanhs
    np.testing.assert_allclose(
        np.asarray(plax.grad(plax.checkpoint(layer, policy=plax.checkpoint_policies.dots_saveable))(W, x)),
        np.asarray(plax.grad(layer)(W, x)), rtol=1e-6)


def test_save_only_these_names():
    def fn(x):
        a = checkpoint_name(jnp.sin(x), "a")
        return jnp.cos(a) * jnp.exp(x)
    policy = plax.checkpoint_policies.save_only_these_names("a")
    j = plax.make_jaxpr(plax.value_and_grad(plax.checkpoint(fn, policy=policy)))(0.4)
    # sin(x) once forward; the other sin is cos's derivative at the saved value.
    assert count(j, "sin") == 2
    j2 = plax.make_jaxpr(plax.value_and_grad(plax.checkpoint(fn)))(0.4)
    assert count(j2, "sin") == 3  # without the policy, sin(x) is recomputed too
    assert float(plax.grad(plax.checkpoint(fn, policy=policy))(0.4)) == pytest.approx(
        float(plax.grad(fn)(0.4)), rel=1e-6)


def test_static_argnums_pytrees_and_remat_alias():
    def fn(p, n):
        return sum(jnp.sin(p["w"]) ** k for k in range(1, n + 1)).sum()
    g = plax.remat(fn, static_argnums=1)
    p = {"w": jnp.array([0.1, 0.2])}
    got = plax.grad(g)(p, 3)["w"]
    want = plax.grad(fn)(p, 3)["w"]
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_lowered_jit_of_grad_has_an_optimization_barrier():
    text = plax.jit(plax.grad(plax.checkpoint(f))).lower(0.3).as_text()
    assert "stablehlo.optimization_barrier" in text


def test_checkpoint_prints_in_jaxpr():
    j = plax.make_jaxpr(plax.checkpoint(f))(0.3)
    assert "checkpoint[" in str(j) and "prevent_cse=True" in str(j)


def test_check_grads_through_checkpoint():
    from plax.test_util import check_grads
    g = plax.checkpoint(lambda x, W: jnp.tanh(x @ W) * jnp.sin(x @ W),
                        policy=plax.checkpoint_policies.dots_saveable)
    check_grads(g, (np.array([0.3, -0.2, 0.5], np.float32), np.full((3, 2), 0.4, np.float32)), 2)


def test_value_and_grad_of_checkpointed_jit_returns_the_value():
    """A jit inside a checkpoint takes primal and tangent work at once: its primal output is
    known, so value_and_grad returns an array (not a tracer), eagerly and under jit."""
    f = lambda x: jnp.sin(x) * x
    want = (np.sin(0.3) * 0.3, np.cos(0.3) * 0.3 + np.sin(0.3))
    for policy in (None, plax.checkpoint_policies.everything_saveable,
                   plax.checkpoint_policies.dots_saveable):
        g = plax.value_and_grad(plax.checkpoint(plax.jit(f), policy=policy))
        for run in (g, plax.jit(g)):
            v, d = run(np.float32(0.3))
            assert isinstance(v, plax.Array) and isinstance(d, plax.Array)
            np.testing.assert_allclose([float(v), float(d)], want, rtol=1e-5)
    closed = plax.make_jaxpr(plax.value_and_grad(plax.checkpoint(plax.jit(f))))(0.3)
    assert len(closed.jaxpr.outvars) == 2
