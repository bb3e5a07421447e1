"""Host callbacks: Python functions called from inside compiled programs.

Three primitives, one mechanism:

- ``pure_callback`` (no effect: XLA may drop or repeat it) returns arrays of declared types;
- ``io_callback`` (the IO effect, ordered or not) may read and write outside state;
- ``debug_callback`` (the Debug effect, ordered or not) returns nothing; ``debug.print``
  is one whose callback formats and prints.

Eagerly each calls its Python function right away. Under jit each lowers to a
``stablehlo.custom_call @xla_ffi_python_cpu_callback`` (``..._gpu_callback`` on GPUs)
whose ``index`` names a Python callable handed to XLA at compile time
(``ModuleBuilder.add_host_callback``). On TPUs, as in JAX, the operands are sent to the host
and the results received from it instead (``stablehlo.send``/``recv`` host transfers, a
``HostTransferCallback`` that the runtime makes jaxlib's host callback). The callable gets NumPy arrays and hands the user's
function plax Arrays (as JAX's callbacks get jax.Arrays); it checks what the
user's function returned against the declared types (the runtime does not: a wrong
dtype would be read as garbage), and records an exception it raises so that the
runtime can raise it in the caller's thread (``runtime/callback_errors.raise_callback_failure``).

Ordered callbacks take the function's current token and give the next
(``ctx.fn.token``). In an SPMD program a callback runs on one device (the first, or the
device of ``sharding=``); inside shard_map, once per device on its own block.

The primitives hold no jaxprs, but they sit with the higher-order ones: vmap of a
sequential callback is a scan over the batch members.
"""
from __future__ import annotations

import logging

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray, physical_aval
from plax.core.effects import effect_rules, io_effect, no_effects, ordered_io_effect
from plax.core.errors import record_callback_failure
from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, batch_rules, discharge_rules, impl_rules,
                             jvp_rules, not_mapped, register_lowering, transpose_rules)
from plax.higher_order.scan import scan
from plax.first_order.batch_util import moveaxis
from plax.first_order.shapes import broadcast
from plax.lowering.stablehlo import HostTransferCallback, abstract_token, tensor_type
from plax.runtime.callback_errors import callback_error
from plax.runtime.xla import JaxRuntimeError

__all__ = ["pure_callback_p", "io_callback_p", "debug_callback_p", "VMAP_METHODS",
           "check_results", "batch_by_method"]

pure_callback_p = Primitive("pure_callback", multiple_results=True)
io_callback_p = Primitive("io_callback", multiple_results=True)
debug_callback_p = Primitive("debug_callback", multiple_results=True)

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized")

_logger = logging.getLogger("plax.callbacks")


# --- checking what a callback returned -----------------------------------------------
def check_results(values, result_avals, what: str) -> tuple:
    """``values`` (what a callback returned, flat) as NumPy arrays of ``result_avals``'
    shapes and dtypes; a clear error naming both when they differ."""
    values = tuple(values)
    if len(values) != len(result_avals):
        raise JaxRuntimeError(
            f"Mismatched number of outputs from callback {what}: it returned {len(values)} "
            f"values where result_shape_dtypes declares {len(result_avals)}.")
    out = []
    for i, (v, aval) in enumerate(zip(values, result_avals)):
        arr = np.asarray(v)
        canonical = dtypes.canonicalize_dtype(arr.dtype) if arr.dtype != object else arr.dtype
        if canonical != arr.dtype:
            arr = arr.astype(canonical)
        if arr.shape != tuple(aval.shape):
            raise JaxRuntimeError(
                f"Incorrect output shape for return value #{i} of callback {what}: "
                f"Expected: {tuple(aval.shape)}, Actual: {arr.shape}. The callback must "
                "return arrays of the shapes declared in result_shape_dtypes.")
        if arr.dtype != aval.dtype:
            raise JaxRuntimeError(
                f"Incorrect output dtype for return value #{i} of callback {what}: "
                f"Expected: {aval.dtype}, Actual: {arr.dtype}. Cast the result (e.g. "
                f"np.asarray(out, np.{aval.dtype.name})) or declare its dtype.")
        # (not np.ascontiguousarray: it turns a 0-d array into a 1-d one)
        out.append(arr if arr.flags.c_contiguous else arr.copy(order="C"))
    return tuple(out)


