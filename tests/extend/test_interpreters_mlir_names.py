"""plax.interpreters.mlir's helpers for rules written with jaxlib's MLIR bindings:
ir_attribute, shape_tensor, jaxpr_subcomp, core_call_lowering, merge_mlir_modules (the
printed attributes as JAX 0.10.2 prints them; values against NumPy)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.api_util import debug_info
from plax.extend import core as xcore, linear_util as lu
from plax.interpreters import mlir

ir = mlir.ir
F32 = np.float32


@pytest.mark.parametrize("value, printed", [
    (True, "true"), (3, "3 : i64"), (2.5, "2.500000e+00 : f64"), ("abc", '"abc"'),
    (np.float32(1.5), "1.500000e+00 : f32"), (np.int8(3), "3 : i8"), ([1, 2], "[1, 2]"),
    ((1, "a"), '[1, "a"]'), (np.arange(3, dtype=np.int32), "dense<[0, 1, 2]> : tensor<3xi32>"),
    ({"a": 1}, "{a = 1 : i64}"),
])
def test_ir_attribute_prints_as_jaxs(value, printed):
    with mlir.make_ir_context(), ir.Location.unknown():
        assert str(mlir.ir_attribute(value)) == printed


def test_ir_attribute_refuses_other_types():
    with mlir.make_ir_context(), ir.Location.unknown():
        with pytest.raises(TypeError, match="No attribute handler defined for type"):
            mlir.ir_attribute(None)


def test_jaxpr_subcomp_and_shape_tensor_in_a_bindings_rule():
    body = plax.make_jaxpr(lambda x: jnp.sin(x) * 2)(np.ones(2, F32))
    sub_p = xcore.Primitive("sub_body_test")
    sub_p.def_abstract_eval(lambda x: x)
    sub_p.def_impl(lambda x: jnp.sin(x) * 2)
    shapes = []

    def rule(ctx, x):
        consts = [mlir.ir_constant(np.asarray(c)) for c in body.consts]
        outs, tokens = mlir.jaxpr_subcomp(ctx.module_context, body.jaxpr, None, "tokens",
                                          consts, x)
        assert tokens == "tokens"
        shapes.append(str(mlir.shape_tensor(ctx.module_context, [2, 3]).type))
        return [outs[0]]

    mlir.register_lowering(sub_p, rule)
    x = np.array([0.5, 1.0], F32)
    np.testing.assert_allclose(plax.jit(lambda v: sub_p.bind(v))(x), 2 * np.sin(x), rtol=1e-6)
    assert shapes == ["tensor<2xi32>"]


def test_core_call_lowering_for_a_call_primitive():
    call_p = xcore.CallPrimitive("call_lowered_test")
    mlir.register_lowering(call_p, mlir.core_call_lowering)
    body = lu.wrap_init(lambda x: [x * 3 + 1], debug_info=debug_info("b", lambda x: x, (0,), {}))
    assert float(plax.jit(lambda x: call_p.bind(body, x)[0])(2.0)) == 7.0


def test_merge_mlir_modules_renames_main_and_clashing_functions():
    src = ("module { func.func public @main(%a: tensor<f32>) -> tensor<f32> {\n"
           "  %0 = func.call @helper(%a) : (tensor<f32>) -> tensor<f32>\n"
           "  func.return %0 : tensor<f32>\n}\n"
           "func.func private @helper(%a: tensor<f32>) -> tensor<f32> {\n"
           "  func.return %a : tensor<f32>\n} }")
    with mlir.make_ir_context(), ir.Location.unknown():
        dst = ir.Module.parse("module { func.func public @main(%a: tensor<f32>) -> "
                              "tensor<f32> { func.return %a : tensor<f32> } }")
        assert mlir.merge_mlir_modules(dst, "main", ir.Module.parse(src)) == "main_1"
        assert mlir.merge_mlir_modules(dst, "callee", ir.Module.parse(src)) == "callee"
        text = str(dst)
    assert "func.func private @main_1" in text and "func.func private @callee" in text
    assert "call @helper_1(" in text and "func.func private @helper_1" in text


def test_channel_types_and_names():
    assert (mlir.DEVICE_TO_DEVICE_TYPE, mlir.SEND_TO_HOST_TYPE, mlir.RECV_FROM_HOST_TYPE) == \
        (1, 2, 3)
    assert mlir.Value is ir.Value and mlir.Token is ir.Value
    assert mlir.Mesh is plax.sharding.Mesh


@pytest.mark.needs_devices(8)
def test_bindings_rules_see_where_the_program_runs():
    seen = []
    probe_p = xcore.Primitive("axis_context_probe")
    probe_p.def_abstract_eval(lambda x: x)
    probe_p.def_impl(lambda x: x)

    def rule(ctx, x):
        seen.append(ctx.module_context.axis_context)
        return [x]

    mlir.register_lowering(probe_p, rule)
    plax.jit(probe_p.bind)(np.ones(4, F32))
    assert seen[-1] == mlir.ShardingContext(1, None)
    mesh = plax.make_mesh((4, 2), ("x", "y"))
    x = plax.device_put(np.ones((8, 2), F32), plax.sharding.NamedSharding(
        mesh, plax.sharding.PartitionSpec("x")))
    plax.jit(lambda v: probe_p.bind(v) + 1)(x)
    assert isinstance(seen[-1], mlir.ShardingContext) and seen[-1].num_devices == 8
    f = plax.shard_map(lambda v: probe_p.bind(v) * 2, mesh=mesh,
                       in_specs=plax.sharding.PartitionSpec("x"),
                       out_specs=plax.sharding.PartitionSpec("x"))
    np.testing.assert_array_equal(plax.jit(f)(x), np.full((8, 2), 2, F32))
    assert isinstance(seen[-1], mlir.SPMDAxisContext)
    assert seen[-1].manual_axes == frozenset({"x", "y"}) and seen[-1].mesh.shape["x"] == 4


def test_lower_jaxpr_to_fun_makes_a_callable_function_in_the_rules_module():
    closed = plax.make_jaxpr(lambda x: jnp.cos(x) + np.float32(2))(np.ones(3, F32))
    fun_p = xcore.Primitive("jaxpr_fun_test")
    fun_p.def_abstract_eval(lambda x: x)
    fun_p.def_impl(lambda x: jnp.cos(x) + 2)
    names = []

    def rule(ctx, x):
        f1 = mlir.lower_jaxpr_to_fun(ctx.module_context, "helper", closed, [], num_const_args=0)
        f2 = mlir.lower_jaxpr_to_fun(ctx.module_context, "helper", closed, [], num_const_args=0)
        names.extend([f1.name.value, f2.name.value])
        call = ir.Operation.create("func.call", results=[x.type], operands=[x], attributes={
            "callee": ir.FlatSymbolRefAttr.get(f2.name.value)})
        return [call.result]

    mlir.register_lowering(fun_p, rule)
    x = np.array([0.0, 1.0, 2.0], F32)
    np.testing.assert_allclose(plax.jit(lambda v: fun_p.bind(v))(x), np.cos(x) + 2, rtol=1e-6)
    assert names == ["helper", "helper_1"]
    with pytest.raises(NotImplementedError, match="without effects"):
        mlir.lower_jaxpr_to_fun(None, "f", closed, [object()], num_const_args=0)
