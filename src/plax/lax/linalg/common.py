"""What the linear-algebra primitives share: input checks, the batching rule (every
primitive is batched over leading dimensions natively), and small matrix helpers."""
from __future__ import annotations

import operator

import numpy as np

from plax.core import dtypes
from plax.core.rules import batch_rules, not_mapped
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import bitwise as _bitwise
from plax.first_order import comparison as _cmp
from plax.first_order.dot import Precision, dot_general
from plax.first_order.indexing import GatherDimensionNumbers, gather
from plax.first_order import reductions as _reductions
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.shapes import broadcasted_iota
from plax.first_order.batch_util import batch_size_of, bdim_at_front, move_batch_dim
from plax.first_order.conversion import convert_element_type
from plax.first_order.transcendental import sqrt
from plax.transforms.vmap import AxisData, batch_flat

_KERNEL_DTYPES = (np.float32, np.float64, np.complex64, np.complex128)


def check_matrix(name: str, aval, *, square: bool = False, arg: str = "x") -> None:
    """Refuse an operand that is not a (batch of) float/complex matrices."""
    if aval.ndim < 2:
        raise ValueError(f"{name}: argument {arg} must have rank >= 2 (a matrix or a batch of "
                         f"matrices), got shape {aval.shape}.")
    if square and aval.shape[-1] != aval.shape[-2]:
        raise ValueError(f"{name}: argument {arg} must be a (batch of) square matrices, got "
                         f"shape {aval.shape}; its last two dimensions must be equal.")
    if np.dtype(aval.dtype) not in map(np.dtype, _KERNEL_DTYPES):
        raise TypeError(f"{name}: argument {arg} must have a floating-point or complex dtype "
                        f"(float32, float64, complex64, complex128), got {aval.dtype}; convert "
                        "it first, e.g. x.astype(jnp.float32).")


def batched_on_front(prim, n_batched_operands: int | None = None):
    """A batching rule for a primitive whose operands share leading batch dimensions: the
    batch dimension moves to the front of every operand (unbatched ones get it broadcast);
    every result is batched at 0. Trailing operands beyond ``n_batched_operands`` stay as
    they are (they have no batch dimensions)."""
    def rule(axis, vals, dims, **params):
        size = batch_size_of(vals, dims)
        k = len(vals) if n_batched_operands is None else n_batched_operands
        args = [bdim_at_front(v, d, size) if i < k else v
                for i, (v, d) in enumerate(zip(vals, dims))]
        out = prim.bind(*args, **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)
    batch_rules[prim] = rule
    return rule


def unbatched(vals, dims) -> bool:
    return all(d is not_mapped for d in dims)


def swap_last(x):
    """``x`` with its last two dimensions swapped."""
    n = get_aval(x).ndim
    return _shapes.transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def conj_if_complex(x):
    return _arith.conj(x) if dtypes.is_complex(get_aval(x).dtype) else x


def adjoint(x):
    """The conjugate transpose of each matrix of ``x``."""
    return conj_if_complex(swap_last(x))


def matmul(a, b):
    """Batched ``a @ b`` over equal leading batch dimensions."""
    n = get_aval(a).ndim
    batch = tuple(range(n - 2))
    return dot_general(a, b, (((n - 1,), (n - 2,)), (batch, batch)),
                       precision=Precision.HIGHEST)


def triangle_mask(shape, lower: bool, k: int = 0):
    """Booleans of ``shape`` (matrices last) that are True on and below diagonal ``k`` when
    ``lower`` (col - row <= k), on and above it otherwise (col - row >= k)."""
    n = len(shape)
    rows = broadcasted_iota(np.int32, shape, n - 2)
    cols = broadcasted_iota(np.int32, shape, n - 1)
    diff = _arith.sub(cols, rows)
    kk = np.int32(k)
    return _cmp.le(diff, kk) if lower else _cmp.ge(diff, kk)


def triangle(x, lower: bool, k: int = 0):
    """The lower (or upper) triangle of each matrix of ``x`` from diagonal ``k``, zeros
    elsewhere."""
    aval = get_aval(x)
    zeros = _shapes.full(aval.shape, 0, aval.dtype)
    return _cmp.select_n(triangle_mask(aval.shape, lower, k), zeros, x)


def _eye_mask(shape):
    n = len(shape)
    return _cmp.eq(broadcasted_iota(np.int32, shape, n - 2),
                   broadcasted_iota(np.int32, shape, n - 1))


def eye_like(aval):
    """Identity matrices of ``aval``'s shape and dtype."""
    return convert_element_type(_eye_mask(aval.shape), aval.dtype)


def symmetrize(x):
    """(x + xᴴ) / 2: the Hermitian part each factorisation assumes."""
    two = np.array(2, get_aval(x).dtype)
    return _arith.div(_arith.add(x, adjoint(x)), two)


def check_square(name: str, aval, phrase: str) -> None:
    """Refuse anything but a (batch of) square float/complex matrices; ``phrase`` opens the
    message for a non-square operand."""
    check_matrix(name, aval)
    if aval.shape[-1] != aval.shape[-2]:
        raise ValueError(f"{phrase}, got shape {aval.shape}. {name} needs a (batch of) square "
                         "matrices: its last two dimensions must be equal.")


