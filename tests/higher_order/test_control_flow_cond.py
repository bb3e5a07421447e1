"""lax.cond / lax.switch: branch selection, predicates, pytrees, clamping, transformations,
errors (JAX's messages), weak types, jaxpr structure and printing."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax

from control_flow_util import close, count, grads, rand, top

F32 = np.float32


def _tf(x):
    return x + 1.0


def _ff(x):
    return x - 1.0


# --- predicates ---------------------------------------------------------------------------
@pytest.mark.parametrize("pred", [True, False, 1, 0, 3, -1, 0.5, 0.0,
                                  np.bool_(True), np.bool_(False), np.int32(2), np.int32(0),
                                  np.float32(0.0), np.uint8(3)],
                         ids=repr)
def test_cond_python_and_numpy_predicates(pred):
    out = lax.cond(pred, _tf, _ff, F32(10.0))
    assert float(out) == (11.0 if bool(pred) else 9.0)


def test_cond_array_predicates_traced_under_jit():
    f = plax.jit(lambda p, x: lax.cond(p, _tf, _ff, x))
    for p in (True, False):
        assert float(f(jnp.asarray(p), F32(10.0))) == (11.0 if p else 9.0)
    for p in (2, 0, -5):  # integer predicates: nonzero is true
        assert float(f(np.int32(p), F32(10.0))) == (11.0 if p else 9.0)
    g = plax.jit(lambda x: lax.cond(x > 0, jnp.sin, jnp.cos, x))
    for x in (0.7, -0.4):
        np.testing.assert_allclose(float(g(F32(x))), np.sin(x) if x > 0 else np.cos(x),
                                   rtol=1e-6)


# --- operands and outputs -----------------------------------------------------------------
def test_cond_multiple_pytree_operands_and_outputs():
    a, b, c = rand(3), rand(2, 3, seed=1), rand(seed=2)

    def tf(pair, c):
        x, d = pair
        return {"u": x * d["b"], "v": (c + 1.0, jnp.sum(x))}

    def ff(pair, c):
        x, d = pair
        return {"u": x + d["b"], "v": (c * 2.0, jnp.max(x))}

    for pred in (True, False):
        out = lax.cond(pred, tf, ff, (a, {"b": b}), c)
        want = ({"u": a * b, "v": (c + 1.0, a.sum())} if pred else
                {"u": a + b, "v": (c * 2.0, a.max())})
        close(out, want)


def test_cond_no_operands_and_closures():
    x = rand(4)
    out = lax.cond(False, lambda: jnp.sin(x), lambda: jnp.cos(x))
    close(out, np.cos(x), rtol=1e-6)
    f = plax.jit(lambda p, y: lax.cond(p, lambda: y * 3.0, lambda: -y))
    close(f(True, x), 3 * x)
    close(f(False, x), -x)


def test_cond_mixed_dtype_operands_pass_through():
    i, x, m = np.int32(7), rand(3), np.array([True, False, True])
    out = lax.cond(True, lambda i, x, m: (i + 1, jnp.where(m, x, 0.0), m),
                   lambda i, x, m: (i - 1, x, ~m), i, x, m)
    assert out[0].dtype == np.int32 and int(out[0]) == 8
    close(out[1], np.where(m, x, 0.0))
    assert out[2].dtype == np.bool_ and list(np.asarray(out[2])) == [True, False, True]


def test_cond_weak_typed_operand_with_strong_branch_output():
    # x is weakly typed (a Python float); one branch returns a strong float32: the result
    # is a (strong) float32, not an error.
    for pred, want in ((True, 0.0), (False, 1.0)):
        out = lax.cond(pred, lambda x: x, lambda x: jnp.float32(1.0), 0.0)
        assert out.dtype == np.float32 and float(out) == want
        assert not out.weak_type


# --- switch -------------------------------------------------------------------------------
_BRANCHES = [lambda x: x * 10.0, lambda x: x + 100.0, lambda x: -x]


def _ref_switch(i, x):
    return [x * 10.0, x + 100.0, -x][int(np.clip(i, 0, 2))]


@pytest.mark.parametrize("index", [0, 1, 2, -1, -7, 3, 9, np.int32(1), np.int32(-2),
                                   np.int64(5)], ids=repr)
def test_switch_concrete_index_clamps(index):
    x = F32(3.0)
    assert float(lax.switch(index, _BRANCHES, x)) == _ref_switch(index, x)


def test_switch_traced_index_clamps_under_jit():
    f = plax.jit(lambda i, x: lax.switch(i, _BRANCHES, x))
    for i in (-3, 0, 1, 2, 3, 100):
        assert float(f(i, F32(3.0))) == _ref_switch(i, 3.0)


def test_switch_one_branch_and_pytrees():
    x, y = rand(2), rand(2, seed=1)
    out = lax.switch(5, [lambda d, s: {"k": d["a"] * s}], {"a": x}, y)
    close(out, {"k": x * y})
    brs = [lambda t: (t[0] + t[1], t[1]), lambda t: (t[0] * t[1], -t[1]),
           lambda t: (t[0], t[0])]
    for i in range(3):
        out = lax.switch(i, brs, (x, y))
        want = [(x + y, y), (x * y, -y), (x, x)][i]
        close(out, want)


def test_switch_vmap_batched_index_clamps():
    idx = np.array([-2, 0, 1, 2, 5], np.int32)
    xs = rand(5)
    out = plax.vmap(lambda i, x: lax.switch(i, _BRANCHES, x))(idx, xs)
    close(out, np.array([_ref_switch(i, x) for i, x in zip(idx, xs)], F32))
    out = plax.vmap(lambda i: lax.switch(i, _BRANCHES, F32(2.0)))(idx)
    close(out, np.array([_ref_switch(i, 2.0) for i in idx], F32))


def test_switch_grads():
    brs = [lambda x, y: jnp.sin(x) * y, lambda x, y: x * x + y, lambda x, y: jnp.exp(x * y)]
    x, y = F32(0.6), F32(-0.8)
    for i in (0, 1, 2):
        grads(lambda x, y: lax.switch(i, brs, x, y), (x, y), order=2 if i == 2 else 1)
    g = plax.grad(lambda x, y, i: lax.switch(i, brs, x, y), argnums=(0, 1))
    close(g(x, y, 2), (y * np.exp(x * y), x * np.exp(x * y)), rtol=1e-5)
    close(plax.jit(g)(x, y, -4), (np.cos(x) * y, np.sin(x)), rtol=1e-5)


# --- differentiation ----------------------------------------------------------------------
def _piecewise(x, y):
    return lax.cond(x > 0, lambda a, b: jnp.sin(a) * b, lambda a, b: jnp.cos(a) + b * b, x, y)


@pytest.mark.parametrize("x", [0.7, -0.4])
def test_cond_grads_both_branches(x):
    x, y = F32(x), F32(1.3)
    grads(_piecewise, (x, y), order=2 if x > 0 else 1)
    gx, gy = plax.grad(_piecewise, argnums=(0, 1))(x, y)
    want = (np.cos(x) * y, np.sin(x)) if x > 0 else (-np.sin(x), 2 * y)
    close((gx, gy), want, rtol=1e-5)
    close(plax.jit(plax.grad(_piecewise, argnums=(0, 1)))(x, y), want, rtol=1e-5)


def test_cond_grad_pytree_operand_and_unused_operand():
    p = {"w": rand(3), "b": F32(0.5)}
    z = rand(3, seed=1)

    def loss(p, z):
        out = lax.cond(p["b"] > 0, lambda p, z: jnp.sum(p["w"] * z) + p["b"],
                       lambda p, z: jnp.sum(p["w"]), p, z)
        return out * 2.0

    g = plax.grad(loss)(p, z)
    close(g, {"w": 2 * z, "b": F32(2.0)})
    p2 = {"w": p["w"], "b": F32(-0.5)}
    close(plax.grad(loss)(p2, z), {"w": np.full(3, 2.0, F32), "b": F32(0.0)})
    close(plax.grad(loss, argnums=1)(p2, z), np.zeros(3, F32))


def test_cond_jvp_vjp_linearize():
    x, y = F32(0.7), F32(1.3)
    out, t = plax.jvp(_piecewise, (x, y), (F32(1.0), F32(2.0)))
    close(out, np.sin(x) * y, rtol=1e-6)
    close(t, np.cos(x) * y + 2 * np.sin(x), rtol=1e-5)
    out, f_jvp = plax.linearize(_piecewise, F32(-0.4), y)
    close(f_jvp(F32(1.0), F32(2.0)), -np.sin(F32(-0.4)) + 2 * 2 * y, rtol=1e-5)
    out, vjp_fun = plax.vjp(_piecewise, x, y)
    close(vjp_fun(F32(3.0)), (3 * np.cos(x) * y, 3 * np.sin(x)), rtol=1e-5)


# --- vmap ---------------------------------------------------------------------------------
def _vbr(pair, s):
    x, y = pair
    return {"a": x * s, "b": jnp.sum(y)}


def _vbr2(pair, s):
    x, y = pair
    return {"a": x - s, "b": jnp.max(y)}


def _vref(pred, pair, s):
    return _vbr(pair, s) if pred else _vbr2(pair, s)


@pytest.mark.parametrize("pred_b,x_b,s_b", [(True, True, True), (True, False, False),
                                            (False, True, False), (False, False, True),
                                            (True, False, True)])
def test_cond_vmap_each_operand_batched_or_not(pred_b, x_b, s_b):
    n = 4
    preds = np.array([True, False, False, True])
    xs, ys, ss = rand(n, 3), rand(n, 2, seed=1), rand(n, seed=2)
    args = (preds if pred_b else np.bool_(False),
            (xs if x_b else xs[0], ys if x_b else ys[0]),
            ss if s_b else ss[0])
    in_axes = (0 if pred_b else None, (0 if x_b else None,) * 2, 0 if s_b else None)
    out = plax.vmap(lambda p, pair, s: lax.cond(p, _vbr, _vbr2, pair, s), in_axes=in_axes)(*args)
    want = [_vref(preds[k] if pred_b else False, (xs[k] if x_b else xs[0], ys[k] if x_b else ys[0]),
                  ss[k] if s_b else ss[0]) for k in range(n)]
    want = {"a": np.stack([np.asarray(w["a"]) for w in want]),
            "b": np.stack([np.asarray(w["b"]) for w in want])}
    close(out, want, rtol=1e-6)


def test_cond_vmap_batched_predicate_grad():
    xs = np.array([0.7, -0.4, 1.1, -2.0], F32)
    g = plax.vmap(plax.grad(lambda x: _piecewise(x, F32(1.5))))(xs)
    close(g, np.where(xs > 0, np.cos(xs) * 1.5, -np.sin(xs)), rtol=1e-5)
    g2 = plax.grad(lambda xs: jnp.sum(plax.vmap(lambda x: _piecewise(x, F32(1.5)))(xs)))(xs)
    close(g2, g, rtol=1e-5)


# --- disable_jit --------------------------------------------------------------------------
def test_cond_and_switch_under_disable_jit_run_one_branch_in_python():
    calls = []

    def tf(x):
        calls.append(("t", float(x)))  # concrete value: would fail on a tracer
        return x + 1.0

    def ff(x):
        calls.append(("f", float(x)))
        return x - 1.0

    with plax.disable_jit():
        assert float(lax.cond(True, tf, ff, F32(2.0))) == 3.0
        assert float(lax.switch(7, [tf, ff], F32(5.0))) == 4.0
    assert calls == [("t", 2.0), ("f", 5.0)]


# --- errors -------------------------------------------------------------------------------
def test_cond_branch_output_structure_mismatch():
    with pytest.raises(TypeError, match="branch outputs must have the same pytree structure"):
        lax.cond(True, lambda x: (x, x), lambda x: x, F32(1.0))
    with pytest.raises(TypeError, match="branch outputs must have the same pytree structure"):
        plax.jit(lambda p, x: lax.cond(p, lambda x: {"a": x}, lambda x: {"b": x}, x))(True, 1.0)


def test_cond_branch_output_type_mismatch():
    x = F32(1.0)
    with pytest.raises(TypeError, match="branches must have equal output types"):
        lax.cond(True, lambda x: x, lambda x: x.astype(jnp.int32), x)
    with pytest.raises(TypeError, match="branches must have equal output types"):
        lax.cond(False, lambda x: x, lambda x: jnp.stack([x, x]), x)


def test_switch_branch_output_mismatch():
    with pytest.raises(TypeError, match="branch outputs must have the same pytree structure"):
        lax.switch(0, [lambda x: x, lambda x: (x,)], F32(1.0))
    with pytest.raises(TypeError, match="branches must have equal output types"):
        lax.switch(1, [lambda x: x, lambda x: x, lambda x: x.astype(jnp.int32)], F32(1.0))


def test_cond_predicate_errors():
    with pytest.raises(TypeError, match="Pred must be a scalar"):
        lax.cond(jnp.array([True, False]), _tf, _ff, F32(1.0))
    with pytest.raises(TypeError, match="Pred must be a scalar"):
        plax.jit(lambda p: lax.cond(p, _tf, _ff, F32(1.0)))(np.zeros(3, np.bool_))
    with pytest.raises(TypeError, match="Pred type must be either boolean or number"):
        lax.cond(jnp.asarray(1j, jnp.complex64), _tf, _ff, F32(1.0))
    with pytest.raises(TypeError, match="true_fun and false_fun arguments should be callable"):
        lax.cond(True, 1.0, _ff, F32(1.0))


def test_switch_index_errors():
    with pytest.raises(ValueError, match="Empty branch sequence"):
        lax.switch(0, [], F32(1.0))
    with pytest.raises(TypeError, match="Branch index must be scalar"):
        lax.switch(jnp.array([0, 1]), _BRANCHES, F32(1.0))
    with pytest.raises(TypeError, match="Index type must be an integer"):
        lax.switch(F32(1.0), _BRANCHES, F32(1.0))


# --- jaxpr structure and printing ---------------------------------------------------------
def test_cond_jaxpr_structure():
    j = plax.make_jaxpr(lambda x: lax.cond(x > 0, lambda y: y * 2.0, lambda y: jnp.sin(y), x))(
        F32(1.0))
    (e,) = top(j, "cond")
    branches = e.params["branches"]
    assert isinstance(branches, tuple) and len(branches) == 2
    # branches are (false_fun, true_fun), as in JAX: index 0 is the false branch
    assert [x.primitive.name for x in branches[0].jaxpr.eqns] == ["sin"]
    assert [x.primitive.name for x in branches[1].jaxpr.eqns] == ["mul"]
    assert len(branches[0].jaxpr.invars) == 1 and len(branches[0].jaxpr.outvars) == 1
    text = str(j)
    assert "cond[" in text and "branches=(" in text


def test_switch_jaxpr_structure_and_nesting():
    j = plax.make_jaxpr(lambda i, x: lax.switch(i, _BRANCHES, x))(1, F32(1.0))
    (e,) = top(j, "cond")
    assert len(e.params["branches"]) == 3
    j = plax.make_jaxpr(plax.jit(lambda i, x: lax.switch(i, [
        lambda x: lax.cond(x > 0, jnp.sin, jnp.cos, x), jnp.exp], x)))(1, F32(1.0))
    assert count(j, "cond") == 2 and not top(j, "cond")


def test_cond_jaxpr_under_grad_and_vmap():
    j = plax.make_jaxpr(plax.grad(lambda x: lax.cond(x > 0, jnp.sin, jnp.cos, x)))(F32(1.0))
    assert len(top(j, "cond")) == 2  # the primal (with residuals) and the transposed cond
    # a batched predicate turns the cond into a select of both branches, as in JAX ...
    j = plax.make_jaxpr(plax.vmap(lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x)))(
        np.array([True, False]), np.ones(2, F32))
    assert count(j, "cond") == 0 and count(j, "sin") == 1 and count(j, "cos") == 1
    # ... an unbatched one keeps the cond
    j = plax.make_jaxpr(plax.vmap(lambda x: lax.cond(True, jnp.sin, jnp.cos, x)))(
        np.ones(2, F32))
    assert len(top(j, "cond")) == 1


# --- weak types and symbolic zeros --------------------------------------------------------
def test_cond_weak_typed_branch_outputs_stay_weak():
    out = lax.cond(True, lambda: 1.0, lambda: 2.0)
    assert out.dtype == np.float32 and out.weak_type and float(out) == 1.0
    out = lax.switch(3, [lambda: 1.0, lambda: 2.0])
    assert out.weak_type and float(out) == 2.0


def test_cond_grad_identity_and_constant_branches():
    def f(x, p):
        return lax.cond(p, lambda x: x, lambda x: 3.0, x)

    for p, want in ((True, 1.0), (False, 0.0)):
        assert float(plax.grad(f)(F32(2.0), p)) == want
        assert float(plax.jit(plax.grad(f))(F32(2.0), p)) == want
    close(plax.vmap(plax.grad(f))(np.ones(3, F32), np.array([True, False, True])),
          np.array([1.0, 0.0, 1.0], F32))
    _, t = plax.jvp(lambda x: f(x, False), (F32(2.0),), (F32(1.0),))
    assert float(t) == 0.0


def test_cond_grad_with_integer_operand():
    def f(x, i):
        return lax.cond(i > 1, lambda x, i: x * i, lambda x, i: x, x, i)

    assert float(plax.grad(f)(F32(2.0), 3)) == 3.0
    assert float(plax.grad(f)(F32(2.0), 0)) == 1.0
    assert float(plax.jit(plax.grad(f))(F32(2.0), 5)) == 5.0
