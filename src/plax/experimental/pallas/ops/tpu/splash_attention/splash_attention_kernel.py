"""Splash attention (block-sparse flash attention), as
``splash_attention.splash_attention_kernel``.

``make_splash_mha(mask, head_shards=, q_seq_shards=, block_sizes=, ...)`` (and ``_mqa``,
``_single_device``) turn a mask ([heads, q_seq_len, kv_seq_len]: a ``MultiHeadMask`` or a numpy
array, or a bool jax array, a dynamic mask) into a ``SplashAttentionKernel``, a pytree of its
mask infos (``manual_sharding_spec`` gives its specs for a ``shard_map`` splitting heads and
q): called on one example's ``q`` [heads,
q_seq_len, head_dim], ``k``/``v`` [kv_heads, kv_seq_len, head_dim] (MHA, kv_heads dividing
heads) or [kv_seq_len, head_dim] (MQA), optional ``SegmentIds`` and attention ``sinks``
[heads], it returns ``softmax(q @ k^T, masked) @ v`` (no scaling: scale q first).

The forward kernel's grid is (head, q block, kv block). The mask info (``process_mask``) is
scalar-prefetched into SMEM: kv blocks whose mask is all False are skipped (their index maps
repeat the previous block, so nothing is copied), all-True blocks apply no mask, partial ones
fetch their boolean block. A running row maximum and sum (an online softmax) live in VMEM
scratch across the kv blocks, walked ``block_kv_compute`` keys at a time. The gradient is two
more block-sparse kernels under a ``custom_vjp``: dq (grid as the forward's) and dk/dv (grid
(head, kv block, q block)); with grouped or multi-query heads the per-head dk/dv are summed.
On a backend other than a TPU (or with ``interpret=True``) the kernels run in interpret mode.
plax keeps every layout head-dim-minor (``QKVLayout`` changes no value) and has no fused
backward kernel (``use_fused_bwd_kernel`` runs the two kernels).
"""
from __future__ import annotations

import dataclasses
import enum
import functools
from typing import Any, Callable, NamedTuple, Optional, Union

import numpy as np

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib
from plax.experimental.pallas.ops.tpu.splash_attention import (
    splash_attention_mask_info as mask_info_lib)

__all__ = ["BlockSizes", "DEFAULT_MASK_VALUE", "NN_DIM_NUMBERS", "NT_DIM_NUMBERS",
           "NUM_LANES", "NUM_SUBLANES", "QKVLayout", "SegmentIds", "SplashAttentionKernel",
           "MaskFunctionType", "SplashCustomReturnType", "SplashResidualsType",
           "attention_reference", "attention_reference_custom", "from_head_minor",
           "get_kernel_name", "make_attention_reference", "make_masked_mha_reference",
           "make_masked_mqa_reference", "make_splash_mha", "make_splash_mha_single_device",
           "make_splash_mqa", "make_splash_mqa_single_device"]

partial = functools.partial
DEFAULT_MASK_VALUE = -0.7 * float(np.finfo(np.float32).max)
NUM_LANES = 128
NUM_SUBLANES = 8
NN_DIM_NUMBERS = (((1,), (0,)), ((), ()))  # a @ b
NT_DIM_NUMBERS = (((1,), (1,)), ((), ()))  # a @ b.T
_TN_DIM_NUMBERS = (((0,), (0,)), ((), ()))  # a.T @ b
_F32 = np.float32


class SegmentIds(NamedTuple):
    """Segment ids of the queries (``q``: [q_seq_len]) and keys (``kv``: [kv_seq_len]): a
    query attends only to keys of its own segment (and'ed with the mask). Every row must keep
    at least one key."""

    q: Any
    kv: Any


# What a kernel returns: the output, or with save_residuals (output, (logsumexp,)).
SplashCustomReturnType = Union[Any, tuple[Any, tuple[Any]]]
# The residuals the forward keeps for the backward kernels.
SplashResidualsType = tuple[Any, Any, Any, Optional[SegmentIds], Optional[Any], Any, Any,
                            Optional[Any], Optional[Any]]
MaskFunctionType = Callable[..., Any]


class QKVLayout(enum.IntEnum):
    """The physical layout a kernel operand is kept in (the interface is always head-dim
    minor)."""

    HEAD_DIM_MINOR = enum.auto()  # [..., seq_len, head_dim]
    SEQ_MINOR = enum.auto()  # [..., head_dim, seq_len]


def from_head_minor(vals: tuple, layout: QKVLayout) -> tuple:
    """A head-dim-minor shape tuple in ``layout`` (its last two entries swapped for
    SEQ_MINOR)."""
    if layout == QKVLayout.HEAD_DIM_MINOR:
        return vals
    return (*vals[:-2], vals[-1], vals[-2])


