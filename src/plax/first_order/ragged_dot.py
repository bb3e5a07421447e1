"""Grouped (ragged) contractions: the ``ragged_dot_general`` primitive, ``ragged_dot`` and
``RaggedDotDimensionNumbers``.

One lhs dimension is *ragged*: ``group_sizes`` (``G`` integers) cuts it into consecutive
groups (positions past their sum belong to none). Where it falls decides the contraction:

* a free lhs dimension: row block ``g`` is contracted with slice ``g`` of rhs's group
  dimension (the MoE matmul; rows in no group give zeros);
* a contracting dimension: the contraction runs per group, and the result gains a leading
  group dimension of size ``G``;
* a batch dimension: an ordinary ``dot_general``.

Every case is a masked ``dot_general``: the lhs broadcast along a new leading group
dimension and zeroed outside each group (``_masked_lhs``), then contracted (with rhs's group
dimension too, in the first case). The lowering emits that, and the transpose rules are
dot_general's transposes of it, so grads and their grads are exact.
"""
from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (UndefinedPrimal, Zero, abstract_eval_rules, batch_rules,
                             is_undefined, jvp_rules, linear_primitives, register_lowering,
                             tangent_aval, transpose_rules)
from plax.core.trace import get_aval
from plax.first_order import arithmetic, bitwise, comparison, dot, reductions, shapes
from plax.first_order.ad_util import add_tangents
from plax.first_order.batch_util import batch_size_of, move_batch_dim
from plax.first_order.common import check_dtype
from plax.lowering.inline import lower_fun

__all__ = ["RaggedDotDimensionNumbers", "ragged_dot", "ragged_dot_general"]


class RaggedDotDimensionNumbers(NamedTuple):
    """The dimensions of a ragged contraction: ``dot_dimension_numbers`` as dot_general's
    (``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``), the lhs's ragged
    dimension (``lhs_ragged_dimensions``, one) and rhs's group dimension
    (``rhs_group_dimensions``: one when the ragged dimension is a free lhs dimension, else
    none)."""
    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: tuple
    rhs_group_dimensions: tuple


def _canonical(dn) -> RaggedDotDimensionNumbers:
    if not isinstance(dn, RaggedDotDimensionNumbers):
        raise TypeError("ragged_dot_general: ragged_dot_dimension_numbers must be a "
                        f"lax.RaggedDotDimensionNumbers, got {dn!r}.")
    ints = lambda ds: tuple(operator.index(d) for d in ds)  # noqa: E731
    return RaggedDotDimensionNumbers(dot._canonical_dimension_numbers(dn.dot_dimension_numbers),
                                     ints(dn.lhs_ragged_dimensions), ints(dn.rhs_group_dimensions))


def _mode(dn: RaggedDotDimensionNumbers) -> str:
    (lc, _), (lb, _) = dn.dot_dimension_numbers
    (r,) = dn.lhs_ragged_dimensions
    return "contracting" if r in lc else "batch" if r in lb else "free"


def _masked_dims(dn: RaggedDotDimensionNumbers):
    """The dot_general dimension numbers contracting the masked lhs (group dimension 0
    in front of the lhs's) with rhs; and whether the result's group dimension (after the
    batch dimensions) must move to the front."""
    (lc, rc), (lb, rb) = dn.dot_dimension_numbers
    up = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
    if _mode(dn) == "free":
        return ((up(lc) + (0,), rc + dn.rhs_group_dimensions), (up(lb), rb)), False
    return ((up(lc), rc), (up(lb), rb)), True


def _check(lhs, rhs, gs, dn: RaggedDotDimensionNumbers):
    check_dtype("ragged_dot_general", gs, "int", "group_sizes")
    (lc, rc), (lb, rb) = dn.dot_dimension_numbers
    if len(dn.lhs_ragged_dimensions) != 1:
        raise TypeError("ragged_dot_general requires exactly one lhs ragged dimension, got "
                        f"lhs_ragged_dimensions={dn.lhs_ragged_dimensions}.")
    (r,) = dn.lhs_ragged_dimensions
    if not 0 <= r < lhs.ndim:
        raise TypeError(f"ragged_dot_general: lhs ragged dimension {r} is out of range for "
                        f"lhs of shape {lhs.shape}.")
    mode = _mode(dn)
    want_groups = 1 if mode == "free" else 0
    if len(dn.rhs_group_dimensions) != want_groups:
        raise TypeError(f"ragged_dot_general: with the ragged dimension {r} a {mode} dimension "
                        f"of lhs, rhs must have {want_groups} group dimension(s), got "
                        f"rhs_group_dimensions={dn.rhs_group_dimensions}.")
    groups = gs.shape[-1] if gs.ndim else None
    if gs.ndim < 1 or gs.shape[:-1] != tuple(lhs.shape[d] for d in lb[:gs.ndim - 1]):
        raise TypeError(f"ragged_dot_general: group_sizes must have shape (G,) (or the lhs "
                        f"batch sizes then G), got {gs.shape} for lhs of shape {lhs.shape}.")
    if mode == "free":
        (g,) = dn.rhs_group_dimensions
        if g in rc or g in rb or not 0 <= g < rhs.ndim:
            raise TypeError(f"ragged_dot_general: rhs group dimension {g} must be a free "
                            f"dimension of rhs (shape {rhs.shape}).")
        if rhs.shape[g] != groups:
            raise TypeError(f"expected rhs group dimension size to be {groups}, got "
                            f"{rhs.shape[g]}.")


