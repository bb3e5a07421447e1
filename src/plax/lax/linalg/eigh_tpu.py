"""eigh on TPUs, as JAX lowers it there: XLA's Jacobi ``Eigh`` custom call for matrices of
up to 256 rows, and beyond that the QDWH-based spectral divide and conquer of Nakatsukasa and
Higham (SIAM J. Sci. Comput. 35(3), 2013), whose blocks of at most 256 rows go to the
Jacobi call.

The divide and conquer splits a Hermitian block at the median of its diagonal: the polar
factor of the shifted block (``qdwh``) gives the projectors onto the eigenspaces below and
above the split, whose bases (a subspace iteration on QR) reduce the block to two smaller
ones. The recursion is a ``while_loop`` over a stack of (offset, size) blocks kept in one
N x N workspace; each block is worked at the smallest of a few padded sizes that holds it.
``eigh_divide_and_conquer`` is that algorithm on plax ops (``eigh_qdwh`` over a batch), with
its base case a parameter (the tests swap the Jacobi call, which only a TPU runs, for the
CPU's eigh).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.rules import register_lowering
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import bitwise as _bitwise
from plax.first_order import comparison as _cmp
from plax.first_order import reductions as _reductions
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.common import real_dtype
from plax.first_order.conversion import convert_element_type
from plax.first_order.sort import sort, sort_key_val
from plax.higher_order.cond import cond, switch
from plax.higher_order.loops import while_loop
from plax.higher_order.scan import map as scan_map
from plax.lax.linalg import lapack
from plax.lax.linalg.common import (adjoint, diagonal, diagonal_matrix, eye_like, matmul, norm2,
                                    swap_last, symmetrize, take, take_columns, triangle_mask,
                                    within)
from plax.lax.linalg.eigh import EighImplementation, eigh_p
from plax.lax.linalg.qdwh import qdwh
from plax.lax.linalg.qr import qr
from plax.lowering.inline import lower_fun

__all__ = ["TERMINATION_SIZE", "eigh_divide_and_conquer", "eigh_qdwh", "jacobi_eigh"]

TERMINATION_SIZE = 256  # blocks this small go to the Jacobi call
_GROWTH, _GRANULARITY = 1.98, 32  # the padded sizes: about halving, rounded up to 32


def jacobi_eigh(x, *, lower: bool, sort_eigenvalues: bool):
    """``(v, w)`` of each matrix of ``x`` by XLA's ``Eigh`` custom call (one-sided Jacobi,
    at most 100 sweeps, tolerance 1e-6), which reads the ``lower`` (or upper) triangle; the
    eigenvalues come ascending when ``sort_eigenvalues``, else in the call's own order."""
    aval = get_aval(x)
    real = real_dtype(aval.dtype)
    if aval.shape[-1] == 0:
        return x, _shapes.full(aval.shape[:-1], 0, real)
    config = f"{int(lower)},{int(sort_eigenvalues)},100,1e-6"
    v, w = lapack.call_target(
        "Eigh", [x], [(aval.shape, aval.dtype, False), (aval.shape[:-1], real, False)],
        config=(("backend_config", config), ("api_version", 1)))
    return v, w


def _jacobi_leaf(h, size):
    """The TPU's base case: the Jacobi call on the padded block (zeros beyond ``size``),
    unsorted, so the block's eigenpairs stay in its first ``size`` places."""
    del size
    return jacobi_eigh(symmetrize(h), lower=True, sort_eigenvalues=False)


# --- padded blocks ------------------------------------------------------------------------
def _int(i):
    return np.int32(i) if isinstance(i, int) else i


def _padded_slice(x, starts, sizes, shape):
    """The block of ``x`` at ``starts`` of true ``sizes``, padded with zeros to the static
    ``shape`` (never clamped: the source is padded first)."""
    zero = np.zeros((), get_aval(x).dtype)
    padded = _shapes.pad(x, zero, [(0, s, 0) for s in shape])
    return within(_slicing.dynamic_slice(padded, [_int(i) for i in starts], shape), sizes)


