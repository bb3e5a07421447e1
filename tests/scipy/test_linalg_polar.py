"""plax.scipy.linalg.polar (QDWH and SVD, both sides, tall and wide, complex, batches, its
derivative) and eigh_tridiagonal (all or an index range of eigenpairs) against SciPy."""
import numpy as np
import pytest
import scipy.linalg as sla

import plax
import plax.scipy.linalg as sl
from plax.test_util import check_grads

from helpers import C64, F32, linalg_tol, rand, linalg_close as _close

F64 = np.dtype(np.float64)



@pytest.mark.parametrize("method", ["qdwh", "svd"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_polar_matches_scipy(method, shape):
    a = rand(shape)
    for side in ("right", "left"):
        u, p = sl.polar(a, side=side, method=method)
        want_u, want_p = sla.polar(a, side=side)
        _close(u, want_u)
        _close(p, want_p)


def test_polar_complex_batched_and_ill_conditioned():
    c = rand((4, 3), C64)
    u, p = sl.polar(c)
    want_u, want_p = sla.polar(c)
    _close(u, want_u, C64)
    _close(p, want_p, C64)
    batch = rand((2, 4, 3))
    u, p = sl.polar(batch)
    _close(u @ p, batch)
    with plax.enable_x64():
        a = rand((4, 4), F64)
        a[:, 0] *= 1e-6  # condition number ~1e6: QDWH still converges
        u, p = sl.polar(a)
        want_u, want_p = sla.polar(a)
        _close(u, want_u, F64)
        _close(p, want_p, F64)


def test_polar_gradient_and_errors():
    with plax.enable_x64():
        check_grads(lambda a: sl.polar(a)[0], (rand((4, 3), F64),), order=1, atol=1e-5,
                    rtol=1e-5)
    a = rand((3, 2))
    g_qdwh = plax.grad(lambda x: sl.polar(x)[0].sum())(a)
    g_svd = plax.grad(lambda x: sl.polar(x, method="svd")[0].sum())(a)
    np.testing.assert_allclose(np.asarray(g_qdwh), np.asarray(g_svd), atol=1e-4)
    with pytest.raises(ValueError, match="The argument `side` must be either 'right' or 'left'"):
        sl.polar(a, side="foo")
    with pytest.raises(ValueError, match="Unknown polar decomposition method foo"):
        sl.polar(a, method="foo")
    with pytest.raises(ValueError, match="The input `a` must be at least a 2-D array"):
        sl.polar(np.ones(3, F32))


def test_eigh_tridiagonal_matches_scipy():
    d = np.array([2.0, 3.0, 1.0, 4.0], F32)
    e = np.array([0.5, -1.0, 0.3], F32)
    _close(sl.eigh_tridiagonal(d, e, eigvals_only=True),
           sla.eigh_tridiagonal(d, e, eigvals_only=True))
    w, v = sl.eigh_tridiagonal(d, e)
    want_w, want_v = sla.eigh_tridiagonal(d, e)
    _close(w, want_w)
    np.testing.assert_allclose(np.abs(np.asarray(v)), np.abs(want_v), **linalg_tol(F32))
    _close(sl.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(1, 2)),
           sla.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(1, 2)))
    w, v = sl.eigh_tridiagonal(d, e, select="i", select_range=(0, 1))
    assert v.shape == (4, 2)
    # A complex off-diagonal: the Hermitian matrix is unitarily similar to the real one.
    _close(sl.eigh_tridiagonal(d.astype(C64), 1j * e.astype(C64), eigvals_only=True),
           sla.eigh_tridiagonal(d, e, eigvals_only=True))
    batch = sl.eigh_tridiagonal(np.stack([d, 2 * d]), np.stack([e, e]), eigvals_only=True)
    _close(batch[1], sla.eigh_tridiagonal(2 * d, e, eigvals_only=True))
    with pytest.raises(NotImplementedError, match=r"select='v'\) is not implemented"):
        sl.eigh_tridiagonal(d, e, select="v", select_range=(0.0, 3.0))
    with pytest.raises(ValueError, match="e must hold the 3 off-diagonal entries"):
        sl.eigh_tridiagonal(d, e[:2])
