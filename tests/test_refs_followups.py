"""Follow-ups to mutable references: vmap/jit over a split StatefulPRNG (JAX's documented
values), references read or written inside checkpoint and custom_jvp/custom_vjp bodies,
``plax.ds`` in plain-array indexing with traced starts, static out-of-bounds reference
indices, and SPMD code reading the sharding of types that are not arrays. (Expected values
are NumPy's, closed forms, or JAX 0.10.2's where noted.)"""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental import random as xrandom


# --- vmap over a split StatefulPRNG ------------------------------------------------------
def _draw(rng, x):
    return x + rng.uniform()


@pytest.mark.parametrize("transform", [
    lambda f: plax.vmap(f),
    lambda f: plax.jit(plax.vmap(f)),
    lambda f: plax.vmap(plax.jit(f)),
])
def test_vmap_over_a_split_stateful_rng_matches_jax(transform):
    split = xrandom.stateful_rng(123).split(3)
    out = transform(_draw)(split, jnp.zeros(3))
    # JAX 0.10.2's documented values (StatefulPRNG.split's example)
    np.testing.assert_allclose(np.asarray(out), [0.35525954, 0.21937883, 0.5336956], rtol=1e-6)
    # ... which are uniform draws from each example's key folded with its counter 0
    want = [plax.random.uniform(plax.random.fold_in(k, 0)) for k in split._base_key]
    np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(split._counter[...]), [1, 1, 1])
    again = transform(_draw)(split, jnp.zeros(3))  # the counters moved on
    want = [plax.random.uniform(plax.random.fold_in(k, 1)) for k in split._base_key]
    np.testing.assert_allclose(np.asarray(again), np.asarray(want), rtol=1e-6)


def test_vmap_over_an_unsplit_stateful_rng_is_refused():
    with pytest.raises(ValueError, match="performing an addupdate operation with vmapped "
                                         "value on an unbatched array reference"):
        plax.vmap(_draw, in_axes=(None, 0))(xrandom.stateful_rng(1), jnp.zeros(3))
    r = plax.new_ref(jnp.float32(0.0))
    with pytest.raises(ValueError, match="performing an addupdate operation with vmapped"):
        plax.vmap(lambda x: r.addupdate(x))(jnp.ones(2))
    with pytest.raises(ValueError, match="performing a set/swap operation with vmapped"):
        plax.vmap(lambda x: r.__setitem__(..., x))(jnp.ones(2))


# --- references inside checkpoint bodies ---------------------------------------------------
def _ckpt_read(r):
    return plax.checkpoint(lambda x: r[...] * x)(2.0)


def _ckpt_grad_read(r):  # d/dx r sin(x) = r cos(x)
    return plax.grad(plax.checkpoint(lambda x: r[...] * jnp.sin(x)))(2.0)


def _jit_grad_ckpt_read(r):
    return plax.jit(plax.grad(plax.remat(lambda x: r[...] * jnp.sin(x))))(2.0)


def _ckpt_write(r):
    return plax.checkpoint(lambda x: (r.__setitem__(..., x), x)[1])(2.0)


def _jit_ckpt_write(r):
    return plax.jit(plax.checkpoint(lambda x: (r.__setitem__(..., x * 4), x)[1]))(2.0)


def _grad_ckpt_write_const(r):  # the stored 7 does not depend on x: grad is r = 7
    return plax.grad(plax.checkpoint(lambda x: (r.__setitem__(..., 7.0), x * r[...])[1]))(2.0)


def _ckpt_ref_argument(r):
    return plax.checkpoint(lambda q, x: (q.__setitem__(..., q[...] + x), x * 3)[1])(r, 2.0)


def _vmap_ckpt_read(r):
    return plax.vmap(plax.checkpoint(lambda x: r[...] * x))(jnp.arange(3.0))


