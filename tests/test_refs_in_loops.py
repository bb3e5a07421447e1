"""Mutable references closed over by traced functions (jit, scan, fori_loop, while_loop,
cond, switch), discharged as JAX does: the value goes in, the final value comes out and is
written back. Also grad/vmap with references, empty_ref/free_ref/ds, and a training loop
keeping parameters and momentum in references. (Expected values are NumPy's, or JAX
0.10.2's behaviour where noted.)"""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax


def _closed_jit(r):
    @plax.jit
    def f(x):
        r[...] += x
        return r[...].sum()
    return f(1.0), f(2.0)


def _closed_scan(r):
    def body(c, x):
        r[...] += x
        return c + r[0], None
    return lax.scan(body, 0.0, jnp.arange(3.0))[0]


def _closed_fori(r):
    def body(i, c):
        r[i] = c
        return c + 1.0
    return lax.fori_loop(0, 3, body, 10.0)


def _closed_fori_traced_bounds(r):
    def body(i, c):
        r[i] = c * 2
        return c + 1.0
    return plax.jit(lambda n: lax.fori_loop(0, n, body, 1.0))(2)


def _closed_while(r):
    def body(v):
        r[...] += 1.0
        return v + 1
    return lax.while_loop(lambda v: v < 4, body, 0)


def _closed_cond(r):
    def yes():
        r[1] = 100.0
        return 1.0
    return lax.cond(True, yes, lambda: 2.0), lax.cond(False, yes, lambda: 2.0)


def _closed_switch(r):
    branches = [lambda: r.__setitem__(0, 5.0), lambda: r.__setitem__(2, 7.0), lambda: None]
    return [lax.switch(i, branches) for i in (1, 2)]


def _nested_jit_scan_cond(r):
    @plax.jit
    def f(xs):
        def body(c, x):
            lax.cond(x > 0.5, lambda: r.__setitem__(..., r[...] + x), lambda: None)
            return c + r[0], None
        return lax.scan(body, 0.0, xs)[0]
    return f(jnp.arange(3.0))


@pytest.mark.parametrize("program,result,final", [
    (_closed_jit, (3.0, 9.0), [3.0, 3.0, 3.0]),
    (_closed_scan, 4.0, [3.0, 3.0, 3.0]),       # r after adds of 0, 1, 2; r[0] 0, 1, 3
    (_closed_fori, 13.0, [10.0, 11.0, 12.0]),
    (_closed_fori_traced_bounds, 3.0, [2.0, 4.0, 0.0]),
    (_closed_while, 4, [4.0, 4.0, 4.0]),
    (_closed_cond, (1.0, 2.0), [0.0, 100.0, 0.0]),
    (_closed_switch, [None, None], [0.0, 0.0, 7.0]),
    (_nested_jit_scan_cond, 4.0, [3.0, 3.0, 3.0]),
])
def test_closed_over_reference_is_carried_and_written_back(program, result, final):
    r = plax.new_ref(jnp.zeros(3))
    out = program(r)
    if isinstance(result, (tuple, list)):
        assert [None if o is None else float(o) for o in out] == list(result)
    else:
        assert float(out) == result
    np.testing.assert_array_equal(np.asarray(r[...]), final)


def test_jit_closing_over_reference_is_not_retraced_and_updates_each_call():
    r = plax.new_ref(jnp.ones(2))
    traces = []

    @plax.jit
    def step(x):
        traces.append(1)
        r[...] = r[...] * x
        return r[...].sum()

    got = [float(step(2.0))]
    n_traces = len(traces)  # (the first trace stops where it meets the reference)
    got += [float(step(2.0)) for _ in range(3)]
    assert got == [4.0, 8.0, 16.0, 32.0] and len(traces) == n_traces
    np.testing.assert_array_equal(np.asarray(r[...]), [16.0, 16.0])
    # make_jaxpr and eval_shape read it as a constant and write nothing
    plax.make_jaxpr(step)(3.0)
    assert plax.eval_shape(step, 3.0).shape == ()
    np.testing.assert_array_equal(np.asarray(r[...]), [16.0, 16.0])


