"""Convolutions: the ``conv_general_dilated`` primitive and its convenience wrappers.

One spatial dimension of a convolution, for lhs size ``n``, kernel size ``k``, stride
``s``, padding ``(lo, hi)``, lhs (input) dilation ``a`` and rhs (kernel) dilation ``r``:
the lhs is dilated to ``n' = (n - 1) a + 1`` (``a - 1`` zeros between elements) and
padded, the kernel covers ``k' = (k - 1) r + 1`` positions, and output ``o`` is
``sum_j x'[o s + j r - lo] w[j]``; there are ``(n' + lo + hi - k') // s + 1`` outputs.

Dimension numbers say where the roles sit: ``lhs_spec = (batch, feature, spatial...)``,
``rhs_spec = (out feature, in feature, spatial...)``, ``out_spec = (batch, feature,
spatial...)``. With ``feature_group_count = G`` the lhs features split into G
contiguous groups, each convolved with its own G-th of the kernel's output features;
with ``batch_group_count = B`` the lhs *batch* splits into B contiguous groups the same
way (each output feature group sees one batch group, and the output batch shrinks B-fold).

Both derivatives are convolutions again (see ``_transpose_lhs`` / ``_transpose_rhs``);
vmap folds the mapped axis into the batch or a feature dimension.
"""
from __future__ import annotations

import functools
import operator
from typing import NamedTuple, Sequence, Union

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.rules import (abstract_eval_rules, batch_rules, out_sharding_params,
                             register_lowering)
from plax.core.sharding_types import ShardingTypeError, first_sharding, like, sharding_rules, \
    spec_of
from plax.core.trace import get_aval
from plax.first_order import conversion as _conversion
from plax.first_order.dot import (Precision, canonical_preferred_element_type,
                                  canonicalize_precision, common_input_dtype)
from plax.first_order import shapes as _shapes
from plax.first_order.ad_util import defbilinear
from plax.first_order.batch_util import bdim_at_front
from plax.first_order.common import as_int_tuple, check_dtype, padtype_to_pads, reject_keys, weak_of
from plax.core.primitive import Primitive
from plax.core.symbolic_shapes import DimExpr, max_dim, shape_is_symbolic
from plax.lowering import stablehlo as _stablehlo
from plax.lowering.stablehlo import i64_array, tensor_type
from plax.sharding.named import out_sharding_param

__all__ = ["ConvDimensionNumbers", "ConvGeneralDilatedDimensionNumbers", "conv_general_dilated",
           "conv_general_dilated_p", "conv", "conv_with_general_padding", "conv_transpose",
           "conv_dimension_numbers", "conv_general_permutations", "conv_shape_tuple",
           "conv_general_shape_tuple", "conv_transpose_shape_tuple"]


class ConvDimensionNumbers(NamedTuple):
    """Where the roles of a convolution's dimensions sit, as dimension indices.

    ``lhs_spec``: (batch, feature, spatial...); ``rhs_spec``: (out feature, in feature,
    spatial...); ``out_spec``: (batch, feature, spatial...). Spatial dimension ``i`` is
    ``spec[2 + i]`` in each.
    """
    lhs_spec: Sequence[int]
    rhs_spec: Sequence[int]
    out_spec: Sequence[int]


ConvGeneralDilatedDimensionNumbers = Union[tuple[str, str, str], ConvDimensionNumbers, None]


# --- dimension numbers -------------------------------------------------------------------
_ROLE_CHARS = (("N", "C"), ("O", "I"), ("N", "C"))


def conv_general_permutations(dimension_numbers):
    """The (lhs, rhs, out) permutations of a string spec such as ('NHWC', 'HWIO', 'NHWC').

    Spatial dimensions are numbered in the order the rhs spec lists them.
    """
    return _string_permutations(tuple(dimension_numbers))


@functools.lru_cache(maxsize=256)
def _string_permutations(specs: tuple) -> tuple:
    for i, (spec, (a, b)) in enumerate(zip(specs, _ROLE_CHARS)):
        if spec.count(a) != 1 or spec.count(b) != 1:
            raise TypeError(f"convolution dimension_numbers[{i}] must contain the characters "
                            f"'{a}' and '{b}' exactly once, got {spec}.")
        if len(set(spec)) != len(spec):
            raise TypeError(f"convolution dimension_numbers[{i}] cannot have duplicate "
                            f"characters, got {spec}.")
    spatial = [set(spec) - set(chars) for spec, chars in zip(specs, _ROLE_CHARS)]
    if not spatial[0] == spatial[1] == spatial[2]:
        raise TypeError("convolution dimension_numbers elements must each have the same set of "
                        f"spatial characters, got {specs}.")
    rhs = specs[1]
    rhs_spatial = [c for c in rhs if c not in "OI"]

    def perm(spec, chars):
        return (spec.index(chars[0]), spec.index(chars[1])) + tuple(spec.index(c)
                                                                    for c in rhs_spatial)
    return tuple(perm(spec, chars) for spec, chars in zip(specs, _ROLE_CHARS))


