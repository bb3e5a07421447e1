"""Shape primitives: broadcast, reshape, transpose, squeeze, rev, concatenate, pad, iota,
and the array constructors full and full_like (the slices are in ``slicing``).

These ops move data without arithmetic, so every result keeps its operand's
dtype and weak type (n-ary ones are weak only when all inputs are). All but
iota are linear: their tangent is the op applied to the tangent, and their
transposes move the cotangent back to the operand's layout. Batching rules
keep the operand's batch dimension where the op allows it; static axis
parameters are shifted past it.
"""
from __future__ import annotations

import math

import numpy as np

from plax.core import dtypes, replication
from plax.core.avals import ShapedArray, weak_host_value
from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, batch_rules, is_undefined, lowering_rules,
                             not_mapped, out_sharding_params, param_printers,
                             register_lowering, transpose_rules)
from plax.core.sharding_types import (ShardingTypeError, axes_of, first_sharding,
                                      given_or_replicated, like, same_as_operand, sharding_rules,
                                      spec_of)
from plax.core.sharding_types import with_entry
from plax.core.trace import get_aval
from plax.first_order import conversion as _conv
# shapes sits below comparison, arithmetic, slicing and reductions in the family order
# (plax/lax/__init__.py): the rules built on their ops import them in the function body.
from plax.first_order.ad_util import deflinear, defzero
from plax.first_order.batch_util import common_dim, move_batch_dim
from plax.first_order.common import (as_int_tuple, canonical_axis, check_dtype, check_nonnegative,
                             check_same_dtypes, shape_tuple, weak_of)
from plax.lowering.stablehlo import RuleContext, i64_array
from plax.sharding.mesh import context_mesh
from plax.sharding.named import NamedSharding, out_sharding_param
from plax.sharding.partition_spec import PartitionSpec

__all__ = ["broadcast_in_dim", "broadcast", "full", "full_like", "reshape", "transpose", "squeeze",
           "expand_dims", "rev", "concatenate", "pad", "iota", "broadcasted_iota"]


# --- shared checks ----------------------------------------------------------------------
def _is_permutation(perm: tuple, ndim: int) -> bool:
    return sorted(perm) == list(range(ndim))


def _check_unique_dims(prim: str, what: str, dims: tuple, ndim: int, shape) -> None:
    """Each of ``dims`` is a distinct axis in ``[0, ndim)``."""
    check_nonnegative(prim, what, dims)
    if any(d >= ndim for d in dims):
        raise TypeError(f"{prim} {what} must all be less than operand ndim, got {what} {dims} "
                        f"for operand shape {tuple(shape)} (ndim {ndim}).")
    if len(set(dims)) != len(dims):
        raise TypeError(f"{prim} {what} must be unique, got {dims}.")


def _is_array_value(x) -> bool:
    """Whether ``x`` is already a plax value that a no-op may return unchanged."""
    return not isinstance(x, (np.ndarray, np.generic, bool, int, float, complex))


def _shift_dims(dims, at: int) -> tuple:
    """Per-example axis numbers as axes of the batched value (batch at ``at``)."""
    return tuple(d + 1 if d >= at else d for d in dims)


# --- broadcast_in_dim -------------------------------------------------------------------
broadcast_in_dim_p = Primitive("broadcast_in_dim")


def _broadcast_in_dim_abstract(x, *, shape, broadcast_dimensions, sharding=None):
    check_nonnegative("broadcast_in_dim", "shape", shape)
    dims = broadcast_dimensions
    if len(dims) != x.ndim:
        raise TypeError("broadcast_in_dim broadcast_dimensions must have length equal to operand "
                        f"ndim; got broadcast_dimensions {dims} for operand shape {x.shape} "
                        f"(ndim {x.ndim}).")
    if any(not 0 <= d < len(shape) for d in dims) or len(set(dims)) != len(dims):
        raise TypeError("broadcast_in_dim broadcast_dimensions must be distinct output dimensions, "
                        f"got {dims} for operand shape {x.shape} and target shape {shape}.")
    if any(x.shape[i] not in (1, shape[d]) for i, d in enumerate(dims)):
        raise TypeError("broadcast_in_dim operand dimension sizes must either be 1, or be equal to "
                        "their corresponding dimensions in the target broadcast shape; got operand "
                        f"of shape {x.shape}, target broadcast shape {shape}, broadcast_dimensions "
                        f"{dims}.")
    return ShapedArray(shape, x.dtype, x.weak_type)


