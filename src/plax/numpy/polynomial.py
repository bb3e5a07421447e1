"""Polynomials as coefficient arrays, highest power first: polyval, polyadd, polysub,
polymul, polydiv, polyder, polyint, poly (from roots), roots and polyfit.

Written on plax.lax and the other plax.numpy modules. As in JAX, arithmetic on
coefficients keeps the promoted dtype (polyadd, polysub, polyval) while products,
quotients, derivatives and integrals are inexact. roots are the eigenvalues of the
companion matrix (lax.linalg.eig, CPU).
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax.api.jit import eager_compiled
from plax.core.errors import ConcretizationTypeError
from plax.core.trace import Tracer, get_aval
from plax.numpy import creation, shape_ops, ufuncs, util
from plax.numpy.util import as_operand, check_arraylike, convert, promote_dtypes, \
    promote_dtypes_inexact

__all__ = ["polyval", "polyadd", "polysub", "polymul", "polydiv", "polyder", "polyint", "poly",
           "roots", "polyfit"]


def _aval(x):
    return get_aval(as_operand(x))


def _coeffs(name: str, argname: str, p):
    """``p`` as an array of at least one dimension (coefficients along axis 0)."""
    if _aval(p).ndim == 0:
        raise ValueError(f"{name}: {argname} must be an array of coefficients of at least one "
                         f"dimension, got a scalar.")
    return p


def _order(name: str, value, what: str) -> int:
    try:
        return util.static_nonnegative_int(value, "m", name)
    except TypeError:
        raise TypeError(f"{name}: m must be a non-negative integer, got {value!r}.") from None
    except ValueError:
        raise ValueError(f"{name}: Order of {what} must be positive (got m={value}).") from None


def _pad_front(p, n: int):
    """``p`` with zeros prepended along axis 0 up to length ``n``."""
    k = _aval(p).shape[0]
    if k == n:
        return p
    pads = [(n - k, 0, 0)] + [(0, 0, 0)] * (_aval(p).ndim - 1)
    return lax.pad(p, creation.zeros((), _aval(p).dtype), pads)


def _concrete(x, name: str, argname: str, flag: str = "trim_leading_zeros"):
    if isinstance(x, Tracer):
        val = x.to_concrete_value()
        if val is None:
            raise ConcretizationTypeError(
                x, f"plax.numpy.{name}: {flag}=True needs the concrete value of "
                   f"{argname}, since the output shape depends on it; pass "
                   f"{flag}=False under jit.")
        return np.asarray(val)
    return np.asarray(x)


def _trim_leading(p, name: str, argname: str, keep_one: bool = True):
    host = _concrete(p, name, argname)
    nz = np.flatnonzero(host)
    start = int(nz[0]) if nz.size else host.shape[0]
    if keep_one and start == host.shape[0]:
        start = max(host.shape[0] - 1, 0)
    return p[start:]


# --- evaluation, addition -----------------------------------------------------------------
@eager_compiled(static_argnames=("unroll",))  # (its scan compiled once, as JAX's)
def polyval(p, x, *, unroll=16):
    """Value of the polynomial with coefficients ``p`` (highest power first) at ``x``,
    by Horner's rule (a scan over the coefficients, ``unroll`` steps per iteration)."""
    check_arraylike("polyval", p, x)
    p, x = promote_dtypes(p, x)
    p = _coeffs("polyval", "p", p)
    shape = shape_ops.broadcast_shapes(_aval(x).shape, _aval(p).shape[1:])
    y0 = creation.zeros(shape, _aval(p).dtype)

    def step(y, c):
        return ufuncs.add(ufuncs.multiply(y, x), c), None

    y, _ = lax.scan(step, y0, p, unroll=unroll)
    return y


def _aligned(name: str, a1, a2):
    check_arraylike(name, a1, a2)
    a1, a2 = promote_dtypes(a1, a2)
    a1, a2 = _coeffs(name, "a1", a1), _coeffs(name, "a2", a2)
    n = max(_aval(a1).shape[0], _aval(a2).shape[0])
    return _pad_front(a1, n), _pad_front(a2, n)


