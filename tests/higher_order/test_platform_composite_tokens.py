"""lax.platform_dependent, lax.composite, tokens (create_token/after_all) and
optimization_barrier under jit, vmap and grad."""
from functools import partial

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.lowering.stablehlo import lower_jaxpr_to_module
from plax.runtime import xla

X = np.array([0.3, -1.2, 2.0], np.float32)


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# --- platform_dependent ----------------------------------------------------------------------
def by_platform(x):
    return lax.platform_dependent(x, cpu=jnp.sin, cuda=jnp.cos, default=jnp.tan)


@pytest.mark.parametrize("name,run,want", [
    ("eager", by_platform, np.sin),
    ("jit", plax.jit(by_platform), np.sin),
    ("vmap", plax.vmap(by_platform), np.sin),
    ("vmap of grad", plax.vmap(plax.grad(by_platform)), np.cos),
    ("jit of vmap of grad", plax.jit(plax.vmap(plax.grad(by_platform))), np.cos),
])
def test_platform_dependent_picks_the_cpu_branch(name, run, want):
    if plax.default_backend() != "cpu":
        pytest.skip("the expected branch is the CPU one")
    close(run(X), want(X))


def test_platform_dependent_staging_and_errors():
    jaxpr = str(plax.make_jaxpr(by_platform)(1.))
    assert "platform_index" in jaxpr and "cond" in jaxpr
    text = plax.jit(by_platform).lower(1.).as_text()
    assert "stablehlo.case" in text  # a constant index: XLA keeps the platform's branch
    # lowered for another platform, the index is that platform's branch
    cuda_text = lower_jaxpr_to_module(plax.make_jaxpr(by_platform)(1.).jaxpr, platform="cuda")
    assert 'value = dense<"0x01000000"> : tensor<i32>}> : () -> tensor<i32> loc("platform_index"' \
        in cuda_text
    only_tpu = lambda x: lax.platform_dependent(x, tpu=jnp.sin)
    for run in (only_tpu, plax.jit(only_tpu)):
        with pytest.raises(NotImplementedError, match="no branch for the platform 'cpu'"):
            run(1.)
    close(lax.platform_dependent(2., tpu=jnp.sin, default=jnp.exp), np.exp(2.))
    with pytest.raises(ValueError, match="Use 'cuda' or 'rocm'"):
        lax.platform_dependent(1., gpu=jnp.sin)
    with pytest.raises(TypeError, match="the 'cpu' branch must be a callable"):
        lax.platform_dependent(1., cpu=3)


# --- composite -------------------------------------------------------------------------------
@partial(lax.composite, name="my.tanh")
def my_tanh(x):
    return jnp.tanh(x)


@partial(lax.composite, name="my.scaled_add", version=2)
def scaled_add(x, y, *, alpha=1.0, tag="t", n=1, table=None):
    return x + alpha * y


def test_composite_runs_and_lowers_to_stablehlo_composite():
    close(my_tanh(X), np.tanh(X))
    close(plax.jit(my_tanh)(X), np.tanh(X))
    assert "composite[" in str(plax.make_jaxpr(my_tanh)(1.))
    text = plax.jit(my_tanh).lower(1.).as_text()
    assert '"stablehlo.composite"' in text and 'name = "my.tanh"' in text
    assert "decomposition = @my_tanh" in text and "stablehlo.tanh" in text
    f = plax.jit(lambda x: scaled_add(x, x, alpha=1e-5, tag="hi", n=4,
                                      table=np.arange(3, dtype=np.int32)))
    close(f(X), X * (1 + 1e-5))
    text = f.lower(1.).as_text()
    assert 'tag = "hi"' in text and "n = 4 : i64" in text and "version = 2 : i32" in text
    assert "alpha = 0x3EE4F8B588E368F1 : f64" in text  # 1e-5 exactly
    assert "table = dense<" in text


