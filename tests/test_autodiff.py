"""Differentiation entry points (issue 4, items 1-4): jvp, linearize, linear_transpose, vjp,
grad/value_and_grad, jacfwd/jacrev/hessian, their compositions, and dead-code-free grad jaxprs.

Values are checked against closed forms; error messages against JAX's key phrases.
"""
import gc

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import tree_util
from plax.core.jaxpr import Literal
from plax.test_util import check_grads

f32, f64, i32, c64 = np.float32, np.float64, np.int32, np.complex64
float0 = plax.dtypes.float0


def close(a, b, **kw):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=kw.get("rtol", 1e-5),
                               atol=kw.get("atol", 1e-6))


def is_concrete(x):
    """A finished value (not a tracer of some transformation that leaked out)."""
    return not isinstance(x, plax.core.trace.Tracer)


# --- jvp ------------------------------------------------------------------------------------
def test_jvp_pytrees():
    def f(d, t):
        return {"s": jnp.sin(d["x"]) * t[0], "p": (d["y"] * t[1],)}
    d = {"x": np.array([0.5, 1.0], f32), "y": f32(3.)}
    t = (f32(2.), np.ones(2, f32))
    td = {"x": np.array([1., -1.], f32), "y": f32(0.5)}
    tt = (f32(0.25), np.array([2., 3.], f32))
    out, tan = plax.jvp(f, (d, t), (td, tt))
    assert tree_util.tree_structure(tan) == tree_util.tree_structure(out)
    close(out["s"], np.sin(d["x"]) * 2)
    close(tan["s"], np.cos(d["x"]) * td["x"] * 2 + np.sin(d["x"]) * 0.25)
    close(tan["p"][0], 0.5 * np.ones(2) + 3. * tt[1])


@pytest.mark.parametrize("primal, tangent, exc, match", [
    (f32(1.), np.float16(1.), TypeError, "dtypes must be equal"),
    (np.ones(3, f32), np.ones(2, f32), ValueError, "different primal and tangent shapes"),
    (i32(1), f32(1.), TypeError, "tangent dtype must be float0"),
])
def test_jvp_tangent_mismatch_errors(primal, tangent, exc, match):
    with pytest.raises(exc, match=match):
        plax.jvp(jnp.sin if primal.dtype != i32 else (lambda n: n), (primal,), (tangent,))


def test_jvp_structure_errors():
    with pytest.raises(TypeError, match="same tree structure"):
        plax.jvp(lambda a, b: a, (f32(1.), f32(2.)), (f32(1.),))
    with pytest.raises(TypeError, match="must be tuples or lists"):
        plax.jvp(jnp.sin, f32(1.), f32(1.))


def test_jvp_symbolic_zeros_and_constants():
    # Outputs that do not depend on the input get zero tangents of their own type.
    out, tan = plax.jvp(lambda x: (jnp.ones(3, f32), x * 2., 3.0), (f32(1.),), (f32(1.),))
    assert tan[0].shape == (3,) and tan[0].dtype == f32
    assert np.all(np.asarray(tan[0]) == 0)
    close(tan[1], 2.)
    assert np.asarray(tan[2]) == 0
    # A zero tangent for an input whose other tangent is not zero.
    _, t = plax.jvp(lambda x, y: x * y, (f32(2.), f32(3.)), (f32(1.), f32(0.)))
    close(t, 3.)


def test_jvp_integer_inputs_take_float0():
    out, tan = plax.jvp(lambda x, n: x * n, (f32(2.), 3), (f32(1.), np.zeros((), float0)))
    close(out, 6.)
    close(tan, 3.)
    # Integer outputs have float0 tangents.
    _, (tx, tn) = plax.jvp(lambda x: (x * 2, jnp.round(x).astype(jnp.int32)), (f32(2.),),
                           (f32(1.),))
    close(tx, 2.)
    assert tn.dtype == float0 and tn.shape == ()


def test_jvp_has_aux_returns_values_not_tracers():
    out, tan, aux = plax.jvp(lambda x: (x * 2, {"a": x + 1, "s": "tag"}), (f32(1.),), (f32(1.),),
                             has_aux=True)
    close(out, 2.)
    close(tan, 2.)
    assert is_concrete(aux["a"]) and aux["s"] == "tag"
    close(aux["a"], 2.)


def test_jvp_of_jvp_second_derivative():
    def df(x):
        return plax.jvp(jnp.sin, (x,), (f32(1.),))[1]
    _, d2 = plax.jvp(df, (f32(0.7),), (f32(1.),))
    close(d2, -np.sin(0.7))


# --- linearize ------------------------------------------------------------------------------
def test_linearize_does_not_rerun_the_function():
    calls = []

    def f(x, y):
        calls.append(1)
        return {"u": jnp.sin(x) * y, "v": x * x}
    x, y = np.array([0.1, 0.2, 0.3], f32), f32(2.)
    out, f_jvp = plax.linearize(f, x, y)
    assert len(calls) == 1
    close(out["u"], np.sin(x) * 2)
    for k in range(4):
        tx, ty = np.full(3, k, f32), f32(k / 2)
        t = f_jvp(tx, ty)
        close(t["u"], np.cos(x) * tx * 2 + np.sin(x) * ty)
        close(t["v"], 2 * x * tx)
    assert len(calls) == 1


