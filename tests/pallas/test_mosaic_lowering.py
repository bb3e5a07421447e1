"""pallas_call lowered for TPU on the CPU (``lowering_platforms=("tpu",)``): the
``tpu_custom_call`` and its backend config, and the Mosaic module in its body (deserialised),
compared with what JAX 0.10.2 emits for the same kernels."""
import base64
import functools
import json
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax.pallas import mosaic_bindings

pytestmark = pytest.mark.skipif(not mosaic_bindings.available(),
                                reason="jaxlib without the Mosaic TPU bindings")
f32, bf16, i32 = jnp.float32, jnp.bfloat16, jnp.int32


def lower(f, *args):
    """(the StableHLO text, the custom call's backend config, its Mosaic module's text)."""
    text = plax.jit(f).trace(*args).lower(lowering_platforms=("tpu",)).as_text()
    raw = re.search(r'backend_config = "((?:[^"\\]|\\.)*)"', text).group(1)
    config = json.loads(re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), raw))
    body = base64.b64decode(config["custom_call_config"].pop("body"))
    return text, config, mosaic_bindings.read_body(body)


def kernel_signature(module: str) -> str:
    return next(line for line in module.splitlines() if "func.func @" in line
                and "func.func @transform_" not in line)


# --- the kernels (those of issue 50), each with what its module must show ------------------
def elementwise(x, y):
    def k(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...] * 2.0
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(k, out_shape=jax_sds(x), grid=(2,), in_specs=[spec, spec],
                          out_specs=spec)(x, y)


def jax_sds(x, shape=None, dtype=None):
    return plax.ShapeDtypeStruct(x.shape if shape is None else shape,
                                 x.dtype if dtype is None else dtype)


