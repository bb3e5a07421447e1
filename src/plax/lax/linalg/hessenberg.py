"""hessenberg: the reduction of square matrices to upper Hessenberg form (LAPACK gehrd).

x = Q H Qᴴ with H zero below its first sub-diagonal and Q = H_1 ... H_{n-1} a product of
Householder reflectors, returned in LAPACK's compact form. CPU only, not differentiable
(as in JAX).
"""
from __future__ import annotations

import numpy as np

from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, jvp_rules, register_lowering
from plax.core.trace import get_aval
from plax.first_order import shapes as _shapes
from plax.lax.linalg import lapack
from plax.lax.linalg.common import batched_on_front, check_square
from plax.lowering.inline import lower_fun

__all__ = ["hessenberg", "hessenberg_p"]

hessenberg_p = Primitive("hessenberg", multiple_results=True)

_NOT_SQUARE = "Argument to Hessenberg reduction must have shape [..., n, n]"


def _taus_shape(shape):
    return shape[:-2] + (max(shape[-1] - 1, 0),)


def _abstract(a):
    check_square("hessenberg", a, _NOT_SQUARE)
    return [ShapedArray(a.shape, a.dtype), ShapedArray(_taus_shape(a.shape), a.dtype)]


def _cpu(a):
    aval = get_aval(a)
    taus = (_taus_shape(aval.shape), aval.dtype, False)
    if 0 in aval.shape:
        return [a, _shapes.full(taus[0], 0, aval.dtype)]
    n = aval.shape[-1]
    # low = 1, high = n: the whole matrix is reduced (no balancing was done beforehand).
    h, t, info = lapack.call("gehrd", [a], [(aval.shape, aval.dtype, True), taus,
                                            (aval.shape[:-2], np.int32, False)],
                             config=(("high", n), ("low", 1)), aliases=((0, 0),))
    return lapack.nan_unless_ok(info, h, t)


def _jvp(primals, tangents):
    raise NotImplementedError("Differentiation rule for 'hessenberg' not implemented (JAX "
                              "defines none either).")


abstract_eval_rules[hessenberg_p] = _abstract
register_lowering(hessenberg_p, lower_fun(_cpu, multiple_results=True), platform="cpu")
jvp_rules[hessenberg_p] = _jvp
batched_on_front(hessenberg_p)


def hessenberg(a):
    """``(a, taus)``: the upper Hessenberg reduction of each square matrix of ``a`` in
    LAPACK's compact form. The result holds H on and above its first sub-diagonal and the
    Householder vectors (unit leading entry implied) below it; ``taus`` (n - 1 of them) are
    the reflectors' scales, so Q = H_1 ... H_{n-1} with H_i = I - tau_i v_i v_iᴴ and
    ``a = Q H Qᴴ``. CPU only; not differentiable."""
    check_square("hessenberg", get_aval(a), _NOT_SQUARE)
    h, taus = hessenberg_p.bind(a)
    return h, taus
