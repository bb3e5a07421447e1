"""``plax.interpreters.pxla``: as ``jax.interpreters.pxla``, whose one public name builds
the options XLA compiles a (possibly SPMD) program with."""
from __future__ import annotations

import numpy as np

from plax.runtime import xla as _xla

__all__ = ["create_compile_options"]


def create_compile_options(computation, tuple_args, allow_prop_to_inputs,
                           allow_prop_to_outputs, backend, np_dev, compiler_options):
    """jaxlib's ``CompileOptions`` for running ``computation`` on the devices of the array
    ``np_dev``, of shape (replicas, partitions) or (partitions,): several partitions make
    it an SPMD program, partitioned by XLA from the module's Shardy shardings.
    ``compiler_options`` are XLA options by name (or None)."""
    del computation, tuple_args, allow_prop_to_inputs, allow_prop_to_outputs, backend
    grid = np.asarray(np_dev, dtype=object)
    if grid.ndim == 1:
        grid = grid.reshape(1, -1)
    if grid.ndim != 2:
        raise ValueError(f"create_compile_options: np_dev must be a 1-D or 2-D array of "
                         f"devices, got shape {grid.shape}")
    replicas, partitions = grid.shape
    options = None if not compiler_options else [
        (k, v if isinstance(v, (bool, int, float)) else str(v))
        for k, v in dict(compiler_options).items()]
    return _xla.compile_options(replicas, partitions, list(grid.reshape(-1)),
                                spmd=partitions > 1, options=options)
