"""The user-facing entry points: jit, make_jaxpr and the staging helpers (devices and data
are in api/devices.py)."""
from __future__ import annotations

import contextlib
import functools
import weakref

import numpy as np

from plax import tree_util
from plax.core import caches, dtypes
from plax.core import trace as trace_mod
from plax.core.refs import AbstractRef
from plax.core.avals import ShapedArray, abstractify
from plax.core.config import config
from plax.core.hi_types import hi_type_of, hi_value_types
from plax.core.jaxpr import ClosedJaxpr, consts_as_inputs, eval_jaxpr
from plax.core.shape_dtype_struct import ShapeDtypeStruct
from plax.core.symbolic_shapes import DimExpr, dimension_as_value
from plax.core.source_info import flat_arg_names, fun_name, traced_call_code, wraps
from plax.core.staging import trace_to_jaxpr
from plax.core.tracebacks import api_boundary
from plax.core.trace import (EvalTrace, Tracer, current_trace, extend_axis_env, extend_name_stack,
                             fresh_name_stack, get_aval, set_current_trace)
from plax.higher_order import pjit
from plax.higher_order import ref_effects
from plax.higher_order.ref_effects import RefsCaptured
from plax.higher_order.pjit import pjit_p
from plax.runtime import cpp_jit, dispatch, jitted, pipeline_steps, tokens, xla
from plax.sharding import NamedSharding
from plax.sharding.mesh import computation_mesh, context_mesh
from plax.sharding.named import typed_aval
from plax.api.jit_options import (
    UNSPECIFIED, broadcast_shardings, live_jit_states, shared_jit_state, traces_by_function)
from plax.api.hi_values import (HiValueArgument, call_with_hi_values,
                                 eval_shape_with_hi_values, returned_reference_error)
from plax.api.stages import Traced
from plax.runtime.array import ARRAY_TYPES, CONCRETE


# --- the key-reuse checker (jax_debug_key_reuse) -----------------------------------------
# plax.interpreters.key_reuse loads the first time the flag is found on, not at import.
def _check_key_reuse(closed) -> None:
    """With ``jax_debug_key_reuse`` on, check ``closed`` for a PRNG key consumed twice."""
    if config.read("debug_key_reuse"):
        from plax.interpreters import key_reuse
        key_reuse.check_jaxpr(closed)


def _check_key_reuse_of_eager_call(closed, args, run):
    # Around every eager call of a jitted function (pjit's eager rule): the flag is read
    # at the call, so turning it on (config.update, the context manager) takes effect there.
    if not config.read("debug_key_reuse"):
        return run()
    from plax.interpreters import key_reuse
    return key_reuse.check_call(closed, args, run)


pjit.add_eager_call_check(_check_key_reuse_of_eager_call)


# --- staging -----------------------------------------------------------------------------
def _check_static_argnums(static_argnums, nargs: int, fname: str) -> tuple:
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    out = []
    for i in static_argnums:
        j = i + nargs if i < 0 else i
        if not 0 <= j < nargs:
            raise ValueError(f"static_argnums {i} is out of range for {fname}, which was "
                             f"called with {nargs} positional arguments.")
        out.append(j)
    return tuple(sorted(set(out)))


def _avals_of(leaves, where: str) -> list:
    avals = []
    for i, x in enumerate(leaves):
        try:
            avals.append(get_aval(x) if isinstance(x, Tracer) else _shape_dtype_aval(x))
        except TypeError as e:
            raise TypeError(f"Argument {where} leaf {i} of type {type(x).__name__} is not a valid "
                            f"plax type: {e}") from None
    return avals


def _shape_dtype_aval(x) -> ShapedArray:
    if isinstance(x, AbstractRef):  # (a reference's type: traced as a reference)
        return x
    if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(
            x, (np.ndarray, np.generic, ARRAY_TYPES)) and type(x) not in hi_value_types:
        return _described_aval(x)
    return abstractify(x)


def _described_aval(x) -> ShapedArray:
    """The type of a value described by its ``shape``, ``dtype`` (and ``weak_type`` and
    ``sharding``), such as a ShapeDtypeStruct."""
    aval = ShapedArray(x.shape, dtypes.canonicalize_dtype(x.dtype),
                       getattr(x, "weak_type", False))
    return typed_aval(aval, getattr(x, "sharding", None))  # Explicit axes: in the type



