"""BCOO primitives that rearrange stored elements: ``bcoo_transpose``,
``bcoo_sort_indices`` and ``bcoo_sum_duplicates``, with their rules."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, is_undefined, jvp_rules,
                             linear_primitives, register_lowering, tangent_aval, transpose_rules)
from plax.core.trace import Tracer, concrete_or_error, get_aval
from plax.experimental.sparse.bcoo_convert import batch_to_front
from plax.experimental.sparse.util import SparseInfo, index_row, nfold_vmap, validate_bcoo
from plax.lowering.inline import lower_fun

__all__ = ["bcoo_transpose_p", "bcoo_sort_indices_p", "bcoo_sum_duplicates_p",
           "transpose_bufs", "sort_indices_bufs", "sum_duplicates_bufs", "validate_permutation"]


def _squeeze_front(x):
    return lax.squeeze(x, (0,))


# --- bcoo_transpose ---------------------------------------------------------------------------
bcoo_transpose_p = Primitive("bcoo_transpose", multiple_results=True)


def validate_permutation(data, indices, permutation, shape):
    """``permutation`` split into its batch, sparse and dense parts (the latter two counted
    from the first sparse and first dense dimension); JAX's errors for what BCOO cannot do."""
    if not isinstance(permutation, (tuple, list, np.ndarray)):
        raise TypeError(f"transpose permutation must be a tuple/list/ndarray, got "
                        f"{type(permutation)}.")
    permutation = tuple(int(p) for p in permutation)
    if tuple(sorted(permutation)) != tuple(range(len(shape))):
        raise TypeError("transpose permutation isn't a permutation of operand dimensions, "
                        f"got permutation {permutation} for shape {tuple(shape)}.")
    n_batch, n_sparse, n_dense, _ = validate_bcoo(data, indices, shape)
    batch_perm = permutation[:n_batch]
    sparse_perm = tuple(p - n_batch for p in permutation[n_batch:n_batch + n_sparse])
    dense_perm = tuple(p - n_batch - n_sparse for p in permutation[n_batch + n_sparse:])
    if n_batch and tuple(sorted(batch_perm)) != tuple(range(n_batch)):
        raise NotImplementedError(
            "transpose permutation cannot permute batch axes with non-batch axes; got "
            f"permutation {permutation}, with n_batch={n_batch}.")
    if n_dense and tuple(sorted(dense_perm)) != tuple(range(n_dense)):
        raise NotImplementedError(
            "transpose permutation cannot permute dense axes with non-dense axes; got "
            f"permutation {permutation}, with n_dense={n_dense}.")
    return batch_perm, sparse_perm, dense_perm


def _buffer_perms(batch_perm, dense_perm):
    """The transposes of the data and index buffers that carry out a permutation."""
    n_batch = len(batch_perm)
    data = (*batch_perm, n_batch, *(d + n_batch + 1 for d in dense_perm))
    indices = (*batch_perm, n_batch, n_batch + 1)
    return data, indices


def transpose_bufs(data, indices, *, permutation, spinfo: SparseInfo):
    """BCOO buffers of the array ``data, indices`` describe with dimensions permuted."""
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(len(spinfo.shape))):
        return data, indices
    return tuple(bcoo_transpose_p.bind(data, indices, permutation=permutation, spinfo=spinfo))


def _transpose_abstract(data, indices, *, permutation, spinfo):
    batch_perm, _, dense_perm = validate_permutation(data, indices, permutation, spinfo.shape)
    dperm, iperm = _buffer_perms(batch_perm, dense_perm)
    return [ShapedArray(tuple(data.shape[p] for p in dperm), data.dtype, data.weak_type),
            ShapedArray(tuple(indices.shape[p] for p in iperm), indices.dtype)]


def _transpose_impl(data, indices, *, permutation, spinfo):
    batch_perm, sparse_perm, dense_perm = validate_permutation(
        get_aval(data), get_aval(indices), permutation, spinfo.shape)
    dperm, iperm = _buffer_perms(batch_perm, dense_perm)
    if sparse_perm != tuple(range(len(sparse_perm))):
        indices = jnp.take(indices, np.array(sparse_perm, np.int32), axis=-1)
    return [lax.transpose(data, dperm), lax.transpose(indices, iperm)]


