"""Tensor contractions: the ``dot_general`` primitive, ``dot``, ``batch_matmul`` and ``Precision``.

``dot_general`` contracts chosen dimensions of two arrays, optionally batching
over others. Its params are all hashable: ``dimension_numbers`` is a tuple of
tuples of ints, ``precision`` is None or a pair of ``Precision`` members and
``preferred_element_type`` is None or an ``np.dtype``.
"""
from __future__ import annotations

import enum
import operator
from collections.abc import Sequence
from typing import Union

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.config import config
from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, batch_rules, out_sharding_params, param_printers,
                             register_lowering)
from plax.core.sharding_types import (ShardingTypeError, first_sharding, like, sharding_rules,
                                      spec_of, with_entry)
from plax.core.trace import get_aval as _aval
from plax.lowering.stablehlo import element_type
from plax.first_order import conversion as _conv
from plax.first_order import shapes as _shapes
from plax.first_order import dot_algorithm as _algo
from plax.first_order.ad_util import defbilinear
from plax.first_order.common import reject_keys, weak_of
from plax.sharding.named import out_sharding_param

__all__ = ["Precision", "dot_general", "dot", "batch_matmul", "dot_general_p",
           "canonicalize_precision", "DotAlgorithm", "DotAlgorithmPreset", "PrecisionLike",
           "DotDimensionNumbers"]

DotAlgorithm, DotAlgorithmPreset = _algo.DotAlgorithm, _algo.DotAlgorithmPreset


# --- precision ----------------------------------------------------------------------
class Precision(enum.Enum):
    """How much internal precision a contraction may trade for speed on accelerators.

    Besides its members and their values, the constructor accepts the names
    'default', 'high', 'highest' and the aliases 'fastest'/'bfloat16' (DEFAULT),
    'bfloat16_3x'/'tensorfloat32' (HIGH) and 'float32' (HIGHEST); None means DEFAULT.
    """
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        if value is None:
            return cls.DEFAULT
        if isinstance(value, str):
            return _PRECISION_NAMES.get(value)
        return None

    def __repr__(self):
        return f"Precision.{self.name}"

    def __str__(self):
        return self.name


_PRECISION_NAMES = {
    "default": Precision.DEFAULT, "fastest": Precision.DEFAULT, "bfloat16": Precision.DEFAULT,
    "high": Precision.HIGH, "bfloat16_3x": Precision.HIGH, "tensorfloat32": Precision.HIGH,
    "highest": Precision.HIGHEST, "float32": Precision.HIGHEST,
}


def _precision_error(precision) -> ValueError:
    return ValueError(
        "Precision argument must be one of: None, a lax.Precision, one of the strings "
        f"{sorted(_PRECISION_NAMES)}, a pair of lax.Precision values or such strings "
        "(one per operand), a lax.DotAlgorithmPreset or the name of one, or a "
        f"lax.DotAlgorithm; but got {precision!r} (precision must be one of those).")


def _one_precision(p, whole) -> Precision:
    if isinstance(p, Precision):
        return p
    if isinstance(p, str) and p in _PRECISION_NAMES:
        return _PRECISION_NAMES[p]
    raise _precision_error(whole)


def canonicalize_precision(precision):
    """The hashable ``precision`` param: None, a ``(Precision, Precision)`` pair, or a
    ``DotAlgorithm``/``DotAlgorithmPreset``.

    ``None`` falls back to the ``default_matmul_precision`` config option.
    """
    if precision is None:
        default = config.read("default_matmul_precision")
        if default is None:
            return None
        precision = default
    if isinstance(precision, Precision) or (isinstance(precision, str)
                                            and precision in _PRECISION_NAMES):
        p = _one_precision(precision, precision)
        return (p, p)
    if _algo.is_algorithm(precision):  # before pairs: a DotAlgorithm is a tuple
        return precision
    if isinstance(precision, (tuple, list)) and len(precision) == 2:
        return tuple(_one_precision(p, precision) for p in precision)
    preset = _algo.preset_named(precision) if isinstance(precision, str) else None
    if preset is not None:
        return preset
    raise _precision_error(precision)


