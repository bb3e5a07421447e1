"""Small JAX API surfaces that drop-in code relies on: tracers are Arrays to isinstance,
tracer conversions and reprs, Lowered.as_text dialects, addressability, default_device,
and plax.numpy.isscalar / isrealobj / iscomplexobj."""
import subprocess
import sys

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import errors, lax
from plax.core.config import config
from plax.core.trace import Tracer
from plax.sharding import PartitionSpec as P

X = np.arange(3, dtype=np.float32)


# --- 1. tracers are Arrays to isinstance --------------------------------------------------
def _recorder():
    seen = []

    def note(x):
        if isinstance(x, Tracer):  # custom rules may also see concrete values
            seen.append((isinstance(x, plax.Array), isinstance(x, jnp.ndarray), type(x).__name__))
        return x
    return seen, note


def _under_every_transformation(note):
    plax.jit(lambda x: note(x) * 2)(X)
    plax.make_jaxpr(lambda x: note(x) * 2)(X)
    plax.grad(lambda x: jnp.sum(note(x) ** 2))(X)
    plax.vmap(lambda x: note(x) * 2)(X)
    plax.jvp(lambda x: note(x) * 2, (X,), (X,))
    plax.linearize(lambda x: note(x) * 2, X)
    plax.vjp(lambda x: note(x) * 2, X)
    plax.grad(plax.checkpoint(lambda x: jnp.sin(note(x))))(1.0)
    plax.linear_transpose(lambda x: note(x) * 2.0, 1.0)(1.0)

    @plax.custom_jvp
    def f(x):
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        note(primals[0]), note(tangents[0])
        return f(primals[0]), tangents[0] * jnp.cos(primals[0])
    plax.jit(plax.grad(f))(1.0)

    @plax.custom_vjp
    def g(x):
        return jnp.sin(x)

    def g_fwd(x):
        note(x)
        return jnp.sin(x), jnp.cos(x)

    def g_bwd(res, ct):
        note(res), note(ct)
        return (ct * res,)
    g.defvjp(g_fwd, g_bwd)
    plax.jit(plax.grad(g))(1.0)


def test_tracers_are_arrays_under_every_transformation():
    seen, note = _recorder()
    _under_every_transformation(note)
    assert len(seen) >= 12
    assert all(a and b for a, b, _ in seen), seen
    assert {"StagingTracer", "JVPTracer", "BatchTracer"} <= {name for _, _, name in seen}


def test_subclass_and_other_instance_checks_are_unchanged():
    assert not issubclass(Tracer, plax.Array)  # as JAX: only instance checks say yes
    assert isinstance(jnp.asarray(X), plax.Array) and isinstance(jnp.asarray(X), jnp.ndarray)
    for other in (X, np.float32(1), 1.0, [1.0], None):
        assert not isinstance(other, plax.Array)
    # As in JAX: concrete arrays are jaxlib's ArrayImpl, a subclass of plax.Array's checks.
    concrete = type(jnp.asarray(X))
    assert concrete.__name__ == "ArrayImpl" and concrete is not plax.Array
    assert issubclass(concrete, plax.Array) and not issubclass(float, plax.Array)


def test_array_subclasses_keep_correct_checks():
    # In a fresh process: a subclass switches plax to its general (slower) instance check.
    code = ("import plax, plax.numpy as jnp\n"
            "class Sub(plax.Array): pass\n"
            "x = jnp.ones(2)\n"
            "print(isinstance(x, plax.Array), isinstance(x, Sub), isinstance(1.0, plax.Array))\n"
            "plax.jit(lambda t: print(isinstance(t, plax.Array), isinstance(t, Sub)) or t)(1.0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False", "False", "True", "False"]


def test_concrete_array_paths_leave_tracers_alone():
    def f(x):
        assert plax.block_until_ready(x) is x
        assert plax.device_put(x) is x
        assert plax.device_get(x) is x  # (as JAX: a traced value passes through)
        with pytest.raises(errors.TracerArrayConversionError, match="numpy.ndarray conversion"):
            np.asarray(x)
        return x + 1
    np.testing.assert_array_equal(plax.jit(f)(X), X + 1)


# --- 2. conversions and reprs -------------------------------------------------------------
@pytest.mark.parametrize("fn", [int, float, complex])
def test_scalar_conversions_are_concretization_errors(fn):
    name = fn.__name__
    with pytest.raises(errors.ConcretizationTypeError,
                       match=rf"The problem arose with the `{name}` function.*x\.astype\({name}\)"):
        plax.jit(lambda x: fn(x))(1.0)


