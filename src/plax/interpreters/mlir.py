"""``plax.interpreters.mlir``: lowering rules, as ``jax.interpreters.mlir``.

``register_lowering(prim, rule)`` takes a rule written the JAX way, with jaxlib's MLIR
bindings (``rule(ctx, *ir_values, **params) -> [ir.Value, ...]``, building ops with
``hlo.*`` from ``jaxlib.mlir.dialects.stablehlo``), and installs it as ``prim``'s lowering in
plax: plax runs it in a scratch MLIR module and splices the function it builds into the
StableHLO plax writes (``plax.lowering.mlir_bindings``). ``register_lowering(prim,
lower_fun(f))`` is the fast road: plax traces ``f`` and lowers it with its own rules, with no
MLIR objects involved.
"""
from __future__ import annotations

from plax.core.rules import register_lowering as _register
from plax.lowering import mlir_bindings as _bindings
from plax.lowering.inline import lower_fun as _plax_lower_fun
from plax.lowering.mlir_bindings import (  # noqa: F401
    LoweringRuleContext, ModuleContext, aval_to_ir_type, dense_int_array, dense_int_elements,
    dtype_to_ir_type, flatten_ir_types, flatten_ir_values, hlo, i32_attr, i64_attr, ir,
    ir_constant, ir_constants, make_ir_context, module_to_bytecode, module_to_string,
    token_type, unflatten_ir_values_like_types)

__all__ = ["LoweringRuleContext", "ModuleContext", "aval_to_ir_type", "aval_to_ir_types",
           "dense_int_array", "dense_int_elements", "dtype_to_ir_type", "flatten_ir_types",
           "flatten_ir_values", "i32_attr", "i64_attr", "ir", "ir_constant", "ir_constants",
           "lower_fun", "make_ir_context", "module_to_bytecode", "module_to_string",
           "register_lowering", "token_type", "unflatten_ir_values_like_types"]

# JAX's platform names -> plax's (``gpu`` means every GPU platform).
_PLATFORMS = {"cpu": ("cpu",), "cuda": ("cuda",), "rocm": ("rocm",), "gpu": ("cuda", "rocm"),
              "tpu": ("tpu",)}


def aval_to_ir_types(aval) -> tuple:
    return (aval_to_ir_type(aval),)


class _LoweredFun:
    """The rule ``lower_fun`` makes: registered, it is plax's own ``lower_fun`` rule;
    called from inside a bindings rule, it lowers ``fun`` and calls the result."""

    def __init__(self, fun, multiple_results: bool):
        self.fun = fun
        self.multiple_results = multiple_results
        self.plax_rule = _plax_lower_fun(fun, multiple_results)

    def __call__(self, ctx, *args, **params):
        # A lowering rule returns its results as a list, one or many.
        return _bindings.call_plax_lowering(ctx, self.plax_rule, args, params)


def lower_fun(fun, multiple_results: bool = True):
    """A lowering rule computing what ``fun(*operands, **params)`` computes (``fun`` written
    with plax's array operations; with ``multiple_results`` it returns a list)."""
    return _LoweredFun(fun, multiple_results)


def register_lowering(prim, rule, platform: str | None = None, inline: bool = True,
                      cacheable: bool = True):
    """Make ``rule`` ``prim``'s lowering (on ``platform``: "cpu", "cuda", "rocm", "gpu",
    "tpu"; all platforms by default). ``rule`` is a ``lower_fun`` rule (or another object
    with a ``plax_rule``, as ``ffi.ffi_lowering`` makes) or a rule written with jaxlib's MLIR
    bindings."""
    del inline, cacheable
    # A rule object carrying a plax rule (lower_fun's, ffi_lowering's) lowers with that.
    plax_rule = getattr(rule, "plax_rule", None) or _bindings.bindings_rule(rule, prim)
    if platform is None:
        _register(prim, plax_rule)
    else:
        try:
            platforms = _PLATFORMS[platform]
        except KeyError:
            raise ValueError(f"register_lowering: unknown platform {platform!r}; expected one "
                             f"of {sorted(_PLATFORMS)}") from None
        for p in platforms:
            _register(prim, plax_rule, p)
    return rule
