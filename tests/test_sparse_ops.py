"""plax.experimental.sparse: the BCOO shape operations (slice, reshape, concatenate, ...),
gather and indexing, sparse-sparse and sampled products, and sparsify's rules and control
flow, against NumPy, under jit, vmap and grad (with respect to the data)."""
import pathlib

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental import sparse
from plax.experimental.sparse import BCOO
from plax.test_util import check_grads
from helpers import grad_check_defaults
from test_drop_in import assert_ok, run_script  # tests/ is on sys.path (conftest.py)

X = np.array([[0., 1., 0., 2.], [3., 0., 0., 0.], [0., 0., 4., 0.]], np.float32)
GRAD = dict(order=1, modes=["fwd", "rev"], **grad_check_defaults(np.float32))


def layouts(x):
    """BCOO forms of 2-D ``x``: no batch or dense dimension, either, or both."""
    return [BCOO.fromdense(x, n_batch=b, n_dense=d) for b, d in [(0, 0), (1, 0), (0, 1), (1, 1)]]


# op name -> (BCOO function, the same on NumPy arrays)
SHAPE_OPS = {
    "slice": (lambda m: sparse.bcoo_slice(m, start_indices=(1, 1), limit_indices=(3, 4)),
              lambda x: x[1:3, 1:4]),
    "slice_strided": (lambda m: sparse.bcoo_slice(m, start_indices=(0, 1), limit_indices=(3, 4),
                                                  strides=(2, 2)),
                      lambda x: x[0:3:2, 1:4:2]),
    "dynamic_slice": (lambda m: sparse.bcoo_dynamic_slice(m, (1, 2), (2, 2)),
                      lambda x: x[1:3, 2:4]),
    "dynamic_slice_clamped": (lambda m: sparse.bcoo_dynamic_slice(m, (7, 3), (2, 3)),
                              lambda x: x[1:3, 1:4]),
    "rev": (lambda m: sparse.bcoo_rev(m, (0, 1)), lambda x: x[::-1, ::-1]),
    "squeeze": (lambda m: sparse.bcoo_squeeze(
        sparse.bcoo_broadcast_in_dim(m, shape=(3, 1, 4), broadcast_dimensions=(0, 2))
        if m.n_dense == 0 else sparse.bcoo_broadcast_in_dim(m, shape=(1, 3, 4),
                                                            broadcast_dimensions=(1, 2)),
        dimensions=(1,) if m.n_dense == 0 else (0,)), lambda x: x),
    "broadcast_batch": (lambda m: sparse.bcoo_broadcast_in_dim(m, shape=(2, 3, 4),
                                                               broadcast_dimensions=(1, 2)),
                        lambda x: np.broadcast_to(x, (2, 3, 4))),
    "concatenate_0": (lambda m: sparse.bcoo_concatenate([m, m * 2], dimension=0),
                      lambda x: np.concatenate([x, x * 2], 0)),
    "update_layout": (lambda m: sparse.bcoo_update_layout(m, n_batch=0, n_dense=0),
                      lambda x: x),
}


def test_shape_ops_against_numpy():
    ms = layouts(X)
    names = sorted(SHAPE_OPS)

    def run_all(ms):  # every op on every layout, in one compilation
        return [[(SHAPE_OPS[n][0](m), SHAPE_OPS[n][0](m).todense()) for m in ms] for n in names]
    for name, outs in zip(names, plax.jit(run_all)(ms)):
        for m, (out, dense) in zip(ms, outs):
            assert isinstance(out, BCOO), (name, m)
            np.testing.assert_array_equal(dense, SHAPE_OPS[name][1](X), err_msg=f"{name} on {m}")



