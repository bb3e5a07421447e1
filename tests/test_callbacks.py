"""pure_callback and io_callback: values, vmap methods, differentiation, errors."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental import io_callback
from plax.sharding import NamedSharding, PartitionSpec as P


def sds(x):
    return plax.ShapeDtypeStruct(np.shape(x), jnp.asarray(x).dtype)


def sin_cb(x):
    assert isinstance(x, plax.Array)  # as JAX's callbacks get jax.Arrays
    return np.sin(x)


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_pure_callback_eager_and_jit(shape):
    x = np.linspace(-1, 1, int(np.prod(shape))).astype(np.float32).reshape(shape)
    want = np.sin(x)
    np.testing.assert_allclose(plax.pure_callback(sin_cb, sds(x), x), want, rtol=1e-6)
    out = plax.jit(lambda v: plax.pure_callback(sin_cb, sds(v), v) * 2)(x)
    assert out.shape == shape
    np.testing.assert_allclose(out, want * 2, rtol=1e-6)


def test_pure_callback_pytrees_and_kwargs():
    def cb(a, *, b):
        return {"s": a["x"] + b, "p": (a["x"] * b).astype(np.int32)}

    shapes = {"s": plax.ShapeDtypeStruct((3,), jnp.float32),
              "p": plax.ShapeDtypeStruct((3,), jnp.int32)}
    out = plax.jit(lambda x: plax.pure_callback(cb, shapes, {"x": x}, b=np.float32(2)))(
        jnp.arange(3.0))
    np.testing.assert_allclose(out["s"], [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(out["p"], [0, 2, 4])
    assert out["p"].dtype == jnp.int32


def test_pure_callback_float64_result_is_canonicalised_without_x64():
    out = plax.jit(lambda x: plax.pure_callback(lambda v: v.astype(np.float64) + 1,
                                                sds(x), x))(jnp.ones(2))
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(out, [2.0, 2.0])


@pytest.mark.parametrize("api", ["pure_callback", "io_callback"])
@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.float64, np.complex128])
def test_64_bit_result_types_are_refused_without_x64(api, dtype):
    call = getattr(plax, api) if api == "pure_callback" else plax.experimental.io_callback
    with pytest.raises(ValueError, match="result_shape_dtypes cannot specify 64-bit types"):
        plax.jit(lambda: call(lambda: np.zeros((), dtype), plax.ShapeDtypeStruct((), dtype)))()
    with plax.enable_x64(True):
        out = plax.jit(lambda: call(lambda: np.ones((), dtype),
                                    plax.ShapeDtypeStruct((), dtype)))()
        assert out.dtype == dtype and np.asarray(out) == 1


def _batched_call(method, record):
    def cb(a, b):
        record.append((a.shape, b.shape))
        return (a + b).astype(a.dtype)

    def f(a, b):
        return plax.pure_callback(cb, sds(a), a, b, vmap_method=method)
    return f


@pytest.mark.parametrize("method, seen", [
    ("sequential", [((3,), (3,))] * 2),
    ("sequential_unrolled", [((3,), (3,))] * 2),
    ("expand_dims", [((2, 3), (1, 3))]),
    ("broadcast_all", [((2, 3), (2, 3))]),
])
def test_vmap_methods(method, seen):
    record = []
    a, b = np.arange(6.0, dtype=np.float32).reshape(2, 3), np.ones(3, np.float32)
    out = plax.vmap(_batched_call(method, record), in_axes=(0, None))(a, b)
    np.testing.assert_allclose(out, a + b)
    assert record == seen
    record.clear()
    out = plax.jit(plax.vmap(_batched_call(method, record), in_axes=(0, None)))(a, b)
    np.testing.assert_allclose(out, a + b)


def test_vmap_batch_dim_not_leading():
    a = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    out = plax.vmap(lambda v: plax.pure_callback(lambda u: u * 2, sds(v), v,
                                                 vmap_method="expand_dims"),
                    in_axes=1, out_axes=1)(a)
    np.testing.assert_allclose(out, a * 2)


def test_vmap_without_method_and_bad_method_raise():
    x = jnp.ones((2, 3))
    with pytest.raises(NotImplementedError, match="vmap is only supported for the "
                                                  "pure_callback primitive when vmap_method"):
        plax.vmap(lambda a: plax.pure_callback(sin_cb, sds(a), a))(x)
    with pytest.raises(ValueError, match="vmap_method must be on of the allowed methods"):
        plax.pure_callback(sin_cb, sds(x), x, vmap_method="bogus")


def test_pure_callback_in_scan():
    def body(c, x):
        y = plax.pure_callback(lambda a, b: (a * b).astype(np.float32), sds(c), c, x)
        return c + y, y

    c, ys = plax.jit(lambda xs: lax.scan(body, jnp.float32(1.0), xs))(jnp.arange(1.0, 4.0))
    # c: 1 -> 1+1*1=2 -> 2+2*2=6 -> 6+6*3=24
    assert float(c) == 24.0
    np.testing.assert_allclose(ys, [1.0, 4.0, 18.0])


def test_grad_needs_custom_jvp():
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP"):
        plax.grad(lambda a: plax.pure_callback(sin_cb, sds(a), a))(1.0)

    @plax.custom_jvp
    def f(x):
        return plax.pure_callback(sin_cb, sds(x), x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), plax.pure_callback(np.cos, sds(x), x) * t

    x = np.float32(0.7)
    np.testing.assert_allclose(plax.grad(f)(x), np.cos(x), rtol=1e-6)
    np.testing.assert_allclose(plax.jit(plax.grad(f))(x), np.cos(x), rtol=1e-6)


def test_wrong_result_shape_and_dtype_raise_naming_both():
    x = jnp.ones(3)
    with pytest.raises(plax.errors.JaxRuntimeError,
                       match=r"Incorrect output shape for return value #0.*Expected: \(3,\), "
                             r"Actual: \(4,\)"):
        plax.jit(lambda a: plax.pure_callback(lambda v: np.ones(4, np.float32), sds(a), a))(x)
    with pytest.raises(plax.errors.JaxRuntimeError,
                       match="Incorrect output dtype for return value #0.*Expected: float32, "
                             "Actual: int32"):
        plax.jit(lambda a: plax.pure_callback(lambda v: np.ones(3, np.int32), sds(a), a))(x)
    with pytest.raises(plax.errors.JaxRuntimeError, match="Mismatched number of outputs"):
        plax.pure_callback(lambda v: (v, v), sds(x), x)


class CustomFailure(Exception):
    pass


def failing(x):
    raise CustomFailure(f"bad value {float(x.sum())}")


@pytest.mark.parametrize("mode", ["eager", "jit", "vmap"])
def test_exceptions_surface_with_their_type_and_the_process_stays_usable(mode):
    x = jnp.ones(3)
    call = lambda a: plax.pure_callback(failing, sds(a), a, vmap_method="sequential")
    run = {"eager": call, "jit": plax.jit(call),
           "vmap": plax.jit(plax.vmap(call))}[mode]
    arg = x if mode != "vmap" else jnp.ones((2, 3))
    with pytest.raises(CustomFailure, match="bad value 3.0") as info:
        run(arg)
    # JAX raises a JaxRuntimeError (a RuntimeError), eagerly and under jit; plax's is also of
    # the callback's own type, and chained to the callback's exception.
    assert isinstance(info.value, plax.errors.JaxRuntimeError)
    assert str(info.value).startswith("CpuCallback error calling callback: CustomFailure")
    assert type(info.value.__cause__) is CustomFailure
    np.testing.assert_allclose(plax.jit(lambda a: a + 1)(x), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(plax.jit(lambda a: plax.pure_callback(sin_cb, sds(a), a))(x),
                               np.sin(np.ones(3)), rtol=1e-6)


@pytest.mark.parametrize("api", ["pure_callback", "io_callback"])
def test_failed_callbacks_are_logged_with_their_traceback(api, caplog):
    call = getattr(plax, api) if api == "pure_callback" else io_callback
    with pytest.raises(CustomFailure, match="bad value 2.0"):
        plax.jit(lambda a: call(failing, sds(a), a))(jnp.ones(2))
    failed = [r for r in caplog.records if r.levelname == "ERROR"]
    assert [r.getMessage() for r in failed] == [f"jax.{api} failed"]
    assert type(failed[0].exc_info[1]) is CustomFailure


def test_exception_in_debug_callback_surfaces_at_barrier_or_call():
    f = plax.jit(lambda x: plax.debug.callback(failing, x))
    with pytest.raises(CustomFailure, match="bad value 2.0"):
        f(jnp.ones(2))
        plax.effects_barrier()
    plax.effects_barrier()  # nothing left pending


def test_io_callback_ordered_runs_in_program_order():
    log = []

    def record(v):
        log.append(int(v))
        return np.int32(v * 3)

    f = plax.jit(lambda x: io_callback(record, plax.ShapeDtypeStruct((), jnp.int32), x,
                                       ordered=True))
    outs = [int(f(np.int32(i))) for i in range(10)]
    plax.effects_barrier()
    assert log == list(range(10)) and outs == [3 * i for i in range(10)]
    assert [repr(e) for e in plax.make_jaxpr(f)(1).effects] == ["OrderedIO"]


def test_io_callback_is_never_dropped_and_vmaps_sequentially():
    log = []
    f = plax.jit(lambda x: (io_callback(lambda v: log.append(v.shape) or v, sds(x), x), x)[1])
    f(jnp.ones(2))
    plax.effects_barrier()
    assert log == [(2,)]
    log.clear()
    out = plax.vmap(lambda x: io_callback(lambda v: (log.append(v.shape), v * 2)[1], sds(x), x))(
        jnp.ones((3, 2)))
    np.testing.assert_allclose(out, 2 * np.ones((3, 2)))
    assert log == [(2,)] * 3


def test_io_callback_rules_that_refuse():
    x = jnp.ones((2, 3))
    with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback"):
        plax.vmap(lambda a: io_callback(sin_cb, sds(a), a, ordered=True))(x)
    with pytest.raises(ValueError, match="IO callbacks do not support JVP"):
        plax.grad(lambda a: io_callback(sin_cb, sds(a), a))(1.0)


def test_callback_in_sharded_jit_and_on_a_chosen_device():
    mesh = plax.make_mesh((8,), ("x",))
    x = plax.device_put(jnp.arange(16.0), NamedSharding(mesh, P("x")))
    out = plax.jit(lambda v: plax.pure_callback(sin_cb, sds(v), v) + 1)(x)
    want = np.sin(np.arange(16, dtype=np.float32))
    np.testing.assert_allclose(out, want + 1, rtol=1e-6)
    device = plax.devices()[3]
    out = plax.jit(lambda v: plax.pure_callback(sin_cb, sds(v), v,
                                                sharding=plax.sharding.SingleDeviceSharding(
                                                    device)))(x)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    with pytest.raises(NotImplementedError, match="only a single-device sharding"):
        plax.pure_callback(sin_cb, sds(x), x, sharding=NamedSharding(mesh, P("x")))


def test_pure_callback_unused_result_is_dropped():
    calls = []
    f = plax.jit(lambda x: (plax.pure_callback(lambda v: calls.append(1) or v, sds(x), x),
                            x + 1)[1])
    np.testing.assert_allclose(f(jnp.ones(2)), [2.0, 2.0])
    plax.effects_barrier()
    assert calls == []


def test_callback_receives_its_own_copy():
    kept = []
    f = plax.jit(lambda x: io_callback(lambda v: kept.append(v) or v, sds(x), x * 2))
    for i in range(3):
        f(jnp.full(4, float(i)))
    plax.effects_barrier()
    assert [k.tolist() for k in kept] == [[2.0 * i] * 4 for i in range(3)]


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_callbacks_receive_arrays_of_keys_as_keys(mode):
    # As JAX's: a key array reaches the callback as a key array (XLA moves its words).
    seen = []
    keys = plax.random.split(plax.random.key(0), 5)
    call = lambda k: plax.debug.callback(lambda v: seen.append(v), k)
    (plax.jit(call) if mode == "jit" else call)(keys)
    plax.effects_barrier()
    (got,) = seen
    assert got.shape == (5,) and got.dtype == keys.dtype
    np.testing.assert_array_equal(plax.random.key_data(got), plax.random.key_data(keys))