def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions, sharding=None):
    from plax.first_order import reductions as _reductions
    new_dims = tuple(i for i in range(len(shape)) if i not in broadcast_dimensions)
    grown = tuple(d for d, size in zip(broadcast_dimensions, x.aval.shape)
                  if size == 1 and shape[d] != 1)
    summed = _reductions.reduce_sum(ct, tuple(sorted(new_dims + grown)))
    return [reshape(summed, x.aval.shape)]


def _broadcast_in_dim_batch(axis, vals, dims, *, shape, broadcast_dimensions, sharding=None):
    (x,), (bd,) = vals, dims
    # The new output axis sits after the output axis of the operand's previous axis and
    # before that of its next, so broadcast_dimensions stay increasing when they were.
    # The lowest such place: a leading batch stays leading, as JAX puts it.
    bdims = broadcast_dimensions
    out = bdims[bd - 1] + 1 if bd > 0 else 0
    new_dims = _shift_dims(broadcast_dimensions, out)
    new_dims = new_dims[:bd] + (out,) + new_dims[bd:]
    new_shape = shape[:out] + (axis.size,) + shape[out:]
    sharding = with_entry(sharding, out, spec_of(get_aval(x))[bd])  # the batch keeps its split
    return broadcast_in_dim_p.bind(x, shape=new_shape, broadcast_dimensions=new_dims,
                                   sharding=sharding), out


abstract_eval_rules[broadcast_in_dim_p] = _broadcast_in_dim_abstract
register_lowering(broadcast_in_dim_p, lambda ctx, x, *, shape, broadcast_dimensions, sharding=None:
                  ctx.op1("stablehlo.broadcast_in_dim", [x],
                          props=f"broadcast_dimensions = {i64_array(broadcast_dimensions)}"))
# As in JAX's jaxprs, the result type already shows the shape; hide it.
param_printers[broadcast_in_dim_p] = lambda p: {
    k: v for k, v in p.items() if k == "broadcast_dimensions" and v != ()}
deflinear(broadcast_in_dim_p)
transpose_rules[broadcast_in_dim_p] = _broadcast_in_dim_transpose
batch_rules[broadcast_in_dim_p] = _broadcast_in_dim_batch


def broadcast_in_dim(operand, shape, broadcast_dimensions, *, out_sharding=None):
    """Broadcast ``operand`` to ``shape``; its axis i becomes axis broadcast_dimensions[i]
    (``out_sharding``: the result's sharding, on Explicit axes)."""
    shape = shape_tuple(shape, "broadcast_in_dim shape")
    dims = as_int_tuple(broadcast_dimensions, "broadcast_in_dim broadcast_dimensions")
    out_sharding = out_sharding_param(out_sharding, len(shape), "broadcast_in_dim")
    aval = get_aval(operand)
    if aval.shape == shape and dims == tuple(range(aval.ndim)) and _is_array_value(operand) \
            and out_sharding is None:
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims,
                                   sharding=out_sharding)


def broadcast(operand, sizes, *, out_sharding=None):
    """Add leading dimensions of the given ``sizes`` to ``operand``."""
    sizes = shape_tuple(sizes, "broadcast sizes")
    aval = get_aval(operand)
    return broadcast_in_dim(operand, sizes + aval.shape,
                            tuple(range(len(sizes), len(sizes) + aval.ndim)),
                            out_sharding=out_sharding)


def full(shape, fill_value, dtype=None, *, sharding=None):
    """An array of ``shape`` filled with the scalar ``fill_value`` (in ``dtype`` if given,
    else the value's own dtype, weakly typed for a Python scalar)."""
    if dtype is None:
        dt, weak = dtypes.dtype(fill_value, canonicalize=True), dtypes.is_weakly_typed(fill_value)
    else:
        dt, weak = dtypes.canonicalize_user_dtype(dtype), False
        if hasattr(dt, "_rules"):  # a user's extended dtype fills its own way
            return dt._rules.full(shape, fill_value, dt)
    return _full(shape, fill_value, dt, weak, sharding)


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """``full`` with the shape and dtype (and weak type) of ``x`` unless given."""
    aval = get_aval(x)
    if dtype is None:
        dt, weak = aval.dtype, aval.weak_type
    else:
        dt, weak = dtypes.canonicalize_user_dtype(dtype), False
    out = _full(aval.shape if shape is None else shape, fill_value, dt, weak, sharding)
    return replication.vary_like(out, x)  # inside shard_map: varying as x is


