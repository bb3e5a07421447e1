"""``buffer_callback``: a Python function that writes a compiled program's results in place.

``buffer_callback(f, result_shape_dtypes)`` returns a function; calling it binds
``buffer_callback_p`` on the flattened arguments. ``f(ctx, out, *args, **kwargs)`` gets an
``ExecutionContext`` (the stage, and the stream on a GPU), the results as a pytree of
writable ``Buffer`` objects and the arguments as read-only ones (NumPy views through
``np.asarray``; DLPack too), and returns nothing: it fills ``out``. The primitive's rules:

- abstract evaluation: the declared results, with the ``BufferCallback`` effect when
  ``has_side_effect`` (then dead-code elimination keeps the call);
- lowering: a typed-FFI ``stablehlo.custom_call`` to jaxlib's
  ``xla_buffer_python_cpu_callback`` (``..._gpu_callback`` on GPUs) whose ``index`` names
  the Python callable handed to XLA at compile time, as the other host callbacks do;
- eager: compiled as a one-equation program like any primitive;
- vmap by ``vmap_method``, as ``ffi_call``'s; differentiation refused with JAX's messages.
"""
from __future__ import annotations

import numpy as np

from plax.core import tree_core
from plax.core.avals import ShapedArray
from plax.core.effects import Effect, control_flow_allowed_effects, no_effects
from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, batch_rules, effect_rules, jvp_rules,
                             register_lowering, transpose_rules)
from plax.core.trace import get_aval
from plax.ffi.call import checked_aliases
from plax.ffi.custom_call import CustomCallSpec, convert_layout, emit
from plax.higher_order.callbacks import VMAP_METHODS, batch_by_method

__all__ = ["buffer_callback", "buffer_callback_p", "BufferCallbackEffect"]


class BufferCallbackEffect(Effect):
    """The effect of a buffer callback with ``has_side_effect=True`` (unordered)."""

    def __init__(self):
        super().__init__("BufferCallback")


buffer_callback_effect = BufferCallbackEffect()
control_flow_allowed_effects.add_type(BufferCallbackEffect)

buffer_callback_p = Primitive("buffer_callback", multiple_results=True)


def buffer_callback(callback, result_shape_dtypes, *, has_side_effect: bool = False,
                    vmap_method: str | None = None, input_output_aliases: dict | None = None,
                    command_buffer_compatible: bool = False):
    """A function that runs ``callback(ctx, out, *args, **kwargs)`` on device buffers: it
    writes the results (``out``, a pytree of Buffers shaped like ``result_shape_dtypes``) in
    place. ``input_output_aliases`` maps a flat input index to the flat output index that
    reuses its buffer; ``command_buffer_compatible`` lets a GPU record the call once."""
    allowed = [*VMAP_METHODS, None]
    if vmap_method not in allowed:
        raise ValueError(f"vmap_method must be one of the allowed methods {allowed}, but got: "
                         f"{vmap_method}")
    flat_results, out_tree = tree_core.tree_flatten(result_shape_dtypes)
    result_avals = tuple(ShapedArray(tuple(r.shape), np.dtype(r.dtype)) for r in flat_results)

    def wrapped(*args, **kwargs):
        flat_args, in_tree = tree_core.tree_flatten((args, kwargs))
        in_avals = [get_aval(x) for x in flat_args]
        layouts = [convert_layout(a) for a in in_avals], \
            [convert_layout(a) for a in result_avals]
        aliases = checked_aliases(input_output_aliases, in_avals, result_avals, *layouts)
        outs = buffer_callback_p.bind(
            *flat_args, callback=callback, result_avals=result_avals, in_tree=in_tree,
            out_tree=out_tree, vmap_method=vmap_method, has_side_effect=bool(has_side_effect),
            input_output_aliases=aliases,
            command_buffer_compatible=bool(command_buffer_compatible))
        return tree_core.tree_unflatten(out_tree, outs)

    return wrapped


# --- rules -----------------------------------------------------------------------------------
abstract_eval_rules[buffer_callback_p] = lambda *avals, result_avals, **_: list(result_avals)
effect_rules[buffer_callback_p] = lambda params: \
    frozenset({buffer_callback_effect}) if params["has_side_effect"] else no_effects


def _no_jvp(*args, **params):
    raise ValueError("Buffer callbacks do not support JVP. Please use `jax.custom_jvp` to use "
                     "callbacks while taking gradients.")


def _no_transpose(*args, **params):
    raise ValueError("Buffer callbacks do not support transpose. Please use `jax.custom_vjp` "
                     "to use callbacks while taking gradients.")


jvp_rules[buffer_callback_p] = _no_jvp
transpose_rules[buffer_callback_p] = _no_transpose


def _batch(axis, vals, dims, *, vmap_method, result_avals, **params):
    return batch_by_method(buffer_callback_p, vals, dims, params, result_avals, vmap_method)


batch_rules[buffer_callback_p] = _batch

_TARGETS = {"cpu": "xla_buffer_python_cpu_callback", "cuda": "xla_buffer_python_gpu_callback",
            "rocm": "xla_buffer_python_gpu_callback"}


def _host_entry(callback, in_tree, out_tree):
    """The callable XLA calls with the execution context and the input, then the output,
    buffers (valid only during the call). What it raises reaches the caller inside XLA's
    JaxRuntimeError ("Error when calling buffer callback"), traceback included, as in JAX."""
    def entry(context, *buffers):
        ins, outs = buffers[:in_tree.num_leaves], buffers[in_tree.num_leaves:]
        args, kwargs = tree_core.tree_unflatten(in_tree, ins)
        if callback(context, tree_core.tree_unflatten(out_tree, outs), *args,
                    **kwargs) is not None:
            raise ValueError("buffer_callback callback must not return any values.")
        return ()
    return entry


def _lowering(ctx, *operands, callback, in_tree, out_tree, has_side_effect,
              input_output_aliases, command_buffer_compatible, **_):
    target = _TARGETS.get(ctx.platform)
    if target is None:
        raise ValueError(f"`buffer_callback` not supported on {ctx.platform} backend.")
    if command_buffer_compatible and ctx.platform in ("cuda", "rocm"):
        target += "_cmd_buffer"
    index = ctx.fn.module.add_host_callback(_host_entry(callback, in_tree, out_tree))
    spec = CustomCallSpec(target, 4, {"index": np.uint64(index)}, has_side_effect,
                          aliases=tuple(input_output_aliases))
    return emit(ctx, spec, operands)


register_lowering(buffer_callback_p, _lowering)
