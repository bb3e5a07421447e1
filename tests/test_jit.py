"""plax.jit: decorator forms, static and donated arguments, the tracing cache, devices,
nested jit as the jit primitive (printed jit[...], as in JAX 0.10), pytrees in and out, debug flags and tracer leaks."""
import functools
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import errors, lax
from plax.core.config import config
from plax.sharding import SingleDeviceSharding

X = np.arange(3, dtype=np.float32)


def counted(fun):
    """``fun`` wrapped so that ``wrapper.n`` counts its Python calls (= traces under jit)."""
    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        wrapper.n += 1
        return fun(*args, **kwargs)
    wrapper.n = 0
    return wrapper


# --- usage forms ---------------------------------------------------------------------------
def test_decorator_forms():
    @plax.jit
    def a(x, y):
        return x * 2 + y

    @plax.jit(static_argnums=1)
    def b(x, n):
        return x * n

    @functools.partial(plax.jit, static_argnames="n")
    def c(x, n):
        return x * n

    out = a(X, 1.0)
    assert isinstance(out, plax.Array) and out.dtype == np.float32
    np.testing.assert_array_equal(out, X * 2 + 1)
    np.testing.assert_array_equal(b(X, 3), X * 3)
    np.testing.assert_array_equal(c(X, 4), X * 4)
    np.testing.assert_array_equal(c(X, n=4), X * 4)


def test_wrapper_keeps_name_doc_and_wrapped():
    def f(x):
        """Doubles x."""
        return x * 2
    g = plax.jit(f)
    assert g.__wrapped__ is f
    assert g.__name__ == "f" and g.__doc__ == "Doubles x."
    assert "f" in repr(g)
    with pytest.raises(TypeError, match="callable"):
        plax.jit(3)


def test_method_decorator():
    class Scale:
        def __init__(self, k):
            self.k = k

        def __hash__(self):
            return hash(self.k)

        def __eq__(self, other):
            return isinstance(other, Scale) and self.k == other.k

        @functools.partial(plax.jit, static_argnums=0)
        def apply(self, x):
            return x * self.k

    np.testing.assert_array_equal(Scale(3).apply(X), X * 3)
    np.testing.assert_array_equal(Scale(5).apply(X), X * 5)
    jitted = Scale.__dict__["apply"]
    assert jitted.__wrapped__.__name__ == "apply" and callable(jitted.lower)
    assert Scale.apply.__get__(None, Scale) is jitted
    assert "x * self.k" not in jitted.lower(Scale(2), X).as_text()  # (lowered, not source)


# --- static arguments ------------------------------------------------------------------------
def test_static_argnums_and_argnames_inferred_from_signature():
    def f(x, n, *, scale=1):
        return x * n * scale
    g = plax.jit(f, static_argnums=1)
    assert g._static_argnames == ("n",)
    h = plax.jit(f, static_argnames=("n", "scale"))
    assert h._static_argnums == (1,)
    # Static passed by keyword (resolved from argnums) and positionally (resolved from argnames).
    np.testing.assert_array_equal(g(X, n=3), X * 3)
    np.testing.assert_array_equal(h(X, 3, scale=2), X * 6)


def test_negative_static_argnums():
    f = counted(lambda x, n: x * n)
    g = plax.jit(f, static_argnums=-1)
    np.testing.assert_array_equal(g(X, 3), X * 3)
    np.testing.assert_array_equal(g(X, 4), X * 4)
    assert f.n == 2  # the static value is part of the cache key


def test_static_argnames_with_varargs_and_varkwargs():
    def va(*args, **kwargs):
        return args[0] * kwargs["s"]
    np.testing.assert_array_equal(plax.jit(va, static_argnames="s")(X, s=2), X * 2)
    np.testing.assert_array_equal(plax.jit(va, static_argnums=1)(X, 2, s=3.0), X * 3)