def test_shape_ops_grad_and_vmap():
    names = sorted(SHAPE_OPS)
    ops = [SHAPE_OPS[n][0] for n in names] + [lambda a: a[jnp.array([2, 0])],
                                               lambda a: a.reshape(2, 6)]
    refs = [SHAPE_OPS[n][1] for n in names] + [lambda x: x[[2, 0]], lambda x: x.reshape(2, 6)]
    m = BCOO.fromdense(X)
    rng = np.random.default_rng(1)
    weights = [rng.normal(size=r(X).shape).astype(np.float32) for r in refs]

    @plax.jit
    def f(data):  # every op's output, weighted and summed: linear in the data
        a = BCOO((data, m.indices), shape=m.shape)
        return sum(jnp.sum(op(a).todense() * w) for op, w in zip(ops, weights))
    check_grads(f, (m.data,), order=1, modes=["rev"], **grad_check_defaults(np.float32))
    # vmap over a leading batch dimension: each example goes through each op on its own
    xs = np.stack([X, -2 * X])
    outs = plax.jit(plax.vmap(lambda a: [op(a).todense() for op in ops]))(
        BCOO.fromdense(xs, n_batch=1))
    for name, out, ref in zip(names + ["gather", "reshape"], outs, refs):
        np.testing.assert_array_equal(out, np.stack([ref(x) for x in xs]), err_msg=name)

def test_reshape_concatenate_update_layout():
    m, mb = BCOO.fromdense(X), BCOO.fromdense(X, n_batch=1)

    @plax.jit
    def run(m, mb):  # one compilation
        return [sparse.bcoo_reshape(m, new_sizes=(2, 6)),
                sparse.bcoo_reshape(m, new_sizes=(12,), dimensions=(1, 0)),
                sparse.bcoo_reshape(mb, new_sizes=(3, 2, 2)),
                sparse.bcoo_concatenate([m, m], dimension=1),
                sparse.bcoo_concatenate([mb, mb], dimension=1),
                m.update_layout(n_batch=1, n_dense=1, on_inefficient=None),
                m.update_layout(n_batch=2, on_inefficient=None)]
    outs = run(m, mb)
    wants = [X.reshape(2, 6), X.T.reshape(12), X.reshape(3, 2, 2), np.concatenate([X, X], 1),
             np.concatenate([X, X], 1), X, X]
    for out, want in zip(outs, wants):
        np.testing.assert_array_equal(out.todense(), want)
    assert outs[2].n_batch == 1  # batch dimensions reshape among themselves
    assert [(o.n_batch, o.n_dense) for o in outs[5:]] == [(1, 1), (2, 0)]


def test_shape_ops_vmap_with_batched_starts():
    mb = BCOO.fromdense(np.stack([X, -X]), n_batch=1)
    out = plax.vmap(lambda a, i: sparse.bcoo_dynamic_slice(a, (i, 0), (1, 4)).todense())(
        mb, jnp.array([0, 2]))
    np.testing.assert_array_equal(out, np.stack([X[0:1], -X[2:3]]))


# --- indexing and gather --------------------------------------------------------------------------
INDICES = [1, (1, 2), (slice(1, 3), slice(None, None, 2)), (slice(None), 1), (Ellipsis, 2),
           (-1, None), np.array([0, 2]), (slice(None), np.array([3, 0]))]


def test_getitem_against_numpy():
    def take_all(m):
        outs = [m[jnp.asarray(idx) if isinstance(idx, np.ndarray) else idx] for idx in INDICES]
        return outs, [o.todense() for o in outs], [r.todense() for r in m]
    for n_batch in (0, 1):
        outs, dense, rows = plax.jit(take_all)(BCOO.fromdense(X, n_batch=n_batch))
        for idx, out, d in zip(INDICES, outs, dense):
            assert isinstance(out, BCOO), idx
            np.testing.assert_array_equal(d, X[idx], err_msg=f"{idx}, n_batch={n_batch}")
        assert len(rows) == 3
        np.testing.assert_array_equal(rows[2], X[2])


