"""plax.experimental.sparse: BCOO arrays against NumPy/SciPy, under jit, grad and vmap."""
import numpy as np
import pytest
import scipy.sparse

import plax
import plax.numpy as jnp
from plax.experimental import sparse
from plax.experimental.sparse import BCOO
from plax.test_util import check_grads
from test_drop_in import assert_ok, program, run_script  # tests/ is on sys.path (conftest.py)

X = np.array([[0., 1., 0., 2.], [3., 0., 0., 0.], [0., 0., 4., 0.]], np.float32)
# Stored elements at (0, 1) twice, (2, 3), and two padding slots (indices out of range).
DUP = dict(data=np.array([1., 2., 3., 4., 5.], np.float32),
           indices=np.array([[0, 1], [2, 3], [0, 1], [3, 4], [1, 9]], np.int32), shape=(3, 4))
DUP_DENSE = np.array([[0., 4., 0., 0.], [0., 0., 0., 0.], [0., 0., 0., 2.]], np.float32)


def dup():
    return BCOO((DUP["data"], DUP["indices"]), shape=DUP["shape"])


def sparse_array(shape, seed=0):
    """A random float32 array with about half its elements zero."""
    x = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    x[np.abs(x) < 0.6] = 0
    return x


def np_dot_general(a, b, dims):
    """lax.dot_general's result, computed with np.einsum."""
    (lc, rc), (lb, rb) = dims
    letters = iter("abcdefghijklmnop")
    la = [next(letters) for _ in range(a.ndim)]
    lb_ = [None] * b.ndim
    for i, j in zip(lc, rc):
        lb_[j] = la[i]
    for i, j in zip(lb, rb):
        lb_[j] = la[i]
    lb_ = [c if c is not None else next(letters) for c in lb_]
    out = ([la[i] for i in lb] + [la[i] for i in range(a.ndim) if i not in lc and i not in lb]
           + [lb_[j] for j in range(b.ndim) if j not in rc and j not in rb])
    return np.einsum(f"{''.join(la)},{''.join(lb_)}->{''.join(out)}", a, b)


# --- construction, layout, repr, pytree ---------------------------------------------------------
def test_fromdense_buffers_and_padding():
    m = BCOO.fromdense(X)
    np.testing.assert_array_equal(m.data, [1., 2., 3., 4.])
    np.testing.assert_array_equal(m.indices, [[0, 1], [0, 3], [1, 0], [2, 2]])
    assert (m.shape, m.nse, m.dtype, m.indices.dtype) == ((3, 4), 4, np.float32, np.int32)
    assert m.indices_sorted and m.unique_indices
    padded = BCOO.fromdense(X, nse=6)
    np.testing.assert_array_equal(padded.data, [1., 2., 3., 4., 0., 0.])
    np.testing.assert_array_equal(padded.indices[4:], [[3, 4], [3, 4]])  # padding = the shape
    np.testing.assert_array_equal(padded.todense(), X)
    np.testing.assert_array_equal(BCOO.fromdense(X, nse=2).data, [1., 2.])  # cut


LAYOUTS = [((3, 4), 0, 0), ((2, 3, 4), 1, 0), ((3, 4, 2), 0, 1), ((2, 3, 4), 2, 0),
           ((2, 3, 4), 1, 1), ((2, 3), 1, 1)]


@pytest.mark.parametrize("shape,n_batch,n_dense", LAYOUTS)
def test_fromdense_todense_round_trip(shape, n_batch, n_dense):
    x = sparse_array(shape)
    m = BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
    n_sparse = len(shape) - n_batch - n_dense
    assert (m.n_batch, m.n_sparse, m.n_dense) == (n_batch, n_sparse, n_dense)
    assert m.data.shape == shape[:n_batch] + (m.nse,) + shape[n_batch + n_sparse:]
    assert m.indices.shape == shape[:n_batch] + (m.nse, n_sparse)
    np.testing.assert_array_equal(m.todense(), x)
    np.testing.assert_array_equal(sparse.todense(m), x)
    big = BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense, nse=m.nse + 2)
    np.testing.assert_array_equal(big.todense(), x)


