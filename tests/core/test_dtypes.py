"""Tests for plax.core.dtypes: canonicalisation, categories and the promotion lattice.

The promotion tables below were generated once with the reference JAX 0.10.2
(``jax._src.dtypes.result_type(a, b, return_weak_type_flag=True)`` and
``jnp.promote_types``) and are stored here as plain data. Row and column
labels are dtype abbreviations; ``i``, ``f`` and ``c`` stand for the weak
Python scalar types ``int``, ``float`` and ``complex``; a trailing ``*`` marks
a weakly typed result.
"""
import re

import ml_dtypes
import numpy as np
import pytest

from plax.core import dtypes
from plax.core.avals import ShapedArray, weak_host_value
from plax.core.config import config, enable_x64

_TABLE_X64_OFF = """
          b1    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128     i     f     c
b1        b1    i8   i16   i32   i32    u8   u16   u32   u32  bf16   f16   f32   f32   c64   c64  i32*  f32*  c64*
i8        i8    i8   i16   i32   i32   i16   i32   i32   i32  bf16   f16   f32   f32   c64   c64    i8  f32*  c64*
i16      i16   i16   i16   i32   i32   i16   i32   i32   i32  bf16   f16   f32   f32   c64   c64   i16  f32*  c64*
i32      i32   i32   i32   i32   i32   i32   i32   i32   i32  bf16   f16   f32   f32   c64   c64   i32  f32*  c64*
i64      i32   i32   i32   i32   i32   i32   i32   i32   i32  bf16   f16   f32   f32   c64   c64   i32  f32*  c64*
u8        u8   i16   i16   i32   i32    u8   u16   u32   u32  bf16   f16   f32   f32   c64   c64    u8  f32*  c64*
u16      u16   i32   i32   i32   i32   u16   u16   u32   u32  bf16   f16   f32   f32   c64   c64   u16  f32*  c64*
u32      u32   i32   i32   i32   i32   u32   u32   u32   u32  bf16   f16   f32   f32   c64   c64   u32  f32*  c64*
u64      u32   i32   i32   i32   i32   u32   u32   u32   u32  bf16   f16   f32   f32   c64   c64   u32  f32*  c64*
bf16    bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16   f32   f32   f32   c64   c64  bf16  bf16   c64
f16      f16   f16   f16   f16   f16   f16   f16   f16   f16   f32   f16   f32   f32   c64   c64   f16   f16   c64
f32      f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   c64   c64   f32   f32   c64
f64      f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   c64   c64   f32   f32   c64
c64      c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64
c128     c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64
i       i32*    i8   i16   i32   i32    u8   u16   u32   u32  bf16   f16   f32   f32   c64   c64  i32*  f32*  c64*
f       f32*  f32*  f32*  f32*  f32*  f32*  f32*  f32*  f32*  bf16   f16   f32   f32   c64   c64  f32*  f32*  c64*
c       c64*  c64*  c64*  c64*  c64*  c64*  c64*  c64*  c64*   c64   c64   c64   c64   c64   c64  c64*  c64*  c64*
"""
_TABLE_X64_ON = """
          b1    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128     i     f     c
b1        b1    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128  i64*  f64* c128*
i8        i8    i8   i16   i32   i64   i16   i32   i64  f64*  bf16   f16   f32   f64   c64  c128    i8  f64* c128*
i16      i16   i16   i16   i32   i64   i16   i32   i64  f64*  bf16   f16   f32   f64   c64  c128   i16  f64* c128*
i32      i32   i32   i32   i32   i64   i32   i32   i64  f64*  bf16   f16   f32   f64   c64  c128   i32  f64* c128*
i64      i64   i64   i64   i64   i64   i64   i64   i64  f64*  bf16   f16   f32   f64   c64  c128   i64  f64* c128*
u8        u8   i16   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128    u8  f64* c128*
u16      u16   i32   i32   i32   i64   u16   u16   u32   u64  bf16   f16   f32   f64   c64  c128   u16  f64* c128*
u32      u32   i64   i64   i64   i64   u32   u32   u32   u64  bf16   f16   f32   f64   c64  c128   u32  f64* c128*
u64      u64  f64*  f64*  f64*  f64*   u64   u64   u64   u64  bf16   f16   f32   f64   c64  c128   u64  f64* c128*
bf16    bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16   f32   f32   f64   c64  c128  bf16  bf16   c64
f16      f16   f16   f16   f16   f16   f16   f16   f16   f16   f32   f16   f32   f64   c64  c128   f16   f16   c64
f32      f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f64   c64  c128   f32   f32   c64
f64      f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64  c128  c128   f64   f64  c128
c64      c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64  c128   c64  c128   c64   c64   c64
c128    c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128
i       i64*    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128  i64*  f64* c128*
f       f64*  f64*  f64*  f64*  f64*  f64*  f64*  f64*  f64*  bf16   f16   f32   f64   c64  c128  f64*  f64* c128*
c      c128* c128* c128* c128* c128* c128* c128* c128* c128*   c64   c64   c64  c128   c64  c128 c128* c128* c128*
"""
_PROMOTE_X64_OFF = """
          b1    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128
b1        b1    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128
i8        i8    i8   i16   i32   i64   i16   i32   i32   f64  bf16   f16   f32   f64   c64  c128
i16      i16   i16   i16   i32   i64   i16   i32   i32   f64  bf16   f16   f32   f64   c64  c128
i32      i32   i32   i32   i32   i64   i32   i32   i32   f64  bf16   f16   f32   f64   c64  c128
i64      i64   i64   i64   i64   i64   i64   i64   i64   f64  bf16   f16   f32   f64   c64  c128
u8        u8   i16   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128
u16      u16   i32   i32   i32   i64   u16   u16   u32   u64  bf16   f16   f32   f64   c64  c128
u32      u32   i32   i32   i32   i64   u32   u32   u32   u64  bf16   f16   f32   f64   c64  c128
u64      u64   f64   f64   f64   f64   u64   u64   u64   u64  bf16   f16   f32   f64   c64  c128
bf16    bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16   f32   f32   f64   c64  c128
f16      f16   f16   f16   f16   f16   f16   f16   f16   f16   f32   f16   f32   f64   c64  c128
f32      f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f64   c64  c128
f64      f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64  c128  c128
c64      c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64  c128   c64  c128
c128    c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128
"""
_PROMOTE_X64_ON = """
          b1    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128
b1        b1    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128
i8        i8    i8   i16   i32   i64   i16   i32   i64   f64  bf16   f16   f32   f64   c64  c128
i16      i16   i16   i16   i32   i64   i16   i32   i64   f64  bf16   f16   f32   f64   c64  c128
i32      i32   i32   i32   i32   i64   i32   i32   i64   f64  bf16   f16   f32   f64   c64  c128
i64      i64   i64   i64   i64   i64   i64   i64   i64   f64  bf16   f16   f32   f64   c64  c128
u8        u8   i16   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128
u16      u16   i32   i32   i32   i64   u16   u16   u32   u64  bf16   f16   f32   f64   c64  c128
u32      u32   i64   i64   i64   i64   u32   u32   u32   u64  bf16   f16   f32   f64   c64  c128
u64      u64   f64   f64   f64   f64   u64   u64   u64   u64  bf16   f16   f32   f64   c64  c128
bf16    bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16   f32   f32   f64   c64  c128
f16      f16   f16   f16   f16   f16   f16   f16   f16   f16   f32   f16   f32   f64   c64  c128
f32      f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f64   c64  c128
f64      f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64  c128  c128
c64      c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64  c128   c64  c128
c128    c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128
"""

