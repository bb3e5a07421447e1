"""What the scipy.special modules share: the dtype of a value, and the checked promotion of
the arguments of a function defined for real inputs only."""
from __future__ import annotations

import numpy as np

from plax import numpy as jnp
from plax.core import dtypes
from plax.core.trace import get_aval
from plax.numpy.util import promote_args_inexact


def dtype_of(x) -> np.dtype:
    return get_aval(x).dtype


def real_args(name: str, *args, broadcast: bool = True) -> list:
    """``args`` promoted to one inexact dtype (and broadcast together unless ``broadcast`` is
    False); complex input is refused, naming ``name``, as JAX's functions do."""
    args = promote_args_inexact(name, *args)
    if any(dtypes.issubdtype(dtype_of(a), np.complexfloating) for a in args):
        raise ValueError(f"{name} does not support complex-valued inputs.")
    return jnp.broadcast_arrays(*args) if broadcast and len(args) > 1 else list(args)
