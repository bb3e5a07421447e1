"""``ffi_call``: calling a registered XLA FFI target from plax, and its primitive.

``ffi_call(target, result_shape_dtypes, ...)`` returns a function; calling it binds
``ffi_call_p`` on the arguments, its keyword arguments becoming the FFI attributes. The
primitive's rules live here together:

- abstract evaluation: the declared results (their dtypes as declared, as JAX keeps them),
  with the ``FfiEffect`` when ``has_side_effect`` (so dead-code elimination keeps the call);
- lowering: one ``stablehlo.custom_call`` (``custom_call.emit``);
- eager: compiled as a one-equation program like any primitive;
- vmap, by ``vmap_method``: ``sequential``/``sequential_unrolled`` a scan calling the target
  once per batch member (the callbacks' mechanism); ``expand_dims``/``broadcast_all`` one call
  with every argument given a leading dimension (1, or the batch size, where unbatched);
  ``legacy_vectorized`` one call with only the batched arguments given one. Layouts gain the
  batch dimension as the most major. ``None`` refuses, as JAX does;
- differentiation: refused with JAX's message (give the derivative with custom_jvp/vjp).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from plax.core.avals import ShapedArray
from plax.core.effects import Effect, control_flow_allowed_effects, no_effects
from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, batch_rules, effect_rules, jvp_rules,
                             not_mapped, register_lowering, transpose_rules)
from plax.core.trace import get_aval
from plax.ffi.custom_call import (CustomCallSpec, convert_layout, emit, hashable_attributes,
                                  unwrap_attributes)
from plax.first_order.batch_util import moveaxis
from plax.first_order.shapes import broadcast
from plax.higher_order.callbacks import VMAP_METHODS
from plax.higher_order.callbacks import _sequential as sequential_batch

__all__ = ["ffi_call", "ffi_call_p", "FfiEffect"]


class FfiEffect(Effect):
    """The effect of an FFI call with ``has_side_effect=True`` (unordered)."""

    def __init__(self):
        super().__init__("FFI")


ffi_effect = FfiEffect()
control_flow_allowed_effects.add_type(FfiEffect)

ffi_call_p = Primitive("ffi_call", multiple_results=True)


def _result_avals(results) -> tuple:
    avals = []
    for i, r in enumerate(results):
        if not (hasattr(r, "shape") and hasattr(r, "dtype")):
            raise ValueError("All elements of result_shape_dtypes must have 'shape' and 'dtype' "
                             f"attributes. Got {r!r} at position {i}: describe each result "
                             "with plax.ShapeDtypeStruct(shape, dtype).")
        if r.dtype is None:  # a token (core.abstract_token)
            raise NotImplementedError(f"result_shape_dtypes[{i}] is a token: plax's ffi_call "
                                      "returns arrays only.")
        avals.append(ShapedArray(tuple(int(d) for d in r.shape), np.dtype(r.dtype)))
    return tuple(avals)


def _layouts(avals, layouts, what: str, count_name: str) -> tuple:
    if layouts is None:
        return tuple(convert_layout(a) for a in avals)
    if len(layouts) != len(avals):
        raise ValueError(f"The number of {count_name} ({len(avals)}) must equal the number of "
                         f"{what} layouts ({len(layouts)}).")
    return tuple(convert_layout(a, lay, major_to_minor=True) for a, lay in zip(avals, layouts))


def checked_aliases(mapping, in_avals, out_avals, in_layouts=None, out_layouts=None, *,
                    indexed: bool = False) -> tuple:
    """``input_output_aliases`` as sorted (input, output) pairs, each checked: in range,
    the same type and layout on both sides (JAX's errors; ``indexed``: a type mismatch names
    ``input[i]`` and ``output[o]``, as pallas_call's does)."""
    in_layouts = in_layouts or [None] * len(in_avals)
    out_layouts = out_layouts or [None] * len(out_avals)
    found = []
    for i, o in sorted((int(i), int(o)) for i, o in (mapping or {}).items()):
        pair = f"'{i}:{o}'"
        if not 0 <= i < len(in_avals):
            raise ValueError(f"input_output_aliases contains the mapping {pair} with input "
                             f"index {i} outside the range [0, {len(in_avals)}).")
        if not 0 <= o < len(out_avals):
            raise ValueError(f"input_output_aliases contains the mapping {pair} with output "
                             f"index {o} outside the range [0, {len(out_avals)}).")
        a, b = in_avals[i], out_avals[o]
        if a.shape != b.shape or a.dtype != b.dtype:
            ins, outs = (f"input[{i}]", f"to output[{o}]") if indexed else ("an input",
                                                                            "an output")
            raise ValueError(f"input_output_aliases contains the mapping {pair} referring to "
                             f"{ins} with abstract value {a} and {outs} with a different "
                             f"abstract value {b}.")
        if in_layouts[i] != out_layouts[o]:
            raise ValueError(f"input_output_aliases contains the mapping {pair} referring to an "
                             f"input with layout {in_layouts[i]} and an output with a "
                             f"different layout {out_layouts[o]}.")
        found.append((i, o))
    return tuple(found)


def ffi_call(target_name: str, result_shape_dtypes, *, has_side_effect: bool = False,
             vmap_method: str | None = None, input_layouts=None, output_layouts=None,
             input_output_aliases: dict | None = None, custom_call_api_version: int = 4,
             legacy_backend_config: str | None = None):
    """A function calling the XLA FFI target ``target_name`` (registered with
    ``register_ffi_target``) on its positional arguments; its keyword arguments are the
    call's attributes. ``result_shape_dtypes``: one ``ShapeDtypeStruct`` (one result) or a
    sequence of them. Layouts are major-to-minor (``None``: row-major); ``vmap_method`` says
    how a batch reaches the target under vmap; ``has_side_effect`` keeps an unused call."""
    allowed = [*VMAP_METHODS, None]
    if vmap_method not in allowed:
        raise ValueError(f"vmap_method must be on of the allowed methods {allowed}, but got: "
                         f"{vmap_method}")
    multiple = isinstance(result_shape_dtypes, Sequence)
    result_avals = _result_avals(result_shape_dtypes if multiple else [result_shape_dtypes])
    out_layouts_given = output_layouts if multiple or output_layouts is None \
        else (output_layouts,)
    if custom_call_api_version >= 4 and legacy_backend_config is not None:
        raise ValueError("The use of the legacy_backend_config parameter requires "
                         f"custom_call_api_version < 4; got {custom_call_api_version}.")

    def wrapped(*args, **kwargs):
        if kwargs and custom_call_api_version < 4:
            raise ValueError("The use of ffi_call attributes requires a custom call API "
                             f"version of at least 4; got api_version={custom_call_api_version}.")
        in_avals = [get_aval(x) for x in args]
        ins = _layouts(in_avals, input_layouts, "input", "input arguments")
        outs = _layouts(result_avals, out_layouts_given, "output", "outputs")
        results = ffi_call_p.bind(
            *args, result_avals=result_avals, vmap_method=vmap_method, target_name=target_name,
            has_side_effect=bool(has_side_effect), input_layouts=ins, output_layouts=outs,
            input_output_aliases=checked_aliases(input_output_aliases, in_avals, result_avals, ins,
                                          outs),
            custom_call_api_version=int(custom_call_api_version),
            legacy_backend_config=legacy_backend_config,
            attributes=hashable_attributes(kwargs))
        if not multiple:
            return results[0]
        return tuple(results) if isinstance(result_shape_dtypes, tuple) else list(results)

    return wrapped


# --- rules -----------------------------------------------------------------------------------
def _abstract_eval(*avals, result_avals, **_):
    return list(result_avals)


abstract_eval_rules[ffi_call_p] = _abstract_eval
effect_rules[ffi_call_p] = lambda params: \
    frozenset({ffi_effect}) if params["has_side_effect"] else no_effects


def _not_differentiable(*args, target_name, **_):
    raise ValueError(f"The FFI call to `{target_name}` cannot be differentiated. You can use "
                     "`jax.custom_jvp` or `jax.custom_vjp` to add support (plax.custom_jvp / "
                     "plax.custom_vjp around the function that makes the call).")


jvp_rules[ffi_call_p] = lambda primals, tangents, **params: _not_differentiable(**params)
transpose_rules[ffi_call_p] = lambda cts, *args, **params: _not_differentiable(**params)


def _with_batch_major(layout: tuple) -> tuple:
    """A minor-to-major layout of a value given a new leading (most major) dimension."""
    return tuple(n + 1 for n in layout) + (0,)


def _batch(axis, vals, dims, *, vmap_method, result_avals, **params):
    if vmap_method in ("sequential", "sequential_unrolled"):
        return sequential_batch(ffi_call_p, vals, dims,
                                dict(params, vmap_method=vmap_method, result_avals=result_avals),
                                vmap_method == "sequential_unrolled")
    if vmap_method not in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        raise NotImplementedError(
            "vmap is only supported for the ffi_call primitive when vmap_method is one of "
            "'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
            f"'legacy_vectorized'. Got vmap_method={vmap_method!r}: pass vmap_method= to "
            "ffi_call to say how a batch of inputs reaches the target.")
    size = next(v.shape[d] for v, d in zip(vals, dims) if d is not not_mapped)
    args, in_layouts = [], []
    for v, d, layout in zip(vals, dims, params.pop("input_layouts")):
        if d is not not_mapped:
            args.append(moveaxis(v, d, 0))
            in_layouts.append(_with_batch_major(layout))
        elif vmap_method == "legacy_vectorized":
            args.append(v)
            in_layouts.append(layout)
        else:
            args.append(broadcast(v, (size if vmap_method == "broadcast_all" else 1,)))
            in_layouts.append(_with_batch_major(layout))
    out_layouts = tuple(_with_batch_major(lay) for lay in params.pop("output_layouts"))
    batched = tuple(ShapedArray((size, *a.shape), a.dtype) for a in result_avals)
    outs = ffi_call_p.bind(*args, vmap_method=vmap_method, result_avals=batched,
                           input_layouts=tuple(in_layouts), output_layouts=out_layouts,
                           **params)
    return list(outs), [0] * len(outs)


batch_rules[ffi_call_p] = _batch


def _lowering(ctx, *operands, target_name, has_side_effect, input_layouts, output_layouts,
              input_output_aliases, custom_call_api_version, legacy_backend_config, attributes,
              **_):
    spec = CustomCallSpec(target_name, custom_call_api_version,
                          legacy_backend_config if custom_call_api_version < 4 else None,
                          has_side_effect, input_layouts, output_layouts, input_output_aliases)
    return emit(ctx, spec.with_attributes(unwrap_attributes(attributes)), operands)


register_lowering(ffi_call_p, _lowering)
