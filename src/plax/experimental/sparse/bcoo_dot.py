"""``bcoo_dot_general``: the general contraction of a BCOO array with a dense one.

The sparse operand is the lhs (a dense lhs is handled by swapping the operands and
transposing the result). The primitive takes the lhs buffers and the dense rhs; the
result is dense, laid out as ``lax.dot_general``'s: batch dimensions, the lhs's free
dimensions, the rhs's free ones. Batch dimensions of the contraction must be batch
dimensions of the BCOO layout; contracting dimensions may be of any kind.
"""
from __future__ import annotations

import operator

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, batch_rules, is_undefined, register_lowering,
                             transpose_rules)
from plax.core.trace import get_aval
from plax.experimental.sparse.bcoo_convert import unbroadcast, batch_to_front, extract_bufs
from plax.experimental.sparse.util import (SparseInfo, broadcasting_vmap, check_indices_known,
                                           linear_in, validate_bcoo)
from plax.first_order.dot import dot_general_p
from plax.lowering.inline import lower_fun

__all__ = ["bcoo_dot_general_p", "dot_general_bufs", "rdot_general_bufs",
           "canonical_dimension_numbers", "dot_batch_rule"]

bcoo_dot_general_p = Primitive("bcoo_dot_general")


def _int_tuple(dims) -> tuple:
    if isinstance(dims, (int, np.integer)):
        return (int(dims),)
    return tuple(operator.index(d) for d in dims)


def canonical_dimension_numbers(dimension_numbers) -> tuple:
    """``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))`` as int tuples."""
    try:
        (lc, rc), (lb, rb) = dimension_numbers
        return ((_int_tuple(lc), _int_tuple(rc)), (_int_tuple(lb), _int_tuple(rb)))
    except (TypeError, ValueError):
        raise TypeError("dimension_numbers must have the form ((lhs_contracting_dims, "
                        "rhs_contracting_dims), (lhs_batch_dims, rhs_batch_dims)), got "
                        f"{dimension_numbers!r}.") from None


def dot_general_bufs(lhs_data, lhs_indices, rhs, *, dimension_numbers,
                     preferred_element_type=None, lhs_spinfo: SparseInfo):
    """``dot_general`` of the BCOO array (``lhs_data``, ``lhs_indices``) with dense ``rhs``."""
    if preferred_element_type is not None:
        preferred_element_type = dtypes.canonicalize_user_dtype(preferred_element_type,
                                                                "preferred_element_type")
    return bcoo_dot_general_p.bind(jnp.asarray(lhs_data), jnp.asarray(lhs_indices),
                                   jnp.asarray(rhs),
                                   dimension_numbers=canonical_dimension_numbers(dimension_numbers),
                                   preferred_element_type=preferred_element_type,
                                   lhs_spinfo=lhs_spinfo)


def rdot_general_bufs(lhs, rhs_data, rhs_indices, *, dimension_numbers,
                      preferred_element_type=None, rhs_spinfo: SparseInfo):
    """``dot_general`` of dense ``lhs`` with the BCOO array (``rhs_data``, ``rhs_indices``)."""
    (lc, rc), (lb, rb) = canonical_dimension_numbers(dimension_numbers)
    out = dot_general_bufs(rhs_data, rhs_indices, lhs, dimension_numbers=((rc, lc), (rb, lb)),
                           preferred_element_type=preferred_element_type, lhs_spinfo=rhs_spinfo)
    # The swapped product lists the sparse operand's free dimensions first.
    n_batch, n_contract = len(lb), len(lc)
    n_sparse_free = len(rhs_spinfo.shape) - n_contract - n_batch
    ndim = get_aval(out).ndim
    perm = (*range(n_batch), *range(n_batch + n_sparse_free, ndim),
            *range(n_batch, n_batch + n_sparse_free))
    return lax.transpose(out, perm)


