"""plax.distributed: one program over many processes (as ``jax.distributed``).

Start one process per host (``python -m plax.distributed.launch`` starts several on one
machine), call ``plax.distributed.initialize()`` first thing in each, and from then on
``plax.devices()`` lists every process's devices and a jitted SPMD program runs over all of
them. See ``plax.runtime.distributed`` for how failures are reported.
"""
from plax.runtime.distributed import PeerFailureError, initialize, is_initialized, shutdown

__all__ = ["initialize", "shutdown", "is_initialized", "PeerFailureError"]