def test_bad_static_specs():
    with pytest.raises(ValueError, match="static_argnums"):
        plax.jit(lambda x: x, static_argnums=3)
    with pytest.raises(ValueError, match="'zz' is not a parameter"):
        plax.jit(lambda x: x, static_argnames="zz")
    with pytest.raises(ValueError, match="cannot overlap"):
        plax.jit(lambda x, y: x, static_argnums=0, donate_argnums=0)


def test_unhashable_static_argument():
    g = plax.jit(lambda x, n: x, static_argnums=1)
    with pytest.raises(ValueError, match="Non-hashable static arguments are not supported") as e:
        g(X, [1, 2])
    assert "list" in str(e.value)
    h = plax.jit(lambda x, n: x, static_argnames="n")
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        h(X, n={"a": 1})


def test_non_array_argument_that_is_not_static():
    f = plax.jit(lambda x, opts: x)
    with pytest.raises(TypeError, match="Error interpreting argument to .* as an abstract array") as e:
        f(X, "fast")
    msg = str(e.value)
    assert "opts" in msg and "static_argnums" in msg
    with pytest.raises(TypeError, match=r"path opts\['mode'\]"):
        f(X, {"mode": "fast"})


def test_kwargs_passed_by_name():
    @plax.jit
    def f(x, y, scale=1.0):
        return x * scale + y
    np.testing.assert_allclose(f(X, y=X), X * 2)
    np.testing.assert_allclose(f(x=X, y=X, scale=3.0), X * 4)
    np.testing.assert_allclose(f(X, X, scale=np.float32(0.5)), X * 1.5)


# --- the tracing cache -------------------------------------------------------------------------
def test_retrace_only_when_the_signature_changes():
    f = counted(lambda x, y: x + y)
    g = plax.jit(f)
    g(X, 1.0)
    g(X, 2.0)                          # same types (weak f32 scalar): cached
    g(plax.device_put(X), 3.0)         # NumPy array and Array have the same type
    assert f.n == 1
    g(X[:2], 1.0)                      # new shape
    assert f.n == 2
    g(X.astype(np.int32), 1)           # new dtype
    assert f.n == 3
    g(X, np.float32(1.0))              # strong f32 instead of a weak Python float
    assert f.n == 4
    g(X, jnp.float32(5.0))             # still strong f32: cached
    assert f.n == 4
    g(X, 1)                            # weak int32
    assert f.n == 5


def test_retrace_on_pytree_structure_and_static_values():
    f = counted(lambda t, n: t[0] * n)
    g = plax.jit(f, static_argnums=1)
    g((X, X), 2)
    g((X, X), 2)
    assert f.n == 1
    g([X, X], 2)                       # list instead of tuple
    assert f.n == 2
    g((X, X, X), 2)                    # one more leaf
    assert f.n == 3
    np.testing.assert_array_equal(g((X, X), 3), X * 3)
    assert f.n == 4
    d = counted(lambda t: t["a"])
    dj = plax.jit(d)
    dj({"a": X})
    dj({"a": X, "b": X})
    assert d.n == 2


@pytest.mark.needs_devices(2)
def test_committed_device_change_recompiles_without_retracing(caplog):
    devs = plax.devices()
    f = counted(lambda x: x + 1)
    g = plax.jit(f)
    with config.override("log_compiles", True), caplog.at_level(logging.WARNING, logger="plax"):
        r0 = g(plax.device_put(X, devs[0]))
        r1 = g(plax.device_put(X, devs[1]))
    assert f.n == 1
    assert r0.devices() == {devs[0]} and r1.devices() == {devs[1]}
    np.testing.assert_array_equal(r1, X + 1)
    compiles = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compiling")]
    assert len(compiles) == 2 and "cpu:1" in compiles[1] and "because" in compiles[1]


def test_clear_caches_forces_retrace():
    f = counted(lambda x: x * 2)
    g = plax.jit(f)
    g(X)
    g(X)
    assert f.n == 1
    plax.clear_caches()
    np.testing.assert_array_equal(g(X), X * 2)
    assert f.n == 2
    g.clear_cache()
    g(X)
    assert f.n == 3