def _mm_kernel(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)
    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y, b=128):
    m, kk = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        _mm_kernel, out_shape=jax_sds(x, (m, n)), grid=(m // b, n // b, kk // b),
        in_specs=[pl.BlockSpec((b, b), lambda i, j, k: (i, k)),
                  pl.BlockSpec((b, b), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((b, b), lambda i, j, k: (i, j)),
        scratch_shapes=[pltpu.VMEM((b, b), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary"),
            vmem_limit_bytes=32 * 1024 * 1024))(x, y)


def softmax(x):
    def k(x_ref, o_ref):
        v = x_ref[...]
        e = jnp.exp(v - jnp.max(v, axis=-1, keepdims=True))
        o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)
    spec = pl.BlockSpec((8, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(k, out_shape=jax_sds(x), grid=(x.shape[0] // 8,), in_specs=[spec],
                          out_specs=spec)(x)


def _flash_kernel(q_ref, k_ref, v_ref, o_ref, *, bq, bk):
    qi = pl.program_id(1)
    q = q_ref[...].astype(jnp.float32)

    def body(j, carry):
        m, l, acc = carry
        kb = k_ref[pl.ds(j * bk, bk), :].astype(jnp.float32)
        vb = v_ref[pl.ds(j * bk, bk), :].astype(jnp.float32)
        s = plax.lax.dot_general(q, kb, (((1,), (1,)), ((), ())),
                                 preferred_element_type=jnp.float32)
        rows = qi * bq + plax.lax.broadcasted_iota(jnp.int32, (bq, bk), 0)
        cols = j * bk + plax.lax.broadcasted_iota(jnp.int32, (bq, bk), 1)
        s = jnp.where(cols <= rows, s, -1e30)
        m_new = jnp.maximum(m, jnp.max(s, axis=1, keepdims=True))
        p = jnp.exp(s - m_new)
        alpha = jnp.exp(m - m_new)
        return (m_new, alpha * l + jnp.sum(p, axis=1, keepdims=True),
                alpha * acc + jnp.dot(p, vb, preferred_element_type=jnp.float32))
    init = (jnp.full((bq, 1), -1e30, jnp.float32), jnp.zeros((bq, 1), jnp.float32),
            jnp.zeros((bq, q.shape[-1]), jnp.float32))
    _, l, acc = plax.lax.fori_loop(0, plax.lax.div((qi + 1) * bq, bk), body, init)
    o_ref[...] = (acc / l).astype(o_ref.dtype)


def flash(q, k, v, bq=128, bk=128):
    bh, s, d = q.shape
    return pl.pallas_call(
        functools.partial(_flash_kernel, bq=bq, bk=bk), out_shape=jax_sds(q),
        grid=(bh, s // bq),
        in_specs=[pl.BlockSpec((None, bq, d), lambda b, i: (b, i, 0)),
                  pl.BlockSpec((None, s, d), lambda b, i: (b, 0, 0)),
                  pl.BlockSpec((None, s, d), lambda b, i: (b, 0, 0))],
        out_specs=pl.BlockSpec((None, bq, d), lambda b, i: (b, i, 0)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
    )(q, k, v)


def gather(idx, x):
    def k(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0 + idx_ref[pl.program_id(0)].astype(jnp.float32)
    return pl.pallas_call(k, out_shape=jax_sds(x, (idx.shape[0] * 8, 128)),
                          grid_spec=pltpu.PrefetchScalarGridSpec(
                              num_scalar_prefetch=1, grid=(idx.shape[0],),
                              in_specs=[pl.BlockSpec((8, 128), lambda i, r: (r[i], 0))],
                              out_specs=pl.BlockSpec((8, 128), lambda i, r: (i, 0))))(idx, x)


def aliased(x):
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(k, out_shape=jax_sds(x), grid=(2,), in_specs=[spec], out_specs=spec,
                          input_output_aliases={0: 0})(x)


def dynamic_slices(x):
    def k(x_ref, o_ref):
        def body(i, c):
            o_ref[pl.ds(i * 8, 8), :] = x_ref[pl.ds(i * 8, 8), :] * 3.0 + c
            return c + 1.0
        plax.lax.fori_loop(0, x_ref.shape[0] // 8, body, 0.0)
    return pl.pallas_call(k, out_shape=jax_sds(x))(x)


def while_loop(x):
    def k(x_ref, o_ref):
        _, v = plax.lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 1.5),
                                   (0, x_ref[...]))
        o_ref[...] = v
    return pl.pallas_call(k, out_shape=jax_sds(x))(x)


# (name, function, arguments, the kernel's signature and attributes as JAX writes them,
#  ops the module holds, backend-config fields besides the body)
_CASES = [
    ("elementwise", elementwise, lambda: (jnp.ones((16, 128), f32),) * 2,
     "func.func @k(%arg0: i32, %arg1: memref<8x128xf32, #tpu.memory_space<vmem>>, %arg2: "
     "memref<8x128xf32, #tpu.memory_space<vmem>>, %arg3: memref<8x128xf32, "
     "#tpu.memory_space<vmem>>) attributes {dimension_semantics = "
     "[#tpu.dimension_semantics<arbitrary>], iteration_bounds = array<i64: 2>, "
     "scalar_prefetch = 0 : i64, scratch_operands = 0 : i64, tpu.core_type = "
     "#tpu.core_type<tc>, window_params = [{transform_indices = @transform_0, window_bounds "
     "= array<i64: 8, 128>}, {transform_indices = @transform_1, window_bounds = array<i64: 8, "
     "128>}, {transform_indices = @transform_2, window_bounds = array<i64: 8, 128>}]}",
     ["vector.load", "arith.mulf", "arith.addf", "tpu.vector_store"], {}),
    ("matmul", matmul, lambda: (jnp.ones((256, 256), bf16),) * 2,
     "func.func @_mm_kernel(%arg0: i32, %arg1: i32, %arg2: i32, %arg3: memref<128x128xbf16, "
     "#tpu.memory_space<vmem>>, %arg4: memref<128x128xbf16, #tpu.memory_space<vmem>>, %arg5: "
     "memref<128x128xbf16, #tpu.memory_space<vmem>>, %arg6: memref<128x128xf32, "
     "#tpu.memory_space<vmem>>) attributes {dimension_semantics = "
     "[#tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<parallel>, "
     "#tpu.dimension_semantics<arbitrary>], iteration_bounds = array<i64: 2, 2, 2>, "
     "scalar_prefetch = 0 : i64, scratch_operands = 1 : i64, tpu.core_type = "
     "#tpu.core_type<tc>, window_params = [{transform_indices = @transform_0, window_bounds "
     "= array<i64: 128, 128>}, {transform_indices = @transform_1, window_bounds = "
     "array<i64: 128, 128>}, {transform_indices = @transform_2, window_bounds = array<i64: "
     "128, 128>}]}",
     ["scf.if", "tpu.matmul %", "#tpu.dot_dimension_numbers<[1], [0], [0], [1], [0, 0, 1, 1], "
      "[], []>", "vector<128x128xbf16>, vector<128x128xbf16>, vector<128x128xf32> -> "
      "vector<128x128xf32>", "arith.truncf"],
     {"scoped_memory_configs": [{"memory_space": 1, "offset": 0, "size": 33554432}]}),
    ("softmax", softmax, lambda: (jnp.ones((16, 256), f32),),
     "iteration_bounds = array<i64: 2>",
     ["vector.multi_reduction <maximumf>", "vector.multi_reduction <add>", "math.exp",
      "arith.divf", "vector.shape_cast %"], {}),
    ("flash", flash, lambda: (jnp.ones((2, 256, 128), bf16),) * 3,
     "func.func @_flash_kernel(%arg0: i32, %arg1: i32, %arg2: memref<1x128x128xbf16, "
     "#tpu.memory_space<vmem>>, %arg3: memref<1x256x128xbf16, #tpu.memory_space<vmem>>, "
     "%arg4: memref<1x256x128xbf16, #tpu.memory_space<vmem>>, %arg5: memref<1x128x128xbf16, "
     "#tpu.memory_space<vmem>>) attributes {dimension_semantics = "
     "[#tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<parallel>], "
     "iteration_bounds = array<i64: 2, 2>",
     ["scf.for %", "#tpu.dot_dimension_numbers<[1], [1], [0], [0], [0, 0, 1, 0], [], []>",
      "tpu.iota {dimensions = array<i32: 0>}", "arith.cmpi sle", "arith.select",
      "vector.multi_reduction <maximumf>", "scf.yield"], {}),
    ("gather", gather, lambda: (jnp.array([1, 0, 3, 2], i32), jnp.ones((32, 128), f32)),
     "%arg1: memref<4xi32, #tpu.memory_space<smem>>, %arg2: memref<8x128xf32, "
     "#tpu.memory_space<vmem>>",
     ["scalar_prefetch = 1 : i64", "memref.load %arg1[",
      "func.func @transform_0(%arg0: i32, %arg1: memref<4xi32, #tpu.memory_space<smem>>) -> "
      "(i32, i32)"], {}),
    ("aliased", aliased, lambda: (jnp.ones((16, 128), f32),), "iteration_bounds", [], {}),
    ("dynamic_slices", dynamic_slices, lambda: (jnp.ones((32, 128), f32),),
     "attributes {dimension_semantics = [], scalar_prefetch = 0 : i64, scratch_operands = 0 "
     ": i64, tpu.core_type = #tpu.core_type<tc>}",
     ["scf.for %", "arith.index_cast", "vector.load %arg0[%", "tpu.vector_store %arg1[%"], {}),
    ("while_loop", while_loop, lambda: (jnp.ones((8, 128), f32),), "dimension_semantics = []",
     ["scf.while", "scf.condition", "arith.cmpi slt"], {}),
]


@pytest.mark.parametrize("name,f,args,signature,ops,config", _CASES, ids=[c[0] for c in _CASES])
def test_kernels_lower_to_mosaic_as_jax_does(name, f, args, signature, ops, config):
    text, cfg, module = lower(f, *args())
    assert text.count("stablehlo.custom_call @tpu_custom_call(") == 1
    assert 'mhlo.frontend_attributes = {kernel_metadata = "{}"}' in text
    assert cfg.pop("custom_call_config") == {"serialization_format": 1,
                                             "needs_layout_passes": True}
    assert cfg == config
    assert module.startswith("module attributes {stable_mosaic.version = 11 : i64}")
    assert signature in kernel_signature(module)
    for op in ops:
        assert op in module, op


def test_transform_functions_are_the_index_maps():
    _, _, module = lower(matmul, jnp.ones((256, 256), bf16), jnp.ones((256, 256), bf16))
    maps = re.findall(r"func.func @transform_(\d)\(.*?\n(.*?)\n  }", module, re.S)
    returns = [body.strip().splitlines()[-1].strip() for _, body in maps]
    assert returns == ["return %arg0, %arg2 : i32, i32", "return %arg2, %arg1 : i32, i32",
                       "return %arg0, %arg1 : i32, i32"]


def test_custom_call_attributes():
    text, _, _ = lower(aliased, jnp.ones((16, 128), f32))
    assert 'kernel_name = "k"' in text
    assert "output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = " \
        "[], operand_index = 0, operand_tuple_indices = []>]" in text
    assert "operand_layouts = [dense<[1, 0]> : tensor<2xindex>]" in text
    assert "has_side_effect" not in text


def test_compiler_params_and_cost_estimate_in_the_backend_config():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def f(x):
        return pl.pallas_call(
            k, out_shape=jax_sds(x), cost_estimate=pl.CostEstimate(
                flops=10, transcendentals=2, bytes_accessed=64),
            compiler_params=pltpu.CompilerParams(
                vmem_limit_bytes=1 << 20, allow_input_fusion=[True], flags={"xla_a": 3},
                has_side_effects=True, disable_bounds_checks=True))(x)
    text, cfg, module = lower(f, jnp.ones((8, 128), f32))
    assert cfg["custom_call_config"] == {
        "cost_estimate": {"bytes_accessed": 64, "flops": 10, "remote_bytes_transferred": 0,
                          "transcendentals": 2},
        "serialization_format": 1, "needs_layout_passes": True, "allow_input_fusion": [True],
        "disable_bounds_checks": True}
    assert cfg["scoped_memory_configs"] == [{"memory_space": 1, "offset": 0, "size": 1 << 20}]
    assert cfg["flag_configs"] == [{"flag_type": "xla_a", "value": {"integer_value": 3}}]
    assert "has_side_effect = true" in text
    # a grid-free kernel: no grid, windows or transform functions
    assert "iteration_bounds" not in module and "transform_0" not in module


def test_squeezed_scratch_and_smem_memory_spaces():
    def k(x_ref, s_ref, o_ref, acc_ref):
        acc_ref[...] = x_ref[...] * s_ref[0]
        o_ref[...] = acc_ref[...]

    def f(x, s):
        return pl.pallas_call(
            k, out_shape=jax_sds(x), grid=(2,),
            in_specs=[pl.BlockSpec((None, 8, 128), lambda i: (i, 0, 0)),
                      pl.BlockSpec(memory_space=pltpu.SMEM)],
            out_specs=pl.BlockSpec((None, 8, 128), lambda i: (i, 0, 0)),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])(x, s)
    _, _, module = lower(f, jnp.ones((2, 8, 128), f32), jnp.ones((4,), f32))
    sig = kernel_signature(module)
    assert "%arg1: memref<1x8x128xf32, #tpu.memory_space<vmem>>, %arg2: memref<4xf32, " \
        "#tpu.memory_space<smem>>, %arg3: memref<1x8x128xf32, #tpu.memory_space<vmem>>, " \
        "%arg4: memref<8x128xf32, #tpu.memory_space<vmem>>" in sig
    assert "window_bounds = array<i64: 4>, pipeline_mode = #tpu.pipeline_mode<synchronous>" \
        not in sig  # (SMEM: no single-buffering)
    assert "scratch_operands = 1 : i64" in sig
    assert "memref.load %arg2[" in module


def test_pipeline_mode_single_buffered_for_whole_array_blocks():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def f(x):
        spec = pl.BlockSpec((8, 128), lambda i: (0, 0))
        return pl.pallas_call(k, out_shape=jax_sds(x), grid=(2,), in_specs=[spec],
                              out_specs=spec)(x)
    _, _, module = lower(f, jnp.ones((8, 128), f32))
    assert module.count("pipeline_mode = #tpu.pipeline_mode<synchronous>") == 2


def test_elementwise_ops_conversions_and_reductions():
    def k(x_ref, n_ref, o_ref, s_ref):
        x = x_ref[...]
        y = jnp.tanh(x) + plax.nn.sigmoid(x) + plax.lax.rsqrt(jnp.abs(x) + 1.0) + x ** 3
        n = n_ref[...]
        y = jnp.where(n > 2, y, y.T) + plax.lax.rem(n, 3).astype(jnp.float32)
        o_ref[...] = y
        s_ref[...] = jnp.min(x, axis=0, keepdims=True)

    def f(x, n):
        return pl.pallas_call(k, out_shape=(jax_sds(x), jax_sds(x, (1, 128))))(x, n)
    _, _, module = lower(f, jnp.ones((128, 128), f32), jnp.ones((128, 128), i32))
    for op in ["math.tanh", "math.exp", "math.rsqrt", "math.absf", "tpu.transpose",
               "arith.cmpi sgt", "arith.remsi", "arith.sitofp", "arith.select",
               "vector.multi_reduction <minimumf>", "dense<0x7F800000>"]:
        assert op in module, op


@pytest.mark.parametrize("src,dst,op", [
    (jnp.int8, jnp.int4, "arith.trunci"), (jnp.uint4, jnp.int8, "arith.extui"),
    (jnp.int4, jnp.int32, "arith.extsi"), (jnp.uint16, jnp.int8, "arith.trunci")])
def test_integer_casts_by_bit_width(src, dst, op):
    """(int4 and int8 are both one byte to numpy; Mosaic's i4 and i8 differ, as in JAX's
    modules for these casts.)"""
    def k(x_ref, o_ref):
        o_ref[...] = plax.lax.convert_element_type(x_ref[...], dst)

    def f(x):
        return pl.pallas_call(k, out_shape=jax_sds(x, dtype=dst))(x)
    _, _, module = lower(f, plax.ShapeDtypeStruct((128, 256), src))
    assert op in module and "arith.bitcast" not in module


def test_reshaped_references_lower_to_memref_reshape():
    def load(x_ref, y_ref):
        y_ref[...] = x_ref.reshape(5, 128)[...]

    def store(x_ref, y_ref):
        y_ref.reshape(5, 128)[...] = x_ref[...]
    x = np.arange(5 * 128, dtype=np.int32)
    for kernel, src, dst in [(load, (5, 1, 128), (5, 128)), (store, (5, 128), (5, 1, 128))]:
        def f(a, kernel=kernel, dst=dst, interpret=False):
            return pl.pallas_call(kernel, out_shape=jax_sds(a, dst), interpret=interpret)(a)
        _, _, module = lower(f, plax.ShapeDtypeStruct(src, i32))
        # (JAX's module: the whole memref reshaped, then loaded or stored at 0, 0)
        assert re.search(r"tpu.memref_reshape %arg[01] : memref<5x1x128xi32, "
                         r"#tpu.memory_space<vmem>> -> memref<5x128xi32", module)
        out = plax.jit(functools.partial(f, interpret=True))(x.reshape(src))
        np.testing.assert_array_equal(out, x.reshape(dst))


def test_interpret_mode_still_lowers_as_a_program_for_tpu():
    def f(x):
        return pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] + 1),
                              out_shape=jax_sds(x), interpret=True)(x)
    text = plax.jit(f).trace(jnp.ones((8, 128), f32)).lower(
        lowering_platforms=("tpu",)).as_text()
    assert "tpu_custom_call" not in text and "stablehlo.add" in text


def test_unsupported_primitive_raises_lowering_exception():
    def k(x_ref, o_ref):
        o_ref[...] = plax.lax.cumsum(x_ref[...], axis=1)

    def f(x):
        return pl.pallas_call(k, out_shape=jax_sds(x))(x)
    with pytest.raises(pltpu.LoweringException,
                       match=r"Pallas kernel `k`, lowering `cumsum` at .*"
                             r"test_mosaic_lowering.py:\d+: Unimplemented primitive in Pallas "
                             r"TPU lowering for tc: cumsum"):
        lower(f, jnp.ones((8, 128), f32))


def test_dimension_semantics_must_match_the_grid():
    def f(x):
        return pl.pallas_call(
            lambda x_ref, o_ref: None, out_shape=jax_sds(x), grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel"))
        )(x)
    with pytest.raises(pltpu.LoweringException, match="dimension_semantics has 2 entries"):
        lower(f, jnp.ones((16, 128), f32))


def test_value_slices_concatenation_full_reductions_and_smem_outputs():
    def k(x_ref, o_ref, s_ref):
        x = x_ref[...]
        s_ref[0] = jnp.sum(x)
        o_ref[...] = x + x[0, 0] + jnp.concatenate([x[:4], x[4:]], 0)

    def f(x):
        return pl.pallas_call(
            k, out_shape=(jax_sds(x), jax_sds(x, (1,))),
            out_specs=(pl.BlockSpec(memory_space=pltpu.VMEM),
                       pl.BlockSpec(memory_space=pltpu.SMEM)))(x)
    _, _, module = lower(f, jnp.ones((8, 128), f32))
    assert "%arg2: memref<1xf32, #tpu.memory_space<smem>>" in kernel_signature(module)
    for op in ["vector.multi_reduction <add>, %1, %cst [1, 2] : vector<1x8x128xf32> to "
               "vector<1xf32>", "vector.extract %3[0, 0, 0] : f32 from vector<1x1x1xf32>",
               "memref.store %4, %arg2[", "vector.extract_strided_slice %0 {offsets = [4, 0], "
               "sizes = [4, 128], strides = [1, 1]}", "tpu.concatenate"]:
        assert op in module, op


def test_multiple_of_split_and_platform_dependent():
    def k(x_ref, o_ref):
        i = pl.multiple_of(pl.program_id(0) * 8, 8)
        a, b = jnp.split(x_ref[pl.ds(i, 8), :], 2, axis=1)
        y = jnp.concatenate([b, a], axis=1) + plax.lax.erf(a).sum() + jnp.isfinite(b).sum()
        o_ref[...] = plax.lax.platform_dependent(y, tpu=lambda v: v * 2, default=lambda v: -v)

    def f(x):
        return pl.pallas_call(k, out_shape=jax_sds(x, (8, 256)), grid=(2,),
                              in_specs=[pl.BlockSpec((16, 256), lambda i: (0, 0))],
                              out_specs=pl.BlockSpec((8, 256), lambda i: (0, 0)))(x)
    x = np.arange(16 * 256, dtype=np.float32).reshape(16, 256)
    _, _, module = lower(f, x)
    for op in ["tpu.assume_multiple", "vector.extract_strided_slice", "math.erf",
               "tpu.weird", "tpu.concatenate"]:
        assert op in module, op
    assert "arith.subf" not in module  # (the TPU branch, chosen when lowering)
    # interpret mode on the CPU: multiple_of is the value itself, the default branch runs
    out = pl.pallas_call(k, out_shape=jax_sds(x, (8, 256)), grid=(2,), interpret=True,
                         in_specs=[pl.BlockSpec((16, 256), lambda i: (0, 0))],
                         out_specs=pl.BlockSpec((8, 256), lambda i: (0, 0)))(x)
    rows = x[8:16]
    expected = -(np.concatenate([rows[:, 128:], rows[:, :128]], axis=1) + 1024 + 1024)
    np.testing.assert_allclose(np.asarray(out), expected)


def test_strided_slices_and_chained_views():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(0, 8, stride=2), :]
        o_ref[pl.ds(0, 8), :] += x_ref.at[pl.ds(8, 16)][pl.ds(pl.program_id(0), 8), :]

    def f(x):
        spec = pl.BlockSpec((32, 128), lambda i: (0, 0))
        return pl.pallas_call(k, out_shape=jax_sds(x, (8, 128)), grid=(1,), in_specs=[spec],
                              out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)))(x)
    _, _, module = lower(f, jnp.ones((32, 128), f32))
    assert "tpu.strided_load %arg1[%c0, %c0_0] {strides = array<i32: 2, 1>} : " \
        "memref<32x128xf32, #tpu.memory_space<vmem>>, vector<8x128xf32>" in module
    assert "arith.addi %c8_i32, %arg0 : i32" in module  # (the views' offsets composed)


