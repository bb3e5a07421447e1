"""Mutable references met by a traced function that did not create them: JAX's discharge.

A reference (``plax.ref.Ref``) is a Python box whose ``_value`` lives in one trace, its
``_live`` trace (where it was made, or where a transformation is carrying it now). Reads and
writes from a trace nested inside that one go through this module:

- A staging trace (a ``jit``, ``scan``, ``while_loop`` or ``cond`` body) between the current
  trace and the live one cannot read the box now: its value would be baked into the
  program. ``read``/``write`` raise ``RefsCaptured`` naming the outermost such trace. The
  API that made that trace (``with_closed_refs``) catches it and traces again, this time
  passing the reference's value in and its final value out: a jit takes it as an implicit
  argument and writes it back after the call, a loop threads it as a carry, ``cond``
  returns every branch's final value. Inside, the box is ``bound`` to the traced value.
- A ``vmap`` between them refuses writes, and a value traced by ``grad``/``jvp`` cannot be
  stored into a reference that outlives the differentiation: JAX's two errors.
- Partial evaluation (``grad``'s linearize) is transparent: known values are stored as they
  are.
"""
from __future__ import annotations

import contextlib
import threading
import weakref

from plax import tree_util
from plax.core.avals import pytype_aval_mappings
from plax.core.hi_types import hi_value_types
from plax.core.rules import Zero
from plax.core.staging import StagingTrace
from plax.core.trace import EvalTrace, Tracer, current_trace, get_aval
from plax.first_order.state import TransformedRef
from plax.runtime.array import CONCRETE
from plax.transforms.jvp import JVPTracer
from plax.transforms.linearize import PartialEvalTrace
from plax.transforms.vmap import BatchTrace


class RefsCaptured(ValueError):
    """References a staging trace would have to carry: the API that made the trace catches
    this and traces again with them threaded through (uncaught, it is the user's error)."""

    def __init__(self, refs, target):
        self.refs = list(refs)
        self.target = target
        super().__init__(
            f"A mutable array reference ({refs[0].aval}) created outside a traced function is "
            f"read or written inside it (while tracing {target.description or 'a function'}), "
            "which cannot carry it in and out. Pass the reference to the function as an "
            "argument instead.")


def _encloses(outer, inner) -> bool:
    """Whether trace ``outer`` is ``inner`` or one of its ancestors."""
    while inner is not None:
        if inner is outer:
            return True
        inner = inner.parent
    return False


def _path_to_live(ref) -> list:
    """The traces from the current one up to (not including) the one ``ref`` lives in."""
    live, trace, path = ref._live, current_trace(), []
    while trace is not live:
        if trace is None:
            raise ValueError(
                f"A mutable array reference ({ref.aval}) created inside a traced function is "
                "used after that function returned (it escaped its trace): create it where "
                "it is used, or pass it in as an argument.")
        if isinstance(trace, EvalTrace) and isinstance(live, EvalTrace):
            break  # (made eagerly on another thread)
        path.append(trace)
        trace = trace.parent
    return path


def _check_path(ref, path) -> None:
    staging = [t for t in path
               if isinstance(t, StagingTrace) and not isinstance(t, PartialEvalTrace)]
    if staging:
        raise RefsCaptured([ref], staging[-1])


def read(ref):
    """The value ``ref`` holds, as the current trace may use it. Read inside a staging trace
    the reference does not live in, the value is a constant of that trace (closed over as
    any outer value is): right for this one trace, so the API that made it must not reuse
    it for another call (``noting_const_reads``). Only a write makes the API carry it."""
    live, trace = ref._live, current_trace()
    if trace is not live and not (isinstance(trace, EvalTrace) and isinstance(live, EvalTrace)):
        path = _path_to_live(ref)
        if any(isinstance(t, StagingTrace) and not isinstance(t, PartialEvalTrace)
               for t in path):
            for log in _const_read_logs:
                log.append(ref)
    return ref._value


# The lists of references read as constants while a trace that may be cached is made.
_const_read_logs: list = []


@contextlib.contextmanager
def noting_const_reads():
    """Within: each reference read as a constant of a staging trace (see ``read``) is
    appended to the list yielded (a trace that read one must not be cached)."""
    log = []
    _const_read_logs.append(log)
    try:
        yield log
    finally:
        del _const_read_logs[next(i for i, x in enumerate(_const_read_logs) if x is log)]


