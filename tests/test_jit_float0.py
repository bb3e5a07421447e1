"""float0 values (tangents of integers and booleans) through jit.

As in JAX: XLA holds them as booleans, jitted functions take and return them, and results
of type float0 come back as NumPy float0 zeros (they carry no data).
"""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.runtime.array import ArrayImpl

f32, i32 = np.float32, np.int32
float0 = plax.dtypes.float0


def is_float0_zeros(v, shape):
    assert type(v) is np.ndarray and v.dtype == float0 and v.shape == shape


def test_jit_of_jvp_with_a_bool_output():
    x = jnp.arange(5.)
    p, t = plax.jit(lambda p, t: plax.jvp(lambda a: a < 0.3, (p,), (t,)))(x, x)
    assert type(p) is ArrayImpl and p.dtype == np.bool_
    np.testing.assert_array_equal(p, [True, False, False, False, False])
    is_float0_zeros(t, (5,))


def test_float0_arguments():
    z = np.zeros(3, float0)
    is_float0_zeros(plax.jit(lambda a: a)(z), (3,))
    a, b = plax.jit(lambda a, b: (a, b * 2))(z, 1.)
    is_float0_zeros(a, (3,))
    assert float(b) == 2.
    is_float0_zeros(plax.jit(lambda a: plax.lax.broadcast_in_dim(a, (2, 3), (1,)))(z), (2, 3))
    # An int primal with a float0 tangent, inside jit.
    out, tan = plax.jit(lambda p, t: plax.jvp(lambda q: q * 2, (p,), (t,)))(
        np.arange(3, dtype=i32), z)
    np.testing.assert_array_equal(out, [0, 2, 4])
    is_float0_zeros(tan, (3,))


def test_float0_supports_no_arithmetic():
    z = np.zeros(3, float0)
    with pytest.raises(TypeError, match="Called add with a float0 array"):
        plax.jit(lambda a: a + 1)(z)
    with pytest.raises(TypeError, match="float0s do not support any operations by design"):
        plax.lax.add(z, z)


def test_jit_of_linearize_vjp_and_grad_with_integers():
    _, lin_t = plax.jit(lambda a, t: plax.linearize(lambda q: (q * 2, q > 0), a)[1](t))(1., 1.)
    is_float0_zeros(lin_t, ())

    def f(a, i):
        return a * i, i * 2, a > 0

    ga, gi = plax.jit(lambda a, i: plax.vjp(f, a, i)[1](
        (1., np.zeros((), float0), np.zeros((), float0))))(f32(1.), 3)
    assert float(ga) == 3.
    is_float0_zeros(gi, ())
    ga, gi = plax.jit(plax.grad(lambda a, i: a * i, argnums=(0, 1), allow_int=True))(f32(2.), 3)
    assert float(ga) == 3.
    is_float0_zeros(gi, ())


def test_nested_jits():
    x = jnp.arange(5.)
    (p, n), (tp, tn) = plax.jit(plax.jit(lambda p, t: plax.jvp(
        lambda a: (a < 0.3, i32(2) * a.astype(i32)), (p,), (t,))))(x, x)
    np.testing.assert_array_equal(n, [0, 2, 4, 6, 8])
    is_float0_zeros(tp, (5,))
    is_float0_zeros(tn, (5,))
    p, t = plax.jit(lambda p, t: plax.jvp(lambda a: plax.jit(lambda b: b < 0.3)(a), (p,), (t,)))(
        x, x)
    np.testing.assert_array_equal(p, [True, False, False, False, False])
    is_float0_zeros(t, (5,))


def test_vmap_of_jvp_under_jit():
    v = np.array([0.1, 1., 0.2], f32)
    p, t = plax.jit(plax.vmap(lambda p, t: plax.jvp(lambda a: a < 0.3, (p,), (t,))))(v, v)
    np.testing.assert_array_equal(p, [True, False, True])
    is_float0_zeros(t, (3,))


def test_make_jaxpr_lower_compile_and_eval_shape():
    x = jnp.arange(5.)
    f = lambda p, t: plax.jvp(lambda a: a < 0.3, (p,), (t,))  # noqa: E731
    jaxpr = plax.make_jaxpr(f)(x, x)
    assert [v.aval.dtype for v in jaxpr.jaxpr.outvars] == [np.bool_, float0]
    assert "float0[5]" in str(jaxpr)
    lowered = plax.jit(f).lower(x, x)
    assert "-> (tensor<5xi1>, tensor<5xi1>)" in lowered.as_text()
    p, t = lowered.compile()(x, x)
    np.testing.assert_array_equal(p, [True, False, False, False, False])
    is_float0_zeros(t, (5,))
    shapes = plax.eval_shape(f, x, x)
    assert (shapes[1].shape, shapes[1].dtype) == ((5,), float0)
    s = plax.ShapeDtypeStruct((3,), float0)
    assert s.dtype == float0
    assert "@main(%arg0: tensor<3xi1>) -> (tensor<3xi1>)" in plax.jit(lambda a: a).lower(s).as_text()
    assert "a:float0[3]" in str(plax.make_jaxpr(lambda a: a)(s))


def test_device_put_leaves_float0_on_the_host():
    z = np.zeros(3, float0)
    assert plax.device_put(z) is z
