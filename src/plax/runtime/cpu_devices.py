"""How many CPU devices the CPU client starts with, and what said so."""
from __future__ import annotations

import os

from plax.core.config import config


def cpu_device_count() -> tuple[int, str]:
    """How many CPU devices the client gets, and what said so. First ``jax_num_cpu_devices``
    when the program set it (``config.update`` or JAX's ``JAX_NUM_CPU_DEVICES``: in JAX too
    it beats XLA_FLAGS), then ``--xla_force_host_platform_device_count=N`` in ``XLA_FLAGS``
    (as the environment, or ``os.environ`` before the backend starts, holds it: what JAX
    programs and test suites set), then plax's ``PLAX_NUM_CPU_DEVICES``, then 1."""
    source = config.source("num_cpu_devices")
    if source not in ("update", "JAX_NUM_CPU_DEVICES"):
        forced = _xla_flags_device_count(os.environ.get("XLA_FLAGS", ""))
        if forced is not None:
            return forced, "XLA_FLAGS"
        if "PLAX_NUM_CPU_DEVICES" in os.environ:
            return int(os.environ["PLAX_NUM_CPU_DEVICES"]), "PLAX_NUM_CPU_DEVICES"
    return int(config.read("num_cpu_devices")), "jax_num_cpu_devices"


def _xla_flags_device_count(text: str) -> int | None:
    """The last ``--xla_force_host_platform_device_count=N`` in ``text`` (XLA's own flag
    syntax: whitespace-separated ``--name=value``), or None."""
    count = None
    for word in text.split():
        name, _, value = word.partition("=")
        if name == "--xla_force_host_platform_device_count":
            try:
                count = int(value)
            except ValueError:
                raise ValueError(f"XLA_FLAGS: --xla_force_host_platform_device_count needs an "
                                 f"integer, got {value!r}.") from None
    return count
