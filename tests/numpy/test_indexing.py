"""Basic indexing: integers, slices, None, Ellipsis, traced integers."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp

A = np.arange(60, dtype=np.float32).reshape(3, 4, 5)

BASIC = [
    0, -1, 2, (1, 2), (1, 2, 3), (-1, -2, -3), slice(None), slice(1, None), slice(None, None, -1),
    (slice(None), 1), (Ellipsis, 2), (Ellipsis,), (None,), (None, 0, Ellipsis, None),
    (0, slice(3, 0, -2), slice(1, None, 2)), slice(5, 10), slice(2, 1), (..., slice(None, None, -3)),
    (slice(None), None, slice(1, 3), Ellipsis), (1, Ellipsis, None), (slice(-100, 100),),
]


@pytest.mark.parametrize("idx", BASIC, ids=[repr(i) for i in BASIC])
def test_basic_indexing_matches_numpy(idx):
    out = jnp.array(A)[idx]
    expected = A[idx]
    assert out.shape == expected.shape and out.dtype == expected.dtype
    np.testing.assert_array_equal(np.asarray(out), expected)


def test_indexing_zero_d_and_empty():
    s = jnp.array(5.0)
    assert float(s[()]) == 5.0 and s[None].shape == (1,) and s[...].shape == ()
    e = jnp.zeros((0, 3))
    assert e[:, 1].shape == (0,) and e[1:].shape == (0, 3)


@pytest.mark.parametrize("dtype", [np.int32, np.bool_, np.uint8])
def test_indexing_other_dtypes(dtype):
    a = (np.arange(12) % 3).astype(dtype).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(jnp.array(a)[1, ::2]), a[1, ::2])


def test_concrete_array_index():
    x = jnp.array(A)
    np.testing.assert_array_equal(np.asarray(x[jnp.array(2)]), A[2])
    np.testing.assert_array_equal(np.asarray(x[np.int64(1), np.int32(-1)]), A[1, -1])


def test_traced_integer_index_is_dynamic_and_wraps():
    f = lambda x, i: x[i, 1:]  # noqa: E731
    j = plax.make_jaxpr(f)(A, 1)
    assert "dynamic_slice" in str(j)
    from plax.core.jaxpr import eval_jaxpr
    for i in (0, 2, -1, -3):
        out, = eval_jaxpr(j.jaxpr, j.consts, A, np.int32(i))
        np.testing.assert_array_equal(np.asarray(out), A[i, 1:])


def test_static_slices_stage_as_slice_and_rev():
    j = plax.make_jaxpr(lambda x: x[::-2, 1])(A)
    text = str(j)
    assert "slice[" in text and "rev[" in text and "squeeze[" in text


def test_index_errors():
    x = jnp.array(A)
    with pytest.raises(IndexError, match="Too many indices"):
        x[0, 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., 0, ...]
    with pytest.raises(TypeError, match="non-tuple sequence"):
        x[[0, 1]]
    with pytest.raises(TypeError, match="does not support string indexing"):
        x["a"]
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
        jnp.zeros((0, 2))[0]


def test_static_out_of_bounds_integers_clamp_as_jax():
    x = jnp.array(A)
    np.testing.assert_array_equal(x[3], np.asarray(A)[-1])     # clamped to the last row
    np.testing.assert_array_equal(x[-7], np.asarray(A)[0])     # wrapped once, then clamped
    np.testing.assert_array_equal(x[1, 9], np.asarray(A)[1, -1])


def test_rewriting_take_strategies():
    from plax._src.numpy.indexing import IndexingStrategy as S, rewriting_take
    x = np.arange(24.0).reshape(4, 6)
    # (index, strategy, mode, normalize_indices, what NumPy reads)
    cases = [((1, slice(None, None, -1)), S.STATIC_SLICE, None, True, x[1, ::-1]),
             ((slice(1, 3), -2), S.DYNAMIC_SLICE, None, True, x[1:3, -2]),
             ((np.array([0, 3]), 2), S.GATHER, None, True, x[[0, 3], 2]),
             ((plax.ds(1, 2), 0), S.GATHER, None, True, x[1:3, 0]),
             ((10, -2), S.STATIC_SLICE, "clip", True, x[3, -2]),
             ((-2, 10), S.GATHER, "clip", False, x[0, 5]),       # no wrap: -2 clips to 0
             ((-2, 1), S.DYNAMIC_SLICE, "clip", False, x[0, 1])]
    for idx, strategy, mode, normalize, want in cases:
        got = rewriting_take(x, idx, strategy=strategy, mode=mode, normalize_indices=normalize)
        np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeError, match="static_slice: indices must be static scalars"):
        rewriting_take(x, (np.arange(2), 0), strategy=S.STATIC_SLICE)
    with pytest.raises(IndexError, match="index 4 out of bounds for axis 0 with size 4"):
        rewriting_take(x, 4, strategy=S.STATIC_SLICE)
    with pytest.raises(TypeError, match="dynamic_slice: only unit steps supported"):
        rewriting_take(x, slice(None, None, 2), strategy=S.DYNAMIC_SLICE)
    with pytest.raises(ValueError, match="requires mode='promise_in_bounds' or mode='clip'"):
        rewriting_take(x, 0, strategy=S.STATIC_SLICE, mode="fill")
    with pytest.raises(TypeError, match="Expected strategy to be IndexingStrategy"):
        rewriting_take(x, 0, strategy="gather")


def test_check_static_indices_flag_and_traced_slice_bounds():
    x = jnp.zeros((2, 3, 5))
    np.testing.assert_array_equal(x[:, 4].shape, (2, 5))  # clamped: the flag is off
    with plax.config.override("jax_check_static_indices", True):
        for take in (lambda: x[:, 4], lambda: plax.jit(lambda a: a[:, 4])(x),
                     lambda: x.at[:, 4].get(), lambda: x[np.arange(2), 6, None]):
            with pytest.raises(IndexError, match="index [46] out of bounds for axis 1 with "
                                                 "size 3"):
                take()
        np.testing.assert_array_equal(x.at[:, 4].get(mode="clip"), x[:, 2])
    with pytest.raises(IndexError, match="Array slice indices must have static start/stop"):
        plax.jit(lambda a, i: a[i:])(x, 1)
    with pytest.raises(TypeError, match="JAX does not support string indexing"):
        x["abc"]