def _callback_name(callback) -> str:
    fn = getattr(callback, "fn", callback)
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _host_values(args, avals=None) -> list:
    """What callbacks receive: their arguments as plax Arrays on the host's device (as JAX's
    callbacks get jax.Arrays), each a copy the callback may keep (array_from_host copies
    before it returns, so views of XLA's buffers need no copy of their own). ``avals``: the
    arguments' types when ``args`` are the physical arrays XLA hands over (keys come back
    keys); without them, arrays of an extended dtype are passed as they are."""
    from plax.runtime.array import make_array
    from plax.runtime.dispatch import array_from_host
    out = []
    for i, a in enumerate(args):
        aval = avals[i] if avals is not None else getattr(a, "aval", None)
        if aval is None or not dtypes.is_extended(aval.dtype):
            out.append(array_from_host(np.asarray(a)))
        elif avals is None:
            out.append(a)  # (an array of keys: immutable, no copy needed)
        else:
            out.append(make_array(array_from_host(np.asarray(a)), aval, False))
    return out


def _to_arrays(values, result_avals) -> list:
    from plax.runtime.dispatch import array_from_host
    return [array_from_host(v, dtype=a.dtype) for v, a in zip(values, result_avals)]


# --- rules shared by the three ----------------------------------------------------------
def _abstract_eval(*avals, result_avals=(), **_):
    return list(result_avals)


def _run_now(prim, args, callback, result_avals=()):
    try:
        out = callback(*_host_values(args))
    except Exception as e:  # as under jit (and as JAX raises it eagerly too)
        raise callback_error(e) from e
    if prim is debug_callback_p:
        return []
    return _to_arrays(check_results(out, result_avals, _callback_name(callback)), result_avals)


impl_rules[pure_callback_p] = lambda *args, callback, result_avals, **_: \
    _run_now(pure_callback_p, args, callback, result_avals)
impl_rules[io_callback_p] = lambda *args, callback, result_avals, **_: \
    _run_now(io_callback_p, args, callback, result_avals)
impl_rules[debug_callback_p] = lambda *args, callback, **_: \
    _run_now(debug_callback_p, args, callback)

for _p in (pure_callback_p, io_callback_p, debug_callback_p):
    abstract_eval_rules[_p] = _abstract_eval

effect_rules[debug_callback_p] = lambda params: frozenset({params["effect"]})
# a reference printed (jax.debug.print("{}", x_ref) in a kernel) prints the value it holds
discharge_rules[debug_callback_p] = lambda which, in_avals, out_avals, *args, **params: (
    [None] * len(args), debug_callback_p.bind(*args, **params))
effect_rules[io_callback_p] = lambda params: frozenset(
    {ordered_io_effect if params["ordered"] else io_effect})
effect_rules[pure_callback_p] = lambda params: no_effects


# --- differentiation ---------------------------------------------------------------------
def _pure_jvp(primals, tangents, **params):
    raise ValueError("Pure callbacks do not support JVP. Please use `jax.custom_jvp` to use "
                     "callbacks while taking gradients (plax.custom_jvp around the function "
                     "that calls plax.pure_callback).")


def _io_jvp(primals, tangents, **params):
    raise ValueError("IO callbacks do not support JVP: the derivative of a function with "
                     "outside effects is unknown. Wrap it in plax.custom_jvp or "
                     "plax.custom_vjp to give one.")


def _debug_jvp(primals, tangents, **params):
    # A debug callback sees the primal values, in the forward pass; it has no outputs.
    debug_callback_p.bind(*primals, **params)
    return [], []


def _no_transpose(what):
    def rule(cts, *args, **params):
        raise ValueError(f"{what} do not support transpose. Use plax.custom_vjp to give the "
                         "derivative of a function that calls them.")
    return rule


jvp_rules[pure_callback_p] = _pure_jvp
jvp_rules[io_callback_p] = _io_jvp
jvp_rules[debug_callback_p] = _debug_jvp
transpose_rules[pure_callback_p] = _no_transpose("Pure callbacks")
transpose_rules[io_callback_p] = _no_transpose("IO callbacks")
# A debug callback has no outputs: nothing flows back through it.
transpose_rules[debug_callback_p] = lambda cts, *args, **params: [None] * len(args)


# --- vmap ------------------------------------------------------------------------------------
def _batch_size(vals, dims) -> int:
    return next(v.shape[d] for v, d in zip(vals, dims) if d is not not_mapped)


