"""pltpu.emit_pipeline's less common forms (references already in VMEM, ...) in interpret
mode against numpy, and lowered for TPU on the CPU."""
import functools

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax.pallas import mosaic_bindings

needs_mosaic = pytest.mark.skipif(not mosaic_bindings.available(),
                                  reason="jaxlib without the Mosaic TPU bindings")


def _sds(shape, dtype=jnp.float32):
    return plax.ShapeDtypeStruct(shape, dtype)


def _lower(f, *args):
    from tests.pallas.test_mosaic_lowering import lower
    return lower(f, *args)[2]


def _vmem_window_copy(interpret):
    """A pipeline over a VMEM scratch buffer whose one block is the whole buffer."""
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

    def kernel(x_hbm, o_hbm):
        @functools.partial(pl.run_scoped, x_vmem=pltpu.VMEM((8, 512), jnp.int32),
                           o_vmem=pltpu.VMEM((8, 512), jnp.int32))
        def _(x_vmem, o_vmem):
            pltpu.sync_copy(x_hbm, x_vmem)
            spec = pl.BlockSpec((8, 512), lambda i: (0, 0), memory_space=pltpu.VMEM)
            pltpu.emit_pipeline(body, grid=(4,), in_specs=spec, out_specs=spec)(x_vmem, o_vmem)
            pltpu.sync_copy(o_vmem, o_hbm)
    return pl.pallas_call(kernel, out_shape=_sds((8, 512), jnp.int32), interpret=interpret)


def test_pipeline_over_vmem_buffers_with_a_static_window():
    x = np.arange(8 * 512, dtype=np.int32).reshape(8, 512)
    np.testing.assert_array_equal(_vmem_window_copy(True)(x), x + 1)


@needs_mosaic
def test_pipeline_over_vmem_buffers_lowers_without_dynamic_slices():
    # the block indices are static, so the window is a static slice of the buffer
    module = _lower(_vmem_window_copy(False), jnp.zeros((8, 512), jnp.int32))
    assert "scf.for" in module and "vector.load" in module
    assert "tpu.dynamic" not in module


# --- sharing the grid among cores (core_axis / core_axis_name) -----------------------------
def _shared_pipeline(grid, semantics, cores, interpret=True):
    """Each of ``cores`` programs of the kernel's grid runs its share of the pipeline's grid;
    a block of the output is 2 x + 1000 * (the pipeline's num_programs(0) on its core)."""
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2 + jnp.float32(1000) * pl.num_programs(0)

    def kernel(x_hbm, o_hbm):
        spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
        pltpu.emit_pipeline(body, grid=grid, in_specs=[spec], out_specs=spec, core_axis=0,
                            dimension_semantics=semantics)(x_hbm, o_hbm)
    any_spec = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(kernel, out_shape=_sds((grid[0] * 8, grid[1] * 128)),
                          grid=(cores,), in_specs=[any_spec], out_specs=any_spec,
                          interpret=interpret)


P, A = pltpu.PARALLEL, pltpu.ARBITRARY


@pytest.mark.parametrize("grid, semantics, cores, programs", [
    ((4, 3), (P, A), 2, [2] * 4),            # 4 rows of blocks split evenly
    ((5, 3), (P, A), 2, [3, 3, 3, 2, 2]),    # core 0 takes the extra row
    ((5, 3), (P, A), 3, [2, 2, 2, 2, 1]),
    ((5, 7), (P, P), 2, [5] * 5),            # the largest parallel dimension (7) is split
    ((2, 4), (A, P), 2, [2, 2]),             # the only parallel dimension, divisible
])
def test_core_axis_splits_a_parallel_dimension(grid, semantics, cores, programs):
    x = np.arange(grid[0] * 8 * grid[1] * 128, dtype=np.float32).reshape(grid[0] * 8, -1)
    out = np.asarray(_shared_pipeline(grid, semantics, cores)(x))
    # every block is written once, by the core that owns it
    extra = (out - 2 * x).reshape(grid[0], 8, grid[1], 128)[:, 0, :, 0]
    np.testing.assert_array_equal(extra.max(1), 1000 * np.array(programs, np.float32))
    np.testing.assert_array_equal(extra.min(1), 1000 * np.array(programs, np.float32))


