"""Which platforms plax starts, in which order, and what a failure to start one means.

The user names platforms with ``PLAX_PLATFORMS`` (or JAX's ``JAX_PLATFORMS`` /
``jax_platforms``), e.g. "cuda,cpu"; "gpu" means "cuda". Named, each must start or plax
raises JAX's "Unable to initialize backend", except one whose plugin is not installed at
all, which is passed over when other platforms are named too. Unnamed, plax tries every
platform it has a client factory for, in JAX's order: the TPU where libtpu is installed,
then the GPU where a CUDA plugin is, then the CPU; one that fails then warns once and plax
goes on without it. The factories themselves (jaxlib
clients) live in runtime/xla.py; nothing here touches jaxlib.
"""
from __future__ import annotations

import os
import warnings

from plax.core.config import config
from plax.runtime import cuda_plugin, shutdown, tpu_plugin

_ALIASES = {"gpu": "cuda"}


class PlatformNotInstalled(RuntimeError):
    """Raised by a factory whose platform's plugin is not installed at all (as opposed to
    installed but failing to start): a named platform of this kind is passed over when
    others are named too ("cuda,cpu" on a machine without CUDA runs on the CPU, as JAX)."""


# platform name -> the factory of its jaxlib client, in the order platforms are tried
FACTORIES: dict = {}


def canonical(platform: str) -> str:
    """A platform's own name: lower case, "gpu" meaning "cuda"."""
    name = str(platform).lower()
    return _ALIASES.get(name, name)


def register_factory(name: str, factory) -> None:
    """Make ``factory()`` (returning a jaxlib client) the way platform ``name`` starts; it
    is used once the backends start with ``name`` among the requested platforms (the
    default: every registered one)."""
    if not callable(factory):
        raise TypeError(f"register_backend_factory: factory must be callable, got {factory!r}")
    FACTORIES[name.lower()] = factory


def requested(known) -> tuple[list[str], bool]:
    """The platforms to start, in order, and whether the user named them. By default: those
    of ``known`` (the factories' names, in their order), the CUDA one only where a plugin is
    installed."""
    text = os.environ.get("PLAX_PLATFORMS") or config.read("platforms") or ""
    names = [canonical(p.strip()) for p in text.split(",") if p.strip()]
    if names:
        return list(dict.fromkeys(names)), True
    return [n for n in known if (n != "cuda" or cuda_plugin.find() is not None)
            and (n != "tpu" or tpu_plugin.find() is not None)], False


def start() -> dict:
    """``{platform: client}`` for the requested platforms, each made by its registered
    factory, in order (the first is the default)."""
    factories = FACTORIES
    names, named = requested(factories)
    started, absent = {}, None
    for name in names:
        factory = factories.get(name)
        try:
            if factory is None:
                raise RuntimeError(f"unknown platform (known: {sorted(factories)} and 'gpu')")
            started[name] = factory()
        except Exception as e:  # noqa: BLE001 (reported either way, below)
            said = (str(e).strip().splitlines() or [type(e).__name__])[0].rstrip(".")
            if named and isinstance(e, PlatformNotInstalled) and len(names) > 1:
                absent = absent or (name, said, e)  # the next named platform may start
                continue
            if named:
                raise RuntimeError(
                    f"Unable to initialize backend '{name}': {said} (it was asked for by "
                    f"PLAX_PLATFORMS/jax_platforms={','.join(names)}; drop it from there to "
                    f"run without it).") from e
            warnings.warn(f"Unable to initialize backend '{name}': {said}. plax runs on the "
                          f"other platforms; set PLAX_PLATFORMS=cpu to skip {name}, or "
                          f"uninstall its plugin.", RuntimeWarning, stacklevel=4)
    if not started and absent is not None:
        name, said, e = absent
        raise RuntimeError(f"Unable to initialize backend '{name}': {said} (and none of the "
                           f"other platforms named by PLAX_PLATFORMS/jax_platforms="
                           f"{','.join(names)} started).") from e
    if not started:
        raise RuntimeError("Unable to initialize any backend.")
    global _started_in_pid
    _started_in_pid = os.getpid()
    _warn_at_every_fork()
    shutdown.install()
    return started


_fork_warning_installed = False
_started_in_pid = None  # the process whose backends start() made


def check_compiler_usable() -> None:
    """Raise instead of hanging when this process is a fork of one whose backends started.

    XLA compiles (and loads serialised programs) on threads of its client; a forked child
    has the client's memory but none of its threads, so a compile there waits forever (in
    JAX too). Programs compiled before the fork still run in the child, and arrays can be
    made and read there.
    """
    if _started_in_pid is not None and os.getpid() != _started_in_pid:
        raise RuntimeError(
            "plax cannot compile a new program in this process: it was forked (os.fork(), or "
            "multiprocessing's 'fork' start method) after plax's backend started in its "
            f"parent (process {_started_in_pid}), and XLA's compiler threads do not survive "
            "a fork, so the compile would never finish. Programs compiled before the fork "
            "still run here, and arrays can be made and read. Start the child with "
            "multiprocessing.get_context('spawn') or 'forkserver' instead (under `python -m "
            "plax` those children resolve jax to plax too), or fork before plax first runs "
            "anything.")


def _warn_before_fork() -> None:
    warnings.warn("os.fork() was called. os.fork() is incompatible with multithreaded code, "
                  "and plax (as JAX) runs XLA's threads once a backend has started, so the "
                  "child may deadlock. Start processes with multiprocessing's 'spawn' or "
                  "'forkserver' method instead.", RuntimeWarning, stacklevel=2)


def _warn_at_every_fork() -> None:
    """From now on, every ``os.fork()`` warns, as JAX's does once its backends started."""
    global _fork_warning_installed
    if not _fork_warning_installed and hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_warn_before_fork)
        _fork_warning_installed = True
