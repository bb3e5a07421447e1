"""checkify: run-time checks turned into an error value the function returns.

``checkify(f)`` stages ``f`` into a jaxpr and evaluates it under a ``CheckifyTrace``.
The trace holds the error so far, an ``Error`` whose leaves are values of the
enclosing trace (arrays when eager, tracers under jit or vmap). Each primitive bound
under the trace comes to it; its rule in ``checkify_rules`` (``rule(trace, args,
params) -> outs``, run in the parent trace) computes the outputs and may add an error
with ``trace.add_error(pred, exception)``. Higher-order primitives (pjit, cond, scan,
while, checkpoint, the custom-derivative calls) thread the error through their
bodies with ``checkify_jaxpr``.

An error is, per kind of error (an ``ErrorEffect``: the exception class and the types
of its payload), a boolean ``pred``, an int32 ``code`` naming the exception's static
part (its message template, kept in ``_metadata``) and the payload arrays (the
values the message shows). Codes grow in the order the checks are met, and the
smallest code of a failed kind is the error reported: the first check that fails in
program order (a check in a loop body is ordered by its place in the body).

``check`` binds ``check_p``, holding an error: under checkify it is merged into the
trace's error; evaluated eagerly it raises ``JaxRuntimeError``; staged without
checkify it cannot be lowered and raises the functionalization error.
"""
from __future__ import annotations

import functools
import itertools

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core.jaxpr import ClosedJaxpr, Literal
from plax.core.rules import (abstract_eval_rules, batch_rules, checkify_rules, effectful_primitives,
                             impl_rules, jvp_rules, param_printers, register_lowering)
from plax.core.primitive import Primitive
from plax.core.shape_dtype_struct import ShapeDtypeStruct
from plax.core.source_info import current_source_info
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import Trace, Tracer, current_trace, get_aval, name_stack, set_current_trace
from plax.first_order import arithmetic as _arith
from plax.first_order import bitwise as _bitwise
from plax.first_order import comparison as _cmp
from plax.first_order import conversion as _conv
from plax.first_order import reductions as _red
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.batch_util import move_batch_dim
from plax.runtime import xla
from plax.runtime.array import ARRAY_TYPES

__all__ = ["Error", "ErrorCategory", "JaxRuntimeError", "all_checks", "automatic_checks",
           "check", "check_error", "checkify", "debug_check", "div_checks", "float_checks",
           "index_checks", "init_error", "nan_checks", "user_checks"]


class JaxRuntimeError(xla.JaxRuntimeError, ValueError):
    """A failed check. A ValueError (as JAX's checkify raises) and a
    ``plax.errors.JaxRuntimeError``."""


# --- the exceptions an error stands for ---------------------------------------------------
class JaxException(Exception):
    """An exception whose message may show run-time values (its payload, pytree leaves)."""

    def __init__(self, traceback_info):
        self.traceback_info = traceback_info  # the SourceInfo of the failing operation

    def __init_subclass__(cls):
        tree_util.register_pytree_node_class(cls)

    def tree_flatten(self):
        return [], self.traceback_info

    @classmethod
    def tree_unflatten(cls, metadata, payload):
        return cls(metadata)

    def get_effect_type(self) -> "ErrorEffect":
        raise NotImplementedError


ErrorCategory = type[JaxException]  # the classes the error sets hold


class ErrorEffect:
    """A kind of error: its exception class and the types of its payload leaves."""

    __slots__ = ("error_type", "shape_dtypes")

    def __init__(self, error_type, shape_dtypes=()):
        self.error_type = error_type
        self.shape_dtypes = tuple(shape_dtypes)

    def _key(self):
        return (str(self.error_type), tuple((s.shape, str(s.dtype)) for s in self.shape_dtypes))

    def __eq__(self, other):
        return (isinstance(other, ErrorEffect) and self.error_type is other.error_type
                and self.shape_dtypes == other.shape_dtypes)

    def __hash__(self):
        return hash((self.error_type, self.shape_dtypes))

    def __lt__(self, other):  # dict keys of a pytree must be orderable
        return self._key() < other._key()

    def __repr__(self):
        return f"ErrorEffect(error_type={self.error_type}, shape_dtypes={self.shape_dtypes})"


