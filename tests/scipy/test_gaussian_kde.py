"""plax.scipy.stats.gaussian_kde against scipy.stats.gaussian_kde; its draws against JAX 0.10.2's
for the same keys; a pytree through jit, vmap and grad."""
import numpy as np
import pytest
import scipy.stats as st

import plax
from plax.scipy.stats import gaussian_kde
from plax.test_util import check_grads
from helpers import close

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
DATA_1D = np.array([0.1, 0.5, -1.2, 2.0, 0.7, 1.1])
DATA_2D = np.array([[0.0, 1, 2, 0.5, -1], [1.0, 0.2, 0.3, -0.5, 2]])
WEIGHTS = np.array([1, 2, 3, 1, 1, 2.0])

CASES = [  # (data, bw_method, weights, points)
    (DATA_1D, None, None, np.array([-2.0, 0.0, 0.3, 1.0, 5.0])),
    (DATA_1D, "silverman", WEIGHTS, np.array([-2.0, 0.3, 5.0])),
    (DATA_1D, 0.3, None, np.array([0.3, 40.0])),
    (DATA_2D, "scott", None, np.array([[0.0, 1, 3], [0.5, 0, -2]])),
    (DATA_2D, lambda kde: 0.5 * kde.neff ** -0.2, WEIGHTS[:5], np.array([[0.0], [0.5]])),
]


@pytest.mark.parametrize("data,bw,weights,points", CASES)
def test_against_scipy(data, bw, weights, points):
    with plax.enable_x64():
        ours = gaussian_kde(data, bw_method=bw, weights=weights)
        ref = st.gaussian_kde(data, bw_method=bw, weights=weights)
        close(ours.covariance, ref.covariance, F64, 1e-13, 0)
        close(ours.inv_cov, ref.inv_cov, F64, 1e-13, 0)
        close(ours.neff, ref.neff, F64, 1e-13, 0)
        close(ours.evaluate(points), ref.evaluate(points), F64, 1e-13, 1e-300)
        close(ours(points), ref(points), F64, 1e-13, 1e-300)
        close(ours.pdf(points), ref.pdf(points), F64, 1e-13, 1e-300)
        close(ours.logpdf(points), ref.logpdf(points), F64, 1e-13, 0)
        mean, cov = np.full(ours.d, 0.3), 0.5 * np.eye(ours.d)
        close(ours.integrate_gaussian(mean, cov), ref.integrate_gaussian(mean, cov), F64, 1e-13)
        other = np.asarray(data)[..., :4] * 2
        close(ours.integrate_kde(gaussian_kde(other)), ref.integrate_kde(st.gaussian_kde(other)),
              F64, 1e-13)
        if ours.d == 1:
            close(ours.integrate_box_1d(-1.0, 1.0), ref.integrate_box_1d(-1.0, 1.0), F64, 1e-13)
            # one point given as a vector of length d is one column
            close(ours.evaluate(0.3), ref.evaluate(0.3), F64, 1e-13)
        else:
            close(ours.evaluate(points[:, 0]), ref.evaluate(points[:, :1]), F64, 1e-13)


def test_float32_attributes_and_pytree():
    kde = gaussian_kde(DATA_1D.astype(np.float32))
    assert (kde.d, kde.n) == (1, 6) and kde.dataset.shape == (1, 6)
    close(kde.weights, np.full(6, 1 / 6), F32)
    close(kde.evaluate(np.float32([0.0, 1.0])), st.gaussian_kde(DATA_1D).evaluate([0.0, 1.0]),
          F32, 1e-6)
    assert gaussian_kde(np.arange(5)).dataset.dtype == F32
    leaves, tree = plax.tree_util.tree_flatten(kde)
    assert len(leaves) == 5 and str(tree) == "PyTreeDef(CustomNode(gaussian_kde[None], " \
        "[*, *, *, *, *]))"
    back = plax.tree_util.tree_unflatten(tree, leaves)
    close(back.covariance, np.asarray(kde.covariance), F32, 0, 0)
    assert repr(kde).startswith("gaussian_kde(neff=Array(6., dtype=float32), dataset=Array(")
    with pytest.raises(AttributeError, match="cannot assign to field 'dataset'"):
        kde.dataset = 1


