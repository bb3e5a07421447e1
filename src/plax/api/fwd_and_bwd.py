"""``fwd_and_bwd``: a function's forward and backward passes as two reusable functions, and
``plax.ad``, the markers a VJP function's ``with_refs`` takes and gives back.

``fwd(*args)`` is ``vjp`` of ``fun`` in the positions ``argnums``; what it returns as
residuals is the VJP function itself, a pytree whose leaves are the residual arrays and
whose structure names the (one) linear jaxpr, so a jitted ``bwd`` fed the residuals of
any call of a jitted ``fwd`` finds its trace cached and compiles once.
"""
from __future__ import annotations

import types

from plax.api.autodiff import DidntWant, DontWant, GradRef, GradValue, vjp
from plax.api.jit import jit
from plax.core.debug_info import resolve_argnums_in_range

__all__ = ["fwd_and_bwd", "ad"]

# JAX's jax.ad: what f_vjp.with_refs takes per input (GradValue: give the cotangent back;
# DontWant: skip it; a Ref: add the cotangent into it) and what it returns in their place.
ad = types.SimpleNamespace(DontWant=DontWant, DidntWant=DidntWant, GradRef=GradRef,
                           GradValue=GradValue)


def fwd_and_bwd(fun, argnums, has_aux: bool = False, jitted: bool = True):
    """``(fwd, bwd)``: ``fwd(*args)`` returns ``(fun(*args), residuals)`` (plus ``aux`` with
    ``has_aux``) and ``bwd(residuals, cotangent)`` the cotangents of the arguments numbered by
    ``argnums`` (one value for an int, a tuple for a sequence). Both are jitted unless
    ``jitted=False``."""
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    if not all(isinstance(i, int) for i in nums):
        raise TypeError(f"argnums must be an int or a sequence of ints, got {argnums!r}.")

    def fwd(*args):
        positions = resolve_argnums_in_range(nums, len(args), drop_too_large=False)

        def of_chosen(*chosen):
            full = list(args)
            for i, value in zip(positions, chosen):
                full[i] = value
            return fun(*full)
        return vjp(of_chosen, *(args[i] for i in positions), has_aux=has_aux)

    def bwd(f_vjp, cotangent):
        cts = f_vjp(cotangent)
        return cts[0] if single else cts

    if jitted:
        return jit(fwd), jit(bwd)
    return fwd, bwd
