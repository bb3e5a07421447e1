"""Abstract values: what a transformation knows about an array (shape, dtype, weak type and,
on meshes with Explicit axes, its sharding)."""
from __future__ import annotations

import math
import operator

import numpy as np

from plax.core import dtypes
from plax.core.errors import InconclusiveDimensionOperation

_SHORT_NAMES = {
    "bool": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "f16", "float32": "f32", "float64": "f64", "bfloat16": "bf16",
    "complex64": "c64", "complex128": "c128", "int4": "i4", "uint4": "u4",
    "float8_e4m3fn": "f8_e4m3fn", "float8_e4m3fnuz": "f8_e4m3fnuz", "float8_e5m2": "f8_e5m2",
    "float8_e5m2fnuz": "f8_e5m2fnuz", "float8_e4m3b11fnuz": "f8_e4m3b11fnuz",
    "float8_e3m4": "f8_e3m4", "float8_e4m3": "f8_e4m3", "float8_e8m0fnu": "f8_e8m0fnu",
    "float4_e2m1fn": "f4_e2m1fn", "int2": "i2", "uint2": "u2",
}


def short_dtype_name(dtype) -> str:
    if isinstance(dtype, dtypes.ExtendedDType):
        return dtype.name
    dt = np.dtype(dtype)
    if dt == dtypes.float0:
        return "float0"
    return _SHORT_NAMES.get(dt.name, dt.name)


_MAX_SIZE = 2 ** 63 - 1  # the largest element count or byte size XLA can represent


def shape_entries(shape) -> tuple:
    """The entries of a shape-like argument, as JAX reads one: a list or tuple as it is, the
    items of any other iterable (``range``, TensorFlow's ``TensorShape``, a sequence with only
    ``__len__`` and ``__getitem__``, ...), and one entry
    for anything else (a scalar)."""
    if isinstance(shape, (list, tuple)):
        return tuple(shape)
    if isinstance(shape, (str, bytes)) or not (hasattr(shape, "__iter__")
                                               or hasattr(shape, "__getitem__")):
        return (shape,)
    try:
        return tuple(shape)
    except TypeError:  # a 0-d array
        return (shape,)


def _checked_shape(shape: tuple, dtype: np.dtype) -> tuple:
    """``shape`` with Python-int sizes, after checking it can exist (the slow path of
    ShapedArray: zero-size, non-int sizes, negative sizes, or sizes too large)."""
    try:
        shape = tuple(operator.index(d) for d in shape)
    except InconclusiveDimensionOperation:  # symbolic sizes (shape polymorphism): kept
        from plax.core.symbolic_shapes import checked_symbolic_shape
        return checked_symbolic_shape(shape)
    except TypeError:
        from plax.core.errors import shape_type_error
        raise shape_type_error(shape) from None
    if any(d < 0 for d in shape):
        raise TypeError(f"shape must have every element be nonnegative, got {shape}: an array "
                        "dimension cannot have a negative size.")
    # Zero-size arrays too: XLA multiplies every size (in order) before it sees the 0.
    count = math.prod(d for d in shape if d)
    nbytes = count * max(dtype.itemsize, 1)
    if count > _MAX_SIZE or nbytes > _MAX_SIZE:
        raise ValueError(
            f"Shape {shape} of dtype {dtype.name} is too large to exist: its sizes multiply to "
            f"{count} elements ({nbytes} bytes), more than the 2**63 - 1 that an array size can "
            "count (int64 overflow). Check the shape computation; no device can hold such an "
            "array.")
    return shape


def _valid_shape(shape, dtype) -> tuple:
    """``shape`` as a tuple of Python ints, after the one check every abstract value passes:
    no negative size, and an element count and byte size that fit in int64 (XLA aborts the
    process otherwise)."""
    shape = tuple(shape)
    # Fast path: a product and two comparisons; anything unusual is sorted out by _checked_shape.
    n = math.prod(shape)
    if type(n) is not int or not 0 < n * dtype.itemsize <= _MAX_SIZE or (
            shape and min(shape) < 0):
        return _checked_shape(shape, dtype)
    return shape


