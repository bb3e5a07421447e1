"""AOT stages (trace/lower/compile), eval_shape, ShapeDtypeStruct and the staging utilities:
disable_jit, named_scope/named_call, clear_caches/backends, effects_barrier,
ensure_compile_time_eval."""
import functools
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.runtime.array import ArrayImpl

X = np.arange(3, dtype=np.float32)
S = plax.ShapeDtypeStruct


@functools.partial(plax.jit, static_argnums=2)
def affine(x, y, n):
    return x * n + y


# --- Traced / Lowered ----------------------------------------------------------------------------
def test_trace_jaxpr_and_eval_shape():
    traced = affine.trace(X, 1.0, 3)
    assert str(traced.jaxpr) == (
        "{ lambda ; a:f32[3] b:f32[]. let\n"
        "    c:f32[3] = mul a 3.0:f32[]\n"
        "    d:f32[] = convert_element_type[new_dtype=float32 weak_type=False] b\n"
        "    e:f32[3] = add c d\n"
        "  in (e,) }")
    assert traced.out_info == S((3,), np.float32)
    assert affine.eval_shape(X, 1.0, 3) == S((3,), np.float32)
    assert traced.lower().as_text() == affine.lower(X, 1.0, 3).as_text()


def test_lowered_text_is_stablehlo():
    lowered = affine.lower(X, 1.0, 3)
    text = lowered.as_text()
    assert text.startswith("module @jit_affine")
    assert "func.func public @main(%arg0: tensor<3xf32>, %arg1: tensor<f32>) -> (tensor<3xf32>)" in text
    for op in ("stablehlo.multiply", "stablehlo.add", "stablehlo.broadcast_in_dim"):
        assert op in text
    assert lowered.as_text("stablehlo") == text
    assert "loc(" not in text and "loc(" in lowered.as_text(debug_info=True)
    assert lowered.as_text("hlo").startswith("HloModule jit_affine")
    with pytest.raises(ValueError, match="unknown dialect"):
        lowered.as_text("mhlo")
    assert lowered.out_info == S((3,), np.float32)
    assert lowered.in_tree.num_leaves == 2


def test_compiler_ir_gives_jaxlibs_module_objects():
    # As JAX: an MLIR module for "stablehlo" (str() prints it), an XlaComputation for "hlo".
    lowered = plax.jit(lambda x: jnp.sin(x) * 2).lower(X)
    module = lowered.compiler_ir()
    assert lowered.compiler_ir("stablehlo") is module  # one object per Lowered, as in JAX
    assert module.operation.name == "builtin.module"
    text = str(module)
    assert text.startswith("module @jit_") and "loc(" not in text
    assert "stablehlo.sine" in text and "stablehlo.multiply" in text
    assert "tensor<3xf32>" in text
    hlo = lowered.compiler_ir("hlo")
    assert hlo.as_hlo_text() == lowered.as_text("hlo")
    assert "sine(" in hlo.as_hlo_text() and "f32[3]" in hlo.as_hlo_text()
    with pytest.raises(ValueError, match="unknown dialect"):
        lowered.compiler_ir("mhlo")
    # The module compiles to the same numbers the lowering does.
    np.testing.assert_allclose(np.asarray(lowered.compile()(X)), np.sin(X) * 2, rtol=1e-6)
    assert "sine" in lowered.compile().as_text()


def test_compiler_ir_of_an_spmd_lowering():
    n = len(plax.devices())
    mesh = plax.make_mesh((n,), ("x",), axis_types=(plax.sharding.AxisType.Auto,))
    spread = plax.NamedSharding(mesh, plax.P("x"))
    lowered = plax.jit(lambda x: jnp.sum(x * 2), in_shardings=spread).lower(
        S((2 * n,), np.float32))
    assert f"mhlo.num_partitions = {n}" in str(lowered.compiler_ir())
    assert "xla.sdy.meshes" in lowered.compiler_ir("hlo").as_hlo_text()


