"""jax.interpreters' and jax.extend's extension API on plax: ad.jvp/linearize/add_jaxvals_p,
partial_eval's call DCE rules, pxla.create_compile_options, batching.register_vmappable,
extend.core.CallPrimitive, extend.backend's cache and factory hooks, source_info_util's
name stacks (values against closed forms and NumPy)."""
import functools
from dataclasses import dataclass

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.api_util import debug_info
from plax.core.avals import ShapedArray
from plax.core.jaxpr import eval_jaxpr
from plax.extend import backend, core as xcore, linear_util as lu, source_info_util as siu
from plax.interpreters import ad, batching, partial_eval as pe, pxla

F32 = np.float32


# --- ad -----------------------------------------------------------------------------------
def test_ad_jvp_of_a_function_with_aux_and_zero_tangents():
    def f(x, y):
        return (jnp.sin(x) * y, y), {"seen": x}

    zero = ad.Zero(ShapedArray((), np.dtype(F32)))
    outs, tans, aux = ad.jvp(f, (F32(1.0), F32(2.0)), (F32(1.0), zero), has_aux=True)
    np.testing.assert_allclose(outs[0], np.sin(1.0) * 2, rtol=1e-6)
    np.testing.assert_allclose(tans[0], np.cos(1.0) * 2, rtol=1e-6)
    assert float(aux["seen"]) == 1.0 and not isinstance(aux["seen"], ad.JVPTracer)
    wrapped = lu.wrap_init(lambda x: [x * x], debug_info=debug_info("sq", lambda x: x, (1.0,), {}))
    outs, tans = ad.jvp(wrapped, (F32(3.0),), (F32(1.0),))
    assert float(outs[0]) == 9.0 and float(tans[0]) == 6.0


def test_ad_linearize_gives_a_linear_jaxpr_with_residual_consts():
    x = F32(0.7)
    out, zeros, jaxpr, consts = ad.linearize(lambda x, n: jnp.sin(x) * n, (x, 3))
    np.testing.assert_allclose(out[0], np.sin(0.7) * 3, rtol=1e-6)
    assert zeros == [False] and len(jaxpr.invars) == 2  # a float0 tangent for the int input
    (t,) = eval_jaxpr(jaxpr, consts, F32(2.0), np.zeros((), plax.dtypes.float0))
    np.testing.assert_allclose(t, 2 * 3 * np.cos(0.7), rtol=1e-6)
    *_, aux = ad.linearize(lambda x: (x * x, x + 1), (x,), has_aux=True)
    np.testing.assert_allclose(aux, 1.7, rtol=1e-6)


def test_add_jaxvals_p_is_a_linear_primitive():
    assert ad.add_jaxvals_p.name == "add_any"
    assert "add_any" in str(plax.make_jaxpr(ad.add_jaxvals)(1.0, 2.0))
    x = np.arange(3, dtype=F32)
    np.testing.assert_array_equal(plax.jit(ad.add_jaxvals)(x, 2 * x), 3 * x)
    np.testing.assert_array_equal(plax.vmap(ad.add_jaxvals, in_axes=(0, None))(
        np.ones((2, 3), F32), x), 1 + np.stack([x, x]))
    assert float(plax.grad(lambda a: ad.add_jaxvals(a, a * a))(3.0)) == 7.0
    with pytest.raises(TypeError, match="add_any .* takes two values of one type"):
        ad.add_jaxvals(np.ones(2, F32), np.ones(3, F32))


# --- partial_eval's call DCE rules, extend.core.CallPrimitive ----------------------------
def _wrap(f):
    return lu.wrap_init(f, debug_info=debug_info("body", f, (0.0,), {}))


