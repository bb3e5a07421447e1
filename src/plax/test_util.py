"""check_grads: compare plax's derivatives with finite differences (and vjp with jvp).

The numerics are JAX's (``jax.test_util``), so a test calibrated on JAX passes or fails
the same way here: a central difference of step ``eps`` (default 1e-4) along one random
direction drawn from ``np.random.RandomState(0)`` afresh for each check, tolerances per
dtype (float32: 2e-3, float64: 1e-5, ...) scaled by the number of elements, and higher
orders checking the jvp and vjp functions themselves.
"""
from __future__ import annotations

import functools

import numpy as np

from plax import tree_util
from plax.core import dtypes

__all__ = ["check_grads", "check_jvp", "check_vjp"]

EPS = 1e-4

# What values of each dtype may differ by in a derivative check (JAX's figures).
# Keyed by name: bfloat16 is ml_dtypes', imported only when first needed.
_GRADIENT_TOLERANCE = {"bfloat16": 1e-1, "float16": 1e-2, "float32": 2e-3, "float64": 1e-5,
                       "complex64": 1e-3, "complex128": 1e-5}
# ... and for a dtype the gradient table does not name (exact for integers).
_VALUE_TOLERANCE = {"bfloat16": 1e-2, "float16": 1e-3, "float32": 1e-6, "float64": 1e-15,
                    "complex64": 1e-6, "complex128": 1e-15}
_SCALAR_DTYPES = {bool: np.dtype(np.bool_), int: np.dtype(np.int64),
                  float: np.dtype(np.float64), complex: np.dtype(np.complex128)}


def _is_scalar(x) -> bool:
    return type(x) in _SCALAR_DTYPES


def _dtype(x) -> np.dtype:
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    return _SCALAR_DTYPES.get(type(x)) or np.asarray(x).dtype


def _tolerance_table(tol):
    """``tol`` as a number, or as a dtype -> number table over the gradient defaults."""
    if tol is None:
        return _GRADIENT_TOLERANCE
    if not isinstance(tol, dict):
        return tol
    return {**_GRADIENT_TOLERANCE, **{dtypes.np_dtype(k).name: v for k, v in tol.items()}}


def _tolerance_for(dtype, table) -> float:
    if not isinstance(table, dict):
        return table
    if dtype == dtypes.float0:
        return 0
    name = dtypes.canonicalize_dtype(dtype).name
    if name in table:
        return table[name]
    return _VALUE_TOLERANCE.get(name, 0)


def _assert_close(xs, ys, atol, rtol, what: str) -> None:
    def close(x, y):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape, f"{what}: shapes {x.shape} and {y.shape} differ"
        if x.dtype == y.dtype == dtypes.float0:
            np.testing.assert_array_equal(x, y, err_msg=what)
            return
        at = max(_tolerance_for(x.dtype, atol), _tolerance_for(y.dtype, atol)) * x.size
        rt = max(_tolerance_for(x.dtype, rtol), _tolerance_for(y.dtype, rtol)) * y.size
        widen = lambda v: v.astype(np.float32) if v.dtype.name == "bfloat16" else v  # noqa: E731
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(widen(x), widen(y), err_msg=what,
                                       **({"atol": at} if at else {}),
                                       **({"rtol": rt} if rt else {}))
    tree_util.tree_map(close, xs, ys)


def _random_like(rng, x):
    """A standard normal value of ``x``'s shape and dtype (a Python scalar stays one)."""
    dtype = _dtype(x)
    draw = lambda: np.asarray(rng.randn(*np.shape(x)), dtype=dtype)  # noqa: E731
    out = draw() + dtype.type(1j) * draw() if np.issubdtype(dtype, np.complexfloating) \
        else draw()
    return out.item() if _is_scalar(x) else out


def _keep_type(op):
    def apply(*xs):
        out = np.array(op(*xs), dtype=_dtype(xs[0]))
        return out.item() if all(_is_scalar(x) for x in xs) else out
    return apply


def _scaled(xs, s):
    def mul(x):
        dtype = _dtype(x)
        out = np.multiply(x, np.array(s, dtype=dtype), dtype=dtype)
        return out.item() if _is_scalar(x) else out
    return tree_util.tree_map(mul, xs)


def _difference(x, y):
    """``x - y`` with ``inf - inf == 0``."""
    dtype = _dtype(x)
    with np.errstate(invalid="ignore"):
        return np.where(np.equal(x, y), np.array(0, dtype), np.subtract(x, y, dtype=dtype))


