"""The special matrices of ``plax.scipy.linalg`` (as ``jax.scipy.linalg``'s): those built
from arrays (Toeplitz, Hankel, circulant, companion, Fiedler, Leslie, convolution) are
ordinary gathers and selects, batched over leading dimensions and differentiable; those
given only a size (Hilbert, Pascal, Helmert, Hadamard, DFT and inverses) are constants,
computed exactly on the host and rounded once to the result dtype."""
from __future__ import annotations

import math
import operator

import numpy as np

from plax import numpy as jnp
from plax.core import dtypes
from plax.numpy.util import check_arraylike, promote_dtypes, promote_dtypes_inexact

__all__ = ["circulant", "companion", "convolution_matrix", "dft", "fiedler",
           "fiedler_companion", "hadamard", "hankel", "helmert", "hilbert", "invhilbert",
           "invpascal", "leslie", "pascal", "toeplitz"]


# --- matrices of arrays ---------------------------------------------------------------------
def _as_vectors(name, *args):
    """``args`` as arrays of rank >= 1 (a scalar becomes a length-1 vector)."""
    check_arraylike(name, *args)
    return [jnp.atleast_1d(jnp.asarray(a)) for a in args]


def _broadcast_batch(*vectors):
    """The vectors with their leading (batch) dimensions broadcast together."""
    batch = jnp.broadcast_shapes(*(v.shape[:-1] for v in vectors))
    return [jnp.broadcast_to(v, batch + v.shape[-1:]) for v in vectors]


def toeplitz(c, r=None):
    """The Toeplitz matrix with first column ``c`` and first row ``r`` (default conj(c); its
    first entry is replaced by c's). Leading dimensions of ``c`` and ``r`` broadcast to a
    batch of matrices."""
    if r is None:
        check_arraylike("toeplitz", c)
        c = jnp.asarray(c)
        r = jnp.conj(c)
    check_arraylike("toeplitz", c, r)
    c, r = (jnp.atleast_1d(jnp.asarray(x)) for x in promote_dtypes(c, r))
    m, n = c.shape[-1], r.shape[-1]
    c, r = _broadcast_batch(c, r)
    # Entry (i, j) is values[m - 1 + j - i]: c reversed, then r without its first entry.
    values = jnp.concatenate([c[..., ::-1], r[..., 1:]], axis=-1)
    index = (m - 1) + np.arange(n)[None, :] - np.arange(m)[:, None]
    return jnp.take(values, index, axis=-1)


def hankel(c, r=None):
    """The Hankel matrix with first column ``c`` (..., m) and last row ``r`` (..., n;
    default zeros, its first entry ignored): entry (i, j) is c[i + j] while i + j < m,
    r[i + j - m + 1] after. Leading dimensions broadcast to a batch of matrices."""
    check_arraylike("hankel", c, *(() if r is None else (r,)))
    c = jnp.asarray(c)
    r = jnp.zeros_like(c) if r is None else jnp.asarray(r)
    for name, v in (("c", c), ("r", r)):
        if v.ndim == 0:
            raise ValueError(f"hankel: {name} must be at least 1-dimensional, got a scalar.")
    c, r = promote_dtypes(c, r)
    m, n = c.shape[-1], r.shape[-1]
    c, r = _broadcast_batch(c, r)
    if m == 0 or n == 0:
        return jnp.zeros(c.shape[:-1] + (m, n), c.dtype)
    values = jnp.concatenate([c, r[..., 1:]], axis=-1)
    return jnp.take(values, np.arange(m)[:, None] + np.arange(n)[None, :], axis=-1)


def circulant(c):
    """The circulant matrix with first column ``c`` (..., n): entry (i, j) is
    c[(i - j) mod n]. A batch of vectors gives a batch of matrices."""
    c, = _as_vectors("circulant", c)
    n = c.shape[-1]
    index = (np.arange(n)[:, None] - np.arange(n)[None, :]) % max(n, 1)
    return jnp.take(c, index, axis=-1)


def leslie(f, s):
    """The Leslie matrix of fecundities ``f`` (..., n), n >= 2, and survival rates ``s``
    (..., n - 1): ``f`` as its first row, ``s`` on its first sub-diagonal, zeros elsewhere.
    Leading dimensions broadcast."""
    f, s = _as_vectors("leslie", f, s)
    n = f.shape[-1]
    if n < 2:
        raise ValueError(f"The length of f along the last axis must be at least 2; got shape "
                         f"{f.shape}.")
    if s.shape[-1] != n - 1:
        raise ValueError(f"Incorrect lengths for f and s. The length of s along the last axis "
                         f"must be one less than the length of f; got f shape {f.shape} and "
                         f"s shape {s.shape}.")
    f, s = _broadcast_batch(*promote_dtypes(f, s))
    rows, cols = np.arange(n)[:, None], np.arange(n)[None, :]
    below = jnp.take(s, np.clip(cols, 0, n - 2), axis=-1)  # s[j] on row j + 1
    first = jnp.broadcast_to(f[..., None, :], f.shape[:-1] + (n, n))
    zero = jnp.zeros((), f.dtype)
    return jnp.where(rows == 0, first, jnp.where(rows == cols + 1, below, zero))