def test_reference_made_inside_jit_and_loops():
    @plax.jit
    def cumulative(xs):
        acc = plax.new_ref(jnp.zeros_like(xs))
        total = plax.new_ref(jnp.float32(0))

        def body(i, _):
            total[...] += xs[i]
            acc[i] = total[...]
            return None
        lax.fori_loop(0, xs.shape[0], body, None)
        return acc[...]

    xs = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    np.testing.assert_allclose(np.asarray(cumulative(xs)), np.cumsum(xs))


def test_ds_with_a_traced_start_inside_loops():
    assert repr(plax.ds(1, 2, 2)) == "Slice(start=1, size=2, stride=2)"
    assert plax.ds(None) == slice(None) and repr(plax.ds(3)) == "Slice(start=0, size=3, stride=1)"
    r = plax.new_ref(jnp.arange(6.0))

    def loop():
        def body(i, c):
            r[plax.ds(i * 2, 2)] = r[plax.ds(i * 2, 2)] + 1.0
            return c
        lax.fori_loop(0, 3, body, 0)

    loop()
    plax.jit(loop)()
    np.testing.assert_array_equal(np.asarray(r[...]), np.arange(6.0) + 2)
    np.testing.assert_array_equal(np.asarray(r[plax.ds(1, 3, 2)]), [3.0, 5.0, 7.0])
    m = plax.new_ref(jnp.arange(12.0).reshape(3, 4))
    m[plax.ds(1, 2), plax.ds(2, 2)] = jnp.zeros((2, 2))
    want = np.arange(12.0).reshape(3, 4)
    want[1:3, 2:4] = 0
    np.testing.assert_array_equal(np.asarray(m[...]), want)
    np.testing.assert_array_equal(np.asarray(m[1, plax.ds(0, 2)]), want[1, 0:2])


def test_grad_with_references():
    def accumulate(x):
        acc = plax.new_ref(0.0)

        def body(c, i):
            acc[...] += x * i
            return c, None
        lax.scan(body, 0.0, jnp.arange(3.0))
        return acc[...] * x

    # d/dx (3 x^2) = 6x
    assert float(plax.grad(accumulate)(2.0)) == pytest.approx(12.0)
    assert float(plax.grad(plax.jit(accumulate))(2.0)) == pytest.approx(12.0)
    r = plax.new_ref(jnp.zeros(3))
    g = plax.grad(lambda x: (r.__setitem__(0, 5.0), x * r[0])[1])(1.0)
    assert float(g) == 5.0 and float(r[0]) == 5.0
    with pytest.raises(ValueError, match="set/swap operation with a differentiated value"):
        plax.grad(lambda x: (r.__setitem__(0, x), x)[1])(1.0)
    np.testing.assert_array_equal(np.asarray(r[...]), [5.0, 0.0, 0.0])
    # ... also through a jit (closed over, or passed in) and a loop inside it
    g = plax.grad(plax.jit(lambda x: (r.__setitem__(1, 9.0), x * r[1])[1]))(1.0)
    assert float(g) == 9.0
    g = plax.grad(lambda x: plax.jit(lambda q, x: (q.__setitem__(2, 4.0), x * q[2])[1])(r, x))(1.0)
    assert float(g) == 4.0
    np.testing.assert_array_equal(np.asarray(r[...]), [5.0, 9.0, 4.0])
    with pytest.raises(ValueError, match="set/swap operation with a differentiated value"):
        plax.grad(plax.jit(lambda x: (r.__setitem__(1, x), x)[1]))(1.0)
    v, g = plax.value_and_grad(lambda x: plax.jit(lambda x: lax.fori_loop(
        0, 3, lambda i, c: (r.__setitem__(i, 2.0), c * x)[1], 1.0))(x))(2.0)
    assert (float(v), float(g)) == (8.0, 12.0)
    np.testing.assert_array_equal(np.asarray(r[...]), [2.0, 2.0, 2.0])


