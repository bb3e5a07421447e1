"""The algorithms plax's TPU lowerings run (as JAX's do), run on the CPU against NumPy: the
QDWH spectral divide-and-conquer eigh (its Jacobi leaves, a TPU-only call, replaced by the
CPU's eigh), the QDWH SVD and the Thomas tridiagonal solve."""
import numpy as np

import plax
import plax.numpy as jnp
from plax import lax
from plax.lax.linalg.eigh_tpu import eigh_divide_and_conquer, eigh_qdwh
from plax.lax.linalg.svd_qdwh import svd_qdwh
from plax.lax.linalg.tridiagonal import thomas_solve

RNG = np.random.default_rng(46)


def _random(shape, dtype):
    x = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


def _hermitian(n, dtype, batch=()):
    x = _random(batch + (n, n), dtype)
    return (x + np.swapaxes(x.conj(), -1, -2)) / 2


def _cpu_leaf(block, size):
    """The Jacobi leaf's contract on the CPU: the padding (zero rows and columns beyond
    ``size``) gets eigenvalues above the block's, so the sorted CPU eigh keeps the block's
    eigenpairs first."""
    padding = jnp.arange(block.shape[0]) >= size
    shift = 2 * jnp.linalg.norm(block) + 1
    return lax.linalg.eigh(block + jnp.diag(jnp.where(padding, shift, 0)).astype(block.dtype))


def _check_eigh(a, v, w, atol):
    v, w = np.asarray(v), np.asarray(w)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), atol=atol)
    assert np.all(np.diff(w, axis=-1) >= 0)
    vh = np.swapaxes(v.conj(), -1, -2)
    np.testing.assert_allclose((v * w[..., None, :]) @ vh, a, atol=atol)
    np.testing.assert_allclose(vh @ v, np.broadcast_to(np.eye(a.shape[-1]), a.shape), atol=atol)


def test_divide_and_conquer_eigh_of_300_rows_recurses_to_its_leaves():
    n = 300
    leaves = []

    def leaf(block, size):
        leaves.append(block.shape)
        return _cpu_leaf(block, size)
    run = plax.jit(lambda h: eigh_divide_and_conquer(h, leaf=leaf))
    a = _hermitian(n, np.float32)
    _check_eigh(a, *run(a), atol=5e-5)
    assert leaves == [(256, 256)]  # traced once: the base case of the loop
    # rank 20: a cluster of 280 zero eigenvalues, which ends the recursion early
    b = _random((n, 20), np.float32)
    low_rank = b @ b.T
    v, w = run(low_rank)
    _check_eigh(low_rank, v, w, atol=2e-4)
    assert np.sum(np.abs(np.asarray(w)) > 1e-3) == 20


def test_divide_and_conquer_eigh_of_a_batch_of_complex_upper_triangles_for_a_subset():
    a = _hermitian(24, np.complex64, batch=(2,))
    garbage = np.where(np.tril(np.ones((24, 24)), -1), 99 + 7j, a)  # only the upper is read
    v, w = plax.jit(lambda x: eigh_qdwh(x, lower=False, subset_by_index=(5, 12),
                                        termination_size=16, leaf=_cpu_leaf))(garbage)
    v, w = np.asarray(v), np.asarray(w)
    assert v.shape == (2, 24, 7) and w.shape == (2, 7)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a)[:, 5:12], atol=5e-5)
    np.testing.assert_allclose(a @ v, v * w[:, None, :], atol=5e-5)
    np.testing.assert_allclose(np.swapaxes(v.conj(), -1, -2) @ v,
                               np.broadcast_to(np.eye(7), (2, 7, 7)), atol=5e-5)


def _check_svd(a, u, s, vh, atol):
    u, s, vh = map(np.asarray, (u, s, vh))
    k = s.shape[-1]
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=atol)
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a, atol=atol)
    for q in (np.swapaxes(u.conj(), -1, -2) @ u, vh @ np.swapaxes(vh.conj(), -1, -2)):
        np.testing.assert_allclose(q, np.broadcast_to(np.eye(q.shape[-1]), q.shape), atol=atol)


def test_qdwh_svd_of_batches_tall_and_wide_complex_and_full():
    # wide, complex, full: decomposed through the adjoint, which QR reduces first
    a = _random((2, 3, 5), np.complex64)
    u, s, vh = plax.jit(plax.vmap(lambda x: svd_qdwh(x, full_matrices=True)))(a)
    assert (u.shape, s.shape, vh.shape) == ((2, 3, 3), (2, 3), (2, 5, 5))
    _check_svd(a, u, s, vh, atol=5e-6)
    # non-finite input: every factor NaN
    a[1, 0, 0] = np.inf
    u, s, vh = plax.jit(plax.vmap(lambda x: svd_qdwh(x, full_matrices=True)))(a)
    assert np.isnan(np.asarray(s)[1]).all() and np.isnan(np.asarray(u)[1]).all()
    assert np.isfinite(np.asarray(s)[0]).all()


def test_qdwh_svd_of_a_rank_deficient_matrix_keeps_u_orthonormal():
    b = _random((6, 2), np.float32)
    a = b @ _random((2, 6), np.float32)
    run = plax.jit(lambda x: svd_qdwh(x, full_matrices=False))
    _check_svd(a, *run(a), atol=5e-6)
    square = _random((6, 6), np.float32)
    _check_svd(square, *run(square), atol=5e-6)


def test_qdwh_svd_values_only_and_a_subset():
    a = _random((8, 3), np.float32)  # m > 1.15 n: QR first
    s = plax.jit(lambda x: svd_qdwh(x, full_matrices=False, compute_uv=False))(a)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=5e-6)
    u, s, vh = plax.jit(lambda x: svd_qdwh(x, full_matrices=False, subset_by_index=(1, 3)))(a)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False)[1:3], atol=5e-6)
    np.testing.assert_allclose(a @ np.asarray(vh).T, np.asarray(u) * np.asarray(s), atol=5e-6)


def test_thomas_tridiagonal_solve():
    m, n = 7, 3
    dl, du = _random((2, m), np.float32), _random((2, m), np.float32)
    d = _random((2, m), np.float32) + 4
    b = _random((2, m, n), np.float32)
    x = np.asarray(plax.jit(plax.vmap(thomas_solve))(dl, d, du, b))
    t = np.stack([np.diag(d[i]) + np.diag(dl[i, 1:], -1) + np.diag(du[i, :-1], 1)
                  for i in range(2)])
    np.testing.assert_allclose(t @ x, b, atol=1e-5)
    np.testing.assert_allclose(x, np.asarray(lax.linalg.tridiagonal_solve(dl, d, du, b)),
                               atol=1e-5)
    one = np.asarray(plax.jit(thomas_solve)(d[0, :1], d[0, :1], d[0, :1], b[0, :1]))
    np.testing.assert_allclose(one, b[0, :1] / d[0, 0], rtol=1e-6)
