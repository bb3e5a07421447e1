"""Vector-space arithmetic on pytrees of arrays, for the Krylov solvers of
``plax.scipy.sparse.linalg``: a vector is any pytree of arrays (the shape of ``b``), and
inner products sum over all its leaves. Precision is HIGHEST throughout (as JAX's solvers
ask), so a TPU/GPU does not round the iteration's inner products to bfloat16."""
from __future__ import annotations

import functools
import operator

from plax import lax
from plax import numpy as jnp
from plax import tree_util

HIGHEST = lax.Precision.HIGHEST


def add(x, y):
    return tree_util.tree_map(operator.add, x, y)


def sub(x, y):
    return tree_util.tree_map(operator.sub, x, y)


def scale(alpha, x):
    """``alpha * x`` for a scalar ``alpha``, each leaf keeping its dtype."""
    return tree_util.tree_map(lambda v: (alpha * v).astype(v.dtype), x)


def axpy(alpha, x, y):
    """``alpha * x + y``."""
    return tree_util.tree_map(lambda a, b: (alpha * a + b).astype(b.dtype), x, y)


def where(pred, x, y):
    return tree_util.tree_map(functools.partial(jnp.where, pred), x, y)


def vdot(x, y):
    """``<x, y>``, conjugating ``x``, summed over the leaves."""
    parts = [jnp.vdot(a, b, precision=HIGHEST)
             for a, b in zip(tree_util.tree_leaves(x), tree_util.tree_leaves(y))]
    return functools.reduce(operator.add, parts)


def vdot_real(x, y):
    """The real part of ``vdot(x, y)``, computed without complex products where possible."""
    parts = []
    for a, b in zip(tree_util.tree_leaves(x), tree_util.tree_leaves(y)):
        if jnp.iscomplexobj(a) or jnp.iscomplexobj(b):
            parts.append(jnp.vdot(a.real, b.real, precision=HIGHEST)
                         + jnp.vdot(a.imag, b.imag, precision=HIGHEST))
        else:
            parts.append(jnp.vdot(a, b, precision=HIGHEST))
    return functools.reduce(operator.add, parts)


def norm(x):
    return jnp.sqrt(vdot_real(x, x))


def result_dtype(x):
    """The common dtype of the leaves of ``x`` (that of the iteration's scalars)."""
    return jnp.result_type(*tree_util.tree_leaves(x))


def real_dtype(dtype):
    return jnp.finfo(dtype).dtype