def lives_outside(ref, trace) -> bool:
    """Whether ``ref`` lives in ``trace`` or a trace enclosing it."""
    return _encloses(ref._live, trace) or (isinstance(ref._live, EvalTrace)
                                           and isinstance(trace, EvalTrace))


def write(ref, value, written_back: bool = False, operation: str = "a set/swap") -> None:
    """Store ``value`` (an array of ``ref``'s type) into ``ref`` from the current trace.
    ``written_back``: the final value of a call or loop that carried the reference, which a
    ``vmap`` around it accepts unless it is batched. ``operation`` names the write in
    errors."""
    if same_contents(value, ref._value):
        return  # (carried through unchanged)
    live, trace = ref._live, current_trace()
    if trace is not live and not (isinstance(trace, EvalTrace) and isinstance(live, EvalTrace)):
        path = _path_to_live(ref)
        _check_path(ref, path)
        for t in path:
            if isinstance(t, BatchTrace) and not (written_back and not (
                    isinstance(value, Tracer) and _encloses(t, value._trace))):
                raise ValueError(
                    f"Exception performing {operation} operation with vmapped value on an "
                    f"unbatched array reference of type {ref.aval}. Move the array reference "
                    "to be an argument to the vmapped function?")
        value = _settle(ref, value, live)
    ref._value = value


def _settle(ref, value, live):
    """``value`` as a value of trace ``live`` (or of one outside it): a derivative that is
    symbolically zero is dropped; anything else still traced inside is refused."""
    if not isinstance(value, Tracer):  # (a box holds a pytree: each leaf settled)
        leaves, tree = tree_util.tree_flatten(value)
        if any(isinstance(x, Tracer) for x in leaves):
            return tree_util.tree_unflatten(tree, [_settle(ref, x, live) for x in leaves])
        return value
    while isinstance(value, Tracer) and not _encloses(value._trace, live):
        if isinstance(value, JVPTracer) and type(value.tangent) is Zero:
            value = value.primal
            continue
        what = ("a differentiated value" if isinstance(value, JVPTracer)
                else f"a value traced by {value._trace.description or 'a transformation'}")
        raise ValueError(
            f"Exception performing a set/swap operation with {what} on a non-differentiated "
            f"array reference of type {ref.aval}: the value would escape its transformation. "
            "Move the array reference to be an argument of the differentiated function?")
    return value


@contextlib.contextmanager
def bound(refs, values):
    """Within: each of ``refs`` holds the matching value of ``values`` and lives in the
    current trace (a traced body carrying them); restored afterwards."""
    saved = [(r._value, r._live) for r in refs]
    here = current_trace()
    for r, v in zip(refs, values):
        r._value, r._live = v, here
    try:
        yield
    finally:
        for r, (v, live) in zip(refs, saved):
            r._value, r._live = v, live


def same_contents(a, b) -> bool:
    """Whether a reference's contents ``a`` are ``b`` (the same array, or for a library's hi
    value the same lo values)."""
    return a is b or (type(a) is list and type(b) is list and len(a) == len(b)
                      and all(x is y for x, y in zip(a, b)))


def final_values(refs) -> list:
    """What ``refs`` hold now (inside ``bound``: the body's final values)."""
    return [r._value for r in refs]


def with_closed_refs(run_plain, run_threaded):
    """``run_plain()``; if the trace it makes meets references from outside, ``run_threaded
    (refs)`` instead, with every such reference found (traced again as more are found)."""
    here = current_trace()
    refs = []
    while True:
        try:
            return run_threaded(refs) if refs else run_plain()
        except RefsCaptured as e:
            if e.target.parent is not here:
                raise
            new = [r for r in e.refs if not any(r is q for q in refs)]
            if not new:
                raise
            refs += new


def trace_reading_refs(flat_fun, trace, writes_refused=None):
    """``trace(flat_fun)``, references closed over from outside read as constants and
    nothing written back (nothing runs: make_jaxpr, eval_shape). ``writes_refused``: the
    error to raise if ``flat_fun`` writes one (a body whose primitive carries no state)."""
    def attempt(refs):
        held = read_all(refs)

        def with_refs(*flat):
            with bound(refs, held):
                out = flat_fun(*flat)
                if writes_refused is not None and any(
                        not same_contents(a, b) for a, b in zip(final_values(refs), held)):
                    raise writes_refused
                return out
        return trace(with_refs if refs else flat_fun)
    return with_closed_refs(lambda: attempt(()), attempt)