class ManualAxisType:
    """How a value inside shard_map stands towards the manual mesh axes (an aval's
    ``manual_axis_type``, short ``mat``): the axes it is ``varying`` over (devices along them
    may hold different blocks), and those it is ``unreduced`` or ``reduced`` over. Values
    outside shard_map have the empty one. Printed in a type as ``{V:x}``, ``{U:x}``, ``{R:x}``.
    """

    __slots__ = ("varying", "unreduced", "reduced", "_order", "_hash")

    def __init__(self, *, varying=frozenset(), unreduced=frozenset(), reduced=frozenset(),
                 _order=()):
        varying, unreduced, reduced = frozenset(varying), frozenset(unreduced), frozenset(reduced)
        for name, other in (("unreduced", unreduced), ("reduced", reduced)):
            if varying & other:
                raise ValueError(f"varying and {name} cannot have common mesh axes. Got "
                                 f"varying={varying} and {name}={other}: a value cannot be "
                                 f"both varying and {name} over {sorted(varying & other)}.")
        object.__setattr__(self, "varying", varying)
        object.__setattr__(self, "unreduced", unreduced)
        object.__setattr__(self, "reduced", reduced)
        # The mesh's axis order, for printing (not part of the value).
        object.__setattr__(self, "_order", tuple(_order))
        object.__setattr__(self, "_hash", hash((varying, unreduced, reduced)))

    def __setattr__(self, name, value):
        raise AttributeError(f"ManualAxisType is immutable: use .update({name}=...)")

    def update(self, **changes) -> "ManualAxisType":
        """A copy with some of ``varying``, ``unreduced``, ``reduced`` replaced."""
        fields = dict(varying=self.varying, unreduced=self.unreduced, reduced=self.reduced)
        fields.update(changes)
        return ManualAxisType(**fields, _order=self._order)

    @property
    def empty(self) -> bool:
        return not (self.varying or self.unreduced or self.reduced)

    def __eq__(self, other):  # (instances are mostly shared: identity first, on every aval ==)
        return self is other or (type(other) is ManualAxisType and self.varying == other.varying
                and self.unreduced == other.unreduced and self.reduced == other.reduced)

    def __hash__(self):
        return self._hash

    def __reduce__(self):
        return (_manual_axis_type, (self.varying, self.unreduced, self.reduced))

    def __repr__(self):
        return (f"ManualAxisType(varying={self.varying}, unreduced={self.unreduced}, "
                f"reduced={self.reduced})")

    def _ordered(self, names) -> str:
        names = sorted(names, key=lambda n: (self._order.index(n) if n in self._order
                                             else len(self._order), str(n)))
        return names[0] if len(names) == 1 else f"({','.join(names)})"

    def text(self) -> str:
        """The type's suffix: ``{V:(x,y), U:z}`` (axes in mesh order), or '' when empty."""
        parts = [f"{tag}:{self._ordered(axes)}" for tag, axes in
                 (("V", self.varying), ("U", self.unreduced), ("R", self.reduced)) if axes]
        return "{" + ", ".join(parts) + "}" if parts else ""


def _manual_axis_type(varying, unreduced, reduced) -> ManualAxisType:
    return ManualAxisType(varying=varying, unreduced=unreduced, reduced=reduced)


EMPTY_MAT = ManualAxisType()


class AbstractValue:
    __slots__ = ()


# Whether any aval has carried a sharding yet: until then abstract evaluation skips sharding
# propagation altogether (programs that never use Explicit axes pay nothing for it).
sharding_in_types = [False]


def _no_sharding_types(ndim: int):
    raise RuntimeError("no sharding types are installed: import plax (plax.sharding.named "
                       "installs them).")


# ``replicated_sharding(ndim)``: the NamedSharding of an ``ndim``-dimensional value replicated
# on the context's AbstractMesh. Shardings are built above this module: plax.sharding.named
# installs it when it is imported.
_replicated_sharding = _no_sharding_types