def _full(shape, fill_value, dt, weak: bool, sharding):
    shape = shape_tuple(shape, "full shape")
    traced = hasattr(fill_value, "aval")  # an Array or a tracer
    fill_shape = get_aval(fill_value).shape if traced else np.shape(fill_value)
    if fill_shape != ():
        raise TypeError(f"full must be called with scalar fill_value, got fill_value.shape "
                        f"{fill_shape}.")
    if not traced:
        if type(fill_value) is int and dtypes.is_integer(dt):
            fill_value = np.asarray(fill_value).astype(dt)  # wraps around, as a conversion does
        fill = weak_host_value(fill_value, dt) if weak else np.array(fill_value, dt)
    elif (get_aval(fill_value).dtype, get_aval(fill_value).weak_type) != (dt, weak):
        fill = _conv.convert_with_weak_type(fill_value, dt, weak)
    else:
        fill = fill_value
    if sharding is not None and is_explicit_sharding(sharding):
        return broadcast_in_dim(fill, shape, (), out_sharding=sharding)
    out = broadcast_in_dim(fill, shape, ())
    return out if sharding is None else _laid_out(out, sharding)


def _laid_out(x, sharding):
    """``x`` laid out by ``sharding`` (no Explicit axes): a NamedSharding or PartitionSpec
    through ``with_sharding_constraint`` (a move when eager, a constraint under jit); another
    sharding moves concrete data and is ignored under jit."""
    from plax.first_order.sharding_constraint import with_sharding_constraint
    from plax.runtime import dispatch
    from plax.runtime.array import CONCRETE
    if isinstance(sharding, (NamedSharding, PartitionSpec)):
        return with_sharding_constraint(x, sharding)
    if type(x) not in CONCRETE:
        return x
    devices = sharding.device_set
    if len(devices) == 1:
        return dispatch.to_device(x, next(iter(devices)))
    return dispatch.reshard(x, sharding)


def is_explicit_sharding(sharding) -> bool:
    """Whether ``sharding`` (a PartitionSpec over the context mesh, or a NamedSharding) is on
    a mesh with Explicit axes, where it is part of the result's type."""
    if isinstance(sharding, PartitionSpec):
        mesh = context_mesh()
        return mesh is not None and bool(mesh.explicit_axes)
    return isinstance(sharding, NamedSharding) and bool(sharding.mesh.explicit_axes)


# --- reshape ----------------------------------------------------------------------------
reshape_p = Primitive("reshape")


def _reshape_abstract(x, *, new_sizes, dimensions, sharding=None):
    if any(d < 0 for d in new_sizes):
        raise TypeError(f"reshape new_sizes must all be nonnegative, got {new_sizes}.")
    if math.prod(new_sizes) != x.size:
        # A ValueError, as JAX's (which comes from the StableHLO verifier).
        raise ValueError(f"reshape total size must be unchanged, got new_sizes {new_sizes} "
                        f"(size {math.prod(new_sizes)}) for operand shape "
                        f"{x.shape} (size {x.size}).")
    if dimensions is not None and not _is_permutation(dimensions, x.ndim):
        raise TypeError("reshape dimensions must be a permutation of operand dimensions, got "
                        f"dimensions {dimensions} for shape {x.shape}.")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


def reshape_operand_in_order(ctx, x, dimensions):
    """A reshape's operand with its ``dimensions`` permutation applied first (a transpose when
    given): (the value, its aval)."""
    aval = ctx.avals_in[0]
    if dimensions is not None:
        moved = aval.update(shape=tuple(aval.shape[d] for d in dimensions))
        x = ctx.op1("stablehlo.transpose", [x], [aval], moved,
                    props=f"permutation = {i64_array(dimensions)}")
        aval = moved
    return x, aval