def test_properties_repr_and_pytree():
    m = BCOO.fromdense(X)
    assert (m.ndim, m.size, len(m), m.n_batch, m.n_sparse, m.n_dense) == (2, 12, 3, 0, 2, 0)
    assert repr(m) == "BCOO(float32[3, 4], nse=4)"
    b = BCOO.fromdense(np.ones((2, 3, 4), np.float32), n_batch=1, n_dense=1)
    assert repr(b) == "BCOO(float32[2, 3, 4], nse=3, n_batch=1, n_dense=1)"
    leaves, tree = plax.tree_util.tree_flatten(m)
    assert len(leaves) == 2 and leaves[0] is m.data and leaves[1] is m.indices
    back = plax.tree_util.tree_unflatten(tree, leaves)
    assert isinstance(back, BCOO) and back.shape == (3, 4) and back.indices_sorted
    assert isinstance(m, sparse.JAXSparse)
    with pytest.raises(TypeError, match="unhashable"):
        hash(m)
    seen = []
    plax.jit(lambda m: seen.append(repr(m)) or m.data)(m)
    assert seen[0].endswith("Tracer[BCOO(float32[3, 4], nse=4)]")


def test_padding_and_duplicates():
    m = dup()
    v = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(m.todense(), DUP_DENSE)
    np.testing.assert_allclose(m @ v, DUP_DENSE @ v)
    np.testing.assert_allclose(jnp.arange(3.) @ m, np.arange(3.) @ DUP_DENSE)
    np.testing.assert_allclose(m.sum(0).todense(), DUP_DENSE.sum(0))
    np.testing.assert_allclose(m.sum(1).todense(), DUP_DENSE.sum(1))
    assert float(m.sum()) == 6.0
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    # A repeated index reads its element once (at its first occurrence); padding reads zero.
    np.testing.assert_array_equal(sparse.bcoo_extract(m, a).data, [1., 11., 0., 0., 0.])
    np.testing.assert_array_equal(sparse.bcoo_extract(m, a, assume_unique=True).data,
                                  [1., 11., 1., 0., 0.])
    merged = sparse.bcoo_sum_duplicates(m)
    np.testing.assert_array_equal(merged.data, [4., 2.])
    np.testing.assert_array_equal(merged.indices, [[0, 1], [2, 3]])
    assert merged.indices_sorted and merged.unique_indices
    wide = m.sum_duplicates(nse=4)
    np.testing.assert_array_equal(wide.indices, [[0, 1], [2, 3], [3, 4], [3, 4]])
    np.testing.assert_array_equal(wide.todense(), DUP_DENSE)
    ordered = sparse.bcoo_sort_indices(m)
    np.testing.assert_array_equal(ordered.indices, [[0, 1], [0, 1], [1, 9], [2, 3], [3, 4]])
    np.testing.assert_array_equal(ordered.data, [1., 3., 5., 2., 4.])


def test_sum_duplicates_removes_zeros():
    m = BCOO((np.array([0., 2., 3.], np.float32), np.array([[0, 0], [1, 1], [1, 1]], np.int32)),
             shape=(2, 2))
    out = m.sum_duplicates()
    np.testing.assert_array_equal(out.data, [5.])
    np.testing.assert_array_equal(out.indices, [[1, 1]])
    np.testing.assert_array_equal(m.sum_duplicates(remove_zeros=False).data, [0., 5.])


def test_broadcast_batch_buffers():
    # data shared by both batches (size-1 batch dimension), indices per batch.
    m = BCOO((np.array([[1., 2.]], np.float32), np.array([[[0], [2]], [[1], [1]]], np.int32)),
             shape=(2, 3))
    dense = np.array([[1., 0., 2.], [0., 3., 0.]], np.float32)
    np.testing.assert_array_equal(m.todense(), dense)
    np.testing.assert_allclose(m @ jnp.arange(3.), dense @ np.arange(3.))
    np.testing.assert_allclose(m.sum(0).todense(), dense.sum(0))
    np.testing.assert_allclose(m.sum(1).todense(), dense.sum(1))
    g = plax.grad(lambda d: (BCOO((d, m.indices), shape=(2, 3)) @ jnp.arange(3.)).sum())(m.data)
    np.testing.assert_allclose(g, [[0. + 1., 2. + 1.]])  # v[0] + v[1], v[2] + v[1]


