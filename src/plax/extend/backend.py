"""``plax.extend.backend``: the XLA clients plax runs on (JAX's ``jax.extend.backend``)."""
from plax.api.jit import clear_backends, clear_caches as _clear_caches  # noqa: F401
from plax.core.caches import register_cache as _register_cache
from plax.runtime.xla import backends  # noqa: F401
from plax.runtime import xla as _xla

__all__ = ["backends", "get_backend", "clear_backends", "get_default_device",
           "backend_xla_version", "clear_in_memory_compilation_cache", "get_compile_options",
           "ifrt_proxy", "register_backend_cache", "register_backend_factory"]

# jaxlib's IFRT proxy client module: ``ifrt_proxy.get_client(address, options)`` makes a
# client of a remote IFRT proxy server (register it with ``register_backend_factory``).
ifrt_proxy = _xla.ifrt_proxy_module()


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


def clear_in_memory_compilation_cache() -> None:
    """Drop the executables compiled in this process (and the traces they came from); the
    persistent cache on disk is kept. Functions compile (or load from disk) anew."""
    _clear_caches()


def get_compile_options(num_replicas: int, num_partitions: int, device_assignment=None,
                        env_options_overrides=None, fdo_profile=None,
                        detailed_logging: bool = True, backend=None):
    """jaxlib's ``CompileOptions`` for a program of ``num_replicas`` x ``num_partitions``:
    ``device_assignment`` an array of devices of that shape (replica-major), or None;
    ``env_options_overrides`` XLA options by name."""
    del detailed_logging, backend
    if fdo_profile is not None:
        raise NotImplementedError("get_compile_options: plax passes no FDO profile to XLA "
                                  "(fdo_profile must be None)")
    devices = None
    if device_assignment is not None:
        import numpy as np
        grid = np.asarray(device_assignment, dtype=object)
        if grid.size != num_replicas * num_partitions:
            raise ValueError(f"get_compile_options: device_assignment has {grid.size} "
                             f"devices for num_replicas={num_replicas} x "
                             f"num_partitions={num_partitions}")
        devices = list(grid.reshape(-1))
    options = None if not env_options_overrides else [
        (k, v if isinstance(v, (bool, int, float)) else str(v))
        for k, v in dict(env_options_overrides).items()]
    return _xla.compile_options(num_replicas, num_partitions, devices, options=options)


class _BackendCache:
    """A functools-style cache (``cache_clear()``) as plax's registry clears it."""

    def __init__(self, cache, for_what: str):
        self.cache, self.for_what = cache, for_what

    def clear(self) -> None:
        self.cache.cache_clear()


def register_backend_cache(cache, for_what: str) -> None:
    """Clear ``cache`` (anything with ``cache_clear()``, like a ``functools.lru_cache``)
    whenever plax clears its caches (``clear_caches``, ``clear_backends``)."""
    if not callable(getattr(cache, "cache_clear", None)):
        raise TypeError(f"register_backend_cache: the cache for {for_what!r} must have a "
                        f"cache_clear() method, got {type(cache).__name__}")
    _register_cache(_BackendCache(cache, for_what))


def register_backend_factory(name: str, factory, *, priority: int = 0,
                             fail_quietly: bool = True, experimental: bool = False,
                             make_topology=None, c_api=None) -> None:
    """Make ``factory()`` (a jaxlib client) how platform ``name`` starts. It applies when
    the backends next start (after ``clear_backends``, or before first use)."""
    del priority, fail_quietly, experimental, make_topology, c_api
    _xla.register_backend_factory(name, factory)
