"""``ragged_all_to_all``: an all-to-all of variable-length slices along a named mesh axis.

Each device's ``operand`` holds K = (axis size) x (slices per device) leading-axis slices
(``input_offsets``, ``send_sizes``); slice ``i`` goes to device ``i // slices_per_device``,
written into that device's ``output`` at ``output_offsets[i]``. XLA's CPU compiler has no
ragged all-to-all (JAX's program stops there), so plax lowers it to what the CPU runs: the
operands and offsets are all-gathered and each device copies in the slices addressed to it,
one masked gather per (sender, slot). It is linear in ``operand`` and ``output``; its
transpose is the reverse ragged all-to-all, as in JAX.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, collective_axis_names,
                             is_undefined, jvp_rules, linear_primitives, register_lowering,
                             tangent_aval, transpose_rules)
from plax.core.trace import get_aval
from plax.first_order import arithmetic, bitwise, comparison, conversion, indexing, shapes
from plax.first_order import slicing
from plax.first_order.ad_util import instantiate
from plax.first_order.batch_util import move_batch_dim
from plax.first_order.collectives import (_all_gather_lowering, _as_names, _axis_index_lowering,
                                          _bound_size, _check_bound, _manual_names, _single_name,
                                          all_to_all, replica_groups)
from plax.lowering.inline import lower_fun
from plax.lowering.stablehlo import RuleContext

__all__ = ["ragged_all_to_all", "ragged_all_to_all_p"]

ragged_all_to_all_p = Primitive("ragged_all_to_all")


def _abstract(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
              axis_name, axis_index_groups):
    _check_bound(axis_name)
    if operand.ndim < 1 or operand.shape[1:] != output.shape[1:]:
        raise TypeError("ragged_all_to_all: operand and output must have the same shape after "
                        f"their leading (ragged) dimension, got {operand.shape} and "
                        f"{output.shape}.")
    if operand.dtype != output.dtype:
        raise TypeError("ragged_all_to_all: operand and output must have the same dtype, got "
                        f"{operand.dtype.name} and {output.dtype.name}.")
    names = ("input_offsets", "send_sizes", "output_offsets", "recv_sizes")
    sizes = (input_offsets, send_sizes, output_offsets, recv_sizes)
    for name, a in zip(names, sizes):
        if a.ndim != 1 or not dtypes.is_integer(a.dtype):
            raise TypeError(f"ragged_all_to_all: {name} must be a 1-D integer array, got "
                            f"{a.str_short()}.")
    if len({a.shape for a in sizes}) != 1:
        raise TypeError("ragged_all_to_all: input_offsets, send_sizes, output_offsets and "
                        "recv_sizes must have the same shape, got "
                        f"{', '.join(str(a.shape) for a in sizes)}.")
    return output.update(weak_type=False)


def _pick(row, i):
    """``row[i]`` for a traced scalar index ``i``."""
    return shapes.reshape(slicing.dynamic_slice(row, (i,), (1,)), ())


def _assemble(output, g_operand, g_input_offsets, g_send_sizes, g_output_offsets, me):
    """``output`` with, from every sender ``j``, the slots addressed to this device (``me``)
    copied in: positions ``[out_off, out_off + size)`` take the sender's rows from
    ``in_off`` on."""
    n, k = get_aval(g_input_offsets).shape
    per_device = k // n
    out_shape = get_aval(output).shape
    rows = get_aval(g_operand).shape[1]
    i32 = np.dtype(np.int32)
    pos = shapes.broadcasted_iota(i32, (out_shape[0],), 0)
    as32 = lambda v: conversion.convert_element_type(v, i32)  # noqa: E731
    dn = indexing.GatherDimensionNumbers(offset_dims=tuple(range(1, len(out_shape))),
                                         collapsed_slice_dims=(0,), start_index_map=(0,))
    result = output
    for j in range(n):
        sender = shapes.squeeze(slicing.slice_in_dim(g_operand, j, j + 1, axis=0), (0,))
        for s in range(per_device):
            slot = arithmetic.add(arithmetic.mul(me, np.int32(per_device)), np.int32(s))
            start = as32(_pick(_row(g_input_offsets, j), slot))
            size = as32(_pick(_row(g_send_sizes, j), slot))
            at = as32(_pick(_row(g_output_offsets, j), slot))
            hit = bitwise.bitwise_and(comparison.ge(pos, at),
                                      comparison.lt(pos, arithmetic.add(at, size)))
            src = comparison.clamp(np.int32(0), arithmetic.add(start, arithmetic.sub(pos, at)),
                                   np.int32(max(rows - 1, 0)))
            vals = indexing.gather(sender, shapes.expand_dims(src, (1,)), dn,
                                   (1,) + out_shape[1:], mode="promise_in_bounds")
            hit = shapes.broadcast_in_dim(hit, out_shape, (0,))
            result = comparison.select(hit, vals, result)
    return result


def _row(table, j):
    return shapes.squeeze(slicing.slice_in_dim(table, j, j + 1, axis=0), (0,))


_lower_assemble = lower_fun(_assemble)


def _lowering(ctx, operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
              axis_name, axis_index_groups):
    names = _manual_names(ctx, "ragged_all_to_all", axis_name)
    _single_name("ragged_all_to_all", names)
    size = replica_groups(ctx, names).shape[1]
    gathered, gathered_avals = [], []
    for x, aval in zip((operand, input_offsets, send_sizes, output_offsets),
                       (ctx.avals_in[0], *ctx.avals_in[2:5])):
        full = aval.update(shape=(size,) + aval.shape, weak_type=False)
        gathered.append(_all_gather_lowering(
            RuleContext(ctx.fn, [aval], [full]), x, all_gather_dimension=0, axis_name=names,
            axis_index_groups=None, axis_size=size, tiled=False))
        gathered_avals.append(full)
    i32 = ShapedArray((), np.dtype(np.int32))
    me = _axis_index_lowering(RuleContext(ctx.fn, [], [i32]), axis_name=names[0])
    sub = RuleContext(ctx.fn, [ctx.avals_in[1], *gathered_avals, i32], ctx.avals_out)
    return _lower_assemble(sub, output, *gathered, me)


abstract_eval_rules[ragged_all_to_all_p] = _abstract
register_lowering(ragged_all_to_all_p, _lowering)
collective_axis_names[ragged_all_to_all_p] = lambda params: _as_names(params["axis_name"])


def _jvp(primals, tangents, **params):
    operand, output, *offsets = primals
    t_operand, t_output = tangents[:2]
    out = ragged_all_to_all_p.bind(operand, output, *offsets, **params)
    if type(t_operand) is Zero and type(t_output) is Zero:
        return out, Zero(tangent_aval(get_aval(out)))
    return out, ragged_all_to_all_p.bind(instantiate(t_operand), instantiate(t_output),
                                         *offsets, **params)


def _transpose(ct, operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
               axis_name, axis_index_groups):
    """Each device sends back the cotangent of what it received, to where it came from; the
    output's cotangent is zero where a slice was written."""
    if type(ct) is Zero:
        return [None] * 6
    if any(is_undefined(v) for v in (input_offsets, send_sizes, output_offsets, recv_sizes)):
        raise ValueError("ragged_all_to_all is linear only in operand and output: the offsets "
                         "and sizes must be known to transpose it.")
    params = dict(axis_name=axis_name, axis_index_groups=axis_index_groups)
    operand_aval = operand.aval if is_undefined(operand) else get_aval(operand)
    ct_operand = ct_output = None
    if is_undefined(operand):
        back_from = all_to_all(output_offsets, axis_name, 0, 0, tiled=True)
        back_to = all_to_all(input_offsets, axis_name, 0, 0, tiled=True)
        zeros = instantiate(Zero(operand_aval))
        ct_operand = ragged_all_to_all_p.bind(ct, zeros, back_from, recv_sizes, back_to,
                                              send_sizes, **params)
    if is_undefined(output):
        ct_aval = get_aval(ct)
        ones = shapes.broadcast_in_dim(np.ones((), ct_aval.dtype), operand_aval.shape, ())
        zeros = shapes.broadcast_in_dim(np.zeros((), ct_aval.dtype), ct_aval.shape, ())
        written = ragged_all_to_all_p.bind(ones, zeros, input_offsets, send_sizes,
                                           output_offsets, recv_sizes, **params)
        ct_output = comparison.select(comparison.ne(written, zeros), zeros, ct)
    return [ct_operand, ct_output, None, None, None, None]


