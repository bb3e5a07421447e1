"""plax.numpy.vectorize against numpy.vectorize: elementwise, gufunc signatures, excluded args."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.test_util import check_grads


def test_elementwise_broadcasts_like_numpy():
    f = lambda a, b: a * 2 + b  # noqa: E731
    a, b = np.arange(3.0, dtype=np.float32), np.arange(2.0, dtype=np.float32)[:, None]
    out = jnp.vectorize(f)(a, b)
    np.testing.assert_allclose(np.asarray(out), np.vectorize(f)(a, b))


@pytest.mark.parametrize("shapes", [((4, 3), (3,)), ((2, 1, 3), (5, 3)), ((3,), (3,))])
def test_signature_inner_product(shapes):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    sig = "(n),(n)->()"
    out = jnp.vectorize(lambda x, y: jnp.dot(x, y), signature=sig)(a, b)
    want = np.vectorize(np.dot, signature=sig)(a, b)
    assert out.shape == want.shape
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5)


def test_signature_matrix_vector_and_several_outputs():
    rng = np.random.default_rng(1)
    m, v = rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    out = jnp.vectorize(lambda a, b: a @ b, signature="(m,n),(n)->(m)")(m, v)
    np.testing.assert_allclose(np.asarray(out), m @ v, rtol=1e-5)
    x, s = jnp.vectorize(lambda a: (a * 2, a.sum()), signature="(n)->(n),()")(m)
    np.testing.assert_allclose(np.asarray(x), m * 2)
    np.testing.assert_allclose(np.asarray(s), m.sum(-1), rtol=1e-5)


def test_excluded_and_keywords():
    scale = jnp.vectorize(lambda a, k, *, shift=0.0: a * k + shift, excluded={1})
    out = scale(jnp.arange(3.0), 2.0, shift=jnp.array([[1.0], [2.0]]))
    np.testing.assert_allclose(np.asarray(out), np.arange(3.0) * 2 + np.array([[1.0], [2.0]]))
    pick = jnp.vectorize(lambda a, mode: a.max() if mode == "max" else a.min(),
                         excluded={"mode"}, signature="(n)->()")
    np.testing.assert_array_equal(np.asarray(pick(jnp.arange(6.0).reshape(2, 3), mode="max")),
                                  [2.0, 5.0])


def test_composes_with_jit_and_grad():
    f = jnp.vectorize(lambda x, y: jnp.sum(jnp.sin(x) * y), signature="(n),(n)->()")
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    y = np.float32([0.5, 1.0, -2.0])
    np.testing.assert_allclose(np.asarray(plax.jit(f)(x, y)), (np.sin(x) * y).sum(-1), rtol=1e-5)
    check_grads(lambda a: f(a, y), (x,), order=1)


def test_signature_errors():
    dot = jnp.vectorize(lambda a, b: jnp.dot(a, b), signature="(n),(n)->()")
    with pytest.raises(ValueError, match="inconsistent size for core dimension 'n': 2 vs 3"):
        dot(jnp.ones((4, 3)), jnp.ones(2))
    with pytest.raises(ValueError, match="does not have enough dimensions for all core"):
        jnp.vectorize(lambda a: a, signature="(n)->(n)")(jnp.ones(()))
    with pytest.raises(ValueError, match=r"output shape \(\) does not match core dimensions"):
        jnp.vectorize(lambda a: a.sum(), signature="(n)->(n)")(jnp.ones(3))
    with pytest.raises(ValueError, match="not a valid gufunc signature: bad"):
        jnp.vectorize(lambda a: a, signature="bad")(jnp.ones(3))


# (function, signature, excluded, arguments, error type, message)
CALL_ERRORS = [
    (jnp.dot, "(n,m),(m,k)->(n,k),()", (), (np.ones((2, 2)), np.ones((2, 2))), TypeError,
     "output must be a tuple when multiple outputs are expected"),
    (lambda *a: a, "(),()->(),(),()", (), (1.0, 2.0), TypeError,
     "wrong number of output arguments: expected 3, got 2"),
    (jnp.dot, "(n,m),(m,k)->(n,n)", (), (np.ones((2, 3)), np.ones((3, 4))), ValueError,
     "inconsistent size for core dimension 'n': 4 vs 2"),
    (lambda x, y: x, "(k),(k)->(k)", (), (np.ones(3), None), ValueError,
     r"Cannot pass None at locations \{1\} with signature='\(k\),\(k\)->\(k\)'"),
]


@pytest.mark.parametrize("fn,signature,excluded,args,error,message", CALL_ERRORS)
def test_call_errors(fn, signature, excluded, args, error, message):
    f = jnp.vectorize(fn, signature=signature, excluded=frozenset(excluded))
    with pytest.raises(error, match=message):
        f(*args)


def test_excluded_errors_and_none_arguments():
    with pytest.raises(TypeError, match="can only exclude integer or string arguments"):
        jnp.vectorize(lambda x: x, excluded={1.5})
    with pytest.raises(ValueError, match=r"excluded=\{-1\} contains negative numbers"):
        jnp.vectorize(lambda x: x, excluded={-1})
    # a None argument passes through unmapped, as NumPy's object arrays would not
    f = jnp.vectorize(lambda x, y: x if y is None else x + y)
    np.testing.assert_array_equal(f(np.arange(4), None), np.arange(4))
    np.testing.assert_array_equal(f(np.arange(4), np.arange(4)), 2 * np.arange(4))
