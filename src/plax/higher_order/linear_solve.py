"""``lax.custom_linear_solve``: a linear solve differentiated implicitly, and its primitive
``custom_linear_solve`` (``linear_solve_p``).

The equation holds four bodies, each taking its constants as leading operands:
``matvec`` (x -> A x), ``vecmat`` (y -> A^T y), ``solve`` (b -> A^{-1} b, plus any
auxiliary outputs) and ``transpose_solve`` (b -> A^{-T} b); the last two are the user's.
Its value is ``solve``'s. Differentiation never goes through the solver: with
x = A^{-1} b, the tangent is A^{-1} (db - dA x) -- the same primitive again, on the
tangent of ``matvec`` at x -- and the primitive is linear in b, its transpose being the
primitive with the roles swapped (``solve`` <-> ``transpose_solve``, ``matvec`` <->
``vecmat``). Batching batches all four bodies alike.
"""
from __future__ import annotations

from typing import NamedTuple

from plax import tree_util
from plax.core.jaxpr import ClosedJaxpr, call_out_avals, consts_as_inputs, eval_jaxpr
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, is_undefined, jvp_rules,
                             linear_primitives, not_mapped, register_lowering, tangent_aval,
                             transpose_rules)
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arithmetic
from plax.first_order.ad_util import instantiate
from plax.first_order.batch_util import move_batch_dim
from plax.higher_order.bodies import as_array, trace_body, wrapper_for
from plax.lowering.consts import const_operands
from plax.lowering.stablehlo import lower_jaxpr_body
from plax.transforms.toolkit import batch_jaxpr, jvp_jaxpr, transpose_jaxpr
from plax.core.tracebacks import api_boundary

__all__ = ["custom_linear_solve", "linear_solve_p"]

linear_solve_p = Primitive("custom_linear_solve", multiple_results=True)


class _LinearSolveTuple(NamedTuple):
    """One entry per body: its jaxpr (``jaxprs``) or its number of constants
    (``const_lengths``)."""
    matvec: object
    vecmat: object
    solve: object
    transpose_solve: object

    def transpose(self) -> "_LinearSolveTuple":
        return _LinearSolveTuple(self.vecmat, self.matvec, self.transpose_solve, self.solve)


def _body(fun, func_name, b_tree, b_avals, aux: bool):
    """``fun`` (a function of the b pytree; with ``aux``, returning ``(x, aux)``) as a
    const-free body, its constants and its aux tree. Traced once per function and types
    (``trace_body``), so that eager calls reuse the equation's compiled program."""
    closed, out_tree = trace_body(fun, tree_util.tree_structure((b_tree.unflatten(b_avals),)),
                                  b_avals, func_name)
    sol_tree, aux_tree = out_tree, None
    if aux:
        parts = out_tree.children()
        examples = [p.unflatten([0] * p.num_leaves) for p in parts]
        if len(parts) != 2 or out_tree not in (tree_util.tree_structure(tuple(examples)),
                                               tree_util.tree_structure(list(examples))):
            raise TypeError(f"{func_name}() with has_aux=True must return a pair (solution, "
                            f"aux), got a pytree of structure {out_tree}.")
        sol_tree, aux_tree = parts
    if sol_tree != b_tree:
        raise TypeError(f"{func_name}() output pytree structure must match b, got {sol_tree} "
                        f"and {b_tree}.")
    got = closed.out_avals[:len(b_avals)]
    if any(g.shape != w.shape or g.dtype != w.dtype for g, w in zip(got, b_avals)):
        raise TypeError(f"{func_name}() output shapes must match b, got "
                        f"{[a.str_short() for a in got]} and {[a.str_short() for a in b_avals]}.")
    body, consts = consts_as_inputs(closed)
    return body, consts, aux_tree


def _solve_wrapper(solve, linear_fn, kind):
    """``b -> solve(linear_fn, b)``, made once per (solve, linear_fn) so its trace is reused."""
    def make(get):
        return lambda b: get()(linear_fn, b)
    return wrapper_for(solve, (kind, linear_fn), make)


