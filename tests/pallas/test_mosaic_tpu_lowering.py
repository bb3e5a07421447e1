"""pltpu's kernel primitives lowered for TPU on the CPU: DMAs, semaphores, roll, bitcast,
packing, the kernel PRNG. Each kernel's Mosaic module (deserialised from the
``tpu_custom_call``) is compared with what JAX 0.10.2 emits for the same kernel: the kernel
function's signature and the sequence of ``tpu`` ops in its body (both checked on real JAX,
``lowering_platforms=("tpu",)``)."""
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax.pallas import mosaic_bindings, tpu_prng
from plax.pallas.semaphores import (DeviceIdType, semaphore_read, semaphore_signal,
                                    semaphore_wait)
from plax.pallas.mosaic_lowering import LoweringException
from plax.experimental.shard_map import shard_map
from plax.sharding import Mesh, PartitionSpec
from tests.pallas.test_mosaic_lowering import kernel_signature, lower

pytestmark = pytest.mark.skipif(not mosaic_bindings.available(),
                                reason="jaxlib without the Mosaic TPU bindings")
f32 = jnp.float32
_NOT_OPS = {"tpu.core_type", "tpu.memory_space", "tpu.dimension_semantics",
            "tpu.dma_semaphore", "tpu.semaphore", "tpu.pipeline_mode"}


def tpu_ops(module: str) -> list:
    """The ``tpu`` ops of the kernel function's body, in order."""
    kernel = module.split("func.func @transform_")[0]
    body = kernel.split(") attributes {", 1)[-1]
    return [op for op in re.findall(r"\b(tpu\.[a-z_0-9]+)", body) if op not in _NOT_OPS]


def sds(shape, dtype=f32):
    return plax.ShapeDtypeStruct(shape, dtype)


def vmem_call(kernel, out=None, scratch=(), **kw):
    """A one-input (8, 128) f32 kernel."""
    def f(x):
        return pl.pallas_call(kernel, out_shape=out or sds((8, 128)),
                              scratch_shapes=list(scratch), **kw)(x)
    return f


def one_block(i):
    return (0, 0)


# --- the kernels ----------------------------------------------------------------------------
def double_buffered_copy(x):
    """HBM rows copied block by block into a 2-slot VMEM buffer over the grid, the next
    block's DMA started before this one's is waited for."""
    n = x.shape[0] // 8

    def k(x_hbm, o_ref, buf, sem):
        i = pl.program_id(0)
        slot = i % 2

        def copy(j, s):
            return pltpu.make_async_copy(x_hbm.at[pl.ds(j * 8, 8)], buf.at[s], sem.at[s])

        @pl.when(i == 0)
        def _():
            copy(0, 0).start()

        @pl.when(i + 1 < n)
        def _():
            copy(i + 1, 1 - slot).start()
        copy(i, slot).wait()
        o_ref[...] = buf[slot] * 2.0
    return pl.pallas_call(k, out_shape=sds(x.shape), grid=(n,),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                          scratch_shapes=[pltpu.VMEM((2, 8, 128), f32),
                                          pltpu.SemaphoreType.DMA((2,))])(x)


def hbm_to_hbm(x):
    def k(x_hbm, o_hbm, sem):
        pltpu.make_async_copy(x_hbm, o_hbm, sem).start()
        pltpu.make_async_copy(x_hbm, o_hbm, sem).wait()
    return vmem_call(k, in_specs=[pl.BlockSpec(memory_space=pltpu.HBM)],
                     out_specs=pl.BlockSpec(memory_space=pltpu.HBM),
                     scratch=[pltpu.SemaphoreType.DMA])(x)


def any_rows_over_grid(x):
    def k(x_hbm, o_hbm, sem):
        rows = pl.ds(pl.program_id(0) * 8, 8)
        c = pltpu.make_async_copy(x_hbm.at[rows, pl.ds(0, 128)], o_hbm.at[rows], sem)
        c.start()
        c.wait()
    return pl.pallas_call(k, out_shape=sds((16, 128)), grid=(2,),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          scratch_shapes=[pltpu.SemaphoreType.DMA])(x)


def semaphores(x):
    def k(x_ref, o_ref, sem):
        semaphore_signal(sem.at[1], 2)
        semaphore_wait(sem.at[1], 2)
        o_ref[...] = x_ref[...] + semaphore_read(sem.at[0]).astype(f32)
    return vmem_call(k, scratch=[pltpu.SemaphoreType.REGULAR((2,))])(x)


