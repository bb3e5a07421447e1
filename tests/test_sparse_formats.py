"""plax.experimental.sparse's BCSR, COO, CSR and CSC formats against NumPy/SciPy, under
jit, vmap and grad (with respect to the stored data), with JAX's errors."""
import numpy as np
import pytest
import scipy.sparse

import plax
import plax.numpy as jnp
from plax.experimental import sparse
from plax.experimental.sparse import BCOO, BCSR, COO, CSC, CSR
from plax.experimental.sparse import bcsr as bcsr_mod
from plax.experimental.sparse import coo as coo_mod
from plax.experimental.sparse import csr as csr_mod
from plax.test_util import check_grads
from helpers import grad_check_defaults  # tests/ is on sys.path (conftest.py)

M = np.array([[0., 1., 0., 2.], [0., 0., 0., 0.], [3., 0., 0., 4.]], np.float32)
GRAD = grad_check_defaults(np.float32)


def sparse_array(shape, seed=0):
    """A random float32 array with about half its elements zero."""
    x = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    x[np.abs(x) < 0.6] = 0
    return x


# --- BCSR ---------------------------------------------------------------------------------------------
def test_bcsr_fromdense_buffers_match_jax():
    b = BCSR.fromdense(M, nse=6)
    # JAX 0.10.2's buffers for this matrix: padding columns point past the last column.
    np.testing.assert_array_equal(b.data, [1, 2, 3, 4, 0, 0])
    np.testing.assert_array_equal(b.indices, [1, 3, 0, 3, 4, 4])
    np.testing.assert_array_equal(b.indptr, [0, 2, 2, 4])
    assert repr(b) == "BCSR(float32[3, 4], nse=6)"
    ref = scipy.sparse.csr_matrix(M)
    b2 = BCSR.fromdense(M)
    np.testing.assert_array_equal(b2.indptr, ref.indptr)
    np.testing.assert_array_equal(b2.indices, ref.indices)


@pytest.mark.parametrize("shape,n_batch,n_dense", [
    ((3, 4), 0, 0), ((2, 3, 4), 1, 0), ((2, 2, 3, 2), 1, 1)])
def test_bcsr_roundtrip(shape, n_batch, n_dense):
    x = sparse_array(shape, seed=len(shape) + n_batch)
    b = BCSR.fromdense(x, n_batch=n_batch, n_dense=n_dense)
    assert (b.n_batch, b.n_dense, b.n_sparse) == (n_batch, n_dense, 2)
    np.testing.assert_array_equal(b.todense(), x)
    np.testing.assert_array_equal(b.to_bcoo().todense(), x)
    np.testing.assert_array_equal(BCSR.from_bcoo(BCOO.fromdense(x, n_batch=n_batch,
                                                                n_dense=n_dense)).todense(), x)
    # bcsr_extract reads a dense array at the stored positions (zero at padding).
    y = x + 1
    data = bcsr_mod.bcsr_extract(b.indices, b.indptr, y)
    stored = np.any(x != 0, axis=tuple(range(x.ndim - n_dense, x.ndim)), keepdims=True)
    np.testing.assert_array_equal(BCSR((data, b.indices, b.indptr), shape=shape).todense(),
                                  np.where(stored, y, 0))


def test_bcsr_fromdense_under_jit_needs_nse():
    with pytest.raises(plax.errors.ConcretizationTypeError, match="nse argument of "
                       "bcsr_fromdense"):
        plax.jit(lambda m: BCSR.fromdense(m))(M)
    out = plax.jit(lambda m: BCSR.fromdense(m, nse=5))(M)
    np.testing.assert_array_equal(out.todense(), M)
    assert out.nse == 5


