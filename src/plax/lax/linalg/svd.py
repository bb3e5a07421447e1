"""svd: singular value decomposition x = u diag(s) vh, through LAPACK gesdd (or gesvd) on
CPU and cuSOLVER gesvdj (or gesvd, gesvdp) on NVIDIA GPUs."""
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
from plax.first_order import comparison as _cmp
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.conversion import convert_element_type
from plax.lax.linalg import lapack
from plax.first_order.common import real_dtype
from plax.lax.linalg.common import (adjoint, batched_on_front, check_matrix, diagonal, eye_like,
                                    matmul, spread, subset_bounds, take_columns)
from plax.lowering.inline import lower_fun

__all__ = ["SvdAlgorithm", "svd", "svd_p"]


class SvdAlgorithm(enum.Enum):
    """Which SVD algorithm to run. On CPU: DEFAULT and DIVIDE_AND_CONQUER run LAPACK's
    gesdd, QR runs gesvd; JACOBI and POLAR have no CPU implementation. On NVIDIA GPUs:
    DEFAULT is Jacobi up to 1024x1024 and QR beyond; DIVIDE_AND_CONQUER is ROCm's only."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


svd_p = Primitive("svd", multiple_results=True)


def _shapes_out(shape, full_matrices, compute_uv, subset_by_index):
    batch, (m, n) = shape[:-2], shape[-2:]
    k = min(m, n)
    if subset_by_index is not None:
        start, end = subset_bounds("svd", subset_by_index, k)
        if full_matrices and (start, end) != (0, k):
            raise ValueError("full_matrices and subset_by_index cannot both be set: pass "
                             "full_matrices=False to svd to select singular values "
                             f"{subset_by_index} of a {m}x{n} matrix.")
        k = end - start
    if not compute_uv:
        return [batch + (k,)]
    return [batch + (k,), batch + (m, m if full_matrices else k),
            batch + (n if full_matrices else k, n)]


def _abstract(x, *, full_matrices, compute_uv, subset_by_index, algorithm=None):
    check_matrix("svd", x)
    shapes = _shapes_out(x.shape, full_matrices, compute_uv, subset_by_index)
    dts = [real_dtype(x.dtype)] + [x.dtype] * (len(shapes) - 1)
    return [ShapedArray(s, d) for s, d in zip(shapes, dts)]


def empty_svd(aval, full_matrices, compute_uv, subset_by_index):
    """An SVD with nothing to compute: no singular values; a full u or vh of a matrix with
    no columns (or rows) is the identity, as JAX gives it."""
    shapes = _shapes_out(aval.shape, full_matrices, compute_uv, subset_by_index)
    real = real_dtype(aval.dtype)
    out = [_shapes.full(shapes[0], 0, real)]
    for shape in shapes[1:]:
        square = shape[-1] == shape[-2]
        out.append(eye_like(ShapedArray(shape, aval.dtype)) if square else
                   _shapes.full(shape, 0, aval.dtype))
    return out


def _svd(x, *, full_matrices, compute_uv, subset_by_index, algorithm=None, platform):
    aval = get_aval(x)
    if 0 in aval.shape:
        return empty_svd(aval, full_matrices, compute_uv, subset_by_index)
    kernel = _cuda_kernel if platform == "cuda" else _cpu_kernel
    s, u, vt, info = kernel(x, aval, full_matrices, compute_uv, algorithm)
    if not compute_uv:
        s = lapack.nan_unless_ok(info, s)
        return [s if subset_by_index is None else take_columns(s, *subset_by_index)]
    s, u, vt = lapack.nan_unless_ok(info, s, u, vt)
    if subset_by_index is not None:
        start, end = subset_by_index
        s, u = take_columns(s, start, end), take_columns(u, start, end)
        vt = _take_rows(vt, start, end)
    return [s, u, vt]


def _cpu_kernel(x, aval, full_matrices, compute_uv, algorithm):
    """(s, u, vt, info) from LAPACK: gesdd, or gesvd for SvdAlgorithm.QR."""
    if algorithm in (SvdAlgorithm.JACOBI, SvdAlgorithm.POLAR):
        raise NotImplementedError("The SVD Jacobi and Polar algorithms are not implemented on "
                                  "CPU; use algorithm=None (divide and conquer) or "
                                  "SvdAlgorithm.QR.")
    fn = "gesvd" if algorithm is SvdAlgorithm.QR else "gesdd"
    batch, (m, n) = aval.shape[:-2], aval.shape[-2:]
    k = min(m, n)
    if not compute_uv:
        # Values only still needs full-size u and vt declared (the kernel's contract).
        mode, u_cols, vt_rows = "N", m, n
    elif full_matrices:
        mode, u_cols, vt_rows = "A", m, n
    else:
        mode, u_cols, vt_rows = "S", k, k
    dt = aval.dtype
    results = [(aval.shape, dt, True), (batch + (k,), real_dtype(dt), False),
               (batch + (m, u_cols), dt, True), (batch + (vt_rows, n), dt, True),
               (batch, np.int32, False)]
    _, s, u, vt, info = lapack.call(fn, [x], results, config=(("mode", mode),),
                                    aliases=((0, 0),))
    return s, u, vt, info


def _cuda_kernel(x, aval, full_matrices, compute_uv, algorithm):
    """(s, u, vt, info) from cuSOLVER, chosen as JAX does: Jacobi (gesvdj) up to 1024x1024,
    else QR (gesvd); POLAR is gesvdp."""
    batch, (m, n) = aval.shape[:-2], aval.shape[-2:]
    k, dt = min(m, n), aval.dtype
    if algorithm is SvdAlgorithm.DIVIDE_AND_CONQUER:
        raise NotImplementedError("Divide-and-conquer SVD (SvdAlgorithm.DIVIDE_AND_CONQUER) is "
                                  "only supported on AMD (ROCm) GPUs, not on NVIDIA CUDA; use "
                                  "the default algorithm or SvdAlgorithm.QR.")
    if algorithm in (None, SvdAlgorithm.DEFAULT):
        algorithm = SvdAlgorithm.JACOBI if m <= 1024 and n <= 1024 else SvdAlgorithm.QR
    s_out = (batch + (k,), real_dtype(dt), False)
    info_out = (batch, np.int32, False)
    if algorithm is SvdAlgorithm.QR:
        # gesvd wants m >= n: a wide matrix is given as its (row-major) transpose, whose
        # factors come back swapped.
        transposed = m < n
        if compute_uv:
            u_shape = batch + (m, m if full_matrices else k)
            vt_shape = batch + (n if full_matrices else k, n)
        else:
            u_shape = vt_shape = ()
        major = not transposed
        first, second = (vt_shape, u_shape) if transposed else (u_shape, vt_shape)
        _, s, one, two, info = lapack.call_target(
            "cusolver_gesvd_ffi", [x],
            [(aval.shape, dt, major), s_out, (first, dt, major and len(first) == aval.ndim),
             (second, dt, major and len(second) == aval.ndim), info_out],
            matrix_operands=(major,), aliases=((0, 0),),
            config=(("compute_uv", bool(compute_uv)), ("full_matrices", bool(full_matrices)),
                    ("transposed", transposed)))
        u, vt = (two, one) if transposed else (one, two)
        return s, u, vt, info
    # Jacobi (gesvdj) and polar (gesvdp) return V, not Vᴴ, and always need u and v. Batched
    # Jacobi has no economic mode: small matrices get full factors, cut afterwards.
    target = "cusolver_gesvdp_ffi" if algorithm is SvdAlgorithm.POLAR else "cusolver_gesvdj_ffi"
    econ = not full_matrices and (algorithm is SvdAlgorithm.POLAR or (m > 32 and n > 32))
    u_shape = batch + (m, k if econ else m)
    v_shape = batch + (n, k if econ else n)
    _, s, u, v, info = lapack.call_target(
        target, [x], [(aval.shape, dt, True), s_out, (u_shape, dt, True), (v_shape, dt, True),
                      info_out],
        aliases=((0, 0),),
        config=(("compute_uv", bool(compute_uv)), ("full_matrices", not econ)))
    if not compute_uv:
        return s, None, None, info
    vt = adjoint(v)
    if not full_matrices and not econ:
        u = take_columns(u, 0, k)
        vt = _take_rows(vt, 0, k)
    return s, u, vt, info


def _jvp(primals, tangents, *, full_matrices, compute_uv, subset_by_index,
         algorithm=None):
    # Economic SVD a = U S Vᴴ, k = min(m, n), P = Uᴴ da V:  ds = Re diag(P);
    # dU = U (F ∘ (P S + S Pᴴ) + i Im diag(P) / S) + (I - U Uᴴ) da V S⁻¹,
    # dV = V (F ∘ (S P + Pᴴ S)) + (I - V Vᴴ) daᴴ U S⁻¹, with F_ij = 1 / (s_j² - s_i²), 0 on
    # the diagonal (the phase of each singular pair is carried by U's column).
    (x,), (dx,) = primals, tangents
    aval = get_aval(x)
    dt, m, n = aval.dtype, aval.shape[-2], aval.shape[-1]
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError("Singular value decomposition JVP not implemented for full "
                                  f"matrices: the {m}x{n} input is not square, so u or vh has "
                                  "columns the derivative does not determine; pass "
                                  "full_matrices=False.")
    s, u, vt = svd_p.bind(x, full_matrices=False, compute_uv=True, subset_by_index=None,
                          algorithm=algorithm)
    v = adjoint(vt)
    p = matmul(matmul(adjoint(u), dx), v)
    cplx = dtypes.is_complex(dt)
    ds = diagonal(_arith.real(p) if cplx else p)
    if not compute_uv:
        return [_pick(s, subset_by_index)], [_pick(ds, subset_by_index)]
    rdt = get_aval(s).dtype
    eye = eye_like(get_aval(p))
    real_eye = convert_element_type(eye, rdt)
    sj, si = spread(s, -1), spread(s, -2)
    gap = _arith.mul(_arith.add(sj, si), _arith.sub(sj, si))
    f = _arith.sub(_arith.div(np.ones((), rdt), _arith.add(gap, real_eye)), real_eye)
    f = convert_element_type(f, dt)
    ps = _arith.mul(p, convert_element_type(sj, dt))  # P S
    sp = _arith.mul(convert_element_type(si, dt), p)  # S P
    inner_u = _arith.mul(f, _arith.add(ps, adjoint(ps)))
    if cplx:  # i Im(P_jj) / s_j on the diagonal (0 where s_j is 0)
        zero = _cmp.eq(s, np.zeros((), rdt))
        s_inv = _cmp.select_n(zero, _arith.div(np.ones((), rdt), s),
                              _shapes.full(get_aval(s).shape, 0, rdt))
        scale = _arith.mul(eye, convert_element_type(spread(s_inv, -1), dt))
        skew = _arith.mul(_arith.sub(p, adjoint(p)), np.array(0.5, dt))
        inner_u = _arith.add(inner_u, _arith.mul(skew, scale))
    du = matmul(u, inner_u)
    dv = matmul(v, _arith.mul(f, _arith.add(sp, adjoint(sp))))
    if m > n:
        dxv = matmul(dx, v)
        rest = _arith.sub(dxv, matmul(u, matmul(adjoint(u), dxv)))
        du = _arith.add(du, _arith.div(rest, _by_column(s, m, dt)))
    if n > m:
        dxu = matmul(adjoint(dx), u)
        rest = _arith.sub(dxu, matmul(v, matmul(vt, dxu)))
        dv = _arith.add(dv, _arith.div(rest, _by_column(s, n, dt)))
    dvt = adjoint(dv)
    if subset_by_index is not None:
        start, end = subset_by_index
        u, du = take_columns(u, start, end), take_columns(du, start, end)
        vt, dvt = _take_rows(vt, start, end), _take_rows(dvt, start, end)
        s, ds = take_columns(s, start, end), take_columns(ds, start, end)
    return [s, u, vt], [ds, du, dvt]


def _take_rows(x, start: int, end: int):
    return _slicing.slice_in_dim(x, start, end, axis=get_aval(x).ndim - 2)


def _by_column(s, rows: int, dtype):
    """The singular values ``s`` (..., k) as matrices (..., rows, k), constant down columns."""
    aval = get_aval(s)
    nb = aval.ndim - 1
    shape = aval.shape[:-1] + (rows, aval.shape[-1])
    return convert_element_type(_shapes.broadcast_in_dim(s, shape, tuple(range(nb)) + (nb + 1,)),
                                dtype)


def _pick(s, subset_by_index):
    return s if subset_by_index is None else take_columns(s, *subset_by_index)


abstract_eval_rules[svd_p] = _abstract
register_lowering(svd_p, lower_fun(partial(_svd, platform="cpu"), multiple_results=True),
                  platform="cpu")
register_lowering(svd_p, lower_fun(partial(_svd, platform="cuda"), multiple_results=True),
                  platform="cuda")
jvp_rules[svd_p] = _jvp
batched_on_front(svd_p)


def svd(x, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index=None,
        algorithm: SvdAlgorithm | None = None):
    """The singular value decomposition of each matrix of ``x`` (..., m, n): ``(u, s, vh)``
    with ``x = u @ diag(s) @ vh`` and ``s`` real, descending, or ``s`` alone when not
    ``compute_uv``. ``full_matrices`` makes u m×m and vh n×n (else m×k and k×n, k =
    min(m, n)); ``subset_by_index=(start, end)`` keeps singular triplets start..end-1
    (with full_matrices=False). Where LAPACK fails (NaN input, ...) the results are NaN."""
    aval = get_aval(x)
    check_matrix("svd", aval)
    if algorithm is not None and not isinstance(algorithm, SvdAlgorithm):
        raise TypeError(f"svd: algorithm must be None or a member of SvdAlgorithm (e.g. "
                        f"SvdAlgorithm.QR), got {algorithm!r}.")
    if subset_by_index is not None:
        k = min(aval.shape[-2:])
        subset_by_index = subset_bounds("svd", subset_by_index, k)
        if subset_by_index == (0, k):
            subset_by_index = None
    out = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv),
                     subset_by_index=subset_by_index, algorithm=algorithm)
    if compute_uv:
        s, u, vh = out
        return u, s, vh
    return out[0]
