"""plax.numpy index helpers against NumPy (values) and JAX 0.10 (dtypes, clipping, errors)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.errors import ConcretizationTypeError
from helpers import check_exact as check


@pytest.mark.parametrize("dims", [(2, 3), (4,), (2, 1, 3), ()])
@pytest.mark.parametrize("sparse", [False, True])
def test_indices(dims, sparse):
    got, want = jnp.indices(dims, sparse=sparse), np.indices(dims, sparse=sparse)
    if sparse:
        for g, w in zip(got, want):
            check(g, w, np.int32)
    else:
        check(got, want, np.int32)
    assert jnp.indices((2, 3), dtype=jnp.uint8).dtype == np.uint8


def test_ix_():
    a, b = np.array([0, 2]), np.array([1, 2, 0], np.int8)
    for g, w in zip(jnp.ix_(a, b), np.ix_(a, b)):
        check(g, w, w.dtype if w.dtype != np.int64 else np.int32)
    with pytest.raises(NotImplementedError, match="Boolean arguments"):
        jnp.ix_(np.array([True, False]))
    with pytest.raises(ValueError, match="1 dimensional"):
        jnp.ix_(np.ones((2, 2), np.int32))


@pytest.mark.parametrize("shape", [(2, 3), (4,), (3, 1, 5)])
@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8])
def test_unravel_index(shape, dtype):
    idx = np.arange(int(np.prod(shape))).astype(dtype)
    for g, w in zip(jnp.unravel_index(idx, shape), np.unravel_index(idx, shape)):
        check(g, w, dtype)
    # JAX: negative indices wrap, out-of-range ones clip
    got = jnp.unravel_index(np.array([-1, 5, 100, -100]), (2, 3))
    check(got[0], [1, 1, 1, 0]), check(got[1], [2, 2, 2, 0])
    jit = plax.jit(lambda i: jnp.unravel_index(i, (2, 3)))(np.array([4, 1]))
    check(jit[0], [1, 0]), check(jit[1], [1, 1])
    with pytest.raises(ValueError, match="shape must be non-negative"):
        jnp.unravel_index(1, (2, -3))


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dims", [(2, 3), (3, 4, 5)])
def test_ravel_multi_index(order, dims):
    rng = np.random.default_rng(0)
    mi = tuple(rng.integers(0, d, 7).astype(np.int32) for d in dims)
    check(jnp.ravel_multi_index(mi, dims, order=order), np.ravel_multi_index(mi, dims, order=order),
          np.int32)
    bad = tuple(m + d for m, d in zip(mi, dims))
    for mode in ("wrap", "clip"):
        check(jnp.ravel_multi_index(bad, dims, mode=mode, order=order),
              np.ravel_multi_index(bad, dims, mode=mode, order=order))
    f = plax.jit(lambda *m: jnp.ravel_multi_index(m, dims, mode="clip", order=order))
    check(f(*bad), np.ravel_multi_index(bad, dims, mode="clip", order=order))
    assert jnp.ravel_multi_index((np.int8([0, 1]), np.int8([2, 2])), (2, 3)).dtype == np.int8


def test_ravel_multi_index_errors():
    with pytest.raises(ValueError, match="invalid entry in coordinates array"):
        jnp.ravel_multi_index((np.array([0, 1]), np.array([2, 5])), (2, 3))
    with pytest.raises(ConcretizationTypeError, match="mode='raise'"):
        plax.jit(lambda a: jnp.ravel_multi_index((a, a), (2, 3)))(np.array([0, 1]))
    with pytest.raises(TypeError, match="must be integers"):
        jnp.ravel_multi_index((np.array([0.]), np.array([1])), (2, 3))
    with pytest.raises(ValueError, match="multi_index has 1 arrays"):
        jnp.ravel_multi_index((np.array([0]),), (2, 3))
    with pytest.raises(ValueError, match="invalid mode"):
        jnp.ravel_multi_index((np.array([0]),), (2,), mode="x")
    with pytest.raises(ValueError, match="invalid order"):
        jnp.ravel_multi_index((np.array([0]),), (2,), order="x")


@pytest.mark.parametrize("n,k,m", [(3, 0, None), (3, 1, 4), (4, -1, 2), (0, 0, None)])
def test_tri_indices(n, k, m):
    for fn in ("tril_indices", "triu_indices"):
        for g, w in zip(getattr(jnp, fn)(n, k, m), getattr(np, fn)(n, k, m)):
            check(g, w, np.int32)
    arr = np.ones((n, n if m is None else m))
    for fn in ("tril_indices_from", "triu_indices_from"):
        for g, w in zip(getattr(jnp, fn)(arr, k), getattr(np, fn)(arr, k)):
            check(g, w, np.int32)
    with pytest.raises(ValueError, match="must be non-negative"):
        jnp.tril_indices(-1)
    with pytest.raises(ValueError, match="must be 2-d"):
        jnp.triu_indices_from(np.ones(3))


def test_diag_indices():
    for n, nd in [(3, 2), (2, 3), (0, 2)]:
        for g, w in zip(jnp.diag_indices(n, nd), np.diag_indices(n, nd)):
            check(g, w, np.int32)
    for g, w in zip(jnp.diag_indices_from(np.ones((3, 3, 3))), np.diag_indices_from(np.ones((3,) * 3))):
        check(g, w)
    with pytest.raises(ValueError, match="must be nonnegative"):
        jnp.diag_indices(-1)
    with pytest.raises(ValueError, match="equal length"):
        jnp.diag_indices_from(np.ones((3, 4)))
    with pytest.raises(ValueError, match="at least 2-d"):
        jnp.diag_indices_from(np.ones(3))


def test_mask_indices():
    for k in (0, 1, -1):
        for g, w in zip(jnp.mask_indices(4, jnp.triu, k), np.mask_indices(4, np.triu, k)):
            check(g, w, np.int32)
    g = jnp.mask_indices(3, jnp.triu, 1, size=4)
    check(g[0], [0, 0, 1, 0]), check(g[1], [1, 2, 2, 0])
    with pytest.raises(TypeError, match="mask_func must be callable"):
        jnp.mask_indices(3, 1)


@pytest.mark.parametrize("shape", [(3, 3), (5, 3), (3, 5), (3, 3, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_fill_diagonal(shape, dtype):
    a = np.arange(np.prod(shape)).reshape(shape).astype(dtype)
    for val in (7, np.array([1, 2], dtype)):
        want = a.copy()
        np.fill_diagonal(want, val)
        check(jnp.fill_diagonal(a, val, inplace=False), want, dtype)
    want = a.copy()
    np.fill_diagonal(want, 9)
    check(plax.jit(lambda x: jnp.fill_diagonal(x, 9, inplace=False))(a), want)
    check(plax.vmap(lambda x: jnp.fill_diagonal(x, 0, inplace=False))(np.ones((2, 3, 3))),
          np.stack([1 - np.eye(3)] * 2))


def test_fill_diagonal_errors():
    with pytest.raises(NotImplementedError, match="inplace=False"):
        jnp.fill_diagonal(np.zeros((3, 3)), 1.)
    with pytest.raises(NotImplementedError, match="wrap=True"):
        jnp.fill_diagonal(np.zeros((3, 3)), 1., wrap=True, inplace=False)
    with pytest.raises(ValueError, match="at least 2-d"):
        jnp.fill_diagonal(np.zeros(3), 1., inplace=False)
    with pytest.raises(ValueError, match="equal length"):
        jnp.fill_diagonal(np.zeros((3, 3, 4)), 1., inplace=False)


def test_fromfunction():
    f = lambda i, j: i * 10 + j  # noqa: E731
    check(jnp.fromfunction(f, (2, 3)), np.fromfunction(f, (2, 3)), np.float32)
    check(jnp.fromfunction(f, (2, 3), dtype=int), np.fromfunction(f, (2, 3), dtype=int), np.int32)
    with pytest.raises(TypeError, match="function must be callable"):
        jnp.fromfunction(3, (2,))


def test_grids():
    check(jnp.mgrid[0:2, 0:3:2], np.mgrid[0:2, 0:3:2], np.int32)
    check(jnp.mgrid[0:1:3j], np.mgrid[0:1:3j], np.float32)
    check(jnp.mgrid[0:2, 0:1:3j], np.mgrid[0:2, 0:1:3j], np.float32)
    check(jnp.mgrid[0:2:0.5], np.mgrid[0:2:0.5], np.float32)
    for g, w in zip(jnp.ogrid[0:2, 0:3], np.ogrid[0:2, 0:3]):
        check(g, w, np.int32)
    check(jnp.ogrid[0:3], np.ogrid[0:3])
    with pytest.raises(TypeError, match="must be slices"):
        jnp.mgrid[1, 2]