def scalar_semaphore(x):
    def k(x_ref, o_ref, sem):
        semaphore_signal(sem)
        semaphore_wait(sem)
        o_ref[...] = x_ref[...]
    return vmem_call(k, scratch=[pltpu.SemaphoreType.REGULAR])(x)


def rolls(x):
    def k(x_ref, o_ref):
        o_ref[...] = pltpu.roll(x_ref[...], 3, 1) + pltpu.roll(x_ref[...], pl.program_id(0), 0)
    spec = pl.BlockSpec((8, 128), one_block)
    return vmem_call(k, grid=(1,), in_specs=[spec], out_specs=spec)(x)


def strided_roll(x):
    def k(x_ref, o_ref):
        o_ref[...] = pltpu.roll(x_ref[...], 3, 1, stride=1, stride_axis=0)
    return vmem_call(k)(x)


def bitcast_same_width(x):
    def k(x_ref, o_ref):
        o_ref[...] = pltpu.bitcast(x_ref[...], jnp.int32)
    return vmem_call(k, out=sds((8, 128), jnp.int32))(x)


def bitcast_to_bf16(x):
    def k(x_ref, o_ref):
        o_ref[...] = pltpu.bitcast(x_ref[...], jnp.bfloat16)
    return vmem_call(k, out=sds((16, 128), jnp.bfloat16))(x)


def prng(x):
    def k(x_ref, o_ref):
        pltpu.prng_seed(3, pl.program_id(0))
        o_ref[...] = x_ref[...] + pltpu.prng_random_bits((8, 128)).astype(f32)
    spec = pl.BlockSpec((8, 128), one_block)
    return vmem_call(k, grid=(2,), in_specs=[spec], out_specs=spec)(x)


def touch(x):
    def k(x_ref, o_ref):
        pltpu.touch(x_ref)
        o_ref[...] = x_ref[...]
    return vmem_call(k)(x)


def pack_unpack(x):
    def k(x_ref, o_ref):
        p = pltpu.pack_elementwise([x_ref[...], x_ref[...]], packed_dtype=jnp.bfloat16)
        o_ref[...] = pltpu.unpack_elementwise(p, index=1, packed_dtype=jnp.bfloat16,
                                              unpacked_dtype=f32)
    return vmem_call(k)(x)


def stochastic_round(x):
    def k(x_ref, o_ref):
        bits = plax.lax.bitcast_convert_type(pltpu.prng_random_bits((8, 128)), jnp.uint32)
        o_ref[...] = pltpu.stochastic_round(x_ref[...], bits,
                                            target_dtype=jnp.bfloat16).astype(f32)
    return vmem_call(k)(x)


_SLICE_SQUEEZE = ["tpu.memref_slice", "tpu.memref_squeeze"]
_VMEM = "#tpu.memory_space<vmem>"
_X8 = f"memref<8x128xf32, {_VMEM}>"

