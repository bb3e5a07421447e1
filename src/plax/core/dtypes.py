"""dtypes: canonicalisation, weak types and the type-promotion lattice.

plax follows JAX's promotion rules: a lattice over dtypes plus three "weak"
nodes (``int``, ``float``, ``complex``) that stand for Python scalars, so that
``int8_array + 1`` stays int8 and ``float16_array * 2.0`` stays float16.
With 64-bit types off (the default) every 64-bit dtype is narrowed to its
32-bit sibling before it reaches XLA.
"""
from __future__ import annotations

import functools
import sys
import threading
import warnings

import numpy as np

from plax.core.config import config

# --- the dtypes plax knows ----------------------------------------------------
# ml_dtypes' types (bfloat16, the float8s, int4, ...) are loaded on first need: importing
# ml_dtypes costs more than the rest of ``import plax``. Reading one of the names below
# (``dtypes.bfloat16``, ``jnp.float8_e4m3fn``) imports it; so does a dtype string plax does
# not know (``"bfloat16"``). A value of one of its types can only exist once someone
# imported it, so the tables below learn them (``_learn_ml_dtypes``) on their first miss.
# The names XLA's CPU client holds arrays of (JAX 0.10's set): bfloat16, the float8s, block-
# scaled formats' elements and scales (float4_e2m1fn, float8_e8m0fnu), 2- and 4-bit integers.
# (float6_* and 1-bit integers are scalar types only: XLA's CPU client cannot hold them.)
_ML_FLOAT8_NAMES = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                    "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float8_e8m0fnu",
                    "float4_e2m1fn")
_ML_SMALL_INT_BITS = {"int4": 4, "uint4": 4, "int2": 2, "uint2": 2}
ML_DTYPE_NAMES = frozenset({"bfloat16", *_ML_FLOAT8_NAMES, *_ML_SMALL_INT_BITS})
_ml_dtypes = None  # the module, once loaded
_ml_dtypes_lock = threading.Lock()


def ml_dtypes_module():
    """ml_dtypes, imported on the first call (and plax's dtype tables taught its types)."""
    if _ml_dtypes is None:
        with _ml_dtypes_lock:  # two threads must not teach the tables twice
            if _ml_dtypes is None:
                import ml_dtypes
                _learn_ml_dtypes(ml_dtypes)
    return _ml_dtypes


def _sync_ml_dtypes() -> bool:
    """Teach the tables ml_dtypes' types if someone imported it since; True if they changed."""
    if _ml_dtypes is None and "ml_dtypes" in sys.modules:
        ml_dtypes_module()
        return True
    return False