def test_getitem_traced_and_gather():
    m = BCOO.fromdense(X)
    out = plax.jit(lambda a, i: a[i].todense())(m, 2)
    np.testing.assert_array_equal(out, X[2])
    check_grads(plax.jit(lambda d: BCOO((d, m.indices), shape=m.shape)[jnp.array([2, 0])]
                         .todense()), (m.data,), **GRAD)
    dnums = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                       start_index_map=(0,))
    out = sparse.bcoo_gather(m, jnp.array([[2], [1], [2]]), dnums, (1, 4))
    np.testing.assert_array_equal(out.todense(), X[[2, 1, 2]])
    with pytest.raises(NotImplementedError, match="not yet supported"):
        sparse.bcoo_gather(m, jnp.array([[2]]), dnums, (1, 4), mode="fill")


# --- products -------------------------------------------------------------------------------------
SPDOT_CASES = [  # (lhs n_batch, rhs n_batch, lhs, rhs, dimension numbers)
    (0, 0, X, X.T, (([1], [0]), ([], []))),
    (1, 0, X, X.T, (([1], [0]), ([], []))),
    (0, 1, X, X, (([1], [1]), ([], []))),
    (0, 0, X, X, (([0], [0]), ([], []))),
    (1, 1, X, X, (([1], [1]), ([0], [0]))),
]


@pytest.mark.parametrize("case", range(len(SPDOT_CASES)))
def test_sparse_sparse_dot_general(case):
    lb, rb, lhs, rhs, dims = SPDOT_CASES[case]
    a, b = BCOO.fromdense(lhs, n_batch=lb), BCOO.fromdense(rhs, n_batch=rb)
    want = np.asarray(lax.dot_general(lhs, rhs, dims))
    out = sparse.bcoo_dot_general(a, b, dimension_numbers=dims)
    assert isinstance(out, BCOO)
    np.testing.assert_allclose(out.todense(), want)
    if case:
        return
    np.testing.assert_allclose(
        plax.jit(lambda a, b: sparse.bcoo_dot_general(a, b, dimension_numbers=dims).todense())(
            a, b), want)

    def f(ld, rd):
        return sparse.bcoo_dot_general(BCOO((ld, a.indices), shape=a.shape),
                                       BCOO((rd, b.indices), shape=b.shape),
                                       dimension_numbers=dims).todense()
    check_grads(plax.jit(f), (a.data, b.data), **GRAD)


def test_spdot_under_vmap_and_its_primitive():
    a = BCOO.fromdense(np.stack([X, 2 * X]), n_batch=1)
    b = BCOO.fromdense(X.T)
    out = plax.vmap(lambda x: (x @ b).todense())(a)
    np.testing.assert_allclose(out, np.stack([X @ X.T, 2 * X @ X.T]))
    assert sparse.bcoo_spdot_general_p.name == "bcoo_spdot_general"
    with pytest.raises(NotImplementedError, match="dense dimensions"):
        sparse.bcoo_dot_general(BCOO.fromdense(X, n_dense=1), BCOO.fromdense(X, n_dense=1),
                                dimension_numbers=(([1], [1]), ([], [])))


def test_dot_general_sampled():
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(3, 5)).astype(np.float32), rng.normal(size=(5, 4)).astype(np.float32)
    m = BCOO.fromdense(X)
    dims = (([1], [0]), ([], []))

    def f(a, b):
        return sparse.bcoo_dot_general_sampled(a, b, m.indices, dimension_numbers=dims)
    want = (A @ B)[m.indices[:, 0], m.indices[:, 1]]
    np.testing.assert_allclose(f(A, B), want, rtol=1e-5)
    np.testing.assert_allclose(plax.jit(f)(A, B), want, rtol=1e-5)
    np.testing.assert_allclose(plax.vmap(f, in_axes=(0, None))(np.stack([A, -A]), B),
                               np.stack([want, -want]), rtol=1e-5)
    check_grads(f, (A, B), **GRAD)


