"""``plax.experimental.compute_on``: say where XLA should run the ops of a block.

``with compute_on("device_host"):`` (also a decorator) marks every op staged inside with
the frontend attribute ``_xla_compute_type`` (``host``; ``dense`` for ``"device"``,
``sparseoffload`` for ``"tpu_sparsecore"``), or, for ``"gpu_stream:N"``, with
``_xla_stream_annotation = N`` and ``inlineable = false``. XLA's host-offloading passes
read them on accelerators; on CPU every op already runs on the host and the marks change
nothing. The innermost block wins. A jitted function called inside is traced again with
the marks (they are part of jit's trace key).

``compute_on2`` (JAX's newer form) wraps a function: its ops marked so, its results placed
in the given memory spaces. plax's arrays live in device memory only, so results may be
placed in ``memory.Space.Device``; other spaces are refused.
"""
from __future__ import annotations

import contextlib
import functools
import json

from plax.core.source_info import staged_frontend_attributes
from plax.core.memory import MemorySpace
from plax.tree_util import broadcast_prefix

__all__ = ["compute_on", "compute_on2"]

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


def compute_on2(f=None, *, compute_type: str, out_memory_spaces, compiler_options=None):
    """``f`` with its ops run on ``compute_type`` (as in ``compute_on``) and its results placed
    in ``out_memory_spaces`` (a ``memory.Space``, or a tree prefix of the results). A
    decorator too: ``@compute_on2(compute_type=..., out_memory_spaces=...)``.
    ``compiler_options``: a JSON-serialisable dict for XLA's compiler of that compute type."""
    if f is None:
        return functools.partial(compute_on2, compute_type=compute_type,
                                 out_memory_spaces=out_memory_spaces,
                                 compiler_options=compiler_options)
    if not isinstance(compute_type, str):
        raise TypeError("`compute_on2`'s compute_type argument must be a string.")
    _attributes(compute_type)
    if compiler_options is not None:
        try:
            json.dumps(compiler_options)
        except TypeError as e:
            raise TypeError(f"compute_on2: compiler_options must be JSON-serialisable: {e}")

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        with compute_on(compute_type):
            out = f(*args, **kwargs)
        spaces = broadcast_prefix(out_memory_spaces, out, name="compute_on out_memory_spaces",
                                  which="the function's results")
        for space in spaces:
            if not isinstance(space, MemorySpace):
                raise TypeError(f"compute_on2: out_memory_spaces holds {space!r}; expected "
                                "memory.Space values")
            if space is not MemorySpace.Device:
                raise NotImplementedError(
                    f"compute_on2: results in {space} are not supported: plax's arrays live "
                    "in device memory only (use memory.Space.Device).")
        return out
    return wrapped