def _vecmat_of(matvec):
    """The transpose of the linear ``matvec`` (one function per matvec)."""
    def make(get):
        def vecmat(y):
            leaves, tree = tree_util.tree_flatten(y)
            closed, _ = trace_body(get(), tree_util.tree_structure((y,)),
                                   [get_aval(v) for v in leaves], "matvec")
            body, consts = consts_as_inputs(closed)
            t = transpose_jaxpr(body, [False] * len(consts) + [True] * len(leaves),
                                [True] * len(body.out_avals), description="vecmat")
            return tree.unflatten(eval_jaxpr(t.jaxpr, t.consts, *consts, *leaves))
        return vecmat
    return wrapper_for(matvec, "custom_linear_solve vecmat", make)


@api_boundary
def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False,
                        has_aux=False):
    """Solve ``matvec(x) == b`` with ``solve(matvec, b)``, differentiated implicitly.

    Derivatives never differentiate ``solve``: forward mode solves again for the tangent
    (``solve(matvec, db - dmatvec(x))``); reverse mode uses ``transpose_solve(vecmat, ct)``
    (``vecmat`` being the transpose of ``matvec``), or ``solve`` when ``symmetric``.
    ``matvec`` must be linear in its argument. With ``has_aux``, ``solve`` and
    ``transpose_solve`` return ``(x, aux)``; ``aux`` is returned beside the solution and
    carries no derivative.
    """
    b_flat, b_tree = tree_util.tree_flatten(b)
    b_flat = [as_array(x) for x in b_flat]
    b_avals = [get_aval(x) for x in b_flat]
    nb = len(b_flat)

    matvec_body, matvec_consts, _ = _body(matvec, "matvec", b_tree, b_avals, False)
    solve_body, solve_consts, aux_tree = _body(_solve_wrapper(solve, matvec, "solve"), "solve",
                                               b_tree, b_avals, has_aux)
    if symmetric:
        vecmat_body, vecmat_consts = matvec_body, matvec_consts
        tsolve_body, tsolve_consts = solve_body, solve_consts
    elif transpose_solve is not None:
        vecmat = _vecmat_of(matvec)
        vecmat_body, vecmat_consts, _ = _body(vecmat, "vecmat", b_tree, b_avals, False)
        tsolve_body, tsolve_consts, _ = _body(
            _solve_wrapper(transpose_solve, vecmat, "transpose_solve"), "transpose_solve",
            b_tree, b_avals, has_aux)
    else:
        vecmat_body = tsolve_body = None
        vecmat_consts = tsolve_consts = []

    jaxprs = _LinearSolveTuple(matvec_body, vecmat_body, solve_body, tsolve_body)
    lengths = _LinearSolveTuple(len(matvec_consts), len(vecmat_consts), len(solve_consts),
                                len(tsolve_consts))
    outs = linear_solve_p.bind(*matvec_consts, *vecmat_consts, *solve_consts, *tsolve_consts,
                               *b_flat, const_lengths=lengths, jaxprs=jaxprs)
    x = tree_util.tree_unflatten(b_tree, outs[:nb])
    if has_aux:
        return x, tree_util.tree_unflatten(aux_tree, outs[nb:])
    return x


# --- the primitive's rules -----------------------------------------------------------------
def _split(args, const_lengths):
    """``(per-body constants as a _LinearSolveTuple of lists, b)``."""
    groups, i = [], 0
    for n in const_lengths:
        groups.append(list(args[i:i + n]))
        i += n
    return _LinearSolveTuple(*groups), list(args[i:])


def _abstract(*avals, const_lengths, jaxprs):
    consts, b = _split(avals, const_lengths)
    out = call_out_avals("custom_linear_solve solve", jaxprs.solve, [*consts.solve, *b])
    # the solution has b's types (weak ones included, as JAX's), whatever solve computed in
    return [o.update(weak_type=w.weak_type) for o, w in zip(out, b)] + list(out[len(b):])


def _lowering(ctx, *args, const_lengths, jaxprs):
    consts, b = _split(args, const_lengths)
    body = jaxprs.solve
    return lower_jaxpr_body(ctx.fn, body.jaxpr, [*const_operands(ctx, body), *consts.solve, *b])


