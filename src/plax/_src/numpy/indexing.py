"""``jax._src.numpy.indexing``: plax.numpy's indexing (``plax.numpy.indexing``):
``rewriting_take`` (``arr[idx]``: basic indices as slices, advanced ones as one gather, as
plax chooses: the strategy ``IndexingStrategy.AUTO``) and ``Slice``."""
import enum

from plax.first_order.sharding_constraint import with_out_sharding as _with_out_sharding
from plax.numpy import indexing as _public
from plax.numpy.indexing import Slice  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _public)


class IndexingStrategy(enum.Enum):
    """How ``rewriting_take`` lowers an index; plax follows AUTO (its own choice) only."""
    AUTO = "auto"
    GATHER = "gather"
    SCATTER = "scatter"
    STATIC_SLICE = "static_slice"
    DYNAMIC_SLICE = "dynamic_slice"


def rewriting_take(arr, idx, indices_are_sorted=False, unique_indices=False, mode=None,
                   fill_value=None, out_sharding=None, strategy=IndexingStrategy.AUTO):
    """``arr[idx]`` lowered as plax chooses; any strategy but AUTO raises
    NotImplementedError (plax cannot be told to use one)."""
    if strategy != IndexingStrategy.AUTO:
        raise NotImplementedError(f"rewriting_take: plax chooses slices or a gather itself "
                                  f"(plax.numpy.indexing); strategy {strategy} is not "
                                  "supported, only IndexingStrategy.AUTO")

    def take(a):
        return _public.rewriting_take(a, idx, mode=mode, fill_value=fill_value,
                                      indices_are_sorted=indices_are_sorted,
                                      unique_indices=unique_indices)
    return take(arr) if out_sharding is None else _with_out_sharding(take, out_sharding, arr)
