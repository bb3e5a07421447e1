"""``jax._src.pallas.mosaic.pipeline``: emit_pipeline (``plax.pallas.pipeline``)."""
from plax.pallas import pipeline as _pipeline

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _pipeline)
