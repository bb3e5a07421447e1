"""plax.experimental.profiler: reading profiles back for XLA's profile-guided optimisation
(JAX's ``jax.experimental.profiler``)."""
from __future__ import annotations

import os

from plax.runtime import xla

__all__ = ["get_profiled_instructions_proto"]


def get_profiled_instructions_proto(tensorboard_dir) -> bytes:
    """The serialised ProfiledInstructionsProto (per-instruction costs XLA's latency-hiding
    scheduler reads) of the trace in ``tensorboard_dir`` (a ``<log_dir>/plugins/profile/<run>``
    folder written by ``plax.profiler.trace``). Only GPU traces time XLA's instructions: on
    CPU the proto is empty."""
    return xla.profiled_instructions_proto(os.fspath(tensorboard_dir))
