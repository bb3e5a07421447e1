"""lax.reduce_window against a NumPy sliding-window reference: values, jit, vmap, grads, errors."""
import itertools

import numpy as np
import pytest

import plax
from plax import lax
from plax.test_util import check_grads

from tests.helpers import sample


def _np_reduce_window(x, init, op, window, strides, padding, base_dilation=None,
                      window_dilation=None):
    """Reference: base-dilate and pad ``x`` with ``init``, then reduce every window."""
    x = np.asarray(x)
    nd = x.ndim
    bdil = base_dilation or (1,) * nd
    wdil = window_dilation or (1,) * nd
    if isinstance(padding, str):
        padding = lax.padtype_to_pads(
            x.shape, [1 + r * (w - 1) for w, r in zip(window, wdil)], strides, padding)
    dshape = tuple(0 if s == 0 else 1 + b * (s - 1) for s, b in zip(x.shape, bdil))
    dil = np.full(dshape, init, x.dtype)
    dil[tuple(slice(None, None, b) for b in bdil)] = x
    valid = np.zeros(dshape, bool)  # XLA applies init once and skips padding/holes
    valid[tuple(slice(None, None, b) for b in bdil)] = True
    for ax, (lo, hi) in enumerate(padding):
        if lo < 0:
            dil, valid = (np.take(a, range(-lo, a.shape[ax]), axis=ax) for a in (dil, valid))
        if hi < 0:
            dil, valid = (np.take(a, range(0, a.shape[ax] + hi), axis=ax) for a in (dil, valid))
        widths = [(0, 0)] * nd
        widths[ax] = (max(lo, 0), max(hi, 0))
        dil = np.pad(dil, widths, constant_values=init)
        valid = np.pad(valid, widths, constant_values=False)
    dwin = [1 + r * (w - 1) for w, r in zip(window, wdil)]
    out_shape = tuple(max(0, (p - w) // s + 1) for p, w, s in zip(dil.shape, dwin, strides))
    out = np.empty(out_shape, x.dtype)
    for o in itertools.product(*map(range, out_shape)):
        idx = tuple(slice(oi * s, oi * s + w, r) for oi, s, w, r in zip(o, strides, dwin, wdil))
        out[o] = op.reduce(dil[idx][valid[idx]], initial=init)
    return out


OPS = {"sum": (lax.add, np.add, 0.0), "max": (lax.max, np.maximum, -np.inf),
       "min": (lax.min, np.minimum, np.inf)}

CASES = [  # shape, window, strides, padding, base_dilation, window_dilation
    ((7,), (3,), (1,), "VALID", None, None),
    ((8,), (3,), (2,), "SAME", None, None),
    ((9,), (2,), (3,), ((1, 2),), None, (2,)),
    ((5,), (2,), (1,), "SAME_LOWER", (2,), None),
    ((5, 6), (2, 3), (1, 2), "SAME", None, None),
    ((5, 6), (3, 2), (2, 1), ((1, 0), (2, -1)), (2, 1), (1, 2)),
    ((4, 7), (2, 2), (2, 2), "VALID", (1, 2), (2, 1)),
    ((2, 6, 5, 3), (1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None),  # NHWC pooling
    ((2, 6, 5, 3), (1, 2, 2, 1), (1, 2, 2, 1), "VALID", None, None),
    ((2, 5, 5, 2), (1, 2, 2, 1), (1, 1, 1, 1), ((0, 0), (1, 1), (0, 2), (0, 0)), None,
     (1, 2, 1, 1)),
]


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_numpy(name, case):
    shape, window, strides, padding, bdil, wdil = CASES[case]
    comp, np_op, init = OPS[name]
    x = sample(shape, np.float32, seed=case)
    got = lax.reduce_window(x, init, comp, window, strides, padding, bdil, wdil)
    want = _np_reduce_window(x, np.float32(init), np_op, window, strides, padding, bdil, wdil)
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


def test_specialised_primitives_are_used():
    x = np.ones((4, 4), np.float32)
    for comp, init, prim in ((lax.add, 0.0, "reduce_window_sum"),
                             (lax.max, -np.inf, "reduce_window_max"),
                             (lax.min, np.inf, "reduce_window_min"),
                             (lax.mul, 1.0, "reduce_window"),
                             (lax.add, 1.0, "reduce_window")):
        jaxpr = plax.make_jaxpr(
            lambda x: lax.reduce_window(x, init, comp, (2, 2), (1, 1), "VALID"))(x)
        assert [e.primitive.name for e in jaxpr.jaxpr.eqns] == [prim], (comp, init)


def test_generic_computation():
    x = sample((5, 6), np.float32, "pos", seed=3)
    got = lax.reduce_window(x, np.float32(1), lax.mul, (2, 3), (1, 2), "SAME")
    want = _np_reduce_window(x, np.float32(1), np.multiply, (2, 3), (1, 2), "SAME")
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    # A non-identity init with lax.add is reduced generically (init applied once, padding skipped).
    got = lax.reduce_window(x, np.float32(2), lax.add, (3, 2), (2, 1), ((1, 1), (0, 1)))
    want = _np_reduce_window(x, np.float32(2), np.add, (3, 2), (2, 1), ((1, 1), (0, 1)))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    # Pytree operands: a (sum, product) pair reduced together.
    s, p = lax.reduce_window((x, x), (np.float32(0), np.float32(1)),
                             lambda a, b: (a[0] + b[0], a[1] * b[1]), (2, 2), (1, 1), "VALID")
    np.testing.assert_allclose(np.asarray(s), _np_reduce_window(x, 0, np.add, (2, 2), (1, 1),
                                                                "VALID"), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(p), _np_reduce_window(x, 1, np.multiply, (2, 2),
                                                                (1, 1), "VALID"), rtol=1e-5)


def test_integer_max():
    x = sample((6, 5), np.int32, seed=4)
    got = lax.reduce_window(x, np.iinfo(np.int32).min, lax.max, (3, 2), (2, 1), "SAME")
    want = _np_reduce_window(x, np.iinfo(np.int32).min, np.maximum, (3, 2), (2, 1), "SAME")
    np.testing.assert_array_equal(np.asarray(got), want)


def test_padtype_to_pads_and_shape():
    assert tuple(lax.padtype_to_pads((5, 7), (3, 2), (2, 3), "SAME")) == ((1, 1), (0, 1))
    assert tuple(lax.padtype_to_pads((5, 7), (3, 2), (2, 3), "SAME_LOWER")) == ((1, 1), (1, 0))
    assert tuple(lax.padtype_to_pads((5, 7), (3, 2), (2, 3), "valid")) == ((0, 0), (0, 0))
    assert lax.reduce_window_shape_tuple((5, 7), (3, 2), (2, 3), ((1, 1), (0, 1))) == (3, 3)
    assert lax.reduce_window_shape_tuple((4, 6), (3, 3), (2, 2), ((0, 1), (0, 1)), (1, 2),
                                         (2, 1)) == (1, 5)


def test_padtype_to_pads_as_jax():
    # JAX 0.10.2 returns a list of pairs, and takes only the padding strings: explicit pairs
    # are a TypeError ("Unknown padding type"), an unknown string a RuntimeError.
    got = lax.padtype_to_pads((5, 6), (3, 3), (2, 2), "same")
    assert got == [(1, 1), (0, 1)] and type(got) is list
    assert lax.padtype_to_pads((5,), (3,), (1,), "VALID") == [(0, 0)]
    for pairs in ([(1, 1), (0, 2)], ((1, 1),), [[1, 1], [0, 2]], None, 3):
        with pytest.raises(TypeError, match="Unknown padding type"):
            lax.padtype_to_pads((5, 6), (3, 3), (1, 1), pairs)
    with pytest.raises(RuntimeError, match="Unrecognized padding type"):
        lax.padtype_to_pads((5, 6), (3, 3), (1, 1), "FULL")


@pytest.mark.parametrize("init, op, np_op, identity", [
    (0.0, lax.add, np.add, 0), (-np.inf, lax.max, np.maximum, np.iinfo(np.int32).min),
    (np.float32(np.inf), lax.min, np.minimum, np.iinfo(np.int32).max),
], ids=["add-0.0", "max--inf", "min-inf"])
def test_integer_operand_with_a_float_identity_init(init, op, np_op, identity):
    # As JAX: an init that is the op's identity in its own dtype picks the specialised
    # reduction, which then runs in the operand's dtype (the result stays int32).
    x = sample((4, 5), np.int32, seed=6)
    want = _np_reduce_window(x, identity, np_op, (2, 3), (1, 2), "SAME")
    for f in (lax.reduce_window, plax.jit(lax.reduce_window, static_argnums=(1, 2, 3, 4, 5))):
        got = f(x, init, op, (2, 3), (1, 2), "SAME")
        assert got.dtype == np.int32
        np.testing.assert_array_equal(np.asarray(got), want)


def test_mismatched_init_dtype_errors_as_jax():
    x = sample((4, 5), np.int32, seed=6)
    msg = r"reduce_window got inconsistent dtypes for operands and init_values: got operand "
    with pytest.raises(TypeError, match=msg + r"dtypes \[dtype\('int32'\)\] and init_value "
                       r"dtypes \[dtype\('float32'\)\]"):
        lax.reduce_window(x, 1.5, lax.mul, (2, 2), (1, 1), "VALID")
    with pytest.raises(TypeError, match=msg):  # not an identity: the generic path checks
        lax.reduce_window(x, 0.0, lambda a, b: a + b, (2, 2), (1, 1), "VALID")
    with pytest.raises(TypeError, match=msg):  # -1 is not int32's lowest: no max shortcut
        lax.reduce_window(x.astype(np.float32), -1, lax.max, (2, 2), (1, 1), "VALID")
    with pytest.raises(TypeError, match=msg):
        lax.reduce_window(x.astype(np.int8), -1, lax.max, (2, 2), (1, 1), "VALID")


def test_jit():
    x = sample((2, 6, 6, 3), np.float32, seed=5)
    f = plax.jit(lambda x: (lax.reduce_window(x, -np.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
                            lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
                            lax.reduce_window(x, 1.0, lax.mul, (1, 2, 2, 1), (1, 1, 1, 1), "VALID")))
    m, s, p = f(x)
    np.testing.assert_allclose(np.asarray(m), _np_reduce_window(
        x, -np.inf, np.maximum, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"))
    np.testing.assert_allclose(np.asarray(s), _np_reduce_window(
        x, 0.0, np.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(p), _np_reduce_window(
        x, 1.0, np.multiply, (1, 2, 2, 1), (1, 1, 1, 1), "VALID"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["sum", "max", "min", "generic"])
@pytest.mark.parametrize("in_axis", [0, 1, 2])
def test_vmap(name, in_axis):
    if name == "generic":
        comp, np_op, init = lax.mul, np.multiply, 1.0
    else:
        comp, np_op, init = OPS[name]
    x = sample((3, 4, 5), np.float32, seed=in_axis)
    f = lambda v: lax.reduce_window(v, np.float32(init), comp, (2, 3), (1, 2), "SAME", (1, 1), (2, 1))
    got = plax.vmap(f, in_axes=in_axis)(x)
    want = np.stack([_np_reduce_window(np.take(x, i, axis=in_axis), np.float32(init), np_op,
                                       (2, 3), (1, 2), "SAME", (1, 1), (2, 1))
                     for i in range(x.shape[in_axis])])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    got = plax.jit(plax.vmap(f, in_axes=in_axis))(x)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def _avg_pool(x, padding="SAME"):
    s = lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), padding)
    return s / 9.0


def _max_pool(x, padding="SAME"):
    return lax.reduce_window(x, -np.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), padding)


def _distinct(shape, seed):
    """Well-separated distinct values, so max pooling has no ties within finite differences."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) * 0.1).astype(np.float32)


@pytest.mark.parametrize("pool", [_avg_pool, _max_pool])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_pooling_grads(pool, padding):
    x = _distinct((1, 5, 6, 2), seed=7)
    check_grads(lambda x: pool(x, padding), (x,), order=1, modes=("fwd", "rev"), eps=1e-2,
                atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_grads_with_dilation_and_padding(name):
    comp, _, init = OPS[name]
    x = _distinct((5, 6), seed=8)
    f = lambda x: lax.reduce_window(x, init, comp, (2, 3), (2, 1), ((1, 0), (2, 1)), (2, 1), (1, 2))
    check_grads(f, (x,), order=1, modes=("fwd", "rev"), eps=1e-2, atol=2e-2, rtol=2e-2)


def test_sum_second_order_and_generic_grad():
    x = sample((4, 5), np.float32, "pos", seed=9)
    f = lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 2), (2, 1), "SAME", (1, 2), None) ** 2
    check_grads(f, (x,), order=2, modes=("fwd", "rev"), eps=1e-2, atol=5e-2, rtol=5e-2)
    g = lambda x: lax.reduce_window(x, 1.0, lax.mul, (2, 2), (1, 1), "VALID")
    check_grads(g, (x,), order=1, modes=("fwd", "rev"), eps=1e-2, atol=5e-2, rtol=5e-2)
    # Generic, non-identity init with padding and base dilation (padding is skipped).
    h = lambda x: lax.reduce_window(x, np.float32(2), lax.add, (3, 2), (2, 1), ((1, 1), (0, 1)),
                                    (1, 2)) ** 2
    check_grads(h, (x,), order=1, modes=("fwd", "rev"), eps=1e-2, atol=5e-2, rtol=5e-2)


def test_max_pool_grad_routes_to_argmax():
    x = np.array([[1., 5., 2., 0.], [3., 4., 8., 7.]], np.float32)
    g = plax.grad(lambda x: lax.reduce_window(x, -np.inf, lax.max, (2, 2), (2, 2),
                                              "VALID").sum())(x)
    np.testing.assert_array_equal(np.asarray(g), [[0, 1, 0, 0], [0, 0, 1, 0]])
    # vjp of the average pool spreads each cotangent over its window.
    _, vjp = plax.vjp(lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2), (1, 2), "VALID"), x)
    (ct,) = vjp(np.array([[1., 2.], [3., 4.]], np.float32))
    np.testing.assert_array_equal(np.asarray(ct), [[1, 1, 2, 2], [3, 3, 4, 4]])


def test_errors():
    x = np.ones((4, 6), np.float32)
    with pytest.raises(TypeError, match="wrong number of window_dimensions"):
        lax.reduce_window(x, 0.0, lax.add, (2,), (1,), "VALID")
    with pytest.raises(TypeError, match="window_strides"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), (1,), ((0, 0), (0, 0)))
    with pytest.raises(TypeError, match="window_dimensions must be positive"):
        lax.reduce_window(x, 0.0, lax.add, (2, 0), (1, 1), "VALID")
    with pytest.raises(TypeError, match="window_strides must be positive"):
        lax.reduce_window(x, -np.inf, lax.max, (2, 2), (0, 1), "VALID")
    with pytest.raises(RuntimeError, match="Unrecognized padding type"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "FOO")
    with pytest.raises(ValueError, match="padding must be a sequence of 2"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), ((0, 0),))
    with pytest.raises(ValueError, match="negative padding"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), ((-5, 0), (0, 0)))
    with pytest.raises(TypeError, match="dtypes should match"):
        lax.reduce_window(x, np.int32(1), lax.mul, (2, 2), (1, 1), "VALID")
    with pytest.raises(ValueError, match="tree structure"):
        lax.reduce_window((x, x), 0.0, lax.add, (2, 2), (1, 1), "VALID")
    with pytest.raises(TypeError, match="reduce_window_sum"):
        lax.reduce_window(np.ones((3, 3), bool), False, lax.add, (2, 2), (1, 1), "VALID")
