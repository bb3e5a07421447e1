"""The Schur-based functions of ``plax.scipy.linalg`` (as ``jax.scipy.linalg``'s): ``schur``,
``rsf2csf``, ``hessenberg``, ``sqrtm``, ``funm`` and ``solve_sylvester``.

They stand on the LAPACK Schur and Hessenberg reductions (CPU), which have no derivative;
so ``sqrtm`` and ``funm`` are not differentiable, as in JAX. ``solve_sylvester`` has its own
derivative (implicit differentiation of AX + XB = C), so it is differentiable in all three
operands. Every function takes batches of matrices (leading dimensions).
"""
from __future__ import annotations

import functools

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.higher_order.custom_derivatives import custom_jvp
from plax.lax import linalg as lax_linalg
from plax.numpy.linalg import as_inexact_arrays, conj_transpose, matmul_highest

__all__ = ["funm", "hessenberg", "rsf2csf", "schur", "solve_sylvester", "sqrtm"]


def _complex_dtype(dtype):
    return np.result_type(np.dtype(dtype), np.complex64)


def _check_square(name, a, what="a"):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name}: {what} must be a square matrix (or a batch of them), got "
                         f"shape {a.shape}; its last two dimensions must be equal.")


# --- schur, rsf2csf, hessenberg -------------------------------------------------------------
@functools.partial(jit, static_argnames=("output",))
def _schur(a, output):
    if output == "complex":
        a = a.astype(_complex_dtype(a.dtype))
    t, z = lax_linalg.schur(a)
    return t, z


def schur(a, output="real"):
    """The Schur decomposition ``a = z @ t @ zᴴ`` of each square matrix of ``a``: ``(t, z)``
    with ``z`` unitary and ``t`` upper triangular (``output='complex'``) or, for real input
    and ``output='real'``, quasi-upper-triangular with 2 x 2 blocks for complex-conjugate
    eigenvalue pairs. CPU only; not differentiable."""
    if output not in ("real", "complex"):
        raise ValueError(f"Expected 'output' to be either 'real' or 'complex', got "
                         f"output={output!r}.")
    return _schur(jnp.asarray(a), output)


def _rsf2csf_single(t, z):
    """Givens rotations, bottom block first, turning each 2 x 2 diagonal block of the real
    Schur form ``t`` (complex dtype here) into an upper triangle; ``z`` follows them."""
    n = t.shape[-1]
    if n == 1:
        return t, z
    eps = np.finfo(t.dtype).eps
    rows = np.arange(n)

    def rotate(m, t, z):
        # mu: the eigenvalue of the 2 x 2 block (the one with the larger imaginary part
        # first, as LAPACK orders a conjugate pair) less t[m, m].
        block = lax.dynamic_slice(t, (m - 1, m - 1), (2, 2))
        half = (block[0, 0] - block[1, 1]) / 2
        mu = half + jnp.sqrt(half * half + block[0, 1] * block[1, 0])
        sub = t[m, m - 1]
        r = jnp.sqrt(jnp.abs(mu) ** 2 + jnp.abs(sub) ** 2).astype(t.dtype)
        c, s = mu / r, sub / r
        g = jnp.stack([jnp.stack([jnp.conj(c), s]), jnp.stack([-s, c])])
        pair = lax.dynamic_slice_in_dim(t, m - 1, 2, axis=0)
        pair = jnp.where(rows >= m - 1, matmul_highest(g, pair), pair)
        t = lax.dynamic_update_slice_in_dim(t, pair, m - 1, axis=0)
        cols = lax.dynamic_slice_in_dim(t, m - 1, 2, axis=1)
        cols = jnp.where(rows[:, None] <= m, matmul_highest(cols, conj_transpose(g)), cols)
        t = lax.dynamic_update_slice_in_dim(t, cols, m - 1, axis=1)
        zcols = matmul_highest(lax.dynamic_slice_in_dim(z, m - 1, 2, axis=1), conj_transpose(g))
        return t, lax.dynamic_update_slice_in_dim(z, zcols, m - 1, axis=1)

    def step(i, carry):
        t, z = carry
        m = n - i
        coupled = jnp.abs(t[m, m - 1]) > eps * (jnp.abs(t[m - 1, m - 1]) + jnp.abs(t[m, m]))
        t, z = lax.cond(coupled, rotate, lambda m, t, z: (t, z), m, t, z)
        return t.at[m, m - 1].set(0), z

    return lax.fori_loop(1, n, step, (t, z))


