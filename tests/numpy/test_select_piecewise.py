"""plax.numpy.select and plax.numpy.piecewise against NumPy (values) and JAX 0.10 (dtypes,
weak types, broadcasting, error phrases), under jit, vmap and grad."""
import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from helpers import check_vmap
from plax.test_util import check_grads

BF16 = np.dtype(ml_dtypes.bfloat16)


def _np(x):
    return np.asarray(x)


def _weak(x):
    return x.aval.weak_type


def _rand(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -5, 6, shape).astype(dtype)
    v = rng.integers(-8, 9, shape) / 4
    if dtype.kind == "c":
        v = v + 1j * rng.integers(-2, 3, shape)
    return v.astype(dtype)


# --- select ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(), (7,), (2, 3, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.complex64, np.uint8])
def test_select_matches_numpy(shape, dtype):
    conds = [_rand(shape, np.bool_, s) for s in range(3)]  # overlapping: first true wins
    choices = [_rand(shape, dtype, 10 + s) for s in range(3)]
    default = _rand(shape, dtype, 20)
    out = jnp.select(conds, choices, default)
    want = np.select(conds, choices, default)
    assert out.shape == want.shape and out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(_np(out), want)


def test_select_first_true_wins_and_default():
    conds = [np.array([False, True, False, False]), np.array([True, True, False, False]),
             np.array([False, True, True, False])]
    choices = [np.array([1, 2, 3, 4]), np.array([10, 20, 30, 40]),
               np.array([100, 200, 300, 400])]
    np.testing.assert_array_equal(_np(jnp.select(conds, choices)), [10, 2, 300, 0])
    np.testing.assert_array_equal(_np(jnp.select(conds, choices, -7)), [10, 2, 300, -7])
    # tuples and a stacked array of conditions work as lists do
    out = jnp.select(jnp.asarray(np.stack(conds)), tuple(jnp.asarray(c) for c in choices))
    np.testing.assert_array_equal(_np(out), [10, 2, 300, 0])


def test_select_broadcasting():
    c0 = np.array([[True], [False]])          # (2, 1)
    c1 = np.array([True, False, True])        # (3,)
    choices = [np.arange(3), 10]
    out = jnp.select([c0, c1], choices, -1)
    np.testing.assert_array_equal(_np(out), [[0, 1, 2], [10, -1, 10]])
    np.testing.assert_array_equal(_np(out), np.select(np.broadcast_arrays(c0, c1),
                                                      np.broadcast_arrays(np.arange(3), 10), -1))
    # the choices and the default may add dimensions the conditions lack
    out = jnp.select([np.ones((2, 1, 3), bool)], [np.arange(4.0).reshape(4, 1)],
                     np.zeros(3, np.int8))
    assert out.shape == (2, 4, 3) and out.dtype == np.float32
    np.testing.assert_array_equal(_np(out), np.broadcast_to(np.arange(4.0)[:, None], (2, 4, 3)))
    # a default array broadcast against scalar choices
    np.testing.assert_array_equal(_np(jnp.select([np.array([True, False])], [1],
                                                 jnp.array([7, 8]))), [1, 8])


