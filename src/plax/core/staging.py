"""Staging: run a Python function on tracers and record a jaxpr.

``trace_to_jaxpr`` is the one way a function becomes a jaxpr (jit,
make_jaxpr and every higher-order primitive use it). Constants the function
closes over are hoisted into constvars; Python and NumPy scalars become
literals. Tracers of enclosing traces are hoisted too, so that the caller can
pass them back in (closure conversion).
"""
from __future__ import annotations

import weakref

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray, abstractify, pytype_aval_mappings
from plax.core.hi_types import hi_value_types
from plax.core.config import config
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var, check_jaxpr
from plax.core.primitive import abstract_eval
from plax.core.source_info import current_source_info
from plax.core.trace import (Trace, Tracer, aval_text, current_trace, fresh_name_stack,
                             name_stack, set_current_trace)


class StagingTracer(Tracer):
    __slots__ = ("_aval", "_var")  # (not "var": arrays have a var() method)

    def __init__(self, trace, aval: ShapedArray, var: Var):
        self._trace = trace
        self._aval = aval
        self._var = var

    @property
    def aval(self):
        return self._aval

    def __repr__(self):
        return self._trace.tracer_repr.format(aval_text(self._aval))

    def _debug_origin(self) -> str:
        trace = self._trace
        where = f"The error occurred while tracing the function {trace.description or '<unknown>'}."
        made_by = trace.equation_making(self._var)
        if made_by is not None and made_by.source_info and made_by.source_info.file:
            where += (f" The value was created by {made_by.primitive.name} at "
                      f"{made_by.source_info.location()}.")
        names = trace.argument_names_for(self._var)
        if names:
            return (f"{where} The value depends on the argument{'s' if len(names) > 1 else ''} "
                    f"{', '.join(names)}.")
        return where + " The value does not depend on the function's arguments."


class StagingTrace(Trace):
    """Records each primitive applied to its tracers as a jaxpr equation."""

    tracer_repr = "JitTracer({})"  # JAX's name for tracers of a staging (jit) trace

    def __init__(self, parent: Trace | None, description: str = "", arg_names=None):
        super().__init__(parent, description)
        self.arg_names = arg_names
        self.invars: list[Var] = []
        self.eqns: list[JaxprEqn] = []
        self.const_vars: dict[int, Var] = {}   # id(value) -> constvar
        self.const_vals: list = []              # values, kept alive and in order
        self.const_order: list[Var] = []
        self.literals: dict[int, Literal] = {}
        self.host_scalars: dict[int, object] = {}  # id -> 0-d array made while tracing

    def note_host_scalar(self, array) -> None:
        self.host_scalars[id(array)] = array

    def staged_constant(self, x):
        if not self.records_all:  # (a partial-evaluation trace computes known values above)
            return super().staged_constant(x)
        atom = self.lift(x)  # (a Literal or constvar, which carries x's type)
        t = StagingTracer(self, atom.aval, atom)
        if self.made_tracers is not None:
            self.made_tracers.append(weakref.ref(t))
        return t

    def new_arg(self, aval: ShapedArray) -> StagingTracer:
        t = StagingTracer(self, aval, Var(aval))
        self.invars.append(t._var)
        return t

    def equation_making(self, var: Var):
        """The equation whose output is ``var`` (None for an argument)."""
        for e in reversed(self.eqns):
            if var in e.outvars:
                return e
        return None

    def depends_on(self, var: Var) -> set:
        """``var`` and every variable of this trace it was computed from."""
        needed = {var}
        for e in reversed(self.eqns):
            if any(v in needed for v in e.outvars):
                needed.update(v for v in e.invars if isinstance(v, Var))
        return needed

    def argument_names_for(self, var: Var) -> list[str]:
        """Names of the function arguments that ``var`` depends on (for error messages)."""
        needed = self.depends_on(var)
        names = self.arg_names or [f"argument {i}" for i in range(len(self.invars))]
        return [n for v, n in zip(self.invars, names) if v in needed]

    def lift(self, x):
        """The jaxpr atom (Var or Literal) standing for ``x`` in this trace."""
        if isinstance(x, StagingTracer) and x._trace is self:
            return x._var
        if isinstance(x, Tracer):
            self.check_foreign_tracer(x)
            return self._const(x, x.aval)
        if type(x) in (int, float, complex, bool) or (isinstance(x, np.generic)):
            return Literal(x, abstractify(x))
        if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype in dtypes.supported_dtypes:
            aval = abstractify(x)
            return Literal(np.asarray(x, aval.dtype)[()], aval)
        if self.host_scalars.get(id(x)) is x:  # a scalar made from host data while tracing
            return Literal(x, abstractify(x))  # (evaluated again, it is that Array, as in JAX)
        return self._const(x, abstractify(x))

    def _const(self, x, aval) -> Var:
        v = self.const_vars.get(id(x))
        if v is None:
            v = self.const_vars[id(x)] = Var(aval.strip_weak_type() if not aval.weak_type else aval)
            self.const_vals.append(x)
            self.const_order.append(v)
        return v

    # Whether every primitive applied here is recorded (a partial-evaluation trace
    # runs known work in its parent instead).
    records_all = True
    # While plax.transforms.dce prunes a region of this trace: weak references to the
    # tracers made meanwhile (those still alive afterwards keep their equations).
    made_tracers: list | None = None

    def stage(self, prim, args, params):
        """Record ``prim(*args, **params)`` as an equation; its staged outputs."""
        atoms = [self.lift(x) for x in args]
        out_avals = abstract_eval(prim, [a.aval for a in atoms], params)
        out_vars = [Var(a) for a in out_avals]
        info = current_source_info(name_stack())
        self.eqns.append(JaxprEqn(atoms, out_vars, prim, params, info))
        outs = [StagingTracer(self, a, v) for a, v in zip(out_avals, out_vars)]
        if self.made_tracers is not None:
            self.made_tracers.extend(map(weakref.ref, outs))
        return outs if prim.multiple_results else outs[0]

    process_primitive = stage  # every primitive is recorded (one call, not two: hot path)