def test_core_axis_name_splits_among_the_named_axis():
    from plax.experimental.shard_map import shard_map
    from plax.sharding import Mesh, PartitionSpec

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2 + jnp.float32(1000) * plax.lax.axis_index("core")

    def kernel(x_hbm, o_hbm):
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        pltpu.emit_pipeline(body, grid=(5,), in_specs=[spec], out_specs=spec,
                            core_axis_name="core", dimension_semantics=(P,))(x_hbm, o_hbm)
    x = np.arange(40 * 128, dtype=np.float32).reshape(40, 128)
    any_spec = pl.BlockSpec(memory_space=pl.ANY)
    f = pl.pallas_call(kernel, out_shape=_sds(x.shape), in_specs=[any_spec],
                       out_specs=any_spec, interpret=True)
    mesh = Mesh(np.array(plax.devices()[:2]), ("core",))
    g = shard_map(f, mesh=mesh, in_specs=PartitionSpec(), out_specs=PartitionSpec("core"),
                  check_rep=False)
    out = np.asarray(plax.jit(g)(x)).reshape(2, 40, 128)
    np.testing.assert_array_equal(out[0, :24], 2 * x[:24])  # blocks 0-2 on core 0
    np.testing.assert_array_equal(out[1, 24:], 2 * x[24:] + 1000)  # blocks 3-4 on core 1


def test_core_axis_errors():
    with pytest.raises(ValueError, match="cannot both be provided"):
        pltpu.emit_pipeline(lambda: None, grid=(2,), core_axis=0, core_axis_name="core")
    with pytest.raises(NotImplementedError, match="without parallel grid dimensions"):
        _shared_pipeline((4, 2), (A, A), 2)(np.zeros((32, 256), np.float32))
    with pytest.raises(ValueError, match="same length as grid"):
        _shared_pipeline((4, 2), (P,), 2)(np.zeros((32, 256), np.float32))


@needs_mosaic
def test_core_axis_with_an_uneven_split_lowers_with_a_dynamic_trip_count():
    module = _lower(_shared_pipeline((5, 3), (P, A), 2, interpret=False),
                    jnp.zeros((40, 384), jnp.float32))
    assert "scf.for" in module and "arith.select" in module
    assert module.count("tpu.enqueue_dma") == 2


# --- references in pytrees, allocations --------------------------------------------------
_ANY = pl.BlockSpec(memory_space=pl.ANY)


def test_references_in_pytrees_reach_the_body_in_their_structure():
    def body(in_refs, out_refs):
        out_refs[1][0][...] = in_refs[0][0][...] + in_refs[2][0][...]
        out_refs[1][1][...] = in_refs[2][1][...]

    def kernel(x_ref, y_ref, z_ref, o1_ref, o2_ref):
        spec = pl.BlockSpec((256,), lambda i: (i,))
        pltpu.emit_pipeline(body, grid=(2,), in_specs=([(spec,), (), (spec, spec)],),
                            out_specs=([(), (spec, spec)],))(
            [(x_ref,), (), (y_ref, z_ref)], [(), (o1_ref, o2_ref)])
    x = np.arange(512, dtype=np.float32)
    out = pl.pallas_call(kernel, out_shape=(_sds((512,)), _sds((512,))),
                         in_specs=[_ANY] * 3, out_specs=(_ANY, _ANY),
                         interpret=True)(x, 2 * x, 3 * x)
    np.testing.assert_array_equal(out[0], 3 * x)
    np.testing.assert_array_equal(out[1], 3 * x)


def test_spec_and_reference_trees_must_agree():
    def kernel(x_ref, o_ref):
        spec = pl.BlockSpec((128,), lambda i: (i,))
        pltpu.emit_pipeline(lambda a, b: None, grid=(2,), in_specs=((spec, spec),),
                            out_specs=spec)((x_ref,), o_ref)
    with pytest.raises(ValueError, match=r"the specs of inputs\[0\] describe 2 references"):
        pl.pallas_call(kernel, out_shape=_sds((256,)), in_specs=[_ANY], out_specs=_ANY,
                       interpret=True)(np.zeros(256, np.float32))


