"""``gmm`` with a gradient, as ``jax.experimental.pallas.ops.tpu.megablox.ops``: the
backward pass is a gmm (the lhs gradient, against the transposed group matrices) and a tgmm
(the group matrices' gradient)."""
from __future__ import annotations

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental.pallas.ops.tpu.megablox import gmm as backend

__all__ = ["gmm"]

gmm = plax.custom_vjp(backend.gmm, nondiff_argnums=(3, 4, 7, 8))


def _gmm_fwd(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
             tiling=(128, 128, 128), group_offset=None, existing_out=None,
             transpose_rhs=False, interpret=False):
    out = backend.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                      existing_out, transpose_rhs=transpose_rhs, interpret=interpret)
    return out, (lhs, rhs, group_sizes, group_offset, existing_out is not None)


def _gmm_bwd(preferred_element_type, tiling, transpose_rhs, interpret, residuals, grad):
    del preferred_element_type
    lhs, rhs, group_sizes, group_offset, has_existing = residuals
    grad_lhs = backend.gmm(grad, rhs, group_sizes, lhs.dtype, tiling, group_offset,
                           transpose_rhs=not transpose_rhs, interpret=interpret)
    grad_rhs = backend.tgmm(lhs.swapaxes(0, 1), grad, group_sizes, rhs.dtype, tiling,
                            group_offset, rhs.shape[0], interpret=interpret)
    if transpose_rhs:
        grad_rhs = grad_rhs.swapaxes(1, 2)
    grad_existing = None
    if has_existing:  # existing_out shows through on the rows no computed group covers
        offsets = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(group_sizes)])
        start = 0 if group_offset is None else group_offset
        rows = lax.broadcasted_iota(jnp.int32, (grad.shape[0], 1), 0)
        covered = jnp.logical_and(rows >= offsets[start],
                                  rows < offsets[start + rhs.shape[0]])
        grad_existing = jnp.where(covered, jnp.zeros((), grad.dtype), grad)
    return grad_lhs, grad_rhs, None, None, grad_existing


gmm.defvjp(_gmm_fwd, _gmm_bwd)
