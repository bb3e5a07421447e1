"""The backward pass: transpose a linear jaxpr to carry cotangents from outputs to inputs.

Linear primitives register ``transpose_rules[prim] = rule(ct, *args, **params)``;
``args`` holds ``UndefinedPrimal(aval)`` for the linear inputs and values for
the others, and the rule returns one cotangent (or None) per argument.
Cotangents may be symbolic ``Zero``s; contributions to a variable add up.
A rule never sees an all-Zero cotangent (``backward_pass`` skips those equations), so
only a multiple-results rule meets a Zero, among nonzero cotangents of its other outputs.
"""
from __future__ import annotations

from typing import NamedTuple

from plax.core.caches import WeakKeyCache
from plax.core.dce import dce_closed
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Literal, Var, eval_jaxpr
from plax.core.rules import (UndefinedPrimal, Zero, partial_eval_rules, transpose_rules,
                             transposed_on_zero_cotangents)
from plax.core.source_info import staging_location
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import Tracer
from plax.first_order.ad_util import add_tangents, instantiate
from plax.transforms.linearize import partial_eval_jaxpr


class _LinearPart(NamedTuple):
    """The linear half of a split mixed equation: ``unknown(*residuals, *invars) -> outvars``."""
    unknown: ClosedJaxpr
    residuals: list
    invars: list
    outvars: list
    source_info: object  # the split equation's


def backward_pass(jaxpr: Jaxpr, consts, linear_in: list, cts_out: list,
                  split_mixed: bool = False) -> list:
    """Cotangents of the linear inputs of ``jaxpr`` given cotangents of its outputs.

    ``linear_in[i]`` says whether invar i is linear (an unknown); the others get
    None. Equations not touching linear values are evaluated forward first.

    With ``split_mixed``, an equation taking both primal and linear inputs whose primal
    results are read later (a nested checkpoint or jit inside the recomputing body of a
    checkpoint, which computes primals and tangents at once) is partially evaluated: its
    primal half runs forward and only its linear half is transposed. Jaxprs made by
    linearization never need it: their partial evaluation has split such equations already.
    """
    env = dict(zip(jaxpr.constvars, consts))
    linear = {v for v, lin in zip(jaxpr.invars, linear_in) if lin}
    read_later = ({v for e in jaxpr.eqns for v in e.invars if isinstance(v, Var)}
                  if split_mixed else set())

    def read(v):
        return v.value() if isinstance(v, Literal) else env[v]

    cts: dict = {}

    def add_ct(v, ct):
        if isinstance(v, Var) and v in linear and ct is not None and type(ct) is not Zero:
            cts[v] = add_tangents(cts[v], ct) if v in cts else ct

    # What an equation's evaluation or transposition stages records that equation's
    # user line, as in JAX (a plain attribute set per equation: this loop is hot).
    location = staging_location
    outer = location.at
    try:
        linear_eqns = []
        for e in jaxpr.eqns:
            location.at = e.source_info
            if any(isinstance(v, Var) and v in linear for v in e.invars):
                part = _split_mixed(e, linear, read, read_later, env) if split_mixed else None
                linear.update(e.outvars if part is None else part.outvars)
                linear_eqns.append(e if part is None else part)
            else:
                out = e.primitive.bind(*[read(v) for v in e.invars], **e.params)
                for v, o in zip(e.outvars, out if e.primitive.multiple_results else [out]):
                    env[v] = o
        location.at = outer

        for v, ct in zip(jaxpr.outvars, cts_out):
            add_ct(v, ct)
        for e in reversed(linear_eqns):
            outs_ct = [cts.pop(v, Zero(v.aval)) for v in e.outvars]
            if all(type(c) is Zero for c in outs_ct) and (
                    isinstance(e, _LinearPart)
                    or e.primitive not in transposed_on_zero_cotangents):
                continue
            location.at = e.source_info
            if isinstance(e, _LinearPart):
                for v, c in zip(e.invars, _transpose_part(e, outs_ct)):
                    add_ct(v, c)
                continue
            rule = transpose_rules.get(e.primitive)
            if rule is None:
                raise NotImplementedError(f"Transpose rule (for reverse-mode differentiation) "
                                          f"for '{e.primitive.name}' not implemented")
            args = [UndefinedPrimal(v.aval) if isinstance(v, Var) and v in linear else read(v)
                    for v in e.invars]
            ct_in = rule(outs_ct if e.primitive.multiple_results else outs_ct[0], *args,
                         **e.params)
            for v, c in zip(e.invars, ct_in):
                add_ct(v, c)
    finally:
        location.at = outer
    return [cts.get(v, Zero(v.aval)) if lin else None for v, lin in zip(jaxpr.invars, linear_in)]