def install_replicated_sharding(replicated_sharding, type_sharding=None) -> None:
    """Make ``replicated_sharding(ndim)`` what ``ShapedArray.sharding`` gives for an aval that
    carries no sharding, and ``type_sharding(sharding, ndim)`` what a sharding given to a
    ShapedArray becomes (padded to ``ndim`` entries, naming Explicit axes only)."""
    global _replicated_sharding, _type_sharding
    _replicated_sharding = replicated_sharding
    if type_sharding is not None:
        _type_sharding = type_sharding


_type_sharding = None


class ShapedArray(AbstractValue):
    """An array known by its shape, dtype and weak type, and on meshes with Explicit axes by
    its sharding (``f32[8@x,4]``).

    ``_sharding`` is a NamedSharding over an AbstractMesh whose spec has one entry per
    dimension and names Explicit axes only, or None when no dimension is split over an
    Explicit axis (the value is replicated there, or the mesh's axes are Auto).
    """

    __slots__ = ("shape", "dtype", "weak_type", "_sharding", "manual_axis_type", "_hash")

    def __init__(self, shape, dtype, weak_type: bool = False, sharding=None,
                 manual_axis_type: ManualAxisType = EMPTY_MAT):
        if not isinstance(dtype, (np.dtype, dtypes.ExtendedDType)):
            dtype = np.dtype(dtype)
        shape = _valid_shape(shape, dtype)
        self.shape = shape
        self.dtype = dtype
        self.weak_type = bool(weak_type)
        if sharding is not None:
            if len(sharding.spec) > len(shape):
                raise ValueError(f"the sharding {sharding.spec} of a type must have one entry per "
                                 f"dimension of shape {shape}")
            if len(sharding.spec) < len(shape) or not _names_explicit_only(sharding):
                sharding = _type_sharding(sharding, len(shape))
            if sharding is None or _names_no_axis(sharding.spec):
                sharding = None  # replicated (``aval.sharding`` given back, as flax's scan does)
            else:
                sharding_in_types[0] = True
        self._sharding = sharding
        # Inside shard_map: the manual mesh axes the value varies over (printed {V:x}).
        if type(manual_axis_type) is not ManualAxisType:
            raise TypeError("ShapedArray's manual_axis_type must be a ManualAxisType, got "
                            f"{type(manual_axis_type).__name__}.")
        self.manual_axis_type = manual_axis_type
        self._hash = hash((shape, dtype, self.weak_type, sharding, manual_axis_type._hash))

    ndim = property(lambda self: len(self.shape))
    # (a kernel's operand may name another: plax.pallas.memory_space)
    @property
    def memory_space(self):
        """Where the value lives: device memory."""
        from plax.core.memory import MemorySpace
        return MemorySpace.Device
    mat = property(lambda self: self.manual_axis_type, doc="Short for ``manual_axis_type``.")

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def sharding(self):
        """The type's NamedSharding (over the context's AbstractMesh, replicated, when the
        type carries none)."""
        if self._sharding is not None:
            return self._sharding
        return _replicated_sharding(len(self.shape))

    def to_tangent_aval(self) -> "ShapedArray":
        """The type of this type's tangents: the same, or float0 for integers, booleans and
        keys (as ``plax.core.rules.tangent_aval``)."""
        if dtypes.is_inexact(self.dtype):
            return self
        return self.update(dtype=dtypes.float0, weak_type=False)

    to_cotangent_aval = to_tangent_aval

    def update(self, shape=None, dtype=None, weak_type=None, sharding=False,
               manual_axis_type=None) -> "ShapedArray":
        """A copy with some fields changed. The sharding is kept while the rank is
        (``sharding=None`` drops it); the manual axis type is kept."""
        if dtype is None and sharding is False and manual_axis_type is None:
            # The common internal case (a new shape or weak type): only a new shape needs checking.
            shape = self.shape if shape is None else _valid_shape(shape, self.dtype)
            return unchecked_shaped_array(
                shape, self.dtype, self.weak_type if weak_type is None else bool(weak_type),
                self._sharding if len(shape) == len(self.shape) else None, self.manual_axis_type)
        shape = self.shape if shape is None else shape
        if sharding is False:
            sharding = self._sharding if len(shape) == len(self.shape) else None
        return ShapedArray(shape, self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type, sharding,
                           self.manual_axis_type if manual_axis_type is None else
                           manual_axis_type)

    def strip_weak_type(self) -> "ShapedArray":
        return self.update(weak_type=False) if self.weak_type else self

    normalize = strip_weak_type

    # An array is its own lo value in the hi-type protocol (plax.core.hi_types), so hi types
    # built from arrays can treat their array parts like any other part.
    is_high = False
    has_qdd = False

    def lo_ty(self) -> list:
        return [self]

    def lower_val(self, value) -> list:
        return [value]

    def raise_val(self, value):
        return value

    def __eq__(self, other):
        return (type(other) is ShapedArray and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type
                and self._sharding == other._sharding
                and self.manual_axis_type == other.manual_axis_type)

    def __hash__(self):
        return self._hash

    def str_short(self, short_dtypes: bool = True) -> str:
        mat, spec = self.manual_axis_type, getattr(self._sharding, "spec", None)
        if spec is not None and (spec.unreduced or spec.reduced):  # Explicit axes' ones
            mat = ManualAxisType(varying=mat.varying, unreduced=mat.unreduced | spec.unreduced,
                                 reduced=mat.reduced | spec.reduced,
                                 _order=mat._order or self._sharding.mesh.axis_names)
        return self._type_text(short_dtypes) + mat.text()

    def _type_text(self, short_dtypes: bool) -> str:
        name = short_dtype_name(self.dtype) if short_dtypes else str(self.dtype.name)
        if self._sharding is None:
            return f"{name}[{','.join(str(d) for d in self.shape)}]"
        dims = []
        for d, entry in zip(self.shape, self._sharding.spec):
            if entry is None:
                dims.append(str(d))
            elif isinstance(entry, tuple):
                dims.append(f"{d}@({','.join(entry)})")
            else:
                dims.append(f"{d}@{entry}")
        return f"{name}[{','.join(dims)}]"

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_short(short_dtypes=False)}{weak})"

    def __str__(self):  # as JAX prints a type: ``~float32[8@x,4]`` (~: weakly typed)
        return ("~" if self.weak_type else "") + self.str_short(short_dtypes=False)