def make_jaxpr(fun, static_argnums=(), axis_env=None, return_shape=False):
    """A function returning the ClosedJaxpr of ``fun`` traced on the given arguments.

    Arguments may be arrays, scalars or anything with ``shape`` and ``dtype``
    (such as ``ShapeDtypeStruct``). ``axis_env`` is a sequence of ``(name, size)``
    pairs naming axes that collectives in ``fun`` may refer to. With ``return_shape=True`` the function
    also returns the output shapes as a pytree of ShapeDtypeStruct-like values.
    """
    axis_pairs = tuple(tuple(p) for p in (axis_env or ()))
    fname = fun_name(fun)

    @wraps(fun)
    @api_boundary
    def make_jaxpr_f(*args, **kwargs):
        static = _check_static_argnums(static_argnums, len(args), fname)
        dyn_args = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = tree_util.tree_flatten((dyn_args, kwargs))
        avals = _avals_of(leaves, f"of {fname}")
        out_tree_box = []

        def flat_fun(*flat):
            dyn, kw = tree_util.tree_unflatten(in_tree, list(flat))
            it = iter(dyn)
            full = [args[i] if i in static else next(it) for i in range(len(args))]
            out = fun(*full, **kw)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            out_tree_box.append(out_tree)
            return out_leaves

        names = flat_arg_names(fun, args, kwargs, static)
        with extend_axis_env(axis_pairs):
            jaxpr, consts = ref_effects.trace_reading_refs(flat_fun, lambda f: trace_to_jaxpr(
                f, avals, description=fname,
                arg_names=names if len(names) == len(avals) else None))
        closed = ClosedJaxpr(jaxpr, consts)
        _check_key_reuse(closed)
        if return_shape:
            shapes = [ShapeDtypeStruct(v.aval.shape, v.aval.dtype, weak_type=v.aval.weak_type)
                      for v in jaxpr.outvars]
            return closed, tree_util.tree_unflatten(out_tree_box[0], shapes)
        return closed

    make_jaxpr_f.__name__ = f"make_jaxpr({fname})"
    return make_jaxpr_f


def typeof(x) -> ShapedArray:
    """The abstract value (shape, dtype, weak type) of ``x`` (of a ShapeDtypeStruct: the
    type it describes)."""
    if type(x) is ShapeDtypeStruct:
        return _described_aval(x)
    return get_aval(x)


# --- jit (its options and shared caches: api/jit_options.py) -------------------------------
class _JitEntry:
    """One traced specialisation of a jitted function (one cache entry)."""

    __slots__ = ("params", "call", "consts", "in_tree", "out_tree", "in_avals", "user_jaxpr",
                 "arg_names", "cacheable", "placed_consts")

    def __init__(self):
        self.placed_consts = {}  # device -> consts with the host ones on it

    def arg_name(self, i: int) -> str:
        return self.arg_names[i] if self.arg_names and i < len(self.arg_names) else f"leaf {i}"

    def out_info(self):
        shapes = [shape_dtype_struct_of(a) for a in self.params["jaxpr"].out_avals]
        return tree_util.tree_unflatten(self.out_tree, shapes)


def shape_dtype_struct_of(aval) -> ShapeDtypeStruct:
    """A result's ShapeDtypeStruct: with the sharding in its type when that names a mesh."""
    sharding = getattr(aval, "_sharding", None)
    if sharding is not None and not sharding.mesh.axis_names:
        sharding = None
    return ShapeDtypeStruct(aval.shape, aval.dtype, sharding=sharding, weak_type=aval.weak_type)


def _forget_fast_paths(name: str) -> None:
    # The eager fast paths cache the executable chosen for uncommitted inputs: it changes
    # with the default device.
    if name in ("default_device", "platforms"):
        for state in list(live_jit_states):
            state.fast.clear()
        cpp_jit.clear_all()


config._listeners.append(_forget_fast_paths)


_plain, _overrides = config._plain, config._active_overrides  # see config.plain_dispatch()
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"  # (plax.monitoring)
_trace_state = trace_mod.trace_state


def _placed_consts(entry, exe) -> tuple:
    """``entry``'s constants, the host ones put on ``exe``'s device once (not on every call,
    and so that C++ can pass them)."""
    program = getattr(exe, "program", None)
    if program is None or not any(_is_host_const(c) for c in entry.consts):
        return tuple(entry.consts)  # (an SPMD program lays its constants out itself)
    placed = entry.placed_consts.get(program.device)
    if placed is None:
        placed = entry.placed_consts[program.device] = tuple(
            dispatch.array_from_host(c, device=program.device) if _is_host_const(c) else c
            for c in entry.consts)
    return placed


# Closed-over constants up to this many bytes in all are compiled into the program, as JAX
# compiles them (XLA then folds arithmetic with them: ``x / c`` becomes ``x * (1/c)``, whose
# rounding numpyro's chains follow). Larger ones stay parameters: plax writes its programs as
# text, where a constant of 10M floats took 2.7 s to compile (JAX: 0.6 s; as a parameter, 20 ms).
_EMBEDDED_BYTES_LIMIT = 1 << 20


def _embeddable(consts) -> bool:
    """Can these closed-over constants be compiled into a one-device program's text? Host
    arrays and Arrays on one device can, up to the size limit; a reference cannot."""
    total = 0
    for c in consts:
        if isinstance(c, (np.ndarray, np.generic)):
            if c.dtype == dtypes.float0:
                return False
        elif type(c) not in ARRAY_TYPES or dispatch.is_spread(c):
            return False
        total += c.size * c.dtype.itemsize
    return total <= _EMBEDDED_BYTES_LIMIT


