"""plax.nn's block-scaled products (scaled_matmul, scaled_dot_general,
get_scaled_dot_general_config) against a NumPy model of the microscaling formats: mxfp8
(float8_e4m3fn values, power-of-two float8_e8m0fnu scales rounded up, blocks of 32) and
nvfp4 (float4_e2m1fn values, float8_e4m3fn scales, blocks of 16, a float32 global scale);
values, dtypes, the straight-through gradient, jit/vmap and JAX's errors."""
import warnings

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax

_rng = np.random.default_rng(0)


def _quantize_dequantize(x3, mode, global_scale=1.0):
    """NumPy model: ``x3`` (B, M, K) quantized in blocks along K and read back in float32
    (the values the product contracts), times the global scale for nvfp4."""
    B, M, K = x3.shape
    block = 32 if mode == "mxfp8" else 16
    x = x3.reshape(B, M, K // block, block).astype(np.float32)
    if mode == "mxfp8":
        ratio = np.abs(x).max(-1, keepdims=True) / np.float32(448.0)
        mant, exp = np.frexp(ratio)  # ratio = mant * 2**exp, mant in [0.5, 1)
        scale = np.ldexp(np.float32(1.0), np.where(mant == 0.5, exp - 1, exp)).astype(np.float32)
        q = np.clip(x / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    else:
        x = x / np.float32(global_scale)
        scale = np.clip(np.abs(x).max(-1, keepdims=True) / np.float32(6.0), 0, 448)
        scale = scale.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
        q = np.clip(x / scale, -6, 6).astype(ml_dtypes.float4_e2m1fn)
    return (q.astype(np.float32) * scale).reshape(B, M, K)


@pytest.mark.parametrize("out_type", [np.float32, ml_dtypes.bfloat16, np.float16])
def test_scaled_matmul_is_the_dequantized_product(out_type):
    a = _rng.normal(size=(2, 4, 64)).astype(ml_dtypes.float8_e4m3fn)
    b = _rng.normal(size=(2, 3, 64)).astype(ml_dtypes.float8_e5m2)
    a_s = (2.0 ** _rng.integers(-3, 4, size=(2, 4, 2))).astype(ml_dtypes.float8_e8m0fnu)
    b_s = (2.0 ** _rng.integers(-3, 4, size=(2, 3, 2))).astype(ml_dtypes.float8_e8m0fnu)
    out = plax.nn.scaled_matmul(a, b, a_s, b_s, preferred_element_type=out_type)
    assert out.dtype == np.dtype(out_type) and out.shape == (2, 4, 3)
    deq = lambda x, s: x.astype(np.float32) * np.repeat(s.astype(np.float32), 32, -1)  # noqa
    expected = np.einsum("bmk,bnk->bmn", deq(a, a_s), deq(b, b_s))
    np.testing.assert_allclose(np.asarray(out, np.float32), expected.astype(out_type)
                               .astype(np.float32), rtol=1e-6)


def test_scaled_matmul_small_example_jit_and_vmap():
    a = jnp.array([1, 2, 3]).reshape((1, 1, 3))
    b = jnp.array([4, 5, 6]).reshape((1, 1, 3))
    s = jnp.array([0.5]).reshape((1, 1, 1))
    out = plax.nn.scaled_matmul(a, b, s, s)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(out), [[[8.0]]])
    np.testing.assert_array_equal(np.asarray(plax.jit(plax.nn.scaled_matmul)(a, b, s, s)),
                                  [[[8.0]]])
    batched = plax.vmap(plax.nn.scaled_matmul)(a[None].repeat(3, 0), b[None].repeat(3, 0),
                                               jnp.stack([s, 2 * s, 4 * s]), s[None].repeat(3, 0))
    np.testing.assert_array_equal(np.asarray(batched).ravel(), [8.0, 16.0, 32.0])


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
def test_scaled_dot_general_forward(mode):
    gs = 0.5
    configs = [plax.nn.get_scaled_dot_general_config(
        mode, None if mode == "mxfp8" else jnp.array([gs], jnp.float32))] * 3
    lhs = _rng.normal(size=(2, 8, 64)).astype(np.float32)
    rhs = (3 * _rng.normal(size=(2, 5, 64))).astype(np.float32)
    dn = (((2,), (2,)), ((0,), (0,)))
    out = plax.nn.scaled_dot_general(lhs, rhs, dn, configs=configs)
    assert out.dtype == np.float32 and out.shape == (2, 8, 5)
    g = gs if mode == "nvfp4" else 1.0
    expected = np.einsum("bmk,bnk->bmn", _quantize_dequantize(lhs, mode, g),
                         _quantize_dequantize(rhs, mode, g)) * (g * g)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-4)
    # close to the exact product (the formats keep a few bits)
    np.testing.assert_allclose(np.asarray(out), np.einsum("bmk,bnk->bmn", lhs, rhs),
                               atol=0.2 * np.abs(expected).max())
    jitted = plax.jit(lambda l, r: plax.nn.scaled_dot_general(l, r, dn, configs=configs))
    np.testing.assert_array_equal(np.asarray(jitted(lhs, rhs)), np.asarray(out))


