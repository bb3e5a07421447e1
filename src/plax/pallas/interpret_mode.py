"""Forcing TPU interpret mode: the ``InterpretParams`` that every ``pallas_call`` traced
meanwhile runs with, whatever its own ``interpret`` says (JAX's
``set_tpu_interpret_mode`` / ``force_tpu_interpret_mode``)."""
from __future__ import annotations

import contextlib
import threading

__all__ = ["forced_interpret_params", "set_tpu_interpret_mode", "force_tpu_interpret_mode",
           "reset_tpu_interpret_mode_state"]

_global = [None]  # set_tpu_interpret_mode's params
_local = threading.local()  # force_tpu_interpret_mode's, per thread (innermost wins)


def forced_interpret_params():
    """The params a ``pallas_call`` traced now must run with (None: its own choice)."""
    local = getattr(_local, "params", None)
    return local if local is not None else _global[0]


def set_tpu_interpret_mode(params) -> None:
    """Run every ``pallas_call`` traced from now on in interpret mode with ``params`` (an
    ``InterpretParams``; None: each call's own ``interpret`` again)."""
    _global[0] = params


@contextlib.contextmanager
def force_tpu_interpret_mode(params):
    """Within: every ``pallas_call`` traced runs in interpret mode with ``params``."""
    previous = getattr(_local, "params", None)
    _local.params = params
    try:
        yield
    finally:
        _local.params = previous


def reset_tpu_interpret_mode_state() -> None:
    """JAX's TPU simulator keeps buffers and semaphores between kernels after an error,
    until this resets them; plax's interpret mode keeps no state beyond a call (each
    kernel's buffers and semaphores are values of that call), so there is nothing left to
    reset."""
