"""Flash attention for TPUs, as ``jax.experimental.pallas.ops.tpu.flash_attention``.

``flash_attention(q, k, v, ab, segment_ids, causal=, sm_scale=, block_sizes=)`` computes
``softmax((q @ k^T + ab) * sm_scale, masked) @ v`` over ``[batch, heads, seq, head_dim]``
arrays without materialising the ``seq x seq`` logits: the forward kernel keeps a running row
maximum and row sum (an online softmax) in VMEM scratch while the grid's last axis walks the
key/value blocks, and the backward pass is two more kernels (one accumulating dk and dv over
query blocks, one accumulating dq over key blocks) tied to the forward by a ``custom_vjp``.
Under ``causal=True`` the blocks wholly above the diagonal are skipped, and their index maps
point at the block already in VMEM so no copy is made for them.

On a backend other than a TPU the kernels run in interpret mode.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import numpy as np

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu

__all__ = ["flash_attention", "BlockSizes", "SegmentIds", "mha_reference",
           "mha_reference_no_custom_vjp", "mha_reference_bwd", "below_or_on_diag",
           "DEFAULT_MASK_VALUE", "MIN_BLOCK_SIZE", "NUM_LANES", "NUM_SUBLANES",
           "TRANS_B_DIM_NUMBERS"]

# Finite, so a row whose every key is masked still has a well-defined (uniform) softmax.
DEFAULT_MASK_VALUE = -0.7 * float(np.finfo(np.float32).max)
NUM_LANES = 128
NUM_SUBLANES = 8
MIN_BLOCK_SIZE = 128
# dot_general dimension numbers of ``a @ b.T`` for 2D a and b.
TRANS_B_DIM_NUMBERS = (((1,), (1,)), ((), ()))
_F32 = np.float32


class SegmentIds(NamedTuple):
    """Segment ids of the queries (``q``: [batch, q_seq_len]) and keys (``kv``: [batch,
    kv_seq_len]); a query attends only to keys with its own id."""

    q: Any
    kv: Any


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    """Tile sizes of the flash-attention kernels (they change speed, not results).

    Forward: ``block_q`` query rows and ``block_k_major`` keys per grid step, the keys taken
    ``block_k`` at a time, ``block_b`` batch entries per step. Backward: the ``*_dkv`` sizes
    for the dk/dv kernel, the ``*_dq`` sizes for the dq kernel (all needed to differentiate).
    """

    block_q: int
    block_k_major: int
    block_k: int
    block_b: int
    block_q_major_dkv: int | None = None
    block_k_major_dkv: int | None = None
    block_k_dkv: int | None = None
    block_q_dkv: int | None = None
    block_k_major_dq: int | None = None
    block_k_dq: int | None = None
    block_q_dq: int | None = None

    def __post_init__(self):
        pairs = [("block_k", "", self.block_k_major, self.block_k),
                 ("block_q", "_dkv", self.block_q_major_dkv, self.block_q_dkv),
                 ("block_k", "_dkv", self.block_k_major_dkv, self.block_k_dkv),
                 ("block_k", "_dq", self.block_k_major_dq, self.block_k_dq)]
        for prefix, suffix, major, minor in pairs:
            if major is None or minor is None:
                continue
            if minor > major:
                raise ValueError(f"{prefix}{suffix}={minor} should be smaller than "
                                 f"{prefix}_major{suffix}={major}")
            if major % minor:
                raise ValueError(f"{prefix}{suffix}={minor} should divide "
                                 f"{prefix}_major{suffix}={major}")

    @property
    def has_backward_blocks(self) -> bool:
        """Whether every block size of the backward kernels is set."""
        return None not in (self.block_q_major_dkv, self.block_k_major_dkv, self.block_q_dkv,
                            self.block_k_dkv, self.block_k_major_dq, self.block_k_dq,
                            self.block_q_dq)

    @classmethod
    def get_default(cls, batch_size, num_heads, q_seq_len, kv_len, d_model):
        """128 everywhere (one batch entry a step), whatever the shapes."""
        del batch_size, num_heads, q_seq_len, kv_len, d_model
        return cls(block_q=128, block_k_major=128, block_k=128, block_b=1,
                   block_q_major_dkv=128, block_k_major_dkv=128, block_k_dkv=128,
                   block_q_dkv=128, block_k_major_dq=128, block_k_dq=128, block_q_dq=128)


def below_or_on_diag(r, r_blk_size, c, c_blk_size):
    """Whether block ``(r, c)`` (of ``r_blk_size`` rows and ``c_blk_size`` columns) counts as
    below or on the diagonal: its bottom-left corner is strictly below it."""
    return ((r + 1) * r_blk_size - 1) > (c * c_blk_size)


def _interpret() -> bool:
    """Kernels compile for a TPU, and run in interpret mode on any other backend."""
    return plax.default_backend() != "tpu"


def _offset(t, size: int):
    """The start of sub-block ``t`` of ``size`` elements (a traced ``t``: a hinted multiple)."""
    return t * size if isinstance(t, int) else pl.multiple_of(t * size, size)


def _loop(steps: int, body) -> None:
    """``body(t, carry)`` for t in range(steps) over sub-blocks of a tile: unrolled on a TPU
    (static offsets into the tiles), a loop in interpret mode (faster to compile), the body
    alone for one step."""
    if steps == 1:
        body(0, 0)
    else:
        lax.fori_loop(0, steps, body, 0, unroll=not _interpret())


@functools.partial(plax.jit, static_argnames=["causal", "sm_scale", "block_sizes", "debug"])
def flash_attention(q, k, v, ab=None, segment_ids=None, *, causal: bool = False,
                    sm_scale: float = 1.0, block_sizes: BlockSizes | None = None,
                    debug: bool = False):
    """Multi-head attention of ``q`` [batch, heads, q_seq_len, d] over ``k``, ``v`` [batch,
    heads, kv_seq_len, d]: ``softmax((q @ k^T + ab) * sm_scale) @ v``, with the bias ``ab``
    [batch, heads, q_seq_len, kv_seq_len], ``segment_ids`` and ``causal`` masking optional.
    Differentiable in q, k, v and ab (the backward block sizes must then be set)."""
    batch, heads, q_len, d = q.shape
    batch_k, heads_k, kv_len, d_k = k.shape
    batch_v, heads_v, kv_len_v, d_v = v.shape
    if batch != batch_k or batch != batch_v:
        raise ValueError(f"Batch size mismatch: got {batch}, {batch_k} and {batch_v} (for q, "
                         "k, v respectively)")
    if heads != heads_k or heads != heads_v:
        raise ValueError(f"Head count mismatch: got {heads}, {heads_k}, {heads_v} (for q, k, "
                         "v respectively)")
    if d != d_k:
        raise ValueError(f"Model dimension mismatch: got {d} and {d_k} (for q and k "
                         "respectively)")
    if d != d_v:
        raise NotImplementedError("V model dimension unequal to KV model dimension "
                                  f"unsupported: v has {d_v}, q and k have {d}")
    if kv_len != kv_len_v:
        raise ValueError(f"KV sequence length mismatch: got {kv_len} and {kv_len_v}")
    if ab is not None and tuple(ab.shape) != (batch, heads, q_len, kv_len):
        raise ValueError(f"Attention bias shape mismatch: expected (batch_size={batch}, "
                         f"num_heads={heads}, q_seq_len={q_len}, kv_seq_len={kv_len}), got "
                         f"{tuple(ab.shape)}")
    if segment_ids is not None:
        if tuple(segment_ids.q.shape) != (batch, q_len):
            raise ValueError(f"Q segment ids shape mismatch: expected (batch_size={batch}, "
                             f"q_seq_len={q_len},), got {tuple(segment_ids.q.shape)}")
        if tuple(segment_ids.kv.shape) != (batch, kv_len):
            raise ValueError(f"KV segment ids shape mismatch: expected (batch_size={batch}, "
                             f"kv_seq_len={kv_len},), got {tuple(segment_ids.kv.shape)}")
    if block_sizes is None:
        block_sizes = BlockSizes.get_default(batch, heads, q_len, kv_len, d)
    return _attention(q, k, v, ab, segment_ids, causal, sm_scale, block_sizes, debug)


# --- blocks and masks ---------------------------------------------------------------------
def _fit(name: str, block: int, dim_name: str, dim: int) -> int:
    """``block`` cut down to ``dim``; it must divide it."""
    block = min(int(block), dim)
    if dim % block:
        raise ValueError(f"{dim_name}={dim} should be divisible by {name}={block}")
    return block


def _segment_layouts(segment_ids):
    """Query ids as [batch, q_len, lanes] and key ids as [batch, sublanes, kv_len] int32:
    layouts whose blocks are whole vreg tiles; a kernel reads one column / one row."""
    if segment_ids is None:
        return []
    q_ids = segment_ids.q.astype(jnp.int32)
    kv_ids = segment_ids.kv.astype(jnp.int32)
    return [jnp.broadcast_to(q_ids[:, :, None], (*q_ids.shape, NUM_LANES)),
            jnp.broadcast_to(kv_ids[:, None, :], (kv_ids.shape[0], NUM_SUBLANES,
                                                  kv_ids.shape[1]))]


def _mask(shape, row0, col0, causal, q_ids, kv_ids):
    """Where a [rows, cols] tile of logits (its first element at (row0, col0)) may attend, or
    None where every element may; ``q_ids`` [rows, 1] and ``kv_ids`` [1, cols] or None."""
    mask = None
    if q_ids is not None:
        mask = q_ids == kv_ids
    if causal:
        rows = row0 + lax.broadcasted_iota(jnp.int32, shape, 0)
        cols = col0 + lax.broadcasted_iota(jnp.int32, shape, 1)
        below = cols <= rows
        mask = below if mask is None else jnp.logical_and(mask, below)
    return mask


def _logits(q, k, ab, sm_scale, mask):
    """``(q @ k^T + ab) * sm_scale`` in f32, masked elements set to DEFAULT_MASK_VALUE."""
    s = lax.dot_general(q, k, TRANS_B_DIM_NUMBERS, preferred_element_type=jnp.float32)
    if ab is not None:
        s = s + ab.astype(jnp.float32)
    if sm_scale != 1.0:
        s = s * sm_scale
    if mask is not None:
        s = jnp.where(mask, s, DEFAULT_MASK_VALUE)
    return s


def _unpack(refs, *counts):
    """``refs`` cut into groups of the given sizes (a size-0 group is None, size 1 the ref)."""
    out, at = [], 0
    for n in counts:
        group = refs[at:at + n]
        out.append(None if n == 0 else group[0] if n == 1 else tuple(group))
        at += n
    return out


def _compiler_params(*semantics):
    return pltpu.CompilerParams(dimension_semantics=semantics)


# --- the forward kernel -------------------------------------------------------------------
def _forward_kernel(*refs, has_ab, has_segments, residuals, causal, sm_scale, block_b,
                    block_q, block_k_major, block_k):
    (q_ref, k_ref, v_ref), ab_ref, seg_refs, o_ref, lse_ref, (m_sc, l_sc, acc_sc) = _unpack(
        refs, 3, int(has_ab), 2 * has_segments, 1, int(residuals), 3)
    i, j = pl.program_id(2), pl.program_id(3)

    @pl.when(j == 0)
    def _start():
        m_sc[...] = jnp.full(m_sc.shape, -jnp.inf, jnp.float32)
        l_sc[...] = jnp.zeros(l_sc.shape, jnp.float32)
        acc_sc[...] = jnp.zeros(acc_sc.shape, jnp.float32)

    def visit_block():
        for b in range(block_b):
            q = q_ref[b]
            q_ids = seg_refs[0][b][:, :1] if has_segments else None

            def kv_step(t, carry):
                start = _offset(t, block_k)
                cols = pl.ds(start, block_k)
                kv_ids = seg_refs[1][b, :1, cols] if has_segments else None
                mask = _mask((block_q, block_k), i * block_q, j * block_k_major + start,
                             causal, q_ids, kv_ids)
                s = _logits(q, k_ref[b, cols, :], ab_ref[b, :, cols] if has_ab else None,
                            sm_scale, mask)
                m_prev, l_prev = m_sc[b][:, :1], l_sc[b][:, :1]
                m_next = jnp.maximum(m_prev, jnp.max(s, axis=1, keepdims=True))
                rescale = jnp.exp(m_prev - m_next)
                p = jnp.exp(s - m_next)
                l_sc[b] = jnp.broadcast_to(rescale * l_prev + jnp.sum(p, axis=1, keepdims=True),
                                           (block_q, NUM_LANES))
                m_sc[b] = jnp.broadcast_to(m_next, (block_q, NUM_LANES))
                v = v_ref[b, cols, :]
                pv = lax.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)
                acc_sc[b] = acc_sc[b] * rescale + pv
                return carry
            _loop(block_k_major // block_k, kv_step)

    if causal:  # the block's first key at or left of its last query
        pl.when(j * block_k_major <= (i + 1) * block_q - 1)(visit_block)
    else:
        visit_block()

    @pl.when(j == pl.num_programs(3) - 1)
    def _finish():
        for b in range(block_b):
            l = l_sc[b][:, :1]
            o_ref[b] = (acc_sc[b] / l).astype(o_ref.dtype)
            if residuals:
                lse_ref[b] = jnp.broadcast_to(m_sc[b][:, :1] + jnp.log(l), (block_q, NUM_LANES))


def _last_kv_block(i, block_q, block_k):
    """The last key block of ``block_k`` holding a key that query block ``i`` (of
    ``block_q``) may see under causal masking."""
    return ((i + 1) * block_q - 1) // block_k


def _forward(q, k, v, ab, segment_ids, causal, sm_scale, block_sizes, debug, residuals):
    batch, heads, q_len, d = q.shape
    kv_len = k.shape[2]
    bb = _fit("block_b", block_sizes.block_b, "batch_size", batch)
    bq = _fit("block_q", block_sizes.block_q, "q_seq_len", q_len)
    bkm = _fit("block_k_major", block_sizes.block_k_major, "kv_seq_len", kv_len)
    bk = _fit("block_k", block_sizes.block_k, "block_k_major", bkm)

    def kv_block(i, j):
        return jnp.minimum(j, _last_kv_block(i, bq, bkm)) if causal else j

    def q_map(b, h, i, j):
        return (b, h, i, 0)

    def kv_map(b, h, i, j):
        return (b, h, kv_block(i, j), 0)

    in_specs = [pl.BlockSpec((bb, None, bq, d), q_map), pl.BlockSpec((bb, None, bkm, d), kv_map),
                pl.BlockSpec((bb, None, bkm, d), kv_map)]
    operands = [q, k, v]
    if ab is not None:
        in_specs.append(pl.BlockSpec((bb, None, bq, bkm),
                                     lambda b, h, i, j: (b, h, i, kv_block(i, j))))
        operands.append(ab)
    if segment_ids is not None:
        in_specs += [pl.BlockSpec((bb, bq, NUM_LANES), lambda b, h, i, j: (b, i, 0)),
                     pl.BlockSpec((bb, NUM_SUBLANES, bkm),
                                  lambda b, h, i, j: (b, 0, kv_block(i, j)))]
        operands += _segment_layouts(segment_ids)
    out_shape = [plax.ShapeDtypeStruct(q.shape, q.dtype)]
    out_specs = [pl.BlockSpec((bb, None, bq, d), q_map)]
    if residuals:
        out_shape.append(plax.ShapeDtypeStruct((batch, heads, q_len, NUM_LANES), _F32))
        out_specs.append(pl.BlockSpec((bb, None, bq, NUM_LANES), q_map))
    kernel = functools.partial(
        _forward_kernel, has_ab=ab is not None, has_segments=segment_ids is not None,
        residuals=residuals, causal=causal, sm_scale=sm_scale, block_b=bb, block_q=bq,
        block_k_major=bkm, block_k=bk)
    outs = pl.pallas_call(
        kernel, out_shape=tuple(out_shape),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=(batch // bb, heads, q_len // bq, kv_len // bkm),
            in_specs=in_specs, out_specs=out_specs,
            scratch_shapes=[pltpu.VMEM((bb, bq, NUM_LANES), _F32),
                            pltpu.VMEM((bb, bq, NUM_LANES), _F32),
                            pltpu.VMEM((bb, bq, d), _F32)]),
        compiler_params=_compiler_params("parallel", "parallel", "parallel", "arbitrary"),
        interpret=_interpret(), debug=debug, name="flash_attention_forward")(*operands)
    return tuple(outs) if residuals else outs[0]


# --- the backward kernels -----------------------------------------------------------------
def _probabilities_and_ds(q, k, v, do, lse, di, ab, sm_scale, mask):
    """The softmax ``p`` of a tile and ``ds``, the loss's gradient in ``q @ k^T + ab``."""
    s = _logits(q, k, ab, sm_scale, mask)
    p = jnp.exp(s - lse)
    dp = lax.dot_general(do, v, TRANS_B_DIM_NUMBERS, preferred_element_type=jnp.float32)
    ds = p * (dp - di)
    return p, ds * sm_scale if sm_scale != 1.0 else ds