def _transpose_jvp(primals, tangents, *, permutation, spinfo):
    data, indices = primals
    data_dot = tangents[0]
    out = bcoo_transpose_p.bind(data, indices, permutation=permutation, spinfo=spinfo)
    if type(data_dot) is Zero:
        out_dot = Zero(tangent_aval(get_aval(out[0])))
    else:
        out_dot = bcoo_transpose_p.bind(data_dot, indices, permutation=permutation,
                                        spinfo=spinfo)[0]
    return out, [out_dot, Zero(tangent_aval(get_aval(out[1])))]


def _transpose_transpose(cts, data, indices, *, permutation, spinfo):
    if is_undefined(indices):
        raise ValueError("Cannot transpose with respect to sparse indices")
    data_ct = cts[0]
    if type(data_ct) is Zero:
        return [None, None]
    batch_perm, _, dense_perm = validate_permutation(data.aval, get_aval(indices), permutation,
                                                     spinfo.shape)
    dperm, _ = _buffer_perms(batch_perm, dense_perm)
    return [lax.transpose(data_ct, tuple(int(i) for i in np.argsort(dperm))), None]


def _transpose_batch(axis, vals, dims, *, permutation, spinfo):
    (data, indices), spinfo = batch_to_front(vals, dims, spinfo, axis.size)
    perm = (0,) + tuple(p + 1 for p in permutation)
    out = bcoo_transpose_p.bind(data, indices, permutation=perm, spinfo=spinfo)
    outs = [o if d is not None else _squeeze_front(o) for o, d in zip(out, dims)]
    return outs, [None if d is None else 0 for d in dims]


abstract_eval_rules[bcoo_transpose_p] = _transpose_abstract
register_lowering(bcoo_transpose_p, lower_fun(_transpose_impl, multiple_results=True))
jvp_rules[bcoo_transpose_p] = _transpose_jvp
linear_primitives.add(bcoo_transpose_p)
transpose_rules[bcoo_transpose_p] = _transpose_transpose
batch_rules[bcoo_transpose_p] = _transpose_batch


# --- sorting and de-duplicating indices (unbatched helpers) ----------------------------------
def _sort_unbatched(indices):
    """``(sorted indices, permutation)`` of unbatched ``indices`` ``(nse, n_sparse)``, in
    lexicographic order (stable)."""
    nse, n_sparse = get_aval(indices).shape
    columns = [indices[:, i] for i in range(n_sparse)]
    *cols, perm = lax.sort((*columns, lax.broadcasted_iota(np.int32, (nse,), 0)),
                           num_keys=n_sparse, is_stable=True)
    return jnp.stack(cols, axis=-1), perm


def _take_rows(data, perm):
    return jnp.take(data, perm, axis=0)


def _unique_unbatched(indices, sparse_shape):
    """For unbatched ``indices``: ``(unique, slot, count)``. ``unique`` (same shape) holds the
    distinct in-range indices sorted, then padding (the shape); ``slot[k]`` is where element k
    goes among them (``nse``, out of range, for an out-of-range index); ``count`` is how
    many distinct in-range indices there are."""
    nse, n_sparse = get_aval(indices).shape
    limit = index_row(tuple(sparse_shape), indices)
    valid = jnp.all((indices >= 0) & (indices < limit), axis=-1)
    clean = jnp.where(valid[:, None], indices, limit)
    ordered, perm = _sort_unbatched(clean)
    valid_sorted = _take_rows(valid, perm)
    if nse:
        changed = jnp.any(ordered[1:] != ordered[:-1], axis=-1)
        starts = jnp.concatenate([jnp.ones((1,), bool), changed]) & valid_sorted
    else:
        starts = valid_sorted
    run = jnp.cumsum(starts.astype(np.int32)) - 1
    sorted_slot = jnp.where(valid_sorted, run, nse)
    slot = jnp.zeros((nse,), np.int32).at[perm].set(sorted_slot)
    fill = jnp.broadcast_to(limit, (nse, n_sparse))
    unique = fill.at[sorted_slot].set(ordered, mode="drop")
    return unique, slot, jnp.sum(starts.astype(np.int32))


