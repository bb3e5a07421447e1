"""Helpers shared by the lax primitive families: dtype and shape checks, parameter parsing
(padding types of windowed operations included)."""
from __future__ import annotations

import operator

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray, shape_entries
from plax.core.errors import InconclusiveDimensionOperation, shape_type_error

# Named dtype categories a primitive may accept.
_CATEGORIES = {
    "float": (dtypes.is_float, "floating"),
    "inexact": (dtypes.is_inexact, "floating, complexfloating"),
    "complex": (dtypes.is_complex, "complexfloating"),
    "int": (dtypes.is_integer, "integer"),
    "signed": (lambda d: dtypes.is_integer(d) and not dtypes.is_unsigned(d), "signedinteger"),
    "intbool": (lambda d: dtypes.is_integer(d) or dtypes.is_bool(d), "integer, bool"),
    "numeric": (lambda d: not dtypes.is_bool(d), "integer, floating, complexfloating"),
    "signed_numeric": (lambda d: not dtypes.is_bool(d) and not dtypes.is_unsigned(d),
                       "signedinteger, floating, complexfloating"),
    "real": (lambda d: not dtypes.is_complex(d), "bool, integer, floating"),
    "real_numeric": (lambda d: not dtypes.is_complex(d) and not dtypes.is_bool(d),
                     "integer, floating"),
    "any": (lambda d: True, "any"),
    "equality": (lambda d: True, "any"),  # ==, != : the one category PRNG keys are in
}


FLOAT0_ADVICE = (
    "float0s do not support any operations by design, because they are not compatible with "
    "non-trivial vector spaces. No implicit dtype conversion is done. You can use "
    "np.zeros_like(arr, dtype=np.float32) to cast a float0 array to a regular zeros array. \n"
    "If you didn't expect to get a float0 you might have accidentally taken a gradient with "
    "respect to an integer argument.")


# The (category, dtype) pairs check_dtype has accepted: a dtype's category never changes, so
# a pair seen once is accepted again by one set lookup (an abstract rule checks every operand).
_accepted: set = set()


def check_dtype(name: str, aval: ShapedArray, category: str, arg: str = "") -> None:
    """Raise TypeError unless ``aval``'s dtype is in the named ``category``."""
    if (category, aval.dtype) in _accepted:
        return
    if aval.dtype == dtypes.float0:
        raise TypeError(f"Called {name} with a float0 array. {FLOAT0_ADVICE}")
    ok, desc = _CATEGORIES[category]
    where = f" for argument {arg}" if arg else ""
    if dtypes.is_extended(aval.dtype) and category != "equality":
        accepted = f" Accepted dtypes are subtypes of {desc}." if category != "any" else ""
        raise TypeError(f"{name} does not accept dtype {aval.dtype.name}{where}.{accepted} PRNG "
                        "keys take only shape operations, selection and ==/!=; "
                        "jax.random.key_data(keys) gives their uint32 data.")
    if not ok(aval.dtype):
        raise TypeError(f"{name} does not accept dtype {aval.dtype.name}{where}. "
                        f"Accepted dtypes are subtypes of {desc}.")
    _accepted.add((category, aval.dtype))


def reject_keys(name: str, *avals: ShapedArray) -> None:
    """For primitives that accept any dtype but PRNG keys (sorting, products)."""
    for aval in avals:
        if dtypes.is_extended(aval.dtype):
            check_dtype(name, aval, "any")


def check_same_shapes(name: str, *avals: ShapedArray) -> tuple:
    """The result shape of an n-ary elementwise op.

    As in JAX, lax only broadcasts rank-0 operands and size-1 dimensions of
    operands of equal rank; anything else needs an explicit broadcast.
    """
    ranked = [a.shape for a in avals if a.shape != ()]
    if not ranked:
        return ()
    ranks = {len(s) for s in ranked}
    if len(ranks) != 1:
        raise TypeError(f"{name}: arrays must have the same number of dimensions, got "
                        f"{ {len(a.shape) for a in avals} }.")
    out = []
    for dims in zip(*ranked):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            raise TypeError(f"{name} got incompatible shapes for broadcasting: "
                            f"{', '.join(str(a.shape) for a in avals)}.")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


# The plax.numpy function that promotes its inputs, for lax functions named otherwise.
_NUMPY_NAMES = {
    "sub": "subtract", "mul": "multiply", "div": "divide", "rem": "fmod", "pow": "power",
    "max": "maximum", "min": "minimum", "atan2": "arctan2", "eq": "equal", "ne": "not_equal",
    "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "clamp": "clip",
    "select_n": "where", "shift_left": "left_shift", "shift_right_arithmetic": "right_shift",
    "shift_right_logical": "right_shift",
}