def test_index_is_the_integer_conversion_error():
    with pytest.raises(errors.TracerIntegerConversionError, match=r"__index__\(\) method"):
        plax.jit(lambda i: [1, 2][i])(1)
    assert not issubclass(errors.TracerIntegerConversionError, errors.ConcretizationTypeError)


def test_conversions_of_concrete_jvp_tracers_still_work():
    got = []
    plax.jvp(lambda x: got.append((int(x), float(x), complex(x))) or x, (3.0,), (1.0,))
    assert got == [(3, 3.0, 3 + 0j)]


def _auto_mesh():
    return plax.make_mesh((8,), ("x",), axis_types=(plax.sharding.AxisType.Auto,))


def _on_explicit_mesh(f):
    mesh = plax.make_mesh((8,), ("x",), axis_types=(plax.sharding.AxisType.Explicit,))
    with plax.set_mesh(mesh):
        return f(plax.device_put(jnp.ones((8, 2)), P("x")))


def _reprs(transform, fun=None):
    seen = []

    def show(x):
        seen.append(repr(x))
        assert str(x) == seen[-1]
        return x
    transform(show if fun is None else fun(show))
    return seen


@pytest.mark.parametrize("transform, want", [
    (lambda s: plax.jit(s)(jnp.ones((2, 3))), "JitTracer(float32[2,3])"),
    (lambda s: plax.jit(s)(1.0), "JitTracer(~float32[])"),
    (lambda s: plax.jit(s)(jnp.int32(1)), "JitTracer(int32[])"),
    (lambda s: plax.jit(s)(np.ones(2, jnp.bfloat16)), "JitTracer(bfloat16[2])"),
    (lambda s: plax.make_jaxpr(s)(np.ones((), np.bool_)), "JitTracer(bool[])"),
    (lambda s: plax.jvp(s, (1.0,), (1.0,)), "JVPTracer(primal=1.0, tangent=1.0)"),
    (lambda s: plax.jvp(s, (jnp.ones(3),), (jnp.ones(3),)),
     "JVPTracer(primal=[1. 1. 1.], tangent=[1. 1. 1.])"),
    (lambda s: plax.grad(s)(1.0), "GradTracer(primal=1.0, typeof(tangent)=f32[])"),
    (lambda s: plax.linearize(s, jnp.arange(3.0)),
     "GradTracer(primal=[0. 1. 2.], typeof(tangent)=f32[3])"),
    (lambda s: plax.vjp(s, 1.0), "GradTracer(primal=1.0, typeof(tangent)=f32[])"),
    (lambda s: plax.vmap(s)(jnp.ones((2, 3))), "VmapTracer(aval=float32[3], batched=float32[2,3])"),
    (lambda s: plax.vmap(s, in_axes=1)(jnp.ones((2, 3))),
     "VmapTracer(aval=float32[2], batched=float32[2,3])"),
    (lambda s: plax.linear_transpose(s, 1.0)(1.0), "Traced<~float32[]:JaxprTrace>"),
    (lambda s: plax.jit(s)(np.zeros(3, plax.float0)), "JitTracer(float0[3])"),
    # the type's sharding and its varying manual axes show as JAX shows them
    (lambda s: _on_explicit_mesh(plax.jit(s)), "JitTracer(float32[8@x,2])"),
    (lambda s: plax.jit(plax.shard_map(s, mesh=_auto_mesh(), in_specs=P("x"),
                                       out_specs=P("x")))(jnp.ones(8)),
     "JitTracer(float32[1]{V:x})"),
])
def test_tracer_reprs_match_jax(transform, want):
    assert _reprs(transform) == [want]


