"""Hi values (``plax.core.hi_types``: mutable references, library-defined types) crossing a
``jit`` boundary.

A jit called with hi values among its arguments runs as a second jit over lo values:

- each hi argument is replaced by its lo values (``lower_val``, or ``read_loval`` with the
  value's current QDD), and the types and QDDs become part of the cache key;
- inside, each is rebuilt from the traced lo values (``raise_val`` / ``new_from_loval``), so
  the function sees a hi value whose contents are tracers;
- on return, a mutable argument's final lo values (and QDD) are extra results, written back
  into the caller's object in place (``update_from_loval``); hi results are lowered inside
  and raised outside.
"""
from __future__ import annotations

import numpy as np

from plax import tree_util
from plax.core.hi_types import (LoValues, hi_type_of, hi_value_types,
                                 is_lo_values as _is_lo_values, lower_hi, raise_hi)
from plax.core.source_info import flat_arg_names
from plax.core import staging
from plax.core.staging import StagingTrace
from plax.core.trace import EvalTrace, Tracer, current_trace
from plax.first_order.state import TransformedRef
from plax.transforms.linearize import PartialEvalTrace
from plax.higher_order import ref_effects


class HiValueArgument(TypeError):
    """Raised by jit's argument check on a hi value: a call takes the path of this module
    instead (jit's AOT stages, which do not, let it through as the error)."""

    def __init__(self, fname: str):
        super().__init__(f"{fname} was given a hi value (a mutable array reference or a "
                         "library-defined hi type) as an argument, or closes over a mutable "
                         "array reference: call the jitted function itself; its "
                         "trace/lower/eval_shape stages take arrays only.")


def returned_reference_error(name: str, leaf, j: int, arg_name=None) -> ValueError:
    """JAX's error for a jitted function returning a reference (its output leaf ``j``)."""
    return staging.returned_reference_error(name, "jit", leaf, arg_name)


def _lower(x):
    """A hi value as LoValues (with its type and QDD); other leaves unchanged. A view of a
    reference box (``ref.at[i]``) is its box's lo values and its transforms' array leaves
    (Python integers in them stay static)."""
    if ref_effects.is_reference_view(x):
        box = _lower(x.ref)
        leaves, tree = tree_util.tree_flatten(x.transforms)
        dynamic = [i for i, v in enumerate(leaves) if isinstance(v, (Tracer, np.ndarray))
                   or hasattr(v, "aval")]
        static = tuple((i, v) for i, v in enumerate(leaves) if i not in dynamic)
        return LoValues((*box, *[leaves[i] for i in dynamic]),
                        ("view", box.how, len(box), tree, static))
    return lower_hi(x)


def _raise(lo):
    if lo.how[0] == "view":
        _, how, n, tree, static = lo.how
        box = _raise(LoValues(lo[:n], how))
        dynamic = iter(lo[n:])
        statics = dict(static)
        leaves = [statics[i] if i in statics else next(dynamic)
                  for i in range(len(static) + len(lo) - n)]
        return TransformedRef(box, tree_util.tree_unflatten(tree, leaves))
    return raise_hi(lo)


def _mutable_objects(leaves) -> list:
    """The mutable hi values among ``leaves`` (for a view, the box it views)."""
    boxes = [x.ref if ref_effects.is_reference_view(x) else x for x in leaves]
    return [x for x in boxes if type(x) in hi_value_types and hi_type_of(x).has_qdd]


def _lower_final(x):
    """A mutable argument at the end of the jit: its type, QDD and what it returns
    (``read_loval_out``; the type and QDD are static)."""
    ty, qdd = hi_type_of(x), x.cur_qdd()
    return _Static((ty, qdd)), ty.read_loval_out(qdd, x)


class _Static:
    """A static value among a jit's results (hashable by identity)."""

    def __init__(self, value):
        self.value = value


tree_util.register_pytree_node(_Static, lambda s: ((), s.value), lambda v, _: _Static(v))


