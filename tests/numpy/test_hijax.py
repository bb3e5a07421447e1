"""``plax.numpy.hijax`` (searchsorted and nonzero as VJPHiPrimitives) against NumPy, and the
VJPHiPrimitive machinery (``plax.api.hi_primitive``): its jvp, vjp, batching and checks."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core import dtypes
from plax.experimental.hijax import VJPHiPrimitive
from plax.numpy import hijax

_rng = np.random.default_rng(0)


def _np_search(a, q, side, dimension, batch_dims):
    """NumPy's searchsorted for every 1-d line of ``a`` along ``dimension``."""
    if batch_dims:
        return np.stack([_np_search(x, y, side, dimension - 1, batch_dims - 1)
                         for x, y in zip(a, q)])
    a = np.moveaxis(a, dimension, -1)
    lines = a.reshape(-1, a.shape[-1])
    out = np.stack([np.searchsorted(line, q, side=side) for line in lines])
    return out.reshape(a.shape[:-1] + np.shape(q))


@pytest.mark.parametrize("a_shape,q_shape,dimension,batch_dims,method,side", [
    ((10,), (7,), 0, 0, "scan", "left"), ((10,), (7,), 0, 0, "sort", "right"),
    ((4, 9), (5,), 1, 0, "scan_unrolled", "right"), ((9, 4), (2, 3), 0, 0, "compare_all", "left"),
    ((3, 8), (3, 5), 1, 1, "sort", "left"), ((3, 8), (3, 5), 1, 1, "scan", "right"),
    ((2, 3, 6), (2, 3, 4), 2, 2, "compare_all", "right"),
    ((2, 6, 3), (2,), 1, 1, "scan_unrolled", "left")])
def test_searchsorted_against_numpy(a_shape, q_shape, dimension, batch_dims, method, side):
    a = np.sort(_rng.integers(0, 6, a_shape).astype(np.float32), axis=dimension)
    q = _rng.integers(-1, 7, q_shape).astype(np.float32)
    want = _np_search(a, q, side, dimension, batch_dims)
    kw = dict(side=side, dimension=dimension, batch_dims=batch_dims, method=method)
    got = hijax.searchsorted(a, q, **kw)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)
    jitted = plax.jit(hijax.searchsorted, static_argnames=list(kw))
    np.testing.assert_array_equal(jitted(a, q, **kw), want)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0), (1, 1)])
def test_searchsorted_vmap_is_one_operation(in_axes):
    a = np.sort(_rng.normal(size=(4, 12)).astype(np.float32), axis=1)
    q = _rng.normal(size=(4, 5)).astype(np.float32)
    args = [x if d is not None else x[0] for x, d in zip((a, q), in_axes)]
    args = [x.T.copy() if d == 1 else x for x, d in zip(args, in_axes)]
    f = plax.vmap(hijax.searchsorted, in_axes=in_axes)
    rows = [np.searchsorted(a[i] if in_axes[0] is not None else a[0],
                            q[i] if in_axes[1] is not None else q[0]) for i in range(4)]
    np.testing.assert_array_equal(f(*args), np.stack(rows))
    jaxpr = str(plax.make_jaxpr(f)(*args))
    assert jaxpr.count("call_hi_primitive") == 1 and "while" not in jaxpr


def test_searchsorted_derivatives_are_zero():
    a = jnp.array([0.0, 1.0, 2.0, 3.0])
    q = jnp.array([0.5, 2.5])
    out, tan = plax.jvp(hijax.searchsorted, (a, q), (jnp.ones(4), jnp.ones(2)))
    np.testing.assert_array_equal(out, [1, 3])
    assert tan.dtype == dtypes.float0 and tan.shape == (2,)
    _, vjp = plax.vjp(hijax.searchsorted, a, q)
    ga, gq = vjp(np.zeros((2,), dtypes.float0))
    np.testing.assert_array_equal(ga, np.zeros(4, np.float32))
    np.testing.assert_array_equal(gq, np.zeros(2, np.float32))


@pytest.mark.parametrize("kwargs,match", [
    (dict(side="up"), "invalid argument side='up', expected 'left' or 'right'"),
    (dict(batch_dims=1), r"batch_dims=1 must be in range \[0, 1\)"),
    (dict(dimension=3), r"dimension=3 must be in range \[0, 1\)"),
    (dict(method="bisect"), "invalid argument method='bisect'"),
    (dict(dtype="float32"), "out_dtype should be an integer type"),
])
def test_searchsorted_refusals(kwargs, match):
    with pytest.raises(ValueError, match=match):
        hijax.searchsorted(np.arange(5), np.arange(3), **kwargs)


def test_searchsorted_dtype_mismatch_and_overflow():
    with pytest.raises(ValueError, match="dtypes of sorted_arr and query must match; got "
                                         "float32 and int32"):
        hijax.searchsorted(np.zeros(3, np.float32), np.zeros(2, np.int32))
    with pytest.raises(OverflowError, match="cannot hold"):
        hijax.searchsorted(np.zeros(300, np.float32), np.zeros(2, np.float32), dtype="int8")


def _np_nonzero(a, size, axes):
    axes = sorted(ax % a.ndim for ax in axes)
    batch = [ax for ax in range(a.ndim) if ax not in axes]
    t = np.transpose(a, batch + axes)
    outs = [np.zeros(t.shape[:len(batch)] + (size,), np.int32) for _ in axes]
    for idx in np.ndindex(t.shape[:len(batch)]):
        for k, coords in enumerate(np.nonzero(t[idx])):
            n = min(size, len(coords))
            outs[k][idx][:n] = coords[:n]
    return outs