def _reshape_lowering(ctx, x, *, new_sizes, dimensions, sharding=None):
    x, aval = reshape_operand_in_order(ctx, x, dimensions)
    return ctx.op1("stablehlo.reshape", [x], [aval])


def _reshape_transpose(ct, x, *, new_sizes, dimensions, sharding=None):
    if dimensions is None:
        return [reshape(ct, x.aval.shape)]
    return [transpose(reshape(ct, tuple(x.aval.shape[d] for d in dimensions)),
                      tuple(np.argsort(dimensions)))]


def _reshape_batch(axis, vals, dims, *, new_sizes, dimensions, sharding=None):
    (x,), (bd,) = vals, dims
    # Bring the batch to the front within the reshape's own transposition.
    order = tuple(range(get_aval(x).ndim - 1)) if dimensions is None else dimensions
    perm = (bd,) + _shift_dims(order, bd)
    return reshape(x, (axis.size,) + tuple(new_sizes), perm,
                   out_sharding=with_entry(sharding, 0, spec_of(get_aval(x))[bd])), 0


abstract_eval_rules[reshape_p] = _reshape_abstract
register_lowering(reshape_p, _reshape_lowering)
deflinear(reshape_p)
transpose_rules[reshape_p] = _reshape_transpose
batch_rules[reshape_p] = _reshape_batch


def reshape(operand, new_sizes, dimensions=None, *, out_sharding=None):
    """Reshape ``operand`` to ``new_sizes``, first transposing by ``dimensions`` if given;
    ``out_sharding`` gives the result's sharding (Explicit axes)."""
    new_sizes = shape_tuple(new_sizes, "reshape new_sizes")
    out_sharding = out_sharding_param(out_sharding, len(new_sizes), "reshape")
    aval = get_aval(operand)
    if dimensions is not None:
        dimensions = as_int_tuple(dimensions, "reshape dimensions")
        if dimensions == tuple(range(aval.ndim)):
            dimensions = None
    if new_sizes == aval.shape and dimensions is None and _is_array_value(operand) and \
            out_sharding is None:
        return operand
    return reshape_p.bind(operand, new_sizes=new_sizes, dimensions=dimensions,
                          sharding=out_sharding)


# --- transpose --------------------------------------------------------------------------
transpose_p = Primitive("transpose")


def _transpose_abstract(x, *, permutation):
    if not _is_permutation(permutation, x.ndim):
        raise TypeError("transpose permutation isn't a permutation of operand dimensions, got "
                        f"permutation {permutation} for operand shape {x.shape}.")
    return x.update(shape=tuple(x.shape[p] for p in permutation))


def _transpose_batch(axis, vals, dims, *, permutation):
    (x,), (bd,) = vals, dims
    perm = _shift_dims(permutation, bd)
    return transpose(x, perm[:bd] + (bd,) + perm[bd:]), bd


abstract_eval_rules[transpose_p] = _transpose_abstract
register_lowering(transpose_p, lambda ctx, x, *, permutation: ctx.op1(
    "stablehlo.transpose", [x], props=f"permutation = {i64_array(permutation)}"))
deflinear(transpose_p)
transpose_rules[transpose_p] = lambda ct, x, *, permutation: [
    transpose(ct, tuple(int(i) for i in np.argsort(permutation)))]
batch_rules[transpose_p] = _transpose_batch


def transpose(operand, permutation):
    """Permute the axes of ``operand``: output axis i is input axis permutation[i]."""
    permutation = as_int_tuple(permutation, "transpose permutation")
    if permutation == tuple(range(len(permutation))) and _is_array_value(operand) \
            and get_aval(operand).ndim == len(permutation):
        return operand
    return transpose_p.bind(operand, permutation=permutation)


# --- squeeze / expand_dims ----------------------------------------------------------------
squeeze_p = Primitive("squeeze")


def _squeeze_abstract(x, *, dimensions):
    _check_unique_dims("squeeze", "dimensions", dimensions, x.ndim, x.shape)
    if any(x.shape[d] != 1 for d in dimensions):
        raise ValueError("cannot select an axis to squeeze out which has size not equal to one, "
                         f"got shape={x.shape} and dimensions={dimensions}.")
    return x.update(shape=tuple(s for i, s in enumerate(x.shape) if i not in dimensions))


