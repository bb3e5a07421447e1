"""eig: eigenvalues and left/right eigenvectors of general square matrices (LAPACK geev).

CPU only: the other platforms have no lowering for it (see lapack.py on GPU kernels).
"""
from __future__ import annotations

import enum
import warnings

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, jvp_rules, register_lowering
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import comparison as _cmp
from plax.first_order import reductions as _reductions
from plax.first_order import shapes as _shapes
from plax.first_order.conversion import convert_element_type
from plax.lax.linalg import lapack
from plax.lax.linalg.common import (adjoint, batched_on_front, conj_if_complex, eye_like, matmul,
                                    swap_last)
from plax.lax.linalg.common import check_square, diagonal, spread
from plax.lax.linalg.lu import solve
from plax.lowering.inline import lower_fun

__all__ = ["EigImplementation", "eig", "eig_p"]

eig_p = Primitive("eig", multiple_results=True)


class EigImplementation(enum.Enum):
    """Which library computes ``eig``: plax's CPU kernels are LAPACK's; the GPU libraries
    (cuSOLVER, MAGMA) are named so that programs choosing them still read."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


def complex_dtype(dtype) -> np.dtype:
    """The complex dtype of ``dtype``'s precision (complex64 for float32, ...)."""
    return np.result_type(np.dtype(dtype), np.complex64)


def _abstract(x, *, compute_left_eigenvectors, compute_right_eigenvectors,
              enable_eigvec_derivs):
    check_square("eig", x, "The input to eig must be a square matrix")
    dt = complex_dtype(x.dtype)
    count = int(compute_left_eigenvectors) + int(compute_right_eigenvectors)
    return [ShapedArray(x.shape[:-1], dt)] + [ShapedArray(x.shape, dt)] * count


def _cpu(x, *, compute_left_eigenvectors, compute_right_eigenvectors, enable_eigvec_derivs):
    aval = get_aval(x)
    dt = complex_dtype(aval.dtype)
    wanted = [compute_left_eigenvectors, compute_right_eigenvectors]
    if 0 in aval.shape:  # geev must never see an empty matrix (it corrupts the heap)
        return [_shapes.full(aval.shape[:-1], 0, dt)] + [_shapes.full(aval.shape, 0, dt)
                                                         for want in wanted if want]
    batch, n = aval.shape[:-2], aval.shape[-1]
    vectors = [(aval.shape, dt, True)] * 2  # n x n even when not computed
    info = [(batch, np.int32, False)]
    config = (("compute_left", "V" if compute_left_eigenvectors else "N"),
              ("compute_right", "V" if compute_right_eigenvectors else "N"))
    if dtypes.is_complex(aval.dtype):
        w, vl, vr, info = lapack.call("geev", [x], [(batch + (n,), dt, False)] + vectors + info,
                                      config=config)
    else:
        parts = [(batch + (n,), aval.dtype, False)] * 2
        wr, wi, vl, vr, info = lapack.call("geev", [x], parts + vectors + info, config=config)
        w = _arith.complex(wr, wi)
    outs = [w] + [v for v, want in zip((vl, vr), wanted) if want]
    outs = lapack.nan_unless_ok(info, *outs)
    return list(outs) if isinstance(outs, list) else [outs]


def _vector_jvp(w, v, da):
    """(dw, dv) for right eigenvectors ``v`` of a with eigenvalues ``w`` (all distinct), under
    geev's normalisation: each column of unit 2-norm with its largest-magnitude entry real.
    With P = v⁻¹ da v: dw = diag(P), and dv = v (F ∘ P) + v diag(c), F_ij = 1 / (w_j - w_i)
    off the diagonal (0 on it), where c is the multiple of each v_j those two constraints
    fix: Re c_j = -Re(v_jᴴ u_j), Im c_j = -Im(u_kj) / v_kj for u = v (F ∘ P), k the row of
    v_j's largest entry."""
    aval = get_aval(v)
    dt, nb = aval.dtype, aval.ndim - 2
    eye = eye_like(aval)
    f = _arith.sub(_arith.div(np.ones((), dt), _arith.add(eye, _arith.sub(spread(w, -1),
                                                                           spread(w, -2)))), eye)
    p = matmul(solve(v, da), v)
    u = matmul(v, _arith.mul(f, p))
    rows = (nb,)
    top = _reductions.argmax(_arith.abs(v), nb, np.int32)  # (..., n): the row per column
    at_top = _cmp.eq(_shapes.broadcasted_iota(np.int32, aval.shape, nb),
                     _shapes.broadcast_in_dim(top, aval.shape, tuple(range(nb)) + (nb + 1,)))
    at_top = convert_element_type(at_top, dt)
    re = _arith.neg(_arith.real(_reductions.reduce_sum(_arith.mul(_arith.conj(v), u), rows)))
    im = _arith.neg(_arith.div(_arith.imag(_reductions.reduce_sum(_arith.mul(at_top, u), rows)),
                               _arith.real(_reductions.reduce_sum(_arith.mul(at_top, v), rows))))
    c = _arith.complex(re, im)
    dv = _arith.add(u, _arith.mul(v, _shapes.broadcast_in_dim(c, aval.shape,
                                                              tuple(range(nb)) + (nb + 1,))))
    return diagonal(p), dv