def _accumulate_with_allocations(interpret):
    """o += x @ y over (k) blocks, the output block an INPUT_OUTPUT buffer: o starts as
    the aliased input z, which the pipeline reads."""
    b = 128
    spec_o = pl.BlockSpec((b, b), lambda i, j, k: (i, j))
    allocs = [pltpu.BufferedRef.input(pl.BlockSpec((b, b), lambda i, j, k: (i, k)),
                                      jnp.float32),
              pltpu.BufferedRef.input(pl.BlockSpec((b, b), lambda i, j, k: (k, j)),
                                      jnp.float32),
              pltpu.BufferedRef.input_output(spec_o, jnp.float32)]

    def body(x_ref, y_ref, o_ref):
        o_ref[...] += jnp.dot(x_ref[...], y_ref[...])

    def kernel(x_hbm, y_hbm, z_hbm, o_hbm, x_buf, y_buf, o_buf):
        del z_hbm
        pltpu.emit_pipeline(body, grid=(2, 1, 2))(x_hbm, y_hbm, o_hbm,
                                                 allocations=[x_buf, y_buf, o_buf])
    return pl.pallas_call(kernel, out_shape=_sds((2 * b, b)), in_specs=[_ANY] * 3,
                          out_specs=_ANY, scratch_shapes=allocs,
                          input_output_aliases={2: 0}, interpret=interpret)


def test_allocations_say_which_blocks_are_read_and_written():
    rng = np.random.default_rng(0)
    x = rng.integers(-4, 4, (256, 256)).astype(np.float32)
    y = rng.integers(-4, 4, (256, 128)).astype(np.float32)
    z = rng.integers(-4, 4, (256, 128)).astype(np.float32)
    np.testing.assert_array_equal(_accumulate_with_allocations(True)(x, y, z), z + x @ y)
    bref = pltpu.BufferedRef.output(pl.BlockSpec((8, 128), lambda i: (i, 0)), jnp.int32)
    assert bref.is_output and not bref.is_input
    assert plax.tree_util.tree_leaves(bref) == []


@needs_mosaic
def test_allocations_lower_with_the_output_block_read_and_written():
    z = jnp.zeros((256, 128), jnp.float32)
    module = _lower(_accumulate_with_allocations(False), jnp.zeros((256, 256)), z, z)
    # per step: x, y and o's blocks in, o's block out
    assert module.count("tpu.enqueue_dma") == 4


def test_empty_ref_in_a_memory_space_is_a_kernel_scratch_buffer():
    def body(x_ref, o_ref):
        scratch = plax.empty_ref(_sds((128,)), memory_space=pltpu.VMEM)
        scratch[...] = x_ref[...] * 2
        o_ref[...] = scratch[...] + 1

    def kernel(x_hbm, o_hbm):
        spec = pl.BlockSpec((128,), lambda i: (i,))
        pltpu.emit_pipeline(body, grid=(2,), in_specs=spec, out_specs=spec)(x_hbm, o_hbm)
    x = np.arange(256, dtype=np.float32)
    out = pl.pallas_call(kernel, out_shape=_sds((256,)), in_specs=[_ANY], out_specs=_ANY,
                         interpret=True)(x)
    np.testing.assert_array_equal(out, 2 * x + 1)


# --- pipelines over the kernel's own buffers, nested pipelines ------------------------------
def _sequential(interpret):
    """Per outer block: x * 2 into a VMEM buffer by one inner pipeline, + 1 out of it by
    another; the grids are dynamic (so are the buffer's windows)."""
    def outer(x_blk, o_blk):
        tmp = plax.empty_ref(_sds((16, 1024)), pltpu.VMEM)
        s = pl.BlockSpec((16, 256), lambda i: (0, i))

        def double(x, o):
            o[...] = x[...] * 2

        def add_one(x, o):
            o[...] = x[...] + 1
        pltpu.emit_pipeline(double, grid=(jnp.array(4),), in_specs=[s], out_specs=[s])(
            x_blk, tmp)
        pltpu.emit_pipeline(add_one, grid=(jnp.array(4),), in_specs=[s], out_specs=[s])(
            tmp, o_blk)

    def kernel(x_hbm, o_hbm):
        s = pl.BlockSpec((16, 1024), lambda i: (0, i))
        pltpu.emit_pipeline(outer, grid=(jnp.array(2),), in_specs=[s], out_specs=[s])(
            x_hbm.at[1], o_hbm)
    return pl.pallas_call(kernel, out_shape=_sds((16, 2048)), in_specs=[_ANY],
                          out_specs=_ANY, interpret=interpret)