def test_linearize_has_aux_int_inputs_and_errors():
    out, f_jvp, aux = plax.linearize(lambda x, n: (x * n, x + 1), f32(2.), 3, has_aux=True)
    close(out, 6.)
    assert is_concrete(aux)
    close(aux, 3.)
    close(f_jvp(f32(1.), np.zeros((), float0)), 3.)
    with pytest.raises(ValueError, match="inconsistent with the original primal values"):
        f_jvp(np.ones(3, f32), np.zeros((), float0))


def test_linearize_under_jit():
    @plax.jit
    def g(x, t):
        return plax.linearize(lambda v: v * jnp.sin(v), x)[1](t)
    x, t = f32(0.5), f32(2.)
    close(g(x, t), (np.sin(0.5) + 0.5 * np.cos(0.5)) * 2)


# --- linear_transpose -----------------------------------------------------------------------
def test_linear_transpose_matrix_and_pytrees():
    a = np.arange(6, dtype=f32).reshape(2, 3)
    ft = plax.linear_transpose(lambda x: jnp.dot(a, x), np.zeros(3, f32))
    ct = np.array([1., -2.], f32)
    (res,) = ft(ct)
    close(res, a.T @ ct)

    def g(d):
        return (d["a"] * 2, jnp.sum(d["b"]))
    gt = plax.linear_transpose(g, {"a": f32(1.), "b": np.ones(3, f32)})
    (r,) = gt((f32(1.), f32(5.)))
    close(r["a"], 2.)
    close(r["b"], [5., 5., 5.])


def test_linear_transpose_dtypes_and_specs():
    # Results take the primals' dtypes.
    (r,) = plax.linear_transpose(lambda x: x.astype(jnp.float16), np.ones(2, f32))(
        np.ones(2, np.float16))
    assert r.dtype == f32
    # Primals may be shape/dtype specs; unused inputs get zero cotangents.
    spec = plax.ShapeDtypeStruct((2,), jnp.float32)
    r1, r2 = plax.linear_transpose(lambda x, y: x * 3., spec, spec)(np.ones(2, f32))
    close(r1, [3., 3.])
    close(r2, [0., 0.])
    assert r2.dtype == f32
    # integer -> integer is allowed.
    (ri,) = plax.linear_transpose(lambda x: x * 2, i32(1))(i32(3))
    assert np.asarray(ri) == 6


@pytest.mark.parametrize("fun, primals", [
    (lambda x: x * 2., (1,)),
    (lambda x, n: x * 2., (f32(1.), 1)),
    (lambda x: x.astype(jnp.int32), (f32(1.),)),
])
def test_linear_transpose_rejects_mixed_integer_types(fun, primals):
    with pytest.raises(TypeError, match="linear_transpose only supports"):
        plax.linear_transpose(fun, *primals)


def test_linear_transpose_errors():
    ft = plax.linear_transpose(lambda x: x * 2, np.ones(3, f32))
    with pytest.raises(TypeError, match="cotangent type does not match function output"):
        ft(np.ones(2, f32))
    with pytest.raises(TypeError, match="cotangent type does not match function output"):
        ft(np.ones(3, np.float16))
    with pytest.raises(TypeError, match="cotangent tree does not match"):
        plax.linear_transpose(lambda x: (x, x), f32(1.))(f32(1.))
    with pytest.raises(ValueError, match="not linear"):
        plax.linear_transpose(lambda x: x * x, f32(1.))(f32(1.))
    with pytest.raises(NotImplementedError, match="Transpose rule"):
        plax.linear_transpose(jnp.sin, f32(1.))(f32(1.))


# --- vjp ------------------------------------------------------------------------------------
def test_vjp_pytrees_called_twice_and_once_traced():
    calls = []

    def f(x, d):
        calls.append(1)
        return (x * d["w"], {"s": jnp.sum(x)})
    x, d = np.array([1., 2.], f32), {"w": np.array([3., 4.], f32)}
    out, f_vjp = plax.vjp(f, x, d)
    for ct0, ct1 in [(np.ones(2, f32), f32(1.)), (np.array([2., -1.], f32), f32(0.))]:
        gx, gd = f_vjp((ct0, {"s": ct1}))
        close(gx, ct0 * d["w"] + ct1)
        close(gd["w"], ct0 * x)
    assert len(calls) == 1


def test_vjp_cotangent_validation():
    _, f_vjp = plax.vjp(lambda x: (x, x * 2), np.ones(3, f32))
    with pytest.raises(ValueError, match="unexpected tree structure"):
        f_vjp(np.ones(3, f32))
    with pytest.raises(ValueError, match="unexpected type"):
        f_vjp((np.ones(2, f32), np.ones(3, f32)))
    with pytest.raises(ValueError, match="unexpected type"):
        f_vjp((np.ones(3, i32), np.ones(3, f32)))


def test_vjp_integer_inputs_and_outputs():
    out, f_vjp = plax.vjp(lambda x, n: (x * n, n), f32(2.), 3)
    gx, gn = f_vjp((f32(1.), np.zeros((), float0)))
    close(gx, 3.)
    assert gn.dtype == float0


def test_vjp_has_aux_and_complex():
    out, f_vjp, aux = plax.vjp(lambda x: (x * 2, {"a": x + 1}), f32(1.), has_aux=True)
    assert is_concrete(aux["a"])
    close(aux["a"], 2.)
    z = c64(1 + 2j)
    (g,) = plax.vjp(lambda z: z * z, z)[1](c64(1))
    close(g, 2 * z)


