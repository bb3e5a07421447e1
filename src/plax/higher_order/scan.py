"""scan and map: the ``scan`` primitive, a loop over the leading axis of its inputs.

``scan_p.bind(*consts, *init, *xs, jaxpr, length, reverse, unroll, num_consts,
num_carry, linear)`` runs ``carry, y = jaxpr(*consts, *carry, *x)`` for each slice
``x`` of ``xs`` (from the end when ``reverse``) and returns the final carry and
the ``y``s stacked. ``jaxpr`` is const-free; ``linear`` marks, per operand,
those a transformation knows to be linear (shown by the printer only).

Rules: jvp carries tangents (a fixed point finds which carries have them);
partial evaluation splits the body into a known scan, whose residuals are
its stacked outputs (those computed from the consts alone are computed once,
outside the loop), and an unknown scan consuming them; transpose is a scan
the other way over the cotangents, accumulating the cotangents of the consts
in its carry; vmap batches the body (a fixed point finds the batched
carries); DCE drops unused outputs and the carries they need, to a fixed
point. The lowering is a ``while`` over the step index with dynamic slices
and updates, ``unroll`` steps per trip.
"""
from __future__ import annotations

import numpy as np

from plax import tree_util
from plax.core.hi_types import hi_value_types
from plax.core.source_info import flat_arg_names, fun_name
from plax.core import dtypes
from plax.core.config import config
from plax.core.dce import dce_closed, jaxpr_has_effects
from plax.core.jaxpr import ClosedJaxpr, Var
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, dce_rules, discharge_rules,
                             is_undefined,
                             jvp_rules, not_mapped, param_printers, partial_eval_rules,
                             register_lowering, tangent_aval, transpose_rules)
from plax.core.sharding_types import with_dim, with_entry, without_dim
from plax.core.trace import aval_text, concrete_or_error, get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import prng as _prng
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.ad_util import add_tangents, instantiate, zeros_like_aval
from plax.first_order.batch_util import move_batch_dim, moveaxis
from plax.core.effects import check_allowed, control_flow_allowed_effects, jaxpr_effects
from plax.higher_order import ref_effects
from plax.higher_order.loops import lower_carry
from plax.core.hi_types import hi_value_types, lower_tree, raise_tree
from plax.higher_order.bodies import (as_array, avals_of, carry_fixed_point,
                                          check_carry, closed_call, forwarded_inputs,
                                          hoist_consts, index_groups, permute_body,
                                          promote_weak_inits, same_type, split, trace_body,
                                          trace_closed, wrapper_for)
from plax.higher_order.loops import while_loop
from plax.higher_order.call import closed_call_p
from plax.lowering.inline import lower_fun
from plax.transforms.discharge import run_discharged
from plax.transforms.toolkit import batch_jaxpr, jvp_jaxpr, partial_eval_jaxpr, transpose_jaxpr
from plax.transforms.vmap import AxisData, batch_flat
from plax.core.tracebacks import api_boundary

__all__ = ["scan", "map", "scan_p"]

scan_p = Primitive("scan", multiple_results=True)


# --- the public functions -----------------------------------------------------------------
def _slice_type(aval):
    """The type of one iteration's slice of an ``xs`` leaf (whose leading axis, scanned over,
    must not be split over an Explicit mesh axis)."""
    if aval._sharding is not None and aval._sharding.spec[0] is not None:
        raise ValueError(f"0th dimension of all xs should be replicated. Got "
                         f"{aval._sharding.spec}: reshard the xs (plax.sharding.reshard) so "
                         "that the scanned axis is not split.")
    return without_dim(aval, 0)


@api_boundary
def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
    """Loop ``carry, y = f(carry, x)`` over the leading axis of ``xs`` (pytrees), returning
    the final carry and the stacked ``y``s. ``length`` is needed when ``xs`` is None."""
    if not callable(f):
        raise TypeError("lax.scan: f argument should be a callable.")
    if hi_value_types:
        ref_effects.refuse_aliased_references(
            tree_util.tree_leaves((init, xs)), lambda: flat_arg_names(f, (init, xs), {}),
            fun_name(f), "scan")
    ref_effects.refuse_carried_references("scan", init)
    lowered = lower_tree(init)
    if lowered is not None or hi_value_types:  # hi values in the carry or ys: as lo values
        # (one wrapper per body, so that its trace is reused from call to call)
        raising = lowered is not None
        lo_body = wrapper_for(f, f"scan lo body {raising}", lambda get: _lo_body(get, raising))
        carry, ys = _scan_refs(lo_body, init if lowered is None else lowered, xs, length,
                               reverse, unroll)
        n = length if length is not None else get_aval(tree_util.tree_leaves(xs)[0]).shape[0]
        return raise_tree(carry), raise_tree(ys, stacked=n)
    return _scan_refs(f, init, xs, length, reverse, unroll)


