"""``jax._src.cudnn.fused_attention_stablehlo``: the checks libraries run before asking for
cuDNN's fused attention (Keras's ``_can_use_flash_attention`` imports them; on a TPU their
import alone sends it to splash attention).

plax runs no cuDNN fused-attention kernels, so ``check_cudnn_version`` always refuses with
JAX's "cuDNN is not detected" and ``jax.nn.dot_product_attention`` computes attention with its
XLA implementation. The layout and shape checks are JAX's rules for cuDNN's kernels, kept so
that a library's checks answer as they would.
"""
import enum

import numpy as np

from plax.api.devices import default_backend, devices
from plax.core import dtypes
from plax.nn.attention import NO_CUDNN_ATTENTION

__all__ = ["AttentionLayout", "MaskType", "check_compute_capability", "check_cudnn_version",
           "check_is_flash_attention", "check_layout", "is_cuda_compute_capability_equal"]


class AttentionLayout(enum.Enum):
    """Where q/k/v keep their axes: batch, sequence (T), heads (N), head dim (H)."""
    BTNH = 0
    BNTH = 1


class MaskType(enum.Enum):
    NO_MASK = 0
    PADDING = 1
    CAUSAL = 2
    PADDING_CAUSAL = 3
    ALIBI = 4


def _normalize_layout(layout: str) -> AttentionLayout:
    """``"BTNH"``/``"BNTH"`` (S for T accepted) as an AttentionLayout."""
    name = layout.upper().replace("S", "T")
    if name not in AttentionLayout.__members__:
        raise ValueError(f"Unsupported qkv_layout: {layout} (give BTNH or BNTH).")
    return AttentionLayout[name]


def check_cudnn_version():
    """The cuDNN version fused attention would run with: plax has no cuDNN attention
    kernels, so this always raises."""
    raise RuntimeError(NO_CUDNN_ATTENTION)


def _gpu_capability():
    if default_backend() != "gpu":
        return None
    found = getattr(devices("gpu")[0], "compute_capability", None)
    return None if found is None else tuple(int(p) for p in str(found).split("."))


def check_compute_capability(capability: str) -> bool:
    """Whether the first GPU's compute capability is at least ``capability`` ("8.0");
    False off a GPU."""
    current = _gpu_capability()
    return current is not None and current >= tuple(int(p) for p in capability.split("."))


def is_cuda_compute_capability_equal(capability: str) -> bool:
    """Whether the first GPU's compute capability is ``capability``; False off a GPU."""
    current = _gpu_capability()
    return current is not None and current == tuple(int(p) for p in capability.split("."))


def _axes(shape, layout):
    """(batch, sequence, heads, head dim) of a q/k/v shape in ``layout``."""
    b, x, y, h = shape
    return (b, y, x, h) if layout == AttentionLayout.BNTH else (b, x, y, h)


