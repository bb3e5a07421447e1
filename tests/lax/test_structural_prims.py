"""tile, stack, unstack, split, mulhi, empty, dce_sink, stage, broadcast_like, shape_as_value,
scatter-sub and the total-order comparisons: each a primitive (or function) as JAX 0.10.2's,
checked against NumPy under jit, vmap and grad."""
import numpy as np
import pytest

import plax
import plax.lax as lax
from plax.test_util import check_grads
from helpers import grad_check_defaults

GRAD = grad_check_defaults(np.float32)

X = np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 7 + 0.5

# (name, lax function, NumPy reference, the primitive its jaxpr shows)
ROWS = [
    ("tile", lambda x: lax.tile(x, (2, 1, 3)), lambda x: np.tile(x, (2, 1, 3)), "tile_p"),
    ("tile0", lambda x: lax.tile(x, (1, 0, 2)), lambda x: np.tile(x, (1, 0, 2)), "tile_p"),
    ("stack", lambda x: lax.stack([x, 2 * x, x + 1], 1),
     lambda x: np.stack([x, 2 * x, x + 1], 1), "stack_p"),
    ("stack_last", lambda x: lax.stack([x, x], -1), lambda x: np.stack([x, x], -1), "stack_p"),
    ("unstack", lambda x: lax.unstack(x, 2), lambda x: tuple(np.moveaxis(x, 2, 0)), "unstack_p"),
    ("split", lambda x: lax.split(x, (1, 0, 3), 2), lambda x: np.split(x, [1, 1], 2), "split_p"),
    ("broadcast_like", lambda x: lax.broadcast_like(x[:, :1, :1], np.zeros((5, 2, 3, 4))),
     lambda x: np.broadcast_to(x[:, :1, :1], (5, 2, 3, 4)), "broadcast_in_dim_p"),
]


def _close(got, want):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, w)
    else:
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


@pytest.mark.parametrize("name,fn,ref,prim", ROWS, ids=[r[0] for r in ROWS])
def test_values_jit_vmap_grad(name, fn, ref, prim):
    x = X.astype(np.float32)
    _close(fn(x), ref(X))
    _close(plax.jit(fn)(x), ref(X))
    eqns = plax.make_jaxpr(fn)(x).jaxpr.eqns
    assert getattr(lax, prim) in [e.primitive for e in eqns]
    batched = np.stack([X, X * 3])
    _close(plax.vmap(fn)(batched.astype(np.float32)),
           type(ref(X))(np.stack(parts) for parts in zip(ref(X), ref(X * 3)))
           if isinstance(ref(X), (tuple, list)) else np.stack([ref(X), ref(X * 3)]))
    loss = lambda x: sum((o ** 2).sum() for o in plax.tree_util.tree_leaves(fn(x)))  # noqa: E731
    check_grads(loss, (X.astype(np.float32),), 2, modes=("fwd", "rev"), **GRAD)


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: lax.tile(np.ones((2, 3)), (2,)), TypeError, "reps length must be equal"),
    (lambda: lax.stack([np.ones((2, 3)), np.ones((1, 3))]), ValueError,
     "All input arrays must have the same shape"),
    (lambda: lax.stack([np.ones(2, np.float32), np.ones(2, np.int32)]), TypeError,
     "lax.stack requires arguments to have the same dtypes"),
    (lambda: lax.stack([np.ones(2)], 2), ValueError, "axis 2 is out of bounds"),
    (lambda: lax.unstack(np.float32(1)), ValueError, "out of bounds"),
    (lambda: lax.broadcast_like(np.ones((2, 3)), np.ones(3)), ValueError,
     "Cannot broadcast to shape with fewer dimensions"),
    (lambda: lax.mulhi(np.ones(2, np.float32), np.ones(2, np.float32)), TypeError,
     "mulhi does not accept dtype float32"),
    (lambda: lax.split(np.ones(4), [1, 2]), ValueError, "Sum of sizes 3 must be equal"),
])
def test_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_mulhi_is_a_primitive():
    a = np.array([3, -5, 127, -128, 100], np.int8)
    b = np.array([7, 9, -128, -1, 100], np.int8)
    jaxpr = plax.make_jaxpr(lax.mulhi)(a, b)
    assert [e.primitive for e in jaxpr.jaxpr.eqns] == [lax.mulhi_p]
    np.testing.assert_array_equal(np.asarray(plax.vmap(lax.mulhi)(a, b)), [0, -1, -64, 0, 39])
    assert plax.grad(lambda x: lax.mulhi(x, x).astype(np.float32).sum(),
                     allow_int=True)(np.int32(3)).dtype == plax.dtypes.float0