def _lo_body(get_f, raising: bool):
    """A scan body over lo values: its carry raised to hi values first when ``raising``, and
    the hi values among its results lowered."""
    def lo_body(c, x):
        out = get_f()(raise_tree(c) if raising else c, x)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"scan body output must be a pair, got {out}.")
        ref_effects.refuse_carried_references("scan", out[0])  # (before it is lowered)
        return lower_carry(out[0]), lower_carry(out[1])
    return lo_body


def _scan_refs(f, init, xs, length, reverse, unroll):
    # References the body closes over from outside are carried through the loop.
    return ref_effects.with_closed_refs(
        lambda: _scan(f, init, xs, length, reverse, unroll),
        lambda refs: _scan_carrying_refs(refs, f, init, xs, length, reverse, unroll))


def _scan_carrying_refs(refs, f, init, xs, length, reverse, unroll):
    # A writer (a log) is not carried: each iteration starts it empty and what it wrote
    # comes out as ys, stacked along the iterations, then is added to it.
    carried = [r for r in refs if not ref_effects.is_writer(r)]
    writers = [r for r in refs if ref_effects.is_writer(r)]

    def body(carry, x):
        held, c = carry
        with ref_effects.bound(carried + writers, held + ref_effects.read_all(writers)):
            out = f(c, x)
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise TypeError(f"scan body output must be a pair, got {out}.")
            finals = ref_effects.final_values(carried + writers)
        ref_effects.check_types_kept(carried, held, finals[:len(carried)], "scan")
        return (finals[:len(carried)], out[0]), (finals[len(carried):], out[1])

    (held, carry), (written, ys) = _scan(body, (ref_effects.read_all(carried), init), xs,
                                         length, reverse, unroll)
    ref_effects.write_all(carried + writers, held + written)
    return carry, ys


def _scan(f, init, xs, length, reverse, unroll):
    init_leaves, init_tree = tree_util.tree_flatten(init)
    xs_leaves, xs_tree = tree_util.tree_flatten(xs)
    length = _scan_length(xs_leaves, length)
    if config.read("disable_jit"):
        return _python_scan(f, init, xs_leaves, xs_tree, length, reverse)
    unroll = concrete_or_error(None, unroll,
                               "The `unroll` argument to `scan` expects a concrete `int` or "
                               "`bool` value.")
    if isinstance(unroll, (bool, np.bool_)):
        unroll = max(length, 1) if unroll else 1
    if not isinstance(unroll, (int, np.integer)):
        raise TypeError(f"`unroll` must be a `bool` or a non-negative `int`, got {unroll!r}.")
    unroll = int(unroll)
    if unroll < 0:
        raise ValueError("`unroll` must be a `bool` or a non-negative `int`.")
    in_tree = tree_util.tree_structure((init, xs))
    x_avals = [_slice_type(a) for a in avals_of(xs_leaves)]

    def trace(carry_avals):
        closed, out_tree = trace_body(f, in_tree, list(carry_avals) + x_avals, "scan body")
        check_allowed(jaxpr_effects(closed), control_flow_allowed_effects, "in `scan`")
        # The pair is read off the structure: no node of the body's is rebuilt from stand-ins.
        root = out_tree.node_data()
        halves = out_tree.children()
        if root is None or not issubclass(root[0], (tuple, list)) or len(halves) != 2:
            shown = tree_util.tree_unflatten(out_tree, [_Shown(aval_text(a))
                                                        for a in closed.out_avals])
            raise TypeError(f"scan body output must be a pair, got {shown}.")
        return closed, out_tree, halves[0], halves[1]

    init_avals = avals_of(init_leaves)
    closed, out_tree, carry_tree, ys_tree = trace(init_avals)
    n = len(init_leaves)
    if carry_tree == init_tree:
        init_leaves, changed = promote_weak_inits(init_leaves, init_avals, closed.out_avals[:n])
        if changed:
            init_avals = avals_of(init_leaves)
            closed, out_tree, carry_tree, ys_tree = trace(init_avals)
    check_carry("scan body", f, init_tree, init_avals, carry_tree,
                closed.out_avals[:carry_tree.num_leaves], init)
    (body,), consts = hoist_consts([closed])
    body, consts, carry_in, moved = _carries_as_consts(body, consts, init_leaves)
    # A y that is its x slice unchanged is xs itself: not copied through the loop.
    nk, nc = len(consts), len(carry_in)
    x_fwd = [k - nk - nc if k is not None and k >= nk + nc else None
             for k in forwarded_inputs(body)[nc:]]
    if any(k is not None for k in x_fwd):
        body, _ = dce_closed(body, [True] * nc + [k is None for k in x_fwd], instantiate=True)
    operands = [*consts, *carry_in, *xs_leaves]
    outs = scan_p.bind(*operands, reverse=bool(reverse), length=length, jaxpr=body,
                       num_consts=nk, num_carry=nc, linear=(False,) * len(operands),
                       unroll=unroll)
    carry_it, ys_it = iter(outs[:nc]), iter(outs[nc:])
    carry = [as_array(init_leaves[i]) if m else next(carry_it) for i, m in enumerate(moved)]
    ys = [next(ys_it) if k is None else as_array(xs_leaves[k]) for k in x_fwd]
    # The body's own pair (a tuple or a list) holds the results.
    return tree_util.tree_unflatten(out_tree, carry + ys)