@jit
def _rsf2csf(t, z):
    t, z = (x.astype(_complex_dtype(jnp.result_type(t, z))) for x in (t, z))
    return jnp.vectorize(_rsf2csf_single, signature="(n,n),(n,n)->(n,n),(n,n)")(t, z)


def rsf2csf(T, Z, check_finite=True):
    """The complex Schur form ``(t, z)`` from a real one ``(T, Z)`` (as ``schur`` returns):
    ``t`` upper triangular, ``Z T Zᴴ = z t zᴴ``. Leading dimensions of T and Z broadcast."""
    del check_finite
    t, z = jnp.asarray(T), jnp.asarray(Z)
    if t.ndim < 2 or t.shape[-1] != t.shape[-2]:
        raise ValueError(f"Input 'T' must be square, got shape {t.shape}.")
    if z.ndim < 2 or z.shape[-1] != z.shape[-2]:
        raise ValueError(f"Input 'Z' must be square, got shape {z.shape}.")
    if t.shape[-1] != z.shape[-1]:
        raise ValueError(f"Input array shapes must match: Z: {z.shape} vs. T: {t.shape}.")
    return _rsf2csf(t, z)


@functools.partial(jit, static_argnames=("calc_q",))
def _hessenberg(a, calc_q):
    n = a.shape[-1]
    if n == 0:
        return (a, a) if calc_q else a
    packed, taus = lax_linalg.hessenberg(a)
    h = jnp.triu(packed, -1)
    if not calc_q:
        return h
    # Q = diag(1, Q'), Q' the product of the reflectors stored below the sub-diagonal.
    inner = lax_linalg.householder_product(packed[..., 1:, :-1], taus)
    pad = [(0, 0)] * (a.ndim - 2) + [(1, 0), (1, 0)]
    corner = jnp.zeros((n, n), a.dtype).at[0, 0].set(1)
    return h, jnp.pad(inner, pad) + corner


def hessenberg(a, *, calc_q=False, overwrite_a=False, check_finite=True):
    """The upper Hessenberg form ``h`` of each square matrix of ``a`` (zero below the first
    sub-diagonal), and with ``calc_q`` the unitary ``q`` with ``a = q @ h @ qᴴ``. CPU only;
    not differentiable."""
    del overwrite_a, check_finite
    a = jnp.asarray(a)
    _check_square("hessenberg", a)
    return _hessenberg(a, bool(calc_q))


# --- functions of a triangular matrix, column by column -----------------------------------------
def _by_columns(diagonal, system):
    """The upper-triangular F with ``diagonal`` whose column j above the diagonal (j = 1, 2,
    ... in turn) solves the upper-triangular system ``system(f, j) = (M, r)``: M is n x n with
    the identity in its rows and columns from j on, r is zero from row j on. A zero pivot of
    M (a repeated eigenvalue) is taken as 1, keeping the numerator, as JAX does."""
    n = diagonal.shape[-1]
    eye = np.eye(n, dtype=bool)
    rows = np.arange(n)
    f = jnp.diag(diagonal)

    def column(j, f):
        m, r = system(f, j)
        m = jnp.where(eye & (m == 0), jnp.ones((), m.dtype), m)
        x = lax_linalg.triangular_solve(m, r[:, None], left_side=True, lower=False)[:, 0]
        return f.at[:, j].set(jnp.where(rows < j, x, f[:, j]))

    return lax.fori_loop(1, n, column, f) if n > 1 else f


def _leading(x, j):
    """``x``'s leading j x j block, zeros elsewhere."""
    n = x.shape[-1]
    inside = np.arange(n) < j
    return jnp.where(inside[:, None] & inside[None, :], x, jnp.zeros((), x.dtype))


def _split_identity(n, j, dtype):
    """(the identity's first j diagonal entries, the rest), as two n x n matrices."""
    eye = np.eye(n, dtype=bool)
    before = eye & (np.arange(n) < j)[:, None]
    return before.astype(dtype), (eye & ~before).astype(dtype)


def _sqrtm_triangular(t):
    """The upper-triangular square root u of upper-triangular t (principal roots on the
    diagonal). From (u u)_ij = t_ij: column j above the diagonal solves (U_j + u_jj I) x =
    t[:j, j], U_j the leading j x j block of u."""
    n = t.shape[-1]

    def system(u, j):
        head, tail = _split_identity(n, j, t.dtype)
        m = _leading(u, j) + u[j, j] * head + tail
        return m, jnp.where(np.arange(n) < j, t[:, j], jnp.zeros((), t.dtype))

    return _by_columns(jnp.sqrt(jnp.diagonal(t)), system)