def test_conv_general_dilated():
    x = np.array([[[0., 1., 0., 2., 0., 3.]]], np.float32)
    k = np.array([[[1., 2., 3.]]], np.float32)
    for padding, mode in [("SAME", "same"), ("VALID", "valid")]:
        out = sparse.bcoo_conv_general_dilated(BCOO.fromdense(x), k, window_strides=(1,),
                                               padding=padding)
        np.testing.assert_allclose(out.todense()[0, 0], np.convolve(x[0, 0], k[0, 0, ::-1], mode))
    with pytest.raises(NotImplementedError, match="non-unit window_strides"):
        sparse.bcoo_conv_general_dilated(BCOO.fromdense(x), k, window_strides=(2,),
                                         padding="SAME")


# --- sparsify -------------------------------------------------------------------------------------
def _dense_fn(x, y):
    """Ordinary jnp code: elementwise ops, a product, slicing, reshapes, joins, reductions."""
    z = jnp.sin(x) * 2.0 - x
    w = jnp.concatenate([z, x[::-1]], axis=0)          # (6, 4)
    v = w.reshape(3, 8)[:, 2:6] + jnp.flip(x, 1)       # (3, 4) sparse + sparse
    u = jnp.einsum("ij,kj->ik", v, y)                  # sparse @ dense -> dense
    return u, jnp.expand_dims(v, 0).sum(0), v.T


def test_sparsify_unmodified_function():
    m = BCOO.fromdense(X)
    y = np.arange(12, dtype=np.float32).reshape(3, 4)
    want = _dense_fn(X, y)
    for f in (sparse.sparsify(_dense_fn), sparse.sparsify(_dense_fn, use_tracer=True),
              plax.jit(sparse.sparsify(_dense_fn))):
        u, v, t = f(m, y)
        assert not isinstance(u, BCOO) and isinstance(v, BCOO) and isinstance(t, BCOO)
        np.testing.assert_allclose(u, want[0], rtol=1e-5)
        np.testing.assert_allclose(v.todense(), want[1], rtol=1e-5)
        np.testing.assert_allclose(t.todense(), want[2], rtol=1e-5)


def test_sparsify_control_flow():
    m = BCOO.fromdense(X)
    loop = sparse.sparsify(lambda x: lax.while_loop(lambda c: c[0] < 3,
                                                    lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1])
    np.testing.assert_array_equal(loop(m).todense(), 8 * X)
    branch = sparse.sparsify(lambda p, x: lax.cond(p, lambda a: a * 2.0, lambda a: -a, x))
    np.testing.assert_array_equal(branch(True, m).todense(), 2 * X)
    np.testing.assert_array_equal(branch(False, m).todense(), -X)
    scan = sparse.sparsify(lambda x: lax.scan(lambda c, s: (c * s, c * s), x,
                                              jnp.arange(1.0, 4.0)))
    carry, ys = scan(m)
    np.testing.assert_array_equal(carry.todense(), 6 * X)
    assert ys.shape == (3, 3, 4) and ys.n_batch == 1
    np.testing.assert_array_equal(ys.todense(), np.stack([X, 2 * X, 6 * X]))
    tracer_fn = sparse.sparsify(lambda x: plax.jit(lambda a: a * 3.0)(x).sum(0), use_tracer=True)
    np.testing.assert_array_equal(tracer_fn(m).todense(), 3 * X.sum(0))
    with pytest.raises(TypeError, match="must have same type structure"):
        sparse.sparsify(lambda p, x: lax.cond(p, lambda a: a, lambda a: jnp.zeros(a.shape),
                                              x))(True, m)
    with pytest.raises(NotImplementedError, match="sparse rule for max is not implemented"):
        sparse.sparsify(plax.nn.relu)(m)