@pytest.mark.parametrize("array,block,match", [
    ((16, 256), (8, 64), "last two dimensions of your block shape are divisible by 8 and 128"),
    ((16, 256), (4, 128), "last two dimensions of your block shape are divisible by 8 and 128"),
    ((3072,), (384,), "requires that rank 1 block shapes"),
])
def test_block_shapes_mosaic_cannot_tile_raise(array, block, match):
    def f(x):
        spec = pl.BlockSpec(block, lambda *i: i)
        grid = tuple(a // b for a, b in zip(array, block))
        return pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2),
                              out_shape=jax_sds(x), grid=grid, in_specs=[spec],
                              out_specs=spec)(x)
    with pytest.raises(ValueError, match=match + r".* Block spec for args\[0\] in pallas_call"):
        lower(f, jnp.ones(array, f32))
    ok = (1024,) if len(array) == 1 else (8, 128)  # (a power of 2 from one tile; a tile)
    lower(lambda x: pl.pallas_call(
        lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]), out_shape=jax_sds(x),
        grid=tuple(a // b for a, b in zip(array, ok)),
        in_specs=[pl.BlockSpec(ok, lambda *i: i)], out_specs=pl.BlockSpec(ok, lambda *i: i))(x),
        jnp.ones(array, f32))


def test_debug_prints_the_kernel_jaxpr_and_the_mosaic_module(capsys):
    def f(x):
        return pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] + 1.0),
                              out_shape=jax_sds(x), debug=True, name="dbg")(x)
    lower(f, jnp.ones((8, 128), f32))
    out = capsys.readouterr().out
    assert "The kernel jaxpr for pallas_call dbg:" in out
    assert "The Mosaic module for pallas_call dbg:" in out
    assert "func.func @dbg(%arg0: memref<8x128xf32, #tpu.memory_space<vmem>>" in out


