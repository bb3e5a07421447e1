"""geqrf: the Householder form of a QR factorisation (LAPACK geqrf), as JAX's
``lax.linalg.geqrf``: R on and above the diagonal, the reflectors below it, and their scales.
"""
from __future__ import annotations

from functools import partial

from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, jvp_rules, register_lowering
from plax.core.trace import get_aval
from plax.first_order import shapes as _shapes
from plax.lax.linalg import lapack
from plax.lax.linalg.common import batched_on_front, check_matrix
from plax.lowering.inline import lower_fun

__all__ = ["geqrf", "geqrf_p"]

geqrf_p = Primitive("geqrf", multiple_results=True)


def _abstract(x):
    check_matrix("geqrf", x)
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    return [ShapedArray(x.shape, x.dtype), ShapedArray(batch + (min(m, n),), x.dtype)]


def householder_factors(x, platform: str):
    """``(a, taus)`` of geqrf on ``platform`` ("cpu": LAPACK; "cuda": cuSOLVER; "tpu": XLA)."""
    aval = get_aval(x)
    batch, (m, n) = aval.shape[:-2], aval.shape[-2:]
    k = min(m, n)
    if 0 in aval.shape:
        return [x, _shapes.full(batch + (k,), 0, aval.dtype)]
    results = [(aval.shape, aval.dtype, True), (batch + (k,), aval.dtype, False)]
    if platform == "tpu":  # XLA's Qr, expanded by its TPU compiler
        return lapack.call_target("Qr", [x], results)
    if platform == "cuda":
        return lapack.call_target("cusolver_geqrf_ffi", [x], results, aliases=((0, 0),))
    return lapack.call("geqrf", [x], results, aliases=((0, 0),))


def _jvp(primals, tangents):
    raise NotImplementedError("geqrf is not differentiable (as in JAX); differentiate qr "
                              "instead.")


abstract_eval_rules[geqrf_p] = _abstract
register_lowering(geqrf_p, lower_fun(partial(householder_factors, platform="cpu"),
                                     multiple_results=True), platform="cpu")
register_lowering(geqrf_p, lower_fun(partial(householder_factors, platform="cuda"),
                                     multiple_results=True), platform="cuda")
register_lowering(geqrf_p, lower_fun(partial(householder_factors, platform="tpu"),
                                     multiple_results=True), platform="tpu")
jvp_rules[geqrf_p] = _jvp
batched_on_front(geqrf_p)


def geqrf(x):
    """``(a, taus)``: the QR factorisation of each matrix of ``x`` in LAPACK's compact form:
    ``a`` holds R on and above its diagonal and the Householder vectors (unit leading entry
    implied) below it; ``taus`` their scales, so Q = H_1 ... H_k with H_i = I - tau_i v_i v_iᴴ."""
    a, taus = geqrf_p.bind(x)
    return a, taus
