"""lax.linalg's spectral decompositions (eigh, svd, eig) on jaxlib's LAPACK kernels: values
against NumPy (up to the sign/phase of each vector: reconstructions), every mode, batches,
vmap and jit, NaN where LAPACK fails (as JAX), derivatives of sign/phase-invariant functions
against numerical ones, and the errors for bad input."""
import contextlib

import numpy as np
import pytest

import plax
from plax import lax
from plax.test_util import check_grads

L = lax.linalg
F32, F64, C64, C128 = (np.dtype(t) for t in (np.float32, np.float64, np.complex64,
                                             np.complex128))


def _rand(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.normal(size=shape)
    return x.astype(dtype)


def _x64(dtype):
    return plax.enable_x64() if np.dtype(dtype) in (F64, C128) else contextlib.nullcontext()


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if np.dtype(dtype) in (F32, C64) else \
        dict(rtol=1e-10, atol=1e-10)


def _h(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _real(dtype):
    return np.finfo(np.dtype(dtype)).dtype


def _unitary_columns(v, dtype):
    k = v.shape[-1]
    np.testing.assert_allclose(_h(v) @ v, np.broadcast_to(np.eye(k), v.shape[:-2] + (k, k)),
                               **_tol(dtype))


def _first_nan_batch(shape, dtype):
    x = _rand(shape, dtype)
    x[0] = np.nan
    return x


# --- eigh -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, C64, F64])
def test_eigh_matches_numpy(dtype):
    with _x64(dtype):
        x = _rand((2, 3, 4, 4), dtype)
        h = (x + _h(x)) / 2
        v, w = L.eigh(x)
        assert v.dtype == dtype and w.dtype == _real(dtype)
        assert v.shape == (2, 3, 4, 4) and w.shape == (2, 3, 4)
        v, w = np.asarray(v), np.asarray(w)
        np.testing.assert_allclose(w, np.linalg.eigvalsh(h), **_tol(dtype))
        assert (np.diff(w, axis=-1) >= 0).all()
        np.testing.assert_allclose((v * w[..., None, :]) @ _h(v), h, **_tol(dtype))
        _unitary_columns(v, dtype)


def test_eigh_reads_one_triangle_and_subsets():
    x = _rand((3, 5, 5), C64)
    for lower, uplo in ((True, "L"), (False, "U")):
        _, w = L.eigh(x, lower=lower, symmetrize_input=False)
        np.testing.assert_allclose(w, np.linalg.eigvalsh(x, UPLO=uplo), **_tol(C64))
    v_all, w_all = L.eigh(x)
    v, w = L.eigh(x, subset_by_index=(1, 4))
    assert v.shape == (3, 5, 3) and w.shape == (3, 3)
    np.testing.assert_allclose(w, np.asarray(w_all)[..., 1:4], **_tol(C64))
    np.testing.assert_allclose(v, np.asarray(v_all)[..., 1:4], **_tol(C64))
    v, w = L.eigh(x, subset_by_index=(0, 5))  # the whole spectrum
    assert v.shape == (3, 5, 5)


def test_eigh_nan_empty_vmap_jit():
    v, w = L.eigh(_first_nan_batch((2, 3, 3), F32))
    assert np.isnan(v[0]).all() and np.isnan(w[0]).all()
    assert np.isfinite(v[1]).all() and np.isfinite(w[1]).all()
    for shape in ((0, 0), (2, 0, 0), (0, 3, 3)):
        v, w = L.eigh(np.zeros(shape, F32))
        assert v.shape == shape and w.shape == shape[:-1] and w.dtype == F32
    x = _rand((4, 3, 3), F32, seed=1)
    out = plax.vmap(lambda a: L.eigh(a)[1], in_axes=1)(np.moveaxis(x, 0, 1))
    np.testing.assert_allclose(out, np.asarray(L.eigh(x)[1]), **_tol(F32))
    _, jw = plax.jit(L.eigh)(x)
    np.testing.assert_allclose(jw, np.asarray(L.eigh(x)[1]), **_tol(F32))


def _eigh_function(x, **kw):
    v, w = L.eigh(x, **kw)  # v diag(w³) vᴴ: the same for every sign/phase of v's columns
    return (v * lax.convert_element_type(w * w * w, v.dtype)[..., None, :]) @ plax.numpy.conj(
        plax.numpy.swapaxes(v, -1, -2))


@pytest.mark.parametrize("dtype", [F32, C64])
def test_eigh_grads(dtype):
    x = _rand((3, 3), dtype, seed=2)
    check_grads(lambda a: (L.eigh(a)[1], _eigh_function(a),
                           L.eigh(a, subset_by_index=(1, 3))[1]), (x,), 1, modes=("fwd", "rev"),
                eps=1e-2)


def test_eigh_grads_float64_second_order():
    with plax.enable_x64():
        x = _rand((3, 3), F64, seed=3)
        check_grads(_eigh_function, (x,), 2, modes=("fwd", "rev"))


def test_eigh_errors():
    with pytest.raises(ValueError, match=r"must have shape \[\.\.\., n, n\]"):
        L.eigh(np.ones((3, 4), F32))
    with pytest.raises(ValueError, match="rank >= 2"):
        L.eigh(np.ones((3,), F32))
    with pytest.raises(TypeError, match="floating-point or complex dtype"):
        L.eigh(np.ones((3, 3), np.int32))
    with pytest.raises(ValueError, match="subset_by_index"):
        L.eigh(np.ones((3, 3), F32), subset_by_index=(2, 4))
    with pytest.raises(TypeError, match="subset_by_index"):
        L.eigh(np.ones((3, 3), F32), subset_by_index=(0.5, 2))


# --- svd ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, C64, F64])
@pytest.mark.parametrize("shape", [(2, 3, 5, 3), (3, 5), (4, 4)])
def test_svd_matches_numpy(dtype, shape):
    with _x64(dtype):
        x = _rand(shape, dtype)
        m, n = shape[-2:]
        k = min(m, n)
        want_s = np.linalg.svd(x, compute_uv=False)
        for full, algorithm in ((True, None), (False, L.SvdAlgorithm.QR),
                                (True, L.SvdAlgorithm.DIVIDE_AND_CONQUER)):
            u, s, vh = L.svd(x, full_matrices=full, algorithm=algorithm)
            assert u.dtype == vh.dtype == dtype and s.dtype == _real(dtype)
            assert u.shape == shape[:-2] + (m, m if full else k)
            assert vh.shape == shape[:-2] + (n if full else k, n)
            u, s, vh = map(np.asarray, (u, s, vh))
            np.testing.assert_allclose(s, want_s, **_tol(dtype))
            np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], x,
                                       **_tol(dtype))
            _unitary_columns(u, dtype)
            _unitary_columns(_h(vh), dtype)
        s = L.svd(x, compute_uv=False)
        np.testing.assert_allclose(s, want_s, **_tol(dtype))


