"""The jaxpr plumbing cond, while and scan share.

Bodies are traced once from Python functions on flat avals, and kept without
constants: what a body closes over (arrays, or tracers of an enclosing
transformation) becomes leading operands of the equation. The helpers here
reorder, widen and join those bodies, and check that the pytrees and types
of what user functions return agree, with JAX's error messages.
"""
from __future__ import annotations

import inspect
import weakref

from plax import tree_util
from plax.core import dtypes, replication
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Var, consts_as_inputs, eval_jaxpr
from plax.core.caches import WeakKeyCache
from plax.core.config import config
from plax.core.source_info import fun_name
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import Tracer, get_aval, name_stack
from plax.first_order import conversion
from plax.higher_order import ref_effects
from plax.runtime.dispatch import array_from_host
from plax.core.tree_keys import keystr


_traced_bodies = WeakKeyCache("control-flow bodies")


def trace_body(fun, in_tree, in_avals, description: str):
    """``fun`` traced on flat inputs of types ``in_avals`` (the leaves of ``in_tree``, a
    treedef of the positional-argument tuple): ``(ClosedJaxpr, out_tree)``.

    Traced once per function and input types (held weakly, as JAX does), unless the
    function closes over tracers of an enclosing transformation.
    """
    key = (in_tree, tuple(in_avals), description, name_stack(), config.trace_context())
    try:
        hit = _traced_bodies.get(fun, key)
    except TypeError:  # not weakly referenceable: traced every time
        return _trace(fun, in_tree, in_avals, description)
    if hit is None:
        with ref_effects.noting_const_reads() as refs_read:
            hit = _trace(fun, in_tree, in_avals, description)
        # (a reference's value read as a constant is the value now, not on a later call)
        if not refs_read and not any(isinstance(c, Tracer) for c in hit[0].consts):
            _traced_bodies.put(fun, key, hit)
    return hit


_wrappers = WeakKeyCache("control-flow wrappers")


def wrapper_for(fun, kind: str, make):
    """``make(get_fun)``: a function adapting ``fun`` (which ``get_fun()`` returns), made
    once per ``(fun, kind)`` so that the body traced from it is reused. The wrapper
    refers to ``fun`` weakly, so the cache never keeps it alive."""
    try:
        hit = _wrappers.get(fun, kind)
    except TypeError:  # not weakly referenceable: a fresh wrapper each time
        return make(lambda: fun)
    if hit is None:
        hit = _wrappers.put(fun, kind, make(weakref.ref(fun)))
    return hit


def _trace(fun, in_tree, in_avals, description):
    box = []

    def flat(*leaves):
        args = tree_util.tree_unflatten(in_tree, list(leaves))
        out_leaves, out_tree = tree_util.tree_flatten(fun(*args))
        box.append(out_tree)
        return out_leaves

    jaxpr, consts = trace_to_jaxpr(flat, list(in_avals), description=description)
    return ClosedJaxpr(jaxpr, consts), box[0]


def as_array(x):
    """``x`` as an array: Python scalars and NumPy values become plax Arrays."""
    return x if isinstance(x, Tracer) or hasattr(x, "aval") else array_from_host(x)


def avals_of(values) -> list:
    return [get_aval(v) for v in values]


def same_type(a, b) -> bool:
    """Equal shape, dtype, sharding in the type and varying mesh axes (weak types may differ,
    as JAX's ``typematch``)."""
    return a.shape == b.shape and a.dtype == b.dtype and \
        getattr(a, "_sharding", None) == getattr(b, "_sharding", None) and \
        _varying(a) == _varying(b)


def _varying(aval) -> frozenset:
    """The mesh axes ``aval`` varies over, where they are checked (tracing a shard_map body
    with check_vma); code traced unchecked (lowering rules) may mix them."""
    if not replication.vma_in_types[0]:
        return frozenset()
    return replication.vma(aval)


# --- reshaping bodies ---------------------------------------------------------------------
def permute_body(closed: ClosedJaxpr, in_order=None, out_order=None) -> ClosedJaxpr:
    """``closed`` with its inputs (and outputs) reordered: new input ``k`` is old input
    ``in_order[k]``."""
    j = closed.jaxpr
    invars = j.invars if in_order is None else [j.invars[i] for i in in_order]
    outvars = j.outvars if out_order is None else [j.outvars[i] for i in out_order]
    return ClosedJaxpr(Jaxpr(j.constvars, invars, outvars, j.eqns), closed.consts)


def forwarded_inputs(closed: ClosedJaxpr) -> list:
    """Per output of ``closed``: the index of the input it returns unchanged, or None."""
    j = closed.jaxpr
    where = {v: i for i, v in enumerate(j.invars)}
    return [where.get(v) if isinstance(v, Var) else None for v in j.outvars]


def widen_inputs(closed: ClosedJaxpr, avals, placement) -> ClosedJaxpr:
    """``closed`` taking inputs of types ``avals``: its input ``i`` is the new input
    ``placement[i]``, and the others are unused."""
    j = closed.jaxpr
    invars = [Var(a) for a in avals]
    for old, new in zip(j.invars, placement):
        invars[new] = old
    return ClosedJaxpr(Jaxpr(j.constvars, invars, j.outvars, j.eqns), closed.consts)