def _squeeze_batch(axis, vals, dims, *, dimensions):
    (x,), (bd,) = vals, dims
    return squeeze_p.bind(x, dimensions=_shift_dims(dimensions, bd)), \
        bd - sum(d < bd for d in dimensions)


abstract_eval_rules[squeeze_p] = _squeeze_abstract
register_lowering(squeeze_p, lambda ctx, x, *, dimensions: ctx.op1("stablehlo.reshape", [x]))
deflinear(squeeze_p)
transpose_rules[squeeze_p] = lambda ct, x, *, dimensions: [reshape(ct, x.aval.shape)]
batch_rules[squeeze_p] = _squeeze_batch


def squeeze(array, dimensions):
    """Remove the size-1 axes ``dimensions`` (negative values count from the end)."""
    ndim = get_aval(array).ndim
    dims = as_int_tuple(dimensions, "squeeze dimensions")
    canon = tuple(sorted(canonical_axis(d, ndim, "squeeze dimension") for d in dims))
    if len(set(canon)) != len(canon):
        raise ValueError(f"squeeze dimensions are not unique: {dims}.")
    if not canon and _is_array_value(array):
        return array
    return squeeze_p.bind(array, dimensions=canon)


def expand_dims(array, dimensions):
    """Insert size-1 axes at ``dimensions`` (result positions; negatives count from the end)."""
    aval = get_aval(array)
    dims = as_int_tuple(dimensions, "expand_dims dimensions")
    ndim_out = aval.ndim + len(dims)
    canon = []
    for d in dims:
        if not -ndim_out <= d < ndim_out:
            raise ValueError(f"expand_dims axis {d} is out of bounds for a result of dimension "
                             f"{ndim_out} (operand shape {aval.shape}).")
        canon.append(d % ndim_out)
    if len(set(canon)) != len(canon):
        raise ValueError(f"repeated axis in lax.expand_dims: {dims}.")
    if not canon:
        return array
    kept = [i for i in range(ndim_out) if i not in canon]
    shape = [1] * ndim_out
    for i, s in zip(kept, aval.shape):
        shape[i] = s
    return broadcast_in_dim(array, tuple(shape), tuple(kept))


# --- rev --------------------------------------------------------------------------------
rev_p = Primitive("rev")


def _rev_abstract(x, *, dimensions):
    _check_unique_dims("rev", "dimensions", dimensions, x.ndim, x.shape)
    return x


def _rev_batch(axis, vals, dims, *, dimensions):
    (x,), (bd,) = vals, dims
    return rev_p.bind(x, dimensions=_shift_dims(dimensions, bd)), bd


abstract_eval_rules[rev_p] = _rev_abstract
register_lowering(rev_p, lambda ctx, x, *, dimensions: ctx.op1(
    "stablehlo.reverse", [x], props=f"dimensions = {i64_array(dimensions)}"))
deflinear(rev_p)
transpose_rules[rev_p] = lambda ct, x, *, dimensions: [rev(ct, dimensions)]
batch_rules[rev_p] = _rev_batch


def rev(operand, dimensions):
    """Reverse ``operand`` along each axis in ``dimensions``."""
    return rev_p.bind(operand, dimensions=as_int_tuple(dimensions, "rev dimensions"))


# --- concatenate ------------------------------------------------------------------------
concatenate_p = Primitive("concatenate")


def _concatenate_abstract(*xs, dimension):
    if not xs:
        raise ValueError("concatenate requires a non-empty sequence of arrays.")
    check_same_dtypes("concatenate", *xs)
    shapes = ", ".join(str(x.shape) for x in xs)
    if len({x.ndim for x in xs}) != 1:
        raise TypeError(f"Cannot concatenate arrays with different numbers of dimensions: got "
                        f"{shapes}.")
    if not 0 <= dimension < xs[0].ndim:
        raise TypeError(f"concatenate dimension out of bounds: dimension {dimension} for shapes "
                        f"{shapes}.")
    rest = {x.shape[:dimension] + x.shape[dimension + 1:] for x in xs}
    if len(rest) != 1:
        raise TypeError("Cannot concatenate arrays with shapes that differ in dimensions other "
                        f"than the one being concatenated: concatenating along dimension "
                        f"{dimension} for shapes {shapes}.")
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, xs[0].dtype, weak_of(*xs))


