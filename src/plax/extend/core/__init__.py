"""``plax.extend.core``: the jaxpr IR, primitives and trace state, as ``jax.extend.core``.

Every name is plax's own object: ``Primitive`` is plax's primitive class (its rules go into
plax's rule tables), ``Jaxpr``/``ClosedJaxpr``/``Var``/``Literal``/``JaxprEqn`` are the jaxpr
plax's transformations read, and the trace-state functions look at plax's current trace.
``plax.extend.core.primitives`` names plax's built-in primitives.
"""
from __future__ import annotations

import contextlib as _contextlib

from plax.core.avals import ShapedArray as _ShapedArray
from plax.core.dtypes import float0 as _float0, is_inexact as _is_inexact
from plax.core.effects import Effect, no_effects  # noqa: F401
from plax.core.hi_types import aval_mapping_handlers  # JAX's table (mapped_aval reads it)
from plax.core.jaxpr import (ClosedJaxpr, Jaxpr, JaxprEqn, JaxprTypeError, Literal,  # noqa: F401
                             Var, check_jaxpr, eval_closed_jaxpr as _eval_closed_jaxpr)
from plax.core.jaxpr import subjaxprs as _subjaxprs_of_params
from plax.core.primitive import Primitive  # noqa: F401
from plax.core.sharding_types import with_dim as _with_dim, without_dim as _without_dim
from plax.core import trace as _trace
from plax.core.trace import concrete_or_error  # noqa: F401
from plax.higher_order import call as _call
from plax.lowering.stablehlo import AbstractToken  # noqa: F401
from plax.runtime.array import Array as _Array

Effects = frozenset  # the type of an equation's (and a jaxpr's) effects
array_types = {_Array}  # concrete array types other than NumPy's


class InconclusiveDimensionOperation(Exception):
    """A comparison of symbolic dimensions with no definite answer (plax's shapes are
    always concrete, so plax itself never raises it)."""


class DropVar(Var):
    """An equation output nobody reads (printed ``_``)."""

    __slots__ = ()

    def __repr__(self):
        return "_"


class Token:
    """The value of an effect token outside a jaxpr (plax threads ordered effects itself)."""

    def __init__(self, buf=None):
        self._buf = buf


class TraceTag:
    """An identity for a trace; all tags compare equal (they only mark a transformation)."""

    def __hash__(self):
        return hash(TraceTag)

    def __eq__(self, other):
        return isinstance(other, TraceTag)


def gensym(suffix: str = ""):
    """A factory of fresh variables: ``gensym()(aval)`` is a new ``Var``."""
    del suffix
    return Var


def new_jaxpr_eqn(invars, outvars, primitive, params, effects=None, source_info=None,
                  ctx=None) -> JaxprEqn:
    """A jaxpr equation ``outvars = primitive[params] invars`` (its effects are worked out
    from the primitive and params, so ``effects`` is only checked to be a set)."""
    del effects, ctx
    return JaxprEqn(invars, outvars, primitive, params, source_info)


def jaxprs_in_params(params):
    """The ``Jaxpr``s (opened) held in an equation's params, tuples and lists included."""
    for j in _subjaxprs_of_params(params):
        yield getattr(j, "jaxpr", j)


def subjaxprs(jaxpr):
    """The jaxprs held by the equations of ``jaxpr`` (one level down)."""
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        yield from jaxprs_in_params(eqn.params)


def jaxpr_as_fun(closed_jaxpr: ClosedJaxpr, *args):
    """``closed_jaxpr`` as a function of its inputs (with ``args``: applied to them),
    returning the list of its outputs."""
    def fun(*xs):
        return _eval_closed_jaxpr(closed_jaxpr, *xs)
    return fun(*args) if args else fun


def mapped_aval(size: int, axis, aval):
    """``aval`` with its dimension ``axis`` (of length ``size``) removed; unchanged for
    ``axis=None``."""
    handlers = aval_mapping_handlers.get(type(aval))
    if handlers is not None:
        return handlers[0](size, axis, aval)
    if axis is None:
        return aval
    if not isinstance(aval, _ShapedArray):
        raise TypeError(f"mapped_aval: no mapping for {aval!r} of type {type(aval).__name__}")
    if aval.shape[axis] != size:
        raise ValueError(f"mapped_aval: dimension {axis} of {aval.str_short()} is not of "
                         f"size {size}")
    return _without_dim(aval, axis)


