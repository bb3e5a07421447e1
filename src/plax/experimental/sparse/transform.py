"""``sparsify``: run a function written for dense arrays on sparse arrays.

Sparse values live in a ``SparsifyEnv``: a list of buffers (dense arrays, or the data,
indices and indptr of sparse ones) that ``SparsifyValue`` records point into by position.
Two values holding the same ``indices_ref`` have the same sparsity pattern, so a rule may
combine their data directly (values entering separately never share one).

Two interpreters use them. By default the function is traced to a jaxpr on the dense types
of its arguments and the jaxpr is evaluated by ``eval_sparse``; with ``use_tracer=True`` it
runs on ``SparseTracer`` values under a ``SparseTrace``. Either way an operation whose
operands are all dense binds its primitive as usual, and one with a sparse operand runs the
primitive's sparse rule (``sparse_rules_bcoo``, or ``sparse_rules_bcsr`` from ``bcsr.py`` for
BCSR operands), which returns sparse or dense values. Primitives without a rule raise
NotImplementedError, saying whether the result would have been dense. The rules live in
``bcoo_rules.py``, which fills ``sparse_rules_bcoo`` and attaches BCOO's operators and methods
made from ``sparsify``; the package's ``__init__`` imports it, so they are in place whenever
any module of ``plax.experimental.sparse`` is.
"""
from __future__ import annotations

import functools
import sys
from typing import Any, NamedTuple

from plax.api_util import flatten_fun_nokwargs  # noqa: F401 (re-exported, as JAX's module)
from plax.core.avals import ShapedArray
from plax.core.jaxpr import Literal
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import Trace, Tracer, current_trace, get_aval, set_current_trace
from plax.experimental.sparse._base import JAXSparse
from plax.experimental.sparse.bcoo import (BCOO, bcoo_multiply_dense,  # noqa: F401
                                           bcoo_multiply_sparse)
from plax.tree_util import tree_flatten, tree_map, tree_unflatten
from plax.typing import Array  # noqa: F401 (re-exported, as JAX's module)

__all__ = ["sparsify", "sparse_rules_bcoo", "SparsifyEnv", "SparsifyValue", "SparseTracer",
           "SparseTrace", "arrays_to_spvalues", "spvalues_to_arrays", "spvalues_to_avals",
           "eval_sparse", "sparsify_raw", "sparsify_fun", "sparsify_subtrace"]

ArrayOrSparse = Any

_BCSR_MODULE = "plax.experimental.sparse.bcsr"


def _bcsr_class():
    """The BCSR class when its module is loaded (a BCSR value implies it is), else None."""
    module = sys.modules.get(_BCSR_MODULE)
    return getattr(module, "BCSR", None)


def __getattr__(name):
    # The BCSR rules live with the BCSR format (bcsr.py), loaded on first use.
    if name in ("sparse_rules_bcsr", "BCSR"):
        import importlib
        try:
            return getattr(importlib.import_module(_BCSR_MODULE), name)
        except (ImportError, AttributeError):
            pass
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- values and their environment -------------------------------------------------------------
class SparsifyValue(NamedTuple):
    """One value of the sparse interpreter: its shape and the positions (in a
    ``SparsifyEnv``) of its buffers: ``data_ref`` alone for a dense array, with
    ``indices_ref`` for BCOO, and ``indptr_ref`` too for BCSR."""
    shape: tuple
    data_ref: int | None
    indices_ref: int | None = None
    indptr_ref: int | None = None
    indices_sorted: bool = False
    unique_indices: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_sparse(self) -> bool:
        return self.indices_ref is not None

    def is_dense(self) -> bool:
        return self.indices_ref is None

    def is_bcoo(self) -> bool:
        return self.indices_ref is not None and self.indptr_ref is None

    def is_bcsr(self) -> bool:
        return self.indptr_ref is not None


class SparsifyEnv:
    """The buffers that ``SparsifyValue`` records point into (by position)."""

    def __init__(self, bufs=()):
        self._buffers = list(bufs)

    def _push(self, arr) -> int:
        self._buffers.append(arr)
        return len(self._buffers) - 1

    def data(self, spvalue: SparsifyValue):
        """The dense array, or the stored data of a sparse one."""
        return self._buffers[spvalue.data_ref]

    def indices(self, spvalue: SparsifyValue):
        return self._buffers[spvalue.indices_ref]

    def indptr(self, spvalue: SparsifyValue):
        return self._buffers[spvalue.indptr_ref]

    def dense(self, data) -> SparsifyValue:
        """A dense value holding ``data``."""
        return SparsifyValue(tuple(get_aval(data).shape), self._push(data))

    def sparse(self, shape, data=None, indices=None, indptr=None, *, data_ref=None,
               indices_ref=None, indptr_ref=None, indices_sorted=False,
               unique_indices=False) -> SparsifyValue:
        """A sparse value: each buffer given as an array (added) or a ref (shared)."""
        if data is not None:
            data_ref = self._push(data)
        if indices is not None:
            indices_ref = self._push(indices)
        if indptr is not None:
            indptr_ref = self._push(indptr)
        if data_ref is None or indices_ref is None:
            raise ValueError("SparsifyEnv.sparse: a sparse value needs data and indices.")
        return SparsifyValue(tuple(shape), data_ref, indices_ref, indptr_ref,
                             indices_sorted, unique_indices)