def test_call_primitive_of_ones_own_under_every_transformation():
    my_call_p = xcore.CallPrimitive("my_call")
    pe.dce_rules[my_call_p] = pe.dce_jaxpr_closed_call_rule

    def use(x):
        return my_call_p.bind(_wrap(lambda x: [jnp.sin(x) * 2, x * 3]), x)[0]

    assert float(use(F32(1.0))) == pytest.approx(2 * np.sin(1.0), rel=1e-6)
    assert float(plax.jit(use)(F32(1.0))) == pytest.approx(2 * np.sin(1.0), rel=1e-6)
    assert float(plax.grad(use)(F32(1.0))) == pytest.approx(2 * np.cos(1.0), rel=1e-6)
    np.testing.assert_allclose(plax.vmap(use)(np.arange(3, dtype=F32)),
                               2 * np.sin(np.arange(3)), rtol=1e-6)
    closed = plax.make_jaxpr(use)(F32(1.0))
    (eqn,) = closed.eqns
    assert eqn.primitive is my_call_p and len(eqn.outvars) == 2
    used_inputs, pruned = pe.dce_jaxpr_closed_call_rule([True, False], eqn)
    assert used_inputs == [True] and len(pruned.outvars) == 1
    assert [e.primitive.name for e in pruned.params["call_jaxpr"].jaxpr.eqns] == ["sin", "mul"]


def test_dce_jaxpr_call_rule_prunes_an_open_call_body():
    from plax.higher_order.call import call_p
    closed = plax.make_jaxpr(lambda x: call_p.bind(_wrap(lambda x: [x + 1, x * 2]), x))(1.0)
    (eqn,) = closed.eqns
    used_inputs, pruned = pe.dce_jaxpr_call_rule([False, True], eqn)
    assert used_inputs == [True]
    assert [e.primitive.name for e in pruned.params["call_jaxpr"].eqns] == ["mul"]
    assert pe.dce_jaxpr_call_rule([False, False], eqn) == ([False], None)


# --- pxla / backend -----------------------------------------------------------------------
def test_compile_options_for_a_device_assignment():
    devices = plax.devices()[:2]
    options = pxla.create_compile_options(None, False, None, None, None, np.array(devices),
                                          {"xla_cpu_enable_fast_math": False})
    assert options.num_replicas == 1 and options.num_partitions == 2
    assert options.executable_build_options.use_spmd_partitioning
    options = backend.get_compile_options(2, 1, np.array(devices).reshape(2, 1))
    assert (options.num_replicas, options.num_partitions) == (2, 1)
    assert options.device_assignment.replica_count() == 2
    with pytest.raises(ValueError, match="device_assignment has 2 devices for num_replicas=1 x "
                                         "num_partitions=1"):
        backend.get_compile_options(1, 1, np.array(devices))


def test_backend_cache_is_cleared_with_plax_caches():
    @functools.lru_cache
    def square(n):
        return n * n

    square(3)
    backend.register_backend_cache(square, "test squares")
    assert square.cache_info().currsize == 1
    backend.clear_in_memory_compilation_cache()
    assert square.cache_info().currsize == 0
    with pytest.raises(TypeError, match="must have a cache_clear"):
        backend.register_backend_cache({}, "a dict")


def test_backend_factory_registration_and_ifrt_proxy():
    from plax.runtime import xla
    made = []
    backend.register_backend_factory("testplatform", lambda: made.append(1))
    try:
        assert xla._FACTORIES["testplatform"] is not None and made == []
    finally:
        del xla._FACTORIES["testplatform"]
    assert callable(backend.ifrt_proxy.get_client)
    with pytest.raises(TypeError, match="factory must be callable"):
        backend.register_backend_factory("x", 3)