def test_empty():
    out = lax.empty((2, 3), np.float32)
    assert out.shape == (2, 3) and out.dtype == np.float32
    assert lax.empty(3, np.int32).shape == (3,)
    assert plax.jit(lambda: lax.empty((4,), np.int8))().dtype == np.int8
    batched = plax.vmap(lambda y: lax.empty((2,), np.float32) + y)(np.ones(5, np.float32))
    assert batched.shape == (5, 2)
    assert [e.primitive.name for e in plax.make_jaxpr(
        lambda: lax.empty((2,), np.float32))().jaxpr.eqns] == ["empty"]


def test_dce_sink_keeps_its_value_alive():
    jaxpr = plax.make_jaxpr(lambda x: (lax.dce_sink((x * 2, x)), x.sum())[1])(np.ones(3))
    assert [e.primitive for e in jaxpr.jaxpr.eqns].count(lax.dce_sink_p) == 2
    assert lax.dce_sink(np.ones(2)) is None
    f = lambda x: (lax.dce_sink(x * 2), (x ** 2).sum())[1]  # noqa: E731
    assert float(plax.jit(f)(np.ones(3, np.float32))) == 3.0
    np.testing.assert_allclose(np.asarray(plax.grad(f)(np.arange(3.0))), [0, 2, 4])
    np.testing.assert_allclose(np.asarray(plax.vmap(f)(np.ones((2, 3)))), [3, 3])
    from plax.core.dce import dce_jaxpr
    pruned, _ = dce_jaxpr(jaxpr.jaxpr, [True])
    assert lax.dce_sink_p in [e.primitive for e in pruned.eqns]


def test_stage_and_shape_as_value():
    out = lax.stage(3.0)
    assert isinstance(out, plax.Array) and out.aval.weak_type and float(out) == 3.0
    assert [e.primitive for e in plax.make_jaxpr(lax.stage)(np.ones(2)).jaxpr.eqns] == [lax.stage_p]
    assert float(plax.grad(lambda x: lax.stage(x) * 2)(1.0)) == 2.0
    v = lax.shape_as_value((2, 3))
    assert isinstance(v, np.ndarray) and v.dtype == np.int32 and list(v) == [2, 3]
    assert lax.shape_as_value(()).shape == (0,)


def test_scatter_sub_primitive():
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    idx = np.array([[0], [2], [0]])
    upd = np.array([1.0, 2.0, 4.0])
    f = lambda x, u: lax.scatter_sub(x, idx, u, dn)  # noqa: E731
    np.testing.assert_allclose(np.asarray(f(np.zeros(3), upd)), [-5, 0, -2])
    assert [e.primitive for e in plax.make_jaxpr(f)(np.zeros(3), upd).jaxpr.eqns] == \
        [lax.scatter_sub_p]
    assert lax.scatter_sub_p.name == "scatter-sub" and lax.scatter_add_p.name == "scatter-add"
    check_grads(f, (np.arange(3.0), upd), 2, modes=("fwd", "rev"), **GRAD)
    np.testing.assert_allclose(np.asarray(plax.vmap(f)(np.zeros((2, 3)), np.stack([upd, upd]))),
                               [[-5, 0, -2]] * 2)