def _is_sparse_obj(x) -> bool:
    return isinstance(x, JAXSparse)


def _is_spvalue(x) -> bool:
    return isinstance(x, SparsifyValue)


def arrays_to_spvalues(spenv: SparsifyEnv, args):
    """``args`` (a pytree of dense and sparse arrays) with each array made a value of
    ``spenv``."""
    bcsr = _bcsr_class()

    def convert(x):
        if isinstance(x, BCOO):
            return spenv.sparse(x.shape, x.data, x.indices, indices_sorted=x.indices_sorted,
                                unique_indices=x.unique_indices)
        if bcsr is not None and isinstance(x, bcsr):
            return spenv.sparse(x.shape, x.data, x.indices, x.indptr,
                                indices_sorted=x.indices_sorted,
                                unique_indices=x.unique_indices)
        if isinstance(x, JAXSparse):
            raise NotImplementedError(f"sparsify does not support {type(x).__name__} inputs; "
                                      "convert them to BCOO or BCSR.")
        return spenv.dense(x)
    return tree_map(convert, args, is_leaf=_is_sparse_obj)


def spvalues_to_arrays(spenv: SparsifyEnv, spvalues):
    """The dense and sparse arrays ``spvalues`` (a pytree of values) stand for."""
    def convert(v):
        if v.is_bcsr():
            return _bcsr_class()((spenv.data(v), spenv.indices(v), spenv.indptr(v)),
                                 shape=v.shape, indices_sorted=v.indices_sorted,
                                 unique_indices=v.unique_indices)
        if v.is_bcoo():
            return BCOO((spenv.data(v), spenv.indices(v)), shape=v.shape,
                        indices_sorted=v.indices_sorted, unique_indices=v.unique_indices)
        return spenv.data(v)
    return tree_map(convert, spvalues, is_leaf=_is_spvalue)


def spvalues_to_avals(spenv: SparsifyEnv, spvalues):
    """The dense types (ShapedArray) of ``spvalues``."""
    def convert(v):
        data = get_aval(spenv.data(v))
        return ShapedArray(v.shape, data.dtype, data.weak_type)
    return tree_map(convert, spvalues, is_leaf=_is_spvalue)


# --- rule lookup --------------------------------------------------------------------------------
sparse_rules_bcoo: dict = {}

_DENSIFYING = frozenset(["acos", "acosh", "bessel_i0e", "cos", "cosh", "eq", "exp", "ge", "gt",
                         "le", "lt", "log", "ne", "xor"])


def _raise_unimplemented_primitive(prim):
    if prim.name in _DENSIFYING:
        raise NotImplementedError(
            f"sparse rule for {prim} is not implemented because it would result in dense "
            "output. If this is your intent, use sparse.todense() to convert your arguments to "
            "dense matrices.")
    raise NotImplementedError(f"sparse rule for {prim} is not implemented.")


def _apply(spenv: SparsifyEnv, prim, spvalues, params) -> list:
    """``prim`` applied to ``spvalues``: its sparse rule when one is sparse, else the
    primitive itself on the dense arrays."""
    if any(v.is_sparse() for v in spvalues):
        if any(v.is_bcsr() for v in spvalues):
            rules = sys.modules[_BCSR_MODULE].sparse_rules_bcsr
        else:
            rules = sparse_rules_bcoo
        rule = rules.get(prim)
        if rule is None:
            _raise_unimplemented_primitive(prim)
        return list(rule(spenv, *spvalues, **params))
    out = prim.bind(*(spenv.data(v) for v in spvalues), **params)
    return [spenv.dense(o) for o in (out if prim.multiple_results else [out])]


# --- the jaxpr interpreter ----------------------------------------------------------------------
def eval_sparse(jaxpr, consts, spvalues, spenv: SparsifyEnv):
    """Evaluate ``jaxpr`` on ``spvalues`` (the constants are dense arrays); returns the
    output values."""
    env = {}

    def read(v):
        return spenv.dense(v.value()) if isinstance(v, Literal) else env[v]

    for var, c in zip(jaxpr.constvars, consts):
        env[var] = spenv.dense(c)
    for var, val in zip(jaxpr.invars, spvalues):
        env[var] = val
    for eqn in jaxpr.eqns:
        outs = _apply(spenv, eqn.primitive, [read(v) for v in eqn.invars], eqn.params)
        for var, val in zip(eqn.outvars, outs):
            env[var] = val
    return [read(v) for v in jaxpr.outvars]