def hoist_consts(closed_list):
    """Const-free versions of ``closed_list`` (ClosedJaxprs taking the same inputs) that all
    take the union of their consts first; returns ``(bodies, consts)``. A value two
    bodies close over is passed once."""
    pairs = [consts_as_inputs(c) for c in closed_list]
    consts, index = [], {}
    for _, cs in pairs:
        for c in cs:
            if id(c) not in index:
                index[id(c)] = len(consts)
                consts.append(c)
    if not consts:
        return [b for b, _ in pairs], []
    const_avals = [get_aval(c) for c in consts]
    bodies = []
    for (body, cs), closed in zip(pairs, closed_list):
        n_in = len(closed.jaxpr.invars)
        placement = [index[id(c)] for c in cs] + [len(consts) + i for i in range(n_in)]
        bodies.append(widen_inputs(body, const_avals + list(closed.in_avals), placement))
    return bodies, consts


def closed_call(closed: ClosedJaxpr):
    """``closed`` as a Python function of its flat inputs, returning a list."""
    return lambda *args: eval_jaxpr(closed.jaxpr, closed.consts, *args)


def trace_closed(fun, in_avals, description: str) -> ClosedJaxpr:
    """``fun(*flat) -> list`` traced on ``in_avals`` as a ClosedJaxpr (consts kept)."""
    jaxpr, consts = trace_to_jaxpr(fun, list(in_avals), description=description)
    return ClosedJaxpr(jaxpr, consts)


def index_groups(sizes):
    """The indices of consecutive groups of ``sizes`` items: ``[2, 1] -> [[0, 1], [2]]``."""
    out, start = [], 0
    for n in sizes:
        out.append(list(range(start, start + n)))
        start += n
    return out


def split(items, sizes):
    """``items`` cut into consecutive lists of ``sizes`` (the rest is the last list)."""
    out, start = [], 0
    for n in sizes:
        out.append(list(items[start:start + n]))
        start += n
    out.append(list(items[start:]))
    return out


# --- masks over carries and branches ------------------------------------------------------
def mask_union(*masks) -> list:
    """Per position, whether any of ``masks`` (equal-length sequences of bools) holds."""
    return [any(col) for col in zip(*masks)]


def carry_fixed_point(mask, step) -> list:
    """The smallest carry mask containing ``mask`` that one trip of a loop body keeps:
    ``step(mask)`` says, per carry, whether the body's output has the property (a tangent,
    unknown, batched, used) when the carries in ``mask`` have it. A carry that gains it on
    a later trip has it from the start."""
    mask = [bool(m) for m in mask]
    while True:
        new = mask_union(mask, step(mask))
        if new == mask:
            return mask
        mask = new


# --- error messages -----------------------------------------------------------------------
def _capitalize(s: str) -> str:
    return s[:1].upper() + s[1:]


def _listing(diffs) -> str:
    if len(diffs) == 1:
        return _capitalize(diffs[0]) + ".\n"
    return "\n".join(f"  * {d};" for d in diffs[:-1]) + f"\n  * {diffs[-1]}.\n"


def _leaf_paths(tree):
    """The key path of each leaf of treedef ``tree`` (read off the structure: a custom
    node's unflatten never sees stand-in children)."""
    return tree_util.treedef_leaf_paths(tree)


def _function_info(fun) -> str:
    name = fun_name(fun)
    try:
        file = inspect.getsourcefile(fun)
        line = inspect.getsourcelines(fun)[1]
        return f"{name} at {file}:{line}"
    except (TypeError, OSError):
        return name


def _tree_kind(tree) -> str:
    """How a pytree structure reads in a sentence: "a pytree leaf", "a <class 'tuple'>"."""
    if tree_util.treedef_is_leaf(tree):
        return "a pytree leaf"
    return f"a {tree.node_data()[0]}"


def _tree_difference(name1, tree1, name2, tree2) -> str:
    kind1, kind2 = _tree_kind(tree1), _tree_kind(tree2)
    if kind1 != kind2:
        return f"{name1} is {kind1} but {name2} is {kind2}, so their Python types differ"
    return f"{name1} has structure {tree1} but {name2} has structure {tree2}"


def type_text(aval) -> str:
    """A type as JAX's type-mismatch messages show it: ``float32[3]`` (``float32[3]{V:x}``
    inside shard_map)."""
    return aval.str_short(short_dtypes=False)


def _mismatch(a, b) -> str:
    if a.dtype != b.dtype:
        return ", so the dtypes do not match"
    if a.shape != b.shape:
        return ", so the shapes do not match"
    if _varying(a) != _varying(b):
        return ", so the manual axis types do not match"
    return ", so the shardings do not match"


