"""plax.numpy: the NumPy API on plax arrays, written on plax.lax."""
import numpy as _np

from plax.core.dtypes import (bfloat16, bool_, complex64, complex128, float16, float32, float64,  # noqa: F401
                              float8_e4m3fn, float8_e5m2, int4, int8, int16, int32, int64, uint4,
                              uint8, uint16, uint32, uint64, finfo, iinfo, issubdtype, float0)
from plax.core.dtypes import promote_types, result_type  # noqa: F401
from plax.runtime.array import Array as ndarray  # noqa: F401
from plax.numpy.ufuncs import *  # noqa: F401,F403
from plax.numpy.ufuncs import abs, round, pow, divmod  # noqa: F401
from plax.numpy.creation import *  # noqa: F401,F403
from plax.numpy import array_methods as _array_methods  # noqa: F401

pi, e, inf, nan, euler_gamma, newaxis = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma, None
generic, number, integer, signedinteger, unsignedinteger = (
    _np.generic, _np.number, _np.integer, _np.signedinteger, _np.unsignedinteger)
inexact, floating, complexfloating = _np.inexact, _np.floating, _np.complexfloating
dtype = _np.dtype
bool = bool_
from plax.numpy.indexing import _rewriting_take, take, take_along_axis  # noqa: F401,E402
from plax.numpy.shape_ops import *  # noqa: F401,F403
from plax.numpy.reductions import *  # noqa: F401,F403,E402
from plax.numpy.products import *  # noqa: F401,F403,E402
from plax.numpy.sorting import *  # noqa: F401,F403,E402
