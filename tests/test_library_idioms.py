"""Behaviours libraries built on JAX rely on (found running flax.nnx's suite on plax), each
checked against NumPy or JAX's documented behaviour."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.extend.core import Effect
from plax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec as P


class _Boxed:
    """A value that converts itself to an array with JAX's ``__jax_array__`` protocol."""

    def __init__(self, value):
        self.value = value

    def __jax_array__(self):
        return jnp.asarray(self.value)


@pytest.mark.parametrize("name,fn,expected", [
    ("dot", lambda b: jnp.dot(jnp.arange(3.0), b), 8.0),
    ("asarray", lambda b: jnp.asarray(b), [1.0, 2.0, 3.0]),
    ("add", lambda b: jnp.ones(3) + b, [2.0, 3.0, 4.0]),
    ("sin", lambda b: jnp.sin(b), np.sin([1.0, 2.0, 3.0])),
    ("sum", lambda b: jnp.sum(b), 6.0),
])
def test_jax_array_protocol_objects_are_operands(name, fn, expected):
    out = fn(_Boxed(np.array([1.0, 2.0, 3.0], np.float32)))
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6)


def test_jax_array_protocol_scalar_and_jit_refusal():
    assert jnp.isscalar(_Boxed(1.5)) and not jnp.isscalar(_Boxed([1.0]))
    with pytest.raises(ValueError, match="Triggering __jax_array__"):
        plax.jit(lambda a: a * 2)(_Boxed(3.0))


def test_effect_subclasses_take_no_name():
    class VariableEffect(Effect):
        pass

    effect = VariableEffect()
    assert effect.name == "VariableEffect" and not effect.ordered
    assert Effect("Named").name == "Named"


def test_mesh_axis_type_queries():
    explicit = plax.make_mesh((2, 4), ("a", "b"), axis_types=(AxisType.Explicit,) * 2)
    mixed = plax.make_mesh((2, 4), ("a", "b"), axis_types=(AxisType.Explicit, AxisType.Auto))
    table = [(explicit, (True, False, False)), (explicit.abstract_mesh, (True, False, False)),
             (mixed, (False, False, False)),
             (AbstractMesh((2,), ("m",), axis_types=(AxisType.Manual,)), (False, False, True)),
             (plax.sharding.get_abstract_mesh(), (False, False, False))]  # no axes: False
    for mesh, want in table:
        assert (mesh.are_all_axes_explicit, mesh.are_all_axes_auto,
                mesh.are_all_axes_manual) == want, mesh


def test_sharding_of_a_value_off_any_mesh_constrains_nothing():
    x = jnp.arange(6.0).reshape(2, 3)
    typed = plax.typeof(x).sharding  # over an empty abstract mesh
    assert not typed.mesh.axis_names
    y = plax.lax.with_sharding_constraint(x, typed)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    bits = plax.random.bernoulli(plax.random.key(0), 0.5, (2, 3), out_sharding=typed)
    want = plax.random.bernoulli(plax.random.key(0), 0.5, (2, 3))
    np.testing.assert_array_equal(np.asarray(bits), np.asarray(want))


def test_eager_constraint_over_an_abstract_mesh_needs_a_concrete_one():
    abstract = AbstractMesh((2,), ("x",), axis_types=(AxisType.Auto,))
    with pytest.raises(ValueError, match="no concrete mesh of that shape"):
        plax.lax.with_sharding_constraint(jnp.ones(4), NamedSharding(abstract, P("x")))
    mesh = plax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
    with plax.set_mesh(mesh):
        y = plax.lax.with_sharding_constraint(jnp.ones(4), NamedSharding(abstract, P("x")))
    assert y.sharding == NamedSharding(mesh, P("x"))
    np.testing.assert_array_equal(np.asarray(y), np.ones(4))


