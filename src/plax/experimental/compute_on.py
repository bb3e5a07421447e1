"""``plax.experimental.compute_on``: say where XLA should run the ops of a block.

``with compute_on("device_host"):`` (also a decorator) marks every op staged inside with
the frontend attribute ``_xla_compute_type`` (``host``; ``dense`` for ``"device"``,
``sparseoffload`` for ``"tpu_sparsecore"``), or, for ``"gpu_stream:N"``, with
``_xla_stream_annotation = N`` and ``inlineable = false``. XLA's host-offloading passes
read them on accelerators; on CPU every op already runs on the host and the marks change
nothing. The innermost block wins. A jitted function called inside is traced again with
the marks (they are part of jit's trace key).

``compute_on2`` (JAX's newer form, placing a function's results in given memory spaces) is
absent: plax's arrays have no memory spaces besides the device's.
"""
from __future__ import annotations

import contextlib

from plax.core.source_info import staged_frontend_attributes

__all__ = ["compute_on"]

_COMPUTE_TYPES = {"device_host": "host", "device": "dense", "tpu_sparsecore": "sparseoffload"}


def _attributes(compute_type: str) -> dict:
    if compute_type.startswith("gpu_stream:"):
        return {"_xla_stream_annotation": compute_type.split(":", 1)[1],
                "inlineable": "false"}
    if compute_type not in _COMPUTE_TYPES:
        raise ValueError(f"Invalid compute type {compute_type}. Current supported values "
                         "are `device_host`, `device`, `tpu_sparsecore`, and `gpu_stream:#`.")
    return {"_xla_compute_type": _COMPUTE_TYPES[compute_type]}


@contextlib.contextmanager
def compute_on(compute_type: str):
    """Run the ops staged inside on ``compute_type``: ``"device_host"``, ``"device"``,
    ``"tpu_sparsecore"`` or ``"gpu_stream:N"`` (a context manager or decorator)."""
    if not isinstance(compute_type, str):
        raise TypeError("`compute_on`'s compute_type argument must be a string.")
    attributes = _attributes(compute_type)
    # The innermost block replaces the marks of an enclosing one.
    with staged_frontend_attributes("compute_on_context_manager", compute_type, attributes,
                                    replace=("_xla_compute_type", "_xla_stream_annotation",
                                             "inlineable")):
        yield