def check_same_dtypes(name: str, *avals: ShapedArray) -> np.dtype:
    dts = [a.dtype for a in avals]
    if any(d != dts[0] for d in dts):
        raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                        f"{', '.join(d.name for d in dts)}. (Tip: plax.numpy."
                        f"{_NUMPY_NAMES.get(name, name)} is a similar function that does automatic "
                        "type promotion on inputs).")
    return dts[0]


def weak_of(*avals: ShapedArray) -> bool:
    return all(a.weak_type for a in avals)


def canonical_axis(axis: int, ndim: int, name: str = "axis") -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"{name} {axis} is out of bounds for an array of rank {ndim}.")
    return axis % ndim if ndim else 0


def as_int_tuple(values, name: str) -> tuple:
    try:
        return tuple(int(operator.index(v)) for v in values)
    except InconclusiveDimensionOperation:  # symbolic sizes (plax.export)
        from plax.core.symbolic_shapes import DimExpr
        return tuple(v if type(v) is DimExpr else operator.index(v) for v in values)
    except TypeError as e:
        raise TypeError(f"{name} must be a sequence of integers, got {values!r}.") from e


def shape_tuple(shape, name: str) -> tuple:
    """A static shape given as a sequence of ints (or one int)."""
    shape = shape_entries(shape)
    try:
        return tuple(int(operator.index(d)) for d in shape)
    except InconclusiveDimensionOperation:  # symbolic sizes (plax.export)
        from plax.core.symbolic_shapes import checked_symbolic_shape
        return checked_symbolic_shape(shape)
    except TypeError:
        raise shape_type_error(shape, name) from None


def check_nonnegative(prim: str, what: str, values: tuple) -> None:
    if any(v < 0 for v in values):
        raise TypeError(f"{prim} {what} must have every element be nonnegative, got {values}.")


def real_dtype(dt) -> np.dtype:
    """The dtype of the real (or imaginary) part of values of dtype ``dt``."""
    return np.dtype(np.float64) if dt == np.complex128 else (
        np.dtype(np.float32) if dt == np.complex64 else dt)


def complex_dtype(dt) -> np.dtype:
    """The complex dtype with parts of the float dtype ``dt``."""
    return np.dtype(np.complex128) if dt == np.float64 else np.dtype(np.complex64)


def complex_extremum(ctx, direction: str, a: str, b: str, aval: ShapedArray) -> str:
    """Lowering of max (GT) or min (LT) of complex values, ordered by (real, imag) as JAX does.

    XLA's own complex maximum/minimum is not lexicographic.
    """
    part = aval.update(dtype=np.float64 if aval.dtype == np.complex128 else np.float32)
    ra, rb = (ctx.op1("stablehlo.real", [v], [aval], part) for v in (a, b))
    ia, ib = (ctx.op1("stablehlo.imag", [v], [aval], part) for v in (a, b))
    take_a = ctx.select(ctx.compare("EQ", ra, rb, part), ctx.compare(direction, ia, ib, part),
                        ctx.compare(direction, ra, rb, part), aval.update(dtype=np.bool_))
    return ctx.select(take_a, a, b, aval)


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """The list of (lo, hi) pads, one per dimension, for the padding type 'VALID', 'SAME' or
    'SAME_LOWER' (any case). As in JAX, only these strings are taken: explicit pairs are
    already pads (a TypeError says so)."""
    if not isinstance(padding, str):
        raise TypeError(f"Unknown padding type: {padding}. padtype_to_pads takes 'VALID', "
                        "'SAME' or 'SAME_LOWER'; a sequence of (low, high) pairs is already "
                        "explicit padding: pass it to the operation as it is.")
    return list(pads_for(in_shape, window_shape, window_strides, padding))


def pads_for(in_shape, window_shape, window_strides, padding: str) -> tuple:
    """``padtype_to_pads`` as a tuple of pairs (a primitive parameter)."""
    kind = padding.upper()
    if kind == "VALID":
        return ((0, 0),) * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise RuntimeError(f"Unrecognized padding type: expected 'VALID', 'SAME', or 'SAME_LOWER', "
                           f"got {padding}.")
    from plax.core.symbolic_shapes import DimExpr, max_dim
    pads = []
    for size, window, stride in zip(in_shape, window_shape, window_strides):
        size, window, stride = (d if type(d) is DimExpr else int(d)  # (symbolic: plax.export)
                                for d in (size, window, stride))
        out = (size + stride - 1) // stride
        total = max_dim((out - 1) * stride + window - size, 0)
        small, big = total // 2, total - total // 2
        pads.append((small, big) if kind == "SAME" else (big, small))
    return tuple(pads)
