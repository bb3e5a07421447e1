"""Controls of plax's persistent compilation cache (``plax.runtime.compile_cache``).

The cache is on by default: every compiled program is written to the cache directory and
looked up there before XLA compiles it again, in this process or a later one.
``set_cache_dir`` chooses the directory (the ``jax_compilation_cache_dir`` flag);
``reset_cache`` forgets what this process knew of the cache, so the next compile starts
from the directory as it is then.

The directory is trusted: a program loaded from it runs as machine code. Do not point it
at a directory others can write to.
"""
from __future__ import annotations

import os

from plax.core.config import config
from plax.runtime import compile_cache as _cache

__all__ = ["reset_cache", "set_cache_dir"]


def set_cache_dir(path) -> None:
    """Save compiled programs to ``path`` (created on first write, owner-only) and look
    them up there before compiling."""
    config.update("jax_compilation_cache_dir", None if path is None else os.fspath(path))


def reset_cache() -> None:
    """Back to the state before the first compile: this process's knowledge of the cache
    (its size estimate, the directories whose failures were reported) is dropped. Entries
    on disk stay."""
    _cache.reset()