# --- the cache belongs to the function, not to the wrapper ---------------------------------------
def test_a_fresh_jit_of_the_same_function_reuses_its_trace_and_executable():
    from plax.runtime import cpp_jit
    f = counted(lambda x: x * 2)
    np.testing.assert_array_equal(plax.jit(f)(X), X * 2)
    entries = cpp_jit._shared_cache.size()
    for _ in range(3):  # jit(f)(x) in a loop: no retrace, and C++ finds the signature
        np.testing.assert_array_equal(plax.jit(f)(X), X * 2)
    assert f.n == 1 and cpp_jit._shared_cache.size() == entries
    # Options that do not change the trace reuse it; a new signature traces once more.
    plax.jit(f, donate_argnums=())(X)
    plax.jit(f, keep_unused=True)(X)
    assert f.n == 1
    plax.jit(f)(np.ones((2, 2), np.float32))
    assert f.n == 2
    plax.jit(f, static_argnums=0)(3)  # a static argument is part of what is traced
    assert f.n == 3


def test_a_global_read_at_trace_time_stays_baked_in_for_every_jit_of_the_function():
    state = {"offset": 1.0}

    def f(x):
        return x + state["offset"]

    assert float(plax.jit(f)(1.0)) == 2.0
    state["offset"] = 10.0
    assert float(plax.jit(f)(1.0)) == 2.0  # as JAX: the second wrapper hits the first's cache
    assert float(plax.grad(plax.jit(f))(1.0)) == 1.0
    assert float(plax.jit(f)(np.float32(1.0))) == 11.0  # a new signature traces anew


def test_clear_cache_of_one_wrapper_retraces_for_the_others():
    f = counted(lambda x: x + 1)
    a, b = plax.jit(f), plax.jit(f)
    a(X)
    b(X)
    assert f.n == 1
    a.clear_cache()
    b(X)
    assert f.n == 2


def test_the_cache_drops_a_function_that_has_died():
    import gc
    import weakref
    from plax.api import jit_options as api_jit_options
    from plax.runtime import cpp_jit

    def make():
        def f(x):
            return x * 3
        return f

    gc.collect()
    before = cpp_jit._shared_cache.size()
    functions = api_jit_options.traces_by_function
    n_functions = len(functions)
    f = make()
    ref = weakref.ref(f)
    np.testing.assert_array_equal(plax.jit(f)(X), X * 3)
    assert cpp_jit._shared_cache.size() == before + 1
    assert f in functions and len(functions) == n_functions + 1
    del f
    gc.collect()
    assert ref() is None
    assert cpp_jit._shared_cache.size() == before and len(functions) == n_functions


def test_a_temporary_jit_of_a_bound_method_goes_with_it():
    class Model:
        def __init__(self):
            self.n = 0

        def apply(self, x):
            self.n += 1
            return x * 2

    m = Model()
    np.testing.assert_array_equal(plax.jit(m.apply)(X), X * 2)
    np.testing.assert_array_equal(plax.jit(m.apply)(X), X * 2)
    assert m.n == 2  # as in JAX: each bound method dies with its wrapper, and its cache too
    keep = plax.jit(m.apply)
    keep(X)
    keep(X)
    assert m.n == 3


class _EqualButUnhashable:
    __hash__ = None

    def __init__(self):
        self.n = 0

    def __eq__(self, other):
        return isinstance(other, _EqualButUnhashable)

    def __call__(self, x):
        self.n += 1
        return x - 1


class _NoWeakReferences:
    __slots__ = ("n",)

    def __init__(self):
        self.n = 0

    def __call__(self, x):
        self.n += 1
        return x - 1


