"""run_state: a function of references run on initial values, giving their final values.

``run_state(f)(init)`` makes one reference per leaf of ``init`` (a pytree), runs ``f`` on
them (``f`` reads and writes them with the state primitives and returns nothing) and
returns the values they hold at the end, as a pytree like ``init``. It stages one
``run_state`` equation::

    run_state_p.bind(*consts, *initial_values, jaxpr=jaxpr, num_consts=k)

``jaxpr`` takes what ``f`` closes over (``consts``: values, or references of an enclosing
function, which keep their effects on the equation) and then the references; it returns
nothing. The equation's results are the references' final values.

Every rule but abstract evaluation and discharge runs the discharged body
(``plax.transforms.discharge``), a plain function of the initial values: evaluation,
lowering, jvp and vmap. ``run_state_reference(f)`` is that discharged function called
directly.
"""
from __future__ import annotations

from plax import tree_util
from plax.core.caches import WeakKeyCache
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, callee_of, eval_jaxpr
from plax.core.primitive import Primitive
from plax.core.refs import AbstractRef, ref_type_aval_mappings, uninitialized
from plax.core.rules import (abstract_eval_rules, batch_rules, discharge_rules, impl_rules,
                             jvp_rules, register_lowering)
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import get_aval
from plax.higher_order import ref_effects
from plax.first_order.ad_util import zeros_like_aval
from plax.lowering.inline import lower_fun
from plax.transforms.discharge import discharge_state, eval_discharged
from plax.transforms.jvp import jvp_flat
from plax.transforms.vmap import batch_flat

__all__ = ["run_state", "run_state_reference", "run_state_p"]

run_state_p = Primitive("run_state", multiple_results=True)


def _ref_aval_of(x):
    """``(reference type, initial value)`` for a leaf of ``run_state``'s argument."""
    make = ref_type_aval_mappings.get(type(x))
    if make is not None:
        return make(x)
    aval = get_aval(x)
    if isinstance(aval, AbstractRef):
        raise TypeError("run_state takes initial values, not references.")
    return AbstractRef(aval.update(weak_type=False)), x


def _initial_values(avals, values):
    """The values the references start from (zeros where ``uninitialized``: they are
    written before they are read)."""
    return [zeros_like_aval(a.inner_aval) if v is uninitialized else v
            for a, v in zip(avals, values)]


def _trace(f, args, name: str):
    leaves, tree = tree_util.tree_flatten(args)
    avals, values = zip(*(_ref_aval_of(x) for x in leaves)) if leaves else ((), ())

    def body(*refs):
        f(tree_util.tree_unflatten(tree, list(refs)))
        return []
    jaxpr, consts = trace_to_jaxpr(body, list(avals), description=name)
    return callee_of(jaxpr).jaxpr, consts, _initial_values(avals, values), tree


def run_state(f):
    """``f`` (a function of a pytree of references, returning nothing) as a function of the
    references' initial values returning their final values."""
    name = getattr(f, "__name__", "run_state")

    def plain(g, args):
        jaxpr, consts, values, tree = _trace(g, args, name)
        outs = run_state_p.bind(*consts, *values, jaxpr=jaxpr, num_consts=len(consts))
        return tree_util.tree_unflatten(tree, outs)

    def threaded(args, refs):
        # references ``f`` closes over from outside become more references of the run_state
        def g(both):
            inner, carried = both
            with ref_effects.bound(refs, [r[...] for r in carried]):
                f(inner)
                finals = ref_effects.final_values(refs)
            for r, v in zip(carried, finals):
                r[...] = v
        outs, finals = plain(g, (args, ref_effects.read_all(refs)))
        ref_effects.write_all(refs, finals)
        return outs

    def wrapped(args):
        return ref_effects.with_closed_refs(lambda: plain(f, args),
                                            lambda refs: threaded(args, refs))
    return wrapped


def run_state_reference(f):
    """``run_state(f)`` computed by discharging ``f``'s references, with no ``run_state``
    equation (a reference for testing the primitive)."""
    name = getattr(f, "__name__", "run_state")

    def wrapped(args):
        jaxpr, consts, values, tree = _trace(f, args, name)
        plain = discharged_body(jaxpr, len(consts))
        return tree_util.tree_unflatten(tree, eval_jaxpr(plain.jaxpr, plain.consts,
                                                         *consts, *values))
    return wrapped


# --- rules ------------------------------------------------------------------------------------
_plain_bodies = WeakKeyCache("run_state discharged bodies")


def discharged_body(jaxpr: Jaxpr, num_consts: int) -> ClosedJaxpr:
    """The body as a plain function of the consts and initial values, returning the final
    values (references among the consts stay references; pallas_call's kernels pass their
    grid indices as the consts). Cached per jaxpr."""
    hit = _plain_bodies.get(jaxpr, num_consts)
    if hit is None:
        n = len(jaxpr.invars)
        hit = discharge_state(ClosedJaxpr(jaxpr, ()),
                              should_discharge=[False] * num_consts + [True] * (n - num_consts))
        _plain_bodies.put(jaxpr, num_consts, hit)
    return hit


def _abstract(*avals, jaxpr, num_consts):
    return [v.aval.inner_aval for v in jaxpr.invars[num_consts:]]


def _run(*args, jaxpr, num_consts):
    plain = discharged_body(jaxpr, num_consts)
    return eval_jaxpr(plain.jaxpr, plain.consts, *args)


def _jvp(primals, tangents, *, jaxpr, num_consts):
    outs, out_tangents = jvp_flat(lambda *xs: _run(*xs, jaxpr=jaxpr, num_consts=num_consts),
                                  list(primals), list(tangents), "run_state")
    return outs, out_tangents


def _batch(axis, vals, dims, *, jaxpr, num_consts):
    return batch_flat(lambda *xs: _run(*xs, jaxpr=jaxpr, num_consts=num_consts), list(vals),
                      list(dims), axis, "run_state")


def _discharge(which, in_avals, out_avals, *args, jaxpr, num_consts):
    n = len(jaxpr.invars)
    mask = list(which[:num_consts]) + [True] * (n - num_consts)
    _, finals = eval_discharged(jaxpr, (), mask, args)
    k = sum(1 for w in which[:num_consts] if w)
    it = iter(finals[:k])
    return ([next(it) if w else None for w in which[:num_consts]]
            + [None] * (n - num_consts)), list(finals[k:])


abstract_eval_rules[run_state_p] = _abstract
impl_rules[run_state_p] = _run
register_lowering(run_state_p, lower_fun(_run, multiple_results=True))
jvp_rules[run_state_p] = _jvp
batch_rules[run_state_p] = _batch
discharge_rules[run_state_p] = _discharge