def polyadd(a1, a2):
    """Sum of two polynomials (coefficient arrays aligned at the constant term)."""
    a1, a2 = _aligned("polyadd", a1, a2)
    return ufuncs.add(a1, a2)


def polysub(a1, a2):
    """Difference ``a1 - a2`` of two polynomials."""
    a1, a2 = _aligned("polysub", a1, a2)
    return ufuncs.subtract(a1, a2)


# --- products and quotients -----------------------------------------------------------------
def _convolve_full(a, b):
    """Full discrete convolution of the 1-D ``a`` and ``b`` as a Toeplitz matrix product."""
    n, m = _aval(a).shape[0], _aval(b).shape[0]
    out = n + m - 1
    rows = np.arange(out)[:, None] - np.arange(n)[None, :]  # b index for (k, i)
    valid = (rows >= 0) & (rows < m)
    taken = b[np.clip(rows, 0, m - 1).astype(np.int32)]
    toeplitz = ufuncs.where(valid, taken, creation.zeros((), _aval(b).dtype))
    return lax.reduce_sum(ufuncs.multiply(toeplitz, a[None, :]), (1,))


def polymul(a1, a2, *, trim_leading_zeros=False):
    """Product of two polynomials. With ``trim_leading_zeros`` (needs concrete values)
    leading zero coefficients of the inputs are removed first."""
    check_arraylike("polymul", a1, a2)
    a1, a2 = promote_dtypes_inexact(a1, a2)
    a1, a2 = shape_ops.atleast_1d(a1), shape_ops.atleast_1d(a2)
    for argname, a in (("a1", a1), ("a2", a2)):
        if _aval(a).ndim != 1:
            raise ValueError(f"polymul: {argname} must be 1-dimensional, got shape "
                             f"{_aval(a).shape}.")
    if trim_leading_zeros:
        a1 = _trim_leading(a1, "polymul", "a1")
        a2 = _trim_leading(a2, "polymul", "a2")
    dt = _aval(a1).dtype
    if _aval(a1).shape[0] == 0:
        a1 = creation.zeros((1,), dt)
    if _aval(a2).shape[0] == 0:
        a2 = creation.zeros((1,), dt)
    return _convolve_full(a1, a2)


def polydiv(u, v, *, trim_leading_zeros=False):
    """Quotient and remainder of polynomial division ``u / v``. The remainder has the
    length of ``u`` unless ``trim_leading_zeros`` (needs concrete values) removes its
    leading zeros."""
    check_arraylike("polydiv", u, v)
    u, v = promote_dtypes_inexact(u, v)
    u, v = shape_ops.atleast_1d(u), shape_ops.atleast_1d(v)
    for argname, a in (("u", u), ("v", v)):
        if _aval(a).ndim != 1 or _aval(a).shape[0] == 0:
            raise ValueError(f"polydiv: {argname} must be a non-empty 1-D array, got shape "
                             f"{_aval(a).shape}.")
    n, m = _aval(u).shape[0], _aval(v).shape[0]
    dt = _aval(u).dtype
    steps = max(n - m + 1, 0)
    if steps == 0:
        q = creation.zeros((1,), dt)
        r = u
    else:
        scale = ufuncs.true_divide(creation.ones((), dt), v[0])
        q_parts, r = [], u
        for k in range(steps):  # static number of elimination steps
            d = ufuncs.multiply(r[k], scale)
            q_parts.append(d)
            sub = _pad_front(lax.pad(ufuncs.multiply(d, v), creation.zeros((), dt),
                                     [(0, n - k - m, 0)]), n)
            r = ufuncs.subtract(r, sub)
        q = shape_ops.stack(q_parts)
    if trim_leading_zeros:
        r = _trim_leading(r, "polydiv", "the remainder", keep_one=False)
    return q, r


