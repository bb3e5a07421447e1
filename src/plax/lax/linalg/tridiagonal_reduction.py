"""tridiagonal: the reduction of Hermitian matrices to real symmetric tridiagonal form
(LAPACK sytrd / hetrd).

a = Q T Qᴴ with T tridiagonal (diagonal d, off-diagonal e, both real) and Q a product of
Householder reflectors, returned in LAPACK's compact form. CPU only, not differentiable
(as in JAX).
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, jvp_rules, register_lowering
from plax.core.trace import get_aval
from plax.lax.linalg import lapack
from plax.lax.linalg.common import batched_on_front, check_matrix
from plax.lowering.inline import lower_fun

__all__ = ["tridiagonal", "tridiagonal_p"]

tridiagonal_p = Primitive("tridiagonal", multiple_results=True)


def _check(aval):
    check_matrix("tridiagonal", aval, arg="a")
    n = aval.shape[-1]
    if aval.shape[-2] != n or n == 0:
        raise ValueError(f"The input to tridiagonal must be a square matrix. Got shape "
                         f"{aval.shape}; tridiagonal needs a (batch of) non-empty square "
                         "matrices.")


def _avals(aval):
    batch, n = aval.shape[:-2], aval.shape[-1]
    real = np.finfo(aval.dtype).dtype  # float32 for complex64, ...
    return [ShapedArray(aval.shape, aval.dtype), ShapedArray(batch + (n,), real),
            ShapedArray(batch + (n - 1,), real), ShapedArray(batch + (n - 1,), aval.dtype)]


def _abstract(a, *, lower):
    _check(a)
    return _avals(a)


def _cpu(a, *, lower):
    aval = get_aval(a)
    routine = "hetrd" if dtypes.is_complex(aval.dtype) else "sytrd"
    outs = [(v.shape, v.dtype, i == 0) for i, v in enumerate(_avals(aval))]
    *results, info = lapack.call(routine, [a], outs + [(aval.shape[:-2], np.int32, False)],
                                 config=(("uplo", "L" if lower else "U"),), aliases=((0, 0),))
    return lapack.nan_unless_ok(info, *results)


def _jvp(primals, tangents, *, lower):
    raise NotImplementedError("Differentiation rule for 'tridiagonal' not implemented (JAX "
                              "defines none either).")


abstract_eval_rules[tridiagonal_p] = _abstract
register_lowering(tridiagonal_p, lower_fun(_cpu, multiple_results=True), platform="cpu")
jvp_rules[tridiagonal_p] = _jvp
batched_on_front(tridiagonal_p)


def tridiagonal(a, *, lower: bool = True):
    """``(a, d, e, taus)``: the reduction of each Hermitian matrix of ``a`` (only its
    ``lower`` or upper triangle is read) to a real symmetric tridiagonal T = Qᴴ a Q, in
    LAPACK's compact form. ``d`` (n) and ``e`` (n - 1) are T's diagonal and off-diagonal
    (real); the returned matrix holds them on its diagonals and the Householder vectors in
    the rest of the triangle read, with scales ``taus`` (n - 1). CPU only; not
    differentiable."""
    _check(get_aval(a))
    arr, d, e, taus = tridiagonal_p.bind(a, lower=bool(lower))
    return arr, d, e, taus