# The type names of dot_general's arguments, as JAX spells them for annotations.
PrecisionLike = Union[None, str, Precision, tuple[str, str], tuple[Precision, Precision],
                      DotAlgorithm, DotAlgorithmPreset]
DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]],
                            tuple[Sequence[int], Sequence[int]]]


# --- parameter canonicalisation -------------------------------------------------------
def _dims_tuple(dims, what: str) -> tuple:
    """One entry of dimension_numbers (a sequence of ints, or a single int) as a tuple."""
    if isinstance(dims, (int, np.integer)):
        return (int(dims),)
    try:
        return tuple(operator.index(d) for d in dims)
    except TypeError:
        raise TypeError(f"dot_general dimension_numbers: {what} must be a sequence of integers, "
                        f"got {dims!r}.") from None


def _canonical_dimension_numbers(dimension_numbers) -> tuple:
    """``((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))`` as tuples of int tuples."""
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError):
        raise TypeError(
            "dot_general dimension_numbers must have the form ((lhs_contracting_dims, "
            "rhs_contracting_dims), (lhs_batch_dims, rhs_batch_dims)), got "
            f"{dimension_numbers!r}.") from None
    return ((_dims_tuple(lc, "lhs_contracting"), _dims_tuple(rc, "rhs_contracting")),
            (_dims_tuple(lb, "lhs_batch"), _dims_tuple(rb, "rhs_batch")))


def canonical_preferred_element_type(dtype):
    """A ``preferred_element_type`` argument as a canonical dtype (None stays None)."""
    if dtype is None:
        return None
    return dtypes.canonicalize_user_dtype(dtype, "preferred_element_type")


# --- dtype rules ---------------------------------------------------------------------
def _dtype_rank(dt: np.dtype) -> tuple:
    """Orders dtypes when the two operands differ: the larger one is the result's.

    Kind first (bool < integer < floating < complex), then width; at equal width a
    signed integer beats an unsigned one and the float with more exponent range wins.
    """
    if dtypes.is_bool(dt):
        return (0, 1, 0)
    if dtypes.is_integer(dt):
        return (1, dtypes.itemsize_bits(dt), 0 if dtypes.is_unsigned(dt) else 1)
    if dtypes.is_complex(dt):
        return (3, dtypes.itemsize_bits(dt), 0)
    return (2, dtypes.itemsize_bits(dt), int(dtypes.finfo(dt).maxexp))


def common_input_dtype(lhs_dtype: np.dtype, rhs_dtype: np.dtype) -> np.dtype:
    """The dtype both operands are computed in (the lhs's on a tie)."""
    if lhs_dtype == rhs_dtype:
        return lhs_dtype
    return max((lhs_dtype, rhs_dtype), key=_dtype_rank)


def _value_bits(dt: np.dtype) -> int:
    """Bits per real component: 1 for bool, half the width for complex."""
    if dtypes.is_bool(dt):
        return 1
    bits = dtypes.itemsize_bits(dt)
    return bits // 2 if dtypes.is_complex(dt) else bits


def _result_dtype(input_dtype: np.dtype, preferred) -> np.dtype:
    if preferred is None:
        return input_dtype
    # Non-float inputs cannot ask for a narrower result (it would silently wrap);
    # float inputs may ask for anything, e.g. f32 x f32 -> bf16.
    if not dtypes.is_float(input_dtype) and _value_bits(preferred) < _value_bits(input_dtype):
        raise TypeError(
            "dot_general: `preferred_element_type` must not be narrower than the original type, "
            f"got preferred_element_type of {preferred.name} for result type of "
            f"{input_dtype.name}. Pass a dtype at least as wide, or convert the result afterwards.")
    return preferred


# --- the primitive -------------------------------------------------------------------
dot_general_p = Primitive("dot_general")