def test_nested_tracer_reprs_match_jax():
    nested_jvp = _reprs(lambda s: plax.jvp(lambda x: plax.jvp(s, (x,), (x,))[0], (1.0,), (2.0,)))
    assert nested_jvp == ["JVPTracer(primal=JVPTracer(primal=1.0, tangent=2.0), "
                          "tangent=JVPTracer(primal=1.0, tangent=2.0))"]
    assert _reprs(lambda s: plax.jit(lambda x: plax.jvp(s, (x,), (x,))[0])(1.0)) == [
        "JVPTracer(primal=JitTracer(~float32[]), tangent=JitTracer(~float32[]))"]
    assert _reprs(lambda s: plax.jit(plax.grad(s))(1.0)) == [
        "GradTracer(primal=JitTracer(~float32[]), typeof(tangent)=f32[])"]
    assert _reprs(lambda s: plax.grad(lambda x: plax.grad(lambda y: s(y) * x)(x))(1.0)) == [
        "GradTracer(primal=GradTracer(primal=1.0, typeof(tangent)=f32[]), typeof(tangent)=f32[])"]
    assert _reprs(lambda s: plax.vmap(plax.vmap(s))(jnp.ones((2, 3)))) == [
        "VmapTracer(aval=float32[], batched=float32[3])"]
    assert _reprs(lambda s: plax.jit(plax.vmap(s))(jnp.ones((2, 3)))) == [
        "VmapTracer(aval=float32[3], batched=float32[2,3])"]
    assert _reprs(lambda s: plax.vmap(lambda x: plax.jvp(s, (x,), (x,))[0])(jnp.ones(3))) == [
        "JVPTracer(primal=VmapTracer(aval=float32[], batched=float32[3]), "
        "tangent=VmapTracer(aval=float32[], batched=float32[3]))"]
    assert _reprs(lambda s: plax.grad(lambda x: plax.vmap(s)(x).sum())(jnp.ones(3))) == [
        "VmapTracer(aval=float32[], batched=float32[3])"]


def test_error_messages_embedding_tracers_stay_readable():
    with pytest.raises(TypeError, match=r"must be a static Python int, got JitTracer\(~int32\[\]\)\."):
        plax.jit(lambda x, y: lax.integer_pow(x, y))(2.0, 3)
    with pytest.raises(TypeError, match="unhashable type: StagingTracer"):
        plax.jit(lambda x: {x: 1})(1.0)


# --- 3. Lowered.as_text -------------------------------------------------------------------
def _lowered():
    return plax.jit(lambda x: jnp.sin(x) * 2).lower(X)


def test_as_text_hides_locations_unless_debug_info():
    lowered = _lowered()
    text = lowered.as_text()
    assert text == lowered.as_text("stablehlo") == lowered.as_text(None)
    assert "loc(" not in text and '"stablehlo.sine"(%arg0)' in text
    debug = lowered.as_text(debug_info=True)
    assert 'loc("sin"(' in debug and "test_drop_in_api.py" in debug
    assert text.splitlines() == [line.split(" loc(")[0] for line in debug.splitlines()]


def test_stripping_keeps_quoted_text_and_nested_functions():
    inner = plax.jit(lambda x: jnp.cos(x))

    def f(x):
        with plax.named_scope('odd (name) "quoted"'):
            return inner(jnp.sin(x))
    lowered = plax.jit(f).lower(X)
    text = lowered.as_text()
    assert "loc(" not in text and text.count("func.func") == 2
    assert 'odd (name) \\"quoted\\"/sin' in lowered.as_text(debug_info=True)
    np.testing.assert_allclose(lowered.compile()(X), np.cos(np.sin(X)), rtol=1e-6)


def test_as_text_hlo_dialect():
    lowered = _lowered()
    hlo = lowered.as_text("hlo")
    assert hlo.startswith("HloModule jit__lambda_") and "sine(" in hlo and "multiply(" in hlo
    assert "metadata=" not in hlo
    assert 'metadata={op_name="sin"' in lowered.as_text("hlo", debug_info=True)


def test_as_text_rejects_unknown_dialects():
    with pytest.raises(ValueError, match="unknown dialect"):
        _lowered().as_text("mhlo")
    with pytest.raises(TypeError, match="positional"):
        _lowered().as_text("stablehlo", True)  # debug_info is keyword-only, as in JAX


def test_compiled_as_text_is_optimized_hlo():
    text = _lowered().compile().as_text()
    assert text.startswith("HloModule jit__lambda_") and "ENTRY" in text


# --- 4. addressability ----------------------------------------------------------------------
def test_single_device_arrays_are_fully_addressable_and_replicated():
    x = jnp.asarray(X)
    assert x.is_fully_addressable is True and x.is_fully_replicated is True
    assert x.sharding.is_fully_addressable is True and x.sharding.is_fully_replicated is True
    y = plax.device_put(X, plax.devices()[2])
    assert y.is_fully_addressable and y.is_fully_replicated