def _concatenate_transpose(ct, *xs, dimension):
    from plax.first_order import slicing as _slicing
    out, start = [], 0
    for x in xs:
        size = (x.aval if is_undefined(x) else get_aval(x)).shape[dimension]
        if not is_undefined(x):
            out.append(None)
        else:
            out.append(_slicing.slice_in_dim(ct, start, start + size, axis=dimension))
        start += size
    return out


def _concatenate_batch(axis, vals, dims, *, dimension):
    batched = [(v, d) for v, d in zip(vals, dims) if d is not not_mapped]
    bd = common_dim(*zip(*batched))
    xs = [move_batch_dim(v, d, bd, axis.size) for v, d in zip(vals, dims)]
    return concatenate_p.bind(*xs, dimension=dimension + (dimension >= bd)), bd


abstract_eval_rules[concatenate_p] = _concatenate_abstract
register_lowering(concatenate_p, lambda ctx, *xs, dimension: ctx.op1(
    "stablehlo.concatenate", list(xs), props=f"dimension = {int(dimension)} : i64"))
deflinear(concatenate_p)
transpose_rules[concatenate_p] = _concatenate_transpose
batch_rules[concatenate_p] = _concatenate_batch


def concatenate(operands, dimension):
    """Join ``operands`` (same dtype, same shape except along ``dimension``) along ``dimension``."""
    operands = list(operands)
    dimension = int(dimension)
    if len(operands) == 1 and _is_array_value(operands[0]):
        _concatenate_abstract(get_aval(operands[0]), dimension=dimension)
        return operands[0]
    return concatenate_p.bind(*operands, dimension=dimension)


# --- pad --------------------------------------------------------------------------------
pad_p = Primitive("pad")


def _padded_size(size: int, lo: int, hi: int, interior: int) -> int:
    if interior == 0:  # (no comparison: a symbolic size may be 0)
        return lo + hi + size
    from plax.core.symbolic_shapes import max_dim
    return lo + hi + size + max_dim(size - 1, 0) * interior


def _pad_abstract(x, padding_value, *, padding_config):
    if padding_value.ndim != 0:
        raise ValueError(f"pad padding_value must be a scalar, got shape {padding_value.shape}.")
    if x.dtype != padding_value.dtype:
        raise TypeError("pad operand and padding_value must be same dtype: got "
                        f"{x.dtype.name} and {padding_value.dtype.name}.")
    if len(padding_config) != x.ndim:
        raise ValueError("length of padding_config must equal the number of axes of operand, got "
                         f"padding_config {padding_config} for operand shape {x.shape}.")
    if any(interior < 0 for _, _, interior in padding_config):
        raise ValueError("interior padding in padding_config must be nonnegative, got "
                         f"padding_config {padding_config}.")
    shape = tuple(_padded_size(s, *cfg) for s, cfg in zip(x.shape, padding_config))
    if any(s < 0 for s in shape):
        raise ValueError(f"Dimension size after padding is not at least 0, got result shape "
                         f"{shape}, for padding_config {padding_config} and operand shape "
                         f"{x.shape}.")
    return ShapedArray(shape, x.dtype, weak_of(x, padding_value))


def _pad_lowering(ctx, x, padding_value, *, padding_config):
    lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
    return ctx.op1("stablehlo.pad", [x, padding_value],
                   props=f"edge_padding_low = {i64_array(lo)}, edge_padding_high = "
                         f"{i64_array(hi)}, interior_padding = {i64_array(interior)}")


def _pad_transpose(ct, x, padding_value, *, padding_config):
    from plax.first_order import arithmetic as _arith, reductions as _reductions, slicing as _slicing
    # Undo the padding with a negative pad, then keep every (interior+1)-th element.
    unpadded = pad(ct, np.zeros((), get_aval(ct).dtype),
                   tuple((-lo, -hi, 0) for lo, hi, _ in padding_config))
    t_x = _slicing.slice(unpadded, (0,) * len(padding_config), get_aval(unpadded).shape,
                         tuple(i + 1 for _, _, i in padding_config))
    out = [t_x if is_undefined(x) else None]
    if is_undefined(padding_value):
        all_axes = tuple(range(len(padding_config)))
        out.append(_arith.sub(_reductions.reduce_sum(ct, all_axes),
                              _reductions.reduce_sum(t_x, all_axes)))
    else:
        out.append(None)
    return out