def test_select_dtype_promotion():
    c = np.array([True, False])
    i32, f32 = jnp.array([1, 2], np.int32), jnp.array([1.5, 2.5], np.float32)
    out = jnp.select([c], [i32])  # default 0 is weak: stays int32
    assert out.dtype == np.int32 and not _weak(out)
    out = jnp.select([c], [i32], 0.5)  # a weak float default makes int32 choices float
    assert out.dtype == np.float32 and _weak(out)
    np.testing.assert_array_equal(_np(out), [1.0, 0.5])
    out = jnp.select([c, ~c], [f32, i32])
    assert out.dtype == np.float32
    np.testing.assert_array_equal(_np(out), [1.5, 2.0])
    out = jnp.select([c], [jnp.array([1.0, 2.0], BF16)], 3.0)
    assert out.dtype == BF16
    np.testing.assert_array_equal(_np(out).astype(np.float32), [1.0, 3.0])
    out = jnp.select([c], [jnp.array([1, 2], np.float16)], jnp.int32(3))
    assert out.dtype == np.float16
    out = jnp.select([c], [True], jnp.int8(3))
    assert out.dtype == np.int8
    np.testing.assert_array_equal(_np(out), [1, 3])
    out = jnp.select([c], [jnp.array([1 + 2j, 2])], 0)
    assert out.dtype == np.complex64
    np.testing.assert_array_equal(_np(out), [1 + 2j, 0])
    # all Python scalars: a weak result
    out = jnp.select([True, False], [1, 2])
    assert out.shape == () and out.dtype == np.int32 and _weak(out) and int(out) == 1
    out = jnp.select([False, False], [1, 2], 2.5)
    assert out.dtype == np.float32 and _weak(out) and float(out) == 2.5
    # a weak int default out of range wraps into a narrow choice dtype, as in JAX
    out = jnp.select([c], [jnp.array([1, 2], np.uint8)], 300)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(_np(out), [1, 44])


def test_select_non_boolean_conditions_are_truthy():
    # JAX 0.10 casts conditions with astype(bool) instead of rejecting them (NumPy raises).
    with pytest.raises(TypeError, match="should be boolean"):
        np.select([np.array([0, 1])], [np.array([1, 2])])
    out = jnp.select([jnp.array([0, 1, 2])], [jnp.array([1, 2, 3])])
    np.testing.assert_array_equal(_np(out), [0, 2, 3])
    out = jnp.select([jnp.array([0.0, np.nan, -0.5])], [jnp.array([1, 2, 3])], 9)
    np.testing.assert_array_equal(_np(out), [9, 2, 3])
    out = jnp.select([jnp.array([0j, 1j])], [1.0], 2)
    np.testing.assert_array_equal(_np(out), [2.0, 1.0])


def test_select_zero_size():
    out = jnp.select([np.zeros((0, 3), bool)], [1.0], 2)
    assert out.shape == (0, 3) and out.dtype == np.float32


def test_select_errors():
    with pytest.raises(ValueError,
                       match=r"condlist must have length equal to choicelist \(1 vs 2\)"):
        jnp.select([np.array([True])], [1, 2])
    with pytest.raises(ValueError, match="condlist must be non-empty"):
        jnp.select([], [])
    with pytest.raises(TypeError, match="select requires ndarray or scalar arguments"):
        jnp.select([[True, False]], [1])
    with pytest.raises(TypeError, match="select requires ndarray or scalar arguments"):
        jnp.select([np.array([True, False])], [[1, 2]])
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        jnp.select([np.array([True, False]), np.array([True, False, True])], [1, 2])
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        jnp.select([np.array([True, False])], [np.arange(3)])


def test_select_jit():
    f = plax.jit(lambda c0, c1, a, b, d: jnp.select([c0, c1], [a, b], d))
    c0, c1 = _rand((4, 5), np.bool_, 1), _rand((5,), np.bool_, 2)
    a, b, d = _rand((4, 5), np.float32, 3), _rand((4, 1), np.float32, 4), np.float32(-1)
    out = f(c0, c1, a, b, d)
    want = np.select(np.broadcast_arrays(c0, c1), np.broadcast_arrays(a, b), d)
    np.testing.assert_array_equal(_np(out), want)
    # traced non-boolean conditions
    out = plax.jit(lambda c: jnp.select([c], [1]))(jnp.array([0, 3]))
    np.testing.assert_array_equal(_np(out), [0, 1])