def test_index_map_reading_a_one_element_prefetch_array():
    def k(n_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + n_ref[0].astype(jnp.float32)

    def f(n, x):
        return pl.pallas_call(k, out_shape=jax_sds(x), grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, n: (jnp.minimum(i, n[0]), 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, n: (i, 0))))(n, x)
    _, _, module = lower(f, jnp.array([1], i32), jnp.ones((16, 128), f32))
    transform = module[module.index("func.func @transform_0"):]
    assert "memref.load %arg1[%c0] : memref<1xi32, #tpu.memory_space<smem>>" in transform
    assert "arith.minsi" in transform


def test_argmax_argmin_and_boolean_scalar_carries():
    def k(x_ref, o_ref, p_ref, s_ref):
        o_ref[...] = jnp.argmax(x_ref[...], axis=1).reshape(1, 8)
        p_ref[...] = jnp.argmin(x_ref[...], axis=0).reshape(1, 128)
        s_ref[0] = plax.lax.while_loop(lambda c: c[1], lambda c: (c[0] + 1, c[0] < 3),
                                       (jnp.int32(0), jnp.bool_(True)))[0]

    def f(x):
        return pl.pallas_call(k, out_shape=(jax_sds(x, (1, 8), i32), jax_sds(x, (1, 128), i32),
                                            jax_sds(x, (1,), i32)),
                              out_specs=(pl.BlockSpec(), pl.BlockSpec(),
                                         pl.BlockSpec(memory_space=pltpu.SMEM)))(x)
    _, _, module = lower(f, jnp.ones((8, 128), f32))
    assert "tpu.reduce_index %0 {axis = 1 : i32, kind = #tpu.reduction_kind<arg_max>} : " \
        "vector<8x128xf32> -> vector<8xi32>" in module
    assert "kind = #tpu.reduction_kind<arg_min>" in module
    assert "%true = arith.constant true" in module and "scf.while" in module


