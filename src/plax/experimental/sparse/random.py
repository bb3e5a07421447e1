"""``random_bcoo``: random BCOO arrays (random positions, random stored values)."""
from __future__ import annotations

import math
import operator

import numpy as np

from plax import numpy as jnp
from plax import random
from plax.api.vmap import vmap
from plax.core import dtypes
from plax.experimental.sparse.bcoo import BCOO
from plax.runtime.array import Array  # noqa: F401 (JAX's module exposes these names)
from plax.typing import DTypeLike  # noqa: F401

__all__ = ["random_bcoo"]


def random_bcoo(key, shape, *, dtype=None, indices_dtype=None, nse=0.2, n_batch: int = 0,
                n_dense: int = 0, unique_indices: bool = True, sorted_indices: bool = False,
                generator=random.uniform, **kwds) -> BCOO:
    """A BCOO array of ``shape`` storing ``nse`` elements per batch at random positions (a
    fraction of the sparse size when ``0 < nse < 1``), each batch's positions drawn without
    repeats when ``unique_indices``; the stored values come from ``generator(key, shape=,
    dtype=, **kwds)`` (default ``random.uniform``)."""
    shape = tuple(operator.index(s) for s in shape)
    n_batch, n_dense = operator.index(n_batch), operator.index(n_dense)
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > len(shape):
        raise ValueError(f"Invalid n_batch={n_batch}, n_dense={n_dense} for shape={shape}")
    n_sparse = len(shape) - n_batch - n_dense
    batch_shape = shape[:n_batch]
    sparse_shape = shape[n_batch:n_batch + n_sparse]
    dense_shape = shape[n_batch + n_sparse:]
    sparse_size = math.prod(sparse_shape)
    if not 0 <= nse < sparse_size:
        raise ValueError(f"got nse={nse}, expected to be between 0 and {sparse_size}")
    if 0 < nse < 1:
        nse = int(math.ceil(nse * sparse_size))
    nse = operator.index(nse)
    dtype = dtypes.default_float_dtype() if dtype is None else dtype
    indices_dtype = (dtypes.default_int_dtype() if indices_dtype is None else
                     dtypes.canonicalize_user_dtype(indices_dtype, "indices_dtype"))
    if sparse_size > np.iinfo(indices_dtype).max:
        raise ValueError(f"indices_dtype={indices_dtype} does not have enough range to "
                         f"generate sparse indices of size {sparse_size}.")

    def positions(k):
        if not sparse_shape:
            return jnp.zeros((nse, n_sparse), indices_dtype)
        flat = random.choice(k, sparse_size, shape=(nse,), replace=not unique_indices)
        return jnp.stack(jnp.unravel_index(flat.astype(indices_dtype), sparse_shape), axis=-1)

    keys = random.split(key, math.prod(batch_shape) + 1)
    data = generator(keys[0], shape=batch_shape + (nse,) + dense_shape, dtype=dtype, **kwds)
    indices = vmap(positions)(keys[1:]).reshape(batch_shape + (nse, n_sparse))
    mat = BCOO((data, indices), shape=shape)
    return mat.sort_indices() if sorted_indices else mat