def companion(a):
    """The companion matrix of the polynomial with coefficients ``a`` (..., n), n >= 2,
    highest degree first: first row -a[1:] / a[0], ones on the first sub-diagonal; its
    eigenvalues are the polynomial's roots. A zero a[0] gives inf/NaN (no check)."""
    a, = promote_dtypes_inexact(*_as_vectors("companion", a))
    n = a.shape[-1]
    if n < 2:
        raise ValueError(f"The length of `a` along the last axis must be at least 2; got shape "
                         f"{a.shape}.")
    m = n - 1
    first = -a[..., 1:] / a[..., :1]
    rows, cols = np.arange(m)[:, None], np.arange(m)[None, :]
    ones = jnp.asarray(rows == cols + 1, a.dtype)
    return jnp.where(rows == 0, first[..., None, :], ones)


def fiedler(a):
    """The symmetric Fiedler matrix of ``a`` (..., n): entry (i, j) is |a[i] - a[j]|."""
    a, = _as_vectors("fiedler", a)
    return jnp.abs(a[..., :, None] - a[..., None, :])


def fiedler_companion(a):
    """The Fiedler companion matrix of the polynomial with coefficients ``a`` (..., n),
    highest degree first: a pentadiagonal (n - 1) x (n - 1) matrix whose eigenvalues are
    the polynomial's roots (as SciPy's). A zero a[0] gives inf/NaN (no check)."""
    a, = promote_dtypes_inexact(*_as_vectors("fiedler_companion", a))
    if a.shape[-1] == 0:
        raise ValueError("fiedler_companion requires the last axis of 'a' to have nonzero "
                         f"length, but got an array of shape {a.shape}.")
    m = a.shape[-1] - 1
    if m == 0:
        return jnp.zeros(a.shape[:-1] + (0, 0), a.dtype)
    a = a / a[..., :1]
    if m == 1:
        return -a[..., 1:, None]
    # Each entry is 0, 1 or -a[k] for one k: a table of (which, k) built on the host.
    # The pattern (SciPy's): column 0 holds -a[1], 1; even rows i hold -a[i + 1] at
    # column i - 1, -a[i + 2] at i + 1 and 1 at i + 2; odd rows i >= 3 hold 1 at i - 2.
    coeff = np.zeros((m, m), np.int32)  # k where the entry is -a[k], else 0
    ones = np.zeros((m, m), bool)
    coeff[0, 0], ones[1, 0] = 1, True
    for i in range(0, m, 2):
        if i + 1 < m:
            coeff[i, i + 1] = i + 2
        if i + 2 < m:
            ones[i, i + 2] = True
        if i >= 2:
            coeff[i, i - 1] = i + 1
    for i in range(3, m, 2):
        ones[i, i - 2] = True
    values = -jnp.take(a, coeff, axis=-1)
    return jnp.where(coeff > 0, values, jnp.asarray(ones, a.dtype))


