"""The key-reuse checker (``jax_debug_key_reuse``): a typed PRNG key may be consumed once.

Drawing bits from a key, splitting it or folding data into it *consumes* it;
using a consumed key again gives correlated random numbers, a silent bug.
With the flag on (``plax.config.update("jax_debug_key_reuse", True)`` or
``with plax.debug_key_reuse(True):``) plax raises ``KeyReuseError`` naming
where the key was first consumed:

* eagerly: a concrete key array remembers that it was consumed (by a jitted
  call or by a ``random_*`` primitive) and may not be consumed again;
* in a jaxpr (a jitted function, or ``make_jaxpr``): every element of every
  key value is tracked through the equations. ``random_bits`` and
  ``random_split`` consume their key (``fold_in`` does not, as in JAX); static slicing,
  reshapes, broadcasts, transposes and concatenation pass elements through
  (``keys[0]`` and ``keys[1]`` are different keys); selection and dynamic
  indexing consume their key operands and give fresh keys; ``random_clone``,
  ``random_wrap`` and ``random_seed`` give fresh keys; ``key_data`` consumes
  nothing. Calls (jit, checkpoint, custom derivatives) are followed inside; a
  ``cond`` consumes what any branch consumes; a loop body is checked for two
  iterations, so a body consuming a key it did not make fails.

Only typed keys are checked, as in JAX; legacy ``uint32[2]`` keys are plain data.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.caches import WeakKeyCache
from plax.core.config import config
from plax.core.errors import KeyReuseError
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Literal, open_jaxpr, subjaxprs
from plax.core.rules import key_reuse_rules
from plax.higher_order.cond import cond_p
from plax.higher_order.loops import while_p
from plax.higher_order.scan import scan_p
from plax.first_order import comparison as _comparison
from plax.first_order import indexing as _indexing
from plax.first_order import prng as _prng
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.prng import KEY_REUSE_ADVICE, call_site, consumed_at, mark_consumed, \
    previously_consumed
from plax.first_order.utility import copy_p, optimization_barrier_p

__all__ = ["enabled", "check_jaxpr", "check_call"]


def enabled() -> bool:
    return bool(config.read("debug_key_reuse"))


def _is_key(aval) -> bool:
    return isinstance(getattr(aval, "dtype", None), dtypes.KeyType)


# --- in a jaxpr: every key element tracked ---------------------------------------------------------
class _State:
    """Element ids handed out so far, and where each consumed one was consumed.

    ``site`` is the source location of the equation of the checked jaxpr itself that is
    being analysed: consumption inside its calls is charged to it (a jitted sampler's body
    was traced once, wherever it was first called; the user's line is the call site)."""

    def __init__(self):
        self.next = 0
        self.consumed: dict = {}
        self.depth = 0
        self.site = "an unknown place"

    def fresh(self, shape) -> np.ndarray:
        n = int(np.prod(shape, dtype=np.int64))
        ids = np.arange(self.next, self.next + n, dtype=np.int64).reshape(shape)
        self.next += n
        return ids

    def copy(self) -> "_State":
        other = _State()
        other.next, other.consumed = self.next, dict(self.consumed)
        other.depth, other.site = self.depth, self.site
        return other

    def sink(self, ids, prim_name: str, index: int) -> None:
        for e in ids.ravel().tolist():
            where = self.consumed.get(e)
            if where is not None:
                raise KeyReuseError(f"In {prim_name}, argument {index} is already consumed: it was "
                                    f"consumed at {where}. {KEY_REUSE_ADVICE}")
        for e in ids.ravel().tolist():
            self.consumed[e] = self.site


def _fresh_outs(eqn, ins, state):
    """Rule: nothing is consumed, and key outputs are fresh keys."""
    return [state.fresh(v.aval.shape) if _is_key(v.aval) else None for v in eqn.outvars]


def _sinking(*positions):
    """Rule: the key operands at ``positions`` (all key operands when empty) are consumed."""
    def rule(eqn, ins, state):
        for i, ids in enumerate(ins):
            if ids is not None and (not positions or i in positions):
                state.sink(ids, eqn.primitive.name, i)
        return _fresh_outs(eqn, ins, state)
    return rule


def _moving(fn):
    """Rule for a static data-movement op: ``fn(ids, **params)`` moves the ids of the one key
    operand as the op moves its elements."""
    def rule(eqn, ins, state):
        return [fn(ins[0], **eqn.params)]
    return rule


def _reshape(ids, *, new_sizes, dimensions, **_):
    if dimensions is not None:
        ids = np.transpose(ids, dimensions)
    return ids.reshape(new_sizes)


def _broadcast(ids, *, shape, broadcast_dimensions, **_):
    expanded = np.expand_dims(ids, tuple(d for d in range(len(shape))
                                         if d not in broadcast_dimensions))
    return np.broadcast_to(expanded, shape)


def _slice(ids, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * len(start_indices)
    return ids[tuple(slice(s, e, st) for s, e, st in zip(start_indices, limit_indices, strides))]


def _concatenate(eqn, ins, state):
    ins = [state.fresh(v.aval.shape) if ids is None else ids for v, ids in zip(eqn.invars, ins)]
    return [np.concatenate(ins, axis=eqn.params["dimension"])]


def _passing(eqn, ins, state):
    """Rule: outputs are the operands, unchanged (copies, barriers)."""
    return list(ins[:len(eqn.outvars)])


key_reuse_rules.update({
    # fold_in does not consume its key (as in JAX): fold_in(key, i) for many i is the usual
    # way to derive a stream of keys.
    _prng.random_bits_p: _sinking(0), _prng.random_split_p: _sinking(0),
    _prng.random_fold_in_p: _fresh_outs,
    _prng.random_unwrap_p: lambda eqn, ins, state: [None],
    _prng.random_wrap_p: _fresh_outs, _prng.random_seed_p: _fresh_outs,
    _prng.random_clone_p: _fresh_outs,
    _comparison.eq_p: lambda eqn, ins, state: [None],
    _comparison.ne_p: lambda eqn, ins, state: [None],
    _shapes.reshape_p: _moving(_reshape),
    _shapes.broadcast_in_dim_p: _moving(_broadcast),
    _shapes.transpose_p: _moving(lambda ids, permutation: np.transpose(ids, permutation)),
    _shapes.squeeze_p: _moving(lambda ids, dimensions: np.squeeze(ids, tuple(dimensions))),
    _shapes.rev_p: _moving(lambda ids, dimensions: np.flip(ids, tuple(dimensions))),
    _shapes.concatenate_p: _concatenate,
    _slicing.slice_p: _moving(_slice),
    # Which elements these pick is known only at run time: their key operands are consumed.
    _comparison.select_n_p: _sinking(), _slicing.dynamic_slice_p: _sinking(),
    _slicing.dynamic_update_slice_p: _sinking(), _indexing.gather_p: _sinking(),
    _indexing.scatter_p: _sinking(),
    copy_p: _passing, optimization_barrier_p: _passing,
})


def _analyse(jaxpr: Jaxpr, in_ids: list, state: _State) -> list:
    """The ids of ``jaxpr``'s outputs given those of its constvars and invars (``in_ids``,
    None for non-key values); raises KeyReuseError at the first reuse."""
    env = {}
    for v, ids in zip(list(jaxpr.constvars) + list(jaxpr.invars), in_ids):
        if _is_key(v.aval):
            env[v] = state.fresh(v.aval.shape) if ids is None else ids

    def read(v):
        return None if isinstance(v, Literal) else env.get(v)

    state.depth += 1
    try:
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            if all(i is None for i in ins) and not any(_is_key(v.aval) for v in eqn.outvars):
                continue
            if state.depth == 1:
                info = eqn.source_info
                state.site = (info.location() if info is not None else "") or "an unknown place"
            outs = _rule_for(eqn)(eqn, ins, state)
            for v, ids in zip(eqn.outvars, outs):
                if _is_key(v.aval):
                    env[v] = state.fresh(v.aval.shape) if ids is None else ids
    finally:
        state.depth -= 1
    return [read(v) for v in jaxpr.outvars]


def _rule_for(eqn):
    rule = key_reuse_rules.get(eqn.primitive)
    if rule is not None:
        return rule
    subs = list(subjaxprs(eqn.params))
    if len(subs) == 1 and len(open_jaxpr(subs[0]).invars) == len(eqn.invars):
        return _call  # jit, checkpoint, custom_jvp/vjp calls: followed inside
    return _fresh_outs  # anything else: fresh keys out, nothing consumed


def _call_body(body, in_ids: list, state: _State) -> list:
    jaxpr = open_jaxpr(body)  # its constants (if any) are fresh keys of its own
    return _analyse(jaxpr, [None] * len(jaxpr.constvars) + list(in_ids), state)


def _call(eqn, ins, state):
    return _call_body(next(iter(subjaxprs(eqn.params))), ins, state)


def _joined(outs_per_branch: list) -> list:
    """Outputs of alternatives: an output keeps its ids when every alternative gives the same
    ones (a key passed through), else it is a fresh key (None)."""
    joined = []
    for options in zip(*outs_per_branch):
        same = all(o is not None and options[0] is not None and o.shape == options[0].shape
                   and np.array_equal(o, options[0]) for o in options)
        joined.append(options[0] if same else None)
    return joined


def _cond(eqn, ins, state):
    consumed, outs = dict(state.consumed), []
    for branch in eqn.params["branches"]:
        trial = state.copy()
        outs.append(_call_body(branch, ins[1:], trial))
        consumed.update({e: w for e, w in trial.consumed.items() if e not in consumed})
        state.next = max(state.next, trial.next)
    state.consumed = consumed
    return _joined(outs)


def _repeated(loop: str, run, carry_in: list, state) -> list:
    """Run a loop body's analysis for one iteration, then check a second one on a copy
    (what a body consumes from outside, or from a carry it passes on, fails there)."""
    carry_out = run(carry_in, state)
    try:
        trial = state.copy()
        run(carry_out, trial)
    except KeyReuseError as e:
        raise KeyReuseError(f"{loop} body function leads to key reuse when repeatedly executed: "
                            f"{e}") from None
    return carry_out


def _while(eqn, ins, state):
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cond_consts, body_consts, init = ins[:nc], ins[nc:nc + nb], ins[nc + nb:]

    def run(carry, st):
        _call_body(p["cond_jaxpr"], cond_consts + list(carry), st)
        return _call_body(p["body_jaxpr"], body_consts + list(carry), st)

    out = _repeated("while_loop", run, init, state)
    return _joined([init, out])


def _scan(eqn, ins, state):
    p = eqn.params
    n_consts, n_carry = p["num_consts"], p["num_carry"]
    consts, init, xs = ins[:n_consts], ins[n_consts:n_consts + n_carry], ins[n_consts + n_carry:]
    x_vars = eqn.invars[n_consts + n_carry:]
    # Each iteration sees its own slice of the xs: fresh ids in every iteration, charged to
    # the whole xs after the loop when the body consumed them.
    steps = []

    def run(carry, st):
        x_ids = [st.fresh(v.aval.shape[1:]) if ids is not None else None
                 for v, ids in zip(x_vars, xs)]
        steps.append(x_ids)
        outs = _call_body(p["jaxpr"], list(consts) + list(carry) + x_ids, st)
        return outs[:n_carry]

    out = _repeated("scan", run, init, state)
    for j, (whole, per_step) in enumerate(zip(xs, steps[0])):
        if per_step is not None and any(e in state.consumed for e in per_step.ravel().tolist()):
            state.sink(whole, "scan", n_consts + n_carry + j)
    return _joined([init, out]) + [None] * (len(eqn.outvars) - n_carry)


key_reuse_rules.update({cond_p: _cond, while_p: _while, scan_p: _scan})


# --- signatures: what a jaxpr consumes of its inputs ------------------------------------------
class Signature:
    """Which inputs a jaxpr consumes (any element of), and which outputs are inputs passed
    through unchanged (output index -> input index)."""

    __slots__ = ("sinks", "forwards")

    def __init__(self, sinks, forwards):
        self.sinks, self.forwards = tuple(sinks), dict(forwards)


_signatures = WeakKeyCache("key-reuse signatures")


def check_jaxpr(closed) -> Signature:
    """Check ``closed`` (a ClosedJaxpr or Jaxpr) for key reuse; its Signature."""
    sig = _signatures.get(closed, None) if isinstance(closed, ClosedJaxpr) else None
    if sig is not None:
        return sig
    jaxpr = open_jaxpr(closed)
    state = _State()
    in_ids = [state.fresh(v.aval.shape) if _is_key(v.aval) else None for v in jaxpr.invars]
    consts = [None] * len(jaxpr.constvars)
    outs = _analyse(jaxpr, consts + in_ids, state)
    sinks = [ids is not None and any(e in state.consumed for e in ids.ravel().tolist())
             for ids in in_ids]
    forwards = {}
    for o, out in enumerate(outs):
        for i, ids in enumerate(in_ids):
            if out is not None and ids is not None and out.shape == ids.shape \
                    and np.array_equal(out, ids):
                forwards[o] = i
    sig = Signature(sinks, forwards)
    if isinstance(closed, ClosedJaxpr):
        _signatures.put(closed, None, sig)
    return sig


def check_call(closed: ClosedJaxpr, args, run):
    """Run ``run()`` (a jitted call of ``closed`` on concrete ``args``) under the checker:
    consumed keys may not be consumed again, and the keys it consumes are marked. (pjit's
    eager rule calls it with the flag on: api/jit.py installs that check.)"""
    sig = check_jaxpr(closed)
    for i, (a, sinks) in enumerate(zip(args, sig.sinks)):
        where = consumed_at(a) if sinks else None
        if where is not None:
            raise previously_consumed("jit-compiled function", i, where)
    outs = run()
    where = call_site()
    for a, sinks in zip(args, sig.sinks):
        if sinks:
            mark_consumed(a, where)
    for o, i in sig.forwards.items():
        earlier = consumed_at(args[i])
        if earlier is not None:
            mark_consumed(outs[o], earlier)
    return outs