def _abstract(lhs, rhs, gs, *, ragged_dot_dimension_numbers, precision, preferred_element_type,
              group_offset, out_sharding):
    dn = ragged_dot_dimension_numbers
    _check(lhs, rhs, gs, dn)
    if _mode(dn) == "batch":
        return dot._dot_general_abstract(lhs, rhs, dimension_numbers=dn.dot_dimension_numbers,
                                         precision=precision,
                                         preferred_element_type=preferred_element_type)
    masked = ShapedArray((gs.shape[-1],) + lhs.shape, lhs.dtype, lhs.weak_type)
    dims, lead = _masked_dims(dn)
    out = dot._dot_general_abstract(masked, rhs, dimension_numbers=dims, precision=precision,
                                    preferred_element_type=preferred_element_type)
    if lead:
        nb = len(dn.dot_dimension_numbers[1][0])
        shape = out.shape
        out = out.update(shape=(shape[nb],) + shape[:nb] + shape[nb + 1:])
    return out


def _group_mask(gs, lhs_shape: tuple, dn: RaggedDotDimensionNumbers):
    """bool[G, *lhs_shape]: whether each lhs position lies in group g along the ragged dim."""
    (r,) = dn.lhs_ragged_dimensions
    lb = dn.dot_dimension_numbers[1][0]
    gs_aval = get_aval(gs)
    shape = (gs_aval.shape[-1],) + tuple(lhs_shape)
    ends = reductions.cumsum(gs, gs_aval.ndim - 1)
    starts = arithmetic.sub(ends, gs)
    where = (tuple(1 + d for d in lb[:gs_aval.ndim - 1])) + (0,)
    ends = shapes.broadcast_in_dim(ends, shape, where)
    starts = shapes.broadcast_in_dim(starts, shape, where)
    pos = shapes.broadcasted_iota(gs_aval.dtype, shape, r + 1)
    return bitwise.bitwise_and(comparison.le(starts, pos), comparison.lt(pos, ends))


def _masked_lhs(lhs, gs, dn):
    shape = get_aval(lhs).shape
    mask = _group_mask(gs, shape, dn)
    wide = shapes.broadcast_in_dim(lhs, (get_aval(gs).shape[-1],) + shape,
                                   tuple(range(1, len(shape) + 1)))
    return comparison.select(mask, wide, shapes.broadcast_in_dim(
        np.zeros((), get_aval(lhs).dtype), get_aval(wide).shape, ()))


def _lead_group(out, nb: int):
    """The masked contraction's result with its group dimension (after ``nb`` batch
    dimensions) moved to the front."""
    ndim = get_aval(out).ndim
    return shapes.transpose(out, (nb,) + tuple(range(nb)) + tuple(range(nb + 1, ndim)))


def _composite(lhs, rhs, gs, *, ragged_dot_dimension_numbers, precision,
               preferred_element_type, group_offset, out_sharding):
    dn = ragged_dot_dimension_numbers
    params = dict(precision=precision, preferred_element_type=preferred_element_type,
                  out_sharding=None)
    if _mode(dn) == "batch":
        return dot.dot_general_p.bind(lhs, rhs, dimension_numbers=dn.dot_dimension_numbers,
                                      **params)
    dims, lead = _masked_dims(dn)
    out = dot.dot_general_p.bind(_masked_lhs(lhs, gs, dn), rhs, dimension_numbers=dims, **params)
    return _lead_group(out, len(dn.dot_dimension_numbers[1][0])) if lead else out


ragged_dot_general_p = Primitive("ragged_dot_general")
abstract_eval_rules[ragged_dot_general_p] = _abstract
register_lowering(ragged_dot_general_p, lower_fun(_composite))


# --- differentiation ------------------------------------------------------------------------
def _jvp(primals, tangents, **params):
    (lhs, rhs, gs), (tl, tr, _) = primals, tangents
    out = ragged_dot_general_p.bind(lhs, rhs, gs, **params)
    t = Zero(tangent_aval(get_aval(out)))
    if type(tl) is not Zero:
        t = add_tangents(t, ragged_dot_general_p.bind(tl, rhs, gs, **params))
    if type(tr) is not Zero:
        t = add_tangents(t, ragged_dot_general_p.bind(lhs, tr, gs, **params))
    return out, t


