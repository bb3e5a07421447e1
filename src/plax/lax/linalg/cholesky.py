"""cholesky: the lower Cholesky factor of Hermitian positive-definite matrices."""
from __future__ import annotations

from functools import partial

import numpy as np

from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, jvp_rules, register_lowering
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.lax.linalg import lapack
from plax.lax.linalg.common import (batched_on_front, check_matrix, eye_like, matmul, symmetrize,
                                    triangle)
from plax.lax.linalg.triangular import triangular_solve_p
from plax.lowering.inline import lower_fun

__all__ = ["cholesky", "cholesky_p"]

cholesky_p = Primitive("cholesky")


def _abstract(x):
    check_matrix("cholesky", x, square=True)
    return ShapedArray(x.shape, x.dtype)


def _factorise(potrf, x):
    aval = get_aval(x)
    if 0 in aval.shape:
        return x
    factor, info = potrf([x], [(aval.shape, aval.dtype, True),
                               (aval.shape[:-2], np.int32, False)], aliases=((0, 0),))
    # potrf leaves the strict upper triangle as it found it; the public function masks it.
    return lapack.nan_unless_ok(info, factor)


def _cpu(x):
    return _factorise(partial(lapack.call, "potrf", config=(("uplo", "L"),)), x)


def _cuda(x):
    return _factorise(partial(lapack.call_target, "cusolver_potrf_ffi",
                              config=(("lower", True),)), x)


def _jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    # With L Lᴴ = A:  dL = L Φ(L⁻¹ dA L⁻ᴴ), Φ taking the lower triangle with half the diagonal
    # (Murray 2016), written as JAX's rule writes it, so that programs are JAX's: no
    # symmetrising of dA here (the public functions symmetrise A), and Φ as a division.
    low = triangle(cholesky_p.bind(x), lower=True)
    right = triangular_solve_p.bind(low, dx, left_side=False, lower=True, transpose_a=True,
                                    conjugate_a=True, unit_diagonal=False)
    middle = triangular_solve_p.bind(low, right, left_side=True, lower=True, transpose_a=False,
                                     conjugate_a=False, unit_diagonal=False)
    aval = get_aval(middle)
    one_plus_eye = _arith.add(np.array(1, aval.dtype), eye_like(aval))
    return low, matmul(low, _arith.div(triangle(middle, lower=True), one_plus_eye))


abstract_eval_rules[cholesky_p] = _abstract
register_lowering(cholesky_p, lower_fun(_cpu), platform="cpu")
register_lowering(cholesky_p, lower_fun(_cuda), platform="cuda")
# On TPUs XLA's own op (its compiler expands it), as JAX lowers it there.
register_lowering(cholesky_p, lambda ctx, x: [ctx.op1("stablehlo.cholesky", [x],
                                                      props="lower = true")], platform="tpu")
jvp_rules[cholesky_p] = _jvp
batched_on_front(cholesky_p)


def cholesky(x, *, symmetrize_input: bool = True):
    """The lower Cholesky factor ``L`` of each matrix of ``x`` (``L @ Lᴴ = x``), zero above
    the diagonal. A matrix that is not positive definite gives NaNs (no exception), as JAX.
    With ``symmetrize_input`` the factorised matrix is (x + xᴴ) / 2."""
    if symmetrize_input:
        check_matrix("cholesky", get_aval(x), square=True)
        x = symmetrize(x)
    return triangle(cholesky_p.bind(x), lower=True)
