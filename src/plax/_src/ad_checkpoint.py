"""``jax._src.ad_checkpoint``: ``plax.ad_checkpoint`` (checkpoint, policies,
saved_residuals)."""
from plax import ad_checkpoint as _public
from plax.transforms.residuals import saved_residuals  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _public)