def _check_permutations(dnums: ConvDimensionNumbers, ndim: int) -> None:
    for name, spec in zip(ConvDimensionNumbers._fields, dnums):
        if sorted(spec) != list(range(ndim)):
            raise TypeError(f"conv_general_dilated dimension_numbers.{name} must be a permutation "
                            f"of range({ndim}) for operands of rank {ndim}, got {tuple(spec)}.")


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """``dimension_numbers`` (None, a ConvDimensionNumbers, or three spec strings such as
    ('NHWC', 'HWIO', 'NHWC')) as a ConvDimensionNumbers for operands of these shapes.

    None means ('NCHW', 'OIHW', 'NCHW') and its analogues for other ranks.
    """
    ndim = len(lhs_shape)
    if ndim != len(rhs_shape):
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got {ndim} and "
                        f"{len(rhs_shape)} (shapes {tuple(lhs_shape)} and {tuple(rhs_shape)}).")
    if dimension_numbers is None:
        iota = tuple(range(ndim))
        return ConvDimensionNumbers(iota, iota, iota)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        dnums = ConvDimensionNumbers(*(tuple(int(operator.index(d)) for d in spec)
                                       for spec in dimension_numbers))
        _check_permutations(dnums, ndim)
        return dnums
    if not isinstance(dimension_numbers, (list, tuple)):
        raise TypeError("convolution dimension_numbers must be tuple/list or None, got "
                        f"{type(dimension_numbers)}.")
    if len(dimension_numbers) != 3:
        raise TypeError("convolution dimension_numbers list/tuple must be length 3, got "
                        f"{len(dimension_numbers)}.")
    if not all(isinstance(s, str) for s in dimension_numbers):
        raise TypeError("convolution dimension_numbers elements must be strings, got "
                        f"{tuple(type(s) for s in dimension_numbers)}: write them as e.g. "
                        "('NHWC', 'HWIO', 'NHWC'), or pass a ConvDimensionNumbers.")
    for i, spec in enumerate(dimension_numbers):
        if len(spec) != ndim:
            raise TypeError(f"convolution dimension_numbers[{i}] must have len equal to the ndim "
                            f"of lhs and rhs, got {len(spec)} for lhs and rhs shapes "
                            f"{tuple(lhs_shape)} and {tuple(rhs_shape)}.")
    return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))


