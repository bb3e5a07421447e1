"""vmap of dot_general, sort and top_k: batch at 0, 1 and -1 and unbatched operands, against
per-example calls (check_vmap) and NumPy; the jaxprs the rules produce; vmap with grad."""
import ml_dtypes
import numpy as np
import pytest

import plax
from helpers import check_vmap, check_vmap_axes, dot_general_reference
from plax.test_util import check_grads

from plax import lax

BF16 = np.dtype(ml_dtypes.bfloat16)
rng = np.random.default_rng(0)


def normal(shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)




# --- dot_general -----------------------------------------------------------------------------
# (lhs per-example shape, rhs per-example shape, dimension_numbers)
DOT_CASES = {
    "matmul": ((3, 4), (4, 5), (((1,), (0,)), ((), ()))),
    "vecvec": ((4,), (4,), (((0,), (0,)), ((), ()))),
    "matvec": ((3, 4), (4,), (((1,), (0,)), ((), ()))),
    "outer": ((3,), (2,), (((), ()), ((), ()))),
    "bmm": ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
    "two_contract": ((3, 4, 5), (5, 4, 2), (((1, 2), (1, 0)), ((), ()))),
    "inner_batch": ((4, 2, 3), (3, 2), (((2,), (0,)), ((1,), (1,)))),
    "contract_first": ((4, 3), (5, 4), (((0,), (1,)), ((), ()))),
}


@pytest.mark.parametrize("name", sorted(DOT_CASES))
def test_dot_general_vmap(name):
    ls, rs, dn = DOT_CASES[name]
    lhs, rhs = normal((3,) + ls), normal((3,) + rs)
    f = lambda a, b: lax.dot_general(a, b, dn)  # noqa: E731
    check_vmap_axes(f, lhs, rhs, rtol=1e-5)
    out = plax.vmap(f)(lhs, rhs)
    want = np.stack([dot_general_reference(lhs[i], rhs[i], dn) for i in range(3)])
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("in_axes", [(1, None), (None, 2), (2, 0), (None, 0)])
def test_dot_general_vmap_mixed_axes(in_axes):
    """Operands batched at different dimensions, or one not at all, with out_axes=1."""
    dn = (((2,), (1,)), ((0,), (0,)))  # bmm
    lhs = normal((2, 3, 4)) if in_axes[0] is None else np.moveaxis(normal((5, 2, 3, 4)), 0,
                                                                   in_axes[0])
    rhs = normal((2, 4, 6)) if in_axes[1] is None else np.moveaxis(normal((5, 2, 4, 6)), 0,
                                                                   in_axes[1])
    check_vmap(lambda a, b: lax.dot_general(a, b, dn), lhs, rhs, in_axes=in_axes, out_axes=1,
               rtol=1e-5)


def test_dot_general_vmap_keeps_dtype_params():
    dn = (((1,), (0,)), ((), ()))
    a8 = rng.integers(-5, 5, (3, 2, 4)).astype(np.int8)
    b8 = rng.integers(-5, 5, (4, 3)).astype(np.int8)
    f = lambda a, b: lax.dot_general(a, b, dn, preferred_element_type=np.int32)  # noqa: E731
    out = check_vmap(f, a8, b8, in_axes=(0, None))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), np.einsum("bij,jk->bik", a8.astype(np.int32),
                                                             b8.astype(np.int32)))
    bf = normal((3, 2, 4), BF16), normal((4, 5, 3), BF16)
    g = lambda a, b: lax.dot_general(a, b, dn, precision=lax.Precision.HIGHEST,  # noqa: E731
                                   preferred_element_type=np.float32)
    out = check_vmap(g, *bf, in_axes=(0, 2), rtol=1e-2)
    assert out.dtype == np.float32
    text = str(plax.make_jaxpr(plax.vmap(g, in_axes=(0, 2)))(*bf))
    assert "precision=(Precision.HIGHEST, Precision.HIGHEST)" in text, text
    assert "preferred_element_type=float32" in text, text


