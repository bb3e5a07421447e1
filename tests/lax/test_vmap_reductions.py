"""vmap of reductions, argmax/argmin and cumulative ops: batch at 0, 1 and -1, against
per-example calls (check_vmap) and NumPy, plus the jaxprs the rules produce and vmap/grad."""
import ml_dtypes
import numpy as np
import pytest

import plax
import plax.lax.reductions as L
from helpers import check_vmap, check_vmap_axes
from plax.test_util import check_grads

BF16 = np.dtype(ml_dtypes.bfloat16)


rng = np.random.default_rng(0)


def sample(shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -3, 4, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def check_numpy(fun, np_fun, x, in_axis=0, rtol=2e-5):
    """``vmap(fun, in_axis)(x)`` (out_axes=0) equals ``np_fun`` on each example, stacked."""
    out = np.asarray(plax.vmap(fun, in_axes=in_axis)(x))
    want = np.stack([np_fun(np.take(x, i, axis=in_axis)) for i in range(x.shape[in_axis])])
    assert out.shape == want.shape and out.dtype == want.dtype, (out.shape, want.shape, out.dtype)
    if out.dtype.kind in "fc" or out.dtype == BF16:
        np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=rtol)
    else:
        np.testing.assert_array_equal(out, want)


# --- reduce_* -------------------------------------------------------------------------------
# name -> (plax function, NumPy reduction, dtype)
REDUCTIONS = {
    "reduce_sum": (L.reduce_sum, np.sum, np.float32),
    "reduce_prod": (L.reduce_prod, np.prod, np.int32),
    "reduce_max": (L.reduce_max, np.max, np.float32),
    "reduce_min": (L.reduce_min, np.min, np.int32),
    "reduce_and": (L.reduce_and, np.bitwise_and.reduce, np.bool_),
    "reduce_or": (L.reduce_or, np.bitwise_or.reduce, np.int32),
    "reduce_xor": (L.reduce_xor, np.bitwise_xor.reduce, np.uint8),
}


def _np_reduce(np_fun, axes):
    def ref(x):
        if not axes:
            return x
        if np_fun in (np.sum, np.prod, np.max, np.min):
            return np_fun(x, axis=axes).astype(x.dtype)
        for a in sorted(axes, reverse=True):  # ufunc.reduce takes one axis at a time here
            x = np_fun(x, axis=a)
        return x
    return ref


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1)])
def test_reduce_vmap(name, axes):
    fn, np_fun, dtype = REDUCTIONS[name]
    x = sample((3, 4, 5), dtype)
    check_vmap_axes(lambda v: fn(v, axes), x)
    check_numpy(lambda v: fn(v, axes), _np_reduce(np_fun, axes), x, in_axis=1)


@pytest.mark.parametrize("axes", [(), (0, 2), (2, 1)])
def test_reduce_sum_vmap_rank3(axes):
    x = sample((2, 3, 4, 5), np.float32)
    check_vmap_axes(lambda v: L.reduce_sum(v, axes), x)


def test_reduce_vmap_bf16_and_empty():
    check_vmap_axes(lambda v: L.reduce_max(v, (1,)), sample((3, 4, 5), BF16))
    check_vmap_axes(lambda v: L.reduce_sum(v, (0,)), np.zeros((3, 0, 5), np.float32))
    check_vmap(lambda v: L.reduce_min(v, (0,)), np.zeros((2, 0, 5), np.float32), in_axes=0)


@pytest.mark.parametrize("in_axis,axes,out_dim", [
    (0, (0,), 0), (1, (0,), 0), (1, (1,), 1), (2, (0, 1), 0), (2, (0,), 1), (0, (0, 1), 0)])
def test_reduce_batch_dim_stays(in_axis, axes, out_dim):
    """The rule reduces around the batch dimension: no transpose in the jaxpr."""
    x = np.zeros((3, 4, 5), np.float32)
    f = plax.vmap(lambda v: L.reduce_sum(v, axes), in_axes=in_axis, out_axes=out_dim)
    text = str(plax.make_jaxpr(f)(x))
    assert "transpose" not in text, text
    shifted = tuple(a if a < in_axis else a + 1 for a in axes)
    assert f"axes={shifted}" in text, text


# --- argmax / argmin ----------------------------------------------------------------------------
@pytest.mark.parametrize("fn,np_fun", [(L.argmax, np.argmax), (L.argmin, np.argmin)])
@pytest.mark.parametrize("axis", [0, 1])
def test_arg_reduction_vmap(fn, np_fun, axis):
    x = sample((3, 4, 5), np.float32)
    x[0, 1, 2] = np.nan
    x[1, :, 3] = 1.0  # ties go to the first index
    check_vmap_axes(lambda v: fn(v, axis, np.int32), x)
    check_numpy(lambda v: fn(v, axis, np.int32), lambda v: np_fun(v, axis).astype(np.int32), x,
                in_axis=2)


