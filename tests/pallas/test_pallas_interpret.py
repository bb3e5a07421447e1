"""pallas_call in interpret mode: kernels over grids of blocks, against jnp references."""
import functools

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl

call = functools.partial(pl.pallas_call, interpret=True)


def _rand(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_elementwise_add_1d_grid():
    def add(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]
    spec = pl.BlockSpec((8,), lambda i: (i,))
    f = call(add, out_shape=plax.ShapeDtypeStruct((32,), jnp.float32), grid=(4,),
             in_specs=[spec, spec], out_specs=spec)
    x, y = _rand(32), _rand(32, 1)
    np.testing.assert_allclose(f(x, y), x + y, rtol=1e-6)
    np.testing.assert_allclose(plax.jit(f)(x, y), x + y, rtol=1e-6)


def _matmul(x, y, bm, bn, bk):
    m, k = x.shape
    n = y.shape[1]

    def kernel(x_ref, y_ref, o_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)
        o_ref[...] += jnp.dot(x_ref[...], y_ref[...])
    return call(kernel, out_shape=plax.ShapeDtypeStruct((m, n), jnp.float32),
                grid=(m // bm, n // bn, k // bk),
                in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                          pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
                out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)))(x, y)


def test_tiled_matmul_accumulates_over_k():
    x, y = _rand((16, 32)), _rand((32, 24), 1)
    np.testing.assert_allclose(_matmul(x, y, 8, 8, 8), x @ y, rtol=1e-4, atol=1e-4)
    jitted = plax.jit(lambda a, b: _matmul(a, b, 4, 12, 16))
    np.testing.assert_allclose(jitted(x, y), x @ y, rtol=1e-4, atol=1e-4)


def test_row_softmax_squeezed_rows():
    x = _rand((6, 16))

    def softmax(x_ref, o_ref):
        row = x_ref[...]
        e = jnp.exp(row - jnp.max(row))
        o_ref[...] = e / jnp.sum(e)
    f = call(softmax, out_shape=plax.ShapeDtypeStruct(x.shape, jnp.float32), grid=(6,),
             in_specs=[pl.BlockSpec((None, 16), lambda i: (i, 0))],
             out_specs=pl.BlockSpec((pl.squeezed, 16), lambda i: (i, 0)))
    np.testing.assert_allclose(f(x), plax.nn.softmax(x, axis=-1), rtol=1e-5, atol=1e-6)