def test_bcsr_from_scipy_and_empty():
    ref = scipy.sparse.coo_matrix(M)
    b = BCSR.from_scipy_sparse(ref)
    np.testing.assert_array_equal(b.todense(), M)
    np.testing.assert_array_equal(b.indices, [1, 3, 0, 3])
    with pytest.raises(NotImplementedError, match="nonzero n_dense/n_batch"):
        BCSR.from_scipy_sparse(ref, n_batch=1)
    e = BCSR._empty((2, 3, 4), n_batch=1, nse=2)
    assert e.data.shape == (2, 2) and e.indptr.shape == (2, 4)
    np.testing.assert_array_equal(e.todense(), np.zeros((2, 3, 4)))


def test_bcsr_from_bcoo_groups_rows_stably():
    x = BCOO((jnp.array([1., 2, 3, 5]), jnp.array([[2, 0], [0, 1], [0, 1], [3, 3]])),
             shape=(3, 4))
    b = BCSR.from_bcoo(x)
    # JAX's layout: elements regrouped by row (stably), the padding row last.
    np.testing.assert_array_equal(b.data, [2, 3, 1, 5])
    np.testing.assert_array_equal(b.indices, [1, 1, 0, 3])
    np.testing.assert_array_equal(b.indptr, [0, 2, 2, 3])
    np.testing.assert_array_equal(b.todense(), x.todense())
    with pytest.raises(NotImplementedError, match="requires n_sparse=2"):
        BCSR.from_bcoo(BCOO.fromdense(np.ones((2, 2, 2), np.float32)))


@pytest.mark.parametrize("args,shape,exc,match", [
    ("short_indptr", (3, 4), ValueError, "indptr shape must match the matrix shape plus 1"),
    ("short_data", (3, 4), ValueError, "Invalid data.shape"),
    ("float_indices", (3, 4), TypeError, "integer dtypes"),
    ("ok", (3,), ValueError, "exactly 2 sparse dimensions"),
])
def test_bcsr_validation(args, shape, exc, match):
    b = BCSR.fromdense(M, nse=6)
    data, indices, indptr = b.data, b.indices, b.indptr
    if args == "short_indptr":
        indptr = indptr[:-1]
    elif args == "short_data":
        data = data[:3]
    elif args == "float_indices":
        indices = indices.astype(np.float32)
    with pytest.raises(exc, match=match):
        BCSR((data, indices, indptr), shape=shape)


def test_bcsr_fromdense_errors_and_transpose():
    with pytest.raises(ValueError, match="must have 2 sparse dimensions"):
        BCSR.fromdense(np.ones(3, np.float32))
    with pytest.raises(NotImplementedError, match="Transpose is not implemented"):
        BCSR.fromdense(M).T


DOT_CASES = [  # (shape, n_batch, n_dense, rhs shape, dimension numbers, check gradients)
    ((3, 4), 0, 0, (4,), (([1], [0]), ([], [])), True),
    ((3, 4), 0, 0, (4, 5), (([1], [0]), ([], [])), False),
    ((3, 4), 0, 0, (3, 5), (([0], [0]), ([], [])), False),
    ((3, 4), 0, 0, (5, 4), (([1], [1]), ([], [])), False),
    ((3, 4), 0, 0, (3, 4), (([0, 1], [0, 1]), ([], [])), False),
    ((2, 3, 4), 1, 0, (2, 4, 5), (([2], [1]), ([0], [0])), True),
    ((2, 3, 4), 1, 0, (4, 5), (([2], [0]), ([], [])), False),
    ((2, 3, 4), 1, 0, (3,), (([1], [0]), ([], [])), False),
    ((3, 4, 2), 0, 1, (4,), (([1], [0]), ([], [])), True),
]


def np_dot_general(a, b, dims):
    (lc, rc), (lb, rb) = dims
    letters = iter("abcdefghij")
    la = [next(letters) for _ in range(a.ndim)]
    lr = [None] * b.ndim
    for i, j in list(zip(lc, rc)) + list(zip(lb, rb)):
        lr[j] = la[i]
    lr = [x or next(letters) for x in lr]
    out = [la[i] for i in lb] + [x for i, x in enumerate(la) if i not in lc and i not in lb] + \
        [x for j, x in enumerate(lr) if j not in rc and j not in rb]
    return np.einsum(f"{''.join(la)},{''.join(lr)}->{''.join(out)}", a, b)


