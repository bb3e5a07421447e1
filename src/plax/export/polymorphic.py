"""Lowering a shape-polymorphic function for export.

The module's ``@main`` takes tensors with dynamic sizes (``tensor<?x4xf32>``) for the
symbolic dimensions, reads each dimension variable's value from an argument
(``stablehlo.get_dimension_size``) and calls the function body with those values first
(``tensor<i64>`` parameters marked ``jax.global_constant``). In the body, ops whose result
shape is symbolic take their shape as a value computed from the dimension variables
(``dynamic_broadcast_in_dim``, ``dynamic_iota``, ``dynamic_reshape`` for reshape and
squeeze, ``real_dynamic_slice`` for slice and dynamic_slice, the ``dynamic_rng_bit_generator``
custom call); every other op just has dynamic sizes in its types. At call time jaxlib's
shape refinement turns the module static for the operands' shapes (calling.py).

The dynamic rules wrap the ordinary lowering rules of those primitives once this
module is imported (only a program that uses plax.export pays a type check there), and
take over only when a result's shape is symbolic.
"""
from __future__ import annotations

import numpy as np

from plax.core.avals import physical_aval
from plax.core.errors import InconclusiveDimensionOperation
from plax.core.jaxpr import ClosedJaxpr, Literal
from plax.core.rules import lowering_rules, register_lowering
from plax.core.staging import trace_to_jaxpr
from plax.core.symbolic_shapes import DimExpr, _Op, _Var, dim_as_value_p, shape_is_symbolic
from plax.export import shape_checks
from plax.first_order.rng_bit_generator import lower_bits
from plax.first_order.shapes import reshape_operand_in_order
from plax.lowering import stablehlo as stablehlo_lowering
from plax.lowering.stablehlo import (FunctionBuilder, RuleContext, i64_array,
                                     lower_jaxpr_body, tensor_type)

_I64 = "tensor<i64>"


def uses_symbolic_dims(jaxpr) -> bool:
    return any(shape_is_symbolic(v.aval.shape) for v in (*jaxpr.invars, *jaxpr.outvars))


# --- dimension values in the body ------------------------------------------------------------
def _dim_values(ctx) -> dict:
    values = getattr(ctx.fn.module, "dim_values", None)
    if values is None:
        raise NotImplementedError(
            "A symbolic dimension reached the lowering outside a shape-polymorphic export: "
            "symbolic shapes (plax.export.symbolic_shape) are for plax.export.export only.")
    return values


def _i64_op(ctx, name: str, operands, props: str = "") -> str:
    return ctx.fn.emit(name, list(operands), [_I64] * len(operands), [_I64], props=props)[0]


def _i64_const(ctx, k: int) -> str:
    return ctx.fn.emit("stablehlo.constant", [], [], [_I64],
                       props=f"value = dense<{int(k)}> : tensor<i64>")[0]


def dim_value(ctx, d) -> str:
    """The SSA value (``tensor<i64>``) of the dimension ``d`` (an int or a DimExpr)."""
    if not isinstance(d, DimExpr):
        return _i64_const(ctx, d)
    env = _dim_values(ctx)
    total = None
    for mono, coeff in d._terms:
        term = None if coeff == 1 and mono else _i64_const(ctx, coeff)
        for atom, power in mono:
            a = _atom_value(ctx, atom, env)
            for _ in range(power):
                term = a if term is None else _i64_op(ctx, "stablehlo.multiply", [term, a])
        total = term if total is None else _i64_op(ctx, "stablehlo.add", [total, term])
    return total


def _atom_value(ctx, atom, env) -> str:
    if isinstance(atom, _Var):
        return env[atom.name]
    assert isinstance(atom, _Op)
    a, b = (dim_value(ctx, x) for x in atom.args)
    if atom.kind in ("max", "min"):
        return _i64_op(ctx, "stablehlo.maximum" if atom.kind == "max" else "stablehlo.minimum",
                       [a, b])
    # floordiv and mod rounding towards minus infinity: the truncated quotient is one too
    # big when the remainder is nonzero with the sign opposite to the divisor's
    quotient = _i64_op(ctx, "stablehlo.divide", [a, b])
    rem = _i64_op(ctx, "stablehlo.remainder", [a, b])
    zero = _i64_const(ctx, 0)
    signs = _i64_op(ctx, "stablehlo.multiply", [rem, b])
    negative = ctx.fn.emit("stablehlo.compare", [signs, zero], [_I64, _I64], ["tensor<i1>"],
                           props="comparison_direction = #stablehlo<comparison_direction LT>, "
                                 "compare_type = #stablehlo<comparison_type SIGNED>")[0]
    if atom.kind == "floordiv":
        fixed = _i64_op(ctx, "stablehlo.subtract", [quotient, _i64_const(ctx, 1)])
        plain = quotient
    else:
        fixed = _i64_op(ctx, "stablehlo.add", [rem, b])
        plain = rem
    return ctx.fn.emit("stablehlo.select", [negative, fixed, plain],
                       ["tensor<i1>", _I64, _I64], [_I64])[0]