def convolution_matrix(a, n, mode="full"):
    """The matrix A with ``A @ v == numpy.convolve(a, v, mode)`` for any ``v`` of length
    ``n`` (a Toeplitz matrix): k x n with k = m + n - 1 ('full'), max(m, n) ('same') or
    max(m, n) - min(m, n) + 1 ('valid'), m = a.shape[-1]. A batch of ``a`` gives a batch."""
    n = operator.index(n)
    if n <= 0:
        raise ValueError(f"n must be a positive integer; got {n}.")
    check_arraylike("convolution_matrix", a)
    a = jnp.asarray(a)
    if a.ndim == 0:
        raise ValueError("convolution_matrix: a must be at least 1-dimensional, got a scalar.")
    m = a.shape[-1]
    if m < 1:
        raise ValueError(f"len(a) must be at least 1; got shape {a.shape}.")
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"mode must be one of 'full', 'valid', 'same'; got {mode!r}.")
    # The full matrix has a[i - j] at (i, j) (zero outside 0..m-1); 'same' and 'valid' keep
    # a centred band of its m + n - 1 rows.
    trim = min(m, n) - 1
    first = {"full": 0, "same": trim // 2, "valid": trim}[mode]
    rows = {"full": m + n - 1, "same": max(m, n), "valid": max(m, n) - trim}[mode]
    offset = first + np.arange(rows)[:, None] - np.arange(n)[None, :]
    inside = (offset >= 0) & (offset < m)
    values = jnp.take(a, np.clip(offset, 0, m - 1), axis=-1)
    return jnp.where(inside, values, jnp.zeros((), a.dtype))


# --- matrices of a size -------------------------------------------------------------------
def _size(n, name="n") -> int:
    try:
        return operator.index(n)
    except TypeError:
        raise TypeError(f"{name} must be a static Python integer (the size of the matrix), got "
                        f"{n!r}.") from None


def _constant(values, dtype):
    """Host values (exact or float64) as a plax array of ``dtype``, rounded once."""
    return jnp.asarray(np.asarray(values, np.float64), dtype=dtype)


def hilbert(n):
    """The n x n Hilbert matrix, H[i, j] = 1 / (i + j + 1)."""
    n = _size(n)
    i = np.arange(n)
    return _constant(1.0 / (i[:, None] + i[None, :] + 1), dtypes.default_float_dtype())


def invhilbert(n):
    """The inverse of the n x n Hilbert matrix, computed exactly (integers) and rounded to
    the default float dtype; its entries outgrow float32 near n = 14 and float64 near 30."""
    n = _size(n)
    c = math.comb
    out = [[(-1) ** (i + j) * (i + j + 1) * c(n + i, n - j - 1) * c(n + j, n - i - 1)
            * c(i + j, i) ** 2 for j in range(n)] for i in range(n)]
    return _constant(np.array(out, dtype=float).reshape(n, n), dtypes.default_float_dtype())


def _kind(kind):
    kind = "symmetric" if kind is None else kind
    valid = ["symmetric", "lower", "upper"]
    if kind not in valid:
        raise ValueError(f"Expected kind to be one of: {valid}; got {kind}")
    return kind


def _pascal_lower(n: int, sign: bool):
    """binom(i, j) (times (-1)^(i - j) with ``sign``), exactly, as Python integers."""
    return [[(-1) ** (i - j) * math.comb(i, j) if sign else math.comb(i, j) for j in range(n)]
            for i in range(n)]


def pascal(n, kind=None):
    """The n x n Pascal matrix: binomial coefficients, lower (binom(i, j)), upper (its
    transpose) or symmetric (binom(i + j, i), their product; the default). float32, as
    JAX's (exact up to 2^24)."""
    n, kind = _size(n), _kind(kind)
    low = np.array(_pascal_lower(n, False), dtype=object).reshape(n, n)
    out = {"lower": low, "upper": low.T, "symmetric": low.dot(low.T)}[kind]
    return _constant(out.astype(float), np.float32)


def invpascal(n, kind=None):
    """The inverse of the n x n Pascal matrix of ``kind`` (see ``pascal``), computed
    exactly and rounded to the default float dtype."""
    n, kind = _size(n), _kind(kind)
    low = np.array(_pascal_lower(n, True), dtype=object).reshape(n, n)
    out = {"lower": low, "upper": low.T, "symmetric": low.T.dot(low)}[kind]
    return _constant(out.astype(float), dtypes.default_float_dtype())


def helmert(n, full=False):
    """The Helmert matrix of size n: row k - 1 (k = 1..n-1) is (1, ..., 1, -k, 0, ..., 0)
    / sqrt(k (k + 1)) with k ones, orthonormal contrasts; ``full`` prepends the row
    1 / sqrt(n) (an orthogonal n x n matrix). Otherwise (n - 1) x n."""
    n = _size(n)
    if n < 1:
        raise ValueError(f"n must be a positive integer; got {n}.")
    k = np.arange(1, n)[:, None].astype(float)
    j = np.arange(n)[None, :]
    rows = np.where(j < k, 1.0, np.where(j == k, -k, 0.0)) / np.sqrt(k * (k + 1))
    if full:
        rows = np.concatenate([np.full((1, n), 1 / np.sqrt(n)), rows], axis=0)
    return _constant(rows.reshape(-1, n), dtypes.default_float_dtype())


def hadamard(n, dtype=int):
    """The n x n Hadamard matrix of Sylvester's construction (n a power of 2): entries ±1,
    H Hᵀ = n I; entry (i, j) is (-1)^popcount(i & j)."""
    n = _size(n)
    if n < 1 or n & (n - 1):
        raise ValueError(f"n must be a positive power of 2; got {n}.")
    dtype = dtypes.canonicalize_user_dtype(dtype, "dtype", "hadamard")
    i = np.arange(n)
    parity = np.vectorize(lambda v: bin(v).count("1") & 1)(i[:, None] & i[None, :])
    return jnp.asarray(1 - 2 * parity.reshape(n, n), dtype=dtype)


def dft(n, scale=None, *, dtype=None):
    """The n x n discrete Fourier transform matrix, entry (i, j) = ω^(i j) with
    ω = exp(-2πi / n) (the exponent reduced mod n, so large n stay accurate); ``scale``
    None, 'sqrtn' (unitary) or 'n' divides by 1, sqrt(n) or n. ``dtype`` must be complex
    (default: the default complex dtype)."""
    n = _size(n)
    if scale is not None and scale not in ("sqrtn", "n"):
        raise ValueError(f"scale must be None, 'sqrtn', or 'n'; got {scale!r}.")
    if dtype is None:
        dtype = dtypes.default_complex_dtype()
    else:
        dtype = dtypes.canonicalize_user_dtype(dtype, "dtype", "dft")
        if not dtypes.is_complex(dtype):
            raise ValueError(f"dtype must be a complex floating-point type; got {dtype}.")
    i = np.arange(n)
    power = (i[:, None] * i[None, :]) % max(n, 1)
    values = np.exp(-2j * np.pi * power / max(n, 1))
    values = values / {None: 1, "sqrtn": math.sqrt(n) if n else 1, "n": max(n, 1)}[scale]
    return jnp.asarray(values.reshape(n, n), dtype=dtype)

