"""The scalar types of plax.numpy (``float32``, ``int8``, ``bool_``, ...), as in JAX.

NumPy's scalar types build NumPy scalars, which cannot hold a traced value. The plax.numpy
types are classes of their own, each an instance of :class:`_ScalarType`: calling one is
``plax.numpy.asarray(x, dtype=...)``, so ``jnp.float32(x)`` works on tracers under jit, grad
and vmap and always returns a (never weakly typed) plax Array. Everywhere else they stand
for their NumPy type: ``np.dtype(jnp.float32)`` is float32, ``jnp.float32 == np.float32``
and the two hash alike (dict keys and sets mix them), ``isinstance(np.float32(1),
jnp.float32)`` holds, and any ``dtype=`` argument (plax's or NumPy's) accepts them.

plax's own code uses the NumPy types (``plax.core.dtypes``), never these.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes as _dtypes
from plax.numpy.creation import asarray as _asarray

__all__ = [
    "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
]
# ml_dtypes' types, made on first use (module ``__getattr__``): importing ml_dtypes costs more
# than the rest of ``import plax`` (see plax.core.dtypes). float6_* and the 1-bit integers are
# scalar types only, as in JAX: XLA's client holds no arrays of them (calling one raises).
ML_SCALAR_NAMES = _dtypes.ML_DTYPE_NAMES | _dtypes.ML_SCALAR_ONLY_NAMES


class _ScalarType(type):
    """The metaclass of the plax.numpy scalar types; each class has a ``dtype`` attribute."""

    # np.dtype(cls) reads this (NumPy's dtype protocol; a NumPy without it reads ``cls.dtype``).
    # A property on the metaclass is the quickest path through np.dtype(...), which every
    # dtype= argument takes.
    @property
    def __numpy_dtype__(cls) -> np.dtype:
        return cls.dtype

    def __call__(cls, x):
        # The x64 truncation warning names asarray, as JAX's does.
        return _asarray(x, dtype=_dtypes.canonicalize_user_dtype(cls.dtype, fun_name="asarray"))

    # Equal to, and hashed like, the NumPy scalar type (np.float32 == np.dtype('float32')
    # holds too, so this type equals that dtype as well).
    def __eq__(cls, other):
        return cls is other or cls.dtype.type == other

    def __ne__(cls, other):
        return not _ScalarType.__eq__(cls, other)

    def __hash__(cls):
        return hash(cls.dtype.type)

    def __instancecheck__(cls, instance) -> bool:
        return isinstance(instance, cls.dtype.type)


def _make(numpy_type, name: str) -> _ScalarType:
    dt = np.dtype(numpy_type)
    doc = (f"A plax scalar constructor of type {dt.name}.\n\n"
           "NumPy has a scalar type for each dtype; plax (as JAX) represents scalars as\n"
           f"zero-dimensional arrays: ``{name}(x)`` is ``plax.numpy.asarray(x, dtype={dt.name})``.")
    return _ScalarType(name, (), {"dtype": dt, "__module__": "plax.numpy", "__qualname__": name,
                                  "__doc__": doc})


bool_ = _make(_dtypes.bool_, "bool")  # named bool, as np.bool_ (and JAX's type) are
int8 = _make(_dtypes.int8, "int8")
int16 = _make(_dtypes.int16, "int16")
int32 = _make(_dtypes.int32, "int32")
int64 = _make(_dtypes.int64, "int64")
uint8 = _make(_dtypes.uint8, "uint8")
uint16 = _make(_dtypes.uint16, "uint16")
uint32 = _make(_dtypes.uint32, "uint32")
uint64 = _make(_dtypes.uint64, "uint64")
float16 = _make(_dtypes.float16, "float16")
float32 = _make(_dtypes.float32, "float32")
float64 = _make(_dtypes.float64, "float64")
complex64 = _make(_dtypes.complex64, "complex64")
complex128 = _make(_dtypes.complex128, "complex128")


def __getattr__(name):
    if name in ML_SCALAR_NAMES:
        made = globals()[name] = _make(getattr(_dtypes.ml_dtypes_module(), name), name)
        return made  # (bound here: later lookups skip this function)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
