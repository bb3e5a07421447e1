"""plax.numpy array creation against NumPy (with JAX's dtypes and weak types), jaxprs, errors."""
import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.errors import ConcretizationTypeError

BF16 = ml_dtypes.bfloat16


def _check(out, expected, dtype=None, weak=None, exact=True):
    """``out`` is a plax Array equal to ``expected`` with ``dtype`` (default: expected's)."""
    assert isinstance(out, plax.Array), type(out)
    expected = np.asarray(expected)
    dtype = np.dtype(dtype or expected.dtype)
    assert out.dtype == dtype, (out.dtype, dtype)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    if weak is not None:
        assert out.weak_type == weak, (out.weak_type, weak)
    got = np.asarray(out)
    if got.dtype == BF16:
        got = got.astype(np.float32)
    expected = expected.astype(got.dtype)
    if exact:
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=2e-6 if got.dtype.itemsize >= 4 else 1e-2,
                                   atol=1e-6 if got.dtype.itemsize >= 4 else 1e-2)


def _eval(fn, *args):
    """Stage ``fn`` with make_jaxpr and evaluate the jaxpr: a traced run."""
    from plax.core.jaxpr import eval_jaxpr
    closed = plax.make_jaxpr(fn)(*args)
    outs = eval_jaxpr(closed.jaxpr, closed.consts, *args)
    return outs[0] if len(outs) == 1 else outs


# --- array / asarray ---------------------------------------------------------------------
# (value, dtype argument, expected NumPy value, expected dtype, expected weak type); the
# expectations are JAX's: 32-bit defaults, Python scalars weak, lists strong.
ARRAY_CASES = [
    (2.0, None, 2.0, np.float32, True),
    (2, None, 2, np.int32, True),
    (True, None, True, np.bool_, False),
    (1 + 2j, None, 1 + 2j, np.complex64, True),
    ([1, 2.0], None, [1, 2], np.float32, False),
    ([1, 2], None, [1, 2], np.int32, False),
    ([True, 2], None, [1, 2], np.int32, False),
    ([[1, 2.5], [True, 3]], None, [[1, 2.5], [1, 3]], np.float32, False),
    ([1, 2.0, 3j], None, [1, 2, 3j], np.complex64, False),
    ((1, 2), None, [1, 2], np.int32, False),
    ([(1, 2), (3, 4)], None, [[1, 2], [3, 4]], np.int32, False),
    ([], None, np.zeros(0), np.float32, False),
    ([[]], None, np.zeros((1, 0)), np.float32, False),
    (np.arange(3.0), None, [0, 1, 2], np.float32, False),  # float64 narrowed
    (np.arange(3), None, [0, 1, 2], np.int32, False),  # int64 narrowed
    (np.float64(2), None, 2, np.float32, False),
    (np.bool_(True), None, True, np.bool_, False),
    ([np.float32(1), 2], None, [1, 2], np.float32, False),
    ([1.5, 2.5], jnp.bfloat16, [1.5, 2.5], BF16, False),
    ([[1, 2], [3, 4]], jnp.float16, [[1, 2], [3, 4]], np.float16, False),
    ([1, 0, 2], bool, [True, False, True], np.bool_, False),
    (3.7, jnp.int32, 3, np.int32, False),
    (2.0, jnp.float32, 2.0, np.float32, False),
    ([], jnp.int32, np.zeros(0), np.int32, False),
]


@pytest.mark.parametrize("value,dtype,expected,out_dtype,weak", ARRAY_CASES,
                         ids=[repr(c[0])[:20] + f"-{c[1]}" for c in ARRAY_CASES])
def test_array_from_host(value, dtype, expected, out_dtype, weak):
    _check(jnp.array(value, dtype=dtype), expected, out_dtype, weak)
    _check(jnp.asarray(value, dtype=dtype), expected, out_dtype, weak)


