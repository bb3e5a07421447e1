"""qdwh: the polar decomposition x = u h by the QR-based dynamically weighted Halley
iteration (Nakatsukasa, Bai and Gygi, SIAM J. Matrix Anal. Appl. 31(5), 2010).

Written on plax's own operations, so it jits and vmaps as any program does. The weights of
each step depend only on the dtype's eps (a lower bound on the scaled smallest singular
value), so they are computed here in Python: early steps (large weight c) take a QR of
[sqrt(c) u; I], later ones the cheaper Cholesky of c uᴴu + I; once the weights have settled,
plain Halley steps run until the iterate stops moving (at most ``max_iterations`` steps in
all), and one Newton-Schulz step polishes the result. Every loop is a scan, so unlike
JAX's (a while loop) it is differentiable in reverse mode too.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.config import config
from plax.core.jaxpr import consts_as_inputs
from plax.core.staging import trace_to_closed_jaxpr
from plax.core.trace import Tracer, concrete_or_error, fresh_name_stack, get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import bitwise as _bitwise
from plax.first_order import comparison as _cmp
from plax.first_order import reductions as _reductions
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.conversion import convert_element_type
from plax.first_order.transcendental import cbrt, rsqrt
from plax.higher_order.cond import cond
from plax.higher_order.pjit import pjit_p
from plax.higher_order.scan import scan
from plax.lax.linalg.cholesky import cholesky
from plax.lax.linalg.common import adjoint, eye_like, matmul, norm2, symmetrize, within
from plax.lax.linalg.qr import qr
from plax.lax.linalg.triangular import triangular_solve
from plax.runtime.dispatch import array_from_host

__all__ = ["qdwh"]

_QR_ABOVE = 100.0  # weights c above this use the QR form (the Cholesky one loses accuracy)


def _weights(eps: float, max_iterations: int):
    """The (a, b, c) of each weighted step while the lower bound l on the smallest singular
    value of the scaled iterate is not yet within 5 eps of 1."""
    steps, lower, tol = [], eps, 5 * eps
    while lower + tol < 1 and len(steps) < max_iterations:
        l2 = lower * lower
        d = (4 * (1 / l2 - 1) / l2) ** (1 / 3)
        root = math.sqrt(1 + d)
        a = root + math.sqrt(2 - d + 2 * (2 - l2) / (l2 * root))
        b = (a - 1) ** 2 / 4
        c = a + b - 1
        lower = lower * (a + b * l2) / (1 + c * l2)
        steps.append((a, b, c))
    return steps


def _eye(n: int, dtype):
    return eye_like(ShapedArray((n, n), dtype))


def _qr_step(u, rows, cols, weights):
    """u ↦ (b/c) u + (a - b/c)/sqrt(c) · q1 q2ᴴ for [sqrt(c) u; I] = [q1; q2] r."""
    keep, mix, root = weights
    big_m, big_n = get_aval(u).shape
    eye = _eye(big_n, get_aval(u).dtype)
    scaled = _arith.mul(root, u)
    if rows is None:
        stacked, at = _shapes.concatenate([scaled, eye], 0), big_m
    else:  # the identity right below the true rows, the (zero) padding rows after it, as JAX
        zero = np.zeros((), get_aval(u).dtype)
        stacked = _slicing.dynamic_update_slice_in_dim(
            _shapes.pad(scaled, zero, [(0, big_n, 0), (0, 0, 0)]), eye, rows, 0)
        at = rows
    q, _ = qr(stacked, full_matrices=False)
    q1 = within(_slicing.slice_in_dim(q, 0, big_m, axis=0), (rows, cols))
    q2 = within(_slicing.dynamic_slice_in_dim(q, at, big_n, axis=0), (cols, cols))
    return _arith.add(_arith.mul(keep, u), _arith.mul(mix, matmul(q1, adjoint(q2))))


def _cholesky_step(u, rows, cols, weights):
    """u ↦ (b/c) u + (a - b/c) · u (c uᴴu + I)⁻¹, through the Cholesky factor of c uᴴu + I."""
    keep, mix, c = weights
    eye = _eye(get_aval(u).shape[1], get_aval(u).dtype)
    u_h = adjoint(u)
    gram = _arith.add(_arith.mul(c, matmul(u_h, u)), eye)
    gram = within(gram, (cols, cols), eye)  # keep the padded corner positive definite
    low = cholesky(gram, symmetrize_input=False)
    # z = u (L Lᴴ)⁻¹, as (L Lᴴ)⁻ᴴ uᴴ = L⁻ᴴ L⁻¹ uᴴ (the Gram matrix is Hermitian).
    half = triangular_solve(low, u_h, left_side=True, lower=True, transpose_a=False,
                            conjugate_a=False)
    z = adjoint(triangular_solve(low, half, left_side=True, lower=True, transpose_a=True,
                                 conjugate_a=True))
    return _arith.add(_arith.mul(keep, u), _arith.mul(mix, z))


def _iterate(x, rows, cols, max_iterations, eps):
    dtype = get_aval(x).dtype
    real = np.finfo(dtype).dtype
    magnitude = _arith.abs(x)
    norm1 = _reductions.reduce_max(_reductions.reduce_sum(magnitude, (0,)), (0,))
    norm_inf = _reductions.reduce_max(_reductions.reduce_sum(magnitude, (1,)), (0,))
    # 1 / sqrt(‖x‖₁ ‖x‖∞) ≤ 1 / ‖x‖₂: the scaled iterate has singular values at most 1.
    scale = _cmp.select(_cmp.eq(norm1, np.zeros((), real)), np.ones((), real),
                        _arith.mul(rsqrt(norm1), rsqrt(norm_inf)))
    u = _arith.mul(x, convert_element_type(scale, dtype))
    # As JAX: the cube root taken by XLA, in the default float type, then cast.
    tol = convert_element_type(cbrt(np.asarray(5 * eps, dtypes.default_float_dtype())), real)

    def moved(new, old):
        return _cmp.gt(norm2(_arith.sub(new, old), (0, 1)), tol)

    steps = _weights(eps, max_iterations)
    qr_steps = [(b / c, (a - b / c) / math.sqrt(c), math.sqrt(c)) for a, b, c in steps
                if c > _QR_ABOVE]
    chol_steps = [(b / c, a - b / c, c) for a, b, c in steps if c <= _QR_ABOVE]
    true = np.asarray(True)

    def run(u, table, step, watch):
        """One scan over the rows of ``table`` (the steps' weights, as constants of x's
        dtype); whether the last step still moved the iterate (True when not watched)."""
        if not table:
            return u, true
        columns = tuple(np.asarray(table, np.float64).astype(dtype).T)

        def body(carry, weights):
            u, _ = carry
            new = step(u, rows, cols, weights)
            return (new, moved(new, u) if watch else true), None
        return scan(body, (u, true), columns)[0]

    u, _ = run(u, qr_steps, _qr_step, False)
    u, moving = run(u, chol_steps, _cholesky_step, True)

    halley = tuple(np.asarray(w, dtype) for w in (1 / 3, 3 - 1 / 3, 3))  # a, b, c = 3, 1, 3

    # Plain Halley steps while the iterate still moves, up to max_iterations steps in all: a
    # scan over the steps left whose body skips once settled (so reverse mode works, where
    # a while loop's would not), counting the steps taken.
    def halley_step(state, _):
        k, u, moving = state

        def advance(u):
            new = _cholesky_step(u, rows, cols, halley)
            return new, moved(new, u)

        u, still = cond(moving, advance, lambda u: (u, np.asarray(False)), u)
        return (_arith.add(k, convert_element_type(moving, np.int32)), u, still), None

    done = len(qr_steps) + len(chol_steps)
    state = (np.asarray(done, np.int32), u, moving)
    if max_iterations > done:
        state, _ = scan(halley_step, state, None, length=max_iterations - done)
    num_iters, u, moving = state
    # One Newton-Schulz step: u (3 I - uᴴu) / 2.
    u_h = adjoint(u)
    u = _arith.sub(_arith.mul(np.asarray(1.5, dtype), u),
                   _arith.mul(np.asarray(0.5, dtype), matmul(u, matmul(u_h, u))))
    h = matmul(adjoint(u), x)
    return u, symmetrize(h), num_iters, _bitwise.bitwise_not(moving)


def _as_array(x):
    """``x`` as a plax value: tracers and Arrays as they are, host data (NumPy values,
    nested lists, Python scalars) copied over once."""
    if isinstance(x, Tracer) or hasattr(x, "aval"):
        return x
    return array_from_host(np.asarray(x) if isinstance(x, (list, tuple)) else x)


def qdwh(x, *, is_hermitian: bool = False, max_iterations: int | None = None,
         eps: float | None = None, dynamic_shape: tuple[int, int] | None = None):
    """``(u, h, num_iters, is_converged)``: the polar decomposition ``x = u @ h`` of a
    full-rank M x N matrix (M >= N) by the QR-based dynamically weighted Halley iteration:
    ``u`` with orthonormal columns, ``h`` Hermitian positive semi-definite, the number of
    steps taken and whether the iterate settled (‖uₖ - uₖ₋₁‖ below (5 eps)^(1/3)) within
    ``max_iterations`` (default 10) steps. ``dynamic_shape=(m, n)`` treats ``x`` as an m x n
    matrix padded with zeros. ``is_hermitian`` is accepted and unused, as in JAX. One
    matrix at a time (vmap it for batches). Differentiable (JAX's is not in reverse mode)."""
    concrete_or_error(bool, is_hermitian, "The `is_hermitian` argument must be statically "
                      "specified to use `qdwh` within JAX transformations.")
    max_iterations = 10 if max_iterations is None else int(concrete_or_error(
        int, max_iterations, "The `max_iterations` argument must be statically specified to "
        "use `qdwh` within JAX transformations."))
    x = _as_array(x)
    aval = get_aval(x)
    if aval.ndim != 2:
        raise ValueError(f"qdwh takes one matrix (rank 2), got shape {aval.shape}; use "
                         "jax.vmap(qdwh) for a batch of matrices.")
    if aval.shape[0] < aval.shape[1]:
        raise ValueError(f"The input matrix of shape M x N must have M >= N; got {aval.shape}. "
                         "Decompose the adjoint of a wide matrix instead.")
    if not dtypes.is_inexact(aval.dtype):
        x = convert_element_type(x, dtypes.default_float_dtype())
    eps = float(np.finfo(get_aval(x).dtype).eps) if eps is None else float(eps)
    sizes = () if dynamic_shape is None else tuple(dynamic_shape)
    if config.read("disable_jit"):
        return _qdwh(x, sizes, max_iterations, eps)
    return _compiled_call(x, sizes, max_iterations, eps)


def _qdwh(x, sizes, max_iterations, eps):
    """The iteration on ``x``, a ``sizes = (rows, cols)`` matrix padded with zeros (``()``:
    the whole of ``x``)."""
    rows, cols = sizes if sizes else (None, None)
    if sizes:
        x = within(x, (rows, cols))
    return _iterate(x, rows, cols, max_iterations, eps)


def _compiled_call(x, sizes, max_iterations, eps):
    """``_qdwh`` as one compiled call, as JAX's jitted qdwh is: a pjit equation staged once
    per input type and static argument (here, below plax.api, from the pieces a jit is
    made of). The sizes of ``dynamic_shape`` are operands, not constants."""
    operands = [x, *(s for s in sizes if s is not None)]
    present = tuple(s is not None for s in sizes)
    callee, consts = _staged(tuple(get_aval(a) for a in operands), present, max_iterations,
                             eps, config.trace_context())
    ins = [*consts, *operands]
    return tuple(pjit_p.bind(*ins, **_CALL_PARAMS, jaxpr=callee, name="qdwh",
                             donated_invars=(False,) * len(ins)))


# A plain jit's parameters: no shardings asked for, no donation, not inlined.
_CALL_PARAMS = dict(keep_unused=False, inline=False, device=None, compiler_options=None,
                    in_shardings=(), out_shardings=())


@functools.lru_cache(maxsize=64)
def _staged(avals, present, max_iterations, eps, trace_context):
    """``(callee, consts)``: ``_qdwh`` traced on ``avals`` (x, then the sizes ``present``
    marks), its constants (the steps' weights) split off as leading inputs."""
    del trace_context  # (a key part only: the flags that change what tracing produces)

    def flat(x, *given):
        it = iter(given)
        sizes = tuple(next(it) if p else None for p in present)
        return list(_qdwh(x, sizes, max_iterations, eps))

    with fresh_name_stack():
        closed = trace_to_closed_jaxpr(flat, list(avals), description="qdwh")
    callee, consts = consts_as_inputs(closed)
    return callee, tuple(consts)