def check_layout(query, key, value, bias, q_seqlen, kv_seqlen, q_offsets=None,
                 kv_offsets=None, page_table_k=None, page_table_v=None,
                 layout=AttentionLayout.BTNH):
    """Raise unless q/k/v (rank 4, fp16/bf16/fp8, one dtype), the bias and the sequence
    lengths and offsets fit cuDNN's attention in ``layout``."""
    ranks = [len(a.shape) for a in (query, key, value)]
    if ranks[0] != 4:
        raise ValueError(f"Q must have a rank of 4, got {ranks[0]}")
    if len(set(ranks)) != 1:
        raise ValueError(f"QKV rank must be same, got {ranks}")
    allowed = [np.dtype(np.float16), np.dtype(dtypes.bfloat16),
               np.dtype(dtypes.float8_e4m3fn), np.dtype(dtypes.float8_e5m2)]
    if np.dtype(query.dtype) not in allowed:
        raise NotImplementedError(f"Q must be fp16/bf16/fp8_e4m3fn/fp8_e5m2, got {query.dtype}")
    if len({np.dtype(a.dtype) for a in (query, key, value)}) != 1:
        raise ValueError(f"QKV dtype must be same, got {query.dtype}, {key.dtype}, "
                         f"{value.dtype}")
    qB, qT, _, qH = _axes(query.shape, layout)
    kB, kS, kN, kH = _axes(key.shape, layout)
    vB, vS, vN, _ = _axes(value.shape, layout)
    if page_table_k is not None and page_table_v is not None:
        (k_blocks, kS), (v_blocks, vS) = (kB, kS), (vB, vS)
        kB, _, k_per_batch, _ = page_table_k.shape
        vB, _, v_per_batch, _ = page_table_v.shape
        for name, blocks, per_batch, batch in (("Key", k_blocks, k_per_batch, kB),
                                               ("Value", v_blocks, v_per_batch, vB)):
            if blocks != batch * per_batch:
                raise ValueError(f"{name} and its page table must have same number of blocks, "
                                 f"got {blocks} vs {batch * per_batch}")
        kS, vS = k_per_batch * kS, v_per_batch * vS
    if not qB == kB == vB:
        raise ValueError(f"QKV batch must be same, got {qB}, {kB}, {vB}")
    if qH != kH:
        raise ValueError(f"QK must have same head dim, got {qH} vs {kH}")
    if kN != vN:
        raise ValueError(f"KV must have same number of heads, got {kN} vs {vN}")
    if kS != vS:
        raise ValueError(f"KV must have same seq length, got {kS} vs {vS}")
    if bias is not None and tuple(bias.shape[-2:]) != (qT, vS):
        raise ValueError(f"Bias must have same seq length as QKV, got {bias.shape[-2]} and "
                         f"{bias.shape[-1]}")
    rank = 2 if q_offsets is not None else 1
    for name, t in (("q_seqlen", q_seqlen), ("kv_seqlen", kv_seqlen),
                    ("q_offsets", q_offsets), ("kv_offsets", kv_offsets)):
        if t is None:
            continue
        if np.dtype(t.dtype) != np.int32:
            raise ValueError(f"{name} must have int32 datatype, got {t.dtype}")
        if len(t.shape) != rank:
            raise ValueError(f"{name} must have a rank of {rank}, got {len(t.shape)}")
        if t.shape[0] != qB:
            raise ValueError(f"{name} must have same batch as Q, got {t.shape[0]}")


def check_is_flash_attention(query, key, value, layout: int, cudnn_version, has_bias,
                             is_training, is_packed=False, is_paged_attention=False,
                             is_fp8=False):
    """Raise NotImplementedError unless cuDNN's flash attention takes these sizes
    (``layout`` is an AttentionLayout's value)."""
    order = AttentionLayout.BNTH if layout == AttentionLayout.BNTH.value else \
        AttentionLayout.BTNH
    _, T, _, qH = _axes(query.shape, order)
    _, S, _, vH = _axes(value.shape, order)
    if is_cuda_compute_capability_equal("10.3") and cudnn_version < 91100:
        raise NotImplementedError("Compute capability 10.3 requires cuDNN version >= 9.11.")
    if is_fp8:
        if not ((is_training and qH == 128 and T % 128 == 0 and S % 128 == 0)
                or (not is_training and qH <= 256 and qH % 16 == 0)):
            raise NotImplementedError(
                f"Unsupported sequence length Q {T}, KV {S} and head dim {qH} for FP8.")
        return
    hopper = check_compute_capability("9.0")
    most = 256 if hopper else 128
    if not (qH <= most and qH % 8 == 0):
        raise NotImplementedError(f"The head dim must be <= {most} and a multiple of 8, "
                                  f"but got {qH}.")
    if is_training and has_bias and (T % 2 or S % 2):
        raise NotImplementedError(f"Unsupported sequence length Q {T}, KV {S}.")
    if is_packed and not hopper:
        raise NotImplementedError("Packed layout requires a GPU with at least Hopper "
                                  "architecture.")
    if qH != vH and (cudnn_version < 91000 or not hopper):
        raise NotImplementedError("mla requires cudnn version >= 9.10 and at least hopper "
                                  "arch.")