def test_nested_pipelines_over_a_kernel_buffer_at_dynamic_windows():
    x = np.arange(2 * 16 * 2048, dtype=np.float32).reshape(2, 16, 2048)
    np.testing.assert_array_equal(_sequential(True)(x), x[1] * 2 + 1)


@needs_mosaic
def test_a_kernel_buffer_at_dynamic_windows_lowers_to_loads_and_stores():
    # the buffer is a reference of a run_state around the inner pipeline: its windows are
    # vector loads and stores at run-time offsets, not slices of a value
    module = _lower(_sequential(False), jnp.zeros((2, 16, 2048), jnp.float32))
    assert "dynamic_slice" not in module
    assert "memref<16x1024xf32, #tpu.memory_space<vmem>>, vector<16x256xf32>" in module


def test_a_body_writes_a_buffer_of_the_enclosing_kernel():
    def kernel(x_hbm, y_hbm, o_hbm):
        y_vmem = plax.empty_ref(_sds((8, 128)), pltpu.VMEM)

        def body(x, o):
            pltpu.sync_copy(y_hbm, y_vmem)  # (a run_state closing over a reference)
            o[...] = x[...] + y_vmem[...]
        s = pl.BlockSpec((8, 128), lambda i: (0, i))
        pltpu.emit_pipeline(body, grid=(3,), in_specs=[s], out_specs=[s])(x_hbm, o_hbm)
    x = np.arange(8 * 384, dtype=np.float32).reshape(8, 384)
    y = np.full((8, 128), 5, np.float32)
    out = pl.pallas_call(kernel, out_shape=_sds(x.shape), in_specs=[_ANY, _ANY],
                         out_specs=_ANY, interpret=True)(x, y)
    np.testing.assert_array_equal(out, x + 5)


# --- block dimensions: Element offsets, BoundedSlice windows ------------------------------
def _first_dim_pipeline(block_dim, index_map, n_out=8):
    def kernel(x_ref, o_ref):
        def body(x, o):
            o[...] = x[...]
        pltpu.emit_pipeline(body, grid=(1,),
                            in_specs=(pl.BlockSpec((block_dim, 8, 128), index_map),),
                            out_specs=pl.BlockSpec((n_out, 8, 128), lambda i: (0, 0, 0)))(
            x_ref, o_ref)
    return pl.pallas_call(kernel, out_shape=_sds((n_out, 8, 128), jnp.int32),
                          in_specs=[_ANY], out_specs=_ANY, interpret=True)


def test_element_and_bounded_slice_dimensions_start_where_the_index_map_says():
    x = np.arange(16 * 8 * 128, dtype=np.int32).reshape(16, 8, 128)
    out = _first_dim_pipeline(pl.BoundedSlice(8), lambda i: (pl.ds(4, 8), 0, 0))(x)
    np.testing.assert_array_equal(out, x[4:12])
    out = _first_dim_pipeline(pl.Element(8), lambda i: (3, 0, 0))(x)  # an element offset
    np.testing.assert_array_equal(out, x[3:11])


def test_a_bounded_slice_dimension_needs_a_ds():
    x = np.zeros((16, 8, 128), np.int32)
    with pytest.raises(ValueError, match="Must return a pl.ds from the index_map for a "
                                         "BoundedSlice dimension"):
        _first_dim_pipeline(pl.BoundedSlice(8), lambda i: (0, 0, 0))(x)
    with pytest.raises(NotImplementedError, match="shorter than the block"):
        _first_dim_pipeline(pl.BoundedSlice(8), lambda i: (pl.ds(0, 5), 0, 0))(x)