def _resize_nse(indices, nse: int, sparse_shape):
    """Unbatched ``indices`` cut or padded (with the shape, out of range) to ``nse`` rows."""
    have, n_sparse = get_aval(indices).shape
    if nse <= have:
        return indices[:nse]
    fill = jnp.broadcast_to(jnp.asarray(tuple(sparse_shape), get_aval(indices).dtype),
                            (nse - have, n_sparse))
    return jnp.concatenate([indices, fill], axis=0)


# --- bcoo_sort_indices ------------------------------------------------------------------------
bcoo_sort_indices_p = Primitive("bcoo_sort_indices", multiple_results=True)


def sort_indices_bufs(data, indices, *, spinfo: SparseInfo):
    """BCOO buffers with each batch's indices in lexicographic order."""
    return tuple(bcoo_sort_indices_p.bind(data, indices, spinfo=spinfo))


def _sorted_data_shape(data, indices, n_batch):
    return (*map(max, indices.shape[:n_batch], data.shape[:n_batch]), *data.shape[n_batch:])


def _sort_abstract(data, indices, *, spinfo):
    n_batch, n_sparse, _, _ = validate_bcoo(data, indices, spinfo.shape)
    if n_sparse == 0:
        return [data, indices]
    return [ShapedArray(_sorted_data_shape(data, indices, n_batch), data.dtype, data.weak_type),
            indices]


def _sorted_with_perm(data, indices, n_batch):
    new_indices, perm = nfold_vmap(_sort_unbatched, n_batch, broadcasted=False)(indices)
    return new_indices, perm


def _sort_impl(data, indices, *, spinfo):
    n_batch, n_sparse, _, _ = validate_bcoo(get_aval(data), get_aval(indices), spinfo.shape)
    if n_sparse == 0:
        return [data, indices]
    new_indices, perm = _sorted_with_perm(data, indices, n_batch)
    return [nfold_vmap(_take_rows, n_batch)(data, perm), new_indices]


def _sort_jvp(primals, tangents, *, spinfo):
    data, indices = primals
    data_dot = tangents[0]
    n_batch, n_sparse, _, _ = validate_bcoo(get_aval(data), get_aval(indices), spinfo.shape)
    if n_sparse == 0:
        return [data, indices], [data_dot, Zero(tangent_aval(get_aval(indices)))]
    new_indices, perm = _sorted_with_perm(data, indices, n_batch)
    take = nfold_vmap(_take_rows, n_batch)
    new_data = take(data, perm)
    new_dot = (Zero(tangent_aval(get_aval(new_data))) if type(data_dot) is Zero
               else take(data_dot, perm))
    return [new_data, new_indices], [new_dot, Zero(tangent_aval(get_aval(new_indices)))]


def _sort_batch(axis, vals, dims, *, spinfo):
    (data, indices), spinfo = batch_to_front(vals, dims, spinfo, axis.size)
    new_data, new_indices = bcoo_sort_indices_p.bind(data, indices, spinfo=spinfo)
    if dims[1] is None:  # unbatched indices stay unbatched (the data becomes batched)
        return [new_data, _squeeze_front(new_indices)], [0, None]
    return [new_data, new_indices], [0, 0]


abstract_eval_rules[bcoo_sort_indices_p] = _sort_abstract
register_lowering(bcoo_sort_indices_p, lower_fun(_sort_impl, multiple_results=True))
jvp_rules[bcoo_sort_indices_p] = _sort_jvp
batch_rules[bcoo_sort_indices_p] = _sort_batch


# --- bcoo_sum_duplicates ----------------------------------------------------------------------
bcoo_sum_duplicates_p = Primitive("bcoo_sum_duplicates", multiple_results=True)

_NSE_NEEDED = ("bcoo_sum_duplicates: nse must be specified when using the function within "
               "jit, vmap, and other transformations requiring abstract evaluation.")


def _unique_batched(indices, shape, n_batch):
    sparse_shape = tuple(shape[n_batch:n_batch + get_aval(indices).shape[-1]])
    return nfold_vmap(lambda i: _unique_unbatched(i, sparse_shape), n_batch,
                      broadcasted=False)(indices)