# (name, function, input shape, the kernel's signature (as JAX writes it), its tpu ops (in
#  JAX's order, the index math aside), lines of the module (SSA names as %_))
_CASES = [
    ("double_buffered_copy", double_buffered_copy, (32, 128),
     "func.func @k(%arg0: i32, %arg1: memref<32x128xf32, #tpu.memory_space<any>>, %arg2: "
     f"{_X8}, %arg3: memref<2x8x128xf32, {_VMEM}>, %arg4: memref<2x!tpu.dma_semaphore, "
     "#tpu.memory_space<semaphore_mem>>) attributes {dimension_semantics = "
     "[#tpu.dimension_semantics<arbitrary>], iteration_bounds = array<i64: 4>, "
     "scalar_prefetch = 0 : i64, scratch_operands = 2 : i64, tpu.core_type = "
     "#tpu.core_type<tc>, window_params = [{}, {transform_indices = @transform_1, "
     "window_bounds = array<i64: 8, 128>}]}",
     (_SLICE_SQUEEZE * 2 + ["tpu.memref_slice", "tpu.enqueue_dma"]) * 2
     + _SLICE_SQUEEZE * 2 + ["tpu.memref_slice", "tpu.wait_dma2", "tpu.vector_store"],
     ["%_ = tpu.memref_slice %arg4[%_] : memref<2x!tpu.dma_semaphore, "
      "#tpu.memory_space<semaphore_mem>> -> memref<1x!tpu.dma_semaphore, "
      "#tpu.memory_space<semaphore_mem>>",
      "%_ = tpu.memref_slice %arg1[%_, %_] : memref<32x128xf32, #tpu.memory_space<any>> -> "
      "memref<8x128xf32, #tpu.memory_space<any>>",
      f"%_ = tpu.memref_squeeze %_ : memref<1x8x128xf32, {_VMEM}> -> {_X8}",
      "tpu.enqueue_dma source(%_ : memref<8x128xf32, #tpu.memory_space<any>>) target(%_ : "
      f"{_X8}) target_semaphore(%_ : memref<!tpu.dma_semaphore, "
      "#tpu.memory_space<semaphore_mem>>)",
      "tpu.wait_dma2 semaphore(%_ : memref<!tpu.dma_semaphore, "
      "#tpu.memory_space<semaphore_mem>>) src(%_ : memref<8x128xf32, "
      f"#tpu.memory_space<any>>) dst(%_ : {_X8})"]),
    ("hbm_to_hbm", hbm_to_hbm, (8, 128),
     "func.func @k(%arg0: memref<8x128xf32, #tpu.memory_space<hbm>>, %arg1: "
     "memref<8x128xf32, #tpu.memory_space<hbm>>, %arg2: memref<!tpu.dma_semaphore, "
     "#tpu.memory_space<semaphore_mem>>) attributes {dimension_semantics = [], "
     "scalar_prefetch = 0 : i64, scratch_operands = 1 : i64",
     ["tpu.enqueue_dma", "tpu.wait_dma2"],
     ["tpu.enqueue_dma source(%arg0 : memref<8x128xf32, #tpu.memory_space<hbm>>) "
      "target(%arg1 : memref<8x128xf32, #tpu.memory_space<hbm>>) target_semaphore(%arg2 : "
      "memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>)"]),
    ("any_rows_over_grid", any_rows_over_grid, (16, 128),
     "func.func @k(%arg0: i32, %arg1: memref<16x128xf32, #tpu.memory_space<any>>, %arg2: "
     "memref<16x128xf32, #tpu.memory_space<any>>, %arg3: memref<!tpu.dma_semaphore, "
     "#tpu.memory_space<semaphore_mem>>) attributes {dimension_semantics = "
     "[#tpu.dimension_semantics<arbitrary>], iteration_bounds = array<i64: 2>, "
     "scalar_prefetch = 0 : i64, scratch_operands = 1 : i64, tpu.core_type = "
     "#tpu.core_type<tc>, window_params = [{}, {}]}",
     ["tpu.memref_slice", "tpu.memref_slice", "tpu.enqueue_dma"] * 1
     + ["tpu.memref_slice", "tpu.memref_slice", "tpu.wait_dma2"], []),
    ("semaphores", semaphores, (8, 128),
     "%arg2: memref<2x!tpu.semaphore, #tpu.memory_space<semaphore_mem>>) attributes",
     _SLICE_SQUEEZE + ["tpu.sem_signal"] + _SLICE_SQUEEZE + ["tpu.sem_wait"] + _SLICE_SQUEEZE
     + ["tpu.sem_read", "tpu.vector_store"],
     ["tpu.sem_signal %_, %_ : memref<!tpu.semaphore, #tpu.memory_space<semaphore_mem>>",
      "tpu.sem_wait %_, %_ : memref<!tpu.semaphore, #tpu.memory_space<semaphore_mem>>",
      "%_ = tpu.sem_read %_ : memref<!tpu.semaphore, #tpu.memory_space<semaphore_mem>> -> "
      "i32"]),
    ("scalar_semaphore", scalar_semaphore, (8, 128),
     "%arg2: memref<!tpu.semaphore, #tpu.memory_space<semaphore_mem>>) attributes",
     ["tpu.sem_signal", "tpu.sem_wait", "tpu.vector_store"], []),
    ("rolls", rolls, (8, 128), "func.func @k(%arg0: i32, %arg1:",
     ["tpu.dynamic_rotate", "tpu.dynamic_rotate", "tpu.vector_store"],
     ["%_ = tpu.dynamic_rotate %_ by %_ dim 1 : vector<8x128xf32>, i32 -> "
      "vector<8x128xf32>",
      "%_ = tpu.dynamic_rotate %_ by %arg0 dim 0 : vector<8x128xf32>, i32 -> "
      "vector<8x128xf32>"]),
    ("strided_roll", strided_roll, (8, 128), "func.func @k(%arg0:",
     ["tpu.dynamic_rotate", "tpu.vector_store"],
     ["%_ = tpu.dynamic_rotate %_ by %_ dim 1 {stride = 1 : si32, stride_dimension = 0 : "
      "si32} : vector<8x128xf32>, i32 -> vector<8x128xf32>"]),
    ("bitcast_same_width", bitcast_same_width, (8, 128),
     f"%arg1: memref<8x128xi32, {_VMEM}>", ["tpu.bitcast", "tpu.vector_store"],
     ["%_ = tpu.bitcast %_ : vector<8x128xf32> -> vector<8x128xi32>"]),
    ("bitcast_to_bf16", bitcast_to_bf16, (8, 128),
     f"%arg1: memref<16x128xbf16, {_VMEM}>", ["tpu.bitcast", "tpu.vector_store"],
     ["%_ = tpu.bitcast %_ : vector<8x128xf32> -> vector<16x128xbf16>"]),
    ("prng", prng, (8, 128), "func.func @k(%arg0: i32,",
     ["tpu.prng_set_seed_32", "tpu.prng_random_bits", "tpu.vector_store"],
     ['"tpu.prng_set_seed_32"(%_, %arg0) : (i32, i32) -> ()',
      '%_ = "tpu.prng_random_bits"() : () -> vector<8x128xi32>']),
    ("touch", touch, (8, 128), "func.func @k(%arg0:", ["tpu.vector_store"], []),
    ("pack_unpack", pack_unpack, (8, 128), "func.func @k(%arg0:",
     ["tpu.pack_elementwise", "tpu.unpack_elementwise", "tpu.vector_store"],
     ["%_ = tpu.pack_elementwise %_, %_ {target_type = bf16} : vector<8x128xf32>, "
      "vector<8x128xf32> -> vector<8x128xi32>",
      "%_ = tpu.unpack_elementwise %_, 1 {source_type = bf16} : vector<8x128xi32> -> "
      "vector<8x128xf32>"]),
    # (JAX also puts a tpu.bitcast i32 -> i32 for the bitcast_convert_type to uint32)
    ("stochastic_round", stochastic_round, (8, 128), "func.func @k(%arg0:",
     ["tpu.prng_random_bits", "tpu.stochastic_convert", "tpu.vector_store"],
     ["%_ = tpu.stochastic_convert %_, %_ : vector<8x128xf32>, vector<8x128xi32> -> "
      "vector<8x128xbf16>"]),
]