# --- grad / value_and_grad ------------------------------------------------------------------
def f3(x, y, z):
    return jnp.sum(x * x) * y + jnp.sin(z)


def test_grad_argnums():
    x, y, z = np.array([1., 2.], f32), f32(3.), f32(0.5)
    close(plax.grad(f3)(x, y, z), 2 * x * 3)
    gy, gz = plax.grad(f3, argnums=(1, 2))(x, y, z)
    close(gy, 5.)
    close(gz, np.cos(0.5))
    close(plax.grad(f3, argnums=-1)(x, y, z), np.cos(0.5))
    (g0,) = plax.grad(f3, argnums=(0,))(x, y, z)
    close(g0, 2 * x * 3)
    with pytest.raises(TypeError, match="argnums"):
        plax.grad(f3, argnums=3)(x, y, z)


def test_value_and_grad_has_aux_kwargs():
    def loss(w, b, scale=1.0):
        r = jnp.sum(w * w) * scale + b
        return r, {"r": r, "note": "hi"}
    w = np.array([1., 2.], f32)
    (val, aux), g = plax.value_and_grad(loss, has_aux=True)(w, f32(1.), scale=2.0)
    close(val, 11.)
    assert is_concrete(aux["r"]) and aux["note"] == "hi"
    close(g, 4 * w)
    g, aux = plax.grad(loss, has_aux=True)(w, f32(1.))
    close(g, 2 * w)
    close(aux["r"], 6.)
    with pytest.raises(TypeError, match="two-element tuple"):
        plax.grad(lambda x: x, has_aux=True)(f32(1.))


def test_grad_pytrees():
    params = {"w": np.array([1., 2.], f32), "layers": (f32(3.), [f32(4.)])}

    def loss(p):
        return jnp.sum(p["w"] ** 2) + p["layers"][0] * p["layers"][1][0]
    g = plax.grad(loss)(params)
    assert tree_util.tree_structure(g) == tree_util.tree_structure(params)
    close(g["w"], 2 * params["w"])
    close(g["layers"][0], 4.)
    close(g["layers"][1][0], 3.)


def test_grad_holomorphic_and_complex_inputs():
    z = c64(1 + 2j)
    close(plax.grad(lambda z: z * z, holomorphic=True)(z), 2 * z)
    # Real-valued function of a complex input: JAX's convention (conjugate of the
    # Wirtinger derivative, times 2): d|z|^2 -> 2 conj(z).
    close(plax.grad(lambda z: jnp.real(z * jnp.conj(z)))(z), 2 * np.conj(z))
    with pytest.raises(TypeError, match="holomorphic=True requires inputs with complex"):
        plax.grad(lambda x: x, holomorphic=True)(f32(1.))
    with pytest.raises(TypeError, match="holomorphic=True requires outputs with complex"):
        plax.grad(lambda z: jnp.real(z), holomorphic=True)(z)


def test_grad_allow_int():
    gx, gn = plax.grad(lambda x, n: x * n, argnums=(0, 1), allow_int=True)(f32(3.), 2)
    close(gx, 2.)
    assert gn.dtype == float0 and gn.shape == ()
    with pytest.raises(TypeError, match="requires real- or complex-valued inputs"):
        plax.grad(lambda x: x * 2.)(1)


@pytest.mark.parametrize("fun, arg, match", [
    (lambda x: x, np.ones(3, f32), "Gradient only defined for scalar-output functions"),
    (lambda x: (x, x), f32(1.), "Gradient only defined for scalar-output functions"),
    (lambda x: jnp.int32(1), f32(1.), "grad requires real-valued outputs"),
    (lambda x: x * 1j, f32(1.), "grad requires real-valued outputs"),
])
def test_grad_output_errors(fun, arg, match):
    with pytest.raises(TypeError, match=match):
        plax.grad(fun)(arg)


def test_grad_weak_and_constant():
    g = plax.grad(lambda x: x * x)(3.)
    close(g, 6.)
    assert g.dtype == f32
    assert plax.typeof(g).weak_type  # as in JAX: a weak input gets a weak gradient here
    close(plax.grad(lambda x: 3.0 + 0 * x)(f32(1.)), 0.)


# --- Jacobians ------------------------------------------------------------------------------
A = np.array([[1., 2., 0.], [0., -1., 3.]], f32)


def mat_fun(x):
    return jnp.dot(A, jnp.tanh(x))


@pytest.mark.parametrize("jac", [plax.jacfwd, plax.jacrev])
def test_jacobian_values(jac):
    x = np.array([0.1, -0.5, 0.3], f32)
    J = jac(mat_fun)(x)
    assert J.shape == (2, 3)
    close(J, A * (1 - np.tanh(x) ** 2)[None, :])


@pytest.mark.parametrize("jac", [plax.jacfwd, plax.jacrev])
def test_jacobian_pytree_layout(jac):
    def f(d):
        return {"a": d["x"] * d["y"][0], "b": (d["y"] * 2,)}
    d = {"x": np.ones(2, f32), "y": np.arange(3, dtype=f32)}
    J = jac(f)(d)
    shapes = tree_util.tree_map(lambda v: tuple(v.shape), J)
    assert shapes == {"a": {"x": (2, 2), "y": (2, 3)}, "b": ({"x": (3, 2), "y": (3, 3)},)}
    close(J["a"]["x"], np.eye(2) * 0.)
    close(J["a"]["y"], np.array([[1., 0, 0], [1., 0, 0]]))
    close(J["b"][0]["y"], 2 * np.eye(3))
    # argnums tuples: one block per argument.
    Jxy = jac(lambda x, y: x[:, None] * y, argnums=(0, 1))(np.ones(2, f32), np.arange(3., dtype=f32))
    assert [tuple(b.shape) for b in Jxy] == [(2, 3, 2), (2, 3, 3)]