@dataclasses.dataclass(frozen=True, slots=True)
class BlockSizes:
    """Tile sizes of the splash kernels (they change speed, not results): ``block_q`` x
    ``block_kv`` forward blocks walked ``block_kv_compute`` keys at a time, the ``*_dkv``
    sizes for the dk/dv kernel and the ``*_dq`` ones for the dq kernel (both needed to
    differentiate)."""

    block_q: int
    block_kv: int
    block_kv_compute: int | None = None
    block_q_dkv: int | None = None
    block_kv_dkv: int | None = None
    block_kv_dkv_compute: int | None = None
    block_q_dq: int | None = None
    block_kv_dq: int | None = None
    use_fused_bwd_kernel: bool = False
    q_layout: QKVLayout = QKVLayout.HEAD_DIM_MINOR
    k_layout: QKVLayout = QKVLayout.HEAD_DIM_MINOR
    v_layout: QKVLayout = QKVLayout.HEAD_DIM_MINOR

    def __post_init__(self):
        if self.block_kv_compute is None:
            object.__setattr__(self, "block_kv_compute", self.block_kv)
        if self.block_kv_dkv_compute is None:
            object.__setattr__(self, "block_kv_dkv_compute", self.block_kv_dkv)
        if self.use_fused_bwd_kernel and (self.block_q_dq is not None
                                          or self.block_kv_dq is not None):
            raise ValueError("Block sizes for dq kernel are not needed with a fused kernel.")

    @property
    def has_backward_blocks(self) -> bool:
        """Whether the backward block sizes are all given (differentiation needs them)."""
        needed = (self.block_q_dkv, self.block_kv_dkv, self.block_kv_dkv_compute)
        if not self.use_fused_bwd_kernel:
            needed += (self.block_q_dq, self.block_kv_dq)
        return all(b is not None for b in needed)

    @classmethod
    def get_default(cls):
        """128 everywhere."""
        return BlockSizes(block_q=128, block_kv=128, block_kv_compute=128, block_q_dkv=128,
                          block_kv_dkv=128, block_kv_dkv_compute=128, block_q_dq=128,
                          block_kv_dq=128)


def get_kernel_name(is_mqa: bool, save_residuals: bool, is_segmented: bool,
                    phase: str) -> str:
    """The name of a splash kernel variant (``phase``: "fwd", "dq" or "dkv")."""
    if phase not in ("fwd", "dq", "dkv"):
        raise ValueError(f"phase must be 'fwd', 'dq' or 'dkv', got {phase!r}")
    if save_residuals and phase != "fwd":
        raise ValueError("Only the forward kernel saves residuals.")
    residuals = "_residuals" if save_residuals else "_no_residuals"
    segments = "_segmented" if is_segmented else ""
    return f"splash_{'mqa' if is_mqa else 'mha'}_{phase}{segments}{residuals}"


# --- the jnp reference ----------------------------------------------------------------------
def attention_reference(mask, q, k, v, segment_ids, sinks=None, *,
                        mask_value: float = DEFAULT_MASK_VALUE, save_residuals: bool = False,
                        custom_type: str = "flash", attn_logits_soft_cap: float | None = None):
    """One head's masked attention in f32 (mask [q_seq_len, kv_seq_len], q [q_seq_len, d],
    k/v [kv_seq_len, d], ``sinks`` a scalar); ``save_residuals`` also returns
    ``(logsumexp,)``. ``custom_type`` names JAX's custom-vjp flavours (same values)."""
    del custom_type
    logits = jnp.einsum("sd,td->st", q.astype(_F32), k.astype(_F32))
    if segment_ids is not None:
        mask = jnp.logical_and(mask, segment_ids.q[:, None] == segment_ids.kv[None, :])
    if attn_logits_soft_cap is not None:
        logits = jnp.tanh(logits / attn_logits_soft_cap) * attn_logits_soft_cap
    logits = jnp.where(mask, logits, mask_value)
    m = logits.max(axis=-1)
    if sinks is not None:
        m = jnp.maximum(m, sinks.astype(_F32))
    p = jnp.exp(logits - m[:, None])
    total = p.sum(axis=-1) + (0.0 if sinks is None else jnp.exp(sinks.astype(_F32) - m))
    out = jnp.einsum("st,td->sd", p / total[:, None], v.astype(_F32))
    if save_residuals:
        return out, (m + jnp.log(total),)
    return out


def attention_reference_custom(mask, q, k, v, segment_ids, sinks=None, *,
                               mask_value: float = DEFAULT_MASK_VALUE,
                               save_residuals: bool = False, custom_type: str = "flash",
                               attn_logits_soft_cap: float | None = None):
    """``attention_reference`` as JAX's custom-vjp reference is called; its values and
    gradients are the same (plax differentiates it directly)."""
    if custom_type not in ("flash", "vanilla"):
        raise ValueError(f"custom_type must be 'flash' or 'vanilla', got {custom_type!r}")
    return attention_reference(mask, q, k, v, segment_ids, sinks, mask_value=mask_value,
                               save_residuals=save_residuals,
                               attn_logits_soft_cap=attn_logits_soft_cap)