def _abstract(lhs_data, lhs_indices, rhs, *, dimension_numbers, preferred_element_type,
              lhs_spinfo):
    dense = abstract_eval_rules[dot_general_p](
        ShapedArray(tuple(lhs_spinfo.shape), lhs_data.dtype), rhs,
        dimension_numbers=dimension_numbers, precision=None,
        preferred_element_type=preferred_element_type)
    n_batch, _, _, _ = validate_bcoo(lhs_data, lhs_indices, lhs_spinfo.shape)
    lhs_batch = dimension_numbers[1][0]
    if lhs_batch and max(lhs_batch) >= n_batch:
        raise NotImplementedError(
            "bcoo_dot_general batch dimensions must be among the batch dimensions in the sparse "
            f"representation.\ngot lhs_batch={lhs_batch}, n_batch={n_batch}")
    return ShapedArray(dense.shape, dense.dtype)


def _impl(lhs_data, lhs_indices, rhs, *, dimension_numbers, preferred_element_type,
          lhs_spinfo):
    out = _abstract(get_aval(lhs_data), get_aval(lhs_indices), get_aval(rhs),
                    dimension_numbers=dimension_numbers,
                    preferred_element_type=preferred_element_type, lhs_spinfo=lhs_spinfo)
    shape = tuple(lhs_spinfo.shape)
    n_batch, n_sparse, n_dense, _ = validate_bcoo(get_aval(lhs_data), get_aval(lhs_indices),
                                                  shape)
    (lc, rc), (lb, rb) = dimension_numbers
    pairs = list(zip(lc, rc))
    contract_b = [(l, r) for l, r in pairs if l < n_batch]
    contract_s = [(l - n_batch, r) for l, r in pairs if n_batch <= l < n_batch + n_sparse]
    contract_d = [(l - n_batch - n_sparse, r) for l, r in pairs if l >= n_batch + n_sparse]
    free_b = [d for d in range(n_batch) if d not in lb and d not in lc]
    free_s = [s for s in range(n_sparse) if s + n_batch not in lc]
    free_d = [d for d in range(n_dense) if d not in [c for c, _ in contract_d]]
    rhs_shape = get_aval(rhs).shape
    rhs_free = [d for d in range(len(rhs_shape)) if d not in rb and d not in rc]

    # Batch dimensions first in the order they are mapped: contraction batch, free, contracted.
    batch_order = list(lb) + free_b + [l for l, _ in contract_b]
    data = lax.transpose(lhs_data, (*batch_order, *range(n_batch, get_aval(lhs_data).ndim)))
    indices = lax.transpose(lhs_indices, (*batch_order, n_batch, n_batch + 1))
    rhs = lax.transpose(rhs, (*rb, *(r for _, r in contract_b), *(r for _, r in contract_s),
                              *(r for _, r in contract_d), *rhs_free))
    dense_shape = shape[n_batch + n_sparse:]
    block_shape = (tuple(shape[n_batch + s] for s in free_s) + tuple(dense_shape[d] for d in free_d)
                   + tuple(rhs_shape[r] for r in rhs_free))
    dtype = out.dtype

    def block(data, indices, rhs):
        """One batch: data (nse, dense...), indices (nse, n_sparse), rhs (contracted...,
        free...)."""
        data_contract = [1 + d for d, _ in contract_d]
        if contract_s:  # the rhs rows each stored element meets (zero at padding)
            rows = tuple(indices[:, s] for s, _ in contract_s)
            rhs = rhs.at[rows].get(mode="fill", fill_value=0)
            dims = ((data_contract, list(range(1, 1 + len(contract_d)))), ([0], [0]))
        else:
            dims = ((data_contract, list(range(len(contract_d)))), ([], []))
        prod = lax.dot_general(data, rhs, dims, preferred_element_type=preferred_element_type)
        prod = prod.astype(dtype)  # (nse, free dense..., free rhs...)
        if free_s:
            cols = tuple(indices[:, s] for s in free_s)
            return jnp.zeros(block_shape, dtype).at[cols].add(prod, mode="drop")
        return jnp.sum(prod, axis=0, dtype=dtype)

    mapped = [(0, 0, 0)] * len(lb) + [(0, 0, None)] * len(free_b) + [(0, 0, 0)] * len(contract_b)
    fun = block
    for in_axes in reversed(mapped):
        fun = broadcasting_vmap(fun, in_axes)
    result = fun(data, indices, rhs)
    if contract_b:
        first = len(lb) + len(free_b)
        result = jnp.sum(result, axis=tuple(range(first, first + len(contract_b))), dtype=dtype)
    return jnp.broadcast_to(result, out.shape)


