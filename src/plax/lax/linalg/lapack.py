"""Calling solver kernels: jaxlib's CPU LAPACK kernels, and on NVIDIA GPUs the CUDA plugin's
cuSOLVER/cuBLAS ones, through the internal ``lapack_p`` primitive.

Each linear-algebra primitive lowers through ``lower_fun`` to a plax function that calls
``call(...)`` on CPU (one ``stablehlo.custom_call @lapack_<p><fn>_ffi``) or ``call_target(...)``
on CUDA (``@cusolver_<fn>_ffi``, one kernel for every dtype), and post-processes the
kernel's results with ordinary lax ops (NaN where the kernel reported failure, masks). So
``lapack_p`` only ever appears inside lowering rules, after every transformation has run:
it has no jvp or batch rule, by design.

The kernels' contract (learned from the kernels' FFI signatures and checked by the
round-trip tests): matrices are column-major with the batch dimensions major (XLA inserts
the layout copies), vectors are row-major, every leading dimension is a batch dimension,
and flags are ASCII codes as ``ui8`` attributes of ``mhlo.backend_config``. The cuSOLVER
kernels keep the same layouts; their flags are booleans (``lower``, ``full_matrices``) and
small ``ui8`` numbers (``algorithm``). Each primitive registers its CUDA rule next to its
CPU rule.
"""
from __future__ import annotations

import numpy as np

from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, register_lowering
from plax.core.symbolic_shapes import shape_is_symbolic
from plax.core.trace import get_aval
from plax.first_order import comparison as _cmp
from plax.first_order import shapes as _shapes
from plax.lowering import stablehlo
from plax.runtime import xla

__all__ = ["call", "call_target", "nan_unless_ok"]

_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
           np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}

lapack_p = Primitive("lapack_call", multiple_results=True)


def _layout(ndim: int, matrix: bool) -> str:
    """The minor-to-major layout of an operand or result: column-major matrices with the
    batch dimensions major, row-major everything else."""
    order = ([ndim - 2, ndim - 1] + list(range(ndim - 3, -1, -1)) if matrix and ndim >= 2
             else list(range(ndim - 1, -1, -1)))
    values = ", ".join(map(str, order))
    return f"dense<[{values}]> : tensor<{ndim}xindex>" if ndim else "dense<> : tensor<0xindex>"


def _abstract(*operands, target, results, **_):
    return [ShapedArray(shape, dtype) for shape, dtype, _ in results]


def _lowering(ctx, *operands, target, results, matrix_operands, config, aliases):
    if ctx.platform == "cpu":
        target = xla.lapack_target(target)  # (registers jaxlib's LAPACK kernels first)
    in_layouts = ", ".join(_layout(a.ndim, m) for a, m in zip(ctx.avals_in, matrix_operands))
    out_layouts = ", ".join(_layout(len(shape), m) for shape, _, m in results)
    props = (f'call_target_name = "{target}", api_version = 1 : i32, '
             f"operand_layouts = [{in_layouts}], result_layouts = [{out_layouts}]")
    if aliases:
        # A single result is not a tuple: its alias has no tuple index.
        index = (lambda out: "") if len(results) == 1 else str
        props += ", output_operand_aliases = [" + ", ".join(
            f"#stablehlo.output_operand_alias<output_tuple_indices = [{index(out)}], "
            f"operand_index = {i}, operand_tuple_indices = []>" for out, i in aliases) + "]"
    flags = ", ".join(f"{name} = {_attribute(value)}" for name, value in config)
    attrs = f"mhlo.backend_config = {{{flags}}}"
    operands, in_avals = list(operands), list(ctx.avals_in)
    if any(shape_is_symbolic(shape) for shape, _, _ in results):
        # Symbolic result sizes: the results' shapes follow as operands, which shape
        # refinement reads (then drops) once the sizes are known.
        first = len(operands)
        operands += [stablehlo.symbolic_shape_value(ctx, shape) for shape, _, _ in results]
        in_avals += [ShapedArray((len(shape),), np.int64) for shape, _, _ in results]
        props = props.replace("], result_layouts", ", ".join(
            [""] + ["dense<0> : tensor<1xindex>"] * len(results)) + "], result_layouts", 1)
        indices = ", ".join(str(first + i) for i in range(len(results)))
        attrs += f", indices_of_shape_operands = dense<[{indices}]> : tensor<{len(results)}xi64>"
    return ctx.op("stablehlo.custom_call", operands, operand_avals=in_avals, props=props,
                  attrs=attrs)