def returned_reference_error(fname: str, api: str, ref, arg_name=None) -> ValueError:
    """JAX's error for a function traced for ``api`` returning the reference ``ref`` (made
    inside it, or passed in as argument ``arg_name``)."""
    made_at = getattr(ref, "_made_at", None)
    if arg_name is not None:
        origin = f"passed in as the argument {arg_name}."
    elif made_at is not None:
        origin = f"created on line {made_at[0]}:{made_at[1]} ({made_at[2]})."
    else:
        origin = "created inside the function."
    return ValueError(
        f"function {fname + ' ' if fname else ''}traced for {api} returned a mutable array "
        f"reference of type {pytype_aval_mappings[type(ref)](ref)}, but mutable array "
        "references cannot be returned. Return its contents (ref[...]) instead.\n\n"
        f"The returned mutable array was {origin}")


def _check_no_reference_returned(outs, description: str) -> None:
    for x in outs:
        if type(x) in hi_value_types and pytype_aval_mappings[type(x)](x).has_qdd:
            api = description or "a transformation"
            for tail in (" body", " branch"):  # ("scan body" is traced for scan)
                api = api[:-len(tail)] if api.endswith(tail) else api
            raise returned_reference_error("", api, x)


def trace_to_jaxpr(fun, in_avals, description: str = "", arg_names=None):
    """Trace ``fun(*tracers) -> list of outputs`` into ``(Jaxpr, consts)``.

    ``consts`` are the values of the jaxpr's constvars: concrete arrays, or
    tracers of enclosing traces that the caller must pass back in.
    """
    if config.read("no_tracing"):
        raise RuntimeError(f"re-tracing function {description or fun} for `jit`, but "
                           "'no_tracing' is set (plax.no_tracing).")
    trace = StagingTrace(current_trace(), description, arg_names)
    args = [trace.new_arg(a) for a in in_avals]
    try:  # (the equations' scopes are relative to the traced body, as JAX's)
        with set_current_trace(trace), fresh_name_stack():
            outs = fun(*args)
            if hi_value_types:
                _check_no_reference_returned(outs, description)
            out_atoms = [trace.lift(x) for x in outs]
    finally:
        trace.finish()
    # Literals among the outputs become real outputs through constvars is not
    # needed: a jaxpr may return a literal directly.
    jaxpr = Jaxpr(trace.const_order, [t._var for t in args], out_atoms, trace.eqns)
    if config.read("enable_checks"):
        check_jaxpr(jaxpr)
    return jaxpr, list(trace.const_vals)


def trace_to_closed_jaxpr(fun, in_avals, description: str = "", arg_names=None) -> ClosedJaxpr:
    jaxpr, consts = trace_to_jaxpr(fun, in_avals, description, arg_names)
    return ClosedJaxpr(jaxpr, consts)
