"""plax.numpy: the NumPy API on plax arrays, written on plax.lax."""
import numpy as _np

from plax.core.dtypes import finfo, iinfo, issubdtype, float0  # noqa: F401
from plax.core.dtypes import promote_types, result_type  # noqa: F401
from plax.runtime.array import Array as ndarray  # noqa: F401
from plax.numpy.ufuncs import *  # noqa: F401,F403
from plax.numpy.ufuncs import abs, round, pow, divmod  # noqa: F401
from plax.numpy.creation import *  # noqa: F401,F403
from plax.numpy import array_methods as _array_methods  # noqa: F401
# The scalar types: callable on tracers (jnp.float32(x) is an Array), as in JAX.
from plax.numpy.scalar_types import *  # noqa: F401,F403
from plax.numpy.indexing import take, take_along_axis  # noqa: F401
from plax.numpy.shape_ops import *  # noqa: F401,F403
from plax.numpy.reductions import *  # noqa: F401,F403
from plax.numpy.products import *  # noqa: F401,F403
from plax.numpy.sorting import *  # noqa: F401,F403
from plax.numpy.vectorize import vectorize  # noqa: F401
from plax.numpy.ufunc_objects import *  # noqa: F401,F403  (jnp.add is a jnp.ufunc)
from plax.numpy.conditionals import select, piecewise  # noqa: F401
from plax.numpy.numeric import *  # noqa: F401,F403
from plax.numpy.index_tricks import *  # noqa: F401,F403
from plax.numpy.setops import *  # noqa: F401,F403
from plax.numpy.array_edit import *  # noqa: F401,F403
from plax.numpy.statistics import *  # noqa: F401,F403
from plax.numpy.polynomial import *  # noqa: F401,F403
from plax.numpy.windows import *  # noqa: F401,F403
from plax.numpy.convolution import *  # noqa: F401,F403

pi, e, inf, nan, euler_gamma, newaxis = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma, None
generic, number, integer, signedinteger, unsignedinteger = (
    _np.generic, _np.number, _np.integer, _np.signedinteger, _np.unsignedinteger)
inexact, floating, complexfloating = _np.inexact, _np.floating, _np.complexfloating
dtype = _np.dtype
bool = bool_  # noqa: F405
single, double, csingle, cdouble = float32, float64, complex64, complex128  # noqa: F405
int_, uint, float_, complex_ = int64, uint64, float64, complex128  # noqa: F405

# The submodules plax.numpy.fft and plax.numpy.linalg load on first use.
_LAZY_SUBMODULES = frozenset({"fft", "linalg"})


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")  # also binds it here
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _LAZY_SUBMODULES)
