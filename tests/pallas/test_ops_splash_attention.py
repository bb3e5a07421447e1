"""plax.experimental.pallas.ops.tpu.splash_attention's kernel and mask info (JAX's names and
signatures), in interpret mode on the CPU: forward, residuals and gradients against the jnp
reference of the same module, and the block-sparse mask info against the dense mask."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental.pallas.ops.tpu import splash_attention as sa
from plax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
from plax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as ml
from plax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask_info as mi

S, D = 64, 16
SIZES = sa.BlockSizes(block_q=16, block_kv=32, block_kv_compute=16, block_q_dkv=32,
                      block_kv_dkv=16, block_q_dq=16, block_kv_dq=16)


def _mask(kind: str, heads: int):
    one = {"causal": lambda h: ml.CausalMask((S, S)),
           "local": lambda h: ml.LocalMask((S, S), (20, 4), 0),
           "mixed": lambda h: [ml.CausalMask((S, S)), ml.LocalMask((S, S), (8, 8), 0),
                               ml.FullMask((S, S))][h % 3],
           "random": lambda h: ml.NumpyMask(ml.make_random_mask((S, S), 0.6, h)
                                            | np.eye(S, dtype=bool))}[kind]
    return ml.MultiHeadMask([one(h) for h in range(heads)])


def _inputs(heads, kv_heads, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((heads, S, D)).astype(dtype)
    kv_shape = (S, D) if kv_heads is None else (kv_heads, S, D)
    k, v = (rng.standard_normal(kv_shape).astype(dtype) for _ in range(2))
    return jnp.asarray(q), jnp.asarray(k), jnp.asarray(v)


def _segments():
    ids = np.repeat(np.array([0, 1, 2, 2], np.int32), S // 4)
    return sa.SegmentIds(jnp.asarray(ids), jnp.asarray(ids))


CASES = [  # mask, heads, kv_heads (None: MQA), segments, sinks, soft cap, dtype
    ("causal", 2, 2, False, False, None, np.float32),
    ("local", 2, 1, True, False, None, np.float32),
    ("mixed", 3, None, False, True, None, np.float32),
    ("random", 4, 2, False, False, 5.0, np.float32),
    ("causal", 2, 2, True, True, None, jnp.bfloat16),
]


def _make(kind, heads, kv_heads, **kw):
    make = sa.make_splash_mqa_single_device if kv_heads is None else \
        sa.make_splash_mha_single_device
    ref = sa.make_masked_mqa_reference if kv_heads is None else sa.make_masked_mha_reference
    mask = _mask(kind, heads)
    return make(mask, block_sizes=SIZES, **kw), ref(mask)


@pytest.mark.parametrize("kind,heads,kv_heads,segments,sinks,cap,dtype", CASES)
def test_forward_matches_the_reference(kind, heads, kv_heads, segments, sinks, cap, dtype):
    kernel, reference = _make(kind, heads, kv_heads, attn_logits_soft_cap=cap)
    q, k, v = _inputs(heads, kv_heads, dtype)
    seg = _segments() if segments else None
    sink = jnp.linspace(-1.0, 1.0, heads) if sinks else None
    got = kernel(q, k, v, seg, sink)
    want = reference(q, k, v, seg, sink, attn_logits_soft_cap=cap)
    assert got.shape == q.shape and got.dtype == q.dtype
    tol = 1e-5 if dtype == np.float32 else 3e-2
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want), rtol=tol,
                               atol=tol)


@pytest.mark.parametrize("kind,heads,kv_heads,segments,sinks,cap,dtype", CASES[:4])
def test_gradients_match_the_reference(kind, heads, kv_heads, segments, sinks, cap, dtype):
    kernel, reference = _make(kind, heads, kv_heads, attn_logits_soft_cap=cap)
    q, k, v = _inputs(heads, kv_heads, dtype, seed=1)
    seg = _segments() if segments else None
    sink = jnp.linspace(-1.0, 1.0, heads) if sinks else None
    cot = jnp.asarray(np.random.default_rng(2).standard_normal(q.shape).astype(np.float32))

    def loss(fn, *args):
        return lambda q, k, v, s: jnp.sum(fn(q, k, v, seg, s, *args) * cot)
    argnums = (0, 1, 2, 3) if sinks else (0, 1, 2)
    got = plax.grad(loss(kernel), argnums)(q, k, v, sink)
    want = plax.grad(lambda q, k, v, s: jnp.sum(
        reference(q, k, v, seg, s, attn_logits_soft_cap=cap) * cot), argnums)(q, k, v, sink)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-4)


def test_save_residuals_returns_the_logsumexp_and_vmap_batches():
    kernel, reference = _make("causal", 2, 2, save_residuals=True)
    q, k, v = _inputs(2, 2)
    out, (lse,) = kernel(q, k, v)
    want, (want_lse,) = reference(q, k, v, save_residuals=True)
    np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(lse), np.asarray(want_lse), rtol=1e-5, atol=1e-5)
    plain, _ = _make("causal", 2, 2)
    batched = plax.vmap(plain)(jnp.stack([q, 2 * q]), jnp.stack([k, k]), jnp.stack([v, -v]))
    np.testing.assert_allclose(np.asarray(batched[1]),
                               np.asarray(reference(2 * q, k, -v)), rtol=1e-5, atol=1e-5)


def test_mask_info_classifies_blocks_and_skips_empty_ones():
    info, fn = mi.process_mask(ml.MultiHeadMask([ml.CausalMask((S, S))]), (16, 16))
    assert fn is None and info.block_mask.dtype == np.int8
    causal = np.tril(np.ones((4, 4), np.int32)) * 2 - np.eye(4, dtype=np.int32)
    np.testing.assert_array_equal(info.block_mask[0], causal)
    # a skipped (empty) kv block repeats the last block visited in its row
    np.testing.assert_array_equal(info.data_next[0], np.minimum(np.arange(4)[None, :],
                                                                np.arange(4)[:, None]))
    # the four diagonal blocks are one distinct partial block: the lower triangle
    assert info.partial_mask_blocks.shape == (1, 16, 16)
    np.testing.assert_array_equal(info.partial_mask_blocks[0], np.tril(np.ones((16, 16), bool)))
    dkv, _ = mi.process_mask_dkv(ml.MultiHeadMask([ml.CausalMask((S, S))]), (16, 16))
    # along q blocks (the dkv grid's inner axis) a skipped block repeats the first q block
    # visited before it, or the first one after it
    np.testing.assert_array_equal(dkv.data_next[0], np.maximum(np.arange(4)[:, None],
                                                               np.arange(4)[None, :]))


def test_mask_info_rebuilds_the_dense_mask():
    mask = _mask("mixed", 3)
    info, _ = mi.process_mask(mask, (16, 32), downcast_smem_data=False)
    assert info.block_mask.dtype == np.int32
    dense = np.asarray(mask[:, :, :])
    for h in range(3):
        for i in range(4):
            for j in range(2):
                want = dense[h, 16 * i:16 * i + 16, 32 * j:32 * j + 32]
                kind = info.block_mask[h, i, j]
                got = {0: np.zeros_like(want), 2: np.ones_like(want)}.get(
                    kind, info.partial_mask_blocks[info.mask_next[h, i, j]] if kind == 1
                    else None)
                np.testing.assert_array_equal(got, want)


def test_kernel_names_and_layout_helpers():
    assert sk.get_kernel_name(True, False, True, "dq") == "splash_mqa_dq_segmented_no_residuals"
    assert sk.get_kernel_name(False, True, False, "fwd") == "splash_mha_fwd_residuals"
    assert sk.from_head_minor((2, 8, 4), sa.QKVLayout.SEQ_MINOR) == (2, 4, 8)
    assert sa.BlockSizes(block_q=8, block_kv=16).block_kv_compute == 16
    assert not sa.BlockSizes(block_q=8, block_kv=16).has_backward_blocks
    assert sa.BlockSizes.get_default().has_backward_blocks


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="should divide"):
        mi.process_mask(_mask("causal", 1), (24, 16))
    with pytest.raises(ValueError, match="Unexpected mask shape"):
        sa.make_splash_mha_single_device(np.ones((S, S), bool))
    with pytest.raises(ValueError, match="Block sizes for dq kernel are not needed"):
        sa.BlockSizes(block_q=8, block_kv=8, block_q_dq=8, use_fused_bwd_kernel=True)
    kernel, _ = _make("causal", 2, 2)
    q, k, v = _inputs(2, 2)
    with pytest.raises(ValueError, match="must divide the number of q heads"):
        kernel(q, k[:1].repeat(3, 0)[:, :, :], v[:1].repeat(3, 0))
    with pytest.raises(ValueError, match="Expected 3-dim 'key' tensor for MHA"):
        kernel(q, k[0], v[0])
    no_bwd = sa.make_splash_mha_single_device(_mask("causal", 2),
                                              block_sizes=sa.BlockSizes(16, 16))
    with pytest.raises(ValueError, match="needs the backward block sizes"):
        plax.grad(lambda q: no_bwd(q, k, v).sum())(q)


@pytest.mark.parametrize("segments", [False, True])
def test_the_kernels_lower_for_tpu(monkeypatch, segments):
    monkeypatch.setattr(plax, "default_backend", lambda: "tpu")  # (compiled, not interpreted)
    kernel = sa.make_splash_mha_single_device(
        ml.MultiHeadMask([ml.CausalMask((256, 256))] * 2),
        block_sizes=sa.BlockSizes.get_default())
    q = jnp.ones((2, 256, 128), jnp.bfloat16)
    ids = jnp.zeros((256,), jnp.int32)
    seg = sa.SegmentIds(ids, ids) if segments else None
    loss = plax.grad(lambda q: kernel(q, q, q, seg).astype(jnp.float32).sum())
    text = plax.jit(loss).trace(q).lower(lowering_platforms=("tpu",)).as_text()
    assert text.count("tpu_custom_call") == 3  # forward, dq and dk/dv kernels


def test_dynamic_mask_info_classifies_as_the_static_one():
    mask = _mask("mixed", 3)
    dense = jnp.asarray(np.asarray(mask[:, :, :]))
    for static_fn, dynamic_fn in ((mi.process_mask, mi.process_dynamic_mask),
                                  (mi.process_mask_dkv, mi.process_dynamic_mask_dkv)):
        static, _ = static_fn(mask, (16, 32), q_seq_shards=2)
        dynamic, fn = dynamic_fn(dense, (16, 32), q_seq_shards=2)
        assert fn is None and dynamic.is_dynamic_mask and dynamic.partial_mask_blocks.shape == (
            3, 4, 2, 16, 32)
        np.testing.assert_array_equal(np.asarray(dynamic.block_mask), static.block_mask)
        np.testing.assert_array_equal(np.asarray(dynamic.data_next), static.data_next)
    with pytest.raises(ValueError, match="Expected a bool mask"):
        mi.process_dynamic_mask(dense.astype(jnp.int32), (16, 32))


def test_dynamic_mask_kernel_matches_the_reference():
    mask = _mask("random", 2)
    kernel = sa.make_splash_mha_single_device(jnp.asarray(np.asarray(mask[:, :, :])),
                                              block_sizes=SIZES)
    reference = sa.make_masked_mha_reference(mask)
    q, k, v = _inputs(2, 2)
    np.testing.assert_allclose(np.asarray(kernel(q, k, v)), np.asarray(reference(q, k, v)),
                               rtol=1e-5, atol=1e-5)
    got = plax.grad(lambda k: jnp.sum(kernel(q, k, v) ** 2))(k)
    want = plax.grad(lambda k: jnp.sum(reference(q, k, v) ** 2))(k)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("dynamic", [False, True])
def test_kernel_under_shard_map_over_heads_and_q(dynamic):
    P = plax.sharding.PartitionSpec
    mesh = plax.make_mesh((2, 2), ("h", "q"), devices=plax.devices()[:4],
                          axis_types=(plax.sharding.AxisType.Auto,) * 2)
    mask = _mask("mixed", 4)
    given = jnp.asarray(np.asarray(mask[:, :, :])) if dynamic else mask
    kernel = sa.make_splash_mha(given, block_sizes=SIZES, head_shards=2, q_seq_shards=2)
    spec = kernel.manual_sharding_spec(plax.sharding.NamedSharding(mesh, P("h", "q")))
    sharded = plax.shard_map(lambda kern, q, k, v: kern(q, k, v), mesh=mesh,
                             in_specs=(spec, P("h", "q"), P("h"), P("h")),
                             out_specs=P("h", "q"), check_vma=False)
    q, k, v = _inputs(4, 4)
    want = sa.make_masked_mha_reference(mask)(q, k, v)
    np.testing.assert_allclose(np.asarray(sharded(kernel, q, k, v)), np.asarray(want),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="Sharding the kv sequence dimension is not supported"):
        kernel.manual_sharding_spec(plax.sharding.NamedSharding(mesh, P(None, None, "q")))