def _funm_triangular(t, values):
    """f(t) for upper-triangular t with f's ``values`` on its diagonal, by Parlett's
    recurrence f t = t f: column j above the diagonal solves (t_jj I - T_j) x =
    t_jj-free terms, T_j the leading j x j block of t (Golub and Van Loan, 11.1.1)."""
    n = t.shape[-1]

    def system(f, j):
        head, tail = _split_identity(n, j, t.dtype)
        m = t[j, j] * head - _leading(t, j) + tail
        col = t[:, j]
        r = f[j, j] * col - matmul_highest(_leading(f, j), col)
        return m, jnp.where(np.arange(n) < j, r, jnp.zeros((), t.dtype))

    return _by_columns(values, system)


@jit
def _sqrtm(a):
    t, z = _schur(a.astype(_complex_dtype(a.dtype)), "complex")
    root = jnp.vectorize(_sqrtm_triangular, signature="(n,n)->(n,n)")(t)
    return matmul_highest(matmul_highest(z, root), conj_transpose(z))


def sqrtm(A, blocksize=1):
    """The principal square root of each square matrix of ``A`` (complex), by the Schur
    method of Björck and Hammarling: A = Z T Zᴴ, the triangular root of T column by column.
    Only ``blocksize=1`` (unblocked). CPU only; not differentiable, as in JAX."""
    if blocksize > 1:
        raise NotImplementedError("Blocked version is not implemented yet: call sqrtm with "
                                  "blocksize=1.")
    a, = as_inexact_arrays("sqrtm", A)
    _check_square("sqrtm", a, "A")
    return _sqrtm(a)


def _funm_single(a, func):
    t, z = _rsf2csf_single(*(x.astype(_complex_dtype(a.dtype)) for x in lax_linalg.schur(a)))
    values = jnp.asarray(func(jnp.diagonal(t))).astype(t.dtype)
    f = matmul_highest(matmul_highest(z, _funm_triangular(t, values)), conj_transpose(z))
    # SciPy's error estimate: from the closest pair of diagonal entries of t.
    d = jnp.diagonal(t)
    gaps = jnp.abs(d[:, None] - d[None, :])
    above = np.triu(np.ones((d.shape[-1],) * 2, bool), 1)
    minden = jnp.min(jnp.where(above, gaps, jnp.abs(d[0])), initial=jnp.inf)
    tol = np.finfo(t.dtype).eps
    minden = jnp.where(minden == 0, tol, minden)
    spread = jnp.max(jnp.sum(jnp.abs(jnp.triu(t, 1)), axis=0))  # ‖triu(t, 1)‖₁
    err = jnp.where(jnp.any(jnp.isinf(f)), np.inf,
                    jnp.minimum(1, jnp.maximum(tol, (tol / minden) * spread)))
    return f, err.astype(np.finfo(t.dtype).dtype)


@functools.partial(jit, static_argnames=("func",))
def _funm(a, func):
    return jnp.vectorize(functools.partial(_funm_single, func=func),
                         signature="(n,n)->(n,n),()")(a)


def funm(A, func, disp=True):
    """The matrix function f(A) of each square matrix of ``A`` for a scalar function
    ``func`` (applied elementwise to an array of eigenvalues), by the Schur-Parlett method:
    A = Z T Zᴴ (complex Schur), f(T) by Parlett's recurrence. The result is complex. With
    ``disp=False`` also SciPy's estimate of the relative error (large when eigenvalues are
    close). CPU only; not differentiable, as in JAX."""
    a, = as_inexact_arrays("funm", A)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"expected square array_like input, got shape {a.shape} (a square "
                         "matrix or a batch of them).")
    if a.shape[-1] == 0:
        empty = jnp.zeros(a.shape, _complex_dtype(a.dtype))
        return empty if disp else (empty, jnp.zeros(a.shape[:-2], np.finfo(a.dtype).dtype))
    f, err = _funm(a, func)
    return f if disp else (f, err)


