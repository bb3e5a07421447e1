"""Finding NVIDIA's CUDA PJRT plugin, without importing ``jax_plugins`` (it imports jax).

The plugin comes from the ``cuda13`` (or ``cuda12``) extra: ``jax-cuda13-pjrt`` installs the
PJRT library ``jax_plugins/xla_cuda13/xla_cuda_plugin.so``; ``jax-cuda13-plugin`` installs
``jax_cuda13_plugin`` (the GPU custom-call kernels: cuSOLVER, Python callbacks, ...); with
``[with-cuda]`` NVIDIA's own wheels bring the CUDA libraries under ``site-packages/nvidia``.

This module only finds things and reads settings; runtime/xla.py loads the plugin and makes
the client (jaxlib is touched there only).
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

# (the folder under jax_plugins/, the package of its kernels), newest CUDA first.
_RELEASES = (("xla_cuda13", "jax_cuda13_plugin"), ("xla_cuda12", "jax_cuda12_plugin"))
_LIBRARY = "xla_cuda_plugin.so"


@dataclass(frozen=True)
class Plugin:
    """Where the CUDA plugin is: its PJRT library, the package of its kernels (None when only
    the library was named), and what said so."""
    library: str
    kernels: str | None
    found_by: str


def find() -> Plugin | None:
    """The CUDA plugin to load, or None when none is installed. ``PJRT_NAMES_AND_LIBRARY_PATHS``
    (``cuda:/path/to/plugin.so``, as JAX reads it) wins; then the ``jax_plugins`` folders on
    the import path."""
    named = os.environ.get("PJRT_NAMES_AND_LIBRARY_PATHS", "")
    for entry in filter(None, (e.strip() for e in named.split(","))):
        name, _, path = entry.partition(":")
        if name.strip().lower() in ("cuda", "gpu") and path:
            return Plugin(path, _kernels_package(), "PJRT_NAMES_AND_LIBRARY_PATHS")
    try:
        spec = importlib.util.find_spec("jax_plugins")
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        for release, kernels in _RELEASES:
            library = Path(folder) / release / _LIBRARY
            if library.exists():
                found = kernels if importlib.util.find_spec(kernels) is not None else None
                return Plugin(str(library), found, f"the {release} package")
    return None


def _kernels_package() -> str | None:
    for _, kernels in _RELEASES:
        try:
            if importlib.util.find_spec(kernels) is not None:
                return kernels
        except (ImportError, ValueError):
            continue
    return None


# NVIDIA's libraries, loaded globally before the plugin so that it (and the kernels) find
# these copies rather than whatever the system has. CUDA 13 wheels keep them all in
# nvidia/cu13/lib; CUDA 12 wheels in nvidia/<component>/lib.
_NVIDIA_LIBRARIES = (
    ("cu13", ("libcudart.so.13", "libnvrtc.so.13", "libcublas.so.13", "libcublasLt.so.13",
              "libcupti.so.13", "libcusparse.so.12", "libcusolver.so.12", "libcufft.so.12")),
    ("cuda_runtime", ("libcudart.so.12",)),
    ("cuda_nvrtc", ("libnvrtc.so.12",)),
    ("cublas", ("libcublas.so.12", "libcublasLt.so.12")),
    ("cuda_cupti", ("libcupti.so.12",)),
    ("cusparse", ("libcusparse.so.12",)),
    ("cusolver", ("libcusolver.so.11",)),
    ("cufft", ("libcufft.so.11",)),
    ("nccl", ("libnccl.so.2",)),
    ("nvshmem", ("libnvshmem_host.so.3",)),
    ("cudnn", ("libcudnn.so.9",)),
)


def preload_nvidia_libraries() -> list[str]:
    """Load the NVIDIA libraries found under ``site-packages/nvidia`` (RTLD_GLOBAL); return
    the paths loaded. A library that is absent is skipped: the system's copy may serve."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    loaded = []
    for root in roots:
        for component, names in _NVIDIA_LIBRARIES:
            for name in names:
                path = Path(root) / component / "lib" / name
                if path.exists():
                    try:
                        ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
                        loaded.append(str(path))
                    except OSError:
                        continue
    return loaded


# The client settings JAX users set, and the plax-prefixed names that mean the same.
CLIENT_SETTINGS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
                   "XLA_PYTHON_CLIENT_ALLOCATOR", "XLA_CLIENT_MEM_FRACTION",
                   "XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB")


def client_settings(environ=None) -> dict[str, str]:
    """The ``XLA_*`` client settings to apply, from ``PLAX_*`` names where those are given
    (``PLAX_PYTHON_CLIENT_PREALLOCATE`` for ``XLA_PYTHON_CLIENT_PREALLOCATE``, ...); a
    ``PLAX_`` name wins over its ``XLA_`` twin."""
    environ = os.environ if environ is None else environ
    out = {}
    for name in CLIENT_SETTINGS:
        plax_name = "PLAX_" + name[len("XLA_"):]
        if plax_name in environ:
            out[name] = environ[plax_name]
    return out