def _names_explicit_only(sharding) -> bool:
    explicit = sharding.mesh.explicit_axes
    return all(a in explicit for a in sharding.spec.mesh_axes())


def _names_no_axis(spec) -> bool:
    return all(entry is None for entry in spec) and not getattr(spec, "unreduced", None) \
        and not getattr(spec, "reduced", None)


_new_object = object.__new__


def unchecked_shaped_array(shape: tuple, dtype, weak_type: bool = False, sharding=None,
                           manual_axis_type: ManualAxisType = EMPTY_MAT) -> ShapedArray:
    """A ShapedArray built without ``ShapedArray()``'s checks, for abstract rules whose fields
    are valid by construction: ``shape`` a tuple of Python ints taken from valid avals,
    ``dtype`` a ``np.dtype`` or ExtendedDType, ``weak_type`` a bool, ``sharding`` None or one
    spec entry per dimension. Anything from a user goes through ``ShapedArray()``."""
    aval = _new_object(ShapedArray)
    aval.shape = shape
    aval.dtype = dtype
    aval.weak_type = weak_type
    aval._sharding = sharding
    aval.manual_axis_type = manual_axis_type
    aval._hash = hash((shape, dtype, weak_type, sharding, manual_axis_type._hash))
    if sharding is not None:
        sharding_in_types[0] = True
    return aval


def physical_aval(aval: ShapedArray) -> ShapedArray:
    """How values of ``aval`` are stored: an extended dtype (a PRNG key) as its physical
    element type with the element's trailing dimensions; any other aval as itself."""
    dt = aval.dtype
    if not isinstance(dt, dtypes.ExtendedDType):
        return aval
    s = aval._sharding
    if s is not None:
        s = type(s)(s.mesh, tuple(s.spec) + (None,) * len(dt.physical_shape))
    return ShapedArray(aval.shape + dt.physical_shape, dt.physical_dtype, sharding=s,
                       manual_axis_type=aval.manual_axis_type)


_SCALAR_TYPES = (bool, int, float, complex)


