"""``pallas_call`` lowered for TPUs: the kernel compiled by Mosaic, as JAX lowers it.

Without interpret mode, a ``pallas_call`` equation lowers (platform "tpu") to one
``stablehlo.custom_call @tpu_custom_call`` whose ``backend_config`` is a JSON object:
``{"custom_call_config": {"body": <base64 of the serialised Mosaic module>,
"serialization_format": 1, "needs_layout_passes": true, ...}, ...}`` with the
``CompilerParams`` (``vmem_limit_bytes`` as a scoped VMEM config, ``flags``,
``allow_input_fusion``, ...) and the ``CostEstimate`` written where JAX writes them, the
memory colours of results whose ``out_shape`` names a memory space (a semaphore result lives
in semaphore memory) and of the inputs aliased to them, ``has_communication`` (remote DMAs
or signals, found by Mosaic) and ``collective_id``. The op also carries ``kernel_name``,
row-major operand and result layouts, ``output_operand_aliases`` for
``input_output_aliases``, ``has_side_effect`` and the mesh axes the kernel reads its
position along (``kernel_metadata``).
Boolean operands and results pass as int32, as JAX passes them. In interpret mode the
equation lowers as on every platform (``higher_order/pallas_call.py``).
"""
from __future__ import annotations

import base64
import dataclasses
import enum
import json

import numpy as np

from plax.core.avals import ShapedArray, physical_aval
from plax.core.rules import lowering_rules, register_lowering
from plax.ffi.custom_call import CustomCallSpec
from plax.higher_order.pallas_call import pallas_call_p
from plax.pallas import mosaic_bindings
from plax.pallas import (mosaic_rules_arith, mosaic_rules_keys, mosaic_rules_refs,  # noqa: F401
                         mosaic_rules_tpu)
from plax.pallas.memory_space import memory_space_of
from plax.pallas.mosaic_lowering import LoweringException, kernel_module_text

__all__ = ["MOSAIC_DIALECT_VERSION", "mosaic_module_text", "backend_config",
           "sanitize_name", "memory_colors", "emit_tpu_custom_call"]

# The Mosaic dialect version bodies are serialised for: JAX's forward-compatible one (what
# JAX writes when it lowers without a TPU at hand); newer libtpus read older versions.
MOSAIC_DIALECT_VERSION = 11

_SIDE_EFFECTS = {"PURE": 0, "DATAFLOW_SIDE_EFFECTING": 1, "SIDE_EFFECTING": 2}


def sanitize_name(name: str) -> str:
    """``name`` usable as a function name (other characters become ``_``)."""
    out = "".join(c if c.isalnum() or c in "_.-" else "_" for c in str(name))
    return out if out and not out[0].isdigit() else f"_{out}"


def _mosaic_params(compiler_params) -> dict:
    """The Mosaic fields of ``compiler_params`` (a pltpu.CompilerParams, or JAX's older dict
    form ``{"mosaic": {...}}``) as a dict."""
    if compiler_params is None:
        return {}
    if isinstance(compiler_params, dict):
        return dict(compiler_params.get("mosaic_tpu", compiler_params.get("mosaic", {})))
    if dataclasses.is_dataclass(compiler_params):
        backend = getattr(compiler_params, "BACKEND", None)
        if backend not in (None, "mosaic_tpu"):
            raise LoweringException(f"A pallas_call lowered for TPU got compiler_params for "
                                    f"{backend}; pass pltpu.CompilerParams.")
        params = {f.name: getattr(compiler_params, f.name)
                  for f in dataclasses.fields(compiler_params)}
        _side_effect_level(params.get("has_side_effects", False))  # (JAX's check)
        return params
    raise LoweringException(f"compiler_params must be a pltpu.CompilerParams, got "
                            f"{compiler_params!r}.")


def _side_effect_level(value) -> int:
    """The side-effect level of ``has_side_effects`` (a bool or a pltpu.SideEffectType)."""
    if isinstance(value, (bool, np.bool_)):
        return 2 if value else 0
    level = _SIDE_EFFECTS.get(value.name) if isinstance(value, enum.Enum) else None
    if level is None:
        raise ValueError(f"Invalid side effect type: {value}")
    return level


