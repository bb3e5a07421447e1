"""jit's C++ dispatch (runtime/cpp_jit.py): which calls stay in C++, and that every call,
fast or not, keeps the semantics of the Python path: types, devices, errors, effects."""
import collections
import dataclasses

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import tree_util
from plax.api import jit as api
from plax.core.config import config
from plax.core.trace import current_trace
from plax.runtime.array import ArrayImpl, make_array


@pytest.fixture
def misses(monkeypatch):
    """Names of the jitted functions whose eager calls reached Python (C++ cache misses;
    traced calls, which always do, are not counted)."""
    current_trace()  # (made lazily: until then calls take the general path)
    seen = []
    original = api.JitWrapped._cpp_miss

    def counting(self, *args, **kwargs):
        if api._plain_eager():
            seen.append(self._name)
        return original(self, *args, **kwargs)
    monkeypatch.setattr(api.JitWrapped, "_cpp_miss", counting)
    return seen


def arr(*values, dtype=np.float32):
    return plax.device_put(np.array(values, dtype))


def test_repeated_calls_stay_in_cpp(misses):
    f = plax.jit(lambda a, b: a * b + 1.0)
    x, y = arr(1, 2, 3), arr(4, 5, 6)
    f(x, y)
    for _ in range(5):
        np.testing.assert_allclose(f(x, y), [5, 11, 19])
    assert misses == ["<lambda>"]
    out = f(x, y)
    assert type(out) is ArrayImpl and out.dtype == np.float32 and not out.committed


def test_new_shape_dtype_or_weak_type_retraces_with_right_types(misses):
    f = plax.jit(lambda a: a * 2)
    assert f(arr(1, 2)).shape == (2,)
    assert f(arr(1, 2, 3)).shape == (3,)
    assert f(arr(1, 2, dtype=np.int32)).dtype == np.int32
    weak = f(3.0)
    assert weak.dtype == np.float32 and weak.weak_type and float(weak) == 6.0
    strong = f(np.float32(3.0))
    assert strong.dtype == np.float32 and not strong.weak_type
    assert f(True).dtype == np.int32  # bool * 2 (a weak int) promotes to int32, as in JAX
    assert len(misses) == 6
    f(arr(5, 6)), f(3.0), f(np.float32(1.0)), f(False)
    assert len(misses) == 6


def test_pytrees_kwargs_and_static_arguments(misses):
    g = plax.jit(lambda p, scale, *, shift: {"y": p["w"] * scale + shift, "n": p["n"]},
                 static_argnums=1)
    p = {"w": arr(1, 2), "n": arr(3)}
    out = g(p, 2, shift=arr(1))
    np.testing.assert_allclose(out["y"], [3, 5])
    np.testing.assert_allclose(g(p, 3, shift=arr(1))["y"], [4, 7])
    g(p, 2, shift=arr(1)), g(p, 3, shift=arr(1))
    assert misses == ["<lambda>"] * 2  # one per static value
    with pytest.raises(ValueError, match="Non-hashable static arguments are not supported"):
        g(p, [2], shift=arr(1))
    k = plax.jit(lambda a, b: a - b)
    np.testing.assert_allclose(k(b=arr(1), a=arr(5)), [4])
    np.testing.assert_allclose(k(arr(5), b=arr(1)), [4])


def test_deleted_and_donated_arguments_raise():
    f = plax.jit(lambda a: a + 1)
    x = arr(1, 2)
    f(x), f(x)
    x.delete()
    with pytest.raises(RuntimeError, match="has been deleted"):
        f(x)
    d = plax.jit(lambda a: a * 2, donate_argnums=0)
    y = arr(1, 2)
    np.testing.assert_allclose(d(y), [2, 4])
    z = arr(3, 4)
    np.testing.assert_allclose(d(z), [6, 8])  # (a fast-path run)
    with pytest.raises(RuntimeError, match="has been deleted"):
        d(z)
    with pytest.raises(RuntimeError, match="has been deleted"):
        np.asarray(z)


def test_donated_python_scalar_is_not_reused_after_donation():
    d = plax.jit(lambda a: a + 1, donate_argnums=0)
    assert float(d(2.0)) == 3.0
    assert float(d(2.0)) == 3.0
    assert float(plax.jit(lambda a: a * 1)(2.0)) == 2.0


