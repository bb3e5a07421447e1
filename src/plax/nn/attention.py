"""Scaled dot-product attention (``plax.nn.dot_product_attention``), computed as JAX's XLA
implementation computes it.

Layouts are ``BTNH`` (batch, query length, heads, head size) for the query and
``BSKH`` for the key and value; ``N`` must be a multiple of ``K`` (grouped-query
attention: each key/value head serves ``N // K`` query heads). Logits are
computed in at least float32, masked positions get a large negative logit, the
softmax runs in float32 and the probabilities are cast to the key's dtype.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from plax import numpy as jnp
from plax import lax
from plax.core import dtypes
from plax.nn.functions import logsumexp, softmax

__all__ = ["dot_product_attention"]



def _as_4d(t):
    t = jnp.asarray(t)
    return jnp.expand_dims(t, tuple(range(4 - t.ndim))) if t.ndim < 4 else t


def _check(t, shape: Sequence[int], dtype, name: str) -> None:
    if t is None:
        return
    if t.ndim != len(shape):
        raise ValueError(f"{name} ndim should be {len(shape)}, but got {t.ndim}")
    if dtype is not None and t.dtype != dtype:
        raise ValueError(f"{name} dtype should be {dtype}, but got {t.dtype}")
    if any(want != -1 and got != want for got, want in zip(t.shape, shape)):
        raise ValueError(f"{name} shape should be {list(shape)}: but got {t.shape}")


# JAX's words where cuDNN's fused attention cannot run; plax has no cuDNN attention kernels.
NO_CUDNN_ATTENTION = ("cuDNN is not detected: plax runs no cuDNN fused-attention kernels. "
                      "dot_product_attention computes attention with implementation='xla' (or "
                      "None) on every backend.")


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal=False, query_seq_lengths=None, key_value_seq_lengths=None,
                          local_window_size=None, implementation=None, return_residual=False):
    """``softmax(q k^T * scale + bias, masked) v`` over the key positions, per head.

    ``mask`` (bool, broadcastable to ``BNTS``) keeps positions where True; ``is_causal``
    keeps key positions ``<=`` the query's; ``local_window_size`` ``(left, right)`` (or one
    int for both) keeps a band around the diagonal; the sequence lengths mask padding.
    With ``return_residual`` the log-sum-exp of the logits (``BTN``) is returned too.
    """
    if implementation == "cudnn":
        raise RuntimeError(NO_CUDNN_ATTENTION)
    if implementation not in (None, "xla"):
        raise ValueError(f"Unsupported implementation option: {implementation} (give 'xla' "
                         "or None).")
    out_shape = jnp.asarray(query).shape
    q, k, v = _as_4d(query), _as_4d(key), _as_4d(value)
    bias = None if bias is None else _as_4d(bias)
    mask = None if mask is None else _as_4d(mask)
    q_len = None if query_seq_lengths is None else jnp.asarray(query_seq_lengths)
    kv_len = None if key_value_seq_lengths is None else jnp.asarray(key_value_seq_lengths)
    if isinstance(local_window_size, int):
        local_window_size = (local_window_size, local_window_size)
    B, S, K, H = k.shape
    _check(v, [B, S, K, H], k.dtype, "value")
    _check(q, [B, -1, -1, H], k.dtype, "query")
    _check(mask, [-1] * 4, np.dtype(bool), "mask")
    _check(bias, [-1] * 4, None, "bias")
    _check(q_len, [B], np.dtype(np.int32), "query_seq_lengths")
    _check(kv_len, [B], np.dtype(np.int32), "key_value_seq_lengths")
    N = q.shape[2]
    if N % K:
        raise ValueError(f"The number of query heads must be a multiple of key/value heads, "
                         f"but got {N} vs {K}")
    scale = 1.0 / np.sqrt(H) if scale is None else scale
    out = _attention(q, k, v, bias, mask, is_causal, scale, q_len, kv_len, local_window_size,
                     return_residual)
    if return_residual:
        encoded, lse = out
        return jnp.reshape(encoded, out_shape), jnp.reshape(lse, out_shape[:-1])
    return jnp.reshape(out, out_shape)


def _grouped(t, K, G):
    """A ``BNTS`` bias or mask as ``BKGTS`` (a single head is shared by every group)."""
    if t is None:
        return None
    b, n, tq, s = t.shape
    if n == 1:
        return jnp.broadcast_to(t[:, :, None], (b, 1, G, tq, s))
    return jnp.reshape(t, (b, K, G, tq, s))


def _attention(q, k, v, bias, mask, is_causal, scale, q_len, kv_len, window, return_residual):
    B, T, N, H = q.shape
    S, K = k.shape[1], k.shape[2]
    G = N // K
    q = jnp.reshape(q, (B, T, K, G, H))
    logits_dtype = jnp.promote_types(q.dtype, np.float32)
    logits = jnp.einsum("BTKGH,BSKH->BKGTS", q, k, preferred_element_type=logits_dtype)
    logits = logits * jnp.array(scale, dtype=logits.dtype)
    if bias is not None:
        logits = (logits + _grouped(bias, K, G)).astype(logits.dtype)
    keep = _combined_mask(_grouped(mask, K, G), is_causal, T, S, q_len, kv_len, window)
    if keep is not None:
        big_negative = min(float(dtypes.finfo(logits.dtype).max),
                           float(np.finfo(np.float32).max)) * -0.7
        logits = jnp.where(keep, logits, jnp.asarray(big_negative, logits.dtype))
    logits = logits.astype(np.float32)
    probs = softmax(logits, axis=-1).astype(k.dtype)
    encoded = jnp.einsum("BKGTS,BSKH->BTKGH", probs, v)
    if q_len is not None:
        rows = jnp.arange(T)[None, :] < q_len[:, None]
        encoded = encoded * rows[:, :, None, None, None].astype(encoded.dtype)
    encoded = jnp.reshape(encoded, (B, T, N, H))
    if not return_residual:
        return encoded
    lse = logsumexp(logits, axis=-1).astype(k.dtype)
    lse = jnp.transpose(jnp.reshape(lse, (B, N, T)), (0, 2, 1))
    return encoded, lax.stop_gradient(lse)


def _combined_mask(mask, is_causal, T, S, q_len, kv_len, window):
    """Where attention is allowed (``BKGTS``-broadcastable), or None when everywhere."""
    parts = [] if mask is None else [mask]
    rows, cols = jnp.arange(T)[:, None], jnp.arange(S)[None, :]
    if is_causal:
        parts.append(rows >= cols)
    if window is not None:
        left, right = window
        parts.append((rows <= cols + left) & (rows >= cols - right))
    if q_len is not None or kv_len is not None:
        pad = jnp.ones((1, T, S), bool)
        if q_len is not None:
            pad = pad & (jnp.arange(T)[None, :, None] < q_len[:, None, None])
        if kv_len is not None:
            pad = pad & (jnp.arange(S)[None, None, :] < kv_len[:, None, None])
        parts.append(pad[:, None, None])
    if not parts:
        return None
    keep = parts[0]
    for p in parts[1:]:
        keep = keep & p
    return keep
