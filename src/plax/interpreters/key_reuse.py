"""The key-reuse checker (``jax_debug_key_reuse``): a typed PRNG key may be consumed once.

Drawing bits from a key or splitting it *consumes* it; using a consumed key again gives
correlated random numbers, a silent bug. With the flag on (``plax.config.update(
"jax_debug_key_reuse", True)`` or ``with plax.debug_key_reuse(True):``) plax raises
``KeyReuseError``; ``plax.experimental.key_reuse._core.check_key_reuse(f, *args)`` checks a
function without the flag.

The checker follows JAX's model. Every primitive has a ``KeyReuseSignature`` (a rule in
``key_reuse_rules``: a signature, or ``eqn -> signature``): ``Sink(i, mask)`` consumes
(the ``mask`` elements of) key input ``i``; ``Source(j)`` makes output ``j`` a fresh key;
``Forward(i, j)`` makes output ``j`` the key input ``i`` itself (a reshape, a copy). Any
other key output is born consumed. A primitive without a rule consumes all its key inputs.
A jaxpr is checked equation by equation, and its own signature (which inputs it consumes,
which outputs are fresh or forwarded) is what a call of it (jit, checkpoint, a custom
derivative) does. A ``cond`` consumes what any branch consumes; a loop body may consume a
carried key only if it returns a fresh one in its place, and never a key it closes over.

Eagerly, a concrete key array remembers that it was consumed (by a ``random_*`` primitive
or a jitted call whose signature sinks it), and may not be consumed again.
Only typed keys are checked, as in JAX; legacy ``uint32[2]`` keys are plain data.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.caches import WeakKeyCache
from plax.core.config import config
from plax.core.errors import KeyReuseError
from plax.core.key_reuse_signatures import Forward, KeyReuseSignature, Sink, Source
from plax.core.jaxpr import ClosedJaxpr, Literal, open_jaxpr, subjaxprs
from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, effectful_primitives, impl_rules, jvp_rules,
                             key_reuse_rules, register_lowering)
from plax.higher_order.callbacks import debug_callback_p
from plax.higher_order.cond import cond_p
from plax.higher_order.loops import while_p
from plax.higher_order.remat import checkpoint_p
from plax.higher_order.scan import scan_p
from plax.first_order.batch_util import vectorized
from plax.first_order import comparison as _comparison
from plax.first_order import conversion as _conversion
from plax.first_order import indexing as _indexing
from plax.first_order import prng as _prng
from plax.first_order import sharding_constraint as _constraint
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.prng import KEY_REUSE_ADVICE, call_site, consumed_at, mark_consumed, \
    previously_consumed
from plax.first_order.utility import copy_p, optimization_barrier_p, stage_p

__all__ = ["enabled", "Sink", "Source", "Forward", "KeyReuseSignature", "jaxpr_signature",
           "check_jaxpr", "check_call", "consume", "consume_p", "assert_consumed",
           "assert_unconsumed", "assert_consumed_value_p"]


def enabled() -> bool:
    return bool(config.read("debug_key_reuse"))


def is_key(aval) -> bool:
    return isinstance(getattr(aval, "dtype", None), dtypes.KeyType)


def _consume_all(eqn) -> KeyReuseSignature:
    """A primitive without a rule: every key input is consumed (and key outputs are born
    consumed)."""
    return KeyReuseSignature(*(Sink(i) for i, v in enumerate(eqn.invars) if is_key(v.aval)))


def signature_of(eqn) -> KeyReuseSignature:
    rule = key_reuse_rules.get(eqn.primitive)
    if rule is None:
        subs = list(subjaxprs(eqn.params))
        if len(subs) == 1 and len(open_jaxpr(subs[0]).invars) == len(eqn.invars):
            return _call(eqn)  # calls (checkpoint, custom derivatives): what the body does
        return _consume_all(eqn)
    return rule if isinstance(rule, KeyReuseSignature) else rule(eqn)


# --- marking keys by hand: consume, and assertions checked by the analysis -------------------
class _Mask:
    """A bool or bool array as a hashable parameter (what ``assert_consumed`` expects)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = np.asarray(value, dtype=bool)

    def __array__(self, dtype=None, copy=None):
        return self.value if dtype is None else self.value.astype(dtype)

    def __eq__(self, other):
        return type(other) is _Mask and other.value.shape == self.value.shape and \
            bool(np.all(other.value == self.value))

    def __hash__(self):
        return hash((self.value.shape, self.value.tobytes()))

    def __repr__(self):
        return repr(self.value.tolist())


