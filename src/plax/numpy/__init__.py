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
from plax.numpy import scalar_types as _scalar_types
from plax.numpy.indexing import take, take_along_axis  # noqa: F401
from plax.numpy.shape_ops import *  # noqa: F401,F403
from plax.numpy.padding import pad  # noqa: F401
from plax.numpy.reductions import *  # noqa: F401,F403
from plax.numpy.products import *  # noqa: F401,F403
from plax.numpy.sorting import *  # noqa: F401,F403
from plax.numpy.vectorize import vectorize  # noqa: F401
from plax.numpy.ufunc_objects import *  # noqa: F401,F403  (jnp.add is a jnp.ufunc)
from plax.numpy.numeric import *  # noqa: F401,F403

__array_api_version__ = "2024.12"  # the array API standard plax.numpy follows (as JAX's)
pi, e, inf, nan, euler_gamma, newaxis = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma, None
generic, number, integer, signedinteger, unsignedinteger = (
    _np.generic, _np.number, _np.integer, _np.signedinteger, _np.unsignedinteger)
inexact, floating, complexfloating = _np.inexact, _np.floating, _np.complexfloating
character, flexible, object_, iterable = _np.character, _np.flexible, _np.object_, _np.iterable
ComplexWarning = _np.exceptions.ComplexWarning
bool = bool_  # noqa: F405
single, double, csingle, cdouble = float32, float64, complex64, complex128  # noqa: F405
int_, uint, float_, complex_ = int64, uint64, float64, complex128  # noqa: F405

# Loaded on first use (PEP 562 ``__getattr__``), so ``import plax`` does not pay for them:
# the submodules plax.numpy.fft and plax.numpy.linalg, and the families below, each on
# first use of one of its names (module -> its ``__all__``: a test keeps the two in step).
_LAZY_SUBMODULES = frozenset({"fft", "linalg"})
_LAZY_FAMILIES = {
    "plax.numpy.conditionals": ("select", "piecewise"),
    "plax.numpy.index_tricks": (
        "indices", "ix_", "unravel_index", "ravel_multi_index", "tril_indices", "triu_indices",
        "tril_indices_from", "triu_indices_from", "diag_indices", "diag_indices_from",
        "mask_indices", "fill_diagonal", "fromfunction", "mgrid", "ogrid", "s_", "index_exp",
        "r_", "c_", "put_along_axis"),
    "plax.numpy.setops": ("isin", "intersect1d", "union1d", "setdiff1d", "setxor1d"),
    "plax.numpy.array_edit": (
        "append", "insert", "delete", "resize", "trim_zeros", "block", "row_stack", "choose",
        "put", "diagflat", "vander", "packbits", "unpackbits", "apply_along_axis",
        "apply_over_axes", "extract", "place"),
    "plax.numpy.statistics": (
        "cov", "corrcoef", "bincount", "digitize", "histogram", "histogram_bin_edges",
        "histogram2d", "histogramdd"),
    "plax.numpy.polynomial": (
        "polyval", "polyadd", "polysub", "polymul", "polydiv", "polyder", "polyint", "poly",
        "roots", "polyfit"),
    "plax.numpy.windows": ("bartlett", "blackman", "hamming", "hanning", "kaiser"),
    "plax.numpy.convolution": ("convolve", "correlate"),
    "plax.numpy.printing": (
        "printoptions", "set_printoptions", "get_printoptions", "array_str", "array_repr"),
    "plax.numpy.io": (
        "save", "savez", "load", "frombuffer", "fromstring", "fromiter", "fromfile"),
}
_LAZY_NAMES = {name: module for module, names in _LAZY_FAMILIES.items() for name in names}


def __array_namespace_info__():
    """The array API inspection namespace (capabilities, devices, dtypes by kind)."""
    from plax.numpy.array_api_info import ArrayNamespaceInfo  # (loaded when first used)
    return ArrayNamespaceInfo()


def from_dlpack(x, /, *, device=None, copy=None):
    """A plax Array over the data of ``x`` (an object with ``__dlpack__``): see
    ``plax.dlpack.from_dlpack``."""
    from plax.dlpack import from_dlpack as _from_dlpack  # (loaded when first used)
    return _from_dlpack(x, device=device, copy=copy)


# ``import *`` gives them too (loading their families, and ml_dtypes).
__all__ = sorted({n for n in globals() if not n.startswith("_")} | set(_LAZY_NAMES)
                 | _scalar_types.ML_SCALAR_NAMES | {"dtype"})


def _as_public(value):
    """``value``, a function of one of this package's modules, named as plax.numpy's (JAX's
    functions name jax.numpy as their ``__module__``, whichever file defines them)."""
    if callable(value) and not isinstance(value, type) and \
            str(getattr(value, "__module__", "")).startswith(__name__ + "."):
        value.__module__ = __name__
    return value


for _name in __all__:
    if _name in globals():
        _as_public(globals()[_name])


def __getattr__(name):
    import importlib
    if name in _scalar_types.ML_SCALAR_NAMES:  # bfloat16, float8_*, int4, ...: ml_dtypes'
        value = globals()[name] = getattr(_scalar_types, name)
        return value
    if name == "dtype":  # NumPy's, which reads "bfloat16" once ml_dtypes has registered it
        from plax.core.dtypes import ml_dtypes_module
        ml_dtypes_module()
        value = globals()[name] = _np.dtype
        return value
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")  # also binds it here
    if name in _LAZY_NAMES:
        value = globals()[name] = _as_public(
            getattr(importlib.import_module(_LAZY_NAMES[name]), name))
        return value  # (bound here: later lookups skip this function)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _LAZY_SUBMODULES | set(_LAZY_NAMES)
                  | _scalar_types.ML_SCALAR_NAMES | {"dtype"})
