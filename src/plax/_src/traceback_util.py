"""``jax._src.traceback_util``: which source files count as library code."""
from plax.core.source_info import excluded_paths as _exclude_paths  # noqa: F401
from plax.core.source_info import register_exclusion  # noqa: F401

from plax._src import _face

_REFUSED = {"UnfilteredStackTrace": "plax keeps tracebacks whole (it filters no frames), so "
                                    "there is no unfiltered trace to attach"}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)


def api_boundary(fun=None, **options):
    """Mark ``fun`` as a public entry point. JAX filters its own frames out of tracebacks
    raised through such functions; plax keeps tracebacks whole, so ``fun`` is returned as it
    is (usable as ``@api_boundary`` and ``@api_boundary(repro_api_name=...)``)."""
    del options
    if fun is None:
        return lambda f: f
    return fun


def include_frame(frame) -> bool:
    """Whether ``frame`` is user code: not under plax's own source nor a path a library
    excluded with ``register_exclusion``."""
    return not frame.f_code.co_filename.startswith(tuple(_exclude_paths))
