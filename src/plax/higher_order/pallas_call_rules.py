"""pallas_call_p's transformation rules, as JAX's: JVP and vmap both emit a new pallas_call.

- JVP: one joint kernel, the kernel's forward derivative on references. It reads the
  primal and tangent blocks of every input and writes the primal and tangent blocks of every
  output (tangent inputs follow the primal inputs, tangent outputs the primal outputs, tangent
  scratch buffers the primal ones). That kernel cannot be split into known and unknown parts,
  so reverse mode (grad, vjp, linearize) of a bare pallas_call fails as JAX's does
  ("Linearization failed to produce known values for all output primals", raised by the
  partial-evaluation rule); ``custom_vjp`` around a forward and a backward kernel is the way
  to differentiate in reverse.
- vmap: the batch becomes a new leading grid axis; every batched operand's block gets a
  squeezed leading dimension whose block index is that axis's program id (unbatched operands
  keep their blocks, their index maps ignore the new axis).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Var, eval_jaxpr
from plax.core.rules import Zero, batch_rules, jvp_rules, not_mapped, partial_eval_rules
from plax.core.staging import trace_to_jaxpr
from plax.first_order import shapes, slicing
from plax.first_order.ad_util import zeros_like_aval
from plax.first_order.batch_util import move_batch_dim
from plax.higher_order.loops import fori_loop
from plax.higher_order.pallas_call import BlockMapping, pallas_call_p
from plax.transforms.jvp import jvp_jaxpr

__all__ = []


# --- JVP ------------------------------------------------------------------------------------
def _differentiable(aval) -> bool:
    return dtypes.is_inexact(aval.dtype)


def _doubled_cost(cost):
    if cost is None:
        return None
    return dataclasses.replace(cost, flops=2 * cost.flops,
                               transcendentals=2 * cost.transcendentals,
                               bytes_accessed=2 * cost.bytes_accessed)


def _jvp(primals, tangents, *, jaxpr, grid_mapping, input_output_aliases, **params):
    gm = grid_mapping
    if input_output_aliases:
        raise NotImplementedError("JVP with aliasing not supported.")
    # (the grid's run-time sizes lead the operands, and follow the indices in the kernel)
    n_dyn = gm.num_dynamic_grid_bounds
    bounds, primals, tangents = primals[:n_dyn], primals[n_dyn:], tangents[n_dyn:]
    n_grid, n_in, n_out = len(gm.grid) + n_dyn, gm.num_inputs, gm.num_outputs
    in_bms, out_bms = gm.block_mappings[:n_in], gm.block_mappings[n_in:]
    in_nz = [type(t) is not Zero and _differentiable(bm.array_aval)
             for t, bm in zip(tangents, in_bms)]
    in_nz[:gm.num_scalar_prefetch] = [False] * gm.num_scalar_prefetch
    out_nz = [_differentiable(bm.array_aval) for bm in out_bms]
    scratch_nz = [_differentiable(a) for a in gm.scratch_avals]
    nonzeros = [False] * n_grid + in_nz + out_nz + scratch_nz
    joint, _ = jvp_jaxpr(ClosedJaxpr(jaxpr, ()), nonzeros, False, "pallas_call jvp")
    if joint.consts:
        raise NotImplementedError(
            f"The JVP of pallas_call {params.get('name')} captured constants "
            f"({len(joint.consts)}); this kernel's derivative is not supported.")
    # the jvp jaxpr takes (grid, inputs, outputs, scratch, their tangents); the kernel order
    # is (grid, inputs, input tangents, outputs, output tangents, scratch, scratch tangents)
    n_refs = n_in + n_out + len(scratch_nz)
    primal_vars = joint.jaxpr.invars[:n_grid + n_refs]
    tangent_vars = joint.jaxpr.invars[n_grid + n_refs:]
    grid_vars, pv = primal_vars[:n_grid], primal_vars[n_grid:]
    k_in, k_out = sum(in_nz), sum(out_nz)
    invars = (grid_vars + pv[:n_in] + tangent_vars[:k_in] + pv[n_in:n_in + n_out]
              + tangent_vars[k_in:k_in + k_out] + pv[n_in + n_out:]
              + tangent_vars[k_in + k_out:])
    body = Jaxpr(joint.jaxpr.constvars, invars, joint.jaxpr.outvars, joint.jaxpr.eqns)
    tan_in_bms = [bm for bm, nz in zip(in_bms, in_nz) if nz]
    tan_out_bms = [bm for bm, nz in zip(out_bms, out_nz) if nz]
    joint_gm = dataclasses.replace(
        gm, block_mappings=(*in_bms, *tan_in_bms, *out_bms, *tan_out_bms),
        num_inputs=n_in + k_in, num_outputs=n_out + k_out,
        scratch_avals=(*gm.scratch_avals,
                       *(a for a, nz in zip(gm.scratch_avals, scratch_nz) if nz)))
    tan_args = [t for t, nz in zip(tangents, in_nz) if nz]
    outs = pallas_call_p.bind(
        *bounds, *primals, *tan_args, jaxpr=body, grid_mapping=joint_gm, input_output_aliases=(),
        **dict(params, cost_estimate=_doubled_cost(params.get("cost_estimate"))))
    out_primals, out_tans = outs[:n_out], iter(outs[n_out:])
    out_tangents = [next(out_tans) if nz else Zero(bm.array_aval.to_tangent_aval())
                    for nz, bm in zip(out_nz, out_bms)]
    return out_primals, out_tangents


def _partial_eval(trace, args, params):
    """A pallas_call whose inputs are partly unknown (its JVP's joint kernel, under
    linearize) cannot be split into a known and an unknown kernel: reverse mode fails."""
    del trace, args
    raise ValueError(
        "Linearization failed to produce known values for all output primals. "
        f"pallas_call {params.get('name')} computes its primal outputs together with their "
        "tangents, so it does not support reverse-mode autodiff (grad, vjp, linearize); "
        "define the backward pass with jax.custom_vjp (a forward and a backward kernel).")


jvp_rules[pallas_call_p] = _jvp
partial_eval_rules[pallas_call_p] = _partial_eval


# --- vmap -----------------------------------------------------------------------------------
def _batched_index_map(bm: BlockMapping, dim) -> ClosedJaxpr:
    """``bm``'s index map taking the batch's grid index first; a batched operand's block
    index along its batch dimension ``dim`` is that index."""
    old = bm.index_map
    index_aval = ShapedArray((), np.dtype(np.int32))

    def new_map(b, *xs):
        blocks = list(eval_jaxpr(old.jaxpr, old.consts, *xs))
        if dim is not not_mapped:
            blocks.insert(dim, b)
        return blocks
    jaxpr, consts = trace_to_jaxpr(new_map, [index_aval, *old.in_avals],
                                   description=f"vmap of the index map of {bm.origin}")
    return ClosedJaxpr(jaxpr, consts)


def _batched_mapping(bm: BlockMapping, dim, size: int) -> BlockMapping:
    if dim is not_mapped:
        return dataclasses.replace(bm, index_map=_batched_index_map(bm, dim))
    shape = list(bm.array_aval.shape)
    shape.insert(dim, size)
    block = list(bm.block_shape)
    block.insert(dim, None)
    element = list(bm.element)
    if element:
        element.insert(dim, None)
    return dataclasses.replace(bm, block_shape=tuple(block), element=tuple(element),
                               array_aval=bm.array_aval.update(shape=tuple(shape)),
                               index_map=_batched_index_map(bm, dim))


def _scaled_cost(cost, size: int):
    if cost is None:
        return None
    return dataclasses.replace(cost, flops=size * cost.flops,
                               transcendentals=size * cost.transcendentals,
                               bytes_accessed=size * cost.bytes_accessed)


def _squeeze(x, dim):
    return x if dim is not_mapped else shapes.squeeze(x, (dim,))


def _batch_as_loop(size, vals, dims, params):
    """The batch as a loop of pallas_calls (batched grid sizes or scalar-prefetch operands,
    which shape the grid or select blocks, cannot become a grid axis): each member's
    operands sliced out, its results written into the batched outputs."""
    gm = params["grid_mapping"]
    outs0 = [zeros_like_aval(bm.array_aval.update(shape=(size, *bm.array_aval.shape)))
             for bm in gm.block_mappings[gm.num_inputs:]]

    def member(b, outs):
        args = [x if d is not_mapped else
                _squeeze(slicing.dynamic_slice_in_dim(x, b, 1, d), d)
                for x, d in zip(vals, dims)]
        results = pallas_call_p.bind(*args, **params)
        return [slicing.dynamic_update_index_in_dim(o, r, b, 0) for o, r in zip(outs, results)]
    outs = fori_loop(np.int32(0), np.int32(size), member, outs0)
    return outs, [0] * len(outs)


def _batch(axis, vals, dims, *, jaxpr, grid_mapping, input_output_aliases, **params):
    gm = grid_mapping
    size = axis.size
    n_pre = gm.num_scalar_prefetch
    vals, dims = list(vals), list(dims)
    if all(d is not_mapped for d in dims):
        outs = pallas_call_p.bind(*vals, jaxpr=jaxpr, grid_mapping=gm,
                                  input_output_aliases=input_output_aliases, **params)
        return outs, [not_mapped] * len(outs)
    if not vals:
        raise NotImplementedError("vmapping pallas_call with no arguments.")
    params = dict(params, jaxpr=jaxpr, input_output_aliases=input_output_aliases)
    if size == 1:
        outs = pallas_call_p.bind(*map(_squeeze, vals, dims), grid_mapping=gm, **params)
        return [shapes.expand_dims(o, (0,)) for o in outs], [0] * len(outs)
    n_dyn = gm.num_dynamic_grid_bounds  # (the grid's run-time sizes lead the operands)
    if any(d is not not_mapped for d in dims[:n_dyn + n_pre]):
        return _batch_as_loop(size, vals, dims, dict(params, grid_mapping=gm))
    for i, _ in input_output_aliases:  # an aliased output is batched at 0: so is its input
        vals[n_dyn + i] = move_batch_dim(vals[n_dyn + i], dims[n_dyn + i], 0, size)
        dims[n_dyn + i] = 0
    all_dims = dims[n_dyn:] + [0] * gm.num_outputs
    mappings = tuple(_batched_mapping(bm, d, size)
                     for bm, d in zip(gm.block_mappings, all_dims))
    names = None if gm.grid_names is None else (None, *gm.grid_names)
    batched_gm = dataclasses.replace(gm, grid=(size, *gm.grid), block_mappings=mappings,
                                     grid_names=names)
    # the kernel takes the new grid index first (it reads only its own grid's indices)
    body = Jaxpr(jaxpr.constvars, [Var(ShapedArray((), np.dtype(np.int32))), *jaxpr.invars],
                 jaxpr.outvars, jaxpr.eqns)
    params.update(jaxpr=body, cost_estimate=_scaled_cost(params.get("cost_estimate"), size))
    outs = pallas_call_p.bind(*vals, grid_mapping=batched_gm, **params)
    return outs, [0] * len(outs)


batch_rules[pallas_call_p] = _batch