def _anonymous(module: str) -> str:
    return re.sub(r"%(?!arg)[\w#]+", "%_", module)


@pytest.mark.parametrize("name,f,shape,signature,ops,lines", _CASES,
                         ids=[c[0] for c in _CASES])
def test_tpu_primitives_lower_as_jax_does(name, f, shape, signature, ops, lines):
    text, cfg, module = lower(f, jnp.zeros(shape, f32))
    assert text.count("stablehlo.custom_call @tpu_custom_call(") == 1
    assert signature in kernel_signature(module)
    assert tpu_ops(module) == ops
    flat = _anonymous(module)
    for line in lines:
        assert line in flat, line


def test_dma_views_slice_at_the_dynamic_starts():
    _, _, module = lower(double_buffered_copy, jnp.zeros((32, 128), f32))
    # the next block's rows start at (i + 1) * 8, an i32 computed from the grid index
    starts = re.findall(r"tpu.memref_slice %arg1\[(%\w+), (%\w+)\]", module)
    assert len(starts) == 3
    assert any(re.search(rf"{re.escape(a)} = arith.muli", module) for a, _ in starts)


def _lowering_error(kernel, scratch, match, **kw):
    with pytest.raises(LoweringException, match=match):
        lower(vmem_call(kernel, scratch=scratch, **kw), jnp.zeros((8, 128), f32))


def test_remote_copies_and_signals_are_refused_with_the_fix():
    def remote_copy(x_ref, o_ref, send, recv):
        pltpu.make_async_remote_copy(x_ref, o_ref, send, recv, device_id=1,
                                     device_id_type=DeviceIdType.LOGICAL).start()
    _lowering_error(remote_copy, [pltpu.SemaphoreType.DMA] * 2,
                    r"dma_start.*remote DMA.*without shard_map.*interpret=True")

    def remote_signal(x_ref, o_ref, sem):
        semaphore_signal(sem, 1, device_id=1, device_id_type=DeviceIdType.LOGICAL)
    _lowering_error(remote_signal, [pltpu.SemaphoreType.REGULAR],
                    r"semaphore_signal.*semaphore signal on another device")


