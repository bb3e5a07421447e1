"""Approximate top-k: ``approx_max_k``, ``approx_min_k`` and their primitive ``approx_top_k``.

On TPU XLA finds the k best entries approximately (to ``recall_target``); elsewhere its
fallback is exact, which is what runs here: the largest (``approx_max_k``) or smallest
entries along ``reduction_dimension`` in order, ties to the lower index, with their int32
indices. With ``aggregate_to_topk=False`` the reduced dimension keeps the size XLA's shape
rule gives (the TPU algorithm's bins: at least k, often the whole dimension), sorted.
"""
from __future__ import annotations

import operator

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, jvp_rules,
                             register_lowering, tangent_aval)
from plax.core.trace import get_aval
from plax.first_order import indexing, shapes, slicing, sort
from plax.lowering.inline import lower_fun
from plax.lowering.stablehlo import element_type, tensor_type
from plax.runtime import xla

__all__ = ["approx_max_k", "approx_min_k", "approx_top_k_p"]

approx_top_k_p = Primitive("approx_top_k", multiple_results=True)


def _axis(reduction_dimension: int, ndim: int) -> int:
    return reduction_dimension + ndim if reduction_dimension < 0 else reduction_dimension


def _abstract(x, *, k, reduction_dimension, recall_target, is_max_k,
              reduction_input_size_override, aggregate_to_topk):
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    if x.ndim == 0:
        raise TypeError(f"approx_top_k operand must have >= 1 dimension, got {x.shape}")
    if not -x.ndim <= reduction_dimension < x.ndim:
        raise ValueError(f"approx_top_k: reduction_dimension {reduction_dimension} is out of "
                         f"bounds for an operand of shape {x.shape}.")
    axis = _axis(reduction_dimension, x.ndim)
    n = x.shape[axis]
    if n < k:
        raise ValueError(f"k must be smaller than the size of reduction_dim {n}, got {k}")
    if not dtypes.is_float(x.dtype):
        raise ValueError(f"operand must be a floating type, got {x.dtype.name}")
    if not 0 < recall_target <= 1:
        raise ValueError(f"approx_top_k: recall_target must be in (0, 1], got {recall_target}")
    size = k if aggregate_to_topk else xla.approx_top_k_reduction_output_size(
        n, x.ndim, k, recall_target, aggregate_to_topk, reduction_input_size_override)
    shape = x.shape[:axis] + (size,) + x.shape[axis + 1:]
    return [ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, np.dtype(np.int32))]


def _exact(x, *, k, reduction_dimension, recall_target, is_max_k,
           reduction_input_size_override, aggregate_to_topk):
    """XLA's exact fallback: the best ``size`` entries in order, ties to the lower index."""
    aval = get_aval(x)
    axis = _axis(reduction_dimension, aval.ndim)
    size = _abstract(aval, k=k, reduction_dimension=reduction_dimension,
                     recall_target=recall_target, is_max_k=is_max_k,
                     reduction_input_size_override=reduction_input_size_override,
                     aggregate_to_topk=aggregate_to_topk)[0].shape[axis]
    if is_max_k:
        return sort.top_k(x, size, axis=axis)
    iota = shapes.broadcasted_iota(np.int32, aval.shape, axis)
    vals, idx = sort.sort((x, iota), dimension=axis, is_stable=True, num_keys=1)
    return [slicing.slice_in_dim(vals, 0, size, axis=axis),
            slicing.slice_in_dim(idx, 0, size, axis=axis)]


def take_along(t, idx, axis: int):
    """``t`` picked at ``idx`` along ``axis`` (the other dimensions alike)."""
    ndim = get_aval(t).ndim
    others = tuple(d for d in range(ndim) if d != axis)
    dn = indexing.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,),
                                         start_index_map=(axis,), operand_batching_dims=others,
                                         start_indices_batching_dims=others)
    return indexing.gather(t, shapes.expand_dims(idx, (ndim,)), dn, (1,) * ndim,
                           mode="promise_in_bounds")


def _jvp(primals, tangents, **params):
    (x,), (t,) = primals, tangents
    vals, idx = approx_top_k_p.bind(x, **params)
    zero_idx = Zero(tangent_aval(get_aval(idx)))
    if type(t) is Zero:
        return [vals, idx], [Zero(tangent_aval(get_aval(vals))), zero_idx]
    axis = _axis(params["reduction_dimension"], get_aval(x).ndim)
    return [vals, idx], [take_along(t, idx, axis), zero_idx]