def _sequential(prim, vals, dims, params, unroll: bool):
    """One call per batch member, in order (a scan over the members)."""
    batched = [d is not not_mapped for d in dims]
    xs = [moveaxis(v, d, 0) for v, d in zip(vals, dims) if d is not not_mapped]
    fixed = [v for v, b in zip(vals, batched) if not b]

    def step(carry, members):
        it_fixed, it_members = iter(fixed), iter(members)
        args = [next(it_members) if b else next(it_fixed) for b in batched]
        return carry, prim.bind(*args, **params)

    _, outs = scan(step, (), xs, unroll=bool(unroll))
    return list(outs), [0] * len(outs)


def batch_by_method(prim, vals, dims, params, result_avals, vmap_method):
    """vmap of a callback-like primitive (``params`` its other parameters) by its
    ``vmap_method``: a scan of calls (sequential), or one call given every argument with a
    leading dimension (expand_dims: 1 where unbatched; broadcast_all: the batch size) or
    only the batched ones (legacy_vectorized)."""
    params = dict(params, vmap_method=vmap_method)
    if vmap_method in ("sequential", "sequential_unrolled"):
        return _sequential(prim, vals, dims, dict(params, result_avals=result_avals),
                           vmap_method == "sequential_unrolled")
    if vmap_method not in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        raise NotImplementedError(
            f"vmap is only supported for the {prim.name} primitive when vmap_method is one "
            "of 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
            f"'legacy_vectorized'. Got vmap_method={vmap_method!r}: pass vmap_method= to "
            f"{prim.name} to say how a batch of inputs reaches the callback.")
    size = _batch_size(vals, dims)
    args = []
    for v, d in zip(vals, dims):
        if d is not not_mapped:
            args.append(moveaxis(v, d, 0))
        elif vmap_method == "legacy_vectorized":
            args.append(v)
        else:  # a leading dimension of 1 (expand_dims) or of the batch size (broadcast_all)
            args.append(broadcast(v, (size if vmap_method == "broadcast_all" else 1,)))
    batched_avals = tuple(ShapedArray((size, *a.shape), a.dtype) for a in result_avals)
    outs = prim.bind(*args, **dict(params, result_avals=batched_avals))
    return list(outs), [0] * len(outs)


def _pure_batch(axis, vals, dims, *, callback, result_avals, sharding, vmap_method):
    return batch_by_method(pure_callback_p, vals, dims,
                           dict(callback=callback, sharding=sharding), result_avals,
                           vmap_method)


def _io_batch(axis, vals, dims, *, callback, result_avals, sharding, ordered):
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback: the calls of the batch members "
                         "would have no order. Use ordered=False, or call it in a loop.")
    params = dict(callback=callback, result_avals=result_avals, sharding=sharding,
                  ordered=ordered)
    return _sequential(io_callback_p, vals, dims, params, False)


class PerMember:
    """A debug callback under vmap: called once with the whole batch, it calls the
    user's callback once per batch member, in order, each seeing that member's values."""

    __slots__ = ("callback", "dims", "size")

    def __init__(self, callback, dims, size: int):
        self.callback, self.dims, self.size = callback, tuple(dims), size

    def __call__(self, *arrays):
        for i in range(self.size):
            self.callback(*[a if d is not_mapped else a[(slice(None),) * d + (i,)]
                            for a, d in zip(arrays, self.dims)])
        return ()

    @property
    def fn(self):
        return getattr(self.callback, "fn", self.callback)

    def __repr__(self):
        return f"PerMember({self.callback!r}, dims={self.dims})"


def _debug_batch(axis, vals, dims, *, callback, **params):
    # One host call for the batch (members in order, inside it) rather than one per member.
    debug_callback_p.bind(*vals, callback=PerMember(callback, dims, _batch_size(vals, dims)),
                          **params)
    return [], []


batch_rules[pure_callback_p] = _pure_batch
batch_rules[io_callback_p] = _io_batch
batch_rules[debug_callback_p] = _debug_batch


# --- lowering --------------------------------------------------------------------------------
def _layout(aval) -> str:
    """Row-major layout (minor-to-major dimension numbers) of an operand or result."""
    if aval is abstract_token:
        return "dense<> : tensor<0xindex>"
    n = len(physical_aval(aval).shape)  # (an array of keys: with its words' dimension)
    if n == 0:
        return "dense<> : tensor<0xindex>"
    return f"dense<[{', '.join(str(d) for d in reversed(range(n)))}]> : tensor<{n}xindex>"


