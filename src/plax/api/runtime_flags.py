"""JAX's runtime flags as top-level context managers (``jax.transfer_guard``,
``jax.no_tracing``, ...).

Each but ``transfer_guard`` and ``make_user_context`` is a ``core.config.State`` over the flag
of the same name (``jax_<name>``): ``.value`` reads it for this thread, ``flag(value)`` sets it
inside a ``with`` block (or a decorated function), ``set_global`` for the process; the flag is
the same one ``config.update("jax_<name>", ...)`` sets. What each does in plax:

- transfer guards: jaxlib's own guards, which its transfer functions check: an implicit
  host-to-device transfer (a NumPy array or a new Python scalar given to a jitted function
  or an operation, ``jnp.asarray(np_array)``) or device-to-device copy is logged or refused
  (``JaxRuntimeError: ... Disallowed host-to-device transfer``); ``device_put`` and
  ``device_get`` are explicit and pass unless the level is ``*_explicit``. As in JAX on CPU,
  reading a CPU array back to NumPy is no transfer (its memory is the host's). plax puts a
  Python scalar operand on the device once per value, so a scalar seen before transfers
  nothing.
- ``no_tracing``: any tracing (a jit's first call, make_jaxpr, a control-flow body) raises
  RuntimeError; ``no_execution``: running a compiled program raises (tracing, lowering and
  compiling still work).
- ``allow_f16_reductions(False)``: ``lax.reduce_sum`` of float16/bfloat16 raises (``jnp.sum``
  accumulates them in float32 and is unaffected, as in JAX).
- ``softmax_custom_jvp``: ``nn.softmax`` differentiates through its custom_jvp rule (True) or
  through its ops with the maximum held constant (False, JAX's default); the values agree.
- ``auto_pcast(False)``: inside a ``shard_map`` checked for replication, operands of a standard
  primitive with different varying axes raise instead of being pvary'd implicitly.
- ``explain_cache_misses``: log why jitted functions retrace (see api/explain_cache_misses.py).
- ``array_garbage_collection_guard``: jaxlib's check when Python's cycle collector frees an
  Array ('allow', 'log', 'fatal').
- ``thread_guard`` and ``jax2tf_associative_scan_reductions`` are stored only: JAX's own guards
  multi-process computations launched from other threads (plax runs one process, so there is
  nothing to guard), and the other concerns jax2tf's lowering, which plax does not have.
"""
from __future__ import annotations

import contextlib

from plax.core.config import State, UserContext
from plax.runtime import transfer_guards

__all__ = [
    "transfer_guard", "transfer_guard_host_to_device", "transfer_guard_device_to_device",
    "transfer_guard_device_to_host", "make_user_context", "no_tracing", "no_execution",
    "thread_guard", "allow_f16_reductions", "array_garbage_collection_guard", "auto_pcast",
    "explain_cache_misses", "jax2tf_associative_scan_reductions", "softmax_custom_jvp",
]


def _guard_hook(kind: str):
    def set_for_this_thread(level):
        old = transfer_guards.set_transfer_guard(kind, level, thread_local=True)
        return lambda: transfer_guards.restore_transfer_guard(kind, old, thread_local=True)
    return set_for_this_thread


def _gc_guard_hook(level):
    old = transfer_guards.set_array_gc_guard(level, thread_local=True)
    return lambda: transfer_guards.restore_array_gc_guard(old, thread_local=True)


transfer_guard_host_to_device = State("transfer_guard_host_to_device",
                                      _guard_hook("host_to_device"))
transfer_guard_host_to_device.__doc__ = (
    "The transfer guard for host-to-device transfers: 'allow', 'log', 'disallow', "
    "'log_explicit' or 'disallow_explicit' (the last two also catch device_put).")
transfer_guard_device_to_device = State("transfer_guard_device_to_device",
                                        _guard_hook("device_to_device"))
transfer_guard_device_to_host = State("transfer_guard_device_to_host",
                                      _guard_hook("device_to_host"))
_transfer_guard_all = State("transfer_guard")


@contextlib.contextmanager
def transfer_guard(new_val: str):
    """Context manager: the transfer guard level for every kind of transfer in this thread:
    'allow', 'log' (implicit transfers logged), 'disallow' (implicit transfers raise),
    'log_explicit' / 'disallow_explicit' (explicit ones too)."""
    with contextlib.ExitStack() as stack:
        for state in (transfer_guard_host_to_device, transfer_guard_device_to_device,
                      transfer_guard_device_to_host, _transfer_guard_all):
            stack.enter_context(state(new_val))
        yield


def make_user_context(default_value=None) -> UserContext:
    """A value jitted functions may read (``ctx.value``) and are cached by: inside
    ``with ctx(v):`` a jitted function traces and compiles again for ``v``."""
    return UserContext(default_value)


no_tracing = State("no_tracing")
no_execution = State("no_execution")
thread_guard = State("thread_guard")
allow_f16_reductions = State("allow_f16_reductions")
array_garbage_collection_guard = State("array_garbage_collection_guard", _gc_guard_hook)
auto_pcast = State("auto_pcast")
explain_cache_misses = State("explain_cache_misses")
jax2tf_associative_scan_reductions = State("jax2tf_associative_scan_reductions")
softmax_custom_jvp = State("softmax_custom_jvp")