def test_signed_zero_and_nan_scalars_are_not_mixed_up():
    f = plax.jit(lambda a, s: a * s)
    x = arr(1, 1)
    assert np.signbit(np.asarray(f(x, 0.0))).tolist() == [False, False]
    assert np.signbit(np.asarray(f(x, -0.0))).tolist() == [True, True]
    assert np.isnan(np.asarray(f(x, float("nan")))).all()
    np.testing.assert_allclose(f(x, 2.5), [2.5, 2.5])


def test_committed_arguments_run_on_their_device():
    f = plax.jit(lambda a: a + 1)
    dev = plax.devices()[3]
    x = plax.device_put(np.ones(2, np.float32), dev)
    for _ in range(3):
        out = f(x)
        assert out.devices() == {dev} and out.committed
    u = f(arr(1, 2))
    assert u.devices() == {plax.devices()[0]} and not u.committed


def test_uncommitted_argument_elsewhere_follows_the_default_device():
    f = plax.jit(lambda a: a * 3)
    x = plax.device_put(np.ones(2, np.float32), plax.devices()[2], may_alias=None)
    x = make_array(x, x.aval, False)  # uncommitted, on device 2
    for _ in range(3):
        out = f(x)
        assert out.devices() == {plax.devices()[0]}
        np.testing.assert_allclose(out, [3, 3])


def test_x64_switch_changes_scalar_types():
    f = plax.jit(lambda a: a + 1)
    assert f(1.0).dtype == np.float32
    config.update("jax_enable_x64", True)
    try:
        assert f(1.0).dtype == np.float64 and f(1).dtype == np.int64
        assert f(1.0).dtype == np.float64
    finally:
        config.update("jax_enable_x64", False)
    assert f(1.0).dtype == np.float32 and f(1).dtype == np.int32


def test_default_device_setting_is_followed():
    f = plax.jit(lambda a: a - 1)
    x = arr(1, 2)
    f(x), f(x)
    with plax.default_device(plax.devices()[5]):
        assert f(x).devices() == {plax.devices()[5]}
    config.update("jax_default_device", plax.devices()[6])
    try:
        assert f(x).devices() == {plax.devices()[6]}
        assert f(x).devices() == {plax.devices()[6]}
    finally:
        config.update("jax_default_device", None)
    assert f(x).devices() == {plax.devices()[0]}


def test_pytree_node_registered_after_the_jit(misses):
    @dataclasses.dataclass
    class Pair:
        a: object
        b: object

    f = plax.jit(lambda p: p.a + p.b)
    tree_util.register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c))
    np.testing.assert_allclose(f(Pair(arr(1), arr(2))), [3])
    np.testing.assert_allclose(f(Pair(arr(3), arr(2))), [5])
    assert misses == ["<lambda>"]
    g = plax.jit(lambda d: d)
    od = collections.OrderedDict(b=arr(1), a=arr(2))
    out = g(od)
    assert type(out) is collections.OrderedDict and list(out) == ["b", "a"]


def test_overrides_and_transformations_take_the_python_path(misses):
    f = plax.jit(lambda a: a * 2.0)
    x = arr(1, 2)
    f(x), f(x)
    with plax.enable_x64():
        assert f(np.float64(1.0)).dtype == np.float64
    with plax.disable_jit():
        assert type(f(x)) is ArrayImpl
    np.testing.assert_allclose(plax.grad(lambda v: f(v).sum())(x), [2, 2])
    jaxpr = plax.make_jaxpr(lambda v: f(x) + v)(1.0)
    assert "jit[" in str(jaxpr)  # staged, not run: the concrete call is part of the jaxpr


def test_host_callbacks_run_on_every_call(capfd):
    f = plax.jit(lambda a: (plax.debug.print("value {}", a[0]), a + 1)[1])
    for i in range(3):
        f(arr(float(i)))
    plax.effects_barrier()
    assert capfd.readouterr().out.split("\n")[:3] == ["value 0.0", "value 1.0", "value 2.0"]