# --- calculus -----------------------------------------------------------------------------
def polyder(p, m=1):
    """The ``m``-th derivative of the polynomial ``p``."""
    check_arraylike("polyder", p)
    m = _order("polyder", m, "derivative")
    p = promote_dtypes_inexact(p)[0]
    p = _coeffs("polyder", "p", p)
    n = _aval(p).shape[0]
    if m == 0:
        return creation.asarray(p)
    if m >= n:
        return creation.zeros((0,) + _aval(p).shape[1:], _aval(p).dtype)
    powers = np.arange(n - 1, m - 1, -1, dtype=np.float64)  # power of each kept term
    factor = np.ones_like(powers)
    for j in range(m):
        factor *= powers - j
    factor = convert(factor.reshape((-1,) + (1,) * (_aval(p).ndim - 1)), _aval(p).dtype)
    return ufuncs.multiply(p[:n - m], factor)


def polyint(p, m=1, k=None):
    """The ``m``-th antiderivative of ``p``; ``k`` gives the integration constants (a
    scalar used for every step, or one per step, the first step's first)."""
    check_arraylike("polyint", p)
    m = _order("polyint", m, "integral")
    p = promote_dtypes_inexact(p)[0]
    p = _coeffs("polyint", "p", p)
    dt = _aval(p).dtype
    if _aval(p).ndim != 1:
        raise ValueError(f"polyint: p must be 1-dimensional, got shape {_aval(p).shape}.")
    if k is None:
        k = creation.zeros((m,), dt)
    else:
        check_arraylike("polyint", k)
        k = convert(as_operand(k), dt)
        shape = _aval(k).shape
        if shape in ((), (1,)):
            k = shape_ops.broadcast_to(lax.reshape(k, ()), (m,))
        elif shape != (m,):
            raise ValueError(f"polyint: k must be a scalar or a rank-1 array of length 1 or "
                             f"m={m}, got shape {shape}.")
    if m == 0:
        return creation.asarray(p)
    for step in range(m):
        n = _aval(p).shape[0]
        divisors = convert(np.arange(n, 0, -1, dtype=np.float64), dt)
        p = lax.concatenate([ufuncs.true_divide(p, divisors), lax.reshape(k[step], (1,))], 0)
    return p


# --- from roots -----------------------------------------------------------------------------
def poly(seq_of_zeros):
    """Coefficients (leading 1) of the monic polynomial with the given roots."""
    check_arraylike("poly", seq_of_zeros)
    z = promote_dtypes_inexact(seq_of_zeros)[0]
    z = shape_ops.atleast_1d(z)
    shape = _aval(z).shape
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] > 0:
        z = _eigenvalues(z)  # the characteristic polynomial of the matrix
        shape = _aval(z).shape
    if len(shape) != 1:
        raise ValueError(f"poly: input must be 1d or non-empty square 2d array, got shape "
                         f"{shape}.")
    n = shape[0]
    dt = _aval(z).dtype
    if n == 0:
        return creation.ones((), dt)
    a0 = lax.concatenate([creation.ones((1,), dt), creation.zeros((n,), dt)], 0)

    def step(a, r):  # multiply by (x - r): a - r * (a shifted one place right)
        shifted = lax.concatenate([creation.zeros((1,), dt), a[:n]], 0)
        return ufuncs.subtract(a, ufuncs.multiply(r, shifted)), None

    a, _ = lax.scan(step, a0, z)
    return a


def _eigenvalues(a):
    return lax.linalg.eig(a, compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]


def roots(p, *, strip_zeros: bool = True):
    """The (complex) roots of the polynomial with coefficients ``p``, highest power first.

    With ``strip_zeros`` leading zeros are dropped first, which needs concrete ``p``; without
    it (usable under jit) each leading zero stands for a root at infinity, given as NaN.
    """
    check_arraylike("roots", p)
    p = shape_ops.atleast_1d(promote_dtypes_inexact(p)[0])
    if _aval(p).ndim != 1:
        raise ValueError(f"roots: input must be a rank-1 array of coefficients, got shape "
                         f"{_aval(p).shape}.")
    if strip_zeros:
        host = _concrete(p, "roots", "p", "strip_zeros").ravel()
        nz = np.flatnonzero(host)
        p = p[int(nz[0]):] if nz.size else p[:0]
    n = _aval(p).shape[0] - 1
    cdt = np.result_type(_aval(p).dtype, np.complex64)
    if n < 1:
        return creation.zeros((0,), cdt)
    if strip_zeros:
        return _eigenvalues(_companion(p, n))
    # Leading zeros: shift them to the end (each then adds a root at 0), and report as many
    # roots as there are leading zeros as NaN.
    is_zero = ufuncs.equal(p, creation.zeros((), _aval(p).dtype))
    leading = lax.cumprod(convert(is_zero, np.int32))
    count = lax.reduce_sum(leading, (0,))
    order = ufuncs.remainder(lax.iota(np.int32, n + 1) + count, n + 1)
    shifted = p[order]
    # The shift made `count` roots at 0: sorted first by magnitude, they are dropped, and NaNs
    # fill the end.
    found = _eigenvalues(_companion(shifted, n))
    _, found = lax.sort((ufuncs.abs(found), found), num_keys=1)
    index = lax.iota(np.int32, n) + count
    keep = index < n
    picked = found[lax.min(index, np.int32(n - 1))]
    return lax.select(keep, picked, creation.full((n,), complex(np.nan, np.nan), cdt))