def test_argmax_vmap_int_index_dtype():
    x = sample((3, 6), np.int32)
    out = check_vmap(lambda v: L.argmin(v, 0, np.int16), x, in_axes=1)
    assert out.dtype == np.int16
    np.testing.assert_array_equal(np.asarray(out), np.argmin(x, 0))


# --- cumulative ops -----------------------------------------------------------------------------
def _np_cum(ufunc):
    def ref(x, axis, reverse):
        if reverse:
            return np.flip(ufunc.accumulate(np.flip(x, axis), axis=axis, dtype=x.dtype), axis)
        return ufunc.accumulate(x, axis=axis, dtype=x.dtype)
    return ref


def _np_cumlogsumexp(x, axis, reverse):
    return np.log(_np_cum(np.add)(np.exp(x.astype(np.float64)), axis, reverse)).astype(x.dtype)


CUMULATIVE = {
    "cumsum": (L.cumsum, _np_cum(np.add), np.float32),
    "cumprod": (L.cumprod, _np_cum(np.multiply), np.int32),
    "cummax": (L.cummax, _np_cum(np.maximum), np.float32),
    "cummin": (L.cummin, _np_cum(np.minimum), np.int32),
    "cumlogsumexp": (L.cumlogsumexp, _np_cumlogsumexp, np.float32),
}


@pytest.mark.parametrize("name", sorted(CUMULATIVE))
@pytest.mark.parametrize("axis,reverse", [(0, False), (1, True)])
def test_cumulative_vmap(name, axis, reverse):
    fn, ref, dtype = CUMULATIVE[name]
    x = sample((3, 4, 5), dtype)
    f = lambda v: fn(v, axis=axis, reverse=reverse)  # noqa: E731
    check_vmap_axes(f, x)
    check_numpy(f, lambda v: ref(v, axis, reverse), x, in_axis=2, rtol=1e-5)


def test_cumulative_vmap_1d_examples():
    """Per-example vectors: the scanned axis is the only one besides the batch."""
    x = sample((3, 7), np.float32)
    for in_axis in (0, 1):
        check_vmap(lambda v: L.cumsum(v, axis=0, reverse=True), x, in_axes=in_axis)
        check_vmap(lambda v: L.cummax(v, axis=0), x, in_axes=in_axis)


def test_cumsum_batch_dim_stays():
    f = plax.vmap(lambda v: L.cumsum(v, axis=1), in_axes=1, out_axes=1)
    text = str(plax.make_jaxpr(f)(np.zeros((3, 4, 5), np.float32)))
    assert "cumsum[axis=2 reverse=False]" in text and "transpose" not in text, text


# --- composition with grad and nested vmap ----------------------------------------------------
def _loss(v):
    return L.reduce_sum(L.cumsum(v, axis=0) * L.reduce_max(v, (0,)), (0,))


def test_vmap_of_grad_and_grad_of_vmap():
    x = sample((3, 5), np.float32)
    per_example = np.stack([np.asarray(plax.grad(_loss)(x[i])) for i in range(3)])
    np.testing.assert_allclose(np.asarray(plax.vmap(plax.grad(_loss))(x)), per_example, rtol=1e-5)
    total = lambda v: L.reduce_sum(plax.vmap(_loss, in_axes=1)(v), (0,))  # noqa: E731
    np.testing.assert_allclose(np.asarray(plax.grad(total)(x.T)), per_example.T, rtol=1e-5)
    check_grads(plax.vmap(_loss), (x.astype(np.float64),), order=2)


def test_nested_vmap():
    x = sample((2, 3, 4, 5), np.float32)
    inner = plax.vmap(lambda v: L.cumsum(L.reduce_sum(v, (1,)), axis=0), in_axes=1)
    out = plax.vmap(inner, in_axes=3)(x)  # outer over axis 3, inner over axis 1 of the rest
    want = np.stack([np.stack([np.cumsum(x[:, j, :, i].sum(1), 0) for j in range(3)])
                     for i in range(5)])
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5)
    am = plax.vmap(plax.vmap(lambda v: L.argmax(v, 0, np.int32), in_axes=0), in_axes=2)(x)
    np.testing.assert_array_equal(np.asarray(am), np.moveaxis(x.argmax(1), 1, 0))