def test_sparsify_grad_and_vmap():
    m = BCOO.fromdense(X)
    f = sparse.sparsify(lambda x: jnp.sum(jnp.sin(x[1:]) * x[1:]))
    check_grads(plax.jit(lambda d: f(BCOO((d, m.indices), shape=m.shape))), (m.data,), **GRAD)
    mb = BCOO.fromdense(np.stack([X, -X]), n_batch=1)
    out = plax.vmap(sparse.sparsify(lambda x: (x[:, 1:] * 2.0).sum(0)))(mb)
    np.testing.assert_array_equal(out.todense(), np.stack([2 * X[:, 1:].sum(0),
                                                           -2 * X[:, 1:].sum(0)]))


def test_transform_internals():
    from plax.experimental.sparse import transform
    env = transform.SparsifyEnv()
    m = BCOO.fromdense(X)
    values = transform.arrays_to_spvalues(env, (m, jnp.ones(3)))
    assert values[0].is_sparse() and values[0].is_bcoo() and not values[0].is_bcsr()
    assert values[1].is_dense() and values[1].ndim == 1
    avals = transform.spvalues_to_avals(env, values)
    assert avals[0].shape == (3, 4) and avals[0].dtype == np.float32
    out, tree = transform.sparsify_raw(lambda a, b: (a * 2.0).sum(1) + b)(env, *values)
    np.testing.assert_array_equal(transform.spvalues_to_arrays(env, out)[0], 2 * X.sum(1) + 1)
    assert isinstance(sparse.SparseTracer, type) and sparse.SparseTracer is transform.SparseTracer
    outs = transform.sparsify_fun(lambda a: [a * 3.0], [m])
    np.testing.assert_array_equal(outs[0].todense(), 3 * X)


def test_errors_name_the_problem():
    m, mb = BCOO.fromdense(X), BCOO.fromdense(X, n_batch=1)
    cases = [
        (ValueError, "cannot mix batch and sparse dimensions",
         lambda: sparse.bcoo_reshape(mb, new_sizes=(12,))),
        (NotImplementedError, "Concatenation along dense dimensions",
         lambda: sparse.bcoo_concatenate([BCOO.fromdense(X, n_dense=1)] * 2, dimension=1)),
        (ValueError, "matching batch dimensions",
         lambda: sparse.bcoo_concatenate([mb, m], dimension=1)),
        (sparse.SparseEfficiencyError, "increasing n_batch from 0 to 1",
         lambda: sparse.bcoo_update_layout(m, n_batch=1)),
        (NotImplementedError, "Adding sparse dimensions with lengths != 1",
         lambda: sparse.bcoo_broadcast_in_dim(m, shape=(3, 4, 2), broadcast_dimensions=(0, 1))),
        (TypeError, "limit_indices must be less than or equal to operand shape",
         lambda: sparse.bcoo_slice(m, start_indices=(0, 0), limit_indices=(5, 5))),
        (NotImplementedError, "sparse rule for scan with x values",
         lambda: sparse.sparsify(lambda xs: lax.scan(lambda c, x: (c, x), 0.0, xs))(m)),
    ]
    for exc, match, fn in cases:
        with pytest.raises(exc, match=match):
            fn()


def test_drop_in_program(tmp_path):
    program = (pathlib.Path(__file__).parent / "sparse_drop_in.jaxpy").read_text()
    proc = run_script(tmp_path, program)
    assert_ok(proc, "[[3.0, 0.0], [0.0, 4.0]]", "(6, 4)", "[70.0, 30.0]", "[5.0, 0.0, 0.0]",
              "type plax.experimental.sparse.transform")


