"""plax.extend.core, plax.interpreters.partial_eval and the private ``jax._src`` aliases
(plax._src): each name behaves as the libraries that import it expect."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.avals import ShapedArray
from plax.extend import core as xcore
from plax.api_util import debug_info
from plax.extend import linear_util as lu
from plax.interpreters import partial_eval as pe

F32 = np.dtype(np.float32)


def test_primitives_table_maps_jax_names_onto_plax_primitives():
    prims = xcore.primitives
    assert prims.jit_p.name == "jit" and prims.scatter_add_p.name == "scatter-add"
    assert prims.remat_p.name == "checkpoint" and prims.sin_p.name == "sin"
    closed = plax.make_jaxpr(lambda x: plax.jit(jnp.sin)(x))(np.ones(3, F32))
    assert closed.eqns[0].primitive is prims.jit_p
    with pytest.raises(AttributeError, match="has no attribute 'no_such_p'"):
        prims.no_such_p


def test_mapped_and_unmapped_avals():
    a = ShapedArray((4, 3), F32)
    assert xcore.mapped_aval(4, 0, a).shape == (3,)
    assert xcore.unmapped_aval(5, 1, a).shape == (4, 5, 3)
    assert xcore.mapped_aval(4, None, a) is a
    with pytest.raises(ValueError, match="is not of size 2"):
        xcore.mapped_aval(2, 0, a)


def test_jaxpr_walking_helpers():
    def f(x):
        return plax.lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x)
    closed = plax.make_jaxpr(f)(np.ones(3, F32))
    cond_eqn = next(e for e in closed.eqns if e.primitive.name == "cond")
    inner = list(xcore.jaxprs_in_params(cond_eqn.params))
    assert len(inner) == 2 and all(isinstance(j, xcore.Jaxpr) for j in inner)
    assert len(list(xcore.subjaxprs(closed))) == 2
    out, = xcore.jaxpr_as_fun(closed)(np.array([1.0, -2.0, 3.0], F32))
    np.testing.assert_allclose(out, np.sin([1.0, -2.0, 3.0]), rtol=1e-6)
    assert xcore.primal_dtype_to_tangent_dtype(np.dtype(np.int32)) == plax.dtypes.float0
    assert xcore.valid_jaxtype(np.ones(2)) and not xcore.valid_jaxtype("text")


def test_trace_state_queries():
    seen = {}

    def f(x):
        seen["jit"] = xcore.unsafe_am_i_under_a_jit_DO_NOT_USE()
        seen["same"] = xcore.get_opaque_trace_state() == xcore.get_opaque_trace_state()
        with xcore.take_current_trace() as t:
            seen["taken"] = t is xcore.find_top_trace(())
        return x
    plax.jit(f)(1.0)
    assert seen == {"jit": True, "same": True, "taken": False}
    assert not xcore.unsafe_am_i_under_a_jit_DO_NOT_USE()
    names = plax.vmap(lambda x: np.float32(len(xcore.unsafe_get_axis_names_DO_NOT_USE())),
                      axis_name="i")(np.ones(2, F32))
    np.testing.assert_array_equal(names, [1, 1])


def test_trace_to_jaxpr_dynamic():
    def f(x, y):
        return [jnp.sin(x) * y]
    fun = lu.wrap_init(f, debug_info=debug_info("test", f, (1, 2), {}))
    jaxpr, out_avals, consts = pe.trace_to_jaxpr_dynamic(
        fun, [ShapedArray((3,), F32), ShapedArray((3,), F32)])
    assert [a.shape for a in out_avals] == [(3,)] and consts == []
    assert [e.primitive.name for e in jaxpr.eqns] == ["sin", "mul"]


def test_trace_to_jaxpr_nounits_runs_known_work_now():
    def f(known, unknown):
        k2 = known * 2.0
        return [k2 + 1.0, jnp.sin(unknown) + k2]
    fun = lu.wrap_init(f, debug_info=debug_info("test", f, (1, 2), {}))
    jaxpr, out_pvals, consts = pe.trace_to_jaxpr_nounits(
        fun, [pe.PartialVal.known(np.float32(3.0)),
              pe.PartialVal.unknown(ShapedArray((), F32))])
    assert out_pvals[0].is_known() and float(out_pvals[0].get_known()) == 7.0
    assert not out_pvals[1].is_known() and out_pvals[1].get_aval().shape == ()
    out, = plax.core.eval_jaxpr(jaxpr, consts, np.float32(0.5))
    np.testing.assert_allclose(out, np.sin(0.5) + 6.0, rtol=1e-6)


def test_dce_jaxpr_consts_drops_unused_constants():
    c1, c2 = np.ones(3, F32), np.full(3, 2.0, F32)
    closed = plax.make_jaxpr(lambda x: (x + c1, x * c2))(np.ones(3, F32))
    new, used_consts, used_inputs = pe.dce_jaxpr_consts(closed.jaxpr, [True, False])
    assert used_inputs == [True] and sum(used_consts) == len(new.constvars) == 1


def test_private_aliases():
    from plax._src import ad_util, checkify, core, dispatch, dtypes, flatten_util, tree_util
    from plax._src import traceback_util, xla_bridge
    from plax._src.state.types import AbstractRef
    assert ad_util.stop_gradient_p is xcore.primitives.stop_gradient_p
    assert tree_util._registry[tuple] is not None and list in tree_util._registry
    assert core.trace_state_clean()
    seen = []
    plax.jit(lambda x: seen.append(core.trace_state_clean()) or x)(1.0)
    assert seen == [False]
    assert dtypes.supports_inf(np.float32) and not dtypes.supports_inf(np.int8)
    assert issubclass(dtypes.TypePromotionError, ValueError)
    flat, unravel = flatten_util.ravel_pytree({"a": np.ones(2, F32), "b": np.zeros(1, F32)})
    np.testing.assert_array_equal(flat, [1, 1, 0])
    assert "cpu" in xla_bridge._backends
    dispatch.wait_for_tokens()
    from plax.experimental import checkify as public_checkify
    assert checkify.user_checks == public_checkify.user_checks
    assert not isinstance(plax.typeof(np.ones(2)), AbstractRef)
    assert traceback_util.api_boundary(len)([1, 2]) == 2  # (filters tracebacks, else as len)


def test_register_exclusion_moves_source_lines_to_the_caller(tmp_path):
    lib = tmp_path / "mylib"
    lib.mkdir()
    (lib / "wrap.py").write_text("import plax.numpy as jnp\ndef wrapped_sin(x):\n"
                                 "    return jnp.sin(x)\n")
    program = textwrap.dedent("""
        import sys, plax
        sys.path.insert(0, sys.argv[1])
        from mylib.wrap import wrapped_sin
        import mylib, plax._src.traceback_util as tu
        before = plax.make_jaxpr(wrapped_sin)(1.0).eqns[0].source_info.file
        tu.register_exclusion(mylib.__path__[0])
        after = plax.make_jaxpr(wrapped_sin)(1.0).eqns[0].source_info.line
        print(before.endswith("wrap.py"), after)
    """)
    (tmp_path / "prog.py").write_text(program)
    (lib / "__init__.py").write_text("")
    out = subprocess.run([sys.executable, str(tmp_path / "prog.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PLAX_NUM_CPU_DEVICES="1"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "8"]  # line 8: the make_jaxpr call in prog.py


def test_include_frame_and_tangent_avals():
    import sys as _sys
    from plax._src import traceback_util
    assert traceback_util.include_frame(_sys._getframe())  # this test file is user code
    inner = []
    plax.jit(lambda x: inner.append(_sys._getframe(1)) or x)(1.0)
    assert not traceback_util.include_frame(inner[0])  # the frame calling it is plax's
    assert ShapedArray((2,), np.dtype(np.int32)).to_tangent_aval().dtype == plax.dtypes.float0
    f32 = ShapedArray((2,), F32, weak_type=True)
    assert f32.to_tangent_aval() is f32 and f32.to_cotangent_aval() is f32


def test_a_library_registers_its_own_value_type():
    # TFP registers its variables this way (copying NumPy's entries); here a type of our own.
    from plax.interpreters import xla as ixla

    class Boxed:
        def __init__(self, value):
            self.value = np.asarray(value, np.float64)

    plax.core.pytype_aval_mappings[Boxed] = lambda b: ShapedArray(b.value.shape, F32)
    ixla.canonicalize_dtype_handlers[Boxed] = lambda b: b.value.astype(np.float32)
    try:
        b = Boxed([1.0, 2.0, 3.0])
        np.testing.assert_allclose(plax.jit(jnp.sin)(b), np.sin([1.0, 2.0, 3.0]), rtol=1e-6)
        assert plax.make_jaxpr(jnp.cos)(b).in_avals[0].shape == (3,)
    finally:
        del plax.core.pytype_aval_mappings[Boxed], ixla.canonicalize_dtype_handlers[Boxed]
    assert ixla.canonicalize_dtype_handlers[np.ndarray](np.ones(2)).dtype == np.float32
    out = ixla.apply_primitive(xcore.primitives.sin_p, np.float32(0.5))
    np.testing.assert_allclose(out, np.sin(0.5), rtol=1e-6)


@plax.custom_jvp
def _sin_with_rule(x):
    return jnp.sin(x)


_sin_with_rule.defjvp(lambda p, t: (jnp.sin(p[0]), 3.0 * t[0]))  # (a rule one can tell apart)
REBIND_CASES = [  # (function, its value at 0.5, its derivative at 0.5)
    ("jit", lambda x: plax.jit(jnp.sin)(x) * 2, 2 * np.sin(0.5), 2 * np.cos(0.5)),
    ("custom_jvp", lambda x: _sin_with_rule(x) * 2, 2 * np.sin(0.5), 6.0),
    ("custom_jvp closing over a traced value",
     lambda x: plax.jit(lambda y: _sin_with_rule(y * x))(x), np.sin(0.25), 3.0),
]


@pytest.mark.parametrize("name, fn, value, derivative", REBIND_CASES,
                         ids=[c[0] for c in REBIND_CASES])
def test_equations_rebind_from_get_bind_params(name, fn, value, derivative):
    # equinox's jaxpr passes re-bind every equation this way (JAX 0.10.2's convention: the
    # params, with a primitive's functions as ``subfuns`` in them).
    closed = plax.make_jaxpr(fn)(np.float32(0.5))

    def replay(*args):
        env = dict(zip(closed.jaxpr.invars, args))
        for eqn in closed.eqns:
            params = eqn.primitive.get_bind_params(eqn.params)
            assert isinstance(params, dict)
            ins = [env[v] if isinstance(v, xcore.Var) else v.val for v in eqn.invars]
            outs = eqn.primitive.bind(*ins, **params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            env.update(zip(eqn.outvars, outs))
        return env[closed.jaxpr.outvars[0]]
    np.testing.assert_allclose(plax.jit(replay)(np.float32(0.5)), value, rtol=1e-6)
    np.testing.assert_allclose(plax.grad(replay)(np.float32(0.5)), derivative, rtol=1e-6)


def test_custom_jvp_subfuns_call_the_function_and_rule():
    closed = plax.make_jaxpr(_sin_with_rule)(np.float32(0.5))
    (eqn,) = closed.eqns
    fun, jvp = eqn.primitive.get_bind_params(eqn.params)["subfuns"]
    np.testing.assert_allclose(fun.call_wrapped(np.float32(0.5))[0], np.sin(0.5), rtol=1e-6)
    out, tangent = jvp.call_wrapped(np.float32(0.5), np.float32(2.0))
    np.testing.assert_allclose([out, tangent], [np.sin(0.5), 6.0], rtol=1e-6)


_twice_p = xcore.Primitive("twice_impl_test")
_twice_p.def_impl(lambda x: x * 2)
_twice_p.def_abstract_eval(lambda x: x)


@pytest.mark.parametrize("prim, params, fn", [
    (_twice_p, {}, lambda x: x * 2),  # its impl rule, traced: no twice_impl_test equation
    (xcore.primitives.sin_p, {"accuracy": None}, np.sin),  # no impl rule: bound
])
def test_primitive_impl_on_tracers_traces_the_rule(prim, params, fn):
    closed = plax.make_jaxpr(lambda x: prim.impl(x, **params))(np.float32(0.5))
    assert "twice_impl_test" not in str(closed)
    np.testing.assert_allclose(plax.jit(lambda x: prim.impl(x, **params))(np.float32(0.5)),
                               fn(np.float32(0.5)), rtol=1e-6)
    np.testing.assert_allclose(prim.impl(np.float32(0.5), **params), fn(np.float32(0.5)),
                               rtol=1e-6)


def test_extend_backend_names_the_clients():
    from plax.extend import backend
    clients = backend.backends()
    assert list(clients) == ["cpu"] and backend.get_backend() is clients["cpu"]
    assert backend.get_backend("cpu") is clients["cpu"]
    assert backend.get_backend(clients["cpu"]) is clients["cpu"]
    assert backend.get_default_device() == plax.devices()[0]
    with pytest.raises(RuntimeError, match="Unknown backend"):
        backend.get_backend("tpu")
    import plax.extend as extend
    assert sorted(n for n in dir(extend) if not n.startswith("_")) == [
        "backend", "core", "ifrt_programs", "linear_util", "lowering", "mlir", "random", "sharding",
        "source_info_util", "xla"]