def make_attention_reference(mask, is_mqa: bool, backward_impl: str = "vanilla",
                             **params: Any) -> Callable:
    """A jitted jnp reference of the splash kernel for ``mask`` ([heads, q, kv]), called as
    the kernel is: ``(q, k, v, segment_ids=None, sinks=None, *, mask_value=,
    save_residuals=, attn_logits_soft_cap=)``. Its gradient is plain autodiff for every
    ``backward_impl`` ("vanilla", "custom", "custom_vanilla")."""
    if backward_impl not in ("vanilla", "custom", "custom_vanilla"):
        raise ValueError(f"backward_impl must be 'vanilla', 'custom' or 'custom_vanilla', got "
                         f"{backward_impl!r}")
    dense = jnp.asarray(np.asarray(mask[:, :, :]))

    @partial(plax.jit, static_argnames=["mask_value", "save_residuals",
                                        "attn_logits_soft_cap"])
    def reference(mask, q, k, v, segment_ids=None, sinks=None, *,
                  mask_value=DEFAULT_MASK_VALUE, save_residuals=False,
                  attn_logits_soft_cap=None):
        one = partial(attention_reference, mask_value=mask_value,
                      save_residuals=save_residuals,
                      attn_logits_soft_cap=attn_logits_soft_cap, **params)
        heads = q.shape[0]
        kv_of = (lambda h: None) if is_mqa else (lambda h: h // (heads // k.shape[0]))
        outs = []
        for h in range(heads):
            kh, vh = (k, v) if is_mqa else (k[kv_of(h)], v[kv_of(h)])
            outs.append(one(mask[h], q[h], kh, vh, segment_ids,
                            None if sinks is None else sinks[h]))
        if save_residuals:
            return (jnp.stack([o[0] for o in outs]), (jnp.stack([o[1][0] for o in outs]),))
        return jnp.stack(outs)

    return partial(reference, dense)


make_masked_mha_reference = partial(make_attention_reference, is_mqa=False)
make_masked_mqa_reference = partial(make_attention_reference, is_mqa=True)


# --- the kernels ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Config:
    """What a kernel call is specialised on (hashable: the custom_vjp's static argument)."""

    block_sizes: BlockSizes
    is_mqa: bool
    mask_value: float
    attn_logits_soft_cap: float | None
    interpret: bool
    heads: int
    kv_heads: int
    info_heads: int  # the mask info's leading size: heads, or 1 shared by all
    has_partial: bool
    segmented: bool
    has_sinks: bool


def _info_head(config: _Config, h):
    return h if config.info_heads > 1 else 0


def _kv_head(config: _Config, h):
    return h // (config.heads // config.kv_heads)


def _kv_spec(config: _Config, rows: int, d: int, index):
    """The BlockSpec of a k or v operand (shared by all heads in MQA)."""
    if config.is_mqa:
        return pl.BlockSpec((rows, d), lambda *ids: index(*ids)[1:])
    return pl.BlockSpec((None, rows, d), index)


def _soft_cap(config: _Config, s):
    if config.attn_logits_soft_cap is None:
        return s
    return jnp.tanh(s / config.attn_logits_soft_cap) * config.attn_logits_soft_cap


def _soft_cap_slope(config: _Config, capped):
    """The derivative of the soft cap at the logits whose capped value is ``capped``."""
    if config.attn_logits_soft_cap is None:
        return None
    return 1.0 - jnp.square(capped / config.attn_logits_soft_cap)


def _logits_and_keep(config: _Config, q, k, block_class, mask_ref, mask_cols, q_ids_ref,
                     kv_ids_ref, kv_cols, capped_out=None):
    """The (soft-capped) logits of a q block against k, mask_value where the mask drops
    them; the unmasked capped logits go to ``capped_out`` (a list) when given."""
    s = _soft_cap(config, lax.dot_general(q, k, NT_DIM_NUMBERS, preferred_element_type=_F32))
    if capped_out is not None:
        capped_out.append(s)
    keep = None
    if config.has_partial:
        partial_keep = mask_ref[:, mask_cols] != 0
        keep = jnp.logical_or(partial_keep, block_class == 2)
    if config.segmented:
        same = q_ids_ref[:, 0:1] == kv_ids_ref[0:1, kv_cols]
        keep = same if keep is None else jnp.logical_and(keep, same)
    if keep is not None:
        s = jnp.where(keep, s, config.mask_value)
    return s


def _split_refs(config: _Config, refs, n_out: int, n_scratch: int):
    """The optional operand references (mask, segment ids, sinks), then outputs, scratch."""
    refs = list(refs)
    mask_ref = refs.pop(0) if config.has_partial else None
    q_ids_ref, kv_ids_ref = (refs.pop(0), refs.pop(0)) if config.segmented else (None, None)
    extra = refs[:len(refs) - n_out - n_scratch]
    outs = refs[len(extra):len(extra) + n_out]
    return mask_ref, q_ids_ref, kv_ids_ref, extra, outs, refs[len(refs) - n_scratch:]


def _forward_kernel(config: _Config, save_residuals: bool, data_next_ref, block_mask_ref,
                    mask_next_ref, q_ref, k_ref, v_ref, *refs):
    del data_next_ref, mask_next_ref  # (read by the index maps)
    n_out = 2 if save_residuals else 1
    mask_ref, q_ids_ref, kv_ids_ref, extra, outs, (m_ref, l_ref, acc_ref) = _split_refs(
        config, refs, n_out, 3)
    h, i, j = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    block_class = block_mask_ref[_info_head(config, h), i, j]

    @pl.when(j == 0)
    def _init():
        if config.has_sinks:
            sink = extra[0][h]
            m_ref[...] = jnp.full(m_ref.shape, sink, _F32)
            l_ref[...] = jnp.ones(l_ref.shape, _F32)
        else:
            m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, _F32)
            l_ref[...] = jnp.zeros(l_ref.shape, _F32)
        acc_ref[...] = jnp.zeros(acc_ref.shape, _F32)

    @pl.when(block_class != 0)
    def _visit():
        q = q_ref[...]
        step = config.block_sizes.block_kv_compute
        for c in range(config.block_sizes.block_kv // step):
            cols = pl.ds(c * step, step)
            s = _logits_and_keep(config, q, k_ref[cols, :], block_class, mask_ref, cols,
                                 q_ids_ref, kv_ids_ref, cols)
            m_prev, l_prev = m_ref[:, 0:1], l_ref[:, 0:1]
            m_new = jnp.maximum(m_prev, s.max(axis=-1, keepdims=True))
            alpha = jnp.exp(m_prev - m_new)
            p = jnp.exp(s - m_new)
            l_ref[...] = jnp.broadcast_to(alpha * l_prev + p.sum(axis=-1, keepdims=True),
                                          l_ref.shape)
            m_ref[...] = jnp.broadcast_to(m_new, m_ref.shape)
            pv = lax.dot_general(p.astype(v_ref.dtype), v_ref[cols, :], NN_DIM_NUMBERS,
                                 preferred_element_type=_F32)
            acc_ref[...] = alpha * acc_ref[...] + pv

    @pl.when(j == pl.num_programs(2) - 1)
    def _finish():
        total = l_ref[:, 0:1]
        outs[0][...] = (acc_ref[...] / total).astype(outs[0].dtype)
        if save_residuals:
            outs[1][...] = jnp.broadcast_to(m_ref[:, 0:1] + jnp.log(total), outs[1].shape)


def _forward_locate(config: _Config, h, i, j, data_next_ref, block_mask_ref, mask_next_ref):
    """(head, q block, kv block to fetch, partial mask block) at forward/dq grid step."""
    at = (_info_head(config, h), i, j)
    return h, i, data_next_ref[at], mask_next_ref[at]


def _dkv_locate(config: _Config, h, j, i, data_next_ref, block_mask_ref, mask_next_ref):
    """(head, q block to fetch, kv block, partial mask block) at dk/dv grid step."""
    at = (_info_head(config, h), i, j)
    return h, data_next_ref[at], j, mask_next_ref[at]


def _operands(config: _Config, locate, q, k, v, info, segment_ids, bq: int, bkv: int):
    """q, k, v, then the partial mask blocks and segment ids when used, with their specs;
    ``locate`` maps the grid ids and prefetched refs to (head, q block, kv block, mask)."""
    d = q.shape[-1]
    loc = functools.partial(locate, config)
    kv_index = lambda *a: (_kv_head(config, loc(*a)[0]), loc(*a)[2], 0)  # noqa: E731
    operands = [q, k, v]
    specs = [pl.BlockSpec((None, bq, d), lambda *a: (loc(*a)[0], loc(*a)[1], 0)),
             _kv_spec(config, bkv, d, kv_index), _kv_spec(config, bkv, d, kv_index)]
    if config.has_partial:
        partial = jnp.asarray(info.partial_mask_blocks)
        operands.append(partial.reshape((-1, *partial.shape[-2:])).astype(jnp.int32))
        specs.append(pl.BlockSpec((None, bq, bkv), lambda *a: (loc(*a)[3], 0, 0)))
    if config.segmented:
        q_len, kv_len = q.shape[1], k.shape[-2]
        operands.append(jnp.broadcast_to(segment_ids.q.astype(jnp.int32)[:, None],
                                         (q_len, NUM_LANES)))
        operands.append(jnp.broadcast_to(segment_ids.kv.astype(jnp.int32)[None, :],
                                         (NUM_SUBLANES, kv_len)))
        specs += [pl.BlockSpec((bq, NUM_LANES), lambda *a: (loc(*a)[1], 0)),
                  pl.BlockSpec((NUM_SUBLANES, bkv), lambda *a: (0, loc(*a)[2]))]
    return operands, specs


def _row_spec(bq: int, width: int, locate, config: _Config):
    """Spec of a per-q-row array [heads, q_seq_len, width] (out, logsumexp, do, di)."""
    loc = functools.partial(locate, config)
    return pl.BlockSpec((None, bq, width), lambda *a: (loc(*a)[0], loc(*a)[1], 0))


def _prefetched(config: _Config, info):
    block_mask = jnp.asarray(info.block_mask).astype(jnp.int32)
    mask_next = (jnp.zeros_like(block_mask) if info.mask_next is None
                 else jnp.asarray(info.mask_next).astype(jnp.int32))
    return [jnp.asarray(info.data_next).astype(jnp.int32), block_mask, mask_next]


def _sinks_operand(config: _Config, sinks):
    if not config.has_sinks:
        return [], []
    return [sinks.astype(_F32)], [pl.BlockSpec(memory_space=pltpu.SMEM)]


def _forward(config: _Config, info, q, k, v, segment_ids, sinks, save_residuals: bool):
    """The forward kernel: out [heads, q_seq_len, d] and logsumexp [heads, q_seq_len]."""
    bq, bkv = config.block_sizes.block_q, config.block_sizes.block_kv
    heads, q_len, d = q.shape
    kv_len = k.shape[-2]
    operands, specs = _operands(config, _forward_locate, q, k, v, info, segment_ids, bq, bkv)
    sink_ops, sink_specs = _sinks_operand(config, sinks)
    out_shape = [plax.ShapeDtypeStruct(q.shape, q.dtype)]
    out_specs = [_row_spec(bq, d, _forward_locate, config)]
    if save_residuals:
        out_shape.append(plax.ShapeDtypeStruct((heads, q_len, NUM_LANES), _F32))
        out_specs.append(_row_spec(bq, NUM_LANES, _forward_locate, config))
    name = get_kernel_name(config.is_mqa, save_residuals, config.segmented, "fwd")
    outs = pl.pallas_call(
        functools.partial(_forward_kernel, config, save_residuals),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=3, grid=(heads, q_len // bq, kv_len // bkv),
            in_specs=specs + sink_specs, out_specs=tuple(out_specs),
            scratch_shapes=[pltpu.VMEM((bq, NUM_LANES), _F32),
                            pltpu.VMEM((bq, NUM_LANES), _F32), pltpu.VMEM((bq, d), _F32)]),
        out_shape=tuple(out_shape),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "arbitrary", "arbitrary")),
        interpret=config.interpret, name=name,
    )(*_prefetched(config, info), *operands, *sink_ops)
    return outs[0], (outs[1][..., 0] if save_residuals else None)