def shape_value(ctx, shape) -> str:
    """The SSA value (``tensor<Nxi64>``) of a shape with symbolic entries."""
    parts = [ctx.fn.emit("stablehlo.reshape", [dim_value(ctx, d)], [_I64],
                         ["tensor<1xi64>"])[0] for d in shape]
    if not parts:  # (a rank-0 shape, e.g. the batch shape of one matrix)
        return ctx.fn.emit("stablehlo.constant", [], [], [_shape_type(0)],
                           props=f"value = dense<> : {_shape_type(0)}")[0]
    if len(parts) == 1:
        return parts[0]
    return ctx.fn.emit("stablehlo.concatenate", parts, ["tensor<1xi64>"] * len(parts),
                       [f"tensor<{len(parts)}xi64>"], props="dimension = 0 : i64")[0]


def _shape_type(n: int) -> str:
    return f"tensor<{n}xi64>"


# --- the dynamic rules -------------------------------------------------------------------------
def _dim_as_value_lowering(ctx, *, dim):
    value = dim_value(ctx, dim)
    out = ctx.avals_out[0]
    if tensor_type(out) == _I64:
        return value
    return ctx.fn.emit("stablehlo.convert", [value], [_I64], [tensor_type(out)])[0]


def _broadcast_in_dim(ctx, x, *, shape, broadcast_dimensions, sharding=None):
    s = shape_value(ctx, shape)
    return ctx.fn.emit("stablehlo.dynamic_broadcast_in_dim", [x, s],
                       [tensor_type(ctx.avals_in[0]), _shape_type(len(shape))],
                       [tensor_type(ctx.avals_out[0])],
                       props=f"broadcast_dimensions = {i64_array(broadcast_dimensions)}")[0]


def _iota(ctx, *, dtype, shape, dimension, sharding=None):
    s = shape_value(ctx, shape)
    return ctx.fn.emit("stablehlo.dynamic_iota", [s], [_shape_type(len(shape))],
                       [tensor_type(ctx.avals_out[0])],
                       props=f"iota_dimension = {int(dimension)} : i64")[0]


def _reshape(ctx, x, *, new_sizes, dimensions, sharding=None):
    x, aval = reshape_operand_in_order(ctx, x, dimensions)
    out = ctx.avals_out[0]
    s = shape_value(ctx, out.shape)
    return ctx.fn.emit("stablehlo.dynamic_reshape", [x, s],
                       [tensor_type(aval), _shape_type(len(out.shape))], [tensor_type(out)])[0]


def _squeeze(ctx, x, *, dimensions):
    out = physical_aval(ctx.avals_out[0])  # a key array's words stay (no key-layout rule)
    s = shape_value(ctx, out.shape)
    return ctx.fn.emit("stablehlo.dynamic_reshape", [x, s],
                       [tensor_type(ctx.avals_in[0]), _shape_type(len(out.shape))],
                       [tensor_type(out)])[0]


def _slice(ctx, x, *, start_indices, limit_indices, strides):
    n = len(start_indices)
    strides = strides or (1,) * n
    vals = [shape_value(ctx, v) for v in (start_indices, limit_indices, strides)]
    return ctx.fn.emit("stablehlo.real_dynamic_slice", [x, *vals],
                       [tensor_type(ctx.avals_in[0])] + [_shape_type(n)] * 3,
                       [tensor_type(ctx.avals_out[0])])[0]


def _rng_bit_generator(ctx, key, *, shape, algorithm, **_):
    return lower_bits(ctx, key, algorithm, shape_value(ctx, shape))