def test_scaled_dot_general_without_batch_dims_and_bf16_output():
    configs = [plax.nn.get_scaled_dot_general_config("mxfp8")] * 3
    lhs = _rng.normal(size=(32, 4)).astype(np.float32)
    rhs = _rng.normal(size=(3, 32, 2)).astype(np.float32)
    out = plax.nn.scaled_dot_general(lhs, rhs, (((0,), (1,)), ((), ())), configs=configs,
                                     preferred_element_type=jnp.bfloat16)
    assert out.dtype == np.dtype(ml_dtypes.bfloat16) and out.shape == (4, 3, 2)
    l3 = lhs.T[None]                                   # (1, 4, 32)
    r3 = np.transpose(rhs, (0, 2, 1)).reshape(1, 6, 32)  # (1, 3*2, 32)
    expected = np.einsum("bmk,bnk->bmn", _quantize_dequantize(l3, "mxfp8"),
                         _quantize_dequantize(r3, "mxfp8")).reshape(4, 3, 2)
    np.testing.assert_allclose(np.asarray(out, np.float32), expected, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
def test_scaled_dot_general_gradient(mode):
    configs = [plax.nn.get_scaled_dot_general_config(mode)] * 3
    lhs = _rng.normal(size=(1, 32, 64)).astype(np.float32)
    rhs = _rng.normal(size=(1, 32, 64)).astype(np.float32)
    cot = _rng.normal(size=(1, 32, 32)).astype(np.float32)
    dn = (((2,), (2,)), ((0,), (0,)))
    _, vjp = plax.vjp(lambda l, r: plax.nn.scaled_dot_general(l, r, dn, configs=configs),
                      lhs, rhs)
    g_lhs, g_rhs = vjp(jnp.asarray(cot))
    assert g_lhs.shape == lhs.shape and g_rhs.shape == rhs.shape
    if mode == "mxfp8":  # the cotangent and the other operand quantized along the free dims
        qdq = lambda x: _quantize_dequantize(x, mode)  # noqa: E731
        exp_lhs = np.einsum("bmn,bkn->bmk", qdq(cot), qdq(np.transpose(rhs, (0, 2, 1))))
        exp_rhs = np.einsum("bnm,bkm->bnk", qdq(np.transpose(cot, (0, 2, 1))),
                            qdq(np.transpose(lhs, (0, 2, 1))))
    else:  # nvfp4's backward pass is unquantized (straight through; nothing clipped here)
        exp_lhs = np.einsum("bmn,bnk->bmk", cot, rhs)
        exp_rhs = np.einsum("bmn,bmk->bnk", cot, lhs)
    np.testing.assert_allclose(np.asarray(g_lhs), exp_lhs, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.asarray(g_rhs), exp_rhs, rtol=1e-4, atol=1e-3)


def test_configs_and_plain_fallback():
    mx = plax.nn.get_scaled_dot_general_config("mxfp8")
    assert (mx.mode, mx.block_size, mx.global_scale) == ("mxfp8", 32, None)
    assert mx.data_type == np.dtype(ml_dtypes.float8_e4m3fn)
    assert mx.scale_type == np.dtype(ml_dtypes.float8_e8m0fnu)
    nv = plax.nn.get_scaled_dot_general_config("nvfp4")
    assert (nv.mode, nv.block_size) == ("nvfp4", 16)
    assert nv.data_type == np.dtype(ml_dtypes.float4_e2m1fn)
    np.testing.assert_array_equal(np.asarray(nv.global_scale), [1.0])
    x, y = jnp.ones((2, 3)), jnp.ones((3, 4))
    dn = (((1,), (0,)), ((), ()))
    np.testing.assert_array_equal(np.asarray(plax.nn.scaled_dot_general(x, y, dn)),
                                  np.asarray(lax.dot_general(x, y, dn)))
    with pytest.warns(DeprecationWarning, match="implementation"):
        plax.nn.scaled_dot_general(x, y, dn, implementation="cudnn")


@pytest.mark.parametrize("call, error, match", [
    (lambda: plax.nn.get_scaled_dot_general_config("fp8"), ValueError, "Unsupported mode: fp8"),
    (lambda: plax.nn.scaled_matmul(jnp.ones((2, 3)), jnp.ones((1, 2, 3)), jnp.ones((1, 2, 1)),
                                   jnp.ones((1, 2, 1))), ValueError,
     "scaled_matmul requires all inputs to be 3-dimensional arrays"),
    (lambda: plax.nn.scaled_matmul(jnp.ones((1, 2, 4)), jnp.ones((1, 2, 3)),
                                   jnp.ones((1, 2, 1)), jnp.ones((1, 2, 1))), ValueError,
     "matching batch \\(B\\) and contract \\(K\\) dimensions"),
    (lambda: plax.nn.scaled_matmul(jnp.ones((1, 2, 4)), jnp.ones((1, 3, 4)),
                                   jnp.ones((1, 3, 1)), jnp.ones((1, 3, 1))), ValueError,
     "scales to match non-contract dimensions"),
    (lambda: plax.nn.scaled_dot_general(jnp.ones((1, 32, 32)), jnp.ones((1, 32, 32)),
                                        (((2,), (2,)), ((0,), (0,))), jnp.int32,
                                        [plax.nn.get_scaled_dot_general_config("mxfp8")] * 3),
     TypeError, "Only support preferred_element_type in \\(f32, bf16, f16\\)"),
    (lambda: plax.nn.scaled_dot_general(jnp.ones((1, 2, 20)), jnp.ones((1, 2, 20)),
                                        (((2,), (2,)), ((0,), (0,))),
                                        configs=[plax.nn.get_scaled_dot_general_config(
                                            "mxfp8")] * 3),
     ValueError, "contracting size 20 must be a multiple of the mxfp8 block size 32"),
])
def test_errors(call, error, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error, match=match):
            call()
