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
        assert [e.primitive.name for e in j.jaxpr.eqns] == ["jit"], str(j)
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
    assert count(plain, "jit") == 2 and count(plain, "optimization_barrier") == 0
    assert count(remat, "jit") == 1 and count(remat, "optimization_barrier") == 1
    for j in (plain, remat):
        assert count(j, "sin") == 1 and count(j, "cos") == 2, str(j)
        assert not [e for e in j.jaxpr.eqns if e.primitive.name in ("sin", "cos")]
    (backward,) = [e for e in remat.jaxpr.eqns if e.primitive.name == "jit"]
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


# --- nested checkpoints under grad, grad-of-grad, jit and vmap ------------------------------
def _sin_chain_reference(x, n):
    """sin applied n times at x, with its first and second derivatives (chain rule, float64)."""
    s, d1, d2 = np.float64(x), 1.0, 0.0
    for _ in range(n):
        s, d1, d2 = np.sin(s), np.cos(s) * d1, -np.sin(s) * d1 ** 2 + np.cos(s) * d2
    return s, d1, d2


def _nested_sins(n, outer=False, static=False, named=False, dots=False, jit_inner=False,
                 **options):
    """sin applied n times, checkpointed recursively as on JAX's gradient-checkpointing page:
    the first half of the chain is a checkpoint (of ``options``) holding checkpoints of its
    own halves. ``outer`` checkpoints the whole chain too; ``static`` passes the chain's length
    as a static argument; ``named``/``dots`` tag each sin's input for the name/dot policies;
    ``jit_inner`` jits each inner checkpoint's function."""
    def unit(x):
        if dots:
            x = jnp.dot(x[None], jnp.ones(1, x.dtype))
        return jnp.sin(checkpoint_name(x, "s") if named else x)

    def chain(x, k):
        if k <= 2:
            for _ in range(k):
                x = unit(x)
            return x
        head = k - k // 2
        if static:
            y = plax.checkpoint(chain, static_argnums=1, **options)(x, head)
        else:
            inner = lambda x: chain(x, head)  # noqa: E731
            y = plax.checkpoint(plax.jit(inner) if jit_inner else inner, **options)(x)
        return chain(y, k // 2)

    if not outer:
        return lambda x: chain(x, n)
    if static:
        return lambda x: plax.checkpoint(chain, static_argnums=(1,), **options)(x, n)
    return plax.checkpoint(lambda x: chain(x, n), **options)


_policies = plax.checkpoint_policies
NESTINGS = {
    "doc_page_16_deep": dict(n=16),
    "smallest_nesting": dict(n=5),
    "checkpoint_of_nested_checkpoints": dict(n=8, outer=True),
    "nothing_saveable": dict(n=8, policy=_policies.nothing_saveable),
    "everything_saveable": dict(n=8, outer=True, policy=_policies.everything_saveable),
    "save_only_these_names": dict(n=5, outer=True, named=True,
                                  policy=_policies.save_only_these_names("s")),
    "save_any_names_but_these": dict(n=6, named=True,
                                     policy=_policies.save_any_names_but_these("s")),
    "dots_saveable": dict(n=6, outer=True, dots=True, policy=_policies.dots_saveable),
    "no_prevent_cse": dict(n=6, outer=True, prevent_cse=False),
    "static_argnums": dict(n=7, static=True),
    "static_argnums_outer_no_cse": dict(n=9, outer=True, static=True, prevent_cse=False,
                                        policy=_policies.dots_saveable),
    "jit_inside": dict(n=6, outer=True, jit_inner=True),
}


def _nested_run(how, f, x):
    if how == "value":
        return f(x)
    if how == "grad":
        return plax.grad(f)(x)
    if how == "grad_of_grad":
        return plax.grad(plax.grad(f))(x)
    if how == "jit_grad":
        return plax.jit(plax.grad(f))(x)
    if how == "jit_grad_of_grad":
        return plax.jit(plax.grad(plax.grad(f)))(x)
    if how == "vmap_grad":
        return plax.vmap(plax.grad(f))(x)
    return plax.vmap(plax.grad(plax.grad(f)))(x)  # vmap_grad_of_grad


@pytest.mark.parametrize("how", ["value", "grad", "grad_of_grad", "jit_grad",
                                 "jit_grad_of_grad", "vmap_grad", "vmap_grad_of_grad"])
@pytest.mark.parametrize("nesting", list(NESTINGS))
def test_nested_checkpoints_match_the_chain_rule(nesting, how):
    """Checkpoints inside checkpoints (the primal recomputation of the outer one holds the
    inner ones, which compute primals and tangents at once) differentiate, to second order,
    under jit and vmap, to the closed form of the sin chain."""
    spec = dict(NESTINGS[nesting])
    n = spec.pop("n")
    f = _nested_sins(n, **spec)
    batched = how.startswith("vmap")
    x = np.array([0.4, 1.3, -2.1], np.float32) if batched else np.float32(1.3)
    order = 0 if how == "value" else 2 if how.endswith("grad_of_grad") else 1
    want = [_sin_chain_reference(v, n)[order] for v in np.atleast_1d(x)]
    got = _nested_run(how, f, x)
    assert got.shape == np.shape(x)
    np.testing.assert_allclose(np.atleast_1d(np.asarray(got, np.float64)), want,
                               rtol=2e-5 if order < 2 else 2e-4, atol=1e-6)


def test_nested_checkpoints_recompute_rather_than_store():
    """grad of the 16-deep doc-page scheme recomputes each checkpointed half in the backward
    pass: a plain chain needs 15 sins (the last one's value is not used), this one 32."""
    def plain_chain(x):
        for _ in range(16):
            x = jnp.sin(x)
        return x
    plain = plax.make_jaxpr(plax.grad(plain_chain))(0.5)
    assert count(plain, "sin") == 15 and count(plain, "cos") == 16, str(plain)
    nested = plax.make_jaxpr(plax.grad(_nested_sins(16)))(0.5)
    assert count(nested, "sin") == 32 and count(nested, "cos") == 16, str(nested)


def test_grad_of_jit_inside_jit_inside_checkpoint():
    """A jit whose primal result a jit around it reads, inside a checkpoint: the inner jit is
    split into its primal and linear halves when the outer one is transposed."""
    f = plax.checkpoint(plax.jit(lambda x: jnp.sin(plax.jit(lambda y: jnp.sin(y) * y)(x))))
    x = 0.7
    want = np.cos(np.sin(x) * x) * (np.cos(x) * x + np.sin(x))
    assert float(plax.grad(f)(x)) == pytest.approx(want, rel=1e-5)
    assert float(plax.jit(plax.grad(f))(x)) == pytest.approx(want, rel=1e-5)
    eps = 1e-3
    numeric = (float(plax.grad(f)(x + eps)) - float(plax.grad(f)(x - eps))) / (2 * eps)
    assert float(plax.grad(plax.grad(f))(x)) == pytest.approx(numeric, rel=1e-2)