_DTYPES = {
    "b1": np.dtype(np.bool_), "i8": np.dtype(np.int8), "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32), "i64": np.dtype(np.int64), "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "bf16": np.dtype(ml_dtypes.bfloat16), "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
    "c64": np.dtype(np.complex64), "c128": np.dtype(np.complex128),
}
_WEAK_TYPES = {"i": int, "f": float, "c": complex}
_WEAK_VALUES = {"i": 3, "f": 2.5, "c": 1 + 2j}

_FLOAT8 = [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
           ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e4m3b11fnuz]
_INT4 = [ml_dtypes.int4, ml_dtypes.uint4]
_NO_PATH = "no available implicit dtype promotion path"


def _parse(text):
    """{(row, col): (dtype, weak)} from one of the tables above."""
    header, *rows = text.strip().splitlines()
    cols = header.split()
    out = {}
    for line in rows:
        row, *cells = line.split()
        assert len(cells) == len(cols), line
        for col, cell in zip(cols, cells):
            out[row, col] = (_DTYPES[cell.rstrip("*")], cell.endswith("*"))
    return cols, out


_RESULT = {False: _parse(_TABLE_X64_OFF), True: _parse(_TABLE_X64_ON)}
_PROMOTE = {False: _parse(_PROMOTE_X64_OFF), True: _parse(_PROMOTE_X64_ON)}
_KEYS = _RESULT[False][0]