# --- the backward kernels -------------------------------------------------------------------
def _probabilities_and_ds(config: _Config, q, k, v, do, lse, di, block_class, mask_ref,
                          q_ids_ref, kv_ids_ref):
    """Softmax probabilities of a (q block, kv block) pair from the saved logsumexp, and
    the logits' cotangent ``ds``."""
    capped = []
    s = _logits_and_keep(config, q, k, block_class, mask_ref, slice(None), q_ids_ref,
                         kv_ids_ref, slice(None), capped)
    p = jnp.exp(s - lse)
    dp = lax.dot_general(do, v, NT_DIM_NUMBERS, preferred_element_type=_F32)
    ds = p * (dp - di)
    slope = _soft_cap_slope(config, capped[0])
    return p, (ds if slope is None else ds * slope)


def _dq_kernel(config: _Config, data_next_ref, block_mask_ref, mask_next_ref, q_ref, k_ref,
               v_ref, *refs):
    del data_next_ref, mask_next_ref
    mask_ref, q_ids_ref, kv_ids_ref, (lse_ref, di_ref, do_ref), (dq_ref,), (acc_ref,) = (
        _split_refs(config, refs, 1, 1))
    h, i, j = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    block_class = block_mask_ref[_info_head(config, h), i, j]

    @pl.when(j == 0)
    def _init():
        acc_ref[...] = jnp.zeros(acc_ref.shape, _F32)

    @pl.when(block_class != 0)
    def _visit():
        k = k_ref[...]
        _, ds = _probabilities_and_ds(config, q_ref[...], k, v_ref[...], do_ref[...],
                                      lse_ref[:, 0:1], di_ref[:, 0:1], block_class, mask_ref,
                                      q_ids_ref, kv_ids_ref)
        acc_ref[...] += lax.dot_general(ds.astype(k.dtype), k, NN_DIM_NUMBERS,
                                        preferred_element_type=_F32)

    @pl.when(j == pl.num_programs(2) - 1)
    def _finish():
        dq_ref[...] = acc_ref[...].astype(dq_ref.dtype)