# --- source_info_util ---------------------------------------------------------------------
def test_name_stacks_set_and_transformed():
    assert str(siu.new_name_stack("a").extend("b")) == "a/b" and str(siu.new_name_stack()) == ""
    transformed = siu.new_name_stack("a").transform("jvp").extend("b")
    assert [str(e) for e in transformed.stack] == ["a", "jvp", "b"]
    assert str(transformed) == "a/jvp(b)" and str(siu.new_name_stack("a").transform("t")) == "a/t()"
    assert siu.new_source_info().file is None

    def f(x):
        with siu.set_name_stack(siu.new_name_stack("zz")):
            y = jnp.sin(x)
        with siu.transform_name_stack("tt"):
            z = jnp.cos(y)
        return z

    text = plax.jit(f).lower(1.0).as_text(debug_info=True)
    assert 'loc("zz/sin"' in text and 'loc("tt()/cos"' in text


def test_user_context_stages_ops_at_another_equation_line():
    closed = plax.make_jaxpr(lambda x: jnp.sin(x))(1.0)
    info = closed.eqns[0].source_info

    def g(x):
        with siu.user_context(info.traceback, name_stack=siu.new_name_stack("moved")):
            return jnp.cos(x)

    (eqn,) = plax.make_jaxpr(g)(1.0).eqns
    assert (eqn.source_info.file, eqn.source_info.line) == (info.file, info.line)
    assert tuple(eqn.source_info.name_stack) == ("moved",)
    with pytest.raises(TypeError, match="traceback must be a SourceInfo"):
        with siu.user_context("line 3"):
            pass


# --- batching.register_vmappable ----------------------------------------------------------
class Named:
    """An array with named axes: vmap maps it by name."""

    def __init__(self, names, data):
        self.names, self.data = tuple(names), data


@dataclass(frozen=True)
class NamedSpec:
    name: str


def _to_elt(cont, get_idx, x, spec):
    if spec is None:
        return Named(x.names, cont(x.data, None))
    i = x.names.index(spec.name)
    return Named(x.names[:i] + x.names[i + 1:], cont(x.data, i))


def _from_elt(cont, size, elt, spec):
    if spec is None:
        return Named(elt.names, cont(size, elt.data, None))
    return Named((spec.name,) + elt.names, cont(size, elt.data, 0))


@pytest.fixture
def named_vmappable():
    batching.register_vmappable(Named, NamedSpec, int, _to_elt, _from_elt, None)
    yield
    batching.unregister_vmappable(Named)


def test_vmap_maps_a_registered_container_by_its_spec(named_vmappable):
    data = np.arange(6, dtype=F32).reshape(2, 3)
    x = Named(("a", "b"), data)
    out = plax.vmap(lambda n: Named(n.names, jnp.sum(n.data) * jnp.ones(2)),
                    in_axes=NamedSpec("b"), out_axes=NamedSpec("b"))(x)
    assert out.names == ("b", "a")
    np.testing.assert_array_equal(out.data, np.repeat(data.sum(0)[:, None], 2, axis=1))
    scaled = plax.vmap(lambda n, y: Named(n.names, n.data * y),
                       in_axes=(NamedSpec("a"), 0), out_axes=NamedSpec("a"))(
        x, np.array([1, 10], F32))
    np.testing.assert_array_equal(scaled.data, data * np.array([[1], [10]], F32))
    sums = plax.vmap(lambda n: jnp.sum(n.data), in_axes=NamedSpec("a"))(x)
    np.testing.assert_array_equal(sums, data.sum(1))
    grad = plax.grad(lambda d: jnp.sum(plax.vmap(
        lambda n: Named(n.names, n.data ** 2), in_axes=NamedSpec("b"),
        out_axes=NamedSpec("b"))(Named(("a", "b"), d)).data))(data)
    np.testing.assert_array_equal(grad, 2 * data)


def test_unregistered_container_spec_is_refused(named_vmappable):
    batching.unregister_vmappable(Named)
    try:
        with pytest.raises(TypeError, match="vmap in_axes must be an int, None, or a tuple"):
            plax.vmap(lambda n: n, in_axes=NamedSpec("a"))
    finally:
        batching.register_vmappable(Named, NamedSpec, int, _to_elt, _from_elt, None)