def test_input_output_aliases_start_from_the_input():
    def kernel(x_ref, y_ref, o_ref):
        o_ref[0] = x_ref[0] + y_ref[0]   # only element 0 written
    f = call(kernel, out_shape=plax.ShapeDtypeStruct((4,), jnp.float32),
             input_output_aliases={1: 0})
    np.testing.assert_array_equal(f(jnp.ones(4), jnp.arange(4.0)), [1.0, 1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"mapping '1:0' referring to input\[1\] with abstract "
                       r"value float32\[3\] and to output\[0\] with a different"):
        call(kernel, out_shape=plax.ShapeDtypeStruct((4,), jnp.float32),
             input_output_aliases={1: 0})(jnp.ones(4), jnp.ones(3))


def test_ds_in_fori_loop_inside_kernel():
    x = _rand((4, 32))

    def kernel(x_ref, o_ref):
        def body(c, carry):
            chunk = x_ref[:, pl.ds(pl.multiple_of(c * 8, 8), 8)]
            o_ref[:, pl.ds(c * 8, 8)] = chunk * 2.0 + carry
            return carry + 1.0
        plax.lax.fori_loop(0, 4, body, 0.0)
    out = call(kernel, out_shape=plax.ShapeDtypeStruct(x.shape, jnp.float32))(x)
    want = x * 2 + np.repeat(np.arange(4.0, dtype=np.float32), 8)[None, :]
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_program_id_and_num_programs_row_major():
    def kernel(o_ref):
        o_ref[...] = jnp.full(o_ref.shape, pl.program_id(0) * 100 + pl.program_id(1) * 10
                              + pl.num_programs(1), jnp.int32)
    out = call(kernel, out_shape=plax.ShapeDtypeStruct((2, 3), jnp.int32), grid=(2, 3),
               out_specs=pl.BlockSpec((1, 1), lambda i, j: (i, j)))()
    np.testing.assert_array_equal(out, [[3, 13, 23], [103, 113, 123]])
    def kernel2(x_ref, o_ref):  # revisiting one block: steps run in row-major order
        del x_ref
        o_ref[...] = o_ref[...] * 10 + pl.program_id(0) * 3 + pl.program_id(1)
    out = call(kernel2, out_shape=plax.ShapeDtypeStruct((1,), jnp.int32), grid=(2, 3),
               out_specs=pl.BlockSpec((1,), lambda i, j: (0,)), input_output_aliases={0: 0})(
        jnp.zeros(1, jnp.int32))
    assert int(out[0]) == 12345
    with pytest.raises(ValueError, match="only be called inside a pallas_call kernel"):
        pl.program_id(0)


def test_edge_blocks_pad_with_uninitialized_values():
    x = jnp.arange(10, dtype=jnp.float32)
    spec = pl.BlockSpec((4,), lambda i: (i,))

    def copy_plus_one(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1
    f = call(copy_plus_one, out_shape=plax.ShapeDtypeStruct((10,), jnp.float32), grid=(3,),
             in_specs=[spec], out_specs=spec)
    np.testing.assert_array_equal(f(x), np.arange(10.0) + 1)
    # A larger output reads the padding past the input's end: NaN for floats.
    g = call(copy_plus_one, out_shape=plax.ShapeDtypeStruct((12,), jnp.float32), grid=(3,),
             in_specs=[spec], out_specs=spec)
    np.testing.assert_array_equal(g(x), [*range(1, 11), np.nan, np.nan])
    # Unwritten outputs hold the uninitialised value: NaN, the least int, False.
    def nothing(o_ref):
        pass
    for dtype, want in [(jnp.float32, np.nan), (jnp.int32, np.iinfo(np.int32).min),
                        (jnp.uint8, 0), (jnp.bool_, False)]:
        out = call(nothing, out_shape=plax.ShapeDtypeStruct((3,), dtype))()
        np.testing.assert_array_equal(out, np.full(3, want, dtype))


def test_out_of_range_block_index_clamps():
    x = jnp.arange(12, dtype=jnp.float32)

    def copy(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    out = call(copy, out_shape=plax.ShapeDtypeStruct((12,), jnp.float32), grid=(3,),
               in_specs=[pl.BlockSpec((4,), lambda i: (i + 1,))],
               out_specs=pl.BlockSpec((4,), lambda i: (i,)))(x)
    np.testing.assert_array_equal(out, [4, 5, 6, 7, 8, 9, 10, 11, 8, 9, 10, 11])


def test_scratch_persists_across_programs():
    def kernel(x_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)
        acc_ref[...] += x_ref[...]
        o_ref[...] = acc_ref[...]
    spec = pl.BlockSpec((4,), lambda i: (i,))
    x = jnp.arange(12.0)
    out = call(kernel, out_shape=plax.ShapeDtypeStruct((12,), jnp.float32), grid=(3,),
               in_specs=[spec], out_specs=spec, scratch_shapes=[pl.ANY((4,), jnp.float32)])(x)
    want = np.cumsum(np.arange(12.0).reshape(3, 4), axis=0).reshape(-1)
    np.testing.assert_array_equal(out, want)


def test_grid_spec_and_pytree_outputs():
    def kernel(x_ref, a_ref, b_ref):
        a_ref[...] = x_ref[...] * 2
        b_ref[...] = x_ref[...] - 1
    spec = pl.BlockSpec((2, 4), lambda i: (i, 0))
    sds = plax.ShapeDtypeStruct((4, 4), jnp.float32)
    gs = pl.GridSpec(grid=(2,), in_specs=[spec], out_specs=(spec, spec))
    x = _rand((4, 4))
    a, b = call(kernel, out_shape=(sds, sds), grid_spec=gs)(x)
    np.testing.assert_allclose(a, x * 2)
    np.testing.assert_allclose(b, x - 1)
    # a list of results with a tuple of specs (JAX reads a top-level list as a tuple)
    gs = pl.GridSpec(grid=(2,), in_specs=[spec], out_specs=[[spec], spec])
    (a,), b = call(lambda x_ref, a_refs, b_ref: kernel(x_ref, a_refs[0], b_ref),
                   out_shape=[[sds], sds], grid_spec=gs)(x)
    np.testing.assert_allclose(a, x * 2)


def test_vmap_and_jvp():
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.sin(x_ref[...]) + pl.program_id(0)
    spec = pl.BlockSpec((4,), lambda i: (i,))
    f = call(kernel, out_shape=plax.ShapeDtypeStruct((8,), jnp.float32), grid=(2,),
             in_specs=[spec], out_specs=spec)
    xs = _rand((3, 8))
    bump = np.repeat([0.0, 1.0], 4).astype(np.float32)
    np.testing.assert_allclose(plax.vmap(f)(xs), np.sin(xs) + bump, rtol=1e-6)
    _, t = plax.jvp(f, (xs[0],), (xs[1],))
    np.testing.assert_allclose(t, np.cos(xs[0]) * xs[1], rtol=1e-5)


def test_spec_errors():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    sds = plax.ShapeDtypeStruct((8,), jnp.float32)
    with pytest.raises(ValueError, match="must return 1 values to match block_shape"):
        call(kernel, out_shape=sds, grid=(2,), in_specs=[pl.BlockSpec((4,), lambda i: (i, i))],
             out_specs=pl.BlockSpec((4,), lambda i: (i,)))(jnp.ones(8))
    with pytest.raises(ValueError, match="must have the same number of dimensions"):
        call(kernel, out_shape=sds, in_specs=[pl.BlockSpec((4, 4))])(jnp.ones(8))
    with pytest.raises(ValueError, match="Pytree for `in_specs` and `inputs` do not match"):
        call(kernel, out_shape=sds, in_specs=[pl.BlockSpec((4,))] * 2)(jnp.ones(8))
    c = jnp.arange(8.0)

    def captures(x_ref, o_ref):
        o_ref[...] = x_ref[...] + c
    with pytest.raises(ValueError, match="captures constants"):
        call(captures, out_shape=sds)(jnp.ones(8))


def test_non_interpret_on_cpu_raises():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    f = pl.pallas_call(kernel, out_shape=plax.ShapeDtypeStruct((4,), jnp.float32))
    with pytest.raises(ValueError, match="Only interpret mode is supported on CPU backend."):
        f(jnp.ones(4))
    with pytest.raises(ValueError, match="Only interpret mode is supported on CPU backend."):
        plax.jit(f)(jnp.ones(4))


def test_helpers():
    assert pl.cdiv(10, 4) == 3 and int(pl.cdiv(jnp.int32(10), 4)) == 3
    assert pl.next_power_of_2(5) == 8
    assert pl.ds(2, 3) == pl.Slice(2, 3, 1) and pl.dslice is pl.ds
    assert pl.Buffered(2).buffer_count == 2
    assert pl.BlockSpec((4,)).index_map is None


def test_jax_pallas_private_faces_and_test_helpers():
    """jax._src.pallas (what JAX's Pallas tests import): the faces answer with plax's objects,
    and PallasTest's pallas_call runs in interpret mode on the CPU."""
    import unittest

    from plax._src.pallas import core, pallas_call, pallas_test_util, primitives
    assert core.BlockSpec is pl.BlockSpec and primitives.program_id is pl.program_id
    assert pallas_call.pallas_call is pl.pallas_call

    class Case(pallas_test_util.PallasTest):
        INTERPRET = True

        def test_add_one(self):
            def kernel(x_ref, o_ref):
                o_ref[...] = x_ref[...] + 1
            f = self.pallas_call(kernel, out_shape=plax.ShapeDtypeStruct((8,), jnp.float32))
            np.testing.assert_array_equal(f(jnp.arange(8.0)), np.arange(8.0) + 1)

    class Compiled(pallas_test_util.PallasTest):
        def test_never_on_the_cpu(self):
            raise AssertionError("a compiled-kernel case ran on the CPU")

    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(Case).run(result)
    unittest.defaultTestLoader.loadTestsFromTestCase(Compiled).run(result)
    assert result.testsRun == 2 and not result.failures and not result.errors
    assert [why for _, why in result.skipped] == ["On CPU the test works only in interpret mode"]


_REF_MISUSES = [  # (what the kernel does with its input reference, the error)
    (lambda r: plax.lax.dot_general(r, r, (((1,), (0,)), ((), ()))), ValueError,
     r"Attempting to pass a Ref Ref<default>\{float32\[8,8\]\} to a primitive: dot_general"),
    (lambda r: plax.lax.sin(r), ValueError, r"Attempting to pass a Ref .* primitive: sin"),
    (jnp.sin, TypeError, r"sin requires ndarray or scalar arguments.*Ref<default>"),
    (lambda r: r * 2, TypeError, r"multiply requires ndarray or scalar arguments"),
]


@pytest.mark.parametrize("misuse,error,match", _REF_MISUSES)
def test_array_operations_refuse_an_unread_reference(misuse, error, match):
    def kernel(x_ref, o_ref):
        o_ref[...] = misuse(x_ref)
    f = call(kernel, out_shape=plax.ShapeDtypeStruct((8, 8), jnp.float32))
    with pytest.raises(error, match=match):
        f(np.ones((8, 8), np.float32))


def test_like_functions_and_state_primitives_take_references():
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.zeros_like(x_ref)
        o_ref[...] += jnp.full_like(o_ref, 2.0) * x_ref[...]
    f = call(kernel, out_shape=plax.ShapeDtypeStruct((8, 8), jnp.float32))
    x = _rand((8, 8))
    np.testing.assert_allclose(f(x), 2 * x, rtol=1e-6)
    jaxpr = str(plax.make_jaxpr(f)(x))
    assert "Ref<default>{f32[8,8]}" in jaxpr, jaxpr


@pytest.mark.parametrize("dtype", ["int4", "int2", "uint4"])
def test_sub_byte_integer_outputs(dtype):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...].astype(dtype)
    x = np.array([[0.0, 1.0, -1.0, 1.0]] * 8, np.float32)
    if dtype.startswith("u"):
        x = np.abs(x)
    out = call(kernel, out_shape=plax.ShapeDtypeStruct(x.shape, jnp.dtype(dtype)))(x)
    assert out.dtype == jnp.dtype(dtype)
    np.testing.assert_array_equal(np.asarray(out.astype(jnp.float32)), x)