def _dkv_kernel(*refs, has_ab, has_segments, causal, sm_scale, block_q_major, block_q,
                block_k_major, block_k):
    (q_ref, k_ref, v_ref, do_ref, lse_ref, di_ref), ab_ref, seg_refs, (dk_ref, dv_ref), \
        (dk_sc, dv_sc) = _unpack(refs, 6, int(has_ab), 2 * has_segments, 2, 2)
    kv_index, q_index = pl.program_id(2), pl.program_id(3)

    @pl.when(q_index == 0)
    def _start():
        dk_sc[...] = jnp.zeros(dk_sc.shape, jnp.float32)
        dv_sc[...] = jnp.zeros(dv_sc.shape, jnp.float32)

    def visit_block():
        def q_step(t, carry):
            q_start = _offset(t, block_q)
            rows = pl.ds(q_start, block_q)
            q, do = q_ref[rows, :], do_ref[rows, :]
            lse, di = lse_ref[rows, :][:, :1], di_ref[rows, :][:, :1]
            q_ids = seg_refs[0][rows, :][:, :1] if has_segments else None

            def k_step(u, carry):
                k_start = _offset(u, block_k)
                cols = pl.ds(k_start, block_k)
                kv_ids = seg_refs[1][:1, cols] if has_segments else None
                mask = _mask((block_q, block_k), q_index * block_q_major + q_start,
                             kv_index * block_k_major + k_start, causal, q_ids, kv_ids)
                k, v = k_ref[cols, :], v_ref[cols, :]
                p, ds = _probabilities_and_ds(q, k, v, do, lse, di,
                                              ab_ref[rows, cols] if has_ab else None,
                                              sm_scale, mask)
                dv_sc[cols, :] = dv_sc[cols, :] + lax.dot(
                    p.T.astype(do.dtype), do, preferred_element_type=jnp.float32)
                dk_sc[cols, :] = dk_sc[cols, :] + lax.dot(
                    ds.T.astype(q.dtype), q, preferred_element_type=jnp.float32)
                return carry
            _loop(block_k_major // block_k, k_step)
            return carry
        _loop(block_q_major // block_q, q_step)

    if causal:  # the query block's last row at or below the key block's first column
        pl.when((q_index + 1) * block_q_major - 1 >= kv_index * block_k_major)(visit_block)
    else:
        visit_block()

    @pl.when(q_index == pl.num_programs(3) - 1)
    def _finish():
        dk_ref[...] = dk_sc[...].astype(dk_ref.dtype)
        dv_ref[...] = dv_sc[...].astype(dv_ref.dtype)


def _dq_kernel(*refs, has_ab, has_segments, causal, sm_scale, block_q, block_k_major,
               block_k):
    (q_ref, k_ref, v_ref, do_ref, lse_ref, di_ref), ab_ref, seg_refs, dq_ref, dab_ref, \
        dq_sc = _unpack(refs, 6, int(has_ab), 2 * has_segments, 1, int(has_ab), 1)
    q_index, kv_index = pl.program_id(2), pl.program_id(3)

    @pl.when(kv_index == 0)
    def _start():
        dq_sc[...] = jnp.zeros(dq_sc.shape, jnp.float32)

    def visit_block():
        q, do = q_ref[...], do_ref[...]
        lse, di = lse_ref[...][:, :1], di_ref[...][:, :1]
        q_ids = seg_refs[0][...][:, :1] if has_segments else None

        def k_step(u, carry):
            k_start = _offset(u, block_k)
            cols = pl.ds(k_start, block_k)
            kv_ids = seg_refs[1][:1, cols] if has_segments else None
            mask = _mask((block_q, block_k), q_index * block_q,
                         kv_index * block_k_major + k_start, causal, q_ids, kv_ids)
            k, v = k_ref[cols, :], v_ref[cols, :]
            _, ds = _probabilities_and_ds(q, k, v, do, lse, di,
                                          ab_ref[:, cols] if has_ab else None, sm_scale, mask)
            if has_ab:
                dab_ref[:, cols] = ds.astype(dab_ref.dtype)
            dq_sc[...] = dq_sc[...] + lax.dot(ds.astype(k.dtype), k,
                                              preferred_element_type=jnp.float32)
            return carry
        _loop(block_k_major // block_k, k_step)

    if causal:
        run = kv_index * block_k_major <= (q_index + 1) * block_q - 1
        pl.when(run)(visit_block)
        if has_ab:  # a skipped block's bias gets no gradient
            @pl.when(jnp.logical_not(run))
            def _zero_dab():
                dab_ref[...] = jnp.zeros(dab_ref.shape, dab_ref.dtype)
    else:
        visit_block()

    @pl.when(kv_index == pl.num_programs(3) - 1)
    def _finish():
        dq_ref[...] = dq_sc[...].astype(dq_ref.dtype)


def _backward_operands(q, k, v, do, lse, di, ab, segment_ids, q_block, kv_block, blocks):
    """Operands and BlockSpecs shared by both backward kernels; ``q_block(b, h, x, y)`` and
    ``kv_block(...)`` give the query and key block indices of a grid point."""
    d = q.shape[-1]
    bq, bk = blocks

    def rows(b, h, x, y):
        return (b, h, q_block(x, y), 0)

    def keys(b, h, x, y):
        return (b, h, kv_block(x, y), 0)

    specs = [pl.BlockSpec((None, None, bq, d), rows), pl.BlockSpec((None, None, bk, d), keys),
             pl.BlockSpec((None, None, bk, d), keys), pl.BlockSpec((None, None, bq, d), rows),
             pl.BlockSpec((None, None, bq, NUM_LANES), rows),
             pl.BlockSpec((None, None, bq, NUM_LANES), rows)]
    operands = [q, k, v, do, lse, di]
    if ab is not None:
        specs.append(pl.BlockSpec((None, None, bq, bk), lambda b, h, x, y: (
            b, h, q_block(x, y), kv_block(x, y))))
        operands.append(ab)
    if segment_ids is not None:
        specs += [pl.BlockSpec((None, bq, NUM_LANES), lambda b, h, x, y: (b, q_block(x, y), 0)),
                  pl.BlockSpec((None, NUM_SUBLANES, bk),
                               lambda b, h, x, y: (b, 0, kv_block(x, y)))]
        operands += _segment_layouts(segment_ids)
    return operands, specs


def _backward_dkv(q, k, v, ab, segment_ids, lse, do, di, causal, sm_scale, block_sizes,
                  debug):
    batch, heads, q_len, d = q.shape
    kv_len = k.shape[2]
    bqm = _fit("block_q_major_dkv", block_sizes.block_q_major_dkv, "q_seq_len", q_len)
    bq = _fit("block_q_dkv", block_sizes.block_q_dkv, "block_q_major_dkv", bqm)
    bkm = _fit("block_k_major_dkv", block_sizes.block_k_major_dkv, "kv_seq_len", kv_len)
    bk = _fit("block_k_dkv", block_sizes.block_k_dkv, "block_k_major_dkv", bkm)

    def q_block(kv_i, q_i):  # the skipped blocks above the diagonal reuse the first needed
        return jnp.maximum(q_i, (kv_i * bkm) // bqm) if causal else q_i

    operands, in_specs = _backward_operands(q, k, v, do, lse, di, ab, segment_ids, q_block,
                                            lambda kv_i, q_i: kv_i, (bqm, bkm))
    kv_out = pl.BlockSpec((None, None, bkm, d), lambda b, h, kv_i, q_i: (b, h, kv_i, 0))
    kernel = functools.partial(
        _dkv_kernel, has_ab=ab is not None, has_segments=segment_ids is not None,
        causal=causal, sm_scale=sm_scale, block_q_major=bqm, block_q=bq, block_k_major=bkm,
        block_k=bk)
    return pl.pallas_call(
        kernel, out_shape=(plax.ShapeDtypeStruct(k.shape, k.dtype),
                           plax.ShapeDtypeStruct(v.shape, v.dtype)),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=(batch, heads, kv_len // bkm, q_len // bqm),
            in_specs=in_specs, out_specs=(kv_out, kv_out),
            scratch_shapes=[pltpu.VMEM((bkm, d), _F32), pltpu.VMEM((bkm, d), _F32)]),
        compiler_params=_compiler_params("parallel", "parallel", "parallel", "arbitrary"),
        interpret=_interpret(), debug=debug, name="flash_attention_dkv")(*operands)


def _backward_dq(q, k, v, ab, segment_ids, lse, do, di, causal, sm_scale, block_sizes, debug):
    batch, heads, q_len, d = q.shape
    kv_len = k.shape[2]
    bq = _fit("block_q_dq", block_sizes.block_q_dq, "q_seq_len", q_len)
    bkm = _fit("block_k_major_dq", block_sizes.block_k_major_dq, "kv_seq_len", kv_len)
    bk = _fit("block_k_dq", block_sizes.block_k_dq, "block_k_major_dq", bkm)

    def kv_block(q_i, kv_i):
        return jnp.minimum(kv_i, _last_kv_block(q_i, bq, bkm)) if causal else kv_i

    operands, in_specs = _backward_operands(q, k, v, do, lse, di, ab, segment_ids,
                                            lambda q_i, kv_i: q_i, kv_block, (bq, bkm))
    out_shape = [plax.ShapeDtypeStruct(q.shape, q.dtype)]
    out_specs = [pl.BlockSpec((None, None, bq, d), lambda b, h, q_i, kv_i: (b, h, q_i, 0))]
    if ab is not None:  # every block of dab is written, so its index map is the plain one
        out_shape.append(plax.ShapeDtypeStruct(ab.shape, ab.dtype))
        out_specs.append(pl.BlockSpec((None, None, bq, bkm),
                                      lambda b, h, q_i, kv_i: (b, h, q_i, kv_i)))
    kernel = functools.partial(
        _dq_kernel, has_ab=ab is not None, has_segments=segment_ids is not None,
        causal=causal, sm_scale=sm_scale, block_q=bq, block_k_major=bkm, block_k=bk)
    outs = pl.pallas_call(
        kernel, out_shape=tuple(out_shape),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=(batch, heads, q_len // bq, kv_len // bkm),
            in_specs=in_specs, out_specs=out_specs,
            scratch_shapes=[pltpu.VMEM((bq, d), _F32)]),
        compiler_params=_compiler_params("parallel", "parallel", "parallel", "arbitrary"),
        interpret=_interpret(), debug=debug, name="flash_attention_dq")(*operands)
    return outs[0], (outs[1] if ab is not None else None)


# --- the custom_vjp -----------------------------------------------------------------------
@functools.partial(plax.custom_vjp, nondiff_argnums=(5, 6, 7, 8))
def _attention(q, k, v, ab, segment_ids, causal, sm_scale, block_sizes, debug):
    return _forward(q, k, v, ab, segment_ids, causal, sm_scale, block_sizes, debug, False)


def _attention_fwd(q, k, v, ab, segment_ids, causal, sm_scale, block_sizes, debug):
    o, lse = _forward(q, k, v, ab, segment_ids, causal, sm_scale, block_sizes, debug, True)
    return o, (q, k, v, ab, segment_ids, o, lse)


def _attention_bwd(causal, sm_scale, block_sizes, debug, residuals, do):
    q, k, v, ab, segment_ids, o, lse = residuals
    if not block_sizes.has_backward_blocks:
        raise ValueError("Program is being differentiated, but not all backward blocks are "
                         f"specified: {block_sizes}")
    di = jnp.sum(o.astype(jnp.float32) * do.astype(jnp.float32), axis=-1, keepdims=True)
    di = jnp.broadcast_to(di, (*di.shape[:-1], NUM_LANES))
    dk, dv = _backward_dkv(q, k, v, ab, segment_ids, lse, do, di, causal, sm_scale,
                           block_sizes, debug)
    dq, dab = _backward_dq(q, k, v, ab, segment_ids, lse, do, di, causal, sm_scale,
                           block_sizes, debug)
    return dq, dk, dv, dab, None


_attention.defvjp(_attention_fwd, _attention_bwd)


# --- references ---------------------------------------------------------------------------
def _reference_logits(q, k, ab, segment_ids, causal, mask_value, sm_scale):
    """``(q @ k^T + ab) * sm_scale`` in f32 with ``mask_value`` added where attention is
    masked."""
    logits = jnp.einsum("bhqc,bhkc->bhqk", q.astype(jnp.float32), k.astype(jnp.float32))
    if ab is not None:
        logits = logits + ab
    if sm_scale != 1.0:
        logits = logits * sm_scale
    mask = None
    if segment_ids is not None:
        mask = (segment_ids.q[:, :, None] == segment_ids.kv[:, None, :])[:, None]
    if causal:
        shape = (q.shape[2], k.shape[2])
        below = (lax.broadcasted_iota(jnp.int32, shape, 1)
                 <= lax.broadcasted_iota(jnp.int32, shape, 0))[None, None]
        mask = below if mask is None else jnp.logical_and(mask, below)
    return logits if mask is None else logits + jnp.where(mask, 0.0, mask_value)


def mha_reference_no_custom_vjp(q, k, v, ab=None, segment_ids=None, *, causal=False,
                                mask_value=DEFAULT_MASK_VALUE, sm_scale=1.0,
                                save_residuals=False):
    """Attention computed whole with jnp (the logits materialised): the kernels' reference.
    With ``save_residuals`` also the softmax's row sums ``l`` and row maxima ``m``."""
    logits = _reference_logits(q, k, ab, segment_ids, causal, mask_value, sm_scale)
    m = logits.max(axis=-1)
    unnormalized = jnp.exp(logits - m[..., None])
    l = unnormalized.sum(axis=-1)
    out = jnp.einsum("bhqk,bhkc->bhqc", unnormalized / l[..., None], v.astype(jnp.float32))
    out = out.astype(q.dtype)
    return (out, l, m) if save_residuals else out


@functools.partial(plax.jit, static_argnames=["causal", "mask_value", "sm_scale"])
@plax.default_matmul_precision("bfloat16")
def mha_reference(q, k, v, ab, segment_ids=None, causal=False, mask_value=DEFAULT_MASK_VALUE,
                  sm_scale=1.0):
    """``mha_reference_no_custom_vjp`` with its gradient given by ``mha_reference_bwd``."""
    return _reference(q, k, v, ab, segment_ids, causal, mask_value, sm_scale)


@functools.partial(plax.custom_vjp, nondiff_argnums=(5, 6, 7))
def _reference(q, k, v, ab, segment_ids, causal, mask_value, sm_scale):
    return mha_reference_no_custom_vjp(q, k, v, ab, segment_ids, causal=causal,
                                       mask_value=mask_value, sm_scale=sm_scale)


def _reference_fwd(q, k, v, ab, segment_ids, causal, mask_value, sm_scale):
    out, l, m = mha_reference_no_custom_vjp(q, k, v, ab, segment_ids, causal=causal,
                                            mask_value=mask_value, sm_scale=sm_scale,
                                            save_residuals=True)
    return out, (q, k, v, ab, segment_ids, out, l, m)


def mha_reference_bwd(q, k, v, ab, segment_ids, o, l, m, do, causal=False,
                      mask_value=DEFAULT_MASK_VALUE, sm_scale=1.0):
    """The gradients ``(dq, dk, dv, dab)`` of ``mha_reference`` (``dab`` None without a
    bias), from its output ``o``, row sums ``l``, row maxima ``m`` and output cotangent."""
    logits = _reference_logits(q, k, ab, segment_ids, causal, mask_value, sm_scale)
    p = jnp.exp(logits - m[..., None]) / l[..., None]
    do32 = do.astype(jnp.float32)
    dv = jnp.einsum("bhqk,bhqd->bhkd", p, do32).astype(v.dtype)
    dp = jnp.einsum("bhqd,bhkd->bhqk", do32, v.astype(jnp.float32))
    di = jnp.sum(o.astype(jnp.float32) * do32, axis=-1, keepdims=True)
    ds = (dp - di) * p * sm_scale  # the gradient in q @ k^T + ab
    dk = jnp.einsum("bhqd,bhqk->bhkd", q.astype(jnp.float32), ds).astype(k.dtype)
    dq = jnp.einsum("bhqk,bhkd->bhqd", ds, k.astype(jnp.float32)).astype(q.dtype)
    return dq, dk, dv, (ds.astype(ab.dtype) if ab is not None else None)


def _reference_bwd(causal, mask_value, sm_scale, residuals, do):
    q, k, v, ab, segment_ids, o, l, m = residuals
    dq, dk, dv, dab = mha_reference_bwd(q, k, v, ab, segment_ids, o, l, m, do, causal=causal,
                                        mask_value=mask_value, sm_scale=sm_scale)
    return dq, dk, dv, dab, None


_reference.defvjp(_reference_fwd, _reference_bwd)
