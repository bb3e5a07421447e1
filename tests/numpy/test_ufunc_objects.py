"""jnp.ufunc objects (jnp.add.outer/.reduce/.accumulate/.at/.reduceat) and jnp.frompyfunc,
against NumPy's ufunc methods."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.test_util import check_grads

X = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "minimum", "subtract",
                                  "logaddexp", "logaddexp2"])
def test_float_ufunc_methods_match_numpy(name):
    mine, ref = getattr(jnp, name), getattr(np, name)
    assert isinstance(mine, jnp.ufunc) and repr(mine) == f"<jnp.ufunc '{name}'>"
    assert (mine.nin, mine.nout) == (ref.nin, ref.nout)
    np.testing.assert_allclose(mine(X, 2.0), ref(X, 2.0), rtol=1e-6)
    np.testing.assert_allclose(mine.outer(X[0], X[1]), ref.outer(X[0], X[1]), rtol=1e-6)
    for axis in (0, 1):
        np.testing.assert_allclose(mine.reduce(X, axis=axis), ref.reduce(X, axis=axis),
                                   rtol=1e-5)
        np.testing.assert_allclose(mine.accumulate(X, axis=axis), ref.accumulate(X, axis=axis),
                                   rtol=1e-5)
    idx = np.array([0, 0, 2])
    starts = np.array([0, 4, 1, 5])
    np.testing.assert_allclose(mine.reduceat(np.arange(8.0), starts),
                               ref.reduceat(np.arange(8.0), starts), rtol=1e-5)
    expect = np.zeros(4, np.float32) + 1
    ref.at(expect, idx, np.float32(3.0))
    np.testing.assert_allclose(mine.at(np.ones(4, np.float32), idx, 3.0, inplace=False),
                               expect, rtol=1e-6)


def test_integer_and_boolean_ufuncs_and_options():
    ints = np.array([[1, 2, 4], [8, 3, 5]], np.int32)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        np.testing.assert_array_equal(getattr(jnp, name).reduce(ints, axis=1),
                                      getattr(np, name).reduce(ints, axis=1))
    flags = np.array([[True, False], [True, True]])
    for name in ("logical_and", "logical_or", "logical_xor"):
        np.testing.assert_array_equal(getattr(jnp, name).reduce(flags, axis=0),
                                      getattr(np, name).reduce(flags, axis=0))
    np.testing.assert_allclose(jnp.add.reduce(X, axis=None), X.sum())
    np.testing.assert_allclose(jnp.add.reduce(X, axis=1, keepdims=True, initial=10.0),
                               np.add.reduce(X, axis=1, keepdims=True, initial=10.0))
    np.testing.assert_allclose(jnp.add.reduce(X, axis=1, where=np.array([True, False, True])),
                               np.add.reduce(X, axis=1, where=np.array([True, False, True])))
    np.testing.assert_allclose(jnp.negative.at(np.ones(3), np.array([1]), inplace=False),
                               [1, -1, 1])


def test_frompyfunc_composes():
    f = jnp.frompyfunc(lambda a, b: a * b + 1, 2, 1, identity=1)
    np.testing.assert_allclose(f(np.arange(3.0), 2.0), [1, 3, 5])
    assert float(f.reduce(np.arange(1.0, 4.0))) == 16.0  # ((1*1+1)*2+1)*3+1: from the identity
    np.testing.assert_allclose(f.outer(np.arange(2.0), np.arange(3.0)), [[1, 1, 1], [1, 2, 3]])
    np.testing.assert_allclose(f.accumulate(np.arange(1.0, 4.0)), [1, 3, 10])
    np.testing.assert_allclose(f.at(np.zeros(3), np.array([0, 0]), 2.0, inplace=False), [3, 0, 0])
    np.testing.assert_allclose(plax.jit(lambda a: jnp.add.outer(a, a))(np.arange(2.0)),
                               [[0, 1], [1, 2]])
    np.testing.assert_allclose(plax.vmap(jnp.add.reduce)(X), X.sum(1), rtol=1e-6)
    with plax.enable_x64():
        check_grads(lambda a: jnp.multiply.reduce(a), (np.arange(1.0, 4.0),), 2)
        check_grads(lambda a: f.reduce(a), (np.arange(1.0, 4.0),), 1)


def test_errors():
    with pytest.raises(NotImplementedError, match="cannot operate inplace like"):
        jnp.add.at(np.zeros(3), 0, 1.0)
    with pytest.raises(ValueError, match="outer only supported for binary ufuncs"):
        jnp.negative.outer(X, X)
    with pytest.raises(ValueError, match="zero-size array to reduction operation"):
        jnp.subtract.reduce(np.zeros(0))
    with pytest.raises(TypeError, match="takes 2 positional argument"):
        jnp.add(X)
    with pytest.raises(NotImplementedError, match="out argument"):
        jnp.add(X, X, out=X)
    with pytest.raises(TypeError, match="reduceat requires ndarray or scalar arguments"):
        jnp.add.reduceat(X[0], [0, 1])  # (as JAX: a list of indices is refused)


def _scalar_sub(a, b):
    assert np.shape(a) == np.shape(b) == ()  # frompyfunc hands func scalars only
    return a - b


SUB = jnp.frompyfunc(_scalar_sub, 2, 1)
NP_SUB = np.frompyfunc(_scalar_sub, 2, 1)
A = np.arange(1.0, 13.0, dtype=np.float32).reshape(4, 3)
MASK = np.array([[True, False, True]] * 4)

# method call on SUB, the same call on NumPy's frompyfunc (objects, cast back)
SCALAR_METHOD_CASES = [
    (lambda u: u.reduce(A, axis=0), lambda u: u.reduce(A, axis=0)),
    (lambda u: u.reduce(A, axis=-1, keepdims=True), lambda u: u.reduce(A, axis=-1,
                                                                      keepdims=True)),
    (lambda u: u.reduce(A, axis=1, where=MASK, initial=1.0),
     lambda u: u.reduce(A, axis=1, where=MASK, initial=1.0)),
    (lambda u: u.accumulate(A, axis=1), lambda u: u.accumulate(A, axis=1)),
    (lambda u: u.reduceat(A, np.array([0, 2, 1]), axis=0),
     lambda u: u.reduceat(A, np.array([0, 2, 1]), axis=0)),
    (lambda u: u.outer(A, A[0]), lambda u: u.outer(A, A[0])),
]


@pytest.mark.parametrize("mine,ref", SCALAR_METHOD_CASES)
def test_frompyfunc_methods_hand_func_scalars(mine, ref):
    with plax.numpy_rank_promotion("raise"):  # as JAX's tests run
        got = mine(SUB)
    np.testing.assert_allclose(got, np.asarray(ref(NP_SUB), np.float32), rtol=1e-6)


def test_frompyfunc_at_repeated_and_broadcast_indices():
    want = np.ones((5, 3))
    np.subtract.at(want, np.array([0, 4, 0]), np.arange(9.0).reshape(3, 3))
    got = SUB.at(np.ones((5, 3)), np.array([0, 4, 0]), np.arange(9.0).reshape(3, 3),
                 inplace=False)
    np.testing.assert_allclose(got, want)
    # a repeated index negates twice, as np.negative.at does
    np.testing.assert_allclose(jnp.negative.at(np.arange(3.0), np.array([1, 1, 2]),
                                               inplace=False), [0, 1, -2])


def test_builtin_reductions_take_where_and_initial():
    ints = np.arange(12, dtype=np.int32).reshape(4, 3)
    for name in ("bitwise_or", "bitwise_xor", "logaddexp"):
        mine, ref = getattr(jnp, name), getattr(np, name)
        x = ints if name.startswith("bitwise") else A
        np.testing.assert_allclose(mine.reduce(x, axis=1, where=MASK),
                                   ref.reduce(x, axis=1, where=MASK), rtol=1e-6)
    np.testing.assert_allclose(jnp.subtract.reduce(A, axis=0, where=MASK, initial=2.0),
                               np.subtract.reduce(A, axis=0, where=MASK, initial=2.0))
    with pytest.raises(ValueError, match="does not have an identity"):
        jnp.subtract.reduce(A, where=MASK)
    with pytest.raises(ValueError, match="where argument must have dtype=bool"):
        jnp.add.reduce(A, where=np.ones(A.shape, np.int32))


def test_properties_are_read_only():
    f = jnp.frompyfunc(_scalar_sub, 2, 1, identity=None)
    for attr in ("nin", "nout", "nargs", "identity", "_func"):
        getattr(f, attr)
        with pytest.raises(AttributeError, match="setter"):
            setattr(f, attr, None)
        with pytest.raises(AttributeError, match="setter"):
            setattr(jnp.add, attr, None)


def test_methods_compile_once_per_signature():
    # the methods are compiled with the ufunc static, as JAX jits them: a second eager call
    # (with an equal ufunc made anew) compiles nothing
    from plax._src import test_util as jtu
    idx = np.array([0, 2, 2], np.int32)
    calls = [lambda: jnp.frompyfunc(_scalar_sub, 2, 1).reduce(A, axis=None),
             lambda: SUB.accumulate(A, axis=0), lambda: SUB.at(A, idx, 1.0, inplace=False),
             lambda: jnp.add.reduceat(A, idx), lambda: jnp.bitwise_or.reduce(idx),
             lambda: SUB.outer(A[0], A[1])]
    first = [np.asarray(c()) for c in calls]
    with jtu.count_primitive_compiles() as count:
        again = [np.asarray(c()) for c in calls]
    assert count() == 0
    for f, s in zip(first, again):
        np.testing.assert_array_equal(f, s)