def _split_mixed(e, linear, read, read_later, env):
    """Split ``e`` by partial evaluation if it has primal inputs and a primal result that a
    later equation reads: the primal results go into ``env`` now and the linear half is
    returned. None when ``e`` is linear as a whole."""
    ins = list(dict.fromkeys(v for v in e.invars if isinstance(v, Var)))
    unknowns = [v in linear for v in ins]
    if (all(unknowns) or e.primitive not in partial_eval_rules
            or not any(v in read_later for v in e.outvars)):
        return None
    one = ClosedJaxpr(Jaxpr([], ins, e.outvars, [e]), [])
    known, unknown, out_unknown, num_res = partial_eval_jaxpr(
        one, unknowns, instantiate=False, description="transpose")
    if not any(v in read_later for v, u in zip(e.outvars, out_unknown) if not u):
        return None
    vals = eval_jaxpr(known.jaxpr, known.consts, *[read(v) for v, u in zip(ins, unknowns) if not u])
    n_known = len(vals) - num_res
    for v, x in zip([v for v, u in zip(e.outvars, out_unknown) if not u], vals[:n_known]):
        env[v] = x
    return _LinearPart(unknown, vals[n_known:], [v for v, u in zip(ins, unknowns) if u],
                       [v for v, u in zip(e.outvars, out_unknown) if u], e.source_info)


def _transpose_part(part: _LinearPart, outs_ct):
    """Cotangents of a split equation's linear inputs (its linear half transposed)."""
    nonzero = [type(c) is not Zero for c in outs_ct]
    body = transpose_jaxpr(part.unknown, [False] * len(part.residuals) + [True] * len(part.invars),
                           nonzero, description="transpose")
    return eval_jaxpr(body.jaxpr, body.consts, *part.residuals,
                      *(c for c in outs_ct if type(c) is not Zero))


# --- the transpose of a jaxpr (for the bodies of higher-order primitives) -------------------
_transposes = WeakKeyCache("transpose_jaxpr")


def transpose_jaxpr(closed: ClosedJaxpr, linear_mask, nonzero_cts, description: str = ""):
    """The backward pass of ``closed`` (linear in the inputs where ``linear_mask``), as a jaxpr.

    It maps ``(*non-linear inputs, *cotangents of the outputs where nonzero_cts)`` to
    the cotangents of the linear inputs, zeros included.
    """
    linear = tuple(bool(x) for x in linear_mask)
    nonzero = tuple(bool(x) for x in nonzero_cts)
    key = (linear, nonzero)
    hit = _transposes.get(closed, key)
    if hit is not None:
        return hit
    j = closed.jaxpr
    # Non-linear inputs act as constants of the linear body.
    view = Jaxpr(list(j.constvars) + [v for v, lin in zip(j.invars, linear) if not lin],
                 [v for v, lin in zip(j.invars, linear) if lin], j.outvars, j.eqns)
    res_avals = [v.aval for v, lin in zip(j.invars, linear) if not lin]
    ct_avals = [v.aval for v, nz in zip(j.outvars, nonzero) if nz]
    n_res = len(res_avals)

    def body(*xs):
        it = iter(xs[n_res:])
        cts = [next(it) if nz else None for nz in nonzero]
        outs = backward_pass(view, [*closed.consts, *xs[:n_res]], [True] * len(view.invars), cts,
                             split_mixed=True)
        return [instantiate(o) for o in outs]

    jaxpr, consts = trace_to_jaxpr(body, [*res_avals, *ct_avals],
                                   description=description or "transpose_jaxpr")
    result, _ = dce_closed(ClosedJaxpr(jaxpr, consts), instantiate=True)
    if not any(isinstance(c, Tracer) for c in result.consts):
        _transposes.put(closed, key, result)
    return result