def _pcast_hint(fixes) -> str:
    """JAX's advice for values whose varying mesh axes differ: ``fixes`` are
    ``(axes, what)`` pairs, a value ``what`` to pcast to varying over ``axes``."""
    items = [f"applying `plax.lax.pcast(..., {axes}, to='varying')` {what}" for axes, what in fixes]
    if not items:
        return ""
    text = (f"This might be fixed by {items[0]}.\n" if len(items) == 1 else
            "This might be fixed by:\n" + _listing(items))
    return text + ("See https://docs.jax.dev/en/latest/notebooks/shard_map.html#scan-vma for "
                   "more information.\n\n")


def _mesh_ordered(names, aval) -> tuple:
    order = aval.manual_axis_type._order
    return tuple(sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n)))


def check_branch_outputs(api: str, name1: str, name2: str, f1, f2, tree1, avals1, tree2,
                         avals2) -> None:
    """The outputs of two branches agree in pytree structure and in types, or TypeError."""
    if tree1 != tree2:
        raise TypeError(
            f"{api} branch outputs must have the same pytree structure, but they differ:\n\n"
            f"{name1} is {_function_info(f1)}\n{name2} is {_function_info(f2)}\n\n"
            f"{_tree_difference(name1 + ' output', tree1, name2 + ' output', tree2)}.\n\n"
            f"Revise {name1} and/or {name2} so that they have the same pytree structure.")
    if all(same_type(a, b) for a, b in zip(avals1, avals2)):
        return
    paths = _leaf_paths(tree1)
    diffs = [f"the output of {name1}{' at path ' + keystr(p) if p else ''} has type "
             f"{type_text(a)} but the corresponding output of {name2} has type "
             f"{type_text(b)}{_mismatch(a, b)}"
             for p, a, b in zip(paths, avals1, avals2) if not same_type(a, b)]
    fixes = [(_mesh_ordered(_varying(other) - _varying(mine), other),
              f"to the output of {name}{' at path ' + keystr(p) if p else ''}")
             for p, a, b in zip(paths, avals1, avals2) if not same_type(a, b)
             for name, mine, other in ((name1, a, b), (name2, b, a))
             if _varying(other) - _varying(mine)]
    old_phrase = ("true_fun and false_fun output must have identical types" if api == "cond"
                  else "branch outputs must have identical types")
    raise TypeError(
        f"{api} branches must have equal output types but they differ ({old_phrase}).\n\n"
        f"{name1} is {_function_info(f1)}\n{name2} is {_function_info(f2)}\n\n"
        f"{_listing(diffs)}\n{_pcast_hint(fixes)}Revise {name1} and/or {name2} so that all "
        "output types match.")


def check_carry(name: str, body_fun, in_tree, in_avals, out_tree, out_avals,
                in_carry=None) -> None:
    """A loop body's carry output agrees with its carry input in structure and types;
    ``in_carry`` (the initial carry) names its components as the user's nodes key them."""
    try:
        carry_name = next(iter(inspect.signature(body_fun).parameters))
    except (TypeError, ValueError, StopIteration):
        carry_name = None

    def component(path):
        if carry_name:
            return f"the input carry component {carry_name}{keystr(path)}" if path else \
                f"the input carry {carry_name}"
        return f"the input carry at path {keystr(path)}" if path else "the input carry"

    if in_tree != out_tree:
        raise TypeError(
            f"{name} function carry input and carry output must have the same pytree "
            f"structure, but they differ:\n\n"
            f"{_capitalize(_tree_difference(component(()), in_tree, 'the carry output', out_tree))}"
            ".\n\n"
            "Revise the function so that the carry output has the same pytree structure as "
            "the carry input.")
    if all(same_type(a, b) for a, b in zip(in_avals, out_avals)):
        return
    paths = _leaf_paths(in_tree) if in_carry is None else \
        [p for p, _ in tree_util.tree_flatten_with_path(in_carry)[0]]
    diffs = [f"{component(p)} has type {type_text(a)} but the corresponding output carry "
             f"component has type {type_text(b)}{_mismatch(a, b)}"
             for p, a, b in zip(paths, in_avals, out_avals) if not same_type(a, b)]
    fixes = [(_mesh_ordered(_varying(b) - _varying(a), b),
              f"to the initial carry value corresponding to {component(p)}")
             for p, a, b in zip(paths, in_avals, out_avals)
             if not same_type(a, b) and _varying(b) - _varying(a)]
    old = ("body_fun output and input must have identical types"
           if name.startswith("while") else
           "scan carry output and input must have identical types")
    raise TypeError(
        f"{name} function carry input and carry output must have equal types ({old}), but "
        f"they differ:\n\n{_listing(diffs)}\n{_pcast_hint(fixes)}Revise the function so that "
        "all output types match the corresponding input types.")


def promote_weak_inits(init_leaves, init_avals, out_avals):
    """Weakly typed initial carries whose type the body changes, promoted with the body's
    output type (a Python ``0`` meeting a float carry becomes a float); returns
    ``(leaves, changed)``. A change promotion cannot explain (a float carry becoming an
    integer) is left for the carry check to report."""
    new, changed = [], False
    for x, a, b in zip(init_leaves, init_avals, out_avals):
        if a.weak_type and not same_type(a, b):
            new.append(conversion.convert_element_type(x, dtypes.result_type(x, b)))
            changed = True
        else:
            new.append(x)
    return new, changed
