"""plax.experimental.pallas.ops.tpu.ragged_paged_attention (JAX's names and signatures) in
interpret mode on the CPU: a batch mixing prefill and decode against a numpy reference, as is
ref_ragged_paged_attention; the input checks."""
import numpy as np
import pytest

import plax.numpy as jnp
from plax.experimental.pallas.ops.tpu import ragged_paged_attention as rpa

TOKENS, Q_HEADS, KV_HEADS, D, PAGE, PAGES_PER_SEQ, PAGES = 40, 4, 2, 32, 8, 5, 30
Q_LENS = np.array([5, 1, 17, 1, 0], np.int32)  # prefill, decode, ...; the fifth slot unused
KV_LENS = np.array([9, 30, 40, 3, 0], np.int32)
CU_Q_LENS = np.concatenate([[0], np.cumsum(Q_LENS)]).astype(np.int32)
NUM_SEQS = np.array([4], np.int32)


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((TOKENS, Q_HEADS, D)).astype(np.float32)
    kv = rng.standard_normal((PAGES, PAGE, 2 * KV_HEADS, D)).astype(np.float32)
    table = rng.permutation(PAGES)[:5 * PAGES_PER_SEQ].reshape(5, PAGES_PER_SEQ)
    return q, kv, table.astype(np.int32)


def _numpy_reference(q, kv, table, sm_scale=1.0, soft_cap=None, sliding_window=None,
                     k_scale=None, v_scale=None):
    """Each sequence's queries (the last q_len of its kv_len positions) attending causally."""
    outs = []
    for s in range(NUM_SEQS[0]):
        rows = q[CU_Q_LENS[s]:CU_Q_LENS[s + 1]].astype(np.float64)
        cache = kv[table[s]].reshape(-1, 2 * KV_HEADS, D)[:KV_LENS[s]].astype(np.float64)
        k = np.repeat(cache[:, 0::2] * (k_scale or 1), Q_HEADS // KV_HEADS, axis=1)
        v = np.repeat(cache[:, 1::2] * (v_scale or 1), Q_HEADS // KV_HEADS, axis=1)
        logits = np.einsum("qhd,khd->hqk", rows, k) * sm_scale
        if soft_cap is not None:
            logits = soft_cap * np.tanh(logits / soft_cap)
        q_pos = KV_LENS[s] - len(rows) + np.arange(len(rows))[:, None]
        k_pos = np.arange(KV_LENS[s])[None]
        seen = k_pos <= q_pos
        if sliding_window is not None:
            seen &= q_pos - sliding_window < k_pos
        logits = np.where(seen, logits, -np.inf)
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        outs.append(np.einsum("hqk,khd->qhd", weights, v))
    return np.concatenate(outs)


CASES = [  # attention options, kernel blocks
    ({}, {}),
    (dict(sm_scale=0.3, soft_cap=4.0, sliding_window=6), dict(num_queries_per_block=16,
                                                              num_kv_pages_per_block=2)),
    (dict(k_scale=0.5, v_scale=2.0), dict(num_queries_per_block=8, num_kv_pages_per_block=1)),
]


@pytest.mark.parametrize("options,blocks", CASES)
def test_kernel_matches_numpy(options, blocks):
    q, kv, table = _inputs()
    got = np.asarray(rpa.ragged_paged_attention(q, kv, KV_LENS, table, CU_Q_LENS, NUM_SEQS,
                                                **options, **blocks))
    total = CU_Q_LENS[NUM_SEQS[0]]
    assert got.shape == q.shape
    want = _numpy_reference(q, kv, table, **options)
    np.testing.assert_allclose(got[:total], want, rtol=1e-5, atol=1e-5)
    assert not got[total:].any()


@pytest.mark.slow  # (the reference runs op by op: ~3 s)
def test_ref_ragged_paged_attention_matches_numpy():
    q, kv, table = _inputs(1)
    options = dict(sm_scale=0.5, soft_cap=3.0, sliding_window=10)
    got = rpa.ref_ragged_paged_attention(jnp.asarray(q), jnp.asarray(kv), KV_LENS, table,
                                         CU_Q_LENS, NUM_SEQS, **options)
    np.testing.assert_allclose(np.asarray(got), _numpy_reference(q, kv, table, **options),
                               rtol=1e-5, atol=1e-5)


def test_input_checks():
    q, kv, table = _inputs()
    rpa.dynamic_validate_inputs(q, kv, KV_LENS, table, CU_Q_LENS, NUM_SEQS)
    with pytest.raises(ValueError, match=r"q_len=17 must be less or equal to kv_len=4 at seq"):
        rpa.dynamic_validate_inputs(q, kv, np.array([9, 30, 4, 3, 0], np.int32), table,
                                    CU_Q_LENS, NUM_SEQS)
    with pytest.raises(ValueError, match="sliding_window=0 must be positive"):
        rpa.ragged_paged_attention(q, kv, KV_LENS, table, CU_Q_LENS, NUM_SEQS,
                                   sliding_window=0)
    with pytest.raises(ValueError, match=r"num_kv_pages_per_block=7 must be in range \(0, 5\]"):
        rpa.static_validate_inputs(q, kv, KV_LENS, table, CU_Q_LENS, NUM_SEQS,
                                   num_kv_pages_per_block=7)
    with pytest.raises(ValueError, match="The dtype of `kv_lens`, `page_indices`, and"):
        rpa.static_validate_inputs(q, kv, KV_LENS.astype(np.float32), table, CU_Q_LENS,
                                   NUM_SEQS)