def _check_side(side: str, aval: ShapedArray, batch: tuple, contract: tuple) -> None:
    ndim = aval.ndim
    if any(not 0 <= d < ndim for d in batch + contract):
        raise TypeError(
            f"dot_general requires {side} dimension numbers to be nonnegative and less than the "
            f"number of axes of the {side} value, got {side}_batch of {batch} and "
            f"{side}_contracting of {contract} for {side} of rank {ndim} (shape {aval.shape}).")
    for kind, dims in (("batch", batch), ("contracting", contract)):
        if len(set(dims)) != len(dims):
            raise TypeError(f"dot_general requires {side} {kind} dimensions to be distinct, got "
                            f"{side}_{kind} {dims}.")
    if set(batch) & set(contract):
        raise TypeError(f"dot_general requires {side} batch dimensions to be disjoint from "
                        f"contracting dimensions, got {side}_batch {batch} and "
                        f"{side}_contracting {contract}.")


def _dot_general_shape(lhs: ShapedArray, rhs: ShapedArray, dimension_numbers) -> tuple:
    (lc, rc), (lb, rb) = dimension_numbers
    _check_side("lhs", lhs, lb, lc)
    _check_side("rhs", rhs, rb, rc)
    if len(lb) != len(rb):
        raise TypeError("dot_general requires equal numbers of lhs_batch and rhs_batch "
                        f"dimensions, got lhs_batch {lb} and rhs_batch {rb}.")
    lb_shape = tuple(lhs.shape[d] for d in lb)
    rb_shape = tuple(rhs.shape[d] for d in rb)
    if lb_shape != rb_shape:
        raise TypeError("dot_general requires lhs batch dimensions and rhs batch dimensions to "
                        f"have the same shape, got {lb_shape} and {rb_shape} (lhs shape "
                        f"{lhs.shape}, rhs shape {rhs.shape}).")
    lc_shape = tuple(lhs.shape[d] for d in lc)
    rc_shape = tuple(rhs.shape[d] for d in rc)
    if lc_shape != rc_shape:
        raise TypeError("dot_general requires contracting dimensions to have the same shape, "
                        f"got {lc_shape} and {rc_shape} (lhs shape {lhs.shape} contracting "
                        f"{lc}, rhs shape {rhs.shape} contracting {rc}).")
    lhs_free = tuple(s for i, s in enumerate(lhs.shape) if i not in lb and i not in lc)
    rhs_free = tuple(s for i, s in enumerate(rhs.shape) if i not in rb and i not in rc)
    return lb_shape + lhs_free + rhs_free


def _dot_general_abstract(lhs, rhs, *, dimension_numbers, precision, preferred_element_type,
                          out_sharding=None):
    reject_keys("dot_general", lhs, rhs)
    shape = _dot_general_shape(lhs, rhs, dimension_numbers)
    out_dtype = _result_dtype(common_input_dtype(lhs.dtype, rhs.dtype), preferred_element_type)
    return ShapedArray(shape, out_dtype, weak_of(lhs, rhs))


def _dims_attr(values) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _dot_general_lowering(ctx, lhs, rhs, *, dimension_numbers, precision, preferred_element_type,
                          out_sharding=None):
    if _algo.is_algorithm(precision):
        return _lower_with_algorithm(ctx, lhs, rhs, dimension_numbers, precision)
    (lc, rc), (lb, rb) = dimension_numbers
    la, ra = ctx.avals_in
    out = ctx.avals_out[0]
    if la.dtype != ra.dtype:
        # Mixed operands are both computed in the result dtype.
        lhs = ctx.convert(lhs, la, la.update(dtype=out.dtype, weak_type=False))
        rhs = ctx.convert(rhs, ra, ra.update(dtype=out.dtype, weak_type=False))
        la, ra = la.update(dtype=out.dtype), ra.update(dtype=out.dtype)
    prec = precision or (Precision.DEFAULT, Precision.DEFAULT)
    config_attr = ", ".join(f"#stablehlo<precision {p.name}>" for p in prec)
    props = (f"dot_dimension_numbers = {_dnums_attr(dimension_numbers)}, "
             f"precision_config = [{config_attr}]")
    if dtypes.is_complex(la.dtype) != dtypes.is_complex(out.dtype):
        # Between real and complex the dot runs in complex, its result then converted: libtpu
        # aborts the process on a dot whose operands and result differ in being complex.
        wide = out.dtype if dtypes.is_complex(out.dtype) else la.dtype
        if not dtypes.is_complex(la.dtype):
            lhs = _conv.lower_conversion(ctx, lhs, la, la.update(dtype=wide, weak_type=False))
            rhs = _conv.lower_conversion(ctx, rhs, ra, ra.update(dtype=wide, weak_type=False))
            la, ra = la.update(dtype=wide), ra.update(dtype=wide)
        wide_out = out.update(dtype=wide, weak_type=False)
        product = ctx.op1("stablehlo.dot_general", [lhs, rhs], [la, ra], wide_out, props=props)
        return _conv.lower_conversion(ctx, product, wide_out, out)
    # A preferred_element_type is the dot's result type directly: XLA accepts e.g.
    # i8 x i8 -> i32, bf16 x bf16 -> f32 (accumulating in f32) and f32 x f32 -> i32.
    return ctx.op1("stablehlo.dot_general", [lhs, rhs], [la, ra], out, props=props)


