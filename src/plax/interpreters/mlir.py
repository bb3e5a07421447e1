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

from collections.abc import Callable as _Callable, Sequence as _Sequence
from typing import Any as _Any

import numpy as _np

from plax.core.errors import record_callback_failure as _record_callback_failure
from plax.core.rules import register_lowering as _register
from plax.higher_order.callbacks import check_results as _check_results
from plax.higher_order.call import body_of as _body_of
from plax.lowering.consts import const_operands as _const_operands
from plax.core.effects import has_ordered_effects as _has_ordered_effects
from plax.lowering.stablehlo import abstract_token as _abstract_token
from plax.lowering.stablehlo import lower_jaxpr_body as _lower_jaxpr_body
from plax.sharding.mesh import Mesh  # noqa: F401
from plax.lowering import mlir_bindings as _bindings
from plax.lowering.inline import lower_fun as _plax_lower_fun
from plax.lowering.mlir_bindings import (  # noqa: F401
    AxisContext, LoweringRuleContext, ModuleContext, SPMDAxisContext, ShardingContext, TokenSet,
    aval_to_ir_type, dense_int_array, dense_int_elements,
    dtype_to_ir_type, flatten_ir_types, flatten_ir_values, hlo, i32_attr, i64_attr, ir,
    ir_constant, ir_constants, make_ir_context, module_to_bytecode, module_to_string,
    token_type, unflatten_ir_values_like_types)

__all__ = ["LoweringRuleContext", "ModuleContext", "aval_to_ir_type", "aval_to_ir_types",
           "dense_int_array", "dense_int_elements", "dtype_to_ir_type", "flatten_ir_types",
           "flatten_ir_values", "i32_attr", "i64_attr", "ir", "ir_constant", "ir_constants",
           "lower_fun", "make_ir_context", "module_to_bytecode", "module_to_string",
           "register_lowering", "token_type", "unflatten_ir_values_like_types",
           "AxisContext", "DEVICE_TO_DEVICE_TYPE", "LoweringRule", "SPMDAxisContext",
           "ShardingContext", "Mesh", "MeshAxisName", "TokenSet",
           "RECV_FROM_HOST_TYPE", "SEND_TO_HOST_TYPE", "Token", "Value", "core_call_lowering",
           "emit_python_callback", "ir_attribute", "jaxpr_subcomp", "lower_jaxpr_to_fun", "merge_mlir_modules",
           "shape_tensor"]

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
    del cacheable
    # A rule object carrying a plax rule (lower_fun's, ffi_lowering's) lowers with that.
    # (XLA inlines every bindings rule's function; not inline, it is named after prim.)
    plax_rule = getattr(rule, "plax_rule", None) or _bindings.bindings_rule(
        rule, prim, None if inline else prim.name)
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


def emit_python_callback(ctx, callback, token, operands, operand_avals, result_avals, *,
                         has_side_effect: bool, returns_token: bool = True,
                         partitioned: bool = False, sharding=None):
    """Inside a bindings rule: ops calling the Python function ``callback`` on the host
    (NumPy arrays of ``operand_avals`` in, a sequence of arrays of ``result_avals`` out,
    checked) with ``operands``; ``token`` (an ``ir.Value`` of the token type, or None) is
    threaded through. Returns (results, the next token or None, the callable XLA calls, for
    ``ctx.module_context.add_keepalive``)."""
    del returns_token  # (it only matters for TPUs' send/receive lowering, which plax lacks)
    if partitioned:
        raise NotImplementedError("emit_python_callback(partitioned=True): plax lowers a "
                                  "callback that runs on whole arrays only.")
    if sharding is not None:
        raise NotImplementedError("emit_python_callback(sharding=...): plax places a "
                                  "bindings rule's callback on the program's device only.")
    operand_avals, result_avals = list(operand_avals), list(result_avals)
    declared = tuple(result_avals)
    what = getattr(callback, "__qualname__", None) or repr(callback)
    threaded = token is not None

    def entry(*arrays):
        try:
            if threaded:
                tok, arrays = arrays[0], arrays[1:]
            out = _check_results(callback(*(_np.array(a) for a in arrays)), declared,
                                 what)
        except BaseException as e:
            _record_callback_failure(e)
            raise
        return (tok, *out) if threaded else out

    if threaded:
        operands = [token, *operands]
        operand_avals = [_abstract_token, *operand_avals]
        result_avals = [_abstract_token, *result_avals]
    results = _bindings.host_call(ctx.module_context, entry, list(operands), operand_avals,
                                  result_avals, ctx.platforms[0], has_side_effect)
    if threaded:
        token, results = results[0], results[1:]
    return results, token, entry