@pytest.mark.parametrize("shape,axes,size", [
    ((12,), None, 4), ((12,), (0,), 20), ((5, 6), None, 7), ((5, 6), (0,), 3),
    ((5, 6), (-1,), 3), ((3, 4, 5), (0, 2), 6), ((3, 4, 5), (1,), 0)])
def test_nonzero_against_numpy(shape, axes, size):
    a = _rng.integers(0, 2, shape)
    got = hijax.nonzero(a, size=size, axes=axes)
    want = _np_nonzero(a, size, range(a.ndim) if axes is None else axes)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    f = plax.vmap(lambda x: hijax.nonzero(x, size=size, axes=axes))
    batched = f(np.stack([a, 1 - a]))
    for g, w in zip(batched, want):
        np.testing.assert_array_equal(g[0], w)


def test_nonzero_refusals():
    with pytest.raises(ValueError, match="size must be a positive integer"):
        hijax.nonzero(np.ones(3), size=-1)
    with pytest.raises(ValueError, match="duplicate axes are not allowed"):
        hijax.nonzero(np.ones((2, 3)), size=1, axes=(1, -1))


class _Cube(VJPHiPrimitive):
    """x**3 with a jvp, a vjp and a batch_dim_rule (the default batch maps expand)."""

    def __init__(self, aval):
        self.in_avals, self.out_aval, self.params = (aval,), aval, {}
        super().__init__()

    def expand(self, x):
        return x * x * x

    def jvp(self, primals, tangents):
        (x,), (t,) = primals, tangents
        return self(x), 3.0 * x * x * t

    def vjp_fwd(self, nzs, x):
        return self(x), x

    def vjp_bwd_retval(self, x, g):
        return (3.0 * x * x * g,)

    def batch_dim_rule(self, axis_data, dims):
        return dims[0]


def _cube(x):
    return _Cube(plax.typeof(x))(x)


def test_vjp_hi_primitive_rules():
    x = jnp.array([1.0, 2.0, -3.0])
    np.testing.assert_allclose(_cube(x), np.array([1.0, 8.0, -27.0]))
    np.testing.assert_allclose(plax.jit(_cube)(x), np.array([1.0, 8.0, -27.0]))
    _, t = plax.jvp(_cube, (x,), (jnp.ones(3),))
    np.testing.assert_allclose(t, 3 * np.asarray(x) ** 2)
    g = plax.grad(lambda v: _cube(v).sum())(x)
    np.testing.assert_allclose(g, 3 * np.asarray(x) ** 2)
    g2 = plax.jit(plax.grad(lambda v: _cube(v).sum()))(x)
    np.testing.assert_allclose(g2, 3 * np.asarray(x) ** 2)
    m = jnp.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(plax.vmap(_cube, in_axes=1)(m), np.asarray(m).T ** 3)


def test_vjp_hi_primitive_checks_its_subclass():
    class Both(_Cube):
        def vjp_bwd(self, res, g, *accums):
            pass

    with pytest.raises(AttributeError, match="should not override both"):
        Both(plax.typeof(1.0))

    class NoParams(VJPHiPrimitive):
        def __init__(self):
            self.in_avals, self.out_aval = (), ()
            super().__init__()

    with pytest.raises(AttributeError, match="should set `self.params`"):
        NoParams()
    with pytest.raises(NotImplementedError, match="must implement `batch`"):
        plax.vmap(lambda v: _Plain(plax.typeof(v))(v))(jnp.ones(2))


class _Plain(VJPHiPrimitive):
    def __init__(self, aval):
        self.in_avals, self.out_aval, self.params = (aval,), aval, {}
        super().__init__()

    def expand(self, x):
        return x


class _PowLin(VJPHiPrimitive):
    """x**p with lin/linearized only (no jvp): forward and reverse mode both use them."""

    def __init__(self, aval, p):
        self.in_avals, self.out_aval, self.params = (aval,), aval, dict(p=p)
        super().__init__()

    def expand(self, x):
        return x ** self.p

    def lin(self, nzs, x):
        return self(x), x

    def linearized(self, x, t):
        return t * self.p * x ** (self.p - 1)


def test_vjp_hi_primitive_lin_and_accumulators():
    f = lambda v: _PowLin(plax.typeof(v), 3)(v)  # noqa: E731
    assert float(plax.linearize(f, 2.0)[1](1.0)) == 12.0
    assert float(plax.grad(f)(2.0)) == 12.0

    class Mul(VJPHiPrimitive):
        def __init__(self, aval):
            self.in_avals, self.out_aval, self.params = (aval, aval), aval, {}
            super().__init__()

        def expand(self, x, y):
            return x * y

        def vjp_fwd(self, nzs, x, y):
            seen.append(tuple(nzs))
            return self(x, y), (x, y)

        def vjp_bwd(self, res, g, x_acc, y_acc):
            x_acc.accum(g * res[1])
            y_acc.accum(g * res[0])

    seen = []
    mul = lambda x, y: Mul(plax.typeof(x))(x, y)  # noqa: E731
    assert float(plax.grad(mul, 1)(2.0, 3.0)) == 2.0
    assert seen == [(False, True)]