def test_select_vmap():
    c = _rand((3, 4), np.bool_, 5)
    v = _rand((3, 4), np.float32, 6)
    out = check_vmap(lambda c, v: jnp.select([c, ~c & (v > 0)], [v, -v], 9.0), c, v)
    np.testing.assert_array_equal(_np(out), np.select([c, ~c & (v > 0)], [v, -v], 9.0))
    # only the default batched, conditions and choices closed over
    out = check_vmap(lambda d: jnp.select([np.array([True, False])], [1.0], d), np.arange(3.0))
    np.testing.assert_array_equal(_np(out), [[1, 0], [1, 1], [1, 2]])
    # batched along another axis
    out = plax.vmap(lambda c, v: jnp.select([c], [v], -1.0), in_axes=(1, 1))(c, v)
    np.testing.assert_array_equal(_np(out), np.where(c, v, -1.0).T)


def test_select_grad():
    x = np.array([-2.0, -1.0, 0.5, 1.5, 2.0], np.float32)
    conds = [x < 0, x > 1]
    f = lambda v: jnp.select(conds, [v * 2, v ** 2], jnp.sin(v))  # noqa: E731
    g = plax.grad(lambda v: f(v).sum())(x)
    np.testing.assert_allclose(_np(g), np.select(conds, [2.0, 2 * x], np.cos(x)), rtol=1e-6)
    check_grads(f, (x,), 2, modes=("fwd", "rev"))
    # the default's gradient flows only where no condition holds
    h = plax.grad(lambda d: jnp.select(conds, [1.0, 2.0], d * 3).sum())(np.ones(5, np.float32))
    np.testing.assert_array_equal(_np(h), [0, 0, 3, 0, 0])


# --- piecewise ------------------------------------------------------------------------------
X = np.array([-4, -3, -2, -1, 0, 1, 2, 3, 4])


@pytest.mark.parametrize("dtype,shape", [(np.float32, (9,)), (np.int32, (3, 3)),
                                         (np.float16, (9,))])
def test_piecewise_matches_numpy(dtype, shape):
    x = X.reshape(shape).astype(dtype)
    cases = [
        ([x < 0, x >= 0], [lambda v: 0 * v, lambda v: v]),
        ([x < 0, x >= 0], [0, lambda v: v]),
        ([x < -1, x > 1], [lambda v: 1 + v, lambda v: v - 1, 0]),
        ([x < -1, x > 1], [lambda v: v * 2, 7]),  # no otherwise: 0 where nothing holds
        ([x < 1, x > -1], [1, 2]),  # overlapping: the later condition wins
        ([x == 0], [lambda v: v + 5, lambda v: -v]),  # a callable otherwise
    ]
    for condlist, funclist in cases:
        out = jnp.piecewise(x, condlist, funclist)
        want = np.piecewise(x, condlist, funclist)
        assert out.dtype == np.dtype(dtype) and out.shape == shape
        np.testing.assert_array_equal(_np(out), want)


def test_piecewise_casts_to_x_dtype():
    xi = jnp.asarray(np.array([-2, -1, 0, 1, 2], np.int32))
    out = jnp.piecewise(xi, [xi < 0], [1.7, 2.5])  # float constants truncated to int32
    assert out.dtype == np.int32 and not _weak(out)
    np.testing.assert_array_equal(_np(out), np.piecewise(_np(xi), [_np(xi) < 0], [1.7, 2.5]))
    out = jnp.piecewise(xi, [xi < 0], [lambda v: v * 1.5, lambda v: v / 2])
    assert out.dtype == np.int32
    np.testing.assert_array_equal(_np(out), [-3, -1, 0, 0, 1])
    xf = jnp.asarray(np.array([-2.0, 0.0, 2.0], np.float16))
    out = jnp.piecewise(xf, [xf < 0], [lambda v: v * 2.0, 1.5])
    assert out.dtype == np.float16
    np.testing.assert_array_equal(_np(out), [-4.0, 1.5, 1.5])
    xc = jnp.asarray(np.array([-1.0, 1.0], np.complex64))
    out = jnp.piecewise(xc, [xc.real < 0], [lambda v: v * 1j, 1.5])
    assert out.dtype == np.complex64
    np.testing.assert_array_equal(_np(out), [-1j, 1.5])
    xb = jnp.array([True, False])
    out = jnp.piecewise(xb, [xb], [lambda v: ~v, 1])
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(_np(out), [False, True])
    xu = jnp.array([1, 2], np.uint8)
    np.testing.assert_array_equal(_np(jnp.piecewise(xu, [xu == 1], [300, 1])), [44, 1])
    # a Python scalar x is weak, the result is not
    out = jnp.piecewise(1.0, [True], [lambda v: v + 1, 0.0])
    assert out.shape == () and out.dtype == np.float32 and not _weak(out) and float(out) == 2.0
    # functions may return Python scalars (JAX's astype would fail on them)
    xf = jnp.array([-1.0, 1.0])
    np.testing.assert_array_equal(_np(jnp.piecewise(xf, [xf < 0], [lambda v: 1.0, lambda v: v])),
                                  [1.0, 1.0])