def test_array_from_plax_arrays():
    one = jnp.ones(2)
    ints = jnp.arange(2)
    _check(jnp.array([one, np.zeros(2)]), [[1, 1], [0, 0]], np.float32, False)
    _check(jnp.array([ints, [5, 6]]), [[0, 1], [5, 6]], np.int32)
    _check(jnp.array([jnp.ones(2, jnp.bfloat16), [1, 2]]), [[1, 1], [1, 2]], BF16)
    _check(jnp.array([jnp.ones((), jnp.int32), 2.5]), [1, 2.5], np.float32)
    _check(jnp.array([[ints]]), [[[0, 1]]], np.int32)
    _check(jnp.array([jnp.ones((0,)), jnp.ones((0,))]), np.zeros((2, 0)), np.float32)
    w = jnp.asarray(1.0) * 1.0  # weak, and stays weak through array() as in JAX
    _check(jnp.array(w), 1.0, np.float32, True)
    _check(jnp.array([w, 2.0]), [1, 2], np.float32, False)
    _check(jnp.array(w, dtype=jnp.int32), 1, np.int32, False)
    _check(jnp.array(ints, dtype=jnp.float32), [0, 1], np.float32, False)
    assert jnp.asarray(one) is one
    assert jnp.asarray(one, dtype=jnp.float32) is one


def test_array_of_tracers():
    out = _eval(lambda x: jnp.array([x, 2.0 * x, 3.0]), np.float32(1.5))
    _check(out, [1.5, 3.0, 3.0], np.float32)
    out = _eval(lambda x: jnp.array([[x, x], [x, x]], dtype=jnp.int32), np.float32(2.5))
    _check(out, [[2, 2], [2, 2]], np.int32)
    # Python ints beside a float tracer are weak, even in rows of their own and under strict
    # promotion: one dtype for all entries.
    with plax.numpy_dtype_promotion("strict"):
        out = _eval(lambda x: jnp.array([[x, 0], [0, 1]]), np.float32(2.5))
    _check(out, [[2.5, 0], [0, 1]], np.float32)


@pytest.mark.parametrize("value,ndmin,shape", [
    (2.0, 2, (1, 1)), ([1, 2], 3, (1, 1, 2)), (np.ones((2, 3)), 1, (2, 3)), ([[1]], 4, (1, 1, 1, 1))])
def test_array_ndmin(value, ndmin, shape):
    out = jnp.array(value, ndmin=ndmin)
    _check(out, np.array(value, ndmin=ndmin), out.dtype)
    assert out.shape == shape
    _check(jnp.array(jnp.asarray(value), ndmin=ndmin), np.array(value, ndmin=ndmin), out.dtype)


def test_copy():
    _check(jnp.copy(jnp.arange(3)), [0, 1, 2], np.int32, False)
    _check(jnp.copy(2.0), 2.0, np.float32, True)
    _check(jnp.copy(np.arange(3.0)), [0, 1, 2], np.float32, False)
    _check(jnp.arange(3).copy(), [0, 1, 2], np.int32)


# --- zeros / ones / full / *_like ----------------------------------------------------------
@pytest.mark.parametrize("fn,fill", [(jnp.zeros, 0), (jnp.ones, 1), (jnp.empty, 0)])
@pytest.mark.parametrize("shape", [(), 3, (2, 3), (0, 3), [2, np.int32(2)]], ids=str)
def test_zeros_ones_default_float32(fn, fill, shape):
    _check(fn(shape), np.full(shape, fill), np.float32, False)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, BF16, int, float, complex])
def test_zeros_ones_dtypes(dtype):
    canon = {int: np.int32, float: np.float32, complex: np.complex64}.get(dtype, dtype)
    _check(jnp.zeros((2, 1), dtype), np.zeros((2, 1)), canon, False)
    _check(jnp.ones(2, dtype), np.ones(2), canon, False)


@pytest.mark.parametrize("shape,fill,dtype,expected,out_dtype,weak", [
    (3, 2.0, None, [2, 2, 2], np.float32, True),
    ((), 2, None, 2, np.int32, True),
    (3, True, None, [True] * 3, np.bool_, False),
    (3, 1 + 1j, None, [1 + 1j] * 3, np.complex64, True),
    (3, np.float32(2), None, [2, 2, 2], np.float32, False),
    (3, 2.5, jnp.int32, [2, 2, 2], np.int32, False),
    (2, 2.5, jnp.bfloat16, [2.5, 2.5], BF16, False),
    ((2, 3), np.arange(3), None, [[0, 1, 2]] * 2, np.int32, False),
    ((2, 3), [[1.0], [2.0]], None, [[1] * 3, [2] * 3], np.float32, False),
    ((0, 2), 7, None, np.zeros((0, 2)), np.int32, True),
])
def test_full(shape, fill, dtype, expected, out_dtype, weak):
    _check(jnp.full(shape, fill, dtype), expected, out_dtype, weak)