def _masked_update(x, update, starts, sizes):
    """``x`` with ``update``'s leading ``sizes`` block written at ``starts`` (the rest of the
    padded ``update`` leaves ``x`` as it was)."""
    aval, shape = get_aval(x), get_aval(update).shape
    padded = _shapes.pad(x, np.zeros((), aval.dtype), [(0, s, 0) for s in shape])
    starts = [_int(i) for i in starts]
    old = _slicing.dynamic_slice(padded, starts, shape)
    padded = _slicing.dynamic_update_slice(padded, within(update, sizes, old), starts)
    return _slicing.slice(padded, (0,) * aval.ndim, aval.shape)


def _eye(n: int, dtype):
    return eye_like(ShapedArray((n, n), dtype))


def _argsort(v):
    """Stable ascending order of ``v`` (NaNs last), as int32 indices."""
    n = get_aval(v).shape[0]
    return sort_key_val(v, _shapes.iota(np.int32, n), 0, True)[1]


def _nan_median(v):
    """The median of the non-NaN entries of ``v`` (the mean of the two middle ones for an
    even count), the midpoint quantile JAX's nanmedian computes."""
    real = get_aval(v).dtype
    v = sort(_cmp.select(_cmp.ne(v, v), _shapes.full(get_aval(v).shape, np.nan, real), v))
    count = _reductions.reduce_sum(
        convert_element_type(_bitwise.bitwise_not(_cmp.ne(v, v)), real), (0,))
    last = _arith.sub(count, np.ones((), real))
    q = _arith.mul(np.asarray(0.5, real), last)
    zero = np.zeros((), real)

    def entry(i):
        i = _arith.max(zero, _arith.min(i, last))
        return _slicing.dynamic_index_in_dim(v, convert_element_type(i, np.int32), 0, False)
    middle = _arith.add(entry(_arith.floor(q)), entry(_arith.ceil(q)))
    return _arith.mul(middle, np.asarray(0.5, real))


# --- one split ----------------------------------------------------------------------------
def _projector_subspace(p, h, n, rank, max_iterations=2):
    """``(v1, v2)``: orthonormal bases of the range of the rank-``rank`` Hermitian projector
    ``p`` (true size ``n``, padded) and of its complement, by subspace iteration from
    p's ``rank`` largest columns until the off-diagonal block v2ᴴ h v1 is negligible."""
    big = get_aval(p).shape[0]
    dtype = get_aval(p).dtype
    real = real_dtype(dtype)
    norms = within(_arith.neg(norm2(p, (1,))), (n,), np.asarray(np.nan, real))
    order = _argsort(norms)
    x = within(take(p, order, 1), (n, rank))
    eps = float(np.finfo(dtype).eps)
    threshold = _arith.mul(np.asarray(10.0 * eps, real), norm2(h, (0, 1)))

    def bases(x):
        q, _ = qr(x, full_matrices=True)
        v1 = within(q, (n, rank))
        v2 = _padded_slice(q, (0, rank), (n, _arith.sub(n, rank)), (big, big))
        error = norm2(matmul(matmul(adjoint(v2), h), v1), (0, 1))
        return v1, v2, error

    def again(state):
        _, _, j, error = state
        return _bitwise.bitwise_and(_cmp.lt(j, np.int32(max_iterations)),
                                    _cmp.gt(error, threshold))

    def step(state):
        v1, _, j, _ = state
        v1, v2, error = bases(matmul(p, v1))
        return v1, v2, _arith.add(j, np.int32(1)), error

    v1, v2, error = bases(x)
    v1, v2, _, _ = while_loop(again, step, (v1, v2, np.int32(1), error))
    return v1, v2


