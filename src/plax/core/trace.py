"""Traces, tracers and the current-trace context.

``Primitive.bind`` asks ``current_trace()`` which trace interprets it. A
transformation installs its own trace (``set_current_trace``) while it runs
the user function; values that belong to other traces are lifted by the
receiving trace (``Trace.lift``). Every trace has a unique identity, so
tracers of two transformations of the same kind never mix.
"""
from __future__ import annotations

import contextlib
import itertools
import threading

from plax.core import dtypes, errors
from plax.core.avals import ShapedArray, abstractify
from plax.core.source_info import Transform, scope_path


class Trace:
    """Interprets primitives. Subclasses implement ``process_primitive``."""

    _ids = itertools.count()
    # What identifies a transformation's trace to libraries (JAX's ``trace.main``: its tag for
    # a jvp, None for evaluation and staging); equinox compares a tracer's ``_trace.main``.
    main = None

    def __init__(self, parent: "Trace | None" = None, description: str = ""):
        self.parent = parent
        self.description = description
        self.alive = True
        self.id = next(Trace._ids)

    def process_primitive(self, prim, args, params):
        raise NotImplementedError

    def evaluates_eagerly(self) -> bool:
        """Whether what this trace passes down is evaluated now, not staged: a jit bound
        under it runs as compiled programs (eager ``grad``, ``jvp``, ``vmap``), as JAX's
        ``jit(inline=True)`` functions do outside a staging trace."""
        return False

    def staged_constant(self, x):
        """``x``, a concrete array just made from host data (``jnp.array``, ``jnp.ones``), as
        this trace gives it back: a tracer where primitives of constants are staged (under
        jit: JAX's creation functions give tracers there), else ``x`` itself."""
        return x if self.parent is None else self.parent.staged_constant(x)

    def note_host_scalar(self, array) -> None:
        """``array`` (0-d) was just made from a host scalar: the nearest staging
        trace takes it as a literal, as JAX's traces fold such constants."""
        if self.parent is not None:
            self.parent.note_host_scalar(array)

    def finish(self):
        """Mark the trace done; its tracers are leaked if they are ever used again."""
        self.alive = False

    def check_foreign_tracer(self, x: "Tracer"):
        """Raise if ``x`` belongs to a trace that has finished (a leaked tracer)."""
        if not x._trace.alive:
            raise errors.UnexpectedTracerError(escaped_tracer_message(x))

    def __repr__(self):
        return f"{type(self).__name__}({self.description})"


def escaped_tracer_message(tracer) -> str:
    where = tracer._trace.description or "a transformation"
    origin = tracer._debug_origin()
    return ("Encountered an unexpected tracer. A function transformed by plax had a side "
            f"effect: it let a traced value escape ({tracer.aval.str_short()}, created while "
            f"tracing {where}). {origin} Return such values from the function instead of "
            "storing them in outer scopes, globals or objects.")