@pytest.mark.parametrize("jac", [plax.jacfwd, plax.jacrev])
def test_jacobian_has_aux_and_holomorphic(jac):
    x = np.array([1., 2.], f32)
    J, aux = jac(lambda x: (x * 2, x + 1), has_aux=True)(x)
    close(J, 2 * np.eye(2))
    assert is_concrete(aux)
    close(aux, x + 1)
    z = np.array([1 + 1j, 2j], c64)
    close(jac(lambda z: z * z, holomorphic=True)(z), np.diag(2 * z))
    with pytest.raises(TypeError, match="requires outputs with complex dtype"):
        jac(lambda z: jnp.real(z), holomorphic=True)(z)


def test_jacobian_dtype_errors_and_allow_int():
    with pytest.raises(TypeError, match="jacfwd requires real-valued inputs"):
        plax.jacfwd(lambda x: x)(1)
    with pytest.raises(TypeError, match="jacrev requires real- or complex-valued inputs"):
        plax.jacrev(lambda x: x)(1)
    with pytest.raises(TypeError, match="jacrev requires real-valued outputs"):
        plax.jacrev(lambda x: x * 1j)(f32(1.))
    with pytest.raises(TypeError, match="jacrev requires real-valued outputs"):
        plax.jacrev(lambda x: x)(c64(1.))
    jx, jn = plax.jacrev(lambda x, n: x * n, argnums=(0, 1), allow_int=True)(f32(2.), 3)
    close(jx, 3.)
    assert np.asarray(jn).dtype == i32 and np.asarray(jn) == 0
    jx, jn = plax.jacfwd(lambda x: (x * 2, jnp.int32(3)))(f32(3.))
    close(jx, 2.)
    assert np.asarray(jn).dtype == i32



class _ArrayNode:  # the "Custom pytree nodes" doc page's node: unflatten calls jnp.asarray
    def __init__(self, a):
        self.a = jnp.asarray(a)


plax.tree_util.register_pytree_node(_ArrayNode, lambda t: ((t.a,), None),
                                    lambda _, children: _ArrayNode(*children))


@pytest.mark.parametrize("jac", [plax.jacobian, plax.jacfwd, plax.jacrev, plax.hessian])
def test_jacobian_input_checks_rebuild_custom_nodes_around_none_as_jax(jac):
    # JAX checks the inputs with tree_map, so the node is rebuilt around None: its
    # jnp.asarray(None) raises JAX's ValueError before anything is differentiated
    with pytest.raises(ValueError, match="None is not a valid value for jnp.array"):
        jac(lambda x: x)(_ArrayNode(jnp.arange(5.0)))
    with pytest.raises(ValueError, match="None is not a valid value for jnp.array"):
        jnp.asarray(None)
    assert plax.jacobian.__name__ == "jacobian"

def test_hessian():
    def f(x, y):
        return jnp.sum(x ** 3 * y)
    x, y = np.array([1., 2.], f32), f32(2.)
    close(plax.hessian(f)(x, y), np.diag(6 * x * y))
    H = plax.hessian(f, argnums=(0, 1))(x, y)
    shapes = tree_util.tree_map(lambda v: tuple(v.shape), H)
    assert shapes == (((2, 2), (2,)), ((2,), ()))
    close(H[0][1], 3 * x ** 2)
    close(H[1][0], 3 * x ** 2)
    close(H[1][1], 0.)
    Hx, aux = plax.hessian(lambda x: (jnp.sum(x ** 3), x), has_aux=True)(x)
    close(Hx, np.diag(6 * x))
    assert is_concrete(aux)


# --- compositions ---------------------------------------------------------------------------
def test_grad_of_grad():
    x = f32(0.7)
    close(plax.grad(plax.grad(jnp.sin))(x), -np.sin(x))
    close(plax.grad(plax.grad(plax.grad(jnp.sin)))(x), -np.cos(x))
    close(plax.grad(plax.grad(lambda x: x ** 4))(f32(2.)), 48.)


def test_jit_and_grad_compose():
    def f(x):
        return jnp.sum(jnp.tanh(x) * x)
    x = np.array([0.1, -0.4, 0.9], f32)
    want = np.tanh(x) + x * (1 - np.tanh(x) ** 2)
    close(plax.jit(plax.grad(f))(x), want)
    close(plax.grad(plax.jit(f))(x), want)
    close(plax.jit(plax.grad(plax.jit(f)))(x), want)
    close(plax.grad(plax.grad(plax.jit(jnp.sin)))(f32(0.3)), -np.sin(0.3))


def test_jacfwd_of_jacrev():
    def f(x):
        return jnp.sum(jnp.sin(x) * x[::-1])
    x = np.array([0.2, 0.5, -0.3], f32)
    H = plax.jacfwd(plax.jacrev(f))(x)
    n = len(x)
    want = np.zeros((n, n))
    for i in range(n):
        want[i, i] += -np.sin(x[i]) * x[n - 1 - i]
        want[i, n - 1 - i] += np.cos(x[i])
        want[n - 1 - i, i] += np.cos(x[i])
    close(H, want, atol=1e-5)
    close(plax.hessian(f)(x), want, atol=1e-5)


