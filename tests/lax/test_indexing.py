"""plax.lax.gather / scatter against loop-based NumPy references: dimension-number
configurations, out-of-bounds modes, dtypes, derivatives, vmap, jaxprs and error cases."""
import ml_dtypes
import numpy as np
import pytest

import helpers
import plax
from plax import lax
from plax.test_util import check_grads

G, S = lax.GatherDimensionNumbers, lax.ScatterDimensionNumbers
BF16 = np.dtype(ml_dtypes.bfloat16)


# --- NumPy references -------------------------------------------------------------------
def _window_dims(ndim, *dropped):
    return [d for d in range(ndim) if not any(d in ds for ds in dropped)]


def _start(x_shape, vec, index_map, window, batch, obd, ibd, mode):
    """The window's start in the operand, or None if the window is dropped."""
    start = [0] * len(x_shape)
    for k, d in enumerate(index_map):
        start[d] = int(vec[k])
    inb = all(0 <= start[d] <= x_shape[d] - window[d] for d in index_map)
    if mode == "clip" or (mode == "promise" and inb):
        start = [min(max(s, 0), n - w) for s, n, w in zip(start, x_shape, window)]
    elif not inb:
        return None
    for o, i in zip(obd, ibd):
        start[o] = batch[i]
    return start


def np_gather(x, idx, dn, sizes, mode="promise", fill=None):
    """Reference gather; ``promise`` clamps as XLA does."""
    x, idx = np.asarray(x), np.asarray(idx)
    rank = len(dn.offset_dims) + idx.ndim - 1
    window_dims = _window_dims(x.ndim, dn.collapsed_slice_dims, dn.operand_batching_dims)
    batch_it, off_it = iter(idx.shape[:-1]), iter(sizes[d] for d in window_dims)
    shape = tuple(next(off_it) if p in dn.offset_dims else next(batch_it) for p in range(rank))
    out = np.empty(shape, x.dtype)
    for o in np.ndindex(shape):
        b = tuple(o[p] for p in range(rank) if p not in dn.offset_dims)
        start = _start(x.shape, idx[b], dn.start_index_map, sizes, b, dn.operand_batching_dims,
                       dn.start_indices_batching_dims, "clip" if mode == "promise" else mode)
        if start is None:
            out[o] = fill
            continue
        for j, d in enumerate(window_dims):
            start[d] += o[dn.offset_dims[j]]
        out[o] = x[tuple(start)]
    return out


COMBINE = {lax.scatter: lambda a, b: b, lax.scatter_add: lambda a, b: a + b,
           lax.scatter_mul: lambda a, b: a * b, lax.scatter_min: min, lax.scatter_max: max}
BOOL_COMBINE = {lax.scatter_add: lambda a, b: a or b, lax.scatter_mul: lambda a, b: a and b}


def np_scatter(fn, x, idx, u, dn, mode="fill"):
    """Reference scatter: out-of-bounds windows are dropped unless ``mode`` is clip."""
    x, idx, u = np.asarray(x), np.asarray(idx), np.asarray(u)
    combine = BOOL_COMBINE.get(fn, COMBINE[fn]) if x.dtype == np.bool_ else COMBINE[fn]
    out = x.copy()
    window_dims = _window_dims(x.ndim, dn.inserted_window_dims, dn.operand_batching_dims)
    it = iter(u.shape[d] for d in dn.update_window_dims)
    window = [next(it) if d in window_dims else 1 for d in range(x.ndim)]
    scatter_dims = [p for p in range(u.ndim) if p not in dn.update_window_dims]
    for o in np.ndindex(u.shape):
        b = tuple(o[p] for p in scatter_dims)
        start = _start(x.shape, idx[b], dn.scatter_dims_to_operand_dims, window, b,
                       dn.operand_batching_dims, dn.scatter_indices_batching_dims,
                       "clip" if mode == "clip" else "fill")
        if start is None:
            continue
        for j, d in enumerate(window_dims):
            start[d] += o[dn.update_window_dims[j]]
        out[tuple(start)] = combine(out[tuple(start)], u[o])
    return out