class _Shown(str):
    """Text that reprs as itself (so a pytree of them prints without quotes)."""

    __repr__ = str.__str__


def _carries_as_consts(body, consts, init):
    """A carry the body returns unchanged is read-only: it becomes a const (cheaper to
    batch and to differentiate). Returns the new body, consts, carries, and per carry
    whether it moved."""
    nk, nc = len(consts), len(init)
    moved = [f == nk + i for i, f in enumerate(forwarded_inputs(body)[:nc])]
    if not any(moved):
        return body, consts, list(init), moved
    ny = len(body.out_avals) - nc
    body, _ = dce_closed(body, [not m for m in moved] + [True] * ny, instantiate=True)
    n_in = len(body.in_avals)
    order = ([nk + i for i, m in enumerate(moved) if m] + list(range(nk))
             + [nk + i for i, m in enumerate(moved) if not m] + list(range(nk + nc, n_in)))
    body = permute_body(body, order)
    new_consts = [c for c, m in zip(init, moved) if m] + list(consts)
    return body, new_consts, [c for c, m in zip(init, moved) if not m], moved


def _scan_length(xs_leaves, length) -> int:
    try:
        lengths = [np.shape(x)[0] if not hasattr(x, "aval") else x.aval.shape[0]
                   for x in xs_leaves]
    except IndexError:
        shown = ", ".join(str(x) for x in xs_leaves if np.ndim(x) == 0)
        raise ValueError(f"scan got value with no leading axis to scan over: {shown}.") from None
    if length is not None:
        length = concrete_or_error(
            int, length, "The `length` argument to `scan` expects a concrete `int` value. For "
            "scan-like iteration with a dynamic length, use `while_loop` or `fori_loop`.")
        if not all(length == n for n in lengths):
            raise ValueError(f"scan got `length` argument of {length} which disagrees with "
                             f"leading axis sizes {lengths}.")
        return length
    if len(set(lengths)) > 1:
        raise ValueError("scan got values with different leading axis sizes: "
                         f"{', '.join(str(n) for n in lengths)}.")
    if not lengths:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    return lengths[0]


def _python_scan(f, init, xs_leaves, xs_tree, length, reverse):
    """``scan`` run step by step in Python (under ``disable_jit``)."""
    if length == 0:
        raise ValueError("zero-length scan is not supported in disable_jit() mode because "
                         "the output type is unknown.")
    carry, ys = init, []
    steps = range(length - 1, -1, -1) if reverse else range(length)
    for i in steps:
        x = tree_util.tree_unflatten(
            xs_tree, [_slicing.index_in_dim(leaf, i, keepdims=False) for leaf in xs_leaves])
        carry, y = f(carry, x)
        ys.append(y)
    if reverse:
        ys.reverse()
    stacked = tree_util.tree_map(lambda *ys: _shapes.concatenate(
        [_shapes.expand_dims(as_array(y), (0,)) for y in ys], 0), *ys)
    return carry, stacked