@pytest.mark.parametrize("shape,n_batch,n_dense,rshape,dims,grads", DOT_CASES)
def test_bcsr_dot_general(shape, n_batch, n_dense, rshape, dims, grads):
    x = sparse_array(shape, seed=1)
    y = np.random.default_rng(2).normal(size=rshape).astype(np.float32)
    b = BCSR.fromdense(x, n_batch=n_batch, n_dense=n_dense)
    f = lambda m, r: bcsr_mod.bcsr_dot_general(m, r, dimension_numbers=dims)  # noqa: E731
    expected = np_dot_general(x, y, dims)
    np.testing.assert_allclose(f(b, y), expected, rtol=1e-5, atol=1e-5)
    if grads:  # under jit, and gradients with respect to the stored data and the operand
        np.testing.assert_allclose(plax.jit(f)(b, y), expected, rtol=1e-5, atol=1e-5)
        g = lambda d, r: f(BCSR((d, b.indices, b.indptr), shape=shape), r)  # noqa: E731
        check_grads(g, (b.data, jnp.asarray(y)), order=1, modes=("fwd", "rev"), **GRAD)


def test_bcsr_dot_general_vmap():
    x = sparse_array((2, 3, 4), seed=3)
    v = np.random.default_rng(4).normal(size=(2, 4)).astype(np.float32)
    b = BCSR.fromdense(x, n_batch=1)
    dims = (([1], [0]), ([], []))
    f = lambda m, r: bcsr_mod.bcsr_dot_general(m, r, dimension_numbers=dims)  # noqa: E731
    expected = np.einsum("bij,bj->bi", x, v)
    np.testing.assert_allclose(plax.vmap(f)(b, v), expected, rtol=1e-5)
    np.testing.assert_allclose(plax.vmap(f, in_axes=(0, None))(b, v[0]), x @ v[0], rtol=1e-5)
    np.testing.assert_allclose(plax.vmap(lambda m: m.todense())(b), x)
    nse = int((x != 0).sum(axis=(1, 2)).max())
    out = plax.vmap(lambda m: BCSR.fromdense(m, nse=nse))(x)
    assert isinstance(out, BCSR) and out.n_batch == 1 and out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out.todense(), x)


def test_bcsr_errors_of_dot_general_and_matmul():
    b = BCSR.fromdense(M)
    with pytest.raises(NotImplementedError, match="BCSR lhs and ndarray rhs"):
        bcsr_mod.bcsr_dot_general(jnp.ones((2, 3)), b, dimension_numbers=(([1], [0]), ([], [])))
    with pytest.raises(NotImplementedError, match="BCSR lhs and ndarray rhs"):
        jnp.ones((2, 3)) @ b
    b3 = BCSR.fromdense(np.ones((2, 3, 4), np.float32), n_dense=1)
    with pytest.raises(NotImplementedError, match="contracting over dense dimensions"):
        bcsr_mod.bcsr_dot_general(b3, jnp.ones(4), dimension_numbers=(([2], [0]), ([], [])))
    np.testing.assert_allclose(b @ np.arange(4.0, dtype=np.float32), M @ np.arange(4.0))
    np.testing.assert_allclose(b @ np.ones((4, 2), np.float32), M @ np.ones((4, 2)))


