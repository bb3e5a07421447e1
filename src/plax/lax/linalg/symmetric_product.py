"""symmetric_product: alpha A Aᵀ + beta C for real matrices (a BLAS syrk)."""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import Zero, abstract_eval_rules, jvp_rules, register_lowering, tangent_aval
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import comparison as _cmp
from plax.lax.linalg.common import batched_on_front, matmul, swap_last, triangle_mask
from plax.lowering.inline import lower_fun

__all__ = ["symmetric_product", "symmetric_product_p"]

symmetric_product_p = Primitive("symmetric_product")


def _abstract(a, c, *, alpha, beta):
    for i, aval in enumerate((a, c)):
        if not dtypes.is_float(aval.dtype):
            raise TypeError(f"symmetric_product does not accept dtype {aval.dtype} at position "
                            f"{i}. Accepted dtypes at position {i} are subtypes of floating.")
    if (a.ndim < 2 or c.ndim != a.ndim or a.shape[:-2] != c.shape[:-2]
            or c.shape[-1] != c.shape[-2] or a.shape[-2] != c.shape[-1]):
        raise ValueError("symmetric_update expects a rectangular matrix of shape (m, n) and a "
                         f"square matrix of shape (m, m). Got shapes {a.shape} and {c.shape}; "
                         "both may carry the same leading batch dimensions.")
    if a.dtype != c.dtype:
        raise TypeError(f"symmetric_product: a_matrix and c_matrix must share a dtype, got "
                        f"{a.dtype} and {c.dtype}.")
    return ShapedArray(c.shape, c.dtype)


def _scaled(x, factor):
    return _arith.mul(x, np.array(factor, get_aval(x).dtype))


def _impl(a, c, *, alpha, beta):
    return _arith.add(_scaled(matmul(a, swap_last(a)), alpha), _scaled(c, beta))


def _jvp(primals, tangents, *, alpha, beta):
    (a, c), (da, dc) = primals, tangents
    out = symmetric_product_p.bind(a, c, alpha=alpha, beta=beta)
    parts = []
    if type(da) is not Zero:
        product = matmul(da, swap_last(a))  # d(A Aᵀ) = dA Aᵀ + A dAᵀ
        parts.append(_scaled(_arith.add(product, swap_last(product)), alpha))
    if type(dc) is not Zero:
        parts.append(_scaled(dc, beta))
    if not parts:
        return out, Zero(tangent_aval(get_aval(out)))
    return out, parts[0] if len(parts) == 1 else _arith.add(*parts)


abstract_eval_rules[symmetric_product_p] = _abstract
register_lowering(symmetric_product_p, lower_fun(_impl))
jvp_rules[symmetric_product_p] = _jvp
batched_on_front(symmetric_product_p)


def symmetric_product(a_matrix, c_matrix, *, alpha: float = 1.0, beta: float = 0.0,
                      symmetrize_output: bool = False):
    """``alpha * A @ Aᵀ + beta * C`` for real matrices A (..., m, n) and symmetric C
    (..., m, m). Only the lower triangle is promised (as JAX's, whose GPU kernel fills no
    more); ``symmetrize_output`` mirrors it into the upper one. Differentiable (JAX's is
    not)."""
    out = symmetric_product_p.bind(a_matrix, c_matrix, alpha=float(alpha), beta=float(beta))
    if symmetrize_output:
        aval = get_aval(out)
        out = _cmp.select_n(triangle_mask(aval.shape, lower=True), swap_last(out), out)
    return out