def _is_host_const(c) -> bool:
    return isinstance(c, np.ndarray) and c.dtype != dtypes.float0  # (float0 has no data)


def _plain_eager() -> bool:
    """No flag or context asks for Python, and nothing is being traced: a call may run from
    the C++ cache (and may be recorded there)."""
    # (A thread's trace is made on first use: before that, the call is plain eager too.)
    return _plain[0] and (not _overrides[0] or config.dispatch_flags_off()) and \
        type(_trace_state.trace or current_trace()) is EvalTrace and not _trace_state.axis_env


def _miss_handler(wrapped):
    # Through a weak reference: the C++ callable is held by ``wrapped``.
    ref = weakref.ref(wrapped)

    @api_boundary
    def cache_miss(*args, **kwargs):
        return ref()._cpp_miss(*args, **kwargs)
    return cache_miss


class JitWrapped:
    """A function compiled with XLA on first call for each new argument signature."""

    def __init__(self, fun, *, in_shardings, out_shardings, static_argnums, static_argnames,
                 donate_argnums, donate_argnames, keep_unused, device, backend, inline,
                 compiler_options, eager_only=False):
        if not callable(fun):
            raise TypeError(f"Expected a callable value, got {fun!r}")
        functools.update_wrapper(self, fun)
        self._fun = fun
        self._name = fun_name(fun)
        # eager_only: see eager_compiled.
        state = self._state = shared_jit_state(fun, dict(
            in_shardings=in_shardings, out_shardings=out_shardings,
            static_argnums=static_argnums, static_argnames=static_argnames,
            donate_argnums=donate_argnums, donate_argnames=donate_argnames,
            keep_unused=keep_unused, device=device, backend=backend, inline=inline,
            compiler_options=compiler_options, eager_only=eager_only))
        self.__dict__.update(state.resolved)
        self._cache, self._fast = state.entries, state.fast
        if eager_only:
            # plax's own array functions never carry a reference from then on: a call that
            # meets one (jnp's error checks write theirs) runs op by op, that call alone.
            self._catches_refs = False
        # The C++ callable holds this object, which holds it weakly: no cycle, so a
        # temporary ``jit(obj.method)`` goes at once (and its cache with the bound method).
        self._cpp_ref = None
        if self._use_cpp:
            cpp = cpp_jit.make(self._name, fun, _miss_handler(self), self._static_argnums,
                               self._static_argnames, state if state.shared else None)
            functools.update_wrapper(cpp, fun)
            cpp._plax_jit = self  # (what jit returns: see _jitted)
            self._cpp_ref = weakref.ref(cpp)
            self._new_cpp = cpp  # held until _jitted takes it

    def _callable(self):
        """What ``jit`` returns: the C++ callable where there is one (a call then costs no
        Python frame), with JitWrapped's methods; else this object."""
        cpp = self.__dict__.pop("_new_cpp", None) or self._cpp
        return self if cpp is None else cpp

    @property
    def _cpp(self):
        """jaxlib's C++ callable for this function (what ``jit`` returned), or None."""
        ref = self._cpp_ref
        return None if ref is None else ref()

    def __repr__(self):
        return f"<PjitFunction of {self._fun!r}>"

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    # --- arguments ---
    def _split(self, args, kwargs):
        """(static key, dynamic positional args, dynamic kwargs, donated flags per dynamic arg)."""
        n = len(args)
        static_nums = {i % n for i in self._static_argnums if -n <= i < n} if n else set()
        static_vals = []
        for i in sorted(static_nums):
            static_vals.append(("pos", i, _hashable_static(args[i], f"argument {i}")))
        for k in sorted(kwargs):
            if k in self._static_argnames:
                static_vals.append(("kw", k, _hashable_static(kwargs[k], f"argument {k!r}")))
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_nums)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self._static_argnames}
        donate_nums = {i % n for i in self._donate_argnums if -n <= i < n} if n else set()
        donated = [i in donate_nums for i in range(n) if i not in static_nums]
        donated_kw = {k: k in self._donate_argnames for k in dyn_kwargs}
        return tuple(static_vals), static_nums, dyn_args, dyn_kwargs, donated, donated_kw

    def _entry(self, args, kwargs):
        """The cache entry for these arguments (tracing on a miss) and the dynamic leaves."""
        if self._closed_refs:  # it closes over references: carried in and out (hi_values)
            raise HiValueArgument(self._name)
        static_key, static_nums, dyn_args, dyn_kwargs, donated, donated_kw = self._split(args, kwargs)
        leaves, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
        avals = tuple(_jit_aval(x, self._name, i, lambda: flat_arg_names(
            self._fun, args, kwargs, static_nums)) for i, x in enumerate(leaves))
        # Named axes in scope change what axis_size/psum mean inside: part of the key, as
        # are the flags that change tracing (x64, rank/dtype promotion, matmul precision).
        key = (in_tree, avals, static_key, config.trace_context(),
               trace_mod.axis_env(), context_mesh() if self._shardings_given else None)
        entry = self._cache.get(key)
        if entry is None:
            function = self._state.function
            traced = function.traces.get(key)  # traced by a jit of this function before
            fresh = traced is None
            if fresh:
                traced = self._trace_or_find_refs(args, kwargs, static_nums, in_tree, avals)
            entry = self._with_params(traced, dyn_args, dyn_kwargs, donated, donated_kw)
            if fresh:
                # (the flag is part of the key: checked once per trace)
                _check_key_reuse(entry.params["jaxpr"])
                self._explain_miss(key, entry)
                if traced.cacheable:
                    function.traces[key] = traced
            if entry.cacheable:
                self._cache[key] = entry
            function.last_key = key
        return entry, leaves

    def _explain_miss(self, key, entry):
        # Unset flag: a miss only counts until the 5th retrace (RETRACES_BEFORE_EXPLAINING).
        self._state.function.n_traces += 1
        flag = config.read("explain_cache_misses")
        every = flag is True or (flag is None and config.read("log_compiles"))
        if flag is False or (not every and self._state.function.n_traces <= 5):
            return
        from plax.api.explain_cache_misses import explain
        explain(self, key, entry, every)

    _closed_refs = ()  # references the function closes over (found when first traced)
    _catches_refs = True

    def _trace_or_find_refs(self, *trace_args) -> _JitEntry:
        # A reference met from outside is carried as an implicit argument and result
        # (JAX's discharge): noted, and the call goes the way of hi values.
        try:
            return self._trace(*trace_args)
        except RefsCaptured as e:
            if not self._catches_refs or e.target.parent is not current_trace():
                raise
            self.__dict__["_closed_refs"] = self._closed_refs + tuple(
                r for r in e.refs if not any(r is q for q in self._closed_refs))
            raise HiValueArgument(self._name) from None

    def _trace(self, args, kwargs, static_nums, in_tree, avals) -> _JitEntry:
        """Trace the function for these arguments (an entry without parameters)."""
        out_tree_box = []
        fun, name = self._fun, self._name

        def flat_fun(*flat):
            d_args, d_kwargs = tree_util.tree_unflatten(in_tree, list(flat))
            it = iter(d_args)
            full = [args[i] if i in static_nums else next(it) for i in range(len(args))]
            kw = dict(kwargs)
            kw.update(d_kwargs)
            out = fun(*full, **kw)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            # a symbolic dimension returned is its value (JAX's dimension_as_value)
            out_leaves = [dimension_as_value(x) if isinstance(x, DimExpr) else x
                          for x in out_leaves]
            for j, leaf in enumerate(out_leaves):
                if type(leaf) in hi_value_types:
                    if not hi_type_of(leaf).has_qdd:  # returned as its lo values
                        raise HiValueArgument(name)
                    raise returned_reference_error(name, leaf, j)
                if not _is_array_like(leaf):
                    raise TypeError(f"jitted function {name} returned a value of type "
                                    f"{type(leaf).__name__} at output leaf {j}; outputs must be "
                                    "arrays or scalars (or pytrees of them).")
            out_tree_box.append(out_tree)
            return out_leaves

        traced_call_code.add(flat_fun.__code__)
        names = flat_arg_names(fun, args, kwargs, static_nums)
        names = names if len(names) == len(avals) else None
        # (the step: for the profiler and plax.monitoring)
        here = current_trace()
        with fresh_name_stack(), pipeline_steps.step("trace", name, TRACE_EVENT), \
                ref_effects.noting_const_reads() as refs_read:
            jaxpr, consts = trace_to_jaxpr(flat_fun, list(avals), description=name,
                                           arg_names=names)
        # A reference from outside read as a constant: right for this call; later calls
        # carry it in (the hi-values path) instead of reusing this trace.
        outside = [r for r in refs_read if ref_effects.lives_outside(r, here)]
        if outside and self._catches_refs:
            self.__dict__["_closed_refs"] = self._closed_refs + tuple(
                r for j, r in enumerate(outside) if not any(
                    r is q for q in (*self._closed_refs, *outside[:j])))
        entry = _JitEntry()
        entry.user_jaxpr = ClosedJaxpr(jaxpr, consts)
        entry.consts = consts
        entry.in_tree, entry.out_tree, entry.in_avals = in_tree, out_tree_box[0], avals
        entry.arg_names = names
        entry.cacheable = not refs_read and not any(isinstance(c, Tracer) for c in consts)
        return entry

    def _with_params(self, traced, dyn_args, dyn_kwargs, donated, donated_kw) -> _JitEntry:
        """``traced`` with this jit's parameters for the call (donation, shardings, ...)."""
        entry = _JitEntry()
        for name in ("user_jaxpr", "consts", "in_tree", "out_tree", "in_avals", "arg_names",
                     "cacheable"):
            setattr(entry, name, getattr(traced, name))
        consts = traced.consts
        # Constants become leading arguments, so the callee has no closed-over values.
        callee, _ = consts_as_inputs(traced.user_jaxpr)
        leaf_donated = []
        for arg, d in zip(dyn_args, donated):
            leaf_donated += [d] * len(tree_util.tree_leaves(arg))
        for k in sorted(dyn_kwargs):
            leaf_donated += [donated_kw[k]] * len(tree_util.tree_leaves(dyn_kwargs[k]))
        entry.params = dict(jaxpr=callee, name=self._name,
                            donated_invars=(False,) * len(consts) + tuple(leaf_donated),
                            keep_unused=self._keep_unused, inline=self._inline, device=self._device,
                            compiler_options=self._compiler_options,
                            in_shardings=self._flat_in_shardings(len(consts), dyn_args,
                                                                 dyn_kwargs),
                            out_shardings=self._flat_out_shardings(traced.out_tree))
        entry.call = jitted.JitCall.of(entry.params)
        if consts and entry.cacheable and _embeddable(consts):
            entry.call = entry.call.replace(embedded=tuple(consts))
        return entry

    # --- shardings: pytree prefixes resolved to one entry per leaf ---
    def _flat_in_shardings(self, n_consts: int, dyn_args, dyn_kwargs) -> tuple:
        """One sharding (or None: unconstrained) per operand: consts, then argument leaves."""
        if self._in_shardings is None:
            return ()
        per_arg = broadcast_shardings(self._in_shardings, tuple(dyn_args), "in_shardings",
                                      self._name)
        n_kw = len(tree_util.tree_leaves(dyn_kwargs))
        return (None,) * n_consts + tuple(per_arg) + (None,) * n_kw

    def _flat_out_shardings(self, out_tree) -> tuple:
        if self._out_shardings is None:
            return ()
        return tuple(broadcast_shardings(self._out_shardings, out_tree, "out_shardings",
                                         self._name))

    # --- calling ---
    @api_boundary
    def __call__(self, *args, **kwargs):
        if self._cpp is not None:  # jaxlib's C++ dispatch (runtime/cpp_jit.py)
            return self._cpp(*args, **kwargs)
        if _plain_eager() and self._fast_ok and not kwargs and not _overrides[0]:
            return self._run_fast(args)[0]
        return self._call_python(*args, **kwargs)

    def _call_python(self, *args, **kwargs):
        """A call through the general path: under a transformation, with flags, or eager."""
        if config.read("disable_jit"):
            return self._fun(*args, **kwargs)
        try:
            entry, leaves = self._entry(args, kwargs)
        except HiValueArgument:
            return call_with_hi_values(self, args, kwargs)
        trace = current_trace()
        # Staged (into a jit, make_jaxpr, ...), not evaluated now or under eager transforms.
        staged = not isinstance(trace, EvalTrace) and not trace.evaluates_eagerly()
        if self._inline and staged:
            outs = eval_jaxpr(entry.params["jaxpr"].jaxpr, [], *entry.consts, *leaves)
        elif entry.call.embedded and isinstance(trace, EvalTrace):
            outs = pjit.run_call(entry.call, [*entry.consts, *leaves])  # (as the fast path)
        elif staged and entry.consts and entry.cacheable and _embeddable(entry.consts):
            # The constants stay in the callee, as JAX's (up to the size compiled into
            # programs; larger ones stay operands).
            outs = pjit_p.bind(*leaves, **_nested_params(entry))
        else:
            outs = pjit_p.bind(*entry.consts, *leaves, **entry.params)
        return tree_util.tree_unflatten(entry.out_tree, outs)

    def _cpp_miss(self, *args, **kwargs):
        """The C++ dispatch's miss handler: run the call in Python, and (for a plain eager
        call) say how C++ can run calls like it by itself from now on (None: it cannot)."""
        if not _plain_eager():
            call = self._traced_call if self._eager_only else self._call_python
            return call(*args, **kwargs), None, False
        try:
            result, data = self._run_recording(args, kwargs)
        except HiValueArgument:
            if self._eager_only:  # (plax's own array functions run op by op: see below)
                return self._fun(*args, **kwargs), None, False
            return call_with_hi_values(self, args, kwargs), None, False
        except Exception:
            if not self._eager_only:
                raise
            return self._fun(*args, **kwargs), None, False  # (see eager_compiled)
        return result, data, False

    def _traced_call(self, *args, **kwargs):
        """An ``eager_compiled`` function called under a transformation. As JAX's
        ``jit(inline=True)`` functions: one jit when the transformation evaluates eagerly
        (eager grad, jvp, vmap: its known part then runs as one program, whose bits XLA's
        rewrites may change), else ``fun`` itself, its primitives staged."""
        if current_trace().evaluates_eagerly():
            try:
                return self._call_python(*args, **kwargs)
            except Exception:
                pass  # (``fun`` raises the error the user should see: see eager_compiled)
        return self._fun(*args, **kwargs)

    def _run_recording(self, args, kwargs):
        """A plain eager call, and the fast-path data C++ needs to run such calls."""
        if self._fast_ok and not kwargs and not _overrides[0]:  # (its key has no overrides)
            result, hit, leaves = self._run_fast(args)
        else:
            entry, leaves = self._entry(args, kwargs)
            exe, committed = self._executable(entry, leaves)
            consts = _placed_consts(entry, exe)
            outs = exe.run(list(consts) + list(leaves), committed)
            result = tree_util.tree_unflatten(entry.out_tree, outs)
            hit = (exe, entry, committed, False, consts) if entry.cacheable else None
        data = None if hit is None else cpp_jit.fastpath_data(hit[0], hit[4], leaves, result)
        return result, data

    def _run_fast(self, args):
        """Eager call with positional arguments: one dict lookup from arguments to the
        executable. Same semantics as the general path, which fills this cache. Returns the
        result, the cache entry used (None if none) and the argument leaves."""
        if all(type(a) in CONCRETE for a in args):
            leaves, in_tree = args, len(args)  # all leaves: the count fixes the structure
        else:
            leaves, in_tree = tree_util.tree_flatten(args)
        sig = _fast_signature(leaves)
        if sig is None:
            try:
                entry, leaves = self._entry(args, {})
            except HiValueArgument:
                if self._eager_only:
                    raise
                return call_with_hi_values(self, args, {}), None, leaves
            outs = pjit.run_call(entry.call, [*entry.consts, *leaves]) if entry.call.embedded \
                else pjit_p.bind(*entry.consts, *leaves, **entry.params)
            return tree_util.tree_unflatten(entry.out_tree, outs), None, leaves
        key = (in_tree, sig, config.trace_context())
        if self._shardings_given:  # PartitionSpecs resolve against the context mesh
            key += (context_mesh(),)
        mesh = computation_mesh()
        if mesh is not None:  # (set_mesh's: the call runs over it)
            key += (mesh,)
        hit = self._fast.get(key)
        if hit is None:
            entry, leaves = self._entry(args, {})
            exe, committed = self._executable(entry, leaves)
            single = entry.out_tree.num_leaves == 1 and tree_util.treedef_is_leaf(entry.out_tree)
            hit = (exe, entry, committed, single, _placed_consts(entry, exe))
            if entry.cacheable:
                self._fast[key] = hit
        exe, entry, committed, single, consts = hit
        outs = exe.run(list(consts) + list(leaves) if consts else leaves, committed)
        result = outs[0] if single else tree_util.tree_unflatten(entry.out_tree, outs)
        return result, (hit if entry.cacheable else None), leaves

    def _executable(self, entry, leaves):
        """The executable for an eager call of ``entry`` on ``leaves`` (compiled on first
        use), and whether its outputs are committed."""
        return jitted.executable_for(entry.call, list(entry.consts) + list(leaves))

    def trace(self, *args, **kwargs):
        """Trace for these arguments (arrays or ShapeDtypeStructs) -> ``stages.Traced``."""
        entry, leaves = self._entry(args, kwargs)
        if self._closed_refs:  # (it read a reference's value now: a later run would not)
            raise HiValueArgument(self._name)
        return Traced(self, entry, args, leaves)

    def lower(self, *args, **kwargs):
        """Trace and lower for these arguments -> ``stages.Lowered`` (``.as_text()``, ``.compile()``)."""
        return self.trace(*args, **kwargs).lower()

    def eval_shape(self, *args, **kwargs):
        """The output shapes and dtypes as a pytree of ShapeDtypeStruct, without running."""
        entry, _ = self._entry(args, kwargs)
        return entry.out_info()

    def clear_cache(self) -> None:
        """Drop this function's traces and executables (shared by every jit of it)."""
        self._state.function.clear()
        self._state.clear()
        if self._cpp is not None:
            self._cpp._clear_cache()


