"""``jax._src.linear_util``: functions wrapped with a stack of transformations, as
``jax.extend.linear_util`` (``plax.extend.linear_util``)."""
from plax.extend.linear_util import *  # noqa: F401,F403
from plax.extend.linear_util import Store, EqualStore  # noqa: F401
from plax.extend import linear_util as _public

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _public)
