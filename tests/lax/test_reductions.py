"""Reductions, argmax/argmin and cumulative ops: one table row per use of a primitive
(axes and flags in the row), checked by lax_rows for values against NumPy, jit, vmap,
derivatives and jaxprs; then identities of empty reductions, NaNs and complex order,
wrapping, weak types, printed jaxprs, batching rules, compositions and errors."""
import numpy as np
import pytest

from helpers import BF16, BOOL, F32, I16, I32, U8, check_vmap, check_vmap_axes
from lax_rows import ALL_GRAD, REAL_GRAD, Row, table_tests
import plax
from plax import lax
from plax.test_util import check_grads

rng = np.random.default_rng(0)


def _lowest(dt):
    return False if dt == BOOL else (np.iinfo(dt).min if dt.kind in "iu" else -np.inf)


def _highest(dt):
    return True if dt == BOOL else (np.iinfo(dt).max if dt.kind in "iu" else np.inf)


def _ones(dt):
    return True if dt == BOOL else np.array(-1).astype(dt)


def _widened(x):
    return x.astype(np.float32) if x.dtype == BF16 else x


def reduce_reference(ufunc, identity, axes):
    def ref(x):
        out_shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        if not axes:
            return x
        if any(x.shape[a] == 0 for a in axes):
            return np.full(out_shape, identity(x.dtype), x.dtype)
        w = _widened(x)
        return np.asarray(ufunc.reduce(w, axis=tuple(axes), dtype=w.dtype)).astype(x.dtype)
    return ref


def cum_reference(ufunc, axis, reverse):
    def ref(x):
        w = _widened(x)
        if reverse:
            w = np.flip(w, axis)
        out = ufunc.accumulate(w, axis=axis, dtype=w.dtype)
        return (np.flip(out, axis) if reverse else out).astype(x.dtype)
    return ref


SQ = {"grad": "squared", "grad_inputs": ("distinct",)}  # no ties; square: order 2 is non-trivial

# fn, NumPy ufunc, identity of an empty reduction, dtypes, the dtype of the one-axis rows,
# {axes of a (2, 3) operand: derivative dtypes}
REDUCE = [
    (lax.reduce_sum, np.add, lambda d: 0, [F32, I32, U8, BF16], F32,
     {(1,): ALL_GRAD, (1, 0): (F32,)}),
    (lax.reduce_prod, np.multiply, lambda d: 1, [F32, I32], I32,
     {(1,): ALL_GRAD, (1, 0): (F32,)}),
    (lax.reduce_max, np.maximum, _lowest, [F32, I32, U8, BOOL, BF16], F32,
     {(0,): REAL_GRAD, (1, 0): (F32,)}),
    (lax.reduce_min, np.minimum, _highest, [F32, I32, U8, BOOL], I32, {(1,): REAL_GRAD}),
    (lax.reduce_and, np.bitwise_and, _ones, [I32, U8, BOOL], BOOL, {}),
    (lax.reduce_or, np.bitwise_or, lambda d: 0, [I32, U8, BOOL], I32, {}),
    (lax.reduce_xor, np.bitwise_xor, lambda d: 0, [I32, BOOL], U8, {}),
]
MAIN_CASE = ((2, 3, 4), (0, 2))  # every dtype
AXES_CASES = [((2, 3), (0,)), ((2, 3), (1,)), ((2, 3), (0, 1))]  # jit and vmap too
VARIANTS = [((5,), (0,)), ((2, 3), (1, 0)), ((), ()), ((2, 3), ()), ((0, 3), (0,)),
            ((3, 0), (0,)), ((2, 0, 3), (1, 2))]
EXTRA_SUM_CASES = [((3, 4, 5), ()), ((3, 4, 5), (0, 2)), ((3, 4, 5), (2, 1))]