# --- configurations -------------------------------------------------------------------------
# name: (operand shape, indices shape, gather dn, slice sizes, scatter dn, updates shape,
#        index upper bound per index component for in-bounds windows)
CONFIGS = {
    "rows": ((5, 3), (4, 1), G((1,), (0,), (0,)), (1, 3), S((1,), (0,), (0,)), (4, 3), (4,)),
    "points": ((4, 5), (2, 3, 2), G((), (0, 1), (0, 1)), (1, 1), S((), (0, 1), (0, 1)), (2, 3),
               (3, 4)),
    "windows": ((6, 5), (3, 2), G((1, 2), (), (1, 0)), (2, 3), S((1, 2), (), (1, 0)), (3, 2, 3),
                (2, 4)),
    "batched": ((3, 4, 5), (3, 2, 1), G((2,), (1,), (1,), (0,), (0,)), (1, 1, 5),
                S((2,), (1,), (1,), (0,), (0,)), (3, 2, 5), (3,)),
    "offset_first": ((4, 5), (3, 1), G((0,), (0,), (0,)), (1, 5), S((0,), (0,), (0,)), (5, 3),
                     (3,)),
}


def _indices(name, oob=False, seed=0, unique=False):
    _, ishape, *_, hi = CONFIGS[name]
    rng = np.random.default_rng(seed)
    if unique:  # distinct index vectors (per batch element where the dims pair them)
        pool = np.stack(np.meshgrid(*[np.arange(h + 1) for h in hi], indexing="ij"), -1)
        pool = pool.reshape(-1, len(hi))
        groups = ishape[0] if CONFIGS[name][2].operand_batching_dims else 1
        n = int(np.prod(ishape[:-1])) // groups
        rows = [pool[rng.permutation(len(pool))[:n]] for _ in range(groups)]
        return np.stack(rows).reshape(ishape).astype(np.int32)
    idx = np.stack([rng.integers(0, h + 1, ishape[:-1]) for h in hi], -1).astype(np.int32)
    if oob:  # one index far below, one far above
        flat = idx.reshape(-1, len(hi))
        flat[0, 0], flat[-1, -1] = -3, hi[-1] + 2
    return idx


def _operand(name, dtype=np.float32, seed=0):
    return helpers.sample(CONFIGS[name][0], dtype, seed=seed)


def _updates(name, dtype=np.float32, seed=1, domain="real"):
    return helpers.sample(CONFIGS[name][5], dtype, domain, seed=seed)


# --- gather values ----------------------------------------------------------------------
@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("mode", ["promise", "clip", "fill"])
def test_gather(name, mode):
    x, idx = _operand(name), _indices(name, oob=mode != "promise")
    _, _, dn, sizes, *_ = CONFIGS[name]
    arg = {"promise": None, "clip": "clip", "fill": "fill"}[mode]
    out = lax.gather(x, idx, dn, sizes, mode=arg)
    helpers.check(out, np_gather(x, idx, dn, sizes, mode, fill=np.nan), np.float32)


@pytest.mark.parametrize("dtype, fill", [(np.int32, np.iinfo(np.int32).min), (np.uint8, 255),
                                         (np.bool_, True), (BF16, np.nan), (np.int8, -128)])
def test_gather_default_fill_values(dtype, fill):
    x, idx = _operand("rows", dtype), _indices("rows", oob=True)
    _, _, dn, sizes, *_ = CONFIGS["rows"]
    out = lax.gather(x, idx, dn, sizes, mode=lax.GatherScatterMode.FILL_OR_DROP)
    helpers.check(out, np_gather(x, idx, dn, sizes, "fill", fill=fill), dtype)