def _dynamic_slice(ctx, x, *idx, slice_sizes):
    """``real_dynamic_slice`` from the start indices clamped into ``[0, size - slice]`` (a
    dynamic_slice clamps them; a real_dynamic_slice does not)."""
    n = len(idx)
    x_aval, out = ctx.avals_in[0], ctx.avals_out[0]
    parts = []
    for i, aval in zip(idx, ctx.avals_in[1:]):
        i = ctx.convert(i, aval, aval.update(dtype=np.int64))
        parts.append(ctx.fn.emit("stablehlo.reshape", [i], [_I64], ["tensor<1xi64>"])[0])
    start = parts[0] if n == 1 else ctx.fn.emit(
        "stablehlo.concatenate", parts, ["tensor<1xi64>"] * n, [_shape_type(n)],
        props="dimension = 0 : i64")[0]
    sizes = shape_value(ctx, out.shape)
    vec = [_shape_type(n)] * 2
    room = ctx.fn.emit("stablehlo.subtract", [shape_value(ctx, x_aval.shape), sizes], vec,
                       [_shape_type(n)])[0]
    zeros = ctx.fn.emit("stablehlo.constant", [], [], [_shape_type(n)],
                        props=f"value = dense<0> : {_shape_type(n)}")[0]
    start = ctx.fn.emit("stablehlo.clamp", [zeros, start, room], [_shape_type(n)] * 3,
                        [_shape_type(n)])[0]
    limit = ctx.fn.emit("stablehlo.add", [start, sizes], vec, [_shape_type(n)])[0]
    ones = ctx.fn.emit("stablehlo.constant", [], [], [_shape_type(n)],
                       props=f"value = dense<1> : {_shape_type(n)}")[0]
    return ctx.fn.emit("stablehlo.real_dynamic_slice", [x, start, limit, ones],
                       [tensor_type(x_aval)] + [_shape_type(n)] * 3, [tensor_type(out)])[0]


def _install_dynamic_pad() -> None:
    """A pad whose widths are symbolic is a ``dynamic_pad`` (the widths operands)."""
    from plax.first_order.shapes import pad_p
    static = lowering_rules[pad_p]

    def rule(ctx, x, value, *, padding_config):
        if not shape_is_symbolic(sum(padding_config, ())):
            return static(ctx, x, value, padding_config=padding_config)
        n = len(padding_config)
        widths = [shape_value(ctx, part) for part in zip(*padding_config)]
        return ctx.fn.emit("stablehlo.dynamic_pad", [x, value, *widths],
                           [tensor_type(a) for a in ctx.avals_in] + [_shape_type(n)] * 3,
                           [tensor_type(ctx.avals_out[0])])[0]
    rule.static_rule = static
    register_lowering(pad_p, rule)


def _install_dynamic_gather() -> None:
    """A gather whose slice sizes are symbolic is a ``dynamic_gather`` (the sizes an operand);
    CLIP and FILL_OR_DROP gathers lower through a PROMISE_IN_BOUNDS one, which gets here."""
    from plax.first_order import indexing
    static = lowering_rules[indexing.gather_p]

    def rule(ctx, x, idx, *, dimension_numbers, slice_sizes, mode, **params):
        if not shape_is_symbolic(slice_sizes) or mode is not indexing.PROMISE or \
                ctx.avals_out[0].size == 0:
            return static(ctx, x, idx, dimension_numbers=dimension_numbers,
                          slice_sizes=slice_sizes, mode=mode, **params)
        dn = dimension_numbers
        attr = indexing._dims_attr("gather", [
            ("offset_dims", dn.offset_dims), ("collapsed_slice_dims", dn.collapsed_slice_dims),
            ("operand_batching_dims", dn.operand_batching_dims),
            ("start_indices_batching_dims", dn.start_indices_batching_dims),
            ("start_index_map", dn.start_index_map),
            ("index_vector_dim", ctx.avals_in[1].ndim - 1)])
        sizes = shape_value(ctx, slice_sizes)
        sorted_attr = indexing._bool_attr(params["indices_are_sorted"])
        return ctx.fn.emit("stablehlo.dynamic_gather", [x, idx, sizes],
                           [tensor_type(a) for a in ctx.avals_in] +
                           [_shape_type(len(slice_sizes))], [tensor_type(ctx.avals_out[0])],
                           props=f"dimension_numbers = {attr}, "
                                 f"indices_are_sorted = {sorted_attr}")[0]
    rule.static_rule = static
    register_lowering(indexing.gather_p, rule)