def _dkv_kernel(config: _Config, data_next_ref, block_mask_ref, mask_next_ref, q_ref, k_ref,
                v_ref, *refs):
    del data_next_ref, mask_next_ref
    (mask_ref, q_ids_ref, kv_ids_ref, (lse_ref, di_ref, do_ref), (dk_ref, dv_ref),
     (dk_acc, dv_acc)) = _split_refs(config, refs, 2, 2)
    h, j, i = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    block_class = block_mask_ref[_info_head(config, h), i, j]

    @pl.when(i == 0)
    def _init():
        dk_acc[...] = jnp.zeros(dk_acc.shape, _F32)
        dv_acc[...] = jnp.zeros(dv_acc.shape, _F32)

    @pl.when(block_class != 0)
    def _visit():
        q, do = q_ref[...], do_ref[...]
        p, ds = _probabilities_and_ds(config, q, k_ref[...], v_ref[...], do, lse_ref[:, 0:1],
                                      di_ref[:, 0:1], block_class, mask_ref, q_ids_ref,
                                      kv_ids_ref)
        dv_acc[...] += lax.dot_general(p.astype(do.dtype), do, _TN_DIM_NUMBERS,
                                       preferred_element_type=_F32)
        dk_acc[...] += lax.dot_general(ds.astype(q.dtype), q, _TN_DIM_NUMBERS,
                                       preferred_element_type=_F32)

    @pl.when(i == pl.num_programs(2) - 1)
    def _finish():
        dk_ref[...] = dk_acc[...]
        dv_ref[...] = dv_acc[...]


