"""Batching: the trace behind ``vmap``, the batch rule table and named axes.

A ``BatchTracer`` holds a value with one extra dimension, the batch
dimension ``batch_dim``; its aval is the per-example type (without it). A
primitive applied to batch tracers runs its rule from ``batch_rules``::

    rule(axis, vals, dims, **params) -> (out, out_dim)      # or (outs, out_dims)

where ``axis`` is the ``AxisData`` of the vmap, ``vals`` are the underlying
values and ``dims`` their batch dimensions (``not_mapped`` = None for values
that do not vary along the batch). Rules run in the parent trace, so they
just call lax functions on the values. A rule may leave the output's batch
dimension wherever it is cheapest; ``vmap`` moves it to ``out_axes`` at the end.

A vmap with an ``axis_name`` brings the name into scope: collectives naming it
are computed across the batch by their rules here.
"""
from __future__ import annotations

from plax.core.sharding_types import without_dim
from plax.core.caches import WeakKeyCache
from plax.core.jaxpr import eval_jaxpr, open_jaxpr, subjaxprs
from plax.core.rules import batch_rules, collective_axis_names, not_mapped
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import (Trace, Tracer, aval_text, axis_env, current_trace, extend_axis_env,
                             get_aval, set_current_trace)
from plax.first_order.batch_util import batched_aval, move_batch_dim



class AxisData:
    """The mapped axis of one vmap: its name (or None), size and SPMD mesh axis name."""

    __slots__ = ("name", "size", "spmd_name")

    def __init__(self, name, size: int, spmd_name=None):
        self.name = name
        self.size = size
        self.spmd_name = spmd_name

    def __repr__(self):
        return f"AxisData(name={self.name!r}, size={self.size})"


class BatchTracer(Tracer):
    __slots__ = ("val", "batch_dim", "_aval")

    def __init__(self, trace, val, batch_dim: int):
        self._trace = trace
        self.val = val
        self.batch_dim = batch_dim
        self._aval = None

    @property
    def aval(self):
        a = self._aval
        if a is None:  # computed once: values never change
            a = get_aval(self.val)
            a = self._aval = without_dim(a, self.batch_dim)
        return a

    def __repr__(self):
        return f"VmapTracer(aval={aval_text(self.aval)}, batched={aval_text(get_aval(self.val))})"

    def _debug_origin(self) -> str:
        if isinstance(self.val, Tracer):
            return self.val._debug_origin()
        return f"The tracer was created while batching {self._trace.description or 'a function'}."


class BatchTrace(Trace):
    """Runs primitives on batched values through their batch rules."""

    def __init__(self, parent: Trace, axis: AxisData, description: str = ""):
        super().__init__(parent, description)
        self.axis = axis

    def evaluates_eagerly(self) -> bool:
        return self.parent.evaluates_eagerly()

    def to_batch_info(self, x):
        if isinstance(x, BatchTracer):
            if x._trace is self:
                return x.val, x.batch_dim
            if x._trace.axis is self.axis:
                # Batched along this very vmap, by the trace a custom rule was batched out
                # of (the rule closed over the value): the same batch, so adopt it.
                return x.val, x.batch_dim
        if isinstance(x, Tracer):
            self.check_foreign_tracer(x)
        return x, not_mapped

    def wrap(self, val, dim):
        return val if dim is not_mapped else BatchTracer(self, val, dim)

    def process_primitive(self, prim, args, params):
        vals, dims = zip(*(self.to_batch_info(x) for x in args)) if args else ((), ())
        if all(d is not_mapped for d in dims) and not uses_axis_name(prim, params, self.axis.name):
            with set_current_trace(self.parent):
                return prim.bind(*vals, **params)
        rule = batch_rules.get(prim)
        if rule is None:
            raise NotImplementedError(f"Batching rule for '{prim.name}' not implemented")
        with set_current_trace(self.parent):
            out, out_dim = rule(self.axis, vals, dims, **params)  # tuples, as in JAX
        if prim.multiple_results:
            return [self.wrap(o, d) for o, d in zip(out, out_dim)]
        return self.wrap(out, out_dim)