def _dnums_attr(dimension_numbers) -> str:
    (lc, rc), (lb, rb) = dimension_numbers
    return (f"#stablehlo.dot<lhs_batching_dimensions = {_dims_attr(lb)}, "
            f"rhs_batching_dimensions = {_dims_attr(rb)}, "
            f"lhs_contracting_dimensions = {_dims_attr(lc)}, "
            f"rhs_contracting_dimensions = {_dims_attr(rc)}>")


def _lower_with_algorithm(ctx, lhs, rhs, dimension_numbers, algorithm):
    """A dot under a DotAlgorithm(Preset): operands converted to the algorithm's types, the
    contraction accumulating in its accumulator type, then converted to the result type."""
    _algo.check_platform(algorithm, ctx.platform)
    la, ra = ctx.avals_in
    out = ctx.avals_out[0]
    lt, rt, acc = _algo.compute_types(algorithm, la.dtype, ra.dtype, out.dtype)
    if la.dtype != lt:
        lhs, la = ctx.convert(lhs, la, la.update(dtype=lt, weak_type=False)), la.update(dtype=lt)
    if ra.dtype != rt:
        rhs, ra = ctx.convert(rhs, ra, ra.update(dtype=rt, weak_type=False)), ra.update(dtype=rt)
    acc_aval = out.update(dtype=acc, weak_type=False)
    algo = _algo.attribute(algorithm, element_type(lt), element_type(rt))
    default = "#stablehlo<precision DEFAULT>"
    props = (f"dot_dimension_numbers = {_dnums_attr(dimension_numbers)}, "
             f"precision_config = [{default}, {default}]" + (f", {algo}" if algo else ""))
    res = ctx.op1("stablehlo.dot_general", [lhs, rhs], [la, ra], acc_aval, props=props)
    return res if acc == out.dtype else ctx.convert(res, acc_aval, out)


abstract_eval_rules[dot_general_p] = _dot_general_abstract


def _dot_general_sharding(avals_in, avals_out, *, dimension_numbers, out_sharding=None,
                          **params):
    """Batch dimensions must be split alike, free ones keep their split, and split contracting
    dimensions need ``out_sharding`` (the result of a sharded contraction is ambiguous)."""
    if out_sharding is not None:
        return [like(out_sharding, out_sharding.spec)]
    lhs, rhs = avals_in
    (lc, rc), (lb, rb) = dimension_numbers
    ls, rs = spec_of(lhs), spec_of(rhs)
    lbs, rbs = tuple(ls[d] for d in lb), tuple(rs[d] for d in rb)
    batch = []
    for a, b in zip(lbs, rbs):
        if a is not None and b is not None and a != b:
            raise ShardingTypeError(
                "dot_general requires lhs batch dimensions and rhs batch dimensions to have the "
                f"consistent sharding, got {lbs} and {rbs}. Reshard one operand first.")
        batch.append(a if a is not None else b)
    lcs, rcs = tuple(ls[d] for d in lc), tuple(rs[d] for d in rc)
    # One side split: XLA gathers it. Both: the result would be partial sums.
    if any(a is not None and b is not None for a, b in zip(lcs, rcs)):
        raise ShardingTypeError(
            "Contracting dimensions are sharded and it is ambiguous how the output should be "
            "sharded. Please specify the output sharding via the `out_sharding` parameter. Got "
            f"lhs_contracting_spec={lcs} and rhs_contracting_spec={rcs}")
    free = [ls[d] for d in range(lhs.ndim) if d not in lb and d not in lc] + \
        [rs[d] for d in range(rhs.ndim) if d not in rb and d not in rc]
    return [like(first_sharding(avals_in), batch + free)]