class Tracer:
    """A value standing for an array while a trace runs.

    Array methods and operators are attached by ``plax.numpy`` (as they are to
    ``plax.Array``), so a tracer behaves like an array inside traced code.
    """

    __slots__ = ("_trace", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, trace: "Trace", aval=None):
        """JAX's constructor, for tracers a library defines for a trace of its own (plax's
        tracers set their fields themselves)."""
        self._trace = trace
        if aval is not None:
            self.__dict__["_library_aval"] = aval  # (such subclasses have a __dict__)

    @property
    def aval(self) -> ShapedArray:
        try:
            return self.__dict__["_library_aval"]
        except (AttributeError, KeyError):
            raise NotImplementedError(f"{type(self).__name__} must define aval") from None

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def to_concrete_value(self):
        """A concrete value for this tracer if the trace knows one, else None."""
        return None

    @property
    def is_fully_addressable(self):
        raise errors.ConcretizationTypeError(
            self, "The is_fully_addressable property was called on a traced value, which has "
                  "no devices or shards.")

    @property
    def is_fully_replicated(self):
        raise errors.ConcretizationTypeError(
            self, "The is_fully_replicated property was called on a traced value, which has "
                  "no devices or shards.")

    def __getattr__(self, name):
        # (reached only for names a tracer lacks: say why an Array's runtime ones are missing)
        if name in ("block_until_ready", "copy_to_host_async", "sharding"):
            kind = "attribute" if name == "sharding" else "method"
            hint = (" Ask plax.typeof(x) for the sharding of a traced value." if kind ==
                    "attribute" else " Call it on the result of the transformed function.")
            raise AttributeError(f"The '{name}' {kind} is not available on traced array with "
                                 f"shape {errors._shown_aval(self)}.{hint}")
        if name == "committed":
            raise errors.ConcretizationTypeError(
                self, "The 'committed' attribute is not available on a traced value.")
        raise AttributeError(f"{type(self).__name__} has no attribute {name}")

    def _debug_origin(self) -> str:
        return f"The tracer was created while tracing {self._trace.description or 'a function'}."

    def _concrete_or(self, error_cls):
        val = self.to_concrete_value()
        if val is None:
            raise error_cls(self)
        return val

    def __bool__(self):
        if self.ndim != 0 and self.size != 1:
            raise ValueError("The truth value of an array with more than one element is "
                             "ambiguous. Use a.any() or a.all().")
        return bool(self._concrete_or(errors.TracerBoolConversionError))

    def __int__(self):
        return int(self._concrete_or(_conversion_error("int")))

    def __index__(self):
        return int(self._concrete_or(errors.TracerIntegerConversionError))

    def __float__(self):
        return float(self._concrete_or(_conversion_error("float")))

    def __complex__(self):
        return complex(self._concrete_or(_conversion_error("complex")))

    def __array__(self, dtype=None, copy=None):
        raise errors.TracerArrayConversionError(self)

    def __hash__(self):
        raise TypeError(f"unhashable type: {type(self).__name__}; traced arrays cannot be "
                        "dictionary keys or static arguments.")

    def item(self):
        return self._concrete_or(lambda t: errors.ConcretizationTypeError(
            t, "The problem arose with the `item` method.")).item()

    def tolist(self):
        return self._concrete_or(lambda t: errors.ConcretizationTypeError(
            t, "The problem arose with the `tolist` method.")).tolist()

    def __repr__(self):
        try:
            aval = self.aval
        except NotImplementedError:  # a library's tracer made without one
            return f"{type(self).__name__}<None>"
        return f"{type(self).__name__}<{aval_text(aval)}>"


def aval_text(aval) -> str:
    """A value's type as JAX shows it in tracer reprs and error messages: ``float32[2,3]``,
    ``float32[8@x,2]`` when sharded in the type, ``float32[1]{V:x}`` when varying over a
    shard_map axis, with ``~`` first when weakly typed."""
    # The long dtype names, but float0's (NumPy names it "void"; its short name is "float0").
    text = aval.str_short(short_dtypes=aval.dtype == dtypes.float0)
    return ("~" if aval.weak_type else "") + text


def _conversion_error(fn: str):
    def make(tracer):
        return errors.ConcretizationTypeError(
            tracer, f"The problem arose with the `{fn}` function. To change the dtype of an "
                    f"array rather than get a Python value, use `x.astype({fn})` or "
                    f"`plax.numpy.asarray(x, {fn})`.")
    return make


# --- the current trace --------------------------------------------------------
class NameStack(tuple):
    """The enclosing named_scope / named_call / jit names, outermost first; prints as JAX's
    name stack does (``outer/inner``)."""

    __slots__ = ()

    def __str__(self):
        return scope_path(self)

    def __add__(self, other):
        return NameStack(tuple.__add__(self, tuple(other)))

    def extend(self, name: str) -> "NameStack":
        return NameStack((*self, name))

    def transform(self, name: str) -> "NameStack":
        """The stack under a transformation named ``name``: printed ``name(...)`` around
        the scope after it."""
        return NameStack((*self, Transform(name)))

    @property
    def stack(self) -> tuple:
        """The names, outermost first (JAX's field)."""
        return tuple(self)


EMPTY_NAME_STACK = NameStack()


class _Context(threading.local):
    def __init__(self):
        self.trace = None
        self.axis_env = ()  # ((name, size), ...) of the named axes in scope
        self.name_stack = EMPTY_NAME_STACK




# This thread's current trace, named-axis environment and name stack.
trace_state = _Context()


def _no_hook(value) -> None:
    """Stands in for the hooks below until runtime/cpp_jit.py installs jaxlib's."""


# jit's C++ dispatch keys its cache on the current trace and the named axes in scope, which
# live here: each change is reported to these (C-level setters once installed).
_trace_changed = _axis_env_changed = _no_hook


def install_dispatch_hooks(trace_changed, axis_env_changed) -> None:
    """Report every change of the current trace and of the named axes in scope (in this
    thread) to ``trace_changed(trace)`` and ``axis_env_changed(env)``."""
    global _trace_changed, _axis_env_changed
    _trace_changed, _axis_env_changed = trace_changed, axis_env_changed