def test_bcsr_gradients_through_todense_and_fromdense():
    b = BCSR.fromdense(M, nse=6)
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    g = plax.grad(lambda d: (BCSR((d, b.indices, b.indptr), shape=(3, 4)).todense() * w).sum())
    # Padding elements get no gradient (JAX: [1, 3, 8, 11, 0, 0]).
    np.testing.assert_array_equal(g(b.data), [1, 3, 8, 11, 0, 0])
    check_grads(lambda d: BCSR((d, b.indices, b.indptr), shape=(3, 4)).todense(), (b.data,),
                order=2, **GRAD)
    gm = plax.grad(lambda m: (BCSR.fromdense(m, nse=6).data ** 2).sum())(M)
    np.testing.assert_allclose(gm, 2 * M)
    check_grads(lambda y: bcsr_mod.bcsr_extract(b.indices, b.indptr, y), (jnp.asarray(M),),
                order=1, **GRAD)


def test_bcsr_sum_duplicates_and_eliminate_zeros():
    data = jnp.array([1., 2., 3., 0.])
    indices = jnp.array([1, 1, 0, 2])
    indptr = jnp.array([0, 2, 4])
    b = BCSR((data, indices, indptr), shape=(2, 3))
    dense = np.array([[0., 3., 0.], [3., 0., 0.]], np.float32)
    s = bcsr_mod.bcsr_sum_duplicates(b)
    assert s.nse == 3
    np.testing.assert_array_equal(s.todense(), dense)
    e = b.sum_duplicates()  # remove_zeros=True by default
    assert e.nse == 2
    np.testing.assert_array_equal(e.todense(), dense)
    cut = bcsr_mod.bcsr_sum_duplicates(BCSR.fromdense(M, nse=6), nse=2)
    np.testing.assert_array_equal(cut.indptr, [0, 2, 2, 2])  # as JAX: the rest cut off


@pytest.mark.parametrize("dimension", [0, 1])
def test_bcsr_concatenate_matches_numpy(dimension):
    a = BCSR.fromdense(M, nse=6)
    c = BCSR.fromdense(sparse_array((3, 4), seed=5), nse=5)
    out = bcsr_mod.bcsr_concatenate([a, c], dimension=dimension)
    np.testing.assert_array_equal(out.todense(), np.concatenate([M, c.todense()], dimension))
    assert out.nse == 11


def test_bcsr_concatenate_buffers_match_jax():
    b = BCSR.fromdense(M, nse=6)
    out = bcsr_mod.bcsr_concatenate([b, b], dimension=0)
    # JAX 0.10.2's buffers: elements sorted by (row, column), padding past the last column.
    np.testing.assert_array_equal(out.data, [1, 2, 3, 4, 1, 2, 0, 0, 3, 4, 0, 0])
    np.testing.assert_array_equal(out.indices, [1, 3, 0, 3, 1, 3, 4, 4, 0, 3, 4, 4])
    np.testing.assert_array_equal(out.indptr, [0, 2, 2, 4, 8, 8, 10])
    out = bcsr_mod.bcsr_concatenate([b, b], dimension=1)
    np.testing.assert_array_equal(out.indices, [1, 3, 5, 7, 0, 3, 4, 7, 4, 4, 8, 8])
    np.testing.assert_array_equal(out.indptr, [0, 4, 4, 8])


def test_bcsr_concatenate_batch_and_errors():
    x = sparse_array((2, 3, 4), seed=6)
    a, c = BCSR.fromdense(x, n_batch=1), BCSR.fromdense(x, n_batch=1, nse=6)
    out = bcsr_mod.bcsr_concatenate([a, c], dimension=0)
    assert out.shape == (4, 3, 4) and out.nse == max(a.nse, c.nse)
    np.testing.assert_array_equal(out.todense(), np.concatenate([x, c.todense()]))
    out = bcsr_mod.bcsr_concatenate([a, a], dimension=1)
    np.testing.assert_array_equal(out.todense(), np.concatenate([x, x], 1))
    b = BCSR.fromdense(M)
    with pytest.raises(TypeError, match="different numbers of dimensions"):
        bcsr_mod.bcsr_concatenate([b, a], dimension=0)
    with pytest.raises(TypeError, match="concatenate dimension out of bounds"):
        bcsr_mod.bcsr_concatenate([b, b], dimension=2)
    d = BCSR.fromdense(x, n_dense=1)
    with pytest.raises(NotImplementedError, match="Concatenation along dense dimensions"):
        bcsr_mod.bcsr_concatenate([d, d], dimension=2)