def test_no_perturbation_confusion():
    assert float(plax.grad(lambda x: plax.grad(lambda y: x * y)(x))(2.)) == 1.0
    # Same with forward mode inside reverse and the other way round.
    close(plax.grad(lambda x: plax.jvp(lambda y: x * y, (x,), (1.,))[1])(2.), 1.0)
    close(plax.jvp(lambda x: plax.grad(lambda y: x * y)(x), (2.,), (1.,))[1], 1.0)
    # A closure over an outer jit tracer.
    close(plax.jit(lambda x: plax.grad(lambda y: jnp.sin(x * y))(x))(f32(0.5)),
          0.5 * np.cos(0.25))


def test_float64_with_x64():
    with plax.enable_x64():
        x = np.float64(0.3)
        g = plax.grad(lambda x: jnp.exp(jnp.sin(x)))(x)
        assert g.dtype == f64
        np.testing.assert_allclose(float(g), np.exp(np.sin(0.3)) * np.cos(0.3), rtol=1e-13)
        H = plax.hessian(lambda v: jnp.sum(v ** 3))(np.array([1., 2.], f64))
        assert H.dtype == f64
        np.testing.assert_allclose(np.asarray(H), np.diag([6., 12.]), rtol=1e-13)
        check_grads(lambda v: jnp.sum(jnp.tanh(v) * v), (np.array([0.1, 0.4], f64),), order=2)


def test_check_grads_on_a_composite_function():
    def f(x, d):
        return jnp.sum(jnp.sin(x) * d["w"]) + jnp.dot(x, d["w"]) ** 2
    check_grads(f, (np.array([0.1, 0.2], f32), {"w": np.array([0.5, -1.], f32)}), order=2)


def test_check_grads_takes_per_dtype_tolerance_dicts():
    # As JAX's: atol/rtol may map dtypes (types, dtypes or names) to tolerances; each compared
    # value takes its dtype's entry, and a dtype left out keeps the default.
    f = lambda x: jnp.sin(x) * x  # noqa: E731
    x = np.array([0.3, 1.2], f32)
    check_grads(f, (x,), 2, atol={np.float32: 1e-2, np.float64: 1e-5}, rtol={jnp.float32: 1e-2})
    check_grads(f, (x,), 1, atol={np.dtype("float32"): 1e-2}, rtol={"float32": 1e-2})
    check_grads(f, (x,), 1, atol={np.float64: 1e-12}, rtol={np.float64: 1e-12})  # f32: default
    # A tight entry for the values' dtype is applied: a coarse step then fails the check.
    with pytest.raises(AssertionError, match="JVP does not match finite differences"):
        check_grads(lambda v: v ** 3, (x,), 1, modes=("fwd",), atol={np.float32: 1e-4},
                    rtol={np.float32: 1e-4}, eps=0.5)
    with pytest.raises(AssertionError, match="VJP does not agree with JVP"):
        check_grads(lambda v: v ** 3, (x,), 1, modes=("rev",), atol={f32: 1e-4},
                    rtol={f32: 1e-4}, eps=2.0)
    with pytest.raises(TypeError, match="eps must be a number"):
        check_grads(f, (x,), 1, eps={np.float32: 1e-3})


# --- dead code in the jaxpr of grad ---------------------------------------------------------
def dead_equations(jaxpr):
    """Equations (at any nesting depth) none of whose outputs is read later."""
    used = {v for v in jaxpr.outvars if not isinstance(v, Literal)}
    dead = []
    for e in reversed(jaxpr.eqns):
        if not any(v in used for v in e.outvars):
            dead.append(e)
        used.update(v for v in e.invars if not isinstance(v, Literal))
        for p in e.params.values():
            inner = getattr(p, "jaxpr", None)
            if inner is not None and hasattr(inner, "eqns"):
                dead += dead_equations(inner)
    return dead


def test_grad_jaxpr_has_no_dead_equations():
    def f(x):
        return jnp.sin(x) * 2
    closed = plax.make_jaxpr(plax.grad(f))(1.)
    assert dead_equations(closed.jaxpr) == []
    assert "_:" not in str(closed) and "sin" not in str(closed)
    close(plax.grad(f)(f32(1.)), 2 * np.cos(1.))
    # Larger: a small MLP loss, through jit, and grad of grad.
    w = np.ones((3, 2), f32)

    def loss(w, x):
        return jnp.sum(jnp.tanh(jnp.dot(x, w)) ** 2)
    batch = np.ones((4, 3), f32)
    for fn, args in [(plax.grad(loss), (w, batch)), (plax.jit(plax.grad(loss)), (w, batch)),
                     (plax.grad(plax.grad(jnp.sin)), (f32(1.),))]:
        assert dead_equations(plax.make_jaxpr(fn)(*args).jaxpr) == []
    # value_and_grad keeps the value's equations; plain functions keep printing dead code.
    vg = plax.make_jaxpr(plax.value_and_grad(f))(1.)
    assert "sin" in str(vg) and dead_equations(vg.jaxpr) == []
    assert "_:" in str(plax.make_jaxpr(lambda x: (jnp.sin(x), x)[1])(1.))