def _consecutive(*lengths):
    start, out = 0, []
    for n in lengths:
        out.append(tuple(range(start, start + n)))
        start += n
    return out


def _transpose(ct, lhs_data, lhs_indices, rhs, *, dimension_numbers, preferred_element_type,
               lhs_spinfo):
    check_indices_known(lhs_indices)
    (lc, rc), (lb, rb) = dimension_numbers
    lhs_ndim = len(lhs_spinfo.shape)
    rhs_aval = rhs.aval if is_undefined(rhs) else get_aval(rhs)
    lhs_kept = tuple(d for d in range(lhs_ndim) if d not in lc and d not in lb)
    rhs_kept = tuple(d for d in range(rhs_aval.ndim) if d not in rc and d not in rb)
    ans_batch, ans_lhs, ans_rhs = _consecutive(len(lb), len(lhs_kept), len(rhs_kept))
    if is_undefined(lhs_data):
        # The dense cotangent of the lhs, read at the stored indices.
        dense = lax.dot_general(ct, rhs, ((ans_rhs, rhs_kept), (ans_batch, rb)))
        order = (*lb, *lhs_kept, *(lc[i] for i in np.argsort(rc)))
        dense = lax.transpose(dense, tuple(int(i) for i in np.argsort(order)))
        data_ct = extract_bufs(lhs_indices, dense).astype(lhs_data.aval.dtype)
        return [unbroadcast(data_ct, lhs_data.aval.shape), None, None]
    prod = dot_general_bufs(lhs_data, lhs_indices, ct, lhs_spinfo=lhs_spinfo,
                            dimension_numbers=((lhs_kept, ans_lhs), (lb, ans_batch)))
    order = (*rb, *(rc[i] for i in np.argsort(lc)), *rhs_kept)
    rhs_ct = lax.transpose(prod, tuple(int(i) for i in np.argsort(order)))
    return [None, None, rhs_ct.astype(rhs_aval.dtype)]


def dot_batch_rule(prim, n_bufs: int):
    """The batching rule of a sparse-lhs product ``prim(*lhs_bufs, rhs)`` (BCOO's, BCSR's):
    the lhs buffers gain the vmapped dimension as a leading batch dimension; with the rhs
    vmapped too it is a batch dimension of the product, else a free one of the lhs."""
    def rule(axis, vals, dims, **params):
        bufs, spinfo = batch_to_front(vals[:n_bufs], dims[:n_bufs], params["lhs_spinfo"],
                                      axis.size)
        rhs_dim = dims[n_bufs]
        (lc, rc), (lb, rb) = params["dimension_numbers"]
        lc, lb = tuple(d + 1 for d in lc), tuple(d + 1 for d in lb)
        if rhs_dim is None:  # the new lhs batch dimension is a free one: first of the lhs's
            new, out_dim = ((lc, rc), (lb, rb)), len(lb)
        else:
            shift = lambda d: d + 1 if d >= rhs_dim else d  # noqa: E731
            new = ((lc, tuple(map(shift, rc))), ((0,) + lb, (rhs_dim,) + tuple(map(shift, rb))))
            out_dim = 0
        out = prim.bind(*bufs, vals[n_bufs], **dict(params, dimension_numbers=new,
                                                    lhs_spinfo=spinfo))
        return out, out_dim
    return rule


abstract_eval_rules[bcoo_dot_general_p] = _abstract
register_lowering(bcoo_dot_general_p, lower_fun(_impl))
linear_in(bcoo_dot_general_p, 0, 2)
transpose_rules[bcoo_dot_general_p] = _transpose
batch_rules[bcoo_dot_general_p] = dot_batch_rule(bcoo_dot_general_p, 2)
