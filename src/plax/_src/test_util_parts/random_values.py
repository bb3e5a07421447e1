"""The ``rand_*`` generators of JAX's test utilities: ``rand_x(rng)`` returns a function
``(shape, dtype) -> value`` drawing from ``rng`` (a ``np.random.RandomState``).

The draws are JAX's, call for call (which of ``rng.randn``/``rng.rand`` is called, how
often, in which order), so a test seeded as in JAX sees the same numbers. ``shape`` may be
a tuple, an int, or one of the scalar shapes (``NUMPY_SCALAR_SHAPE``,
``PYTHON_SCALAR_SHAPE``), which give a NumPy or a Python scalar.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from plax.core import dtypes as _dtypes
from plax.core.config import config
from plax._src.test_util_parts.cases import PYTHON_SCALAR_SHAPE, _cast_to_shape, _dims_of_shape


def _identity(x):
    return x


def _rand_dtype(rand, shape, dtype, scale=1.0, post=_identity):
    """``post(scale * rand(*dims))`` cast to ``dtype`` (a complex value draws its real part,
    then its imaginary part; an unsigned one takes the absolute value before scaling)."""
    dims = _dims_of_shape(shape)
    if _dtypes.issubdtype(dtype, np.unsignedinteger):
        def draw():
            return np.asarray(scale * abs(rand(*dims))).astype(dtype)
    else:
        def draw():
            return np.asarray(scale * rand(*dims)).astype(dtype)
    if _dtypes.issubdtype(dtype, np.complexfloating):
        vals = draw() + 1.0j * draw()
    else:
        vals = draw()
    return _cast_to_shape(np.asarray(post(vals), dtype), shape, dtype)


def rand_fullrange(rng, standardize_nans=False):
    """Values made of random bytes: every bit pattern of the dtype can come up (NaNs made
    standard ones with ``standardize_nans``)."""
    def gen(shape, dtype, post=_identity):
        dtype = np.dtype(dtype)
        size = dtype.itemsize * math.prod(_dims_of_shape(shape))
        vals = rng.randint(0, np.iinfo(np.uint8).max, size=size, dtype=np.uint8)
        vals = post(vals).view(dtype)
        if shape is PYTHON_SCALAR_SHAPE:
            # A Python int of the widest unsigned kind would overflow: use the signed one.
            if dtype == np.uint64:
                vals = vals.astype(np.int64)
            elif dtype == np.uint32 and not config.read("enable_x64"):
                vals = vals.astype(np.int32)
        vals = vals.reshape(shape)
        if standardize_nans and np.issubdtype(dtype, np.floating):
            vals[np.isnan(vals)] = np.nan
        return _cast_to_shape(vals, shape, dtype)
    return gen


def rand_default(rng, scale=3):
    """Normal values of standard deviation ``scale``."""
    return functools.partial(_rand_dtype, rng.randn, scale=scale)


def rand_nonzero(rng):
    """Normal values (deviation 3) with every exact zero made one."""
    def post(x):
        return np.where(x == 0, np.array(1, dtype=x.dtype), x)
    return functools.partial(_rand_dtype, rng.randn, scale=3, post=post)


def rand_positive(rng):
    """Uniform values in [1, 3)."""
    def post(x):
        return x + 1
    return functools.partial(_rand_dtype, rng.rand, scale=2, post=post)


def rand_small(rng):
    """Normal values of deviation 1e-3."""
    return functools.partial(_rand_dtype, rng.randn, scale=1e-3)


def rand_not_small(rng, offset=10.0):
    """Normal values (deviation 3) pushed ``offset`` away from zero."""
    def post(x):
        return x + np.where(x > 0, offset, -offset)
    return functools.partial(_rand_dtype, rng.randn, scale=3.0, post=post)


def rand_small_positive(rng):
    """Uniform values in [0, 2e-5)."""
    return functools.partial(_rand_dtype, rng.rand, scale=2e-5)


def rand_uniform(rng, low=0.0, high=1.0):
    """Uniform values in [low, high)."""
    assert low < high

    def post(x):
        return x * (high - low) + low
    return functools.partial(_rand_dtype, rng.rand, post=post)


def rand_some_equal(rng):
    """Normal values (deviation 100) of which about half equal the first element."""
    def post(x):
        flat = x.ravel()
        if len(flat) == 0:
            return x
        same = rng.rand(*np.shape(x)) < 0.5
        return np.where(same, flat[0], x)
    return functools.partial(_rand_dtype, rng.randn, scale=100.0, post=post)


def _complex_from_parts(rand, shape, dtype):
    real_dtype = np.real(np.array(0, dtype=dtype)).dtype
    out = rand(shape, real_dtype) + np.array(1j, dtype) * rand(shape, real_dtype)
    return _cast_to_shape(out, shape, dtype)


def _with_specials(rng, specials):
    """A generator of ``rand_default`` values in which each of ``specials`` (pairs of a
    value and a chance) replaces elements at random; the masks are drawn before the values,
    in order. Only real floating types get specials (complex ones are left plain, as in
    JAX)."""
    base = rand_default(rng)

    def rand(shape, dtype):
        if not _dtypes.issubdtype(dtype, np.floating):
            return base(shape, dtype)
        dims = _dims_of_shape(shape)
        masks = [(rng.rand(*dims) < chance, value) for value, chance in specials]
        vals = base(shape, dtype)
        for mask, value in masks:
            vals = np.where(mask, np.array(value, dtype=dtype), vals)
        return _cast_to_shape(np.asarray(vals, dtype=dtype), shape, dtype)
    return rand


def rand_some_inf(rng):
    """Normal values with about 10% +inf and 10% -inf in real floating types."""
    return _with_specials(rng, [(np.inf, 0.1), (-np.inf, 0.1)])


def rand_some_inf_and_nan(rng):
    """Normal values with about 10% each of +inf, -inf and NaN in real floating types."""
    return _with_specials(rng, [(np.inf, 0.1), (-np.inf, 0.1), (np.nan, 0.1)])


def rand_some_nan(rng):
    """Normal values with about 10% NaNs (half of them negative) in floating types; a
    complex value gets them in its real and imaginary parts separately."""
    base = rand_default(rng)

    def rand(shape, dtype):
        if _dtypes.issubdtype(dtype, np.complexfloating):
            return _complex_from_parts(rand, shape, dtype)
        if not _dtypes.issubdtype(dtype, np.floating):
            return base(shape, dtype)
        r = rng.rand(*_dims_of_shape(shape))
        vals = base(shape, dtype)
        vals = np.where(r < 0.1, np.array(np.nan, dtype=dtype), vals)
        vals = np.where(r < 0.05, np.array(-np.nan, dtype=dtype), vals)
        return _cast_to_shape(np.asarray(vals, dtype=dtype), shape, dtype)
    return rand


def rand_some_zero(rng):
    """Normal values of which about half are zero."""
    base = rand_default(rng)

    def rand(shape, dtype):
        zeros = rng.rand(*_dims_of_shape(shape)) < 0.5
        vals = np.where(zeros, np.array(0, dtype=dtype), base(shape, dtype))
        return _cast_to_shape(np.asarray(vals, dtype=dtype), shape, dtype)
    return rand


def rand_int(rng, low=0, high=None):
    """Uniform integers in [low, high) (``high`` defaults to the integer dtype's maximum)."""
    def fn(shape, dtype):
        nonlocal high
        gen_dtype = dtype if np.issubdtype(dtype, np.integer) else np.int64
        if low == 0 and high is None:
            if not np.issubdtype(dtype, np.integer):
                raise ValueError("rand_int requires an explicit `high` value for "
                                 "non-integer types.")
            high = np.iinfo(dtype).max
        return rng.randint(low, high=high, size=shape, dtype=gen_dtype).astype(dtype)
    return fn


def rand_unique_int(rng, high=None):
    """Distinct integers below ``high`` (default: the number of elements), shuffled."""
    def fn(shape, dtype):
        return rng.choice(np.arange(high or math.prod(shape), dtype=dtype), size=shape,
                          replace=False)
    return fn


def rand_indices_unique_along_axis(rng):
    """``fn(dim, shape, axis, allow_negative=True)``: indices below ``dim``, distinct along
    ``axis``, some of them given as negative indices."""
    def fn(dim, shape, axis, allow_negative=True):
        others = shape[:axis] + shape[axis:][1:]
        batch = math.prod(others)
        idx = np.array([rng.choice(dim, size=shape[axis], replace=False)
                        for _ in range(batch)]).reshape(batch, shape[axis])
        idx = np.moveaxis(idx.reshape(others + (shape[axis],)), -1, axis)
        counts = np.apply_along_axis(functools.partial(np.bincount, minlength=dim), axis, idx)
        assert (counts <= 1).all()
        if allow_negative:
            idx[rng.choice([False, True], idx.shape)] -= dim
        return idx
    return fn


def rand_bool(rng):
    """Booleans, each True with probability 1/2."""
    def generator(shape, dtype):
        return _cast_to_shape(np.asarray(rng.rand(*_dims_of_shape(shape)) < 0.5, dtype=dtype),
                              shape, dtype)
    return generator


def rand_like(rng, x):
    """A standard normal value of ``x``'s shape and dtype (a Python scalar stays one)."""
    from plax._src.test_util_parts.tolerances import _dtype, is_python_scalar
    shape, dtype = np.shape(x), _dtype(x)

    def draw():
        return np.asarray(rng.randn(*shape), dtype=dtype)
    out = draw() + dtype.type(1.0j) * draw() if _dtypes.issubdtype(
        dtype, np.complexfloating) else draw()
    return out.item() if is_python_scalar(x) else out
