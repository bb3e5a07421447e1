"""lax.scan / lax.map: values against Python loops and NumPy (reverse, unroll, pytrees, length
without xs), differentiation, vmap with each operand batched or not, errors (JAX's messages),
weak types, jaxpr structure (params, the forward and the reverse scan of grad, pruned
carries), printing and disable_jit."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax

from control_flow_util import close, count, eqns, grads, rand, top

F32 = np.float32
I32 = np.int32


def _ref_scan(f, init, xs, length=None, reverse=False):
    """A Python-loop reference scan over NumPy values (f is a NumPy function here)."""
    leaves = [] if xs is None else [np.asarray(x) for x in _np_leaves(xs)]
    n = length if length is not None else leaves[0].shape[0]
    carry, ys = init, []
    order = range(n - 1, -1, -1) if reverse else range(n)
    for i in order:
        x = None if xs is None else _np_map(lambda a: np.asarray(a)[i], xs)
        carry, y = f(carry, x)
        ys.append((i, y))
    ys = [y for _, y in sorted(ys, key=lambda t: t[0])]
    return carry, (None if ys and ys[0] is None else _np_stack(ys))


def _np_leaves(t):
    if isinstance(t, dict):
        return [v for k in sorted(t) for v in _np_leaves(t[k])]
    if isinstance(t, (tuple, list)):
        return [v for x in t for v in _np_leaves(x)]
    return [t]


def _np_map(fn, t):
    if isinstance(t, dict):
        return {k: _np_map(fn, v) for k, v in t.items()}
    if isinstance(t, (tuple, list)):
        return type(t)(_np_map(fn, x) for x in t)
    return fn(t)


def _np_stack(ys):
    y0 = ys[0]
    if isinstance(y0, dict):
        return {k: _np_stack([y[k] for y in ys]) for k in y0}
    if isinstance(y0, (tuple, list)):
        return type(y0)(_np_stack([y[i] for y in ys]) for i in range(len(y0)))
    return np.stack([np.asarray(y) for y in ys])


# --- values -------------------------------------------------------------------------------
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("unroll", [1, 3, True])
def test_scan_values_reverse_and_unroll(reverse, unroll):
    xs, w = rand(5, 3), rand(3, seed=1)

    def body(mod):
        def f(c, x):
            c = mod.sin(c) * w + x
            return c, c * 2.0 + x.sum()
        return f

    out = lax.scan(body(jnp), np.zeros(3, F32), xs, reverse=reverse, unroll=unroll)
    close(out, _ref_scan(body(np), np.zeros(3, F32), xs, reverse=reverse), rtol=1e-5)


def test_scan_cumsum_and_exclusive_cumsum():
    xs = rand(6)
    carry, ys = lax.scan(lambda c, x: (c + x, c), F32(0.0), xs)
    close(carry, xs.sum(), rtol=1e-5)
    close(ys, np.concatenate([[0.0], np.cumsum(xs)[:-1]]).astype(F32), rtol=1e-5)
    carry, ys = lax.scan(lambda c, x: (c + x, c + x), F32(0.0), xs, reverse=True)
    close(ys, np.cumsum(xs[::-1])[::-1], rtol=1e-5)


def test_scan_pytree_carry_and_xs():
    init = {"s": np.zeros(2, F32), "n": I32(0), "flag": np.bool_(False)}
    xs = (rand(4, 2), {"b": np.arange(4, dtype=I32)})

    def f(mod):
        def body(c, x):
            a, d = x
            new = {"s": c["s"] + a * d["b"], "n": c["n"] + d["b"], "flag": c["flag"] | (d["b"] > 2)}
            return new, [a.sum() + c["n"], {"k": mod.maximum(a, 0.0)}]
        return body

    out = lax.scan(f(jnp), init, xs)
    ref = _ref_scan(f(np), init, xs)
    close(out, ref, rtol=1e-5)
    assert out[0]["n"].dtype == np.int32 and out[0]["flag"].dtype == np.bool_


def test_scan_length_without_xs():
    carry, ys = lax.scan(lambda c, _: (c * 2.0, c), F32(1.0), None, length=5)
    close(carry, F32(32.0))
    close(ys, np.array([1, 2, 4, 8, 16], F32))
    carry, ys = lax.scan(lambda c, x: (c + 1, (c, x)), 0, length=4, reverse=True)
    assert ys[1] is None
    close(ys[0], np.array([3, 2, 1, 0], I32))
    carry, ys = lax.scan(lambda c, _: (c + 1.0, None), F32(0.0), xs=None, length=3)
    assert ys is None and float(carry) == 3.0


def test_scan_length_matching_xs_ys_none_and_empty():
    xs = rand(3, 2)
    carry, ys = lax.scan(lambda c, x: (c + x, None), np.zeros(2, F32), xs, length=3)
    assert ys is None
    close(carry, xs.sum(0), rtol=1e-5)
    carry, ys = lax.scan(lambda c, x: (c + x.sum(), x * 2.0), F32(1.5), np.zeros((0, 2), F32))
    assert float(carry) == 1.5 and ys.shape == (0, 2) and ys.dtype == np.float32


def test_scan_consts_closure_and_jit():
    xs, w = rand(5, 2), rand(2, seed=1)

    def f(w, xs):
        return lax.scan(lambda c, x: (c * w + x, jnp.dot(c, w)), np.ones(2, F32), xs)

    ref = _ref_scan(lambda c, x: (c * w + x, np.dot(c, w)), np.ones(2, F32), xs)
    close(f(w, xs), ref, rtol=1e-5)
    close(plax.jit(f)(w, xs), ref, rtol=1e-5)
    close(plax.jit(lambda xs: lax.scan(lambda c, x: (c + x, c), F32(0.0), xs, reverse=True))(
        rand(4)), _ref_scan(lambda c, x: (c + x, c), F32(0.0), rand(4), reverse=True), rtol=1e-5)


def test_scan_weak_typed_init_with_strong_body_output():
    xs = np.arange(4, dtype=F32)
    carry, ys = lax.scan(lambda c, x: (c + x, c), 0.0, xs)
    assert carry.dtype == np.float32 and float(carry) == 6.0 and not carry.weak_type
    close(ys, np.array([0, 0, 1, 3], F32))
    carry, _ = plax.jit(lambda xs: lax.scan(lambda c, x: (c * x, None), 1.0, xs))(xs + 1)
    assert carry.dtype == np.float32 and float(carry) == 24.0


def test_scan_weak_int_init_promoted_by_float_body():
    # As in JAX: a weakly typed Python-int carry takes the body's float type.
    carry, _ = lax.scan(lambda c, x: (c + x, None), 0, np.arange(3, dtype=F32))
    assert carry.dtype == np.float32 and float(carry) == 3.0


# --- differentiation ----------------------------------------------------------------------
def _rnn(w, h0, xs, reverse=False, unroll=1):
    def cell(h, x):
        h = jnp.tanh(h * w + x)
        return h, h * h
    h, ys = lax.scan(cell, h0, xs, reverse=reverse, unroll=unroll)
    return h, jnp.sum(ys)


@pytest.mark.parametrize("reverse,unroll", [(False, 1), (True, 3), (False, True)])
def test_scan_grads(reverse, unroll):
    w, h0, xs = rand(2, seed=1, scale=0.5), rand(2, seed=2), rand(5, 2, seed=3)
    grads(lambda w, h0, xs: _rnn(w, h0, xs, reverse, unroll), (w, h0, xs),
          order=2 if unroll == 1 else 1, modes=("rev",) if unroll is True else ("fwd", "rev"))


def test_scan_grad_closed_form_product():
    xs = np.array([1.5, -0.5, 2.0, 0.8, 1.1], F32)
    prod = lambda xs: lax.scan(lambda c, x: (c * x, None), F32(1.0), xs)[0]  # noqa: E731
    close(plax.grad(prod)(xs), np.prod(xs) / xs, rtol=1e-5)
    close(plax.jit(plax.grad(prod))(xs), np.prod(xs) / xs, rtol=1e-5)
    # second derivative of the sum of ys (an exclusive cumulative product)
    f = lambda a: jnp.sum(lax.scan(lambda c, x: (c * a, c), F32(1.0), None, length=4)[1])  # noqa
    a = F32(1.3)
    close(plax.grad(plax.grad(f))(a), 2 + 6 * a, rtol=1e-5)  # d2/da2 (1 + a + a^2 + a^3)


def test_scan_jvp_vjp_linearize():
    w, h0, xs = rand(2, seed=1, scale=0.5), rand(2, seed=2), rand(5, 2, seed=3)
    f = lambda w: _rnn(w, h0, xs)  # noqa: E731
    tw = rand(2, seed=4)
    out, t = plax.jvp(f, (w,), (tw,))
    out_l, f_jvp = plax.linearize(f, w)
    close(out_l, out, rtol=1e-6)
    close(f_jvp(tw), t, rtol=1e-5)
    _, vjp_fun = plax.vjp(f, w)
    ct = (rand(2, seed=5), F32(0.7))
    (g,) = vjp_fun(ct)
    lhs = float(np.dot(np.asarray(g), tw))
    rhs = float(np.dot(np.asarray(t[0]), ct[0]) + np.asarray(t[1]) * ct[1])
    np.testing.assert_allclose(lhs, rhs, rtol=1e-4)


def test_scan_grad_pytree_xs_and_carry():
    xs = {"a": rand(4, 2), "b": rand(4, seed=1)}

    def loss(c0, xs):
        (c, k), ys = lax.scan(lambda c, x: ((c[0] * x["b"] + x["a"], c[1] + x["b"]), c[0]),
                              (c0, F32(0.0)), xs)
        return jnp.sum(c) + k + jnp.sum(ys)

    grads(loss, (rand(2, seed=2), xs), order=1)
    gx = plax.grad(loss, argnums=1)(rand(2, seed=2), xs)
    assert set(gx) == {"a", "b"} and gx["a"].shape == (4, 2) and gx["b"].shape == (4,)


# --- vmap ---------------------------------------------------------------------------------
def _vscan(w, c0, xs):
    return lax.scan(lambda c, x: (jnp.sin(c) * w + x, c * w), c0, xs)


def _vscan_ref(w, c0, xs):
    return _ref_scan(lambda c, x: (np.sin(c) * w + x, c * w), c0, xs)


@pytest.mark.parametrize("w_b,c_b,x_b", [(True, False, False), (False, True, False),
                                         (False, False, True), (True, True, True)],
                         ids=["consts", "carry", "xs", "all"])
def test_scan_vmap_each_operand_batched_or_not(w_b, c_b, x_b):
    n = 3
    ws, cs, xss = rand(n, 2, seed=1), rand(n, 2, seed=2), rand(n, 5, 2, seed=3)
    args = (ws if w_b else ws[0], cs if c_b else cs[0], xss if x_b else xss[0])
    in_axes = (0 if w_b else None, 0 if c_b else None, 0 if x_b else None)
    out = plax.vmap(_vscan, in_axes=in_axes)(*args)
    refs = [_vscan_ref(ws[i] if w_b else ws[0], cs[i] if c_b else cs[0],
                       xss[i] if x_b else xss[0]) for i in range(n)]
    close(out, (np.stack([r[0] for r in refs]), np.stack([r[1] for r in refs])), rtol=1e-5)


def test_scan_vmap_xs_batched_on_inner_axis_and_grad():
    xss = rand(5, 3, seed=3)  # the batch on axis 1; the scan runs over axis 0
    out = plax.vmap(lambda xs: lax.scan(lambda c, x: (c + x, c * x), F32(0.0), xs),
                    in_axes=1)(xss)
    refs = [_ref_scan(lambda c, x: (c + x, c * x), F32(0.0), xss[:, i]) for i in range(3)]
    close(out, (np.stack([r[0] for r in refs]), np.stack([r[1] for r in refs])), rtol=1e-5)
    per_example = plax.vmap(plax.grad(lambda w, xs: _vscan(w, F32(0.1), xs)[0]),
                            in_axes=(None, 0))(F32(0.7), rand(3, 4, seed=4))
    for i, xs in enumerate(rand(3, 4, seed=4)):
        close(per_example[i], plax.grad(lambda w: _vscan(w, F32(0.1), xs)[0])(F32(0.7)),
              rtol=1e-5)


# --- map ----------------------------------------------------------------------------------
@pytest.mark.parametrize("batch_size", [None, 1, 2, 5, 8])
def test_map_batch_sizes(batch_size):
    xs = rand(5, 3)
    out = lax.map(lambda x: jnp.sin(x) * x.sum(), xs, batch_size=batch_size)
    close(out, np.stack([np.sin(x) * x.sum() for x in xs]), rtol=1e-5)


def test_map_pytrees_and_grad():
    xs = {"a": rand(5, 2), "b": np.arange(5, dtype=I32)}
    out = lax.map(lambda d: (d["a"] * d["b"], {"s": d["a"].sum()}), xs, batch_size=2)
    close(out, (xs["a"] * xs["b"][:, None], {"s": xs["a"].sum(1)}), rtol=1e-6)
    f = lambda a: jnp.sum(lax.map(lambda x: jnp.sin(x) ** 2, a, batch_size=3))  # noqa: E731
    a = rand(5, 2, seed=1)
    close(plax.grad(f)(a), 2 * np.sin(a) * np.cos(a), rtol=1e-5)
    close(plax.jit(f)(a), np.sum(np.sin(a) ** 2), rtol=1e-5)
    grads(f, (a,), order=1)


# --- errors -------------------------------------------------------------------------------
def test_scan_carry_structure_mismatch():
    with pytest.raises(TypeError, match="carry input and carry output must have the same "
                                        "pytree structure"):
        lax.scan(lambda c, x: ((c, c), x), F32(0.0), rand(3))
    with pytest.raises(TypeError, match="carry input and carry output must have the same "
                                        "pytree structure"):
        lax.scan(lambda c, x: ((c[0] + x, c[1]), x), [F32(0.0), F32(1.0)], rand(3))


def test_scan_carry_type_mismatch():
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        lax.scan(lambda c, x: (c + x, x), I32(0), rand(3))
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        lax.scan(lambda c, x: (jnp.stack([c, c]), x), F32(0.0), rand(3))
    with pytest.raises(TypeError, match="input carry"):
        lax.scan(lambda c, x: (c.astype(jnp.int32), x), F32(0.0), rand(3))


def test_scan_length_and_xs_errors():
    with pytest.raises(ValueError, match="scan got values with different leading axis sizes"):
        lax.scan(lambda c, x: (c, x), F32(0.0), (rand(3), rand(4)))
    with pytest.raises(ValueError, match="disagrees with leading axis sizes"):
        lax.scan(lambda c, x: (c, x), F32(0.0), rand(3), length=4)
    with pytest.raises(ValueError, match="scan got no values to scan over and `length` not "
                                         "provided"):
        lax.scan(lambda c, x: (c, x), F32(0.0), None)
    with pytest.raises(ValueError, match="scan got value with no leading axis to scan over"):
        lax.scan(lambda c, x: (c, x), F32(0.0), 3.0)
    with pytest.raises(TypeError, match="scan body output must be a pair"):
        lax.scan(lambda c, x: c, F32(0.0), rand(3))


# --- jaxpr structure, printing ------------------------------------------------------------
def test_scan_jaxpr_params_and_printing():
    j = plax.make_jaxpr(lambda x, xs: lax.scan(lambda c, a: (c * a + x, c), x, xs))(
        F32(1.0), rand(5))
    (e,) = top(j, "scan")
    p = e.params
    assert p["length"] == 5 and p["reverse"] is False and p["unroll"] == 1
    assert p["num_consts"] == 1 and p["num_carry"] == 1
    body = p["jaxpr"].jaxpr
    assert len(body.invars) == 3 and len(body.outvars) == 2
    assert {x.primitive.name for x in body.eqns} >= {"mul", "add"}
    assert len(e.invars) == 3 and len(e.outvars) == 2
    text = str(j)
    for s in ("scan[", "num_carry=1", "length=5", "num_consts=1", "reverse=False", "jaxpr="):
        assert s in text, (s, text)
    j = plax.make_jaxpr(lambda xs: lax.scan(lambda c, a: (c + a, None), F32(0.0), xs,
                                            reverse=True, unroll=3))(rand(6))
    (e,) = top(j, "scan")
    assert e.params["reverse"] is True and e.params["unroll"] == 3 and e.params["length"] == 6
    j = plax.make_jaxpr(lambda xs: lax.scan(lambda c, a: (c + a, None), F32(0.0), xs,
                                            unroll=True))(rand(6))
    assert top(j, "scan")[0].params["unroll"] == 6  # unroll=True: fully, the length


def _two_carries(x, xs, c2_matters):
    def body(c, a):
        c1, c2 = c
        return (jnp.sin(c1) * a, c2 * c1 if c2_matters else c2 * 2.0), c1
    (c1, c2), ys = lax.scan(body, (x, x), xs)
    return (c2 if c2_matters else c1) + jnp.sum(ys)


def test_grad_of_scan_is_one_forward_and_one_reverse_scan():
    xs = np.arange(1.0, 6.0, dtype=F32)
    j = plax.make_jaxpr(plax.grad(lambda x: _two_carries(x, xs, False)))(F32(1.0))
    scans = top(j, "scan")
    assert count(j, "scan") == 2 and len(scans) == 2, str(j)
    assert sorted(e.params["reverse"] for e in scans) == [False, True]
    assert all(e.params["length"] == 5 for e in scans)
    # no unrolled loop: the body's sin runs inside the forward scan, not at top level
    assert not top(j, "sin") and not top(j, "cos") and count(j, "sin") <= 2
    jj = plax.make_jaxpr(plax.jit(plax.grad(lambda x: _two_carries(x, xs, False))))(F32(1.0))
    assert count(jj, "scan") == 2


def test_grad_prunes_carries_that_do_not_affect_the_loss():
    xs = np.arange(1.0, 6.0, dtype=F32)

    def carries(c2_matters, jit):
        g = plax.grad(lambda x: _two_carries(x, xs, c2_matters))
        j = plax.make_jaxpr(plax.jit(g) if jit else g)(F32(1.0))
        es = [e for e in eqns(j) if e.primitive.name == "scan"]
        assert len(es) == 2
        return {e.params["reverse"]: e.params["num_carry"] for e in es}

    for jit in (False, True):
        dead, live = carries(False, jit), carries(True, jit)
        # the reverse (transposed) scan carries only the cotangents that are nonzero
        assert dead[True] == 1 and live[True] == 2, (dead, live)
        assert dead[False] <= 2 and live[False] == 2, (dead, live)
    # make_jaxpr itself keeps the user's dead carry (as JAX does), jit'd or not
    def part(x, xs):
        (c1, c2), _ = lax.scan(lambda c, a: ((c[0] * a, c[1] + 1.0), c[0]), (x, x), xs)
        return c1

    for fun in (part, plax.jit(part)):
        (e,) = [e for e in eqns(plax.make_jaxpr(fun)(F32(1.0), xs)) if e.primitive.name == "scan"]
        assert e.params["num_carry"] == 2
    # and the pruned gradient is still right (against float64 finite differences)
    def ref(x):
        carry, ys = _ref_scan(lambda c, a: ((np.sin(c[0]) * a, c[1] * 2.0), c[0]), (x, x),
                              xs.astype(np.float64))
        return carry[0] + ys.sum()

    g = plax.grad(lambda x: _two_carries(x, xs, False))(F32(0.3))
    np.testing.assert_allclose(float(g), (ref(0.3 + 1e-5) - ref(0.3 - 1e-5)) / 2e-5, rtol=1e-4)


# --- disable_jit --------------------------------------------------------------------------
def test_scan_and_map_under_disable_jit_run_in_python():
    seen = []

    def body(c, x):
        seen.append((float(c), float(x)))  # concrete values: these would fail on tracers
        return c + x, c

    with plax.disable_jit():
        carry, ys = lax.scan(body, F32(0.0), np.array([1.0, 2.0, 3.0], F32), reverse=True)
        m = lax.map(lambda x: seen.append(("m", float(x))) or x * 2, np.array([4.0, 5.0], F32))
    assert float(carry) == 6.0
    close(ys, np.array([5.0, 3.0, 0.0], F32))
    close(m, np.array([8.0, 10.0], F32))
    assert seen == [(0.0, 3.0), (3.0, 2.0), (5.0, 1.0), ("m", 4.0), ("m", 5.0)]


# --- more: weak types, integer xs, forwarding, jaxprs of transformed scans ----------------
def test_scan_weak_typed_carry_and_ys_stay_weak():
    carry, ys = lax.scan(lambda c, _: (c + 1.0, 1.0), 0.0, None, length=3)
    assert carry.weak_type and ys.weak_type and ys.dtype == np.float32 and ys.shape == (3,)
    assert float(carry) == 3.0


def test_scan_integer_xs_grad_wrt_float_const():
    f = lambda w, ix: lax.scan(lambda c, i: (c * w + i.astype(jnp.float32), None),  # noqa
                               F32(0.0), ix)[0]
    ix = np.arange(4, dtype=I32)  # final carry is w^2 + 2w + 3
    assert float(plax.grad(f)(F32(2.0), ix)) == 6.0
    assert float(plax.jit(plax.grad(f))(F32(-1.0), ix)) == 0.0


def test_scan_forwarded_carry_and_ignored_inputs():
    def f(init, xs):
        (c, d), ys = lax.scan(lambda c, x: ((c[0], x * 0.0 + 5.0), x * 2.0), (init, init), xs)
        return c + d + jnp.sum(ys)

    g = plax.grad(f, argnums=(0, 1))(F32(1.0), np.ones(3, F32))
    close(g, (F32(1.0), np.full(3, 2.0, F32)))
    close(plax.jit(plax.grad(f, argnums=(0, 1)))(F32(1.0), np.ones(3, F32)), g)
    carry, ys = lax.scan(lambda c, x: ((), x + 1.0), (), np.arange(3, dtype=F32))
    assert carry == () and list(np.asarray(ys)) == [1.0, 2.0, 3.0]
    carry, ys = lax.scan(lambda c, x: (c * x, c), F32(2.0), np.array([3.0], F32))
    assert float(carry) == 6.0 and ys.shape == (1,) and float(ys[0]) == 2.0


def test_scan_vmap_length_only_batched_init():
    out = plax.vmap(lambda c0: lax.scan(lambda c, _: (c * 2.0, c + 1.0), c0, None, length=3))(
        np.array([1.0, -1.0], F32))
    close(out, (np.array([8.0, -8.0], F32), np.array([[2, 3, 5], [0, -1, -3]], F32)))


def test_scan_hessian_and_jacobians():
    a = np.array([0.5, -1.0, 2.0], F32)

    def f(x):  # sum_i (x . a_i)^2 over the rows of a_i = a * i
        return lax.scan(lambda c, i: (c + jnp.dot(x, a * i) ** 2, None), F32(0.0),
                        np.arange(1.0, 4.0, dtype=F32))[0]

    x = rand(3)
    close(plax.hessian(f)(x), 2 * 14.0 * np.outer(a, a), rtol=1e-5)  # sum i^2 = 14

    def g(x):
        return lax.scan(lambda c, w: (jnp.sin(c) * w, c * w), x, np.stack([a, a * 2, -a]))

    jr, jf = plax.jacrev(g)(x), plax.jacfwd(g)(x)
    close(jr, jf, rtol=1e-5)
    assert jr[0].shape == (3, 3) and jr[1].shape == (3, 3, 3)


def test_scan_jaxpr_under_jvp_and_vmap_stays_one_scan():
    xs = np.arange(3.0, dtype=F32)
    body = lambda c, a: (jnp.sin(c) * a, c)  # noqa: E731
    j = plax.make_jaxpr(lambda x, t: plax.jvp(lambda x: lax.scan(body, x, xs), (x,), (t,)))(
        F32(1.0), F32(1.0))
    (e,) = top(j, "scan")
    assert e.params["num_carry"] == 2 and e.params["length"] == 3 and len(e.outvars) == 4
    j = plax.make_jaxpr(plax.vmap(lambda x: lax.scan(body, x, xs)))(np.ones(4, F32))
    (e,) = top(j, "scan")
    assert e.params["num_carry"] == 1 and e.params["length"] == 3
    assert [tuple(v.aval.shape) for v in e.outvars] == [(4,), (3, 4)]
    if "linear" in e.params:  # plax keeps JAX's older `linear` param (one flag per input)
        assert len(e.params["linear"]) == len(e.invars)


def test_scan_weak_float_init_does_not_become_integer():
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        lax.scan(lambda c, x: (jnp.int32(1), None), 0.5, None, length=2)
    carry, _ = lax.scan(lambda c, x: (c.astype(jnp.float16), None), 0.5, None, length=2)
    assert carry.dtype == np.float16


def test_scan_transformations_keep_weak_types():
    g = plax.grad(lambda x: lax.scan(lambda c, _: (c * x, None), 1.0, None, length=3)[0])(2.0)
    assert float(g) == 12.0 and g.weak_type  # as for any grad of a weakly typed input
    out = plax.vmap(lambda n: lax.scan(lambda c, _: ((c[0] + n, c[1] * 2), None), (0, 1), None,
                                       length=2)[0])(np.array([0, 3, 5], I32))
    close(out, (np.array([0, 6, 10], I32), np.array([4, 4, 4], I32)))
    assert not out[0].weak_type and out[1].weak_type  # the unbatched carry stays weak


def test_scan_of_a_non_callable_is_refused():
    with pytest.raises(TypeError, match=r"lax.scan: f argument should be a callable\."):
        lax.scan(3, 0, None, length=2)