def _jvp(primals, tangents, *, const_lengths, jaxprs):
    consts, b = _split(primals, const_lengths)
    const_tans, b_tans = _split(tangents, const_lengths)
    nb = len(b)
    outs = linear_solve_p.bind(*primals, const_lengths=const_lengths, jaxprs=jaxprs)
    x = outs[:nb]
    aux_tans = [Zero(tangent_aval(get_aval(o))) for o in outs[nb:]]
    # x = A^{-1} b, so dx = A^{-1} (db - dA x); dA x is matvec's tangent in its constants.
    m_nonzero = [type(t) is not Zero for t in const_tans.matvec]
    rhs = list(b_tans)
    if any(m_nonzero):
        body, _ = jvp_jaxpr(jaxprs.matvec, m_nonzero + [False] * nb, instantiate=True,
                            description="matvec jvp")
        res = eval_jaxpr(body.jaxpr, body.consts, *consts.matvec, *x,
                         *(t for t in const_tans.matvec if type(t) is not Zero))
        rhs = [_arithmetic.sub(instantiate(t), dm) for t, dm in zip(rhs, res[nb:])]
    if all(type(t) is Zero for t in rhs):
        return outs, [Zero(tangent_aval(get_aval(v))) for v in x] + aux_tans
    rhs = [instantiate(t) for t in rhs]
    n_consts = sum(const_lengths)
    x_dot = linear_solve_p.bind(*primals[:n_consts], *rhs, const_lengths=const_lengths,
                                jaxprs=jaxprs)[:nb]
    return outs, list(x_dot) + aux_tans


def _transpose(cts, *args, const_lengths, jaxprs):
    if jaxprs.transpose_solve is None:
        raise TypeError("transpose_solve required for backwards mode automatic "
                        "differentiation of custom_linear_solve; pass transpose_solve, or "
                        "symmetric=True when matvec is symmetric.")
    n_consts = sum(const_lengths)
    if any(is_undefined(a) for a in args[:n_consts]):
        raise TypeError("custom_linear_solve is linear in b only: the values matvec and solve "
                        "close over cannot be transposed.")
    consts, b = _split(args, const_lengths)
    nb = len(b)
    x_cts = list(cts[:nb])
    if all(type(c) is Zero for c in x_cts):
        return [None] * len(args)
    x_cts = [instantiate(c) for c in x_cts]
    flipped = consts.transpose()
    b_cts = linear_solve_p.bind(*flipped.matvec, *flipped.vecmat, *flipped.solve,
                                *flipped.transpose_solve, *x_cts,
                                const_lengths=const_lengths.transpose(),
                                jaxprs=jaxprs.transpose())[:nb]
    return [None] * n_consts + list(b_cts)


def _batch(axis, vals, dims, *, const_lengths, jaxprs):
    """Every body batched, with b (and so x) batched at 0."""
    vals = [v if d is not_mapped else move_batch_dim(v, d, 0, axis.size)
            for v, d in zip(vals, dims)]
    dims = [not_mapped if d is not_mapped else 0 for d in dims]
    consts, b = _split(vals, const_lengths)
    const_dims, b_dims = _split(dims, const_lengths)
    b = [move_batch_dim(v, d, 0, axis.size) for v, d in zip(b, b_dims)]
    nb = len(b)
    new_jaxprs, new_consts = [], []
    for body, cs, cds in zip(jaxprs, consts, const_dims):
        if body is None:
            new_jaxprs.append(None)
            new_consts.append([])
            continue
        batched, extra, _ = batch_jaxpr(body, axis, [*cds, *[0] * nb], description="vmap",
                                        out_dims=[0] * len(body.out_avals))
        callee, extra = consts_as_inputs(ClosedJaxpr(batched, extra))
        new_jaxprs.append(callee)
        new_consts.append([*extra, *cs])
    lengths = _LinearSolveTuple(*(len(c) for c in new_consts))
    outs = linear_solve_p.bind(*(c for cs in new_consts for c in cs), *b,
                               const_lengths=lengths, jaxprs=_LinearSolveTuple(*new_jaxprs))
    return outs, [0] * len(outs)


abstract_eval_rules[linear_solve_p] = _abstract
register_lowering(linear_solve_p, _lowering)
jvp_rules[linear_solve_p] = _jvp
transpose_rules[linear_solve_p] = _transpose
batch_rules[linear_solve_p] = _batch
linear_primitives.add(linear_solve_p)