def _companion(p, n: int):
    """The companion matrix of p (p[0] != 0): -p[1:] / p[0] on the first row, ones below."""
    dt = _aval(p).dtype
    first = ufuncs.negative(ufuncs.true_divide(p[1:], p[0]))
    below = creation.eye(n - 1, n, dtype=dt)
    return lax.concatenate([lax.reshape(first, (1, n)), below], 0)


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial of degree ``deg`` through the points (x, y), highest power
    first (one column of coefficients per column of a 2-D ``y``), as numpy.polyfit: with
    ``full`` also the residuals, rank, singular values and rcond; with ``cov`` the
    coefficients' covariance (``cov='unscaled'``: not scaled by the residuals)."""
    from plax.numpy import array_edit, linalg, reductions
    check_arraylike("polyfit", x, y)
    deg = util.static_nonnegative_int(deg, "deg", "polyfit")
    x, y = promote_dtypes_inexact(x, y)
    if _aval(x).ndim != 1:
        raise TypeError(f"polyfit: expected 1D vector for x, got shape {_aval(x).shape}.")
    if _aval(x).shape[0] == 0:
        raise TypeError("polyfit: expected non-empty vector for x.")
    if _aval(y).ndim not in (1, 2):
        raise TypeError(f"polyfit: expected 1D or 2D array for y, got shape {_aval(y).shape}.")
    if _aval(x).shape[0] != _aval(y).shape[0]:
        raise TypeError(f"polyfit: expected x and y to have same length, got {_aval(x).shape[0]} "
                        f"and {_aval(y).shape[0]}.")
    order = deg + 1
    n = _aval(x).shape[0]
    if rcond is None:
        rcond = n * float(np.finfo(_aval(x).dtype).eps)
    lhs = array_edit.vander(x, order)
    rhs = y
    if w is not None:
        check_arraylike("polyfit", w)
        (w,) = promote_dtypes_inexact(w)
        if _aval(w).shape != (n,):
            raise TypeError(f"polyfit: expected a 1-d weight vector of length {n}, got shape "
                            f"{_aval(w).shape}.")
        lhs = ufuncs.multiply(lhs, w[:, None])
        rhs = ufuncs.multiply(rhs, w if _aval(rhs).ndim == 1 else w[:, None])
    # Columns scaled to unit norm improve the conditioning (as NumPy does).
    scale = ufuncs.sqrt(reductions.sum(ufuncs.multiply(lhs, lhs), axis=0))
    lhs = ufuncs.true_divide(lhs, scale)
    c, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    c = ufuncs.true_divide(c, scale if _aval(c).ndim == 1 else scale[:, None])
    if full:
        return c, resids, rank, s, creation.asarray(rcond)
    if cov:
        base = ufuncs.true_divide(linalg.inv(lhs.T @ lhs), scale[:, None] * scale[None, :])
        if cov == "unscaled":
            fac = 1
        else:
            if n <= order:
                raise ValueError("the number of data points must exceed order to scale the "
                                 "covariance matrix")
            fac = ufuncs.true_divide(resids, n - order)
        if _aval(y).ndim == 1:
            return c, ufuncs.multiply(base, fac)
        return c, ufuncs.multiply(base[:, :, None], fac)
    return c
