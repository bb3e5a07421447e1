"""``jax._src.literals``: typed Python-scalar literals. ``TypedInt``, ``TypedFloat`` and
``TypedComplex`` are ``int``/``float``/``complex`` values that carry a dtype and a weakly
typed scalar aval; ``TypedNdArray`` is a host NumPy array that carries an aval (possibly
weak). Neither is canonicalised again: the dtype they carry is kept whatever the x64 mode."""
import numpy as np

from plax.core.avals import ShapedArray, canonicalize_dtype_handlers, pytype_aval_mappings


def _weak_scalar_aval(dtype) -> ShapedArray:
    return ShapedArray((), np.dtype(dtype), weak_type=True)


def _typed_scalar_class(base: type, kind: str):
    """A subclass of the Python scalar type ``base`` that carries ``dtype`` and ``aval``."""
    name = f"Typed{base.__name__.capitalize()}"

    def __new__(cls, value, dtype):
        v = base.__new__(cls, value)
        v.dtype = np.dtype(dtype)
        v.aval = _weak_scalar_aval(v.dtype)
        return v

    def __repr__(self):
        return f"{name}({base(self)!r}, dtype={self.dtype.name})"

    def __str__(self):
        return str(base(self))

    def __getnewargs__(self):
        return (base(self), self.dtype)

    namespace = {"__new__": __new__, "__repr__": __repr__, "__str__": __str__,
                 "__getnewargs__": __getnewargs__, "__module__": __name__,
                 "__doc__": f"A Python {base.__name__} carrying a {kind} dtype (weakly typed)."}
    if base is not int:  # int subclasses cannot have non-empty __slots__
        namespace["__slots__"] = ("dtype", "aval")
    return type(name, (base,), namespace)


TypedInt = _typed_scalar_class(int, "integer")
TypedFloat = _typed_scalar_class(float, "floating")
TypedComplex = _typed_scalar_class(complex, "complex")
typed_scalar_types: set = {TypedInt, TypedFloat, TypedComplex}


class TypedNdArray(np.ndarray):
    """A host array carrying its aval: its dtype is not canonicalised and it may be weak."""

    def __new__(cls, val, aval: ShapedArray | None = None):
        obj = np.asarray(val).view(cls)
        if aval is not None:
            obj._aval = aval
        return obj

    def __array_finalize__(self, obj):
        self._aval = None
        self._weak_type = isinstance(obj, TypedNdArray) and obj.weak_type

    @property
    def aval(self) -> ShapedArray:
        if self._aval is None:
            self._aval = ShapedArray(self.shape, self.dtype, weak_type=self._weak_type)
        return self._aval

    @property
    def weak_type(self) -> bool:
        return self.aval.weak_type

    @property
    def val(self) -> np.ndarray:
        return np.asarray(self)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # NumPy arithmetic on a typed array gives a plain array (its aval no longer holds).
        def plain(xs):
            return tuple(np.asarray(x) if isinstance(x, TypedNdArray) else x for x in xs)
        if "out" in kwargs:
            kwargs["out"] = plain(kwargs["out"])
        return getattr(ufunc, method)(*plain(inputs), **kwargs)

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        body = (f"[], shape={self.shape}" if self.size == 0 else
                np.array2string(np.asarray(self), prefix="TypedNdArray(", separator=", "))
        return f"TypedNdArray({body}, dtype={self.dtype.name}{weak})"

    def __reduce__(self):
        return (_rebuild_typed_ndarray, (np.asarray(self), self.weak_type))


def _rebuild_typed_ndarray(val, weak_type):
    return TypedNdArray(val, ShapedArray(np.shape(val), val.dtype, weak_type=weak_type))


def _keep(x):
    return x


for _t in (*typed_scalar_types, TypedNdArray):
    pytype_aval_mappings[_t] = lambda x: x.aval
    canonicalize_dtype_handlers[_t] = _keep