def call_with_hi_values(jitted, args, kwargs):
    """``jitted(*args, **kwargs)`` (a JitWrapped) where some argument leaves are hi values."""
    if _differentiating_or_batching() and (jitted._closed_refs or any(
            ref_effects.is_reference(x) or ref_effects.is_reference_view(x)
            for x in tree_util.tree_leaves((args, kwargs)))):
        # Under grad or vmap the function runs inline, so that each write is checked where
        # it happens (a value that is not differentiated may be stored; a jit's results
        # would all carry derivatives).
        return jitted._fun(*args, **kwargs)
    inner = _inner_of(jitted)
    n = len(args)
    static_nums = {i % n for i in jitted._static_argnums if -n <= i < n}
    # Static arguments travel as one hashable static argument of the inner jit.
    # The arguments travel flat (their structure is static): rebuilding a user's pytree node
    # around lo values would run its validation on them (a dataclass's __post_init__).
    leaves, structure = tree_util.tree_flatten(
        (tuple(None if i in static_nums else a for i, a in enumerate(args)),
         {k: v for k, v in kwargs.items() if k not in jitted._static_argnames}))
    static = (tuple((i, args[i]) for i in sorted(static_nums)),
              tuple((k, v) for k, v in sorted(kwargs.items()) if k in jitted._static_argnames),
              structure)
    lowered = tuple(_lower(x) for x in leaves)
    arg_leaves = [leaf for i, a in enumerate(args) if i not in static_nums
                  for leaf in tree_util.tree_leaves(a)]
    arg_leaves += [leaf for k, v in sorted(kwargs.items()) if k not in jitted._static_argnames
                   for leaf in tree_util.tree_leaves(v)]
    names = flat_arg_names(jitted._fun, args, {k: v for k, v in kwargs.items()
                                               if k not in jitted._static_argnames},
                           static_nums)
    ref_effects.refuse_aliased_references(arg_leaves, lambda: names, jitted._name, "jit")
    objects = _mutable_objects(arg_leaves)
    here = current_trace()
    while True:  # (references the function closes over: found as it is traced)
        closed = list(jitted._closed_refs)
        try:
            with ref_effects.noting_const_reads() as refs_read:
                outs, finals, closed_finals = inner(lowered, static,
                                                    ref_effects.read_all(closed))
            # (read as constants this time: carried in on later calls)
            outside = [r for r in refs_read if ref_effects.lives_outside(r, here)
                       and not any(r is q for q in closed)]
            ref_effects.refuse_closed_and_passed(outside, arg_leaves, names, jitted._name,
                                                 "jit")
            if outside:
                jitted.__dict__["_closed_refs"] = tuple(closed) + tuple(
                    r for j, r in enumerate(outside) if not any(r is q for q in outside[:j]))
            break
        except ref_effects.RefsCaptured as e:
            if e.target.parent is not here or all(any(r is q for q in closed) for r in e.refs):
                raise
            ref_effects.refuse_closed_and_passed(e.refs, arg_leaves, names, jitted._name,
                                                 "jit")
            jitted.__dict__["_closed_refs"] = tuple(closed) + tuple(
                r for r in e.refs if not any(r is q for q in closed))
    # Write each mutable argument's final contents back into the caller's object (the inner
    # function returns them in pytree order: positional arguments, then keywords by name).
    assert len(objects) == len(finals)
    for obj, (static, final) in zip(objects, finals):
        ty, qdd = static.value
        ty.update_from_loval2(qdd, obj, final)
    ref_effects.write_all(closed, closed_finals)
    return tree_util.tree_map(lambda x: _raise(x) if _is_lo_values(x) else x, outs,
                              is_leaf=_is_lo_values)


def eval_shape_with_hi_values(jitted, args, kwargs):
    """``eval_shape`` of ``jitted`` (a JitWrapped) where some argument leaves are hi values:
    traced as a call would be, over their lo values; the arguments are left as they were."""
    inner = _inner_of(jitted)
    leaves, structure = tree_util.tree_flatten((tuple(args), kwargs))
    outs, _, _ = inner.eval_shape(tuple(_lower(x) for x in leaves), ((), (), structure),
                                  ref_effects.read_all(jitted._closed_refs))
    return outs


def _differentiating_or_batching() -> bool:
    trace = current_trace()
    return not isinstance(trace, (EvalTrace, StagingTrace)) or isinstance(trace, PartialEvalTrace)


def _inner_of(jitted):
    """``jitted``'s jit over lo values (made once)."""
    inner = jitted.__dict__.get("_hi_inner")
    if inner is None:
        inner = jitted.__dict__["_hi_inner"] = _inner_jit(jitted)
    return inner


def _inner_jit(jitted):
    """A jit of ``(lowered arguments, static arguments) -> (results, final contents of the
    mutable arguments)`` over lo values, with ``jitted``'s options."""
    from plax.api.jit import jit  # (jit imports this module)
    user_fun = jitted._fun

    def lo_fun(lowered, static, closed_values):
        leaves = [_raise(x) if _is_lo_values(x) else x for x in lowered]
        mutable = _mutable_objects(leaves)
        lowered_args, lowered_kwargs = tree_util.tree_unflatten(static[2], leaves)
        full = list(lowered_args)
        for i, value in static[0]:
            full[i] = value
        closed = jitted._closed_refs[:len(closed_values)]
        with ref_effects.bound(closed, closed_values):
            out = user_fun(*full, **lowered_kwargs, **dict(static[1]))
            arg_names = flat_arg_names(user_fun, full, lowered_kwargs, [i for i, _ in static[0]])
            arg_leaves = tree_util.tree_leaves(([a for i, a in enumerate(full)
                                                 if i not in dict(static[0])], lowered_kwargs))
            for j, leaf in enumerate(tree_util.tree_leaves(out)):
                if type(leaf) in hi_value_types and hi_type_of(leaf).has_qdd:
                    given = [n for x, n in zip(arg_leaves, arg_names) if x is leaf]
                    raise returned_reference_error(jitted._name, leaf, j,
                                                   given[0] if given else None)
            return (tree_util.tree_map(_lower, out), [_lower_final(x) for x in mutable],
                    ref_effects.final_values(closed))

    if jitted._in_shardings is not None or jitted._out_shardings is not None:
        raise NotImplementedError(
            f"jit of {jitted._name} with in_shardings/out_shardings was called with hi values "
            "(references or library-defined hi types) among its arguments: lay out the arrays "
            "inside them with device_put before the call instead.")
    if jitted._donate_argnums or jitted._donate_argnames:
        raise NotImplementedError(
            f"jit of {jitted._name} with donated arguments was called with hi values "
            "(references or library-defined hi types) among its arguments: donation is not "
            "supported with them.")
    inner = jit(lo_fun, static_argnums=(1,), keep_unused=jitted._keep_unused,
                device=jitted._device, inline=jitted._inline,
                compiler_options=dict(jitted._compiler_options or ()) or None)
    getattr(inner, "_plax_jit", inner).__dict__["_catches_refs"] = False  # (done here)
    return inner
