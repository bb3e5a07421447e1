"""``jax._src.numpy.fft``: plax.numpy's FFTs (``plax.numpy.fft``), with ``_fft_norm``: the
factor a transform's output is scaled by, for lengths ``s`` given as an array."""
from plax import numpy as _jnp
from plax.numpy import fft as _public
from plax.numpy.util import promote_dtypes_inexact

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _public)


def _fft_norm(s, func_name: str, norm: str):
    """The scale of transform ``func_name`` (an inverse one starts with 'i') under ``norm``
    for the lengths ``s``, as plax.numpy.fft applies it."""
    if norm == "backward":
        return _jnp.array(1)
    _public._check_norm(norm)
    n = _jnp.prod(promote_dtypes_inexact(s)[0])
    factor = _jnp.sqrt(n) if norm == "ortho" else n
    return factor if func_name.startswith("i") else 1 / factor