# --- JAX's names for what rules exchange ------------------------------------------------
Value = ir.Value  # an SSA value
Token = ir.Value  # an effect token is a value of type !stablehlo.token
MeshAxisName = _Any
LoweringRule = _Callable[..., _Sequence]  # rule(ctx, *values, **params) -> [values]
# XLA's channel types, for send/recv ops' channel handles.
DEVICE_TO_DEVICE_TYPE = 1
SEND_TO_HOST_TYPE = 2
RECV_FROM_HOST_TYPE = 3


def ir_attribute(val) -> ir.Attribute:
    """``val`` as an MLIR attribute: a bool, int (i64), float (f64), str, NumPy scalar or
    array (its own type), a sequence (an array attribute) or a dict (a dictionary
    attribute); an ``ir.Attribute`` is returned as it is."""
    if isinstance(val, ir.Attribute):
        return val
    if isinstance(val, (bool, _np.bool_)):
        return ir.BoolAttr.get(bool(val))
    if isinstance(val, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), val)
    if isinstance(val, float):
        return ir.FloatAttr.get(ir.F64Type.get(), val)
    if isinstance(val, str):
        return ir.StringAttr.get(val)
    if isinstance(val, _np.generic):
        dtype = val.dtype
        if dtype.kind in "iu":
            return ir.IntegerAttr.get(dtype_to_ir_type(dtype), int(val))
        if dtype.kind == "f":
            return ir.FloatAttr.get(dtype_to_ir_type(dtype), float(val))
    if isinstance(val, _np.ndarray):
        return ir.DenseElementsAttr.get(val, type=dtype_to_ir_type(val.dtype))
    if isinstance(val, (list, tuple)):
        return ir.ArrayAttr.get([ir_attribute(v) for v in val])
    if isinstance(val, dict):
        return ir.DictAttr.get({str(k): ir_attribute(v) for k, v in val.items()})
    raise TypeError(f"No attribute handler defined for type: {type(val)}")


def shape_tensor(ctx, sizes) -> ir.Value:
    """A 1-D int32 tensor of ``sizes`` (ints, or scalar integer ``ir.Value``s)."""
    i32 = ir.IntegerType.get_signless(32)
    pieces = []
    for d in sizes:
        if isinstance(d, int):
            pieces.append(ir_constant(_np.array([d], _np.int32)))
        else:
            if d.type != ir.RankedTensorType.get((), i32):
                d = hlo.convert(ir.RankedTensorType.get((), i32), d)
            pieces.append(hlo.reshape(ir.RankedTensorType.get((1,), i32), d))
    if not pieces:
        return ir_constant(_np.array([], _np.int32))
    return pieces[0] if len(pieces) == 1 else hlo.concatenate(pieces, i64_attr(0))


def _lower_body(jaxpr, with_consts: bool):
    """A plax lowering rule computing ``jaxpr`` (a ClosedJaxpr, or an open Jaxpr whose
    constvars come first among the operands)."""
    def rule(ctx, *operands, **params):
        if with_consts:
            body = _body_of(jaxpr)
            return _lower_jaxpr_body(ctx.fn, body.jaxpr, [*_const_operands(ctx, body),
                                                          *operands])
        return _lower_jaxpr_body(ctx.fn, jaxpr, list(operands))
    return rule


class _CoreCallLowering:
    """``core_call_lowering``: registered, a call primitive's lowering (its body
    inlined); called in a bindings rule, the body lowered by plax and called."""

    @staticmethod
    def plax_rule(ctx, *args, call_jaxpr, **params):
        return _lower_body(call_jaxpr, True)(ctx, *args)

    def __call__(self, ctx, *args, name=None, backend=None, call_jaxpr):
        return _bindings.call_plax_lowering(ctx, _lower_body(call_jaxpr, True), args, {})


core_call_lowering = _CoreCallLowering()


