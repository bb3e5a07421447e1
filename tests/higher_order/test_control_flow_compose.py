"""Control flow composed: nested loops, while inside cond inside scan, checkpoint and custom
derivatives inside bodies, vmap/grad/jvp/linearize/jit of everything and everything inside
jit, and disable_jit running nested constructs in Python."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax

from control_flow_util import close, count, grads, rand, top

F32 = np.float32
I32 = np.int32


# --- nesting ------------------------------------------------------------------------------
def _nested_scans(w, m):
    def row(acc, r):
        def col(c, v):
            c = jnp.tanh(c * w + v)
            return c, c
        c, cs = lax.scan(col, acc, r)
        return c, jnp.sum(cs)
    return lax.scan(row, F32(0.0), m)


def _nested_ref(w, m):
    acc, outs = 0.0, []
    for r in m:
        cs = []
        for v in r:
            acc = np.tanh(acc * w + v)
            cs.append(acc)
        outs.append(np.sum(cs))
    return acc, np.array(outs)


def test_nested_scans_values_and_grads():
    w, m = F32(0.7), rand(3, 4)
    close(_nested_scans(w, m), _nested_ref(w, m), rtol=1e-5)
    close(plax.jit(_nested_scans)(w, m), _nested_ref(w, m), rtol=1e-5)
    grads(lambda w, m: _nested_scans(w, m), (w, m), order=1)


def _halvings(x):
    """while x >= 1: x /= 2, counting the steps."""
    return lax.while_loop(lambda c: c[0] >= 1.0, lambda c: (c[0] * 0.5, c[1] + 1), (x, 0))


def _while_in_cond_in_scan(xs):
    def body(total, x):
        y, k = lax.cond(x > 0, _halvings, lambda x: (-x, 0), x)
        return total + k, y
    return lax.scan(body, 0, xs)


def _while_in_cond_in_scan_ref(xs):
    total, ys = 0, []
    for x in xs:
        if x > 0:
            k = 0
            while x >= 1.0:
                x, k = x * 0.5, k + 1
        else:
            x, k = -x, 0
        total += k
        ys.append(x)
    return I32(total), np.array(ys, F32)


def test_while_inside_cond_inside_scan():
    xs = np.array([3.0, -2.0, 17.0, 0.5, -0.1, 1.0], F32)
    want = _while_in_cond_in_scan_ref(xs)
    close(_while_in_cond_in_scan(xs), want)
    close(plax.jit(_while_in_cond_in_scan)(xs), want)
    # vmap over a batch of sequences: the cond predicate and the while predicate are batched
    xss = np.stack([xs, xs[::-1] * 3.0, -xs])
    out = plax.vmap(_while_in_cond_in_scan)(xss)
    refs = [_while_in_cond_in_scan_ref(r) for r in xss]
    close(out, (np.array([r[0] for r in refs]), np.stack([r[1] for r in refs])))
    j = plax.make_jaxpr(_while_in_cond_in_scan)(xs)
    assert [e.primitive.name for e in top(j, "scan")] == ["scan"]
    assert not top(j, "cond") and not top(j, "while")
    assert count(j, "scan") == 1 and count(j, "cond") == 1 and count(j, "while") == 1


def test_cond_inside_while_inside_jit():
    def f(x, n):
        def body(c):
            i, v = c
            v = lax.cond(i % 2 == 0, lambda v: v * 3.0, lambda v: v - 1.0, v)
            return i + 1, v
        return lax.while_loop(lambda c: c[0] < n, body, (0, x))[1]

    def ref(x, n):
        for i in range(n):
            x = x * 3.0 if i % 2 == 0 else x - 1.0
        return x

    g = plax.jit(f)
    for n in (0, 1, 4, 5):
        close(g(F32(0.5), n), F32(ref(0.5, n)), rtol=1e-6)
    # forward-mode through it
    _, t = plax.jvp(lambda x: g(x, 5), (F32(0.5),), (F32(1.0),))
    close(t, F32(27.0), rtol=1e-6)


def test_fori_inside_scan_inside_fori_reverse_mode():
    # concrete fori bounds everywhere: reverse-mode differentiable
    def f(x, xs):
        def body(c, a):
            c = lax.fori_loop(0, 2, lambda i, c: jnp.sin(c) * a + 0.1 * i, c)
            return c, c * c
        def outer(i, c):
            c, ys = lax.scan(body, c, xs)
            return c + jnp.sum(ys) * 0.01
        return lax.fori_loop(0, 2, outer, x)

    def ref(x, xs):
        for _ in range(2):
            ys = []
            for a in xs:
                for i in range(2):
                    x = np.sin(x) * a + 0.1 * i
                ys.append(x * x)
            x = x + np.sum(ys) * 0.01
        return x

    x, xs = F32(0.3), rand(4, seed=1)
    close(f(x, xs), ref(np.float64(x), xs.astype(np.float64)), rtol=1e-5)
    g = plax.grad(f)(x, xs)
    fd = (ref(np.float64(x) + 1e-6, xs.astype(np.float64)) -
          ref(np.float64(x) - 1e-6, xs.astype(np.float64))) / 2e-6
    np.testing.assert_allclose(float(g), fd, rtol=1e-3)
    grads(f, (x, xs), order=1)


def test_while_inside_scan_forward_ok_reverse_error():
    def f(x):
        def body(c, a):
            k, p = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * a), (0, c))
            return p, k
        return lax.scan(body, x, np.array([1.1, 0.9], F32))[0]

    _, t = plax.jvp(f, (F32(2.0),), (F32(1.0),))
    close(t, F32((1.1 * 0.9) ** 3), rtol=1e-5)
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for "
                                         "lax.while_loop or lax.fori_loop"):
        plax.grad(f)(F32(2.0))


# --- checkpoint, custom derivatives inside bodies -----------------------------------------
def _cell(h, x):
    h = jnp.tanh(jnp.sin(h) * 1.3 + x)
    return h, h * 2.0


def test_checkpoint_inside_scan_body():
    h0, xs = rand(3), rand(5, 3, seed=1)
    loss = lambda cell: lambda h0, xs: jnp.sum(lax.scan(cell, h0, xs)[1])  # noqa: E731
    plain = plax.grad(loss(_cell), argnums=(0, 1))(h0, xs)
    remat = plax.grad(loss(plax.checkpoint(_cell)), argnums=(0, 1))(h0, xs)
    close(remat, plain, rtol=1e-5)
    close(plax.jit(plax.grad(loss(plax.checkpoint(_cell)), argnums=(0, 1)))(h0, xs), plain,
          rtol=1e-5)
    grads(loss(plax.checkpoint(_cell)), (h0, xs), order=1)
    j = plax.make_jaxpr(plax.grad(loss(plax.checkpoint(_cell))))(h0, xs)
    assert count(j, "scan") == 2


@plax.custom_jvp
def _cube(x):
    return x ** 3


@_cube.defjvp
def _cube_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _cube(x), 10.0 * t  # deliberately not 3x^2: proves the custom rule is used


@plax.custom_vjp
def _clip_grad(x):
    return jnp.sin(x)


def _clip_fwd(x):
    return jnp.sin(x), jnp.cos(x)


def _clip_bwd(cos_x, g):
    return (jnp.clip(g * cos_x, -0.5, 0.5),)


_clip_grad.defvjp(_clip_fwd, _clip_bwd)


def test_custom_jvp_inside_scan_cond_and_while():
    xs = np.array([0.5, 1.5, 2.0], F32)
    f = lambda a: lax.scan(lambda c, x: (c + _cube(a * x), None), F32(0.0), xs)[0]  # noqa
    close(f(F32(1.0)), np.sum(xs ** 3), rtol=1e-5)
    close(plax.grad(f)(F32(1.0)), 10.0 * np.sum(xs), rtol=1e-5)
    close(plax.jit(plax.grad(f))(F32(1.0)), 10.0 * np.sum(xs), rtol=1e-5)
    g = lambda x: lax.cond(x > 0, _cube, jnp.sin, x)  # noqa: E731
    close(plax.grad(g)(F32(0.4)), F32(10.0))
    h = lambda x: lax.while_loop(lambda c: c[0] < 2,  # noqa: E731
                                 lambda c: (c[0] + 1, _cube(c[1])), (0, x))[1]
    out, t = plax.jvp(h, (F32(1.0),), (F32(1.0),))
    close((out, t), (F32(1.0), F32(100.0)))


def test_custom_vjp_inside_scan_cond_and_fori():
    xs = np.array([0.1, 3.0, -2.0, 0.4], F32)  # g * cos(x) is clipped for some of them
    f = lambda xs: lax.scan(lambda c, x: (c + _clip_grad(x), None), F32(0.0), xs)[0]  # noqa
    close(f(xs), np.sum(np.sin(xs)), rtol=1e-5)
    want = np.clip(np.cos(xs), -0.5, 0.5)
    close(plax.grad(f)(xs), want, rtol=1e-5)
    close(plax.jit(plax.grad(f))(xs), want, rtol=1e-5)
    g = lambda x: lax.cond(x < 10.0, lambda x: 3.0 * _clip_grad(x), jnp.cos, x)  # noqa: E731
    close(plax.grad(g)(F32(0.1)), F32(0.5))  # 3 * cos(0.1) clipped to 0.5
    k = lambda x: lax.fori_loop(0, 3, lambda i, c: _clip_grad(c), x)  # noqa: E731
    x = F32(0.2)
    s1 = np.sin(x)
    s2 = np.sin(s1)
    want = np.clip(np.clip(np.clip(np.cos(s2), -.5, .5) * np.cos(s1), -.5, .5) * np.cos(x),
                   -.5, .5)
    close(plax.grad(k)(x), want, rtol=1e-5)


# --- transformations of composites --------------------------------------------------------
def _everything(x, xs, i, n):
    """cond, switch, while, fori (concrete and traced bounds), scan and map together."""
    y = lax.cond(x > 0, lambda x: x * 2.0, lambda x: -x, x)
    y = lax.switch(i, [lambda v: v + 1.0, lambda v: v * v, lambda v: jnp.sin(v)], y)
    _, y = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 0.9), (0, y))
    y = lax.fori_loop(0, 3, lambda j, c: c + 0.5 * j, y)
    y = lax.fori_loop(0, n, lambda j, c: c - 0.25, y)
    c, ys = lax.scan(lambda c, a: (c * 0.5 + a, jnp.cos(c)), y, xs)
    zs = lax.map(lambda v: v * c, ys, batch_size=2)
    return c, zs


def _everything_ref(x, xs, i, n):
    y = x * 2.0 if x > 0 else -x
    y = [y + 1.0, y * y, np.sin(y)][int(np.clip(i, 0, 2))]
    for _ in range(n):
        y = y * 0.9
    for j in range(3):
        y = y + 0.5 * j
    y = y - 0.25 * max(n, 0)
    c, ys = y, []
    for a in xs:
        ys.append(np.cos(c))
        c = c * 0.5 + a
    return F32(c), np.array(ys, F32) * F32(c)


def test_jit_of_everything_matches_eager_and_reference():
    xs = rand(5, seed=1)
    f = plax.jit(_everything)
    close(_everything(F32(0.8), xs, 1, 3), _everything_ref(F32(0.8), xs, 1, 3), rtol=1e-5)
    for x, i, n in ((0.8, 1, 3), (-0.4, 7, 0), (1.2, -1, 2)):
        close(f(F32(x), xs, i, n), _everything_ref(F32(x), xs, i, n), rtol=1e-5)


def test_jit_inside_bodies_and_bodies_inside_jit():
    inner = plax.jit(lambda c, x: (jnp.sin(c) + x, c * x))
    xs = rand(4, seed=2)
    c = np.float64(0.3)
    ys = []
    for a in xs:
        ys.append(c * a)
        c = np.sin(c) + a
    want = (F32(c), np.array(ys, F32))
    close(lax.scan(inner, F32(0.3), xs), want, rtol=1e-5)
    close(plax.jit(lambda c, xs: lax.scan(inner, c, xs))(F32(0.3), xs), want, rtol=1e-5)
    close(plax.jit(lambda x: lax.cond(x > 0, plax.jit(jnp.sin), jnp.cos, x))(F32(0.5)),
          np.sin(F32(0.5)), rtol=1e-6)
    j = plax.make_jaxpr(plax.jit(lambda c, xs: lax.scan(inner, c, xs)))(F32(0.3), xs)
    assert count(j, "scan") == 1 and count(j, "sin") == 1


def test_vmap_of_everything():
    xs = rand(5, seed=1)
    x = np.array([0.8, -0.4, 1.2], F32)
    i = np.array([1, 7, -1], I32)
    n = np.array([3, 0, 2], I32)
    out = plax.vmap(_everything, in_axes=(0, None, 0, 0))(x, xs, i, n)
    refs = [_everything_ref(x[k], xs, i[k], int(n[k])) for k in range(3)]
    close(out, (np.array([r[0] for r in refs]), np.stack([r[1] for r in refs])), rtol=1e-5)
    out = plax.jit(plax.vmap(_everything, in_axes=(None, 0, None, None)))(
        F32(0.8), np.stack([xs, -xs]), 1, 3)
    refs = [_everything_ref(F32(0.8), v, 1, 3) for v in (xs, -xs)]
    close(out, (np.array([r[0] for r in refs]), np.stack([r[1] for r in refs])), rtol=1e-5)


def _diffable(x, xs):
    """Like _everything without dynamic loop bounds: reverse-mode differentiable."""
    y = lax.cond(x > 0, lambda x: x * 2.0, lambda x: -x, x)
    y = lax.switch(1, [lambda v: v + 1.0, lambda v: v * jnp.sin(v), jnp.sin], y)
    y = lax.fori_loop(0, 3, lambda j, c: c * 0.9 + 0.1 * j, y)
    c, ys = lax.scan(lambda c, a: (c * 0.5 + a * c, jnp.cos(c)), y, xs)
    zs = lax.map(lambda v: v * c, ys, batch_size=2)
    return c + jnp.sum(zs)


def test_grad_jvp_linearize_vjp_of_composite():
    x, xs = F32(0.8), rand(5, seed=1, scale=0.3)
    grads(_diffable, (x, xs), order=1, modes=("fwd",))  # jvp vs finite differences; below:
    # grad, vjp and linearize against that jvp
    g = plax.grad(_diffable, argnums=(0, 1))(x, xs)
    close(plax.jit(plax.grad(_diffable, argnums=(0, 1)))(x, xs), g, rtol=1e-5)
    tx, txs = F32(1.0), rand(5, seed=2)
    out, t = plax.jvp(_diffable, (x, xs), (tx, txs))
    close(t, float(g[0]) * tx + float(np.dot(np.asarray(g[1]), txs)), rtol=1e-4)
    out_l, f_jvp = plax.linearize(_diffable, x, xs)
    close(out_l, out, rtol=1e-6)
    close(f_jvp(tx, txs), t, rtol=1e-5)
    _, vjp_fun = plax.vjp(_diffable, x, xs)
    close(vjp_fun(F32(2.0)), (2 * g[0], 2 * g[1]), rtol=1e-5)


def test_vmap_of_grad_and_grad_of_vmap_of_scan_with_cond():
    def f(w, xs):
        return lax.scan(lambda c, x: (lax.cond(x > 0, lambda c: c * w, lambda c: c + w, c), c),
                        F32(1.0), xs)[0]

    def ref_grad(w, xs):  # d/dw of the final carry, by forward-mode on the Python loop
        c, dc = 1.0, 0.0
        for x in xs:
            c, dc = (c * w, dc * w + c) if x > 0 else (c + w, dc + 1.0)
        return dc

    xss = np.array([[1.0, -1.0, 2.0], [-1.0, -1.0, 3.0], [0.5, 0.5, 0.5]], F32)
    w = F32(1.3)
    per = plax.vmap(plax.grad(f), in_axes=(None, 0))(w, xss)
    close(per, np.array([ref_grad(w, r) for r in xss], F32), rtol=1e-5)
    tot = plax.grad(lambda w: jnp.sum(plax.vmap(f, in_axes=(None, 0))(w, xss)))(w)
    close(tot, np.sum(per), rtol=1e-5)
    j = plax.make_jaxpr(plax.jit(plax.grad(f)))(w, xss[0])
    assert count(j, "scan") == 2


# --- disable_jit --------------------------------------------------------------------------
def test_disable_jit_runs_nested_control_flow_in_python():
    seen = []

    def halve(c):
        seen.append(float(c[0]))  # a concrete value: would fail on a tracer
        return c[0] * 0.5, c[1] + 1

    def body(total, x):
        y, k = lax.cond(x > 0, lambda x: lax.while_loop(lambda c: c[0] >= 1.0, halve, (x, 0)),
                        lambda x: (-x, 0), x)
        return total + k, y

    with plax.disable_jit():
        out = plax.jit(lambda xs: lax.scan(body, 0, xs))(np.array([3.0, -1.0, 2.0], F32))
    close(out, _while_in_cond_in_scan_ref(np.array([3.0, -1.0, 2.0], F32)))
    assert seen == [3.0, 1.5, 2.0, 1.0]


# --- a scan inside a checkpoint or a jit that is transposed whole ---------------------------
def _scan_loss(c, xs):
    return lax.scan(lambda c, x: (jnp.sin(c) * x + c, c * c), c, xs)[1].sum()


def _scan_loss_ref_grad(c, xs, eps=1e-4):
    def ref(c):
        total = 0.0
        for x in np.asarray(xs, np.float64):
            total += c * c
            c = np.sin(c) * x + c
        return total
    return (ref(c + eps) - ref(c - eps)) / (2 * eps)


@pytest.mark.parametrize("wrap", ["checkpoint", "checkpoint_of_jit", "jit_in_checkpoint_body",
                                  "nothing_saveable_body"])
def test_grad_of_scan_transposed_whole(wrap):
    """The jvp scan (primal and tangent carries together) inside a checkpoint is transposed
    as one equation: its primal carries must run forward first."""
    xs = np.linspace(0.1, 1.0, 5).astype(F32)
    if wrap == "checkpoint":
        f = plax.checkpoint(_scan_loss)
    elif wrap == "checkpoint_of_jit":
        f = plax.checkpoint(plax.jit(_scan_loss))
    elif wrap == "jit_in_checkpoint_body":
        f = plax.checkpoint(lambda c, xs: plax.jit(_scan_loss)(c, xs) * 2.0)
    else:
        policy = plax.checkpoint_policies.nothing_saveable
        f = lambda c, xs: lax.scan(plax.checkpoint(  # noqa: E731
            lambda c, x: (jnp.sin(c) * x + c, c * c), policy=policy), c, xs)[1].sum()
    scale = 2.0 if wrap == "jit_in_checkpoint_body" else 1.0
    want = scale * _scan_loss_ref_grad(0.4, xs)
    close(plax.grad(f)(F32(0.4), xs), want, rtol=1e-3, atol=1e-4)
    close(plax.jit(plax.grad(f))(F32(0.4), xs), want, rtol=1e-3, atol=1e-4)


def test_linear_transpose_of_a_linear_scan_is_its_adjoint():
    def lin(v):
        return lax.scan(lambda c, x: (c * 2.0 + x, c * 3.0), F32(0.0), v)[1]
    n = 4
    A = np.stack([np.asarray(lin(np.eye(n, dtype=F32)[i])) for i in range(n)], 1)  # A @ e_i
    (adj,) = plax.linear_transpose(lin, np.ones(n, F32))(np.arange(1.0, n + 1, dtype=F32))
    close(adj, A.T @ np.arange(1.0, n + 1))