def test_full_traced_fill():
    out = _eval(lambda v: jnp.full((2, 2), v), np.float32(3))
    _check(out, np.full((2, 2), 3), np.float32)
    text = str(plax.make_jaxpr(lambda v: jnp.full(3, v))(np.float32(3)))
    assert "broadcast_in_dim" in text


def test_like_functions():
    f = jnp.ones((2, 3))
    i = jnp.arange(3)
    w = jnp.asarray(2.0) * 1.0
    _check(jnp.zeros_like(f), np.zeros((2, 3)), np.float32, False)
    _check(jnp.ones_like(i), [1, 1, 1], np.int32, False)
    _check(jnp.empty_like(f, shape=(1,)), [0], np.float32, False)
    _check(jnp.full_like(f, 3), np.full((2, 3), 3), np.float32, False)
    _check(jnp.full_like(i, 3.7), [3, 3, 3], np.int32, False)
    _check(jnp.full_like(f, 3, shape=(2, 2)), np.full((2, 2), 3), np.float32)
    _check(jnp.full_like(i, 1, dtype=jnp.bfloat16), [1, 1, 1], BF16, False)
    _check(jnp.zeros_like(f, dtype=bool), np.zeros((2, 3), bool), np.bool_)
    # weak types follow the prototype, as in JAX
    _check(jnp.zeros_like(w), 0.0, np.float32, True)
    _check(jnp.full_like(2.0, 3), 3.0, np.float32, True)
    _check(jnp.ones_like(3), 1, np.int32, True)
    _check(jnp.ones_like(np.ones((2,), np.float64)), [1, 1], np.float32, False)
    _check(jnp.zeros_like(jnp.ones((2, 3), jnp.bfloat16)), np.zeros((2, 3)), BF16)


