"""The user-facing entry points: transformations, staging helpers, devices and data."""
from __future__ import annotations

import functools
import inspect

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core.avals import ShapedArray, abstractify
from plax.core.jaxpr import ClosedJaxpr
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import Tracer, extend_axis_env, get_aval
from plax.runtime import dispatch, xla
from plax.runtime.array import Array, _live


# --- staging -----------------------------------------------------------------------------
def _fun_name(fun) -> str:
    return getattr(fun, "__name__", None) or type(fun).__name__


def _check_static_argnums(static_argnums, nargs: int, fname: str) -> tuple:
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    out = []
    for i in static_argnums:
        j = i + nargs if i < 0 else i
        if not 0 <= j < nargs:
            raise ValueError(f"static_argnums {i} is out of range for {fname}, which was "
                             f"called with {nargs} positional arguments.")
        out.append(j)
    return tuple(sorted(set(out)))


def flat_arg_names(fun, args, kwargs, static=()) -> list[str]:
    """Readable names (``x``, ``params['w']``) of the leaves of the dynamic arguments."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_pos = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
    names = []
    for i, a in enumerate(args):
        if i in static:
            continue
        base = positional[i] if i < len(positional) else (
            f"{var_pos}[{i - len(positional)}]" if var_pos else f"args[{i}]")
        for path, _ in tree_util.tree_flatten_with_path(a)[0]:
            names.append(base + tree_util.keystr(path))
    for k in sorted(kwargs):
        for path, _ in tree_util.tree_flatten_with_path(kwargs[k])[0]:
            names.append(k + tree_util.keystr(path))
    return names


def _avals_of(leaves, where: str) -> list:
    avals = []
    for i, x in enumerate(leaves):
        try:
            avals.append(get_aval(x) if isinstance(x, Tracer) else _shape_dtype_aval(x))
        except TypeError as e:
            raise TypeError(f"Argument {where} leaf {i} of type {type(x).__name__} is not a valid "
                            f"plax type: {e}") from None
    return avals


def _shape_dtype_aval(x) -> ShapedArray:
    if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (np.ndarray, np.generic, Array)):
        return ShapedArray(x.shape, dtypes.canonicalize_dtype(x.dtype), getattr(x, "weak_type", False))
    return abstractify(x)


def make_jaxpr(fun, static_argnums=(), axis_env=None, return_shape=False):
    """A function returning the ClosedJaxpr of ``fun`` traced on the given arguments.

    Arguments may be arrays, scalars or anything with ``shape`` and ``dtype``
    (such as ``ShapeDtypeStruct``). ``axis_env`` is a sequence of ``(name, size)``
    pairs naming axes that collectives in ``fun`` may refer to. With ``return_shape=True`` the function
    also returns the output shapes as a pytree of ShapeDtypeStruct-like values.
    """
    axis_pairs = tuple(tuple(p) for p in (axis_env or ()))
    fname = _fun_name(fun)

    @functools.wraps(fun)
    def make_jaxpr_f(*args, **kwargs):
        static = _check_static_argnums(static_argnums, len(args), fname)
        dyn_args = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = tree_util.tree_flatten((dyn_args, kwargs))
        avals = _avals_of(leaves, f"of {fname}")
        out_tree_box = []

        def flat_fun(*flat):
            dyn, kw = tree_util.tree_unflatten(in_tree, list(flat))
            it = iter(dyn)
            full = [args[i] if i in static else next(it) for i in range(len(args))]
            out = fun(*full, **kw)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            out_tree_box.append(out_tree)
            return out_leaves

        names = flat_arg_names(fun, args, kwargs, static)
        with extend_axis_env(axis_pairs):
            jaxpr, consts = trace_to_jaxpr(flat_fun, avals, description=fname,
                                           arg_names=names if len(names) == len(avals) else None)
        closed = ClosedJaxpr(jaxpr, consts)
        if return_shape:
            shapes = [ShapeDtypeStruct(v.aval.shape, v.aval.dtype, weak_type=v.aval.weak_type)
                      for v in jaxpr.outvars]
            return closed, tree_util.tree_unflatten(out_tree_box[0], shapes)
        return closed

    make_jaxpr_f.__name__ = f"make_jaxpr({fname})"
    return make_jaxpr_f


def typeof(x) -> ShapedArray:
    """The abstract value (shape, dtype, weak type) of ``x``."""
    return get_aval(x)


# --- devices ----------------------------------------------------------------------------
def devices(backend=None) -> list:
    """All devices of ``backend`` (the default platform when None)."""
    return list(xla.get_backend(backend).devices())


def local_devices(process_index: int | None = None, backend=None) -> list:
    """The devices attached to process ``process_index`` (this one when None)."""
    client = xla.get_backend(backend)
    pid = client.process_index() if process_index is None else process_index
    return [d for d in client.devices() if d.process_index == pid]


def device_count(backend=None) -> int:
    return len(xla.get_backend(backend).devices())


def local_device_count(backend=None) -> int:
    return len(xla.get_backend(backend).local_devices())


def process_index(backend=None) -> int:
    return xla.get_backend(backend).process_index()


def process_count(backend=None) -> int:
    return max(d.process_index for d in xla.get_backend(backend).devices()) + 1


def default_backend() -> str:
    return xla.default_platform()


# --- data -------------------------------------------------------------------------------
def _resolve_device(device):
    if device is None:
        return None
    if isinstance(device, xla.Device):
        return device
    devs = getattr(device, "device_set", None)  # a single-device Sharding
    if devs is not None:
        if len(devs) != 1:
            raise ValueError("device_put with a multi-device sharding arrives with the sharding "
                             "issue; pass a single device.")
        return next(iter(devs))
    raise TypeError(f"device_put's device must be a Device or a Sharding, got {type(device).__name__}.")


def device_put(x, device=None, *, src=None, donate=False, may_alias=None):
    """Put the leaves of ``x`` on ``device``; with a device given, the result is committed."""
    dev = _resolve_device(device)

    def put_leaf(leaf):
        if isinstance(leaf, Tracer):
            return leaf
        if isinstance(leaf, Array):
            if dev is None:
                return leaf
            out = dispatch.to_device(leaf, dev, committed=True)
            if donate and out is not leaf:
                leaf.delete()
            return out
        return dispatch.array_from_host(leaf, device=dev, committed=dev is not None)

    return tree_util.tree_map(put_leaf, x)


def device_get(x):
    """Fetch the leaves of ``x`` to host NumPy arrays (other leaves pass through)."""
    leaves = tree_util.tree_leaves(x)
    for leaf in leaves:
        if isinstance(leaf, Array):
            leaf.copy_to_host_async()

    def get_leaf(leaf):
        if isinstance(leaf, Array):
            return np.asarray(leaf)
        if isinstance(leaf, Tracer):
            raise TypeError("device_get received a traced value; it only works on concrete arrays.")
        return leaf

    return tree_util.tree_map(get_leaf, x)


def block_until_ready(x):
    """Wait until every Array leaf of ``x`` is computed; returns ``x``."""
    bufs = [leaf._buf for leaf in tree_util.tree_leaves(x) if isinstance(leaf, Array)]
    if bufs:
        xla.block_until_ready(bufs)
    return x


def live_arrays(platform=None) -> list:
    """Every Array that is alive (not deleted), optionally only on ``platform``."""
    out = [a for a in list(_live.values()) if not a.is_deleted()]
    if platform is not None:
        out = [a for a in out if next(iter(a.devices())).platform == platform]
    return out




class ShapeDtypeStruct:
    """A stand-in for an array by shape and dtype, for eval_shape, lowering and make_jaxpr."""

    __slots__ = ("shape", "dtype", "sharding", "weak_type")

    def __init__(self, shape, dtype, sharding=None, weak_type: bool = False):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtypes.canonicalize_dtype(dtypes.check_user_dtype(dtype))
        self.sharding = sharding
        self.weak_type = bool(weak_type)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype and self.sharding == other.sharding
                and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.sharding, self.weak_type))

    def __repr__(self):
        extra = (f", sharding={self.sharding}" if self.sharding is not None else "") + (
            ", weak_type=True" if self.weak_type else "")
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{extra})"
