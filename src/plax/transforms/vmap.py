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

import weakref

from plax.core.jaxpr import ClosedJaxpr, Jaxpr
from plax.core.trace import (Trace, Tracer, aval_text, current_trace, extend_axis_env, get_aval,
                             set_current_trace)

not_mapped = None
batch_rules: dict = {}
# Collectives: prim -> params -> the axis names it reduces/communicates over.
collective_axis_names: dict = {}


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
            d = self.batch_dim
            a = self._aval = a.update(shape=a.shape[:d] + a.shape[d + 1:])
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
            out, out_dim = rule(self.axis, list(vals), list(dims), **params)
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
    return any(name in jaxpr_axis_names(p) for p in params.values()
               if isinstance(p, (Jaxpr, ClosedJaxpr)))


_jaxpr_names: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def jaxpr_axis_names(jaxpr) -> frozenset:
    """The axis names the collectives of ``jaxpr`` (and of the jaxprs inside it) use."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    cached = _jaxpr_names.get(jaxpr)
    if cached is not None:
        return cached
    names = set()
    for e in jaxpr.eqns:
        names_of = collective_axis_names.get(e.primitive)
        if names_of is not None:
            names.update(names_of(e.params))
        for p in e.params.values():
            if isinstance(p, (Jaxpr, ClosedJaxpr)):
                names.update(jaxpr_axis_names(p))
    out = _jaxpr_names[jaxpr] = frozenset(names)
    return out


# --- helpers for writing rules ------------------------------------------------------------
def moveaxis(x, src: int, dst: int):
    """``x`` with its axis ``src`` moved to position ``dst`` (both non-negative)."""
    if src == dst:
        return x
    from plax.lax.shapes import transpose
    perm = [i for i in range(get_aval(x).ndim) if i != src]
    perm.insert(dst, src)
    return transpose(x, tuple(perm))


def broadcast_batch(x, size: int, dim: int):
    """An unbatched ``x`` given a batch dimension of ``size`` at ``dim`` (materialised)."""
    from plax.lax.shapes import broadcast_in_dim
    shape = get_aval(x).shape
    out_shape = shape[:dim] + (size,) + shape[dim:]
    kept = tuple(i if i < dim else i + 1 for i in range(len(shape)))
    return broadcast_in_dim(x, out_shape, kept)


def move_batch_dim(x, src, dst: int, size: int):
    """``x`` (batched along ``src``, or ``not_mapped``) with its batch dimension at ``dst``."""
    if src is not_mapped:
        return broadcast_batch(x, size, dst)
    return moveaxis(x, src, dst)


def bdim_at_front(x, d, size: int):
    """``x`` with its batch dimension first (broadcasting it in if ``x`` is unbatched)."""
    return move_batch_dim(x, d, 0, size)


def batch_size_of(vals, dims) -> int:
    """The batch size, read from the first batched value."""
    for v, d in zip(vals, dims):
        if d is not not_mapped:
            return get_aval(v).shape[d]
    raise ValueError("batch_size_of needs at least one batched value")


def vectorized_rule(prim):
    """Rule for a unary primitive that acts on each element (or row) independently of
    position: apply it to the batched value as it is; the batch dimension stays put."""
    def rule(axis, vals, dims, **params):
        (x,), (d,) = vals, dims
        return prim.bind(x, **params), d
    batch_rules[prim] = rule
    return rule


def elementwise_rule(prim):
    """Rule for an n-ary elementwise primitive (operands broadcast like lax: rank-0 and size-1).

    When every batched operand has the batch at the same dimension and the same rank,
    the primitive applies as it is. Otherwise batched operands move their batch to 0
    and unbatched ones get a size-1 dimension there, which lax broadcasts for free.
    """
    def rule(axis, vals, dims, **params):
        args, d = align_elementwise(vals, dims)
        out = prim.bind(*args, **params)
        if prim.multiple_results:
            return out, [d] * len(out)
        return out, d
    batch_rules[prim] = rule
    return rule


def common_dim(vals, dims) -> int:
    """The batch dimension ``align_elementwise`` leaves its operands with: where the
    batched operands already agree on it (same rank, same dimension), else 0."""
    return _common_dim([get_aval(v).ndim for v in vals], dims)


def _common_dim(ndims, dims) -> int:
    batched = {(n, d) for n, d in zip(ndims, dims) if d is not not_mapped}
    return next(iter(batched))[1] if len(batched) == 1 else 0


def align_elementwise(vals, dims):
    """Operands of an elementwise op laid out so their batch dimensions coincide, and
    that common batch dimension."""
    shapes = [get_aval(v).shape for v in vals]
    ndims = [len(s) for s in shapes]
    d = _common_dim(ndims, dims)
    ndim = max(n - (0 if b is not_mapped else 1) for n, b in zip(ndims, dims))
    out = []
    from plax.lax.shapes import broadcast_in_dim
    for v, b, shape in zip(vals, dims, shapes):
        if b is not_mapped:
            if not shape:
                out.append(v)  # rank-0 operands broadcast against anything
                continue
            # A size-1 batch dimension (and leading size-1 dims up to full rank).
            lead = ndim - len(shape)
            full = (1,) * lead + shape
            kept = tuple(i + lead if i + lead < d else i + lead + 1 for i in range(len(shape)))
            out.append(broadcast_in_dim(v, full[:d] + (1,) + full[d:], kept))
        elif len(shape) - 1 < ndim:  # a batched scalar among higher-rank operands
            out.append(broadcast_in_dim(moveaxis(v, b, 0), (shape[b],) + (1,) * ndim, (0,)))
        else:
            out.append(moveaxis(v, b, d))
    return out, d


# --- batching a jaxpr (for primitives that hold one: pjit, checkpoint, custom rules) ----------
def batched_aval(aval, dim, size: int):
    """The type of a value of per-example type ``aval`` batched along ``dim``."""
    if dim is not_mapped:
        return aval
    return aval.update(shape=aval.shape[:dim] + (size,) + aval.shape[dim:])


def batch_jaxpr(closed, axis: AxisData, dims, description: str = "", out_dims=None):
    """Stage the batched version of ``closed`` for inputs batched along ``dims``.

    Returns ``(jaxpr, consts, out_dims)``: a Jaxpr whose constvars take ``consts``
    (values it closes over, e.g. tracers of enclosing traces) and the batch
    dimension of each output. ``out_dims``, when given, fixes where each output's
    batch goes (unbatched outputs are broadcast there).
    """
    from plax.core.jaxpr import eval_jaxpr
    from plax.core.staging import trace_to_jaxpr
    in_avals = [batched_aval(a, d, axis.size) for a, d in zip(closed.in_avals, dims)]
    box = []

    def body(*xs):
        outs, got = batch_flat(lambda *ys: eval_jaxpr(closed.jaxpr, closed.consts, *ys),
                               list(xs), dims, axis, description)
        if out_dims is not None:
            outs = [move_batch_dim(o, d, w, axis.size) for o, d, w in zip(outs, got, out_dims)]
            got = list(out_dims)
        box.append(got)
        return outs

    jaxpr, consts = trace_to_jaxpr(body, in_avals, description=description)
    return jaxpr, consts, box[0]
