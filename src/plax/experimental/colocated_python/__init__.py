"""``plax.experimental.colocated_python``: Python functions and objects run on the CPU devices
that sit with the given devices (JAX's ``jax.experimental.colocated_python``).

plax runs in one process per host, and a host's CPU devices are its own, so a colocated
call runs the function right here, on the arrays it is given, and checks what it returns
(jax.Arrays on the call's devices). ``colocated_cpu_devices`` maps accelerator devices to
this host's CPU devices one to one, as JAX does.
"""
from plax.experimental.colocated_python.api import (  # noqa: F401
    colocated_cpu_devices, colocated_python, colocated_python_class)

__all__ = ["colocated_cpu_devices", "colocated_python", "colocated_python_class"]