def _shape_dtype(x):
    aval = get_aval(x)
    return ShapeDtypeStruct(aval.shape, aval.dtype)


class DivisionByZeroError(JaxException):
    """An integer or floating division had a zero divisor."""

    def __str__(self):
        return "division by zero"

    def get_effect_type(self):
        return ErrorEffect(DivisionByZeroError)


class NaNError(JaxException):
    """A floating-point primitive produced a NaN."""

    def __init__(self, traceback_info, primitive_name):
        super().__init__(traceback_info)
        self.prim = primitive_name

    def tree_flatten(self):
        return [], (self.traceback_info, self.prim)

    @classmethod
    def tree_unflatten(cls, metadata, payload):
        return cls(*metadata)

    def __str__(self):
        return f"nan generated by primitive: {self.prim}."

    def get_effect_type(self):
        return ErrorEffect(NaNError)


class OOBError(JaxException):
    """An index out of bounds; the payload is ``[index, axis, axis size]`` (int32)."""

    def __init__(self, traceback_info, primitive_name, operand_shape, payload):
        super().__init__(traceback_info)
        self.prim = primitive_name
        self.operand_shape = operand_shape
        self._payload = payload

    def tree_flatten(self):
        return [self._payload], (self.traceback_info, self.prim, self.operand_shape)

    @classmethod
    def tree_unflatten(cls, metadata, payload):
        return cls(*metadata, payload=payload[0])

    def __str__(self):
        index, axis, size = (int(v) for v in np.asarray(self._payload))
        return (f"out-of-bounds indexing for array of shape {self.operand_shape}: index {index} "
                f"is out of bounds for axis {axis} with size {size}. ")

    def get_effect_type(self):
        return ErrorEffect(OOBError, (ShapeDtypeStruct((3,), np.int32),))


class FailedCheckError(JaxException):
    """A ``check`` whose predicate was false; the format arguments are the payload."""

    def __init__(self, traceback_info, fmt_string, *a, **k):
        super().__init__(traceback_info)
        self.fmt_string = fmt_string
        self.args = a
        self.kwargs = k

    def tree_flatten(self):
        return (self.args, self.kwargs), (self.traceback_info, self.fmt_string)

    @classmethod
    def tree_unflatten(cls, metadata, payload):
        args, kwargs = payload
        return cls(*metadata, *args, **kwargs)

    def __str__(self):
        return self.fmt_string.format(*self.args, **self.kwargs) + " (`check` failed)"

    def get_effect_type(self):
        leaves = tree_util.tree_leaves((self.args, self.kwargs))
        return ErrorEffect(FailedCheckError, tuple(_shape_dtype(x) for x in leaves))


class BatchedError(JaxException):
    """The errors of a vmapped check, by mapped index."""

    def __init__(self, error_mapping):
        self.error_mapping = error_mapping
        super().__init__(next(iter(error_mapping.values())).traceback_info)

    def __str__(self):
        return "\n".join(f"at mapped index {', '.join(str(i) for i in idx)}: {e}"
                         for idx, e in self.error_mapping.items())

    def __repr__(self):
        return f"BatchedError(error_mapping={self.error_mapping!r})"