def test_gather_fill_value_and_weak_type():
    x, idx = _operand("rows"), _indices("rows", oob=True)
    _, _, dn, sizes, *_ = CONFIGS["rows"]
    out = lax.gather(x, idx, dn, sizes, mode="fill", fill_value=np.float32(-1))
    helpers.check(out, np_gather(x, idx, dn, sizes, "fill", fill=-1), np.float32)
    weak = lax.gather(plax.lax.broadcast(2.0, (4,)), np.zeros((3, 1), np.int32), G((), (0,), (0,)),
                    (1,))
    assert weak.shape == (3,) and weak.aval.weak_type


def test_gather_empty_indices_and_scalar_operand():
    _, _, dn, sizes, *_ = CONFIGS["rows"]
    out = lax.gather(_operand("rows"), np.zeros((0, 1), np.int32), dn, sizes)
    assert out.shape == (0, 3)
    # A rank-0 operand: an empty index vector per output element.
    out = lax.gather(np.float32(7), np.zeros((2, 0), np.int32), G((), (), ()), ())
    helpers.check(out, np.full((2,), 7, np.float32), np.float32)
    # No index, no window taken: a window larger than an empty operand is allowed (as JAX).
    for gather in (lax.gather, plax.jit(lax.gather, static_argnums=(2, 3))):
        out = gather(np.zeros((0, 2), np.float32), np.zeros((0, 1), np.int32), G((1,), (0,), (0,)),
                     (1, 2))
        helpers.check(out, np.zeros((0, 2), np.float32), np.float32)


# --- scatter values ---------------------------------------------------------------------
SCATTERS = [lax.scatter, lax.scatter_add, lax.scatter_mul, lax.scatter_min, lax.scatter_max]