def test_addressability_of_a_tracer_is_a_concretization_error():
    def f(x):
        with pytest.raises(errors.ConcretizationTypeError, match="is_fully_addressable"):
            x.is_fully_addressable
        with pytest.raises(errors.ConcretizationTypeError, match="is_fully_replicated"):
            x.is_fully_replicated
        return x
    plax.jit(f)(X)


# --- 5. default_device ----------------------------------------------------------------------
@pytest.fixture
def dev3():
    before = config.read("default_device")
    yield plax.devices()[3]
    config.update("jax_default_device", before)


def test_default_device_context_places_new_arrays_and_results(dev3):
    dev0, dev1 = plax.devices()[0], plax.devices()[1]
    outside = jnp.asarray(X)
    f = plax.jit(lambda a: a + 1)
    f(outside)  # fills the eager fast path's cache for device 0
    with plax.default_device(dev3):
        made = [jnp.ones(3), jnp.arange(3), jnp.asarray(X), plax.device_put(X), jnp.ones(3) * 2,
                f(X), f(outside), outside + 1, plax.jit(lambda: jnp.zeros(2))()]
        for a in made:
            assert a.devices() == {dev3} and not a.committed
        committed = plax.device_put(X, dev1)
        assert f(committed).devices() == {dev1} and (committed + 1).devices() == {dev1}
        np.testing.assert_array_equal(f(outside), X + 1)
    assert f(outside).devices() == {dev0} and jnp.ones(2).devices() == {dev0}
    assert (made[0] + 1).devices() == {dev0}  # uncommitted arrays follow the default device
    with plax.default_device("cpu"):
        assert jnp.ones(2).devices() == {dev0}
    with plax.default_device(None):
        assert jnp.ones(2).devices() == {dev0}


def test_default_device_flag(dev3):
    x = jnp.asarray(X)
    f = plax.jit(lambda a: a * 2)
    assert f(x).devices() == {plax.devices()[0]}
    config.update("jax_default_device", dev3)
    assert config.jax_default_device == dev3
    assert jnp.ones(2).devices() == {dev3} and f(x).devices() == {dev3}
    assert (x + 1).devices() == {dev3}
    config.update("jax_default_device", None)
    assert f(x).devices() == {plax.devices()[0]}


def test_default_device_rejects_other_values():
    with pytest.raises(ValueError, match="must be passed either a Device object"):
        with plax.default_device(3):
            pass
    with pytest.raises(ValueError, match="must be passed either a Device object"):
        config.update("jax_default_device", 3)
    with pytest.raises(RuntimeError, match="not available"):
        with plax.default_device("tpu"):
            jnp.ones(2)


# --- 7. isscalar, isrealobj, iscomplexobj --------------------------------------------------
# Expected values as JAX 0.10.2 gives them: (isscalar, isrealobj, iscomplexobj).
@pytest.mark.parametrize("value, want", [
    (1, (True, True, False)), (1.0, (True, True, False)), (1j, (True, False, True)),
    (True, (True, True, False)), (np.float32(1), (True, True, False)),
    (np.complex64(1), (True, False, True)), (np.int8(3), (True, True, False)),
    (np.bool_(True), (True, True, False)),
    (np.array(1.0), (True, True, False)), (np.array([1.0]), (False, True, False)),
    (np.array(1j), (True, False, True)),
    (jnp.array(1.0), (True, True, False)), (jnp.array([1.0]), (False, True, False)),
    (jnp.array(1j), (True, False, True)), (jnp.array([1 + 1j]), (False, False, True)),
    ([1, 2], (False, True, False)), ([1j], (False, False, True)), ((1.0,), (False, True, False)),
    ("abc", (True, True, False)), (None, (False, True, False)), (jnp.int32, (False, True, False)),
])
def test_isscalar_isrealobj_iscomplexobj(value, want):
    assert (jnp.isscalar(value), jnp.isrealobj(value), jnp.iscomplexobj(value)) == want


@pytest.mark.parametrize("shape", [(), (2,)])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_scalar_and_complex_checks_on_tracers(shape, dtype):
    seen = []

    def f(x):
        seen.append((jnp.isscalar(x), jnp.isrealobj(x), jnp.iscomplexobj(x)))
        return x
    plax.jit(f)(np.zeros(shape, dtype))
    plax.vmap(f)(np.zeros((3,) + shape, dtype))
    cplx = dtype == np.complex64
    assert seen == [(shape == (), not cplx, cplx)] * 2
