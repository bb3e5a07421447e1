"""Finding libtpu's PJRT plugin and the settings its client starts with, as JAX finds them.

``TPU_LIBRARY_PATH`` wins when it names a file; then the ``libtpu`` package (the ``tpu``
extra installs the release JAX 0.10.2 pairs with). This module only finds things and reads
settings; runtime/xla.py loads the plugin and makes the client (jaxlib is touched there
only).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

_LIBRARY = "libtpu.so"


@dataclass(frozen=True)
class Library:
    """Where libtpu is, and what said so."""
    path: str
    found_by: str


def find() -> Library | None:
    """The libtpu to load, or None when none is installed."""
    named = os.environ.get("TPU_LIBRARY_PATH")
    if named and os.path.isfile(named):
        return Library(named, "TPU_LIBRARY_PATH")
    try:
        spec = importlib.util.find_spec("libtpu")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return None
    for folder in spec.submodule_search_locations or []:
        for candidate in (Path(folder) / _LIBRARY, Path(folder) / "lib" / _LIBRARY):
            if candidate.is_file():
                return Library(str(candidate), "the libtpu package")
    try:  # a layout of its own: ask the package
        path = importlib.import_module("libtpu").get_library_path()
    except Exception:  # noqa: BLE001 (a broken package is no library)
        return None
    return Library(str(path), "the libtpu package") if path and os.path.isfile(path) else None


def client_options(text: str | None) -> dict:
    """The client's creation options from ``jax_pjrt_client_create_options`` ("key:value"
    pairs joined by ";"), as JAX reads them: values stay strings."""
    options = {}
    for item in filter(None, (text or "").split(";")):
        parts = item.split(":")
        if len(parts) != 2:
            raise RuntimeError(f"Multiple ':' separators for option in "
                               f"jax_pjrt_client_create_options: '{item}'. Should be in format "
                               "'key:value'.")
        options[parts[0]] = parts[1]
    return options


def set_up_environment(version: str) -> None:
    """What JAX's Cloud TPU initialisation sets before libtpu starts, where unset: libtpu
    reads which framework drives it, and gRPC's chatter is kept to errors."""
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    os.environ.setdefault("TPU_ML_PLATFORM", "JAX")
    os.environ.setdefault("TPU_ML_PLATFORM_VERSION", version)


def explain_failure(error: Exception, library: Library) -> str:
    """What a failure to load or start libtpu means, for the user."""
    said = (str(error).strip().splitlines() or [type(error).__name__])[0].rstrip(".")
    if "lockfile" in said or "already in use" in said or "TPU is in use" in said:
        return (f"the TPU is held by another process ({said}). One process at a time can "
                "use a TPU chip: stop the other one (`lsof -w /dev/accel*` names it), or run "
                "this one on the CPU with PLAX_PLATFORMS=cpu")
    return f"libtpu at {library.path} (found through {library.found_by}) could not start: {said}"