_SCALAR_LEAF_TYPES = (int, float, bool, complex)


def _fast_signature(leaves):
    """A hashable description of argument leaves that fixes the executable to run: avals and
    devices of Arrays, types of Python scalars, shapes and dtypes of NumPy arrays. None if
    some leaf needs the general path (tracers, other types)."""
    sig = []
    for x in leaves:
        t = type(x)
        if t in CONCRETE:
            s = x._sharding
            dev = getattr(s, "device_for_dispatch", None)
            if dev is None:  # laid out over a mesh: the layout picks the program
                if not isinstance(s, NamedSharding):
                    return None
                dev = s
            sig.append((x.aval, dev, x._committed))
        elif t in _SCALAR_LEAF_TYPES:
            sig.append(t)
        elif t is np.ndarray or isinstance(x, np.generic):
            sig.append((x.shape, x.dtype))
        else:
            return None
    return tuple(sig)


def _hashable_static(value, where: str):
    try:
        hash(value)
    except TypeError as e:
        raise ValueError(
            f"Non-hashable static arguments are not supported. An error occurred while trying to "
            f"hash an object of type {type(value)}, {value!r}, passed as static {where}. The "
            f"error was: {e}. Pass a hashable value (e.g. a tuple instead of a list).") from None
    return value


def _nested_params(entry) -> dict:
    """``entry``'s pjit parameters with its (concrete) constants kept in the callee."""
    n = len(entry.consts)
    shardings = entry.params.get("in_shardings") or ()
    return dict(entry.params, jaxpr=entry.user_jaxpr,
                donated_invars=entry.params["donated_invars"][n:],
                in_shardings=tuple(shardings[n:]) if shardings else ())