def _identity_primitive(name: str) -> Primitive:
    p = Primitive(name)
    abstract_eval_rules[p] = lambda x, **_: x
    impl_rules[p] = lambda x, **_: x
    register_lowering(p, lambda ctx, x, **_: x)
    jvp_rules[p] = lambda primals, tangents, **params: (p.bind(*primals, **params), tangents[0])
    vectorized(p)
    effectful_primitives.add(p)  # (kept by dead-code elimination: the checker reads it)
    return p


consume_p = _identity_primitive("consume")
assert_consumed_value_p = _identity_primitive("assert_consumed_value")


def consume(key):
    """``key``, consumed: the key-reuse checker treats it (and the result) as used."""
    return consume_p.bind(key)


def assert_consumed(key, value=True) -> None:
    """Make the key-reuse analysis check that ``key`` is consumed (``value``: a bool, or
    one bool per element of ``key``); AssertionError if not."""
    assert_consumed_value_p.bind(key, value=_Mask(value))


def assert_unconsumed(key) -> None:
    """Make the key-reuse analysis check that no element of ``key`` is consumed."""
    assert_consumed_value_p.bind(key, value=_Mask(False))


# --- one jaxpr -------------------------------------------------------------------------------
class _Analysis:
    """The consumption state of a jaxpr's key variables while its equations are checked."""

    def __init__(self):
        self.consumed: dict = {}   # var -> bool or bool array
        self.where: dict = {}      # var -> where it was first consumed
        self.forwards: dict = {}   # var -> the var it is

    def resolve(self, v):
        seen = 0
        while not isinstance(v, Literal) and v in self.forwards:
            v = self.forwards[v]
            seen += 1
            if seen > len(self.forwards):
                raise ValueError("key-reuse analysis: a cycle of forwarded values")
        return v

    def is_consumed(self, v):
        v = self.resolve(v)
        return False if isinstance(v, Literal) else self.consumed.get(v, False)

    def sink(self, v, mask, site: str) -> str | None:
        """Consume ``v`` where ``mask``; where it was consumed before, if it was."""
        if not is_key(v.aval):
            return None
        v = self.resolve(v)
        if isinstance(v, Literal):
            return None
        before = self.consumed.get(v, False)
        if np.any(np.logical_and(before, mask)):
            return self.where.get(v, "an unknown place")
        self.consumed[v] = np.logical_or(before, mask)
        self.where.setdefault(v, site)
        return None

    def source(self, v, consumed) -> None:
        if is_key(v.aval) and not isinstance(v, Literal):
            self.consumed[self.resolve(v)] = consumed


def _site(eqn) -> str:
    info = eqn.source_info
    return (info.location() if info is not None else "") or "an unknown place"


def _check_assertion(eqn, consumed) -> None:
    expected = np.asarray(eqn.params["value"])
    if not np.all(np.asarray(consumed) == expected):
        if np.all(expected):
            raise AssertionError(f"Expected key to be consumed in {eqn}")
        if not np.any(expected):
            raise AssertionError(f"Expected key to not be consumed in {eqn}")
        raise AssertionError(f"Expected {expected}, got {consumed} in {eqn}")


def _analyse(jaxpr) -> KeyReuseSignature:
    state = _Analysis()
    for eqn in jaxpr.eqns:
        if not any(is_key(v.aval) for v in (*eqn.invars, *eqn.outvars)):
            continue
        sig = signature_of(eqn)
        if eqn.primitive is assert_consumed_value_p:
            _check_assertion(eqn, state.is_consumed(eqn.invars[0]))
        for f in sig.forwards:
            state.forwards[eqn.outvars[f.out_idx]] = eqn.invars[f.in_idx]
        for s in sig.sinks:
            if not 0 <= s.idx < len(eqn.invars):
                raise KeyReuseError(f"In {eqn.primitive}, sink {s.idx} out of range "
                                    f"[0, {len(eqn.invars)}]")
            before = state.sink(eqn.invars[s.idx], s.mask, _site(eqn))
            if before is not None:
                raise KeyReuseError(f"In {eqn.primitive}, argument {s.idx} is already consumed:"
                                    f" it was consumed at {before}. {KEY_REUSE_ADVICE}")
        for v in eqn.outvars:
            if v not in state.forwards:
                state.source(v, True)
        for s in sig.sources:
            state.source(eqn.outvars[s.idx], False)
    inputs = [*jaxpr.invars, *jaxpr.constvars]
    position = {v: i for i, v in enumerate(inputs)}
    items = [Sink(i, np.asarray(state.consumed[v])) for i, v in enumerate(inputs)
             if is_key(v.aval) and np.any(state.consumed.get(v, False))]
    for j, v in enumerate(jaxpr.outvars):
        if isinstance(v, Literal) or not is_key(v.aval):
            continue
        origin = state.resolve(v)
        if origin in position:
            items.append(Forward(position[origin], j))
        elif not np.any(state.consumed.get(origin, False)):
            items.append(Source(j))
    return KeyReuseSignature(*items)


