"""plax.flatten_util: a pytree of arrays as one flat vector, and the way back (as ``jax.flatten_util``)."""
from __future__ import annotations

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core.trace import get_aval


def ravel_pytree(pytree):
    """Flatten a pytree of arrays into one 1-D array; returns ``(flat, unravel)``.

    ``flat`` has the promoted dtype of the leaves; ``unravel(flat)`` rebuilds the
    pytree, casting each piece back to its leaf's dtype. Differentiable and
    traceable, so it works inside jit, grad and vmap.
    """
    import plax.numpy as jnp
    from plax import lax
    leaves, treedef = tree_util.tree_flatten(pytree)
    avals = [get_aval(x) for x in leaves]
    shapes = [a.shape for a in avals]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    leaf_dtypes = [a.dtype for a in avals]
    if not leaves:
        flat_dtype = dtypes.default_float_dtype()
        flat = jnp.zeros((0,), flat_dtype)
    else:
        flat_dtype = dtypes.result_type(*leaf_dtypes)
    uniform = len(set(leaf_dtypes)) <= 1
    if leaves:
        # Leaves of one dtype are not converted, so a lone weak scalar stays weak (as JAX).
        flat = jnp.concatenate([jnp.ravel(x if uniform else lax.convert_element_type(x, flat_dtype))
                                for x in leaves])
    total = sum(sizes)
    offsets = np.cumsum([0] + sizes)

    def unravel(arr):
        arr_aval = get_aval(arr)
        if not uniform and arr_aval.dtype != flat_dtype:
            raise TypeError(f"unravel function given array of dtype {arr_aval.dtype}, but "
                            f"expected dtype {flat_dtype}: the pytree's leaves have several "
                            "dtypes, so the flat vector must keep the promoted one.")
        if arr_aval.size != total:
            raise ValueError(f"The unravel function expected an array of shape ({total},), got "
                             f"shape {arr_aval.shape}: pass a vector like the one ravel_pytree "
                             "returned.")
        arr = jnp.ravel(arr)
        pieces = []
        for start, stop, shape, dt in zip(offsets[:-1], offsets[1:], shapes, leaf_dtypes):
            piece = jnp.reshape(arr[int(start):int(stop)], shape)
            pieces.append(piece if uniform else lax.convert_element_type(piece, dt))
        return tree_util.tree_unflatten(treedef, pieces)

    return flat, unravel


__all__ = ["ravel_pytree"]