def test_grad_under_jit_keeps_surrounding_code():
    def g(x):
        y = jnp.cos(x)            # staged before grad: must stay
        dg = plax.grad(lambda v: jnp.sin(v) * y)(x)
        return dg + y
    closed = plax.make_jaxpr(g)(f32(0.4))
    assert dead_equations(closed.jaxpr) == []
    close(plax.jit(g)(f32(0.4)), np.cos(0.4) ** 2 + np.cos(0.4))


def test_grad_drops_the_constants_only_its_dead_code_reads():
    c_value = np.arange(3, dtype=f32) + 5   # read only by the value, which grad drops
    c_grad = np.full(3, 2., f32)            # read by the gradient

    def f(x):
        return jnp.sum(x * c_grad) + jnp.sum(jnp.sin(c_value))
    ones = np.ones(3, f32)
    closed = plax.make_jaxpr(plax.grad(f))(ones)
    assert len(closed.consts) == 1 and np.array_equal(closed.consts[0], c_grad), str(closed)

    def g(x):  # c_value is also read before grad runs: it stays
        y = jnp.sum(x * c_value)
        return plax.grad(f)(x) * y
    closed = plax.make_jaxpr(g)(ones)
    assert [np.asarray(c).tolist() for c in closed.consts] == [[5, 6, 7], [2, 2, 2]]
    assert dead_equations(closed.jaxpr) == []
    close(plax.jit(g)(ones), np.full(3, 2 * 18.))


def test_jacobians_trace_once_and_stage_no_dead_code():
    calls = []

    def f(x):
        calls.append(1)
        return jnp.sin(x) * 2
    x = np.array([0.1, 0.2, 0.3], f32)
    close(plax.jacfwd(f)(x), np.diag(2 * np.cos(x)))
    assert len(calls) == 1  # one linearization, not one jvp per input element
    close(plax.jacrev(f)(x), np.diag(2 * np.cos(x)))
    assert len(calls) == 2
    for fn in (plax.jacfwd(f), plax.jacrev(f), plax.hessian(lambda v: jnp.sum(f(v)))):
        closed = plax.make_jaxpr(fn)(x)
        assert dead_equations(closed.jaxpr) == [], str(closed)


# --- where the backward pass's equations come from -------------------------------------------
def _lines(jaxpr):
    return [(e.primitive.name, e.source_info.line) for e in jaxpr.eqns]


def test_transposed_ops_point_at_the_line_of_the_op_they_transpose():
    def f(x):
        y = jnp.sin(x)
        z = y * x
        return z * 3.0
    first = f.__code__.co_firstlineno
    closed = plax.make_jaxpr(plax.grad(f))(f32(1.))
    # As in JAX: the cotangent of z (line 3), of y and x through ``y * x`` (line 2), then
    # through sin, whose cotangent adds to x's (line 1).
    assert _lines(closed.jaxpr) == [("sin", first + 1), ("cos", first + 1), ("mul", first + 3),
                                    ("mul", first + 2), ("mul", first + 2), ("mul", first + 1),
                                    ("add", first + 1)]
    assert {e.source_info.file for e in closed.jaxpr.eqns} == {__file__}
    text = plax.jit(plax.grad(f)).lower(f32(1.)).as_text(debug_info=True)
    # (line and column of ``y * x``, as JAX's locations give them, under the transformations)
    assert text.count(f'loc("transpose(jvp())/mul"("{__file__}":{first + 2}:12))') == 2, text
    close(plax.grad(f)(f32(1.)), 3 * (np.sin(1.) + np.cos(1.)))


def test_custom_vjp_backward_ops_point_at_the_call():
    @plax.custom_vjp
    def f(x):
        return jnp.sin(x)
    f.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (c * g * 2.0,))

    def h(x):
        return jnp.exp(f(x))
    line = h.__code__.co_firstlineno + 1
    closed = plax.make_jaxpr(plax.grad(h))(f32(0.5))
    # JAX's lines: the rule's ops are the transposition of the custom_vjp call (h's line).
    assert _lines(closed.jaxpr)[-2:] == [("mul", line), ("mul", line)]
    close(plax.grad(h)(f32(0.5)), 2 * np.cos(0.5) * np.exp(np.sin(0.5)))


def test_a_failing_backward_pass_leaves_later_ops_their_own_line():
    @plax.custom_vjp
    def f(x):
        return x
    f.defvjp(lambda x: (x, None), lambda r, g: (g, g))  # one cotangent too many
    with pytest.raises(TypeError, match="Custom VJP bwd rule must produce"):
        plax.make_jaxpr(plax.grad(f))(f32(1.))

    def g(x):
        return jnp.cos(x)
    closed = plax.make_jaxpr(g)(f32(1.))
    assert _lines(closed.jaxpr) == [("cos", g.__code__.co_firstlineno + 1)]


def test_jvp_of_jit_reuses_its_callee_per_zero_pattern():
    from plax.runtime import jitted
    f = plax.jit(lambda x, y: x * 2 + y * 3)
    one = f32(1.)
    plax.jvp(f, (one, one), (one, one))
    gc.collect()  # (as below)
    n = len(jitted._executables)
    for _ in range(3):
        _, t = plax.jvp(f, (one, one), (one, f32(2.)))
        close(t, 8.)
    assert len(jitted._executables) == n  # no recompilation per call
    # Which tangents are symbolic zeros is part of the cache key.
    close(plax.grad(f, argnums=0)(one, one), 2.)
    close(plax.grad(f, argnums=1)(one, one), 3.)
    close(plax.jvp(lambda x: f(x, one), (one,), (one,))[1], 2.)
    close(plax.jvp(lambda y: f(one, y), (one,), (one,))[1], 3.)