def _attribute(value) -> str:
    """A kernel attribute: a letter is a ``ui8`` flag (its ASCII code), a bool a boolean, a
    NumPy ``uint8`` a ``ui8`` number, an int an ``i32`` (gehrd's ``low``/``high``)."""
    if isinstance(value, str):
        return f"{ord(value)} : ui8"
    if isinstance(value, np.uint8):
        return f"{int(value)} : ui8"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{int(value)} : i32"


def _tpu_lowering(ctx, *operands, target, results, matrix_operands, config, aliases):
    """On TPUs the targets are XLA's own ("LuDecomposition", "Qr", ...), which its TPU
    compiler expands: no layouts, no aliasing; ``config`` may give the call's
    ``api_version`` and ``backend_config`` string, as JAX's TPU rules write them."""
    del matrix_operands, aliases
    settings = dict(config)
    props = f'call_target_name = "{target}"'
    if "backend_config" in settings:
        props += f', backend_config = "{settings["backend_config"]}"'
    props += f', api_version = {int(settings.get("api_version", 1))} : i32'
    return ctx.op("stablehlo.custom_call", list(operands), props=props)


abstract_eval_rules[lapack_p] = _abstract
register_lowering(lapack_p, _tpu_lowering, platform="tpu")
register_lowering(lapack_p, _lowering, platform="cpu")
register_lowering(lapack_p, _lowering, platform="cuda")


def call(fn: str, operands, results, *, matrix_operands=None, config=(), aliases=()):
    """The results of LAPACK kernel ``fn`` ("potrf", "getrf", ...) for the dtype of the first
    operand. ``results`` are (shape, dtype, is_matrix) triples; ``matrix_operands`` says
    which operands are matrices (default: all); ``config`` holds (name, value) pairs (a flag
    letter, a bool or an int); ``aliases`` (result index, operand index) pairs let a result
    reuse an operand's buffer."""
    dtype = np.dtype(get_aval(operands[0]).dtype)
    return call_target(f"lapack_{_PREFIX[dtype]}{fn}_ffi", operands, results,
                       matrix_operands=matrix_operands, config=config, aliases=aliases)


def call_target(target: str, operands, results, *, matrix_operands=None, config=(),
                aliases=()):
    """The results of the kernel named ``target`` (a LAPACK one, on CUDA the plugin's
    "cusolver_potrf_ffi", ..., on TPU XLA's "LuDecomposition", ...), with the arguments of
    ``call``."""
    if matrix_operands is None:
        matrix_operands = (True,) * len(operands)
    results = tuple((tuple(s), np.dtype(d), bool(m)) for s, d, m in results)
    return lapack_p.bind(*operands, target=target, results=results,
                         matrix_operands=tuple(matrix_operands), config=tuple(config),
                         aliases=tuple(aliases))


def nan_unless_ok(info, *values):
    """Each of ``values`` (whose leading dimensions are ``info``'s batch dimensions) with NaN
    wherever the kernel's ``info`` is not 0, as JAX reports a failed factorisation."""
    ok = _cmp.eq(info, np.zeros((), get_aval(info).dtype))
    nbatch = get_aval(info).ndim
    out = []
    for v in values:
        aval = get_aval(v)
        mask = _shapes.broadcast_in_dim(ok, aval.shape, tuple(range(nbatch)))
        nan = _shapes.full(aval.shape, np.nan, aval.dtype)
        out.append(_cmp.select_n(mask, nan, v))
    return out if len(out) != 1 else out[0]