@api_boundary
def map(f, xs, *, batch_size=None):
    """``f`` applied to each slice of ``xs`` along its leading axis, as a ``scan``; with
    ``batch_size``, ``batch_size`` slices at a time are vectorized (``vmap``)."""
    if not batch_size:  # None or 0: one slice at a time
        _, ys = scan(wrapper_for(f, "map", _map_body), (), xs)
        return ys
    batch_size = int(batch_size)
    leaves, tree = tree_util.tree_flatten(xs)
    length = _scan_length(leaves, None)
    num_batches, rest = divmod(length, batch_size)
    vf = wrapper_for(f, f"map batched {batch_size}", lambda get: _vmapped(get, batch_size))
    scanned = [_shapes.reshape(_slicing.slice_in_dim(x, 0, num_batches * batch_size, axis=0),
                               (num_batches, batch_size) + get_aval(x).shape[1:])
               for x in leaves]
    ys = []
    if num_batches:
        _, ys = scan(wrapper_for(vf, "map", _map_body), (),
                     tree_util.tree_unflatten(tree, scanned))
        ys = tree_util.tree_map(
            lambda y: _shapes.reshape(y, (num_batches * batch_size,) + get_aval(y).shape[2:]), ys)
    if rest:
        tail = tree_util.tree_unflatten(
            tree, [_slicing.slice_in_dim(x, num_batches * batch_size, length, axis=0)
                   for x in leaves])
        tail_ys = _vmapped(lambda: f, rest)(tail)
        ys = tail_ys if not num_batches else tree_util.tree_map(
            lambda a, b: _shapes.concatenate([a, b], 0), ys, tail_ys)
    return ys


def _map_body(get_fun):
    def body(carry, x):
        return carry, get_fun()(x)
    return body


def _vmapped(get_fun, size: int):
    """``f`` mapped over the leading axis of its (pytree) argument, of size ``size``."""
    def run(x):
        leaves, tree = tree_util.tree_flatten(x)
        box = []

        def flat(*xs):
            out, out_tree = tree_util.tree_flatten(get_fun()(tree_util.tree_unflatten(tree, xs)))
            box.append(out_tree)
            return out

        outs, dims = batch_flat(flat, leaves, [0] * len(leaves), AxisData(None, size), "map")
        return tree_util.tree_unflatten(box[0], [move_batch_dim(o, d, 0, size)
                                                 for o, d in zip(outs, dims)])
    return run


# --- abstract evaluation ------------------------------------------------------------------
def _abstract(*avals, reverse, length, jaxpr, num_consts, num_carry, linear, unroll):
    consts, carry, xs = split(avals, [num_consts, num_carry])
    bad = [x for x in xs if not x.shape or x.shape[0] != length]
    if bad:
        raise TypeError(f"scan of length {length} got scanned operands of types "
                        f"({', '.join(x.str_short() for x in bad)}).")
    given = consts + carry + [without_dim(x, 0) for x in xs]
    ins = jaxpr.in_avals
    if len(ins) != len(given) or not all(same_type(a, b) for a, b in zip(ins, given)):
        raise TypeError(f"scan jaxpr takes ({', '.join(a.str_short() for a in ins)}) but is "
                        f"given ({', '.join(a.str_short() for a in given)}).")
    outs = jaxpr.out_avals
    if not all(same_type(a, b) for a, b in zip(outs[:num_carry], carry)):
        raise TypeError("scan jaxpr must return the carry types "
                        f"({', '.join(a.str_short() for a in carry)}), got "
                        f"({', '.join(a.str_short() for a in outs[:num_carry])}).")
    ys = [with_dim(y, 0, length)
          for y in outs[num_carry:]]
    return list(outs[:num_carry]) + ys


abstract_eval_rules[scan_p] = _abstract
param_printers[scan_p] = lambda p: {k: p[k] for k in (
    "jaxpr", "length", "linear", "num_carry", "num_consts", "reverse", "unroll")}


# --- jvp: tangents carried along, the tangent scan fused with the primal one ---------------
def _jvp(primals, tangents, *, jaxpr, num_consts, num_carry, linear, **params):
    nk, nc = num_consts, num_carry
    consts, init, xs = split(primals, [nk, nc])
    const_t, init_t, xs_t = split(tangents, [nk, nc])
    const_nz = [type(t) is not Zero for t in const_t]
    xs_nz = [type(t) is not Zero for t in xs_t]
    carry_nz = [type(t) is not Zero and dtypes.is_inexact(get_aval(c).dtype)
                for t, c in zip(init_t, init)]
    ny = len(jaxpr.out_avals) - nc

    def jvp_for(carry_nz):
        return jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz, instantiate=carry_nz + [False] * ny,
                         description="jvp(scan)")

    carry_nz = carry_fixed_point(carry_nz, lambda nz: jvp_for(nz)[1][:nc])
    body, out_nz = jvp_for(carry_nz)
    ys_nz = list(out_nz[nc:])
    (body,), extra = hoist_consts([body])
    e, nx = len(extra), len(xs)
    nkt, nct, nxt = sum(const_nz), sum(carry_nz), sum(xs_nz)
    # The jvp body takes (extra, consts, carry, xs, const tangents, carry tangents, xs
    # tangents) and returns (carry, ys, carry tangents, ys tangents): regroup both so the
    # tangents sit with their primals.
    groups = index_groups([e, nk, nc, nx, nkt, nct, nxt])
    order = groups[0] + groups[1] + groups[4] + groups[2] + groups[5] + groups[3] + groups[6]
    nyt = sum(ys_nz)
    out_groups = index_groups([nc, ny, nct, nyt])
    body = permute_body(body, order, out_groups[0] + out_groups[2] + out_groups[1] + out_groups[3])
    init_t_in = [instantiate(t) for t, nz in zip(init_t, carry_nz) if nz]
    operands = [*extra, *consts, *(t for t in const_t if type(t) is not Zero), *init, *init_t_in,
                *xs, *(t for t in xs_t if type(t) is not Zero)]
    lin = ([False] * (e + nk) + [True] * nkt + [False] * nc + [True] * nct + [False] * nx
           + [True] * nxt)
    outs = scan_p.bind(*operands, jaxpr=body, num_consts=e + nk + nkt, num_carry=nc + nct,
                       linear=tuple(lin), **params)
    carry, carry_t, ys, ys_t = split(outs, [nc, nct, ny])
    carry_t, ys_t = iter(carry_t), iter(ys_t)
    out_avals = [get_aval(o) for o in carry + ys]
    nz = carry_nz + ys_nz
    tans = [next(carry_t) if z else Zero(tangent_aval(a)) for a, z in zip(out_avals[:nc], nz[:nc])]
    tans += [next(ys_t) if z else Zero(tangent_aval(a)) for a, z in zip(out_avals[nc:], nz[nc:])]
    return carry + ys, tans


