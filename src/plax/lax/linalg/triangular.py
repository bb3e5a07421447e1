"""triangular_solve: solve op(a) x = b (or x op(a) = b) for triangular ``a``."""
from __future__ import annotations

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, is_undefined, jvp_rules,
                             register_lowering, tangent_aval, transpose_rules)
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import shapes as _shapes
from plax.first_order.common import real_dtype
from plax.lax.linalg import lapack
from plax.lax.linalg.common import (batched_on_front, check_matrix, conj_if_complex, matmul,
                                    swap_last, triangle)
from plax.lowering.inline import lower_fun

__all__ = ["triangular_solve", "triangular_solve_p"]

triangular_solve_p = Primitive("triangular_solve")


def _abstract(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    check_matrix("triangular_solve", a, square=True, arg="a")
    check_matrix("triangular_solve", b, arg="b")
    if a.ndim != b.ndim:
        raise TypeError("All inputs to triangular_solve must have the same number of batch "
                        f"dimensions, but got {a.ndim - 2} and {b.ndim - 2} batch dimensions "
                        f"for a {a.shape} and b {b.shape}.")
    n = a.shape[-1]
    common = b.shape[-2] if left_side else b.shape[-1]
    if a.shape[:-2] != b.shape[:-2] or common != n:
        side = "rows" if left_side else "columns"
        raise ValueError(f"Incompatible shapes for arguments to triangular_solve: {a.shape} and "
                         f"{b.shape}; b's batch dimensions must equal a's and its {side} must "
                         f"number {n} (left_side={left_side}).")
    if a.dtype != b.dtype:
        raise TypeError(f"triangular_solve requires a and b of one dtype, got {a.dtype} and "
                        f"{b.dtype}.")
    return ShapedArray(b.shape, b.dtype)


def _cpu(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    aval = get_aval(b)
    if 0 in aval.shape:
        return b
    if conjugate_a and not transpose_a:  # the kernel conjugates only while transposing
        a, conjugate_a = conj_if_complex(a), False
    # A real matrix's conjugate transpose is its transpose: ask the kernel for "T" (as JAX).
    complex_a = dtypes.is_complex(aval.dtype)
    trans = "N" if not transpose_a else ("C" if conjugate_a and complex_a else "T")
    config = (("side", "L" if left_side else "R"), ("uplo", "L" if lower else "U"),
              ("trans_x", trans), ("diag", "U" if unit_diagonal else "N"))
    return lapack.call("trsm", [a, b], [(aval.shape, aval.dtype, True)], config=config,
                       aliases=((0, 1),))[0]


def _xla_op(ctx, a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    # XLA's own triangular_solve: on GPUs it calls cuBLAS trsm; on TPUs XLA expands it.
    a_aval = ctx.avals_in[0]
    if conjugate_a and not transpose_a and dtypes.is_complex(a_aval.dtype):
        real = ShapedArray(a_aval.shape, real_dtype(a_aval.dtype))
        re = ctx.op1("stablehlo.real", [a], [a_aval], real)
        im = ctx.op1("stablehlo.imag", [a], [a_aval], real)
        minus_im = ctx.op1("stablehlo.negate", [im], [real], real)
        a = ctx.op1("stablehlo.complex", [re, minus_im], [real, real], a_aval)
    trans = ("NO_TRANSPOSE" if not transpose_a else
             "ADJOINT" if conjugate_a and dtypes.is_complex(a_aval.dtype) else "TRANSPOSE")
    flag = lambda v: "true" if v else "false"  # noqa: E731
    return [ctx.op1("stablehlo.triangular_solve", [a, b],
                    props=f"left_side = {flag(left_side)}, lower = {flag(lower)}, "
                          f"transpose_a = #stablehlo<transpose {trans}>, "
                          f"unit_diagonal = {flag(unit_diagonal)}")]


def _op(a, transpose_a, conjugate_a):
    if transpose_a:
        a = swap_last(a)
    return conj_if_complex(a) if conjugate_a else a


def _jvp(primals, tangents, **params):
    a, b = primals
    da, db = tangents
    x = triangular_solve_p.bind(a, b, **params)
    if type(da) is Zero and type(db) is Zero:
        return x, Zero(tangent_aval(get_aval(x)))
    # op(a) x = b  =>  op(a) dx = db - op(da) x   (x op(a) = b likewise on the right)
    rhs = None if type(db) is Zero else db
    if type(da) is not Zero:
        k = 1 if params["unit_diagonal"] else 0  # a unit diagonal is not read, nor varied
        da = triangle(da, params["lower"], -k if params["lower"] else k)
        op_da = _op(da, params["transpose_a"], params["conjugate_a"])
        prod = matmul(op_da, x) if params["left_side"] else matmul(x, op_da)
        rhs = _arith.neg(prod) if rhs is None else _arith.sub(rhs, prod)
    return x, triangular_solve_p.bind(a, rhs, **params)


def _transpose(ct, a, b, *, transpose_a, **params):
    if is_undefined(a):
        raise ValueError("triangular_solve is linear in b only; it cannot be transposed with "
                         "respect to a.")
    return [None, triangular_solve_p.bind(a, ct, transpose_a=not transpose_a, **params)]


abstract_eval_rules[triangular_solve_p] = _abstract
register_lowering(triangular_solve_p, lower_fun(_cpu), platform="cpu")
register_lowering(triangular_solve_p, _xla_op, platform="cuda")
register_lowering(triangular_solve_p, _xla_op, platform="tpu")
jvp_rules[triangular_solve_p] = _jvp
transpose_rules[triangular_solve_p] = _transpose
batched_on_front(triangular_solve_p)


def triangular_solve(a, b, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False):
    """``x`` solving ``op(a) @ x = b`` (``left_side``) or ``x @ op(a) = b`` for triangular
    ``a`` (its ``lower`` or upper triangle is read), where op transposes when
    ``transpose_a`` and conjugates when ``conjugate_a``. ``b`` may be a vector (one fewer
    dimension than ``a``)."""
    a_aval, b_aval = get_aval(a), get_aval(b)
    vector = b_aval.ndim == a_aval.ndim - 1
    if vector:
        b = _shapes.expand_dims(b, (b_aval.ndim if left_side else b_aval.ndim - 1,))
    x = triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                transpose_a=bool(transpose_a), conjugate_a=bool(conjugate_a),
                                unit_diagonal=bool(unit_diagonal))
    if vector:
        x = _shapes.squeeze(x, (b_aval.ndim if left_side else b_aval.ndim - 1,))
    return x