def subset_bounds(name: str, subset, size: int):
    """``subset_by_index`` as a (start, end) pair of ints with 0 <= start <= end <= size."""
    try:
        start, end = (operator.index(i) for i in subset)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: subset_by_index must be None or a pair (start, end) of "
                        f"integers, got {subset!r}.") from None
    if not 0 <= start <= end <= size:
        raise ValueError(f"{name}: subset_by_index={subset!r} must satisfy 0 <= start <= end <= "
                         f"{size} for matrices of that size.")
    return start, end


def diagonal(x):
    """The diagonals of the (batched, square) matrices ``x`` (what lies off the diagonal,
    even inf or NaN, does not touch them)."""
    aval = get_aval(x)
    zeros = _shapes.full(aval.shape, 0, aval.dtype)
    return _reductions.reduce_sum(_cmp.select(_eye_mask(aval.shape), x, zeros), (aval.ndim - 1,))


def diagonal_matrix(v):
    """The (batched) square matrices with the vectors ``v`` on their diagonals."""
    aval = get_aval(v)
    shape = aval.shape + aval.shape[-1:]
    return _cmp.select(_eye_mask(shape), spread(v, -1), _shapes.full(shape, 0, aval.dtype))


def spread(w, axis: int):
    """Vectors ``w`` (..., n) broadcast to matrices (..., n, n) varying along ``axis`` (-1:
    the column index, -2: the row index)."""
    aval = get_aval(w)
    nb = aval.ndim - 1
    shape = aval.shape + aval.shape[-1:]
    return _shapes.broadcast_in_dim(w, shape, tuple(range(nb)) + (nb + (1 if axis == -1 else 0),))


def take_columns(x, start: int, end: int):
    aval = get_aval(x)
    return _slicing.slice_in_dim(x, start, end, axis=aval.ndim - 1)


def take_along(x, index, axis: int):
    """``x`` indexed along ``axis`` by ``index`` (integers in range, shaped like ``x``):
    ``out[..., i, ...] = x[..., index[..., i, ...], ...]``, one gather."""
    aval = get_aval(x)
    index = _shapes.broadcast_in_dim(index, aval.shape + (1,), tuple(range(aval.ndim)))
    batch = tuple(d for d in range(aval.ndim) if d != axis)
    dn = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,),
                                start_index_map=(axis,), operand_batching_dims=batch,
                                start_indices_batching_dims=batch)
    return gather(x, index, dn, (1,) * aval.ndim)


def take(x, index, axis: int):
    """``x`` indexed along ``axis`` by the vector ``index`` (integers in range), one gather:
    ``x[index]`` of a vector, ``x[:, index]`` of a matrix (axis 1)."""
    shape = get_aval(x).shape
    dn = GatherDimensionNumbers(offset_dims=tuple(d for d in range(len(shape)) if d != axis),
                                collapsed_slice_dims=(axis,), start_index_map=(axis,))
    window = tuple(1 if d == axis else s for d, s in enumerate(shape))
    return gather(x, _shapes.expand_dims(index, (1,)), dn, window)


def permute_rows(x, perm):
    """``x[..., perm, :]`` for each matrix of ``x`` (``perm`` batched like ``x``)."""
    nb = get_aval(x).ndim - 2
    index = _shapes.broadcast_in_dim(perm, get_aval(x).shape, tuple(range(nb + 1)))
    return take_along(x, index, axis=nb)


def within(x, sizes, fill=None):
    """``x`` where every index is below its dimension's entry of ``sizes`` (an int, a traced
    int, or None for the whole dimension), ``fill`` (default zeros) elsewhere: the padding
    of an array whose true shape is ``sizes``."""
    shape = get_aval(x).shape
    keep = None
    for axis, size in enumerate(sizes):
        if size is not None:
            inside = _cmp.lt(broadcasted_iota(np.int32, shape, axis), size)
            keep = inside if keep is None else _bitwise.bitwise_and(keep, inside)
    if keep is None:
        return x
    if fill is None:
        fill = _shapes.full(shape, 0, get_aval(x).dtype)
    elif not get_aval(fill).shape:
        fill = _shapes.broadcast_in_dim(fill, shape, ())
    return _cmp.select(keep, x, fill)


def over_batch(fn, nbatch: int):
    """``fn`` (one matrix per operand in, a list of arrays out) vectorized over ``nbatch``
    leading batch dimensions, as nested vmaps: each output batched at the front."""
    if nbatch == 0:
        return fn
    inner = over_batch(fn, nbatch - 1)

    def run(*operands):
        size = get_aval(operands[0]).shape[0]
        outs, dims = batch_flat(lambda *xs: list(inner(*xs)), list(operands),
                                [0] * len(operands), AxisData(None, size), "linalg")
        return [move_batch_dim(o, d, 0, size) for o, d in zip(outs, dims)]
    return run


def norm2(x, axes):
    """sqrt(Σ |x|²) over ``axes``: a matrix's Frobenius norm, or vectors' 2-norms."""
    squares = _arith.mul(x, conj_if_complex(x))
    if dtypes.is_complex(get_aval(x).dtype):
        squares = _arith.real(squares)
    return sqrt(_reductions.reduce_sum(squares, tuple(axes)))