@pytest.mark.parametrize("kind", [_EqualButUnhashable, _NoWeakReferences])
def test_callables_that_cannot_key_a_cache_get_one_per_wrapper(kind):
    fun = kind()
    for _ in range(2):
        np.testing.assert_array_equal(plax.jit(fun)(X), X - 1)
    assert fun.n == 2
    own = plax.jit(fun)
    own(X)
    plax.clear_caches()  # reaches caches no other jit shares too
    own(X)
    own.clear_cache()
    own(X)
    assert fun.n == 5
    unhashable_option = plax.jit(lambda x: x, compiler_options={"xla_cpu_enable_fast_math": [0]})
    assert unhashable_option._state.shared is False


# --- donation ---------------------------------------------------------------------------------
def test_donate_argnums_deletes_the_input():
    d = plax.jit(lambda a, b: a + b, donate_argnums=0)
    a, b = jnp.asarray(X), jnp.asarray(X)
    out = d(a, b)
    np.testing.assert_array_equal(out, X * 2)
    assert a.is_deleted() and not b.is_deleted()
    np.testing.assert_array_equal(b, X)
    with pytest.raises(RuntimeError, match="deleted"):
        lax.sin(a)
    with pytest.raises(RuntimeError, match="deleted"):
        d(a, b)
    with pytest.raises(RuntimeError, match="deleted"):
        np.asarray(a)


def test_donate_argnames_and_lowering():
    def f(a, b):
        return a + b
    d = plax.jit(f, donate_argnames="b")
    assert d._donate_argnums == (1,)
    a, b = jnp.asarray(X), jnp.asarray(X)
    d(a, b=b)
    assert not a.is_deleted() and b.is_deleted()
    a, b = jnp.asarray(X), jnp.asarray(X)
    d(a, b)
    assert not a.is_deleted() and b.is_deleted()
    text = d.lower(X, X).as_text()
    main = next(l for l in text.splitlines() if "@main" in l)
    assert main.count("tf.aliasing_output = 0 : i32") == 1
    assert main.index("%arg1") < main.index("tf.aliasing_output")
    compiled = d.lower(X, X).compile()
    assert compiled.memory_analysis().alias_size_in_bytes == X.nbytes  # XLA reuses the buffer


def test_donated_pytree_and_compiled_call():
    d = plax.jit(lambda p, b: (p["w"] * b, p["b"] + 1), donate_argnums=0)
    p = {"w": jnp.asarray(X), "b": jnp.asarray(X)}
    b = jnp.asarray(X)
    out = d(p, b)
    np.testing.assert_array_equal(out[0], X * X)
    np.testing.assert_array_equal(out[1], X + 1)
    assert p["w"].is_deleted() and p["b"].is_deleted() and not b.is_deleted()
    compiled = d.lower({"w": X, "b": X}, X).compile()
    p = {"w": jnp.asarray(X), "b": jnp.asarray(X)}
    np.testing.assert_array_equal(compiled(p, b)[0], X * X)
    assert p["w"].is_deleted() and p["b"].is_deleted() and not b.is_deleted()


def test_unusable_donation_warns_and_keeps_the_input():
    # One output can reuse only one of the two donated f32[3] buffers; an unused donated
    # argument is pruned silently (as in JAX).
    d = plax.jit(lambda a, b, c: a * b, donate_argnums=(0, 1, 2))
    a, b, c = jnp.asarray(X), jnp.asarray(X), jnp.asarray(X)
    with pytest.warns(UserWarning, match=r"donated buffers were not usable.*f32\[3\]") as rec:
        np.testing.assert_array_equal(d(a, b, c), X * X)
    assert rec[0].filename == __file__
    assert a.is_deleted() and not b.is_deleted() and not c.is_deleted()
    with pytest.warns(UserWarning, match="not usable"):
        main = _main_signature(d.lower(X, X, X).as_text())
    assert main.count("tf.aliasing_output") == 1 and main.count("%arg") == 2