jvp_rules[scan_p] = _jvp


# --- partial evaluation: a known scan stacking residuals, an unknown scan using them -------
def _split_body(params, unknowns):
    """Split the body for the ``unknowns`` operands; carries that become unknown on a later
    step are unknown from the start. Returns the split and the unknown carries."""
    jaxpr, nk, nc = params["jaxpr"], params["num_consts"], params["num_carry"]
    const_uk, carry_uk, xs_uk = split(unknowns, [nk, nc])
    ny = len(jaxpr.out_avals) - nc

    def split_for(carry_uk):
        return partial_eval_jaxpr(jaxpr, const_uk + carry_uk + xs_uk,
                                  instantiate=carry_uk + [False] * ny, description="scan body")

    carry_uk = carry_fixed_point(carry_uk, lambda uk: split_for(uk)[2][:nc])
    known, unknown, out_uk, num_res = split_for(carry_uk)
    return (known, unknown, list(out_uk), num_res), carry_uk


def _split_scan(args, unknowns, params, run_known, eval_known):
    """Partial evaluation of a scan whose ``unknowns`` operands are unknown: the known scan
    runs through ``run_known(prim, args, params)`` (its consts-only residuals through
    ``eval_known(closed, args)``), and the unknown scan is described for the caller to
    stage or transpose.

    Returns ``(out_unknowns, known_outs, uk_operands, uk_params, uk_sources)``; an unknown
    operand's source is the index of the operand of this scan it is (None for residuals).
    """
    (known, unknown, out_uk, num_res), carry_uk = _split_body(params, unknowns)
    nk, nc = params["num_consts"], params["num_carry"]
    const_uk, _, xs_uk = split(unknowns, [nk, nc])
    consts, init, xs = split(args, [nk, nc])
    n_kc = const_uk.count(False)
    n_known_out = len(known.out_avals) - num_res
    invariant = _loop_invariant_outputs(known, n_kc)[n_known_out:]
    # Residuals that are a known slice of xs as it is: xs itself, not a stacked copy.
    n_kcarry = carry_uk.count(False)
    first_x = n_kc + n_kcarry
    known_xs = [x for x, u in zip(xs, xs_uk) if not u]
    x_res = [f - first_x if f is not None and f >= first_x else None
             for f in forwarded_inputs(known)[n_known_out:]]
    # Residuals computed from the consts alone: once, outside the loop.
    known_consts = [c for c, u in zip(consts, const_uk) if not u]
    known_init = [c for c, u in zip(init, carry_uk) if not u]
    hoisted = []
    if any(invariant):
        inv_jaxpr, used = dce_closed(known, [False] * n_known_out + invariant)
        hoisted = eval_known(inv_jaxpr, [a for a, u in zip(known_consts + known_init + known_xs,
                                                           used) if u])
    loop_body, _ = dce_closed(
        known, [True] * n_known_out + [not i and f is None for i, f in zip(invariant, x_res)],
        instantiate=True)
    (loop_body,), extra = hoist_consts([loop_body])
    known_in = [*extra, *known_consts, *known_init, *known_xs]
    known_out = run_known(scan_p, known_in, dict(
        params, jaxpr=loop_body, num_consts=len(extra) + n_kc, num_carry=n_kcarry,
        linear=(False,) * len(known_in)))
    stacked = known_out[n_known_out:]
    # The unknown scan: invariant residuals join its consts, stacked ones its xs.
    inv_idx = [i for i, inv in enumerate(invariant) if inv]
    var_idx = [i for i, (inv, f) in enumerate(zip(invariant, x_res)) if not inv and f is None]
    fwd_idx = [i for i, f in enumerate(x_res) if f is not None]
    n_ukc, n_ucarry, n_ux = sum(const_uk), sum(carry_uk), sum(xs_uk)
    groups = index_groups([num_res, n_ukc, n_ucarry, n_ux])
    unknown = permute_body(unknown, inv_idx + groups[1] + groups[2] + var_idx + fwd_idx + groups[3])
    n_res = len(hoisted), len(stacked) + len(fwd_idx)
    uk_in = [*hoisted, *(c for c, u in zip(consts, const_uk) if u),
             *(c for c, u in zip(init, carry_uk) if u), *stacked,
             *(known_xs[x_res[i]] for i in fwd_idx), *(x for x, u in zip(xs, xs_uk) if u)]
    uk_src = ([None] * n_res[0] + [i for i, u in enumerate(const_uk) if u]
              + [nk + i for i, u in enumerate(carry_uk) if u] + [None] * n_res[1]
              + [nk + nc + i for i, u in enumerate(xs_uk) if u])
    lin = ([False] * n_res[0] + [True] * (n_ukc + n_ucarry) + [False] * n_res[1]
           + [True] * n_ux)
    uk_params = dict(params, jaxpr=unknown, num_consts=n_res[0] + n_ukc, num_carry=n_ucarry,
                        linear=tuple(lin))
    return out_uk, known_out[:n_known_out], uk_in, uk_params, uk_src