def _pad_batch(axis, vals, dims, *, padding_config):
    (x, pv), (bx, bp) = vals, dims
    bd = 0 if bx is not_mapped else bx
    x = move_batch_dim(x, bx, bd, axis.size)
    config = padding_config[:bd] + ((0, 0, 0),) + padding_config[bd:]
    if bp is not_mapped:
        return pad_p.bind(x, pv, padding_config=config), bd
    # A batched padding value: pad with zeros, then select the padding value where a padded
    # mask says there was no operand element.
    zero = np.zeros((), get_aval(x).dtype)
    padded = pad_p.bind(x, zero, padding_config=config)
    shape = get_aval(x).shape
    ones = broadcast_in_dim(np.bool_(True), shape[:bd] + shape[bd + 1:], ())
    mask = pad_p.bind(ones, np.bool_(False), padding_config=padding_config)
    out_shape = get_aval(padded).shape
    kept = tuple(i for i in range(len(out_shape)) if i != bd)
    from plax.first_order import comparison as _cmp
    return _cmp.select_n(broadcast_in_dim(mask, out_shape, kept),
                         broadcast_in_dim(pv, out_shape, (bd,)), padded), bd


abstract_eval_rules[pad_p] = _pad_abstract
register_lowering(pad_p, _pad_lowering)
deflinear(pad_p)
transpose_rules[pad_p] = _pad_transpose
batch_rules[pad_p] = _pad_batch


def pad(operand, padding_value, padding_config):
    """Pad each axis with (low, high, interior) copies of the scalar ``padding_value``.

    Negative low/high padding removes elements from that edge.
    """
    config = []
    for cfg in padding_config:
        cfg = as_int_tuple(cfg, "pad padding_config entry")
        if len(cfg) != 3:
            raise ValueError(f"pad padding_config entries must be (low, high, interior) triples, "
                             f"got {cfg}.")
        config.append(cfg)
    return pad_p.bind(operand, padding_value, padding_config=tuple(config))


# --- iota -------------------------------------------------------------------------------
iota_p = Primitive("iota")


def _iota_abstract(*, dtype, shape, dimension, sharding=None):
    check_dtype("iota", ShapedArray((), dtype), "numeric")
    check_nonnegative("iota", "shape", shape)
    if not 0 <= dimension < len(shape):
        raise ValueError(f"iota dimension must be between 0 and len(shape), got "
                         f"dimension={dimension} for shape={shape}.")
    return ShapedArray(shape, dtype)


abstract_eval_rules[iota_p] = _iota_abstract
register_lowering(iota_p, lambda ctx, *, dtype, shape, dimension, sharding=None: ctx.op1(
    "stablehlo.iota", [], props=f"iota_dimension = {int(dimension)} : i64"))
defzero(iota_p)
# iota has no operands, so it is never batched.


def broadcasted_iota(dtype, shape, dimension, *, out_sharding=None):
    """An array of ``shape`` whose values count 0, 1, ... along ``dimension``."""
    dtype = dtypes.canonicalize_user_dtype(dtype, fun_name="broadcasted_iota")
    shape = shape_tuple(shape, "broadcasted_iota shape")
    return iota_p.bind(dtype=dtype, shape=shape, dimension=int(dimension),
                       sharding=out_sharding_param(out_sharding, len(shape), "broadcasted_iota"))


def iota(dtype, size):
    """The vector [0, 1, ..., size - 1] of ``dtype``."""
    return broadcasted_iota(dtype, shape_tuple(size, "iota size"), 0)


# --- sharding in types ------------------------------------------------------------------
def _broadcast_in_dim_sharding(avals_in, avals_out, *, shape, broadcast_dimensions,
                               sharding=None):
    if sharding is not None:
        return [like(sharding, sharding.spec)]
    x = avals_in[0]
    entries = [None] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] == shape[d]:
            entries[d] = spec_of(x)[i]
    return [like(x._sharding, entries)]