# --- shapes --------------------------------------------------------------------------------
def _dilate(sizes, dilation) -> tuple:
    return tuple(0 if d == 0 else (d - 1) * r + 1 for d, r in zip(sizes, dilation))


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """The result shape of a convolution with operands in (N, C, spatial...) and (O, I,
    spatial...) order (already dilated); ``pads`` is a padding string or (lo, hi) pairs."""
    lhs_shape, rhs_shape = (tuple(d if type(d) is DimExpr else int(d) for d in shape)
                            for shape in (lhs_shape, rhs_shape))
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected "
                        f"{len(lhs_shape) - 2}, got {len(pads)}.")
    padded = [n + lo + hi for n, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError("Negative padding is larger than the size of the corresponding "
                         f"dimension: got padding={tuple(pads)} for lhs_shape[2:]={lhs_shape[2:]}.")
    space = tuple(max_dim(0, (p - k) // s + 1) for p, k, s in zip(padded, rhs_shape[2:],
                                                                   strides))
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + space


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """The result shape of a convolution with string ``dimension_numbers`` (no dilation)."""
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple([lhs_shape[d] for d in lhs_perm], [rhs_shape[d] for d in rhs_perm],
                           window_strides, padding)
    return tuple(out[i] for i in np.argsort(out_perm))


def _check_groups(lhs_shape, rhs_shape, dnums, feature_group_count, batch_group_count) -> None:
    lhs_spec, rhs_spec, _ = dnums
    features, batch = lhs_shape[lhs_spec[1]], lhs_shape[lhs_spec[0]]
    rhs_in, rhs_out = rhs_shape[rhs_spec[1]], rhs_shape[rhs_spec[0]]

    def positive(name, count):
        if not count > 0:
            raise ValueError(f"conv_general_dilated {name} must be a positive integer, got "
                             f"{count}.")

    positive("feature_group_count", feature_group_count)
    if features % feature_group_count:
        raise ValueError("conv_general_dilated feature_group_count must divide lhs feature "
                         f"dimension size, but {feature_group_count} does not divide {features}.")
    if features // feature_group_count != rhs_in:
        raise ValueError(
            "conv_general_dilated lhs feature dimension size divided by feature_group_count "
            "must equal the rhs input feature dimension size, but "
            f"{features} // {feature_group_count} != {rhs_in} (lhs shape {lhs_shape}, rhs "
            f"shape {rhs_shape}, dimension_numbers {dnums}).")
    if rhs_out % feature_group_count:
        raise ValueError("conv_general_dilated rhs output feature dimension size must be a "
                         f"multiple of feature_group_count, but {rhs_out} is not a multiple of "
                         f"{feature_group_count}.")
    positive("batch_group_count", batch_group_count)
    if batch % batch_group_count:
        raise ValueError("conv_general_dilated batch_group_count must divide lhs batch dimension "
                         f"size, but {batch_group_count} does not divide {batch}.")
    if rhs_out % batch_group_count:
        raise ValueError("conv_general_dilated rhs output feature dimension size must be a "
                         f"multiple of batch_group_count, but {rhs_out} is not a multiple of "
                         f"{batch_group_count}.")
    if feature_group_count > 1 and batch_group_count > 1:
        raise ValueError("At most one of batch_group_count and feature_group_count may be > 1, "
                         f"got batch_group_count={batch_group_count} and "
                         f"feature_group_count={feature_group_count}.")


@functools.lru_cache(maxsize=1024)
def _conv_shape(lhs_shape, rhs_shape, *, window_strides, padding, lhs_dilation, rhs_dilation,
                dimension_numbers, feature_group_count, batch_group_count) -> tuple:
    if len(lhs_shape) != len(rhs_shape):
        raise ValueError("conv_general_dilated lhs and rhs must have the same number of "
                         f"dimensions, but got {lhs_shape} and {rhs_shape}.")
    if len(lhs_shape) < 2:
        raise ValueError("conv_general_dilated needs operands of rank at least 2 (batch and "
                         f"feature dimensions), got lhs shape {lhs_shape} and rhs shape "
                         f"{rhs_shape}.")
    if not isinstance(dimension_numbers, ConvDimensionNumbers):
        raise TypeError("conv_general_dilated_p needs a ConvDimensionNumbers, got "
                        f"{dimension_numbers!r}; lax.conv_dimension_numbers makes one.")
    _check_permutations(dimension_numbers, len(lhs_shape))
    nspatial = len(lhs_shape) - 2
    for name, vals in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                       ("rhs_dilation", rhs_dilation)):
        if len(vals) != nspatial:
            raise ValueError(f"conv_general_dilated window and {name} must have the same number "
                             f"of dimensions, but got {nspatial} and {len(vals)} ({name}="
                             f"{tuple(vals)}).")
        if any(v < 1 for v in vals):
            what = "window_strides" if name == "window_strides" else "All dilations"
            raise TypeError(f"conv_general_dilated: {what} must be positive, got {name}="
                            f"{tuple(vals)}.")
    _check_groups(lhs_shape, rhs_shape, dimension_numbers, feature_group_count, batch_group_count)
    lhs_perm, rhs_perm, out_perm = dimension_numbers
    lhs_t = (lhs_shape[lhs_perm[0]], lhs_shape[lhs_perm[1]]) + _dilate(
        [lhs_shape[d] for d in lhs_perm[2:]], lhs_dilation)
    rhs_t = (rhs_shape[rhs_perm[0]], rhs_shape[rhs_perm[1]]) + _dilate(
        [rhs_shape[d] for d in rhs_perm[2:]], rhs_dilation)
    out_t = conv_shape_tuple(lhs_t, rhs_t, window_strides, padding, batch_group_count)
    return tuple(out_t[i] for i in np.argsort(out_perm))


# --- dtypes ------------------------------------------------------------------------------
def _kind(dt) -> str:
    if dtypes.is_complex(dt):
        return "complex"
    if dtypes.is_float(dt):
        return "floating"
    return "integral"  # integers and bool


def _bits(dt) -> int:
    return 1 if dtypes.is_bool(dt) else dtypes.itemsize_bits(dt)