def _partial_eval(trace, args, params):
    unknowns = [trace.is_unknown(a) for a in args]
    if all(unknowns):
        return trace.stage(scan_p, args, params)
    out_uk, known_out, uk_in, uk_params, _ = _split_scan(args, unknowns, params, trace.known,
                                                         trace.eval_jaxpr)
    uk_out = trace.stage(scan_p, uk_in, uk_params) if any(out_uk) else []
    k, u = iter(known_out), iter(uk_out)
    return [next(u) if unk else next(k) for unk in out_uk]


def _loop_invariant_outputs(closed: ClosedJaxpr, n_consts: int) -> list:
    """Per output of a scan body, whether it depends on the consts (the first
    ``n_consts`` inputs) only, not on the carry or the scanned slices."""
    j = closed.jaxpr
    varying = set(j.invars[n_consts:])
    for e in j.eqns:
        if any(isinstance(v, Var) and v in varying for v in e.invars):
            varying.update(e.outvars)
    return [not (isinstance(v, Var) and v in varying) for v in j.outvars]


partial_eval_rules[scan_p] = _partial_eval


# --- transpose: a scan the other way over the cotangents -------------------------------------
def _transpose(cts, *args, **params):
    unknowns = [is_undefined(a) for a in args]
    _, carry_uk = _split_body(params, unknowns)
    if all(carry_uk):
        return _transpose_linear(cts, *args, **params)
    # Some carries do not depend on the linear inputs (a jvp scan inside a checkpoint or a
    # jit carries primals and tangents together): run them forward as a scan of their own,
    # then transpose the linear rest.
    out_uk, _, uk_in, uk_params, uk_src = _split_scan(
        args, unknowns, params, lambda prim, a, p: prim.bind(*a, **p),
        lambda closed, a: closed_call(closed)(*a))
    ct_in = _transpose_linear([c for c, u in zip(cts, out_uk) if u], *uk_in, **uk_params)
    result = [None] * len(args)
    for c, src in zip(ct_in, uk_src):
        if src is not None:
            result[src] = c
    return result


