"""plax.experimental.pallas.ops.tpu.flash_attention (JAX's names and signatures), run in
interpret mode on the CPU: the forward and the gradients against the jnp references."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental.pallas.ops.tpu import flash_attention as fa

# small tiles so that every kernel takes several key and query blocks, and inner sub-blocks
SMALL = fa.BlockSizes(block_q=32, block_k_major=32, block_k=16, block_b=1,
                      block_q_major_dkv=32, block_k_major_dkv=32, block_k_dkv=16,
                      block_q_dkv=16, block_k_major_dq=32, block_k_dq=16, block_q_dq=32)

WHOLE_TILES = fa.BlockSizes(block_q=32, block_k_major=32, block_k=32, block_b=1,
                            block_q_major_dkv=32, block_k_major_dkv=32, block_k_dkv=32,
                            block_q_dkv=32, block_k_major_dq=32, block_k_dq=32, block_q_dq=32)


def _inputs(batch=2, heads=2, seq=64, d=16, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((batch, heads, seq, d)).astype(dtype) for _ in range(3))
    ab = rng.standard_normal((batch, heads, seq, seq)).astype(np.float32)
    ids = np.sort(rng.integers(0, 3, (batch, seq)), axis=1).astype(np.int32)
    ids[:, 0] = 0  # (every query keeps a key of its own segment at or before it)
    return q, k, v, ab, fa.SegmentIds(ids, ids)


FORWARD = [  # causal, bias, segments, sm_scale, block_b, block_k, dtype
    (False, False, False, 1.0, 1, 32, np.float32),
    (True, False, False, 0.5, 1, 16, np.float32),
    (True, False, True, 0.25, 2, 32, np.float32),
    (False, True, True, 1.0, 1, 16, np.float32),
    (True, False, False, 0.125, 1, 32, jnp.bfloat16),
]


@pytest.mark.parametrize("causal,bias,segments,sm_scale,block_b,block_k,dtype", FORWARD)
def test_forward_matches_the_reference(causal, bias, segments, sm_scale, block_b, block_k,
                                       dtype):
    q, k, v, ab, seg = _inputs(dtype=dtype)
    ab, seg = (ab if bias else None), (seg if segments else None)
    sizes = fa.BlockSizes(block_q=32, block_k_major=32, block_k=block_k, block_b=block_b)
    got = fa.flash_attention(q, k, v, ab, seg, causal=causal, sm_scale=sm_scale,
                             block_sizes=sizes)
    want = fa.mha_reference_no_custom_vjp(q, k, v, ab, seg, causal=causal, sm_scale=sm_scale)
    assert got.shape == q.shape and got.dtype == q.dtype
    tol = 2e-2 if dtype != np.float32 else 1e-5
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                               rtol=tol, atol=tol)


def _assert_grads_close(got, want, tol=1e-4):
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


@pytest.mark.slow  # (~2-3 s: three kernels with inner sub-block loops compiled)
def test_gradients_causal_scaled_match_the_reference():
    q, k, v, _, _ = _inputs(batch=1)

    def loss(attend):
        return lambda q, k, v: jnp.sum(jnp.sin(attend(q, k, v)))
    got = plax.jit(plax.grad(loss(lambda q, k, v: fa.flash_attention(
        q, k, v, causal=True, sm_scale=0.5, block_sizes=SMALL)), (0, 1, 2)))(q, k, v)
    want = plax.jit(plax.grad(loss(lambda q, k, v: fa.mha_reference_no_custom_vjp(
        q, k, v, causal=True, sm_scale=0.5)), (0, 1, 2)))(q, k, v)
    _assert_grads_close(got, want)


def test_gradients_with_bias_and_segments_match_mha_reference():
    q, k, v, ab, seg = _inputs(batch=1, heads=1)

    def loss(attend):
        return lambda q, k, v, ab: jnp.sum(attend(q, k, v, ab) * v)
    got = plax.jit(plax.grad(loss(lambda q, k, v, ab: fa.flash_attention(
        q, k, v, ab, seg, causal=True, block_sizes=WHOLE_TILES)), (0, 1, 2, 3)))(q, k, v, ab)
    want = plax.jit(plax.grad(loss(lambda q, k, v, ab: fa.mha_reference(
        q, k, v, ab, seg, causal=True)), (0, 1, 2, 3)))(q, k, v, ab)
    _assert_grads_close(got, want)


def test_mha_reference_bwd_is_the_gradient_of_the_reference():
    q, k, v, ab, seg = _inputs(batch=1, heads=1, seq=32, d=16)
    do = np.random.default_rng(1).standard_normal(q.shape).astype(np.float32)
    o, l, m = fa.mha_reference_no_custom_vjp(q, k, v, ab, seg, sm_scale=0.5,
                                             save_residuals=True)
    got = plax.jit(lambda *args: fa.mha_reference_bwd(*args, sm_scale=0.5))(
        q, k, v, ab, seg, o, l, m, do)

    @plax.jit
    def want(q, k, v, ab):
        _, vjp = plax.vjp(lambda q, k, v, ab: fa.mha_reference_no_custom_vjp(
            q, k, v, ab, seg, sm_scale=0.5), q, k, v, ab)
        return vjp(do)
    _assert_grads_close(got, want(q, k, v, ab))


def test_block_sizes_defaults_and_checks():
    sizes = fa.BlockSizes.get_default(2, 4, 1024, 1024, 128)
    assert sizes.has_backward_blocks and sizes.block_q == sizes.block_k_dq == 128
    assert not fa.BlockSizes(block_q=128, block_k_major=128, block_k=128,
                             block_b=1).has_backward_blocks
    with pytest.raises(ValueError, match="block_k=256 should be smaller than block_k_major"):
        fa.BlockSizes(block_q=128, block_k_major=128, block_k=256, block_b=1)
    with pytest.raises(ValueError, match="block_k_dq=96 should divide block_k_major_dq=128"):
        fa.BlockSizes(block_q=128, block_k_major=128, block_k=128, block_b=1,
                      block_k_major_dq=128, block_k_dq=96)
    assert fa.below_or_on_diag(0, 128, 0, 128) and not fa.below_or_on_diag(0, 128, 1, 128)
    assert fa.DEFAULT_MASK_VALUE == -0.7 * float(np.finfo(np.float32).max)


def test_shape_errors_name_the_mismatch():
    q, k, v, ab, seg = _inputs(batch=1, heads=1, seq=32, d=16)
    with pytest.raises(ValueError, match="Batch size mismatch"):
        fa.flash_attention(q, np.concatenate([k, k]), v)
    with pytest.raises(ValueError, match="Attention bias shape mismatch"):
        fa.flash_attention(q, k, v, ab[:, :, :16])
    with pytest.raises(ValueError, match="KV segment ids shape mismatch"):
        fa.flash_attention(q, k, v, None, fa.SegmentIds(seg.q, seg.kv[:, :16]))
    with pytest.raises(ValueError, match="q_seq_len=32 should be divisible by block_q=24"):
        fa.flash_attention(q, k, v, block_sizes=fa.BlockSizes(24, 32, 32, 1))


def test_differentiating_without_backward_blocks_raises():
    q, k, v, _, _ = _inputs(batch=1, heads=1, seq=32, d=16)
    sizes = fa.BlockSizes(block_q=32, block_k_major=32, block_k=32, block_b=1)
    with pytest.raises(ValueError, match="not all backward blocks are specified"):
        plax.grad(lambda q: jnp.sum(fa.flash_attention(q, k, v, block_sizes=sizes)))(q)
