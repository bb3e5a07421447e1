"""``plax.extend.backend``: the XLA clients plax runs on (JAX's ``jax.extend.backend``)."""
from plax.api.jit import clear_backends  # noqa: F401
from plax.runtime.xla import backends  # noqa: F401
from plax.runtime import xla as _xla

__all__ = ["backends", "get_backend", "clear_backends", "get_default_device",
           "backend_xla_version"]


def get_backend(platform=None):
    """The jaxlib client of ``platform`` (a name, or a client, returned as it is), or the
    default one."""
    if platform is not None and not isinstance(platform, str):
        return platform
    return _xla.get_backend(platform)


def get_default_device():
    """The device computations go to when none is named (``jax_default_device`` or the
    default backend's first device)."""
    from plax.api.devices import devices
    from plax.core.config import config
    chosen = config.read("default_device")
    if chosen is not None and not isinstance(chosen, str):
        return chosen
    return devices(chosen)[0]


def backend_xla_version(platform=None):
    """The XLA version number of ``platform``'s client (None where jaxlib gives none)."""
    return getattr(get_backend(platform), "xla_version", None)