def read_all(refs) -> list:
    """The values a body carrying ``refs`` starts from (a writer, such as a log, starts
    empty: ``_carry_in()``)."""
    return [r._carry_in() if hasattr(r, "_carry_in") else read(r) for r in refs]


def write_all(refs, values) -> None:
    """Write back the final values of a call or loop that carried ``refs`` (a writer adds
    what the body wrote: ``_carried_out(final)``)."""
    for r, v in zip(refs, values):
        write(r, r._carried_out(v) if hasattr(r, "_carried_out") else v, written_back=True)


def check_types_kept(refs, before, after, api: str) -> None:
    """JAX's error for a loop body that changed the type of a reference it carries (a box
    set to a value of another structure, shape or dtype)."""
    def types(v):
        leaves, tree = tree_util.tree_flatten(v)
        return tree, [(getattr(a, "shape", None), getattr(a, "dtype", None))
                      for a in map(get_aval, leaves)]
    for r, old, new in zip(refs, before, after):
        if types(old) != types(new):
            raise TypeError(f"type-changing mutations not allowed in a {api} body: a "
                            f"reference of type {r.aval} held {types(old)[0]} of types "
                            f"{types(old)[1]} and was set to {types(new)[0]} of types "
                            f"{types(new)[1]}.")


def is_writer(ref) -> bool:
    """Whether ``ref`` only accumulates (a log): a loop body's writes come out per
    iteration instead of being carried."""
    return hasattr(ref, "_carry_in")


def is_reference(x) -> bool:
    return type(x) in hi_value_types and pytype_aval_mappings[type(x)](x).has_qdd


def aliased_reference(leaves):
    """The first reference given twice among argument ``leaves``, with the positions of both
    places; None if there is none."""
    seen = {}
    for j, x in enumerate(leaves):
        if is_reference(x):
            if id(x) in seen:
                return x, seen[id(x)], j
            seen[id(x)] = j
    return None


def leaf_name(names, j: int) -> str:
    """The name of argument leaf ``j`` (``names`` as ``flat_arg_names`` gives them)."""
    return names[j] if j < len(names) else f"argument leaf {j}"


def refuse_aliased_references(leaves, names, fname: str, api: str) -> None:
    """JAX's error when one reference is given twice among a call's argument ``leaves``.
    ``names`` gives the leaves' names when called: only an error needs them."""
    found = aliased_reference(leaves)
    if found is not None:
        x, i, j = found
        names = names()
        raise ValueError(
            "only one reference to a mutable array may be passed as an argument to a "
            f"function, but when tracing {fname} for {api} the mutable array "
            f"reference of type {x.aval} appeared at both {leaf_name(names, i)} and "
            f"{leaf_name(names, j)}.")


def refuse_closed_and_passed(refs, leaves, names, fname: str, api: str) -> None:
    """JAX's error when a reference the function closes over is also one of its arguments."""
    for j, x in enumerate(leaves):
        if is_reference(x) and any(x is r for r in refs):
            name = names[j] if j < len(names) else f"argument leaf {j}"
            raise ValueError(
                f"when tracing {fname} for {api}, a mutable array reference of type {x.aval} "
                f"was both closed over and passed as the argument {name}")


def is_reference_view(x) -> bool:
    """Whether ``x`` is a view (``ref.at[...]``, ``ref.reshape(...)``) of a reference box."""
    return type(x) is TransformedRef and is_reference(x.ref)


def refs_passed_in(args):
    """The leaves of ``args`` (a pytree) that are not references (or views of them), and a
    function rebuilding ``args`` from such leaves (the references put back); None when it
    holds none. (A
    reference passed to a body is then closed over by it, and carried as every closed-over
    reference is. The user's containers are only ever rebuilt around their own kinds of
    values: a dataclass may check its fields.)"""
    if not hi_value_types:
        return None
    leaves, tree = tree_util.tree_flatten(args)
    if not any(is_reference(x) or is_reference_view(x) for x in leaves):
        return None
    kept = [i for i, x in enumerate(leaves) if not (is_reference(x) or is_reference_view(x))]

    def put_back(values):
        full = list(leaves)
        for i, v in zip(kept, values):
            full[i] = v
        return tree_util.tree_unflatten(tree, full)
    return [leaves[i] for i in kept], put_back


