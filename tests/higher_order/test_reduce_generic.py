"""lax.reduce with a Python combiner: the specialised monoid reductions, the generic
``reduce`` primitive (eager, jit, vmap, derivatives) and its errors."""
import numpy as np
import pytest
from scipy.special import logsumexp

import plax
import plax.numpy as jnp
from plax import lax
from plax.test_util import check_grads

RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 4, 5)).astype(np.float32)


def _logaddexp(a, b):
    return jnp.logaddexp(a, b)


def _argmax_pair(a, b):
    """(value, index) pairs: the larger value wins, the lower index breaks ties."""
    pick = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))
    return lax.select(pick, a[0], b[0]), lax.select(pick, a[1], b[1])


def _primitives(fn, *args):
    return [e.primitive.name for e in plax.make_jaxpr(fn)(*args).jaxpr.eqns]


# --- the monoids reduce with their specialised primitive -------------------------------------
@pytest.mark.parametrize("computation,init,prim,ref", [
    (lax.add, 0.0, "reduce_sum", np.sum),
    (lax.mul, 1.0, "reduce_prod", np.prod),
    (lax.max, -np.inf, "reduce_max", np.max),
    (lax.min, np.inf, "reduce_min", np.min),
])
def test_monoids_use_the_specialised_reduction(computation, init, prim, ref):
    f = lambda x: lax.reduce(x, init, computation, (0, 2))
    assert _primitives(f, X) == [prim]
    np.testing.assert_allclose(np.asarray(f(X)), ref(X, axis=(0, 2)), rtol=1e-5)


def test_bitwise_monoids_and_integer_identities():
    b = X > 0
    assert _primitives(lambda x: lax.reduce(x, True, lax.bitwise_and, (0,)), b) == ["reduce_and"]
    assert _primitives(lambda x: lax.reduce(x, False, lax.bitwise_or, (0,)), b) == ["reduce_or"]
    assert _primitives(lambda x: lax.reduce(x, False, lax.bitwise_xor, (0,)), b) == ["reduce_xor"]
    i = (X * 10).astype(np.int32)
    assert _primitives(lambda x: lax.reduce(x, -1, lax.bitwise_and, (0,)), i) == ["reduce_and"]
    lowest = np.iinfo(np.int32).min
    f = lambda x: lax.reduce(x, lowest, lax.max, (1,))
    assert _primitives(f, i) == ["reduce_max"]
    np.testing.assert_array_equal(np.asarray(f(i)), i.max(1))
    # an int 0 is the identity of add for a float operand too
    np.testing.assert_allclose(np.asarray(lax.reduce(X, 0, lax.add, (0,))), X.sum(0), rtol=1e-5)


def test_non_identity_init_or_wrapped_op_is_generic():
    assert _primitives(lambda x: lax.reduce(x, 1.0, lax.add, (0,)), X) == ["reduce"]
    assert _primitives(lambda x: lax.reduce(x, 0.0, lambda a, b: a + b, (0,)), X) == ["reduce"]
    big = np.finfo(np.float32).max  # not the identity of min: +inf is
    assert _primitives(lambda x: lax.reduce(x, big, lax.min, (0,)), X) == ["reduce"]
    # a traced init value is not known to be the identity
    assert _primitives(lambda x, i: lax.reduce(x, i, lax.add, (0,)), X, np.float32(0)) == ["reduce"]
    out = lax.reduce(X, 1.0, lax.add, (0,))  # XLA adds the init value once here
    np.testing.assert_allclose(np.asarray(out), X.sum(0) + 1.0, rtol=1e-5)


# --- the generic primitive ---------------------------------------------------------------------
def test_logaddexp_reducer_matches_logsumexp():
    f = lambda x: lax.reduce(x, -np.inf, _logaddexp, (0, 2))
    ref = logsumexp(X.astype(np.float64), axis=(0, 2))
    np.testing.assert_allclose(np.asarray(f(X)), ref, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(plax.jit(f)(X)), ref, rtol=1e-5)
    jaxpr = plax.make_jaxpr(f)(X)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns] == ["reduce"]
    text = str(jaxpr)
    assert "dimensions=(0, 2)" in text and "computation=<function _logaddexp" in text
    assert "jaxpr={ lambda ; a:f32[] b:f32[]." in text