def jaxpr_subcomp(ctx, jaxpr, name_stack, tokens, consts, *args, dim_var_values=(),
                  const_lowering=None, outer_traceback=None):
    """Inside a bindings rule: the values ``jaxpr`` (open; its constvars take ``consts``)
    computes from ``args`` (``ir.Value``s), lowered by plax, and ``tokens`` unchanged.
    ``ctx`` is the rule's ``ctx.module_context``."""
    del name_stack, dim_var_values, const_lowering, outer_traceback
    if _has_ordered_effects(jaxpr):
        raise NotImplementedError("jaxpr_subcomp: the jaxpr has ordered effects, whose "
                                  "tokens plax's MLIR-bindings adapter does not pass.")
    flat = [*consts, *args]
    rule_ctx = LoweringRuleContext(ctx, None, [v.aval for v in (*jaxpr.constvars,
                                                                 *jaxpr.invars)],
                                   [v.aval for v in jaxpr.outvars], ctx.platforms[0])
    outs = _bindings.call_plax_lowering(rule_ctx, _lower_body(jaxpr, False), flat, {})
    return outs, tokens


def lower_jaxpr_to_fun(ctx, name: str, jaxpr, effects, *, num_const_args: int = 0,
                       main_function: bool = False, in_avals=None, **options):
    """Inside a bindings rule: a private ``func.func`` named ``name`` (made unique) in the
    rule's module (``ctx`` is ``ctx.module_context``) computing the ClosedJaxpr ``jaxpr``,
    lowered by plax: its arguments are ``num_const_args`` leading constants (``jaxpr``'s
    consts are inlined when 0), then the jaxpr's inputs. Returns the ``FuncOp``. Effects,
    and the sharding, layout, donation and naming options of a main function, are JAX's
    lowering's own: plax's adapter refuses them."""
    given = sorted(k for k, v in options.items() if v not in (None, True, False, ()))
    if effects or main_function or given:
        raise NotImplementedError(
            f"lower_jaxpr_to_fun: plax lowers helper functions without effects and without "
            f"the options of a main function (got effects={list(effects)}, "
            f"main_function={main_function}, options {given}).")
    body = _body_of(jaxpr)
    consts_as_args = num_const_args > 0
    if consts_as_args and num_const_args != len(body.consts):
        raise ValueError(f"lower_jaxpr_to_fun: num_const_args={num_const_args} but the jaxpr "
                         f"has {len(body.consts)} constants")
    if consts_as_args:
        rule = _lower_body(body.jaxpr, False)
        avals_in = [v.aval for v in (*body.jaxpr.constvars, *body.jaxpr.invars)]
    else:
        rule = _lower_body(body, True)
        avals_in = list(in_avals) if in_avals is not None else body.in_avals
    return _bindings.define_plax_function(ctx, ctx.platforms[0], rule, avals_in,
                                          body.out_avals, name=name)


def merge_mlir_modules(dst_module, sym_name: str, src_module, dst_symtab=None) -> str:
    """Move the functions of ``src_module`` into ``dst_module``, its public ``main`` made
    private and named ``sym_name`` (or a fresh variant); other names are made unique
    too. Returns the name ``main`` got."""
    dst_symtab = dst_symtab or ir.SymbolTable(dst_module.operation)
    src_symtab = ir.SymbolTable(src_module.operation)
    renames = {}
    for op in src_module.body.operations:
        if "sym_name" not in op.attributes:
            continue
        old = ir.StringAttr(op.attributes["sym_name"]).value
        base = sym_name if old == "main" else old
        new, i = base, 0
        while new in dst_symtab or new in renames.values():
            i += 1
            new = f"{base}_{i}"
        renames[old] = new
    for old, new in renames.items():
        if old != new:
            src_symtab.replace_all_symbol_uses(old, new, src_module.operation)
            ir.SymbolTable.set_symbol_name(src_symtab[old], new)
    for op in list(src_module.body.operations):
        if "sym_name" in op.attributes and \
                ir.StringAttr(op.attributes["sym_name"]).value == renames.get("main"):
            ir.SymbolTable.set_visibility(op, "private")
        dst_module.body.append(op)
        dst_symtab.insert(op)
    return renames.get("main", sym_name)

