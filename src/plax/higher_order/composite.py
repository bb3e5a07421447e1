"""``lax.composite``: a function lowered to ``stablehlo.composite``, an op with a name,
attributes and a version that a compiler may match, whose decomposition (the function's
body, a private function of the module) says what it computes. ``composite_p`` holds that
body as a jaxpr. As in JAX it has no derivative or batching rule: wrap it in
``custom_jvp``/``custom_vmap`` to give it one.
"""
from __future__ import annotations

import functools

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core.jaxpr import ClosedJaxpr, call_out_avals, consts_as_inputs
from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, batch_rules, jvp_rules, param_printers,
                             register_lowering)
from plax.core.source_info import fun_name
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import get_aval
from plax.lowering.consts import const_operands
from plax.lowering.stablehlo import define_function, dense_elements

__all__ = ["composite"]

composite_p = Primitive("composite", multiple_results=True)


def composite(decomposition, name: str, version: int = 0):
    """``decomposition`` as a function lowering to ``stablehlo.composite`` named ``name``
    (``version`` its version); keyword arguments of a call become the op's attributes
    (Python or NumPy scalars, strings, NumPy arrays) and are passed to ``decomposition``."""
    @functools.wraps(decomposition)
    def call(*args, **kwargs):
        attributes = tuple(sorted((k, _attribute(k, v)) for k, v in kwargs.items()))
        leaves, in_tree = tree_util.tree_flatten(args)
        out_tree = []

        def flat(*xs):
            out = decomposition(*tree_util.tree_unflatten(in_tree, list(xs)), **kwargs)
            out_leaves, tree = tree_util.tree_flatten(out)
            out_tree[:] = [tree]
            return out_leaves

        jaxpr, consts = trace_to_jaxpr(flat, [get_aval(x) for x in leaves],
                                       description=fun_name(decomposition))
        body, consts = consts_as_inputs(ClosedJaxpr(jaxpr, consts))
        outs = composite_p.bind(*consts, *leaves, jaxpr=body, name=name, attributes=attributes,
                                version=int(version))
        return tree_util.tree_unflatten(out_tree[0], outs)
    return call


class _Attribute:
    """An attribute value: hashable, compared by its MLIR text."""

    __slots__ = ("value", "text")

    def __init__(self, value, text):
        self.value, self.text = value, text

    def __eq__(self, other):
        return isinstance(other, _Attribute) and self.text == other.text

    def __hash__(self):
        return hash(self.text)

    def __repr__(self):
        return repr(self.value)


def _attribute(key, value) -> _Attribute:
    """``value`` as an MLIR attribute (as JAX writes them: i64, f64, strings, dense arrays)."""
    if isinstance(value, (bool, np.bool_)):
        return _Attribute(bool(value), "true" if value else "false")
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return _Attribute(int(value), f"{int(value)} : i64")
    if isinstance(value, (float, np.floating)):
        return _Attribute(float(value), f"{_f64_hex(float(value))} : f64")  # (exact)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return _Attribute(value, f'"{escaped}"')
    if isinstance(value, np.ndarray):
        from plax.core.avals import ShapedArray
        aval = ShapedArray(value.shape, dtypes.canonicalize_dtype(value.dtype))
        return _Attribute(value, dense_elements(value, aval))
    raise TypeError(f"lax.composite: attribute {key!r} must be a Python or NumPy scalar, a "
                    f"string or a NumPy array, got {type(value).__name__}.")


def _f64_hex(x: float) -> str:
    return "0x" + np.array(x, np.float64).view(np.uint64).item().to_bytes(8, "big").hex().upper()


# --- the primitive's rules -----------------------------------------------------------------
def _abstract(*avals, jaxpr, name, attributes, version):
    return call_out_avals(f"composite {name}", jaxpr, avals)


def _lowering(ctx, *args, jaxpr, name, attributes, version):
    fn_name = ctx.fn.module.unique_name(name)
    define_function(ctx.module_context, fn_name, jaxpr.jaxpr)
    consts = const_operands(ctx, jaxpr)
    attrs = [f'name = "{name}"']
    if attributes:
        attrs.append("composite_attributes = {" +
                     ", ".join(f"{k} = {v.text}" for k, v in attributes) + "}")
    attrs.append(f"decomposition = @{fn_name}")
    if version:
        attrs.append(f"version = {version} : i32")
    const_avals = [v.aval for v in jaxpr.jaxpr.constvars]
    return ctx.op("stablehlo.composite", [*consts, *args], [*const_avals, *ctx.avals_in],
                  attrs=", ".join(attrs))


def _no_jvp(primals, tangents, **params):
    raise ValueError("JVP rule for composite not implemented. You can use `jax.custom_jvp` to "
                     "add support.")


def _no_batch(axis, vals, dims, **params):
    raise NotImplementedError("Batching rule for 'composite' not implemented (as in JAX); wrap "
                              "the composite function in custom_vmap to batch it.")


abstract_eval_rules[composite_p] = _abstract
register_lowering(composite_p, _lowering)
jvp_rules[composite_p] = _no_jvp
batch_rules[composite_p] = _no_batch
param_printers[composite_p] = lambda p: {"attributes": p["attributes"], "jaxpr": p["jaxpr"],
                                         "name": p["name"], "version": p["version"]}