def sum_duplicates_bufs(data, indices, *, spinfo: SparseInfo, nse=None):
    """BCOO buffers whose repeated indices are merged (their data summed), sorted, with
    ``nse`` elements per batch (by default as many as the most distinct indices of a batch:
    that needs concrete indices)."""
    if nse is None:
        if isinstance(indices, Tracer) and indices.to_concrete_value() is None:
            raise ValueError(_NSE_NEEDED)
        n_batch, n_sparse, _, _ = validate_bcoo(get_aval(data), get_aval(indices), spinfo.shape)
        if n_sparse == 0:
            nse = 1
        else:
            counts = _unique_batched(indices, spinfo.shape, n_batch)[2]
            nse = int(concrete_or_error(None, jnp.max(counts, initial=0)))
    nse = concrete_or_error(int, nse, "the nse argument of bcoo_sum_duplicates")
    return tuple(bcoo_sum_duplicates_p.bind(data, indices, spinfo=spinfo, nse=nse))


def _sum_duplicates_abstract(data, indices, *, spinfo, nse):
    if nse is None:
        raise ValueError(_NSE_NEEDED)
    n_batch, n_sparse, _, _ = validate_bcoo(data, indices, spinfo.shape)
    data_batch = tuple(map(max, indices.shape[:n_batch], data.shape[:n_batch]))
    return [ShapedArray(data_batch + (nse,) + data.shape[n_batch + 1:], data.dtype,
                        data.weak_type),
            ShapedArray(indices.shape[:n_batch] + (nse, n_sparse), indices.dtype)]


def _merge(data, slot, nse: int, n_batch: int):
    """Data summed into its new slots (``nse`` per batch; out-of-range slots dropped)."""
    def one(d, s):
        out = jnp.zeros((nse,) + get_aval(d).shape[1:], get_aval(d).dtype)
        return out.at[s].add(d, mode="drop")
    return nfold_vmap(one, n_batch)(data, slot)


def _merged_layout(data, indices, spinfo, nse):
    """``(new indices, slot of each old element, data reshaped for merging)``."""
    n_batch, n_sparse, _, _ = validate_bcoo(get_aval(data), get_aval(indices), spinfo.shape)
    sparse_shape = tuple(spinfo.shape[n_batch:n_batch + n_sparse])
    if n_sparse == 0:  # one element per batch: everything sums into it
        nse_in = get_aval(indices).shape[-2]
        new_indices = jnp.zeros(get_aval(indices).shape[:n_batch] + (nse, 0),
                                get_aval(indices).dtype)
        slot = jnp.zeros(get_aval(indices).shape[:n_batch] + (nse_in,), np.int32)
        return new_indices, slot
    unique, slot, _ = _unique_batched(indices, spinfo.shape, n_batch)
    resize = nfold_vmap(lambda u: _resize_nse(u, nse, sparse_shape), n_batch, broadcasted=False)
    return resize(unique), slot


def _sum_duplicates_impl(data, indices, *, spinfo, nse):
    n_batch = get_aval(indices).ndim - 2
    new_indices, slot = _merged_layout(data, indices, spinfo, nse)
    return [_merge(data, slot, nse, n_batch), new_indices]


def _sum_duplicates_jvp(primals, tangents, *, spinfo, nse):
    data, indices = primals
    data_dot = tangents[0]
    n_batch = get_aval(indices).ndim - 2
    new_indices, slot = _merged_layout(data, indices, spinfo, nse)
    new_data = _merge(data, slot, nse, n_batch)
    new_dot = (Zero(tangent_aval(get_aval(new_data))) if type(data_dot) is Zero
               else _merge(data_dot, slot, nse, n_batch))
    return [new_data, new_indices], [new_dot, Zero(tangent_aval(get_aval(new_indices)))]


def _sum_duplicates_batch(axis, vals, dims, *, spinfo, nse):
    (data, indices), spinfo = batch_to_front(vals, dims, spinfo, axis.size)
    new_data, new_indices = bcoo_sum_duplicates_p.bind(data, indices, spinfo=spinfo, nse=nse)
    if dims[1] is None:
        return [new_data, _squeeze_front(new_indices)], [0, None]
    return [new_data, new_indices], [0, 0]


abstract_eval_rules[bcoo_sum_duplicates_p] = _sum_duplicates_abstract
register_lowering(bcoo_sum_duplicates_p, lower_fun(_sum_duplicates_impl, multiple_results=True))
jvp_rules[bcoo_sum_duplicates_p] = _sum_duplicates_jvp
batch_rules[bcoo_sum_duplicates_p] = _sum_duplicates_batch
