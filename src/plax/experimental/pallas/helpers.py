"""pl's helpers for kernel bodies: loops, scoped buffers, uninitialised values, printing,
checks and small integer utilities; and ``lower_as_mlir``."""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from plax import lax, tree_util
from plax import numpy as jnp
from plax._src import config
from plax.core import dtypes
from plax.api.jit import jit
from plax.core.refs import Slice
from plax.core.shape_dtype_struct import ShapeDtypeStruct
from plax.core.trace import Tracer
from plax.debug import print as _debug_print
from plax.experimental.pallas.core import MemoryRef, MemorySpace
from plax.export import export
from plax.higher_order.loops import fori_loop
from plax.core.jaxpr import callee_of, eval_jaxpr
from plax.core.refs import RefSelector, ref_type_aval_mappings
from plax.first_order.state import TransformedRef
from plax.core.staging import trace_to_jaxpr
from plax.higher_order.pallas_call import scratch_value, uninitialized_value
from plax.higher_order.run_state import run_state
from plax.pallas.semaphores import as_semaphores, is_semaphore_dtype
from plax.interpreters.checkify import debug_check as _checkify_debug_check
from plax.ref import new_ref
from plax.ref import swap as ref_swap

__all__ = ["loop", "empty", "empty_like", "empty_ref_like", "run_scoped", "with_scoped",
           "debug_print", "debug_check", "enable_debug_checks", "enable_poison_buffers",
           "align_to", "select_ref",
           "strides_from_shape", "broadcast_to", "reciprocal", "lower_as_mlir", "load", "swap",
           "store"]

enable_debug_checks = config.jax_pallas_enable_debug_checks
enable_poison_buffers = config.jax_pallas_poison_buffers


