"""plax.extend's lowering, mlir (and mlir.ir), sharding and xla modules: jaxlib's MLIR
bindings and module functions, sharding protos, XLA passes of one's own."""
import numpy as np
import pytest

import plax
import plax.extend.mlir as xmlir
import plax.extend.mlir.ir as ir_module
from plax.extend import core as xcore, lowering, sharding, xla as xxla
from plax.extend.mlir import ir
from plax.interpreters import mlir
from plax.sharding import NamedSharding, PartitionSpec as P

F32 = np.float32
_ADD = ("module { func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
        "  %0 = stablehlo.add %a, %a : tensor<2xf32>\n  func.return %0 : tensor<2xf32>\n} }")


def test_ir_is_jaxlibs_module_with_its_names():
    assert ir_module is ir is mlir.ir
    for name in ("Context", "Module", "Location", "RankedTensorType", "DenseElementsAttr",
                 "InsertionPoint", "Value", "Operation"):
        assert hasattr(ir, name)


def test_portable_artifact_round_trip_in_a_jax_ir_context():
    with lowering.JaxIrContext() as ctx, ir.Location.unknown():
        assert isinstance(ctx, ir.Context)
        module = ir.Module.parse(_ADD)
        artifact = xmlir.serialize_portable_artifact(module, "1.0.0")
        assert isinstance(artifact, bytes) and artifact[:4] == b"ML\xefR"
        back = xmlir.deserialize_portable_artifact(artifact)
    assert "stablehlo.add %arg0, %arg0 : tensor<2xf32>" in str(back)
    assert isinstance(lowering.upstream_dialects, ir.DialectRegistry)
    assert lowering.LoweringRuleContext is mlir.LoweringRuleContext


@pytest.mark.needs_devices(8)
def test_lower_with_sharding_in_types_pins_an_explicit_sharding():
    double_p = xcore.Primitive("double_pinned")
    double_p.def_abstract_eval(lambda x: x)
    double_p.def_impl(lambda x: x * 2)

    def rule(ctx, x):
        return [xmlir.lower_with_sharding_in_types(ctx, mlir.hlo.add(x, x), ctx.avals_out[0])]

    mlir.register_lowering(double_p, rule)
    mesh = plax.make_mesh((4, 2), ("x", "y"))
    data = np.arange(16, dtype=F32).reshape(8, 2)
    x = plax.device_put(data, NamedSharding(mesh, P("x", None)))
    f = plax.jit(double_p.bind)
    with plax.set_mesh(mesh):
        assert 'sdy.sharding_constraint %0 <mesh<["x"=4, "y"=2]>, [{"x"}, {}]>' in \
            f.lower(x).as_text()
        y = f(x)
    assert y.sharding.spec == P("x", None)
    np.testing.assert_array_equal(y, 2 * data)
    # Without a sharding in the type the value is left alone.
    assert "sharding_constraint" not in f.lower(np.ones(2, F32)).as_text()


def test_sharding_protos_round_trip():
    hlo = sharding.xla_client.HloSharding.replicate()
    data = sharding.get_serialized_proto_from_hlo_sharding(hlo)
    assert sharding.get_hlo_sharding_from_serialized_proto(data) == hlo
    op = sharding.get_op_sharding_from_serialized_proto(data)
    assert op.type == sharding.xla_client.OpSharding.Type.REPLICATED
    assert sharding.GSPMDSharding.get_replicated(plax.devices()).is_fully_replicated


def test_hlo_module_transformation_sees_each_compilation_until_cleared():
    seen = []

    def count(proto: bytes):
        seen.append(len(proto))
        return None  # unchanged

    xxla.register_hlo_module_transformation(count, name="plax_test_count")
    try:
        np.testing.assert_array_equal(plax.jit(lambda x: x * 3 + 1)(np.ones(3, F32)),
                                      np.full(3, 4, F32))
        assert len(seen) == 1 and seen[0] > 0
    finally:
        assert xxla.clear_hlo_module_transformation("plax_test_count") is True
    assert xxla.clear_hlo_module_transformation("plax_test_count") is False
    plax.jit(lambda x: x * 7 - 1)(np.ones(3, F32))
    assert len(seen) == 1
    with pytest.raises(TypeError, match="stage must be a PipelineStage enum"):
        xxla.register_hlo_module_transformation(count, name="x", stage=0)