def _reduce_rows():
    rows = []
    for fn, ufunc, identity, dtypes, vmap_dtype, grads in REDUCE:
        cases = [(MAIN_CASE, dtypes, False)]
        cases += [(c, [vmap_dtype], False) for c in AXES_CASES]
        cases += [(c, [dtypes[0]], True) for c in VARIANTS]
        if fn is lax.reduce_sum:
            cases += [(c, [F32], False) for c in EXTRA_SUM_CASES]
        for (shape, axes), dts, variant in cases:
            g = grads.get(axes) if shape == (2, 3) else None
            kw = dict(SQ, grad_dtypes=g) if g else \
                {"grad": "float0"} if dts[0].kind in "iub" and (shape, axes) == MAIN_CASE else {}
            rows.append(Row(fn, reduce_reference(ufunc, identity, axes), ("real",), tuple(dts),
                            shapes=(shape,), static=(axes,), name=f"{fn.__name__}-{shape}-{axes}",
                            params={"axes": tuple(axes)}, rtol={F32: 1e-5}, variant=variant, **kw))
    return rows


ARG_CASES = [((7,), 0), ((3, 5), 0), ((3, 5), 1), ((2, 0, 4), 2)]
ARG_DTYPES = [F32, I32, U8, BOOL, BF16]


def _arg_rows():
    rows = []
    for fn, ref in ((lax.argmax, np.argmax), (lax.argmin, np.argmin)):
        for shape, axis in ARG_CASES:
            rows.append(Row(fn, lambda x, ref=ref, axis=axis: ref(_widened(x), axis=axis),
                            ("ties",), tuple(ARG_DTYPES), shapes=(shape,), static=(axis, I32),
                            name=f"{fn.__name__}-{shape}-{axis}", out=I32,
                            params={"axes": (axis,), "index_dtype": I32}, grad="float0",
                            variant=shape != (3, 5)))
    for fn, ref, shape, axis, dtype, index_dtype, variant in [
            (lax.argmax, np.argmax, (4, 6), 1, F32, U8, True),
            (lax.argmax, np.argmax, (4, 6), 1, F32, I16, True),
            (lax.argmin, np.argmin, (3,), 0, I32, I16, False)]:
        rows.append(Row(fn, lambda x, ref=ref, axis=axis: ref(x, axis=axis), ("ties",),
                        (dtype,), shapes=(shape,), static=(axis, index_dtype),
                        name=f"{fn.__name__}-{index_dtype.name}", out=index_dtype,
                        params={"index_dtype": index_dtype}, variant=variant))
    return rows


# fn, NumPy ufunc, dtypes, the dtype of the (2, 3) rows,
# {(axis, reverse) of a (2, 3) row: its derivative dtypes (None: no derivative check)}
CUMULATIVE = [
    (lax.cumsum, np.add, [F32, I32, U8, BF16], F32, {(1, False): ALL_GRAD, (0, True): (F32,)}),
    (lax.cumprod, np.multiply, [F32, I32], I32, {(1, False): ALL_GRAD, (0, True): (F32,)}),
    (lax.cummax, np.maximum, [F32, I32, U8], F32, {(1, False): REAL_GRAD, (1, True): (F32,)}),
    (lax.cummin, np.minimum, [F32, I32], I32, {(0, False): REAL_GRAD, (1, True): None}),
    (lax.cumlogsumexp, np.logaddexp, [F32, BF16], F32,
     {(1, False): REAL_GRAD, (0, True): (F32,)}),
]
# variants: more (shape, axis) at the first dtype, forward
CUM_CASES = [((6,), 0), ((2, 3, 4), 1), ((1,), 0), ((0, 3), 0), ((3, 0), 0)]