def batch_flat(fun, vals, dims, axis: AxisData, description: str = ""):
    """Run ``fun(*per_example) -> list`` batched: ``vals[i]`` is mapped along ``dims[i]``.

    Returns ``(out_vals, out_dims)`` with the batch dimension of each output
    wherever the rules left it (``not_mapped`` for outputs that do not vary).
    """
    trace = BatchTrace(current_trace(), axis, description)
    ins = [trace.wrap(v, d) for v, d in zip(vals, dims)]
    names = [(axis.name, axis.size)] if axis.name is not None else []
    try:
        with set_current_trace(trace), extend_axis_env(names):
            outs = fun(*ins)
        pairs = [trace.to_batch_info(o) for o in outs]
    finally:
        trace.finish()
    return [v for v, _ in pairs], [d for _, d in pairs]


# --- which primitives use which axis names ---------------------------------------------------
def uses_axis_name(prim, params, name) -> bool:
    """Whether ``prim`` (or a jaxpr inside its params) communicates over the named axis."""
    if name is None:
        return False
    names_of = collective_axis_names.get(prim)
    if names_of is not None:
        return name in names_of(params)
    return any(name in jaxpr_axis_names(j) for j in subjaxprs(params))


_jaxpr_names = WeakKeyCache("jaxpr axis names")


def jaxpr_axis_names(jaxpr) -> frozenset:
    """The axis names the collectives of ``jaxpr`` (and of the jaxprs inside it) use."""
    jaxpr = open_jaxpr(jaxpr)
    cached = _jaxpr_names.get(jaxpr, None)
    if cached is not None:
        return cached
    names = set()
    for e in jaxpr.eqns:
        names_of = collective_axis_names.get(e.primitive)
        if names_of is not None:
            names.update(names_of(e.params))
        for sub in subjaxprs(e.params):
            names.update(jaxpr_axis_names(sub))
    return _jaxpr_names.put(jaxpr, None, frozenset(names))


# --- batching a jaxpr (for primitives that hold one: pjit, checkpoint, custom rules) ----------
def batch_jaxpr(closed, axis: AxisData, dims, description: str = "", out_dims=None,
                in_avals=None):
    """Stage the batched version of ``closed`` for inputs batched along ``dims``.

    Returns ``(jaxpr, consts, out_dims)``: a Jaxpr whose constvars take ``consts``
    (values it closes over, e.g. tracers of enclosing traces) and the batch
    dimension of each output. ``out_dims``, when given, fixes where each output's
    batch goes (unbatched outputs are broadcast there; ``not_mapped`` asks for an
    output that is unbatched, as a loop's fixed point establishes). ``in_avals``, when
    given, are the batched operands' own types (their explicit shardings kept).
    """
    key = (tuple(dims), None if out_dims is None else tuple(out_dims), axis.name, axis.size,
           axis.spmd_name, axis_env(), None if in_avals is None else tuple(in_avals))
    hit = _batched_jaxprs.get(closed, key)
    if hit is not None:
        return hit
    if in_avals is None:
        in_avals = [batched_aval(a, d, axis.size) for a, d in zip(closed.in_avals, dims)]
    box = []

    def body(*xs):
        outs, got = batch_flat(lambda *ys: eval_jaxpr(closed.jaxpr, closed.consts, *ys),
                               list(xs), dims, axis, description)
        if out_dims is not None:
            outs = [_place_batch(o, d, w, axis.size) for o, d, w in zip(outs, got, out_dims)]
            got = list(out_dims)
        box.append(got)
        return outs

    jaxpr, consts = trace_to_jaxpr(body, in_avals, description=description)
    result = (jaxpr, consts, box[0])
    if not any(isinstance(c, Tracer) for c in consts):
        _batched_jaxprs.put(closed, key, result)
    return result


_batched_jaxprs = WeakKeyCache("batch_jaxpr")


def _place_batch(x, got, want, size: int):
    """``x`` batched at ``got`` moved to ``want``; ``want`` not_mapped keeps it unbatched."""
    if want is not_mapped:
        if got is not not_mapped:
            raise ValueError("batch_jaxpr: an output asked to stay unbatched is batched")
        return x
    return move_batch_dim(x, got, want, size)