_signatures = WeakKeyCache("key-reuse signatures")


def jaxpr_signature(jaxpr) -> KeyReuseSignature:
    """The key-reuse signature of ``jaxpr`` (a Jaxpr or ClosedJaxpr; its inputs are its
    invars, then its constvars); raises KeyReuseError where it consumes a key twice."""
    jaxpr = open_jaxpr(jaxpr)
    sig = _signatures.get(jaxpr, None)
    if sig is None:
        sig = _signatures.put(jaxpr, None, _analyse(jaxpr))
    return sig


def _operands_only(sig: KeyReuseSignature, n_in: int) -> KeyReuseSignature:
    """``sig`` of a body without what it does to its own constants (not the call's
    operands: concrete values, not tracked outside)."""
    return KeyReuseSignature(*(i for i in sig._items if (
        i.in_idx < n_in if isinstance(i, Forward) else
        not (isinstance(i, Sink) and i.idx >= n_in))))


def _call(eqn) -> KeyReuseSignature:
    body = next(iter(subjaxprs(eqn.params)))
    return _operands_only(jaxpr_signature(body), len(eqn.invars))


def _checkpoint(eqn) -> KeyReuseSignature:
    # The differentiated copy of a body recomputes what the first pass consumed already.
    return KeyReuseSignature() if eqn.params["differentiated"] else _call(eqn)


def _shifted(sig, by: int):
    return KeyReuseSignature(
        *(Sink(i.idx + by, i.mask) if isinstance(i, Sink) else
          Forward(i.in_idx + by, i.out_idx) if isinstance(i, Forward) else i
          for i in sig._items))


def _cond(eqn) -> KeyReuseSignature:
    sigs = [jaxpr_signature(b) for b in eqn.params["branches"]]
    n = len(eqn.invars) - 1
    sinks: dict = {}
    for sig in sigs:
        for s in sig.sinks:
            if s.idx < n:
                sinks[s.idx] = np.logical_or(sinks.get(s.idx, False), s.mask)
    sources = set.intersection(*({s.idx for s in sig.sources} for sig in sigs))
    forwards = set.intersection(*(set(sig.forwards) for sig in sigs))
    return _shifted(KeyReuseSignature(*(Sink(i, np.asarray(m)) for i, m in sinks.items()),
                                      *(Source(j) for j in sources), *forwards), 1)


def _loop_error(which: str, why: str) -> KeyReuseError:
    return KeyReuseError(f"{which} function leads to key reuse when repeatedly executed{why}")


def _scan(eqn) -> KeyReuseSignature:
    p = eqn.params
    n_consts, n_carry = p["num_consts"], p["num_carry"]
    sig = _operands_only(jaxpr_signature(p["jaxpr"]), len(eqn.invars))
    if any(s.idx < n_consts for s in sig.sinks):
        raise _loop_error("scan body", ", because key constants are repeatedly consumed")
    carry_sinks = {s.idx - n_consts for s in sig.sinks if s.idx - n_consts < n_carry}
    carry_sources = {s.idx for s in sig.sources if s.idx < n_carry}
    if not carry_sinks <= carry_sources:
        raise _loop_error("scan body", ", because consumed inputs don't match sourced outputs")
    return sig


def _while(eqn) -> KeyReuseSignature:
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cond_sig = jaxpr_signature(p["cond_jaxpr"])
    body_sig = jaxpr_signature(p["body_jaxpr"])
    if any(s.idx < nc for s in cond_sig.sinks):
        raise _loop_error("while_loop cond", ": it consumes a key it closes over")
    if any(s.idx < nb for s in body_sig.sinks):
        raise _loop_error("while_loop body", ": it consumes a key it closes over")
    sources = {s.idx for s in body_sig.sources}
    cond_sinks = {s.idx - nc for s in cond_sig.sinks}
    body_sinks = {s.idx - nb for s in body_sig.sinks}
    if not cond_sinks <= sources:
        raise _loop_error("while_loop cond", ": it consumes a carried key the body does not "
                                             "replace")
    if not body_sinks <= sources:
        raise _loop_error("while_loop body", ": it consumes a carried key it does not replace")
    if cond_sinks & body_sinks:
        raise KeyReuseError("while_loop cond and body functions both use the same key.")
    # The loop's operands are the cond's constants, the body's, then the carry.
    return KeyReuseSignature(
        *(Sink(s.idx + nc, s.mask) for s in body_sig.sinks if s.idx < len(eqn.invars) - nc),
        *(Source(s.idx) for s in body_sig.sources),
        *(Forward(f.in_idx + nc, f.out_idx) for f in body_sig.forwards if f.in_idx >= nb))


