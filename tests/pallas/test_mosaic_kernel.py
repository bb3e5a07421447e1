"""plax.experimental.mosaic.as_tpu_kernel: a Mosaic kernel written in MLIR, lowered for TPU
on the CPU to the tpu_custom_call JAX 0.10.2 writes for the same module (its backend config,
kernel name and side-effect attributes, checked on real JAX)."""
import base64
import json
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import mosaic
from plax.experimental.pallas import tpu as pltpu
from plax.pallas import mosaic_bindings

pytestmark = pytest.mark.skipif(not mosaic_bindings.available(),
                                reason="jaxlib without the Mosaic TPU bindings")
VMEM = "memref<8x128xf32, #tpu.memory_space<vmem>>"
DOUBLE = f"""module {{
  func.func @main(%arg0: {VMEM}, %arg1: {VMEM}) attributes {{dimension_semantics = [],
      scalar_prefetch = 0 : i64, scratch_operands = 0 : i64,
      tpu.core_type = #tpu.core_type<tc>}} {{
    %c0 = arith.constant 0 : index
    %0 = vector.load %arg0[%c0, %c0] : {VMEM}, vector<8x128xf32>
    %1 = arith.addf %0, %0 : vector<8x128xf32>
    vector.store %1, %arg1[%c0, %c0] : {VMEM}, vector<8x128xf32>
    return
  }}
}}"""
X = plax.ShapeDtypeStruct((8, 128), jnp.float32)


def lowered(kernel):
    text = plax.jit(kernel).trace(X).lower(lowering_platforms=("tpu",)).as_text()
    raw = re.search(r'backend_config = "((?:[^"\\]|\\.)*)"', text).group(1)
    config = json.loads(re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), raw))
    body = base64.b64decode(config["custom_call_config"].pop("body"))
    return text, config, mosaic_bindings.read_body(body)


def test_as_tpu_kernel_lowers_to_the_custom_call_jax_writes():
    kernel = mosaic.as_tpu_kernel(
        mosaic_bindings.module_from_text(DOUBLE), X, kernel_name="double",
        vmem_limit_bytes=1 << 20,
        has_side_effects=mosaic.TpuSideEffectType.DATAFLOW_SIDE_EFFECTING)
    text, config, module = lowered(kernel)
    assert config == {"custom_call_config": {"serialization_format": 1,
                                             "needs_layout_passes": True,
                                             "shape_invariant_numerics": False},
                      "scoped_memory_configs": [{"memory_space": 1, "offset": 0,
                                                 "size": 1 << 20}]}
    assert 'kernel_name = "double"' in text and "has_side_effect = true" in text
    assert 'mhlo.frontend_attributes = {xla_allow_dce_side_effecting_op = "true"}' in text
    assert "arith.addf" in module


def test_memory_spaces_metadata_and_refusals():
    kernel = mosaic.as_tpu_kernel(mosaic_bindings.module_from_text(DOUBLE), X,
                                  output_memory_spaces=(pltpu.VMEM,), metadata={"a": "b"})
    text, config, _ = lowered(kernel)
    assert config["custom_call_config"]["output_memory_space_colors"] == [{"color": 1}]
    assert "kernel_metadata" in text and "kernel_name" not in text
    with pytest.raises(NotImplementedError, match="runs only on a TPU"):
        kernel(np.ones((8, 128), np.float32))
    with pytest.raises(TypeError, match="takes an MLIR module"):
        mosaic.as_tpu_kernel(DOUBLE, X)


def test_vmap_of_a_batch_of_one_only():
    """As JAX's rule: a batch of one runs the kernel once and adds the axis; a larger batch
    raises (a Mosaic module has fixed shapes)."""
    kernel = mosaic.as_tpu_kernel(mosaic_bindings.module_from_text(DOUBLE), X)
    one = plax.ShapeDtypeStruct((1, 8, 128), jnp.float32)
    text = plax.jit(plax.vmap(kernel)).trace(one).lower(lowering_platforms=("tpu",)).as_text()
    assert text.count("stablehlo.custom_call @tpu_custom_call(") == 1
    assert "-> tensor<1x8x128xf32>" in text
    two = plax.ShapeDtypeStruct((2, 8, 128), jnp.float32)
    with pytest.raises(NotImplementedError, match="does not support non-trivial batching"):
        plax.jit(plax.vmap(kernel)).trace(two)
