"""The backward pass: transpose a linear jaxpr to carry cotangents from outputs to inputs.

Linear primitives register ``transpose_rules[prim] = rule(ct, *args, **params)``;
``args`` holds ``UndefinedPrimal(aval)`` for the linear inputs and values for
the others, and the rule returns one cotangent (or None) per argument.
Cotangents may be symbolic ``Zero``s; contributions to a variable add up.
"""
from __future__ import annotations

import numpy as np

from plax.core.jaxpr import Jaxpr, Literal, Var
from plax.transforms.jvp import Zero, add_tangents

transpose_rules: dict = {}


class UndefinedPrimal:
    """Marks a linear input of an equation being transposed."""

    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined(x) -> bool:
    return type(x) is UndefinedPrimal


def _literal_value(lit: Literal):
    """A literal's value; weakly typed literals come back as Python scalars (still weak)."""
    if lit.aval.weak_type and isinstance(lit.val, np.generic):
        return lit.val.item()
    return lit.val


def backward_pass(jaxpr: Jaxpr, consts, linear_in: list, cts_out: list) -> list:
    """Cotangents of the linear inputs of ``jaxpr`` given cotangents of its outputs.

    ``linear_in[i]`` says whether invar i is linear (an unknown); the others get
    None. Equations not touching linear values are evaluated forward first.
    """
    env = dict(zip(jaxpr.constvars, consts))
    linear = {v for v, lin in zip(jaxpr.invars, linear_in) if lin}

    def read(v):
        return _literal_value(v) if isinstance(v, Literal) else env[v]

    linear_eqns = []
    for e in jaxpr.eqns:
        if any(isinstance(v, Var) and v in linear for v in e.invars):
            linear.update(e.outvars)
            linear_eqns.append(e)
        else:
            out = e.primitive.bind(*[read(v) for v in e.invars], **e.params)
            for v, o in zip(e.outvars, out if e.primitive.multiple_results else [out]):
                env[v] = o

    cts: dict = {}

    def add_ct(v, ct):
        if isinstance(v, Var) and v in linear and ct is not None and type(ct) is not Zero:
            cts[v] = add_tangents(cts[v], ct) if v in cts else ct

    for v, ct in zip(jaxpr.outvars, cts_out):
        add_ct(v, ct)
    for e in reversed(linear_eqns):
        outs_ct = [cts.pop(v, Zero(v.aval)) for v in e.outvars]
        if all(type(c) is Zero for c in outs_ct):
            continue
        rule = transpose_rules.get(e.primitive)
        if rule is None:
            raise NotImplementedError(f"Transpose rule (for reverse-mode differentiation) for "
                                      f"'{e.primitive.name}' not implemented")
        args = [UndefinedPrimal(v.aval) if isinstance(v, Var) and v in linear else read(v)
                for v in e.invars]
        ct_in = rule(outs_ct if e.primitive.multiple_results else outs_ct[0], *args, **e.params)
        for v, c in zip(e.invars, ct_in):
            add_ct(v, c)
    return [cts.get(v, Zero(v.aval)) if lin else None for v, lin in zip(jaxpr.invars, linear_in)]


# --- jit: the transpose of a jit is a jit of the backward pass of its body ------------------
_transpose_cache: dict = {}  # (jaxpr, linear mask, non-zero ct mask, residual avals) -> callee


def _pjit_transpose(cts, *args, jaxpr, name, **params):
    from plax.core.staging import trace_to_jaxpr
    from plax.core.trace import Tracer, get_aval
    from plax.lax.pjit import pjit_p
    from plax.transforms.jvp import instantiate
    from plax.transforms.linearize import as_callee, dce_with_consts
    linear = tuple(is_undefined(a) for a in args)
    nonzero = tuple(type(c) is not Zero for c in cts)
    res = [a for a in args if not is_undefined(a)]
    res_avals = tuple(get_aval(r) for r in res)
    key = (jaxpr, linear, nonzero, res_avals)
    cached = _transpose_cache.get(key)
    if cached is None:
        j = jaxpr.jaxpr
        # Residual inputs act as constants of the linear body.
        view = Jaxpr(list(j.constvars) + [v for v, lin in zip(j.invars, linear) if not lin],
                     [v for v, lin in zip(j.invars, linear) if lin], j.outvars, j.eqns)
        n_res = len(res)

        def body(*xs):
            it = iter(xs[n_res:])
            cts_in = [next(it) if nz else None for nz in nonzero]
            outs = backward_pass(view, [*jaxpr.consts, *xs[:n_res]], [True] * len(view.invars),
                                 cts_in)
            return [instantiate(o) for o in outs]

        ct_avals = [get_aval(c) for c in cts if type(c) is not Zero]
        body_jaxpr, consts = dce_with_consts(*trace_to_jaxpr(
            body, [*res_avals, *ct_avals], description=f"transpose({name})"))
        cached = (as_callee(body_jaxpr), consts)
        if not any(isinstance(c, Tracer) for c in consts):
            _transpose_cache[key] = cached
    callee, consts = cached
    ins = [*consts, *res, *(c for c in cts if type(c) is not Zero)]
    outs = iter(pjit_p.bind(*ins, jaxpr=callee, name=f"transpose({name})",
                            **dict(params, donated_invars=(False,) * len(ins))))
    return [next(outs) if lin else None for lin in linear]


def _register():
    from plax.lax.pjit import pjit_p
    transpose_rules[pjit_p] = _pjit_transpose


_register()