def _backward_call(config: _Config, phase: str, info, q, k, v, segment_ids, lse, di, do):
    """The dq kernel's dq, or the dk/dv kernel's per-q-head dk and dv (f32)."""
    sizes = config.block_sizes
    heads, q_len, d = q.shape
    kv_len = k.shape[-2]
    if phase == "dq":
        bq, bkv = ((sizes.block_q_dkv, sizes.block_kv_dkv) if sizes.use_fused_bwd_kernel
                   else (sizes.block_q_dq, sizes.block_kv_dq))
        locate, kernel = _forward_locate, _dq_kernel
        grid = (heads, q_len // bq, kv_len // bkv)
    else:
        bq, bkv, locate, kernel = sizes.block_q_dkv, sizes.block_kv_dkv, _dkv_locate, _dkv_kernel
        grid = (heads, kv_len // bkv, q_len // bq)
    operands, specs = _operands(config, locate, q, k, v, info, segment_ids, bq, bkv)
    rows = [jnp.broadcast_to(lse[..., None], (heads, q_len, NUM_LANES)),
            jnp.broadcast_to(di[..., None], (heads, q_len, NUM_LANES)), do]
    specs += [_row_spec(bq, NUM_LANES, locate, config), _row_spec(bq, NUM_LANES, locate, config),
              _row_spec(bq, d, locate, config)]
    if phase == "dq":
        out_shape = [plax.ShapeDtypeStruct(q.shape, _F32)]
        out_specs = [_row_spec(bq, d, locate, config)]
        scratch = [pltpu.VMEM((bq, d), _F32)]
    else:
        loc = functools.partial(locate, config)
        kv_rows = pl.BlockSpec((None, bkv, d), lambda *a: (loc(*a)[0], loc(*a)[2], 0))
        out_shape = [plax.ShapeDtypeStruct((heads, kv_len, d), _F32)] * 2
        out_specs = [kv_rows, kv_rows]
        scratch = [pltpu.VMEM((bkv, d), _F32), pltpu.VMEM((bkv, d), _F32)]
    return pl.pallas_call(
        functools.partial(kernel, config),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=3, grid=grid, in_specs=specs, out_specs=tuple(out_specs),
            scratch_shapes=scratch),
        out_shape=tuple(out_shape),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "arbitrary", "arbitrary")),
        interpret=config.interpret,
        name=get_kernel_name(config.is_mqa, False, config.segmented, phase),
    )(*_prefetched(config, info), *operands, *rows)


class _Info(NamedTuple):
    """A MaskInfo's arrays, as the custom_vjp carries them."""

    data_next: Any
    block_mask: Any
    mask_next: Any
    partial_mask_blocks: Any


def _arrays(info) -> _Info | None:
    if info is None:
        return None
    return _Info(info.data_next, info.block_mask, info.mask_next, info.partial_mask_blocks)


@functools.partial(plax.custom_vjp, nondiff_argnums=(0,))
def _splash_custom(config: _Config, fwd_info, dq_info, dkv_info, q, k, v, segment_ids, sinks):
    return _forward(config, fwd_info, q, k, v, segment_ids, sinks, False)[0]


def _splash_fwd(config: _Config, fwd_info, dq_info, dkv_info, q, k, v, segment_ids, sinks):
    out, lse = _forward(config, fwd_info, q, k, v, segment_ids, sinks, True)
    return out, (dq_info, dkv_info, q, k, v, segment_ids, sinks, out, lse)


def _sum_over_groups(config: _Config, per_head, dtype):
    heads, kv_len, d = per_head.shape
    if config.is_mqa:
        return per_head.sum(axis=0).astype(dtype)
    return per_head.reshape(config.kv_heads, heads // config.kv_heads, kv_len, d).sum(
        axis=1).astype(dtype)


def _splash_bwd(config: _Config, residuals, do):
    dq_info, dkv_info, q, k, v, segment_ids, sinks, out, lse = residuals
    if dkv_info is None or dq_info is None:
        raise ValueError("Differentiating splash attention needs the backward block sizes "
                         "(block_q_dkv, block_kv_dkv, block_q_dq, block_kv_dq) in BlockSizes.")
    di = jnp.sum(out.astype(_F32) * do.astype(_F32), axis=-1)
    do = do.astype(q.dtype)
    (dq,) = _backward_call(config, "dq", dq_info, q, k, v, segment_ids, lse, di, do)
    dk, dv = _backward_call(config, "dkv", dkv_info, q, k, v, segment_ids, lse, di, do)
    dsinks = None
    if sinks is not None:
        weight = jnp.exp(sinks.astype(_F32)[:, None] - lse)
        dsinks = (-jnp.sum(weight * di, axis=-1)).astype(sinks.dtype)
    return (None, None, None, dq.astype(q.dtype), _sum_over_groups(config, dk, k.dtype),
            _sum_over_groups(config, dv, v.dtype), None, dsinks)