def _flag_text(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return '"boolean_value": ' + ("true" if value else "false")
    if isinstance(value, (int, np.integer)):
        return f'"integer_value": {int(value)}'
    if isinstance(value, (float, np.floating)):
        return f'"double_value": {float(value)}'
    raise ValueError("invalid flag value: " + str(value))


# XLA's colours of the TPU memories a custom call's operands and results may be placed in,
# by the ``value`` of pltpu's (and pl's) memory spaces; ANY and the others: no constraint
MEMORY_COLORS = {"hbm": 0, "vmem": 1, "semaphore_mem": 2, "smem": 4, "host": 5}


def _color(memory_space):
    return MEMORY_COLORS.get(getattr(memory_space, "value", None))


def memory_colors(out_spaces, num_inputs: int, aliases, in_spaces=()) -> tuple[list, list]:
    """The colours of the results (from the memory spaces their ``out_shape`` names, or
    their aliased input's) and of the inputs (from the memory spaces their types name, or
    their aliased result's; HBM and VMEM only: XLA keeps SMEM operands where they are);
    None where unconstrained. An alias joining two spaces raises JAX's ValueError."""
    outs = [_color(m) for m in out_spaces]
    ins = [_color(m) for m in in_spaces] + [None] * (num_inputs - len(in_spaces))
    for i, o in aliases:
        if ins[i] is not None:
            if outs[o] not in (None, ins[i]):
                raise ValueError(f"In/out memory space conflict for alias {i}->{o}: "
                                 f"{in_spaces[i]} != {out_spaces[o]}")
            outs[o] = ins[i]
    for i, o in aliases:
        if o < len(outs) and outs[o] is not None:
            if ins[i] not in (None, outs[o]):
                raise ValueError(f"In/out memory space conflict for alias {i}->{o}: "
                                 f"{in_spaces[i]} != {out_spaces[o]}")
            ins[i] = outs[o]
    return outs, [c if c in (0, 1) else None for c in ins]


def _colors_text(key: str, entries: list[str]) -> str:
    return f', "{key}": [' + ",".join(entries) + "]" if entries else ""


def backend_config(body: bytes, params: dict, cost_estimate=None, *, out_colors=(),
                   in_colors=(), has_communication: bool = False) -> str:
    """The ``tpu_custom_call``'s backend config (JSON, its fields in JAX's order)."""
    cfg = ['{"custom_call_config": {"body": "', base64.b64encode(body).decode("ascii"), '"']
    if has_communication:
        cfg.append(', "has_communication": true')
    if params.get("collective_id") is not None:
        cfg.append(f', "collective_id": {int(params["collective_id"])}')
    if cost_estimate is not None:
        fields = {k: getattr(cost_estimate, k) for k in
                  ("flops", "transcendentals", "bytes_accessed", "remote_bytes_transferred")
                  if hasattr(cost_estimate, k)}
        cfg.append(', "cost_estimate": ' + json.dumps(
            {k: int(v) for k, v in fields.items()}, sort_keys=True, indent=0,
            separators=(",", ":")))
    fmt = params.get("serialization_format", 1)
    if fmt is not None:
        cfg.append(f', "serialization_format": {int(fmt)}')
    if params.get("needs_layout_passes", True) is not False:
        cfg.append(', "needs_layout_passes": true')
    if params.get("shape_invariant_numerics", True) is False:
        cfg.append(', "shape_invariant_numerics": false')
    fusion = params.get("allow_input_fusion")
    if fusion is not None:
        cfg.append(', "allow_input_fusion": [' + ",".join(
            "true" if f else "false" for f in fusion) + "]")
    scratch = params.get("internal_scratch_in_bytes")
    if scratch is not None:
        cfg.append(f', "internal_scratch_in_bytes": {int(scratch)}')
    tuple_index = len(out_colors) > 1
    cfg.append(_colors_text("output_memory_space_colors", [
        f'{{"color":{c},"shape_index":[{k}]}}' if tuple_index else f'{{"color":{c}}}'
        for k, c in enumerate(out_colors) if c is not None]))
    cfg.append(_colors_text("input_memory_space_colors", [
        f'{{"operand_index":{k},"color":{c}}}' for k, c in enumerate(in_colors)
        if c is not None]))
    for key in ("disable_bounds_checks", "disable_semaphore_checks", "skip_device_barrier"):
        if params.get(key):
            cfg.append(f', "{key}": true')
    cfg.append("}")
    limit = params.get("vmem_limit_bytes")
    if limit is not None:
        if not isinstance(limit, (int, np.integer)) or isinstance(limit, bool):
            raise ValueError(f"vmem_limit_bytes must be an int: provided with a {type(limit)}.")
        cfg.append(', "scoped_memory_configs": [{"memory_space":1, "offset": 0, "size": '
                   f"{int(limit)}}}]")
    flags = params.get("flags")
    if flags:
        cfg.append(', "flag_configs": [' + ",".join(
            f'{{"flag_type": "{k}", "value": {{{_flag_text(v)}}}}}' for k, v in flags.items())
            + "]")
    cfg.append("}")
    return "".join(cfg)


def mosaic_module_text(jaxpr, grid_mapping, name: str, compiler_params=None) -> str:
    """The Mosaic module of a kernel (MLIR text, before serialisation)."""
    params = _mosaic_params(compiler_params)
    return kernel_module_text(jaxpr, grid_mapping, sanitize_name(name),
                              params.get("dimension_semantics"))


def _kernel_mesh(ctx):
    """The mesh of the enclosing shard_map as ((axis names), (sizes)), or None outside one."""
    mesh = getattr(ctx, "mesh", None)
    if mesh is None or not getattr(ctx, "manual_axes", None):
        return None
    return tuple(mesh.axis_names), tuple(int(n) for n in mesh.axis_sizes)


def _metadata_json(mesh_axes, metadata=None) -> str:
    """The custom call's ``kernel_metadata`` (JSON, laid out as JAX writes it): the
    pallas_call's ``metadata``, and the mesh axes the kernel reads its position along when
    there are any."""
    fields = dict(metadata or ())
    if mesh_axes:
        if "mesh_axes" in fields:
            raise ValueError("Metadata already contains mesh axes.")
        fields["mesh_axes"] = json.dumps(list(mesh_axes))
    if not fields:
        return "{}"
    return json.dumps(fields, sort_keys=True, indent=0, separators=(",", ":"))


def _check_collective_id(params: dict, barrier: bool) -> None:
    """A kernel using the barrier semaphore needs a ``collective_id``; others may name one
    only with ``allow_collective_id_without_custom_barrier`` (JAX's rule)."""
    collective_id = params.get("collective_id")
    if barrier and collective_id is None:
        raise ValueError("collective_id has to be specified when using a custom barrier "
                         "(pltpu.get_barrier_semaphore): pass "
                         "pltpu.CompilerParams(collective_id=...).")
    if (not barrier and collective_id is not None
            and not params.get("allow_collective_id_without_custom_barrier")):
        raise ValueError("collective_id has to be unspecified or None when not using a custom "
                         "barrier (pltpu.get_barrier_semaphore).")


def _string(text: str) -> str:
    out = []
    for c in text:
        b = ord(c)
        out.append(c if 32 <= b < 127 and c not in '"\\' else f"\\{b:02X}")
    return '"' + "".join(out) + '"'


def _as_int32(ctx, x, aval, back: bool = False):
    """A boolean operand as int32 (``back``: an int32 result as boolean)."""
    i32 = aval.update(dtype=np.dtype(np.int32))
    if back:
        return ctx.op1("stablehlo.convert", [x], [i32], aval)
    return ctx.op1("stablehlo.convert", [x], [aval], i32)


def _tpu_lowering(ctx, *args, jaxpr, grid_mapping, input_output_aliases, interpret, debug,
                  name, compiler_params, cost_estimate, metadata=None, **rest):
    if interpret:
        return lowering_rules[pallas_call_p](
            ctx, *args, jaxpr=jaxpr, grid_mapping=grid_mapping,
            input_output_aliases=input_output_aliases, interpret=interpret, debug=debug,
            name=name, compiler_params=compiler_params, cost_estimate=cost_estimate,
            metadata=metadata, **rest)
    params = _mosaic_params(compiler_params)
    kernel = sanitize_name(name or "kernel")
    facts: dict = {}
    text = kernel_module_text(jaxpr, grid_mapping, kernel, params.get("dimension_semantics"),
                              mesh=_kernel_mesh(ctx), facts=facts)
    if debug:
        print(f"\nThe kernel jaxpr for pallas_call {name}:")
        print(jaxpr)
    try:
        body, communicates, barrier = mosaic_bindings.serialize_kernel(
            text, MOSAIC_DIALECT_VERSION)
    except mosaic_bindings.MosaicModuleError as e:
        raise LoweringException(f"In the Pallas kernel `{kernel}`: Pallas encountered an "
                                f"internal verification error: {e}") from None
    if debug:
        print(f"\nThe Mosaic module for pallas_call {name}:")
        print(mosaic_bindings.canonical_text(text))
    _check_collective_id(params, barrier)
    # (the custom call's operands start with the grid's run-time sizes)
    n_dyn = grid_mapping.num_dynamic_grid_bounds
    input_output_aliases = tuple((i + n_dyn, o) for i, o in input_output_aliases)
    out_colors, in_colors = memory_colors(
        grid_mapping.out_memory_spaces or [None] * len(ctx.avals_out), len(ctx.avals_in),
        input_output_aliases, [memory_space_of(a) for a in ctx.avals_in])
    config = backend_config(body, params, cost_estimate, out_colors=out_colors,
                            in_colors=in_colors, has_communication=communicates)
    level = _side_effect_level(params.get("has_side_effects", False))
    return emit_tpu_custom_call(ctx, args, config, kernel, level, input_output_aliases,
                                _metadata_json(facts["mesh_axes"], metadata))


def emit_tpu_custom_call(ctx, args, config: str, kernel: str | None, level: int, aliases,
                         metadata: str | None = "{}") -> list:
    """The ``stablehlo.custom_call @tpu_custom_call`` running a serialised Mosaic kernel
    (``config``: its backend config; ``level``: its side-effect level, 0 pure; ``metadata``:
    JSON, or None for none), as JAX writes it; boolean operands and results pass as int32."""
    spec = CustomCallSpec("tpu_custom_call", api_version=1, backend_config=config,
                          has_side_effect=level != 0, aliases=tuple(aliases))
    # (a PRNG key passes as its key data: the layouts are of the physical shapes)
    ins = [ShapedArray(a.shape, np.dtype(np.int32)) if a.dtype == np.bool_
           else physical_aval(a) for a in ctx.avals_in]
    outs = [ShapedArray(a.shape, np.dtype(np.int32)) if a.dtype == np.bool_
            else physical_aval(a) for a in ctx.avals_out]
    operands = [_as_int32(ctx, x, a) if a.dtype == np.bool_ else x
                for x, a in zip(args, ctx.avals_in)]
    props = spec.properties(ins, outs)
    inherent = ", ".join(f"{k} = {v}" for k, v in props if not k.startswith("mhlo."))
    meta = [] if metadata is None else ["kernel_metadata = " + _string(metadata)]
    if level == 1:
        meta.append('xla_allow_dce_side_effecting_op = "true"')
    extra = [f"kernel_name = {_string(kernel)}"] if kernel is not None else []
    if meta:
        extra.append(f"mhlo.frontend_attributes = {{{', '.join(meta)}}}")
    extra = ", ".join(extra)
    results = ctx.op("stablehlo.custom_call", operands, ins, outs, props=inherent,
                     attrs=extra)
    return [_as_int32(ctx, r, a, back=True) if a.dtype == np.bool_ else r
            for r, a in zip(results, ctx.avals_out)]


register_lowering(pallas_call_p, _tpu_lowering, platform="tpu")
