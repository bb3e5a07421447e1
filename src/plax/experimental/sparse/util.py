"""Shared pieces of the sparse formats: the static description of a sparse array
(``SparseInfo``), BCOO layout checks, the sparse warnings and errors, and vmap helpers
that map over leading batch dimensions (broadcasting those of size 1); and the rule pieces
every format's primitives share (index buffers have no tangent, fromdense's jvp, ``nse``)."""
from __future__ import annotations

import operator
from typing import NamedTuple

from plax import numpy as jnp
from plax import lax
from plax.api.vmap import vmap
from plax.api_util import flatten_axes  # noqa: F401 (JAX's module exposes these names)
from plax.first_order.dot import DotDimensionNumbers  # noqa: F401
from plax.runtime.array import Array  # noqa: F401
from plax.core import dtypes
from plax.core.rules import Zero, is_undefined, jvp_rules, linear_primitives, tangent_aval
from plax.core.symbolic_shapes import DimExpr
from plax.core.trace import concrete_or_error, get_aval
from plax.first_order.ad_util import defjvp

__all__ = ["SparseEfficiencyError", "SparseEfficiencyWarning", "CuSparseEfficiencyWarning",
           "SparseInfo", "BCOOProperties", "validate_bcoo", "validate_bcoo_indices",
           "nfold_vmap", "broadcasting_vmap", "count_stored_elements", "fromdense_statics",
           "diagonal_length", "batch_fits", "check_indices_known", "linear_in", "fromdense_jvp"]


Shape = tuple[int, ...]


class SparseEfficiencyError(ValueError):
    """A sparse operation would store (nearly) every element explicitly."""


class SparseEfficiencyWarning(UserWarning):
    """A sparse operation stores many more elements than the result needs."""


class CuSparseEfficiencyWarning(SparseEfficiencyWarning):
    """A GPU sparse kernel was not available and a generic implementation ran instead."""


class SparseInfo(NamedTuple):
    """The static part of a sparse array: its shape and what is known of its indices."""
    shape: tuple
    indices_sorted: bool = False
    unique_indices: bool = False


class BCOOProperties(NamedTuple):
    """How a BCOO array's dimensions split, and how many elements it stores per batch."""
    n_batch: int
    n_sparse: int
    n_dense: int
    nse: int


def batch_fits(buffer_batch, batch) -> bool:
    """Whether a buffer's batch sizes fit an array's (each equal, or 1: broadcast)."""
    return len(buffer_batch) == len(batch) and all(b in (1, a) for a, b in
                                                   zip(batch, buffer_batch))


