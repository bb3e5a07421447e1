"""``jax._src.numpy.util``: plax.numpy's argument promotion (``plax.numpy.util``), with
``promote_dtypes_complex``."""
from plax.core import dtypes as _dtypes
from plax.numpy import util as _util
from plax.numpy.util import (check_arraylike, promote_dtypes,  # noqa: F401
                             promote_dtypes_inexact, promote_dtypes_numeric)

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _util)


def promote_dtypes_complex(*args) -> list:
    """``args`` converted to the complex dtype their promoted dtype computes in."""
    dtype, weak = _dtypes.lattice_result(*args)
    complex_dtype = _dtypes.canonicalize_dtype(
        _dtypes.result_type(_dtypes.to_inexact_dtype(dtype), 1j))
    return [_util.convert(x, complex_dtype, weak) for x in args]