def _grad_ckpt_in_scan(r):  # sum_k r sin(k y): derivative sum_k r k cos(k y) at y = 1
    return plax.grad(lambda y: lax.scan(
        lambda c, k: (c + plax.checkpoint(lambda z: r[...] * jnp.sin(z))(k * y), None),
        0.0, jnp.arange(3.0))[0])(1.0)


@pytest.mark.parametrize("program,result,final", [
    (_ckpt_read, 6.0, 3.0),
    (_ckpt_grad_read, 3 * np.cos(2.0), 3.0),
    (_jit_grad_ckpt_read, 3 * np.cos(2.0), 3.0),
    (_ckpt_write, 2.0, 2.0),
    (_jit_ckpt_write, 2.0, 8.0),
    (_grad_ckpt_write_const, 7.0, 7.0),
    (_ckpt_ref_argument, 6.0, 5.0),
    (_vmap_ckpt_read, [0.0, 3.0, 6.0], 3.0),
    (_grad_ckpt_in_scan, sum(3 * k * np.cos(k) for k in range(3)), 3.0),
])
def test_checkpoint_reads_and_writes_references_as_jax(program, result, final):
    r = plax.new_ref(jnp.float32(3.0))
    np.testing.assert_allclose(np.asarray(program(r)), result, rtol=1e-6)
    assert float(r[...]) == final


def test_checkpoint_of_a_stateful_rng_draws_as_outside():
    base = plax.random.key(0)
    want = 2.0 + float(plax.random.uniform(plax.random.fold_in(base, 0)))
    rng = xrandom.stateful_rng(0)
    assert float(plax.checkpoint(lambda g, x: g.uniform() + x)(rng, 2.0)) == pytest.approx(want)
    rng = xrandom.stateful_rng(0)
    assert float(plax.checkpoint(lambda x: rng.uniform() + x)(2.0)) == pytest.approx(want)
    assert int(rng._counter[...]) == 1


def test_differentiated_value_stored_from_a_checkpoint_is_refused():
    r = plax.new_ref(jnp.float32(3.0))
    with pytest.raises(ValueError, match="set/swap operation with a differentiated value"):
        plax.grad(plax.checkpoint(lambda x: (r.__setitem__(..., x), x)[1]))(2.0)
    assert float(r[...]) == 3.0


# --- references inside custom_jvp / custom_vjp functions -----------------------------------
def _custom_jvp_reading(r):
    @plax.custom_jvp
    def f(x):
        return r[...] * jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), r[...] * jnp.cos(x) * t * 10  # (a rule that differs, to see it used)
    return f


def _custom_vjp_reading(r):
    @plax.custom_vjp
    def f(x):
        return r[...] * jnp.sin(x)

    f.defvjp(lambda x: (f(x), x), lambda x, g: (r[...] * jnp.cos(x) * g * 10,))
    return f