def test_total_order_comparisons():
    a = np.array([np.nan, -0.0, 0.0, 1.0, -np.inf], np.float32)
    b = np.array([np.nan, 0.0, -0.0, np.nan, np.nan], np.float32)
    np.testing.assert_array_equal(np.asarray(lax.eq_to_p.bind(a, b)), [1, 0, 0, 0, 0])
    np.testing.assert_array_equal(np.asarray(lax.lt_to_p.bind(a, b)), [0, 1, 0, 1, 1])
    np.testing.assert_array_equal(np.asarray(lax.le_to_p.bind(a, b)), [1, 1, 0, 1, 1])
    np.testing.assert_array_equal(np.asarray(lax.lt_to_p.bind(np.arange(3), np.ones(3, int))),
                                  [1, 0, 0])


@pytest.mark.parametrize("args,want", [
    (((1, 3, 8, 8), (4, 3, 3, 3), (2, 2), "SAME", ("NCHW", "OIHW", "NCHW")), (1, 4, 16, 16)),
    (((1, 3, 8, 8), (4, 3, 3, 3), (2, 2), [(1, 1), (0, 2)], ("NCHW", "OIHW", "NCHW")),
     (1, 4, 15, 15)),
    (((1, 8, 8, 3), (3, 3, 3, 4), (1, 2), "VALID", ("NHWC", "HWIO", "NHWC")), (1, 10, 17, 4)),
])
def test_conv_transpose_shape_tuple(args, want):
    """JAX 0.10.2's figures; for string padding they are conv_transpose's output shape."""
    assert lax.conv_transpose_shape_tuple(*args) == want
    lhs_shape, rhs_shape, strides, padding, dn = args
    if isinstance(padding, str):
        out = lax.conv_transpose(np.ones(lhs_shape, np.float32), np.ones(rhs_shape, np.float32),
                                 strides, padding, dimension_numbers=dn)
        assert out.shape == want


def test_scatter_apply():
    """JAX 0.10.2: the function runs once per index hitting an element (twice for index 1),
    under jit and vmap; it has no derivative."""
    x = np.arange(4.0, dtype=np.float32)
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    f = lambda x: lax.scatter_apply(x, np.array([[1], [1], [3]]), lax.sin, dn,  # noqa: E731
                                    update_shape=(3,))
    want = [0.0, np.sin(np.sin(1.0)), 2.0, np.sin(3.0)]
    np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(plax.jit(f)(x)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(plax.vmap(f)(np.stack([x, x]))), [want] * 2, rtol=1e-6)
    eqns = plax.make_jaxpr(f)(x).jaxpr.eqns
    assert eqns[-1].primitive is lax.scatter_p and eqns[-1].params["update_jaxpr"] is not None
    rows = lax.scatter_apply(np.arange(6.0, dtype=np.float32).reshape(2, 3), np.array([[0]]),
                             lambda v: v * 10, lax.ScatterDimensionNumbers((1,), (0,), (0,)),
                             update_shape=(1, 3))
    np.testing.assert_array_equal(np.asarray(rows), [[0, 10, 20], [3, 4, 5]])
    with pytest.raises(NotImplementedError, match="scatter_apply JVP not implemented"):
        plax.grad(lambda x: f(x).sum())(x)


def test_at_subtract_is_scatter_sub():
    """x.at[i].subtract binds scatter-sub, as JAX's does; repeated indices accumulate."""
    x = np.arange(5.0, dtype=np.float32)
    f = lambda x: plax.numpy.asarray(x).at[np.array([0, 0, 3])].subtract(  # noqa: E731
        x[:3] * 2)
    assert lax.scatter_sub_p in [e.primitive for e in plax.make_jaxpr(f)(x).jaxpr.eqns]
    np.testing.assert_allclose(np.asarray(f(x)), [-2, 1, 2, -1, 4])
    np.testing.assert_allclose(np.asarray(plax.grad(lambda x: (f(x) ** 2).sum())(x)),
                               [4, 10, 8, -2, 8])  # JAX 0.10.2's values
