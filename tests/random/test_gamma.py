"""plax.random's gamma family: JAX 0.10.2's samples and implicit-reparameterisation
gradients for fixed keys (JAX's values, rounded to 5 decimals, hard-coded as the reference),
moments, and the gradient against finite differences of the gamma CDF."""
import numpy as np
import pytest
import scipy.special

import plax
import plax.numpy as jnp
from plax import random as R
from plax.random.gamma_family import random_gamma_grad

lib = plax
k = R.PRNGKey(7)

JAX_VALUES = {
    'gamma': ('float32', [2.62513, 1.2273, 1.31556, 4.32272, 1.1223]),
    'gamma_small': ('float32', [0.0, 0.15853, 7e-05, 1.8172, 0.03304]),
    'gamma_arr': ('float32', [0.00023, 0.21792, 2.51771, 36.33936]),
    'loggamma': ('float32', [-438.77298, -28.83196, -263.69727, -9.7939]),
    'gamma_grad': ('float32', 5.39805),
    'gamma_grad_small': ('float32', 5.9948),
    'gamma_grad_arr': ('float32', [0.00393, 0.62351, 0.8675, 1.09082]),
    'loggamma_grad': ('float32', 188.47501),
    'beta': ('float32', [0.39823, 0.3441, 0.26755, 0.3564]),
    'dirichlet': ('float32', [[0.26656, 0.24638, 0.48707], [0.4386, 0.16208, 0.39933]]),
    'chisq': ('float32', [3.02207, 1.04379, 1.15568, 5.7768]),
    'f': ('float32', [0.48384, 1.10761, 1.6477, 0.65449]),
    't': ('float32', [1.98927, 0.14647, -0.49618, -0.68867]),
    'gnorm': ('float32', [-0.11315, -0.78606, 0.05867, 0.31688]),
    'ball': ('float32', [[-0.36388, 0.39459, 0.11976], [-0.48726, 0.13323, -0.14462]]),
    'gamma_vmap': ('float32', [[0.83815, 1.53293, 1.22347], [0.62726, 1.87016, 2.21743]]),
    'gamma_jit': ('float32', [3.17205, 1.60567, 1.70737]),
}

CASES = {
    'gamma': lambda: R.gamma(k, 2.5, (5,)),
    'gamma_small': lambda: R.gamma(k, 0.3, (5,)),
    'gamma_arr': lambda: R.gamma(k, jnp.array([0.5, 1.0, 4.0, 30.0])),
    'loggamma': lambda: R.loggamma(k, 0.01, (4,)),
    'gamma_grad': lambda: lib.grad(lambda a: R.gamma(k, a, (6,)).sum())(2.0),
    'gamma_grad_small': lambda: lib.grad(lambda a: R.gamma(k, a, (6,)).sum())(0.4),
    'gamma_grad_arr': lambda: lib.grad(lambda a: R.gamma(k, a).sum())(jnp.array([0.5, 1.5, 7.0, 40.0])),
    'loggamma_grad': lambda: lib.grad(lambda a: R.loggamma(k, a, (3,)).sum())(0.2),
    'beta': lambda: R.beta(k, 2.0, 3.0, (4,)),
    'dirichlet': lambda: R.dirichlet(k, jnp.array([1.0, 2.0, 3.0]), (2,)),
    'chisq': lambda: R.chisquare(k, 3.0, (4,)),
    'f': lambda: R.f(k, 3.0, 5.0, (4,)),
    't': lambda: R.t(k, 4.0, (4,)),
    'gnorm': lambda: R.generalized_normal(k, 1.5, (4,)),
    'ball': lambda: R.ball(k, 3, 2, (2,)),
    'gamma_vmap': lambda: lib.vmap(lambda kk: R.gamma(kk, 2.0, (3,)))(R.split(k, 2)),
    'gamma_jit': lambda: lib.jit(lambda kk, a: R.gamma(kk, a, (3,)))(k, 3.0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name):
    dtype, want = JAX_VALUES[name]
    drawn = np.asarray(CASES[name]())
    assert str(drawn.dtype) == dtype
    got = drawn.astype(np.float64)
    np.testing.assert_allclose(got.round(5), np.asarray(want), rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("a,x", [(0.5, 0.2), (2.0, 1.5), (3.0, 7.0), (10.0, 9.0), (0.1, 1e-3)])
def test_gamma_grad_is_minus_dcdf_da_over_density(a, x):
    """d sample / d a = -(dF/da) / (dF/dx) for the regularised lower incomplete gamma F."""
    h = 1e-5 * max(a, 1.0)
    dF_da = (scipy.special.gammainc(a + h, x) - scipy.special.gammainc(a - h, x)) / (2 * h)
    density = np.exp((a - 1) * np.log(x) - x - scipy.special.gammaln(a))
    got = float(random_gamma_grad(np.float32(a), np.float32(x)))
    np.testing.assert_allclose(got, -dF_da / density, rtol=2e-3)


@pytest.mark.parametrize("a", [0.3, 2.0, 15.0])
def test_gamma_moments(a):
    x = np.asarray(plax.jit(lambda kk: R.gamma(kk, a, (20000,)))(R.PRNGKey(12)), np.float64)
    assert abs(x.mean() - a) < 0.05 * max(a, 1) and abs(x.var() - a) < 0.12 * max(a, 1)


def test_derived_distributions_moments():
    key = R.PRNGKey(13)
    b = np.asarray(R.beta(key, 2.0, 5.0, (20000,)), np.float64)
    assert abs(b.mean() - 2 / 7) < 0.01 and 0 <= b.min() and b.max() <= 1
    dz = np.asarray(R.dirichlet(key, jnp.array([1.0, 2.0, 3.0]), (5000,)), np.float64)
    np.testing.assert_allclose(dz.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(dz.mean(0), [1 / 6, 2 / 6, 3 / 6], atol=0.02)
    c = np.asarray(R.chisquare(key, 4.0, (20000,)), np.float64)
    assert abs(c.mean() - 4) < 0.15
    pts = np.asarray(R.ball(key, 3, 2, (2000,)), np.float64)
    assert np.linalg.norm(pts, axis=-1).max() <= 1.0 + 1e-6


def test_errors():
    with pytest.raises(ValueError, match="dirichlet requires alpha.ndim >= 1"):
        R.dirichlet(k, 1.0)
    with pytest.raises(ValueError, match="dtype argument to `gamma` must be a float"):
        R.gamma(k, 1.0, (2,), jnp.int32)