def test_reverse_mode_keeps_jits_nested():
    """Partial evaluation splits a jit into a known jit and a linear jit; transposing the
    linear jit gives a jit of its backward pass (no inlining)."""
    from plax.runtime import jitted
    f = plax.jit(lambda x: jnp.sin(x) * 2)
    closed = plax.make_jaxpr(plax.grad(f))(1.)
    names = [e.params["name"] for e in closed.jaxpr.eqns if e.primitive.name == "jit"]
    # (both keep the function's name, as JAX's: the name stack says what was done to it)
    assert names == ["<lambda>", "<lambda>"], str(closed)
    stacks = [str(e.source_info.name_stack) for e in closed.jaxpr.eqns if e.primitive.name == "jit"]
    assert stacks == ["jvp()", "transpose(jvp())"], str(closed)
    assert "sin" not in str(closed.jaxpr.eqns[1].params["jaxpr"])
    # grad drops the primal value: the known jit no longer computes it.
    assert "sin" not in str(closed) and dead_equations(closed.jaxpr) == []
    # Eager: the known and transposed jits are compiled once, then reused.
    close(plax.grad(f)(f32(0.3)), 2 * np.cos(0.3))
    gc.collect()  # (executables of other tests' dead jaxprs must not leave mid-count)
    n = len(jitted._executables)
    for v in (0.1, 0.2):
        close(plax.grad(f)(f32(v)), 2 * np.cos(v))
    assert len(jitted._executables) == n
    # linearize and linear_transpose of jitted functions.
    x = np.array([0.3, -0.2], f32)
    _, f_jvp = plax.linearize(f, x)
    close(f_jvp(np.ones(2, f32)), 2 * np.cos(x))
    (ct,) = plax.linear_transpose(plax.jit(lambda v: jnp.dot(A, v)), np.ones(3, f32))(
        np.ones(2, f32))
    close(ct, A.T @ np.ones(2))
    # Higher order through nested jits.
    g = plax.jit(lambda v: jnp.sum(plax.jit(lambda u: jnp.tanh(u) * u)(v)))
    check_grads(g, (x,), order=2)
    close(plax.hessian(g)(x), np.diag(2 * (1 - np.tanh(x) ** 2) * (1 - x * np.tanh(x))),
          atol=1e-5)


def test_weak_types_follow_jax():
    # A constant output's zero tangent, and the gradient of a weak input, stay weakly typed.
    _, t = plax.jvp(lambda x: 3.0, (f32(2.),), (f32(1.),))
    assert plax.typeof(t).weak_type and np.asarray(t) == 0
    assert plax.typeof(plax.vjp(lambda x: x * 2, 2.)[1](1.)[0]).weak_type


def test_vjp_and_linearize_functions_are_pytrees():
    """As in JAX, the returned functions carry their residuals as pytree leaves, so they can
    be passed into and returned from jitted functions."""
    x = np.array([0.1, 0.2], f32)
    want = np.cos(x) * x + np.sin(x)
    _, f_vjp = plax.vjp(lambda v: jnp.sin(v) * v, x)
    assert len(tree_util.tree_leaves(f_vjp)) > 0
    (g,) = plax.jit(lambda f, ct: f(ct))(f_vjp, np.ones(2, f32))
    close(g, want)
    _, f_jvp = plax.linearize(lambda v: jnp.sin(v) * v, x)
    close(plax.jit(lambda f, t: f(t))(f_jvp, np.ones(2, f32)), want)
    pullback = plax.jit(lambda v: plax.vjp(jnp.sin, v)[1])(f32(0.5))
    close(pullback(f32(1.))[0], np.cos(0.5))


def test_jit_with_integer_and_constant_outputs_under_differentiation():
    f = plax.jit(lambda x, n: (jnp.sum(x * n), jnp.argmax(x), 3.0, x))
    x = np.ones(3, f32)
    close(plax.grad(lambda v: f(v, 2)[0])(x), [2., 2., 2.])
    _, t = plax.jvp(lambda v: f(v, 2), (x,), (x,))
    close(t[0], 6.)
    assert t[1].dtype == float0
    close(t[3], x)
    (g,) = plax.vjp(lambda v: f(v, 2), x)[1]((f32(1), np.zeros((), float0), f32(0.), x))
    close(g, [3., 3., 3.])
    close(plax.jit(plax.grad(lambda v: plax.jit(lambda y, z: y * z)(v, v * 2)))(f32(1.)), 4.)


def test_linear_functions_carry_no_float0_values():
    """Integer outputs' float0 tangents are filled in by the API, not stored in the linear
    jaxpr (XLA cannot hold float0)."""
    f = lambda x: (x * 2, jnp.argmax(x))
    x = np.ones(3, f32)
    _, f_jvp = plax.linearize(f, x)
    t, tn = f_jvp(x)
    close(t, 2 * x)
    assert tn.dtype == float0
    leaves = tree_util.tree_leaves(f_jvp)
    assert all(np.asarray(v).dtype != float0 for v in leaves)
    (g,) = plax.vjp(f, x)[1]((x, np.zeros((), float0)))
    close(g, 2 * x)