def test_composite_has_no_derivative_or_batching_rule_as_in_jax():
    with pytest.raises(ValueError, match="JVP rule for composite not implemented"):
        plax.grad(my_tanh)(1.)
    with pytest.raises(NotImplementedError, match="Batching rule for 'composite' not"):
        plax.vmap(my_tanh)(X)
    with pytest.raises(TypeError, match="attribute 'alpha' must be a Python or NumPy scalar"):
        scaled_add(1., 2., alpha=[1.0])
    # a custom_jvp around it gives it a derivative
    f = plax.custom_jvp(my_tanh)
    f.defjvp(lambda p, t: (my_tanh(p[0]), t[0] * (1 - my_tanh(p[0]) ** 2)))
    close(plax.grad(f)(0.5), 1 - np.tanh(0.5) ** 2)


# --- tokens ----------------------------------------------------------------------------------
def with_tokens(x):
    t = lax.after_all(lax.create_token(x), lax.create_token())
    return x * 2., t


def test_tokens_eagerly_and_under_transformations():
    t = lax.create_token()
    assert repr(lax.after_all(t, lax.after_all())) == "Token"
    for f in (with_tokens, plax.jit(with_tokens), plax.vmap(with_tokens),
              plax.jit(plax.vmap(with_tokens))):
        y, tok = f(X)
        close(y, 2 * X)
        assert isinstance(tok, lax.create_token().__class__)
    close(plax.grad(lambda x: with_tokens(x)[0])(1.), 2.)
    close(plax.jit(plax.grad(lambda x: with_tokens(x)[0]))(1.), 2.)
    jaxpr = str(plax.make_jaxpr(with_tokens)(1.))
    assert "create_token" in jaxpr and "after_all" in jaxpr and "Token" in jaxpr
    # a token passed into and out of a jit
    y, tok = plax.jit(lambda t, x: (x + 1., lax.after_all(t)))(t, 1.)
    close(y, 2.)
    assert repr(tok) == "Token"


def test_tokens_in_programs_over_a_mesh():
    # (a mesh once made, jit looks at every value's type for shardings: a token's too)
    mesh = plax.make_mesh((2,), ("x",))
    with plax.set_mesh(mesh):
        x = plax.device_put(jnp.ones(4), plax.sharding.NamedSharding(
            mesh, plax.sharding.PartitionSpec("x")))
        y, tok = plax.jit(with_tokens)(x)
        close(y, 2 * np.ones(4))
        close(plax.jit(plax.grad(lambda x: with_tokens(x)[0].sum()))(x), 2 * np.ones(4))


def test_tokens_lower_to_stablehlo_tokens_that_xla_compiles():
    from plax.first_order.tokens import after_all_p, create_token_p
    closed = plax.make_jaxpr(lambda: lax.after_all(lax.create_token()))()
    assert [e.primitive for e in closed.jaxpr.eqns] == [create_token_p, after_all_p]
    # (jit prunes tokens nothing uses; the module is lowered here without pruning)
    closed = plax.make_jaxpr(lambda x: (x, lax.after_all(lax.create_token(),
                                                         lax.create_token())))(1.)
    text = lower_jaxpr_to_module(closed.jaxpr)
    assert '"stablehlo.create_token"() : () -> !stablehlo.token' in text
    assert '"stablehlo.after_all"(%0, %1) : (!stablehlo.token, !stablehlo.token)' in text
    assert xla.compile(text, [plax.devices()[0]]) is not None


def test_after_all_refuses_non_tokens():
    with pytest.raises(TypeError, match="Arguments to after_all must be tokens"):
        lax.after_all(1.0)


# --- optimization_barrier --------------------------------------------------------------------
def test_optimization_barrier_under_transformations():
    close(lax.optimization_barrier(1.5), 1.5)
    close(plax.grad(lambda x: lax.optimization_barrier(x * x))(3.), 6.)
    close(plax.vmap(lax.optimization_barrier)(X), X)
    close(plax.vmap(plax.grad(lambda x: lax.optimization_barrier(jnp.sin(x))))(X), np.cos(X))
    a, b = plax.jit(lambda x: lax.optimization_barrier((x, x + 1.)))(1.)
    close(a, 1.)
    close(b, 2.)
    assert "optimization_barrier" in plax.jit(lambda x: lax.optimization_barrier(x)).lower(
        1.).as_text()
