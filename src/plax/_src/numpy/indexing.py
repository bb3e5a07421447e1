"""``jax._src.numpy.indexing``: plax.numpy's indexing (``plax.numpy.indexing``):
``rewriting_take`` (``arr[idx]`` with a chosen ``IndexingStrategy``) and ``Slice``."""
import enum

import numpy as np

from plax.first_order.indexing import GatherScatterMode
from plax.first_order.sharding_constraint import with_out_sharding as _with_out_sharding
from plax.numpy import indexing as _public
from plax.numpy.indexing import Slice

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _public)


class IndexingStrategy(enum.Enum):
    """How ``rewriting_take`` lowers an index: AUTO (slices where the index allows, else a
    gather), GATHER, STATIC_SLICE or DYNAMIC_SLICE (only indices those can express)."""
    AUTO = "auto"
    GATHER = "gather"
    SCATTER = "scatter"
    STATIC_SLICE = "static_slice"
    DYNAMIC_SLICE = "dynamic_slice"


def _check_slicing(strategy, idx, mode) -> None:
    """The errors JAX raises for an index (or mode) a slice strategy cannot express."""
    name = strategy.value
    if mode is not None and GatherScatterMode.from_any(mode) not in (
            GatherScatterMode.PROMISE_IN_BOUNDS, GatherScatterMode.CLIP):
        raise ValueError(f"{name} requires mode='promise_in_bounds' or mode='clip'")
    static = strategy is IndexingStrategy.STATIC_SLICE
    for position, i in enumerate(idx if isinstance(idx, tuple) else (idx,)):
        if i is None or i is Ellipsis or (isinstance(i, (int, np.integer))
                                          and not isinstance(i, (bool, np.bool_))):
            continue
        if isinstance(i, (slice, Slice)):
            step = i.step if isinstance(i, slice) else i.stride
            if static and isinstance(i, Slice):
                raise TypeError(f"{name}: indices must be static scalars or slices. Got index "
                                f"of type {type(i)} at position {position}")
            if not static and step not in (None, 1, -1):
                raise TypeError(f"{name}: only unit steps supported in slice. Got {i} at "
                                f"position {position}")
            continue
        scalar = (np.ndim(i) == 0 and not isinstance(i, (list, tuple))
                  and np.issubdtype(np.result_type(i), np.integer))
        if static or not scalar:
            kind = "static scalars or slices" if static else "scalars or slices"
            raise TypeError(f"{name}: indices must be {kind}. Got index of type {type(i)} at "
                            f"position {position}")


def rewriting_take(arr, idx, indices_are_sorted=False, unique_indices=False, mode=None,
                   fill_value=None, normalize_indices=True, out_sharding=None,
                   strategy=IndexingStrategy.AUTO):
    """``arr[idx]``: with ``normalize_indices=False`` negative indices do not wrap (they are
    out of bounds); a STATIC_SLICE or DYNAMIC_SLICE strategy refuses an index it cannot
    express (as JAX does) and then slices, GATHER always gathers."""
    if not isinstance(strategy, IndexingStrategy):
        raise TypeError(f"Expected strategy to be IndexingStrategy; got {strategy}")
    if strategy in (IndexingStrategy.STATIC_SLICE, IndexingStrategy.DYNAMIC_SLICE):
        _check_slicing(strategy, idx, mode)
        clip = mode is not None and GatherScatterMode.from_any(mode) is GatherScatterMode.CLIP
        if strategy is IndexingStrategy.STATIC_SLICE and not clip:  # in-bounds is promised
            shape = np.shape(arr)
            _public.validate_static_indices(_public._parse(idx, shape), shape,
                                            normalize_indices)
        if clip and normalize_indices:
            mode = None  # slices clamp static indices (after wrapping negative ones) anyway
    kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
              fill_value=fill_value)

    def take(a):
        if strategy is IndexingStrategy.GATHER:
            return _public.gather_take(a, idx, wrap_negative=normalize_indices, **kw)
        return _public._IndexUpdateRef(a, idx).get(wrap_negative_indices=normalize_indices,
                                                   **kw)
    return take(arr) if out_sharding is None else _with_out_sharding(take, out_sharding, arr)