# --- blocks sticking out of the references --------------------------------------------------
def _uneven_double(shape, block, interpret=True):
    def body(x, o):
        o[...] = x[...] * 2

    def kernel(x_hbm, o_hbm):
        spec = pl.BlockSpec(block, lambda i, j: (i, j))
        grid = tuple(-(-n // b) for n, b in zip(shape, block))
        pltpu.emit_pipeline(body, grid=grid, in_specs=spec, out_specs=spec)(x_hbm, o_hbm)
    return pl.pallas_call(kernel, out_shape=_sds(shape), in_specs=[_ANY], out_specs=_ANY,
                          interpret=interpret)


@pytest.mark.parametrize("shape", [(20, 200), (3, 128), (8, 300), (5, 60)])
def test_edge_blocks_read_and_write_only_what_is_inside(shape):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    np.testing.assert_array_equal(_uneven_double(shape, (8, 128))(x), 2 * x)


def test_the_inside_rows_of_an_edge_block_come_first():
    def body(x, o):
        o[...] = x[...]

    def kernel(x_hbm, o_hbm):
        pltpu.emit_pipeline(body, grid=(2,), in_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                            out_specs=pl.BlockSpec((None, 8, 128), lambda i: (i, 0, 0)))(
            x_hbm, o_hbm)
    x = np.arange(12 * 128, dtype=np.float32).reshape(12, 128)
    out = pl.pallas_call(kernel, out_shape=_sds((2, 8, 128)), in_specs=[_ANY],
                         out_specs=_ANY, interpret=True)(x)
    np.testing.assert_array_equal(out[0], x[:8])
    np.testing.assert_array_equal(out[1, :4], x[8:])  # rows 4-7: unspecified


@needs_mosaic
def test_edge_blocks_lower_with_a_clamped_window_and_a_rotation():
    module = _lower(_uneven_double((20, 256), (8, 128), interpret=False),
                    jnp.zeros((20, 256), jnp.float32))
    assert "tpu.dynamic_rotate" in module and "arith.minsi" in module


def test_one_core_runs_the_whole_grid_without_asking_its_index():
    def body(x, o):
        o[...] = x[...] + 1

    def kernel(x_hbm, o_hbm):
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        pltpu.emit_pipeline(body, grid=(3,), in_specs=spec, out_specs=spec,
                            core_axis_name="core", dimension_semantics=(P,))(x_hbm, o_hbm)
    f = pl.pallas_call(kernel, out_shape=_sds((24, 128)), in_specs=[_ANY], out_specs=_ANY,
                       interpret=True)
    jaxpr = plax.make_jaxpr(f, axis_env=[("core", 1)])(np.zeros((24, 128), np.float32))
    assert "axis_index" not in str(jaxpr) and "scan" in str(jaxpr)


def test_emit_pipeline_with_allocations_makes_them_per_reference():
    def body(x, o):
        o[...] = x[...] * 3

    spec = pl.BlockSpec((8, 128), lambda i: (0, i))
    pipeline, make_allocations = pltpu.emit_pipeline_with_allocations(
        body, grid=(2,), in_specs=[spec], out_specs=[spec])

    def kernel(x_hbm, o_hbm):
        allocs = make_allocations(x_hbm, o_hbm)
        assert [a.buffer_type for a in allocs] == [pltpu.BufferType.INPUT,
                                                    pltpu.BufferType.OUTPUT]
        assert isinstance(allocs[0], pltpu.BufferedRefBase)
        pipeline(x_hbm, o_hbm, allocations=allocs)
    x = np.arange(8 * 256, dtype=np.float32).reshape(8, 256)
    out = pl.pallas_call(kernel, out_shape=_sds(x.shape), in_specs=[_ANY], out_specs=_ANY,
                         interpret=True)(x)
    np.testing.assert_array_equal(out, 3 * x)


def test_a_pipeline_in_a_core_map_runs_over_its_captured_references():
    """The references a core_map closes over are the kernel's own (not buffers of it) while
    its body is traced: a pipeline over them windows those, split over the core axis."""
    x = np.arange(256 * 256, dtype=np.float32).reshape(256, 256)

    def double(x_ref, y_ref):
        y_ref[...] = x_ref[...] * 2

    @plax.jit
    def f(x):
        x_ref = plax.new_ref(x)
        y_ref = plax.empty_ref(plax.ShapeDtypeStruct(x.shape, x.dtype))

        @pl.core_map(pltpu.create_tensorcore_mesh("core"), interpret=True)
        def _():
            spec = pl.BlockSpec((128, 128), lambda i, j: (i, j))
            pltpu.emit_pipeline(double, grid=(2, 2), in_specs=[spec], out_specs=spec,
                                core_axis_name="core",
                                dimension_semantics=(pltpu.ARBITRARY, pltpu.PARALLEL))(
                                    x_ref, y_ref)
        return plax.freeze(y_ref)
    np.testing.assert_array_equal(f(x), x * 2)