def _host_entry(callback, arg_avals, result_avals, with_token: bool, returns: bool,
                api: str):
    """The callable XLA calls: NumPy arrays (of ``arg_avals``' physical types) in, a tuple of
    checked arrays out (``returns``: False for debug callbacks, whose value is ignored). A
    failure is logged (with its traceback, as the user's program only sees it raised again
    once XLA's call returns) and recorded for the runtime to raise."""
    what = _callback_name(callback)

    def entry(*arrays):
        try:
            if with_token:
                token, arrays = arrays[0], arrays[1:]
            # (the arrays may be views of XLA's buffers, valid only during the call)
            out = callback(*_host_values(arrays, arg_avals))
            out = check_results(out, result_avals, what) if returns else ()
        except BaseException as e:
            if isinstance(e, Exception):
                _logger.exception("jax.%s failed", api)
            record_callback_failure(e)
            raise
        return (token, *out) if with_token else out

    return entry


def emit_host_callback(ctx, callback, operands, result_avals, *, ordered: bool,
                       side_effect: bool, sharding=None, returns: bool = True) -> list:
    """Emit a call of ``callback`` (flat NumPy arrays -> flat results) on ``operands``;
    returns the result values. ``ordered``: thread the function's token through it."""
    module = ctx.fn.module
    if ordered and ctx.fn.token is None:
        raise NotImplementedError("An ordered callback was lowered in a function that has "
                                  "no ordered-effect token (a plax bug).")
    api = "debug_callback" if not returns else "io_callback" if side_effect else "pure_callback"
    if ctx.platform == "tpu":
        return _emit_host_transfers(ctx, callback, operands, result_avals, ordered=ordered,
                                    returns=returns, where=_one_device(ctx, sharding), api=api)
    entry = _host_entry(callback, tuple(ctx.avals_in), tuple(result_avals), ordered, returns,
                        api)
    index = module.add_host_callback(entry)
    in_avals, out_avals = list(ctx.avals_in), list(result_avals)
    if ordered:
        operands = [ctx.fn.token, *operands]
        in_avals, out_avals = [abstract_token, *in_avals], [abstract_token, *out_avals]
    device = "gpu" if ctx.platform in ("cuda", "rocm") else "cpu"
    attrs = [f'call_target_name = "xla_ffi_python_{device}_callback"', 'backend_config = ""',
             f"mhlo.backend_config = {{index = {index} : ui64}}",
             f"operand_layouts = [{', '.join(_layout(a) for a in in_avals)}]",
             f"result_layouts = [{', '.join(_layout(a) for a in out_avals)}]"]
    if side_effect:
        attrs.append("has_side_effect = true")
    where = _one_device(ctx, sharding)
    if where is not None:
        symbol = module.maximal_mesh_symbol(where)
        entries = ", ".join([f"<@{symbol}, []>"] * max(len(out_avals), 1))
        attrs.append(f"sdy.sharding = #sdy.sharding_per_value<[{entries}]>")
    outs = ctx.op("stablehlo.custom_call", operands, in_avals, out_avals, attrs=", ".join(attrs))
    if ordered:
        ctx.fn.token, outs = outs[0], outs[1:]
    return outs


_RENDEZVOUS = "pjrt_rendezvous"  # the host-transfer handler PJRT's TPU client runs