def remote_ring(mesh_shape, device_id):
    """A kernel under shard_map sending its block to ``device_id(axis_index)`` and signalling
    it there (JAX's ring-permute pattern); its lowering for TPU."""
    names = ("x", "y")[:len(mesh_shape)]
    n = int(np.prod(mesh_shape))
    if plax.device_count() < n:
        pytest.skip(f"needs {n} devices")

    def k(x_ref, o_ref, send, recv, sig):
        target = device_id(plax.lax.axis_index("x"))
        copy = pltpu.make_async_remote_copy(x_ref, o_ref, send, recv, device_id=target)
        copy.start()
        semaphore_signal(sig, 1, device_id=target)
        copy.wait()

    def per_device(x):
        return pl.pallas_call(k, out_shape=sds(x.shape),
                              in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                              out_specs=pl.BlockSpec(memory_space=pl.ANY),
                              scratch_shapes=[pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA,
                                              pltpu.SemaphoreType.REGULAR])(x)
    mesh = Mesh(np.array(plax.devices()[:n]).reshape(mesh_shape), names)
    f = shard_map(per_device, mesh=mesh, in_specs=PartitionSpec(names),
                  out_specs=PartitionSpec(names), check_rep=False)
    return lower(f, jnp.zeros((8 * n, 128), f32))


def test_remote_copies_and_signals_under_shard_map_lower_as_jax_does():
    text, cfg, module = remote_ring((4,), lambda i: (plax.lax.rem(i + 1, 4),))
    # (JAX: the position along x from tpu.device_id; the copy's and signal's device ids)
    assert tpu_ops(module) == ["tpu.device_id", "tpu.enqueue_dma", "tpu.sem_signal",
                               "tpu.wait_dma2", "tpu.wait_dma2"]
    assert re.search(r"tpu.enqueue_dma source\(%arg0 .* source_semaphore\(%arg2 .* "
                     r"target_semaphore\(%arg3 .* device_id\(%\w+\)", module)
    assert re.search(r"tpu.sem_signal %arg4, %\w+ device_id %\w+", module)
    # the send's wait: operands swapped, device and core 0 (JAX's form)
    assert re.search(r"wait_dma2 semaphore\(%arg2 .* src\(%arg1 .* dst\(%arg0 .* "
                     r"device_id\(%c0_i32\) core_id\(%c0_i32\)", module)
    assert cfg["custom_call_config"]["has_communication"] is True
    assert 'kernel_metadata = "{\\0A\\22mesh_axes\\22:\\22[\\5C\\22x\\5C\\22]' in text


def test_mesh_coordinates_become_logical_device_ids():
    # a dict names some axes (the others: this device's position), weighted by the strides
    _, _, module = remote_ring((2, 2), lambda i: {"x": plax.lax.rem(i + 1, 2)})
    assert "arith.muli" in module and "arith.divsi" in module
    assert re.search(r"%c2_i32 = arith.constant 2", module)


def test_unsupported_dma_and_wait_forms_raise_jax_errors():
    def add_copy(x_ref, o_ref, sem):
        pltpu.async_copy(x_ref, o_ref, sem, add=True).wait()
    _lowering_error(add_copy, [pltpu.SemaphoreType.DMA], "DMA with add=True is not supported")

    def bool_copy(x_ref, o_ref, m_ref, n_ref, sem):
        pltpu.make_async_copy(m_ref, n_ref, sem).start()
    _lowering_error(bool_copy, [pltpu.VMEM((8, 128), jnp.bool_),
                                pltpu.VMEM((8, 128), jnp.bool_), pltpu.SemaphoreType.DMA],
                    "DMAs with bool dtypes are not supported")

    def no_decrement(x_ref, o_ref, sem):
        semaphore_wait(sem, 1, decrement=False)
    _lowering_error(no_decrement, [pltpu.SemaphoreType.REGULAR],
                    "Non-decrementing wait is not supported")

    def strided(x_ref, o_ref, buf, sem):
        pltpu.make_async_copy(x_ref.at[pl.ds(0, 4, stride=2)], buf, sem).start()
    _lowering_error(strided, [pltpu.VMEM((4, 128), f32), pltpu.SemaphoreType.DMA],
                    "strided view of a reference")


def test_prng_draws_in_a_loop_thread_no_state_on_the_chip():
    def k(x_ref, o_ref):
        pltpu.prng_seed(7)

        def body(i, acc):
            return acc + pltpu.prng_random_bits((8, 128)).astype(f32)
        o_ref[...] = plax.lax.fori_loop(0, 3, body, x_ref[...])
    _, _, module = lower(vmem_call(k), jnp.zeros((8, 128), f32))
    assert tpu_ops(module) == ["tpu.prng_set_seed_32", "tpu.prng_random_bits",
                               "tpu.vector_store"]
    assert "scf.for" in module