def test_float0_outputs_keep_their_type():
    f = plax.jit(plax.grad(lambda x, n: x * 2.0, allow_int=True, argnums=(0, 1)))
    for _ in range(2):
        gx, gn = f(1.0, 3)
        assert float(gx) == 2.0 and gn.dtype == plax.dtypes.float0


def test_sharded_arguments_keep_their_layout(misses):
    mesh = plax.sharding.Mesh(np.array(plax.devices()), ("d",))
    s = plax.sharding.NamedSharding(mesh, plax.sharding.PartitionSpec("d"))
    x = plax.device_put(np.arange(16, dtype=np.float32).reshape(8, 2), s)
    f = plax.jit(lambda a: a * 2.0)
    for _ in range(3):
        out = f(x)
        np.testing.assert_allclose(out, np.arange(16).reshape(8, 2) * 2.0)
        assert out.sharding.is_equivalent_to(s, 2)
    assert misses == ["<lambda>"]


def test_eager_numpy_functions_compile_once_and_match_op_by_op(misses):
    y = arr(1, 2, 3)
    expected = np.sin(np.float32([1, 2, 3]))
    for _ in range(3):
        np.testing.assert_allclose(jnp.sin(y), expected, rtol=1e-6)
        np.testing.assert_allclose(y * 2.0 + y, [3, 6, 9])
        np.testing.assert_allclose(jnp.sum(y, axis=0), 6)
    assert sorted(set(misses)) == ["add", "multiply", "sin", "sum"]
    assert len(misses) == 4
    assert jnp.add(1, 2).weak_type and jnp.add(1, 2).dtype == np.int32
    assert not jnp.add(np.int32(1), 2).weak_type
    np.testing.assert_allclose(jnp.sum(y, axis=[0]), 6)  # (unhashable axis: op by op)
    with pytest.raises(TypeError, match="sin requires ndarray or scalar arguments"):
        jnp.sin("a")
    with pytest.raises(ValueError, match="axis 3 is out of bounds"):
        jnp.sum(y, axis=3)


def test_eager_numpy_functions_are_staged_as_their_primitives():
    text = str(plax.make_jaxpr(lambda a: jnp.sin(a) * 2 + jnp.sum(a))(arr(1, 2)))
    assert "sin" in text and "reduce_sum" in text and "jit[" not in text


def test_jit_with_named_shardings_stays_in_cpp(misses):
    mesh = plax.sharding.Mesh(np.array(plax.devices()), ("d",))
    s = plax.sharding.NamedSharding(mesh, plax.sharding.PartitionSpec("d"))
    f = plax.jit(lambda a: a + 1.0, in_shardings=s, out_shardings=s)
    x = np.arange(8, dtype=np.float32)
    placed = plax.device_put(x, s)
    for _ in range(3):
        out = f(placed)
        np.testing.assert_allclose(out, x + 1)
        assert out.sharding.is_equivalent_to(s, 1)
    assert misses == ["<lambda>"]
    np.testing.assert_allclose(f(x), x + 1)  # a host array is laid out by in_shardings
    specs = plax.jit(lambda a: a * 2.0, in_shardings=plax.sharding.PartitionSpec("d"))
    with plax.set_mesh(mesh):
        np.testing.assert_allclose(specs(placed), x * 2)


def test_threads_keep_their_own_context():
    import threading
    f = plax.jit(lambda a: a + 1)
    f(1.0), f(1.0)
    seen, errors = {}, []
    started = threading.Event()
    release = threading.Event()

    def with_x64():
        try:
            with plax.enable_x64():
                started.set()
                seen["x64"] = f(1.0).dtype
                release.wait(10)
                seen["x64 again"] = f(1.0).dtype
        except Exception as e:  # reported below
            errors.append(e)

    t = threading.Thread(target=with_x64)
    t.start()
    started.wait(10)
    seen["main"] = [f(1.0).dtype for _ in range(3)]  # another thread's override: not ours
    release.set()
    t.join(10)
    assert not errors
    assert seen["x64"] == seen["x64 again"] == np.float64
    assert seen["main"] == [np.float32] * 3
    assert f(1.0).dtype == np.float32