def _batch(axis, vals, dims, *, axis_name, axis_index_groups):
    """Examples of a vmap over another axis ride along a trailing dimension of operand and
    output (the offsets must be the same for all of them)."""
    if axis.name in axis_name or any(d is not None for d in dims[2:]):
        raise NotImplementedError("ragged_all_to_all under vmap is supported only over another "
                                  "axis, with offsets and sizes not batched.")
    operand, output = (move_batch_dim(v, d, 1, axis.size) for v, d in zip(vals[:2], dims[:2]))
    out = ragged_all_to_all_p.bind(operand, output, *vals[2:], axis_name=axis_name,
                                   axis_index_groups=axis_index_groups)
    return out, 1


jvp_rules[ragged_all_to_all_p] = _jvp
transpose_rules[ragged_all_to_all_p] = _transpose
linear_primitives.add(ragged_all_to_all_p)
batch_rules[ragged_all_to_all_p] = _batch


def ragged_all_to_all(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
                      axis_name, axis_index_groups=None):
    """Sends leading-axis slices ``operand[input_offsets[i]:][:send_sizes[i]]`` to device
    ``i // (K / axis size)`` of the named axis, written there into ``output`` at
    ``output_offsets[i]``; returns this device's ``output`` with the slices it received."""
    if axis_index_groups is not None:
        raise NotImplementedError("ragged_all_to_all: axis_index_groups is not supported.")
    names = _as_names(axis_name)
    _single_name("ragged_all_to_all", names)
    n = _bound_size(names[0])
    k = get_aval(input_offsets).shape[0] if get_aval(input_offsets).ndim else 0
    if k % n:
        raise ValueError(f"ragged_all_to_all: the number of slices ({k}) must be a multiple of "
                         f"the size of axis {names[0]!r} ({n}).")
    return ragged_all_to_all_p.bind(operand, output, input_offsets, send_sizes, output_offsets,
                                    recv_sizes, axis_name=names, axis_index_groups=None)