def test_bcsr_concatenate_rows_with_in_range_padding():
    # Padding past indptr[-1] whose column is in range must not join the next operand.
    b = BCSR((jnp.array([1., 7.]), jnp.array([0, 1]), jnp.array([0, 1, 1])), shape=(2, 2))
    out = bcsr_mod.bcsr_concatenate([b, b], dimension=0)
    np.testing.assert_array_equal(out.todense(), [[1, 0], [0, 0], [1, 0], [0, 0]])


def test_bcsr_broadcast_in_dim():
    x = sparse_array((2, 3, 4), seed=7)
    b = BCSR.fromdense(x, n_batch=1)
    out = bcsr_mod.bcsr_broadcast_in_dim(b, shape=(5, 2, 3, 4), broadcast_dimensions=(1, 2, 3))
    assert out.n_batch == 2 and out.data.shape == (5, 2, out.nse)
    np.testing.assert_array_equal(out.todense(), np.broadcast_to(x, (5, 2, 3, 4)))
    d = BCSR.fromdense(x, n_dense=1)
    out = bcsr_mod.bcsr_broadcast_in_dim(d, shape=(2, 3, 4, 5), broadcast_dimensions=(0, 1, 2))
    np.testing.assert_array_equal(out.todense(), np.broadcast_to(x[..., None], (2, 3, 4, 5)))
    with pytest.raises(NotImplementedError, match="Adding sparse dimensions"):
        bcsr_mod.bcsr_broadcast_in_dim(BCSR.fromdense(M), shape=(3, 4, 2),
                                       broadcast_dimensions=(0, 1))


def test_bcsr_pytree_and_vmap_axis_error():
    b = BCSR.fromdense(M, nse=6)
    leaves, tree = plax.tree_util.tree_flatten(b)
    assert len(leaves) == 3
    back = plax.tree_util.tree_unflatten(tree, leaves)
    np.testing.assert_array_equal(back.todense(), M)
    # (nse equals the rows + 1, so that vmap's own size check passes and BCSR's speaks.)
    with pytest.raises(ValueError, match="Cannot map in_axis=0 for BCSR array with n_batch=0"):
        plax.vmap(lambda m: m.todense())(BCSR.fromdense(M, nse=4))


def test_bcsr_sparsify_rules():
    b = BCSR.fromdense(M, nse=6)
    out = sparse.sparsify(jnp.sin)(b)
    assert isinstance(out, BCSR)
    np.testing.assert_allclose(out.todense(), np.sin(M), rtol=1e-6)
    np.testing.assert_allclose(sparse.sparsify(lambda a: a ** 2)(b).todense(), M ** 2)
    np.testing.assert_allclose(sparse.sparsify(lambda a: a @ jnp.ones((4, 2)))(b),
                               M @ np.ones((4, 2)))
    st = sparse.sparsify(lambda a: jnp.stack([a, a]))(b)
    assert isinstance(st, BCSR) and st.n_batch == 1
    np.testing.assert_array_equal(st.todense(), np.stack([M, M]))
    cat = sparse.sparsify(lambda a: jnp.concatenate([a, a]))(b)
    np.testing.assert_array_equal(cat.todense(), np.concatenate([M, M]))
    with pytest.raises(NotImplementedError, match="sparse rule for mul is not implemented"):
        sparse.sparsify(lambda a: a * jnp.ones((3, 4)))(b)


