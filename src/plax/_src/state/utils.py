"""``jax._src.state.utils``: ``bitcast`` of a value as a TPU reference is bitcast (elements of
another width packed along the second-minor axis)."""
from plax.core import dtypes
from plax.core.trace import get_aval
from plax.pallas.tpu_ops import packing_bitcast

__all__ = ["bitcast"]


def bitcast(x, dtype):
    """``x``'s bits as ``dtype``; a change of width scales the second-minor dimension."""
    dtype = dtypes.dtype(dtype)
    aval = get_aval(x)
    src, dst = dtypes.itemsize_bits(aval.dtype), dtypes.itemsize_bits(dtype)
    if src != dst:
        if len(aval.shape) < 2:
            raise NotImplementedError("Bitcast 1D ref with bitwidth change is not supported.")
        if aval.shape[-2] * src % dst:
            raise ValueError("Expected input and output shapes are the same after "
                             "multiplying the second-minor dimension by the bitwidths.")
    return packing_bitcast(x, ty=dtype)
