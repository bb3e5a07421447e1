"""Transfer guards: jaxlib's C++ transfers check its guard state (host-to-device puts,
device-to-device copies, device-to-host reads off CPU); plax's jax_transfer_guard* flags and
the array garbage-collection guard set it (jaxlib reached through runtime/xla.py)."""
from __future__ import annotations

from plax.core.config import config
from plax.runtime import xla

_guard_lib = xla.jaxlib_submodule("_jax").guard_lib
_GUARD_LEVELS = {
    "allow": _guard_lib.TransferGuardLevel.ALLOW, "log": _guard_lib.TransferGuardLevel.LOG,
    "disallow": _guard_lib.TransferGuardLevel.DISALLOW,
    "log_explicit": _guard_lib.TransferGuardLevel.LOG_EXPLICIT,
    "disallow_explicit": _guard_lib.TransferGuardLevel.DISALLOW_EXPLICIT,
}
TRANSFER_KINDS = ("host_to_device", "device_to_device", "device_to_host")


def set_transfer_guard(kind: str, level: str | None, thread_local: bool):
    """Set jaxlib's guard for ``kind`` of transfer to ``level`` (None: unset, fall back to
    the global one, then to 'allow'), for this thread or for all; returns the old setting."""
    state = _guard_lib.thread_local_state() if thread_local else _guard_lib.global_state()
    old = getattr(state, kind)
    setattr(state, kind, None if level is None else _GUARD_LEVELS[level])
    return old


def restore_transfer_guard(kind: str, old, thread_local: bool) -> None:
    """Put back what ``set_transfer_guard`` returned."""
    state = _guard_lib.thread_local_state() if thread_local else _guard_lib.global_state()
    setattr(state, kind, old)


class explicit_transfer:
    """Marks the transfers inside as explicit (``device_put``/``device_get``), which the
    '*_explicit' guard levels let through."""

    __slots__ = ("_attr", "_old")

    def __init__(self, direction: str):  # "put" or "get"
        self._attr = "explicit_device_" + direction

    def __enter__(self):
        state = _guard_lib.thread_local_state()
        self._old = getattr(state, self._attr)
        setattr(state, self._attr, True)

    def __exit__(self, *exc):
        setattr(_guard_lib.thread_local_state(), self._attr, self._old)
        return False


def _follow_transfer_guard_flags(name: str | None = None) -> None:
    # The flags' global values (config.update, or the environment at load) set jaxlib's;
    # jax_transfer_guard sets the three directions' flags, as in JAX.
    def global_value(flag):
        return config._flag(flag).global_value
    if name == "transfer_guard":
        for kind in TRANSFER_KINDS:
            config.update("transfer_guard_" + kind, global_value("transfer_guard"))
        return
    for kind in TRANSFER_KINDS:
        if name in (None, "transfer_guard_" + kind):
            level = global_value("transfer_guard_" + kind) or (
                global_value("transfer_guard") if name is None else None)
            setattr(_guard_lib.global_state(), kind,
                    None if level is None else _GUARD_LEVELS[level])
    if name in (None, "array_garbage_collection_guard"):
        set_array_gc_guard(global_value("array_garbage_collection_guard"), thread_local=False)


_GC_LEVELS = {"allow": _guard_lib.GarbageCollectionGuardLevel.ALLOW,
              "log": _guard_lib.GarbageCollectionGuardLevel.LOG,
              "fatal": _guard_lib.GarbageCollectionGuardLevel.FATAL}


def set_array_gc_guard(level: str | None, thread_local: bool):
    """What jaxlib does when an Array is freed by Python's cycle collector rather than by
    its reference count ('allow', 'log' a warning, 'fatal': abort); returns the old setting."""
    state = _guard_lib.thread_local_state() if thread_local else _guard_lib.global_state()
    old = state.garbage_collect_array
    state.garbage_collect_array = None if level is None else _GC_LEVELS[level]
    return old


def restore_array_gc_guard(old, thread_local: bool) -> None:
    state = _guard_lib.thread_local_state() if thread_local else _guard_lib.global_state()
    state.garbage_collect_array = old


_follow_transfer_guard_flags()
config._listeners.append(_follow_transfer_guard_flags)
