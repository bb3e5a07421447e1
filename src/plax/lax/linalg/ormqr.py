"""ormqr: multiplying by the Q of a Householder QR factorisation without forming it
(LAPACK ormqr / unmqr)."""
from __future__ import annotations

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.config import config
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, is_undefined, jvp_rules,
                             register_lowering, tangent_aval, transpose_rules)
from plax.core.trace import get_aval
from plax.lax.linalg import lapack
from plax.lax.linalg.common import (batched_on_front, check_matrix, conj_if_complex, eye_like,
                                    triangle)
from plax.lowering.inline import lower_fun

__all__ = ["ormqr", "ormqr_p"]

ormqr_p = Primitive("ormqr")


def _abstract(a, taus, c, *, left, transpose):
    check_matrix("ormqr", a, arg="a")
    check_matrix("ormqr", c, arg="c")
    m, n = a.shape[-2:]
    if left and c.shape[-2] != m:
        raise ValueError(f"ormqr with left=True expects c to have the same number of rows as "
                         f"the Householder matrix a. Got a shape {a.shape} and c shape "
                         f"{c.shape}: c's rows must number {m}.")
    if not left and c.shape[-1] != m:
        raise ValueError(f"ormqr with left=False expects c to have the same number of columns "
                         f"as the Householder matrix a has rows. Got a shape {a.shape} and c "
                         f"shape {c.shape}: c's columns must number {m}.")
    if (taus.ndim != a.ndim - 1 or taus.shape[-1] > min(m, n)
            or not a.shape[:-2] == taus.shape[:-1] == c.shape[:-2]):
        raise ValueError(f"ormqr: a {a.shape}, taus {taus.shape} and c {c.shape} must share "
                         f"their batch dimensions, with at most min(m, n) = {min(m, n)} scales "
                         "in taus.")
    if not a.dtype == taus.dtype == c.dtype:
        raise TypeError(f"ormqr: a, taus and c must share a dtype, got {a.dtype}, {taus.dtype} "
                        f"and {c.dtype}.")
    return ShapedArray(c.shape, c.dtype)


def _cpu(a, taus, c, *, left, transpose):
    aval = get_aval(c)
    if 0 in aval.shape or get_aval(taus).shape[-1] == 0:
        return c  # no reflector (Q = I), or nothing to multiply
    routine = "unmqr" if dtypes.is_complex(aval.dtype) else "ormqr"
    return lapack.call(routine, [a, taus, c], [(aval.shape, aval.dtype, True)],
                       matrix_operands=(True, False, True), aliases=((0, 2),),
                       config=(("left", bool(left)), ("transpose", bool(transpose))))[0]


def _by_reflectors(a, taus, c, *, left, transpose):
    """Platforms without a kernel (TPUs): the reflectors H_i = I - tau_i v_i v_iᴴ applied to
    ``c`` one at a time in a loop, at full matmul precision, as JAX lowers ormqr there."""
    from plax import lax
    k = get_aval(taus).shape[-1]
    aval = get_aval(a)
    *batch, m, _ = aval.shape
    complex_ = dtypes.is_complex(aval.dtype)
    vectors = triangle(a[..., :, :k], lower=True, k=-1) + \
        eye_like(ShapedArray((*batch, m, k), aval.dtype))
    scales = lax.conj(taus) if transpose and complex_ else taus
    backwards = left != transpose  # Q c and c Qᴴ apply the last reflector first
    nb = tuple(range(len(batch)))

    def reflect(i, c):
        j = k - 1 - i if backwards else i
        tau = lax.expand_dims(scales[..., j], (-1, -2))
        v = vectors[..., :, j]
        vh = lax.conj(v) if complex_ else v
        if left:  # c - tau v (vᴴ c)
            w = lax.dot_general(vh, c, (((v.ndim - 1,), (c.ndim - 2,)), (nb, nb)))
            update = lax.expand_dims(v, (-1,)) * lax.expand_dims(w, (-2,))
        else:  # c - tau (c v) vᴴ
            w = lax.dot_general(c, v, (((c.ndim - 1,), (v.ndim - 1,)), (nb, nb)))
            update = lax.expand_dims(w, (-1,)) * lax.expand_dims(vh, (-2,))
        return c - tau * update

    with config.override("default_matmul_precision", "highest"):
        return lax.fori_loop(0, k, reflect, c)


def _jvp(primals, tangents, *, left, transpose):
    a, taus, c = primals
    da, dtaus, dc = tangents
    if type(da) is not Zero or type(dtaus) is not Zero:
        raise NotImplementedError("Differentiation rule for 'ormqr' not implemented with "
                                  "respect to the reflectors a and taus (nor is it in JAX); "
                                  "ormqr is differentiable in c only.")
    out = ormqr_p.bind(a, taus, c, left=left, transpose=transpose)
    if type(dc) is Zero:
        return out, Zero(tangent_aval(get_aval(out)))
    return out, ormqr_p.bind(a, taus, dc, left=left, transpose=transpose)


def _transpose(ct, a, taus, c, *, left, transpose):
    if is_undefined(a) or is_undefined(taus):
        raise ValueError("ormqr is linear in c only; it cannot be transposed with respect to "
                         "a or taus.")
    if type(ct) is Zero:
        return [None, None, None]
    # The transpose of c -> Q c is ct -> Qᵀ ct = conj(Qᴴ conj(ct)).
    back = conj_if_complex(ormqr_p.bind(a, taus, conj_if_complex(ct), left=left,
                                        transpose=not transpose))
    return [None, None, back]


abstract_eval_rules[ormqr_p] = _abstract
register_lowering(ormqr_p, lower_fun(_cpu), platform="cpu")
register_lowering(ormqr_p, lower_fun(_by_reflectors))
jvp_rules[ormqr_p] = _jvp
transpose_rules[ormqr_p] = _transpose
batched_on_front(ormqr_p)


def ormqr(a, taus, c, *, left: bool = True, transpose: bool = False):
    """``c`` multiplied by the m x m unitary Q whose Householder reflectors are stored below
    the diagonal of ``a`` (m x n, as ``geqrf`` leaves them) with scales ``taus``: ``Q @ c``
    (``left``) or ``c @ Q``; with ``transpose``, by Qᴴ instead (LAPACK ormqr / unmqr).
    Q is never formed. Differentiable in ``c`` (JAX's is not differentiable)."""
    return ormqr_p.bind(a, taus, c, left=bool(left), transpose=bool(transpose))