def _as_type(key):
    return _WEAK_TYPES.get(key, _DTYPES.get(key))


def _as_value(key):
    """A value of the kind: a Python scalar for weak keys, a NumPy array otherwise."""
    return _WEAK_VALUES[key] if key in _WEAK_VALUES else np.zeros((2,), _DTYPES[key])


@pytest.fixture(autouse=True)
def _restore_x64():
    before = config.read("enable_x64")
    yield
    config.update("enable_x64", before)


@pytest.fixture(params=[False, True], ids=["x64_off", "x64_on"])
def x64(request):
    with enable_x64(request.param):
        yield request.param


def _mismatches(table, row, convert, fn):
    bad = []
    for col in _KEYS:
        want = table[row, col]
        got = fn(convert(row), convert(col))
        if got != want:
            bad.append(f"{row} + {col}: got {got}, want {want}")
    return bad


# --- result_type over the whole table ------------------------------------------
@pytest.mark.parametrize("row", _KEYS)
def test_result_type_table_dtypes(row, x64):
    fn = lambda a, b: dtypes.result_type(a, b, return_weak_type_flag=True)
    assert _mismatches(_RESULT[x64][1], row, _as_type, fn) == []


@pytest.mark.parametrize("row", _KEYS)
def test_result_type_table_values(row, x64):
    fn = lambda a, b: dtypes.result_type(a, b, return_weak_type_flag=True)
    assert _mismatches(_RESULT[x64][1], row, _as_value, fn) == []


@pytest.mark.parametrize("row", _KEYS)
def test_result_type_without_flag_is_the_dtype(row, x64):
    table = _RESULT[x64][1]
    for col in _KEYS:
        got = dtypes.result_type(_as_type(row), _as_type(col))
        assert isinstance(got, np.dtype)
        assert got == table[row, col][0], (row, col)


def test_promote_tables_agree_with_result_tables_on_diagonal_free_columns():
    # Sanity check of the stored data: with x64 on nothing is narrowed, so for
    # strong dtypes result_type and promote_types only differ in weakness.
    res, pro = _RESULT[True][1], _PROMOTE[True][1]
    for a in _DTYPES:
        for b in _DTYPES:
            assert res[a, b][0] == pro[a, b][0], (a, b)


# --- promote_types -------------------------------------------------------------
@pytest.mark.parametrize("row", list(_DTYPES))
def test_promote_types_table(row, x64):
    table = _PROMOTE[x64][1]
    for col in _DTYPES:
        got = dtypes.promote_types(_DTYPES[row], _DTYPES[col])
        assert isinstance(got, np.dtype), (row, col, got)
        assert got == table[row, col][0], (row, col, got)