@pytest.mark.parametrize("fn, donate, aliases", [
    (lambda x: x + 1, 0, {0: 0}),
    (lambda x: x, 0, {0: 0}),
    # a leading output of another type (a flag a wrapper returns) does not hide the match
    (lambda x: (jnp.int32(0), x + 1), 0, {0: 1}),
    # k-th donated input of a shape and dtype becomes the k-th such output
    (lambda x, y: (y * 2, x + y, x.sum()), (0, 1), {0: 0, 1: 1}),
    (lambda x, y: (x * 2, y), 1, {1: 0}),
])
def test_donated_buffer_becomes_its_paired_output(fn, donate, aliases):
    args = [jnp.asarray(X) for _ in range(fn.__code__.co_argcount)]
    ptrs = [a.unsafe_buffer_pointer() for a in args]
    d = plax.jit(fn, donate_argnums=donate)
    main = _main_signature(d.lower(*args).as_text())
    assert [f"%arg{i}: tensor<3xf32> {{tf.aliasing_output = {o} : i32}}" in main
            for i, o in aliases.items()] == [True] * len(aliases)
    assert main.count("tf.aliasing_output") == len(aliases)
    want = fn(*[X] * len(args))
    outs = plax.tree.leaves(d(*args))
    for i, o in aliases.items():
        assert args[i].is_deleted() and outs[o].unsafe_buffer_pointer() == ptrs[i]
    for out, w in zip(outs, plax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(out, w, rtol=1e-6)


def test_donated_buffer_reused_after_an_ordered_effects_token(capfd):
    def f(x):
        plax.debug.print("x={}", x, ordered=True)
        return x * 2
    d = plax.jit(f, donate_argnums=0)
    main = _main_signature(d.lower(X).as_text())
    assert "%arg0: tensor<3xf32> {tf.aliasing_output = 1 : i32}" in main  # (token is 0)
    x = jnp.asarray(X)
    ptr = x.unsafe_buffer_pointer()
    out = d(x)
    plax.effects_barrier()
    assert out.unsafe_buffer_pointer() == ptr and x.is_deleted()
    np.testing.assert_array_equal(out, X * 2)
    assert capfd.readouterr().out == "x=[0. 1. 2.]\n"


def test_donation_not_applied_inside_a_trace():
    d = plax.jit(lambda a, b: a + b, donate_argnums=0)
    a = jnp.asarray(X)
    np.testing.assert_array_equal(plax.jit(lambda a: d(a, a))(a), X * 2)
    assert not a.is_deleted()
    assert "donated_invars=(True, False)" in str(plax.make_jaxpr(d)(X, X))


# --- keep_unused, device, backend, shardings ----------------------------------------------------
def _main_signature(text):
    return next(l for l in text.splitlines() if "@main" in l)


def test_keep_unused():
    def f(a, b, c):
        return a * c
    pruned = plax.jit(f)
    sig = _main_signature(pruned.lower(X, X[:2], X).as_text())
    assert sig.count("%arg") == 2 and "tensor<2xf32>" not in sig
    np.testing.assert_array_equal(pruned(X, X[:2], X), X * X)
    kept = plax.jit(f, keep_unused=True)
    sig = _main_signature(kept.lower(X, X[:2], X).as_text())
    assert sig.count("%arg") == 3 and "tensor<2xf32>" in sig
    np.testing.assert_array_equal(kept(X, X[:2], X), X * X)


@pytest.mark.needs_devices(8)
def test_device_and_backend():
    devs = plax.devices()
    assert len(devs) == 8
    out = plax.jit(lambda a: a + 1, device=devs[3])(X)
    assert out.devices() == {devs[3]} and out.committed
    np.testing.assert_array_equal(out, X + 1)
    # A committed argument on another device is moved to the pinned device, as in JAX.
    out = plax.jit(lambda a: a * 2, device=devs[5])(plax.device_put(X, devs[1]))
    assert out.devices() == {devs[5]}
    np.testing.assert_array_equal(out, X * 2)
    out = plax.jit(lambda a: a + 1, backend="cpu")(X)
    assert out.devices() == {devs[0]}
    # Without pinning, uncommitted inputs run on the default device and stay uncommitted.
    out = plax.jit(lambda a: a + 1)(X)
    assert out.devices() == {devs[0]} and not out.committed


@pytest.mark.needs_devices(2)
def test_incompatible_committed_devices():
    devs = plax.devices()
    a0, a1 = plax.device_put(X, devs[0]), plax.device_put(X, devs[1])
    with pytest.raises(ValueError, match="incompatible devices"):
        plax.jit(lambda a, b: a + b)(a0, a1)


@pytest.mark.needs_devices(5)
def test_single_device_shardings():
    devs = plax.devices()
    s = SingleDeviceSharding(devs[2])
    out = plax.jit(lambda a: a + 1, in_shardings=s, out_shardings=s)(X)
    assert out.devices() == {devs[2]}
    np.testing.assert_array_equal(out, X + 1)
    out = plax.jit(lambda a, b: a + b, in_shardings=(s, s))(X, X)
    assert out.devices() == {devs[2]}
    out = plax.jit(lambda a: a + 1, out_shardings=SingleDeviceSharding(devs[4]))(X)
    assert out.devices() == {devs[4]}


@pytest.mark.needs_devices(3)
def test_bad_shardings_raise():
    devs = plax.devices()

    class TwoDevices:  # looks like a sharding but is not one
        device_set = {devs[0], devs[1]}

    with pytest.raises(TypeError, match="must be Sharding objects or PartitionSpecs"):
        plax.jit(lambda a: a, in_shardings=TwoDevices())
    with pytest.raises(TypeError, match="must be Sharding"):
        plax.jit(lambda a: a, out_shardings="x")
    with pytest.raises(ValueError, match="one device"):
        plax.jit(lambda a: a, device=devs[1], in_shardings=SingleDeviceSharding(devs[2]))


# --- nested jit: the jit primitive ----------------------------------------------------------
def test_nested_jit_prints_as_pjit():
    @plax.jit
    def f(a):
        return jnp.sin(a) * 2
    text = str(plax.make_jaxpr(lambda a: f(a) + 1)(X))
    assert "jit[" in text and "pjit" not in text and "name=f" in text
    assert "jaxpr={ lambda ; a:f32[3]. let" in text
    assert "sin a" in text


def test_inline_has_no_pjit_equation():
    g = plax.jit(lambda a: jnp.sin(a) * 2, inline=True)
    text = str(plax.make_jaxpr(lambda a: g(a) + 1)(X))
    assert "jit[" not in text and "sin" in text
    np.testing.assert_allclose(plax.jit(lambda a: g(a) + 1)(X), np.sin(X) * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(g(X), np.sin(X) * 2, rtol=1e-6)  # top-level call still compiles


def test_nested_jit_lowers_as_private_function():
    inner = plax.jit(lambda a: a * 2)

    @plax.jit
    def outer(a):
        return inner(a) + inner(a + 1)
    np.testing.assert_array_equal(outer(X), X * 2 + (X + 1) * 2)
    text = outer.lower(X).as_text()
    assert text.count("func.func private") == 2
    assert text.count('"func.call"') == 2 and "callee = @" in text
    assert "func.func public @main" in text


def test_closures_over_arrays_and_outer_tracers():
    c = jnp.asarray(X) + 10
    g = plax.jit(lambda a: a * c)
    np.testing.assert_array_equal(g(X), X * (X + 10))
    text = str(plax.make_jaxpr(g)(X))
    # c is a constant of the nested jit's own jaxpr, as JAX 0.10 shows it (and lowers it: a
    # constant of the callee's function)
    assert text.startswith("{ lambda ; a:f32[3]. let") and "jaxpr={ lambda a:f32[3]; b:f32[3]." \
        in text
    np.testing.assert_array_equal(plax.jit(plax.jit(lambda a: a + c))(X), X * 2 + 10)

    def outer(a):
        @plax.jit
        def inner(y):
            return y * a   # closes over the outer trace's tracer
        return inner(2.0) + inner(3.0)
    np.testing.assert_array_equal(plax.jit(outer)(X), X * 5)
    np.testing.assert_array_equal(outer(X), X * 5)
    text = str(plax.make_jaxpr(outer)(X))
    assert text.count("jit[") == 2 and "name=inner" in text


def test_outputs_pytrees_none_and_python_scalars():
    out = plax.jit(lambda a: (a, {"b": 1.0, "c": [a, 2]}))(X)
    assert isinstance(out, tuple) and set(out[1]) == {"b", "c"}
    np.testing.assert_array_equal(out[1]["c"][0], X)
    b = out[1]["b"]
    assert isinstance(b, plax.Array) and b.dtype == np.float32 and b.aval.weak_type and float(b) == 1.0
    two = out[1]["c"][1]
    assert two.dtype == np.int32 and two.aval.weak_type and int(two) == 2
    assert plax.jit(lambda a: None)(X) is None
    assert float(plax.jit(lambda: 3.0)()) == 3.0
    with pytest.raises(TypeError, match="returned a value of type str"):
        plax.jit(lambda a: "no")(X)


def test_pytree_inputs():
    @plax.jit
    def f(params, x):
        return params["w"] * x + params["b"][0]
    out = f({"w": X, "b": (np.float32(1),)}, X)
    np.testing.assert_array_equal(out, X * X + 1)


# --- debug flags ------------------------------------------------------------------------------
def test_debug_nans_names_the_primitive():
    bad = plax.jit(lambda a: jnp.log(a - 1.0) * 2)
    with config.override("debug_nans", True):
        with pytest.raises(FloatingPointError, match="nan.*log"):
            bad(X)
        with pytest.raises(FloatingPointError, match="log"):
            jnp.log(jnp.asarray(X) - 1.0)            # eager
        with pytest.raises(FloatingPointError, match="div"):
            plax.jit(lambda a: lax.div(a, a))(jnp.zeros(3))
        np.testing.assert_allclose(bad(X + 2), np.log(X + 1) * 2, rtol=1e-6)  # no NaN: fine
    assert np.isnan(np.asarray(bad(X))).any()       # flag off: NaNs pass silently


def test_debug_infs_names_the_primitive():
    with config.override("debug_infs", True):
        with pytest.raises(FloatingPointError, match=r"inf.*div"):
            plax.jit(lambda a: lax.div(1.0, a))(jnp.zeros(3))
        with pytest.raises(FloatingPointError, match="div"):
            lax.div(jnp.ones(3), jnp.zeros(3))


def test_debug_nans_from_the_environment():
    code = ("import plax, plax.numpy as jnp\n"
            "try:\n"
            "    plax.jit(lambda a: jnp.log(a))(jnp.asarray(-1.0))\n"
            "except FloatingPointError as e:\n"
            "    print('raised:', e)\n")
    env = dict(os.environ, PLAX_DEBUG_NANS="1", PLAX_NUM_CPU_DEVICES="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert "raised:" in out.stdout and "log" in out.stdout, out.stderr


def test_log_compiles_names_function_and_reason(caplog):
    @plax.jit
    def my_fun(a, n=1):
        return a * n

    with config.override("log_compiles", True), caplog.at_level(logging.WARNING, logger="plax"):
        my_fun(X)
        my_fun(X)
        my_fun(X[:2])
        my_fun(X, np.float32(2))
    msgs = [r.getMessage() for r in caplog.records if r.name == "plax"]
    assert all("my_fun" in m for m in msgs)
    assert sum(m.startswith("Compiling") for m in msgs) == 3
    # With the flag on, every trace is explained too (plax.cache_misses, a child of "plax").
    traces = [r.getMessage() for r in caplog.records if r.name == "plax.cache_misses"]
    assert len(traces) == 3 and all("my_fun" in m for m in traces)
    assert "traced for the first time" in traces[0]
    assert "a: shape changed: f32[3] -> f32[2]" in traces[1]
    assert "pytree structure changed: the positional arguments changed in number: 1 -> 2" \
        in traces[2]
    static = plax.jit(lambda a, n: a * n, static_argnums=1)
    caplog.clear()
    with config.override("log_compiles", True), caplog.at_level(logging.WARNING, logger="plax"):
        static(X, 2)
        static(X, 3)
    assert any("n (static): value changed: 2 -> 3" in r.getMessage()
               and "<lambda>" in r.getMessage() for r in caplog.records)
    caplog.clear()
    my_fun(X)  # flag off: silent
    assert not [r for r in caplog.records if r.name.startswith("plax")]


# --- tracer leaks ----------------------------------------------------------------------------
def test_leaked_tracer_from_jit():
    leaked = []

    @plax.jit
    def f(a):
        leaked.append((a * 2, sys._getframe().f_lineno))
        return a
    f(X)
    tracer, line = leaked[0]
    with pytest.raises(errors.UnexpectedTracerError, match="Encountered an unexpected tracer") as e:
        jnp.sin(tracer)
    msg = str(e.value)
    assert "created while tracing f" in msg and "mul" in msg
    assert f"test_jit.py:{line}" in msg
    with pytest.raises(errors.UnexpectedTracerError, match="created while tracing f"):
        plax.jit(lambda a: a + tracer)(X)
    with pytest.raises(errors.UnexpectedTracerError, match="created while tracing f"):
        f(tracer)


def test_unused_argument_feeding_only_dead_code_is_pruned():
    # b feeds only a product whose result is discarded: both are dropped from the executable.
    f = plax.jit(lambda a, b: (a * b, a)[1])
    assert float(f(1.0, 2.0)) == 1.0
    assert "multiply" not in f.lower(1.0, 2.0).as_text()


# Closed-over constants are constants of the compiled program, as in JAX's (not parameters):
# XLA then folds x / c into x * (1 / c) as it does for JAX, so the bits are JAX 0.10.2's.
# (A numpyro NUTS chain closing over its data drifted from JAX's through this.)
C8 = np.float32([15, 10, 16, 11, 9, 11, 10, 18])
Y8 = np.float32([28, 8, -3, 7, -1, 1, 18, 12])
X8 = np.float32([0.3, -1.7, 2.2, 0.9, -0.4, 1.1, 3.3, -2.5])
CLOSED_OVER = [
    ("host constant", lambda x: x / C8,
     [1017370379, 3190690939, 1041026253, 1034391627, 3174435681, 1036831949, 1051260355,
      3188603108]),
    ("device constant", lambda x: x / jnp.asarray(C8),
     [1017370379, 3190690939, 1041026253, 1034391627, 3174435681, 1036831949, 1051260355,
      3188603108]),
    ("gradient", lambda x: plax.grad(lambda x: jnp.sum(-0.5 * ((Y8 - x) / C8) ** 2))(x),
     [1039933872, 1036429295, 3165021798, 1028554265, 3153246679, 3126371811, 1041663787,
      1027034884]),
]


@pytest.mark.parametrize("name,f,bits", CLOSED_OVER, ids=[c[0] for c in CLOSED_OVER])
def test_closed_over_constants_are_compiled_in_as_jax_does(name, f, bits):
    jf = plax.jit(f)
    text = jf.lower(X8).as_text()
    assert "@main(%arg0: tensor<8xf32>)" in text and "%arg1" not in text
    assert "stablehlo.constant" in text
    # The C++/fast path, a call with a keyword (the general path) and the AOT executable.
    for run in (jf, lambda x: jf(x=x), jf.lower(X8).compile()):
        assert np.asarray(run(X8)).view(np.uint32).tolist() == bits


def test_closed_over_constants_over_a_mebibyte_stay_parameters():
    # Written into the program's text they would make compiling it slow (seconds for 40 MB).
    big = np.arange(300_000, dtype=np.float32)  # 1.2 MB
    jf = plax.jit(lambda x: jnp.sum(x * big))
    assert "%arg1" in jf.lower(np.float32(2)).as_text()
    assert float(jf(np.float32(2))) == pytest.approx(2 * big.astype(np.float64).sum(), rel=1e-6)