def test_eager_reshard_onto_a_named_mesh_and_eval_shape_keeps_the_type():
    mesh = plax.make_mesh((2, 2), ("a", "b"), axis_types=(AxisType.Explicit,) * 2)
    x = plax.sharding.reshard(jnp.arange(16.0).reshape(4, 4), NamedSharding(mesh, P("a", "b")))
    assert x.sharding == NamedSharding(mesh, P("a", "b"))
    np.testing.assert_array_equal(np.asarray(x), np.arange(16.0).reshape(4, 4))
    for out in (plax.eval_shape(lambda v: v * 2, x), plax.jit(lambda v: v * 2).eval_shape(x)):
        assert out.shape == (4, 4) and out.sharding.spec == P("a", "b")
        assert out.sharding.mesh == mesh.abstract_mesh
    assert plax.eval_shape(lambda v: v * 2, jnp.ones(3)).sharding is None


def test_custom_vjp_backward_rule_sees_arrays_for_grads_seed():
    seen = []

    @plax.custom_vjp
    def f(x):
        return jnp.sin(x)

    def bwd(cos_x, g):
        seen.append((type(g), g.shape, g.dtype))
        return (cos_x * g,)

    f.defvjp(lambda x: (f(x), jnp.cos(x)), bwd)
    np.testing.assert_allclose(float(plax.grad(f)(1.0)), np.cos(1.0), rtol=1e-6)
    assert seen[0][0] is type(jnp.ones(())) and seen[0][1:] == ((), np.float32)


def test_isclose_on_keys_is_equality():
    k0, k1 = plax.random.key(0), plax.random.key(1)
    assert bool(jnp.allclose(k0, k0)) and not bool(jnp.allclose(k0, k1))
    keys = plax.random.split(k0, 3)
    np.testing.assert_array_equal(np.asarray(jnp.isclose(keys, keys[1])), [False, True, False])


def test_vmap_out_axes_none_error_names_the_output_path():
    f = plax.vmap(lambda x: {"a": x, "broadcast": x}, out_axes={"a": 0, "broadcast": None})
    with pytest.raises(ValueError, match=r"at vmap out_axes\['broadcast'\], got axis spec None "
                                         "but output was batched on axis 0"):
        f(jnp.ones(3))


def test_closed_jaxpr_shows_its_jaxprs_variables():
    closed = plax.make_jaxpr(lambda x, y: x * y + 1)(jnp.ones(3), 2.0)
    assert closed.invars == closed.jaxpr.invars and len(closed.invars) == 2
    assert closed.outvars == closed.jaxpr.outvars and len(closed.outvars) == 1
    assert closed.constvars == closed.jaxpr.constvars and closed.literals == closed.consts


def test_a_trace_and_tracer_defined_by_a_library():
    """haiku's to_dot builds its own trace: tracers made with JAX's ``Tracer(trace, aval)``,
    forwarding each primitive to the trace below while recording it."""
    from plax.core import Trace, Tracer
    from plax.extend.core import set_current_trace, take_current_trace

    class CountingTracer(Tracer):
        def __init__(self, trace, val):
            super().__init__(trace, plax.typeof(val))
            self.val = val

    class CountingTrace(Trace):
        def __init__(self, parent):
            super().__init__()
            self.parent_trace, self.seen = parent, []

        def to_val(self, x):
            return x.val if isinstance(x, CountingTracer) and x._trace is self else x

        def process_primitive(self, primitive, tracers, params):
            vals = [self.to_val(t) for t in tracers]
            out = primitive.bind_with_trace(self.parent_trace, vals, params)
            self.seen.append(primitive.name)
            if primitive.multiple_results:
                return [CountingTracer(self, v) for v in out]
            return CountingTracer(self, out)

    def f(x):
        return jnp.sin(x) * 2.0 + x.sum()

    value = jnp.arange(3.0)
    with take_current_trace() as parent:
        trace = CountingTrace(parent)
        with set_current_trace(trace):
            x = CountingTracer(trace, value)
            assert x.aval == plax.typeof(value) and x.shape == (3,)
            out = trace.to_val(f(x))
    np.testing.assert_allclose(np.asarray(out), np.sin(np.arange(3.0)) * 2 + 3, rtol=1e-6)
    assert trace.seen[:2] == ["sin", "mul"] and "reduce_sum" in trace.seen


