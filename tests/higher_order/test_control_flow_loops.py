"""lax.while_loop / lax.fori_loop: values against Python loops, pytree carries, concrete and
traced bounds, forward- and reverse-mode differentiation, vmap with batched predicates,
errors (JAX's messages), weak types, jaxpr structure, printing and disable_jit."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.numpy import util

from control_flow_util import close, count, grads, rand, top

F32 = np.float32
I32 = np.int32

REV_MSG = ("Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop "
           "with dynamic start/stop values")


def _collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def _collatz(n):
    def body(c):
        n, k = c
        return jnp.where(n % 2 == 0, n // 2, 3 * n + 1), k + 1
    return lax.while_loop(lambda c: c[0] != 1, body, (n, I32(0)))[1]


# --- while_loop values --------------------------------------------------------------------
def test_while_loop_integer_carry_matches_python():
    for n in (1, 6, 7, 27):
        assert int(_collatz(I32(n))) == _collatz_steps(n)
    f = plax.jit(_collatz)
    for n in (1, 6, 7, 27):
        assert int(f(I32(n))) == _collatz_steps(n)


def test_while_loop_pytree_carry_mixed_dtypes():
    v = rand(3)

    def body(c):
        return {"i": c["i"] + 1, "acc": (c["acc"][0] * 2.0 + v, c["acc"][1] | (c["i"] == 2))}

    init = {"i": I32(0), "acc": (np.ones(3, F32), np.bool_(False))}
    out = lax.while_loop(lambda c: c["i"] < 4, body, init)
    acc = np.ones(3, F32)
    for _ in range(4):
        acc = acc * 2 + v
    close(out, {"i": I32(4), "acc": (acc, np.bool_(True))})
    out2 = lax.while_loop(lambda c: c[0] < 3, lambda c: [c[0] + 1, c[1] * 2.0], [0, 1.0])
    assert isinstance(out2, list) and int(out2[0]) == 3 and float(out2[1]) == 8.0


def test_while_loop_zero_iterations_returns_init():
    x = rand(2)
    close(lax.while_loop(lambda c: c[0] > 100.0, lambda c: c * 2.0, x), x)
    close(plax.jit(lambda x: lax.while_loop(lambda c: False, lambda c: c + 1.0, x))(x), x)


def test_while_loop_closures_traced_under_jit():
    def f(x, limit):
        return lax.while_loop(lambda c: c[1] < limit, lambda c: (c[0] * x, c[1] + 1.0),
                              (F32(1.0), F32(0.0)))

    for x, limit in ((2.0, 5.0), (0.5, 3.0), (3.0, 0.0)):
        n = int(np.ceil(max(limit, 0)))
        close(plax.jit(f)(F32(x), F32(limit)), (F32(x) ** n, F32(n)))


def test_while_loop_weak_typed_init_with_strong_body_output():
    out = lax.while_loop(lambda c: c < 3, lambda c: c + jnp.float32(1.0), 0.0)
    assert out.dtype == np.float32 and float(out) == 3.0 and not out.weak_type
    out = plax.jit(lambda: lax.while_loop(lambda c: c < 3, lambda c: c + jnp.float32(1.0), 0.0))()
    assert out.dtype == np.float32 and float(out) == 3.0


def test_while_loop_weak_int_init_promoted_by_float_body():
    # A weakly typed Python-int carry takes the float type the body gives it (as in JAX).
    out = lax.while_loop(lambda c: c < 3, lambda c: c + jnp.float32(1.5), 0)
    assert out.dtype == np.float32 and float(out) == 3.0


# --- while_loop differentiation -----------------------------------------------------------
def _power_loop(x, y):
    # carry (k, p): multiply p by x*y until k reaches 3 -> p = (x*y)**3 * x
    def body(c):
        k, p = c
        return k + 1, p * x * jnp.sin(y)
    return lax.while_loop(lambda c: c[0] < 3, body, (0, x))[1]


def test_while_loop_forward_mode():
    x, y = F32(0.8), F32(1.2)
    grads(_power_loop, (x, y), order=2, modes=("fwd",))
    # p = x**4 sin(y)**3
    _, t = plax.jvp(_power_loop, (x, y), (F32(1.0), F32(0.0)))
    close(t, 4 * x ** 3 * np.sin(y) ** 3, rtol=1e-5)
    _, f_jvp = plax.linearize(_power_loop, x, y)
    close(f_jvp(F32(0.0), F32(1.0)), 3 * x ** 4 * np.sin(y) ** 2 * np.cos(y), rtol=1e-5)
    close(plax.jacfwd(_power_loop)(x, y), 4 * x ** 3 * np.sin(y) ** 3, rtol=1e-5)


def test_while_loop_reverse_mode_is_an_error():
    with pytest.raises(ValueError, match=REV_MSG):
        plax.grad(_power_loop)(F32(0.8), F32(1.2))
    with pytest.raises(ValueError, match=REV_MSG):  # raised by the transpose at the latest
        _, vjp_fun = plax.vjp(_power_loop, F32(0.8), F32(1.2))
        vjp_fun(F32(1.0))
    with pytest.raises(ValueError, match=REV_MSG):
        plax.jit(plax.grad(_power_loop))(F32(0.8), F32(1.2))


# --- while_loop vmap ----------------------------------------------------------------------
def _ref_doubling(x, limit):
    k = 0
    while x < limit:
        x, k = x * 2, k + 1
    return x, k


def _doubling(x, limit):
    return lax.while_loop(lambda c: c[0] < limit, lambda c: (c[0] * 2.0, c[1] + 1), (x, 0))


@pytest.mark.parametrize("x_b,lim_b", [(True, True), (True, False), (False, True)])
def test_while_loop_vmap_members_finish_at_different_iterations(x_b, lim_b):
    xs = np.array([1.0, 0.3, 5.0, 0.01, 2.0], F32)
    lims = np.array([1.5, 10.0, 4.0, 3.0, 64.0], F32)
    in_axes = (0 if x_b else None, 0 if lim_b else None)
    out = plax.vmap(_doubling, in_axes=in_axes)(xs if x_b else xs[1], lims if lim_b else lims[2])
    ref = [_ref_doubling(float(xs[i] if x_b else xs[1]), float(lims[i] if lim_b else lims[2]))
           for i in range(5)]
    close(out, (np.array([r[0] for r in ref], F32), np.array([r[1] for r in ref], I32)))
    assert len(set(int(k) for k in out[1])) > 1 or not (x_b or lim_b)


def test_while_loop_vmap_batched_body_const_only_and_jit():
    scales = np.array([1.0, 2.0, 3.0], F32)

    def f(s):
        return lax.while_loop(lambda c: c[1] < 4, lambda c: (c[0] + s, c[1] + 1), (F32(0.0), 0))

    out = plax.jit(plax.vmap(f))(scales)
    close(out, (4 * scales, np.full(3, 4, I32)))
    out = plax.vmap(lambda x: _collatz(x))(np.array([1, 6, 7, 27], I32))
    close(out, np.array([_collatz_steps(n) for n in (1, 6, 7, 27)], I32))


def test_while_loop_vmap_jvp():
    xs = np.array([0.5, 0.8, 1.1], F32)
    t = plax.vmap(lambda x: plax.jvp(lambda x: _power_loop(x, F32(1.0)), (x,), (F32(1.0),))[1])(xs)
    close(t, 4 * xs ** 3 * np.sin(F32(1.0)) ** 3, rtol=1e-5)


# --- fori_loop values ---------------------------------------------------------------------
@pytest.mark.parametrize("lower,upper", [(0, 5), (2, 7), (-3, 2), (4, 4), (5, 2)])
def test_fori_loop_concrete_bounds(lower, upper):
    x = rand(3)
    out = lax.fori_loop(lower, upper, lambda i, c: c * 0.5 + i, x)
    want = x.copy()
    for i in range(lower, upper):
        want = want * F32(0.5) + F32(i)
    close(out, want)


def test_fori_loop_traced_bounds_under_jit():
    f = plax.jit(lambda lo, hi, x: lax.fori_loop(lo, hi, lambda i, c: (c[0] + i, c[1] * x),
                                                 (0, F32(1.0))))
    for lo, hi in ((0, 0), (0, 4), (2, 6), (3, 1)):
        n = max(hi - lo, 0)
        close(f(lo, hi, F32(1.5)), (I32(sum(range(lo, hi))), F32(1.5) ** n))


def test_fori_loop_numpy_bounds_and_index_dtype():
    seen = []

    def body(i, c):
        seen.append(i.dtype)
        return c + i

    assert int(lax.fori_loop(np.int32(1), np.int32(4), body, 0)) == 6
    assert seen and all(d == np.int32 for d in seen)


def test_fori_loop_unroll():
    x = rand(2)
    want = x.copy()
    for i in range(5):
        want = np.sin(want) + i
    for unroll in (1, 2, 3, True):
        close(lax.fori_loop(0, 5, lambda i, c: jnp.sin(c) + i, x, unroll=unroll), want,
              rtol=1e-5)


def test_fori_loop_weak_typed_init():
    out = lax.fori_loop(0, 3, lambda i, c: c + jnp.float32(1.0), 0.0)
    assert out.dtype == np.float32 and float(out) == 3.0 and not out.weak_type


# --- fori_loop differentiation ------------------------------------------------------------
def _fori_fn(x, y):
    return lax.fori_loop(0, 4, lambda i, c: jnp.sin(c) * y + 0.1 * i, x)


def _fori_ref(x, y):
    c = x
    for i in range(4):
        c = np.sin(c) * y + 0.1 * i
    return c


def test_fori_loop_concrete_bounds_reverse_differentiable():
    x, y = F32(0.4), F32(0.9)
    grads(_fori_fn, (x, y), order=2)
    eps = 1e-3
    gx = plax.grad(_fori_fn)(x, y)
    fd = (_fori_ref(np.float64(x) + eps, np.float64(y)) -
          _fori_ref(np.float64(x) - eps, np.float64(y))) / (2 * eps)
    np.testing.assert_allclose(float(gx), fd, rtol=1e-4)
    close(plax.jit(plax.grad(_fori_fn))(x, y), gx, rtol=1e-5)


def test_fori_loop_python_int_bounds_static_under_jit_grad():
    f = plax.jit(plax.grad(lambda x, n: lax.fori_loop(0, n, lambda i, c: c * x, F32(1.0))),
                 static_argnums=1)
    for n in (1, 3):
        close(f(F32(1.5), n), n * F32(1.5) ** (n - 1), rtol=1e-5)


def test_fori_loop_traced_bounds_forward_mode_only():
    f = lambda x, n: lax.fori_loop(0, n, lambda i, c: c * x, F32(1.0))  # noqa: E731
    _, t = plax.jit(lambda x, n: plax.jvp(lambda x: f(x, n), (x,), (F32(1.0),)))(F32(1.5), 3)
    close(t, 3 * F32(1.5) ** 2, rtol=1e-5)
    with pytest.raises(ValueError, match=REV_MSG):
        plax.jit(plax.grad(f))(F32(1.5), 3)


def test_fori_loop_vmap_batched_upper_bound():
    ns = np.array([0, 1, 4, 2], I32)
    out = plax.vmap(lambda n: lax.fori_loop(0, n, lambda i, c: c + i * i, 0))(ns)
    close(out, np.array([sum(i * i for i in range(n)) for n in ns], I32))
    xs = rand(4)
    out = plax.vmap(lambda x: lax.fori_loop(0, 3, lambda i, c: c * x + i, x))(xs)
    want = xs.copy()
    for i in range(3):
        want = want * xs + i
    close(out, want, rtol=1e-5)


# --- errors -------------------------------------------------------------------------------
def test_while_loop_body_carry_mismatch_errors():
    with pytest.raises(TypeError, match="carry input and carry output must have the same "
                                        "pytree structure"):
        lax.while_loop(lambda c: c < 3, lambda c: (c, c), 0)
    with pytest.raises(TypeError, match="carry input and carry output must have the same "
                                        "pytree structure"):
        lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1]), [0, 1.0])
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        lax.while_loop(lambda c: c < 3, lambda c: (c + 1).astype(jnp.float32), I32(0))
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        lax.while_loop(lambda c: c[0] < 3, lambda c: jnp.concatenate([c, c]), jnp.zeros(1))


def test_while_loop_cond_fun_must_return_boolean_scalar():
    with pytest.raises(TypeError, match="cond_fun must return a boolean scalar"):
        lax.while_loop(lambda c: c, lambda c: c - 1, 3)
    with pytest.raises(TypeError, match="cond_fun must return a boolean scalar"):
        lax.while_loop(lambda c: c < 3, lambda c: c + 1, jnp.zeros(2))


def test_fori_loop_errors():
    with pytest.raises(TypeError, match="carry input and carry output must have the same "
                                        "pytree structure"):
        lax.fori_loop(0, 3, lambda i, c: (c, c), F32(0.0))
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        lax.fori_loop(0, 3, lambda i, c: c.astype(jnp.int32), F32(0.0))
    with pytest.raises(TypeError, match="lower and upper arguments to fori_loop must have "
                                        "equal types"):
        lax.fori_loop(0.0, 3, lambda i, c: c, F32(0.0))
    with pytest.raises(ValueError, match="Can only use `unroll` in `fori_loop` if the loop "
                                         "bounds are statically known"):
        plax.jit(lambda n: lax.fori_loop(0, n, lambda i, c: c * 2.0, F32(1.0), unroll=2))(3)


# --- jaxpr structure, printing ------------------------------------------------------------
def test_while_jaxpr_params_and_printing():
    j = plax.make_jaxpr(lambda x, lim: lax.while_loop(lambda c: c < lim, lambda c: c * x,
                                                      F32(1.0)))(F32(2.0), F32(10.0))
    (e,) = top(j, "while")
    p = e.params
    assert p["cond_nconsts"] == 1 and p["body_nconsts"] == 1
    cj, bj = p["cond_jaxpr"], p["body_jaxpr"]
    assert [x.primitive.name for x in cj.jaxpr.eqns] == ["lt"]
    assert [x.primitive.name for x in bj.jaxpr.eqns] == ["mul"]
    assert len(cj.jaxpr.invars) == 2 and len(bj.jaxpr.invars) == 2
    assert len(cj.jaxpr.outvars) == 1 and len(bj.jaxpr.outvars) == 1
    j0 = plax.make_jaxpr(lambda x: lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x))(
        F32(1.0))
    (e0,) = top(j0, "while")
    assert e0.params["cond_nconsts"] == 0 and e0.params["body_nconsts"] == 0
    text = str(j)
    for s in ("while[", "body_jaxpr=", "cond_jaxpr=", "body_nconsts=1", "cond_nconsts=1"):
        assert s in text, (s, text)


def test_fori_loop_jaxpr_scan_for_concrete_bounds_while_for_traced():
    j = plax.make_jaxpr(lambda x: lax.fori_loop(2, 7, lambda i, c: c * 2.0, x))(F32(1.0))
    assert not top(j, "while")
    (e,) = top(j, "scan")
    assert e.params["length"] == 5 and e.params["reverse"] is False
    j = plax.make_jaxpr(lambda x, n: lax.fori_loop(0, n, lambda i, c: c * 2.0, x))(F32(1.0), 5)
    assert len(top(j, "while")) == 1 and not top(j, "scan")


# --- disable_jit --------------------------------------------------------------------------
def test_loops_under_disable_jit_run_in_python():
    seen = []

    def cond_fun(c):
        seen.append(("c", float(c)))  # a concrete value: this would fail on a tracer
        return c < 3.0

    def body(i, c):
        seen.append(("i", int(i)))
        return c + i

    with plax.disable_jit():
        assert float(lax.while_loop(cond_fun, lambda c: c + 1.0, F32(0.0))) == 3.0
        assert int(lax.fori_loop(0, 3, body, 0)) == 3
        n = plax.jit(lambda n: n * 2)(2)  # jit is off too: n is concrete
        assert int(lax.fori_loop(0, n, body, 0)) == 6
    assert seen == [("c", 0.0), ("c", 1.0), ("c", 2.0), ("c", 3.0),
                    ("i", 0), ("i", 1), ("i", 2), ("i", 0), ("i", 1), ("i", 2), ("i", 3)]


def test_weak_typed_loops_stay_weak():
    out = lax.while_loop(lambda c: c < 3.0, lambda c: c + 1.0, 0.0)
    assert out.dtype == np.float32 and out.weak_type and float(out) == 3.0
    out = lax.fori_loop(0, 3, lambda i, c: c + 1.0, 0.0)
    assert out.dtype == np.float32 and out.weak_type and float(out) == 3.0


def test_while_loop_nested_vmap_batched_predicate():
    xs = np.array([[1.0, 0.3, 5.0], [0.01, 2.0, 7.0]], F32)
    lims = np.array([1.5, 10.0, 64.0], F32)
    out = plax.vmap(plax.vmap(_doubling, in_axes=(0, 0)), in_axes=(0, None))(xs, lims)
    ref = [[_ref_doubling(float(xs[a, b]), float(lims[b])) for b in range(3)] for a in range(2)]
    close(out, (np.array([[r[0] for r in row] for row in ref], F32),
                np.array([[r[1] for r in row] for row in ref], I32)))


def test_while_jaxpr_under_vmap_and_jvp_stays_one_loop():
    j = plax.make_jaxpr(plax.vmap(_doubling))(np.ones(3, F32), np.full(3, 5.0, F32))
    assert len(top(j, "while")) == 1 and count(j, "while") == 1
    j = plax.make_jaxpr(lambda x: plax.jvp(lambda x: _power_loop(x, F32(1.0)), (x,),
                                           (F32(1.0),)))(F32(0.5))
    assert count(j, "while") == 1


def test_weak_typed_init_promotion_rules():
    # A weak init takes the body's dtype only where JAX's promotion of the two gives that
    # dtype (same kind or wider): weak int -> int8 / float16, weak float -> float16 ...
    assert lax.while_loop(lambda c: c < 2, lambda c: (c + 1).astype(jnp.int8), 0).dtype == np.int8
    assert lax.fori_loop(0, 2, lambda i, c: c.astype(jnp.float16), 1).dtype == np.float16
    assert lax.fori_loop(0, 2, lambda i, c: c.astype(jnp.float16), 0.5).dtype == np.float16
    # ... but a weak float carry does not become an integer, nor a weak int a bool.
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        lax.while_loop(lambda c: c < 2.0, lambda c: jnp.int32(5), 0.5)
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        lax.fori_loop(0, 2, lambda i, c: jnp.int32(1), 0.5)
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        lax.while_loop(lambda c: False, lambda c: jnp.bool_(True), 1)


def test_while_loop_vmap_keeps_weak_typed_carries_weak():
    out = plax.vmap(lambda n: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2),
                                             (0, 1)))(np.array([0, 3, 5], I32))
    close(out, (np.array([0, 3, 5], I32), np.array([1, 8, 32], I32)))
    assert out[0].weak_type and out[1].weak_type  # as in JAX: the carries stay weakly typed


def test_reverse_mode_fine_when_no_tangent_enters_the_loop():
    # The loop carries no tangent (its inputs don't depend on x): not an error.
    f = lambda x: x * lax.while_loop(lambda c: c < 3, lambda c: c + 1, 0)  # noqa: E731
    assert float(plax.grad(f)(F32(1.0))) == 3.0
    g = lambda x: x + lax.while_loop(lambda c: c < 3.0, lambda c: c * 2.0, F32(1.0))  # noqa
    assert float(plax.grad(g)(F32(1.0))) == 1.0
    assert float(plax.jit(plax.grad(g))(F32(1.0))) == 1.0


def test_fori_loop_concrete_array_bounds_outside_jit_are_reverse_differentiable():
    f = lambda x, n: lax.fori_loop(0, n, lambda i, c: c * x, F32(1.0))  # noqa: E731
    for n in (3, np.int32(3), jnp.asarray(3, jnp.int32)):
        assert float(plax.grad(f)(F32(2.0), n)) == 12.0


def test_a_closed_over_weak_int8_scalar_keeps_its_dtype_in_the_body():
    # A weak int8 scalar (what int8_array + 1 makes of the 1) is a literal of the body;
    # evaluating the body again must keep it int8, not turn it into a Python int (int32).
    zero = util.convert(0, np.int8, True)
    out = lax.while_loop(lambda b: lax.reduce_or(lax.ne(b, zero), (0,)), lambda b: b - 1,
                         jnp.ones(2, "int8"))
    np.testing.assert_array_equal(np.asarray(out), [0, 0])
    assert out.dtype == np.int8
