"""``jax._src.lib``: the jaxlib plax runs on, as JAX names it: jaxlib's modules
(``xla_client``, ``_jax``, ``utils``, ``lapack``, ``gpu_solver``, ...) and parts of ``_jax``
(``jax_jit``, ``pytree``, ``Device``, ...), loaded on first use through ``plax.runtime.xla``;
its version; ``mlir`` (jaxlib's MLIR bindings, as plax's lowering uses them)."""
import importlib

from plax.runtime import xla as _xla
from plax.runtime.xla import JAXLIB_EXTENSION_VERSION as jaxlib_extension_version  # noqa: F401
from plax.runtime.xla import JAXLIB_VERSION as version_str  # noqa: F401

from plax._src import _face

version = tuple(int(part) for part in version_str.split(".")[:3])

# JAX's name -> the jaxlib module it is.
_MODULES = {
    "xla_client": "xla_client", "_jax": "_jax", "utils": "utils", "lapack": "lapack",
    "gpu_solver": "gpu_solver", "gpu_sparse": "gpu_sparse", "gpu_prng": "gpu_prng",
    "gpu_linalg": "gpu_linalg", "cpu_sparse": "cpu_sparse",
    "weakref_lru_cache": "weakref_lru_cache", "_pretty_printer": "_pretty_printer",
    "_profiler": "_profiler", "_profile_data": "_profile_data", "ifrt_proxy": "_ifrt_proxy",
    "cpu_feature_guard": "cpu_feature_guard",
}
# JAX's name -> the attribute of jaxlib's ``_jax`` it is.
_OF_JAX = {"jax_jit": "jax_jit", "pytree": "pytree", "guard_lib": "guard_lib",
           "Device": "Device", "ffi": "ffi"}
_REFUSED = {
    "cuda_versions": "plax finds the CUDA plugin itself (plax.runtime.cuda_plugin) and does "
                     "not load the plugin's cuda_versions module",
    "cuda_path": "plax finds the CUDA plugin itself (plax.runtime.cuda_plugin)",
}

__doc__ = _face.document(__doc__, _REFUSED)


def __getattr__(name):
    if name == "mlir":
        return importlib.import_module(f"{__name__}.mlir")
    if name in _MODULES:
        return _xla.jaxlib_submodule(_MODULES[name])
    if name in _OF_JAX:
        return getattr(_xla.jaxlib_submodule("_jax"), _OF_JAX[name])
    if name in _REFUSED:
        raise _face.not_provided(__name__, name, _REFUSED[name])
    raise AttributeError(f"module 'jax._src.lib' has no attribute {name!r}")