@pytest.mark.parametrize("in_axes,dims,out_dim", [
    ((0, 0), "(([2], [1]), ([0], [0]))", 0),   # both batched: a new dot batch dimension
    ((1, 2), "(([2], [0]), ([1], [2]))", 0),
    ((0, None), "(([2], [0]), ([], []))", 0),  # lhs only: a free lhs dimension
    ((1, None), "(([2], [0]), ([], []))", 1),
    ((None, 0), "(([1], [1]), ([], []))", 1),  # rhs only: a free rhs dimension
    ((None, 2), "(([1], [0]), ([], []))", 2),
])
def test_dot_general_vmap_jaxpr(in_axes, dims, out_dim):
    """One dot_general, no transpose or broadcast, the batch where the rule says it ends up."""
    lhs = (3, 4) if in_axes[0] is None else np.insert(np.array((3, 4)), in_axes[0], 6)
    rhs = (4, 5) if in_axes[1] is None else np.insert(np.array((4, 5)), in_axes[1], 6)
    f = plax.vmap(lambda a, b: lax.dot(a, b), in_axes=in_axes, out_axes=out_dim)
    text = str(plax.make_jaxpr(f)(np.zeros(tuple(lhs), np.float32),
                                  np.zeros(tuple(rhs), np.float32)))
    assert f"dimension_numbers={dims}" in text, text
    assert text.count(" = ") == 1, text  # the dot and nothing else


def test_batch_matmul_and_dot_vmap():
    a, b = normal((2, 3, 4, 5)), normal((2, 3, 5, 2))
    check_vmap_axes(lambda x, y: lax.batch_matmul(x, y), a, b, rtol=1e-5)
    check_vmap(lambda x, y: lax.dot(x, y), a[0], normal((5, 3)), in_axes=(0, 1), rtol=1e-5)


def test_nested_vmap_dot():
    a, b = normal((2, 3, 4)), normal((4, 2, 5))
    # outer maps a's axis 0 and b's axis 1; inner maps a's (remaining) axis 0 and nothing of b.
    inner = plax.vmap(lambda x, y: lax.dot(x, y), in_axes=(0, None))
    out = plax.vmap(inner, in_axes=(0, 1))(a, b)
    want = np.stack([np.stack([a[i, j] @ b[:, i, :] for j in range(3)]) for i in range(2)])
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5)
    both = plax.vmap(plax.vmap(lambda x, y: lax.dot(x, y), in_axes=(1, 0)), in_axes=(2, 2))
    c, d = normal((4, 6, 7)), normal((6, 4, 7))
    want = np.stack([np.stack([c[:, j, k] @ d[j, :, k] for j in range(6)]) for k in range(7)])
    np.testing.assert_allclose(np.asarray(both(c, d)), want, rtol=1e-5, atol=1e-5)


# --- sort -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
@pytest.mark.parametrize("dimension", [0, -1])
def test_sort_vmap(dtype, dimension):
    x = normal((3, 4, 5)) if dtype == np.float32 else rng.integers(-3, 3, (3, 4, 5)).astype(dtype)
    if dtype == np.float32:
        x[0, 1, 2], x[2, 0, 0] = np.nan, -0.0
    f = lambda v: lax.sort(v, dimension=dimension)  # noqa: E731
    check_vmap_axes(f, x)
    out = np.asarray(plax.vmap(f, in_axes=1)(x))
    np.testing.assert_array_equal(out, np.stack([np.sort(x[:, i], axis=dimension)
                                                 for i in range(4)]))


@pytest.mark.parametrize("num_keys,is_stable", [(1, True), (2, True), (1, False)])
def test_sort_multi_operand_vmap(num_keys, is_stable):
    keys = rng.integers(0, 3, (3, 4, 6)).astype(np.int32)  # many ties
    keys2 = normal((3, 4, 6))
    vals = rng.integers(0, 100, (3, 4, 6)).astype(np.int32)
    f = lambda k, k2, v: lax.sort((k, k2, v), dimension=1, is_stable=is_stable,  # noqa: E731
                                num_keys=num_keys)
    if is_stable:
        check_vmap_axes(f, keys, keys2, vals)
    out = plax.vmap(f, in_axes=(2, 0, None))(np.moveaxis(keys, 0, 2), keys2, vals[0])
    for i in range(3):
        k, k2 = keys[i], keys2[i]
        order = np.lexsort((k2, k), axis=1) if num_keys == 2 else np.argsort(k, 1, kind="stable")
        np.testing.assert_array_equal(np.asarray(out[0][i]), np.take_along_axis(k, order, 1))
        if is_stable:
            np.testing.assert_array_equal(np.asarray(out[2][i]),
                                          np.take_along_axis(vals[0], order, 1))


