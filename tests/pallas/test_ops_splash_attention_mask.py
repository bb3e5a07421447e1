"""plax.experimental.pallas.ops.tpu.splash_attention's masks (JAX's names): the dense
make_* masks against closed forms, the lazy masks' slices against the dense ones."""
import numpy as np
import pytest

from plax.experimental.pallas.ops.tpu import splash_attention as sa
from plax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as masks

SHAPE = (48, 64)
Q, KV = np.arange(48)[:, None], np.arange(64)[None]
SLICES = [(slice(None), slice(None)), (slice(8, 24), slice(16, 60)), (slice(47, 48), slice(0, 1))]

LAZY = [  # lazy mask, the same mask dense
    (sa.CausalMask(SHAPE), Q >= KV),
    (sa.CausalMask(SHAPE, offset=5), Q + 5 >= KV),
    (sa.LocalMask(SHAPE, (4, 2), offset=3), (Q + 3 - 4 <= KV) & (KV <= Q + 3 + 2)),
    (sa.LocalMask(SHAPE, (None, 0), offset=0), Q >= KV),
    (masks.ChunkedCausalMask(SHAPE, 16), (Q // 16 == KV // 16) & (Q >= KV)),
    (sa.FullMask(SHAPE), np.ones(SHAPE, bool)),
    (sa.NumpyMask(np.eye(*SHAPE, dtype=bool)), np.eye(*SHAPE, dtype=bool)),
    (sa.CausalMask(SHAPE) & sa.LocalMask(SHAPE, (3, None), 0), (Q >= KV) & (Q - 3 <= KV)),
    (sa.CausalMask(SHAPE, -10) | sa.NumpyMask(np.eye(*SHAPE, dtype=bool)),
     (Q - 10 >= KV) | np.eye(*SHAPE, dtype=bool)),
]


@pytest.mark.parametrize("k", range(len(LAZY)))
def test_lazy_mask_slices_match_the_dense_mask(k):
    mask, dense = LAZY[k]
    assert mask.shape == SHAPE
    for rows, cols in SLICES:
        got = mask[rows, cols]
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, dense[rows, cols])


def test_dense_masks_and_multi_head():
    np.testing.assert_array_equal(sa.make_causal_mask(SHAPE, offset=2), Q + 2 >= KV)
    np.testing.assert_array_equal(sa.make_local_attention_mask(SHAPE, (1, 1)), abs(Q - KV) <= 1)
    np.testing.assert_array_equal(masks.make_chunk_attention_mask(SHAPE, 8),
                                  (Q // 8 == KV // 8) & (Q >= KV))
    random = sa.make_random_mask(SHAPE, 0.75, seed=1)
    assert random.dtype == np.bool_ and 0.15 < random.mean() < 0.35
    np.testing.assert_array_equal(random, sa.make_random_mask(SHAPE, 0.75, seed=1))
    heads = sa.MultiHeadMask([sa.CausalMask(SHAPE), sa.FullMask(SHAPE)])
    assert heads.shape == (2, *SHAPE)
    np.testing.assert_array_equal(heads[:, 4:9, 2:7], np.stack([(Q >= KV)[4:9, 2:7],
                                                                 np.ones((5, 5), bool)]))
    np.testing.assert_array_equal(heads[0, :, :], Q >= KV)
    assert sa.CausalMask(SHAPE, 1) == sa.CausalMask(SHAPE, 1) != sa.CausalMask(SHAPE, 2)
    assert hash(sa.LocalMask(SHAPE, (1, 2), 0)) == hash(sa.LocalMask(SHAPE, (1, 2), 0))


def test_mask_errors():
    with pytest.raises(ValueError, match="Invalid shape for other"):
        sa.CausalMask(SHAPE) | sa.FullMask((48, 48))
    with pytest.raises(NotImplementedError, match="Conversion to bool is unsupported"):
        sa.CausalMask(SHAPE) or sa.FullMask(SHAPE)
    with pytest.raises(ValueError, match="Nesting MultiHeadMasks is not supported"):
        sa.MultiHeadMask([sa.MultiHeadMask([sa.FullMask(SHAPE)])])
    with pytest.raises(ValueError, match="Mask must be a boolean array"):
        sa.NumpyMask(np.zeros(SHAPE, np.int32))
    with pytest.raises(ValueError, match=r"Shard count squared \(4\) must divide Q seq_len"):
        sa.CausalMask((6, 8), shard_count=2)
    with pytest.raises(ValueError, match="chunk_size must be positive"):
        masks.ChunkedCausalMask(SHAPE, 0)