def test_flatten_fun_for_sparse_ad():
    from plax.experimental.sparse.ad import flatten_fun_for_sparse_ad, is_sparse
    m, y = BCOO.fromdense(X), jnp.arange(4.0)
    fun_flat, nums, flat, post = flatten_fun_for_sparse_ad(lambda a, b: (a @ b).sum() * 2,
                                                           (0, 1), (m, y))
    assert nums == (0, 2) and len(flat) == 3  # m's data (not its indices), then y
    grad_m, grad_y = post(plax.grad(fun_flat, argnums=nums)(*flat))
    assert is_sparse(grad_m) and not is_sparse(grad_y)
    np.testing.assert_array_equal(grad_m.data, 2 * np.asarray(y)[m.indices[:, 1]])
    np.testing.assert_array_equal(grad_y, 2 * X.sum(0))
    fun_flat, nums, flat, post = flatten_fun_for_sparse_ad(lambda a: a @ y, 0, (m,))
    jac = post(plax.jacrev(fun_flat, argnums=nums)(*flat))
    assert jac.shape == (3, 3, 4) and jac.n_batch == 1  # the output dimension leads
    np.testing.assert_array_equal(jac.todense(),
                                  np.eye(3)[:, :, None] * np.asarray(y) * (X != 0))


def test_coo_kernels():
    from plax.experimental.sparse.bcoo import coo_spmm_p, coo_spmv_p
    data = jnp.array([1.0, 2.0, 3.0])
    row, col = jnp.array([0, 2, 0], jnp.int32), jnp.array([1, 0, 1], jnp.int32)
    dense = np.zeros((3, 2), np.float32)
    np.add.at(dense, (np.asarray(row), np.asarray(col)), np.asarray(data))  # repeats add up
    x, y, b = jnp.array([1.0, 5.0]), jnp.array([1.0, 2.0, 3.0]), jnp.ones((2, 4))
    def spmv(d, v, t=False):
        return coo_spmv_p.bind(d, row, col, v, transpose=t, shape=(3, 2))
    np.testing.assert_allclose(spmv(data, x), dense @ np.asarray(x))
    np.testing.assert_allclose(spmv(data, y, True), dense.T @ np.asarray(y))
    np.testing.assert_allclose(
        plax.jit(lambda d, m: coo_spmm_p.bind(d, row, col, m, transpose=False, shape=(3, 2)))(
            data, b), dense @ np.ones((2, 4)))
    check_grads(spmv, (data, x), **GRAD)
    np.testing.assert_allclose(plax.vmap(lambda v: spmv(data, v))(jnp.stack([x, 2 * x])),
                               np.stack([dense @ np.asarray(x), 2 * dense @ np.asarray(x)]))
    with pytest.raises(ValueError, match="does not fit a matrix of shape"):
        spmv(data, y)


def test_nested_vmap_returns_bcoo():
    xs = np.stack([X, -X])
    m3 = BCOO.fromdense(xs, n_batch=1)
    out = plax.vmap(lambda m: plax.vmap(lambda s: m * s)(jnp.arange(1.0, 3.0)))(m3)
    assert out.shape == (2, 2, 3, 4) and out.n_batch == 2
    np.testing.assert_array_equal(out.todense(), xs[:, None] * np.array([1.0, 2.0])[:, None, None])
    out = plax.vmap(lambda m: plax.vmap(lambda i: m[i])(jnp.arange(2)))(m3)
    np.testing.assert_array_equal(out.todense(), xs[:, :2])


def test_sparsify_keeps_custom_jvp_rules():
    m = BCOO.fromdense(X)

    @plax.custom_jvp
    def f(x):
        return jnp.sin(x)
    f.defjvp(lambda p, t: (f(p[0]), 100.0 * t[0]))  # not sin's derivative: the rule is used

    def on_data(d, **kw):
        return sparse.sparsify(f, **kw)(BCOO((d, m.indices), shape=m.shape, unique_indices=True))
    np.testing.assert_allclose(on_data(m.data).todense(), np.sin(X), rtol=1e-6)
    for kw in ({}, {"use_tracer": True}):
        np.testing.assert_array_equal(
            plax.grad(lambda d: on_data(d, **kw).data.sum())(m.data), np.full(4, 100.0))
    _, tangent = plax.jvp(lambda d: on_data(d).data, (m.data,), (jnp.ones(4),))
    np.testing.assert_array_equal(tangent, np.full(4, 100.0))

    @plax.custom_jvp
    def g(x):
        return jnp.sin(x)
    g.defjvp(lambda p, t: (g(p[0]), jnp.cos(p[0]) * t[0]))  # cos would densify
    np.testing.assert_allclose(sparse.sparsify(g)(m).todense(), np.sin(X), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="sparse rule for cos"):
        plax.grad(lambda d: sparse.sparsify(g)(BCOO((d, m.indices), shape=m.shape)).data.sum())(
            m.data)