@pytest.mark.parametrize("fn", SCATTERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("name", ["rows", "points", "windows", "batched"])
def test_scatter(fn, name):
    # scatter (replace) overwrites in an unspecified order: give it distinct indices.
    x, u = _operand(name), _updates(name)
    idx = _indices(name, unique=fn is lax.scatter)
    _, _, _, _, dn, *_ = CONFIGS[name]
    helpers.check(fn(x, idx, u, dn), np_scatter(fn, x, idx, u, dn), np.float32)


@pytest.mark.parametrize("fn", SCATTERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("mode", ["clip", "fill", "promise_in_bounds"])
def test_scatter_out_of_bounds(fn, mode):
    x, u = _operand("rows"), _updates("rows")
    idx = np.array([[-3], [1], [7], [3]], np.int32)
    _, _, _, _, dn, *_ = CONFIGS["rows"]
    want = np_scatter(fn, x, idx, u, dn, "clip" if mode == "clip" else "fill")
    helpers.check(fn(x, idx, u, dn, mode=mode), want, np.float32)


@pytest.mark.parametrize("fn, dtype", [(lax.scatter_add, np.int32), (lax.scatter_max, np.int32),
                                       (lax.scatter_mul, np.int32), (lax.scatter, np.bool_),
                                       (lax.scatter_add, np.bool_), (lax.scatter_min, np.bool_),
                                       (lax.scatter_add, BF16), (lax.scatter_max, np.complex64)])
def test_scatter_dtypes(fn, dtype):
    x, u = _operand("points", dtype), _updates("points", dtype)
    idx = _indices("points", unique=fn is lax.scatter)
    _, _, _, _, dn, *_ = CONFIGS["points"]
    if dtype == np.complex64:  # max by (real, imag), as in JAX
        want = x.copy()
        for b in np.ndindex(idx.shape[:-1]):
            p = tuple(idx[b])
            want[p] = max(want[p], u[b], key=lambda v: (v.real, v.imag))
        np.testing.assert_array_equal(np.asarray(fn(x, idx, u, dn)), want)
        return
    helpers.check(fn(x, idx, u, dn), np_scatter(fn, x, idx, u, dn), dtype)


def test_scatter_empty_updates_and_weak_type():
    _, _, _, _, dn, *_ = CONFIGS["rows"]
    x = _operand("rows")
    out = lax.scatter_add(x, np.zeros((0, 1), np.int32), np.zeros((0, 3), np.float32), dn)
    helpers.check(out, x, np.float32)
    weak = lax.scatter_add(plax.lax.broadcast(1.0, (3,)), np.zeros((1, 1), np.int32),
                         plax.lax.broadcast(1.0, (1,)), S((), (0,), (0,)))
    assert weak.aval.weak_type
    helpers.check(weak, [2.0, 1.0, 1.0], np.float32)


def test_jit_matches_eager():
    x, idx, u = _operand("windows"), _indices("windows", oob=True), _updates("windows")
    _, _, gdn, sizes, sdn, *_ = CONFIGS["windows"]

    def f(x, idx, u):
        return (lax.gather(x, idx, gdn, sizes, mode="fill", fill_value=0.5),
                lax.scatter_add(x, idx, u, sdn, mode="clip"))
    for a, b in zip(plax.jit(f)(x, idx, u), f(x, idx, u)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# --- modes and dimension numbers -------------------------------------------------------------
def test_mode_from_any():
    M = lax.GatherScatterMode
    assert M.from_any(None) is M.FILL_OR_DROP
    assert M.from_any("fill") is M.from_any("drop") is M.FILL_OR_DROP
    assert M.from_any("clip") is M.CLIP
    assert M.from_any("promise_in_bounds") is M.PROMISE_IN_BOUNDS
    assert M.from_any(M.CLIP) is M.CLIP
    with pytest.raises(ValueError, match="Unknown gather mode"):
        M.from_any("wrap")
    assert G((1,), (0,), (0,)).operand_batching_dims == ()
    assert S((1,), (0,), (0,))._fields[-1] == "scatter_indices_batching_dims"


def test_jaxprs():
    x, idx, u = _operand("rows"), _indices("rows"), _updates("rows")
    _, _, gdn, sizes, sdn, *_ = CONFIGS["rows"]
    text = str(plax.make_jaxpr(lambda x: lax.gather(x, idx, gdn, sizes))(x))
    assert "gather[" in text and "mode=GatherScatterMode.PROMISE_IN_BOUNDS" in text
    assert "GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,)" in text
    assert "slice_sizes=(1, 3)" in text and "fill_value=None" in text
    text = str(plax.make_jaxpr(lambda x: lax.gather(x, idx, gdn, sizes, mode="fill",
                                                  fill_value=3))(x))
    assert "fill_value=3" in text and "mode=GatherScatterMode.FILL_OR_DROP" in text
    for fn, name in [(lax.scatter, "scatter["), (lax.scatter_add, "scatter-add["),
                     (lax.scatter_mul, "scatter-mul["), (lax.scatter_min, "scatter-min["),
                     (lax.scatter_max, "scatter-max[")]:
        text = str(plax.make_jaxpr(lambda x, u: fn(x, idx, u, sdn, mode="clip"))(x, u))
        assert name in text and "mode=GatherScatterMode.CLIP" in text, text
        assert "ScatterDimensionNumbers(update_window_dims=(1,)" in text
        assert ("update_jaxpr=None" in text) == (fn is lax.scatter)
    text = str(plax.make_jaxpr(lambda x, u: lax.scatter_add(x, idx, u, sdn))(x, u))
    assert "add" in text.split("update_jaxpr=")[1]


def test_lowered_text():
    x, idx, u = _operand("batched"), _indices("batched"), _updates("batched")
    _, _, gdn, sizes, sdn, *_ = CONFIGS["batched"]
    text = plax.jit(lambda x: lax.gather(x, idx, gdn, sizes)).lower(x).as_text()
    assert "stablehlo.gather" in text and "operand_batching_dims = [0]" in text
    text = plax.jit(lambda x, u: lax.scatter_max(x, idx, u, sdn)).lower(x, u).as_text()
    assert "stablehlo.scatter" in text and "stablehlo.maximum" in text
    assert "input_batching_dims = [0]" in text


# --- errors -------------------------------------------------------------------------------
X = np.zeros((3, 4), np.float32)
I21 = np.zeros((2, 1), np.int32)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: lax.gather(X, I21, G((1,), (0,), (0,)), (1, 5)), TypeError, "Slice size at index 1"),
    (lambda: lax.gather(X, I21.astype(np.float32), G((1,), (0,), (0,)), (1, 4)), ValueError,
     "integer type"),
    (lambda: lax.gather(X, I21, G((1,), (0,), (0,)), (2, 4)), TypeError, "slice size 1"),
    (lambda: lax.gather(X, np.zeros((3, 1), np.int32), G((), (1,), (1,), (0,), (0,)), (2, 1)),
     TypeError, "operand_batching_dims with slice size 0 or 1"),
    (lambda: lax.gather(X[:0], I21, G((1,), (0,), (0,)), (1, 4)), TypeError,
     r"Slice size at index 0 .* within \[0, 0 \+ 1\), got 1"),
    (lambda: lax.gather(X, I21, G((1,), (0,), (0, 1)), (1, 4)), TypeError,
     "2 elements in start_index_map"),
    (lambda: lax.gather(X, I21, G((1,), (0,), (0,)), (1,)), TypeError, "one slice size"),
    (lambda: lax.gather(X, I21, G((1,), (), (0,)), (1, 4)), TypeError,
     "offset dimension or explicitly collapsed"),
    (lambda: lax.gather(X, I21, G((1,), (0,), (3,)), (1, 4)), TypeError, "start_index_map"),
    (lambda: lax.gather(X, I21, G((2, 1), (), (0,)), (1, 4)), TypeError, "sorted"),
    (lambda: lax.gather(X, I21, G((1,), (), (1,), (0,), (0,)), (1, 1)), TypeError, "same shape"),
    (lambda: lax.gather(X, np.int32(0), G((0, 1), (), ()), (1, 4)), TypeError, "rank at least 1"),
    (lambda: lax.gather(X, I21, "bad", (1, 4)), TypeError, "GatherDimensionNumbers"),
    (lambda: lax.scatter_add(X, I21, np.zeros((2, 5), np.float32), S((1,), (0,), (0,))),
     TypeError, "window dimensions of updates"),
    (lambda: lax.scatter_add(X, I21, np.zeros((2, 4), np.int32), S((1,), (0,), (0,))), TypeError,
     "same dtypes"),
    (lambda: lax.scatter(X, I21, np.zeros((3, 4), np.float32), S((1,), (0,), (0,))), TypeError,
     "scatter dimensions of updates"),
    (lambda: lax.scatter_mul(X, I21, np.zeros((2, 4, 1), np.float32), S((1,), (0,), (0,))),
     TypeError, "rank 2"),
    (lambda: lax.scatter_min(X, I21, np.zeros((2, 4), np.float32), S((1,), (), (0,))), TypeError,
     "doesn't match operand of rank 2"),
    (lambda: lax.scatter_max(X, I21, np.zeros((2, 4), np.float32), S((1,), (0,), (0,)),
                           mode="wrap"), ValueError, "Unknown gather mode"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# --- derivatives ------------------------------------------------------------------------
@pytest.mark.parametrize("name, mode", [("rows", "fill"), ("windows", "clip"),
                                        ("batched", None), ("points", "fill")])
def test_gather_grads(name, mode):
    idx = _indices(name, oob=mode is not None)
    _, _, dn, sizes, *_ = CONFIGS[name]
    f = lambda x: lax.gather(x, idx, dn, sizes, mode=mode, fill_value=0.0)
    check_grads(f, (_operand(name),), order=2, modes=("fwd", "rev"))


def test_gather_grad_values():
    # Repeated rows accumulate; filled (out-of-bounds) rows contribute nothing.
    idx = np.array([[0], [0], [9], [2]], np.int32)
    _, _, dn, sizes, *_ = CONFIGS["rows"]
    g = plax.grad(lambda x: lax.gather(x, idx, dn, sizes, mode="fill").sum())(_operand("rows"))
    want = np.zeros((5, 3), np.float32)
    want[0], want[2] = 2, 1
    helpers.check(g, want, np.float32)


@pytest.mark.parametrize("name, mode", [("rows", "fill"), ("windows", "clip"), ("batched", None)])
def test_scatter_add_grads(name, mode):
    idx = _indices(name, oob=mode is not None)
    _, _, _, _, dn, *_ = CONFIGS[name]
    f = lambda x, u: lax.scatter_add(x, idx, u, dn, mode=mode)
    check_grads(f, (_operand(name), _updates(name)), order=2, modes=("fwd", "rev"), eps=1e-2)


@pytest.mark.parametrize("unique", [True, False])
def test_scatter_grads(unique):
    idx = _indices("points", unique=unique) if unique else \
        np.array([[[0, 1], [2, 2], [0, 1]], [[3, 4], [0, 1], [9, 9]]], np.int32)
    _, _, _, _, dn, *_ = CONFIGS["points"]
    f = lambda x, u: lax.scatter(x, idx, u, dn, unique_indices=unique)
    check_grads(f, (_operand("points"), _updates("points")), order=2, modes=("fwd", "rev"))


def test_scatter_grad_values_with_repeats():
    # One of the updates to a repeated index wins; only it gets the cotangent, and the
    # operand's overwritten elements get none (as in JAX).
    x = np.array([1.0, 5.0, 2.0], np.float32)
    idx = np.array([[0], [0], [2], [2]], np.int32)
    u = np.array([1.0, 0.0, 2.0, 2.0], np.float32)
    dn = S((), (0,), (0,))
    out = lax.scatter(x, idx, u, dn)
    gx, gu = plax.grad(lambda x, u: (lax.scatter(x, idx, u, dn) * np.arange(1, 4)).sum(),
                       (0, 1))(x, u)
    helpers.check(gx, [0, 2, 0], np.float32)
    gu = np.asarray(gu)
    assert sorted(gu[:2]) == [0, 1] and sorted(gu[2:]) == [0, 3]
    assert np.asarray(out)[0] == u[np.argmax(gu[:2])]


@pytest.mark.parametrize("fn", [lax.scatter_mul, lax.scatter_min, lax.scatter_max],
                         ids=lambda f: f.__name__)
def test_combining_scatter_grads(fn):
    # Well-separated values so that finite differences do not cross ties.
    idx = np.array([[0], [0], [2], [4]], np.int32)
    dn = S((1,), (0,), (0,))
    x = np.linspace(-2, 2, 15, dtype=np.float32).reshape(5, 3)
    u = np.linspace(2.1, -1.9, 12, dtype=np.float32).reshape(4, 3)
    check_grads(lambda x, u: fn(x, idx, u, dn), (x, u), order=1, modes=("fwd", "rev"))


def test_scatter_mul_grads_with_zero_updates():
    idx = np.array([[0], [0], [0], [1], [1]], np.int32)
    dn = S((), (0,), (0,))
    x = np.array([1.5, -2.0, 3.0], np.float32)
    u = np.array([0.0, 2.0, 3.0, 0.0, 0.0], np.float32)
    gx, gu = plax.grad(lambda x, u: lax.scatter_mul(x, idx, u, dn).sum(), (0, 1))(x, u)
    # d/du_j of x * prod u = x * prod of the others: only a lone zero has a nonzero one.
    helpers.check(gx, [0, 0, 1], np.float32)
    helpers.check(gu, [1.5 * 6, 0, 0, 0, 0], np.float32)
    # Away from zero updates the rule is exact to higher orders too.
    f = lambda x, u: lax.scatter_mul(x, idx, u, dn)
    check_grads(f, (x, u), order=1, modes=("fwd", "rev"))
    check_grads(f, (x, np.array([0.5, 2.0, -1.5, 1.25, 0.75], np.float32)), order=2,
                modes=("fwd", "rev"))


def test_scatter_max_ties_share_the_gradient():
    x = np.array([1.0, 5.0, 2.0], np.float32)
    idx = np.array([[0], [0], [2], [2]], np.int32)
    u = np.array([1.0, 0.0, 2.0, 2.0], np.float32)
    dn = S((), (0,), (0,))
    gx, gu = plax.grad(lambda x, u: lax.scatter_max(x, idx, u, dn).sum(), (0, 1))(x, u)
    helpers.check(gx, [0.5, 1, 1 / 3], np.float32)
    helpers.check(gu, [0.5, 0, 1 / 3, 1 / 3], np.float32)


# --- vmap ---------------------------------------------------------------------------------
def _stack(x, n=3, seed=0):
    """``n`` variants of ``x`` stacked along a new leading axis."""
    rng = np.random.default_rng(seed)
    if x.dtype.kind in "iu":
        return np.stack([np.roll(x, k) for k in range(n)])
    return np.stack([x + rng.uniform(-1, 1, x.shape).astype(x.dtype) for _ in range(n)])


@pytest.mark.parametrize("name", ["rows", "windows", "batched", "offset_first"])
def test_gather_vmap(name):
    _, _, dn, sizes, *_ = CONFIGS[name]
    mode = "fill" if name == "windows" else None
    idx = _indices(name, oob=mode is not None)
    helpers.check_vmap_axes(lambda x, i: lax.gather(x, i, dn, sizes, mode=mode),
                            _stack(_operand(name)), _stack(idx))


@pytest.mark.parametrize("fn", SCATTERS, ids=lambda f: f.__name__)
def test_scatter_vmap(fn):
    name = "batched" if fn in (lax.scatter_add, lax.scatter) else "windows"
    _, _, _, _, dn, *_ = CONFIGS[name]
    idx = np.stack([_indices(name, unique=True, seed=s) for s in range(3)])
    helpers.check_vmap_axes(lambda x, i, u: fn(x, i, u, dn, mode="clip"),
                            _stack(_operand(name)), idx, _stack(_updates(name)))


def test_vmap_of_gather_grad():
    _, _, dn, sizes, *_ = CONFIGS["rows"]
    idx = np.stack([_indices("rows", oob=True, seed=s) for s in range(3)])
    f = plax.grad(lambda x, i: (lax.gather(x, i, dn, sizes, mode="fill", fill_value=0.0) ** 2).sum())
    helpers.check_vmap(f, _stack(_operand("rows")), idx)
    helpers.check_vmap(f, _operand("rows"), idx, in_axes=(None, 0))


def _take_1(x, i):
    return lax.gather(x, i[None], G((), (0,), (0,)), (1,))


# vmap over an axis of size 0 with operand and indices both batched: the paired window is
# empty (a window of 1 would not fit the empty axis), and every result is empty.
@pytest.mark.parametrize("fn, x_shape, out_shape", [
    (_take_1, (0, 3), (0,)),
    (lambda x, i: lax.dynamic_slice(x, (i, 0), (1, 0)), (0, 3, 2), (0, 1, 0)),
    (lambda x, i: x[i], (0, 3), (0,)),
    (plax.grad(lambda x, i: lax.dynamic_slice(x, (i,), (2,)).sum()), (0, 3), (0, 3)),
])
def test_vmap_over_an_empty_axis(fn, x_shape, out_shape):
    x, i = np.zeros(x_shape, np.float32), np.zeros((0,), np.int32)
    for f in (plax.vmap(fn), plax.jit(plax.vmap(fn))):
        helpers.check(f(x, i), np.zeros(out_shape, np.float32), np.float32)