def _jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors,
         enable_eigvec_derivs):
    (x,), (dx,) = primals, tangents
    vectors = compute_left_eigenvectors or compute_right_eigenvectors
    if vectors and not enable_eigvec_derivs:
        raise NotImplementedError(
            "Derivatives of non-symmetric eigenvectors are only valid under assumptions on the "
            "input that cannot be checked (distinct eigenvalues, a unique largest entry in each "
            "eigenvector): pass enable_eigvec_derivs=True to eig to differentiate them anyway, "
            "or compute only the eigenvalues.")
    outs = eig_p.bind(x, compute_left_eigenvectors=compute_left_eigenvectors,
                      compute_right_eigenvectors=True, enable_eigvec_derivs=enable_eigvec_derivs)
    w, vr = outs[0], outs[-1]
    da = convert_element_type(dx, get_aval(vr).dtype)
    if not vectors:
        # dw_j = (vr⁻¹ da vr)_jj
        dw = _reductions.reduce_sum(_arith.mul(solve(vr, da), swap_last(vr)),
                                    (get_aval(vr).ndim - 1,))
        return [w], [dw]
    dw, dvr = _vector_jvp(w, vr, da)
    primal, tangent = [w], [dw]
    if compute_left_eigenvectors:
        # The left eigenvectors are the right ones of aᴴ, for the eigenvalues conj(w).
        primal.append(outs[1])
        tangent.append(_vector_jvp(conj_if_complex(w), outs[1], adjoint(da))[1])
    if compute_right_eigenvectors:
        primal.append(vr)
        tangent.append(dvr)
    return primal, tangent


abstract_eval_rules[eig_p] = _abstract
register_lowering(eig_p, lower_fun(_cpu, multiple_results=True), platform="cpu")
jvp_rules[eig_p] = _jvp
batched_on_front(eig_p)


def eig(x, *, compute_left_eigenvectors: bool = True, compute_right_eigenvectors: bool = True,
        enable_eigvec_derivs: bool = False, implementation: EigImplementation | None = None,
        use_magma: bool | None = None):
    """The eigendecomposition of each square matrix of ``x``: a list ``[w, vl, vr]`` (complex)
    of the eigenvalues, left eigenvectors (``vlᴴ x = diag(w) vlᴴ``) and right eigenvectors
    (``x vr = vr diag(w)``), each vector of unit norm, holding only the eigenvectors asked
    for. Where LAPACK fails the results are NaN. Eigenvalues are differentiable; eigenvectors
    only with ``enable_eigvec_derivs`` (valid for distinct eigenvalues). CPU only:
    ``implementation`` may be None or ``EigImplementation.LAPACK`` (``use_magma`` is its
    deprecated spelling)."""
    if use_magma is not None:
        warnings.warn("use_magma is deprecated, please use implementation="
                      "EigImplementation.MAGMA instead.", DeprecationWarning, stacklevel=2)
        implementation = EigImplementation.MAGMA if use_magma else EigImplementation.LAPACK
    if implementation is not None and implementation != EigImplementation.LAPACK:
        raise ValueError(f"Only the lapack implementation is supported on CPU; got "
                         f"implementation={implementation}. Pass None or "
                         "EigImplementation.LAPACK.")
    check_square("eig", get_aval(x), "The input to eig must be a square matrix")
    return eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                      compute_right_eigenvectors=bool(compute_right_eigenvectors),
                      enable_eigvec_derivs=bool(enable_eigvec_derivs))