def test_piecewise_args_and_kwargs():
    x = np.array([-2.0, -1.0, 0.0, 1.0], np.float32)
    f = lambda v, a, b=1.0: v * a + b  # noqa: E731
    out = jnp.piecewise(x, [x < 0], [f, 5.0], 3.0, b=10.0)
    np.testing.assert_array_equal(_np(out), np.piecewise(x, [x < 0], [f, 5.0], 3.0, b=10.0))
    np.testing.assert_array_equal(_np(out), [4.0, 7.0, 5.0, 5.0])


def test_piecewise_condition_shapes():
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0], np.float32)
    # an array of scalar conditions: each applies to all of x (JAX's reading, not NumPy's)
    out = jnp.piecewise(x, jnp.array([False, True, False]),
                        [lambda v: v * 0, lambda v: v * 10, lambda v: v * 100])
    np.testing.assert_array_equal(_np(out), x * 10)
    out = jnp.piecewise(x, [True, False], [1.0, 2.0])
    np.testing.assert_array_equal(_np(out), np.ones(5))
    # conditions broadcast against x, and x against conditions
    out = jnp.piecewise(np.ones((2, 3), np.float32), [np.array([True, False, True])],
                        [lambda v: v + 1, 0.0])
    np.testing.assert_array_equal(_np(out), [[2, 0, 2], [2, 0, 2]])
    out = jnp.piecewise(np.float32(2.0), [np.array([True, False, True])], [lambda v: v + 1, 0.0])
    np.testing.assert_array_equal(_np(out), [3, 0, 3])
    # nested Python lists of conditions, and non-boolean conditions (nonzero is true)
    out = jnp.piecewise(x, [[True, False, True, False, True]], [1.0, 2.0])
    np.testing.assert_array_equal(_np(out), [1, 2, 1, 2, 1])
    out = jnp.piecewise(x, [jnp.array([-2, -1, 0, 1, 2])], [1.0, 2.0])
    np.testing.assert_array_equal(_np(out), [1, 1, 2, 1, 1])
    out = jnp.piecewise(np.zeros((0,), np.float32), [np.zeros((0,), bool)], [lambda v: v, 3.0])
    assert out.shape == (0,) and out.dtype == np.float32


def test_piecewise_traces_every_function():
    seen = []

    def tracked(name, fn):
        def f(v):
            seen.append(name)
            return fn(v)
        return f

    x = np.array([1.0, 2.0], np.float32)  # only the first condition ever holds
    out = jnp.piecewise(x, [x > 0, x > 5], [tracked("a", lambda v: v), tracked("b", jnp.sqrt),
                                            tracked("c", lambda v: -v)])
    np.testing.assert_array_equal(_np(out), x)
    assert set(seen) == {"a", "b", "c"}