@pytest.mark.parametrize("make", [_custom_jvp_reading, _custom_vjp_reading])
@pytest.mark.parametrize("transform,want", [
    (lambda f: f, 3 * np.sin(2.0)),
    (plax.jit, 3 * np.sin(2.0)),
    (plax.grad, 30 * np.cos(2.0)),
    (lambda f: plax.jit(plax.grad(f)), 30 * np.cos(2.0)),
])
def test_custom_rules_read_closed_over_references(make, transform, want):
    r = plax.new_ref(jnp.float32(3.0))
    np.testing.assert_allclose(float(transform(make(r))(2.0)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(plax.vmap(make(r))(jnp.arange(3.0))),
                               3 * np.sin(np.arange(3.0)), rtol=1e-6)


def test_custom_jvp_writing_a_reference_under_jit_is_refused_as_in_jax():
    r = plax.new_ref(jnp.float32(3.0))

    @plax.custom_jvp
    def f(x):
        r[...] += 1.0
        return jnp.sin(x)
    f.defjvp(lambda p, t: (f(p[0]), jnp.cos(p[0]) * t[0]))

    assert float(f(2.0)) == pytest.approx(np.sin(2.0)) and float(r[...]) == 4.0
    assert float(plax.grad(f)(2.0)) == pytest.approx(np.cos(2.0)) and float(r[...]) == 5.0
    with pytest.raises(NotImplementedError,
                       match="No state discharge rule implemented for primitive: custom_jvp_call"):
        plax.jit(f)(2.0)
    assert float(r[...]) == 5.0


# --- plax.ds in array indexing ---------------------------------------------------------------
_X = np.arange(12.0, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("index,numpy_index", [
    (lambda i: plax.ds(i, 2), lambda i: slice(i, i + 2)),
    (lambda i: (slice(None), plax.ds(i, 2)), lambda i: (slice(None), slice(i, i + 2))),
    (lambda i: (1, plax.ds(i, 2)), lambda i: (1, slice(i, i + 2))),
    (lambda i: (Ellipsis, plax.ds(i, 2)), lambda i: (Ellipsis, slice(i, i + 2))),
    (lambda i: (plax.ds(i, 2), slice(1, 3)), lambda i: (slice(i, i + 2), slice(1, 3))),
    (lambda i: (plax.ds(i, 2), None), lambda i: (slice(i, i + 2), None)),
    (lambda i: (plax.ds(i, 2), np.array([0, 3])), lambda i: (slice(i, i + 2), np.array([0, 3]))),
    (lambda i: (slice(None), plax.ds(i, 2, 2)), lambda i: (slice(None), slice(i, i + 3, 2))),
])
def test_ds_with_a_traced_start_indexes_arrays(index, numpy_index):
    x = jnp.asarray(_X)
    for i in (0, 1):
        want = _X[numpy_index(i)]
        np.testing.assert_array_equal(np.asarray(plax.jit(lambda i: x[index(i)])(i)), want)
        np.testing.assert_array_equal(np.asarray(x[index(i)]), want)
        np.testing.assert_array_equal(np.asarray(x.at[index(i)].get()), want)
        for kind, op in [("set", lambda a, v: v), ("add", np.add), ("mul", np.multiply)]:
            v = np.full(want.shape, 2.0, np.float32)
            expect = _X.copy()
            expect[numpy_index(i)] = op(expect[numpy_index(i)], v)
            got = plax.jit(lambda i, v: getattr(x.at[index(i)], kind)(v))(i, v)
            np.testing.assert_array_equal(np.asarray(got), expect)


def test_ds_start_is_clamped_as_a_dynamic_slice_and_in_loops_vmap_grad():
    x = jnp.asarray(_X)
    # a start past the end is clamped so the block fits (as in JAX)
    np.testing.assert_array_equal(np.asarray(plax.jit(lambda i: x[plax.ds(i, 2)])(2)), _X[1:3])
    out = lax.fori_loop(0, 2, lambda i, y: y.at[plax.ds(i, 2)].add(1.0), x)
    np.testing.assert_array_equal(np.asarray(out), _X + np.array([[1], [2], [1]]))
    out = plax.vmap(lambda i: x[plax.ds(i, 2)])(jnp.array([0, 1]))
    np.testing.assert_array_equal(np.asarray(out), np.stack([_X[0:2], _X[1:3]]))
    g = plax.grad(lambda y, i: (y[plax.ds(i, 2)] ** 2).sum())(x, 1)
    want = np.zeros_like(_X)
    want[1:3] = 2 * _X[1:3]
    np.testing.assert_array_equal(np.asarray(g), want)


# --- static out-of-bounds indices of references ----------------------------------------------
@pytest.mark.parametrize("index,message", [
    (2, "idx=2, dim=2"), (5, "idx=5, dim=2"), ((0, 4), "idx=4, dim=4"),
    ((0, -5), "idx=-5, dim=4"), ((Ellipsis, 4), "idx=4, dim=4"),
])
def test_static_out_of_bounds_reference_index_is_refused(index, message):
    r = plax.new_ref(jnp.asarray(_X[:2]))
    with pytest.raises(ValueError, match=f"Out of bound indexer: {message}"):
        r[index]
    with pytest.raises(ValueError, match=f"Out of bound indexer: {message}"):
        r[index] = 0.0
    with pytest.raises(ValueError, match=f"Out of bound indexer: {message}"):
        plax.jit(lambda: r[index])()
    np.testing.assert_array_equal(np.asarray(r[-1]), _X[1])
    np.testing.assert_array_equal(np.asarray(r[...]), _X[:2])


def test_iterating_a_reference_ends_with_jax_error():
    # (Python iterates by indexing until an error; before the check, indexing clamped and
    # list(ref) or jnp.asarray(ref) never ended.) As in JAX, it ends with its error.
    r = plax.new_ref(jnp.arange(3.0))
    with pytest.raises(ValueError, match="Out of bound indexer: idx=3, dim=3"):
        list(r)
    with pytest.raises(ValueError, match="Out of bound indexer: idx=3, dim=3"):
        jnp.asarray(r)


# --- SPMD code reading the sharding of a type that is not an array's -------------------------
def test_types_without_an_array_sharding_read_as_none_over_a_mesh():
    from plax.lowering.stablehlo import abstract_token
    from plax.ref import AbstractRef
    from plax.runtime import spmd
    plax.make_mesh((2,), ("x",))  # (a mesh exists: jit then walks the types for shardings)
    assert spmd.type_sharding(abstract_token) is None
    assert spmd.type_sharding(AbstractRef(plax.typeof(jnp.ones(2)))) is None
    assert spmd.type_sharding(plax.typeof(jnp.ones(2))) is None
    closed = plax.make_jaxpr(lambda x: (lax.create_token(), x * 2))(1.0)
    assert spmd.inner_shardings(closed) == []
    token, y = plax.jit(lambda x: (lax.create_token(), x * 2))(1.0)
    assert float(y) == 2.0


def test_reference_written_by_a_custom_vjp_forward_rule_under_jit_of_grad():
    # grad under jit prunes what its result does not need; what a reference was given
    # stays (JAX 0.10.2: 13, 23 and 33 after the three calls)
    r = plax.new_ref(jnp.float32(3.0))

    @plax.custom_vjp
    def f(x):
        return jnp.sin(x)

    def fwd(x):
        r[...] += 10.0
        return jnp.sin(x), x
    f.defvjp(fwd, lambda x, g: (jnp.cos(x) * g,))

    assert float(plax.grad(f)(2.0)) == pytest.approx(np.cos(2.0)) and float(r[...]) == 13.0
    assert float(plax.jit(lambda x: plax.linearize(f, x)[0])(2.0)) == pytest.approx(np.sin(2.0))
    assert float(r[...]) == 23.0
    assert float(plax.jit(plax.grad(f))(2.0)) == pytest.approx(np.cos(2.0))
    assert float(r[...]) == 33.0
    # a reference written inside grad under jit, with the gradient pruned of the value
    w = plax.new_ref(jnp.float32(0.0))
    g = plax.jit(plax.grad(lambda x: (w.__setitem__(..., 5.0), x * 2)[1]))(1.0)
    assert float(g) == 2.0 and float(w[...]) == 5.0


# --- views of references passed into staged functions; JAX's argument-naming errors --------
def _shard_map(f):
    mesh = plax.make_mesh((1,), ("x",), axis_types=(plax.sharding.AxisType.Explicit,))
    return plax.shard_map(f, out_specs=None, mesh=mesh)


def _write_ones(v):
    v[...] += jnp.ones(v.shape)


@pytest.mark.parametrize("transform", [
    plax.jit, plax.checkpoint, _shard_map,
    lambda f: lambda v: lax.cond(True, f, lambda _: None, v),
], ids=["jit", "remat", "shard_map", "cond"])
def test_a_view_of_a_reference_is_written_through_by_a_staged_function(transform):
    @plax.jit
    def f():
        r = plax.new_ref(jnp.zeros(7))
        transform(_write_ones)(r.at[1:6])
        return r[...]
    np.testing.assert_array_equal(f(), np.r_[0.0, np.ones(5), 0.0])


def _return_new(x):
    return plax.new_ref(x)


@pytest.mark.parametrize("program, error, match", [
    (lambda r: plax.jit(lambda a_ref, b_ref: a_ref[...] + b_ref[...])(r, r), ValueError,
     "appeared at both a_ref and b_ref"),
    (lambda r: plax.jit(lambda b_ref: r[...] + b_ref[...])(r), ValueError,
     "closed over and passed as the argument b_ref"),
    (lambda r: lax.scan(lambda c, _: (None, None), (r, r), None, length=1), ValueError,
     r"appeared at both c\[0\] and c\[1\]"),
    (lambda r: lax.cond(True, lambda p, q: None, lambda p, q: None, r, r), ValueError,
     "for cond.*at both p and q"),
    (lambda r: plax.vmap(lambda p, q: None)(r, r), ValueError, "for vmap.*at both p and q"),
    (lambda r: plax.jit(lambda x_ref: x_ref)(r), ValueError,
     r"traced for jit returned a mutable array reference.*\n\n.*passed in as the argument x_ref"),
    (lambda r: plax.jit(_return_new)(jnp.arange(3)), ValueError,
     r"traced for jit returned a mutable array reference.*\n\n.*was created on line"),
    (lambda r: lax.scan(lambda c, x: (plax.new_ref(c), x), 0, jnp.arange(3)), ValueError,
     "traced for scan returned a mutable array reference of type"),
    (lambda r: plax.jit(lambda: plax.vmap(lambda v: v)(plax.new_ref(jnp.zeros(3)).at[1:]))(),
     TypeError, "for vmap, TransformedRefs are not allowed"),
])
def test_reference_argument_errors_name_the_arguments(program, error, match):
    with pytest.raises(error, match=match):
        program(plax.new_ref(jnp.zeros(2)))


def _cvjp(fwd):
    @plax.custom_vjp
    def f(x, ref):
        return x
    f.defvjp(fwd, lambda res, g: (g, None))
    return f


def _cvjp_returning_ref():
    @plax.custom_vjp
    def f(ref):
        return ref
    f.defvjp(lambda ref: (ref, None), lambda res, g: (None,))
    return f


@pytest.mark.parametrize("program, match", [
    (lambda r: _cvjp_returning_ref()(r), "custom_vjp primal function f returned a mutable"),
    (lambda r: plax.vjp(_cvjp(lambda x, _: (x, plax.new_ref(0))), 3.0, r), r"custom_vjp fwd "
     r"function <lambda> returned a mutable array reference .* at output tree path \[1\]"),
    (lambda r: _cvjp(lambda x, _: (x, None))(r, r), "custom_vjp function f got the same mutable "
     "array reference of type .* at x and ref"),
    (lambda r: plax.vjp(lambda x, ref: x * ref[...], 3.0, r)[1](1.0),
     "Expected cotangent type Ref"),
])
def test_custom_vjp_and_vjp_reference_errors(program, match):
    with pytest.raises(ValueError, match=match):
        program(plax.new_ref(jnp.float32(2.0)))


def test_vjp_with_a_reference_among_the_primals_differentiates_until_called():
    r = plax.new_ref(jnp.float32(2.0))
    out, _ = plax.vjp(lambda x, ref: x * ref[...], 3.0, r)  # (JAX refuses only the call)
    assert float(out) == 6.0
    out, _ = plax.vjp(_cvjp(lambda x, ref: (x, ref)), 3.0, r)  # fwd may keep its argument
    assert float(out) == 3.0
