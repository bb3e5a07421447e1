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
    np.testing.assert_allclose(mine.reduceat(np.arange(8.0), [0, 4, 1, 5]),
                               ref.reduceat(np.arange(8.0), [0, 4, 1, 5]), rtol=1e-5)
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
