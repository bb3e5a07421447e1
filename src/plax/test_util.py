"""check_grads: compare plax's derivatives with finite differences (and jvp with vjp)."""
from __future__ import annotations

import functools

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core.trace import get_aval

_DEFAULT_EPS = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 1e-2, np.dtype(np.float64): 1e-5}
_DEFAULT_TOL = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 2e-2, np.dtype(np.float64): 1e-5}


def _leaves(x):
    return [np.asarray(v) for v in tree_util.tree_leaves(x)]


def _dtype_of(args):
    dts = [get_aval(x).dtype for x in tree_util.tree_leaves(args)]
    widest = max(dts, key=lambda d: d.itemsize) if dts else np.dtype(np.float32)
    return np.dtype(np.float64 if widest in (np.complex128,) else
                    np.float32 if widest == np.complex64 else widest)


def _rand_like(x, rng):
    a = get_aval(x)
    v = rng.standard_normal(a.shape)
    if dtypes.is_complex(a.dtype):
        v = v + 1j * rng.standard_normal(a.shape)
    return np.asarray(v, a.dtype)


def _add_scaled(xs, ts, s):
    return tuple(tree_util.tree_map(lambda x, t: np.asarray(np.asarray(x) + s * np.asarray(t),
                                                            get_aval(x).dtype), x, t)
                 for x, t in zip(xs, ts))


def _resolve(tol, dtype, default):
    """A tolerance for values of ``dtype``: ``tol`` itself, or, when ``tol`` is a dict mapping
    dtypes (anything np.dtype takes) to tolerances as in JAX, its entry for ``dtype``;
    ``default`` when there is none."""
    if not isinstance(tol, dict):
        return tol
    by_dtype = {np.dtype(k): v for k, v in tol.items()}
    return by_dtype.get(dtypes.canonicalize_dtype(np.dtype(dtype)), default)


def _assert_close(a, b, atol, rtol, what):
    """``a`` and ``b`` leaf by leaf within ``atol``/``rtol`` (numbers, or ``(spec, default)``
    pairs resolved per leaf dtype, the larger of the two leaves' entries as in JAX)."""
    for x, y in zip(_leaves(a), _leaves(b)):
        at, rt = (_per_leaf(t, x.dtype, y.dtype) for t in (atol, rtol))
        np.testing.assert_allclose(x.astype(np.complex128), y.astype(np.complex128),
                                   atol=at, rtol=rt, err_msg=what)


def _per_leaf(tol, *leaf_dtypes):
    if not isinstance(tol, tuple):
        return tol
    spec, default = tol
    return max(_resolve(spec, dt, default) for dt in leaf_dtypes)


def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=None, err_msg="", *, rng=None):
    """``f_jvp(primals, tangents) -> (out, out_tangent)`` against a central finite difference
    of ``f`` along a random tangent (``f_jvp`` is typically ``partial(plax.jvp, f)``)."""
    args = tuple(args)
    atol, rtol, eps = _tolerances(args, atol, rtol, eps)
    rng = np.random.default_rng(0) if rng is None else rng
    tangents = tuple(tree_util.tree_map(lambda x: _rand_like(x, rng), a) for a in args)
    out, out_t = f_jvp(args, tangents)
    _assert_close(out, f(*args), atol, rtol, err_msg or "JVP's primal output differs from f")
    numeric = _numerical_jvp(f, args, tangents, eps)
    _assert_close(out_t, numeric, atol, rtol, err_msg or "JVP does not match finite differences")