@pytest.mark.parametrize("a, b, want", [
    (int, float, np.float64), (int, int, np.int64), (bool, int, np.int64),
    (np.int8, int, np.int8), (np.float16, float, np.float16),
    (complex, np.float32, np.complex64), (int, np.uint64, np.uint64),
    ("int8", "uint8", np.int16),
])
def test_promote_types_python_types_are_weak_and_not_narrowed(a, b, want):
    for flag in (False, True):
        with enable_x64(flag):
            assert dtypes.promote_types(a, b) == np.dtype(want)
            assert dtypes.promote_types(b, a) == np.dtype(want)


# --- named cases ---------------------------------------------------------------
@pytest.mark.parametrize("args, want, weak", [
    ((np.int32, 1.0), np.float32, True),
    ((np.dtype(np.int32), float), np.float32, True),
    ((np.uint8, np.int8), np.int16, False),
    ((ml_dtypes.bfloat16, np.float16), np.float32, False),
    ((np.uint32, np.int32), np.int32, False),
    ((np.int8, float), np.float32, True),
    ((np.int8, 1), np.int8, False),
    ((np.float16, 2.0), np.float16, False),
    ((ml_dtypes.bfloat16, 1j), np.complex64, False),
    ((np.bool_, 1), np.int32, True),
    ((True, False), np.bool_, False),
    ((1,), np.int32, True),
    ((1.0,), np.float32, True),
    ((np.int64,), np.int32, False),
    ((np.uint64, np.int8), np.int32, False),  # inputs narrowed first, then promoted
    ((np.int8, np.uint8, 1.0), np.float32, True),
    ((np.int8, 2, 3), np.int8, False),
    ((1, 2.0, 3j), np.complex64, True),
    ((np.uint8, np.int8, np.float16), np.float16, False),
    (("float32", "int8"), np.float32, False),
    ((np.float16, "bfloat16"), np.float32, False),
    ((np.float32(1), 1.0), np.float32, False),
    ((np.array(1.0),), np.float32, False),
])
def test_result_type_named_cases_x64_off(args, want, weak):
    with enable_x64(False):
        assert dtypes.result_type(*args, return_weak_type_flag=True) == (np.dtype(want), weak)


@pytest.mark.parametrize("args, want, weak", [
    ((np.int32, 1.0), np.float64, True),
    ((np.uint32, np.int32), np.int64, False),
    ((np.uint64, np.int8), np.float64, True),
    ((np.uint64, np.int64, 1), np.float64, True),
    ((np.int8, np.uint8, 1.0), np.float64, True),
    ((1, 2.0, 3j), np.complex128, True),
    ((1,), np.int64, True),
    ((np.float32, 1j), np.complex64, False),
])
def test_result_type_named_cases_x64_on(args, want, weak):
    with enable_x64(True):
        assert dtypes.result_type(*args, return_weak_type_flag=True) == (np.dtype(want), weak)


def test_weak_avals_take_part_as_weak_types():
    weak_f32 = ShapedArray((), np.float32, weak_type=True)
    weak_i32 = ShapedArray((3,), np.int32, weak_type=True)
    assert dtypes.result_type(weak_f32, ml_dtypes.bfloat16) == np.dtype(ml_dtypes.bfloat16)
    assert dtypes.result_type(weak_i32, np.int8, return_weak_type_flag=True) == (
        np.dtype(np.int8), False)
    assert dtypes.result_type(weak_i32, return_weak_type_flag=True) == (np.dtype(np.int32), True)
    strong = ShapedArray((), np.float32)
    assert dtypes.result_type(strong, np.float16) == np.dtype(np.float32)
    host = weak_host_value(2.0, np.float32)
    assert dtypes.result_type(host, np.float16, return_weak_type_flag=True) == (
        np.dtype(np.float16), False)


