"""``jax._src.source_info_util``: where staged equations come from, as
``jax.extend.source_info_util`` (``plax.extend.source_info_util``); ``user_frame`` reads the
user's frame off an equation's source info."""
from typing import NamedTuple

from plax.extend import source_info_util as _public
from plax.extend.source_info_util import *  # noqa: F401,F403

from plax._src import _face

_REFUSED = {"JaxStackTraceBeforeTransformation":
            "plax keeps whole tracebacks; it does not chain the traceback of where a "
            "transformed function was defined to errors"}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)


class Frame(NamedTuple):
    file_name: str
    function_name: str
    start_line: int
    start_column: int
    end_line: int
    end_column: int


def user_frame(traceback):
    """The user's frame of a source info (``eqn.source_info.traceback``), or None."""
    if traceback is None or traceback.file is None:
        return None
    column = traceback.column or 0
    return Frame(traceback.file, traceback.function, traceback.line, column,
                 traceback.line, column)