def _result_dtype(input_dtype, preferred):
    if preferred is None:
        return input_dtype
    pair = (_kind(input_dtype), _kind(preferred))
    if pair not in (("integral", "integral"), ("integral", "floating"), ("floating", "floating"),
                    ("complex", "complex")):
        raise TypeError(
            "conv_general_dilated: Input type is incompatible with `preferred_element_type`: "
            f"got inputs of {input_dtype.name} and preferred_element_type={preferred.name}. The "
            "compatible (input, preferred) kinds are (integral, integral), (integral, floating), "
            "(floating, floating) and (complex, complex).")
    if pair == ("integral", "integral") and not dtypes.is_bool(input_dtype) and \
            dtypes.is_unsigned(preferred) and not dtypes.is_unsigned(input_dtype):
        raise TypeError("conv_general_dilated: `preferred_element_type` must have the same "
                        f"signedness as the original type, got {preferred.name} for inputs of "
                        f"{input_dtype.name}.")
    if _bits(preferred) < _bits(input_dtype):
        raise TypeError("conv_general_dilated: `preferred_element_type` must not be narrower "
                        f"than the original type, got {preferred.name} for inputs of "
                        f"{input_dtype.name}. Pass a dtype at least as wide, or convert the "
                        "result afterwards.")
    return preferred


# --- the primitive -------------------------------------------------------------------------
conv_general_dilated_p = Primitive("conv_general_dilated")


def _conv_abstract(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision,
                   preferred_element_type, out_sharding=None):
    for aval, arg in ((lhs, "lhs"), (rhs, "rhs")):
        check_dtype("conv_general_dilated", aval, "any", arg)
    reject_keys("conv_general_dilated", lhs, rhs)
    if lhs.dtype != rhs.dtype:
        raise TypeError("lax.conv_general_dilated requires arguments to have the same dtypes, "
                        f"got {lhs.dtype.name}, {rhs.dtype.name}. Convert one operand first "
                        "(lax.convert_element_type).")
    shape = _conv_shape(lhs.shape, rhs.shape, window_strides=window_strides, padding=padding,
                        lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
                        dimension_numbers=dimension_numbers,
                        feature_group_count=feature_group_count,
                        batch_group_count=batch_group_count)
    return ShapedArray(shape, _result_dtype(lhs.dtype, preferred_element_type),
                       weak_of(lhs, rhs))


def _layout(spec, roles) -> str:
    letters = [""] * len(spec)
    for pos, letter in zip(spec, roles + tuple(str(i) for i in range(len(spec) - 2))):
        letters[pos] = letter
    return "[" + ", ".join(letters) + "]"


@functools.lru_cache(maxsize=1024)
def _conv_props(*, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                feature_group_count, batch_group_count, precision) -> str:
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    layouts = (f"{_layout(lhs_spec, ('b', 'f'))}x{_layout(rhs_spec, ('o', 'i'))}->"
               f"{_layout(out_spec, ('b', 'f'))}")
    n = len(padding)
    pads = "[" + ", ".join(f"[{lo}, {hi}]" for lo, hi in padding) + "]" if n else ""
    # (symbolic pads are dynamic_conv's padding operand instead)
    pad_attr = "" if shape_is_symbolic(sum(padding, ())) else \
        f"padding = dense<{pads}> : tensor<{n}x2xi64>, "
    # (a dot algorithm, e.g. from the default_matmul_precision config, is for dots: a
    # convolution runs at the default precision then, as JAX's)
    prec = precision if isinstance(precision, tuple) and len(precision) == 2 and \
        isinstance(precision[0], Precision) else (Precision.DEFAULT, Precision.DEFAULT)
    config = ", ".join(f"#stablehlo<precision {p.name}>" for p in prec)
    return (f"batch_group_count = {batch_group_count} : i64, "
            f"dimension_numbers = #stablehlo.conv<{layouts}>, "
            f"feature_group_count = {feature_group_count} : i64, "
            f"lhs_dilation = {i64_array(lhs_dilation)}, "
            f"{pad_attr}precision_config = [{config}], "
            f"rhs_dilation = {i64_array(rhs_dilation)}, "
            f"window_strides = {i64_array(window_strides)}")


def _conv_lowering(ctx, lhs, rhs, *, preferred_element_type, out_sharding=None, **params):
    padding = params["padding"]
    if not shape_is_symbolic(sum(padding, ())):
        return ctx.op1("stablehlo.convolution", [lhs, rhs], props=_conv_props(**params))
    # pads that depend on symbolic sizes (SAME padding under plax.export): an operand
    n = len(padding)
    flat = _stablehlo.symbolic_shape_value(ctx, sum(padding, ()))
    pads = ctx.fn.emit("stablehlo.reshape", [flat], [f"tensor<{2 * n}xi64>"],
                       [f"tensor<{n}x2xi64>"])[0]
    return ctx.fn.emit("stablehlo.dynamic_conv", [lhs, rhs, pads],
                       [tensor_type(a) for a in ctx.avals_in] + [f"tensor<{n}x2xi64>"],
                       [tensor_type(ctx.avals_out[0])], props=_conv_props(**params))[0]