def numerical_jvp(f, primals, tangents, eps=EPS):
    """The derivative of ``f`` at ``primals`` along ``tangents``, by central differences."""
    delta = _scaled(tangents, eps)
    plus = f(*tree_util.tree_map(_keep_type(np.add), primals, delta))
    minus = f(*tree_util.tree_map(_keep_type(np.subtract), primals, delta))
    return _scaled(tree_util.tree_map(_difference, plus, minus), 0.5 / eps)


def _inner_product(xs, ys) -> float:
    parts = tree_util.tree_map(lambda x, y: np.real(np.dot(np.conj(x).reshape(-1),
                                                           np.asarray(y).reshape(-1))), xs, ys)
    return functools.reduce(np.add, tree_util.tree_leaves(parts), 0.0)


def _check_dtypes_match(xs, ys) -> None:
    def same(x, y):
        dx, dy = dtypes.canonicalize_dtype(_dtype(x)), dtypes.canonicalize_dtype(_dtype(y))
        assert dx == dy, f"the primal output has dtype {dx} but its tangent {dy}"
    tree_util.tree_map(same, xs, ys)


def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    """``f_jvp(primals, tangents) -> (out, out_tangent)`` (typically
    ``functools.partial(plax.jvp, f)``) against a central difference of ``f``."""
    atol, rtol = _tolerance_table(atol), _tolerance_table(rtol)
    tangent = tree_util.tree_map(functools.partial(_random_like, np.random.RandomState(0)),
                                 args)
    out, out_tangent = f_jvp(args, tangent)
    _check_dtypes_match(out, out_tangent)
    _assert_close(out, f(*args), atol, rtol, f"{err_msg or 'JVP'}: primal output differs from f")
    expected = numerical_jvp(f, args, tangent, eps=eps)
    _assert_close(out_tangent, expected, atol, rtol,
                  f"{err_msg or 'JVP'} does not match finite differences (tangent)")


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    """``f_vjp(*args) -> (out, vjp_fun)`` (typically ``functools.partial(plax.vjp, f)``):
    <t, vjp(ct)> must equal <jvp(t), ct> for random t and ct, the jvp taken numerically."""
    atol, rtol = _tolerance_table(atol), _tolerance_table(rtol)
    random_like = functools.partial(_random_like, np.random.RandomState(0))
    out, vjp_fun = f_vjp(*args)
    _assert_close(out, f(*args), atol, rtol, f"{err_msg or 'VJP'}: primal output differs from f")
    tangent = tree_util.tree_map(random_like, args)
    tangent_out = numerical_jvp(f, args, tangent, eps=eps)
    cotangent = tree_util.tree_map(random_like, out)
    conj = functools.partial(tree_util.tree_map, _keep_type(np.conj))
    cotangent_in = conj(vjp_fun(conj(cotangent)))
    _assert_close(_inner_product(tangent, cotangent_in), _inner_product(tangent_out, cotangent),
                  atol, rtol, f"{err_msg or 'VJP'} does not agree with JVP "
                              "(cotangent projection)")


def check_grads(f, args, order: int, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check derivatives of ``f`` at ``args`` up to ``order`` against finite differences
    ("fwd": jvp; "rev": vjp against the numerical jvp; higher orders check the jvp and
    vjp functions themselves)."""
    from plax.api.autodiff import jvp, vjp
    args = tuple(args)
    if isinstance(eps, dict):
        raise TypeError("check_grads: eps must be a number (the finite-difference step), got "
                        "a dict; only atol and rtol take per-dtype dicts.")
    eps = eps or EPS
    for mode in modes:
        if mode not in ("fwd", "rev"):
            raise ValueError(f"check_grads modes must be 'fwd' or 'rev', got {mode!r}.")

    def check(f, args, order, what):
        if "fwd" in modes:
            name = f"JVP of {what}" if what else "JVP"
            check_jvp(f, functools.partial(jvp, f), args, atol, rtol, eps, name)
            if order > 1:
                check(functools.partial(jvp, f), (args, args), order - 1, name)
        if "rev" in modes:
            name = f"VJP of {what}" if what else "VJP"
            check_vjp(f, functools.partial(vjp, f), args, atol, rtol, eps, name)
            if order > 1:
                def f_vjp(*primals):
                    out, pullback = vjp(f, *primals)
                    return pullback(out)
                check(f_vjp, args, order - 1, name)

    check(f, args, order, "")