def test_name_stack_prints_as_a_path():
    def f(x):
        with plax.named_scope("outer"):
            with plax.named_scope("inner"):
                return jnp.sin(x)

    eqns = plax.make_jaxpr(lambda x: f(x).sum())(jnp.ones(2)).eqns
    assert [(e.primitive.name, str(e.source_info.name_stack)) for e in eqns] == [
        ("sin", "outer/inner"), ("reduce_sum", "")]


def test_small_names_libraries_reach_for():
    import plax.core
    import plax.custom_derivatives as cd
    import plax.stages
    from plax.experimental.pjit import pjit

    zeros = cd.zero_from_primal({"f": jnp.ones(2), "i": jnp.ones(3, jnp.int32)})
    np.testing.assert_array_equal(np.asarray(zeros["f"]), [0.0, 0.0])
    assert zeros["i"].dtype == plax.dtypes.float0 and zeros["i"].shape == (3,)
    symbolic = cd.zero_from_primal((1.0, jnp.ones((2, 2))), symbolic_zeros=True)
    assert [type(z) for z in symbolic] == [cd.SymbolicZero] * 2
    assert symbolic[1].shape == (2, 2) and symbolic[1].dtype == np.float32
    assert plax.config.x64_enabled is False
    with plax.enable_x64():
        assert plax.config.x64_enabled is True
    assert float(pjit(lambda x: x + 1)(1.0)) == 2.0
    assert plax.core.valid_jaxtype(1.0) and not plax.core.valid_jaxtype("text")
    assert plax.core.DropVar is plax.extend.core.DropVar
    assert plax.stages.CompilerOptions.__origin__ is dict
    assert plax.stages.CompilerOptions.__args__[0] is str


def test_submodules_reached_as_attributes_after_import_plax():
    import subprocess
    import sys
    code = ("import plax; print(type(plax.interpreters.ad.primitive_jvps).__name__, "
            "plax.extend.core.Primitive.__name__, plax._src.dtypes.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.split() == ["dict", "Primitive", "plax._src.dtypes"], out.stderr[-2000:]


class _ShapeLike:
    """An iterable of ints that is neither a list nor a tuple (TensorFlow's TensorShape, as
    TFP's JAX substrate passes shapes)."""

    def __init__(self, dims):
        self.dims = list(dims)

    def __iter__(self):
        return iter(self.dims)

    def __len__(self):
        return len(self.dims)


def test_shapes_and_axes_may_be_any_iterable_of_ints():
    x = jnp.arange(6.0).reshape(2, 3)
    assert jnp.zeros(_ShapeLike([2, 3])).shape == (2, 3)
    assert plax.random.normal(plax.random.key(0), _ShapeLike([4])).shape == (4,)
    assert plax.lax.broadcast_in_dim(1.0, _ShapeLike([2, 2]), ()).shape == (2, 2)
    np.testing.assert_array_equal(np.asarray(jnp.sum(x, axis=range(0, 1))), [3.0, 5.0, 7.0])
    assert jnp.reshape(x, range(6, 7)).shape == (6,)
    with pytest.raises(TypeError, match="Shapes must be 1D sequences of concrete values"):
        jnp.zeros(2.0)


def test_traced_values_have_the_array_methods_var_and_std():
    # (a staged tracer's own jaxpr variable once shadowed .var(): blackjax calls x.var(...)
    # on the operand of a cond branch)
    x = jnp.arange(4.0)
    want = np.var(np.arange(4.0), ddof=1)
    np.testing.assert_allclose(float(plax.jit(lambda v: v.var(ddof=1))(x)), want, rtol=1e-6)
    out = plax.lax.cond(True, lambda v: v.var(ddof=1, keepdims=True), lambda v: v[:1], x)
    np.testing.assert_allclose(np.asarray(out), [want], rtol=1e-6)


def test_a_jvp_trace_names_itself_as_main():
    """equinox's filter_jvp keeps the outputs whose tracers belong to its own jvp by comparing
    ``tracer._trace.main`` with the top trace's ``main`` (None outside a transformation)."""
    from plax.extend.core import find_top_trace
    seen = []

    def f(x):
        top = find_top_trace([x])
        seen.append((top.main is not None, x._trace.main is top.main))
        return x * 2

    plax.jvp(f, (1.0,), (1.0,))
    assert seen == [(True, True)]
    assert plax.core.Trace.main is None