# --- the error value ----------------------------------------------------------------------
@tree_util.register_pytree_node_class
class Error:
    """The errors a checkified function met: ``get()`` is the first one's message or None."""

    __slots__ = ("_pred", "_code", "_metadata", "_payload")

    def __init__(self, _pred, _code, _metadata, _payload):
        self._pred = _pred
        self._code = _code
        self._metadata = _metadata  # code -> treedef of the exception (its static part)
        self._payload = _payload

    def get(self) -> str | None:
        """The message of the first error that happened, or None when none did."""
        exc = self.get_exception()
        return None if exc is None else str(exc)

    def get_exception(self) -> JaxException | None:
        """The first error that happened as an exception object, or None when none did."""
        if any(np.shape(p) for p in self._pred.values()):
            return self._batched_exception()
        best = None
        for effect, code in self._code.items():
            if bool(self._pred[effect]):
                code = int(code)
                if best is None or code < best[0]:
                    best = (code, effect)
        if best is None:
            return None
        return tree_util.tree_unflatten(self._metadata[best[0]], self._payload[best[1]])

    def throw(self):
        """Raise ``JaxRuntimeError`` if an error happened (the last failing member of a
        vmapped error)."""
        _check_error(self)

    def __str__(self):
        return f"Error({self.get()})"

    def __repr__(self):
        return (f"Error(_pred={self._pred}, _code={self._code}, _metadata={self._metadata}, "
                f"_payload={self._payload})")

    def _batched_exception(self):
        preds = {e: np.asarray(p) for e, p in self._pred.items()}
        shape = next(iter(preds.values())).shape
        codes = {e: np.broadcast_to(np.asarray(c), shape) for e, c in self._code.items()}
        found = {}
        for idx in np.ndindex(*shape):
            best = None
            for effect, p in preds.items():
                if np.broadcast_to(p, shape)[idx]:
                    code = int(codes[effect][idx])
                    if best is None or code < best[0]:
                        best = (code, effect)
            if best is not None:
                payload = [np.asarray(x)[idx] for x in self._payload[best[1]]]
                found[idx] = tree_util.tree_unflatten(self._metadata[best[0]], payload)
        return BatchedError(found) if found else None

    def _replace(self, **kw):
        d = dict(_pred=self._pred, _code=self._code, _metadata=self._metadata,
                 _payload=self._payload)
        d.update(kw)
        return Error(**d)

    def _add_placeholder_effects(self, effects):
        """This error with every kind in ``effects`` present (those it lacks never failed)."""
        missing = [e for e in effects if e not in self._pred]
        if not missing:
            return self
        pred, code, payload = dict(self._pred), dict(self._code), dict(self._payload)
        for e in missing:
            pred[e] = np.bool_(False)
            code[e] = np.int32(-1)
            payload[e] = [np.ones(s.shape, s.dtype) for s in e.shape_dtypes]
        return Error(pred, code, self._metadata, payload)

    def tree_flatten(self):
        return (self._pred, self._code, self._payload), self._metadata

    @classmethod
    def tree_unflatten(cls, metadata, data):
        pred, code, payload = data
        return cls(pred, code, metadata, payload)


init_error = Error({}, {}, {}, {})
next_code = itertools.count(1).__next__


def _is_false(x) -> bool:
    """Whether ``x`` is known to be false without running anything (a host constant)."""
    return isinstance(x, (bool, np.bool_)) and not x


def update_error(error: Error, effect: ErrorEffect, pred, code, metadata, payload) -> Error:
    """``error`` with a check of kind ``effect`` added; an earlier failure of that kind is
    kept. Runs in the current trace."""
    old = error._pred.get(effect)
    if old is None or _is_false(old):
        new = (pred, code, list(payload))
    elif _is_false(pred):
        new = (old, error._code[effect], error._payload[effect])
    else:
        new = (_bitwise.bitwise_or(old, pred), _cmp.select_n(old, code, error._code[effect]),
               [_cmp.select_n(old, p, q) for p, q in zip(payload, error._payload[effect])])
    return Error({**error._pred, effect: new[0]}, {**error._code, effect: new[1]},
                 {**error._metadata, **metadata}, {**error._payload, effect: new[2]})


def assert_func(error: Error, pred, exc: JaxException) -> Error:
    """``error`` with ``exc`` added, failing where ``pred`` is true."""
    code = next_code()
    payload, treedef = tree_util.tree_flatten(exc)
    return update_error(error, exc.get_effect_type(), pred, np.int32(code), {code: treedef},
                        payload)