# --- Sylvester equations ---------------------------------------------------------------------
def _sylvester_schur(a, b, c):
    """X with A X + X B = C by Bartels-Stewart: A = U R Uᴴ, B = V S Vᴴ (complex Schur, R and S
    upper triangular) turn it into R Y + Y S = Uᴴ C V, solved column by column: (R + s_jj I)
    y_j = f_j - Σ_{k<j} s_kj y_k. Returns (X, the eigenvalues of A and of B)."""
    dt = _complex_dtype(jnp.result_type(a, b, c))
    r, u = lax_linalg.schur(a.astype(dt))
    s, v = lax_linalg.schur(b.astype(dt))
    f = matmul_highest(matmul_highest(conj_transpose(u), c.astype(dt)), v)
    m, n = c.shape[-2:]
    cols = np.arange(n)
    eye = jnp.eye(m, dtype=dt)

    def column(j, y):
        rhs = f[:, j] - matmul_highest(jnp.where(cols < j, y, jnp.zeros((), dt)), s[:, j])
        x = lax_linalg.triangular_solve(r + s[j, j] * eye, rhs[:, None], left_side=True,
                                        lower=False)[:, 0]
        return y.at[:, j].set(x)

    y = lax.fori_loop(0, n, column, jnp.zeros((m, n), dt))
    x = matmul_highest(matmul_highest(u, y), conj_transpose(v))
    return x, jnp.diagonal(r), jnp.diagonal(s)


def _sylvester_eigen(a, b, c):
    """X with A X + X B = C through the eigendecompositions A = P diag(α) P⁻¹ and
    B = Q diag(β) Q⁻¹: X = P (P⁻¹ C Q / (α_i + β_j)) Q⁻¹ (accurate for well-conditioned
    eigenvectors only)."""
    alpha, p = jnp.linalg.eig(a)
    beta, q = jnp.linalg.eig(b)
    dt = alpha.dtype
    f = jnp.linalg.solve(p, matmul_highest(c.astype(dt), q))
    y = f / (alpha[:, None] + beta[None, :])
    return matmul_highest(matmul_highest(p, y), jnp.linalg.inv(q)), alpha, beta


def _sylvester_core(a, b, c, method, tol):
    solver = _sylvester_schur if method == "schur" else _sylvester_eigen
    x, alpha, beta = solver(a, b, c)
    if not dtypes.is_complex(c.dtype):
        x = x.real
    x = x.astype(c.dtype)
    # A X + X B = C has no unique solution where an eigenvalue of A is minus one of B.
    singular = jnp.any(jnp.abs(alpha[:, None] + beta[None, :]) < tol)
    return jnp.where(singular, jnp.full_like(x, np.nan), x)


@functools.partial(custom_jvp, nondiff_argnums=(3, 4))
def _sylvester(a, b, c, method, tol):
    return _sylvester_core(a, b, c, method, tol)


@_sylvester.defjvp
def _sylvester_jvp(method, tol, primals, tangents):
    # A dX + dX B = dC - dA X - X dB: the same equation with a new right-hand side.
    a, b, c = primals
    da, db, dc = tangents
    x = _sylvester_core(a, b, c, method, tol)
    rhs = dc - matmul_highest(da, x) - matmul_highest(x, db)
    return x, _sylvester_core(a, b, rhs.astype(c.dtype), method, tol)


@functools.partial(jit, static_argnames=("method", "tol"))
def _solve_sylvester(a, b, c, method, tol):
    single = lambda a, b, c: _sylvester(a, b, c, method, tol)  # noqa: E731
    return jnp.vectorize(single, signature="(m,m),(n,n),(m,n)->(m,n)")(a, b, c)


def solve_sylvester(A, B, C, *, method="schur", tol=1e-8):
    """X solving the Sylvester equation ``A @ X + X @ B = C`` for each A (..., m, m),
    B (..., n, n), C (..., m, n) (leading dimensions broadcast). ``method`` 'schur'
    (Bartels-Stewart, robust; CPU only) or 'eigen' (through eigendecompositions: faster,
    less accurate for ill-conditioned eigenvectors). Where some eigenvalue of A plus one of
    B is within ``tol`` of 0 the solution is not unique and the result is NaN.
    Differentiable in A, B and C."""
    a, b, c = as_inexact_arrays("solve_sylvester", A, B, C)
    if method not in ("schur", "eigen"):
        raise ValueError(f'Unrecognized method {method}. The two valid methods are either '
                         f'"schur" or "eigen".')
    m, n = c.shape[-2:] if c.ndim >= 2 else (None, None)
    if c.ndim < 2 or a.shape[-2:] != (m, m) or b.shape[-2:] != (n, n) or a.ndim < 2 \
            or b.ndim < 2:
        raise ValueError(f"Incompatible shapes for Sylvester equation:\nA: {a.shape}\n"
                         f"B: {b.shape}\nC: {c.shape}\nA must be (..., m, m), B (..., n, n) "
                         "and C (..., m, n).")
    return _solve_sylvester(a, b, c, method, float(tol))