def test_transforms():
    data = DATA_1D.astype(np.float32)
    kde = gaussian_kde(data)
    logpdf = plax.jit(lambda k, x: k.logpdf(x))(kde, np.float32([0.2]))
    close(logpdf, st.gaussian_kde(DATA_1D).logpdf(0.2), F32, 1e-6)
    per_row = plax.vmap(lambda d: gaussian_kde(d).evaluate(0.0))(np.stack([data, 2 * data]))
    want = [st.gaussian_kde(DATA_1D).evaluate(0.0), st.gaussian_kde(2 * DATA_1D).evaluate(0.0)]
    close(per_row, np.array(want), F32, 1e-6)
    with plax.enable_x64():
        check_grads(lambda d, x: gaussian_kde(d).logpdf(x), (DATA_1D, np.array([0.0, 1.5])),
                    order=1, modes=("fwd", "rev"))


def test_resample_like_jax():
    # JAX 0.10.2's draws for these keys (its choice by weight plus multivariate-normal noise)
    kde = gaussian_kde(DATA_1D.astype(np.float32))
    close(kde.resample(plax.random.key(0), (5,)),
          np.array([[-1.7213557, -0.81802076, 0.8532757, 0.83635527, 0.13179082]]), F32, 1e-6)
    close(kde.resample(plax.random.key(0)), np.array([-1.7213557]), F32, 1e-6)
    kde2 = gaussian_kde(DATA_2D.astype(np.float32))
    close(kde2.resample(plax.random.key(1), (3,)),
          np.array([[0.79145133, -0.15262091, 1.0114661], [0.38676304, -0.5978172, 0.4894511]]),
          F32, 1e-6)


def test_errors():
    kde, kde2 = gaussian_kde(DATA_1D), gaussian_kde(DATA_2D)
    calls = [
        (ValueError, "should have multiple elements", lambda: gaussian_kde(np.array([1.0]))),
        (ValueError, "`bw_method` should be 'scott', 'silverman', a scalar, or a callable",
         lambda: gaussian_kde(DATA_1D, bw_method="foo")),
        (ValueError, "`weights` input should be of length n",
         lambda: gaussian_kde(DATA_1D, weights=np.ones(3))),
        (ValueError, "`weights` input should be one-dimensional",
         lambda: gaussian_kde(DATA_1D, weights=np.ones((2, 3)))),
        (NotImplementedError, "does not support complex data",
         lambda: gaussian_kde(DATA_1D.astype(np.complex64))),
        (TypeError, "gaussian_kde requires ndarray or scalar arguments",
         lambda: gaussian_kde([1.0, 2.0])),
        (NotImplementedError, "dynamically changing the bandwidth method is not supported",
         lambda: kde.set_bandwidth("scott")),
        (NotImplementedError, "use `integrate_box_1d`", lambda: kde.integrate_box(0, 1)),
        (ValueError, r"only handles 1D pdfs", lambda: kde2.integrate_box_1d(0, 1)),
        (ValueError, "must be scalars", lambda: kde.integrate_box_1d(np.array([0.0, 1]), 1)),
        (ValueError, "points have dimension 3, dataset has dimension 2",
         lambda: kde2.evaluate(np.ones((3, 2)))),
        (NotImplementedError, "does not support complex coordinates",
         lambda: kde.evaluate(np.ones(2) + 1j)),
        (ValueError, "KDEs are not the same dimensionality", lambda: kde.integrate_kde(kde2)),
        (ValueError, "mean does not have dimension 2",
         lambda: kde2.integrate_gaussian(np.zeros(3), np.eye(2))),
        (ValueError, "covariance does not have dimension 2",
         lambda: kde2.integrate_gaussian(np.zeros(2), np.eye(3))),
    ]
    for error, message, call in calls:
        with pytest.raises(error, match=message):
            call()