def test_ad_wraps_names_the_wrapper():
    from plax.experimental.sparse.ad import wraps

    def f(x):
        """doc of f"""
        return x

    @wraps(f, namestr="sparse_{fun}", docstr="Sparse {fun}: {doc}")
    def g(x):
        return x
    assert (g.__name__, g.__doc__, g.__wrapped__, g.__qualname__) == (
        "sparse_f", "Sparse f: doc of f", f, f.__qualname__)


def test_sparse_grad_argnums_as_jax():
    m, y = BCOO.fromdense(X), jnp.ones(4)

    def f(a, b):
        return (a @ b).sum()
    assert isinstance(sparse.grad(f, argnums=(0,))(m, y), BCOO)  # alone, as in JAX
    g_m, g_y = sparse.grad(f, argnums=(0, 1))(m, y)
    np.testing.assert_array_equal(g_m.todense(), (X != 0).astype(np.float32))
    np.testing.assert_array_equal(g_y, X.sum(0))


def test_empty_eye_todense_every_format():
    from plax.experimental.sparse import api
    for fmt, cls in [("bcoo", "BCOO"), ("bcsr", "BCSR"), ("coo", "COO"), ("csr", "CSR"),
                     ("csc", "CSC")]:
        e = sparse.eye(3, k=1, sparse_format=fmt)
        assert type(e).__name__ == cls and type(e) is getattr(api, cls)
        np.testing.assert_array_equal(sparse.todense(e), np.eye(3, k=1))
        z = sparse.empty((2, 3), sparse_format=fmt)
        np.testing.assert_array_equal(sparse.todense(z), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="not recognized"):
        sparse.empty((2, 2), sparse_format="dense")


def test_bcoo_ops_do_not_rely_on_rank_promotion():
    """BCOO's own computations broadcast explicitly: they work with jax_numpy_rank_promotion
    set to 'raise' (as JAX's test suite runs), and give the dense answers."""
    x = np.array([[0., 1., 0., 2.], [3., 0., 0., 0.], [0., 0., 4., 5.]], np.float32)
    with plax.numpy_rank_promotion("raise"):
        m = sparse.BCOO.fromdense(x)
        checks = [
            (sparse.bcoo_slice(m, start_indices=(1, 0), limit_indices=(3, 4)), x[1:3]),
            (sparse.bcoo_dynamic_slice(m, (1, 1), (2, 2)), x[1:3, 1:3]),
            (sparse.bcoo_rev(m, (1,)), x[:, ::-1]),
            (sparse.bcoo_reshape(m, new_sizes=(4, 3)), x.reshape(4, 3)),
            (sparse.bcoo_concatenate([m, m], dimension=1), np.concatenate([x, x], 1)),
            (sparse.bcoo_multiply_sparse(m, m), x * x),
            (sparse.bcoo_reduce_sum(m, axes=(0,)), x.sum(0)),
            (sparse.bcoo_sum_duplicates(m), x),
        ]
        for got, want in checks:
            np.testing.assert_array_equal(got.todense(), want)