def _transpose_linear(cts, *args, jaxpr, num_consts, num_carry, linear, reverse, **params):
    nk, nc = num_consts, num_carry
    consts, init, xs = split(args, [nk, nc])
    ct_carry, ct_ys = split(cts, [nc])[:2]
    const_lin = [is_undefined(c) for c in consts]
    xs_lin = [is_undefined(x) for x in xs]
    # Carries are linear (one given as a value is a zero initial tangent: its cotangent
    # is not needed).
    ys_nz = [type(c) is not Zero for c in ct_ys]
    body_t = transpose_jaxpr(jaxpr, const_lin + [True] * nc + xs_lin, [True] * nc + ys_nz,
                             description="transpose(scan)")
    res_consts = [c for c, lin in zip(consts, const_lin) if not lin]
    res_xs = [x for x, lin in zip(xs, xs_lin) if not lin]
    lin_const_avals = [c.aval for c in consts if is_undefined(c)]
    n_rc, n_lc, n_rx = len(res_consts), len(lin_const_avals), len(res_xs)
    ct_carry = [instantiate(c) for c in ct_carry]
    ct_ys_nz = [c for c in ct_ys if type(c) is not Zero]

    def step(*a):
        rc, acc, cc, rx, cy = split(a, [n_rc, n_lc, nc, n_rx])
        outs = closed_call(body_t)(*rc, *rx, *cc, *cy)
        ct_lc, ct_c, ct_lx = split(outs, [n_lc, nc])
        return [add_tangents(x, y) for x, y in zip(acc, ct_lc)] + ct_c + ct_lx

    slice_avals = [without_dim(a, 0) for a in avals_of(res_xs + ct_ys_nz)]
    in_avals = avals_of(res_consts) + lin_const_avals + avals_of(ct_carry) + slice_avals
    body = trace_closed(step, in_avals, "transpose(scan)")
    (body,), extra = hoist_consts([body])
    acc0 = [zeros_like_aval(a) for a in lin_const_avals]
    operands = [*extra, *res_consts, *acc0, *ct_carry, *res_xs, *ct_ys_nz]
    n_ex = len(extra)
    lin = ([False] * (n_ex + n_rc) + [True] * (n_lc + nc) + [False] * n_rx
           + [True] * len(ct_ys_nz))
    outs = scan_p.bind(*operands, jaxpr=body, num_consts=n_ex + n_rc, num_carry=n_lc + nc,
                       linear=tuple(lin), reverse=not reverse, **params)
    ct_consts, ct_init, ct_xs = split(outs, [n_lc, nc])
    ct_consts, ct_xs = iter(ct_consts), iter(ct_xs)
    return ([next(ct_consts) if lin else None for lin in const_lin]
            + [c if is_undefined(a) else None for c, a in zip(ct_init, init)]
            + [next(ct_xs) if lin else None for lin in xs_lin])


transpose_rules[scan_p] = _transpose


# --- batching -----------------------------------------------------------------------------
def _batch(axis, vals, dims, *, jaxpr, num_consts, num_carry, linear, **params):
    nk, nc = num_consts, num_carry
    consts, init, xs = split(vals, [nk, nc])
    const_dims, init_dims, xs_dims = split(dims, [nk, nc])
    # A scanned operand batched along its leading (scan) axis moves its batch next to it.
    xs = [x if d is not_mapped else moveaxis(x, d, 1) for x, d in zip(xs, xs_dims)]
    x_dims = [not_mapped if d is not_mapped else 0 for d in xs_dims]

    def out_dims_for(carry_b):
        return batch_jaxpr(jaxpr, axis, const_dims + [0 if b else None for b in carry_b]
                           + x_dims, description="vmap(scan)")[2]

    carry_b = carry_fixed_point([d is not not_mapped for d in init_dims], lambda b: [
        d is not not_mapped for d in out_dims_for(b)[:nc]])
    carry_dims = [0 if b else not_mapped for b in carry_b]
    ys_dims = [not_mapped if d is not_mapped else 0 for d in out_dims_for(carry_b)[nc:]]
    bj, bconsts, _ = batch_jaxpr(jaxpr, axis, const_dims + carry_dims + x_dims,
                                 out_dims=carry_dims + ys_dims, description="vmap(scan)")
    (body,), extra = hoist_consts([ClosedJaxpr(bj, bconsts)])
    init = [move_batch_dim(c, d, 0, axis.size) if b else c
            for c, d, b in zip(init, init_dims, carry_b)]
    operands = [*extra, *consts, *init, *xs]
    outs = scan_p.bind(*operands, jaxpr=body, num_consts=len(extra) + nk, num_carry=nc,
                       linear=(False,) * len(extra) + tuple(linear), **params)
    return outs, carry_dims + [not_mapped if d is not_mapped else 1 for d in ys_dims]


batch_rules[scan_p] = _batch


