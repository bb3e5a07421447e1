"""schur: the Schur decomposition x = Z T Zᴴ of general square matrices (LAPACK gees).

T is upper triangular (complex input) or quasi-upper-triangular with 2 x 2 blocks for
complex-conjugate eigenvalue pairs (real input); Z is unitary. CPU only, not
differentiable (as in JAX).
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, jvp_rules, register_lowering
from plax.core.trace import get_aval
from plax.lax.linalg import lapack
from plax.lax.linalg.common import batched_on_front, check_square, eye_like
from plax.lowering.inline import lower_fun

__all__ = ["schur", "schur_p"]

schur_p = Primitive("schur", multiple_results=True)

_NOT_SQUARE = "The input to schur must be a square matrix"


def _abstract(x, *, compute_schur_vectors, sort_eig_vals, select_callable):
    check_square("schur", x, _NOT_SQUARE)
    return [ShapedArray(x.shape, x.dtype)] * (2 if compute_schur_vectors else 1)


def _cpu(x, *, compute_schur_vectors, sort_eig_vals, select_callable):
    aval = get_aval(x)
    if 0 in aval.shape:
        return [x, eye_like(aval)][:2 if compute_schur_vectors else 1]
    batch, n = aval.shape[:-2], aval.shape[-1]
    matrix = (aval.shape, aval.dtype, True)
    values = (batch + (n,), aval.dtype, False)
    count = (batch, np.int32, False)
    # gees gives the Schur form, the vectors, the eigenvalues (wr and wi for real input),
    # the number of eigenvalues a sort selected, and info.
    results = [matrix, matrix] + [values] * (1 if dtypes.is_complex(aval.dtype) else 2)
    outs = lapack.call("gees", [x], results + [count, count],
                       config=(("mode", "V" if compute_schur_vectors else "N"),
                               ("sort", "N")), aliases=((0, 0),))
    form, vectors, info = outs[0], outs[1], outs[-1]
    if not compute_schur_vectors:
        return [lapack.nan_unless_ok(info, form)]
    return lapack.nan_unless_ok(info, form, vectors)


def _jvp(primals, tangents, **params):
    raise NotImplementedError("Differentiation rule for 'schur' not implemented (JAX defines "
                              "none either).")


abstract_eval_rules[schur_p] = _abstract
register_lowering(schur_p, lower_fun(_cpu, multiple_results=True), platform="cpu")
jvp_rules[schur_p] = _jvp
batched_on_front(schur_p)


def schur(x, *, compute_schur_vectors: bool = True, sort_eig_vals: bool = False,
          select_callable=None):
    """The Schur decomposition of each square matrix of ``x``: a list ``[t, z]`` with
    ``x = z @ t @ zᴴ``, ``z`` unitary and ``t`` upper triangular (quasi-triangular, with 2 x 2
    blocks for complex-conjugate eigenvalue pairs, when ``x`` is real); only ``[t]`` without
    ``compute_schur_vectors``. Where LAPACK fails the results are NaN. Sorting the
    eigenvalues (``sort_eig_vals``, ``select_callable``) is not implemented, as in JAX's CPU
    kernel. CPU only; not differentiable."""
    check_square("schur", get_aval(x), _NOT_SQUARE)
    if sort_eig_vals:
        raise NotImplementedError("The sort feature of LAPACK's gees routine is not "
                                  "implemented; call schur with sort_eig_vals=False and "
                                  "reorder the eigenvalues yourself.")
    return schur_p.bind(x, compute_schur_vectors=bool(compute_schur_vectors),
                        sort_eig_vals=False, select_callable=select_callable)