def _reshape_sharding(avals_in, avals_out, *, new_sizes, dimensions, sharding=None):
    if sharding is not None:
        return [like(sharding, sharding.spec)]
    x = avals_in[0]
    spec, shape = spec_of(x), x.shape
    if dimensions is not None:
        spec, shape = [spec[d] for d in dimensions], [shape[d] for d in dimensions]
    entries = reshaped_spec(shape, spec, new_sizes, x._sharding.mesh.shape)
    if entries is None:
        raise ShardingTypeError(
            "This reshape is not supported. Please specify the sharding of the output via the "
            "`out_sharding` argument of plax.lax.reshape (or reshard the operand). Got operand "
            f"type: {x.str_short(short_dtypes=False)}, new sizes: {tuple(new_sizes)}")
    return [like(x._sharding, entries)]


def reshaped_spec(shape, spec, new_sizes, mesh_shape):
    """The spec of ``shape`` (split as ``spec``) reshaped to ``new_sizes``, or None when no
    spec follows without moving data: dimensions kept keep their entry, merged ones take
    that of the major one if only it is split, and a split dimension gives its entry to
    the new major dimension when that divides by the axes' size."""
    if 0 in shape or 0 in new_sizes:
        return [None] * len(new_sizes) if all(e is None for e in spec) else None
    try:
        return _follow(shape, spec, new_sizes, mesh_shape)
    except IndexError:  # a split size-1 dimension: no spec follows
        return None


def _follow(shape, spec, new_sizes, mesh_shape):
    out, i, j = [], 0, 0
    n, m = len(shape), len(new_sizes)
    while i < n or j < m:
        if i < n and shape[i] == 1 and spec[i] is None and (j >= m or new_sizes[j] != 1):
            i += 1
            continue
        if j < m and new_sizes[j] == 1 and (i >= n or shape[i] != 1):
            out.append(None)
            j += 1
            continue
        gi, gj = [i], [j]
        a, b = shape[i], new_sizes[j]
        i, j = i + 1, j + 1
        while a != b:
            if a < b:
                a *= shape[i]
                gi.append(i)
                i += 1
            else:
                b *= new_sizes[j]
                gj.append(j)
                j += 1
        entries = [spec[k] for k in gi]
        if all(e is None for e in entries):
            out += [None] * len(gj)
        elif len(gi) == 1 and len(gj) == 1:
            out.append(entries[0])
        elif len(gj) == 1 and all(e is None for e in entries[1:]):
            out.append(entries[0])  # merged, the major dimension split
        elif len(gi) == 1:
            size = 1
            for ax in axes_of(entries[0]):
                size *= mesh_shape[ax]
            if new_sizes[gj[0]] % size:
                return None
            out += [entries[0]] + [None] * (len(gj) - 1)
        else:
            return None
    return out


def _transpose_sharding(avals_in, avals_out, *, permutation):
    spec = spec_of(avals_in[0])
    return [like(avals_in[0]._sharding, [spec[d] for d in permutation])]


def _squeeze_sharding(avals_in, avals_out, *, dimensions):
    spec = spec_of(avals_in[0])
    return [like(avals_in[0]._sharding, [e for d, e in enumerate(spec) if d not in dimensions])]


def _concatenate_sharding(avals_in, avals_out, *, dimension):
    specs = {spec_of(a) for a in avals_in}
    if len(specs) > 1:
        raise ShardingTypeError(
            "All operands should have the same sharding. Got shardings "
            f"{', '.join(str(a.sharding) for a in avals_in)}: reshard them to one first.")
    return [first_sharding(avals_in)]


sharding_rules[broadcast_in_dim_p] = _broadcast_in_dim_sharding
sharding_rules[reshape_p] = _reshape_sharding
sharding_rules[transpose_p] = _transpose_sharding
sharding_rules[squeeze_p] = _squeeze_sharding
sharding_rules[concatenate_p] = _concatenate_sharding
sharding_rules[pad_p] = same_as_operand
sharding_rules[iota_p] = given_or_replicated
for _prim in (broadcast_in_dim_p, reshape_p, iota_p):
    out_sharding_params[_prim] = "sharding"
