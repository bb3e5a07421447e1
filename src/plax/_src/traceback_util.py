"""``jax._src.traceback_util``: which source files count as library code, and the filtering
of tracebacks at public entry points (``plax.core.tracebacks``)."""
from plax.core.source_info import excluded_paths as _exclude_paths  # noqa: F401
from plax.core.source_info import register_exclusion  # noqa: F401
from plax.core.tracebacks import (  # noqa: F401
    UnfilteredStackTrace, api_boundary, filter_traceback)

from plax._src import _face

_REFUSED: dict = {}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)


def include_frame(frame) -> bool:
    """Whether ``frame`` is user code: not under plax's own source nor a path a library
    excluded with ``register_exclusion``."""
    return not frame.f_code.co_filename.startswith(tuple(_exclude_paths))
