"""References in jaxprs: the state primitives, their printing, discharge, vmap and run_state,
checked against NumPy."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.avals import ShapedArray
from plax.core.effects import AccumEffect, ReadEffect, WriteEffect
from plax.core.jaxpr import ClosedJaxpr, eval_jaxpr
from plax.core.refs import NDIndexer, Slice, shaped_array_ref
from plax.core.staging import trace_to_jaxpr
from plax.first_order.state import addupdate_p, get_p, ref_addupdate, ref_get, ref_swap, swap_p
from plax.higher_order.run_state import run_state, run_state_reference
from plax.transforms.discharge import discharge_state

_A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
_I = np.array([2, 0, 1])

# (index, what NumPy selects)
_INDICES = [
    ((), _A),
    ((1,), _A[1]),
    ((slice(None), 2), _A[:, 2]),
    ((0, slice(1, 3)), _A[0, 1:3]),
    ((slice(None), slice(None), slice(0, 4, 2)), _A[:, :, 0:4:2]),
    ((1, _I), _A[1, _I]),
    ((slice(None), _I, 3), _A[:, _I, 3]),
    ((_I[1:], slice(None), _I[1:]), _A[_I[1:], :, _I[1:]]),  # parted: dims first
    ((-1, -2), _A[-1, -2]),
]


def _trace(f, *avals):
    jaxpr, consts = trace_to_jaxpr(f, list(avals))
    return ClosedJaxpr(jaxpr, consts)


@pytest.mark.parametrize("idx, expected", _INDICES)
def test_get_discharges_to_numpy_indexing(idx, expected):
    closed = _trace(lambda r: [ref_get(r, idx)], shaped_array_ref(_A.shape, np.float32))
    assert closed.out_avals[0].shape == expected.shape
    assert closed.effects == {ReadEffect(closed.jaxpr.invars[0])}
    plain = discharge_state(closed)
    out, final = eval_jaxpr(plain.jaxpr, plain.consts, _A)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(final, _A)


@pytest.mark.parametrize("idx, expected", _INDICES)
def test_swap_and_addupdate_discharge_to_numpy_updates(idx, expected):
    if any(isinstance(i, slice) and i.step not in (None, 1) for i in idx):
        pytest.skip("strided writes are not supported")
    val = np.full(expected.shape, 7.0, np.float32)

    def f(r, v):
        old = ref_swap(r, idx, v)
        ref_addupdate(r, idx, v)
        return [old]
    closed = _trace(f, shaped_array_ref(_A.shape, np.float32), ShapedArray(val.shape, np.float32))
    assert closed.effects == {WriteEffect(closed.jaxpr.invars[0]),
                              AccumEffect(closed.jaxpr.invars[0])}
    plain = discharge_state(closed)
    old, final = eval_jaxpr(plain.jaxpr, plain.consts, _A, val)
    want = _A.copy()
    want[idx] = 14.0
    np.testing.assert_array_equal(old, expected)
    np.testing.assert_array_equal(final, want)


@pytest.mark.parametrize("idx, error", [
    ((3,), "Out of bound indexer"),
    ((0, 0, 0, 0), "`indices` must not be longer than `shape`"),
    ((slice(2, None),), "Out of bound slice: start=2, dim=2"),
    ((0, Slice(2, 2)), "Out of bound slice: start=2, size=2"),
    ((np.array([0.5]),), "integers, slices or integer arrays"),
])
def test_bad_indices_raise(idx, error):
    with pytest.raises((ValueError, IndexError, TypeError), match=error):
        _trace(lambda r: [ref_get(r, idx)], shaped_array_ref(_A.shape, np.float32))


@pytest.mark.parametrize("indices, shape, want", [
    ((np.ones((10, 20)), np.ones((10, 20))), (5, 5), (10, 20)),  # (any arrays, as JAX's)
    ((Slice(1, 2), np.arange(3)[:, None], np.arange(4)), (3, 5, 6), (2, 3, 4)),
    ((slice(3, 3), 0), (4, 5), (0,)),
])
def test_ndindexer_shapes(indices, shape, want):
    assert NDIndexer.from_indices_shape(indices, shape).get_indexer_shape() == want


@pytest.mark.parametrize("indices, error, match", [
    ((np.arange(10)[None], np.arange(20)[None, :]), ValueError,
     "Cannot broadcast shapes for indexing"),
    ((plax.new_ref(np.arange(4)),) * 2, NotImplementedError,
     "Multiple Ref indexers are not supported"),
    ((plax.new_ref(np.arange(4)), 0), NotImplementedError,
     "Ref cannot be mixed with other non-slice indexers"),
])
def test_ndindexer_refuses(indices, error, match):
    with pytest.raises(error, match=match):
        NDIndexer.from_indices_shape(indices, (5, 5))


@pytest.mark.parametrize("f, error", [
    (lambda r, v: [ref_swap(r, (), v)], "Invalid shape for `swap`"),
    (lambda r, v: [ref_get(v, ())], "takes a mutable array reference"),
])
def test_bad_writes_raise(f, error):
    with pytest.raises(ValueError, match=error):
        _trace(f, shaped_array_ref((2, 3), np.float32), ShapedArray((3,), np.float32))


def test_state_equations_print_as_reads_and_writes():
    def f(r, v):
        x = r[0, 1:3]
        r[:, 0] = v
        ref_addupdate(r, (), jnp.zeros((2, 3), jnp.float32))
        return [x, ref_swap(r, (1,), jnp.ones(3, jnp.float32))]
    text = str(_trace(f, shaped_array_ref((2, 3), np.float32), ShapedArray((2,), np.float32)))
    for piece in ["c:f32[2] <- a[0,1:]", "a[:,0] <- b", "a[...] += ", ", a[1,:] <- a[1,:], "]:
        assert piece in text
    prims = [e.primitive for e in _trace(f, shaped_array_ref((2, 3), np.float32),
                                         ShapedArray((2,), np.float32)).eqns]
    assert [p for p in prims if p in (get_p, swap_p, addupdate_p)] == \
        [get_p, swap_p, addupdate_p, swap_p]


@pytest.mark.parametrize("ref_dim, idx_dim", [(0, None), (1, None), (None, 0), (2, 1), (0, 0)])
def test_vmap_of_a_read_matches_numpy(ref_dim, idx_dim):
    n = 3
    x = np.arange(n * 4 * 5, dtype=np.float32).reshape(n, 4, 5)
    xs = np.moveaxis(x, 0, ref_dim) if ref_dim is not None else x[0]
    idx = np.array([[1, 3], [0, 2], [4, 4]], np.int32)
    idxs = np.moveaxis(idx, 0, idx_dim) if idx_dim is not None else idx[0]

    def f(r, i):
        return [ref_get(r, (slice(None), i))]
    batched = plax.vmap(f, in_axes=(ref_dim, idx_dim))
    rshape = xs.shape
    closed = _trace(batched, shaped_array_ref(rshape, np.float32),
                    ShapedArray(idxs.shape, np.int32))
    out, _ = eval_jaxpr(discharge_state(closed).jaxpr, discharge_state(closed).consts, xs, idxs)
    for k in range(n):
        xk = x[k] if ref_dim is not None else x[0]
        ik = idx[k] if idx_dim is not None else idx[0]
        np.testing.assert_array_equal(out[k], xk[:, ik])


def test_run_state_computes_as_its_reference_and_under_jvp_and_jit():
    def f(refs):
        x_ref, y_ref = refs
        y_ref[...] = jnp.sin(x_ref[...]) * 2.0
        x_ref[...] += 1.0
    x = np.float32(0.5)
    for run in (run_state(f), run_state_reference(f), plax.jit(run_state(f))):
        a, b = run((x, np.float32(0.0)))
        np.testing.assert_allclose([a, b], [x + 1, np.sin(x) * 2], rtol=1e-6)
    _, (ta, tb) = plax.jvp(lambda v: run_state(f)((v, 0.0)), (x,), (np.float32(1.0),))
    np.testing.assert_allclose([ta, tb], [1.0, 2 * np.cos(x)], rtol=1e-6)


def test_loops_and_conds_over_references_discharge():
    def f(refs):
        x_ref, y_ref = refs

        def body(i, c):
            x_ref[...] += i
            return c
        plax.lax.fori_loop(0, 4, body, 0)

        def cond(i):
            y_ref[...] += 1
            return i < 3
        plax.lax.while_loop(cond, lambda i: i + 1, 0)
        plax.lax.cond(x_ref[...] > 5, lambda: y_ref.__setitem__(..., y_ref[...] * 10),
                      lambda: None)
    assert plax.jit(run_state(f))((0, 0)) == (6, 30)


def test_run_state_threads_references_its_body_closes_over():
    @plax.jit
    def f(x):
        outer = plax.new_ref(jnp.zeros(3, jnp.float32))

        def body(r):
            outer[...] = outer[...] + r[...]  # read and written inside the run_state
            r[...] = r[...] * 2
        doubled = run_state(body)(x)
        return doubled, outer[...]
    doubled, seen = f(jnp.arange(3.0))
    np.testing.assert_array_equal(doubled, [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(seen, [0.0, 1.0, 2.0])