class _Duck:
    """Any object with ``.shape`` and ``.dtype`` (JAX's *_like take it, as optax does)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


@pytest.mark.parametrize("proto", [plax.ShapeDtypeStruct((2, 3), jnp.float32),
                                   _Duck((2, 3), np.dtype(np.float32)),
                                   _Duck([2, 3], np.dtype(np.float64))],  # x64 off: float32
                         ids=["ShapeDtypeStruct", "duck", "duck-f64"])
def test_like_functions_take_shape_dtype_objects(proto):
    _check(jnp.zeros_like(proto), np.zeros((2, 3)), np.float32, False)
    _check(jnp.ones_like(proto), np.ones((2, 3)), np.float32, False)
    _check(jnp.empty_like(proto), np.zeros((2, 3)), np.float32, False)
    _check(jnp.full_like(proto, 7), np.full((2, 3), 7), np.float32, False)
    _check(jnp.ones_like(proto, dtype=jnp.int32), np.ones((2, 3)), np.int32, False)
    _check(jnp.full_like(proto, 2.5, shape=(4,)), np.full(4, 2.5), np.float32, False)
    _check(jnp.zeros_like(proto, jnp.bfloat16, (1, 2)), np.zeros((1, 2)), BF16, False)
    _check(plax.jit(lambda: jnp.ones_like(proto))(), np.ones((2, 3)), np.float32, False)


def test_like_functions_on_shape_dtype_structs_as_jax():
    # A struct's weak_type is not carried (JAX gives a strong result), keys stay keys, and
    # float0 gives a host float0 array; tree_map over structs is optax's use.
    weak = plax.ShapeDtypeStruct((2,), jnp.float32, weak_type=True)
    _check(jnp.zeros_like(weak), [0, 0], np.float32, False)
    key_dtype = plax.random.key(0).dtype
    keys = jnp.zeros_like(plax.ShapeDtypeStruct((2,), key_dtype))
    assert keys.dtype == key_dtype and keys.shape == (2,)
    np.testing.assert_array_equal(np.asarray(plax.random.key_data(keys)), np.zeros((2, 2)))
    f0 = jnp.zeros_like(plax.ShapeDtypeStruct((3,), plax.dtypes.float0))
    assert isinstance(f0, np.ndarray) and f0.dtype == plax.dtypes.float0 and f0.shape == (3,)


F0 = plax.dtypes.float0
FLOAT0_MAKERS = {  # as JAX 0.10.2: each a host (NumPy) array of float0s
    "zeros": lambda: jnp.zeros((2,), F0), "ones": lambda: jnp.ones((2,), F0),
    "full": lambda: jnp.full((2,), 0, F0), "empty": lambda: jnp.empty((2,), F0),
    "zeros_like": lambda: jnp.zeros_like(np.ones(2), F0),
    "astype": lambda: jnp.ones(2).astype(F0), "asarray": lambda: jnp.asarray(jnp.ones(2), F0),
    "convert_element_type": lambda: plax.lax.convert_element_type(jnp.ones(2), F0),
    "array of float0s": lambda: jnp.array(np.zeros(2, F0)),
    "under jit": lambda: plax.jit(lambda x: jnp.zeros_like(x, F0))(jnp.ones(2)),
}


@pytest.mark.parametrize("name", sorted(FLOAT0_MAKERS))
def test_float0_arrays_are_host_arrays(name):
    out = FLOAT0_MAKERS[name]()
    assert isinstance(out, np.ndarray) and out.dtype == F0 and out.shape == (2,)


def test_float0_takes_part_in_no_operation():
    with pytest.raises(TypeError, match="Called iota with a float0 array"):
        jnp.arange(3, dtype=F0)
    with pytest.raises(TypeError, match="Called reduce_sum with a float0 array"):
        jnp.sum(jnp.ones(2), dtype=F0)
    tree = {"w": plax.ShapeDtypeStruct((2, 2), jnp.float32), "b": plax.ShapeDtypeStruct((2,), jnp.int8)}
    out = plax.tree_util.tree_map(jnp.zeros_like, tree)
    _check(out["w"], np.zeros((2, 2)), np.float32, False)
    _check(out["b"], np.zeros(2), np.int8, False)


def test_like_functions_keep_the_prototypes_sharding():
    devices = plax.devices()
    on_last = plax.device_put(jnp.arange(4.0), devices[-1])
    assert jnp.zeros_like(on_last).sharding == on_last.sharding
    assert jnp.zeros_like(on_last, shape=(4,)).sharding == on_last.sharding  # same shape: kept
    assert jnp.zeros_like(on_last, shape=(2,)).sharding.device_set == {devices[0]}
    assert jnp.ones_like(on_last, device=devices[0]).sharding.device_set == {devices[0]}
    struct = plax.ShapeDtypeStruct((4,), jnp.float32,
                                   sharding=plax.sharding.SingleDeviceSharding(devices[-1]))
    _check(jnp.full_like(struct, 3), np.full(4, 3), np.float32, False)
    assert jnp.full_like(struct, 3).sharding == struct.sharding
    if len(devices) >= 2:
        mesh = plax.make_mesh((len(devices),), ("x",),
                              axis_types=(plax.sharding.AxisType.Auto,))
        spread = plax.NamedSharding(mesh, plax.P("x"))
        s = plax.ShapeDtypeStruct((2 * len(devices),), jnp.float32, sharding=spread)
        z = jnp.zeros_like(s)
        assert z.sharding == spread
        np.testing.assert_array_equal(np.asarray(z), np.zeros(2 * len(devices)))


def test_like_functions_reject_what_has_no_shape_and_dtype():
    with pytest.raises(ValueError, match=r"to a NumPy dtype \(via `.dtype` value 'int8'\)"):
        jnp.zeros_like(_Duck((2,), "int8"))
    with pytest.raises(TypeError, match="zeros_like requires ndarray or scalar arguments"):
        jnp.zeros_like(None)
    with pytest.raises(TypeError, match="ones_like requires ndarray or scalar arguments"):
        jnp.ones_like(object())


# --- arange / eye / identity / tri ---------------------------------------------------------
def _f32_range(start, step, n, dtype=np.float32):
    """JAX's float arange: start + step * i, computed in the result dtype."""
    i = np.arange(n).astype(dtype)
    return (dtype(start) + dtype(step) * i).astype(dtype)