def test_prng_interpret_rules_are_the_threefry_chain():
    """Off the chip the primitives compute what pltpu's PRNG computed before them: the key
    of the seed, split at each draw (interpret-mode values unchanged; pltpu registers the
    rules)."""
    state = tpu_prng.prng_seed_p.bind(np.uint32(5))
    state, bits = tpu_prng.prng_random_bits_p.bind(state, shape=(8, 128))
    key, use = plax.random.split(plax.random.PRNGKey(np.uint32(5)))
    np.testing.assert_array_equal(np.asarray(state), np.asarray(key))
    want = plax.random.bits(use, (8, 128), jnp.uint32)
    np.testing.assert_array_equal(np.asarray(bits), np.asarray(want).view(np.int32))


def pipelined_matmul(x, y, b=128):
    """emit_pipeline over HBM references (tpu_pallas_pipeline_test's pattern): blocks of x
    and y, an output block accumulated across the k axis."""
    m, kk = x.shape
    n = y.shape[1]

    def inner(x_ref, y_ref, z_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            z_ref[...] = jnp.zeros_like(z_ref)
        z_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=f32)

    def k(x_hbm, y_hbm, o_hbm):
        pltpu.emit_pipeline(
            inner, grid=(m // b, n // b, kk // b),
            in_specs=[pl.BlockSpec((b, b), lambda i, j, k: (i, k)),
                      pl.BlockSpec((b, b), lambda i, j, k: (k, j))],
            out_specs=pl.BlockSpec((b, b), lambda i, j, k: (i, j)))(x_hbm, y_hbm, o_hbm)
    return pl.pallas_call(k, out_shape=sds((m, n)),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)] * 2,
                          out_specs=pl.BlockSpec(memory_space=pl.ANY))(x, y)


def test_emit_pipeline_matmul_over_hbm_lowers_with_scoped_vmem_and_dmas():
    x = jnp.zeros((256, 256), f32)
    _, _, module = lower(pipelined_matmul, x, x)
    assert "func.func @k(%arg0: memref<256x256xf32, #tpu.memory_space<any>>, %arg1: " \
        "memref<256x256xf32, #tpu.memory_space<any>>, %arg2: memref<256x256xf32, " \
        "#tpu.memory_space<any>>) attributes {dimension_semantics = []" in module
    ops = tpu_ops(module)
    # per step: two blocks in and one out through scoped VMEM buffers, the body in a region
    assert ops.count("tpu.enqueue_dma") == ops.count("tpu.wait_dma2") == 3
    assert ops.count("tpu.sem_alloc") == 3 and ops.count("tpu.region") == 4
    assert ops.count("tpu.memref_slice") == 3 and "tpu.matmul" in ops
    flat = _anonymous(module)
    assert "%_ = memref.alloca() : memref<128x128xf32, #tpu.memory_space<vmem>>" in flat
    assert "%_ = tpu.memref_slice %arg2[%_, %_] : memref<256x256xf32, " \
        "#tpu.memory_space<any>> -> memref<128x128xf32, #tpu.memory_space<any>>" in flat
    assert "scf.for" in module and "scf.if" in module


def test_scalars_of_hbm_references_are_refused():
    def k(x_hbm, o_ref):
        o_ref[...] = jnp.full((8, 128), x_hbm[0, 0])
    f = vmem_call(k, in_specs=[pl.BlockSpec(memory_space=pl.ANY)])
    with pytest.raises(LoweringException, match="a scalar of a reference in ANY/HBM memory"):
        lower(f, jnp.zeros((8, 128), f32))


def test_run_state_references_are_scoped_vmem_and_smem_buffers():
    from plax.higher_order.run_state import run_state

    def k(x_ref, o_ref):
        def body(refs):
            block, count = refs
            block[...] = block[...] * 2.0
            count[...] = count[...] + 1
        block, count = run_state(body)((x_ref[...], jnp.int32(3)))
        o_ref[...] = block + count.astype(f32)
    _, _, module = lower(vmem_call(k), jnp.zeros((8, 128), f32))
    flat = _anonymous(module)
    assert "%_ = memref.alloca() : memref<8x128xf32, #tpu.memory_space<vmem>>" in flat
    assert "%_ = memref.alloca() : memref<1xi32, #tpu.memory_space<smem>>" in flat
    assert "tpu.yield %_, %_ : vector<8x128xf32>, i32" in flat
    assert ") : () -> (vector<8x128xf32>, i32)" in flat