def test_piecewise_errors():
    x = jnp.arange(5.0)
    with pytest.raises(ValueError, match=r"with 1 condition\(s\), either 1 or 2 functions are "
                                         r"expected; got 3"):
        jnp.piecewise(x, [x < 0], [1, 2, 3])
    with pytest.raises(ValueError, match=r"with 3 condition\(s\), either 3 or 4 functions"):
        jnp.piecewise(x, [x < 0, x > 0, x == 0], [1])
    # a single boolean array is read as len(x) scalar conditions, as in JAX
    with pytest.raises(ValueError, match=r"with 5 condition\(s\), either 5 or 6 functions"):
        jnp.piecewise(x, x < 0, [1, 2])
    with pytest.raises(ValueError, match="at least one condition"):
        jnp.piecewise(x, [], [1.0])
    with pytest.raises(TypeError, match="piecewise requires ndarray or scalar arguments"):
        jnp.piecewise([1.0, 2.0], [True], [1.0])
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        jnp.piecewise(jnp.ones(3), [np.array([True, False])], [lambda v: v + 1, 0.0])
    with pytest.raises(TypeError, match="switch branches must have equal output types"):
        jnp.piecewise(x, [x < 1], [lambda v: jnp.ones(2), 0.0])


def test_piecewise_jit():
    x = np.linspace(-3, 3, 13).astype(np.float32)
    f = plax.jit(lambda x: jnp.piecewise(x, [x < 0, x > 1], [jnp.sin, lambda v: v ** 2, jnp.exp]))
    want = np.piecewise(x, [x < 0, x > 1], [np.sin, lambda v: v ** 2, np.exp])
    np.testing.assert_allclose(_np(f(x)), want, rtol=1e-6)
    # traced constants and closed-over tracers
    g = plax.jit(lambda x, a: jnp.piecewise(x, [x < 0], [lambda v: v * a, a]))
    np.testing.assert_array_equal(_np(g(x, 3.0)), np.where(x < 0, 3 * x, 3.0))


def test_piecewise_vmap():
    x = np.linspace(-2, 2, 10).astype(np.float32).reshape(5, 2)
    a = np.arange(5.0, dtype=np.float32) - 2
    f = lambda x, a: jnp.piecewise(x, [x < a], [lambda v: v * a, a])  # noqa: E731
    out = check_vmap(f, x, a)
    np.testing.assert_allclose(_np(out), np.where(x < a[:, None], x * a[:, None], a[:, None]),
                               rtol=1e-6)
    # mapped over the second axis, with unbatched conditions
    h = lambda x: jnp.piecewise(x, [np.array([True, False, False, True, False])],  # noqa: E731
                                [jnp.cos, lambda v: -v])
    out = plax.vmap(h, in_axes=1, out_axes=1)(x)
    mask = np.array([True, False, False, True, False])[:, None]
    np.testing.assert_allclose(_np(out), np.where(mask, np.cos(x), -x), rtol=1e-6)


def test_piecewise_grad():
    x = np.array([-2.5, -1.3, -0.4, 0.6, 1.7, 2.2], np.float32)  # away from 0 and 1

    def f(x):
        return jnp.piecewise(x, [x < 0, x > 1], [jnp.sin, lambda v: v ** 3, jnp.exp])

    g = plax.grad(lambda x: f(x).sum())(x)
    np.testing.assert_allclose(_np(g), np.piecewise(x, [x < 0, x > 1],
                                                    [np.cos, lambda v: 3 * v ** 2, np.exp]),
                               rtol=1e-5)
    check_grads(f, (x,), 2, modes=("fwd", "rev"))
    # constants contribute no gradient
    g = plax.grad(lambda x: jnp.piecewise(x, [x < 0], [2.0, lambda v: v * 4]).sum())(x)
    np.testing.assert_array_equal(_np(g), np.where(x < 0, 0.0, 4.0))
    check_grads(lambda x: jnp.piecewise(x, [x < 0], [lambda v: v * v, jnp.tanh]), (x,), 1,
                modes=("fwd", "rev"))