def _batch(axis_data, vals, dims, *, reduction_dimension, **params):
    (x,), (d,) = vals, dims
    ndim = get_aval(x).ndim - 1
    axis = _axis(reduction_dimension, ndim)
    axis = axis + (d <= axis)
    outs = approx_top_k_p.bind(x, reduction_dimension=axis, **params)
    return outs, [d, d]


def _tpu(ctx, x, *, k, reduction_dimension, recall_target, is_max_k,
         reduction_input_size_override, aggregate_to_topk):
    """XLA's ApproxTopK custom call, which its TPU compiler implements, as JAX lowers it
    there: the operand with its indices, the initial values, and a comparator function."""
    aval = ctx.avals_in[0]
    axis = _axis(reduction_dimension, aval.ndim)
    scalar, index = ShapedArray((), aval.dtype), ShapedArray((), np.dtype(np.int32))
    direction = "GT" if is_max_k else "LT"
    module = ctx.fn.module
    comparator = module.unique_name(
        f"top_k_{direction.lower()}_{element_type(aval.dtype)}_comparator")
    st, it = tensor_type(scalar), tensor_type(index)
    module.functions.append(
        f"  func.func private @{comparator}(%arg0: {st}, %arg1: {st}, %arg2: {it}, %arg3: {it})"
        f" -> (tensor<i1>) {{\n"
        f'    %0 = "stablehlo.compare"(%arg0, %arg1) <{{comparison_direction = '
        f"#stablehlo<comparison_direction {direction}>, compare_type = "
        f"#stablehlo<comparison_type FLOAT>}}> : ({st}, {st}) -> tensor<i1>\n"
        f"    func.return %0 : tensor<i1>\n  }}")
    indices_aval = ShapedArray(aval.shape, np.dtype(np.int32))
    indices = ctx.op1("stablehlo.iota", [], [], indices_aval,
                      props=f"iota_dimension = {axis} : i64")
    init = ctx.constant(np.array(-np.inf if is_max_k else np.inf, aval.dtype), scalar)
    init_index = ctx.constant(np.array(-1, np.int32), index)
    config = (f"aggregate_to_topk = {'true' if aggregate_to_topk else 'false'}, "
              f"recall_target = {float(np.float32(recall_target))!r} : f32, "
              f"reduction_dim = {axis} : i64, "
              f"reduction_input_size_override = {int(reduction_input_size_override)} : i64, "
              f"top_k = {int(k)} : i64")
    return ctx.op("stablehlo.custom_call", [x, indices, init, init_index],
                  [aval, indices_aval, scalar, index],
                  props=f'call_target_name = "ApproxTopK", called_computations = [@{comparator}]',
                  attrs=f"mhlo.backend_config = {{{config}}}")


abstract_eval_rules[approx_top_k_p] = _abstract
register_lowering(approx_top_k_p, lower_fun(_exact, multiple_results=True))
register_lowering(approx_top_k_p, _tpu, platform="tpu")
jvp_rules[approx_top_k_p] = _jvp
batch_rules[approx_top_k_p] = _batch


def _approx_k(operand, k, reduction_dimension, recall_target, reduction_input_size_override,
              aggregate_to_topk, is_max_k):
    return list(approx_top_k_p.bind(
        operand, k=operator.index(k), reduction_dimension=operator.index(reduction_dimension),
        recall_target=float(recall_target), is_max_k=is_max_k,
        reduction_input_size_override=operator.index(reduction_input_size_override),
        aggregate_to_topk=bool(aggregate_to_topk)))


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    """The ``k`` largest entries of ``operand`` along ``reduction_dimension`` (descending) and
    their int32 indices: approximate on TPU, exact on CPU."""
    return _approx_k(operand, k, reduction_dimension, recall_target,
                     reduction_input_size_override, aggregate_to_topk, True)


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    """The ``k`` smallest entries of ``operand`` along ``reduction_dimension`` (ascending) and
    their int32 indices: approximate on TPU, exact on CPU."""
    return _approx_k(operand, k, reduction_dimension, recall_target,
                     reduction_input_size_override, aggregate_to_topk, False)