def _no_eager_evaluation(prim, args, params):
    raise RuntimeError(f"no eager evaluation is installed to run {prim.name}: import plax "
                       "(plax.runtime.dispatch installs it).")


# How EvalTrace runs a primitive on concrete values: the runtime's apply_primitive, which
# runtime/dispatch.py installs when it is imported (the runtime sits above this module).
_apply_primitive = _no_eager_evaluation


def install_eager_evaluation(apply_primitive) -> None:
    """Make ``apply_primitive(prim, args, params)`` how EvalTrace runs primitives."""
    global _apply_primitive
    _apply_primitive = apply_primitive


def current_trace() -> Trace:
    t = trace_state.trace
    if t is None:
        t = trace_state.trace = EvalTrace()
        _trace_changed(t)
    return t


class set_current_trace:
    """Context manager making ``trace`` the current trace (a class: it runs for every
    primitive a transformation forwards to its parent, so it should be cheap)."""

    __slots__ = ("trace", "prev")

    def __init__(self, trace: Trace):
        self.trace = trace

    def __enter__(self):
        self.prev = trace_state.trace
        trace_state.trace = self.trace
        _trace_changed(self.trace)
        return self.trace

    def __exit__(self, *exc):
        trace_state.trace = self.prev
        _trace_changed(self.prev)
        return False


def axis_env() -> tuple:
    """The named axes in scope, innermost last, as ``((name, size), ...)``."""
    return trace_state.axis_env


@contextlib.contextmanager
def extend_axis_env(pairs):
    """Bring named axes into scope (vmap/pmap do this; so does make_jaxpr(axis_env=...))."""
    pairs = tuple(pairs)
    for p in pairs:
        if not (isinstance(p, tuple) and len(p) == 2 and isinstance(p[1], int) and p[1] >= 0):
            raise TypeError(f"axis_env entries must be (name, size) pairs with a non-negative "
                            f"int size, got {p!r}.")
    prev = trace_state.axis_env
    trace_state.axis_env = prev + pairs
    _axis_env_changed(trace_state.axis_env)
    try:
        yield
    finally:
        trace_state.axis_env = prev
        _axis_env_changed(prev)


def name_stack() -> NameStack:
    return trace_state.name_stack


@contextlib.contextmanager
def extend_name_stack(name: str):
    """Push ``name`` on the name stack that staged equations record."""
    prev = trace_state.name_stack
    trace_state.name_stack = prev.extend(name)
    try:
        yield
    finally:
        trace_state.name_stack = prev


@contextlib.contextmanager
def transform_name_stack(name: str):
    """Stage equations inside under the transformation ``name`` (``jvp``, ``vmap``,
    ``transpose``), as JAX's name stacks record the transformations applied."""
    prev = trace_state.name_stack
    trace_state.name_stack = prev.transform(name)
    try:
        yield
    finally:
        trace_state.name_stack = prev


@contextlib.contextmanager
def fresh_name_stack():
    """An empty name stack, e.g. for a jitted body whose scopes are relative to the jit."""
    prev = trace_state.name_stack
    trace_state.name_stack = EMPTY_NAME_STACK
    try:
        yield
    finally:
        trace_state.name_stack = prev


class EvalTrace(Trace):
    """Runs primitives on concrete values right away."""

    def __init__(self):
        super().__init__(None, "eager evaluation")

    def evaluates_eagerly(self) -> bool:
        return True

    def process_primitive(self, prim, args, params):
        for a in args:
            if isinstance(a, Tracer):
                if not a._trace.alive:
                    raise errors.UnexpectedTracerError(escaped_tracer_message(a))
                raise errors.UnexpectedTracerError(
                    f"A tracer of {a._trace.description or 'a transformation'} reached eager "
                    f"evaluation of {prim.name}: {escaped_tracer_message(a)}")
        return _apply_primitive(prim, args, params)


def get_aval(x) -> ShapedArray:
    return x.aval if isinstance(x, Tracer) else abstractify(x)


def concrete_or_error(force, val, context: str = ""):
    """``force(val)`` (or ``val`` when ``force`` is None) for a value known concretely.

    A tracer whose trace knows its value counts as concrete; any other tracer
    raises ConcretizationTypeError, with ``context`` saying what needed the value.
    """
    if isinstance(val, Tracer):
        concrete = val.to_concrete_value()
        if concrete is None:
            raise errors.ConcretizationTypeError(val, context)
        val = concrete
    return val if force is None else force(val)