def _cdiv(a, b):
    if isinstance(a, (int, np.integer)) and isinstance(b, (int, np.integer)):
        return -(-int(a) // int(b))
    return (a + b - 1) // b


def loop(lower, upper, *, init_carry=None, step=1, unroll=None):
    """Decorator: calls the function (of the index, and of the carry when ``init_carry`` is
    given) for ``lower, lower + step, ...`` below ``upper``, as a ``fori_loop``; returns the
    final carry (None without one)."""
    static = not any(isinstance(v, Tracer) for v in (lower, upper, step))
    if static:
        lower, upper, step, zero = int(lower), int(upper), int(step), 0
    else:
        dtype = jnp.result_type(lower, upper, step)
        lower, upper, step = (lax.convert_element_type(v, dtype) for v in (lower, upper, step))
        zero = jnp.array(0, dtype=dtype)

    def decorate(body):
        if init_carry is None:
            def step_fn(i, carry):
                body(lower + i * step)
                return carry
        else:
            def step_fn(i, carry):
                return body(lower + i * step, carry)
        kwargs = {} if unroll is None else {"unroll": unroll}
        return fori_loop(zero, _cdiv(upper - lower, step), step_fn, init_carry, **kwargs)
    return decorate


def empty(shape, dtype, *, out_sharding=None):
    """An array of ``shape`` and ``dtype`` whose values are unspecified (``lax.empty``)."""
    return lax.empty(shape, dtype, out_sharding=out_sharding)


def empty_like(x):
    """A pytree shaped as ``x`` (leaves with ``shape`` and ``dtype``) of unspecified values."""
    return tree_util.tree_map(lambda leaf: empty(leaf.shape, leaf.dtype), x)


def empty_ref_like(x):
    """A new reference shaped as ``x`` (a ShapeDtypeStruct: in memory space ANY, or a
    ``MemoryRef`` such as ``pltpu.SMEM(shape, dtype)``: in its memory space) holding
    unspecified values (a semaphore type: semaphores at zero)."""
    if isinstance(x, MemoryRef):
        space = x.memory_space
    elif isinstance(x, ShapeDtypeStruct):
        space = MemorySpace.ANY
    else:
        raise ValueError(f"empty_ref_like does not support {type(x)}")
    if is_semaphore_dtype(x.dtype):
        return new_ref(as_semaphores(empty(x.shape, np.int32), x.dtype), memory_space=space)
    return new_ref(empty_like(x), memory_space=space)


class _Scoped:
    """A scoped buffer's reference type and initial value (what ``run_state`` allocates)."""

    def __init__(self, t):
        aval = t.get_ref_aval() if hasattr(t, "get_ref_aval") else None
        inner = getattr(aval, "inner_aval", None)
        if inner is None or not hasattr(inner, "shape"):
            raise TypeError(f"run_scoped: a scoped buffer must describe an array in a memory "
                            f"space (such as pltpu.VMEM(shape, dtype)), got {t!r}.")
        self.aval = aval
        self.value = (scratch_value(inner.shape, inner.dtype) if dtypes.is_extended(inner.dtype)
                      else lax.empty(inner.shape, inner.dtype))


ref_type_aval_mappings[_Scoped] = lambda s: (s.aval, s.value)


def run_scoped(f: Callable[..., Any], *types: Any, collective_axes=(), **kw_types: Any) -> Any:
    """Calls ``f`` with fresh references allocated for ``types`` (positional) and
    ``kw_types`` (keyword), which live only during the call; returns ``f``'s result.

    It stages a ``run_state`` whose references are the buffers (uninitialised; semaphores at
    0) and one more per leaf of ``f``'s result, which carry it out: on a TPU, one
    ``tpu.region`` allocating them, as JAX lowers its ``run_scoped``."""
    if collective_axes:
        raise NotImplementedError(
            f"run_scoped: collective_axes={collective_axes!r} (buffers shared across the cores "
            "of a mesh) are not supported in plax.")
    is_type = lambda t: hasattr(t, "get_ref_aval")  # noqa: E731
    flat, tree = tree_util.tree_flatten((types, kw_types), is_leaf=is_type)
    scoped = [_Scoped(t) for t in flat]
    out_tree = []

    def call(*refs):
        args, kwargs = tree_util.tree_unflatten(tree, list(refs))
        leaves, treedef = tree_util.tree_flatten(f(*args, **kwargs))
        out_tree.append(treedef)
        return leaves
    jaxpr, consts = trace_to_jaxpr(call, [s.aval for s in scoped],
                                   description="run_scoped")
    body_jaxpr = callee_of(jaxpr).jaxpr
    results = [jnp.zeros(v.aval.shape, v.aval.dtype) for v in body_jaxpr.outvars]

    def body(refs):
        outs = eval_jaxpr(body_jaxpr, (), *consts, *refs[:len(scoped)])
        for ref, value in zip(refs[len(scoped):], outs):
            ref_swap(ref, (), value)
    finals = run_state(body)(scoped + results)
    return tree_util.tree_unflatten(out_tree[0], finals[len(scoped):])


def select_ref(idx, *refs):
    """The reference of ``refs`` (references or views, all of one type) that the run-time
    scalar ``idx`` picks: an operand of a DMA (``pltpu.async_copy``) only; views of it
    (``.at``, ``.reshape``) apply to the one picked."""
    if len(refs) <= 1:
        raise ValueError("At least two refs are required for pl.select_ref.")
    view = TransformedRef(tuple(refs), (RefSelector(idx),))
    view.aval  # (checks that the references have one type)
    return view


def with_scoped(*types: Any, collective_axes=(), **kw_types: Any):
    """Decorator: the function runs with fresh references for ``types`` and ``kw_types``
    passed after its own arguments (``run_scoped``)."""
    def decorate(f):
        def inner(*args):
            return run_scoped(functools.partial(f, *args), *types,
                              collective_axes=collective_axes, **kw_types)
        return inner
    return decorate


def debug_print(fmt: str, *args) -> None:
    """Prints ``fmt`` formatted with ``args`` from inside a kernel (in interpret mode, as
    ``jax.debug.print``)."""
    _debug_print(fmt, *args, skip_format_check=True)


def debug_check(condition, message) -> None:
    """Checks ``condition`` when ``enable_debug_checks`` is set (under checkify); otherwise
    does nothing."""
    return _checkify_debug_check(condition, message)


def align_to(a, alignment):
    """``a`` rounded up to a multiple of ``alignment``."""
    return _cdiv(a, alignment) * alignment


def strides_from_shape(shape: tuple) -> tuple:
    """The row-major strides (in elements) of an array of ``shape``."""
    strides, size = [], 1
    for d in reversed(tuple(shape)):
        strides.append(size)
        size *= int(d)
    return tuple(reversed(strides))


def broadcast_to(a, shape: tuple):
    """``a`` broadcast to ``shape`` (inside a kernel)."""
    return jnp.broadcast_to(a, tuple(shape))


def reciprocal(x, *, approx: bool = False, full_range: bool = True):
    """``1 / x`` elementwise (``approx`` allows the TPU's approximate reciprocal; interpret
    mode computes it exactly)."""
    del approx, full_range
    return lax.div(lax.full_like(x, 1), x)


def lower_as_mlir(f, *args, dynamic_shapes=False, device=None, static_argnames=(),
                  platforms=None, **kwargs) -> str:
    """The MLIR module of ``jit(f)`` exported for ``platforms`` (default: TPU), as text. It
    carries no stability guarantee (unlike ``jax.export``'s serialisation)."""
    if dynamic_shapes:
        raise NotImplementedError("lower_as_mlir(dynamic_shapes=True): Pallas kernels with "
                                  "symbolic grid sizes are not supported in plax.")
    fun = jit(f, device=device, static_argnames=static_argnames)
    exported = export(fun, platforms=list(platforms or ["tpu"]))(*args, **kwargs)
    return exported.mlir_module()


# --- masked reads and writes (jax._src.pallas.primitives' load, swap and store) -------------
def _index_tuple(ref, idx) -> tuple:
    idx = () if idx is None else idx
    idx = idx if isinstance(idx, tuple) else (idx,)
    if any(i is Ellipsis for i in idx):
        k = idx.index(Ellipsis)
        idx = idx[:k] + (slice(None),) * (ref.ndim - len(idx) + 1) + idx[k + 1:]
    return idx + (slice(None),) * (ref.ndim - len(idx))


def _windows(ref, idx):
    """Per dimension (start, size, is_scalar) when ``idx`` is made of ints, scalars,
    ``pl.ds`` slices and unit-stride Python slices; None otherwise (array indices)."""
    out = []
    for i, d in zip(_index_tuple(ref, idx), ref.shape):
        if isinstance(i, Slice):
            if i.stride != 1:
                return None
            out.append((i.start, i.size, False))
        elif isinstance(i, slice):
            start, stop, step = i.indices(d)
            if step != 1:
                return None
            out.append((start, max(stop - start, 0), False))
        elif np.ndim(i) == 0:
            out.append((i, 1, True))
        else:
            return None
    return out


def _masked_window(ref, idx, mask, update):
    """The masked elements of ``ref[idx]`` (starts may run past the end: what lies beyond
    reads as the uninitialised value and is never written), and ``ref`` written with
    ``update(old window) -> new window`` when given. Returns the old window."""
    windows = _windows(ref, idx)
    if windows is None:  # array indices: gathered, in bounds
        old = ref[idx]
        if update is not None:
            ref[idx] = update(old)
        return old
    full = ref[...]
    pad = uninitialized_value(full.dtype)
    padded = lax.pad(full, pad, [(0, size, 0) for _, size, _ in windows])
    starts = [lax.convert_element_type(s, np.int32) for s, _, _ in windows]
    sizes = [size for _, size, _ in windows]
    old = lax.dynamic_slice(padded, starts, sizes)
    scalar_dims = tuple(k for k, (_, _, scalar) in enumerate(windows) if scalar)
    if update is not None:
        new = update(lax.squeeze(old, scalar_dims))
        new = lax.expand_dims(new, scalar_dims) if scalar_dims else new
        padded = lax.dynamic_update_slice(padded, new.astype(full.dtype), starts)
        ref[...] = lax.slice(padded, (0,) * full.ndim, full.shape)
    return lax.squeeze(old, scalar_dims)


def load(x_ref_or_view, idx, *, mask=None, other=None, cache_modifier=None,
         eviction_policy=None, volatile=False):
    """``x_ref_or_view[idx]``; with ``mask``, only the elements where it holds are read (the
    others are ``other``, or unspecified), and those may lie past the end of the ref."""
    del cache_modifier, eviction_policy, volatile
    if mask is None:
        return x_ref_or_view[idx]
    value = _masked_window(x_ref_or_view, idx, mask, None)
    return value if other is None else jnp.where(mask, value, other).astype(value.dtype)


def swap(x_ref_or_view, idx, val, *, mask=None, eviction_policy=None):
    """Writes ``val`` at ``x_ref_or_view[idx]`` and returns what was there; with ``mask``, only
    where it holds (elsewhere the result is ``val``)."""
    del eviction_policy
    if mask is None:
        return ref_swap(x_ref_or_view, _index_tuple(x_ref_or_view, idx), val)
    old = _masked_window(x_ref_or_view, idx, mask,
                         lambda window: jnp.where(mask, val, window))
    return jnp.where(mask, old, val).astype(old.dtype)


def store(x_ref_or_view, idx, val, *, mask=None, eviction_policy=None) -> None:
    """Writes ``val`` at ``x_ref_or_view[idx]`` (where ``mask`` holds, when given)."""
    swap(x_ref_or_view, idx, val, mask=mask, eviction_policy=eviction_policy)