def test_vmap_of_functions_with_their_own_references():
    def f(x):
        acc = plax.new_ref(jnp.float32(0))

        def body(c, i):
            acc[...] += x * i
            return c, None
        lax.scan(body, 0.0, jnp.arange(3.0))
        return acc[...]

    np.testing.assert_allclose(np.asarray(plax.vmap(f)(jnp.arange(3.0))), [0.0, 3.0, 6.0])
    np.testing.assert_allclose(np.asarray(plax.jit(plax.vmap(f))(jnp.arange(3.0))),
                               [0.0, 3.0, 6.0])
    # Reads of a reference made outside: fine, in a loop or a jit too.
    r0 = plax.new_ref(jnp.float32(2))
    read = plax.vmap(lambda x: lax.scan(lambda c, _: (c + r0[...] * x, None), 0.0, None,
                                        length=2)[0])(jnp.arange(3.0))
    np.testing.assert_allclose(np.asarray(read), [0.0, 4.0, 8.0])
    np.testing.assert_allclose(np.asarray(plax.vmap(plax.jit(lambda x: r0[...] * x))(
        jnp.arange(3.0))), [0.0, 2.0, 4.0])
    with pytest.raises(ValueError, match="vmapped value on an unbatched array reference"):
        plax.jit(plax.vmap(lambda x: r0.__setitem__(..., x)))(jnp.arange(3.0))
    # A reference made inside the vmapped function comes out holding the batch (as in JAX).
    r = plax.vmap(lambda x: plax.new_ref(x * 2))(jnp.arange(3.0))
    assert plax.typeof(r) == plax.ref.AbstractRef(plax.typeof(jnp.zeros(3)))
    r[...] += 1
    np.testing.assert_array_equal(np.asarray(r[...]), [1.0, 3.0, 5.0])


@pytest.mark.parametrize("program,error,match", [
    (lambda r: plax.jit(lambda: r)(), ValueError, "mutable array references cannot be returned"),
    (lambda r: lax.cond(True, lambda: r, lambda: r), ValueError,
     "mutable array references cannot be returned"),
    (lambda r: lax.while_loop(lambda i: (r.__setitem__(0, 1.0), i < 2)[1], lambda i: i + 1, 0),
     ValueError, "cond_fun wrote to a mutable array reference"),
    (lambda r: lax.scan(lambda c, x: (c, None), r, None, length=1), ValueError,
     "mutable array references cannot be returned"),
    (lambda r: lax.fori_loop(0, 2, lambda i, q: q, r), ValueError,
     "mutable array references cannot be returned"),
    (lambda r: plax.empty_ref(plax.typeof(jnp.ones(2))), NotImplementedError,
     "Evaluation rule for 'empty_ref' not implemented"),
])
def test_reference_refusals(program, error, match):
    r = plax.new_ref(jnp.zeros(2))
    with pytest.raises(error, match=match):
        program(r)
    np.testing.assert_array_equal(np.asarray(r[...]), [0.0, 0.0])


def test_reference_passed_to_cond_is_written_through():
    r = plax.new_ref(jnp.zeros(3))
    out = lax.cond(True, lambda q, x: (q.__setitem__(1, x), x * 2)[1],
                   lambda q, x: x, r, 5.0)
    assert float(out) == 10.0
    plax.jit(lambda i: lax.switch(i, [lambda q: q.__setitem__(0, 1.0),
                                      lambda q: q.__setitem__(2, 3.0)], r))(1)
    np.testing.assert_array_equal(np.asarray(r[...]), [0.0, 5.0, 3.0])


def test_empty_ref_and_free_ref():
    @plax.jit
    def f(x):
        r = plax.empty_ref(plax.typeof(x))
        r[...] = x * 2
        y = r[...]
        assert plax.free_ref(r) == ()
        return y

    np.testing.assert_array_equal(np.asarray(f(jnp.ones(3))), [2.0, 2.0, 2.0])
    assert plax.ref.empty_ref is plax.empty_ref and plax.ref.free_ref is plax.free_ref


def _loss(params, x, y):
    w, b = params
    return jnp.mean((jnp.tanh(x @ w) @ b - y) ** 2)


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 3)).astype(np.float32)
    y = np.sin(x.sum(1, keepdims=True)).astype(np.float32)
    params = (rng.normal(size=(3, 8)).astype(np.float32) * 0.5,
              rng.normal(size=(8, 1)).astype(np.float32) * 0.5)
    return x, y, params


def _functional_losses(n):
    x, y, params = _data()
    mom = tuple(np.zeros_like(p) for p in params)
    losses = []
    for _ in range(n):
        loss, g = plax.value_and_grad(_loss)(params, x, y)
        mom = tuple(0.9 * m + gi for m, gi in zip(mom, g))
        params = tuple(p - 0.05 * m for p, m in zip(params, mom))
        losses.append(float(loss))
    return losses


