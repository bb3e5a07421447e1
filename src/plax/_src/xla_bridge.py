"""``jax._src.xla_bridge``: the XLA clients plax runs on (``plax.runtime.xla``) and the
devices they hold, as JAX's xla_bridge names them. ``_backends`` is the clients started so far
(empty until plax first needs a device)."""
from plax.api.devices import (default_backend, device_count, devices,  # noqa: F401
                              local_device_count, local_devices, process_count, process_index)
from plax.core.config import State as _State
from plax.extend.backend import (backend_xla_version, backends, get_backend,  # noqa: F401
                                 register_backend_factory)
from plax.runtime import xla as _xla
from plax.runtime.platforms import canonical as canonicalize_platform  # noqa: F401

from plax._src import _face

num_cpu_devices = _State("num_cpu_devices")
_VERSIONS = ("plax does not read the client's StableHLO or PJRT C API version (it lowers one "
             "StableHLO dialect version for every client)")
_REFUSED = {"backend_stablehlo_version": _VERSIONS, "backend_pjrt_c_api_version": _VERSIONS}

__doc__ = _face.document(__doc__, _REFUSED)


def __getattr__(name):
    if name == "_backends":
        return dict(_xla._backends)
    if name in _REFUSED:
        raise _face.not_provided(__name__, name, _REFUSED[name])
    raise AttributeError(f"module 'jax._src.xla_bridge' has no attribute {name!r}")


def using_pjrt_c_api(backend=None) -> bool:
    """Whether the client runs through the PJRT C API (a plugin such as TPU or CUDA's)."""
    return "PJRT C API" in get_backend(backend).platform_version
