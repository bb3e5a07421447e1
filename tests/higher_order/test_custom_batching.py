"""plax.custom_batching: custom_vmap rules under vmap (nested), jit, scan and derivatives;
sequential_vmap."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.custom_batching import custom_vmap, sequential_vmap


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


X = np.array([0.3, -1.2, 2.0], np.float32)
CALLS = []


@custom_vmap
def sin_or_cos(x):
    """sin per example; its (deliberately different) batching rule computes cos, so a test
    sees which ran."""
    return jnp.sin(x)


@sin_or_cos.def_vmap
def _sin_or_cos_rule(axis_size, in_batched, x):
    CALLS.append((axis_size, in_batched))
    return jnp.cos(x), in_batched[0]


def test_rule_runs_only_under_vmap():
    CALLS.clear()
    close(sin_or_cos(X), np.sin(X))
    close(plax.jit(sin_or_cos)(X), np.sin(X))
    assert CALLS == []
    close(plax.vmap(sin_or_cos)(X), np.cos(X))
    assert CALLS == [(3, [True])]
    close(plax.jit(plax.vmap(sin_or_cos))(X), np.cos(X))
    close(plax.vmap(plax.jit(sin_or_cos))(X), np.cos(X))
    jaxpr = str(plax.make_jaxpr(sin_or_cos)(1.))
    assert "custom_vmap_call" in jaxpr and "sin" in jaxpr


def test_nested_vmap_and_scan():
    xs = np.arange(6, dtype=np.float32).reshape(2, 3)
    close(plax.vmap(plax.vmap(sin_or_cos))(xs), np.cos(xs))
    # inside a scan body, the scan's batching batches the body with the rule
    f = lambda x: lax.scan(lambda c, xi: (c + sin_or_cos(xi), None), 0., x)[0]
    close(f(X), np.sin(X).sum())
    close(plax.vmap(f)(xs), np.cos(xs).sum(1))


def test_rule_applies_at_each_level():
    @custom_vmap
    def double(x):
        return 2. * x

    @double.def_vmap
    def rule(axis_size, in_batched, x):
        CALLS.append(axis_size)
        return double(x), True  # the batched call meets the enclosing vmap's rule in turn

    CALLS.clear()
    xs = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    close(plax.vmap(plax.vmap(double))(xs), 2 * xs)
    assert CALLS == [3, 2]  # the inner vmap's rule, then the outer's


def test_unbatched_arguments_and_outputs():
    @custom_vmap
    def scale(x, s):
        return x * s, s

    @scale.def_vmap
    def rule(axis_size, in_batched, x, s):
        assert in_batched == [True, False]
        return (x * s, s), (True, False)

    out, s = plax.vmap(scale, in_axes=(0, None))(X, 2.)
    close(out, 2 * X)
    close(s, 2.)  # unbatched, as the rule said
    out, s = plax.vmap(scale, in_axes=(0, None), out_axes=(1, None))(np.stack([X, X]), 3.)
    close(out, 3 * np.stack([X, X]).T)
    out, s = scale(X, s=5.)  # keywords resolve to positions
    close(out, 5 * X)


def test_derivatives():
    # jvp of the function, and jvp/grad of its batched form (which differentiate the rule)
    close(plax.jvp(sin_or_cos, (1.,), (1.,))[1], np.cos(1.))
    close(plax.grad(sin_or_cos)(1.), np.cos(1.))
    close(plax.grad(lambda x: plax.vmap(sin_or_cos)(x).sum())(X), -np.sin(X))
    close(plax.jvp(plax.vmap(sin_or_cos), (X,), (np.ones(3, np.float32),))[1], -np.sin(X))
    # vmap of the jvp: the jvp's batching rule is the jvp of the rule
    got = plax.vmap(lambda x, t: plax.jvp(sin_or_cos, (x,), (t,)))(X, 2 * np.ones(3, np.float32))
    close(got[0], np.cos(X))
    close(got[1], -2 * np.sin(X))
    # a tangent batched where its primal is not
    got = plax.vmap(lambda t: plax.jvp(sin_or_cos, (1.,), (t,)), )(np.ones(3, np.float32))
    close(got[1], -np.sin(1.) * np.ones(3))


def test_closed_over_values():
    def scaled(k, x):
        @custom_vmap
        def f(y):
            return k * y

        @f.def_vmap
        def rule(axis_size, in_batched, y):
            return k * y, True
        return f(x)

    # differentiating a closed-over value works (the function's jvp uses its tangent)
    close(plax.jvp(lambda k: scaled(k, 2.), (3.,), (1.,)), (6., 2.))
    close(plax.grad(lambda k: scaled(k, 2.))(3.), 2.)
    close(plax.vmap(lambda x: scaled(3., x))(X), 3 * X)
    # a closed-over value batched by the vmap is out of the rule's sight
    with pytest.raises(ValueError, match="closes over a value batched by this vmap"):
        plax.vmap(lambda k: scaled(k, 2.))(X)


def test_sequential_vmap():
    @sequential_vmap
    def norm(x):
        return jnp.sqrt(jnp.sum(x * x))

    xs = np.arange(12, dtype=np.float32).reshape(4, 3)
    want = np.linalg.norm(xs, axis=1)
    close(norm(xs[0]), want[0])
    close(plax.vmap(norm)(xs), want)
    assert "scan" in str(plax.make_jaxpr(plax.vmap(norm))(xs))
    close(plax.vmap(plax.vmap(norm))(xs.reshape(2, 2, 3)), want.reshape(2, 2))
    close(plax.jit(plax.vmap(norm))(xs), want)
    close(plax.grad(lambda x: plax.vmap(norm)(x).sum())(xs), xs / want[:, None], 1e-5)

    @sequential_vmap
    def add(x, y):
        return x + y

    close(plax.vmap(add, in_axes=(0, None))(xs, xs[0]), xs + xs[0])


def test_errors():
    @custom_vmap
    def f(x):
        return x

    with pytest.raises(AttributeError, match="No batching rule defined for custom_vmap"):
        f(1.)

    @f.def_vmap
    def bad_structure(axis_size, in_batched, x):
        return x, [True, True]

    with pytest.raises(ValueError, match="structure of output value and output batching"):
        plax.vmap(f)(X)

    @f.def_vmap
    def bad_shape(axis_size, in_batched, x):
        return x[0], True

    with pytest.raises(ValueError, match=r"marked batched, so its shape should be \(3,\)"):
        plax.vmap(f)(X)