def test_training_loop_with_state_in_references_matches_the_functional_one():
    x, y, params = _data()
    p_refs = [plax.new_ref(p) for p in params]
    m_refs = [plax.new_ref(jnp.zeros_like(p)) for p in params]

    @plax.jit
    def step(p_refs, m_refs, x, y):
        loss, g = plax.value_and_grad(_loss)(tuple(p[...] for p in p_refs), x, y)
        for p, m, gi in zip(p_refs, m_refs, g):
            m[...] = 0.9 * m[...] + gi
            p[...] -= 0.05 * m[...]
        return loss

    losses = [float(step(p_refs, m_refs, x, y)) for _ in range(8)]
    want = _functional_losses(16)
    np.testing.assert_allclose(losses, want[:8], rtol=1e-5)

    # The next 8 steps in one program: a fori_loop closing over the same references.
    log = plax.new_ref(jnp.zeros(8))

    @plax.jit
    def many(x, y):
        def body(i, _):
            log[plax.ds(i, 1)] = step(p_refs, m_refs, x, y)[None]
            return None
        lax.fori_loop(0, 8, body, None)

    many(x, y)
    np.testing.assert_allclose(np.asarray(log[...]), want[8:], rtol=1e-5)


def test_vmap_over_reference_arguments_writes_each_example_back():
    def f(q, x):
        q[...] += x
        q[0] = q[0] * 10
        return q[...].sum()

    r = plax.new_ref(jnp.arange(6.0).reshape(2, 3))
    want = np.arange(6.0).reshape(2, 3)
    out = plax.vmap(f)(r, jnp.arange(2.0))  # one row per example
    want += np.arange(2.0)[:, None]
    want[:, 0] *= 10
    np.testing.assert_allclose(np.asarray(out), want.sum(1))
    np.testing.assert_allclose(np.asarray(r[...]), want)
    out = plax.jit(plax.vmap(f, in_axes=(1, None)))(r, 1.0)  # one column per example
    want += 1
    want[0] *= 10
    np.testing.assert_allclose(np.asarray(out), want.sum(0))
    np.testing.assert_allclose(np.asarray(r[...]), want)


def test_differentiating_with_respect_to_a_reference_is_refused():
    r = plax.new_ref(jnp.ones(3))
    with pytest.raises(ValueError, match=r"Expected cotangent type Ref\{float32\[3\]\} but got "
                                         r"float32\[3\]"):
        plax.grad(lambda q: q[...].sum())(r)
    # not differentiated (another argnum): fine
    g = plax.grad(lambda x, q: (q.__setitem__(0, 2.0), x * q[0])[1])(3.0, r)
    assert float(g) == 2.0 and float(r[0]) == 2.0


def test_bodies_only_reading_a_closed_over_reference_are_traced_once():
    # A body that only reads a reference from outside takes its value as a constant (JAX
    # traces such bodies once: one popping from a list would fail a second time), and a
    # later call sees the reference's new value.
    r = plax.new_ref(jnp.float32(2.0))
    calls = []

    def body(c, x):
        calls.append(1)
        return c + r[...] * x, None

    def f(x):
        return lax.scan(body, 0.0, x)[0]
    xs = jnp.arange(3.0)
    assert float(f(xs)) == 6.0
    r[...] = 3.0
    assert float(f(xs)) == 9.0
    assert len(calls) == 2  # (once per call: the first trace is not reused)

    jcalls = []

    @plax.jit
    def g(x):
        jcalls.append(1)
        return x * r[...]
    assert float(g(2.0)) == 6.0
    assert len(jcalls) == 1
    r[...] = 4.0
    assert float(g(2.0)) == 8.0
    assert float(g(3.0)) == 12.0
    # grad through a reference made inside the differentiated function and read by a jit
    def h(v):
        ref = plax.new_ref(v)
        return plax.jit(lambda: jnp.sin(ref[...]))()
    grads = plax.grad(h)(0.5)
    np.testing.assert_allclose(grads, np.cos(0.5), rtol=1e-6)


def test_aot_stages_of_a_jit_reading_a_closed_over_reference_are_refused():
    r = plax.new_ref(jnp.float32(2.0))
    f = plax.jit(lambda x: x * r[...])
    with pytest.raises(TypeError, match="closes over a mutable array reference"):
        f.lower(1.0)
    assert float(f(1.0)) == 2.0
