"""plax.scipy.integrate.trapezoid and plax.scipy.cluster.vq.vq against SciPy, jit/vmap/grad."""
import numpy as np
import pytest
import scipy.cluster.vq as osp_vq
import scipy.integrate as osp_integrate

import plax
import plax.numpy as jnp
import plax.scipy.cluster
from plax.scipy.cluster.vq import vq
from plax.scipy.integrate import trapezoid
from plax.test_util import check_grads
from tests.helpers import grad_check_defaults

RNG = np.random.default_rng(0)
Y = RNG.normal(size=(3, 5)).astype(np.float32)
X = np.sort(RNG.uniform(0, 4, size=5)).astype(np.float32)


@pytest.mark.parametrize("kwargs", [{}, {"dx": 0.25}, {"x": X}, {"axis": 0},
                                    {"axis": 0, "x": X[:3]}])
def test_trapezoid_matches_scipy(kwargs):
    out = trapezoid(Y, **kwargs)
    np.testing.assert_allclose(out, osp_integrate.trapezoid(Y, **kwargs), rtol=1e-5, atol=1e-6)


def test_trapezoid_closed_forms_dtypes_and_grad():
    # JAX's documented examples: 13 on unit spacing, 43 on an irregular grid
    y = jnp.array([1, 2, 3, 2, 3, 2, 1])
    out = trapezoid(y, dx=1.0)
    assert out.dtype == np.float32 and float(out) == 13.0
    assert float(trapezoid(y, jnp.array([0, 2, 5, 7, 10, 15, 20]))) == 43.0
    x = jnp.linspace(0, 2 * np.pi, 1000)
    np.testing.assert_allclose(trapezoid(jnp.sin(x) ** 2, x), np.pi, rtol=1e-5)
    check_grads(lambda y, x: trapezoid(y, x), (Y, X), order=1,
                **grad_check_defaults(np.float32))
    out = plax.vmap(lambda y: trapezoid(y, X))(Y)
    np.testing.assert_allclose(out, osp_integrate.trapezoid(Y, X), rtol=1e-5)


def test_vq_matches_scipy():
    obs, book = RNG.normal(size=(9, 3)), RNG.normal(size=(4, 3))
    code, dist = vq(obs, book)
    want_code, want_dist = osp_vq.vq(obs, book)
    assert code.dtype == np.int32 and dist.dtype == np.float32
    np.testing.assert_array_equal(code, want_code)
    np.testing.assert_allclose(dist, want_dist, rtol=1e-5)
    # 1-D: scalar observations and codes
    code, dist = vq(np.arange(5), np.array([0.5, 3.2]))
    np.testing.assert_array_equal(code, [0, 0, 1, 1, 1])
    np.testing.assert_allclose(dist, [0.5, 0.5, 1.2, 0.2, 0.8], rtol=1e-6)
    assert plax.scipy.cluster.vq.vq is vq


def test_vq_jit_vmap_and_grad():
    obs, book = RNG.normal(size=(6, 2)).astype(np.float32), RNG.normal(size=(3, 2)).astype(
        np.float32)
    code, dist = plax.jit(vq)(obs, book)
    np.testing.assert_array_equal(code, osp_vq.vq(obs, book)[0])
    codes, _ = plax.vmap(vq, in_axes=(0, None))(np.stack([obs, -obs]), book)
    np.testing.assert_array_equal(codes[1], osp_vq.vq(-obs, book)[0])
    check_grads(lambda o, b: vq(o, b)[1], (obs, book), order=1,
                **grad_check_defaults(np.float32))


def test_vq_errors():
    with pytest.raises(ValueError, match="Observation and code_book should have the same rank"):
        vq(np.ones((3, 2)), np.ones(2))
    with pytest.raises(ValueError, match="ndim different than 1 or 2 are not supported"):
        vq(np.ones((3, 2, 1)), np.ones((3, 2, 1)))
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        vq([[1.0]], np.ones((1, 1)))


def test_trapezoid_with_an_nd_x_reads_its_axis_as_given():
    # x of fewer dimensions than y: NumPy/SciPy difference x along `axis` counted in x's own
    # dimensions (here its first of two), then broadcast against y
    y = RNG.normal(size=(2, 3, 10)).astype(np.float32)
    x = np.cumsum(RNG.uniform(0.1, 1, size=(3, 10)), axis=0).astype(np.float32)
    np.testing.assert_allclose(trapezoid(y, x, axis=-2), osp_integrate.trapezoid(y, x, axis=-2),
                               rtol=1e-5, atol=1e-5)