@pytest.mark.parametrize("args,kwargs,expected,dtype", [
    ((5,), {}, np.arange(5), np.int32),
    ((0,), {}, np.arange(0), np.int32),
    ((-3,), {}, np.arange(0), np.int32),
    ((2, 7), {}, np.arange(2, 7), np.int32),
    ((2, 7, 2), {}, np.arange(2, 7, 2), np.int32),
    ((10, 0, -3), {}, np.arange(10, 0, -3), np.int32),
    ((5.0,), {}, np.arange(5), np.float32),
    ((0.0, 1.0, 0.25), {}, np.arange(0, 1, 0.25), np.float32),
    ((0, 1, 0.1), {}, _f32_range(0, 0.1, 10), np.float32),
    ((-1.5, 1, 0.5), {}, np.arange(-1.5, 1, 0.5), np.float32),
    ((0, 5, 1.5), {}, np.arange(0, 5, 1.5), np.float32),
    ((5,), {"dtype": jnp.float32}, np.arange(5), np.float32),
    ((5,), {"dtype": jnp.bfloat16}, np.arange(5), BF16),
    ((1, 5), {"dtype": jnp.float16}, np.arange(1, 5), np.float16),
    ((3,), {"dtype": jnp.uint8}, np.arange(3), np.uint8),
    ((0.5, 3), {"dtype": jnp.int32}, [0, 1, 2], np.int32),
    ((np.int64(5),), {}, np.arange(5), np.int32),
    ((np.float64(5),), {}, np.arange(5), np.float32),
    ((jnp.asarray(4),), {}, np.arange(4), np.int32),
    ((jnp.asarray(4.0),), {}, np.arange(4), np.float32),
])
def test_arange(args, kwargs, expected, dtype):
    _check(jnp.arange(*args, **kwargs), expected, dtype, False)


@pytest.mark.parametrize("args,kwargs", [
    ((3,), {}), ((3,), {"k": 1}), ((3, 4), {"k": -1}), ((3, 2), {"k": 5}), ((0,), {}),
    ((2,), {"dtype": jnp.int32}), ((2,), {"dtype": bool}), ((3,), {"k": -2, "dtype": jnp.bfloat16}),
    ((2,), {"M": 3}),
])
def test_eye(args, kwargs):
    np_kwargs = {k: (np.float32 if v is jnp.bfloat16 else v) for k, v in kwargs.items()}
    dtype = kwargs.get("dtype", np.float32)
    _check(jnp.eye(*args, **kwargs), np.eye(*args, **np_kwargs), dtype, False)


def test_eye_traced_k_and_identity():
    out = _eval(lambda k: jnp.eye(3, k=k), np.int32(1))
    _check(out, np.eye(3, k=1), np.float32)
    _check(jnp.identity(3, jnp.int32), np.identity(3), np.int32)
    _check(jnp.identity(2), np.identity(2), np.float32)


@pytest.mark.parametrize("args,kwargs", [
    ((3,), {}), ((3, 4, 1), {}), ((3,), {"k": -1, "dtype": jnp.int32}), ((3,), {"dtype": bool}),
    ((0,), {}), ((2, 5), {"k": -3})])
def test_tri(args, kwargs):
    dtype = kwargs.get("dtype", np.float32)
    _check(jnp.tri(*args, **kwargs), np.tri(*args, **kwargs), dtype, False)


