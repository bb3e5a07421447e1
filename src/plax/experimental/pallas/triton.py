"""plax.experimental.pallas.triton, as ``jax.experimental.pallas.triton``: Pallas's GPU
(Triton) extension.

plax has no GPU backend: kernels that use these names run in interpret mode
(``pallas_call(..., interpret=True)``), where loads, stores, atomics, ``dot`` and
``max_contiguous`` are ordinary reads, writes and ops on the block references; the
instructions only a GPU has (``elementwise_inline_asm``, ``approx_tanh``,
``debug_barrier``) fail there with JAX's error, and compiling with ``CompilerParams``
off interpret mode raises as JAX's does on a backend without a GPU.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.experimental.pallas import core as pallas_core
from plax.experimental.pallas import helpers
from plax.pallas.gpu import debug_barrier_p, elementwise_inline_asm_p

__all__ = ["CompilerParams", "approx_tanh", "atomic_add", "atomic_and", "atomic_cas",
           "atomic_max", "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor",
           "debug_barrier", "dot", "elementwise_inline_asm", "load", "max_contiguous",
           "store"]


@dataclasses.dataclass(frozen=True)
class CompilerParams(pallas_core.CompilerParams):
    """Triton compiler parameters (warps per program, software-pipelining stages)."""

    BACKEND = "triton"
    num_warps: int | None = None
    num_stages: int | None = None


def _index(idx):
    return ... if idx is None else idx


def load(ref, *, mask=None, other=None, cache_modifier: str | None = None,
         eviction_policy: str | None = None, volatile: bool = False):
    """``ref[...]``, or where ``mask`` is False ``other`` (unspecified when not given)."""
    return helpers.load(ref, ..., mask=mask, other=other, cache_modifier=cache_modifier,
                        eviction_policy=eviction_policy, volatile=volatile)


def store(ref, val, *, mask=None, eviction_policy: str | None = None) -> None:
    """``ref[...] = val``, only where ``mask`` holds."""
    helpers.store(ref, ..., val, mask=mask, eviction_policy=eviction_policy)


def _where(mask, a, b):
    return jnp.where(mask, a, jnp.asarray(b, dtype=a.dtype))


def _atomic(op: str, combine):
    def atomic(x_ref_or_view, idx, val, *, mask=None):
        dtype = np.dtype(x_ref_or_view.dtype)
        if dtype == np.float16 and op != "add":
            raise ValueError(f"`atomic_{op}` does not support f16.")
        if dtype in (np.dtype(np.bool_), np.dtype(np.int8), np.dtype(np.int16)) \
                or dtype == dtypes.bfloat16:
            raise ValueError(f"`atomic_{op}` does not support {dtype}.")
        where = _index(idx)
        old = x_ref_or_view[where]
        new = combine(old, val)
        x_ref_or_view[where] = new if mask is None else _where(mask, new, old)
        return old
    atomic.__name__ = f"atomic_{op}"
    atomic.__doc__ = (f"Atomically combines ``val`` into ``x_ref_or_view[idx]`` ({op}) where "
                      "``mask`` holds; returns the previous value.")
    return atomic


atomic_xchg = _atomic("xchg", lambda old, val: jnp.broadcast_to(val, old.shape)
                      .astype(old.dtype))
atomic_add = _atomic("add", lambda old, val: old + val)
atomic_max = _atomic("max", lambda old, val: jnp.maximum(old, val))
atomic_min = _atomic("min", lambda old, val: jnp.minimum(old, val))
atomic_and = _atomic("and", lambda old, val: old & val)
atomic_or = _atomic("or", lambda old, val: old | val)
atomic_xor = _atomic("xor", lambda old, val: old ^ val)


def atomic_cas(ref, cmp, val):
    """Atomically stores ``val`` in ``ref`` where it holds ``cmp``; returns the previous
    value."""
    old = ref[...]
    ref[...] = _where(old == jnp.asarray(cmp, old.dtype), val, old)
    return old


def max_contiguous(x, values):
    """A hint that the first ``values`` elements of ``x`` are contiguous: ``x`` itself."""
    del values
    return x


def dot(a, b, trans_a: bool = False, trans_b: bool = False,
        allow_tf32: bool | None = None, precision=None):
    """``a @ b`` of 2D arrays (each optionally transposed), accumulated in f32 (f64 for f64
    inputs, int32 for integers)."""
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError("`a` and `b` must be 2D arrays.")
    if allow_tf32 is not None:
        if precision is not None:
            raise ValueError("Only one of allow_tf32 and precision can be specified")
        precision = lax.Precision.HIGH if allow_tf32 else lax.Precision.HIGHEST
    small = {np.dtype(dtypes.int4): np.dtype(np.int8)}
    dtype = dtypes.promote_types(small.get(np.dtype(a.dtype), a.dtype),
                                 small.get(np.dtype(b.dtype), b.dtype))
    if dtypes.issubdtype(dtype, np.integer):
        out = np.int32
    elif dtype == np.float64:
        out = np.float64
    else:
        out = np.float32
    return lax.dot_general(a, b, (((0 if trans_a else 1,), (1 if trans_b else 0,)), ((), ())),
                           precision=precision, preferred_element_type=out)


def elementwise_inline_asm(asm: str, *, args: Sequence[Any], constraints: str, pack: int,
                           result_shape_dtypes: Sequence[Any]) -> Sequence[Any]:
    """Inline PTX applied elementwise to ``args`` (a GPU instruction: it lowers only for a
    GPU, which plax has not)."""
    results = tuple(ShapedArray(tuple(s.shape), dtypes.dtype(s.dtype))
                    for s in result_shape_dtypes)
    return elementwise_inline_asm_p.bind(*args, asm=asm, constraints=constraints,
                                         pack=int(pack), result_avals=results)


_TANH = {np.dtype(np.float16): ("f16", "h"), np.dtype(dtypes.bfloat16): ("bf16", "h"),
         np.dtype(np.float32): ("f32", "f"), np.dtype(np.float64): ("f64", "d")}


def approx_tanh(x):
    """Elementwise approximate tanh (PTX ``tanh.approx``: a GPU instruction)."""
    kind = _TANH.get(np.dtype(x.dtype))
    if kind is None:
        raise TypeError(f"approx_tanh does not accept {x.dtype} arrays")
    name, c = kind
    [result] = elementwise_inline_asm(
        f"tanh.approx.{name} $0, $1;", args=[x], constraints=f"={c},{c}", pack=1,
        result_shape_dtypes=[ShapedArray(tuple(x.shape), x.dtype)])
    return result


def debug_barrier() -> None:
    """A barrier across the threads of a program (a GPU instruction)."""
    debug_barrier_p.bind()