def test_grad_of_the_identity_is_an_array_keeping_the_weak_type():
    g = plax.grad(lambda x: x)(2.0)
    assert isinstance(g, plax.Array) and g.weak_type and float(g) == 1.0
    g = plax.grad(lambda x: x)(np.float32(2.0))
    assert isinstance(g, plax.Array) and not g.weak_type and g.dtype == np.float32
    assert "1.0:f32[]" in str(plax.make_jaxpr(plax.grad(lambda x: x))(2.0))  # staged: a literal


def test_jacobians_keep_the_weak_type_of_what_they_are_shaped_after():
    # jacfwd blocks follow the output, jacrev blocks the input, as JAX's do.
    assert plax.jacfwd(lambda x: x ** 3)(2.0).weak_type
    assert plax.jacrev(lambda x: x ** 3)(2.0).weak_type
    h = plax.hessian(lambda x: x ** 3)(2.0)
    assert h.weak_type and float(h) == 12.0
    assert not plax.jacfwd(lambda x: x ** 3)(np.float32(2.0)).weak_type


def test_check_grads_follows_jaxs_numerics():
    """check_grads differentiates numerically as JAX's does (a +-1e-4 central difference along
    a RandomState(0) direction, tolerances per dtype scaled by size), so a check calibrated on
    JAX passes here too: numpyro checks logdiffexp to third order next to a near-singular
    point, which a coarser step fails."""
    from plax.test_util import numerical_jvp

    def log1mexp(x):
        return jnp.where(x > -0.6931472, jnp.log(-jnp.expm1(x)), jnp.log1p(-jnp.exp(x)))

    def logdiffexp(a, b):
        return jnp.where(a > b, a + log1mexp(b - a), -jnp.inf)

    check_grads(logdiffexp, (-0.32523, -0.34), order=3, rtol=0.01)
    cube = lambda x: x * x * x  # noqa: E731
    got = numerical_jvp(cube, (np.float64(2.0),), (np.float64(1.0),))
    x, step = np.float64(2.0), np.float64(1e-4)
    assert got == (cube(x + step) - cube(x - step)) * (0.5 / 1e-4)  # f(x +- eps*t)


# --- results with symbolic-zero tangents are no tracers of the jvp (as in JAX) -------------
_CONST = np.float32(3.0)
ZERO_TANGENT_CASES = [  # (function of x, which results are tracers of the jvp)
    ("jit, one result independent of x",
     lambda x: plax.jit(lambda a, c: (a * 2, c + 1))(x, _CONST), [True, False]),
    ("jit, integer result", lambda x: plax.jit(lambda a: (a * 2, a.astype(jnp.int32)))(x),
     [True, False]),
    ("primitive of a constant", lambda x: (x * 2, jnp.sin(_CONST)), [True, False]),
    ("integer conversion", lambda x: (x.astype(jnp.int32), x + 1), [False, True]),
]


@pytest.mark.parametrize("name, fn, tracers", ZERO_TANGENT_CASES,
                         ids=[c[0] for c in ZERO_TANGENT_CASES])
def test_zero_tangent_results_are_not_jvp_tracers(name, fn, tracers):
    from plax.interpreters.ad import JVPTracer
    seen = []

    def f(x):
        outs = fn(x)
        seen.extend(isinstance(o, JVPTracer) for o in outs)
        return outs

    primals, tangents = plax.jvp(f, (np.float32(0.5),), (np.float32(1.0),))
    assert seen == tracers
    want = fn(np.float32(0.5))
    for p, t, w in zip(primals, tangents, want):
        np.testing.assert_allclose(p, w, rtol=1e-6)
    np.testing.assert_allclose(tangents[0] if tracers[0] else tangents[1],
                               2.0 if "jit" in name or "constant" in name else 1.0)


PASSED_THROUGH_TANGENTS = [  # (function, its tangent at 1.0, whether that is an Array: JAX's)
    (lambda x: x, 1.0, False), (lambda x: x + 1, 1.0, True), (lambda x: 1 - x, -1.0, True),
    (lambda x: x * 2, 2.0, True), (lambda x: (x, 2.0)[0], 1.0, False),
]


@pytest.mark.parametrize("fn, want, is_array", PASSED_THROUGH_TANGENTS)
def test_a_tangent_an_operation_passes_through_is_an_array(fn, want, is_array):
    primal, tangent = plax.jvp(fn, (1.0,), (1.0,))
    assert isinstance(tangent, plax.Array) is is_array
    assert float(tangent) == want and float(primal) == float(fn(1.0))


class _NamelessCallable:
    """A callable whose ``__name__`` is no string (as an equinox Module's can be)."""
    __name__ = object()

    def __call__(self, x):
        return x * 2


@pytest.mark.parametrize("transform, x, want", [
    (plax.vmap, np.ones(3, np.float32), np.full(3, 2.0)),
    (plax.grad, np.float32(1.5), 2.0), (plax.jacfwd, np.float32(1.5), 2.0),
    (plax.jacrev, np.float32(1.5), 2.0)], ids=["vmap", "grad", "jacfwd", "jacrev"])
def test_transforming_a_callable_whose_name_is_no_string(transform, x, want):
    np.testing.assert_allclose(transform(_NamelessCallable())(x), want)