def test_jitted_function_called_from_a_new_thread():
    import threading
    f = plax.jit(lambda a: a * 2)
    f(arr(1)), f(arr(1))
    out = []
    t = threading.Thread(target=lambda: out.extend(float(f(arr(3))[0]) for _ in range(3)))
    t.start()
    t.join(10)
    assert out == [6.0, 6.0, 6.0]


# --- plax's arrays are jaxlib's C++ arrays ----------------------------------------------------
def test_results_are_the_cpp_array_type_with_plax_methods(misses):
    f = plax.jit(lambda a: a * 2.0)
    x = arr(1, 2)
    for out in (f(x), f(x), jnp.sin(x), x + 1):
        assert type(out) is ArrayImpl and isinstance(out, plax.Array)
        assert out.shape == (2,) and out.dtype == np.float32 and not out.weak_type
        assert issubclass(type(out), plax.Array) and issubclass(type(out), jnp.ndarray)
    np.testing.assert_array_equal(f(x), [2.0, 4.0])
    assert misses.count("<lambda>") == 1  # (eager sin and add compile once each too)
    assert make_array(x, x.aval, x.committed) is x  # an array already typed: no new object


def test_key_arrays_stay_on_the_fast_path(misses):
    f = plax.jit(lambda k: plax.random.split(k, 3))
    key = plax.random.key(7)
    first, again = f(key), f(key)
    assert misses == ["<lambda>"]
    assert isinstance(again, plax.Array) and type(again) is not ArrayImpl
    assert again.shape == (3,) and plax.dtypes.issubdtype(again.dtype, plax.dtypes.prng_key)
    want = plax.random.key_data(plax.random.split(key, 3))
    np.testing.assert_array_equal(plax.random.key_data(again), want)
    np.testing.assert_array_equal(plax.random.key_data(first), want)
    with pytest.raises(TypeError, match="PRNGKey dtype cannot be converted to a NumPy array"):
        np.asarray(again)


def test_committedness_of_results_follows_the_inputs():
    x = arr(1, 2)
    on2 = plax.device_put(x, plax.devices()[2])
    assert not x.committed and on2.committed
    f = plax.jit(lambda a: a + 1.0)
    for _ in range(2):  # the Python path, then C++
        assert not f(x).committed and not (x * 2).committed
        out = f(on2)
        assert out.committed and out.devices() == {plax.devices()[2]}
        assert (on2 * 2).committed


def test_deleted_arrays_raise_instead_of_crashing():
    x = arr(1, 2)
    assert float(x[0]) == 1.0 and np.asarray(x).tolist() == [1.0, 2.0]  # host copy kept
    x.delete()
    for read in (x.is_ready, x.block_until_ready, lambda: np.asarray(x), lambda: x.tolist(),
                 lambda: float(x[0])):
        with pytest.raises(RuntimeError, match="Array has been deleted"):
            read()
    assert x.is_deleted() and repr(x) == "Array(<deleted>)"


# --- calls inside config contexts ------------------------------------------------------------
def test_calls_inside_a_config_context_stay_in_cpp_and_follow_it(misses):
    f = plax.jit(lambda a: a - 1)
    # (a Python scalar goes to the default device; an Array elsewhere would be moved)
    with plax.default_device(plax.devices()[3]):
        assert [f(2.0).devices() for _ in range(3)] == [{plax.devices()[3]}] * 3
    assert misses == ["<lambda>"]
    assert f(2.0).devices() == {plax.devices()[0]}  # outside: its own signature
    with plax.default_device(plax.devices()[4]):
        assert f(2.0).devices() == {plax.devices()[4]}
    assert misses == ["<lambda>"] * 3
    g = plax.jit(lambda a: a + 1)
    assert g(1).dtype == np.int32
    with config.override("enable_x64", True):  # C++ types Python scalars as the thread does
        assert g(1).dtype == np.int64 and g(1).dtype == np.int64
    assert g(1).dtype == np.int32


def test_debug_flags_in_a_context_keep_calls_in_python(misses):
    f = plax.jit(lambda a: a * 0.0 / 0.0)
    x = arr(1.0)
    with config.override("debug_nans", True):
        for _ in range(2):
            with pytest.raises(FloatingPointError, match="invalid value"):
                f(x)
    assert misses == []  # (not plain eager: never recorded)
