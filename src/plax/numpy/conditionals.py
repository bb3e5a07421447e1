"""Choosing values by condition as in NumPy: select and piecewise.

``select`` turns its conditions into one integer index per element (the position of the
first true condition, 0 meaning "none", which picks the default) and gathers the values
with a single ``lax.select_n``. ``piecewise`` likewise computes an index per element (the
position of the last true condition, as NumPy's in-order overwriting gives) and runs
``lax.switch`` on every element through ``vectorize``: under tracing each function of
``funclist`` is traced, and the results are cast to the dtype of ``x``, as in JAX.
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax.core import dtypes
from plax.core.trace import get_aval
from plax.numpy.creation import asarray
from plax.numpy.util import (as_operand, broadcast_shapes, broadcast_to_shape, check_arraylike,
                             convert, promote_dtypes, shape_of)
from plax.numpy.vectorize import vectorize

__all__ = ["select", "piecewise"]


def _truth(c):
    """``c`` as a boolean array (nonzero is true), as ``astype(bool)`` gives."""
    c = as_operand(c)
    dt = dtypes.result_type(c)
    if dt == np.bool_:
        return c
    if dtypes.is_complex(dt):  # converting would drop the imaginary part
        return lax.ne(c, convert(0, dt))
    return convert(c, np.bool_)


def _index_of(conds, shape, first: bool):
    """Per element, 1 + the position of the first (or last) true condition; 0 if none."""
    idx = lax.broadcast_in_dim(np.int32(0), shape, ())
    order = range(len(conds) - 1, -1, -1) if first else range(len(conds))
    for i in order:  # later assignments win, so walk towards the winning end
        pos = lax.broadcast_in_dim(np.int32(i + 1), shape, ())
        idx = lax.select(broadcast_to_shape(conds[i], shape), pos, idx)
    return idx


def select(condlist, choicelist, default=0):
    """Per element, the entry of ``choicelist`` whose condition in ``condlist`` is the
    first true one, or ``default`` where none is (as ``numpy.select``).

    Conditions, choices and default broadcast together; the result dtype is the promotion
    of the choices and the default. Non-boolean conditions count as true where nonzero.
    """
    if len(condlist) != len(choicelist):
        raise ValueError(f"condlist must have length equal to choicelist ({len(condlist)} vs "
                         f"{len(choicelist)}): give one choice per condition.")
    if len(condlist) == 0:
        raise ValueError("condlist must be non-empty: select needs at least one condition.")
    condlist, choicelist = list(condlist), list(choicelist)
    check_arraylike("select", *condlist, *choicelist, default)
    conds = [_truth(c) for c in condlist]
    cases = promote_dtypes(default, *choicelist)  # the default is case 0
    cond_shape = broadcast_shapes(*(shape_of(c) for c in conds))
    shape = broadcast_shapes(cond_shape, *(shape_of(c) for c in cases))
    idx = _index_of(conds, cond_shape, first=True)
    return lax.select_n(broadcast_to_shape(idx, shape),
                        *(broadcast_to_shape(c, shape) for c in cases))


def piecewise(x, condlist, funclist, *args, **kw):
    """Evaluate ``x`` piece by piece: where ``condlist[i]`` holds, ``funclist[i]`` applies
    (a later true condition overrides an earlier one, as in NumPy).

    ``funclist`` entries are callables, called as ``f(x, *args, **kw)`` on single elements,
    or constants. With ``len(condlist) + 1`` entries the last one applies where no condition
    holds; otherwise such elements are 0. ``condlist`` is indexed along its first axis (a
    sequence of conditions, or an array of them) and each condition broadcasts against
    ``x``. Every function is traced (``lax.switch`` runs per element), and every piece is
    cast to the dtype of ``x``.
    """
    check_arraylike("piecewise", x)
    x = asarray(x)
    nc, nf = len(condlist), len(funclist)
    funclist = list(funclist)
    if nf == nc + 1:
        funclist = funclist[-1:] + funclist[:-1]
    elif nf == nc:
        funclist = [0] + funclist
    else:
        raise ValueError(f"with {nc} condition(s), either {nc} or {nc + 1} functions are "
                         f"expected; got {nf}.")
    if nc == 0:
        raise ValueError("piecewise needs at least one condition; condlist is empty.")
    conds = _truth(asarray(condlist))
    cond_shape = get_aval(conds).shape[1:]
    idx = _index_of([conds[i] for i in range(nc)], cond_shape, first=False)
    dtype = get_aval(x).dtype

    def piece(f):
        if callable(f):
            return lambda v: convert(asarray(f(v, *args, **kw)), dtype)
        return lambda v: convert(asarray(f), dtype)

    branches = [piece(f) for f in funclist]
    return vectorize(lax.switch, excluded=(1,))(idx, branches, x)