def test_jaxs_private_buffer_functions_round_trip():
    """The buffer-level names JAX's sparse tests call (bcoo._bcoo_fromdense/_todense/_extract/
    _dot_general, bcsr._bcsr_fromdense, util._count_stored_elements) on a batched matrix."""
    from plax.experimental.sparse import bcoo, bcsr, util
    x = np.array([[[0., 2., 0.], [1., 0., 0.]], [[0., 0., 0.], [3., 4., 5.]]], np.float32)
    nse = int(util._count_stored_elements(x, n_batch=1))
    assert nse == 3
    data, indices = bcoo._bcoo_fromdense(x, nse=nse, n_batch=1)
    info = sparse.util.SparseInfo(x.shape)
    np.testing.assert_array_equal(bcoo._bcoo_todense(data, indices, spinfo=info), x)
    np.testing.assert_array_equal(bcoo._bcoo_extract(indices, 2 * x), 2 * data)
    y = np.arange(6, dtype=np.float32).reshape(3, 2)
    out = bcoo._bcoo_dot_general(data, indices, y, lhs_spinfo=info,
                                 dimension_numbers=(((2,), (0,)), ((), ())))
    np.testing.assert_allclose(out, x @ y)
    d, ind, ptr = bcsr._bcsr_fromdense(x, nse=nse, n_batch=1)
    np.testing.assert_array_equal(sparse.BCSR((d, ind, ptr), shape=x.shape).todense(), x)


def test_jaxs_private_coo_and_csr_buffer_functions():
    """coo._coo_*/csr._csr_* (fromdense, todense, matvec, matmat on buffers) and
    util._count_stored_elements_per_batch, against NumPy."""
    from plax.experimental.sparse import coo, csr, util
    x = np.array([[0., 2., 0.], [1., 0., 3.]], np.float32)
    v, b = np.array([1., 2., 3.], np.float32), np.ones((3, 2), np.float32)
    bufs = coo._coo_fromdense(x, nse=3)
    info = coo.COOInfo(shape=x.shape)
    np.testing.assert_array_equal(coo._coo_todense(*bufs, spinfo=info), x)
    np.testing.assert_allclose(coo._coo_matvec(*bufs, v, spinfo=info), x @ v)
    np.testing.assert_allclose(coo._coo_matmat(*bufs, b, spinfo=info), x @ b)
    cbufs = csr._csr_fromdense(x, nse=3)
    np.testing.assert_array_equal(csr._csr_todense(*cbufs, shape=x.shape), x)
    np.testing.assert_allclose(csr._csr_matvec(*cbufs, v[:2], shape=x.shape, transpose=True),
                               x.T @ v[:2])
    np.testing.assert_allclose(csr._csr_matmat(*cbufs, b, shape=x.shape), x @ b)
    np.testing.assert_array_equal(util._count_stored_elements_per_batch(x, n_batch=1), [1, 2])


def test_shape_operations_over_a_symbolic_batch():
    """eval_shape over a symbolic leading size (Keras infers a sparse layer's output so):
    fromdense, transpose, broadcast_in_dim and squeeze keep the symbolic size."""
    b, = plax.export.symbolic_shape("b")

    def f(x):
        s = BCOO.fromdense(x, nse=1)
        t = sparse.bcoo_transpose(s, permutation=(0, 2, 1))
        e = sparse.bcoo_broadcast_in_dim(s, shape=(s.shape[0], 3, 2, 1),
                                         broadcast_dimensions=(0, 1, 2))
        return t.todense(), e.todense(), sparse.bcoo_squeeze(e, dimensions=(3,)).todense()
    outs = plax.eval_shape(f, plax.ShapeDtypeStruct((b, 3, 2), jnp.float32))
    assert [o.shape for o in outs] == [(b, 2, 3), (b, 3, 2, 1), (b, 3, 2)]
    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    t, e, q = plax.jit(f)(x)  # (and the same program on concrete sizes)
    want = np.zeros_like(x)
    want.flat[1] = 1.0  # (nse=1 keeps the first nonzero element)
    np.testing.assert_array_equal(q, want)
    np.testing.assert_array_equal(t, np.swapaxes(np.asarray(q), 1, 2))
    np.testing.assert_array_equal(e[..., 0], q)