def _transpose(ct, lhs, rhs, gs, *, ragged_dot_dimension_numbers, precision,
               preferred_element_type, group_offset, out_sharding):
    """dot_general's transposes of the masked contraction (_composite)."""
    dn = ragged_dot_dimension_numbers
    if is_undefined(lhs) == is_undefined(rhs):
        raise ValueError("ragged_dot_general is bilinear: exactly one of lhs and rhs must be "
                         "the linear (unknown) operand to transpose it.")
    if type(ct) is Zero:
        return [None, None, None]
    params = dict(precision=precision, preferred_element_type=None, out_sharding=None)
    lhs_aval = lhs.aval if is_undefined(lhs) else get_aval(lhs)
    rhs_aval = rhs.aval if is_undefined(rhs) else get_aval(rhs)
    if _mode(dn) == "batch":
        dims, wide_aval = dn.dot_dimension_numbers, lhs_aval
    else:
        dims, lead = _masked_dims(dn)
        wide_aval = lhs_aval.update(shape=(get_aval(gs).shape[-1],) + lhs_aval.shape)
        if lead:  # undo the move of the group dimension to the front
            nb = len(dn.dot_dimension_numbers[1][0])
            ndim = get_aval(ct).ndim
            ct = shapes.transpose(ct, tuple(range(1, nb + 1)) + (0,) + tuple(range(nb + 1, ndim)))
    if is_undefined(rhs):
        wide = lhs if _mode(dn) == "batch" else _masked_lhs(lhs, gs, dn)
        return [None, dot._dot_general_transpose_rhs(
            ct, wide, UndefinedPrimal(rhs_aval), dimension_numbers=dims, **params), None]
    ct_wide = dot._transpose_lhs(ct, wide_aval, rhs, dims, params)
    if _mode(dn) == "batch":
        return [ct_wide, None, None]
    mask = _group_mask(gs, lhs_aval.shape, dn)
    zeros = shapes.broadcast_in_dim(np.zeros((), wide_aval.dtype), wide_aval.shape, ())
    ct_lhs = reductions.reduce_sum(comparison.select(mask, ct_wide, zeros), (0,))
    return [ct_lhs, None, None]


jvp_rules[ragged_dot_general_p] = _jvp
transpose_rules[ragged_dot_general_p] = _transpose
linear_primitives.add(ragged_dot_general_p)


# --- batching ---------------------------------------------------------------------------------
def _batch(axis_data, vals, dims, *, ragged_dot_dimension_numbers, **params):
    """The vmapped dimension becomes a new leading batch dimension of lhs and rhs (and of
    group_sizes when it varies)."""
    (lhs, rhs, gs), (bl, br, bg) = vals, dims
    size = batch_size_of(vals, dims)
    dn = ragged_dot_dimension_numbers
    lhs, rhs = move_batch_dim(lhs, bl, 0, size), move_batch_dim(rhs, br, 0, size)
    (lc, rc), (lb, rb) = dn.dot_dimension_numbers
    up = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
    lbs = (0,) + up(lb)
    if bg is not None:
        # group sizes per example: the new batch dimension must lead lhs's batch dims, which
        # it does; group_sizes' own batch dims follow it in lhs's batch order.
        gs = move_batch_dim(gs, bg, 0, size)
    new = RaggedDotDimensionNumbers(((up(lc), up(rc)), (lbs, (0,) + up(rb))),
                                    up(dn.lhs_ragged_dimensions), up(dn.rhs_group_dimensions))
    out = ragged_dot_general_p.bind(lhs, rhs, gs, ragged_dot_dimension_numbers=new, **params)
    # The result has the batch dims first, except in the contracting case (group first).
    return out, (1 if _mode(dn) == "contracting" else 0)


batch_rules[ragged_dot_general_p] = _batch


# --- public functions -----------------------------------------------------------------------
def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, out_sharding=None):
    """A contraction of ``lhs`` and ``rhs`` whose lhs ragged dimension is cut into groups of
    ``group_sizes`` (see the module docstring for the three cases)."""
    if group_offset is not None:
        raise NotImplementedError("ragged_dot_general: group_offset is not supported (JAX "
                                  "0.10's CPU lowering refuses it too); slice group_sizes and "
                                  "rhs instead.")
    if out_sharding is not None:
        raise NotImplementedError("ragged_dot_general: out_sharding is not supported; apply "
                                  "lax.with_sharding_constraint to the result.")
    return ragged_dot_general_p.bind(
        lhs, rhs, group_sizes,
        ragged_dot_dimension_numbers=_canonical(ragged_dot_dimension_numbers),
        precision=dot.canonicalize_precision(precision),
        preferred_element_type=dot.canonical_preferred_element_type(preferred_element_type),
        group_offset=None, out_sharding=None)


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, out_sharding=None):
    """Grouped matmul: ``lhs`` (m, k) rows cut into consecutive groups of ``group_sizes``
    (g,), group i multiplied by ``rhs[i]`` (rhs: (g, k, n)); rows past the groups give zeros."""
    dn = RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))
    return ragged_dot_general(lhs, rhs, group_sizes, dn, precision, preferred_element_type,
                              group_offset, out_sharding)