# --- COO ----------------------------------------------------------------------------------------------
def test_coo_buffers_and_scipy():
    c = COO.fromdense(M, nse=6)
    np.testing.assert_array_equal(c.data, [1, 2, 3, 4, 0, 0])
    np.testing.assert_array_equal(c.row, [0, 0, 2, 2, 0, 0])  # JAX pads at (0, 0)
    np.testing.assert_array_equal(c.col, [1, 3, 0, 3, 0, 0])
    assert c._info == coo_mod.COOInfo((3, 4), rows_sorted=True, cols_sorted=False)
    ref = scipy.sparse.coo_matrix(M)
    back = COO((ref.data, ref.row.astype(np.int32), ref.col.astype(np.int32)), shape=M.shape)
    np.testing.assert_array_equal(back.todense(), M)
    dup = COO((jnp.array([1., 2.]), jnp.array([0, 0]), jnp.array([1, 1])), shape=(2, 2))
    np.testing.assert_array_equal(dup.todense(), [[0, 3], [0, 0]])


def test_coo_transpose_and_sort():
    c = COO.fromdense(M, nse=6)
    t = c.T
    assert t.shape == (4, 3) and t._info == coo_mod.COOInfo((4, 3), False, True)
    np.testing.assert_array_equal(t.todense(), M.T)
    s = t._sort_indices()
    np.testing.assert_array_equal(s.row, [0, 0, 0, 1, 3, 3])
    np.testing.assert_array_equal(s.col, [0, 0, 2, 0, 0, 2])
    np.testing.assert_array_equal(s.todense(), M.T)
    with pytest.raises(NotImplementedError, match="axes argument to transpose"):
        c.transpose((0, 1))


@pytest.mark.parametrize("fmt,rhs_shape", [("coo", (4, 3)), ("csr", (4,)), ("csc", (4,)),
                                            ("csc", (4, 3))])