def _symbolic_out(ctx) -> bool:
    return any(shape_is_symbolic(a.shape) for a in ctx.avals_out)


def _install_dynamic_rules() -> None:
    from plax.first_order.shapes import broadcast_in_dim_p, iota_p, reshape_p, squeeze_p
    from plax.first_order.rng_bit_generator import rng_bit_generator_p
    from plax.first_order.slicing import dynamic_slice_p, slice_p
    for prim, dynamic in ((broadcast_in_dim_p, _broadcast_in_dim), (iota_p, _iota),
                          (reshape_p, _reshape), (slice_p, _slice), (squeeze_p, _squeeze),
                          (rng_bit_generator_p, _rng_bit_generator),
                          (dynamic_slice_p, _dynamic_slice)):
        static = lowering_rules[prim]  # the generic rule (platform rules take precedence)

        def rule(ctx, *args, _static=static, _dynamic=dynamic, **params):
            if _symbolic_out(ctx) or shape_is_symbolic(
                    params.get("limit_indices", ()) + params.get("start_indices", ())):
                return _dynamic(ctx, *args, **params)
            return _static(ctx, *args, **params)
        rule.static_rule = static
        register_lowering(prim, rule)


def _broadcast_helper(ctx, x, aval_in, aval_out, dims):
    inner = RuleContext(ctx.fn, [aval_in], [aval_out])
    return _broadcast_in_dim(inner, x, shape=aval_out.shape, broadcast_dimensions=tuple(dims))


register_lowering(dim_as_value_p, _dim_as_value_lowering)
_install_dynamic_rules()
_install_dynamic_gather()
_install_dynamic_pad()
stablehlo_lowering.symbolic_broadcast = _broadcast_helper
stablehlo_lowering.symbolic_shape_value = shape_value


# --- the module --------------------------------------------------------------------------------
def _inline_calls(closed: ClosedJaxpr):
    """``closed`` traced again with nested jit calls inlined (their bodies then see the
    dimension variables of the one function they are lowered into)."""
    from plax.higher_order.pjit import pjit_p

    def run(jaxpr, consts, args):
        env = dict(zip(list(jaxpr.constvars) + list(jaxpr.invars), list(consts) + list(args)))

        def read(v):
            return v.val if isinstance(v, Literal) else env[v]
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            if eqn.primitive is pjit_p:
                body = eqn.params["jaxpr"]
                outs = run(body.jaxpr, body.consts, ins)
            else:
                outs = eqn.primitive.bind(*ins, **eqn.params)
                outs = outs if eqn.primitive.multiple_results else [outs]
            for v, o in zip(eqn.outvars, outs):
                env[v] = o
        return [read(v) for v in jaxpr.outvars]

    jaxpr = closed.jaxpr
    return trace_to_jaxpr(lambda *args: run(jaxpr, closed.consts, args),
                          [v.aval for v in jaxpr.invars])


def _shape_assertion(ctx, check) -> None:
    """A ``shape_assertion`` custom call of ``check`` (a Check over the argument sizes): the
    module's own record of what a call's shapes must satisfy, decided when the module is
    refined for static shapes."""
    left, right = dim_value(ctx, check.left), dim_value(ctx, check.right)
    direction = "EQ" if check.kind == "==" else "GE"
    ok = ctx.fn.emit("stablehlo.compare", [left, right], [_I64, _I64], ["tensor<i1>"],
                     props=f"comparison_direction = #stablehlo<comparison_direction "
                           f"{direction}>, compare_type = #stablehlo<comparison_type SIGNED>")[0]
    message, inputs = check.message_template()
    values = [dim_value(ctx, d) for d in inputs]
    text = message.replace("\\", "\\\\").replace('"', '\\"')
    ctx.fn.emit("stablehlo.custom_call", [ok, *values], ["tensor<i1>"] + [_I64] * len(values),
                [], props='api_version = 2 : i32, call_target_name = "shape_assertion", '
                          'has_side_effect = true', attrs=f'error_message = "{text}"')