def _is_array_like(x) -> bool:
    return isinstance(x, (ARRAY_TYPES, np.ndarray, np.generic, bool, int, float, complex))


def _jit_aval(x, fname: str, i: int, names):
    if isinstance(x, Tracer):
        return x.aval
    if ref_effects.is_reference_view(x):
        raise HiValueArgument(fname)  # (a view of a reference: as a reference)
    try:
        aval = _shape_dtype_aval(x)
    except TypeError:
        all_names = names()
        where = all_names[i] if i < len(all_names) else f"leaf {i}"
        raise TypeError(
            f"Error interpreting argument to {fname} as an abstract array. The problematic value "
            f"is of type {type(x)} and was passed to the function at path {where}. This "
            "typically means that a jit-wrapped function was called with a non-array argument "
            "that was not marked as static using the static_argnums or static_argnames "
            "parameters of plax.jit.") from None
    if type(aval) is not ShapedArray and getattr(aval, "is_high", False):
        raise HiValueArgument(fname)  # (the call goes through api/hi_values.py)
    return aval


def jit(fun=None, in_shardings=UNSPECIFIED, out_shardings=UNSPECIFIED, static_argnums=None,
        static_argnames=None, donate_argnums=None, donate_argnames=None, keep_unused=False,
        device=None, backend=None, inline=False, compiler_options=None):
    """Compile ``fun`` with XLA; usable as ``@jit``, ``@jit(static_argnums=...)`` or via partial."""
    kwargs = dict(in_shardings=in_shardings, out_shardings=out_shardings,
                  static_argnums=static_argnums, static_argnames=static_argnames,
                  donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                  keep_unused=keep_unused, device=device, backend=backend, inline=inline,
                  compiler_options=compiler_options)
    if fun is None:
        return lambda f: _jitted(f, kwargs)
    return _jitted(fun, kwargs)