def _slice(eqn) -> KeyReuseSignature:
    shape = eqn.invars[0].aval.shape
    p = eqn.params
    strides = p["strides"] or (1,) * len(shape)
    mask = np.zeros(shape, bool)
    mask[tuple(slice(*t) for t in zip(p["start_indices"], p["limit_indices"], strides))] = True
    return KeyReuseSignature(Sink(0, mask), Source(0))


def _concatenate(eqn) -> KeyReuseSignature:
    if len(eqn.invars) == 1:
        return KeyReuseSignature(Forward(0, 0))
    return KeyReuseSignature(*(Sink(i) for i in range(len(eqn.invars))), Source(0))


def _each_forwarded(eqn) -> KeyReuseSignature:
    return KeyReuseSignature(*(Forward(i, i) for i in range(len(eqn.outvars))))


_FORWARD = KeyReuseSignature(Forward(0, 0))
_NOTHING = KeyReuseSignature()
key_reuse_rules.update({
    # fold_in does not consume its key (as in JAX): fold_in(key, i) for many i is the usual
    # way to derive a stream of keys.
    _prng.random_bits_p: KeyReuseSignature(Sink(0)),
    _prng.random_split_p: KeyReuseSignature(Sink(0), Source(0)),
    _prng.random_fold_in_p: KeyReuseSignature(Source(0)),
    _prng.random_seed_p: KeyReuseSignature(Source(0)),
    _prng.random_wrap_p: KeyReuseSignature(Source(0)),
    _prng.random_clone_p: KeyReuseSignature(Source(0)),
    _prng.random_unwrap_p: _NOTHING, debug_callback_p: _NOTHING,
    _comparison.eq_p: _NOTHING, _comparison.ne_p: _NOTHING,
    _shapes.broadcast_in_dim_p: _FORWARD, _shapes.reshape_p: _FORWARD,
    _shapes.squeeze_p: _FORWARD, copy_p: _FORWARD, stage_p: _FORWARD,
    _conversion.convert_element_type_p: _FORWARD,
    _constraint.sharding_constraint_p: _FORWARD, _constraint.reshard_p: _FORWARD,
    optimization_barrier_p: _each_forwarded,
    # Which elements these pick is known only at run time: the result is the whole operand;
    # what is written into one is consumed.
    _slicing.dynamic_slice_p: _FORWARD, _indexing.gather_p: _FORWARD,
    _slicing.dynamic_update_slice_p: KeyReuseSignature(Sink(1), Forward(0, 0)),
    _indexing.scatter_p: KeyReuseSignature(Sink(2), Forward(0, 0)),
    _slicing.slice_p: _slice, _shapes.concatenate_p: _concatenate,
    cond_p: _cond, while_p: _while, scan_p: _scan, checkpoint_p: _checkpoint,
    consume_p: KeyReuseSignature(Sink(0), Forward(0, 0)),
    assert_consumed_value_p: _FORWARD,
})


def check_jaxpr(closed) -> KeyReuseSignature:
    """Check ``closed`` (a ClosedJaxpr or Jaxpr) for key reuse; its signature."""
    return jaxpr_signature(closed)


def check_call(closed: ClosedJaxpr, args, run):
    """Run ``run()`` (a jitted call of ``closed`` on concrete ``args``) under the checker:
    consumed keys may not be consumed again, and the keys it consumes are marked. (pjit's
    eager rule calls it with the flag on: api/jit.py installs that check.)"""
    sig = check_jaxpr(closed)
    for s in sig.sinks:
        where = consumed_at(args[s.idx]) if s.idx < len(args) else None
        if where is not None:
            raise previously_consumed("jit-compiled function", s.idx, where)
    outs = run()
    where = call_site()
    for s in sig.sinks:
        if s.idx < len(args):
            mark_consumed(args[s.idx], where)
    fresh = {s.idx for s in sig.sources}
    forwarded = {f.out_idx: f.in_idx for f in sig.forwards}
    for j, out in enumerate(outs):
        if j in forwarded:
            earlier = consumed_at(args[forwarded[j]]) if forwarded[j] < len(args) else None
            if earlier is not None:
                mark_consumed(out, earlier)
        elif j not in fresh:
            mark_consumed(out, where)
    return outs
