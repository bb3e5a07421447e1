"""Mosaic kernels written directly in MLIR, run as plax functions (``jax.experimental.mosaic``).

``as_tpu_kernel(module, out_type, ...)`` takes a Mosaic module built with jaxlib's MLIR
bindings (func, arith, vector, memref and the ``tpu`` dialect) and returns a function of
arrays: each call binds ``tpu_custom_call_p``, which lowers on a TPU to the
``stablehlo.custom_call @tpu_custom_call`` carrying the serialised module and its backend
config, as ``pallas_call`` does (``plax.pallas.mosaic_call``). Other platforms cannot run a
Mosaic kernel and refuse it.
"""
from __future__ import annotations

import enum
import types


from plax import tree_util
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import batch_rules, register_lowering
from plax.first_order import shapes, slicing
from plax.pallas import mosaic_bindings
from plax.pallas.mosaic_call import (MEMORY_COLORS, MOSAIC_DIALECT_VERSION, backend_config,
                                     emit_tpu_custom_call)
from plax.pallas.mosaic_lowering import LoweringException

__all__ = ["TpuSideEffectType", "as_tpu_kernel", "tpu_custom_call_p"]

tpu_custom_call_p = Primitive("tpu_custom_call", multiple_results=True)


class TpuSideEffectType(enum.Enum):
    """How a Mosaic kernel's side effects constrain XLA: none, only its data flow (it may
    be removed when its results are unused), or all of them."""

    PURE = 0
    DATAFLOW_SIDE_EFFECTING = 1
    SIDE_EFFECTING = 2


def _color(space, what: str):
    if space is None:
        return None
    if isinstance(getattr(space, "color", None), int):  # (JAX's MemorySpace)
        return space.color
    color = MEMORY_COLORS.get(getattr(space, "value", None))
    if color is None:
        raise ValueError(f"as_tpu_kernel: {what} must be TPU memory spaces (HBM, VMEM, SMEM, "
                         f"semaphore memory) or None, got {space!r}.")
    return color


def _module_text(module) -> str:
    operation = getattr(module, "operation", None)
    if operation is None:
        raise TypeError(f"as_tpu_kernel takes an MLIR module (jaxlib.mlir.ir.Module) of a "
                        f"Mosaic kernel, got {type(module).__name__}.")
    return operation.get_asm(enable_debug_info=False)


def as_tpu_kernel(module, out_type, *, cost_estimate=None, kernel_name: str | None = None,
                  vmem_limit_bytes: int | None = None, flags=None, allow_input_fusion=None,
                  input_output_aliases: tuple = (), internal_scratch_in_bytes=None,
                  collective_id: int | None = None,
                  has_side_effects: TpuSideEffectType = TpuSideEffectType.PURE,
                  serialization_format: int | None = 1, output_memory_spaces=None,
                  disable_bounds_checks: bool = False, disable_semaphore_checks: bool = False,
                  input_memory_spaces=None, shape_invariant_numerics: bool = False,
                  needs_layout_passes: bool | None = None, metadata=None, tiling=None):
    """The Mosaic kernel ``module`` as a function of its operands returning arrays shaped as
    ``out_type`` (a pytree of ShapeDtypeStructs), compiled by Mosaic on a TPU."""
    if tiling is not None:
        raise ValueError("explicit tiling is only supported for SparseCore kernels.")
    try:
        body, communicates, barrier = mosaic_bindings.serialize_kernel(
            _module_text(module), MOSAIC_DIALECT_VERSION)
    except mosaic_bindings.MosaicModuleError as e:
        raise LoweringException(f"as_tpu_kernel: {e}") from None
    if barrier and collective_id is None:
        raise ValueError("collective_id has to be specified when using a custom barrier")
    params = {"vmem_limit_bytes": vmem_limit_bytes, "flags": flags,
              "allow_input_fusion": allow_input_fusion,
              "internal_scratch_in_bytes": internal_scratch_in_bytes,
              "collective_id": collective_id, "serialization_format": serialization_format,
              "disable_bounds_checks": disable_bounds_checks,
              "disable_semaphore_checks": disable_semaphore_checks,
              "shape_invariant_numerics": shape_invariant_numerics,
              "needs_layout_passes": True if needs_layout_passes is None
              else needs_layout_passes}
    cost = types.SimpleNamespace(**cost_estimate) if isinstance(cost_estimate, dict) \
        else cost_estimate
    out_colors = [_color(m, "output_memory_spaces") for m in output_memory_spaces or ()]
    in_colors = [None if c == MEMORY_COLORS["smem"] else c
                 for c in (_color(m, "input_memory_spaces") for m in input_memory_spaces or ())]
    config = backend_config(body, params, cost, out_colors=out_colors, in_colors=in_colors,
                            has_communication=communicates)
    leaves, tree = tree_util.tree_flatten(out_type)
    out_avals = tuple(ShapedArray(tuple(s.shape), dtypes.dtype(s.dtype)) for s in leaves)
    level = has_side_effects.value if isinstance(has_side_effects, TpuSideEffectType) \
        else 2 if has_side_effects else 0
    meta = None if metadata is None else _metadata_json(metadata)

    def kernel(*args):
        outs = tpu_custom_call_p.bind(
            *args, config=config, kernel_name=kernel_name, out_avals=out_avals,
            input_output_aliases=tuple(tuple(p) for p in input_output_aliases),
            side_effect_level=level, metadata=meta)
        return tree_util.tree_unflatten(tree, outs)
    return kernel


def _metadata_json(metadata) -> str:
    import json
    return json.dumps(dict(metadata), sort_keys=True, indent=0, separators=(",", ":"))


def _abstract(*avals, out_avals, **_):
    return list(out_avals)


def _tpu_lowering(ctx, *args, config, kernel_name, out_avals, input_output_aliases,
                  side_effect_level, metadata):
    return emit_tpu_custom_call(ctx, args, config, kernel_name, side_effect_level,
                                input_output_aliases, metadata)


def _other_lowering(ctx, *args, **_):
    raise NotImplementedError(
        f"A Mosaic kernel (as_tpu_kernel) runs only on a TPU; this program is lowered for "
        f"{ctx.platform}. Write the kernel with pallas_call to run it in interpret mode "
        "elsewhere.")


def _batch(axis, vals, dims, **params):
    """Only a batch of one: the kernel runs on the unbatched operands and each result gets a
    leading axis of size 1 (a Mosaic module has fixed shapes, as in JAX)."""
    if axis.size != 1:
        raise NotImplementedError(
            f"tpu_custom_call does not support non-trivial batching: a Mosaic module has fixed "
            f"shapes, and this vmap has size {axis.size}. Write the kernel with pallas_call, "
            "whose vmap adds a grid axis.")
    unbatched = [v if d is None else slicing.index_in_dim(v, 0, d, keepdims=False)
                 for v, d in zip(vals, dims)]
    outs = tpu_custom_call_p.bind(*unbatched, **params)
    return [shapes.expand_dims(o, (0,)) for o in outs], [0] * len(outs)


tpu_custom_call_p.def_abstract_eval(_abstract)
batch_rules[tpu_custom_call_p] = _batch
register_lowering(tpu_custom_call_p, _other_lowering)
register_lowering(tpu_custom_call_p, _tpu_lowering, platform="tpu")