sharding_rules[dot_general_p] = _dot_general_sharding
out_sharding_params[dot_general_p] = "out_sharding"
register_lowering(dot_general_p, _dot_general_lowering)


class _Dims(tuple):
    """Dimension numbers printed with lists, the way JAX shows them."""

    def __str__(self):
        return "(" + ", ".join(str(self.__class__(x)) if isinstance(x, tuple) and x and
                               isinstance(x[0], tuple) else str(list(x)) for x in self) + ")"


def _print_dot_general_params(p):
    shown = {"dimension_numbers": _Dims(p["dimension_numbers"])}
    shown.update({k: v for k, v in sorted(p.items())
                  if k in ("precision", "preferred_element_type") and v is not None})
    return shown


param_printers[dot_general_p] = _print_dot_general_params


# --- differentiation rules --------------------------------------------------------------------


def _consecutive(*lengths):
    start, out = 0, []
    for n in lengths:
        out.append(list(range(start, start + n)))
        start += n
    return out


def _transpose_lhs(ct, x_aval, y, dimension_numbers, params, swap_ans=False):
    """Cotangent of the lhs: contract ``ct`` with ``y`` over y's free dims, then permute."""
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    y_ndim = _aval(y).ndim
    x_kept = [i for i in range(x_aval.ndim) if i not in x_contract and i not in x_batch]
    y_kept = [i for i in range(y_ndim) if i not in y_contract and i not in y_batch]
    if swap_ans:
        ans_batch, ans_y, _ = _consecutive(len(x_batch), len(y_kept), len(x_kept))
    else:
        ans_batch, _, ans_y = _consecutive(len(x_batch), len(x_kept), len(y_kept))
    dims = ((tuple(ans_y), tuple(y_kept)), (tuple(ans_batch), tuple(y_batch)))
    x_contract_by_y = [x_contract[i] for i in np.argsort(y_contract)]
    order = list(x_batch) + x_kept + x_contract_by_y
    out_axes = tuple(int(i) for i in np.argsort(order))
    typed = x_aval._sharding or first_sharding([_aval(ct), _aval(y)])
    if typed is not None:  # the cotangent is split as the operand: say so, as it is ambiguous
        spec = spec_of(x_aval)
        params = {**params, "out_sharding": type(typed)(typed.mesh, tuple(spec[d] for d in order))}
    prod = dot_general_p.bind(ct, y, **{**params, "dimension_numbers": dims,
                                        "preferred_element_type": None})
    return _conv.convert_element_type(_shapes.transpose(prod, out_axes), x_aval.dtype)


def _dot_general_transpose_lhs(ct, x, y, *, dimension_numbers, **params):
    return _transpose_lhs(ct, x.aval, y, dimension_numbers, params)


def _dot_general_transpose_rhs(ct, x, y, *, dimension_numbers, **params):
    """The lhs rule with the operands' roles swapped."""
    (xc, yc), (xb, yb) = dimension_numbers
    return _transpose_lhs(ct, y.aval, x, ((yc, xc), (yb, xb)), params, swap_ans=True)


# --- batching ---------------------------------------------------------------------------------
def _shift_dims(dims, bdim) -> tuple:
    """Per-example dimension numbers of one operand as dimensions of its batched value."""
    return tuple(d if bdim is None or d < bdim else d + 1 for d in dims)


def _free_dims(ndim: int, batch: tuple, contract: tuple) -> list:
    return [i for i in range(ndim) if i not in batch and i not in contract]