def _jitted(fun, kwargs):
    return JitWrapped(fun, **kwargs)._callable()


def _forward_to_jit_wrapped(name):
    def method(self, *args, **kwargs):
        return getattr(self._plax_jit, name)(*args, **kwargs)
    method.__name__ = name
    method.__doc__ = getattr(JitWrapped, name).__doc__
    return method


def _jit_wrapped_attribute(self, name):
    # Any other attribute (``_static_argnames``, ``_cache``, ...) is the JitWrapped's.
    wrapped = self.__dict__.get("_plax_jit")
    if wrapped is None:
        raise AttributeError(name)
    return getattr(wrapped, name)


cpp_jit.install_methods(__getattr__=_jit_wrapped_attribute,
                        **{name: _forward_to_jit_wrapped(name)
                           for name in ("trace", "lower", "eval_shape", "clear_cache")})


def eager_compiled(fun=None, *, static_argnames=()):
    """Decorator for plax's own array functions (``plax.numpy``'s ufuncs and reductions):
    an eager call runs as one program compiled for its argument signature and dispatched
    from C++, as JAX's jitted ``jax.numpy`` functions do, instead of op by op. A call
    under a transformation that evaluates eagerly (eager grad, jvp, vmap) is one jit too,
    so its known part runs as one program with JAX's bits; under a staging trace it runs
    ``fun`` itself, so jaxprs show its primitives (JAX's ``jit(inline=True)``).

    A call the compiled form cannot take (an unhashable static argument, an argument type
    jit rejects, a failure while tracing) runs ``fun`` op by op, which raises the error the
    user should see or returns the answer.

    The result's ``_traced_form`` is the traced call alone: callers that know an operand is
    a tracer (its operators) call it directly, without going through the eager dispatch.
    """
    if fun is None:
        return functools.partial(eager_compiled, static_argnames=static_argnames)

    def compile_it():
        # eager_only: traced calls and failures run ``fun`` itself.
        wrapped = JitWrapped(
            fun, in_shardings=UNSPECIFIED, out_shardings=UNSPECIFIED, static_argnums=(),
            static_argnames=static_argnames, donate_argnums=None, donate_argnames=None,
            keep_unused=False, device=None, backend=None, inline=True, compiler_options=None,
            eager_only=True)
        return wrapped._callable()

    if not static_argnames:  # the C++ callable itself: no Python frame on an eager call
        cpp = compile_it()
        cpp._traced_form = getattr(cpp, "_plax_jit", cpp)._traced_call
        return cpp
    compiled = []  # made on the first eager call

    def call(*args, **kwargs):
        # Static arguments may be unhashable (axis=[0, 1]), which C++ would reject before
        # Python sees the call: those run ``fun`` itself.
        if not _plain_eager():
            return traced(*args, **kwargs)
        if not compiled:
            compiled.append(compile_it())
        try:
            return compiled[0](*args, **kwargs)
        except Exception:  # (see the docstring)
            return fun(*args, **kwargs)

    def traced(*args, **kwargs):
        if not current_trace().evaluates_eagerly():
            return fun(*args, **kwargs)
        if not compiled:
            compiled.append(compile_it())
        return getattr(compiled[0], "_plax_jit", compiled[0])._traced_call(*args, **kwargs)

    functools.update_wrapper(call, fun)
    call._traced_form = traced
    return call