# --- products ------------------------------------------------------------------------------------
DOT_CASES = [
    ((3, 4), 0, 0, (4,), (((1,), (0,)), ((), ()))),
    ((3, 4), 0, 0, (4, 5), (((1,), (0,)), ((), ()))),
    ((3, 4), 0, 0, (3, 5), (((0,), (0,)), ((), ()))),
    ((2, 3, 4), 1, 0, (2, 4), (((2,), (1,)), ((0,), (0,)))),
    ((2, 3, 4), 1, 0, (4,), (((2,), (0,)), ((), ()))),
    ((2, 3, 4), 1, 0, (2, 5), (((0,), (0,)), ((), ()))),
    ((3, 4, 2), 0, 1, (4,), (((1,), (0,)), ((), ()))),
    ((3, 4, 2), 0, 1, (2, 5), (((2,), (0,)), ((), ()))),
    ((2, 3, 4), 0, 0, (3, 4), (((1, 2), (0, 1)), ((), ()))),
    ((2, 3, 4), 2, 0, (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
    ((2, 3, 4), 1, 1, (3, 2), (((1,), (0,)), ((0,), (1,)))),
]


@pytest.mark.parametrize("shape,n_batch,n_dense,rhs_shape,dims", DOT_CASES)
def test_dot_general(shape, n_batch, n_dense, rhs_shape, dims):
    x = sparse_array(shape)
    r = np.random.default_rng(1).normal(size=rhs_shape).astype(np.float32)
    m = BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
    want = np_dot_general(x, r, dims)
    np.testing.assert_allclose(sparse.bcoo_dot_general(m, r, dimension_numbers=dims), want,
                               rtol=1e-5, atol=1e-5)
    jitted = plax.jit(lambda m, r: sparse.bcoo_dot_general(m, r, dimension_numbers=dims))
    np.testing.assert_allclose(jitted(m, r), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", [0, 3, 6, 10])
def test_dot_general_derivatives(case):
    shape, n_batch, n_dense, rhs_shape, dims = DOT_CASES[case]
    m = BCOO.fromdense(sparse_array(shape), n_batch=n_batch, n_dense=n_dense)
    r = np.random.default_rng(1).normal(size=rhs_shape).astype(np.float32)

    def f(data, rhs):
        return sparse.bcoo_dot_general(BCOO((data, m.indices), shape=m.shape), rhs,
                                       dimension_numbers=dims)
    check_grads(f, (m.data, r), order=2, modes=("fwd", "rev"))


def test_dense_lhs_dot_general():
    m = BCOO.fromdense(X)
    lhs = np.arange(15, dtype=np.float32).reshape(5, 3)
    out = sparse.bcoo_dot_general(lhs, m, dimension_numbers=(((1,), (0,)), ((), ())))
    np.testing.assert_allclose(out, lhs @ X)
    check_grads(lambda a, d: sparse.bcoo_dot_general(
        a, BCOO((d, m.indices), shape=m.shape), dimension_numbers=(((1,), (0,)), ((), ()))),
        (lhs, m.data), order=1, eps=1e-2)


def test_matmul_operators():
    m = BCOO.fromdense(X)
    v, w = jnp.arange(4.), jnp.arange(3.)
    mats = np.random.default_rng(3).normal(size=(2, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(m @ v, X @ np.arange(4.))
    np.testing.assert_allclose(w @ m, np.arange(3.) @ X)
    np.testing.assert_allclose(m.T @ w, X.T @ np.arange(3.))
    np.testing.assert_allclose(m @ jnp.ones((4, 2)), X @ np.ones((4, 2)))
    np.testing.assert_allclose(jnp.ones((2, 3)) @ m, np.ones((2, 3)) @ X)
    np.testing.assert_allclose(m @ mats, X @ mats, rtol=1e-5, atol=1e-5)  # broadcast over batch
    assert type(m @ v) is type(v)
    # numpyro's CAR: a scipy adjacency matrix times a batch of column vectors.
    adj = scipy.sparse.csr_matrix(np.array([[0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1],
                                            [1, 0, 1, 0]], np.float64))
    phi = jnp.arange(8.).reshape(2, 4)
    a = BCOO.from_scipy_sparse(adj)
    np.testing.assert_allclose((a @ phi[..., None]).squeeze(-1), np.asarray(phi) @ adj.T.toarray())


def test_elementwise_operators():
    m = BCOO.fromdense(X)
    dense = np.arange(12, dtype=np.float32).reshape(3, 4)
    cases = {
        "m*2": (m * 2, X * 2), "2*m": (2 * m, 2 * X), "m*dense": (m * dense, X * dense),
        "m*row": (m * jnp.arange(4.), X * np.arange(4.)),
        "m*col": (m * jnp.arange(3.)[:, None], X * np.arange(3.)[:, None]),
        "-m": (-m, -X), "abs": (abs(-m), X), "m/2": (m / 2., X / 2), "m**2": (m ** 2, X ** 2),
        "m+m": (m + m, 2 * X), "m-m": (m - m, 0 * X), "m*m": (m * m, X * X),
        "sin": (sparse.sparsify(jnp.sin)(m), np.sin(X)),
    }
    for name, (got, want) in cases.items():
        assert isinstance(got, BCOO), name
        np.testing.assert_allclose(got.todense(), want, rtol=1e-6, err_msg=name)
    assert (m * 2).indices is m.indices and (m * 2).indices_sorted
    assert (m + m).nse == 8 and (m * m).nse == 16  # separate operands: patterns are joined
    out = m + dense
    assert not isinstance(out, BCOO)
    np.testing.assert_allclose(out, X + dense)
    np.testing.assert_array_equal(m.astype(jnp.int32).data, [1, 2, 3, 4])
    assert m.astype(jnp.int32).dtype == np.int32


@pytest.mark.parametrize("shape,n_batch,n_dense", LAYOUTS[:5])
def test_sum(shape, n_batch, n_dense):
    x = sparse_array(shape)
    m = BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
    for axes in [(0,), (len(shape) - 1,), (0, len(shape) - 1), tuple(range(len(shape)))]:
        got = sparse.bcoo_reduce_sum(m, axes=axes)
        np.testing.assert_allclose(got.todense(), x.sum(axes), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.sum(), x.sum(), rtol=1e-5)
    np.testing.assert_allclose(m.sum(axis=1).todense(), x.sum(1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,n_batch,n_dense,perm", [
    ((3, 4), 0, 0, (1, 0)), ((2, 3, 4), 0, 0, (2, 0, 1)), ((2, 3, 4), 1, 0, (0, 2, 1)),
    ((3, 4, 2), 0, 1, (1, 0, 2)), ((2, 3, 4, 2), 1, 1, (0, 2, 1, 3))])
def test_transpose(shape, n_batch, n_dense, perm):
    x = sparse_array(shape)
    m = BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
    t = m.transpose(perm)
    assert t.shape == x.transpose(perm).shape
    np.testing.assert_array_equal(t.todense(), x.transpose(perm))
    np.testing.assert_array_equal(sparse.bcoo_transpose(m, permutation=perm).todense(),
                                  x.transpose(perm))
    check_grads(lambda d: BCOO((d, m.indices), shape=m.shape).transpose(perm).todense(),
                (m.data,), order=1)


def test_multiply_dense_returns_data():
    m = BCOO.fromdense(X)
    np.testing.assert_array_equal(sparse.bcoo_multiply_dense(m, X), [1., 4., 9., 16.])
    np.testing.assert_array_equal(sparse.bcoo_multiply_dense(m, 3.), [3., 6., 9., 12.])


# --- transformations --------------------------------------------------------------------------
def test_jit_takes_and_returns_bcoo():
    m = BCOO.fromdense(X)
    v = jnp.arange(4.)
    out, t = plax.jit(lambda m, v: (m @ v, m.T))(m, v)
    np.testing.assert_allclose(out, X @ np.arange(4.))
    assert isinstance(t, BCOO) and t.shape == (4, 3)
    np.testing.assert_array_equal(t.todense(), X.T)
    made = plax.jit(lambda x: BCOO.fromdense(x, nse=5))(X)
    assert made.nse == 5 and made.indices_sorted
    np.testing.assert_array_equal(made.todense(), X)
    merged = plax.jit(lambda m: sparse.bcoo_sum_duplicates(m, nse=3))(dup())
    np.testing.assert_array_equal(merged.data, [4., 2., 0.])
    ordered = plax.jit(sparse.bcoo_sort_indices)(dup())
    np.testing.assert_array_equal(ordered.indices[:2], [[0, 1], [0, 1]])


def test_grad_of_products():
    m = BCOO.fromdense(X)
    v = jnp.arange(4.)
    np.testing.assert_allclose(plax.grad(lambda v: (m @ v).sum())(v), X.sum(0))
    g = plax.grad(lambda d: (BCOO((d, m.indices), shape=m.shape) @ v).sum())(m.data)
    np.testing.assert_allclose(g, np.asarray(v)[np.asarray(m.indices[:, 1])])
    check_grads(lambda v: m @ v, (v,), order=2)
    check_grads(lambda d: BCOO((d, m.indices), shape=m.shape).todense(), (m.data,), order=2)
    check_grads(lambda d: sparse.todense(BCOO((d, m.indices), shape=m.shape)), (m.data,), order=1)
    check_grads(lambda a: sparse.bcoo_extract(m, a).data, (X,), order=1)
    check_grads(lambda a: sparse.bcoo_extract(dup(), a).data, (X,), order=1)
    gm = plax.grad(lambda m: (m @ v).sum(), allow_int=True)(m)
    assert isinstance(gm, BCOO)
    np.testing.assert_allclose(gm.data, g)
    with pytest.raises(TypeError, match="grad requires real- or complex-valued inputs"):
        plax.grad(lambda m: (m @ v).sum())(m)


def test_fromdense_jvp_reads_tangent_at_stored_elements():
    t = np.arange(12, dtype=np.float32).reshape(3, 4)
    (data, _), (data_dot, _) = plax.jvp(lambda x: sparse.bcoo_fromdense(x)._bufs, (X,), (t,))
    np.testing.assert_array_equal(data, [1., 2., 3., 4.])
    np.testing.assert_array_equal(data_dot, [1., 3., 4., 10.])


def test_vmap():
    m = BCOO.fromdense(X)
    vs = np.arange(20, dtype=np.float32).reshape(5, 4)
    np.testing.assert_allclose(plax.vmap(lambda v: m @ v)(vs), vs @ X.T)
    np.testing.assert_allclose(plax.vmap(lambda v: m @ v, in_axes=1)(vs.T), vs @ X.T)
    np.testing.assert_allclose(plax.jit(plax.vmap(lambda v: v @ m))(vs[:, :3]), vs[:, :3] @ X)
    xb = sparse_array((2, 3, 4))
    mb = BCOO.fromdense(xb, n_batch=1)
    np.testing.assert_array_equal(plax.vmap(lambda m: m.todense())(mb), xb)
    np.testing.assert_allclose(plax.vmap(lambda m, v: m @ v)(mb, vs[:2]),
                               np.einsum("bij,bj->bi", xb, vs[:2]), rtol=1e-5)
    datas = np.stack([m.data, 2 * m.data])
    np.testing.assert_allclose(
        plax.vmap(lambda d: BCOO((d, m.indices), shape=m.shape) @ jnp.arange(4.))(datas),
        np.stack([X @ np.arange(4.), 2 * X @ np.arange(4.)]))
    out = plax.vmap(lambda d: BCOO((d, m.indices), shape=m.shape))(datas)
    assert isinstance(out, BCOO) and out.shape == (2, 3, 4) and out.n_batch == 1
    np.testing.assert_array_equal(out.todense(), np.stack([X, 2 * X]))
    np.testing.assert_array_equal(plax.vmap(lambda a: sparse.bcoo_extract(m, a).data)(
        np.stack([X, 3 * X])), np.stack([m.data, 3 * m.data]))
    nse = int((xb != 0).reshape(2, -1).sum(1).max())
    made = plax.vmap(lambda x: BCOO.fromdense(x, nse=nse))(xb)
    assert made.n_batch == 1 and made.nse == nse
    np.testing.assert_array_equal(made.todense(), xb)
    np.testing.assert_array_equal(plax.vmap(sparse.todense)(mb), xb)


def test_vmap_of_transpose_sort_and_sum_duplicates():
    m = dup()
    datas = np.stack([DUP["data"], 2 * DUP["data"]])
    t = plax.vmap(lambda d: BCOO((d, m.indices), shape=m.shape).T.todense())(datas)
    np.testing.assert_array_equal(t, np.stack([DUP_DENSE.T, 2 * DUP_DENSE.T]))
    s = plax.vmap(lambda d: sparse.bcoo_sort_indices(BCOO((d, m.indices), shape=m.shape)).data)(
        datas)
    np.testing.assert_array_equal(s, np.stack([[1., 3., 5., 2., 4.], [2., 6., 10., 4., 8.]]))
    u = plax.vmap(lambda d: sparse.bcoo_sum_duplicates(BCOO((d, m.indices), shape=m.shape),
                                                       nse=2).data)(datas)
    np.testing.assert_array_equal(u, [[4., 2.], [8., 4.]])


# --- constructors -----------------------------------------------------------------------------
def test_from_scipy_sparse():
    coo = scipy.sparse.coo_matrix((np.array([1., 2., 5.]), (np.array([0, 2, 0]),
                                                            np.array([1, 3, 1]))), shape=(3, 4))
    m = BCOO.from_scipy_sparse(coo)
    assert not m.indices_sorted and not m.unique_indices and m.dtype == np.float32
    np.testing.assert_array_equal(m.indices, [[0, 1], [2, 3], [0, 1]])
    np.testing.assert_array_equal(m.todense(), coo.toarray())  # duplicates add up, as SciPy's
    csr = scipy.sparse.random(5, 6, density=0.4, format="csr", random_state=0)
    np.testing.assert_allclose(BCOO.from_scipy_sparse(csr).todense(), csr.toarray(), rtol=1e-6)
    assert BCOO.from_scipy_sparse(csr, index_dtype=np.int16).indices.dtype == np.int16


def test_empty_and_eye():
    e = sparse.empty((3, 4), nse=2)
    assert e.nse == 2 and e.dtype == np.float32
    np.testing.assert_array_equal(e.indices, [[3, 4], [3, 4]])
    np.testing.assert_array_equal(e.todense(), np.zeros((3, 4)))
    assert sparse.empty((2, 3), n_batch=1).data.shape == (2, 0)
    for n, m_, k, kw in [(3, 4, 1, {}), (4, 3, -2, {"n_batch": 1}), (3, None, 0, {"n_dense": 1}),
                         (3, 3, 5, {}), (4, 4, 0, {"dtype": jnp.int32})]:
        i = sparse.eye(n, m_, k, **kw)
        np.testing.assert_array_equal(i.todense(), np.eye(n, m_, k))
    np.testing.assert_array_equal(sparse.eye(3, 4, 1).indices, [[0, 1], [1, 2], [2, 3]])


def test_random_bcoo():
    key = plax.random.key(0)
    r = sparse.random_bcoo(key, (3, 4), nse=0.5)
    assert r.nse == 6 and r.shape == (3, 4)
    flat = np.asarray(r.indices) @ np.array([4, 1])
    assert len(set(flat.tolist())) == 6 and (flat < 12).all()
    np.testing.assert_allclose(r.todense()[tuple(np.asarray(r.indices).T)], r.data)
    b = sparse.random_bcoo(key, (2, 3, 4), n_batch=1, n_dense=1, nse=2, sorted_indices=True)
    assert b.data.shape == (2, 2, 4) and b.indices.shape == (2, 2, 1) and b.indices_sorted
    assert (np.diff(np.asarray(b.indices)[..., 0], axis=-1) >= 0).all()


# --- sparsify and the sparse derivative wrappers ------------------------------------------------
def test_sparsify():
    m = BCOO.fromdense(X)
    y = jnp.array([3., 6., 5.])

    def f(mat, vec):
        return 2 * jnp.dot(jnp.log1p(mat.T), vec) + 1
    np.testing.assert_allclose(sparse.sparsify(f)(m, y), f(X, y), rtol=1e-6)
    np.testing.assert_allclose(plax.jit(sparse.sparsify(f))(m, y), f(X, y), rtol=1e-6)
    g = plax.grad(lambda v: sparse.sparsify(f)(m, v).sum())(y)
    np.testing.assert_allclose(g, plax.grad(lambda v: f(X, v).sum())(y), rtol=1e-6)

    @sparse.sparsify
    def h(mat, vec):
        return -(jnp.sin(mat) @ vec), {"sum": mat.sum(0)}
    out, aux = h(m, jnp.arange(4.))
    np.testing.assert_allclose(out, -(np.sin(X) @ np.arange(4.)), rtol=1e-6)
    assert isinstance(aux["sum"], BCOO)
    np.testing.assert_allclose(aux["sum"].todense(), X.sum(0))
    inner = plax.jit(lambda a: a * 2.)
    np.testing.assert_allclose(sparse.sparsify(inner)(m).todense(), 2 * X)  # through pjit


def test_sparse_derivative_wrappers():
    x = BCOO.fromdense(jnp.arange(6.))
    y = jnp.ones(6)
    value, g = sparse.value_and_grad(lambda x, y: x @ y)(x, y)
    assert float(value) == 15.0 and isinstance(g, BCOO)
    np.testing.assert_array_equal(g.data, np.ones(5))
    np.testing.assert_array_equal(g.indices, x.indices)
    gx, gy = sparse.grad(lambda x, y: x @ y, argnums=(0, 1))(x, y)
    assert isinstance(gx, BCOO)
    np.testing.assert_array_equal(gy, np.arange(6.))
    g, aux = sparse.grad(lambda x: (x @ y, "aux"), has_aux=True)(x)
    assert aux == "aux" and g.nse == 5
    for jac in (sparse.jacfwd, sparse.jacrev, sparse.jacobian):
        j = jac(lambda x: jnp.sin(x.todense()))(x)
        assert isinstance(j, BCOO) and j.shape == (6, 6) and j.n_batch == 1
        np.testing.assert_allclose(j.todense(), np.diag(np.cos(np.arange(6.)) * (np.arange(6) > 0)),
                                   rtol=1e-6, atol=1e-7)


# --- errors -----------------------------------------------------------------------------------
def test_errors():
    m = BCOO.fromdense(X)
    mb = BCOO.fromdense(np.ones((2, 3, 4), np.float32), n_batch=1)
    cases = [
        (ValueError, "Invalid data.shape", lambda: BCOO((jnp.ones(3), jnp.zeros((4, 2), int)),
                                                        shape=(3, 4))),
        (ValueError, "data batch dimensions not compatible",
         lambda: BCOO((jnp.ones((2, 3)), jnp.zeros((3, 3, 2), int)), shape=(3, 4, 5))),
        (TypeError, "contracting dimensions", lambda: m @ jnp.ones(5)),
        (plax.errors.ConcretizationTypeError, "nse argument of bcoo_fromdense",
         lambda: plax.jit(lambda x: BCOO.fromdense(x))(X)),
        (NotImplementedError, "cannot permute batch axes with non-batch axes",
         lambda: mb.transpose((1, 0, 2))),
        (ValueError, "shape mismatch", lambda: sparse.bcoo_extract(m, jnp.ones((2, 2)))),
        (ValueError, "nse must be specified",
         lambda: plax.jit(lambda m: sparse.bcoo_sum_duplicates(m))(m)),
        (NotImplementedError, "nonzero n_dense/n_batch",
         lambda: BCOO.from_scipy_sparse(scipy.sparse.eye(3), n_batch=1)),
        (NotImplementedError, "batch dimensions must be among the batch dimensions",
         lambda: sparse.bcoo_dot_general(m, jnp.ones((3, 4)),
                                         dimension_numbers=(((1,), (1,)), ((0,), (0,))))),
        (NotImplementedError, "would result in dense output", lambda: sparse.sparsify(jnp.exp)(m)),
        (NotImplementedError, "sparse rule for cumsum is not implemented",
         lambda: sparse.sparsify(lambda a: jnp.cumsum(a, axis=0))(m)),
        (NotImplementedError, "Subtraction between sparse and dense array", lambda: m - X),
        (ValueError, "in_axes for batched BCOO operations must correspond to a batch dimension",
         lambda: plax.vmap(lambda a: a.todense())(m)),
        (ValueError, "in_axes for batched BCOO operations must correspond to a batch dimension",
         lambda: plax.vmap(lambda a: a.todense(), in_axes=1)(mb)),
        (ValueError, "not recognized", lambda: sparse.eye(2, sparse_format="dense")),
        (TypeError, "bcoo_todense: mat must be a BCOO array", lambda: sparse.bcoo_todense(X)),
    ]
    for exc, match, fn in cases:
        with pytest.raises(exc, match=match):
            fn()


# --- as jax.experimental.sparse -------------------------------------------------------------------
def test_drop_in_program(tmp_path):
    proc = run_script(tmp_path, program("sparse_bcoo"))
    assert_ok(proc, "BCOO(float32[3, 4], nse=4)", "[7.0, 0.0, 8.0]", "[3.0, 3.0, 4.0]",
              "plax.experimental.sparse.bcoo")