def test_generic_sum_and_product():
    f = lambda x: lax.reduce(x, 0.0, lambda a, b: a + b, (1,))
    np.testing.assert_allclose(np.asarray(f(X)), X.sum(1), rtol=1e-5)
    g = lambda x: lax.reduce(x, 1.0, lambda a, b: a * b, (0, 1, 2))
    np.testing.assert_allclose(np.asarray(g(X[:1, :2])), np.prod(X[:1, :2]), rtol=1e-5)


def test_variadic_argmax_pair():
    idx = np.broadcast_to(np.arange(5, dtype=np.int32), X.shape)
    vals, where = lax.reduce((X, idx), (-np.inf, np.int32(0)), _argmax_pair, (2,))
    np.testing.assert_array_equal(np.asarray(vals), X.max(2))
    np.testing.assert_array_equal(np.asarray(where), X.argmax(2))
    assert np.asarray(where).dtype == np.int32
    # ties go to the lower index
    t = np.array([[1.0, 3.0, 3.0, 0.0]], np.float32)
    ti = np.arange(4, dtype=np.int32)[None]
    _, w = plax.jit(lambda t, i: lax.reduce((t, i), (-np.inf, np.int32(0)), _argmax_pair, (1,)))(t, ti)
    np.testing.assert_array_equal(np.asarray(w), [1])


def test_pytree_operands():
    ops = {"s": X, "m": X}
    out = lax.reduce(ops, {"s": 0.0, "m": -np.inf},
                     lambda a, b: {"s": a["s"] + b["s"], "m": lax.max(a["m"], b["m"])}, (0,))
    np.testing.assert_allclose(np.asarray(out["s"]), X.sum(0), rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(out["m"]), X.max(0))
    (single,) = lax.reduce([X], [0.0], lambda a, b: [a[0] + b[0]], (2,))
    np.testing.assert_allclose(np.asarray(single), X.sum(2), rtol=1e-5)


def test_empty_reductions_and_no_dimensions():
    out = lax.reduce(np.zeros((0, 3), np.float32), -np.inf, _logaddexp, (0,))
    np.testing.assert_array_equal(np.asarray(out), np.full(3, -np.inf, np.float32))
    same = lax.reduce(X, 0.0, _logaddexp, ())
    np.testing.assert_array_equal(np.asarray(same), X)


def test_constants_in_the_computation():
    scale = np.float32(2)
    f = lambda x: lax.reduce(x, 0.0, lambda a, b: a + b * scale, (0,))
    np.testing.assert_allclose(np.asarray(f(X)), 2 * X.sum(0), rtol=1e-5)
    g = lambda x: lax.reduce(x, 0.0, lambda a, b: a + b * jnp.asarray([3.0])[0], (0,))
    np.testing.assert_allclose(np.asarray(plax.jit(g)(X)), 3 * X.sum(0), rtol=1e-5)
    # a Python scalar result takes the operand type
    h = lambda x: lax.reduce(x, 0.0, lambda a, b: 1.0, (0,))
    np.testing.assert_array_equal(np.asarray(h(X)), np.ones((4, 5), np.float32))


def test_jitted_computation():
    f = lambda x: lax.reduce(x, -np.inf, plax.jit(_logaddexp), (1,))
    np.testing.assert_allclose(np.asarray(f(X)), logsumexp(X.astype(np.float64), axis=1), rtol=1e-5)


# --- vmap -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("in_axis", [0, 1, 2])
def test_vmap(in_axis):
    f = lambda x: lax.reduce(x, -np.inf, _logaddexp, (1,))
    out = plax.vmap(f, in_axes=in_axis)(X)
    ref = np.stack([logsumexp(np.take(X, i, in_axis).astype(np.float64), axis=1)
                    for i in range(X.shape[in_axis])])
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5)


def test_vmap_variadic_with_an_unbatched_operand():
    idx = np.arange(5, dtype=np.int32)
    f = lambda x: lax.reduce((x, idx), (-np.inf, np.int32(0)), _argmax_pair, (0,))
    vals, where = plax.vmap(f)(X[0])
    np.testing.assert_array_equal(np.asarray(vals), X[0].max(1))
    np.testing.assert_array_equal(np.asarray(where), X[0].argmax(1))