def sparsify_raw(f):
    """``f`` as a function of ``(spenv, *spvalues, **params)`` (pytrees of values) returning
    ``(output values, output tree)``: traced on the dense types, evaluated sparsely."""
    def wrapped(spenv: SparsifyEnv, *spvalues, **params):
        flat, in_tree = tree_flatten(spvalues, is_leaf=_is_spvalue)
        out_tree = []

        def flat_fun(*xs):
            out = f(*tree_unflatten(in_tree, list(xs)), **params)
            leaves, tree = tree_flatten(out)
            out_tree.append(tree)
            return leaves
        jaxpr, consts = trace_to_jaxpr(flat_fun, spvalues_to_avals(spenv, flat),
                                       description=f"sparsify({getattr(f, '__name__', f)})")
        return eval_sparse(jaxpr, consts, flat, spenv), out_tree[0]
    return wrapped


# --- the tracer interpreter ---------------------------------------------------------------------
class SparseTracer(Tracer):
    """A value of a ``SparseTrace``: a dense or sparse array, as a ``SparsifyValue`` of the
    trace's environment. Its type is the dense array's."""

    __slots__ = ("_spvalue",)

    def __init__(self, trace: "SparseTrace", *, spvalue: SparsifyValue):
        if not hasattr(trace, "spenv"):
            raise RuntimeError("Internal: trace does not have spenv defined.")
        self._trace = trace
        self._spvalue = spvalue

    @property
    def spenv(self) -> SparsifyEnv:
        return self._trace.spenv

    @property
    def aval(self) -> ShapedArray:
        return spvalues_to_avals(self._trace.spenv, [self._spvalue])[0]

    def full_lower(self):
        return self


class SparseTrace(Trace):
    """Runs primitives on ``SparseTracer`` values through the sparse rules."""

    def __init__(self, parent_trace: Trace, spenv: SparsifyEnv, description: str = "sparsify"):
        super().__init__(parent_trace, description)
        self.spenv = spenv

    @property
    def parent_trace(self) -> Trace:
        return self.parent

    def to_sparse_tracer(self, val) -> SparseTracer:
        """``val`` as a tracer of this trace (values from outside it are dense)."""
        if isinstance(val, SparseTracer) and val._trace is self:
            return val
        if isinstance(val, Tracer):
            self.check_foreign_tracer(val)
        with set_current_trace(self.parent):
            spvalue, = arrays_to_spvalues(self.spenv, [val])
        return SparseTracer(self, spvalue=spvalue)

    def process_primitive(self, prim, args, params):
        spvalues = [self.to_sparse_tracer(a)._spvalue for a in args]
        with set_current_trace(self.parent):
            outs = _apply(self.spenv, prim, spvalues, params)
        tracers = [SparseTracer(self, spvalue=v) for v in outs]
        return tracers if prim.multiple_results else tracers[0]


def sparsify_subtrace(f, spenv: SparsifyEnv, spvalues):
    """Run ``f`` (flat inputs to a flat list of outputs) on tracers of a fresh
    ``SparseTrace`` for ``spvalues``; returns the output values (in ``spenv``)."""
    trace = SparseTrace(current_trace(), spenv)
    try:
        with set_current_trace(trace):
            outs = f(*(SparseTracer(trace, spvalue=v) for v in spvalues))
            return [trace.to_sparse_tracer(o)._spvalue for o in outs]
    finally:
        trace.finish()


def sparsify_fun(wrapped_fun, args):
    """``wrapped_fun`` (flat inputs to a flat list of outputs) run with the tracer
    interpreter on ``args`` (dense and sparse arrays); returns its output arrays."""
    spenv = SparsifyEnv()
    spvalues = arrays_to_spvalues(spenv, list(args))
    return spvalues_to_arrays(spenv, sparsify_subtrace(wrapped_fun, spenv, spvalues))


def _sparsify_with_tracer(fun):
    @functools.wraps(fun)
    def wrapped(*args, **params):
        flat, in_tree = tree_flatten(args, is_leaf=_is_sparse_obj)
        out_tree = []

        def flat_fun(*xs):
            out = fun(*tree_unflatten(in_tree, list(xs)), **params)
            leaves, tree = tree_flatten(out, is_leaf=_is_sparse_obj)
            out_tree.append(tree)
            return leaves
        out = sparsify_fun(flat_fun, flat)
        return tree_unflatten(out_tree[0], out)
    return wrapped


def _sparsify_with_interpreter(fun):
    @functools.wraps(fun)
    def wrapped(*args, **params):
        spenv = SparsifyEnv()
        spvalues = arrays_to_spvalues(spenv, args)
        out, out_tree = sparsify_raw(fun)(spenv, *spvalues, **params)
        return tree_unflatten(out_tree, spvalues_to_arrays(spenv, out))
    return wrapped


def sparsify(f, use_tracer: bool = False):
    """``f`` made to accept sparse arrays (BCOO, BCSR) anywhere among its (pytree)
    arguments.

    ``f`` runs on the dense types of its arguments; wherever a sparse value meets a
    primitive with a sparse rule the work stays sparse (elementwise ops that keep zeros,
    products, sums, transposes, reshapes, slices, control flow, ...), and the results are
    sparse or dense arrays accordingly. Keyword arguments are passed through as static
    values. ``use_tracer=True`` runs ``f`` on tracers instead of interpreting its jaxpr.
    """
    if use_tracer:
        return _sparsify_with_tracer(f)
    return _sparsify_with_interpreter(f)