def _dot_general_batch(axis_data, vals, dims, *, dimension_numbers, **params):
    """Both operands batched: their batch dimensions pair up as a new leading dot_general batch
    dimension. One batched: its batch dimension rides along as a free dimension of that operand,
    so neither operand is transposed or broadcast."""
    (lhs, rhs), (dl, dr) = vals, dims
    (lc, rc), (lb, rb) = dimension_numbers
    lc, lb = _shift_dims(lc, dl), _shift_dims(lb, dl)
    rc, rb = _shift_dims(rc, dr), _shift_dims(rb, dr)
    if dl is not None and dr is not None:
        new_dims = ((lc, rc), ((dl,) + lb, (dr,) + rb))
        out_dim = 0
    elif dl is not None:
        new_dims = ((lc, rc), (lb, rb))
        out_dim = len(lb) + _free_dims(_aval(lhs).ndim, lb, lc).index(dl)
    else:
        new_dims = ((lc, rc), (lb, rb))
        lhs_free = _free_dims(_aval(lhs).ndim, lb, lc)
        out_dim = len(lb) + len(lhs_free) + _free_dims(_aval(rhs).ndim, rb, rc).index(dr)
    if params.get("out_sharding") is not None:
        batched = spec_of(_aval(lhs))[dl] if dl is not None else spec_of(_aval(rhs))[dr]
        params = {**params, "out_sharding": with_entry(params["out_sharding"], out_dim, batched)}
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=new_dims, **params)
    return out, out_dim


defbilinear(dot_general_p, _dot_general_transpose_lhs, _dot_general_transpose_rhs)
batch_rules[dot_general_p] = _dot_general_batch


# --- public functions ----------------------------------------------------------------
def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, *,
                out_sharding=None):
    """General contraction: ``dimension_numbers = ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``.

    The result's dimensions are the batch dimensions, then lhs's free ones, then rhs's.
    """
    dimension_numbers = _canonical_dimension_numbers(dimension_numbers)
    if out_sharding is not None:
        ndim = len(_dot_general_shape(_aval(lhs), _aval(rhs), dimension_numbers))
        out_sharding = out_sharding_param(out_sharding, ndim, "dot_general")
    return dot_general_p.bind(
        lhs, rhs, dimension_numbers=dimension_numbers,
        precision=canonicalize_precision(precision),
        preferred_element_type=canonical_preferred_element_type(preferred_element_type),
        out_sharding=out_sharding)


def _shape_of(x) -> tuple:
    return _aval(x).shape


def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None,
        out_sharding=None):
    """Vector-vector, matrix-vector or matrix-matrix product (any contraction with dimension_numbers)."""
    if dimension_numbers is None:
        ls, rs = _shape_of(lhs), _shape_of(rhs)
        if not (1 <= len(ls) <= 2 and 1 <= len(rs) <= 2 and ls[-1] == rs[0]):
            raise ValueError(
                "lax.dot: without dimension_numbers only un-batched vector-vector, "
                "matrix-vector and matrix-matrix products whose inner sizes agree are "
                f"supported; got lhs shape {ls} and rhs shape {rs}. Pass dimension_numbers "
                "or use lax.dot_general.")
        dimension_numbers = (((len(ls) - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type,
                       out_sharding=out_sharding)


def batch_matmul(lhs, rhs, precision=None):
    """Matrix product over the last two dimensions, batched over all leading ones."""
    ls, rs = _shape_of(lhs), _shape_of(rhs)
    if len(ls) < 2 or len(rs) < 2:
        raise ValueError(f"Arguments to batch_matmul must be at least 2D, got {len(ls)}, "
                         f"{len(rs)} (shapes {ls} and {rs}).")
    if len(ls) != len(rs):
        raise ValueError(f"Arguments to batch_matmul must have same ndim, got {len(ls)}, "
                         f"{len(rs)} (shapes {ls} and {rs}).")
    n = len(ls)
    batch = tuple(range(n - 2))
    return dot_general(lhs, rhs, (((n - 1,), (n - 2,)), (batch, batch)), precision)