def _naming_the_op(error, name: str) -> Exception:
    """``error`` (raised by a lowering rule given a symbolic shape) naming the equation."""
    eqn, tb = None, error.__traceback__
    while tb is not None:  # the innermost equation being lowered
        if tb.tb_frame.f_code is lower_jaxpr_body.__code__:
            eqn = tb.tb_frame.f_locals.get("eqn", eqn)
        tb = tb.tb_next
    if eqn is None:
        return error
    types = ", ".join(v.aval.str_short() for v in eqn.invars)
    outs = ", ".join(v.aval.str_short() for v in eqn.outvars)
    return InconclusiveDimensionOperation(
        f"Cannot export {name}: the operation '{eqn.primitive.name}' ({types}) -> ({outs}) "
        f"cannot be lowered with symbolic dimensions: {str(error).splitlines()[0]} "
        "Export it for a concrete size of that dimension instead.")


def lower_polymorphic(jaxpr, consts, name: str, platform: str, arg_names=None,
                      assertions: bool = True, overrides=None, layout=None) -> str:
    """The shape-polymorphic module text of ``jaxpr`` (see the module docstring);
    ``arg_names[j]`` names argument j in the shape assertions (``args[0]``...); ``layout``
    an SPMD module's (export/sharded.py)."""
    from plax.export.exporting import export_module, main_attrs, main_function, partitions
    jaxpr, consts = _inline_calls(ClosedJaxpr(jaxpr, consts))
    solution = shape_checks.solve([v.aval for v in jaxpr.invars],
                                  arg_names or [f"args[{j}]" for j in range(len(jaxpr.invars))])
    sources = solution.values
    module = export_module(name, platform, layout)
    module.override_rules = dict(overrides or {})
    arg_attrs, result_attrs = main_attrs(module, layout, jaxpr)
    dim_names = {var: f"%dim{k}" for k, var in enumerate(sources)}
    module.dim_values = dim_names
    body_name = module.unique_name("_wrapped_jax_export_main")
    fn = FunctionBuilder(module)
    params = list(jaxpr.constvars) + list(jaxpr.invars)
    arg_names = [f"%arg{i}" for i in range(len(params))]
    try:
        outs = lower_jaxpr_body(fn, jaxpr, arg_names)
    except InconclusiveDimensionOperation as e:
        raise _naming_the_op(e, name) from None
    sig = [f'{dim_names[v]}: {_I64} {{jax.global_constant = "{v}"}}' for v in sources]
    sig += [f"{a}: {tensor_type(v.aval)}" for a, v in zip(arg_names, params)]
    out_types = [tensor_type(v.aval) for v in jaxpr.outvars]
    body = "".join("    " + line.replace("\n", "\n    ") + "\n" for line in fn.lines)
    ret = f"func.return {', '.join(outs)} : {', '.join(out_types)}" if outs else "func.return"
    module.functions.append(
        f"  func.func private @{body_name}({', '.join(sig)}) -> ({', '.join(out_types)}) {{\n"
        f"{body}    {ret}\n  }}")
    # @main: the dimension values from the arguments, the constants, the call.
    main = FunctionBuilder(module)
    ctx = RuleContext(main, [], [])
    in_types = [tensor_type(v.aval) for v in jaxpr.invars]
    main_args = [f"%arg{i}" for i in range(len(in_types))]
    sizes = {}
    for size_name, i, axis in solution.synthetic:
        size = main.emit("stablehlo.get_dimension_size", [main_args[i]], [in_types[i]],
                         ["tensor<i32>"], props=f"dimension = {axis} : i64")[0]
        sizes[size_name] = main.emit("stablehlo.convert", [size], ["tensor<i32>"], [_I64])[0]
    module.dim_values = sizes
    if assertions:
        for check in solution.checks:
            _shape_assertion(ctx, check)
    dims = [dim_value(ctx, value) for value in sources.values()]
    const_ssa = [ctx.constant(np.asarray(c), v.aval) for c, v in zip(consts, jaxpr.constvars)]
    results = main.emit("func.call", dims + const_ssa + main_args,
                        [_I64] * len(dims) + [tensor_type(v.aval) for v in jaxpr.constvars]
                        + in_types, out_types, props=f"callee = @{body_name}")
    module.functions.append(main_function(main, main_args, in_types, results, out_types,
                                          arg_attrs, result_attrs))
    del module.dim_values
    if module.host_callbacks:
        raise NotImplementedError(f"Cannot export {name}: it has host callbacks, whose Python "
                                  "functions cannot be part of an exported module.")
    return module.text("jax.uses_shape_polymorphism = true, " + partitions(layout))