def _split_spectrum(h, n, split_point, v0):
    """``(h_minus, v_minus, h_plus, v_plus, rank)``: the Hermitian ``h`` (true size ``n``)
    reduced to its eigenspaces below and above ``split_point`` (``rank`` eigenvalues below),
    ``h_i = v_iᴴ h v_i``, with the bases returned as ``v0 @ v_i``."""
    big = get_aval(h).shape[0]
    dtype = get_aval(h).dtype
    shift = convert_element_type(_arith.mul(split_point, _eye(big, get_aval(split_point).dtype)),
                                 dtype)
    u = qdwh(_arith.sub(h, shift), is_hermitian=True, dynamic_shape=(n, n))[0]
    eye = within(_eye(big, dtype), (n, n))
    # The polar factor of h - σ I is the sign of it: -1 on the eigenspace below σ.
    p_minus = _arith.mul(np.asarray(-0.5, dtype), _arith.sub(u, eye))
    trace = _reductions.reduce_sum(diagonal(_arith.real(p_minus) if dtypes.is_complex(dtype)
                                             else p_minus), (0,))
    rank_minus = convert_element_type(_arith.round(trace, _arith.RoundingMethod.TO_NEAREST_EVEN),
                                      np.int32)
    p_plus = _arith.mul(np.asarray(0.5, dtype), _arith.add(u, eye))
    rank_plus = _arith.sub(n, rank_minus)
    # The subspace iteration runs on the projector of smaller rank (less work).
    v_minus, v_plus = cond(
        _cmp.lt(rank_plus, rank_minus),
        lambda: _projector_subspace(p_plus, h, n, rank_plus)[::-1],
        lambda: _projector_subspace(p_minus, h, n, rank_minus))
    h_minus = matmul(matmul(adjoint(v_minus), h), v_minus)
    h_plus = matmul(matmul(adjoint(v_plus), h), v_plus)
    return h_minus, matmul(v0, v_minus), h_plus, matmul(v0, v_plus), rank_minus


# --- the recursion, as a loop over a stack of blocks ----------------------------------------
def _push(agenda, offset, size):
    count, offsets, sizes = agenda
    return (_arith.add(count, np.int32(1)),
            _slicing.dynamic_update_index_in_dim(offsets, offset, count, 0),
            _slicing.dynamic_update_index_in_dim(sizes, size, count, 0))


