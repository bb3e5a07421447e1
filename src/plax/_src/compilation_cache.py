"""``jax._src.compilation_cache``: the persistent compilation cache (``plax.runtime.
compile_cache``, set up by ``plax.experimental.compilation_cache``)."""
from plax.experimental.compilation_cache.compilation_cache import (  # noqa: F401
    reset_cache, set_cache_dir)
from plax.runtime import compile_cache as _cache_impl

from plax._src import _face

_OWN = ("plax's persistent cache keys, compresses and stores executables in "
        "plax.runtime.compile_cache, under its own names")
_REFUSED = dict.fromkeys(
    ("_cache", "_get_cache", "VerificationCache", "combine_executable_and_time",
     "compress_executable", "decompress_executable", "get_cache_key",
     "get_executable_and_time", "get_file_cache", "put_executable_and_time",
     "initialize_cache"), _OWN)

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)


def is_persistent_cache_enabled() -> bool:
    """Whether compiled programs are written to and read from the cache on disk."""
    return _cache_impl.enabled()