def hbm_to_smem_through_run_scoped(x, interpret=False):
    """An HBM input copied by DMA into an SMEM buffer on a DMA semaphore, both scoped; the
    scope returns a value."""
    def k(x_hbm, o_ref):
        def body(buf, sem):
            pltpu.async_copy(x_hbm, buf, sem).wait()
            o_ref[...] = jnp.full((8, 128), buf[0, 0])
            return buf[0, 1]
        o_ref[0, 0] = pl.run_scoped(body, pltpu.SMEM((8, 128), f32), pltpu.SemaphoreType.DMA)
    return pl.pallas_call(k, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_shape=sds((8, 128)), interpret=interpret)(x)


def test_run_scoped_buffers_and_semaphores_are_one_region():
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    want = np.full((8, 128), x[0, 0])
    want[0, 0] = x[0, 1]
    np.testing.assert_array_equal(hbm_to_smem_through_run_scoped(x, interpret=True), want)
    _, _, module = lower(hbm_to_smem_through_run_scoped, x)
    flat = _anonymous(module)
    # (as JAX 0.10.2: the buffers allocated in one region, never initialised, and the scope's
    # result carried out through a scalar buffer of its own)
    assert tpu_ops(module)[:5] == ["tpu.region", "tpu.sem_alloc", "tpu.enqueue_dma",
                                   "tpu.wait_dma2", "tpu.vector_store"]
    assert "%_ = memref.alloca() : memref<8x128xf32, #tpu.memory_space<smem>>" in flat
    assert "%_ = memref.alloca() : memref<1xf32, #tpu.memory_space<smem>>" in flat
    assert flat.count("memref.store") == 2  # (the result into its buffer, then o_ref[0, 0])


def test_run_time_grid_sizes_are_dynamic_iteration_bounds():
    def k(o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)
        o_ref[...] += pl.num_programs(0).astype(f32)

    def f(steps, interpret=False):
        return pl.pallas_call(k, grid=(steps * 2,), out_specs=pl.BlockSpec((8, 128), one_block),
                              out_shape=sds((8, 128)), interpret=interpret)()
    np.testing.assert_array_equal(plax.jit(lambda s: f(s, True))(jnp.int32(3)),
                                  np.full((8, 128), 36.0, np.float32))
    text, _, module = lower(f, jnp.int32(3))
    assert "iteration_bounds = array<i64: -9223372036854775808>" in module
    assert tpu_ops(module).count("tpu.iteration_bound") == 1
    assert "func.func @k(%arg0: i32, %arg1: memref<8x128xf32" in module
    # (the run-time size is the custom call's first operand)
    assert re.search(r"custom_call @tpu_custom_call\(%\w+\) ", text)


def _printing_kernel(*prints):
    """A kernel that prints (fmt, which) before adding one: which picks scalars of the SMEM
    operand (ints), or "vector" (the VMEM block)."""
    def kernel(x_ref, s_ref, o_ref):
        for fmt, which in prints:
            values = [x_ref[...]] if which == "vector" else [s_ref[i] for i in which]
            pl.debug_print(fmt, *values)
        o_ref[...] = x_ref[...] + 1
    specs = [pl.BlockSpec(memory_space=pltpu.VMEM), pl.BlockSpec(memory_space=pltpu.SMEM)]
    return pl.pallas_call(kernel, out_shape=sds((8, 128)), in_specs=specs)


def test_debug_print_lowers_to_mosaic_log_ops(capsys):
    x, s = jnp.ones((8, 128)), jnp.arange(2, dtype=jnp.int32)
    module = lower(_printing_kernel(("i={} j={}", (0, 1)), ("plain", (0,)),
                                    ("block: {}", "vector")), x, s)[2]
    # (JAX 0.10.2's module for this kernel has these lines)
    assert re.search(r'tpu.log "i=\$0 j=\$1" \{formatted = true\} : \[%\d+, %\d+\] : i32, i32',
                     module)
    assert re.search(r'tpu.log "plain" : \[%\d+\] : i32', module)
    assert re.search(r'tpu.log_buffer "block: " \{shape = array<i64: 8, 128>\} : %alloca',
                     module)
    assert tpu_ops(module) == ["tpu.log", "tpu.log", "tpu.region", "tpu.vector_store",
                               "tpu.log_buffer", "tpu.yield", "tpu.vector_store"]
    # in interpret mode it prints as jax.debug.print does
    def doubling(x_ref, o_ref):
        pl.debug_print("x00={}", x_ref[0, 0])
        o_ref[...] = x_ref[...] * 2
    out = pl.pallas_call(doubling, out_shape=sds((8, 128)), interpret=True)(x)
    plax.effects_barrier()
    np.testing.assert_array_equal(out, 2 * np.ones((8, 128)))
    assert capsys.readouterr().out == "x00=1.0\n"


