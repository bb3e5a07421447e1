"""Helpers for writing batching rules: moving and materialising batch dimensions, and the
rule factories of elementwise primitives.

They are built from lax operations, so they live in lax; ``plax.transforms.vmap``
imports them. A rule receives ``dims`` with ``not_mapped`` (None) for values
that do not vary along the batch. The families register their rules with these factories
while they are being imported, so this module sits below them (see the order in
``plax/lax/__init__.py``) and imports the shape ops it builds inside the functions that
use them.
"""
from __future__ import annotations

import math

from plax.core.sharding_types import with_dim
from plax.core.rules import batch_rules, not_mapped
from plax.core.trace import get_aval


def moveaxis(x, src: int, dst: int):
    """``x`` with its axis ``src`` moved to position ``dst`` (both non-negative)."""
    if src == dst:
        return x
    from plax.first_order.shapes import reshape, transpose
    shape = get_aval(x).shape
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    if len(shape) > 2 and 1 in shape:
        # Size-1 axes carry no data: move the batch among the others (no transpose at all
        # when their order is kept) and reshape. XLA then sees a plain transpose, not one
        # whose degenerate axes it may give layouts that cost extra copies.
        kept = [i for i in perm if shape[i] != 1 or i == src]  # in their new order
        order = sorted(kept)
        x = reshape(x, tuple(shape[i] for i in order))
        kperm = tuple(order.index(i) for i in kept)
        if kperm != tuple(range(len(kperm))):
            x = transpose(x, kperm)
        return reshape(x, tuple(shape[i] for i in perm))
    return transpose(x, tuple(perm))


def broadcast_batch(x, size: int, dim: int):
    """An unbatched ``x`` given a batch dimension of ``size`` at ``dim`` (materialised)."""
    shape = get_aval(x).shape
    out_shape = shape[:dim] + (size,) + shape[dim:]
    kept = tuple(i if i < dim else i + 1 for i in range(len(shape)))
    from plax.first_order.shapes import broadcast_in_dim
    return broadcast_in_dim(x, out_shape, kept)


def move_batch_dim(x, src, dst: int, size: int):
    """``x`` (batched along ``src``, or ``not_mapped``) with its batch dimension at ``dst``."""
    if src is not_mapped:
        return broadcast_batch(x, size, dst)
    return moveaxis(x, src, dst)


def bdim_at_front(x, d, size: int):
    """``x`` with its batch dimension first (broadcasting it in if ``x`` is unbatched)."""
    return move_batch_dim(x, d, 0, size)


def batch_size_of(vals, dims) -> int:
    """The batch size, read from the first batched value."""
    for v, d in zip(vals, dims):
        if d is not not_mapped:
            return get_aval(v).shape[d]
    raise ValueError("batch_size_of needs at least one batched value")


def vectorized(prim):
    """Rule for a unary primitive that acts on each element (or row) independently of
    position: apply it to the batched value as it is; the batch dimension stays put."""
    def rule(axis, vals, dims, **params):
        (x,), (d,) = vals, dims
        return prim.bind(x, **params), d
    batch_rules[prim] = rule
    return rule


def broadcasting(prim):
    """Rule for an n-ary elementwise primitive (operands broadcast like lax: rank-0 and size-1).

    When every operand is batched alike (same rank, batch at the same dimension, none
    broadcast up into a larger result; rank-0 operands aside), the primitive applies as
    it is. Otherwise batched operands move their batch to 0 and unbatched ones get a
    size-1 dimension there, which lax broadcasts for free.
    """
    def rule(axis, vals, dims, **params):
        args, d = align_elementwise(vals, dims)
        out = prim.bind(*args, **params)
        if prim.multiple_results:
            return out, [d] * len(out)
        return out, d
    batch_rules[prim] = rule
    return rule


def common_dim(vals, dims) -> int:
    """The batch dimension ``align_elementwise`` leaves its operands with: where the
    batched operands already agree on it (same rank, same dimension), else 0."""
    return _common_dim([get_aval(v).ndim for v in vals], dims)


def _common_dim(ndims, dims) -> int:
    batched = {(n, d) for n, d in zip(ndims, dims) if d is not not_mapped}
    return next(iter(batched))[1] if len(batched) == 1 else 0


def align_elementwise(vals, dims):
    """Operands of an elementwise op laid out so their batch dimensions coincide, and
    that common batch dimension."""
    shapes = [get_aval(v).shape for v in vals]
    ndims = [len(s) for s in shapes]
    d = _common_dim(ndims, dims)
    ndim = max(n - (0 if b is not_mapped else 1) for n, b in zip(ndims, dims))
    if d and (_has_unbatched_array(shapes, dims) or _batched_all_grow(shapes, dims, ndim)):
        # An unbatched array takes part, or the batched operands are broadcast up to a
        # larger result: the batch goes to the front (as JAX puts it there whenever the
        # operands are not all batched alike). A leading batch is what vmap's out_axes and
        # the ops after most often want; keeping it inside costs them a transpose later
        # (of a larger value when the result grows).
        d = 0
    from plax.first_order.shapes import broadcast_in_dim
    out = []
    for v, b, shape in zip(vals, dims, shapes):
        if b is not_mapped:
            if not shape:
                out.append(v)  # rank-0 operands broadcast against anything
                continue
            # A size-1 batch dimension (and leading size-1 dims up to full rank).
            lead = ndim - len(shape)
            full = (1,) * lead + shape
            kept = tuple(i + lead if i + lead < d else i + lead + 1 for i in range(len(shape)))
            out.append(broadcast_in_dim(v, full[:d] + (1,) + full[d:], kept))
        elif len(shape) - 1 < ndim:  # a batched scalar among higher-rank operands
            out.append(broadcast_in_dim(moveaxis(v, b, 0), (shape[b],) + (1,) * ndim, (0,)))
        else:
            out.append(moveaxis(v, b, d))
    return out, d


def _has_unbatched_array(shapes, dims) -> bool:
    """Whether an operand of rank > 0 is not batched."""
    return any(b is not_mapped and s for s, b in zip(shapes, dims))


def _batched_all_grow(shapes, dims, ndim: int) -> bool:
    """Whether every batched operand has fewer elements than the broadcast result."""
    per_example = [s if b is not_mapped else s[:b] + s[b + 1:] for s, b in zip(shapes, dims)]
    out = [1] * ndim
    for s in per_example:
        for i, n in enumerate(s, ndim - len(s)):
            out[i] = max(out[i], n)
    out_elems = math.prod(out)
    return all(math.prod(p) < out_elems for p, b in zip(per_example, dims) if b is not not_mapped)


def batched_aval(aval, dim, size: int):
    """The type of a value of per-example type ``aval`` batched along ``dim``."""
    if dim is not_mapped:
        return aval
    return with_dim(aval, dim, size)
