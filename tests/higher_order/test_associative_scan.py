"""associative_scan against sequential NumPy references: cumulative sums, products and
maxima, a pytree operator (affine maps composed), a non-commutative one (matrix
products), under jit, vmap and grad, and its argument errors."""
import functools

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.higher_order.associative_scan import associative_scan
from plax.test_util import check_grads

rng = np.random.default_rng(0)
SIZES = [1, 2, 3, 7, 8, 33]


def seq_scan(fn, elems, reverse=False, axis=0):
    """Sequential reference with associative_scan's argument order: forward results fold
    ``fn(acc, x[i])`` from the start; reverse ones fold ``fn(acc, x[i])`` from the end."""
    leaves = elems if isinstance(elems, tuple) else (elems,)
    leaves = [np.moveaxis(np.asarray(x), axis, 0) for x in leaves]
    n = leaves[0].shape[0]
    order = range(n - 1, -1, -1) if reverse else range(n)
    out = [np.empty_like(x) for x in leaves]
    acc = None
    for i in order:
        cur = tuple(x[i] for x in leaves)
        acc = cur if acc is None else fn(acc, cur)
        for o, a in zip(out, acc):
            o[i] = a
    out = tuple(np.moveaxis(o, 0, axis) for o in out)
    return out if isinstance(elems, tuple) else out[0]


@functools.partial(plax.jit, static_argnums=(0,), static_argnames=("axis",))
def fwd_rev(fn, elems, axis=0):
    """Both scan directions in one compiled program (eager dispatch compiles per op)."""
    return (associative_scan(fn, elems, axis=axis),
            associative_scan(fn, elems, reverse=True, axis=axis))


def affine(f, g):
    """Compose affine maps x -> a*x + b: ``f`` first, then ``g``."""
    (a1, b1), (a2, b2) = f, g
    return a1 * a2, a2 * b1 + b2


def affine_np(f, g):
    (a1, b1), (a2, b2) = f, g
    return a1 * a2, a2 * b1 + b2


CUMULATIVE = [  # plax operator, NumPy reference (forward, along axis 0)
    ("add", jnp.add, lambda x: np.cumsum(x, axis=0)),
    ("mul", jnp.multiply, lambda x: np.cumprod(x, axis=0)),
    ("max", jnp.maximum, lambda x: np.maximum.accumulate(x, axis=0)),
]