# --- types outside the lattice: float8 and int4 --------------------------------
@pytest.mark.parametrize("f8", _FLOAT8, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("other", ["b1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
                                   "i", "f"])
def test_float8_absorbs_bools_ints_and_weak_floats(f8, other, x64):
    assert dtypes.result_type(f8, _as_type(other), return_weak_type_flag=True) == (
        np.dtype(f8), False)


@pytest.mark.parametrize("f8", _FLOAT8, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("other", ["bf16", "f16", "f32", "f64", "c64", "c128", "c",
                                   *_FLOAT8, *_INT4])
def test_float8_has_no_promotion_path(f8, other, x64):
    other_t = _as_type(other) if isinstance(other, str) else other
    if not isinstance(other, str) and np.dtype(other) == np.dtype(f8):
        assert dtypes.result_type(f8, other_t) == np.dtype(f8)
        return
    with pytest.raises(dtypes.TypePromotionError, match=_NO_PATH):
        dtypes.result_type(f8, other_t)
    with pytest.raises(dtypes.TypePromotionError, match=_NO_PATH):
        dtypes.result_type(other_t, f8)


def test_float8_with_float32_error_message():
    with pytest.raises(dtypes.TypePromotionError, match=_NO_PATH) as info:
        dtypes.result_type(ml_dtypes.float8_e4m3fn, np.float32)
    msg = str(info.value)
    assert "float8_e4m3fn" in msg and "float32" in msg
    assert "8-bit floats" in msg and "astype" in msg
    assert isinstance(info.value, ValueError)  # as in JAX, TypePromotionError is a ValueError
    with pytest.raises(dtypes.TypePromotionError, match=_NO_PATH):
        dtypes.promote_types(np.float32, ml_dtypes.float8_e5m2)


@pytest.mark.parametrize("i4", _INT4, ids=lambda t: np.dtype(t).name)
def test_int4_promotion(i4, x64):
    assert dtypes.result_type(i4, np.bool_) == np.dtype(i4)
    assert dtypes.result_type(i4, 1, return_weak_type_flag=True) == (np.dtype(i4), False)
    assert dtypes.result_type(i4, int) == np.dtype(i4)
    for other in ["i8", "i32", "u8", "u64", "bf16", "f32", "c64", "f", "c"]:
        with pytest.raises(dtypes.TypePromotionError, match="4-bit integers"):
            dtypes.result_type(i4, _as_type(other))
    with pytest.raises(dtypes.TypePromotionError, match=_NO_PATH):
        dtypes.result_type(ml_dtypes.int4, ml_dtypes.uint4)


def test_result_type_bad_arguments():
    with pytest.raises(ValueError, match="at least one array or dtype"):
        dtypes.result_type()
    with pytest.raises(ValueError, match="float0"):
        dtypes.result_type(dtypes.float0, np.int32)


# --- canonicalize_dtype --------------------------------------------------------
_NARROWED = {np.int64: np.int32, np.uint64: np.uint32, np.float64: np.float32,
             np.complex128: np.complex64}
_KEPT = [np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32,
         ml_dtypes.bfloat16, np.float16, np.float32, np.complex64, *_FLOAT8, *_INT4]


@pytest.mark.parametrize("wide, narrow", list(_NARROWED.items()),
                         ids=[np.dtype(t).name for t in _NARROWED])
def test_canonicalize_narrows_64_bit_types_only_with_x64_off(wide, narrow):
    with enable_x64(False):
        assert dtypes.canonicalize_dtype(wide) == np.dtype(narrow)
        assert dtypes.canonicalize_dtype(np.dtype(wide).name) == np.dtype(narrow)
    with enable_x64(True):
        assert dtypes.canonicalize_dtype(wide) == np.dtype(wide)


@pytest.mark.parametrize("t", _KEPT, ids=lambda t: np.dtype(t).name)
def test_canonicalize_keeps_other_types(t, x64):
    assert dtypes.canonicalize_dtype(t) == np.dtype(t)


def test_canonicalize_python_types_and_defaults():
    with enable_x64(False):
        assert dtypes.canonicalize_dtype(int) == np.dtype(np.int32)
        assert dtypes.canonicalize_dtype(float) == np.dtype(np.float32)
        assert dtypes.canonicalize_dtype(complex) == np.dtype(np.complex64)
        assert dtypes.default_int_dtype() == np.dtype(np.int32)
        assert dtypes.default_float_dtype() == np.dtype(np.float32)
        assert dtypes.default_complex_dtype() == np.dtype(np.complex64)
        assert dtypes.dtype(1.0, canonicalize=True) == np.dtype(np.float32)
    with enable_x64(True):
        assert dtypes.default_int_dtype() == np.dtype(np.int64)
        assert dtypes.default_float_dtype() == np.dtype(np.float64)
        assert dtypes.default_complex_dtype() == np.dtype(np.complex128)
        assert dtypes.dtype(1.0, canonicalize=True) == np.dtype(np.float64)


def test_canonicalize_follows_global_update():
    config.update("jax_enable_x64", True)
    assert dtypes.canonicalize_dtype(np.int64) == np.dtype(np.int64)
    assert dtypes.x64_enabled()
    config.update("jax_enable_x64", False)
    assert dtypes.canonicalize_dtype(np.int64) == np.dtype(np.int32)
    assert not dtypes.x64_enabled()


@pytest.mark.parametrize("bad", [np.object_, "U3", "S2", "datetime64[s]"])
def test_canonicalize_rejects_non_numeric(bad):
    with pytest.raises(TypeError, match="not a valid JAX array type"):
        dtypes.canonicalize_dtype(bad)


def test_dtype_of_values():
    assert dtypes.dtype(1) == np.dtype(np.int64)
    assert dtypes.dtype(True) == np.dtype(np.bool_)
    assert dtypes.dtype(float) == np.dtype(np.float64)
    assert dtypes.dtype(np.zeros(2, np.int8)) == np.dtype(np.int8)
    assert dtypes.dtype("bfloat16") == np.dtype(ml_dtypes.bfloat16)
    assert dtypes.is_weakly_typed(1.0) and dtypes.is_weakly_typed(2)
    assert not dtypes.is_weakly_typed(True)
    assert not dtypes.is_weakly_typed(np.float32(1))


# --- categories ----------------------------------------------------------------
@pytest.mark.parametrize("t, category, want", [
    (ml_dtypes.bfloat16, np.floating, True),
    (ml_dtypes.bfloat16, np.inexact, True),
    (ml_dtypes.bfloat16, np.number, True),
    (ml_dtypes.bfloat16, np.generic, True),
    (ml_dtypes.bfloat16, np.integer, False),
    (ml_dtypes.bfloat16, np.complexfloating, False),
    (ml_dtypes.bfloat16, ml_dtypes.bfloat16, True),
    (ml_dtypes.bfloat16, np.float16, False),
    (np.float32, ml_dtypes.bfloat16, False),
    ("bfloat16", np.floating, True),
    (np.dtype(ml_dtypes.bfloat16), np.floating, True),
    *[(f8, np.floating, True) for f8 in _FLOAT8],
    *[(f8, np.inexact, True) for f8 in _FLOAT8],
    *[(f8, np.integer, False) for f8 in _FLOAT8],
    (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, False),
    (ml_dtypes.int4, np.integer, True),
    (ml_dtypes.int4, np.signedinteger, True),
    (ml_dtypes.int4, np.unsignedinteger, False),
    (ml_dtypes.int4, np.floating, False),
    (ml_dtypes.int4, np.inexact, False),
    (ml_dtypes.uint4, np.integer, True),
    (ml_dtypes.uint4, np.unsignedinteger, True),
    (ml_dtypes.uint4, np.signedinteger, False),
    (np.float32, np.floating, True),
    (np.int32, np.floating, False),
    (np.bool_, np.integer, False),
    (bool, np.number, False),
    (np.complex64, np.inexact, True),
])
def test_issubdtype(t, category, want):
    assert dtypes.issubdtype(t, category) is want


def test_category_predicates():
    assert dtypes.is_float(ml_dtypes.bfloat16) and dtypes.is_float(ml_dtypes.float8_e5m2)
    assert not dtypes.is_float(np.complex64) and dtypes.is_complex(np.complex64)
    assert dtypes.is_inexact(np.complex64) and not dtypes.is_inexact(ml_dtypes.int4)
    assert dtypes.is_integer(ml_dtypes.uint4) and dtypes.is_unsigned(ml_dtypes.uint4)
    assert not dtypes.is_unsigned(ml_dtypes.int4) and not dtypes.is_integer(np.bool_)
    assert dtypes.is_bool(np.bool_) and not dtypes.is_bool(np.int8)
    assert not dtypes.issubdtype(None, np.floating)


def test_finfo_and_iinfo():
    fi = dtypes.finfo(ml_dtypes.bfloat16)
    assert fi.bits == 16 and fi.eps == 0.0078125 and fi.dtype == np.dtype(ml_dtypes.bfloat16)
    assert float(fi.max) == pytest.approx(3.38953e38, rel=1e-5)
    assert float(fi.tiny) == pytest.approx(1.17549e-38, rel=1e-5)
    assert float(dtypes.finfo(ml_dtypes.float8_e4m3fn).max) == 448
    assert dtypes.finfo(np.float32).eps == np.finfo(np.float32).eps
    ii = dtypes.iinfo(ml_dtypes.int4)
    assert (ii.min, ii.max, ii.bits) == (-8, 7, 4)
    ui = dtypes.iinfo(ml_dtypes.uint4)
    assert (ui.min, ui.max) == (0, 15)
    assert dtypes.iinfo(np.int16).max == 32767


def test_itemsize_bits():
    assert dtypes.itemsize_bits(ml_dtypes.int4) == 4
    assert dtypes.itemsize_bits(ml_dtypes.uint4) == 4
    assert dtypes.itemsize_bits(ml_dtypes.bfloat16) == 16
    assert dtypes.itemsize_bits(np.complex128) == 128
    assert dtypes.itemsize_bits(np.bool_) == 8


def test_float0():
    f0 = dtypes.float0
    assert isinstance(f0, np.dtype) and f0.itemsize == 0 and f0.kind == "V"
    assert f0.names == ("float0",)
    assert np.zeros((2, 3), f0).shape == (2, 3)
    assert dtypes.canonicalize_dtype(f0) == f0
    assert not dtypes.issubdtype(f0, np.floating)
    assert f0 not in dtypes.supported_dtypes


def test_supported_dtypes():
    names = {dt.name for dt in dtypes.supported_dtypes}
    assert {"bool", "int4", "uint4", "bfloat16", "float8_e4m3fn", "complex128"} <= names
    assert "object" not in names and "float0" not in names


# --- check_user_dtype ----------------------------------------------------------
@pytest.mark.parametrize("t", ["float32", np.int8, ml_dtypes.bfloat16, np.dtype("uint16"),
                               ml_dtypes.int4, float, int, bool])
def test_check_user_dtype_accepts(t):
    assert dtypes.check_user_dtype(t) == np.dtype(t)


def test_check_user_dtype_errors_name_the_argument():
    with pytest.raises(TypeError, match=re.escape("Invalid new_dtype argument: 'not_a_dtype'")):
        dtypes.check_user_dtype("not_a_dtype", "new_dtype")
    with pytest.raises(TypeError, match="Invalid dtype argument"):
        dtypes.check_user_dtype(object())
    with pytest.raises(TypeError, match="dtype object is not a valid JAX array type"):
        dtypes.check_user_dtype(np.object_)
    with pytest.raises(TypeError, match="new_dtype <U2 is not a valid JAX array type"):
        dtypes.check_user_dtype("U2", "new_dtype")


@pytest.mark.parametrize("x64, want", [(False, np.float32), (True, np.float64)])
def test_none_takes_part_in_promotion_as_numpys_default_dtype(x64, want):
    # (JAX 0.10.2: np.dtype(None), a strong float64, canonicalised; Keras relies on it)
    import plax.numpy as jnp
    with enable_x64(x64):
        for args in [(None,), (None, 1), (None, True), (None, np.float16)]:
            assert jnp.result_type(*args) == want, args