_splash_custom.defvjp(_splash_fwd, _splash_bwd)


# --- the kernel object and its makers -------------------------------------------------------
def _check_inputs(config: _Config, q, k, v, segment_ids, sinks, q_len: int, kv_len: int):
    if q.ndim != 3:
        raise ValueError(f"Expected 3-dim 'query' tensor [heads, q_seq_len, head_dim], got "
                         f"shape {q.shape}.")
    kv_ndim = 2 if config.is_mqa else 3
    for name, x in (("key", k), ("value", v)):
        if x.ndim != kv_ndim:
            raise ValueError(f"Expected {kv_ndim}-dim '{name}' tensor for "
                             f"{'MQA' if config.is_mqa else 'MHA'}, got shape {x.shape}.")
    if k.shape != v.shape or k.shape[-1] != q.shape[-1]:
        raise ValueError(f"key {k.shape} and value {v.shape} must have one shape, with the "
                         f"query's head_dim {q.shape[-1]}.")
    if (q.shape[0], q.shape[1], k.shape[-2]) != (config.heads, q_len, kv_len):
        raise ValueError(f"The kernel was made for a mask of shape {(config.heads, q_len, kv_len)}"
                         f"; got q {q.shape} and k {k.shape}.")
    if not config.is_mqa and config.heads % k.shape[0]:
        raise ValueError(f"The number of kv heads {k.shape[0]} must divide the number of q "
                         f"heads {config.heads}.")
    if segment_ids is not None and (segment_ids.q.shape != (q_len,)
                                    or segment_ids.kv.shape != (kv_len,)):
        raise ValueError(f"segment_ids must be [q_seq_len]={q_len} and [kv_seq_len]={kv_len}, "
                         f"got {segment_ids.q.shape} and {segment_ids.kv.shape}.")
    if sinks is not None and sinks.shape != (config.heads,):
        raise ValueError(f"sinks must be one scalar per q head, shape ({config.heads},), got "
                         f"{sinks.shape}.")


@plax.tree_util.register_pytree_node_class
class SplashAttentionKernel:
    """A splash attention kernel for one mask: ``kernel(q, k, v, segment_ids=None,
    sinks=None)`` on one example (``vmap`` it over a batch). A pytree of its mask infos."""

    def __init__(self, fwd_mask_info, dq_mask_info, dkv_mask_info, **kwargs):
        self.kwargs = kwargs
        self.fwd_mask_info = fwd_mask_info
        self.dq_mask_info = dq_mask_info
        self.dkv_mask_info = dkv_mask_info

    def __call__(self, q, k, v, segment_ids: SegmentIds | None = None, sinks=None):
        kw = self.kwargs
        sizes = kw["block_sizes"]
        info = self.fwd_mask_info
        info_heads, q_blocks, kv_blocks = info.block_mask.shape
        q_len, kv_len = q_blocks * sizes.block_q, kv_blocks * sizes.block_kv
        config = _Config(
            block_sizes=sizes, is_mqa=kw["is_mqa"], mask_value=kw["mask_value"],
            attn_logits_soft_cap=kw["attn_logits_soft_cap"],
            interpret=bool(kw["interpret"]) or plax.default_backend() != "tpu",
            heads=q.shape[0] if q.ndim == 3 else -1,
            kv_heads=1 if kw["is_mqa"] or k.ndim != 3 else k.shape[0],
            info_heads=info_heads, has_partial=info.partial_mask_blocks is not None,
            segmented=segment_ids is not None, has_sinks=sinks is not None)
        _check_inputs(config, q, k, v, segment_ids, sinks, q_len, kv_len)
        if config.heads != info_heads and info_heads != 1:
            raise ValueError(f"The kernel's mask has {info_heads} heads; q has {config.heads}.")
        run = _compiled_call(config, bool(kw["save_residuals"]))
        return run(_arrays(info), _arrays(self.dq_mask_info), _arrays(self.dkv_mask_info), q,
                   k, v, segment_ids, sinks)

    def manual_sharding_spec(self, sharding):
        """The kernel's partition specs for a ``shard_map`` whose q operands are split by
        ``sharding`` (a NamedSharding of spec (heads axis, q sequence axis)): its mask infos
        split alike (a static mask's partial blocks replicated)."""
        info = self.fwd_mask_info
        shape = info.block_mask.shape
        try:
            shard_shape = sharding.shard_shape(shape)
        except ValueError as exc:
            raise ValueError("The sharding must divide the mask blocks evenly between "
                             "devices") from exc
        if shard_shape[-1] != shape[-1]:
            raise ValueError("Sharding the kv sequence dimension is not supported")
        spec = sharding.spec
        if len(spec) != 2:
            raise ValueError(f"The sharding's spec must name (heads, q sequence) axes, got "
                             f"{spec}.")
        spec = plax.sharding.PartitionSpec(*spec)

        def specs(one):
            if one is None:
                return None
            return mask_info_lib.MaskInfo(
                data_next=spec, mask_next=None if one.mask_next is None else spec,
                block_mask=spec,
                partial_mask_blocks=None if one.partial_mask_blocks is None else (
                    spec if one.is_dynamic_mask else plax.sharding.PartitionSpec()),
                q_sequence=None, is_dynamic_mask=one.is_dynamic_mask)
        return SplashAttentionKernel(specs(info), specs(self.dq_mask_info),
                                     specs(self.dkv_mask_info), **self.kwargs)

    def tree_flatten(self):
        infos = (self.fwd_mask_info, self.dq_mask_info, self.dkv_mask_info)
        children = tuple(None if i is None else tuple(i[:5]) for i in infos)
        flags = tuple(None if i is None else i.is_dynamic_mask for i in infos)
        return children, (tuple(sorted(self.kwargs.items())), flags)

    @classmethod
    def tree_unflatten(cls, aux, values):
        kwargs, flags = aux
        infos = (None if v is None else mask_info_lib.MaskInfo(*v, is_dynamic_mask=f)
                 for v, f in zip(values, flags))
        return cls(*infos, **dict(kwargs))