# --- staging utilities ------------------------------------------------------------------------
@api_boundary
def eval_shape(fun, *args, **kwargs):
    """The shapes and dtypes ``fun`` would return, as a pytree of ShapeDtypeStruct (no FLOPs)."""
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    if hi_value_types and any(type(x) in hi_value_types and not isinstance(
            hi_type_of(x), AbstractRef) for x in leaves):  # (references are traced as such)
        jitted = jit(fun)
        return eval_shape_with_hi_values(getattr(jitted, "_plax_jit", jitted), args, kwargs)
    avals = _avals_of(leaves, f"of {fun_name(fun)}")
    out_tree_box, given = [], {}

    def flat_fun(*flat):
        a, k = tree_util.tree_unflatten(in_tree, list(flat))
        out_leaves, out_tree = tree_util.tree_flatten(fun(*a, **k))
        out_tree_box.append(out_tree)
        # A ShapeDtypeStruct the function returns (as JAX allows) is its own answer.
        given.update((i, x) for i, x in enumerate(out_leaves) if isinstance(x, ShapeDtypeStruct))
        return [x for i, x in enumerate(out_leaves) if i not in given]

    jaxpr, _ = ref_effects.trace_reading_refs(
        flat_fun, lambda f: trace_to_jaxpr(f, avals, description=fun_name(fun)))
    _check_key_reuse(jaxpr)
    traced = iter(shape_dtype_struct_of(a) for a in jaxpr.out_avals)
    shapes = [given[i] if i in given else next(traced)
              for i in range(out_tree_box[0].num_leaves)]
    return tree_util.tree_unflatten(out_tree_box[0], shapes)


