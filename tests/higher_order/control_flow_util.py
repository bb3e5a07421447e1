"""Helpers shared by the control-flow tests (tests/lax/test_control_flow_*.py).

These tests are also run against real JAX (plax mirrors its API): the only plax-internal
name used here, ``plax.core.jaxpr.subjaxprs``, has a fallback that walks ``eqn.params``
for jaxpr-like values, so the helpers work on either library's jaxprs.
"""
import numpy as np

import plax
from plax import tree_util
from plax.test_util import check_grads

try:
    from plax.core.jaxpr import subjaxprs as _plax_subjaxprs
except ImportError:  # running under real JAX
    _plax_subjaxprs = None


def _is_jaxpr_like(v):
    return hasattr(v, "eqns") or hasattr(getattr(v, "jaxpr", None), "eqns")


def subjaxprs(params):
    """The jaxprs held in an equation's params (tuples of them included)."""
    if _plax_subjaxprs is not None:
        yield from _plax_subjaxprs(params)
        return
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if _is_jaxpr_like(item):
                yield item


def open_jaxpr(j):
    """The open jaxpr of a Jaxpr or ClosedJaxpr."""
    return j if hasattr(j, "eqns") else j.jaxpr


def eqns(j):
    """All equations of ``j``, recursively including those of nested jaxprs."""
    for e in open_jaxpr(j).eqns:
        yield e
        for sub in subjaxprs(e.params):
            yield from eqns(sub)


def count(j, name):
    """How many equations named ``name`` ``j`` holds, nested jaxprs included."""
    return sum(e.primitive.name == name for e in eqns(j))


def top(j, name):
    """The top-level equations of ``j`` named ``name``."""
    return [e for e in open_jaxpr(j).eqns if e.primitive.name == name]


def rand(*shape, seed=0, scale=1.0):
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)


def close(actual, expected, rtol=1e-5, atol=1e-5):
    """Pytree-wise assert_allclose (structures must match)."""
    a_leaves, a_def = tree_util.tree_flatten(actual)
    e_leaves, e_def = tree_util.tree_flatten(expected)
    assert a_def == e_def, (a_def, e_def)
    for a, e in zip(a_leaves, e_leaves):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=rtol, atol=atol)


def grads(f, args, order=2, modes=("fwd", "rev"), jit=True):
    """check_grads with float32-friendly tolerances (same numbers under plax and JAX).

    ``f`` is jit-wrapped by default: check_grads evaluates many transformed copies of it,
    and under jit each is compiled once instead of dispatching op by op."""
    check_grads(plax.jit(f) if jit else f, args, order, modes=modes, atol=3e-2, rtol=3e-2,
                eps=1e-2)
