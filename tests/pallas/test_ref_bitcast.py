"""``ref.bitcast(dtype)``: a view of a reference's bits as another dtype, TPU's layout (the
second-minor axis scales by the ratio of the widths, as ``pltpu.bitcast`` on values). Its
values in interpret mode, on eager references and under vmap are compared with NumPy's
``view`` of the same bytes; its TPU lowering (``tpu.memref_bitcast``, a sliced view first
as ``tpu.memref_slice``) with what JAX 0.10.2 emits for the same kernels."""
import functools
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax.higher_order.run_state import run_state
from plax.pallas import mosaic_bindings

call = functools.partial(pl.pallas_call, interpret=True)


def tpu_view(x: np.ndarray, dtype) -> np.ndarray:
    """``x``'s bytes as ``dtype``, TPU's layout: ``k`` narrower elements of rows ``k*i`` ..
    ``k*i + k - 1`` of a column are the bytes (little end first) of element ``i`` of it."""
    dtype = np.dtype(dtype)
    *lead, m, n = x.shape
    src, dst = x.dtype.itemsize, dtype.itemsize
    if src > dst:
        k = src // dst
        y = x.view(dtype).reshape(*lead, m, n, k)
        return np.swapaxes(y, -1, -2).reshape(*lead, m * k, n)
    if src < dst:
        k = dst // src
        y = np.swapaxes(x.reshape(*lead, m // k, k, n), -1, -2)
        return np.ascontiguousarray(y).view(dtype).reshape(*lead, m // k, n)
    return x.view(dtype)


def _ints(shape, dtype, seed=0):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    return rng.integers(info.min, info.max, shape, dtype=np.int64).astype(dtype)


def test_the_numpy_reference_round_trips():
    x = _ints((8, 128), np.int32)
    np.testing.assert_array_equal(tpu_view(tpu_view(x, np.int8), np.int32), x)
    assert tpu_view(x, np.int8).shape == (32, 128)
    assert tpu_view(x, np.int8)[1, 0] == np.int8(x.view(np.int8)[0, 1])


@pytest.mark.parametrize("src, dst", [(np.int32, np.int8), (np.int8, np.int32),
                                      (np.int16, np.float32), (np.float32, np.int16),
                                      (np.int32, np.float32)])
def test_read_through_a_bitcast_view_in_interpret_mode(src, dst):
    rows = 8 * max(1, 4 // np.dtype(src).itemsize)
    x = _ints((rows, 128), src) if np.dtype(src).kind == "i" else \
        np.random.default_rng(1).standard_normal((rows, 128)).astype(src)
    want = tpu_view(x, dst)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref.bitcast(dst)[...]
    out = call(kernel, out_shape=plax.ShapeDtypeStruct(want.shape, dst))(x)
    np.testing.assert_array_equal(np.asarray(out).view(np.uint8), want.view(np.uint8))


def test_write_and_load_store_through_views_of_parts():
    x = _ints((32, 128), np.int8, seed=2)

    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)
        o_ref.at[8:16].bitcast(jnp.int32)[0:1] = x_ref.bitcast(jnp.int32)[1:2]
        pltpu.store(o_ref.bitcast(jnp.int16).at[12:16],
                    pltpu.load(x_ref.at[0:16].bitcast(jnp.int16))[0:4])
    out = np.asarray(call(kernel, out_shape=plax.ShapeDtypeStruct(x.shape, jnp.int8))(x))
    want = np.zeros_like(x)
    part = tpu_view(want[8:16], np.int32)
    part[0:1] = tpu_view(x, np.int32)[1:2]
    want[8:16] = tpu_view(part, np.int8)
    whole = tpu_view(want, np.int16)
    whole[12:16] = tpu_view(x[0:16], np.int16)[0:4]
    np.testing.assert_array_equal(out, tpu_view(whole, np.int8))


def test_accumulating_through_a_view_and_an_eager_reference():
    x = np.arange(8 * 128, dtype=np.int32).reshape(8, 128)
    r = plax.new_ref(x)
    view = r.bitcast(np.int16)
    assert view.shape == (16, 128) and view.dtype == np.int16
    np.testing.assert_array_equal(view[...], tpu_view(x, np.int16))
    view[...] += np.ones((16, 128), np.int16)
    np.testing.assert_array_equal(r[...], tpu_view(tpu_view(x, np.int16) + 1, np.int32))


def test_vmap_of_a_bitcast_view():
    xs = _ints((3, 8, 128), np.int32, seed=3)

    def f(refs):
        x_ref, o_ref = refs
        o_ref[...] = x_ref.bitcast(jnp.int8)[...]
    _, out = plax.vmap(run_state(f))((xs, np.zeros((3, 32, 128), np.int8)))
    for k in range(3):
        np.testing.assert_array_equal(out[k], tpu_view(xs[k], np.int8))


def test_jaxpr_prints_the_view_as_jax_does():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref.bitcast(jnp.int32)[0:1]
    f = call(kernel, out_shape=plax.ShapeDtypeStruct((1, 128), jnp.int32))
    assert "a{bitcast(int32)}[:1,:]" in str(plax.make_jaxpr(f)(np.zeros((32, 128), np.int8)))


def test_shapes_that_cannot_be_bitcast_are_refused():
    r = plax.new_ref(np.zeros((4, 128), np.int8))
    with pytest.raises(ValueError, match="multiplying the second-minor dimension"):
        r.bitcast(np.int32).at[0:2].bitcast(np.int8).at[0:1].bitcast(np.int32)
    with pytest.raises(NotImplementedError, match="Bitcast 1D ref with bitwidth change"):
        plax.new_ref(np.zeros((128,), np.int8)).bitcast(np.int32)
    assert plax.new_ref(np.zeros((128,), np.int32)).bitcast(np.float32).shape == (128,)
    with pytest.raises(AttributeError, match="bitcast"):
        plax.jit(lambda v: v.bitcast(np.int8))(np.zeros((8, 128), np.int32))


# --- the TPU lowering -----------------------------------------------------------------------
needs_mosaic = pytest.mark.skipif(not mosaic_bindings.available(),
                                  reason="jaxlib without the Mosaic TPU bindings")


def _ops(module: str) -> list:
    """The memref and vector ops of the kernel function's body, in order (with types)."""
    kernel = module.split("func.func @transform_")[0]
    return [re.sub(r"^%\w+ = ", "", line.strip()) for line in kernel.splitlines()
            if "tpu.memref" in line or "vector.load" in line or "tpu.vector_store" in line]


@needs_mosaic
def test_tpu_lowering_is_a_memref_bitcast_as_jax_emits():
    from tests.pallas.test_mosaic_lowering import lower

    def kernel(x_ref, o_ref):
        o_ref.at[8:16].bitcast(jnp.int32)[0:1] = x_ref.bitcast(jnp.int32)[1:2]
    f = pl.pallas_call(kernel, out_shape=plax.ShapeDtypeStruct((32, 128), jnp.int8))
    _, _, module = lower(f, np.zeros((32, 128), np.int8))
    vmem = "#tpu.memory_space<vmem>"
    i8, i32 = f"memref<32x128xi8, {vmem}>", f"memref<8x128xi32, {vmem}>"
    ops = _ops(module)
    # JAX 0.10.2 emits these (and a dead vector.load of the written block before the store)
    assert ops[0] == f"tpu.memref_bitcast %arg0 : {i8} -> {i32}"
    assert ops[1].startswith("vector.load %") and ops[1].endswith(f"{i32}, vector<1x128xi32>")
    assert ops[2].startswith("tpu.memref_slice %arg1[") and ops[2].endswith(
        f"{i8} -> memref<8x128xi8, {vmem}>")
    assert ops[3].startswith("tpu.memref_bitcast") and ops[3].endswith(
        f"memref<8x128xi8, {vmem}> -> memref<2x128xi32, {vmem}>")
    assert ops[4].startswith("tpu.vector_store") and "memref<2x128xi32" in ops[4]
    assert len(ops) == 5