def unmapped_aval(size: int, axis, aval, explicit_mesh_axis=None):
    """``aval`` with a dimension of length ``size`` inserted at ``axis`` (sharded over
    ``explicit_mesh_axis`` when given); unchanged for ``axis=None``."""
    handlers = aval_mapping_handlers.get(type(aval))
    if handlers is not None:
        return handlers[1](size, axis, explicit_mesh_axis, aval)
    if axis is None:
        return aval
    if not isinstance(aval, _ShapedArray):
        raise TypeError(f"unmapped_aval: no mapping for {aval!r} of type {type(aval).__name__}")
    return _with_dim(aval, axis, size, explicit_mesh_axis)


def primal_dtype_to_tangent_dtype(primal_dtype):
    """The dtype of tangents of values of ``primal_dtype``: itself, or float0 for integers,
    booleans and keys."""
    return primal_dtype if _is_inexact(primal_dtype) else _float0


def valid_jaxtype(x) -> bool:
    """Whether ``x`` can be an argument or result of a transformed function."""
    from plax.core.avals import is_valid_value
    return is_valid_value(x)


# --- the current trace --------------------------------------------------------------------
class _OpaqueTraceState:
    """Compares equal to another taken while the same trace was current."""

    __slots__ = ("_trace",)

    def __init__(self, trace):
        self._trace = trace

    def __eq__(self, other):
        return isinstance(other, _OpaqueTraceState) and other._trace is self._trace

    def __hash__(self):
        return id(self._trace)


def get_opaque_trace_state(convention=None):
    """A token of the current trace: equal to another only while the same trace is current."""
    del convention
    return _OpaqueTraceState(_trace.current_trace())


def find_top_trace(xs):
    """The trace primitives bound now would go to (the current trace)."""
    del xs
    return _trace.current_trace()


class take_current_trace:
    """``with take_current_trace() as t``: ``t`` is the current trace, and eager evaluation
    is current inside the block (as while a trace processes a primitive)."""

    __slots__ = ("_eager",)

    def __enter__(self):
        taken = _trace.current_trace()
        self._eager = _trace.set_current_trace(_trace.EvalTrace())
        self._eager.__enter__()
        return taken

    def __exit__(self, *exc):
        return self._eager.__exit__(*exc)


@_contextlib.contextmanager
def set_current_trace(trace, check_leaks: bool = False):
    """Make ``trace`` the current trace inside the block."""
    del check_leaks
    with _trace.set_current_trace(trace):
        yield


def _trace_kinds() -> list:
    kinds, t = [], _trace.current_trace()
    while t is not None:
        kinds.append(type(t).__name__)
        t = getattr(t, "parent", None)
    return kinds


def unsafe_am_i_under_a_jit_DO_NOT_USE() -> bool:
    """Whether a staging trace (jit, make_jaxpr, a control-flow body) is active."""
    return "StagingTrace" in _trace_kinds()


def unsafe_am_i_under_a_vmap_DO_NOT_USE() -> bool:
    """Whether a vmap's trace is active."""
    return "BatchTrace" in _trace_kinds()


def unsafe_get_axis_names_DO_NOT_USE() -> list:
    """The names of the mapped axes in scope (vmap, pmap, shard_map)."""
    return [name for name, _ in _trace.axis_env()]


def nonempty_axis_env_DO_NOT_USE() -> bool:
    """Whether any named axis is in scope."""
    return bool(_trace.axis_env())


class CallPrimitive(_call.CallPrimitive):
    """A call primitive of one's own (JAX's ``core.CallPrimitive``): bound with a function
    (``p.bind(fun, *args)``, ``fun`` a ``linear_util.WrappedFun``) it runs it eagerly, and
    under a trace it becomes one equation calling the traced body (``call_jaxpr``, a
    ``ClosedJaxpr``). It gets the rules of plax's own ``closed_call``: abstract
    evaluation, evaluation, lowering (the body inlined), jvp, partial evaluation,
    transposition, batching and DCE, each giving a call of this primitive again."""

    def __init__(self, name: str):
        super().__init__(name)
        _call.register_call_rules(self)


def call_impl(f, *args, **params):
    """Run the wrapped function ``f`` (a ``linear_util.WrappedFun``) on ``args`` eagerly."""
    del params
    return f.call_wrapped(*args)


def __getattr__(name):
    if name == "primitives":
        import importlib
        return importlib.import_module(f"{__name__}.primitives")
    if name == "DebugInfo":
        from plax.core.debug_info import DebugInfo
        return DebugInfo
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