def test_svd_subsets_nan_empty_vmap_jit():
    x = _rand((2, 5, 3), C64)
    u_all, s_all, vh_all = map(np.asarray, L.svd(x, full_matrices=False))
    u, s, vh = L.svd(x, full_matrices=False, subset_by_index=(1, 3))
    assert u.shape == (2, 5, 2) and s.shape == (2, 2) and vh.shape == (2, 2, 3)
    np.testing.assert_allclose(u, u_all[..., 1:3], **_tol(C64))
    np.testing.assert_allclose(vh, vh_all[..., 1:3, :], **_tol(C64))
    np.testing.assert_allclose(L.svd(x, compute_uv=False, full_matrices=False,
                                     subset_by_index=(0, 1)), s_all[..., :1], **_tol(C64))
    assert L.svd(x, subset_by_index=(0, 3))[0].shape == (2, 5, 5)  # all of them: full is fine
    # LAPACK's failure (info != 0 on NaN input) gives NaN in that batch element only.
    u, s, vh = L.svd(_first_nan_batch((2, 3, 4), F32))
    assert all(np.isnan(o[0]).all() and np.isfinite(o[1]).all() for o in (u, s, vh))
    # Empty matrices as JAX: no singular values; a full u or vh is the identity.
    for shape, full, want_u, want_vh in [((0, 3), True, (0, 0), np.eye(3)),
                                         ((3, 0), True, np.eye(3), (0, 0)),
                                         ((3, 0), False, (3, 0), (0, 0)),
                                         ((2, 0, 4), False, (2, 0, 0), (2, 0, 4))]:
        u, s, vh = L.svd(np.zeros(shape, F32), full_matrices=full)
        assert s.shape == shape[:-2] + (0,)
        for got, want in ((u, want_u), (vh, want_vh)):
            want = np.zeros(want) if isinstance(want, tuple) else want
            np.testing.assert_array_equal(got, want)
    y = _rand((3, 4, 2), F32, seed=1)
    out = plax.vmap(lambda a: L.svd(a, compute_uv=False), in_axes=2)(np.moveaxis(y, 0, 2))
    np.testing.assert_allclose(out, np.linalg.svd(y, compute_uv=False), **_tol(F32))
    np.testing.assert_allclose(plax.jit(L.svd, static_argnames="full_matrices")(
        y, full_matrices=False)[1], np.linalg.svd(y, compute_uv=False), **_tol(F32))


