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
    with pytest.raises(TypeError, match="not supported"):
        x["a"]
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
        jnp.zeros((0, 2))[0]


def test_static_out_of_bounds_integers_clamp_as_jax():
    x = jnp.array(A)
    np.testing.assert_array_equal(x[3], np.asarray(A)[-1])     # clamped to the last row
    np.testing.assert_array_equal(x[-7], np.asarray(A)[0])     # wrapped once, then clamped
    np.testing.assert_array_equal(x[1, 9], np.asarray(A)[1, -1])