def test_lowering_accepts_shape_dtype_structs():
    f = plax.jit(lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ()))))
    lowered = f.lower(S((2, 3), np.float32), S((3, 4), np.float32))
    assert "tensor<2x3xf32>" in lowered.as_text() and "stablehlo.dot_general" in lowered.as_text()
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(lowered.compile()(a, b), a @ b)
    # Mixed with real arrays, and weak types carried by the struct.
    assert plax.jit(lambda x, s: x * s).lower(X, S((), np.float32, weak_type=True)).out_info == \
        S((3,), np.float32)


def test_locations_carry_named_scope_and_named_call():
    def body(a):
        with plax.named_scope("my_scope"):
            return jnp.sin(a)

    text = plax.jit(body).lower(X).as_text(debug_info=True)
    line = next(l for l in text.splitlines() if "stablehlo.sine" in l)
    assert re.search(r'loc\("my_scope/sin"\(".*test_stages\.py":\d+:\d+\)\)', line), line

    text = plax.jit(plax.named_call(body, name="layer1")).lower(X).as_text(debug_info=True)
    assert 'loc("layer1/my_scope/sin"' in text
    text = plax.jit(plax.named_call(body)).lower(X).as_text(debug_info=True)   # default name: the function's
    assert 'loc("body/my_scope/sin"' in text
    np.testing.assert_allclose(plax.jit(plax.named_call(body))(X), np.sin(X), rtol=1e-6)

    @plax.named_scope("deco")          # a named_scope also decorates, as in JAX
    def decorated(a):
        return jnp.cos(a)
    assert 'loc("deco/cos"' in plax.jit(decorated).lower(X).as_text(debug_info=True)


def test_named_scope_requires_a_string():
    with pytest.raises(TypeError, match="must be a string"):
        plax.named_scope(3)
    with pytest.raises(TypeError, match="must be a string"):
        plax.named_call(lambda x: x, name=3)


# --- Compiled --------------------------------------------------------------------------------
def test_compiled_text_and_analyses():
    compiled = affine.lower(X, 1.0, 3).compile()
    hlo = compiled.as_text()
    assert hlo.startswith("HloModule jit_affine") and "ENTRY" in hlo
    cost = compiled.cost_analysis()
    assert cost["flops"] > 0
    mem = compiled.memory_analysis()
    assert mem.argument_size_in_bytes == X.nbytes + 4 and mem.output_size_in_bytes == X.nbytes
    assert compiled.out_info == S((3,), np.float32)
    dev = plax.devices()[0]
    assert compiled.input_shardings == (((plax.sharding.SingleDeviceSharding(dev),) * 2), {})


def test_compiled_runs_with_matching_arguments():
    compiled = affine.lower(X, 1.0, 3).compile()
    np.testing.assert_array_equal(compiled(X, 1.0), X * 3 + 1)
    np.testing.assert_array_equal(compiled(X, np.float32(2.0)), X * 3 + 2)  # weak vs strong is fine
    np.testing.assert_array_equal(compiled(plax.device_put(X), 0.0), X * 3)


def test_compiled_rejects_mismatched_arguments():
    compiled = affine.lower(X, 1.0, 3).compile()
    with pytest.raises(TypeError, match=r"Argument types differ.*f32\[2\].*f32\[3\]"):
        compiled(X[:2], 1.0)
    with pytest.raises(TypeError, match=r"Argument types differ.*i32\[3\]"):
        compiled(X.astype(np.int32), 1.0)
    with pytest.raises(TypeError, match=r"\(x\)"):     # names the argument
        compiled(X[:1], 1.0)
    with pytest.raises(TypeError, match="input pytree does not match"):
        compiled(X, (1.0,))
    # Static arguments are compiled in, so they are not passed (as in JAX).
    with pytest.raises(TypeError, match="Static arguments are compiled in"):
        compiled(X, 1.0, 3)