def _svd_function(x):
    u, s, vh = L.svd(x, full_matrices=False)  # u diag(s²) vh, and the polar factor u vh
    return (u * lax.convert_element_type(s * s, u.dtype)[..., None, :]) @ vh, u @ vh


@pytest.mark.parametrize("dtype, shape", [(F32, (4, 3)), (C64, (3, 4))])
def test_svd_grads(dtype, shape):
    x = _rand(shape, dtype, seed=4)
    check_grads(lambda a: (L.svd(a, compute_uv=False), *_svd_function(a)), (x,), 1,
                modes=("fwd", "rev"), eps=1e-2)


def test_svd_grads_float64_second_order_square_and_full_matrices():
    with plax.enable_x64():
        x = _rand((4, 3), F64, seed=5)
        check_grads(lambda a: L.svd(a, compute_uv=False), (x,), 2, modes=("fwd", "rev"))
        sq = _rand((3, 3), C128, seed=6)  # square: full matrices are the economic ones
        check_grads(lambda a: ((lambda u, s, vh: u @ vh)(*L.svd(a)),
                               L.svd(a, full_matrices=False, subset_by_index=(0, 2))[1]),
                    (sq,), 1, modes=("fwd", "rev"))
        with pytest.raises(NotImplementedError, match="not implemented for full matrices"):
            plax.jvp(lambda a: L.svd(a)[0], (x,), (x,))


def test_svd_errors():
    with pytest.raises(ValueError, match="rank >= 2"):
        L.svd(np.ones((3,), F32))
    with pytest.raises(TypeError, match="floating-point or complex dtype"):
        L.svd(np.ones((3, 4), np.int32))
    with pytest.raises(ValueError, match="full_matrices and subset_by_index cannot both be set"):
        L.svd(np.ones((3, 5), F32), subset_by_index=(0, 2))
    with pytest.raises(ValueError, match="subset_by_index"):
        L.svd(np.ones((3, 5), F32), full_matrices=False, subset_by_index=(0, 4))
    with pytest.raises(NotImplementedError, match="Jacobi and Polar algorithms are not "
                       "implemented on CPU"):
        L.svd(np.ones((3, 5), F32), algorithm=L.SvdAlgorithm.JACOBI)
    with pytest.raises(TypeError, match="algorithm must be None or a member of SvdAlgorithm"):
        L.svd(np.ones((3, 5), F32), algorithm="QR")