def _numerical_jvp(f, args, tangents, eps):
    """The derivative of ``f`` at ``args`` along ``tangents``, by central differences."""
    plus = f(*_add_scaled(args, tangents, eps / 2))
    minus = f(*_add_scaled(args, tangents, -eps / 2))
    return tree_util.tree_map(lambda p, m: (np.asarray(p) - np.asarray(m)) / eps, plus, minus)


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=None, err_msg="", *, rng=None):
    """``f_vjp(*args) -> (out, vjp_fun)`` against finite differences: Re<t, conj(vjp(conj(ct)))>
    must equal Re<jvp(t), ct> for random t, ct, the jvp taken numerically (so ``f`` may
    be a custom_vjp function). ``f_vjp`` is typically ``partial(plax.vjp, f)``.

    The conjugations make this hold for complex (also non-holomorphic) functions under
    the convention that vjp transposes the jvp without conjugating.
    """
    args = tuple(args)
    atol, rtol, eps = _tolerances(args, atol, rtol, eps)
    rng = np.random.default_rng(0) if rng is None else rng
    out, vjp_fun = f_vjp(*args)
    _assert_close(out, f(*args), atol, rtol, err_msg or "VJP's primal output differs from f")
    tangents = tuple(tree_util.tree_map(lambda x: _rand_like(x, rng), a) for a in args)
    cts = tree_util.tree_map(lambda o: _rand_like(o, rng), out)
    out_t = _numerical_jvp(f, args, tangents, eps)
    ct_in = [np.conj(c) for c in _leaves(vjp_fun(tree_util.tree_map(np.conj, cts)))]
    lhs = sum(np.real(np.vdot(t, c)) for t, c in zip(_leaves(tangents), ct_in))
    rhs = sum(np.real(np.vdot(t, c)) for t, c in zip(_leaves(out_t), _leaves(cts)))
    dt = _dtype_of(args)
    atol, rtol = _per_leaf(atol, dt), _per_leaf(rtol, dt)
    np.testing.assert_allclose(lhs, rhs, atol=atol * max(1, abs(rhs)), rtol=rtol,
                               err_msg=err_msg or "VJP does not agree with JVP")


def _tolerances(args, atol, rtol, eps):
    """atol, rtol and eps for ``args``: a tolerance given as a dict from dtypes to numbers
    (as JAX takes it) stays a ``(dict, default)`` pair, resolved for each compared value's
    dtype; dtypes it does not name get the default for the arguments' dtype."""
    if isinstance(eps, dict):
        raise TypeError("check_grads: eps must be a number (the finite-difference step), got "
                        "a dict; only atol and rtol take per-dtype dicts.")
    dt = _dtype_of(args)
    default = _DEFAULT_TOL.get(dt, 1e-3)
    atol, rtol = ((default if t is None else (t, default) if isinstance(t, dict) else t)
                  for t in (atol, rtol))
    return atol, rtol, eps if eps is not None else _DEFAULT_EPS.get(dt, 1e-3)


def check_grads(f, args, order: int, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check derivatives of ``f`` at ``args`` up to ``order`` against finite differences.

    "fwd" checks jvp numerically; "rev" checks vjp against jvp. Higher orders check the
    derivatives of the jvp/vjp functions themselves.
    """
    args = tuple(args)
    atol, rtol, eps = _tolerances(args, atol, rtol, eps)
    rng = np.random.default_rng(0)
    for mode in modes:
        if mode not in ("fwd", "rev"):
            raise ValueError(f"check_grads modes must be 'fwd' or 'rev', got {mode!r}.")
    _check(f, args, order, modes, atol, rtol, eps, rng)


def _check(f, args, order, modes, atol, rtol, eps, rng):
    from plax.api.autodiff import jvp, vjp
    if order <= 0:
        return
    if "fwd" in modes:
        check_jvp(f, functools.partial(jvp, f), args, atol, rtol, eps, rng=rng)
        if order > 1:
            tangents = tuple(tree_util.tree_map(lambda x: _rand_like(x, rng), a) for a in args)
            _check(lambda *p: jvp(f, p, tangents)[1], args, order - 1, ("fwd",), atol, rtol,
                   eps, rng)
    if "rev" in modes:
        check_vjp(f, functools.partial(vjp, f), args, atol, rtol, eps, rng=rng)
        if order > 1:
            out = f(*args)
            cts = tree_util.tree_map(lambda o: _rand_like(o, rng), out)
            _check(lambda *p: vjp(f, *p)[1](cts), args, order - 1, ("rev",), atol, rtol, eps, rng)