def _cum_rows():
    rows = []
    for fn, ufunc, dtypes, small_dtype, small in CUMULATIVE:
        cases = [((3, 5), 1, False, dtypes, None), ((3, 5), 1, True, dtypes, None)]
        small = {(0, False): None, (1, True): None, **small}  # and what old vmap rows had
        cases += [((2, 3), a, r, [small_dtype], g) for (a, r), g in small.items()]
        cases += [(s, a, False, dtypes[:1], None) for s, a in CUM_CASES]
        for shape, axis, reverse, dts, g in cases:
            kw = dict(SQ, grad_dtypes=g) if g else {}
            kw["variant"] = (shape, axis) in CUM_CASES
            rows.append(Row(fn, cum_reference(ufunc, axis, reverse), ("real",), tuple(dts),
                            shapes=(shape,), static=(axis, reverse),
                            name=f"{fn.__name__}-{shape}-{axis}{'-reverse' * reverse}",
                            params={"axis": axis, "reverse": reverse},
                            rtol={BF16: 3e-2, F32: 1e-5}, **kw))
    return rows


ROWS = _reduce_rows() + _arg_rows() + _cum_rows()

test_value, test_jit, test_vmap, test_grad, test_jaxpr = table_tests(ROWS)


# --- special values ---------------------------------------------------------------------------
def test_empty_reduction_identities():
    e = np.zeros((0, 2), np.float32)
    np.testing.assert_array_equal(lax.reduce_sum(e, (0,)), [0, 0])
    np.testing.assert_array_equal(lax.reduce_prod(e, (0,)), [1, 1])
    np.testing.assert_array_equal(lax.reduce_max(e, (0,)), [-np.inf, -np.inf])
    np.testing.assert_array_equal(lax.reduce_min(e, (0,)), [np.inf, np.inf])
    np.testing.assert_array_equal(lax.reduce_max(e.astype(BF16), (0,)).astype(np.float32), [-np.inf] * 2)
    np.testing.assert_array_equal(lax.reduce_max(e.astype(np.int32), (0,)), [np.iinfo(np.int32).min] * 2)
    np.testing.assert_array_equal(lax.reduce_min(e.astype(np.uint8), (0,)), [255, 255])
    np.testing.assert_array_equal(lax.reduce_and(e.astype(np.int32), (0,)), [-1, -1])
    np.testing.assert_array_equal(lax.reduce_and(e.astype(np.bool_), (0,)), [True, True])


def test_max_min_nan_and_complex():
    x = np.array([[1, np.nan, 3], [4, 5, 6]], np.float32)
    np.testing.assert_array_equal(lax.reduce_max(x, (1,)), [np.nan, 6])
    np.testing.assert_array_equal(lax.reduce_min(x, (0,)), [1, np.nan, 3])
    c = np.array([1 + 2j, 1 + 3j, 0j, -1 + 9j], np.complex64)  # lexicographic (real, imag)
    assert complex(lax.reduce_max(c, (0,))) == 1 + 3j
    assert complex(lax.reduce_min(c, (0,))) == -1 + 9j
    assert complex(lax.reduce_sum(c, (0,))) == pytest.approx(1 + 14j)


def test_wrapping_integer_sums():
    x = np.array([250, 10], np.uint8)
    assert int(lax.reduce_sum(x, (0,))) == 4
    assert int(lax.reduce_prod(np.array([16, 17], np.uint8), (0,))) == (16 * 17) % 256