# --- eval_shape and ShapeDtypeStruct -------------------------------------------------------------
def test_eval_shape():
    out = plax.eval_shape(lambda a, b: {"s": jnp.sum(a), "b": b, "m": lax.dot_general(
        a, a, (((1,), (0,)), ((), ())))}, S((4, 4), np.float32), 1.0)
    assert out == {"s": S((), np.float32), "b": S((), np.float32, weak_type=True),
                   "m": S((4, 4), np.float32)}
    calls = []
    plax.eval_shape(lambda a: calls.append(type(a)) or a, X)
    assert calls and calls[0] is not plax.Array      # traced, never run
    assert plax.eval_shape(lambda a, k=1: a * k, X, k=2) == S((3,), np.float32)


def test_shape_dtype_struct():
    a = S((2, 3), np.float32)
    assert a == S([2, 3], jnp.float32) and hash(a) == hash(S((2, 3), "float32"))
    assert a != S((2, 3), np.int32) and a != S((3, 2), np.float32)
    assert a != S((2, 3), np.float32, weak_type=True)
    assert len({a, S((2, 3), np.float32), S((2,), np.float32)}) == 2
    assert repr(a) == "ShapeDtypeStruct(shape=(2, 3), dtype=float32)"
    assert repr(S((), np.int32, weak_type=True)) == \
        "ShapeDtypeStruct(shape=(), dtype=int32, weak_type=True)"
    assert a.ndim == 2 and a.size == 6 and a.shape == (2, 3) and a.dtype == np.float32
    assert S((3,), np.float64).dtype == np.float64                # kept as given, as in JAX
    assert plax.eval_shape(lambda x: x, S((3,), np.float64)).dtype == np.float32
    with pytest.raises(ValueError, match="dtype must be specified"):
        S((3,), None)
    with pytest.raises(TypeError, match="'not-a-dtype' is not a dtype"):
        S((3,), "not-a-dtype")


# --- disable_jit -------------------------------------------------------------------------------
def test_disable_jit_runs_op_by_op(capsys):
    @plax.jit
    def f(a):
        print("inside:", a)
        return a + 1

    with plax.disable_jit():
        out = f(X)
    np.testing.assert_array_equal(out, X + 1)
    assert "inside: [0. 1. 2.]" in capsys.readouterr().out
    f(X)
    assert "inside: JitTracer(float32[3])" in capsys.readouterr().out


def test_disable_jit_allows_python_control_flow_on_values():
    @plax.jit
    def f(a):
        return a * 2 if float(jnp.sum(a)) > 0 else a
    with plax.disable_jit():
        np.testing.assert_array_equal(f(X), X * 2)


# --- caches, backends, barriers ------------------------------------------------------------------
def test_clear_backends_then_use_again():
    g = plax.jit(lambda a: a * 3)
    np.testing.assert_array_equal(g(X), X * 3)
    plax.clear_backends()
    assert len(plax.devices()) == 8
    np.testing.assert_array_equal(g(X), X * 3)
    np.testing.assert_allclose(jnp.sin(jnp.asarray(X)), np.sin(X), rtol=1e-6)


def test_effects_barrier():
    outs = [plax.jit(lambda a: a * 2)(X) for _ in range(3)]
    assert plax.effects_barrier() is None
    for o in outs:
        np.testing.assert_array_equal(o, X * 2)


# --- ensure_compile_time_eval --------------------------------------------------------------------
def test_ensure_compile_time_eval():
    kinds = []

    def f(a):
        with plax.ensure_compile_time_eval():
            c = jnp.sin(jnp.float32(1.0))      # concrete: runs now
            d = a * 2                          # depends on the argument: still staged
            kinds.extend([type(c), type(d)])
            ok = bool(c > 0)                   # concrete, so usable in Python control flow
        return d + c if ok else d

    out = plax.jit(f)(X)
    np.testing.assert_allclose(out, X * 2 + np.sin(1.0), rtol=1e-6)
    assert kinds[0] is ArrayImpl and kinds[1] is not ArrayImpl
    text = str(plax.make_jaxpr(f)(X))
    assert "sin" not in text and "mul" in text