def test_sort_key_val_vmap_batch_moves_to_keys():
    """Operands batched at different dimensions all take the first batched one's."""
    keys, vals = normal((4, 5, 3)), normal((3, 4, 5))
    f = lambda k, v: lax.sort_key_val(k, v, dimension=0)  # noqa: E731
    check_vmap(f, keys, vals, in_axes=(2, 0), out_axes=(2, 2))
    text = str(plax.make_jaxpr(plax.vmap(f, in_axes=(2, 0), out_axes=2))(keys, vals))
    assert text.count("transpose") == 1 and "sort[dimension=0" in text, text


# --- top_k ----------------------------------------------------------------------------------
def _np_top_k(x, k, axis):
    idx = np.take(np.argsort(-x, axis=axis, kind="stable"), np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis), idx.astype(np.int32)


@pytest.mark.parametrize("k,axis", [(1, -1), (3, -1), (2, 0)])
def test_top_k_vmap(k, axis):
    x = normal((3, 4, 5))
    f = lambda v: lax.top_k(v, k, axis=axis)  # noqa: E731
    check_vmap_axes(f, x)
    vals, idx = plax.vmap(f, in_axes=2)(x)
    for i in range(5):
        wv, wi = _np_top_k(x[:, :, i], k, axis)
        np.testing.assert_array_equal(np.asarray(vals[i]), wv)
        np.testing.assert_array_equal(np.asarray(idx[i]), wi)


def test_top_k_vmap_jaxpr():
    x = np.zeros((4, 5, 3), np.float32)
    # Batch before the axis: the axis shifts, nothing moves.
    text = str(plax.make_jaxpr(plax.vmap(lambda v: lax.top_k(v, 2), in_axes=1, out_axes=1))(x))
    assert "top_k[axis=2 k=2]" in text and "transpose" not in text, text
    # Batch last while the axis was: the batch moves to the front so top_k stays on the last axis.
    text = str(plax.make_jaxpr(plax.vmap(lambda v: lax.top_k(v, 2), in_axes=2))(x))
    assert "top_k[axis=2 k=2]" in text and text.count("transpose") == 1, text


# --- composition with grad --------------------------------------------------------------------
def _dot_loss(w, x):
    h = lax.dot(x, w)
    return lax.reduce_sum(h * h, (0, 1))


def _sort_loss(x):
    s = lax.sort(x, dimension=0)
    return lax.reduce_sum(s * np.arange(1, 6, dtype=s.dtype) + lax.cumsum(s, axis=0), (0,))


def test_vmap_of_grad_dot_and_sort():
    w, xs = normal((4, 3)), normal((6, 5, 4))  # x per example: (5, 4)
    per_example = np.stack([np.asarray(plax.grad(_dot_loss)(w, xs[i])) for i in range(6)])
    got = plax.vmap(plax.grad(_dot_loss), in_axes=(None, 0))(w, xs)
    np.testing.assert_allclose(np.asarray(got), per_example, rtol=1e-4)
    v = normal((6, 5))
    per_example = np.stack([np.asarray(plax.grad(_sort_loss)(v[i])) for i in range(6)])
    np.testing.assert_allclose(np.asarray(plax.vmap(plax.grad(_sort_loss), in_axes=1)(v.T)),
                               per_example, rtol=1e-5)


def test_grad_of_vmap_dot_and_sort():
    w, xs = normal((4, 3), np.float64), normal((6, 5, 4), np.float64)
    total = lambda w, xs: lax.reduce_sum(plax.vmap(_dot_loss, (None, 0))(w, xs), (0,))  # noqa: E731
    want = sum(np.asarray(plax.grad(_dot_loss)(w, xs[i])) for i in range(6))
    np.testing.assert_allclose(np.asarray(plax.grad(total)(w, xs)), want, rtol=1e-6,
                               atol=1e-4)  # (float32 sums of values up to ~70: order-sensitive)
    # Second-order finite differences of values in the thousands: in float64, where the
    # check is not at the mercy of float32 rounding (which tips it on some CPUs).
    with plax.enable_x64():
        check_grads(plax.vmap(_dot_loss, (None, 2)), (w, np.moveaxis(xs, 0, 2)), order=2)
        check_grads(plax.vmap(_sort_loss, 1), (normal((5, 3), np.float64),), order=2)