abstract_eval_rules[conv_general_dilated_p] = _conv_abstract
register_lowering(conv_general_dilated_p, _conv_lowering)
out_sharding_params[conv_general_dilated_p] = "out_sharding"


def _conv_sharding(avals_in, avals_out, *, dimension_numbers, batch_group_count,
                   out_sharding=None, **_):
    """The batch dimension keeps its split; a split feature, spatial or kernel dimension makes
    the result's layout ambiguous, so it needs ``out_sharding``."""
    if out_sharding is not None:
        return [like(out_sharding, out_sharding.spec)]
    lhs, rhs = avals_in
    lhs_spec, _, out_spec = dimension_numbers
    ls = spec_of(lhs)
    need = ("Reshard the operands (plax.sharding.reshard) or pass out_sharding= to "
            "conv_general_dilated.")
    if any(e is not None for e in spec_of(rhs)) or ls[lhs_spec[1]] is not None:
        raise ShardingTypeError(
            "conv_general_dilated got a split kernel or a split lhs feature dimension (lhs "
            f"{lhs.str_short()}, rhs {rhs.str_short()}), so how the result is split is "
            f"ambiguous. Please specify the output sharding via the `out_sharding` parameter. "
            f"{need}")
    if any(ls[d] is not None for d in lhs_spec[2:]):
        raise ShardingTypeError(
            f"conv_general_dilated does not split spatial dimensions by itself (lhs "
            f"{lhs.str_short()}, spatial dimensions {tuple(lhs_spec[2:])}). {need}")
    entries = [None] * len(out_spec)
    if ls[lhs_spec[0]] is not None:
        if batch_group_count > 1:
            raise ShardingTypeError(
                "conv_general_dilated with batch_group_count > 1 regroups the lhs batch "
                f"dimension, which is split (lhs {lhs.str_short()}). {need}")
        entries[out_spec[0]] = ls[lhs_spec[0]]
    return [like(first_sharding(avals_in), entries)]


sharding_rules[conv_general_dilated_p] = _conv_sharding