@pytest.mark.parametrize("prints, match", [
    ((("x={}", "f32"),), "TypeError: All arguments must be 32-bit integers when using placeh"),
    ((("{0}", (0,)),), "ValueError: The format string should not reference arguments by pos"),
    ((("{} {}", (0,)),), "TypeError: The format string expects 2 arguments, but got 1"),
    ((("block", "vector"),), "ValueError: For vector input, the format string must end with"),
    ((("two {}", (0,)), ("{}", "f32-and-vector")), "must be all scalars or a single vector"),
])
def test_debug_print_formats_a_tpu_cannot_print_are_refused(prints, match):
    def kernel(x_ref, s_ref, o_ref):
        for fmt, which in prints:
            values = ([x_ref[...]] if which == "vector" else [x_ref[0, 0]] if which == "f32"
                      else [x_ref[0, 0], x_ref[...]] if which == "f32-and-vector"
                      else [s_ref[i] for i in which])
            pl.debug_print(fmt, *values)
        o_ref[...] = x_ref[...]
    specs = [pl.BlockSpec(memory_space=pltpu.VMEM), pl.BlockSpec(memory_space=pltpu.SMEM)]
    f = pl.pallas_call(kernel, out_shape=sds((8, 128)), in_specs=specs)
    with pytest.raises(LoweringException, match=match):
        lower(f, jnp.ones((8, 128)), jnp.arange(2, dtype=jnp.int32))


@pytest.mark.parametrize("poison, expected", [
    (True, ["0x7FC00000", "-2147483648", "-128", "true"]),  # NaN, the least ints, True
    (False, ["0.000000e+00", "0", "0", "false"]),
])
def test_unwritten_buffers_read_as_poison_when_asked(poison, expected):
    # jax_pallas_poison_buffers: a kernel's fresh buffers (empty_ref, run_scoped) hold poison
    def kernel(f32_ref, i32_ref, i8_ref, bool_ref):
        for out in (f32_ref, i32_ref, i8_ref, bool_ref):
            scratch = plax.empty_ref(plax.ShapeDtypeStruct(out.shape, out.dtype),
                                     memory_space=pltpu.VMEM)
            out[...] = scratch[...]
    f = pl.pallas_call(kernel, out_shape=tuple(sds((8, 128), t) for t in (
        jnp.float32, jnp.int32, jnp.int8, jnp.bool_)),
        out_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)] * 4)
    with plax.config.override("jax_pallas_poison_buffers", poison):
        module = lower(f)[2]
    stored = re.findall(r"tpu.vector_store %arg(\d)\[[^\]]*\], (%\w+)", module)
    constants = dict(re.findall(r"(%\w+) = arith.constant dense<([^>]+)>", module))
    constants.update(re.findall(r"(%\w+) = arith.extui (%\w+)", module))  # (bool as i32)
    values = [constants[name] for _, name in sorted(stored)]
    assert [constants.get(v, v) for v in values] == expected


def test_a_kernels_metadata_is_its_custom_calls_kernel_metadata():
    def add(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]
    x = jnp.ones((8, 128))
    for metadata, written in [
            ({"foo": "bar"}, '{\\0A\\22foo\\22:\\22bar\\22\\0A}'),
            ({"b": "2", "a": "1"}, '{\\0A\\22a\\22:\\221\\22,\\0A\\22b\\22:\\222\\22\\0A}')]:
        f = pl.pallas_call(add, out_shape=sds((8, 128)), metadata=metadata)
        text = lower(f, x, x)[0]
        # (JAX's compact JSON, keys sorted, kept through to the compiled HLO's attributes)
        assert f'kernel_metadata = "{written}"' in text


def test_delay_pauses_a_tpu_kernel_and_nothing_else():
    def kernel(x_ref, o_ref):
        pl.delay(100)
        o_ref[...] = x_ref[...] * 2
    x = jnp.ones((8, 128))
    module = lower(pl.pallas_call(kernel, out_shape=sds((8, 128))), x)[2]
    assert re.search(r"tpu.delay %\w+\n", module) and tpu_ops(module)[0] == "tpu.delay"
    out = pl.pallas_call(kernel, out_shape=sds((8, 128)), interpret=True)(x)
    np.testing.assert_array_equal(out, 2 * np.ones((8, 128)))
    with pytest.raises(ValueError, match="delay takes an integer scalar of nanoseconds"):
        pl.pallas_call(lambda x_ref, o_ref: pl.delay(x_ref[0, 0]), out_shape=sds((8, 128)),
                       interpret=True)(x)