# --- dead code: unused outputs, and the carries only they needed ---------------------------
def _dce(used_outputs, eqn):
    p = eqn.params
    jaxpr, nk, nc = p["jaxpr"], p["num_consts"], p["num_carry"]
    if jaxpr_has_effects(jaxpr):
        return [True] * len(eqn.invars), eqn
    if not any(used_outputs):
        return [False] * len(eqn.invars), None
    used_ys = list(used_outputs[nc:])
    used_carry = carry_fixed_point(used_outputs[:nc], lambda used: dce_closed(
        jaxpr, used + used_ys)[1][nk:nk + nc])
    nx = len(eqn.invars) - nk - nc
    body, used_in = dce_closed(jaxpr, used_carry + used_ys,
                               instantiate=[False] * nk + used_carry + [False] * nx)
    used_inputs = used_in[:nk] + used_carry + used_in[nk + nc:]
    if all(used_inputs) and all(used_carry) and all(used_ys):
        return used_inputs, eqn
    new = eqn.replace(
        invars=[v for v, u in zip(eqn.invars, used_inputs) if u],
        outvars=[v for v, u in zip(eqn.outvars, used_carry + used_ys) if u],
        params=dict(p, jaxpr=body, num_consts=sum(used_in[:nk]), num_carry=sum(used_carry),
                    linear=tuple(x for x, u in zip(p["linear"], used_inputs) if u)))
    return used_inputs, new


dce_rules[scan_p] = _dce


# --- lowering: a while over the step index, ``unroll`` steps a trip ------------------------
def _scan_loop(*args, reverse, length, jaxpr, num_consts, num_carry, linear, unroll):
    """The scan as lax ops: a while_loop over blocks of ``unroll`` steps, then the steps
    left over, each reading its slice of ``xs`` and writing its slice of the ``ys``."""
    consts, carry, xs = split(args, [num_consts, num_carry])
    y_avals = jaxpr.out_avals[num_carry:]
    ys = [_prng.filled_keys((length,) + a.shape, a.dtype) if isinstance(a.dtype, dtypes.KeyType)
          else zeros_like_aval(a.update(shape=(length,) + a.shape)) if dtypes.is_extended(a.dtype)
          else _shapes.full((length,) + a.shape, 0, a.dtype, sharding=with_entry(a._sharding, 0))
          for a in y_avals]
    unroll = length if unroll == 0 else max(1, min(unroll, max(length, 1)))
    trips, rest = divmod(length, unroll)
    if unroll > 1 and trips == 1 and rest == 0:  # fully unrolled: no loop at all
        trips, rest = 0, length
    # The body as JAX's scan runs it: a call (a function of its own in the program).
    run = lambda *operands: closed_call_p.bind(*operands, call_jaxpr=jaxpr)

    def step(i, carry, ys):
        index = (length - 1 - i) if reverse else i
        x = [_slicing.dynamic_index_in_dim(v, index, 0, keepdims=False,
                                           allow_negative_indices=False) for v in xs]
        outs = run(*consts, *carry, *x)
        new_ys = [_slicing.dynamic_update_index_in_dim(acc, y, index, 0,
                                                      allow_negative_indices=False)
                  for acc, y in zip(ys, outs[num_carry:])]
        return list(outs[:num_carry]), new_ys

    if trips:
        def body(state):
            i, carry, ys = state
            for _ in range(unroll):
                carry, ys = step(i, carry, ys)
                i = i + np.int32(1)
            return i, carry, ys

        _, carry, ys = while_loop(lambda s: s[0] < np.int32(trips * unroll), body,
                                  (np.int32(0), list(carry), ys))
    for k in range(rest):
        carry, ys = step(np.int32(trips * unroll + k), carry, ys)
    return list(carry) + list(ys)


register_lowering(scan_p, lower_fun(_scan_loop, multiple_results=True))



# --- discharge: references the body writes are carried; those it only reads are consts -----
def _discharge(which, in_avals, out_avals, *args, reverse, length, jaxpr, num_consts,
               num_carry, linear, unroll):
    from plax.higher_order.cond import writes_input
    consts, carry, xs = split(list(args), [num_consts, num_carry])
    cwhich = which[:num_consts]
    if any(which[num_consts:]):
        raise NotImplementedError("scan over a mutable array reference as a carry or a "
                                  "scanned operand cannot be discharged.")
    written = [bool(w) and writes_input(jaxpr, k) for k, w in enumerate(cwhich)]

    def body(state, x):
        held, c = state
        it = iter(held)
        ins = [next(it) if w else v for v, w in zip(consts, written)]
        outs, finals = run_discharged(jaxpr, cwhich, ins + list(c) + list(x))
        finals = iter(finals)
        held = [f for f, w in zip(finals, (w for w, m in zip(written, cwhich) if m)) if w]
        return (held, outs[:num_carry]), outs[num_carry:]

    (held, c), ys = scan(body, ([v for v, w in zip(consts, written) if w], list(carry)),
                         list(xs), length=length, reverse=reverse, unroll=unroll)
    held = iter(held)
    return ([next(held) if w else None for w in written] + [None] * (len(args) - num_consts),
            list(c) + list(ys))


discharge_rules[scan_p] = _discharge
