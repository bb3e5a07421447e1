"""plax.experimental.pallas.ops.tpu.paged_attention (JAX's names and signatures) in
interpret mode on the CPU, against grouped_query_attention_reference on the pages laid out
contiguously; int8-quantized pages; the argument checks."""
import numpy as np
import pytest

import plax.numpy as jnp
from plax.experimental.pallas.ops.tpu.paged_attention import paged_attention
from plax.experimental.pallas.ops.tpu.paged_attention import quantization_utils as qu
from plax.experimental.pallas.ops.tpu.paged_attention import util

B, Q_HEADS, KV_HEADS, D, PAGE, PAGES_PER_SEQ, TOTAL_PAGES = 3, 4, 2, 32, 8, 4, 16
LENGTHS = np.array([20, 3, 32], np.int32)  # mid-block, inside the first page, every page


def _cache(seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, Q_HEADS, D)).astype(np.float32)
    k, v = (rng.standard_normal((KV_HEADS, TOTAL_PAGES, PAGE, D)).astype(np.float32)
            for _ in range(2))
    table = rng.permutation(TOTAL_PAGES)[:B * PAGES_PER_SEQ].reshape(B, PAGES_PER_SEQ)
    return q, k, v, table.astype(np.int32)


def _contiguous(pages, table):
    """[kv_heads, pages, page, d] -> [batch, kv_heads, pages_per_seq * page, d]."""
    pages = np.asarray(pages)
    return np.stack([pages[:, table[b]].reshape(KV_HEADS, -1, pages.shape[-1])
                     for b in range(B)])


@pytest.mark.parametrize("pages_per_block,soft_cap,megacore", [
    (2, None, None), (4, None, None), (1, 5.0, "kv_head")])
def test_paged_attention_matches_the_reference(pages_per_block, soft_cap, megacore):
    q, k, v, table = _cache()
    got = paged_attention(q, k, v, LENGTHS, table, pages_per_compute_block=pages_per_block,
                          attn_logits_soft_cap=soft_cap, megacore_mode=megacore)
    want = util.grouped_query_attention_reference(q, _contiguous(k, table),
                                                  _contiguous(v, table), LENGTHS, soft_cap)
    assert got.shape == q.shape and got.dtype == q.dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_int8_pages():
    q, k, v, table = _cache(1)
    kq, vq = qu.quantize_to_int8(jnp.asarray(k)), qu.quantize_to_int8(jnp.asarray(v))
    got = paged_attention(q, kq, vq, LENGTHS, table, pages_per_compute_block=2)
    contiguous = [qu.QuantizedTensor(_contiguous(t.weight, table), _contiguous(t.scales, table))
                  for t in (kq, vq)]
    want = util.grouped_query_attention_reference(q, *contiguous, LENGTHS)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    back = qu.unquantize_from_int8(kq, dtype=jnp.float32)
    np.testing.assert_allclose(np.asarray(back), k, atol=float(np.abs(k).max()) / 127)


def test_argument_errors():
    q, k, v, table = _cache()
    with pytest.raises(ValueError, match="pages_per_compute_block must be divisible"):
        paged_attention(q, k, v, LENGTHS, table, pages_per_compute_block=3)
    with pytest.raises(ValueError, match="The dtype of `lengths` must be int32"):
        paged_attention(q, k, v, LENGTHS.astype(np.float32), table, pages_per_compute_block=2)
    with pytest.raises(ValueError, match="batch size must be even when megacore_mode is"):
        paged_attention(q, k, v, LENGTHS, table, pages_per_compute_block=2,
                        megacore_mode="batch")
    with pytest.raises(ValueError, match="Number of Q heads must be divisible"):
        paged_attention(q[:, :3], k, v, LENGTHS, table, pages_per_compute_block=2)
