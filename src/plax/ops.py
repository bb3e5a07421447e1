"""plax.ops: reductions over segments (JAX's ``jax.ops``).

``segment_sum(data, segment_ids, num_segments)`` adds the rows of ``data`` whose segment id is
``s`` into row ``s`` of the result, and its siblings multiply, take the maximum or the minimum.
Each is one scatter of ``data`` into an array of the reduction's identity (0, 1, the dtype's
lowest value, its highest value), so a segment no id names holds that identity. Ids outside
``[0, num_segments)`` are dropped by default (``mode``: any ``lax.GatherScatterMode``).
``bucket_size`` scatters each run of ``bucket_size`` rows into its own partial result and
reduces those, as JAX does, for accuracy on long sums and products.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core import dtypes
from plax.core.trace import concrete_or_error
from plax.first_order.sharding_constraint import with_out_sharding
from plax.numpy.util import check_arraylike

__all__ = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


def _lowest(dtype):
    if dtype == np.bool_:
        return False
    return dtypes.iinfo(dtype).min if dtypes.issubdtype(dtype, np.integer) else -np.inf


def _highest(dtype):
    if dtype == np.bool_:
        return True
    return dtypes.iinfo(dtype).max if dtypes.issubdtype(dtype, np.integer) else np.inf


# name -> (scatter, the identity for a dtype, the reduction over buckets)
_KINDS = {
    "segment_sum": (lax.scatter_add, lambda dtype: 0, lax.reduce_sum),
    "segment_prod": (lax.scatter_mul, lambda dtype: 1, lax.reduce_prod),
    "segment_max": (lax.scatter_max, _lowest, lax.reduce_max),
    "segment_min": (lax.scatter_min, _highest, lax.reduce_min),
}


def _num_segments(name: str, num_segments, segment_ids) -> int:
    """The output's length: ``num_segments``, or ``max(segment_ids) + 1`` when it is None
    (which needs concrete ids)."""
    context = (f"{name}() `num_segments` argument: it sets the output's shape, so it must be "
               "a concrete Python int.")
    if num_segments is None:
        ids = np.asarray(concrete_or_error(None, segment_ids, context + (
            f" With num_segments=None it is max(segment_ids) + 1, which is unknown while "
            f"segment_ids is traced: pass num_segments to {name} (static under jit, e.g. "
            "static_argnums).")))
        if ids.size == 0:
            raise ValueError(f"{name}: num_segments=None sizes the output as max(segment_ids) "
                             "+ 1, but segment_ids is empty; pass num_segments.")
        num = int(ids.max()) + 1
    else:
        num = concrete_or_error(operator.index, num_segments, context)
    if num < 0:
        raise ValueError(f"{name}: num_segments must be non-negative, got {num}.")
    return num


def _segment_reduce(name, data, segment_ids, num_segments, indices_are_sorted, unique_indices,
                    bucket_size, mode, out_sharding):
    check_arraylike(name, data, segment_ids)
    data, segment_ids = jnp.asarray(data), jnp.asarray(segment_ids)
    if not dtypes.issubdtype(segment_ids.dtype, np.integer):
        raise TypeError(f"{name}: segment_ids must have an integer dtype, got "
                        f"{segment_ids.dtype}.")
    scatter, identity, reducer = _KINDS[name]
    if data.dtype == np.bool_ and name in ("segment_sum", "segment_prod"):
        op = "add" if name == "segment_sum" else "mul"
        raise TypeError(f"{name}: scatter {op} does not accept dtype bool; convert data to a "
                        "number type first (data.astype(int)).")
    num = _num_segments(name, num_segments, segment_ids)
    if bucket_size is not None:
        bucket_size = operator.index(bucket_size)
        if bucket_size <= 0 or segment_ids.ndim == 0:
            raise ValueError(f"{name}: bucket_size must be a positive int and segment_ids have "
                             f"at least one dimension, got bucket_size={bucket_size} and "
                             f"segment_ids of shape {segment_ids.shape}.")
    mode = lax.GatherScatterMode.from_any(mode)
    tail = data.shape[1:]
    updates_shape = segment_ids.shape + tail
    try:
        np.broadcast_shapes(data.shape, updates_shape)
    except ValueError:
        raise ValueError(f"{name}: data of shape {data.shape} does not broadcast to "
                         f"segment_ids.shape + data.shape[1:] = {updates_shape}: segment_ids "
                         "names the segment of each leading index of data.") from None

    def compute(data, ids):
        updates = jnp.broadcast_to(data, updates_shape)
        fill = identity(data.dtype)
        window = tuple(range(ids.ndim, len(updates_shape)))
        if bucket_size is None:
            out = lax.full((num,) + tail, fill, data.dtype)
            dnums = lax.ScatterDimensionNumbers(update_window_dims=window,
                                                inserted_window_dims=(0,),
                                                scatter_dims_to_operand_dims=(0,))
            return scatter(out, ids[..., None], updates, dnums,
                           indices_are_sorted=indices_are_sorted,
                           unique_indices=unique_indices, mode=mode)
        buckets = math.ceil(ids.shape[0] / bucket_size)
        bucket = lax.broadcasted_iota(ids.dtype, ids.shape, 0) // bucket_size
        out = lax.full((buckets, num) + tail, fill, data.dtype)
        dnums = lax.ScatterDimensionNumbers(update_window_dims=window,
                                            inserted_window_dims=(0, 1),
                                            scatter_dims_to_operand_dims=(0, 1))
        out = scatter(out, jnp.stack([bucket, ids], axis=-1), updates, dnums,
                      indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                      mode=mode)
        return reducer(out, (0,))

    if out_sharding is None:
        return compute(data, segment_ids)
    return with_out_sharding(compute, out_sharding, data, segment_ids)


def segment_sum(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The sum of the rows of ``data`` in each segment: ``out[s]`` adds every ``data[i]`` with
    ``segment_ids[i] == s`` (0 where none); shape ``(num_segments,) + data.shape[1:]``."""
    return _segment_reduce("segment_sum", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)


def segment_prod(data, segment_ids, num_segments=None, indices_are_sorted=False,
                 unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The product of the rows of ``data`` in each segment (1 where none)."""
    return _segment_reduce("segment_prod", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)


def segment_max(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The maximum of the rows of ``data`` in each segment (-inf, or the dtype's minimum,
    where none)."""
    return _segment_reduce("segment_max", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)


def segment_min(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The minimum of the rows of ``data`` in each segment (+inf, or the dtype's maximum,
    where none)."""
    return _segment_reduce("segment_min", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)