def canonical_shape(shape, what: str = "shape") -> tuple:
    """``shape`` as a tuple of non-negative Python ints (or symbolic dimensions, as
    ``eval_shape`` over a symbolic batch gives)."""
    try:
        out = tuple(s if isinstance(s, DimExpr) else operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of integers, got {shape!r}.") from None
    if any(not isinstance(s, DimExpr) and s < 0 for s in out):
        raise ValueError(f"{what} must hold non-negative sizes, got {out}.")
    return out


def validate_bcoo_indices(indices, shape) -> BCOOProperties:
    """The layout an index buffer of type ``indices`` gives an array of ``shape``."""
    shape = tuple(shape)
    if not dtypes.is_integer(indices.dtype):
        raise TypeError(f"BCOO indices must have an integer dtype, got {indices.dtype}.")
    if len(indices.shape) < 2:
        raise ValueError(f"BCOO indices must have shape batch_dims + (nse, n_sparse), got "
                         f"indices.shape={tuple(indices.shape)} for shape={shape}.")
    nse, n_sparse = indices.shape[-2:]
    n_batch = len(indices.shape) - 2
    n_dense = len(shape) - n_batch - n_sparse
    if n_dense < 0:
        raise ValueError(f"Invalid indices.shape={tuple(indices.shape)} for shape={shape}: "
                         f"{n_batch} batch and {n_sparse} sparse dimensions exceed the "
                         f"{len(shape)} dimensions of the array.")
    if any(s1 not in (1, s2) for s1, s2 in zip(indices.shape[:n_batch], shape[:n_batch])):
        raise ValueError(f"indices batch dimensions not compatible for "
                         f"indices.shape={tuple(indices.shape)}, shape={shape}")
    return BCOOProperties(n_batch, n_sparse, n_dense, nse)


def validate_bcoo(data, indices, shape) -> BCOOProperties:
    """Check that ``data`` and ``indices`` (arrays or avals) describe an array of ``shape``."""
    props = validate_bcoo_indices(indices, shape)
    n_batch, n_sparse, n_dense, nse = props
    shape = tuple(shape)
    if any(s1 not in (1, s2) for s1, s2 in zip(data.shape[:n_batch], shape[:n_batch])):
        raise ValueError(f"data batch dimensions not compatible for "
                         f"data.shape={tuple(data.shape)}, shape={shape}")
    if tuple(data.shape[n_batch:]) != (nse,) + shape[n_batch + n_sparse:]:
        raise ValueError(f"Invalid data.shape={tuple(data.shape)} for nse={nse}, "
                         f"n_batch={n_batch}, n_dense={n_dense}")
    return props


def broadcasting_vmap(fun, in_axes=0):
    """``vmap(fun)`` over axis 0 of its array arguments (None in ``in_axes`` leaves one
    unmapped), where an argument of size 1 along that axis is broadcast against the others
    rather than mapped."""
    def batched(*args):
        axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        sizes = [get_aval(x).shape[0] for x, ax in zip(args, axes) if ax is not None]
        size = max(sizes, default=1)
        if size != 1:
            if any(s not in (1, size) for s in sizes):
                raise ValueError(f"broadcasting_vmap: mapped sizes {sizes} do not broadcast.")
            pairs = [(x[0], None) if ax is not None and get_aval(x).shape[0] == 1 else (x, ax)
                     for x, ax in zip(args, axes)]
            args, axes = [x for x, _ in pairs], tuple(ax for _, ax in pairs)
        return vmap(fun, in_axes=axes)(*args)
    return batched


def nfold_vmap(fun, n: int, *, broadcasted: bool = True, in_axes=0):
    """``fun`` mapped over the ``n`` leading dimensions of its (mapped) arguments."""
    for _ in range(n):
        fun = broadcasting_vmap(fun, in_axes) if broadcasted else vmap(fun, in_axes=in_axes)
    return fun


def count_stored_elements_per_batch(mat, n_batch: int = 0, n_dense: int = 0):
    """The number of nonzero elements (nonzero blocks, with dense dimensions) of each batch
    of ``mat`` (an array of the batch shape)."""
    mask = jnp.asarray(mat) != 0
    if n_dense:
        mask = jnp.any(mask, axis=tuple(range(mask.ndim - n_dense, mask.ndim)))
    return jnp.sum(mask, axis=tuple(range(n_batch, mask.ndim)))


def count_stored_elements(mat, n_batch: int = 0, n_dense: int = 0):
    """The largest number of nonzero elements of one batch of ``mat``: the ``nse`` a BCOO
    form of it needs."""
    return jnp.max(count_stored_elements_per_batch(mat, n_batch, n_dense), initial=0)


# JAX's private names for them
_count_stored_elements = count_stored_elements
_count_stored_elements_per_batch = count_stored_elements_per_batch


TRACED_NSE_ERROR = ("The error arose for the nse argument of {name}. In order for {cls}."
                    "fromdense() to be used in traced/compiled code, you must pass a concrete "
                    "value to the nse (number of stored elements) argument.")


def fromdense_statics(mat, nse, index_dtype, name: str, cls: str, n_batch: int = 0,
                      n_dense: int = 0) -> tuple:
    """``(nse, index_dtype)`` as the fromdense primitive of ``name`` (``cls.fromdense``)
    takes them: ``nse`` a Python int, by default the largest count of nonzeros of a batch
    of ``mat`` (which must then be concrete); ``index_dtype`` an integer dtype."""
    if nse is None:
        nse = count_stored_elements(mat, n_batch, n_dense)
    nse = concrete_or_error(operator.index, nse, TRACED_NSE_ERROR.format(name=name, cls=cls))
    index_dtype = dtypes.canonicalize_user_dtype(index_dtype, "index_dtype")
    if not dtypes.is_integer(index_dtype):
        raise TypeError(f"{name}: index_dtype must be an integer dtype, got {index_dtype}.")
    return nse, index_dtype


def diagonal_length(N: int, M: int, k: int) -> int:
    """How many elements the ``k``-th diagonal of an N x M matrix has (``sparse.eye``)."""
    return min(N, M - k) if k > 0 else min(N + k, M)


# --- rule pieces the formats' primitives share ---------------------------------------------------
def check_indices_known(*index_bufs):
    """A transpose rule's check: index buffers are never the linear unknown."""
    if any(is_undefined(b) for b in index_bufs):
        raise ValueError("Cannot transpose with respect to sparse indices")


def linear_in(prim, *positions: int):
    """The jvp of a primitive linear in the operands at ``positions`` (the data, a dense
    operand) with its index buffers fixed: each such tangent bound in its operand's place.
    The primitive is marked linear: it registers a transpose rule too."""
    def tangent_at(i):
        return lambda t, ans, *args, **params: prim.bind(*args[:i], t, *args[i + 1:], **params)
    defjvp(prim, *(tangent_at(i) if i in positions else None
                   for i in range(max(positions) + 1)))
    linear_primitives.add(prim)


def fromdense_jvp(prim, extract):
    """The jvp of a fromdense primitive, ``prim(mat) -> [data, *index_bufs]``: with the
    indices fixed the data is linear in ``mat``, so its tangent is what
    ``extract(mat_dot, index_bufs, mat, **params)`` reads off the tangent at the positions
    stored; the index buffers' tangents are zero."""
    def rule(primals, tangents, **params):
        (mat,), (mat_dot,) = primals, tangents
        data, *index = prim.bind(mat, **params)
        data_dot = (Zero(tangent_aval(get_aval(data))) if type(mat_dot) is Zero
                    else extract(mat_dot, index, mat, **params))
        return [data, *index], [data_dot, *(Zero(tangent_aval(get_aval(b))) for b in index)]
    jvp_rules[prim] = rule


def index_row(values, like, dtype=None):
    """``values`` (one per sparse dimension) as an array of the rank of ``like`` (indices:
    leading dimensions of size 1), so that it combines with them under any
    ``jax_numpy_rank_promotion`` setting."""
    values = jnp.asarray(values, dtype or like.dtype)
    return lax.expand_dims(values, tuple(range(like.ndim - values.ndim)))
