"""Effects declared by a primitive's effectful abstract evaluation, and effects on a jaxpr's
inputs (the reference-effect family)."""
import numpy as np
import pytest

import plax
from plax.core.dce import dce_jaxpr
from plax.core.effects import (AccumEffect, Effect, JaxprInputEffect, ReadEffect, RefEffect,
                               WriteEffect)
from plax.core.primitive import Primitive


class _Marked(Effect):
    pass


_marked = _Marked()

# A primitive returning its inputs, with the effect given as a parameter plus, when its
# first input is a vector, an input effect on it.
_tagged_p = Primitive("tagged_effect_test", multiple_results=True)


@_tagged_p.def_effectful_abstract_eval
def _tagged_abstract_eval(*avals, effect):
    found = {effect}
    if avals and avals[0].ndim == 1:
        found.add(ReadEffect(0))
    return avals, found


@pytest.mark.parametrize("args, reads", [
    ((np.float32(1.0),), False),
    ((np.ones(3, np.float32),), True),
    ((), False),
])
def test_effectful_abstract_eval_sets_equation_and_jaxpr_effects(args, reads):
    # The rule names its input by position; the equation and the jaxpr by variable.
    def f(*xs):
        return _tagged_p.bind(*xs, effect=_marked)
    closed = plax.make_jaxpr(f)(*args)
    eqn = closed.jaxpr.eqns[0]
    expected = {_marked, ReadEffect(eqn.invars[0])} if reads else {_marked}
    assert eqn.effects == expected
    assert closed.effects == expected
    avals = [plax.core.get_aval(a) for a in args]
    outs, effects = _tagged_p.abstract_eval(*avals, effect=_marked)
    assert list(outs) == avals
    assert effects == ({_marked, ReadEffect(0)} if reads else {_marked})


def test_an_effectful_equation_is_not_removed_as_dead_code():
    def f(x):
        _tagged_p.bind(x, effect=_marked)
        return x + 1.0
    closed = plax.make_jaxpr(f)(1.0)
    pruned, _ = dce_jaxpr(closed.jaxpr, [True])
    assert [e.primitive for e in pruned.eqns][0] is _tagged_p


@pytest.mark.parametrize("kind", [JaxprInputEffect, RefEffect, ReadEffect, WriteEffect,
                                  AccumEffect])
def test_input_effects_compare_by_kind_and_input(kind):
    assert kind(2) == kind(2) and hash(kind(2)) == hash(kind(2))
    assert kind(2) != kind(3)
    assert kind(2).replace(5) == kind(5)
    assert repr(kind(1)) == f"{kind.__name__}(1)"
    others = {ReadEffect, WriteEffect, AccumEffect} - {kind}
    assert all(kind(0) != other(0) for other in others)
    assert issubclass(kind, JaxprInputEffect) and not kind(0).ordered
