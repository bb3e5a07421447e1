"""Mosaic lowering rules of the array primitives: elementwise arithmetic, comparisons,
selects, conversions, shapes, iota, reductions, dot_general (as ``tpu.matmul``) and
take_along_axis-like gathers (as ``tpu.dynamic_gather``).

A scalar (shape ``()``) is an MLIR scalar and a shaped array a ``vector``; a scalar operand
of an op on vectors is broadcast first (``vector.broadcast``), as plax's jaxprs mix them.
Integers are signless: the unsigned dtypes choose the unsigned ops.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.rules import mosaic_lowering_rules as rules
from plax.first_order import (arithmetic, bitwise, comparison, conversion, dot, indexing,
                              reductions, sharding_constraint, shapes, slicing,
                              transcendental, utility)
from plax.pallas.mosaic_lowering import (Lit, PrefetchArray, Value, element_type, is_float,
                                         is_unsigned, semaphore_type, static_int, value_type)

__all__: list = []


def _operands(ctx, args):
    """The operands as Values of the result's shape (scalars and literals broadcast)."""
    shape = ctx.avals_out[0].shape
    return [ctx.value(a, ShapedArray(shape, ctx.avals_in[k].dtype)) for k, a in enumerate(args)]


def _kind(dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "bool"
    if is_float(dtype):
        return "float"
    return "uint" if is_unsigned(dtype) else "int"


# --- binary ops -----------------------------------------------------------------------------
_BINARY = {
    arithmetic.add_p: {"float": "arith.addf", "int": "arith.addi", "uint": "arith.addi"},
    arithmetic.sub_p: {"float": "arith.subf", "int": "arith.subi", "uint": "arith.subi"},
    arithmetic.mul_p: {"float": "arith.mulf", "int": "arith.muli", "uint": "arith.muli"},
    arithmetic.div_p: {"float": "arith.divf", "int": "arith.divsi", "uint": "arith.divui"},
    arithmetic.rem_p: {"float": "arith.remf", "int": "arith.remsi", "uint": "arith.remui"},
    arithmetic.max_p: {"float": "arith.maximumf", "int": "arith.maxsi", "uint": "arith.maxui",
                       "bool": "arith.ori"},
    arithmetic.min_p: {"float": "arith.minimumf", "int": "arith.minsi", "uint": "arith.minui",
                       "bool": "arith.andi"},
    bitwise.and_p: {"int": "arith.andi", "uint": "arith.andi", "bool": "arith.andi"},
    bitwise.or_p: {"int": "arith.ori", "uint": "arith.ori", "bool": "arith.ori"},
    bitwise.xor_p: {"int": "arith.xori", "uint": "arith.xori", "bool": "arith.xori"},
    bitwise.shift_left_p: {"int": "arith.shli", "uint": "arith.shli"},
    bitwise.shift_right_arithmetic_p: {"int": "arith.shrsi", "uint": "arith.shrsi"},
    bitwise.shift_right_logical_p: {"int": "arith.shrui", "uint": "arith.shrui"},
}


def _binary_rule(prim, ops):
    def rule(ctx, x, y, **_):
        kind = _kind(ctx.avals_in[0].dtype)
        if kind not in ops:
            raise ctx.error(f"{prim.name} of {np.dtype(ctx.avals_in[0].dtype).name} values "
                            "is not supported on TPU.")
        return ctx.op1(ops[kind], _operands(ctx, [x, y]), ctx.avals_out[0])
    return rule


for _prim, _ops in _BINARY.items():
    rules[_prim] = _binary_rule(_prim, _ops)


def _pow(ctx, x, y, **_):
    # an integer exponent as a float (JAX's pow takes one); 2 ** y as math.exp2
    out = ctx.avals_out[0]
    ya = ctx.avals_in[1]
    y = ctx.value(y, ShapedArray(out.shape, ya.dtype))
    if not is_float(ya.dtype):
        y = ctx.op1("arith.uitofp" if is_unsigned(ya.dtype) else "arith.sitofp", [y],
                    ShapedArray(out.shape, out.dtype))
    if isinstance(x, Lit) and float(np.asarray(x.val)) == 2.0:
        return ctx.op1("math.exp2", [y], out)
    return ctx.op1("math.powf", [ctx.value(x, out), y], out)


rules[arithmetic.pow_p] = _pow


# --- comparisons (arith.cmpf / arith.cmpi predicates, as their enum's integers) --------------
# (ordered predicates, "ne" too, as JAX lowers them: float masks compared with "une" failed
# on a v5e where JAX's "one" passed)
_CMPF = {"eq": 1, "ne": 6, "lt": 4, "le": 5, "gt": 2, "ge": 3}
_CMPI_SIGNED = {"eq": 0, "ne": 1, "lt": 2, "le": 3, "gt": 4, "ge": 5}
_CMPI_UNSIGNED = {"eq": 0, "ne": 1, "lt": 6, "le": 7, "gt": 8, "ge": 9}


def compare(ctx, direction: str, x: Value, y: Value, out_aval) -> Value:
    """``x <direction> y`` (same types) as a boolean of ``out_aval``."""
    kind = _kind(x.aval.dtype)
    if kind == "float":
        return ctx.op1("arith.cmpf", [x, y], out_aval, f"predicate = {_CMPF[direction]} : i64")
    table = _CMPI_SIGNED if kind == "int" else _CMPI_UNSIGNED
    return ctx.op1("arith.cmpi", [x, y], out_aval, f"predicate = {table[direction]} : i64")


def _comparison_rule(direction):
    def rule(ctx, x, y, **_):
        shape = ctx.avals_out[0].shape
        xs = [ctx.value(a, ShapedArray(shape, av.dtype))
              for a, av in zip((x, y), ctx.avals_in)]
        return compare(ctx, direction, *xs, ctx.avals_out[0])
    return rule


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    rules[getattr(comparison, f"{_name}_p")] = _comparison_rule(_name)


def _select_n(ctx, which, *cases):
    out = ctx.avals_out[0]
    cases = [ctx.value(c, ShapedArray(out.shape, out.dtype)) for c in cases]
    bool_aval = ShapedArray(out.shape, np.dtype(np.bool_))
    which_aval = ctx.avals_in[0]
    if len(cases) == 1:
        return cases[0]
    w = ctx.value(which)
    if which_aval.dtype == np.bool_:
        if len(cases) != 2:
            raise ctx.error("select_n with a boolean predicate takes two cases")
        pred = ctx.value(w, bool_aval) if which_aval.shape != out.shape else w
        return ctx.op1("arith.select", [pred, cases[1], cases[0]], out)
    # an integer selector: case k where which == k (the last case for the rest)
    w = ctx.value(w, ShapedArray(out.shape, which_aval.dtype))
    result = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        kth = ctx.constant(k, ShapedArray(out.shape, which_aval.dtype))
        pred = compare(ctx, "eq", w, kth, bool_aval)
        result = ctx.op1("arith.select", [pred, cases[k], result], out)
    return result


rules[comparison.select_n_p] = _select_n


def _clamp(ctx, lo, x, hi):
    out = ctx.avals_out[0]
    lo, x, hi = [ctx.value(a, ShapedArray(out.shape, out.dtype)) for a in (lo, x, hi)]
    kind = _kind(out.dtype)
    mx = _BINARY[arithmetic.max_p][kind]
    mn = _BINARY[arithmetic.min_p][kind]
    return ctx.op1(mn, [ctx.op1(mx, [x, lo], out), hi], out)


rules[comparison.clamp_p] = _clamp


# --- unary ops ------------------------------------------------------------------------------
_UNARY_FLOAT = {
    transcendental.exp_p: "math.exp", transcendental.exp2_p: "math.exp2",
    transcendental.log_p: "math.log", transcendental.log1p_p: "math.log1p",
    transcendental.tanh_p: "math.tanh", transcendental.sqrt_p: "math.sqrt",
    transcendental.rsqrt_p: "math.rsqrt", transcendental.sin_p: "math.sin",
    transcendental.cos_p: "math.cos", transcendental.expm1_p: "math.expm1",
    transcendental.tan_p: "math.tan", transcendental.erf_p: "math.erf",
    arithmetic.floor_p: "math.floor", arithmetic.ceil_p: "math.ceil",
}


def _unary_float_rule(prim, op):
    def rule(ctx, x, **_):
        if not is_float(ctx.avals_in[0].dtype):
            raise ctx.error(f"{prim.name} needs a floating-point operand")
        return ctx.op1(op, [ctx.value(x)], ctx.avals_out[0])
    return rule


for _prim, _op in _UNARY_FLOAT.items():
    rules[_prim] = _unary_float_rule(_prim, _op)


def _neg(ctx, x, **_):
    # 0 - x, for floats too (as JAX lowers it)
    out = ctx.avals_out[0]
    sub = "arith.subf" if is_float(out.dtype) else "arith.subi"
    return ctx.op1(sub, [ctx.constant(0, out), ctx.value(x)], out)


def _abs(ctx, x, **_):
    out = ctx.avals_out[0]
    return ctx.op1("math.absf" if is_float(out.dtype) else "math.absi", [ctx.value(x)], out)


def _logistic(ctx, x, **_):
    out = ctx.avals_out[0]
    x = ctx.value(x)
    one = ctx.constant(1, out)
    e = ctx.op1("math.exp", [ctx.op1("arith.negf", [x], out)], out)
    return ctx.op1("arith.divf", [one, ctx.op1("arith.addf", [one, e], out)], out)


def _not(ctx, x, **_):
    out = ctx.avals_out[0]
    ones = ctx.constant(True if out.dtype == np.bool_ else -1, out)
    return ctx.op1("arith.xori", [ctx.value(x), ones], out)


def _square(ctx, x, **_):
    out = ctx.avals_out[0]
    x = ctx.value(x)
    return ctx.op1("arith.mulf" if is_float(out.dtype) else "arith.muli", [x, x], out)


def _integer_pow(ctx, x, *, y, **_):
    out = ctx.avals_out[0]
    x = ctx.value(x)
    mul = "arith.mulf" if is_float(out.dtype) else "arith.muli"
    n = abs(int(y))
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else ctx.op1(mul, [result, base], out)
        n >>= 1
        if n:
            base = ctx.op1(mul, [base, base], out)
    if result is None:
        result = ctx.constant(1, out)
    if y < 0:
        if not is_float(out.dtype):
            raise ctx.error("integer_pow with a negative exponent needs a float operand")
        result = ctx.op1("arith.divf", [ctx.constant(1, out), result], out)
    return result


def _sign(ctx, x, **_):
    out = ctx.avals_out[0]
    x = ctx.value(x)
    zero, one, minus = (ctx.constant(v, out) for v in (0, 1, -1))
    b = ShapedArray(out.shape, np.dtype(np.bool_))
    pos = ctx.op1("arith.select", [compare(ctx, "gt", x, zero, b), one, zero], out)
    return ctx.op1("arith.select", [compare(ctx, "lt", x, zero, b), minus, pos], out)


def _round(ctx, x, *, rounding_method=0, **_):
    op = "math.roundeven" if int(getattr(rounding_method, "value", rounding_method)) == 1 \
        else "math.round"
    return ctx.op1(op, [ctx.value(x)], ctx.avals_out[0])


def _is_finite(ctx, x, **_):
    # not tpu.weird (NaN or infinite), on f32 values
    x = convert(ctx, ctx.value(x), np.float32)
    out = ctx.avals_out[0]
    weird = ctx.op1("tpu.weird", [x], out)
    return ctx.op1("arith.xori", [weird, ctx.constant(True, out)], out)


# Giles' single-precision inverse error function ("Approximating the erfinv function", GPU
# Computing Gems, 2011), as XLA expands chlo.erf_inv: a degree-8 polynomial, in
# w - 2.5 where w = -log(1 - x^2) < 5, else in sqrt(w) - 3, times x.
_ERF_INV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                    0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERF_INV_TAILS = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                  0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _erf_inv_f32(x):
    aval = x.aval
    f32 = np.float32

    def where(pred, a, b):
        a, b = (shapes.full(aval.shape, v, aval.dtype) if isinstance(v, float) else v
                for v in (a, b))
        return comparison.select_n(pred, b, a)

    w = arithmetic.neg(transcendental.log1p(arithmetic.mul(arithmetic.neg(x), x)))
    central = comparison.lt(w, f32(5.0))
    w = where(central, arithmetic.sub(w, f32(2.5)),
              arithmetic.sub(transcendental.sqrt(w), f32(3.0)))
    p = where(central, _ERF_INV_CENTRAL[0], _ERF_INV_TAILS[0])
    for c, t in zip(_ERF_INV_CENTRAL[1:], _ERF_INV_TAILS[1:]):
        p = arithmetic.add(where(central, c, t), arithmetic.mul(p, w))
    edge = comparison.eq(arithmetic.abs(x), f32(1.0))
    return where(edge, arithmetic.mul(x, f32(np.inf)), arithmetic.mul(p, x))


def _erf_inv(ctx, x, **_):
    if np.dtype(ctx.avals_in[0].dtype) != np.float32:
        raise ctx.error(f"erf_inv is lowered for float32 in TPU kernels, got "
                        f"{ctx.avals_in[0].str_short()}")
    return ctx.lower_fun(_erf_inv_f32, ctx.avals_in, [x])


def _bit_count_rule(op):
    def rule(ctx, x, **_):
        return ctx.op1(op, [ctx.value(x)], ctx.avals_out[0])
    return rule


def _identity_rule(ctx, x, **_):
    return x


def _split(ctx, x, *, sizes, axis, **_):
    x = ctx.value(x)
    outs, start = [], 0
    for aval in ctx.avals_out:
        starts = [0] * len(aval.shape)
        starts[axis] = start
        start += aval.shape[axis]
        sub = type(ctx)(ctx.fn, ctx.avals_in, [aval], ctx.eqn)
        outs.append(_extract_slice(sub, x, starts, aval.shape))
    return outs


rules[comparison.is_finite_p] = _is_finite
rules[bitwise.clz_p] = _bit_count_rule("math.ctlz")
rules[bitwise.population_count_p] = _bit_count_rule("math.ctpop")
for _prim in (conversion.stop_gradient_p, utility.copy_p, utility.stage_p,
              sharding_constraint.reshard_p):
    rules[_prim] = _identity_rule
rules[arithmetic.neg_p] = _neg
rules[arithmetic.abs_p] = _abs
rules[arithmetic.sign_p] = _sign
rules[arithmetic.round_p] = _round
rules[arithmetic.square_p] = _square
rules[arithmetic.integer_pow_p] = _integer_pow
rules[transcendental.logistic_p] = _logistic
rules[transcendental.erf_inv_p] = _erf_inv
rules[bitwise.not_p] = _not


# --- conversions ----------------------------------------------------------------------------
def convert(ctx, x: Value, new_dtype) -> Value:
    """``x`` converted to ``new_dtype`` (same shape)."""
    src, dst = np.dtype(x.aval.dtype), np.dtype(new_dtype)
    out = ShapedArray(x.aval.shape, dst)
    if src == dst:
        return x
    sk, dk = _kind(src), _kind(dst)
    if dk == "bool":
        zero = ctx.constant(0, x.aval.update(weak_type=False))
        return compare(ctx, "ne", x, zero, out)
    if sk == "bool":
        i32 = ShapedArray(x.aval.shape, np.dtype(np.int32))
        wide = ctx.op1("arith.extui", [x], i32 if dk == "float" else out)
        return convert(ctx, wide, dst) if dk == "float" else wide
    if sk == "float" and dk == "float":
        op = "arith.extf" if dst.itemsize > src.itemsize else "arith.truncf"
        return ctx.op1(op, [x], out)
    if sk == "float":
        return ctx.op1("arith.fptoui" if dk == "uint" else "arith.fptosi", [x], out)
    if dk == "float":
        return ctx.op1("arith.uitofp" if sk == "uint" else "arith.sitofp", [x], out)
    src_bits, dst_bits = dtypes.itemsize_bits(src), dtypes.itemsize_bits(dst)  # (int4: 4)
    if dst_bits == src_bits:
        return ctx.op1("arith.bitcast", [x], out) if element_type(src) != element_type(dst) \
            else Value(x.name, x.type, out)
    if dst_bits < src_bits:
        return ctx.op1("arith.trunci", [x], out)
    return ctx.op1("arith.extui" if sk == "uint" else "arith.extsi", [x], out)


def _convert_element_type(ctx, x, *, new_dtype, **_):
    if semaphore_type(new_dtype):
        # (the initial value of a scoped semaphore, which ``run_state`` allocates with
        # ``tpu.sem_alloc`` and never stores: there is nothing to compute)
        return None
    if isinstance(x, Lit):
        return ctx.constant(np.asarray(x.val).astype(new_dtype), ctx.avals_out[0])
    return convert(ctx, x, new_dtype)


def _empty(ctx, **_):
    # (an uninitialised value: what a scoped buffer of ``run_scoped`` starts from, which
    # ``run_state`` allocates and never stores; nothing else may read it)
    return None


rules[utility.empty_p] = _empty


def _bitcast_convert_type(ctx, x, *, new_dtype, **_):
    out = ctx.avals_out[0]
    if out.shape != ctx.avals_in[0].shape:
        raise ctx.error("bitcast_convert_type: Changing bitwidths not supported (bitcast "
                        "between types of one width, or use pltpu.bitcast)")
    return ctx.op1("arith.bitcast", [ctx.value(x)], out)


rules[conversion.convert_element_type_p] = _convert_element_type
rules[conversion.bitcast_convert_type_p] = _bitcast_convert_type


# --- shapes ---------------------------------------------------------------------------------
def reshape(ctx, x: Value, shape) -> Value:
    """``x`` as ``shape`` (the same number of elements)."""
    shape = tuple(shape)
    out = ShapedArray(shape, x.aval.dtype)
    if tuple(x.aval.shape) == shape:
        return x
    if not x.aval.shape:
        return ctx.op1("vector.broadcast", [x], out)
    if not shape:
        if np.dtype(x.aval.dtype).itemsize != 4:
            raise ctx.error(
                "Only arrays with 32-bit element types can be converted to scalars, but got: "
                f"{np.dtype(x.aval.dtype).name}. Try casting the input before squeezing the "
                "scalar.")
        zeros = ", ".join("0" for _ in x.aval.shape)
        return ctx.op1("vector.extract", [x], out, f"static_position = array<i64: {zeros}>")
    return ctx.op1("vector.shape_cast", [x], out)


def _reshape(ctx, x, **_):
    if isinstance(x, Lit):
        return ctx.value(x, ctx.avals_out[0])
    return reshape(ctx, x, ctx.avals_out[0].shape)


def _broadcast_in_dim(ctx, x, *, shape, broadcast_dimensions, **_):
    shape = tuple(shape)
    if isinstance(x, Lit) or not ctx.avals_in[0].shape:
        return ctx.value(ctx.value(x), ShapedArray(shape, ctx.avals_in[0].dtype))
    dims = tuple(broadcast_dimensions)
    if list(dims) != sorted(dims):
        raise ctx.error("broadcast_in_dim that reorders dimensions is not supported")
    unit = [1] * len(shape)
    for d, n in zip(dims, x.aval.shape):
        unit[d] = n
    x = reshape(ctx, x, unit)
    if tuple(unit) == shape:
        return x
    return ctx.op1("vector.broadcast", [x], ShapedArray(shape, x.aval.dtype))


def _transpose(ctx, x, *, permutation):
    perm = ", ".join(map(str, permutation))
    return ctx.op1("tpu.transpose", [ctx.value(x)], ctx.avals_out[0],
                   f"permutation = array<i64: {perm}>")


def _iota(ctx, *, dtype, shape, dimension, **_):
    i32 = ShapedArray(tuple(shape), np.dtype(np.int32))
    x = ctx.op1("tpu.iota", [], i32, f"dimensions = array<i32: {int(dimension)}>")
    return convert(ctx, x, dtype)


rules[shapes.broadcast_in_dim_p] = _broadcast_in_dim
rules[shapes.transpose_p] = _transpose
rules[shapes.iota_p] = _iota


# --- reductions -----------------------------------------------------------------------------
def _identity(kind: str, dtype):
    if kind == "add":
        return 0
    if kind in ("maximumf", "maxsi", "maxui"):
        return dtypes.lowest_value(np.dtype(dtype)) if kind != "maximumf" else -np.inf
    if kind in ("minimumf", "minsi", "minui"):
        return dtypes.highest_value(np.dtype(dtype)) if kind != "minimumf" else np.inf
    if kind == "and":
        return True
    return False


_REDUCTION = {
    reductions.reduce_sum_p: {"float": "add", "int": "add", "uint": "add"},
    reductions.reduce_max_p: {"float": "maximumf", "int": "maxsi", "uint": "maxui",
                              "bool": "or"},
    reductions.reduce_min_p: {"float": "minimumf", "int": "minsi", "uint": "minui",
                              "bool": "and"},
    reductions.reduce_and_p: {"bool": "and"},
    reductions.reduce_or_p: {"bool": "or"},
}


def _reduction_rule(prim, kinds):
    def rule(ctx, x, *, axes, **_):
        x = ctx.value(x)
        out = ctx.avals_out[0]
        kind = kinds.get(_kind(x.aval.dtype))
        if kind is None:
            raise ctx.error(f"{prim.name} of {np.dtype(x.aval.dtype).name} values is not "
                            "supported on TPU.")
        if not axes:
            return x
        axes = sorted(axes)
        if not out.shape:
            # to a scalar: reduce (1, *shape) to vector<1>, then extract (as JAX does)
            x = reshape(ctx, x, (1,) + tuple(x.aval.shape))
            axes = [a + 1 for a in axes]
            vec = ShapedArray((1,), out.dtype)
        else:
            vec = out
        acc = ctx.constant(_identity(kind, out.dtype), vec)
        dims = ", ".join(map(str, axes))
        r = ctx.op1("vector.multi_reduction", [x, acc], vec,
                    f"kind = #vector.kind<{kind}>, reduction_dims = array<i64: {dims}>")
        if out.shape:
            return r
        return reshape(ctx, reshape(ctx, r, (1,) * (len(x.aval.shape))), ())
    return rule


for _prim, _kinds in _REDUCTION.items():
    rules[_prim] = _reduction_rule(_prim, _kinds)


def _index_reduction_rule(kind: str):
    """argmax / argmin as ``tpu.reduce_index`` (f32 operands, one axis, int32 indices, as
    JAX's lowering has them)."""
    def rule(ctx, x, *, axes, index_dtype):
        x = ctx.value(x)
        if np.dtype(x.aval.dtype) != np.float32 or len(axes) != 1 \
                or np.dtype(index_dtype) != np.int32:
            raise ctx.error(f"{kind} lowers for TPU on float32 operands over one axis with "
                            "int32 indices only; cast the operand to float32")
        axis, out = int(axes[0]), ctx.avals_out[0]
        if x.aval.ndim == 1:  # (Mosaic reduces 2-D vectors: a leading unit dimension)
            x = reshape(ctx, x, (1,) + tuple(x.aval.shape))
            r = ctx.op1("tpu.reduce_index", [x], ShapedArray((1,), out.dtype),
                        f"axis = {axis + 1} : i32, kind = #tpu.reduction_kind<{kind}>")
            return reshape(ctx, r, ())
        return ctx.op1("tpu.reduce_index", [x], out,
                       f"axis = {axis} : i32, kind = #tpu.reduction_kind<{kind}>")
    return rule


rules[reductions.argmax_p] = _index_reduction_rule("arg_max")
rules[reductions.argmin_p] = _index_reduction_rule("arg_min")


# --- dot_general ----------------------------------------------------------------------------
def dot_dimension_numbers(dimension_numbers, lhs_ndim: int, rhs_ndim: int) -> str:
    """``#tpu.dot_dimension_numbers``: contracting, non-contracting, the output's dimensions
    as (operand, dimension) pairs (batch, lhs free, rhs free), batch dimensions."""
    (lc, rc), (lb, rb) = dimension_numbers
    lfree = sorted(set(range(lhs_ndim)) - set(lc) - set(lb))
    rfree = sorted(set(range(rhs_ndim)) - set(rc) - set(rb))
    order = [x for d in lb for x in (0, d)] + [x for d in lfree for x in (0, d)] \
        + [x for d in rfree for x in (1, d)]

    def fmt(ds):
        return "[" + ", ".join(str(int(d)) for d in ds) + "]"
    parts = [lc, rc, lfree, rfree, order, lb, rb]
    return f"#tpu.dot_dimension_numbers<{', '.join(fmt(p) for p in parts)}>"


def _dot_general(ctx, x, y, *, dimension_numbers, precision=None,
                 preferred_element_type=None, **_):
    for aval in ctx.avals_in:
        if dtypes.issubdtype(aval.dtype, np.unsignedinteger):
            raise ctx.error(
                f"Unsigned integer dtype {aval.dtype} is not supported for dot_general "
                "(matmul) on TPU: the MXU reads integers as signed. Cast the operands to a "
                "signed type first.", unsupported=True)
    out = ctx.avals_out[0]
    x, y = ctx.value(x), ctx.value(y)
    if x.aval.dtype != y.aval.dtype:
        wide = np.promote_types(x.aval.dtype, y.aval.dtype) if not (
            x.aval.dtype == dtypes.bfloat16 or y.aval.dtype == dtypes.bfloat16) \
            else np.dtype(np.float32)
        x, y = convert(ctx, x, wide), convert(ctx, y, wide)
    acc_dtype = np.dtype(np.float32) if is_float(out.dtype) else np.dtype(np.int32)
    acc_aval = ShapedArray(out.shape, acc_dtype)
    numbers = dot_dimension_numbers(dimension_numbers, x.aval.ndim, y.aval.ndim)
    attrs = [f"dimension_numbers = {numbers}", "transpose_lhs_hint = false"]
    prec = precision[0] if isinstance(precision, (tuple, list)) else precision
    if prec is not None and str(getattr(prec, "name", prec)).upper() == "HIGHEST":
        attrs.append("precision = #tpu.contract_precision<fp32>")
    zero = ctx.constant(0, acc_aval)
    result = ctx.op1("tpu.matmul", [x, y, zero], acc_aval, ", ".join(attrs))
    return convert(ctx, result, out.dtype)


rules[dot.dot_general_p] = _dot_general


# --- slicing of values (index maps reading scalar-prefetch arrays) --------------------------
def _extract_slice(ctx, x: Value, starts, sizes, strides=None) -> Value:
    """A static window of a vector (``vector.extract_strided_slice``)."""
    strides = [1] * len(sizes) if strides is None else [int(t) for t in strides]
    out = ctx.avals_out[0]
    if tuple(sizes) == tuple(x.aval.shape) and not any(starts):
        return x

    def arr(v):
        return "[" + ", ".join(str(int(a)) for a in v) + "]"
    return ctx.op1("vector.extract_strided_slice", [x], out,
                   f"offsets = {arr(starts)}, sizes = {arr(sizes)}, strides = {arr(strides)}")


def _prefetch_element(ctx, x, idx):
    scalar = ShapedArray((), x.aval.dtype)
    v = Value(ctx.fn.op("memref.load", [x, *idx], [value_type(scalar)])[0],
              value_type(scalar), scalar)
    return _Unit(v, ctx.avals_out[0])


def _dynamic_slice(ctx, x, *starts, slice_sizes, **_):
    if isinstance(x, PrefetchArray) and all(int(s) == 1 for s in slice_sizes):
        return _prefetch_element(ctx, x, [ctx.index(s) for s in starts])
    known = [static_int(s) for s in starts]
    if isinstance(x, PrefetchArray) or None in known:
        raise ctx.error("dynamic_slice of a value at a traced position is not supported in "
                        "TPU kernels; index a reference with pl.ds instead")
    shape = ctx.avals_in[0].shape
    known = [min(max(k, 0), d - n) for k, d, n in zip(known, shape, slice_sizes)]
    return _extract_slice(ctx, ctx.value(x), known, slice_sizes)


def _slice(ctx, x, *, start_indices, limit_indices, strides=None, **_):
    if isinstance(x, PrefetchArray):
        if all(int(b) - int(a) == 1 for a, b in zip(start_indices, limit_indices)):
            return _prefetch_element(ctx, x, [ctx.index_constant(int(s))
                                              for s in start_indices])
        raise ctx.error("index maps read single elements of a scalar-prefetch array")
    return _extract_slice(ctx, ctx.value(x), start_indices, ctx.avals_out[0].shape, strides)


def _concatenate(ctx, *xs, dimension):
    out = ctx.avals_out[0]
    xs = [ctx.value(x, a) for x, a in zip(xs, ctx.avals_in)]
    return ctx.op1("tpu.concatenate", xs, out, f"dimension = {int(dimension)} : i32")


class _Unit(Value):
    """A scalar standing for a one-element array (an element read from a prefetch array):
    a reshape to shape () gives the scalar."""

    __slots__ = ("unit_of",)

    def __init__(self, scalar: Value, aval):
        super().__init__(scalar.name, scalar.type, aval)
        self.unit_of = scalar


def _unit_reshape(ctx, x, **params):
    if isinstance(x, PrefetchArray) and int(np.prod(x.aval.shape)) == 1:
        x = _prefetch_element(ctx, x, [ctx.index_constant(0) for _ in x.aval.shape])
    if isinstance(x, _Unit):
        if ctx.avals_out[0].shape:
            return _Unit(x.unit_of, ctx.avals_out[0])
        return x.unit_of
    return _reshape(ctx, x, **params)


rules[slicing.dynamic_slice_p] = _dynamic_slice
rules[slicing.slice_p] = _slice
rules[shapes.concatenate_p] = _concatenate
rules[utility.split_p] = _split
rules[shapes.reshape_p] = _unit_reshape
rules[shapes.squeeze_p] = _unit_reshape


def _gather(ctx, x, indices, *, dimension_numbers, slice_sizes, mode, **_):
    """A take_along_axis-like gather (one collapsed axis, the others batching axes) as
    ``tpu.dynamic_gather`` on the indices without their index-vector axis; as JAX, out of
    bounds indices are not filled (the gather is along one of the two minor axes)."""
    out = ctx.avals_out[0]
    ishape, rank = tuple(ctx.avals_in[1].shape), len(out.shape)
    if len(ctx.avals_in[0].shape) != rank or ishape[:-1] != tuple(out.shape) or \
            ishape[-1] != 1:
        raise ctx.error("Only take_along_axis-like gathers supported")
    dn = dimension_numbers
    mode = indexing.GatherScatterMode.from_any(mode)
    if not (tuple(slice_sizes) == (1,) * rank and mode in (
            indexing.GatherScatterMode.FILL_OR_DROP,
            indexing.GatherScatterMode.PROMISE_IN_BOUNDS)
            and not dn.offset_dims and tuple(dn.collapsed_slice_dims) == tuple(
                dn.start_index_map) and len(dn.collapsed_slice_dims) == 1
            and tuple(dn.operand_batching_dims) == tuple(dn.start_indices_batching_dims)
            and len(dn.operand_batching_dims) == rank - 1):
        raise ctx.error("Unsupported gather")
    (axis,) = dn.collapsed_slice_dims
    if axis < rank - 2:
        raise ctx.error("Only gathers along the two minormost dimensions supported on TC")
    idx = reshape(ctx, ctx.value(indices, ctx.avals_in[1]), out.shape)
    return ctx.op1("tpu.dynamic_gather", [ctx.value(x, ctx.avals_in[0]), idx], out,
                   f"dimensions = array<i32: {axis}>")


rules[indexing.gather_p] = _gather