class WeakHostArray(np.ndarray):
    """A host value that is weakly typed, like the Python scalar it came from.

    Used when a Python scalar is converted to another array's dtype: it keeps
    its weak type so that ``weak_f32 + 1.0`` stays weak.
    """
    weak_type = True


def weak_host_value(value, dtype) -> np.ndarray:
    return np.asarray(value, dtype=dtype).view(WeakHostArray)


def has_array_protocol(x) -> bool:
    """Whether ``x`` converts itself to an array (JAX's ``__jax_array__``, or ``__plax_array__``)."""
    return hasattr(x, "__jax_array__") or hasattr(x, "__plax_array__")


def from_array_protocol(x):
    """The array an object with ``__jax_array__`` (or ``__plax_array__``) stands for."""
    method = getattr(x, "__jax_array__", None)
    return method() if method is not None else x.__plax_array__()


def abstractify(x) -> ShapedArray:
    """The ShapedArray of a concrete value (Array, Tracer, NumPy value or Python scalar)."""
    t = type(x)
    if t in hi_value_types:  # (its type is its own, whatever attributes it forwards)
        return pytype_aval_mappings[t](x)
    aval = getattr(x, "aval", None)
    if isinstance(aval, ShapedArray):
        return aval
    if t in _SCALAR_TYPES:
        return unchecked_shaped_array(
            (), dtypes.canonicalize_dtype(dtypes.python_scalar_dtypes[t]), t is not bool)
    if isinstance(x, (np.ndarray, np.generic)):  # NumPy shapes are valid (and dtypes narrow)
        if isinstance(x, np.ma.MaskedArray):
            raise masked_array_error()
        return unchecked_shaped_array(x.shape, dtypes.canonicalize_dtype(x.dtype),
                                      t is WeakHostArray)
    if hasattr(x, "__plax_array__"):
        return abstractify(x.__plax_array__())
    if hasattr(x, "__jax_array__"):
        raise ValueError(
            f"Triggering __jax_array__() during abstractification is no longer supported: a "
            f"{t.__name__} was passed where an array was expected (to a jitted or transformed "
            "function). Convert it with plax.numpy.asarray() first, or register its type as a "
            "pytree.")
    handler = pytype_aval_mappings.get(t)
    if handler is not None:  # a type a library registered (JAX's extension hook)
        return handler(x)
    raise TypeError(f"Value {x!r} of type {t.__name__} is not a valid JAX type: "
                    "expected an array, a NumPy value or a Python scalar.")


def masked_array_error() -> ValueError:
    """NumPy masked arrays are refused, not read as their data: the mask would be lost."""
    return ValueError("numpy masked arrays are not supported as inputs to plax functions (their "
                      "mask would be lost). Use arr.filled(value) to make a standard numpy "
                      "array first.")


def is_valid_value(x) -> bool:
    return (type(x) in _SCALAR_TYPES or isinstance(x, (np.ndarray, np.generic))
            or isinstance(getattr(x, "aval", None), ShapedArray))


# JAX's hooks for value types, by exact type: ``pytype_aval_mappings[t](x) -> aval`` and
# ``canonicalize_dtype_handlers[t](x) -> x`` as a NumPy value of the canonical dtype. plax
# knows arrays, NumPy values and Python scalars itself (their entries are here for libraries
# that copy them onto their own types); a library registers other types (TFP's variables).
def _numpy_aval(x) -> ShapedArray:
    return unchecked_shaped_array(np.shape(x), dtypes.canonicalize_dtype(np.result_type(x)),
                                  type(x) in _SCALAR_TYPES and type(x) is not bool)


def _numpy_canonical(x):
    return np.asarray(x, dtypes.canonicalize_dtype(np.result_type(x)))


# The value classes registered with ``plax.core.hi_types.register_hitype`` (by exact type).
hi_value_types: set = set()

_HOST_TYPES = (np.ndarray, *_SCALAR_TYPES, *(np.dtype(c).type for c in "?bBhHiIlLqQefdgFDG"))
pytype_aval_mappings: dict = dict.fromkeys(_HOST_TYPES, _numpy_aval)
canonicalize_dtype_handlers: dict = dict.fromkeys(_HOST_TYPES, _numpy_canonical)