# --- eig ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, C64, F64])
def test_eig_matches_numpy(dtype):
    with _x64(dtype):
        x = _rand((2, 3, 4, 4), dtype)
        w, vl, vr = L.eig(x)
        cdt = np.result_type(dtype, np.complex64)
        assert w.dtype == vl.dtype == vr.dtype == cdt
        assert w.shape == (2, 3, 4) and vl.shape == vr.shape == (2, 3, 4, 4)
        w, vl, vr = map(np.asarray, (w, vl, vr))
        np.testing.assert_allclose(np.sort_complex(w), np.sort_complex(np.linalg.eigvals(x)),
                                   **_tol(dtype))
        np.testing.assert_allclose(x @ vr, vr * w[..., None, :], **_tol(dtype))
        np.testing.assert_allclose(_h(vl) @ x, w[..., :, None] * _h(vl), **_tol(dtype))
        for v in (vl, vr):
            np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, **_tol(dtype))


def test_eig_modes_nan_empty_vmap_jit():
    x = _rand((2, 4, 4), F32, seed=1)
    w_all, vl_all, vr_all = map(np.asarray, L.eig(x))
    for left, right, want in ((True, False, vl_all), (False, True, vr_all)):
        w, v = L.eig(x, compute_left_eigenvectors=left, compute_right_eigenvectors=right)
        np.testing.assert_allclose(w, w_all, **_tol(F32))
        np.testing.assert_allclose(v, want, **_tol(F32))
    only = L.eig(x, compute_left_eigenvectors=False, compute_right_eigenvectors=False)
    assert len(only) == 1 and only[0].shape == (2, 4)
    outs = L.eig(_first_nan_batch((2, 3, 3), C64))
    assert all(np.isnan(o[0]).all() and np.isfinite(o[1]).all() for o in outs)
    for shape in ((0, 0), (2, 0, 0), (0, 3, 3)):
        w, vl, vr = L.eig(np.zeros(shape, F32))
        assert w.shape == shape[:-1] and vr.shape == shape and vr.dtype == C64
    out = plax.vmap(lambda a: L.eig(a)[0], in_axes=-1)(np.moveaxis(x, 0, -1))
    np.testing.assert_allclose(out, w_all, **_tol(F32))
    _, jvr = plax.jit(lambda a: L.eig(a, compute_left_eigenvectors=False))(x)
    np.testing.assert_allclose(jvr, vr_all, **_tol(F32))


def _eigvals(x):
    return L.eig(x, compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0]


@pytest.mark.parametrize("dtype", [F32, C64])
def test_eig_eigenvalue_grads(dtype):
    x = _rand((3, 3), dtype, seed=7)
    check_grads(_eigvals, (x,), 1, modes=("fwd", "rev"))
    with pytest.raises(NotImplementedError, match="Derivatives of non-symmetric eigenvectors "
                       "are only valid under assumptions"):
        plax.jvp(lambda a: L.eig(a)[0], (x,), (x,))


def test_eig_eigenvector_grads_float64():
    # geev fixes each vector up to its sign: v ∘ v does not depend on it.
    def f(a):
        w, vl, vr = L.eig(a, enable_eigvec_derivs=True)
        return w, vl * vl, vr * vr

    with plax.enable_x64():
        for dtype in (F64, C128):
            check_grads(f, (_rand((3, 3), dtype, seed=8),), 1, modes=("fwd", "rev"))


def test_eig_errors():
    with pytest.raises(ValueError, match="The input to eig must be a square matrix"):
        L.eig(np.ones((3, 4), F32))
    with pytest.raises(ValueError, match="rank >= 2"):
        L.eig(np.ones((3,), F32))
    with pytest.raises(TypeError, match="floating-point or complex dtype"):
        L.eig(np.ones((3, 3), np.int32))
