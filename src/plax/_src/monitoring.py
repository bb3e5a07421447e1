"""``jax._src.monitoring``: event listeners (``plax.monitoring``), with the lists of those
registered."""
from plax import monitoring as _public
from plax.monitoring import *  # noqa: F401,F403

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _public)


def get_event_listeners() -> list:
    return list(_public._event_listeners)


def get_event_duration_listeners() -> list:
    return list(_public._duration_listeners)


def get_event_time_span_listeners() -> list:
    return list(_public._time_span_listeners)


def get_scalar_listeners() -> list:
    return list(_public._scalar_listeners)
