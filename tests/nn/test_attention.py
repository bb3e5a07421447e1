"""plax.nn.dot_product_attention against a NumPy reference: plain, grouped-query heads, bias,
masks, causal, local windows, sequence lengths, the log-sum-exp residual, 3-D inputs, and
gradients."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.nn.attention import dot_product_attention as attention
from plax.test_util import check_grads

rng = np.random.default_rng(0)
B, T, S, N, K, H = 2, 5, 6, 4, 2, 8
Q = rng.standard_normal((B, T, N, H)).astype(np.float32)
KV = rng.standard_normal((B, S, K, H)).astype(np.float32)
V = rng.standard_normal((B, S, K, H)).astype(np.float32)
BIAS = rng.standard_normal((B, 1, T, S)).astype(np.float32)
MASK = rng.random((B, N, T, S)) < 0.8


def reference(q, k, v, bias=None, keep=None, scale=None, q_len=None, kv_len=None):
    """Attention in float64 with NumPy: ``keep`` is a BNTS boolean array (or None)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    n, kh = q.shape[2], k.shape[2]
    k, v = np.repeat(k, n // kh, axis=2), np.repeat(v, n // kh, axis=2)
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    logits = np.einsum("btnh,bsnh->bnts", q, k) * scale
    if bias is not None:
        logits = logits + bias
    t, s = logits.shape[-2:]
    allowed = np.ones(logits.shape, bool) if keep is None else np.broadcast_to(keep, logits.shape)
    if q_len is not None:
        allowed = allowed & (np.arange(t)[None, None, :, None] < np.asarray(q_len)[:, None, None, None])
    if kv_len is not None:
        allowed = allowed & (np.arange(s)[None, None, None, :] < np.asarray(kv_len)[:, None, None, None])
    logits = np.where(allowed, logits, -0.7 * np.finfo(np.float32).max)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    out = np.einsum("bnts,bsnh->btnh", w / w.sum(-1, keepdims=True), v)
    if q_len is not None:
        out = out * (np.arange(t)[None, :] < np.asarray(q_len)[:, None])[:, :, None, None]
    return out


def causal(t, s):
    return np.tril(np.ones((t, s), bool))


def window(t, s, left, right):
    r, c = np.arange(t)[:, None], np.arange(s)[None, :]
    return (r <= c + left) & (r >= c - right)


CASES = {
    "plain_gqa": (dict(), dict()),
    "bias": (dict(bias=BIAS), dict(bias=BIAS)),
    "mask": (dict(mask=MASK), dict(keep=MASK)),
    "causal": (dict(is_causal=True), dict(keep=causal(T, S))),
    "window": (dict(local_window_size=(1, 2)), dict(keep=window(T, S, 1, 2))),
    "causal_window": (dict(local_window_size=1, is_causal=True),
                      dict(keep=causal(T, S) & window(T, S, 1, 1))),
    "scale": (dict(scale=0.3), dict(scale=0.3)),
    "lengths": (dict(query_seq_lengths=np.array([3, 5], np.int32),
                     key_value_seq_lengths=np.array([6, 2], np.int32)),
                dict(q_len=[3, 5], kv_len=[6, 2])),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_numpy(name):
    ours, ref = CASES[name]
    got = plax.jit(lambda q, k, v: attention(q, k, v, **ours))(Q, KV, V)
    np.testing.assert_allclose(np.asarray(got, np.float64), reference(Q, KV, V, **ref),
                               rtol=2e-5, atol=2e-5)


def test_residual_3d_inputs_and_low_precision():
    out, lse = attention(Q, KV, V, is_causal=True, return_residual=True)
    assert lse.shape == (B, T, N)
    q, k = np.asarray(Q, np.float64), np.repeat(np.asarray(KV, np.float64), N // K, axis=2)
    logits = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(H)
    logits = np.where(causal(T, S), logits, -0.7 * np.finfo(np.float32).max)
    want = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    np.testing.assert_allclose(np.asarray(lse), want.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)
    three = attention(Q[0], KV[0], V[0])
    assert three.shape == (T, N, H)
    np.testing.assert_allclose(np.asarray(three), reference(Q[:1], KV[:1], V[:1])[0],
                               rtol=2e-5, atol=2e-5)
    bf = attention(Q.astype(jnp.bfloat16), KV.astype(jnp.bfloat16), V.astype(jnp.bfloat16))
    assert bf.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(bf.astype(jnp.float32)), reference(Q, KV, V),
                               rtol=0.05, atol=0.05)


def test_gradients():
    small = (Q[:1, :3, :2, :4], KV[:1, :4, :1, :4], V[:1, :4, :1, :4])
    check_grads(lambda q, k, v: attention(q, k, v, is_causal=True), small, order=1,
                atol=2e-2, rtol=2e-2)


def test_errors():
    with pytest.raises(ValueError, match="number of query heads must be a multiple"):
        attention(Q[:, :, :3], KV, V)
    with pytest.raises(ValueError, match="value dtype should be float16"):
        attention(Q, KV.astype(jnp.float16), V)
    with pytest.raises(ValueError, match="mask dtype should be bool"):
        attention(Q, KV, V, mask=MASK.astype(np.int32))
    with pytest.raises(RuntimeError, match="cuDNN is not detected"):
        attention(Q, KV, V, implementation="cudnn")
    with pytest.raises(ValueError, match="Unsupported implementation option: flash"):
        attention(Q, KV, V, implementation="flash")


# Ranks as JAX 0.10.2 handles them: 3-D q/k/v are one batch; bias and mask of lower rank
# broadcast against [B, N, T, S] from the right; q, k, v must agree in rank.
BIAS_TS = rng.standard_normal((T, S)).astype(np.float32)
BIAS_NTS = rng.standard_normal((N, T, S)).astype(np.float32)
RANK_CASES = {
    "3d_bias_ts": (dict(bias=BIAS_TS), dict(bias=BIAS_TS)),
    "3d_bias_nts": (dict(bias=BIAS_NTS), dict(bias=BIAS_NTS)),
    "3d_bias_1nts": (dict(bias=BIAS_NTS[None]), dict(bias=BIAS_NTS)),
    "3d_bias_s": (dict(bias=BIAS_TS[0]), dict(bias=BIAS_TS[0])),
    "3d_mask_ts": (dict(mask=MASK[0, 0]), dict(keep=MASK[0, 0])),
    "3d_mask_1nts": (dict(mask=MASK[:1]), dict(keep=MASK[:1])),
    "3d_kv_lengths": (dict(key_value_seq_lengths=np.array([4], np.int32)), dict(kv_len=[4])),
}


@pytest.mark.parametrize("name", sorted(RANK_CASES))
def test_3d_inputs_with_lower_rank_bias_and_masks(name):
    ours, ref = RANK_CASES[name]
    got = attention(Q[0], KV[0], V[0], **ours)
    assert got.shape == (T, N, H)
    np.testing.assert_allclose(np.asarray(got, np.float64), reference(Q[:1], KV[:1], V[:1], **ref)[0],
                               rtol=2e-5, atol=2e-5)


def test_4d_inputs_with_lower_rank_bias_and_masks():
    got = attention(Q, KV, V, bias=BIAS_TS, mask=MASK[0])  # [T, S] and [N, T, S]
    np.testing.assert_allclose(np.asarray(got, np.float64),
                               reference(Q, KV, V, bias=BIAS_TS, keep=MASK[0]), rtol=2e-5, atol=2e-5)


def test_rank_errors_as_jax():
    with pytest.raises(ValueError, match=r"query shape should be \[2, -1, -1, 8\]: but got "
                                         r"\(1, 5, 4, 8\)"):
        attention(Q[0], KV, V)  # 3-D query, 4-D key and value
    with pytest.raises(ValueError, match=r"value shape should be \[2, 6, 2, 8\]: but got "
                                         r"\(1, 6, 2, 8\)"):
        attention(Q, KV, V[0])
    with pytest.raises(ValueError, match="bias ndim should be 4, but got 5"):
        attention(Q[0], KV[0], V[0], bias=BIAS[None])
    with pytest.raises(ValueError, match="query_seq_lengths ndim should be 1, but got 0"):
        attention(Q[0], KV[0], V[0], query_seq_lengths=np.int32(2))
    with pytest.raises(TypeError, match=r"cannot reshape array of shape \(2, 5, 2, 2, 8\)"):
        attention(Q[0], KV[0], V[0], bias=np.ones((B, N, T, S), np.float32))


# jax._src.cudnn.fused_attention_stablehlo: the checks Keras runs before asking for cuDNN's
# fused attention (on a TPU, their import alone sends it to splash attention).
def _bf16(*shape):
    return jnp.ones(shape, jnp.bfloat16)


LAYOUT_CASES = [
    ((_bf16(2, 8, 4, 16),) * 3, None, None),
    ((_bf16(2, 8, 4, 16), _bf16(2, 8, 4, 16), _bf16(2, 8, 4, 16).astype(jnp.float16)), ValueError,
     "QKV dtype must be same"),
    ((jnp.ones((2, 8, 4, 16)),) * 3, NotImplementedError, "Q must be fp16/bf16"),
    ((_bf16(2, 8, 4, 16), _bf16(2, 4, 4, 16), _bf16(2, 8, 4, 16)), ValueError,
     "KV must have same seq length, got 4 vs 8"),
    ((_bf16(2, 8, 4, 16), _bf16(2, 8, 4, 8), _bf16(2, 8, 4, 8)), ValueError,
     "QK must have same head dim, got 16 vs 8"),
    ((_bf16(8, 4, 16),) * 3, ValueError, "Q must have a rank of 4, got 3"),
]


@pytest.mark.parametrize("qkv,error,message", LAYOUT_CASES)
def test_cudnn_layout_checks(qkv, error, message):
    from plax._src.cudnn import fused_attention_stablehlo as fa
    layout = fa._normalize_layout("BTNH")
    if error is None:
        assert fa.check_layout(*qkv, None, None, None, None, None, None, None, layout) is None
    else:
        with pytest.raises(error, match=message):
            fa.check_layout(*qkv, None, None, None, None, None, None, None, layout)


def test_cudnn_flash_checks_and_the_absent_cudnn():
    from plax._src.cudnn import fused_attention_stablehlo as fa
    assert fa._normalize_layout("bnsh") is fa.AttentionLayout.BNTH
    with pytest.raises(ValueError, match="Unsupported qkv_layout: TNBH"):
        fa._normalize_layout("TNBH")
    layout = fa.AttentionLayout.BTNH.value
    assert fa.check_is_flash_attention(_bf16(1, 8, 2, 64), _bf16(1, 8, 2, 64), _bf16(1, 8, 2, 64),
                                       layout, 90000, False, False) is None
    with pytest.raises(NotImplementedError, match="head dim must be <= 128 and a multiple of 8"):
        fa.check_is_flash_attention(*(_bf16(1, 8, 2, 12),) * 3, layout, 90000, False, False)
    assert not fa.check_compute_capability("8.0")  # (no GPU here)
    with pytest.raises(RuntimeError, match="cuDNN is not detected"):
        fa.check_cudnn_version()