# --- reshaping helpers for groups and vmap ------------------------------------------------
def _split_dim(x, d: int, n: int):
    """Dimension ``d`` of ``x`` (of size ``n * m``) as two dimensions ``(n, m)`` at d, d + 1."""
    shape = get_aval(x).shape
    return _shapes.reshape(x, shape[:d] + (n, shape[d] // n) + shape[d + 1:])


def _merge_dim(x, src: int, dst: int):
    """Dimension ``src`` of ``x`` merged into dimension ``dst`` as its major part; the merged
    dimension sits where ``dst`` lands once ``src`` is removed."""
    shape = get_aval(x).shape
    order = [i for i in range(len(shape)) if i != src]
    at = order.index(dst)
    order.insert(at, src)
    if order != list(range(len(shape))):
        x = _shapes.transpose(x, tuple(order))
    sizes = [shape[i] for i in order]
    sizes[at:at + 2] = [sizes[at] * sizes[at + 1]]
    return _shapes.reshape(x, tuple(sizes))


# --- differentiation ---------------------------------------------------------------------
def _common_operands(ct, other):
    """The cotangent and the known operand in one dtype (the wider of the two)."""
    dt = common_input_dtype(get_aval(ct).dtype, get_aval(other).dtype)
    return (_conversion.convert_element_type(ct, dt),
            _conversion.convert_element_type(other, dt))


def _pinned(aval, others, reshaped: bool):
    """The out_sharding of a transposed convolution: its operand's layout, when shardings are
    in the types (a contraction over a split dimension is otherwise ambiguous)."""
    typed = aval._sharding or first_sharding([get_aval(v) for v in others])
    if typed is None or reshaped:
        return None
    return type(typed)(typed.mesh, spec_of(aval))


def _transpose_lhs(ct, x_aval, w, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision,
                   preferred_element_type, out_sharding=None):
    """d lhs: the cotangent (dilated by the strides) convolved with the spatially reversed
    kernel, its in/out feature roles swapped, striding by the lhs dilation.

    In one spatial dimension the cotangent of ``x[i]`` collects ``ct[o] w[j]`` over
    ``o s + j r - lo = i a``; reversing the kernel turns that into a correlation whose
    low padding is ``k' - 1 - lo`` and whose high padding makes exactly ``n`` outputs.
    """
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    groups = max(feature_group_count, batch_group_count)
    if groups > 1:  # (G * Og) out features, I in -> Og out, (G * I) in, group-major
        w = _split_dim(w, rhs_spec[0], groups)
        w = _merge_dim(w, rhs_spec[0], rhs_spec[1] + (rhs_spec[1] > rhs_spec[0]))
    w_shape, ct_shape = get_aval(w).shape, get_aval(ct).shape
    n_dil = _dilate([x_aval.shape[d] for d in lhs_spec[2:]], lhs_dilation)
    k_dil = _dilate([w_shape[d] for d in rhs_spec[2:]], rhs_dilation)
    o_dil = _dilate([ct_shape[d] for d in out_spec[2:]], window_strides)
    pads = tuple((k - 1 - lo, n + lo - o) for n, k, o, (lo, _) in zip(n_dil, k_dil, o_dil, padding))
    ct, w = _common_operands(ct, w)
    out = conv_general_dilated_p.bind(
        ct, _shapes.rev(w, tuple(rhs_spec[2:])), window_strides=lhs_dilation, padding=pads,
        lhs_dilation=window_strides, rhs_dilation=rhs_dilation,
        dimension_numbers=ConvDimensionNumbers(out_spec, (rhs_spec[1], rhs_spec[0]) +
                                               tuple(rhs_spec[2:]), lhs_spec),
        feature_group_count=groups, batch_group_count=1, precision=precision,
        preferred_element_type=None,
        out_sharding=_pinned(x_aval, (ct, w), batch_group_count > 1))
    if batch_group_count > 1:  # (B * C) features, Nb batch -> C features, (B * Nb) batch
        out = _split_dim(out, lhs_spec[1], batch_group_count)
        out = _merge_dim(out, lhs_spec[1], lhs_spec[0] + (lhs_spec[0] > lhs_spec[1]))
    return _conversion.convert_element_type(out, x_aval.dtype)


def _transpose_rhs(ct, x, w_aval, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision,
                   preferred_element_type, out_sharding=None):
    """d rhs: the lhs convolved with the cotangent as its kernel, the lhs batch contracted
    (lhs feature and batch roles swapped), striding by the rhs dilation and dilating the
    window by the strides; feature groups become batch groups and vice versa."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    x_shape, ct_shape = get_aval(x).shape, get_aval(ct).shape
    n_dil = _dilate([x_shape[d] for d in lhs_spec[2:]], lhs_dilation)
    k_dil = _dilate([w_aval.shape[d] for d in rhs_spec[2:]], rhs_dilation)
    o_dil = _dilate([ct_shape[d] for d in out_spec[2:]], window_strides)
    pads = tuple((lo, k - 1 + o - n - lo) for n, k, o, (lo, _) in zip(n_dil, k_dil, o_dil, padding))
    swap = lambda spec: (spec[1], spec[0]) + tuple(spec[2:])
    ct, x = _common_operands(ct, x)
    out = conv_general_dilated_p.bind(
        x, ct, window_strides=rhs_dilation, padding=pads, lhs_dilation=lhs_dilation,
        rhs_dilation=window_strides,
        dimension_numbers=ConvDimensionNumbers(swap(lhs_spec), swap(out_spec), swap(rhs_spec)),
        feature_group_count=batch_group_count, batch_group_count=feature_group_count,
        precision=precision, preferred_element_type=None,
        out_sharding=_pinned(w_aval, (ct, x), False))
    return _conversion.convert_element_type(out, w_aval.dtype)


defbilinear(conv_general_dilated_p,
            lambda ct, x, w, **params: _transpose_lhs(ct, x.aval, w, **params),
            lambda ct, x, w, **params: _transpose_rhs(ct, x, w.aval, **params))


# --- vmap ----------------------------------------------------------------------------------
def _conv_batch(axis, vals, dims, *, dimension_numbers, feature_group_count, batch_group_count,
                **params):
    """The mapped axis folds into a dimension the convolution keeps apart: both operands
    mapped, into the lhs feature (or batch, with batch groups) and the kernel's output
    features as extra groups; the lhs alone, into its batch; the kernel alone, into its
    output features (inside each group)."""
    (x, w), (dx, dw) = vals, dims
    size = get_aval(x).shape[dx] if dx is not None else get_aval(w).shape[dw]
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    fgc, bgc = feature_group_count, batch_group_count
    if dx is not None:
        x = bdim_at_front(x, dx, size)
    if dw is not None:
        w = bdim_at_front(w, dw, size)
    if dx is not None and dw is not None:
        x = _merge_dim(x, 0, (lhs_spec[0] if bgc > 1 else lhs_spec[1]) + 1)
        w = _merge_dim(w, 0, rhs_spec[0] + 1)
        if bgc > 1:
            bgc *= size
        else:
            fgc *= size
        out_axis, inner = out_spec[1], None
    elif dx is not None:
        if bgc > 1:  # per batch group: (Bg, size, Nb)
            x = _split_dim(x, lhs_spec[0] + 1, bgc)
            x = _merge_dim(x, 0, lhs_spec[0] + 2)
            x = _merge_dim(x, lhs_spec[0], lhs_spec[0] + 1)
        else:
            x = _merge_dim(x, 0, lhs_spec[0] + 1)
        out_axis, inner = out_spec[0], None
    else:
        groups = max(fgc, bgc)
        if groups > 1:  # per group: (G, size, Og)
            w = _split_dim(w, rhs_spec[0] + 1, groups)
            w = _merge_dim(w, 0, rhs_spec[0] + 2)
            w = _merge_dim(w, rhs_spec[0], rhs_spec[0] + 1)
        else:
            w = _merge_dim(w, 0, rhs_spec[0] + 1)
        out_axis, inner = out_spec[1], (groups if groups > 1 else None)
    out = conv_general_dilated_p.bind(x, w, dimension_numbers=dimension_numbers,
                                      feature_group_count=fgc, batch_group_count=bgc, **params)
    if inner is None:
        return _split_dim(out, out_axis, size), out_axis
    out = _split_dim(out, out_axis, inner)          # (G, size * Og)
    out = _split_dim(out, out_axis + 1, size)       # (G, size, Og)
    return _merge_dim(out, out_axis, out_axis + 2), out_axis  # (size, G * Og)


batch_rules[conv_general_dilated_p] = _conv_batch


# --- public functions ------------------------------------------------------------------------
def _group_count(value, name: str) -> int:
    try:
        return int(operator.index(value))
    except TypeError:
        raise TypeError(f"conv_general_dilated {name} must be an integer, got {value!r}.") from None


def _explicit_padding(padding) -> tuple:
    try:
        return tuple((int(operator.index(lo)), int(operator.index(hi))) for lo, hi in padding)
    except (TypeError, ValueError):
        raise ValueError("padding argument to conv_general_dilated should be a string or a "
                         f"sequence of (low, high) pairs, got {padding}.") from None


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count=1, batch_group_count=1,
                         precision=None, preferred_element_type=None, out_sharding=None):
    """N-dimensional convolution with strides, padding, lhs/rhs dilation and groups.

    ``padding`` is 'SAME', 'SAME_LOWER', 'VALID' or one (low, high) pair per spatial
    dimension (negative values crop). ``dimension_numbers`` is None (('NCHW', 'OIHW',
    'NCHW') and analogues), three spec strings, or a ConvDimensionNumbers; spatial
    dimension ``i`` is the ``i``-th spatial character of the rhs spec.
    """
    lhs_shape, rhs_shape = get_aval(lhs).shape, get_aval(rhs).shape
    dnums = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    if len(lhs_shape) < 2:
        raise ValueError("conv_general_dilated needs operands of rank at least 2 (batch and "
                         f"feature dimensions), got lhs shape {lhs_shape} and rhs shape "
                         f"{rhs_shape}.")
    nspatial = len(lhs_shape) - 2
    strides = as_int_tuple(window_strides, "window_strides")
    ones = (1,) * max(nspatial, 0)
    lhs_dil = ones if lhs_dilation is None else as_int_tuple(lhs_dilation, "lhs_dilation")
    rhs_dil = ones if rhs_dilation is None else as_int_tuple(rhs_dilation, "rhs_dilation")
    if isinstance(padding, str):
        if any(d != 1 for d in lhs_dil):
            raise ValueError(
                "String padding is not implemented for transposed convolution using this op "
                f"(lhs_dilation={lhs_dil}). Please either exactly specify the required padding "
                "or use conv_transpose.")
        if len(strides) != nspatial or len(rhs_dil) != nspatial:
            raise ValueError(f"conv_general_dilated window and window_strides must have the same "
                             f"number of dimensions, but got {nspatial} and {len(strides)} "
                             f"(rhs_dilation={rhs_dil}).")
        kernel = _dilate([rhs_shape[d] for d in dnums.rhs_spec[2:]], rhs_dil)
        padding = tuple(padtype_to_pads([lhs_shape[d] for d in dnums.lhs_spec[2:]], kernel,
                                        strides, padding))
    else:
        padding = _explicit_padding(padding)
    if out_sharding is not None:
        out_sharding = out_sharding_param(out_sharding, len(lhs_shape), "conv_general_dilated")
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=strides, padding=padding, lhs_dilation=lhs_dil,
        rhs_dilation=rhs_dil, dimension_numbers=dnums,
        feature_group_count=_group_count(feature_group_count, "feature_group_count"),
        batch_group_count=_group_count(batch_group_count, "batch_group_count"),
        precision=canonicalize_precision(precision),
        preferred_element_type=canonical_preferred_element_type(preferred_element_type),
        out_sharding=out_sharding)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """Convolution in the default ('NCHW', 'OIHW', 'NCHW') layout with padding 'SAME' or
    'VALID' (or explicit pairs)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """Convolution in the default layout with explicit padding and lhs/rhs dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


_TRANSPOSE_LAYOUTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                      4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}


def _transpose_padding(k: int, s: int, padding) -> tuple:
    """(lo, hi) of the fractionally strided convolution whose forward convolution (kernel
    ``k``, stride ``s``) has ``padding`` ('SAME', 'VALID' or a (lo, hi) pair)."""
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        lo = k - 1
    elif isinstance(padding, tuple):
        lo, hi = (k - p - 1 for p in padding)
        total = lo + hi
    else:
        raise ValueError(f"conv_transpose: invalid padding mode {padding!r}: expected 'SAME', "
                         "'VALID' or (low, high) pairs.")
    return lo, total - lo


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """The output shape of ``conv_transpose`` (without rhs dilation) for these shapes, strides,
    padding ('SAME', 'VALID' or (low, high) pairs, summed) and string dimension numbers."""
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    lhs_t = [lhs_shape[i] if type(lhs_shape[i]) is DimExpr else int(lhs_shape[i])
             for i in lhs_perm]
    rhs_t = [rhs_shape[i] if type(rhs_shape[i]) is DimExpr else int(rhs_shape[i])
             for i in rhs_perm]
    if isinstance(padding, str):
        pads = [sum(_transpose_padding(k, s, padding)) for k, s in zip(rhs_t[2:], window_strides)]
    else:
        pads = [int(sum(p)) for p in padding]
    space = [(i - 1) * s - k + 2 + p
             for i, k, s, p in zip(lhs_t[2:], rhs_t[2:], window_strides, pads)]
    out_t = [lhs_t[0], rhs_t[0]] + space
    return tuple(out_t[j] for j in np.argsort(out_perm))


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False):
    """The fractionally strided ("transposed") convolution: the lhs is dilated by ``strides``.

    'SAME'/'VALID' name the padding of the forward convolution this one undoes; explicit
    pairs are the transposed convolution's own padding unless ``use_consistent_padding``
    (then they too are the forward padding, as in PyTorch). ``transpose_kernel`` reverses
    the kernel's spatial dimensions and swaps its in/out features (the gradient of a
    forward convolution with this kernel, as Keras' Conv2DTranspose). The default layout
    is channels-last (('NHWC', 'HWIO', 'NHWC') and analogues).
    """
    lhs_shape, rhs_shape = get_aval(lhs).shape, get_aval(rhs).shape
    ndim = len(lhs_shape)
    if ndim != len(rhs_shape) or ndim < 2:
        raise ValueError("conv_transpose needs lhs and rhs of equal rank, at least 2; got "
                         f"shapes {lhs_shape} and {rhs_shape}.")
    if dimension_numbers is None:
        if ndim not in _TRANSPOSE_LAYOUTS:
            raise ValueError(f"No 4+ dimensional dimension_number defaults: conv_transpose of "
                             f"rank-{ndim} operands needs explicit dimension_numbers.")
        dimension_numbers = _TRANSPOSE_LAYOUTS[ndim]
    dnums = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    strides = as_int_tuple(strides, "strides")
    rhs_dil = (1,) * (ndim - 2) if rhs_dilation is None else as_int_tuple(rhs_dilation,
                                                                          "rhs_dilation")
    if use_consistent_padding or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        kernel = _dilate([rhs_shape[d] for d in dnums.rhs_spec[2:]], rhs_dil)
        per_dim = [padding] * len(strides) if isinstance(padding, str) else \
            [tuple(p) for p in padding]
        padding = tuple(_transpose_padding(k, s, p) for k, s, p in zip(kernel, strides, per_dim))
    if transpose_kernel:
        rhs = _shapes.rev(rhs, tuple(dnums.rhs_spec[2:]))
        perm = list(range(ndim))
        perm[dnums.rhs_spec[0]], perm[dnums.rhs_spec[1]] = dnums.rhs_spec[1], dnums.rhs_spec[0]
        rhs = _shapes.transpose(rhs, tuple(perm))
    return conv_general_dilated(lhs, rhs, (1,) * (ndim - 2), padding, strides, rhs_dil, dnums,
                                precision=precision,
                                preferred_element_type=preferred_element_type)