def _round_up(i: int, to: int) -> int:
    return -(-i // to) * to


def _bucket_sizes(big: int, termination_size: int):
    """The padded sizes blocks are worked at: the base-case size, the whole, then about
    halving (rounded up to 32) while above the base case."""
    cutoff = min(big, termination_size)
    sizes = [cutoff]
    if big > termination_size:
        sizes.append(big)
        i = int(big / _GROWTH)
        while i > cutoff:
            sizes.append(_round_up(i, _GRANULARITY))
            i //= 2
    return sizes


def eigh_divide_and_conquer(h, *, sort_eigenvalues: bool = True, subset_by_index=None,
                            termination_size: int = TERMINATION_SIZE, leaf=None):
    """``(v, w)`` of one Hermitian matrix ``h`` (both triangles filled) by QDWH spectral
    divide and conquer. Blocks of at most ``termination_size`` rows go to ``leaf(block,
    size)``, which gets the block padded with zeros beyond ``size`` and must return its
    eigenpairs in the first ``size`` places (default: XLA's Jacobi call, unsorted, a TPU
    op). ``subset_by_index=(start, end)`` keeps the ascending eigenpairs start..end-1 and
    skips blocks wholly outside them."""
    leaf = _jacobi_leaf if leaf is None else leaf
    aval = get_aval(h)
    big = aval.shape[0]
    dtype, real = aval.dtype, real_dtype(aval.dtype)
    eps = np.asarray(np.finfo(dtype).eps, real)
    h0_norm = norm2(h, (0, 1))

    def base(size, offset, b, agenda, blocks, vecs):
        block = _padded_slice(blocks, (offset, 0), (b, b), (size, size))
        basis = _padded_slice(vecs, (0, offset), (big, b), (big, size))
        v, w = leaf(block, b)
        v = matmul(basis, within(v, (b, b)))
        w = convert_element_type(within(w, (b,)), dtype)
        blocks = _masked_update(blocks, _shapes.expand_dims(w, (1,)), (offset, 0), (b, 1))
        return agenda, blocks, _masked_update(vecs, v, (0, offset), (big, b))

    def wanted(start, end):
        if subset_by_index is None:
            return None
        lo, hi = subset_by_index
        return _bitwise.bitwise_and(_cmp.lt(start, np.int32(hi)), _cmp.gt(end, np.int32(lo)))

    def split(size, offset, b, agenda, blocks, vecs):
        block = _padded_slice(blocks, (offset, 0), (b, b), (size, size))
        norm = norm2(block, (0, 1))
        diag = diagonal(_arith.real(block) if dtypes.is_complex(dtype) else block)
        off_norm = norm2(_arith.sub(block, convert_element_type(diagonal_matrix(diag), dtype)),
                         (0, 1))
        # Nearly diagonal, or negligible beside the whole: the diagonal is the spectrum
        # (this ends the recursion on clusters of equal eigenvalues, rank deficiency, ...).
        done = _bitwise.bitwise_or(_cmp.le(off_norm, _arith.mul(_arith.mul(np.asarray(5, real),
                                                                            eps), norm)),
                                   _cmp.lt(norm, _arith.mul(eps, h0_norm)))

        def diagonal_case(agenda, blocks, vecs):
            column = _shapes.expand_dims(diagonal(block), (1,))
            return agenda, _masked_update(blocks, column, (offset, 0), (b, 1)), vecs

        def split_case(agenda, blocks, vecs):
            basis = _padded_slice(vecs, (0, offset), (big, b), (big, size))
            median = _nan_median(within(diag, (b,), np.asarray(np.nan, real)))
            h_minus, v_minus, h_plus, v_plus, rank = _split_spectrum(block, b, median, basis)
            halves = ((offset, rank, h_minus, v_minus),
                      (_arith.add(offset, rank), _arith.sub(b, rank), h_plus, v_plus))
            for start, k, hk, vk in halves:
                def record(agenda, blocks, vecs, start=start, k=k, hk=hk, vk=vk):
                    return (_push(agenda, start, k),
                            _masked_update(blocks, hk, (start, 0), (k, k)),
                            _masked_update(vecs, vk, (0, start), (big, k)))

                def skip(agenda, blocks, vecs, start=start, k=k):
                    # Unlike JAX, which leaves the skipped block's stale entries to be
                    # sorted in among the eigenvalues: mark them -inf below the subset
                    # (+inf above), so the final sort puts them out of the range kept.
                    below = _cmp.le(_arith.add(start, k), np.int32(subset_by_index[0]))
                    mark = _cmp.select(below, np.asarray(-np.inf, dtype),
                                       np.asarray(np.inf, dtype))
                    column = _shapes.broadcast_in_dim(mark, (size, 1), ())
                    return agenda, _masked_update(blocks, column, (start, 0), (k, 1)), vecs

                keep = wanted(start, _arith.add(start, k))
                if keep is None:
                    agenda, blocks, vecs = record(agenda, blocks, vecs)
                else:
                    agenda, blocks, vecs = cond(keep, record, skip, agenda, blocks, vecs)
            return agenda, blocks, vecs

        return cond(done, diagonal_case, split_case, agenda, blocks, vecs)

    sizes = _bucket_sizes(big, termination_size)
    branches = [partial(base, sizes[0])] + [partial(split, s) for s in sizes[1:]]
    bucket_array = np.asarray(sizes, np.int32)

    def body(state):
        agenda, blocks, vecs = state
        count, offsets, block_sizes = agenda
        count = _arith.sub(count, np.int32(1))
        offset = _slicing.dynamic_index_in_dim(offsets, count, 0, False)
        b = _slicing.dynamic_index_in_dim(block_sizes, count, 0, False)
        # The smallest padded size that holds the block.
        fits = _cmp.select(_cmp.lt(bucket_array, b),
                           _shapes.full((len(sizes),), np.iinfo(np.int32).max, np.int32),
                           bucket_array)
        choice = _reductions.argmin(fits, 0, np.int32)
        return switch(choice, branches, offset, b, (count, offsets, block_sizes), blocks, vecs)

    stack = np.zeros((big + 1,), np.int32)
    agenda = _push((np.int32(0), stack, stack), np.int32(0), np.int32(big))
    _, blocks, vecs = while_loop(lambda s: _cmp.gt(s[0][0], np.int32(0)), body,
                                 (agenda, h, _eye(big, dtype)))
    w = _slicing.index_in_dim(blocks, 0, 1, False)
    w = _arith.real(w) if dtypes.is_complex(dtype) else w
    partial_range = subset_by_index is not None and tuple(subset_by_index) != (0, big)
    if sort_eigenvalues or partial_range:
        order = _argsort(w)
        if partial_range:
            order = _slicing.slice_in_dim(order, *subset_by_index)
        w, vecs = take(w, order, 0), take(vecs, order, 1)
    return vecs, w



# --- the TPU lowering -----------------------------------------------------------------------
def _hermitian_from_triangle(x, lower: bool):
    """The Hermitian matrix whose ``lower`` (or upper) triangle is ``x``'s: the other
    triangle mirrored (and conjugated), the diagonal's imaginary part dropped."""
    n = get_aval(x).shape[0]
    keep = triangle_mask((n, n), lower)
    if not dtypes.is_complex(get_aval(x).dtype):
        return _cmp.select(keep, x, swap_last(x))
    re = _arith.real(x)
    re = _cmp.select(keep, re, swap_last(re))
    im = _arith.imag(x)
    strict = triangle_mask((n, n), lower, -1 if lower else 1)
    im = _cmp.select(strict, im, _shapes.full((n, n), 0, get_aval(im).dtype))
    im = _cmp.select(keep, im, _arith.neg(swap_last(im)))
    return _arith.complex(re, im)


def _per_matrix(fn, x, nbatch: int):
    """``fn`` on each matrix of ``x``, one after another (a ``map`` per batch dimension)."""
    if nbatch == 0:
        return fn(x)
    return scan_map(lambda m: _per_matrix(fn, m, nbatch - 1), x)


def eigh_qdwh(x, *, lower: bool = True, sort_eigenvalues: bool = True, subset_by_index=None,
              termination_size: int = TERMINATION_SIZE, leaf=None):
    """``(v, w)`` of each matrix of ``x``, of which only the ``lower`` (or upper) triangle is
    read, one matrix after another: by ``eigh_divide_and_conquer`` (``termination_size``
    and ``leaf`` as there), or for matrices no larger than ``termination_size`` (here only
    asked for some eigenpairs) by the sorted Jacobi call."""
    n = get_aval(x).shape[-1]

    def one(matrix):
        h = _hermitian_from_triangle(matrix, lower)
        if n <= termination_size:
            v, w = jacobi_eigh(h, lower=True, sort_eigenvalues=True)
            if subset_by_index is not None:
                v, w = take_columns(v, *subset_by_index), take_columns(w, *subset_by_index)
            return v, w
        return eigh_divide_and_conquer(h, sort_eigenvalues=sort_eigenvalues,
                                       subset_by_index=subset_by_index,
                                       termination_size=termination_size, leaf=leaf)

    return _per_matrix(one, x, get_aval(x).ndim - 2)


def _eigh_tpu(x, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    if algorithm == EighImplementation.QR:
        raise NotImplementedError("QR algorithm is not supported on TPU; use "
                                  "implementation=None (QDWH) or EighImplementation.JACOBI.")
    n = get_aval(x).shape[-1]
    if algorithm == EighImplementation.JACOBI or (n <= TERMINATION_SIZE
                                                  and subset_by_index is None):
        v, w = jacobi_eigh(x, lower=lower,
                           sort_eigenvalues=sort_eigenvalues or subset_by_index is not None)
        if subset_by_index is not None:
            v, w = take_columns(v, *subset_by_index), take_columns(w, *subset_by_index)
        return [v, w]
    return list(eigh_qdwh(x, lower=lower, sort_eigenvalues=sort_eigenvalues,
                          subset_by_index=subset_by_index))


register_lowering(eigh_p, lower_fun(_eigh_tpu, multiple_results=True), platform="tpu")