def disable_jit(disable: bool = True):
    """Context manager under which jitted functions run op by op (``print`` shows values)."""
    return config.override("disable_jit", disable)


def named_scope(name: str):
    """Context manager adding ``name`` to the name stack of staged ops (seen in lowered text)."""
    if not isinstance(name, str):
        raise TypeError(f"named_scope name argument must be a string, got {type(name).__name__}.")
    if xla.profiler_active():  # the scope shows in a profile, around the ops traced in it
        return _annotated_scope(name)
    return extend_name_stack(name)


@contextlib.contextmanager
def _annotated_scope(name: str):
    with xla.TraceMe(f"named_scope {name}"), extend_name_stack(name):
        yield


def named_call(fun, *, name: str | None = None):
    """``fun`` with its staged ops grouped under ``name`` (default: the function's name)."""
    scope = name or fun_name(fun)
    if not isinstance(scope, str):
        raise TypeError(f"named_call name must be a string, got {type(scope).__name__}.")

    @wraps(fun)
    def named(*args, **kwargs):
        with extend_name_stack(scope):
            return fun(*args, **kwargs)
    return named


def clear_caches() -> None:
    """Drop every compilation and tracing cache (jitted functions retrace on next call)."""
    caches.clear_all()
    for state in list(live_jit_states):
        state.function.clear()
        state.clear()
    cpp_jit.clear_all()
    traces_by_function.clear()  # (options resolve to devices anew, as after clear_backends)


def clear_backends() -> None:
    """Drop the XLA clients (and all caches); they are re-created on next use."""
    clear_caches()
    dispatch.forget_default_device()
    tokens.clear()
    xla.clear_backends()


def effects_barrier() -> None:
    """Wait until every computation with effects dispatched so far has finished its host
    callbacks (``debug.print``, ``io_callback``, ...), as JAX's does. (It does not wait
    for pure computations: ``block_until_ready`` their results.)"""
    tokens.barrier()


class _CompileTimeEvalTrace(EvalTrace):
    """Evaluates ops on concrete values now, even inside a trace; traced inputs still stage."""

    def evaluates_eagerly(self) -> bool:
        return False  # (its traced inputs belong to a staging trace)

    def process_primitive(self, prim, args, params):
        for a in args:
            if isinstance(a, Tracer) and a._trace.alive:
                return a._trace.process_primitive(prim, args, params)
        return super().process_primitive(prim, args, params)


@contextlib.contextmanager
def ensure_compile_time_eval():
    """Run ops on concrete values eagerly inside a traced function (e.g. to build constants)."""
    with set_current_trace(_CompileTimeEvalTrace()):
        yield


@contextlib.contextmanager
def eval_context():
    """Run ops eagerly, as outside every transformation, while the context is open."""
    with set_current_trace(EvalTrace()):
        yield