def test_vmap_of_batched_init_values_is_not_supported():
    f = lambda x, i: lax.reduce(x, i, _logaddexp, (0,))
    with pytest.raises(NotImplementedError, match="batched init_values"):
        plax.vmap(f)(X, np.zeros(3, np.float32))


# --- derivatives -------------------------------------------------------------------------------------
def test_grad_of_logaddexp_reducer_is_softmax():
    x = X[0]
    g = plax.grad(lambda x: lax.reduce(x, -np.inf, _logaddexp, (0, 1)))(x)
    e = np.exp(x.astype(np.float64) - x.max())
    np.testing.assert_allclose(np.asarray(g), e / e.sum(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dims", [(0,), (1,), (0, 1)])
def test_check_grads_generic(dims):
    x = X[:, :, 0]  # (3, 4): odd and even reduced sizes
    check_grads(lambda x: lax.reduce(x, -np.inf, _logaddexp, dims), (x,), order=2,
                modes=("fwd", "rev"), atol=2e-2, rtol=2e-2)
    check_grads(lambda x: lax.reduce(x, 1.0, lambda a, b: a * b, dims), (x,), order=1,
                modes=("fwd", "rev"), atol=2e-2, rtol=2e-2)


def test_grad_of_variadic_reducer():
    idx = np.broadcast_to(np.arange(5, dtype=np.int32), X.shape)
    f = lambda x: lax.reduce((x, idx), (-np.inf, np.int32(0)), _argmax_pair, (2,))[0].sum()
    g = plax.grad(f)(X)
    ref = (X == X.max(2, keepdims=True)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(g), ref)


def test_jit_of_grad_and_vmap_of_grad():
    f = lambda x: lax.reduce(x, -np.inf, _logaddexp, (0,))
    g = plax.jit(plax.vmap(plax.grad(f)))(X[0])
    e = np.exp(X[0].astype(np.float64))
    np.testing.assert_allclose(np.asarray(g), e / e.sum(1, keepdims=True), rtol=1e-4, atol=1e-6)


def test_differentiating_the_init_value_is_not_implemented():
    with pytest.raises(NotImplementedError, match="non-zero tangents for its initial values"):
        plax.grad(lambda i: lax.reduce(X, i, _logaddexp, (0, 1, 2)))(0.0)


# --- errors ---------------------------------------------------------------------------------------------
def test_errors():
    with pytest.raises(ValueError, match="same tree structure as init_values"):
        lax.reduce((X, X), 0.0, lambda a, b: a, (0,))
    with pytest.raises(ValueError, match=r"non-scalar initial value: \[\(3,\)\]"):
        lax.reduce(X, np.zeros(3, np.float32), _logaddexp, (0,))
    with pytest.raises(TypeError, match="operand dtypes should match corresponding initial value"):
        lax.reduce(X, np.int32(0), _logaddexp, (0,))
    with pytest.raises(TypeError, match="operand dtypes should match"):
        lax.reduce(X.astype(np.float16), 0.0, _logaddexp, (0,))  # a weak f32 init
    with pytest.raises(ValueError, match=r"reduction axes \(3,\) contain out-of-bounds"):
        lax.reduce(X, -np.inf, _logaddexp, (3,))
    with pytest.raises(ValueError, match="duplicate value in reduction axes"):
        lax.reduce(X, -np.inf, _logaddexp, (0, 0))
    with pytest.raises(ValueError, match="operands must all have the same shape"):
        lax.reduce((X, X[0]), (0.0, 0.0), lambda a, b: (a[0] + b[0], a[1] + b[1]), (0,))
    with pytest.raises(ValueError, match="must return a value of the operands' structure"):
        lax.reduce(X, 0.0, lambda a, b: (a, b), (0,))
    with pytest.raises(ValueError, match="must return scalars of the operand types"):
        lax.reduce(X, 0.0, lambda a, b: lax.convert_element_type(a + b, np.int32), (0,))


def test_closing_over_a_tracer_is_not_implemented():
    f = plax.jit(lambda x, c: lax.reduce(x, 0.0, lambda a, b: a + b * c, (0,)))
    with pytest.raises(NotImplementedError, match="Reduction computations can't close over Tracers"):
        f(X, 2.0)