# --- compiler_options ----------------------------------------------------------------------------
def test_compiler_options_reach_xla():
    def f(a):
        return jnp.sin(a) * 2 + 1
    no_passes = {"xla_disable_all_hlo_passes": True}
    assert "fusion" in plax.jit(f).lower(X).compile().as_text()
    assert "fusion" not in plax.jit(f, compiler_options=no_passes).lower(X).compile().as_text()
    assert "fusion" not in plax.jit(f).lower(X).compile(compiler_options=no_passes).as_text()
    np.testing.assert_allclose(plax.jit(f, compiler_options=no_passes)(X), np.sin(X) * 2 + 1,
                               rtol=1e-6)
    with pytest.raises(plax.errors.JaxRuntimeError, match="No such compile option: 'bogus'"):
        plax.jit(f, compiler_options={"bogus": 1})(X)
    with pytest.raises(TypeError, match="compiler_options must be a dict"):
        plax.jit(f, compiler_options=["bogus"])


def test_nested_jit_scopes_are_relative_to_each_call_site():
    inner = plax.jit(lambda x: jnp.sin(x))

    def outer(x):
        with plax.named_scope("A"):
            a = inner(x)
        with plax.named_scope("B"):
            b = inner(x)
        return a + b

    text = plax.jit(outer).lower(jnp.ones(2)).as_text(debug_info=True)
    assert 'loc("A/jit(<lambda>)/sin"' in text
    assert 'loc("B/jit(<lambda>)/sin"' in text


def test_eval_shape_of_a_function_returning_shape_dtype_structs():
    # lineax compares structures with eval_shape(lambda: tree) on trees that may already
    # hold ShapeDtypeStructs: they come back as they are, beside the traced outputs.
    given = plax.ShapeDtypeStruct((3,), np.float32)
    out = plax.eval_shape(lambda x: {"given": given, "sum": x.sum(), "n": 2}, np.ones((2, 2)))
    assert out["given"] is given
    assert out["sum"].shape == () and out["sum"].dtype == np.float32
    assert out["n"].shape == () and out["n"].weak_type


def test_lowered_cost_analysis_counts_the_program_as_lowered():
    lowered = plax.jit(lambda x: x @ x + 1).lower(np.ones((4, 4), np.float32))
    cost = lowered.cost_analysis()
    assert cost["flops"] == 2 * 4 * 4 * 4 + 4 * 4  # the matmul's multiply-adds, then the add
    assert cost["bytes accessed"] > 0


def test_compiled_describes_its_inputs_and_constants():
    const = jnp.arange(16.0) + 42.0

    @plax.jit
    def f(x, y, *, k):
        return {"out": const[:8] + x + k}

    c = f.lower(jnp.arange(8.0), 2.0, k=jnp.float32(3)).compile()
    assert [a.shape for a in c.in_avals[0]] == [(8,), ()] and c.in_avals[1]["k"].shape == ()
    assert c.in_avals[0][1].weak_type
    fmt = c.input_formats[0][0]
    assert fmt.layout.major_to_minor == (0,) and fmt.sharding == c.input_shardings[0][0]
    assert c.output_formats["out"].layout.major_to_minor == (0,)
    assert c._params.const_args == []  # a one-device program holds its constants in its text
    assert [a.shape for a in c._executable.in_avals] == [(8,), ()]  # y is unused: dropped
    np.testing.assert_allclose(c(jnp.arange(8.0), 2.0, k=jnp.float32(3))["out"],
                               2 * np.arange(8.0) + 42 + 3)


def test_compiled_calls_after_the_first_stay_in_cpp(monkeypatch):
    from plax.api import stages
    calls = []
    original = stages.Compiled._call_python
    monkeypatch.setattr(stages.Compiled, "_call_python",
                        lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    c = plax.jit(lambda a: a * 2).lower(jnp.ones(3)).compile()
    for _ in range(3):
        np.testing.assert_allclose(c(jnp.ones(3)), [2.0, 2.0, 2.0])
    assert len(calls) == 1
    with pytest.raises(TypeError, match="Argument types differ"):
        c(jnp.ones(4))