def _emit_host_transfers(ctx, callback, operands, result_avals, *, ordered, returns, where,
                         api):
    """The callback as TPUs run one, as JAX lowers it there: each operand sent to the host
    (``stablehlo.send``), each result received from it (``stablehlo.recv``), in a chain of
    tokens. A TPU cannot receive an empty array, so empty results are constants here; a
    callback without operands sends a dummy, and one that must finish before the program
    goes on (ordered or debug) but has no result receives a dummy."""
    fn, module = ctx.fn, ctx.fn.module
    physical = [physical_aval(a) for a in ctx.avals_in]
    received = [physical_aval(a) for a in result_avals if 0 not in physical_aval(a).shape]
    entry = _host_entry(callback, tuple(ctx.avals_in), tuple(result_avals), False, returns,
                        api)
    dummy_in = not operands
    dummy_out = not received and (ordered or not returns)

    def on_host(*arrays):
        out = entry(*([] if dummy_in else arrays))
        kept = tuple(np.asarray(o) for o in out if 0 not in np.shape(o))
        return (np.zeros((), np.float32),) if dummy_out else kept

    token = fn.token if ordered else fn.emit("stablehlo.create_token", [], [],
                                             ["!stablehlo.token"])[0]
    if dummy_in:
        dummy = ShapedArray((1,), np.float32)
        operands, physical = [ctx.constant(np.zeros(1, np.float32), dummy)], [dummy]
    if dummy_out:
        received = [ShapedArray((), np.float32)]
    sends, recvs, values = [], [], []
    for x, aval in zip(operands, physical):
        channel = module.next_channel()
        token = _transfer(fn, "stablehlo.send", [x, token],
                          [tensor_type(aval), "!stablehlo.token"], ["!stablehlo.token"],
                          channel, 2, where)[0]
        sends.append(channel)
    for aval in received:
        channel = module.next_channel()
        value, token = _transfer(fn, "stablehlo.recv", [token], ["!stablehlo.token"],
                                 [tensor_type(aval), "!stablehlo.token"], channel, 3, where)
        values.append(value)
        recvs.append(channel)
    module.add_host_callback(HostTransferCallback(
        on_host, tuple((a.shape, a.dtype) for a in physical),
        tuple((a.shape, a.dtype) for a in received), tuple(sends), tuple(recvs)))
    if ordered:
        fn.token = token
    if dummy_out:
        return [ctx.constant(np.zeros(a.shape, a.dtype), a) for a in result_avals]
    got = iter(values)
    return [ctx.constant(np.zeros(a.shape, a.dtype), a) if 0 in physical_aval(a).shape
            else next(got) for a in result_avals]


def _transfer(fn, op, operands, operand_types, result_types, channel, kind, where):
    """One host transfer op (``kind``: 2 device to host, 3 host to device) on ``channel``."""
    saved = fn.frontend_attributes
    fn.frontend_attributes = tuple(saved) + (("_xla_host_transfer_handler_name", _RENDEZVOUS),
                                             ("_xla_host_transfer_rendezvous", str(channel)))
    attrs = ""
    if where is not None:
        symbol = fn.module.maximal_mesh_symbol(where)
        entries = ", ".join([f"<@{symbol}, []>"] * len(result_types))
        attrs = f"sdy.sharding = #sdy.sharding_per_value<[{entries}]>"
    try:
        return fn.emit(op, operands, operand_types, result_types, attrs=attrs,
                       props=f"channel_handle = #stablehlo.channel_handle<handle = {channel}, "
                             f"type = {kind}>, is_host_transfer = true")
    finally:
        fn.frontend_attributes = saved


def _one_device(ctx, sharding):
    """The program device index a callback in an SPMD program runs on (None: not SPMD, or
    inside shard_map, where it runs once per device)."""
    devices = ctx.fn.module.devices
    if devices is None or len(devices) <= 1 or ctx.manual_axes:
        return None
    if sharding is None:
        return 0
    device = next(iter(sharding.device_set))
    if device not in devices:
        raise ValueError(f"The callback's sharding places it on {device}, which does not run "
                         f"this program (its devices: {list(devices)}).")
    return list(devices).index(device)


def _pure_lowering(ctx, *args, callback, result_avals, sharding, vmap_method):
    return emit_host_callback(ctx, callback, args, result_avals, ordered=False,
                              side_effect=False, sharding=sharding)


def _io_lowering(ctx, *args, callback, result_avals, sharding, ordered):
    return emit_host_callback(ctx, callback, args, result_avals, ordered=ordered,
                              side_effect=True, sharding=sharding)


def _debug_lowering(ctx, *args, callback, effect, partitioned):
    if partitioned and ctx.fn.module.devices is not None and \
            len(ctx.fn.module.devices) > 1 and not ctx.manual_axes:
        raise NotImplementedError(
            "debug callbacks with partitioned=True in a jit over several devices are not "
            "supported by plax; call it inside shard_map to see each device's block, or use "
            "partitioned=False to see the whole array.")
    return emit_host_callback(ctx, callback, args, (), ordered=effect.ordered,
                              side_effect=True, returns=False)


register_lowering(pure_callback_p, _pure_lowering)
register_lowering(io_callback_p, _io_lowering)
register_lowering(debug_callback_p, _debug_lowering)