@pytest.mark.parametrize("shape,k", [((3, 3), 0), ((3, 4), 1), ((3, 4), -1), ((2, 3, 4), 0),
                                     ((4, 2), 5), ((0, 3), 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, BF16])
def test_tril_triu(shape, k, dtype):
    if dtype is not np.float32 and shape != (3, 4):
        return  # dtype coverage from one shape keeps compiles down
    x = (np.arange(int(np.prod(shape))).reshape(shape) % 5 + 1).astype(dtype)
    _check(jnp.tril(x, k), np.tril(x, k), dtype)
    _check(jnp.triu(x, k), np.triu(x, k), dtype)


def test_tril_keeps_weak_type():
    w = jnp.ones((2, 2)) * 0 + jnp.asarray(1.0)
    assert not jnp.tril(w).weak_type
    weak = jnp.broadcast_to(jnp.asarray(1.0), (2, 2))
    assert weak.weak_type and jnp.tril(weak).weak_type


# --- linspace / logspace / geomspace ------------------------------------------------------
@pytest.mark.parametrize("args,kwargs", [
    ((0, 1, 5), {}), ((0, 1, 5), {"endpoint": False}), ((2.0, -3.0, 7), {}), ((0, 1, 1), {}),
    ((0, 1, 1), {"endpoint": False}), ((0, 1, 0), {}), ((0, 10, 5), {"dtype": np.int32}),
    ((-10, 0, 4), {"dtype": np.int32}), ((0, 1, 3), {"dtype": np.bool_}),
    ((np.array([0.0, 1.0]), np.array([1.0, 3.0]), 3), {}),
    ((np.array([0.0, 1.0]), 5.0, 3), {"axis": 1}),
    ((np.array([[0.0, 1.0]]), 5.0, 3), {"axis": -2}),
    ((0.0, np.array([1.0, 2.0]), 4), {"endpoint": False}),
])
def test_linspace(args, kwargs):
    expected = np.linspace(*args, **kwargs)
    dtype = kwargs.get("dtype", np.float32)
    _check(jnp.linspace(*args, **kwargs), expected, dtype, False, exact=False)


@pytest.mark.parametrize("num,endpoint", [(5, True), (5, False), (1, True), (1, False), (0, True)])
def test_linspace_retstep(num, endpoint):
    out, step = jnp.linspace(0.0, 2.0, num, endpoint=endpoint, retstep=True)
    e_out, e_step = np.linspace(0.0, 2.0, num, endpoint=endpoint, retstep=True)
    _check(out, e_out, np.float32, exact=False)
    _check(step, np.nan if num - endpoint <= 0 else e_step, np.float32, exact=False)
    out, step = jnp.linspace(0.0, np.array([1.0, 2.0]), 4, retstep=True, dtype=jnp.int32)
    _check(step, [1 / 3, 2 / 3], np.float32, exact=False)


def test_linspace_dtypes_follow_inputs():
    _check(jnp.linspace(jnp.asarray(0.0, jnp.bfloat16), 4, 5), np.arange(5), BF16)
    _check(jnp.linspace(jnp.asarray(0.0, jnp.float16), 4, 5), np.arange(5), np.float16)
    _check(jnp.linspace(jnp.asarray(0, jnp.int32), 4, 5), np.arange(5), np.float32)
    _check(jnp.linspace(0, 1, 3, dtype=jnp.bfloat16), [0, 0.5, 1], BF16)
    _check(jnp.linspace(0j, 1 + 1j, 3), [0, 0.5 + 0.5j, 1 + 1j], np.complex64)


def test_linspace_traced_bounds():
    out = _eval(lambda a, b: jnp.linspace(a, b, 5), np.float32(1), np.float32(3))
    _check(out, np.linspace(1, 3, 5), np.float32, exact=False)


@pytest.mark.parametrize("args,kwargs", [
    ((0, 2, 3), {}), ((0, 2, 3), {"base": 2}), ((0, 2, 3), {"endpoint": False}),
    ((0, 2.5, 3), {"dtype": np.int32}), ((np.array([0.0, 1.0]), 2, 3), {"axis": 1}),
])
def test_logspace(args, kwargs):
    dtype = kwargs.get("dtype", np.float32)
    expected = np.logspace(*args, **kwargs)
    _check(jnp.logspace(*args, **kwargs), expected, dtype, False, exact=dtype is np.int32)


@pytest.mark.parametrize("args,kwargs", [
    ((1, 1000, 4), {}), ((1, 1000, 4), {"endpoint": False}), ((-1, -1000, 4), {}),
    ((1, 256, 9), {"dtype": np.int32}), ((np.array([1.0, 2.0]), 100, 3), {"axis": 1}),
    ((np.array([1.0, -2.0]), np.array([100.0, -8.0]), 3), {}),
])
def test_geomspace(args, kwargs):
    dtype = kwargs.get("dtype", np.float32)
    expected = np.geomspace(*args, **kwargs)
    if dtype is np.int32:  # float32 powers of 2 land exactly, as in JAX (NumPy's float64 don't)
        expected = 2 ** np.arange(9)
    _check(jnp.geomspace(*args, **kwargs), expected, dtype, False, exact=dtype is np.int32)


# --- meshgrid ----------------------------------------------------------------------------
@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_meshgrid(n, sparse, indexing):
    xs = [np.arange(2 + i, dtype=np.float32 if i % 2 else np.int32) for i in range(n)]
    outs = jnp.meshgrid(*xs, sparse=sparse, indexing=indexing)
    expected = np.meshgrid(*xs, sparse=sparse, indexing=indexing)
    assert isinstance(outs, list) and len(outs) == len(expected)
    for o, e in zip(outs, expected):
        _check(o, e)
    assert jnp.meshgrid() == []


# --- jaxprs ------------------------------------------------------------------------------
@pytest.mark.parametrize("fn,expected", [
    (lambda: jnp.zeros(3), "a:f32[3] = broadcast_in_dim 0.0:f32[]"),
    (lambda: jnp.ones((2, 2), jnp.int32), "broadcast_in_dim 1:i32[]"),
    (lambda: jnp.arange(5), "iota[dimension=0 dtype=int32 shape=(5,)"),
    (lambda: jnp.arange(2, 7), "add 2:i32[] a"),
    (lambda: jnp.arange(0, 1, 0.1), "mul 0.1"),
    (lambda: jnp.eye(3, k=1), "eq"),
    (lambda: jnp.tri(3), "ge"),
    (lambda: jnp.linspace(0, 1, 5), "iota[dimension=0 dtype=float32 shape=(4,)"),
    (lambda: jnp.full((2,), 7.0), "broadcast_in_dim 7.0:f32[]"),
])
def test_jaxprs(fn, expected):
    text = str(plax.make_jaxpr(fn)())
    assert expected in text, text


# --- errors ------------------------------------------------------------------------------
ERRORS = [
    (lambda: jnp.zeros(-1), TypeError, "every element be nonnegative"),
    (lambda: jnp.zeros((2.0,)), TypeError, "1D sequences of concrete values of integer type"),
    (lambda: jnp.array("abc"), TypeError, "is not a valid JAX array type"),
    (lambda: jnp.array([[1, 2], [3]]), ValueError, "inhomogeneous"),
    (lambda: jnp.array(2 ** 40), OverflowError, "out of bounds for int32"),
    (lambda: jnp.array([1, 2 ** 40]), OverflowError, "out of bounds for int32"),
    (lambda: jnp.array([jnp.ones(2), jnp.ones(3)]), ValueError, "inhomogeneous"),
    (lambda: jnp.array([1], order="F"), NotImplementedError, "C-ordered"),
    (lambda: jnp.full((2, 3), jnp.arange(2)), ValueError, "Incompatible shapes for broadcasting"),
    (lambda: jnp.full_like([1, 2], 3.0), TypeError, "full_like requires ndarray or scalar"),
    (lambda: jnp.arange(5, dtype=bool), TypeError, "bool"),
    (lambda: jnp.arange(True), TypeError, "bool"),
    (lambda: jnp.arange(1 + 1j), ValueError, "complex"),
    (lambda: jnp.arange(0, 5, 0), ValueError, "step must not be zero"),
    (lambda: jnp.eye(-1), ValueError, "negative dimensions"),
    (lambda: jnp.eye(2.5), TypeError, "concrete values of integer type"),
    (lambda: jnp.linspace(0, 1, -1), ValueError, "Number of samples, -1, must be non-negative"),
    (lambda: jnp.linspace(0, 1, 2.5), TypeError, "integer"),
    (lambda: jnp.linspace([0], 1), TypeError, "linspace requires ndarray or scalar"),
    (lambda: jnp.meshgrid(jnp.arange(2), jnp.ones((2, 2))), ValueError, "must be 1D"),
    (lambda: jnp.meshgrid(jnp.arange(2), indexing="foo"), ValueError, "'xy' and 'ij'"),
    (lambda: jnp.tril(jnp.arange(3)), ValueError, "at least 2D"),
    (lambda: jnp.triu(2.0), ValueError, "at least 2D"),
    (lambda: jnp.copy([1, 2]), TypeError, "copy requires ndarray or scalar"),
]


@pytest.mark.parametrize("fn,exc,match", ERRORS)
def test_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_traced_sizes_raise():
    with pytest.raises(ConcretizationTypeError, match="arange"):
        plax.make_jaxpr(lambda n: jnp.arange(n))(np.int32(3))
    with pytest.raises(ConcretizationTypeError, match="linspace"):
        plax.make_jaxpr(lambda n: jnp.linspace(0, 1, n))(np.int32(3))
    with pytest.raises(TypeError, match="static"):
        plax.make_jaxpr(lambda n: jnp.zeros(n))(np.int32(3))


# --- copies: a new buffer, so a donated copy leaves the original alone (as in JAX) ----------
COPIES = [  # (make from x, copies?)
    (lambda x: jnp.array(x), True),
    (lambda x: jnp.copy(x), True),
    (lambda x: x.copy(), True),
    (lambda x: jnp.asarray(x, copy=True), True),
    (lambda x: jnp.astype(x, jnp.float32, copy=True), True),
    (lambda x: jnp.asarray(x), False),
    (lambda x: jnp.array(x, copy=False), False),
]


@pytest.mark.parametrize("make,copies", COPIES)
def test_copies_get_a_buffer_of_their_own(make, copies):
    x = jnp.arange(4.0)
    y = make(x)
    np.testing.assert_array_equal(y, np.arange(4.0))
    assert (y.unsafe_buffer_pointer() != x.unsafe_buffer_pointer()) is copies
    traced = plax.make_jaxpr(make)(x)
    assert [e.primitive.name for e in traced.jaxpr.eqns] == (["copy"] if copies else [])


def test_a_donated_copy_leaves_the_original_alive():
    # optax's schedule-free state holds params.copy(); both are donated to the update step.
    step = plax.jit(lambda p, s: (p * 2, {"z": s["z"] + p}), donate_argnums=(0, 1))
    params = jnp.arange(3.0)
    state = plax.tree_util.tree_map(lambda t: t.copy(), {"z": params})
    new_params, new_state = step(params, state)
    np.testing.assert_array_equal(new_params, np.arange(3.0) * 2)
    np.testing.assert_array_equal(new_state["z"], np.arange(3.0) * 2)


def test_copy_differentiates_batches_and_keeps_keys_and_layouts():
    np.testing.assert_allclose(plax.grad(lambda x: jnp.array(x) * 3.0)(2.0), 3.0)
    np.testing.assert_array_equal(plax.vmap(jnp.copy)(jnp.ones((2, 3))), np.ones((2, 3)))
    key = plax.random.key(7)
    np.testing.assert_array_equal(plax.random.key_data(jnp.array(key)),
                                  plax.random.key_data(key))
    mesh = plax.make_mesh((len(plax.devices()),), ("d",))
    sharding = plax.sharding.NamedSharding(mesh, plax.sharding.PartitionSpec("d"))
    x = plax.device_put(np.arange(2.0 * len(plax.devices())), sharding)
    y = x.copy()
    assert y.sharding == sharding
    np.testing.assert_array_equal(y, np.asarray(x))


def test_linspace_runs_compiled_and_rounds_as_jax():
    # One program with start/stop as arguments (XLA fuses start*(1-t) + stop*t), as JAX's
    # jitted linspace: these elements differ by an ulp when computed op by op.
    x = np.asarray(jnp.linspace(-1.0, 1.0, 20))
    assert x[9:13].tobytes().hex() == "3a9457bd3c94573d28af213ea1bc863e"
    np.testing.assert_allclose(x, np.linspace(-1.0, 1.0, 20), rtol=1e-6)
