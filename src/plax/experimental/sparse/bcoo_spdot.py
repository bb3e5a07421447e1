"""Products that involve sparse indices on both sides: ``bcoo_dot_general_sampled`` (a dense
product read only at given indices, the transpose of a sparse-dense product) and
``bcoo_spdot_general`` (the contraction of two BCOO arrays, a BCOO result).

Both primitives are bilinear in their two data operands and constant in the indices; their
rules are made by ``_bilinear_rules`` from the function that computes them on plax
operations: abstract evaluation by tracing it, the lowering inline, the JVP by the product
rule, the transpose by pulling the cotangent back through it (it is linear in each data
operand), and batching by vectorising it.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, is_undefined, jvp_rules,
                             linear_primitives, register_lowering, tangent_aval, transpose_rules)
from plax.core.shape_dtype_struct import ShapeDtypeStruct
from plax.core.trace import get_aval
from plax.experimental.sparse.bcoo_array import (BCOO, bcoo_sum_duplicates, bcoo_transpose,
                                                 bcoo_update_layout)
from plax.experimental.sparse.bcoo_convert import extract_bufs
from plax.experimental.sparse.bcoo_dot import canonical_dimension_numbers
from plax.experimental.sparse.bcoo_shape import dense_shape_of
from plax.experimental.sparse.util import (SparseInfo, index_row, nfold_vmap,
                                          validate_bcoo_indices)
from plax.lowering.inline import lower_fun

__all__ = ["bcoo_dot_general_sampled", "bcoo_dot_general_sampled_p", "bcoo_spdot_general_p",
           "spdot_general"]


def _bilinear_rules(prim: Primitive, impl, linear: tuple, index_args: tuple):
    """Register ``prim``'s rules from ``impl(*args, **params)``, which is linear in each of
    the ``linear`` arguments (its first result, when it has several) and takes the
    ``index_args`` as integer constants."""
    multiple = prim.multiple_results

    def first(out):
        return out[0] if multiple else out

    def abstract(*avals, **params):
        from plax.api.jit import eval_shape
        structs = [ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
        out = eval_shape(functools.partial(impl, **params), *structs)
        outs = [ShapedArray(o.shape, o.dtype) for o in (out if multiple else [out])]
        return outs if multiple else outs[0]

    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        dot = None
        for k in linear:
            if type(tangents[k]) is Zero:
                continue
            args = list(primals)
            args[k] = tangents[k]
            term = first(prim.bind(*args, **params))
            dot = term if dot is None else dot + term
        if dot is None:
            dot = Zero(tangent_aval(get_aval(first(out))))
        if multiple:
            return out, [dot] + [Zero(tangent_aval(get_aval(o))) for o in out[1:]]
        return out, dot

    def transpose(cts, *args, **params):
        from plax.api.autodiff import vjp
        if any(is_undefined(args[k]) for k in index_args):
            raise ValueError("Cannot transpose with respect to sparse indices")
        ct = first(cts)
        out = [None] * len(args)
        if type(ct) is Zero:
            return out
        for k in linear:
            if not is_undefined(args[k]):
                continue
            if any(is_undefined(args[j]) for j in linear if j != k):
                raise ValueError(f"{prim.name}: cannot transpose with respect to both data "
                                 "operands at once.")
            aval = args[k].aval

            def along(x, k=k):
                vals = list(args)
                vals[k] = x
                return first(impl(*vals, **params))
            _, pullback = vjp(along, jnp.zeros(aval.shape, aval.dtype))
            out[k] = pullback(ct)[0]
        return out

    def batch(axis, vals, dims, **params):
        from plax.api.vmap import vmap
        out = vmap(functools.partial(impl, **params), in_axes=tuple(dims),
                   axis_size=axis.size)(*vals)
        return out, ([0] * len(out) if multiple else 0)

    abstract_eval_rules[prim] = abstract
    register_lowering(prim, lower_fun(impl, multiple_results=multiple))
    jvp_rules[prim] = jvp
    linear_primitives.add(prim)
    transpose_rules[prim] = transpose
    batch_rules[prim] = batch


# --- bcoo_dot_general_sampled -----------------------------------------------------------------
bcoo_dot_general_sampled_p = Primitive("bcoo_dot_general_sampled")


def _sampled_impl(A, B, indices, *, dimension_numbers):
    return extract_bufs(indices, lax.dot_general(A, B, dimension_numbers))


def bcoo_dot_general_sampled(A, B, indices, *, dimension_numbers):
    """The data of ``lax.dot_general(A, B)`` at ``indices`` (BCOO indices for the shape of
    that product): what a BCOO array with those indices would store. A, B are dense."""
    A, B, indices = jnp.asarray(A), jnp.asarray(B), jnp.asarray(indices)
    dims = canonical_dimension_numbers(dimension_numbers)
    out_shape = dense_shape_of(lax.dot_general, A, B, dimension_numbers=dims).shape
    validate_bcoo_indices(get_aval(indices), out_shape)
    return bcoo_dot_general_sampled_p.bind(A, B, indices, dimension_numbers=dims)


_bilinear_rules(bcoo_dot_general_sampled_p, _sampled_impl, linear=(0, 1), index_args=(2,))


# --- bcoo_spdot_general -----------------------------------------------------------------------
bcoo_spdot_general_p = Primitive("bcoo_spdot_general", multiple_results=True)

_BATCH_ERROR = ("bcoo_dot_general batch dimensions must be among the batch dimensions in the "
                "sparse representation.\ngot {side}_batch={dims}, n_batch={n_batch}")


def _spdot_impl(lhs_data, lhs_indices, rhs_data, rhs_indices, *, dimension_numbers,
                lhs_spinfo, rhs_spinfo, preferred_element_type):
    lhs = BCOO((lhs_data, lhs_indices), shape=lhs_spinfo.shape)
    rhs = BCOO((rhs_data, rhs_indices), shape=rhs_spinfo.shape)
    (lc, rc), (lb, rb) = dimension_numbers
    # lhs: contraction batch dimensions, then its other batch dimensions that stay (they
    # lead the lhs's free dimensions of the result), then everything else as sparse.
    l_free_batch = [d for d in range(lhs.n_batch) if d not in lb and d not in lc]
    l_order = [*lb, *l_free_batch, *(d for d in range(lhs.ndim) if d not in lb
                                     and d not in l_free_batch)]
    lhs = bcoo_update_layout(bcoo_transpose(lhs, permutation=l_order),
                             n_batch=len(lb) + len(l_free_batch))
    r_order = [*rb, *(d for d in range(rhs.ndim) if d not in rb)]
    rhs = bcoo_update_layout(bcoo_transpose(rhs, permutation=r_order), n_batch=len(rb))
    l_nb, r_nb = lhs.n_batch, rhs.n_batch
    l_con = [l_order.index(d) - l_nb for d in lc]
    r_con = [r_order.index(d) - r_nb for d in rc]
    l_free = [k for k in range(lhs.n_sparse) if k not in l_con]
    r_free = [k for k in range(rhs.n_sparse) if k not in r_con]
    l_sizes = lhs.shape[l_nb:]
    r_sizes = rhs.shape[r_nb:]
    out_sparse = tuple(l_sizes[k] for k in l_free) + tuple(r_sizes[k] for k in r_free)
    dtype = preferred_element_type or jnp.result_type(lhs.dtype, rhs.dtype)
    index_dtype = jnp.result_type(lhs.indices.dtype, rhs.indices.dtype)
    fill = np.array(out_sparse, index_dtype)

    def one(ld, li, rd, ri):
        lvalid = jnp.all(li < index_row(np.array(l_sizes, li.dtype), li), axis=-1)
        rvalid = jnp.all(ri < index_row(np.array(r_sizes, ri.dtype), ri), axis=-1)
        match = lvalid[:, None] & rvalid[None, :]
        for a, b in zip(l_con, r_con):
            match = match & (li[:, a][:, None] == ri[:, b][None, :])
        data = (ld[:, None].astype(dtype) * rd[None, :].astype(dtype))
        data = jnp.where(match, data, jnp.zeros((), dtype)).reshape(-1)
        n_l, n_r = get_aval(li).shape[0], get_aval(ri).shape[0]
        cols = ([jnp.broadcast_to(li[:, k][:, None], (n_l, n_r)) for k in l_free]
                + [jnp.broadcast_to(ri[:, k][None, :], (n_l, n_r)) for k in r_free])
        idx = (jnp.stack([c.astype(index_dtype) for c in cols], axis=-1) if cols else
               jnp.zeros((n_l, n_r, 0), index_dtype))
        idx = jnp.where(match[..., None], idx, jnp.asarray(fill))
        return data, idx.reshape(n_l * n_r, len(cols))

    fun = nfold_vmap(one, len(l_free_batch), in_axes=(0, 0, None, None))
    fun = nfold_vmap(fun, len(lb))
    data, indices = fun(lhs.data, lhs.indices, rhs.data, rhs.indices)
    out_batch = lhs.shape[:l_nb]
    shape = out_batch + out_sparse
    if get_aval(indices).shape[-2] > math.prod(out_sparse):
        out = bcoo_sum_duplicates(BCOO((data, indices), shape=shape), nse=math.prod(out_sparse))
        data, indices = out.data, out.indices
    return [data, indices]


def _spdot_check(lhs_spinfo, rhs_spinfo, lhs_props, rhs_props, dims):
    (lc, rc), (lb, rb) = dims
    if lhs_props.n_dense or rhs_props.n_dense:
        raise NotImplementedError("bcoo_spdot_general: operands with dense dimensions are not "
                                  "supported; use bcoo_update_layout(mat, n_dense=0) first.")
    if lb and max(lb) >= lhs_props.n_batch:
        raise NotImplementedError(_BATCH_ERROR.format(side="lhs", dims=lb,
                                                      n_batch=lhs_props.n_batch))
    if rb and max(rb) >= rhs_props.n_batch:
        raise NotImplementedError(_BATCH_ERROR.format(side="rhs", dims=rb,
                                                      n_batch=rhs_props.n_batch))


def spdot_general(lhs: BCOO, rhs: BCOO, *, dimension_numbers, preferred_element_type=None):
    """``lax.dot_general`` of two BCOO arrays, as a BCOO array (batch dimensions: the
    contraction's and the lhs's free batch dimensions)."""
    dims = canonical_dimension_numbers(dimension_numbers)
    if preferred_element_type is not None:
        preferred_element_type = dtypes.canonicalize_user_dtype(preferred_element_type,
                                                                "preferred_element_type")
    out_shape = dense_shape_of(lax.dot_general, lhs, rhs, dimension_numbers=dims,
                               preferred_element_type=preferred_element_type).shape
    _spdot_check(lhs._info, rhs._info,
                 validate_bcoo_indices(get_aval(lhs.indices), lhs.shape),
                 validate_bcoo_indices(get_aval(rhs.indices), rhs.shape), dims)
    data, indices = bcoo_spdot_general_p.bind(
        lhs.data, lhs.indices, rhs.data, rhs.indices, dimension_numbers=dims,
        lhs_spinfo=SparseInfo(lhs.shape), rhs_spinfo=SparseInfo(rhs.shape),
        preferred_element_type=preferred_element_type)
    return BCOO((data, indices), shape=out_shape)


_bilinear_rules(bcoo_spdot_general_p, _spdot_impl, linear=(0, 2), index_args=(1, 3))


# --- COO matrix-vector and matrix-matrix kernels ----------------------------------------------
# JAX has these as cuSPARSE calls (GPU only) behind bcoo_dot_general; here they are the same
# products written on plax operations, so they run on every platform.
coo_spmv_p = Primitive("coo_spmv")
coo_spmm_p = Primitive("coo_spmm")


def _coo_check(data, row, col, x, transpose, shape, x_ndim, name):
    shapes = [get_aval(a).shape for a in (data, row, col, x)]
    if not shapes[0] == shapes[1] == shapes[2] or len(shapes[1]) != 1:
        raise ValueError(f"{name}: data, row and col must be 1-D of one length, got shapes "
                         f"{shapes[0]}, {shapes[1]}, {shapes[2]}.")
    if get_aval(row).dtype != get_aval(col).dtype or \
            not dtypes.is_integer(get_aval(row).dtype):
        raise TypeError(f"{name}: row and col must have one integer dtype, got "
                        f"{get_aval(row).dtype} and {get_aval(col).dtype}.")
    if get_aval(data).dtype != get_aval(x).dtype:
        raise TypeError(f"{name}: data and x must have one dtype, got {get_aval(data).dtype} "
                        f"and {get_aval(x).dtype}.")
    if len(shape) != 2 or len(shapes[3]) != x_ndim or \
            shapes[3][0] != (shape[0] if transpose else shape[1]):
        raise ValueError(f"{name}: x of shape {shapes[3]} does not fit a matrix of shape "
                         f"{tuple(shape)} (transpose={transpose}).")


def _coo_product(data, row, col, x, *, transpose, shape):
    """``A @ x`` (or ``A.T @ x``) for the COO matrix ``A`` of ``shape`` (repeats add up;
    out-of-range entries are dropped)."""
    rows, cols = (col, row) if transpose else (row, col)
    n_out = shape[1] if transpose else shape[0]
    taken = x.at[cols].get(mode="fill", fill_value=0)
    terms = lax.expand_dims(data, tuple(range(1, taken.ndim))) * taken
    return jnp.zeros((n_out,) + get_aval(x).shape[1:], get_aval(x).dtype).at[rows].add(
        terms, mode="drop")


def _coo_spmv_impl(data, row, col, x, *, transpose, shape):
    _coo_check(data, row, col, x, transpose, shape, 1, "coo_spmv")
    return _coo_product(data, row, col, x, transpose=transpose, shape=shape)


def _coo_spmm_impl(data, row, col, x, *, transpose, shape):
    _coo_check(data, row, col, x, transpose, shape, 2, "coo_spmm")
    return _coo_product(data, row, col, x, transpose=transpose, shape=shape)


_bilinear_rules(coo_spmv_p, _coo_spmv_impl, linear=(0, 3), index_args=(1, 2))
_bilinear_rules(coo_spmm_p, _coo_spmm_impl, linear=(0, 3), index_args=(1, 2))
__all__ += ["coo_spmv_p", "coo_spmm_p"]