@pytest.mark.parametrize("n", [1, 2, 7])
def test_eager_cumsum(n):
    x = rng.standard_normal((n, 3)).astype(np.float32)
    np.testing.assert_allclose(associative_scan(jnp.add, x), np.cumsum(x, 0), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(associative_scan(jnp.add, x, reverse=True),
                               np.cumsum(x[::-1], 0)[::-1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", SIZES)
def test_cumulative_ops_match_numpy(n):
    x = rng.uniform(0.5, 1.5, (n, 3)).astype(np.float32)
    for name, op, ref in CUMULATIVE:
        fwd, rev = fwd_rev(op, x)
        np.testing.assert_allclose(fwd, ref(x), rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(rev, ref(x[::-1])[::-1], rtol=1e-5, err_msg=name + " reverse")


@pytest.mark.parametrize("n", SIZES)
def test_affine_recurrence_pytree(n):
    # Scanning (a, b) pairs under composition solves h[t] = a[t] * h[t-1] + b[t], h[-1] = 0.
    a = rng.uniform(-1.0, 1.0, (n, 2)).astype(np.float32)
    b = rng.standard_normal((n, 2)).astype(np.float32)
    outs = fwd_rev(affine, (a, b))
    for reverse, out in zip([False, True], outs):
        assert isinstance(out, tuple) and len(out) == 2
        want = seq_scan(affine_np, (a, b), reverse=reverse)
        np.testing.assert_allclose(out[0], want[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out[1], want[1], rtol=1e-5, atol=1e-6)
    h, hs = np.zeros(2, np.float32), []
    for t in range(n):
        h = a[t] * h + b[t]
        hs.append(h)
    np.testing.assert_allclose(outs[0][1], np.stack(hs), rtol=1e-5, atol=1e-6)


def test_affine_recurrence_eager():
    a = rng.uniform(-1.0, 1.0, (5,)).astype(np.float32)
    b = rng.standard_normal((5,)).astype(np.float32)
    for reverse in [False, True]:
        out = associative_scan(affine, (a, b), reverse=reverse)
        want = seq_scan(affine_np, (a, b), reverse=reverse)
        np.testing.assert_allclose(out[0], want[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out[1], want[1], rtol=1e-5, atol=1e-6)


def test_dict_pytree_structure_kept():
    x = {"s": np.arange(1.0, 6.0, dtype=np.float32), "p": np.arange(1.0, 6.0, dtype=np.float32)}
    out = associative_scan(lambda u, v: {"s": u["s"] + v["s"], "p": u["p"] * v["p"]}, x)
    assert set(out) == {"s", "p"}
    np.testing.assert_allclose(out["s"], [1, 3, 6, 10, 15])
    np.testing.assert_allclose(out["p"], [1, 2, 6, 24, 120])


def test_non_commutative_matrix_products():
    # fn's argument order matters: forward results are m[0] @ ... @ m[i]; reverse ones
    # are m[n-1] @ ... @ m[i] (the later elements are passed first).
    m = rng.standard_normal((7, 2, 2)).astype(np.float32)
    for reverse, out in zip([False, True], fwd_rev(jnp.matmul, m)):
        want = seq_scan(lambda u, v: (u[0] @ v[0],), (m,), reverse=reverse)[0]
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_argument_order_forward_and_reverse():
    # A non-associative fn exposes which operand is which. With 3 elements every
    # combination tree gives the sequential fold: fn(fn(x0, x1), x2) forward,
    # fn(fn(x2, x1), x0) in reverse.
    x = np.array([1, 2, 3], np.int32)
    fn = lambda u, v: u * 10 + v  # noqa: E731
    np.testing.assert_array_equal(associative_scan(fn, x), [1, 12, 123])
    np.testing.assert_array_equal(associative_scan(fn, x, reverse=True), [321, 32, 3])


def test_combination_tree_matches_jax():
    # Values taken from jax.lax.associative_scan (0.10.2): the odd/even scheme combines
    # element 4 with the prefix of elements 0..3 (154 = 15 * 10 + 4), not sequentially.
    x = np.arange(1, 6, dtype=np.int32)
    out = associative_scan(lambda u, v: u * 10 + v, x)
    np.testing.assert_array_equal(out, [1, 12, 123, 154, 1545])


@pytest.mark.parametrize("axis", [0, 1, -1, 2, -3])
def test_axis(axis):
    x = rng.standard_normal((3, 7, 4)).astype(np.float32)
    for reverse, out in zip([False, True], fwd_rev(jnp.add, x, axis=axis)):
        want = seq_scan(lambda u, v: (u[0] + v[0],), (x,), reverse=reverse, axis=axis)[0]
        assert out.shape == x.shape
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_axis_eager():
    x = rng.standard_normal((2, 5)).astype(np.float32)
    np.testing.assert_allclose(associative_scan(jnp.add, x, axis=-1), np.cumsum(x, 1),
                               rtol=1e-5, atol=1e-5)


def test_axis_with_pytree_of_different_ranks():
    # The axis is resolved against the first leaf; other leaves just need that axis too.
    a = rng.standard_normal((2, 5)).astype(np.float32)
    b = rng.standard_normal((2, 5, 3)).astype(np.float32)
    out, _ = fwd_rev(lambda u, v: (u[0] + v[0], u[1] + v[1]), (a, b), axis=-1)
    np.testing.assert_allclose(out[0], np.cumsum(a, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1], np.cumsum(b, 1), rtol=1e-5, atol=1e-5)


def test_integer_and_bool_exact():
    x = rng.integers(-5, 6, (33,)).astype(np.int32)
    out, _ = fwd_rev(jnp.add, x)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.cumsum(x))
    np.testing.assert_array_equal(fwd_rev(jnp.maximum, x)[1],
                                  np.maximum.accumulate(x[::-1])[::-1])
    flags = np.array([False, False, True, False, False, True, False])
    got, _ = fwd_rev(jnp.logical_or, flags)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, np.logical_or.accumulate(flags))


def test_values_moved_exactly():
    # The even/odd results are woven together by moving values, so signed zeros, NaNs
    # and infinities pass through untouched (an fn that keeps its first operand).
    x = np.array([-0.0, 1.0, np.nan, -np.inf, -0.0], np.float32)
    first = associative_scan(lambda u, v: u, x)
    assert np.all(np.signbit(first)) and np.all(first == 0.0)
    last = associative_scan(lambda u, v: v, x)
    np.testing.assert_array_equal(last, x)
    assert np.signbit(last[0]) and np.signbit(last[4])


def test_empty_axis():
    out = associative_scan(jnp.add, np.zeros((0, 3), np.float32))
    assert out.shape == (0, 3)
    out = associative_scan(jnp.add, np.zeros((2, 0), np.float32), axis=1, reverse=True)
    assert out.shape == (2, 0)


@pytest.mark.parametrize("n", [1, 8, 33])
def test_jit(n):
    a = rng.uniform(-1.0, 1.0, (n,)).astype(np.float32)
    b = rng.standard_normal((n,)).astype(np.float32)

    @plax.jit
    def f(a, b):
        s = associative_scan(jnp.add, b, reverse=True)
        return s, associative_scan(affine, (a, b))

    s, (pa, pb) = f(a, b)
    np.testing.assert_allclose(s, np.cumsum(b[::-1])[::-1], rtol=1e-5, atol=1e-5)
    wa, wb = seq_scan(affine_np, (a, b))
    np.testing.assert_allclose(pa, wa, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pb, wb, rtol=1e-5, atol=1e-6)


def test_jit_static_axis_and_reverse():
    x = rng.standard_normal((4, 7)).astype(np.float32)
    f = plax.jit(lambda x: associative_scan(jnp.maximum, x, reverse=True, axis=-1))
    np.testing.assert_allclose(f(x), np.maximum.accumulate(x[:, ::-1], axis=1)[:, ::-1])


def test_vmap():
    x = rng.standard_normal((5, 7, 3)).astype(np.float32)
    # Mapped over the leading axis: each example is scanned along its own axis 0 (= 1 here).
    out = plax.vmap(lambda r: associative_scan(jnp.add, r))(x[:2, :3])
    np.testing.assert_allclose(out, np.cumsum(x[:2, :3], axis=1), rtol=1e-5, atol=1e-5)
    # Mapped over the middle axis, with reverse, under jit.
    f = plax.vmap(lambda r: associative_scan(jnp.multiply, r, reverse=True), in_axes=1,
                  out_axes=1)
    want = np.cumprod(x[::-1], axis=0)[::-1]
    np.testing.assert_allclose(plax.jit(f)(x), want, rtol=1e-5, atol=1e-5)


def test_vmap_pytree():
    a = rng.uniform(-1.0, 1.0, (3, 8)).astype(np.float32)
    b = rng.standard_normal((3, 8)).astype(np.float32)
    pa, pb = plax.jit(plax.vmap(lambda a, b: associative_scan(affine, (a, b))))(a, b)
    for i in range(3):
        wa, wb = seq_scan(affine_np, (a[i], b[i]))
        np.testing.assert_allclose(pa[i], wa, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(pb[i], wb, rtol=1e-5, atol=1e-6)


def test_grad_values():
    # d/dx[i] of sum(cumsum(x)) counts the prefixes holding x[i]: n - i (i + 1 reversed).
    x = np.arange(1.0, 8.0, dtype=np.float32)
    g = plax.grad(lambda x: associative_scan(jnp.add, x[:3]).sum())(x)  # eager
    np.testing.assert_allclose(g, [3, 2, 1, 0, 0, 0, 0])
    g = plax.jit(plax.grad(lambda x: associative_scan(jnp.add, x).sum()))(x)
    np.testing.assert_allclose(g, np.arange(7, 0, -1))
    g = plax.jit(plax.grad(lambda x: associative_scan(jnp.add, x, reverse=True).sum()))(x)
    np.testing.assert_allclose(g, np.arange(1, 8))
    # d/dx[i] of the full product's last entry: prod / x[i].
    g = plax.jit(plax.grad(lambda x: associative_scan(jnp.multiply, x)[-1]))(x)
    np.testing.assert_allclose(g, np.prod(x) / x, rtol=1e-5)


def test_check_grads_order1():
    x = rng.uniform(0.5, 1.5, (7, 2)).astype(np.float32)
    check_grads(plax.jit(lambda x: associative_scan(jnp.add, x)), (x,), 1)
    check_grads(plax.jit(lambda x: associative_scan(jnp.multiply, x, reverse=True)), (x,), 1,
                rtol=2e-2)
    a = rng.uniform(-1.0, 1.0, (8,)).astype(np.float32)
    b = rng.standard_normal((8,)).astype(np.float32)
    check_grads(plax.jit(lambda a, b: associative_scan(affine, (a, b))[1]), (a, b), 1,
                rtol=2e-2)


def test_check_grads_order2():
    x = rng.uniform(0.5, 1.5, (3,)).astype(np.float32)
    check_grads(lambda x: associative_scan(jnp.multiply, x), (x,), 2, rtol=2e-2)


def test_errors():
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="fn argument should be callable"):
        associative_scan(3, x)
    with pytest.raises(ValueError, match="must have the same first dimension"):
        associative_scan(jnp.add, (x, np.ones(4, np.float32)))
    with pytest.raises(ValueError, match="must have the same first dimension"):
        associative_scan(jnp.add, (np.ones((2, 3)), np.ones((2, 4))), axis=1)
    with pytest.raises(ValueError, match="axis 1 is out of bounds for array of dimension 1"):
        associative_scan(jnp.add, x, axis=1)
    with pytest.raises(ValueError, match="axis -2 is out of bounds for array of dimension 1"):
        associative_scan(jnp.add, x, axis=-2)
    with pytest.raises(ValueError, match="axis 0 is out of bounds for array of dimension 0"):
        associative_scan(jnp.add, np.float32(1.0))
    with pytest.raises(ValueError, match="at least one array"):
        associative_scan(jnp.add, ())
    with pytest.raises(ValueError, match="as many leaves as elems"):
        associative_scan(lambda u, v: (u, v), x)
