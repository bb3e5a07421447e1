"""cholesky_update: the Cholesky factor of A + w wᵀ from that of A, in O(n²) (Givens
rotations, one row at a time)."""
from __future__ import annotations

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
from plax.first_order.transcendental import rsqrt
from plax.lax.linalg.common import batched_on_front
from plax.lowering.inline import lower_fun

__all__ = ["cholesky_update", "cholesky_update_p"]

cholesky_update_p = Primitive("cholesky_update")


def _abstract(r, w):
    for name, aval in (("r_matrix", r), ("w_vector", w)):
        if not dtypes.is_float(aval.dtype) or aval.dtype.itemsize < 4:
            raise TypeError(f"cholesky_update does not accept dtype {aval.dtype} for "
                            f"{name}: it takes float32 or float64 arrays.")
    if (r.ndim < 2 or r.shape[-1] != r.shape[-2] or w.shape != r.shape[:-1]):
        raise ValueError("Rank-1 update to Cholesky decomposition takes a square matrix and a "
                         f"vector of the same size as input. Got shapes {r.shape} and "
                         f"{w.shape} instead; r_matrix must be (..., n, n) and w_vector "
                         "(..., n).")
    if r.dtype != w.dtype:
        raise TypeError(f"cholesky_update: r_matrix and w_vector must share a dtype, got "
                        f"{r.dtype} and {w.dtype}.")
    return ShapedArray(r.shape, r.dtype)


def _rotation(x, y):
    """(c, s) of the Givens rotation taking (x, y) to (hypot(x, y), 0) when applied as
    (c x - s y, c y + s x); (1, 0) where y is 0. Scaled by max(|x|, |y|) against overflow."""
    aval = get_aval(x)
    one, zero = (_shapes.full(aval.shape, v, aval.dtype) for v in (1, 0))
    scale = _arith.max(_arith.abs(x), _arith.abs(y))
    safe = _cmp.select_n(_cmp.eq(scale, zero), scale, one)
    xs, ys = _arith.div(x, safe), _arith.div(y, safe)
    inv = rsqrt(_arith.add(_arith.mul(xs, xs), _arith.mul(ys, ys)))
    zero_y = _cmp.eq(y, zero)
    c = _cmp.select_n(zero_y, _arith.mul(xs, inv), one)
    s = _cmp.select_n(zero_y, _arith.neg(_arith.mul(ys, inv)), zero)
    return c, s


def _update(r, w):
    from plax.higher_order.loops import fori_loop
    aval = get_aval(r)
    nb, n = aval.ndim - 2, aval.shape[-1]
    if n == 0:
        return r
    batch_axes = tuple(range(nb))

    def step(k, carry):
        r, w = carry
        k = convert_element_type(k, np.int32)  # the loop counter is int64 under x64
        row = _shapes.squeeze(_slicing.dynamic_slice_in_dim(r, k, 1, nb), (nb,))  # (..., n)
        x = _shapes.squeeze(_slicing.dynamic_slice_in_dim(row, k, 1, nb), (nb,))
        y = _shapes.squeeze(_slicing.dynamic_slice_in_dim(w, k, 1, nb), (nb,))
        c, s = _rotation(x, y)
        c, s = (_shapes.broadcast_in_dim(v, get_aval(w).shape, batch_axes) for v in (c, s))
        new_row = _arith.sub(_arith.mul(c, row), _arith.mul(s, w))
        w = _arith.add(_arith.mul(c, w), _arith.mul(s, row))
        r = _slicing.dynamic_update_slice_in_dim(r, _shapes.expand_dims(new_row, (nb,)), k, nb)
        return r, w

    return fori_loop(0, n, step, (r, w))[0]


def _jvp(primals, tangents):
    raise NotImplementedError("Differentiation rule for 'cholesky_update' not implemented "
                              "(nor is it in JAX); differentiate a cholesky of R'R + w w' "
                              "instead.")


abstract_eval_rules[cholesky_update_p] = _abstract
register_lowering(cholesky_update_p, lower_fun(_update))
jvp_rules[cholesky_update_p] = _jvp
batched_on_front(cholesky_update_p)


def cholesky_update(r_matrix, w_vector):
    """The upper-triangular Cholesky factor R' of ``Rᵀ R + w wᵀ``, given the upper factor
    ``r_matrix`` R of Rᵀ R and the vector ``w_vector`` w, in O(n²) rather than the O(n³) of
    a new factorisation. Real (float32/float64) matrices; batches too (JAX's takes one
    matrix). Not differentiable, as in JAX."""
    return cholesky_update_p.bind(r_matrix, w_vector)