@functools.lru_cache(maxsize=64)
def _compiled_call(config: _Config, save_residuals: bool):
    """The kernels for ``config``, jitted once (calls with the same shapes reuse them)."""
    def run(fwd_info, dq_info, dkv_info, q, k, v, segment_ids, sinks):
        if save_residuals:  # (out, (logsumexp,)); not differentiable, as in JAX
            out, lse = _forward(config, fwd_info, q, k, v, segment_ids, sinks, True)
            return out, (lse,)
        return _splash_custom(config, fwd_info, dq_info, dkv_info, q, k, v, segment_ids,
                              sinks)
    return plax.jit(run)


def _device_info(info):
    """``info`` with its numpy arrays made device arrays."""
    return mask_info_lib.MaskInfo(*(jnp.asarray(x) if isinstance(x, np.ndarray) else x
                                    for x in info))


def _make_splash_attention(mask, *, block_sizes: BlockSizes | None = None, is_mqa: bool,
                           save_residuals: bool = False, mask_value: float = DEFAULT_MASK_VALUE,
                           attn_logits_soft_cap: float | None = None,
                           downcast_smem_data: bool = True, head_shards: int,
                           q_seq_shards: int, residual_checkpoint_name: str | None = None,
                           interpret: bool = False) -> SplashAttentionKernel:
    if len(mask.shape) != 3:
        raise ValueError(f"Unexpected mask shape: {mask.shape}")
    if isinstance(mask, np.ndarray):
        mask = mask_lib.MultiHeadMask([mask_lib.NumpyMask(m) for m in mask])
    if block_sizes is None:
        block_sizes = BlockSizes.get_default()
    shards = dict(downcast_smem_data=downcast_smem_data, head_shards=head_shards,
                  q_seq_shards=q_seq_shards)
    dynamic = not isinstance(mask, mask_lib.Mask)  # a (possibly traced) array
    process = mask_info_lib.process_dynamic_mask if dynamic else mask_info_lib.process_mask
    process_dkv = (mask_info_lib.process_dynamic_mask_dkv if dynamic
                   else mask_info_lib.process_mask_dkv)
    fwd_info, _ = process(mask, (block_sizes.block_q, block_sizes.block_kv), **shards)
    dq_info = dkv_info = None
    if block_sizes.has_backward_blocks:
        dq_blocks = ((block_sizes.block_q_dkv, block_sizes.block_kv_dkv)
                     if block_sizes.use_fused_bwd_kernel
                     else (block_sizes.block_q_dq, block_sizes.block_kv_dq))
        dq_info, _ = process(mask, dq_blocks, **shards)
        dkv_info, _ = process_dkv(
            mask, (block_sizes.block_q_dkv, block_sizes.block_kv_dkv), **shards)
    del residual_checkpoint_name  # (plax's residuals carry no checkpoint name)
    return SplashAttentionKernel(
        *(None if i is None else _device_info(i) for i in (fwd_info, dq_info, dkv_info)),
        block_sizes=block_sizes, is_mqa=is_mqa, save_residuals=save_residuals,
        mask_value=mask_value, attn_logits_soft_cap=attn_logits_soft_cap,
        interpret=interpret)


make_splash_mha = partial(_make_splash_attention, is_mqa=False)
make_splash_mqa = partial(_make_splash_attention, is_mqa=True)
make_splash_mha_single_device = partial(make_splash_mha, is_mqa=False, head_shards=1,
                                        q_seq_shards=1)
make_splash_mqa_single_device = partial(make_splash_mha, is_mqa=True, head_shards=1,
                                        q_seq_shards=1)