def effects_of(err_tree) -> set:
    """The kinds of error an Error of treedef ``err_tree`` holds."""
    return set(tree_util.tree_unflatten(err_tree, [None] * err_tree.num_leaves)._pred)


# --- the error sets ----------------------------------------------------------------------
user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
index_checks = frozenset({OOBError})
div_checks = frozenset({DivisionByZeroError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


# --- the trace ----------------------------------------------------------------------------
class CheckifyTrace(Trace):
    """Runs primitives in the parent trace, adding their checks to ``self.error``."""

    def __init__(self, parent: Trace, enabled: frozenset, error: Error, description=""):
        super().__init__(parent, description or "checkify")
        self.enabled = enabled
        self.error = error
        self.eqn_info = None  # the source of the equation being interpreted, if any

    def source_info(self):
        """Where the operation being checked comes from (its equation's, or the user's
        line that is running)."""
        return self.eqn_info or current_source_info(name_stack())

    def add_error(self, pred, exc: JaxException):
        """Record a check of ``exc`` failing where ``pred``; call from a rule."""
        self.error = assert_func(self.error, pred, exc)

    def process_primitive(self, prim, args, params):
        rule = checkify_rules.get(prim)
        with set_current_trace(self.parent):
            if rule is None:
                return prim.bind(*args, **params)
            return rule(self, args, params)

    def eval_jaxpr(self, jaxpr, consts, args):
        """Evaluate ``jaxpr`` equation by equation under this trace (each check is told its
        equation's source)."""
        env = dict(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, args))

        def read(v):
            return v.value() if isinstance(v, Literal) else env[v]

        saved = self.eqn_info
        try:
            with set_current_trace(self):
                for e in jaxpr.eqns:
                    self.eqn_info = e.source_info
                    out = e.primitive.bind(*[read(v) for v in e.invars], **e.params)
                    if e.primitive.multiple_results:
                        env.update(zip(e.outvars, out))
                    else:
                        env[e.outvars[0]] = out
        finally:
            self.eqn_info = saved
        return [read(v) for v in jaxpr.outvars]


def run_checkified(closed, enabled, error: Error, args):
    """``(error, outputs)`` of ``closed`` on ``args``, its checks added to ``error``."""
    trace = CheckifyTrace(current_trace(), enabled, error)
    try:
        outs = trace.eval_jaxpr(closed.jaxpr, closed.consts, list(args))
    finally:
        trace.finish()
    return trace.error, outs


# --- the public functions -----------------------------------------------------------------
def checkify(f, errors=user_checks):
    """``f`` returning ``(err, out)``: its failed checks as an ``Error`` instead of raising.

    ``errors`` selects what is checked: ``user_checks`` (calls of ``check``), ``nan_checks``,
    ``div_checks``, ``index_checks``, or unions of them (``float_checks | user_checks``,
    ``all_checks``).
    """
    from plax.interpreters import checkify_rules as api_checkify_rules  # noqa: F401  (the rules of every other primitive)
    enabled = frozenset(errors)
    name = f"checkify({getattr(f, '__name__', type(f).__name__)})"

    @functools.wraps(f)
    def checked_fun(*args, **kwargs):
        # As JAX: ``f`` is staged first (array arguments traced, anything else closed over),
        # so that every operation is seen, then its jaxpr is run with the checks.
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        traced = [isinstance(x, (ARRAY_TYPES, np.ndarray, np.generic)) for x in leaves]
        dynamic = [x for x, t in zip(leaves, traced) if t]
        box = []

        def staged(*xs):
            it = iter(xs)
            a, k = tree_util.tree_unflatten(in_tree, [next(it) if t else x
                                                      for x, t in zip(leaves, traced)])
            out_leaves, out_tree = tree_util.tree_flatten(f(*a, **k))
            box.append(out_tree)
            return out_leaves

        jaxpr, consts = trace_to_jaxpr(staged, [get_aval(x) for x in dynamic], description=name)
        error, outs = run_checkified(ClosedJaxpr(jaxpr, consts), enabled, init_error, dynamic)
        return error, tree_util.tree_unflatten(box[0], outs)

    return checked_fun


def _is_scalar_pred(pred) -> bool:
    if isinstance(pred, bool):
        return True
    if isinstance(pred, ARRAY_TYPES):
        aval = get_aval(pred)
        return aval.shape == () and aval.dtype == np.bool_
    return False


def _payload_leaf(x):
    if isinstance(x, ARRAY_TYPES):
        return x
    if isinstance(x, np.ndarray):
        return np.asarray(x, dtypes.canonicalize_dtype(x.dtype))
    raise TypeError("Formatting arguments to checkify.check need to be PyTrees of arrays, but "
                    f"got {x!r} of type {type(x)}.")


def check(pred, msg: str, *fmt_args, debug: bool = False, **fmt_kwargs) -> None:
    """Fail with ``msg`` (formatted with the values of ``fmt_args``/``fmt_kwargs``, pytrees of
    arrays) when the boolean scalar ``pred`` is false.

    Under ``checkify`` the failure becomes its error value; run eagerly it raises
    ``JaxRuntimeError``; staged (jit, scan, ...) without ``checkify`` it cannot run.
    """
    _check(pred, msg, debug, fmt_args, fmt_kwargs)


def debug_check(pred, msg: str, *fmt_args, **fmt_kwargs) -> None:
    """``check`` that only checkify runs: without it, it does nothing (even under jit)."""
    _check(pred, msg, True, fmt_args, fmt_kwargs)


def _check(pred, msg, debug, fmt_args, fmt_kwargs):
    if not _is_scalar_pred(pred):
        raise TypeError(f"{'debug_check' if debug else 'check'} takes a scalar pred as "
                        f"argument, got {pred}")
    leaves, tree = tree_util.tree_flatten((fmt_args, fmt_kwargs))
    args, kwargs = tree_util.tree_unflatten(tree, [_payload_leaf(x) for x in leaves])
    exc = FailedCheckError(current_source_info(name_stack()), msg, *args, **kwargs)
    failed = np.bool_(not pred) if isinstance(pred, bool) else _bitwise.bitwise_not(pred)
    _check_error(assert_func(init_error, failed, exc), debug=debug)


def check_error(error: Error) -> None:
    """Raise if ``error`` holds a failure; under ``checkify`` it becomes part of the new
    error value (so an error passed out of a jit can be checked again)."""
    if not isinstance(error, Error):
        raise TypeError("check_error takes an Error as argument, got type "
                        f"{type(error)} instead.")
    _check_error(error)


def _check_error(error: Error, debug: bool = False):
    if any(np.shape(p) for p in error._pred.values()):
        error = _reduce_batched(error)
    leaves, tree = tree_util.tree_flatten(error)
    check_p.bind(*leaves, err_tree=tree, debug=debug)


def _reduce_batched(error: Error) -> Error:
    """A batched error as one: per kind of error, the last failing member (or the last
    member when none failed). Every leaf of a kind leads with its ``pred``'s shape."""
    if not any(isinstance(x, Tracer) for x in tree_util.tree_leaves(error)):
        return _reduce_batched_on_host(error)
    pred, code, payload = {}, {}, {}
    for effect, p in error._pred.items():
        batch = tuple(np.shape(p))
        n = int(np.prod(batch))
        failed = _conv.convert_element_type(_shapes.reshape(p, (n,)), np.int32)
        at = _arith.sub(np.int32(n - 1), _red.argmax(_shapes.rev(failed, (0,)), 0, np.int32))

        def pick(x, batch=batch, n=n, at=at):
            rows = _shapes.reshape(x, (n,) + tuple(np.shape(x))[len(batch):])
            return _slicing.dynamic_index_in_dim(rows, at, 0, keepdims=False)

        pred[effect] = pick(p)
        code[effect] = pick(error._code[effect])
        payload[effect] = [pick(x) for x in error._payload[effect]]
    return Error(pred, code, error._metadata, payload)


def _reduce_batched_on_host(error: Error) -> Error:
    """``_reduce_batched`` of a concrete error, in NumPy."""
    pred, code, payload = {}, {}, {}
    for effect, p in error._pred.items():
        p = np.asarray(p)
        failed = np.flatnonzero(p.reshape(-1))
        at = int(failed[-1]) if failed.size else p.size - 1

        def pick(x, batch=p.shape, at=at):
            x = np.asarray(x)
            return x.reshape((-1,) + x.shape[len(batch):])[at]

        pred[effect] = pick(p)
        code[effect] = pick(np.broadcast_to(np.asarray(error._code[effect]), p.shape))
        payload[effect] = [pick(x) for x in error._payload[effect]]
    return Error(pred, code, error._metadata, payload)


# --- check_p ------------------------------------------------------------------------------
check_p = Primitive("check", multiple_results=True)
effectful_primitives.add(check_p)

_NOT_FUNCTIONALIZED = (
    "Cannot abstractly evaluate a checkify.check which was not functionalized. A `check` "
    "was staged (by jit, scan, cond, ...) outside of `checkify.checkify`, where nothing can "
    "receive its error: wrap the function in `checkify.checkify` (and, to raise, call "
    "`err.throw()` on the error it returns), or use `checkify.debug_check`, which is dropped "
    "when not checkified.")


def _check_abstract(*avals, err_tree, debug):
    return []


def _check_impl(*args, err_tree, debug):
    if debug:
        return []
    exc = tree_util.tree_unflatten(err_tree, list(args)).get_exception()
    if exc is not None:
        raise JaxRuntimeError(str(exc)) from exc
    return []


def _check_lowering(ctx, *args, err_tree, debug):
    if debug:
        return []
    raise ValueError(_NOT_FUNCTIONALIZED)


def _check_jvp(primals, tangents, *, err_tree, debug):
    check_p.bind(*primals, err_tree=err_tree, debug=debug)
    return [], []


def _check_batch(axis, vals, dims, *, err_tree, debug):
    vals = [move_batch_dim(v, d, 0, axis.size) for v, d in zip(vals, dims)]
    _check_error(tree_util.tree_unflatten(err_tree, vals), debug=debug)
    return [], []


def _recode(code, mapping):
    """``code`` with each old code replaced by its new one (codes are renumbered when a
    check's error joins the trace's, so that they follow program order)."""
    if not isinstance(code, Tracer) and not isinstance(code, ARRAY_TYPES):
        return np.int32(mapping.get(int(code), int(code)))
    out = code
    for old, new in mapping.items():
        out = _cmp.select_n(_cmp.eq(code, np.int32(old)), out, np.int32(new))
    return out


def _check_discharge(trace, args, params):
    """Under checkify: the check's error joins the trace's (for the kinds checked)."""
    new = tree_util.tree_unflatten(params["err_tree"], list(args))
    mapping = {old: next_code() for old in sorted(new._metadata)}
    error = trace.error
    for effect in sorted(new._pred):
        if effect.error_type not in trace.enabled:
            continue
        error = update_error(error, effect, new._pred[effect],
                             _recode(new._code[effect], mapping), {}, new._payload[effect])
    trace.error = error._replace(_metadata={
        **error._metadata, **{mapping[c]: t for c, t in new._metadata.items()}})
    return []


abstract_eval_rules[check_p] = _check_abstract
impl_rules[check_p] = _check_impl
register_lowering(check_p, _check_lowering)
jvp_rules[check_p] = _check_jvp
batch_rules[check_p] = _check_batch
checkify_rules[check_p] = _check_discharge
param_printers[check_p] = lambda p: {"debug": p["debug"]}