def test_run_state_buffers_and_pow_with_integer_exponent():
    def k(x_ref, e_ref, o_ref):
        def body(refs):
            acc, count = refs
            acc[...] = acc[...] + x_ref[...]
            count[...] = count[...] + 1
        acc, count = pl.run_state(body)((x_ref[...], jnp.int32(0)))
        o_ref[...] = plax.lax.pow(acc, e_ref[...]) + plax.lax.pow(2.0, e_ref[...]) + count

    def f(x, e):
        return pl.pallas_call(k, out_shape=jax_sds(x))(x, e)
    _, _, module = lower(f, jnp.ones((8, 128), f32), jnp.ones((8, 128), jnp.uint32))
    for op in ['"tpu.region"() ({', "memref.alloca() : memref<8x128xf32, "
               "#tpu.memory_space<vmem>>", "memref.alloca() : memref<1xi32, "
               "#tpu.memory_space<smem>>", "tpu.yield", "arith.uitofp", "math.powf",
               "math.exp2"]:
        assert op in module, op


def test_element_blocks_lower_to_element_windows():
    """JAX's module for the same kernel: window_kind = #tpu.element_window<[lows], [highs]>
    and element offsets from the index map; mixed Element/blocked dimensions are refused."""
    def double(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0
    x = np.ones((16, 128), np.float32)
    out = pl.BlockSpec((8, 128), lambda i: (i, 0))

    def call(in_spec):
        return pl.pallas_call(double, out_shape=jax_sds(x), grid=(2,), in_specs=[in_spec],
                              out_specs=out)
    elements = pl.BlockSpec((pl.Element(8, (0, 2)), pl.Element(128)), lambda i: (i * 8, 0))
    _, _, module = lower(call(elements), x)
    assert ("window_bounds = array<i64: 8, 128>, window_kind = "
            "#tpu.element_window<[0, 0], [2, 0]>") in module
    mixed = pl.BlockSpec((pl.Element(8), 128), lambda i: (i * 8, 0))
    with pytest.raises(pltpu.LoweringException, match="All block dimensions must be Elements"):
        lower(call(mixed), x)


@pytest.mark.parametrize("shape, axis", [((8, 128), 0), ((2, 32, 256), 2)])
@pytest.mark.parametrize("mode", [None, "promise_in_bounds"])
def test_take_along_axis_lowers_to_dynamic_gather(shape, axis, mode):
    x_shape = list(shape)
    x_shape[axis] = 8 if axis == len(shape) - 2 else 128

    def k(x_ref, i_ref, o_ref):
        o_ref[...] = jnp.take_along_axis(x_ref[...], i_ref[...], axis, mode=mode)

    def f(x, i, interpret=False):
        return pl.pallas_call(k, out_shape=jax_sds(i), interpret=interpret)(x, i)
    x = np.arange(np.prod(x_shape), dtype=np.int32).reshape(x_shape)
    i = np.random.default_rng(0).integers(0, x_shape[axis], shape).astype(np.int32)
    _, _, module = lower(f, x, i)
    # (as JAX: the index vector's axis reshaped on and off, negatives wrapped but for
    # promise_in_bounds)
    vec = "vector<" + "x".join(map(str, shape)) + "xi32>"
    assert re.search(rf"tpu.dynamic_gather %\w+\[%\w+\] in \[{axis}\] : vector<"
                     rf"{'x'.join(map(str, x_shape))}xi32>, {vec} -> {vec}", module)
    assert ("arith.cmpi slt" in module) == (mode is None)
    out = plax.jit(functools.partial(f, interpret=True))(x, i)
    np.testing.assert_array_equal(out, np.take_along_axis(x, i, axis))


def test_gathers_other_than_take_along_axis_raise():
    def k(x_ref, i_ref, o_ref):
        o_ref[...] = x_ref[...][i_ref[...]]

    def f(x, i):
        return pl.pallas_call(k, out_shape=jax_sds(x))(x, i)
    with pytest.raises(pltpu.LoweringException, match="Only take_along_axis-like gathers"):
        lower(f, jnp.ones((8, 128), f32), jnp.zeros((8,), i32))


@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.uint32])
def test_unsigned_dot_raises_not_implemented_as_jax(dtype):
    def k(a_ref, b_ref, o_ref):
        o_ref[...] = a_ref[...] @ b_ref[...]

    def f(a, b):
        return pl.pallas_call(k, out_shape=jax_sds(a, (a.shape[0], 128)))(a, b)
    with pytest.raises(NotImplementedError,
                       match=r"Unsigned integer dtype uint\d+ is not supported for "
                             r"dot_general \(matmul\)"):
        lower(f, jnp.zeros((32, 256), dtype), jnp.zeros((256, 128), dtype))


def test_float_masks_compare_with_ordered_not_equal():
    def k(x_ref, m_ref, o_ref):
        o_ref[...] = jnp.where(m_ref[...], x_ref[...], jnp.zeros_like(x_ref))

    def f(x, m):
        return pl.pallas_call(k, out_shape=jax_sds(x))(x, m)
    for dtype in (f32, jnp.bfloat16):
        _, _, module = lower(f, jnp.ones((128, 128), dtype), jnp.ones((128, 128), dtype))
        # (JAX's "one" predicate: with "une" these kernels failed on a v5e)
        assert "arith.cmpf one" in module and "une" not in module
