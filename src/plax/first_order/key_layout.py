"""Shape operations on arrays of PRNG keys, lowered on the keys' physical data.

A key array of shape ``S`` is stored as ``uint32[S + key_shape]``: the words of
each key are trailing dimensions. The abstract rules, batching and derivatives
of reshape, broadcast, slicing, indexing, selection and equality see the
logical shape ``S``; only the lowering changes. Each rule here extends the
operation's parameters over the trailing word dimensions and emits the
ordinary lowering on the physical types. Operations whose lowering reads only
types (squeeze, rev, concatenate, copy, the control-flow primitives) need no
rule. Arithmetic on keys is rejected by each primitive's dtype check.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray, physical_aval
from plax.core.rules import lowering_rules, physical_lowering_rules
from plax.first_order import comparison as _comparison
from plax.first_order import indexing as _indexing
from plax.first_order import reductions as _reductions
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.lowering.inline import lower_fun
from plax.lowering.stablehlo import RuleContext


def physical_ctx(ctx, avals_in=None) -> RuleContext:
    """``ctx`` with the physical types of its operands (``avals_in``, by default its own)
    and results: what the ordinary rules lower on."""
    ins = ctx.avals_in if avals_in is None else avals_in
    return RuleContext(ctx.fn, [physical_aval(a) for a in ins],
                       [physical_aval(a) for a in ctx.avals_out])


def _word_shape(ctx) -> tuple:
    """The trailing shape of one key's words (from the first key-typed type)."""
    for a in (*ctx.avals_in, *ctx.avals_out):
        if dtypes.is_extended(a.dtype):
            return a.dtype.physical_shape
    raise AssertionError("a key-layout rule ran without keys")


def _trailing(start: int, words: tuple) -> tuple:
    return tuple(range(start, start + len(words)))


def _on_physical(prim, adjust):
    """Lower ``prim`` on keys as its ordinary rule with ``adjust(ctx, words, params)``. (The
    rule is looked up at each call: plax.export's symbolic-shape rules replace it when
    loaded, whichever module was imported first.)"""
    def rule(ctx, *operands, **params):
        return lowering_rules[prim](physical_ctx(ctx), *operands,
                                    **adjust(ctx, _word_shape(ctx), params))
    physical_lowering_rules[prim] = rule


def _broadcast_in_dim(ctx, words, p):
    out_ndim = ctx.avals_out[0].ndim
    return {**p, "shape": tuple(p["shape"]) + words,
            "broadcast_dimensions": tuple(p["broadcast_dimensions"]) + _trailing(out_ndim, words)}


def _reshape(ctx, words, p):
    dims = p["dimensions"]
    if dims is not None:
        dims = tuple(dims) + _trailing(ctx.avals_in[0].ndim, words)
    return {**p, "new_sizes": tuple(p["new_sizes"]) + words, "dimensions": dims}


def _transpose(ctx, words, p):
    return {**p, "permutation": tuple(p["permutation"]) + _trailing(ctx.avals_in[0].ndim, words)}


def _slice(ctx, words, p):
    strides = p["strides"]
    return {"start_indices": tuple(p["start_indices"]) + (0,) * len(words),
            "limit_indices": tuple(p["limit_indices"]) + words,
            "strides": None if strides is None else tuple(strides) + (1,) * len(words)}


def _gather(ctx, words, p):
    dn = p["dimension_numbers"]
    out_ndim = ctx.avals_out[0].ndim
    return {**p, "dimension_numbers": dn._replace(
                offset_dims=tuple(dn.offset_dims) + _trailing(out_ndim, words)),
            "slice_sizes": tuple(p["slice_sizes"]) + words}


def _scatter(ctx, words, p):
    dn = p["dimension_numbers"]
    upd_ndim = ctx.avals_in[2].ndim
    return {**p, "dimension_numbers": dn._replace(
        update_window_dims=tuple(dn.update_window_dims) + _trailing(upd_ndim, words))}


_on_physical(_shapes.broadcast_in_dim_p, _broadcast_in_dim)
_on_physical(_shapes.reshape_p, _reshape)
_on_physical(_shapes.transpose_p, _transpose)
_on_physical(_slicing.slice_p, _slice)
_on_physical(_indexing.gather_p, _gather)
_on_physical(_indexing.scatter_p, _scatter)


def _zero_indices(ctx, index_avals, words):
    """Start indices for the word dimensions: zeros of the index type (int32 where a 0-d
    array has no index operand)."""
    scalar = ShapedArray((), index_avals[0].dtype if index_avals else np.dtype(np.int32))
    return [ctx.constant(np.zeros((), scalar.dtype), scalar)] * len(words), [scalar] * len(words)


def _dynamic_slice(ctx, x, *idx, slice_sizes):
    words = _word_shape(ctx)
    zeros, zero_avals = _zero_indices(ctx, ctx.avals_in[1:], words)
    pctx = physical_ctx(ctx, [*ctx.avals_in, *zero_avals])
    return lowering_rules[_slicing.dynamic_slice_p](pctx, x, *idx, *zeros,
                                                   slice_sizes=tuple(slice_sizes) + words)


def _dynamic_update_slice(ctx, x, update, *idx):
    words = _word_shape(ctx)
    zeros, zero_avals = _zero_indices(ctx, ctx.avals_in[2:], words)
    pctx = physical_ctx(ctx, [*ctx.avals_in, *zero_avals])
    return lowering_rules[_slicing.dynamic_update_slice_p](pctx, x, update, *idx, *zeros)


physical_lowering_rules[_slicing.dynamic_slice_p] = _dynamic_slice
physical_lowering_rules[_slicing.dynamic_update_slice_p] = _dynamic_update_slice


def _select_n(ctx, which, *cases):
    """The predicate is broadcast over the words, then the ordinary select applies."""
    waval, out = ctx.avals_in[0], physical_aval(ctx.avals_out[0])
    wfull = waval.update(shape=out.shape)
    which = ctx.broadcast(which, waval, wfull, range(waval.ndim))
    pctx = physical_ctx(ctx, [wfull, *ctx.avals_in[1:]])
    return lowering_rules[_comparison.select_n_p](pctx, which, *cases)


physical_lowering_rules[_comparison.select_n_p] = _select_n


def _compare_words(x, y, *, equal: bool, shape: tuple, num_words: int):
    """Keys (as words) compared: equal when every word is, different when any word is."""
    full = tuple(shape) + x.aval.shape[x.aval.ndim - num_words:]
    words = _trailing(len(shape), (0,) * num_words)
    x, y = (_shapes.broadcast_in_dim(v, full, tuple(range(v.aval.ndim)) if v.aval.ndim > num_words
                                     else words) for v in (x, y))
    if equal:
        return _reductions.reduce_and(_comparison.eq(x, y), words)
    return _reductions.reduce_or(_comparison.ne(x, y), words)


_lower_compare_words = lower_fun(_compare_words)


def _equality(equal: bool):
    def rule(ctx, x, y):
        return _lower_compare_words(physical_ctx(ctx), x, y, equal=equal,
                                    shape=ctx.avals_out[0].shape, num_words=len(_word_shape(ctx)))
    return rule


physical_lowering_rules[_comparison.eq_p] = _equality(True)
physical_lowering_rules[_comparison.ne_p] = _equality(False)
