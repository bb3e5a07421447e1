"""``jax._src.compilation_cache_interface``: JAX's interface of cache back ends; plax's
persistent cache is one directory of files (``plax.runtime.compile_cache``)."""
from plax._src import _face
from plax._src.compilation_cache import _OWN

_REFUSED = {"CacheInterface": _OWN}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