def _normal(shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def test_argmax_argmin_nan_and_zeros():
    x = np.array([1, np.nan, 3, np.nan, -np.inf], np.float32)
    assert int(lax.argmax(x, 0, np.int32)) == 1 == np.argmax(x)
    assert int(lax.argmin(x, 0, np.int32)) == 1 == np.argmin(x)
    # Columns with NaNs in various places, against NumPy (first NaN wins).
    m = _normal((6, 8), np.float32)
    m[rng.random(m.shape) < 0.25] = np.nan
    m[:, 0] = np.nan
    m[:, 1] = 7.0
    np.testing.assert_array_equal(lax.argmax(m, 0, np.int32), np.argmax(m, axis=0))
    np.testing.assert_array_equal(lax.argmin(m, 0, np.int32), np.argmin(m, axis=0))
    assert int(lax.argmax(np.array([-0.0, 0.0, 0.0], np.float32), 0, np.int32)) == 0
    assert int(lax.argmin(np.array([0.0, -0.0], np.float32), 0, np.int32)) == 0
    assert int(lax.argmax(np.full(4, -np.inf, np.float32), 0, np.int32)) == 0
    assert int(lax.argmin(np.full(4, np.inf, np.float32), 0, np.int32)) == 0
    assert int(lax.argmax(np.full(3, np.iinfo(np.int32).min, np.int32), 0, np.int32)) == 0


def test_argmax_argmin_distinct_floats():
    """Without ties (the table's "ties" inputs have many), over each axis of a matrix."""
    x = _normal((3, 5), np.float32)
    for fn, ref in ((lax.argmax, np.argmax), (lax.argmin, np.argmin)):
        for axis in (0, 1):
            np.testing.assert_array_equal(fn(x, axis, np.int32), ref(x, axis=axis))


def test_cumulative_special_values():
    np.testing.assert_array_equal(lax.cumsum(np.array([250, 10], np.uint8), 0), [250, 4])
    np.testing.assert_array_equal(lax.cummax(np.array([1, np.nan, 3], np.float32), 0), [1, np.nan, np.nan])
    np.testing.assert_array_equal(lax.cummin(np.array([3, 1, 2], np.int32), 0, reverse=True), [1, 1, 2])
    np.testing.assert_allclose(lax.cumlogsumexp(np.array([0, 0, -np.inf], np.float32), 0),
                               [0, np.log(2), np.log(2)], rtol=1e-6)
    np.testing.assert_array_equal(lax.cumlogsumexp(np.array([-np.inf, -np.inf], np.float32), 0),
                                  [-np.inf, -np.inf])
    np.testing.assert_array_equal(lax.cumlogsumexp(np.array([np.inf, np.inf, 1], np.float32), 0),
                                  [np.inf, np.inf, np.inf])
    c = np.array([1 + 1j, 2, 1 + 5j], np.complex64)
    np.testing.assert_allclose(lax.cumsum(c, 0), np.cumsum(c))
    np.testing.assert_array_equal(lax.cummax(c, 0), [1 + 1j, 2, 2])


# --- weak types, jaxprs, errors ---------------------------------------------------------------
def _weak(fn, scalar):
    """Is ``fn``'s output weakly typed for a weakly typed (3,) operand made from ``scalar``?"""
    jaxpr = plax.make_jaxpr(lambda s: fn(lax.broadcast(s, (3,))))(scalar).jaxpr
    return jaxpr.outvars[0].aval.weak_type


def test_weak_types():
    assert _weak(lambda x: lax.reduce_sum(x, (0,)), 1.0)
    assert _weak(lambda x: lax.reduce_max(x, (0,)), 1.0)
    assert not _weak(lambda x: lax.reduce_or(x, (0,)), 1)  # as JAX
    assert not _weak(lambda x: lax.argmax(x, 0, np.int32), 1.0)
    assert _weak(lambda x: lax.cumsum(x, 0), 1.0)
    assert not _weak(lambda x: lax.reduce_sum(x, (0,)), np.float32(1))
    assert lax.reduce_sum(2.0, ()).aval.weak_type


def test_make_jaxpr_printing():
    x = np.zeros((2, 3), np.float32)
    with pytest.warns(UserWarning, match="requested dtype int64 requested in argmin"):
        text = str(plax.make_jaxpr(lambda x: (
            lax.reduce_sum(x, (0,)), lax.reduce_prod(x, (0, 1)), lax.reduce_max(x, [1]),
            lax.reduce_min(x, ()), lax.argmax(x, 0, np.int32), lax.argmin(x, 1, np.int64),
            lax.cumsum(x, 0), lax.cumprod(x, 1, reverse=True), lax.cummax(x), lax.cummin(x),
            lax.cumlogsumexp(x)))(x))
    for piece in ["f32[3] = reduce_sum[axes=(0,) out_sharding=None] a",
                  "f32[] = reduce_prod[axes=(0, 1)] a", "f32[2] = reduce_max[axes=(1,)] a",
                  "f32[2,3] = reduce_min[axes=()] a", "i32[3] = argmax[axes=(0,) index_dtype=int32] a",
                  "i32[2] = argmin[axes=(1,) index_dtype=int32] a", "cumsum[axis=0 reverse=False] a",
                  "cumprod[axis=1 reverse=True] a", "cummax[axis=0 reverse=False] a",
                  "cummin[axis=0 reverse=False] a", "cumlogsumexp[axis=0 reverse=False] a"]:
        assert piece in text, (piece, text)
    b = np.zeros(3, np.bool_)
    text = str(plax.make_jaxpr(lambda b: (lax.reduce_and(b, (0,)), lax.reduce_or(b, (0,)),
                                          lax.reduce_xor(b, (0,))))(b))
    for piece in ["bool[] = reduce_and[axes=(0,)] a", "bool[] = reduce_or[axes=(0,)] a",
                  "bool[] = reduce_xor[axes=(0,)] a"]:
        assert piece in text


X = np.zeros((2, 3), np.float32)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: lax.reduce_sum(X, (2,)), ValueError, "out-of-bounds"),
    (lambda: lax.reduce_max(X, (-1,)), ValueError, "out-of-bounds"),
    (lambda: lax.reduce_sum(X, (0, 0)), ValueError, "duplicate"),
    (lambda: lax.reduce_sum(X, 0), TypeError, "sequence of integers"),
    (lambda: lax.reduce_sum(np.zeros(2, np.bool_), (0,)), TypeError, "does not accept dtype bool"),
    (lambda: lax.reduce_prod(np.zeros(2, np.bool_), (0,)), TypeError, "does not accept dtype bool"),
    (lambda: lax.reduce_and(X, (0,)), TypeError, "bool or integer, got float32"),
    (lambda: lax.reduce_xor(X, (0,)), TypeError, "bool or integer, got float32"),
    (lambda: lax.argmax(X, 2, np.int32), ValueError, "invalid axis 2"),
    (lambda: lax.argmax(X, -1, np.int32), ValueError, "invalid axis -1"),
    (lambda: lax.argmax(np.float32(1), 0, np.int32), ValueError, "invalid axis 0"),
    (lambda: lax.argmin(np.zeros((0, 3), np.float32), 0, np.int32), ValueError, "non-empty"),
    (lambda: lax.argmax(X, 0, np.float32), TypeError, "index_dtype must be an integer"),
    (lambda: lax.argmax(X, 0, np.bool_), TypeError, "index_dtype must be an integer"),
    (lambda: lax.argmax(np.zeros(2, np.complex64), 0, np.int32), TypeError, "complex64"),
    (lambda: lax.cumsum(X, 2), ValueError, "out of bounds"),
    (lambda: lax.cumsum(X, -1), ValueError, "no negative axes"),
    (lambda: lax.cumsum(np.float32(2), 0), ValueError, "out of bounds"),
    (lambda: lax.cumsum(np.zeros(2, np.bool_), 0), TypeError, "does not accept dtype bool"),
    (lambda: lax.cummax(np.zeros(2, np.bool_), 0), TypeError, "does not accept dtype bool"),
    (lambda: lax.cumlogsumexp(np.zeros(2, np.int32), 0), TypeError, "does not accept dtype int32"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# --- batching rules beyond the table -------------------------------------------------------------
def test_reduce_vmap_bf16_and_empty():
    check_vmap_axes(lambda v: lax.reduce_max(v, (1,)), _normal((3, 4, 5), BF16))
    check_vmap_axes(lambda v: lax.reduce_sum(v, (0,)), np.zeros((3, 0, 5), np.float32))
    check_vmap(lambda v: lax.reduce_min(v, (0,)), np.zeros((2, 0, 5), np.float32), in_axes=0)


@pytest.mark.parametrize("in_axis,axes,out_dim", [
    (0, (0,), 0), (1, (0,), 0), (1, (1,), 1), (2, (0, 1), 0), (2, (0,), 1), (0, (0, 1), 0)])
def test_reduce_batch_dim_stays(in_axis, axes, out_dim):
    """The rule reduces around the batch dimension: no transpose in the jaxpr."""
    x = np.zeros((3, 4, 5), np.float32)
    f = plax.vmap(lambda v: lax.reduce_sum(v, axes), in_axes=in_axis, out_axes=out_dim)
    text = str(plax.make_jaxpr(f)(x))
    assert "transpose" not in text, text
    shifted = tuple(a if a < in_axis else a + 1 for a in axes)
    assert f"axes={shifted}" in text, text


def test_cumulative_vmap_1d_examples():
    """Per-example vectors: the scanned axis is the only one besides the batch."""
    x = _normal((3, 7), np.float32)
    for in_axis in (0, 1):
        check_vmap(lambda v: lax.cumsum(v, axis=0, reverse=True), x, in_axes=in_axis)
        check_vmap(lambda v: lax.cummax(v, axis=0), x, in_axes=in_axis)


def test_cumsum_batch_dim_stays():
    f = plax.vmap(lambda v: lax.cumsum(v, axis=1), in_axes=1, out_axes=1)
    text = str(plax.make_jaxpr(f)(np.zeros((3, 4, 5), np.float32)))
    assert "cumsum[axis=2 reverse=False]" in text and "transpose" not in text, text


# --- composition with grad and nested vmap ----------------------------------------------------
def _loss(v):
    return lax.reduce_sum(lax.cumsum(v, axis=0) * lax.reduce_max(v, (0,)), (0,))


def test_vmap_of_grad_and_grad_of_vmap():
    x = _normal((3, 5), np.float32)
    per_example = np.stack([np.asarray(plax.grad(_loss)(x[i])) for i in range(3)])
    np.testing.assert_allclose(np.asarray(plax.vmap(plax.grad(_loss))(x)), per_example, rtol=1e-5)
    total = lambda v: lax.reduce_sum(plax.vmap(_loss, in_axes=1)(v), (0,))  # noqa: E731
    np.testing.assert_allclose(np.asarray(plax.grad(total)(x.T)), per_example.T, rtol=1e-5)
    check_grads(plax.vmap(_loss), (x.astype(np.float64),), order=2, eps=1e-2)


def test_nested_vmap():
    x = _normal((2, 3, 4, 5), np.float32)
    inner = plax.vmap(lambda v: lax.cumsum(lax.reduce_sum(v, (1,)), axis=0), in_axes=1)
    out = plax.vmap(inner, in_axes=3)(x)  # outer over axis 3, inner over axis 1 of the rest
    want = np.stack([np.stack([np.cumsum(x[:, j, :, i].sum(1), 0) for j in range(3)])
                     for i in range(5)])
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5)
    am = plax.vmap(plax.vmap(lambda v: lax.argmax(v, 0, np.int32), in_axes=0), in_axes=2)(x)
    np.testing.assert_array_equal(np.asarray(am), np.moveaxis(x.argmax(1), 1, 0))


def test_cumprod_through_a_zero():
    # The scan-based rule needs no division, so a zero entry is fine.
    x = np.asarray([1.5, 0.0, -2.0, 0.7], F32)
    _, t = plax.jvp(lax.cumprod, (x,), (np.ones(4, F32),))
    np.testing.assert_allclose(np.asarray(t), [1.0, 1.5, -3.0, -2.1], rtol=1e-6)
    check_grads(lax.cumprod, (x,), 2, modes=("fwd", "rev"))


def test_kinks_match_jax():
    g = plax.grad(lambda x: lax.reduce_max(x, (0,)))(np.asarray([1.0, 3.0, 3.0], F32))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.5, 0.5])
    g = plax.grad(lambda x: lax.reduce_sum(lax.cummax(x, 0), (0,)))(
        np.asarray([1.0, 3.0, 3.0, 2.0], F32))
    np.testing.assert_array_equal(np.asarray(g), [1.0, 2.0, 1.0, 0.0])