def refuse_carried_references(api: str, values) -> None:
    """JAX's error for a reference as a loop carry (the body would return it)."""
    if hi_value_types:
        for x in tree_util.tree_leaves(values):
            if is_reference(x):
                raise ValueError(
                    f"function traced for {api} returned a mutable array reference of type "
                    f"{pytype_aval_mappings[type(x)](x)}, but mutable array references cannot "
                    "be returned: a reference cannot be a loop carry. Close over it in the "
                    "body (it is carried for you) instead.")


# --- a library's mutable hi values (flax.nnx's hijax Variables) as references ----------------
class HiValueCell:
    """A mutable hi value a library defines, seen by this module as a reference: its
    ``_value`` is its lo values (read and written through its type's ``read_loval`` and
    ``update_from_loval``), and it lives in the trace of the innermost tracer among them.
    A ``HiPrimitive`` acting on such a value reports each read and write here, so that a
    ``jit``, ``scan``, ``while_loop`` or ``cond`` body closing over it carries it in and out
    as it does a ``plax.ref`` reference (one cell per value: ``cell_of``)."""

    __slots__ = ("obj", "_qdd", "_born", "__weakref__")

    def __init__(self, obj):
        self.obj = obj
        self._qdd = None  # the QDD of a value being written (see ``write_through``)
        self._born = current_trace()  # (where it lives while it holds no array)

    @property
    def aval(self):
        return pytype_aval_mappings[type(self.obj)](self.obj)

    @property
    def _value(self):
        obj = self.obj
        with _raw_access():
            return list(self.aval.read_loval(obj.cur_qdd(), obj))

    @_value.setter
    def _value(self, values):
        obj = self.obj
        qdd, self._qdd = self._qdd or obj.cur_qdd(), None
        with _raw_access():
            self.aval.update_from_loval(qdd, obj, *values)

    @property
    def _live(self):
        """The trace of the innermost tracer it holds; holding arrays only, the outermost
        (eager) trace; holding no array, the trace it was first met in."""
        values = self._value
        traces = [x._trace for x in values if isinstance(x, Tracer)]
        inner = next((t for t in traces if all(_encloses(o, t) for o in traces)), None)
        if inner is not None:
            return inner
        if not any(type(x) in CONCRETE for x in values):
            return self._born
        trace = current_trace()
        while trace.parent is not None:
            trace = trace.parent
        return trace

    @_live.setter
    def _live(self, trace):
        pass  # (where it lives follows its contents)


# id(value) -> its HiValueCell, while something holds the cell (a trace being made, a jit
# closing over it); the cell holds the value, so the id is the value's while it is here.
_cells = weakref.WeakValueDictionary()
_raw = threading.local()


def cell_of(obj) -> HiValueCell:
    """The one cell of the mutable hi value ``obj``."""
    cell = _cells.get(id(obj))
    if cell is None or cell.obj is not obj:
        cell = _cells[id(obj)] = HiValueCell(obj)
    return cell


@contextlib.contextmanager
def _raw_access():
    """Within: hi primitives act on hi values directly (reading or writing a cell's contents
    binds them too)."""
    before, _raw.on = getattr(_raw, "on", False), True
    try:
        yield
    finally:
        _raw.on = before


def in_raw_access() -> bool:
    return getattr(_raw, "on", False)


def write_through(cells, act):
    """``act()`` (a hi primitive's expansion, which may update mutable hi values in place),
    with each of ``cells`` (its mutable arguments) read, and each update made a reference
    write: refused, or carried by the transformations in between, as a reference's is."""
    cells = [c for c in cells if _staged_between(c)]
    if not cells:
        return act()
    before = []
    for cell in cells:
        read(cell)
        before.append((cell._value, cell.obj.cur_qdd()))
    out = act()
    for cell, (old, old_qdd) in zip(cells, before):
        obj = cell.obj
        new, new_qdd = cell._value, obj.cur_qdd()
        if same_contents(new, old):
            continue
        with _raw_access():  # (put back: where the new contents may go is write's to decide)
            cell.aval.update_from_loval(old_qdd, obj, *old)
        cell._qdd = new_qdd
        try:
            write(cell, new)
        finally:
            cell._qdd = None
    return out


def _staged_between(cell) -> bool:
    """Whether a staging trace (a jit, loop or cond body) lies between the current trace and
    the one ``cell`` lives in (other transformations act on hi values as they did)."""
    live, trace = cell._live, current_trace()
    while trace is not None and trace is not live:
        if isinstance(trace, StagingTrace) and not isinstance(trace, PartialEvalTrace):
            return True
        trace = trace.parent
    return False