def test_products_match_numpy(fmt, rhs_shape):
    cls = {"coo": COO, "csr": CSR, "csc": CSC}[fmt]
    x = sparse_array((5, 4), seed=8)
    mat = cls.fromdense(x)
    v = np.random.default_rng(9).normal(size=rhs_shape).astype(np.float32)
    np.testing.assert_allclose(mat @ v, x @ v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(plax.jit(lambda m, w: m @ w)(mat, v), x @ v, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(mat.todense(), x)
    np.testing.assert_array_equal(mat.T.todense(), x.T)
    with pytest.raises(NotImplementedError, match="__rmatmul__"):
        jnp.asarray(v) @ mat


PRODUCTS = [  # (module function, class, transpose, rhs shape)
    ("coo_matvec", COO, False, (4,)), ("coo_matvec", COO, True, (3,)),
    ("coo_matmat", COO, False, (4, 2)), ("coo_matmat", COO, True, (3, 2)),
    ("csr_matvec", CSR, False, (4,)), ("csr_matvec", CSR, True, (3,)),
    ("csr_matmat", CSR, False, (4, 2)), ("csr_matmat", CSR, True, (3, 2)),
]


def _rebuild(mat, data):
    bufs = (data,) + tuple(mat._bufs[1:])
    return type(mat)(bufs, shape=mat.shape)


@pytest.mark.parametrize("name,cls,transpose,rshape", PRODUCTS)
def test_product_primitives_values_grads_vmap(name, cls, transpose, rshape):
    mod = coo_mod if name.startswith("coo") else csr_mod
    fn = getattr(mod, name)
    mat = cls.fromdense(M, nse=6)
    v = np.random.default_rng(10).normal(size=rshape).astype(np.float32)
    ref = (M.T if transpose else M) @ v
    np.testing.assert_allclose(fn(mat, v, transpose=transpose), ref, rtol=1e-5, atol=1e-6)
    f = lambda d, w: fn(_rebuild(mat, d), w, transpose=transpose)  # noqa: E731
    check_grads(f, (mat.data, jnp.asarray(v)), order=1, modes=("fwd", "rev"), **GRAD)
    vs = np.stack([v, 2 * v])
    np.testing.assert_allclose(plax.vmap(lambda w: f(mat.data, w))(vs),
                               np.stack([ref, 2 * ref]), rtol=1e-5, atol=1e-6)
    ds = np.stack([mat.data, 3 * mat.data])
    np.testing.assert_allclose(plax.vmap(lambda d: f(d, v))(ds), np.stack([ref, 3 * ref]),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,cls", [("coo_matvec", COO), ("csr_matvec", CSR)])
def test_product_errors(name, cls):
    mod = coo_mod if name.startswith("coo") else csr_mod
    mat = cls.fromdense(M)
    with pytest.raises(TypeError, match="first dimension must be 4"):
        getattr(mod, name)(mat, jnp.ones(3))
    with pytest.raises(TypeError, match="must have the matrix's dtype"):
        getattr(mod, name)(mat, jnp.ones(4, jnp.int32))


@pytest.mark.parametrize("cls,name", [(COO, "coo_fromdense"), (CSR, "csr_fromdense")])
def test_fromdense_jit_vmap_grad(cls, name):
    with pytest.raises(plax.errors.ConcretizationTypeError, match=f"nse argument of {name}"):
        plax.jit(lambda m: cls.fromdense(m))(M)
    out = plax.jit(lambda m: cls.fromdense(m, nse=4))(M)
    np.testing.assert_array_equal(out.todense(), M)
    data = plax.vmap(lambda m: cls.fromdense(m, nse=4).data)(np.stack([M, 2 * M]))
    np.testing.assert_array_equal(data, [[1, 2, 3, 4], [2, 4, 6, 8]])
    # Padding elements carry no derivative: the gradient is zero off the nonzeros.
    g = plax.grad(lambda m: cls.fromdense(m, nse=6).todense().sum())(M)
    np.testing.assert_array_equal(g, (M != 0).astype(np.float32))
    check_grads(lambda d: _rebuild(cls.fromdense(M, nse=6), d).todense(),
                (cls.fromdense(M, nse=6).data,), order=1, **GRAD)
    with pytest.raises(ValueError, match="must be 2-dimensional"):
        cls.fromdense(np.ones((2, 2, 2), np.float32))


def test_csr_csc_buffers_and_transposes():
    s = CSR.fromdense(M, nse=6)
    np.testing.assert_array_equal(s.indices, [1, 3, 0, 3, 0, 0])
    np.testing.assert_array_equal(s.indptr, [0, 2, 2, 4])
    t = s.T
    assert isinstance(t, CSC) and t.shape == (4, 3)
    np.testing.assert_array_equal(t.todense(), M.T)
    assert isinstance(t.T, CSR)
    c = CSC.fromdense(M)
    ref = scipy.sparse.csc_matrix(M)
    np.testing.assert_array_equal(c.indptr, ref.indptr)
    np.testing.assert_array_equal(c.indices, ref.indices)
    np.testing.assert_array_equal(c.data, ref.data)
    np.testing.assert_array_equal(c.todense(), M)
    ref = scipy.sparse.csr_matrix(M)
    back = CSR((ref.data, ref.indices.astype(np.int32), ref.indptr.astype(np.int32)),
               shape=M.shape)
    np.testing.assert_array_equal(back.todense(), M)


@pytest.mark.parametrize("fmt", ["coo", "csr", "csc", "bcsr"])
@pytest.mark.parametrize("k", [-1, 2])
def test_eye_and_empty(fmt, k):
    e = sparse.eye(3, 4, k, sparse_format=fmt)
    assert type(e).__name__ == fmt.upper()
    np.testing.assert_array_equal(e.todense(), np.eye(3, 4, k))
    z = sparse.empty((3, 4), sparse_format=fmt)
    assert z.nse == 0
    np.testing.assert_array_equal(z.todense(), np.zeros((3, 4)))


def test_csr_eye_buffers_match_jax():
    e = CSR._eye(3, 4, 1)
    np.testing.assert_array_equal(e.indices, [1, 2, 3])
    np.testing.assert_array_equal(e.indptr, [0, 1, 2, 3])
    e = CSC._eye(3, 4, 1)
    np.testing.assert_array_equal(e.indices, [0, 1, 2])
    np.testing.assert_array_equal(e.indptr, [0, 0, 1, 2, 3])


def test_format_jaxprs_name_their_primitives():
    s = CSR.fromdense(M)
    text = str(plax.make_jaxpr(lambda m, v: m @ v)(s, jnp.ones(4)))
    assert "csr_matvec[shape=(3, 4) transpose=False]" in text
    text = str(plax.make_jaxpr(lambda m: m.todense())(COO.fromdense(M)))
    assert "coo_todense" in text
    text = str(plax.make_jaxpr(lambda m: m.todense())(BCSR.fromdense(M)))
    assert "bcsr_todense" in text


@pytest.mark.parametrize("cls", [BCSR, COO, CSR, CSC])
def test_todense_differentiates_every_format_by_its_data(cls):
    x = jnp.array([[1., 0, 2], [0, 3, 0]])
    mat = cls.fromdense(x)
    bufs, tree = plax.tree_util.tree_flatten(mat)

    def loss(data):
        dense = sparse.todense(plax.tree_util.tree_unflatten(tree, [data, *bufs[1:]]))
        return (dense * jnp.arange(1., 7.).reshape(2, 3)).sum()
    # d/d data of sum(dense * w) is w read at each stored element's place.
    want = np.asarray(cls.fromdense(jnp.arange(1., 7.).reshape(2, 3) * (x != 0)).data)
    np.testing.assert_allclose(np.asarray(plax.jit(plax.grad(loss))(mat.data)), want)
    batched = plax.vmap(plax.grad(loss))(jnp.stack([mat.data, 2 * mat.data]))
    np.testing.assert_allclose(np.asarray(batched), np.stack([want, want]))


@pytest.mark.parametrize("cls", [BCSR, COO, CSR])
@pytest.mark.parametrize("op", ["neg", "add", "sum", "getitem", "rmatmul"])
def test_operators_a_format_leaves_out_raise_not_implemented(cls, op):
    mat = cls.fromdense(jnp.eye(3))
    run = {"neg": lambda m: -m, "add": lambda m: m + m, "sum": lambda m: m.sum(),
           "getitem": lambda m: m[0], "rmatmul": lambda m: jnp.ones(3) @ m}[op]
    with pytest.raises(NotImplementedError, match=cls.__name__):
        run(mat)


@pytest.mark.parametrize("fmt,name,transpose", [("coo", "spmv", True), ("coo", "spmm", False),
                                                ("csr", "spmv", False), ("csr", "spmm", True)])
def test_lowerings_primitives_multiply_as_scipy(fmt, name, transpose):
    """sparse._lowerings' coo_/csr_ spmv/spmm primitives (JAX's cuSPARSE ones) on the CPU."""
    from plax.experimental.sparse import _lowerings
    rng = np.random.RandomState(1)
    m = rng.randn(4, 5).astype(np.float32)
    m[np.abs(m) < 0.6] = 0
    x = rng.randn(*((m.shape[0] if transpose else m.shape[1],) + ((3,) if name == "spmm"
                                                                     else ())))
    x = x.astype(np.float32)
    if fmt == "coo":
        row, col = np.nonzero(m)
        bufs = (m[row, col], row.astype(np.int32), col.astype(np.int32))
    else:
        s = scipy.sparse.csr_matrix(m)
        bufs = (s.data, s.indices.astype(np.int32), s.indptr.astype(np.int32))
    prim = getattr(_lowerings, f"{fmt}_{name}_p")
    out = prim.bind(*map(jnp.asarray, bufs), jnp.asarray(x), transpose=transpose, shape=m.shape)
    np.testing.assert_allclose(out, (m.T if transpose else m) @ x, rtol=1e-5, atol=1e-5)
    assert np.float64 in _lowerings.SUPPORTED_DATA_DTYPES
