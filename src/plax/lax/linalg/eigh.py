"""eigh: eigenvalues and eigenvectors of Hermitian (real symmetric) matrices."""
from __future__ import annotations

import enum
from functools import partial

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, jvp_rules, register_lowering
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import shapes as _shapes
from plax.first_order.conversion import convert_element_type
from plax.lax.linalg import lapack
from plax.first_order.common import real_dtype
from plax.lax.linalg.common import (adjoint, batched_on_front, check_square, diagonal,
                                    eye_like, matmul, spread, subset_bounds, take_columns,
                                    symmetrize)
from plax.lowering.inline import lower_fun

__all__ = ["EighImplementation", "eigh", "eigh_p"]

eigh_p = Primitive("eigh", multiple_results=True)


class EighImplementation(enum.Enum):
    """Which algorithm computes ``eigh``: QR (LAPACK's on CPU, cuSOLVER's syevd on NVIDIA
    GPUs), Jacobi (NVIDIA GPUs, and XLA's on TPUs) and QDWH (the spectral divide and conquer,
    TPUs' default)."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


def _abstract(x, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    check_square("eigh", x, "Argument to symmetric eigendecomposition must have shape [..., n, n]")
    n = x.shape[-1]
    if subset_by_index is None:
        d = n
    else:
        start, end = subset_bounds("eigh", subset_by_index, n)
        d = end - start
    return [ShapedArray(x.shape[:-1] + (d,), x.dtype),
            ShapedArray(x.shape[:-2] + (d,), real_dtype(x.dtype))]


def _eigh(x, *, lower, sort_eigenvalues, subset_by_index, algorithm, platform):
    # syevd/heevd (and cuSOLVER's syevd) return the eigenvalues in ascending order whatever
    # sort_eigenvalues says.
    if algorithm == EighImplementation.QDWH:
        raise NotImplementedError("QDWH implementation is only supported on TPU; use "
                                  "implementation=None (or EighImplementation.QR) on "
                                  f"{platform.upper()}.")
    if algorithm == EighImplementation.JACOBI and platform == "cpu":
        raise NotImplementedError("Jacobi implementation is not supported on CPU; use "
                                  "implementation=None (or EighImplementation.QR).")
    aval = get_aval(x)
    real = real_dtype(aval.dtype)
    if 0 in aval.shape:
        v, w = x, _shapes.full(aval.shape[:-1], 0, real)
    else:
        results = [(aval.shape, aval.dtype, True), (aval.shape[:-1], real, False),
                   (aval.shape[:-2], np.int32, False)]
        if platform == "cuda":  # cuSOLVER's algorithm 0 (syevd, or Jacobi if small), 1 (QR), 2
            code = {None: 0, EighImplementation.QR: 1, EighImplementation.JACOBI: 2}[algorithm]
            v, w, info = lapack.call_target(
                "cusolver_syevd_ffi", [x], results, aliases=((0, 0),),
                config=(("algorithm", np.uint8(code)), ("lower", bool(lower))))
        else:
            fn = "heevd" if dtypes.is_complex(aval.dtype) else "syevd"
            v, w, info = lapack.call(fn, [x], results, aliases=((0, 0),),
                                     config=(("mode", "V"), ("uplo", "L" if lower else "U")))
        v, w = lapack.nan_unless_ok(info, v, w)
    if subset_by_index is not None:
        v, w = take_columns(v, *subset_by_index), take_columns(w, *subset_by_index)
    return [v, w]


def _jvp(primals, tangents, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    # Distinct eigenvalues: with P = vᴴ dA v, dw = Re diag(P) and dv = v (F ∘ P), where
    # F_ij = 1 / (w_j - w_i) off the diagonal and 0 on it. dA is taken as given (Hermitian,
    # as the public function makes it by default). A subset is a slice of the whole.
    (x,), (dx,) = primals, tangents
    v, w = eigh_p.bind(x, lower=lower, sort_eigenvalues=sort_eigenvalues, subset_by_index=None,
                       algorithm=algorithm)
    aval = get_aval(x)
    eye = eye_like(aval)
    wc = convert_element_type(w, aval.dtype)
    gap = _arith.add(eye, _arith.sub(spread(wc, -1), spread(wc, -2)))  # 1 on the diagonal
    f = _arith.sub(_arith.div(np.ones((), aval.dtype), gap), eye)
    p = matmul(matmul(adjoint(v), dx), v)
    dv = matmul(v, _arith.mul(f, p))
    dw = diagonal(_arith.real(p) if dtypes.is_complex(aval.dtype) else p)
    if subset_by_index is not None:
        v, dv = take_columns(v, *subset_by_index), take_columns(dv, *subset_by_index)
        w, dw = take_columns(w, *subset_by_index), take_columns(dw, *subset_by_index)
    return [v, w], [dv, dw]


abstract_eval_rules[eigh_p] = _abstract
register_lowering(eigh_p, lower_fun(partial(_eigh, platform="cpu"), multiple_results=True),
                  platform="cpu")
register_lowering(eigh_p, lower_fun(partial(_eigh, platform="cuda"), multiple_results=True),
                  platform="cuda")
jvp_rules[eigh_p] = _jvp
batched_on_front(eigh_p)


def eigh(x, *, lower: bool = True, symmetrize_input: bool = True,
         sort_eigenvalues: bool = True, subset_by_index=None,
         implementation: EighImplementation | None = None):
    """``(v, w)``: the eigenvectors (the columns of ``v``, unit norm) and the real eigenvalues
    ``w`` (ascending) of each Hermitian matrix of ``x``. With ``symmetrize_input`` the matrix
    decomposed is (x + xᴴ) / 2; otherwise only its ``lower`` (or upper) triangle is read.
    ``subset_by_index=(start, end)`` keeps eigenpairs start..end-1 of the ascending order.
    Where LAPACK does not converge (NaN input, ...) both results are NaN, as JAX.
    ``implementation`` picks the algorithm (None: the platform's default; the CPU has QR
    only, TPUs have JACOBI and QDWH)."""
    if implementation is not None and not isinstance(implementation, EighImplementation):
        raise TypeError(f"eigh: implementation must be None or a member of EighImplementation "
                        f"(e.g. EighImplementation.QR), got {implementation!r}.")
    aval = get_aval(x)
    check_square("eigh", aval, "Argument to symmetric eigendecomposition must have shape "
                 "[..., n, n]")
    n = aval.shape[-1]
    if subset_by_index is not None:
        subset_by_index = subset_bounds("eigh", subset_by_index, n)
        if subset_by_index == (0, n):
            subset_by_index = None
    if symmetrize_input:
        x = symmetrize(x)
    v, w = eigh_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues),
                       subset_by_index=subset_by_index, algorithm=implementation)
    return v, w