def __getattr__(name):
    if name in ML_DTYPE_NAMES:
        return getattr(ml_dtypes_module(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _DtypeSet(set):
    """A set of dtypes that learns ml_dtypes' types on a miss (see ``_sync_ml_dtypes``)."""

    def __contains__(self, item) -> bool:
        return set.__contains__(self, item) or (
            _sync_ml_dtypes() and set.__contains__(self, item))


def np_dtype(x) -> np.dtype:
    """``np.dtype(x)``, also for ml_dtypes' names (``"bfloat16"``) before ml_dtypes loads."""
    try:
        return np.dtype(x)
    except TypeError:
        if _ml_dtypes is None and isinstance(x, str):
            ml_dtypes_module()
            return np.dtype(x)
        raise


bool_ = np.bool_
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
float16, float32, float64 = np.float16, np.float32, np.float64
complex64, complex128 = np.complex64, np.complex128

# float0 is the tangent type of integer and boolean values: it carries no data.
float0 = np.dtype([("float0", np.void, 0)])

_FLOAT8: list = []  # ml_dtypes' floats but bfloat16, filled by _learn_ml_dtypes
_SMALL_INT: list = []  # int4, uint4, int2, uint2, likewise
_SUB_BYTE_BITS: dict = {}
_CUSTOM_FLOATS = _DtypeSet()  # _FLOAT8 and bfloat16
_CUSTOM_INTS = _DtypeSet()  # _SMALL_INT
_SIGNED = [np.dtype(t) for t in (int8, int16, int32, int64)]
_UNSIGNED = [np.dtype(t) for t in (uint8, uint16, uint32, uint64)]
_FLOATS = [np.dtype(t) for t in (float16, float32, float64)]  # NumPy's
_COMPLEX = [np.dtype(complex64), np.dtype(complex128)]
_BOOL = np.dtype(bool_)

# --- extended dtypes (PRNG keys) ---------------------------------------------------
class extended(np.generic):
    """The scalar type of every extended dtype (``jax.dtypes.extended``)."""


class prng_key(extended):
    """The scalar type of typed PRNG keys (``jax.dtypes.prng_key``)."""


class ExtendedDType:
    """A dtype that is not a NumPy dtype: each element is stored as a small array of
    ``physical_dtype`` with shape ``physical_shape`` (trailing dimensions of the buffer).

    Arithmetic does not apply to these values; shape operations, selection and comparison
    for equality do, on the physical layout. PRNG key types are plax's own; a user's
    subclass (as JAX's extension API has it) says how its values behave in ``_rules``:
    ``physical_element_aval(dtype)`` (the stored element), ``convert_to(other, dtype)`` /
    ``convert_from(dtype, other)`` or ``allow_conversion`` (``convert_element_type`` to and
    from the physical type), and for differentiation ``tangent_dtype(dtype)``, with
    ``zero(dtype)`` and ``add(dtype, x, y)`` where the tangents are of this dtype.
    """
    type = extended
    kind = "V"  # numeric and boolean branches keyed on ``dtype.kind`` never take it
    name: str

    @property
    def physical_shape(self) -> tuple:
        return tuple(self._rules.physical_element_aval(self).shape)

    @property
    def physical_dtype(self) -> np.dtype:
        return np.dtype(self._rules.physical_element_aval(self).dtype)

    @property
    def itemsize(self) -> int:
        n = 1
        for d in self.physical_shape:
            n *= d
        return n * self.physical_dtype.itemsize

    def __repr__(self):
        return self.name

    __str__ = __repr__


class KeyType(ExtendedDType):
    """The dtype of typed PRNG keys of one implementation, printed ``key<tag>``."""
    type = prng_key
    physical_shape: tuple = ()  # (set per implementation: plain attributes, not _rules)
    physical_dtype = np.dtype(np.uint32)

    def __init__(self, impl):
        self._impl = impl
        self.name = f"key<{impl.tag}>"
        self.physical_shape = tuple(impl.key_shape)
        self.physical_dtype = np.dtype(np.uint32)

    def __eq__(self, other):
        return type(other) is KeyType and other._impl is self._impl

    def __hash__(self):
        return hash(("KeyType", id(self._impl)))


class primal_tangent_dtype_scalar(extended):
    """The scalar type of the dtypes ``primal_tangent_dtype`` makes."""


class _PrimalTangentRules:
    def __init__(self, dt):
        self._dt = dt

    def physical_element_aval(self, dtype):
        from plax.core.avals import ShapedArray
        return ShapedArray((), self._dt.primal_dtype)

    def tangent_dtype(self, dtype):
        return self._dt.tangent_dtype

    allow_conversion = True


class PrimalTangentDType(ExtendedDType):
    """Values stored as ``primal_dtype`` whose tangents have dtype ``tangent_dtype``."""
    type = primal_tangent_dtype_scalar

    def __init__(self, primal_dtype, tangent_dtype, name: str):
        self.primal_dtype, self.tangent_dtype, self.name = primal_dtype, tangent_dtype, name
        self._rules = _PrimalTangentRules(self)

    def __eq__(self, other):
        return type(other) is PrimalTangentDType and (
            other.primal_dtype, other.tangent_dtype, other.name) == (
            self.primal_dtype, self.tangent_dtype, self.name)

    def __hash__(self):
        return hash((PrimalTangentDType, self.primal_dtype, self.tangent_dtype, self.name))


def primal_tangent_dtype(primal_dtype, tangent_dtype, name: str | None = None):
    """An extended dtype whose values are stored as ``primal_dtype`` and whose tangents have
    ``tangent_dtype`` (``jax.experimental.primal_tangent_dtype``): convert a value to it
    with ``convert_element_type`` for derivatives carried in another type (a bfloat16
    tangent for a float32 value, a float tangent for an integer one)."""
    primal, tangent = np_dtype(primal_dtype), np_dtype(tangent_dtype)
    short = lambda d: (d.name.replace("float", "f").replace("uint", "u")  # noqa: E731
                       .replace("int", "i").replace("complex", "c"))
    return PrimalTangentDType(primal, tangent,
                              name or f"PrimalTangentDType{{{short(primal)}/{short(tangent)}}}")


def is_extended(dtype) -> bool:
    return isinstance(dtype, ExtendedDType)


# ml_dtypes types plax.numpy names (as JAX's) that no plax Array can hold.
_ML_FLOAT6_NAMES = ("float6_e2m3fn", "float6_e3m2fn")
ML_SCALAR_ONLY_NAMES = frozenset({*_ML_FLOAT6_NAMES, "int1", "uint1"})

def _refuse_unheld(dt: np.dtype, name: str) -> None:
    if dt.name in ML_SCALAR_ONLY_NAMES:
        raise TypeError(f"{name} {dt} is not a valid JAX array type on this backend: XLA's "
                        "client cannot hold arrays of it (as in JAX, it exists as a scalar "
                        "type only). Use a wider type, e.g. float8_e4m3fn or int4.")


# Every dtype that can live in a plax Array.
supported_dtypes = _DtypeSet([_BOOL, *_SIGNED, *_UNSIGNED, *_FLOATS, *_COMPLEX])
scalar_only_dtypes = _DtypeSet()  # float6_*, int1, uint1 (ML_SCALAR_ONLY_NAMES)


def _learn_ml_dtypes(ml) -> None:
    """Add ml_dtypes' types to the tables; the promotion lattice is rebuilt with them."""
    global _ml_dtypes
    float8 = [np.dtype(getattr(ml, n)) for n in _ML_FLOAT8_NAMES]
    small = [np.dtype(getattr(ml, n)) for n in _ML_SMALL_INT_BITS]
    bf16 = np.dtype(ml.bfloat16)
    # The scalar-only types are dtypes (categories, sizes, promotion) but not array types.
    float6 = [np.dtype(getattr(ml, n)) for n in _ML_FLOAT6_NAMES]
    int1 = [np.dtype(ml.int1), np.dtype(ml.uint1)]
    _FLOAT8.extend(float8 + float6)
    _SMALL_INT.extend(small + int1)
    _SUB_BYTE_BITS.update({np.dtype(getattr(ml, n)): b for n, b in _ML_SMALL_INT_BITS.items()})
    _SUB_BYTE_BITS.update({np.dtype(ml.float4_e2m1fn): 4, **dict.fromkeys(float6, 6),
                           **dict.fromkeys(int1, 1)})
    set.update(_CUSTOM_FLOATS, float8 + float6 + [bf16])
    set.update(_CUSTOM_INTS, small + int1)
    set.update(supported_dtypes, small + float8 + [bf16])
    set.update(scalar_only_dtypes, float6 + int1)
    _upper_bounds.cache_clear()
    _join.cache_clear()
    _ml_dtypes = ml

_NARROW = {np.dtype(int64): np.dtype(int32), np.dtype(uint64): np.dtype(uint32),
           np.dtype(float64): np.dtype(float32), np.dtype(complex128): np.dtype(complex64)}


def x64_enabled() -> bool:
    return config.read("enable_x64")


@functools.lru_cache(maxsize=None)
def _canonicalize(dtype: np.dtype, x64: bool) -> np.dtype:
    if x64:
        return dtype
    return _NARROW.get(dtype, dtype)


def canonicalize_dtype(dtype) -> np.dtype:
    """The dtype an array of ``dtype`` really has in plax (64-bit narrowed when x64 is off)."""
    if isinstance(dtype, ExtendedDType):
        return dtype
    dt = np_dtype(dtype)
    if dt not in supported_dtypes and dt != float0:
        _refuse_unheld(dt, "dtype")
        raise TypeError(f"dtype {dt} is not a valid JAX array type: plax, like JAX, only "
                        "supports arrays of booleans, integers, floats and complex numbers.")
    return _canonicalize(dt, x64_enabled())


# Python scalar types map to weak dtypes.
_PY_SCALAR_DEFAULT = {bool: np.dtype(bool_), int: np.dtype(int64),
                      float: np.dtype(float64), complex: np.dtype(complex128)}
python_scalar_dtypes = _PY_SCALAR_DEFAULT


def default_int_dtype() -> np.dtype:
    return canonicalize_dtype(int64)


def default_float_dtype() -> np.dtype:
    return canonicalize_dtype(float64)


def default_complex_dtype() -> np.dtype:
    return canonicalize_dtype(complex128)


def to_inexact_dtype(dtype) -> np.dtype:
    """The float type a non-inexact ``dtype`` computes in where a float is needed (``sin``,
    ``/``, ``mean``, ...): float32 for booleans and integers of up to 32 bits, float64 (when
    x64 is on) for 64-bit integers, as JAX's; inexact dtypes are their own."""
    dt = np.dtype(dtype)
    if is_inexact(dt):
        return dt
    wide = dt.kind in "iu" and dt.itemsize == 8
    return canonicalize_dtype(float64 if wide else np.float32)


# --- categories ---------------------------------------------------------------
def issubdtype(a, b) -> bool:
    """Like ``np.issubdtype`` but knowing that bfloat16/float8 are floats and int4 an integer."""
    if a is None or b is None:
        return False
    if isinstance(a, ExtendedDType) or isinstance(b, ExtendedDType):
        a_type = a.type if isinstance(a, ExtendedDType) else a
        if isinstance(b, ExtendedDType):
            return a == b
        return isinstance(a_type, type) and issubclass(a_type, extended) and \
            isinstance(b, type) and issubclass(a_type, b)
    if isinstance(a, type) and issubclass(a, extended):
        return isinstance(b, type) and issubclass(a, b)
    if isinstance(b, type) and issubclass(b, extended):
        return False
    a_dt = a if isinstance(a, np.dtype) else (np_dtype(a) if not _is_abstract(a) else None)
    if a_dt is None:
        return np.issubdtype(a, b)
    if a_dt in _CUSTOM_FLOATS:
        if _is_abstract(b):
            return b in (np.floating, np.inexact, np.number, np.generic)
        return a_dt == np_dtype(b)
    if a_dt in _CUSTOM_INTS:
        if _is_abstract(b):
            kind = np.signedinteger if a_dt.kind == "i" or a_dt.name.startswith("int") \
                else np.unsignedinteger
            return b in (kind, np.integer, np.number, np.generic)
        return a_dt == np_dtype(b)
    if not _is_abstract(b) and np_dtype(b).name in ML_DTYPE_NAMES:
        return False
    return np.issubdtype(a_dt, b)


def _is_abstract(t) -> bool:
    return isinstance(t, type) and issubclass(t, np.generic) and t in (
        np.generic, np.number, np.integer, np.signedinteger, np.unsignedinteger,
        np.inexact, np.floating, np.complexfloating, np.bool_, np.character, np.flexible)


def is_float(dtype) -> bool:
    return issubdtype(dtype, np.floating)


def is_complex(dtype) -> bool:
    return issubdtype(dtype, np.complexfloating)


def is_inexact(dtype) -> bool:
    return issubdtype(dtype, np.inexact)


def is_integer(dtype) -> bool:
    return issubdtype(dtype, np.integer)


def is_unsigned(dtype) -> bool:
    return issubdtype(dtype, np.unsignedinteger)


def is_bool(dtype) -> bool:
    return not isinstance(dtype, ExtendedDType) and np.dtype(dtype) == _BOOL


def finfo(dtype):
    """Machine limits of a floating-point type (``ml_dtypes.finfo``: NumPy's and ml_dtypes')."""
    ml = _ml_dtypes_for(dtype)
    return np.finfo(dtype) if ml is None else ml.finfo(dtype)


def iinfo(dtype):
    """Machine limits of an integer type (``ml_dtypes.iinfo``: NumPy's and ml_dtypes')."""
    ml = _ml_dtypes_for(dtype)
    return np.iinfo(dtype) if ml is None else ml.iinfo(dtype)


def _ml_dtypes_for(dtype):
    """ml_dtypes if ``dtype`` may be one of its types (or names); None while it cannot be."""
    _sync_ml_dtypes()
    if _ml_dtypes is None and isinstance(dtype, str) and (
            dtype in ML_DTYPE_NAMES or dtype in ML_SCALAR_ONLY_NAMES):
        ml_dtypes_module()
    return _ml_dtypes


def lowest_value(dtype):
    """The smallest value of ``dtype`` (-inf for inexact types): the identity of max."""
    if is_bool(dtype):
        return False
    if is_integer(dtype):
        return iinfo(dtype).min
    return complex(-np.inf, 0) if is_complex(dtype) else -np.inf


def highest_value(dtype):
    """The largest value of ``dtype`` (+inf for inexact types): the identity of min."""
    if is_bool(dtype):
        return True
    if is_integer(dtype):
        return iinfo(dtype).max
    return complex(np.inf, 0) if is_complex(dtype) else np.inf


def itemsize_bits(dtype) -> int:
    if dtype is None:
        raise ValueError("dtype cannot be None.")
    if isinstance(dtype, ExtendedDType):
        return dtype.itemsize * 8
    dt = np_dtype(dtype)
    if dt.name in ML_DTYPE_NAMES or dt.name in ML_SCALAR_ONLY_NAMES:
        ml_dtypes_module()
    return _SUB_BYTE_BITS.get(dt, dt.itemsize * 8)


# --- the promotion lattice ----------------------------------------------------
class _Weak:
    """A lattice node for a Python scalar kind (weakly typed)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


WEAK_INT, WEAK_FLOAT, WEAK_COMPLEX = _Weak("int"), _Weak("float"), _Weak("complex")
_WEAK_OF_KIND = {"i": WEAK_INT, "u": WEAK_INT, "f": WEAK_FLOAT, "c": WEAK_COMPLEX}
_WEAK_DEFAULT = {WEAK_INT: np.dtype(int64), WEAK_FLOAT: np.dtype(float64),
                 WEAK_COMPLEX: np.dtype(complex128)}


def _lattice(x64: bool, strict: bool = False) -> dict:
    d = np.dtype
    b1 = _BOOL
    i8, i16, i32, i64 = _SIGNED
    u8, u16, u32, u64 = _UNSIGNED
    f16, f32, f64 = d(float16), d(float32), d(float64)
    c64, c128 = _COMPLEX
    edges = {
        b1: [WEAK_INT],
        WEAK_INT: [u8, i8, *_SMALL_INT],
        u8: [i16, u16], u16: [i32, u32], u32: [i64, u64], u64: [WEAK_FLOAT],
        i8: [i16], i16: [i32], i32: [i64], i64: [WEAK_FLOAT],
        WEAK_FLOAT: [*_FLOAT8, f16, WEAK_COMPLEX],
        f16: [f32], f32: [f64, c64], f64: [c128],
        WEAK_COMPLEX: [c64], c64: [c128], c128: [],
        **{t: [] for t in _FLOAT8 + _SMALL_INT},
    }
    if _ml_dtypes is not None:  # bfloat16 sits beside float16
        bf16 = d(_ml_dtypes.bfloat16)
        edges[WEAK_FLOAT].append(bf16)
        edges[bf16] = [f32]
    if strict:  # jax_numpy_dtype_promotion='strict': a Python scalar meets its kind or wider
        concrete = [t for t in edges if not isinstance(t, _Weak)]
        edges = {t: [] for t in concrete}
        edges[WEAK_INT] = [WEAK_FLOAT] + [t for t in concrete
                                          if t.kind in "iu" or t in _SMALL_INT]
        edges[WEAK_FLOAT] = [WEAK_COMPLEX] + [t for t in concrete
                                              if t.kind == "f" or t in _CUSTOM_FLOATS]
        edges[WEAK_COMPLEX] = [t for t in concrete if t.kind == "c"]
    elif not x64:
        # Without x64 no promotion may create a 64-bit type from narrower inputs.
        edges[u32] = [i32, u64]
    return edges


@functools.lru_cache(maxsize=4)
def _upper_bounds(x64: bool, strict: bool = False) -> dict:
    edges = _lattice(x64, strict)
    ub = {}

    def visit(n):
        if n not in ub:
            s = {n}
            for m in edges[n]:
                s |= visit(m)
            ub[n] = frozenset(s)
        return ub[n]

    for n in edges:
        visit(n)
    return ub


class TypePromotionError(ValueError):
    pass


@functools.lru_cache(maxsize=4096)
def _join(nodes: tuple, x64: bool, strict: bool = False):
    ub = _upper_bounds(x64, strict)
    common = frozenset.intersection(*(ub[n] for n in nodes))
    present = common & set(nodes)
    lub = present or {c for c in common if common <= ub[c]}
    if len(lub) == 1:
        return next(iter(lub))
    names = tuple(str(n) for n in nodes)
    if strict:
        raise TypePromotionError(
            f"Input dtypes {names} have no available implicit dtype promotion path when "
            "jax_numpy_dtype_promotion=strict. Cast the inputs to the dtype you want (e.g. "
            "x.astype('float32')), or set jax_numpy_dtype_promotion='standard'.")
    small_floats = [n for n in nodes if n in _FLOAT8]
    if small_floats:
        bits = _SUB_BYTE_BITS.get(small_floats[0], 8)
        why = f"{bits}-bit floats do not support implicit promotion"
    elif any(n in _SMALL_INT for n in nodes):
        why = "1-bit, 2-bit and 4-bit integers do not support implicit promotion"
    else:
        why = "the lattice has no common type for them"
    raise TypePromotionError(
        f"Input dtypes {names} have no available implicit dtype promotion path: {why}. "
        "Cast the inputs explicitly, e.g. x.astype('float32').")


def _dtype_and_weak(x) -> tuple:
    """The dtype of a value or dtype as promotion sees it (not narrowed), and whether it is
    weak (Python scalars and the types int/float/complex; values whose aval says so)."""
    if x is None:  # (NumPy's default dtype, as np.dtype(None) and JAX's result_type read it)
        return np.dtype(np.float64), False
    py = x if isinstance(x, type) and x in _PY_SCALAR_DEFAULT else type(x)
    if py in _PY_SCALAR_DEFAULT:
        return _PY_SCALAR_DEFAULT[py], py is not bool
    aval = getattr(x, "aval", None)
    if aval is not None and hasattr(aval, "weak_type"):
        dt, weak = aval.dtype, aval.weak_type
    elif hasattr(x, "dtype") and not isinstance(x, type):
        dt, weak = dtype(x), bool(getattr(x, "weak_type", False))
    else:
        dt, weak = dtype(x), False
    if dt == float0:
        raise ValueError("float0 values cannot take part in type promotion.")
    if isinstance(dt, np.dtype) and dt.name in ML_DTYPE_NAMES | ML_SCALAR_ONLY_NAMES:
        ml_dtypes_module()  # the lattice learns its types (the user imported ml_dtypes)
    return dt, weak and dt != _BOOL


def _weak_node(dt):
    """The lattice node of a weakly typed value of ``dt``: its Python scalar kind."""
    return WEAK_FLOAT if dt in _CUSTOM_FLOATS else _WEAK_OF_KIND[dt.kind]


def _node_of(x):
    """The lattice node of a value or dtype, and whether it is weak."""
    dt, weak = _dtype_and_weak(x)
    return (_weak_node(dt), True) if weak else (dt, False)


def lattice_result(*args) -> tuple:
    """``(dtype, weak)`` where the promotion lattice joins ``args`` (64-bit types narrowed when
    x64 is off). A lone value keeps its dtype and weakness; equal dtypes meet as themselves;
    values all weak meet as their dtypes, the result weak; otherwise a weak value meets as
    its Python scalar kind."""
    x64, strict = x64_enabled(), _strict_promotion()
    # Inputs are narrowed before they meet (as in JAX): with x64 off, uint64 + int8
    # is uint32 + int8 = int32, not the float that uint64 + int8 would give.
    pairs = [(_canonical_node(d, x64), w) for d, w in map(_dtype_and_weak, args)]
    if len(pairs) == 1:
        return pairs[0]
    all_weak = all(w for _, w in pairs)
    if len({d for d, _ in pairs}) == 1 and not all_weak:
        return pairs[0][0], False
    if all_weak and not strict:
        nodes = tuple(dict.fromkeys(d for d, _ in pairs))
    else:
        nodes = tuple(dict.fromkeys(_weak_node(d) if w else d for d, w in pairs))
    if len(nodes) > 1 and any(isinstance(n, ExtendedDType) for n in nodes):
        raise_extended_promotion(nodes)
    node = nodes[0] if len(nodes) == 1 else _join(nodes, x64, strict)
    if isinstance(node, _Weak):
        return _canonicalize(_WEAK_DEFAULT[node], x64), True
    return node, all_weak and not strict and node != _BOOL


def result_type(*args, return_weak_type_flag: bool = False):
    """The dtype plax gives to an operation on ``args`` (values or dtypes).

    Python scalars are weak: they adopt the dtype of the array they meet. A weak result has
    the default dtype of its kind (bfloat16 and the float8s count as floats).
    """
    if not args:
        raise ValueError("at least one array or dtype is required")
    dt, weak = lattice_result(*args)
    if weak:
        kind = "f" if dt in _CUSTOM_FLOATS else dt.kind
        dt = _canonicalize(_KIND_DEFAULT[kind], x64_enabled())
    return (dt, weak) if return_weak_type_flag else dt


_KIND_DEFAULT = {"i": np.dtype(int64), "u": np.dtype(uint64), "f": np.dtype(float64),
                 "c": np.dtype(complex128)}


def raise_extended_promotion(nodes) -> None:
    """The error for mixing an extended dtype (a PRNG key) with other dtypes."""
    from plax.core.source_info import user_entry_name
    names = ", ".join(_canonicalize(_WEAK_DEFAULT[n], x64_enabled()).name if isinstance(n, _Weak)
                      else n.name for n in nodes)
    raise TypeError(f"{user_entry_name()} does not accept dtypes {names}. PRNG keys (extended "
                    "dtypes) do not mix with numbers: use jax.random.key_data(key) for the "
                    "integers inside a key.")


def _strict_promotion() -> bool:
    return config.read("numpy_dtype_promotion") == "strict"


def _canonical_node(node, x64: bool):
    return node if isinstance(node, _Weak) else _canonicalize(node, x64)


def promote_types(a, b) -> np.dtype:
    """The promoted dtype of two dtypes; the types int/float/complex count as weak.

    Unlike ``result_type`` the result is not narrowed when x64 is off.
    """
    na, nb = _node_of(a)[0], _node_of(b)[0]
    if na != nb and (isinstance(na, ExtendedDType) or isinstance(nb, ExtendedDType)):
        raise_extended_promotion((na, nb))
    node = na if na == nb else _join((na, nb), x64_enabled(), _strict_promotion())
    return _WEAK_DEFAULT[node] if isinstance(node, _Weak) else node


def dtype(x, canonicalize: bool = False) -> np.dtype:
    """The dtype of a value, dtype or scalar type, as plax sees it."""
    t = type(x)
    if t in _PY_SCALAR_DEFAULT:
        dt = _PY_SCALAR_DEFAULT[t]
    elif isinstance(x, type) and x in _PY_SCALAR_DEFAULT:
        dt = _PY_SCALAR_DEFAULT[x]
    elif isinstance(x, ExtendedDType):
        return x
    elif hasattr(x, "dtype") and not isinstance(x, type):
        dt = x.dtype
        if isinstance(dt, ExtendedDType):
            return dt
        dt = np_dtype(dt)
    else:
        dt = np_dtype(x)
    return canonicalize_dtype(dt) if canonicalize else dt


def is_weakly_typed(x) -> bool:
    if type(x) in (int, float, complex):
        return True
    aval = getattr(x, "aval", None)
    return bool(getattr(aval, "weak_type", False))


def canonicalize_user_dtype(dt, name: str = "dtype", fun_name: str | None = None) -> np.dtype:
    """A dtype the user asked for explicitly, checked and canonicalised.

    With x64 off a 64-bit request is truncated to 32 bits with a UserWarning, as in JAX
    (the Python types float, int and complex ask for the default type and do not warn).
    ``fun_name`` names the function in the warning; by default, the plax function the
    user called.
    """
    out = check_user_dtype(dt, name)
    canon = canonicalize_dtype(out)
    if canon != out and not any(dt is t for t in (float, int, complex)):
        from plax.core.source_info import user_entry_name, user_stacklevel
        warnings.warn(
            f"Explicitly requested dtype {out.name} requested in {fun_name or user_entry_name()} "
            f"is not available, and will be truncated to dtype {canon.name}. To enable more "
            "dtypes, set the jax_enable_x64 configuration option (plax.config.update("
            "'jax_enable_x64', True)) or the PLAX_ENABLE_X64 shell environment variable.",
            UserWarning, stacklevel=user_stacklevel())
    return canon


def check_user_dtype(dt, name: str = "dtype") -> np.dtype:
    """Validate a dtype a user passed, with a clear error if plax cannot hold it."""
    if isinstance(dt, ExtendedDType):
        return dt
    if hasattr(dt, "aval"):  # an Array or a Tracer (np.dtype would read its .dtype)
        raise ValueError("Passing an array as a dtype argument is no longer supported; "
                         "instead of dtype=arr use dtype=arr.dtype.")
    try:
        out = np_dtype(dt)
    except TypeError as e:
        raise TypeError(f"Invalid {name} argument: {dt!r} is not a dtype.") from e
    if out not in supported_dtypes and out != float0:
        _refuse_unheld(out, name)
        raise TypeError(f"{name} {out} is not a valid JAX array type: plax, like JAX, only "
                        "supports number and bool dtypes.")
    return out
