"""Products as in NumPy: matmul, dot, tensordot, einsum, kron, trace, diagonal ...

Contractions lower to ``lax.dot_general``; operands are first promoted to a common
dtype (JAX's rules) and ``precision`` / ``preferred_element_type`` are passed through.
"""
from __future__ import annotations

import operator
from collections import Counter

import numpy as np

from plax import lax
from plax.core import dtypes
from plax.core.symbolic_shapes import DimExpr
from plax.core.trace import get_aval
from plax.first_order.sharding_constraint import takes_out_sharding
from plax.numpy import ufuncs
from plax.numpy.reductions import sum as _sum
from plax.numpy.vectorize import check_loop_rank_promotion
from plax.numpy.util import (as_operand, broadcast_shapes, broadcast_to_shape, canonicalize_axis,
                             check_arraylike, convert, promote_dtypes, shape_of)

__all__ = ["matmul", "dot", "vdot", "vecdot", "matvec", "vecmat", "inner", "outer", "tensordot",
           "einsum", "einsum_path", "kron", "trace", "diagonal", "diag"]


# --- shared helpers ------------------------------------------------------------------------
def _promote(name, *args):
    check_arraylike(name, *args)
    return promote_dtypes(*args)


def _preferred(preferred_element_type):
    if preferred_element_type is None:
        return None
    return dtypes.canonicalize_user_dtype(preferred_element_type, "preferred_element_type")


def _dot(a, b, contract, batch, precision, preferred, impl=None):
    """dot_general, recording the result dtype as preferred_element_type like JAX does.

    ``impl`` replaces ``lax.dot_general`` (einsum's ``_dot_general=``); it is called as JAX
    calls it: ``impl(a, b, dimension_numbers, precision, preferred_element_type=...)``.
    """
    if preferred is None:
        preferred = get_aval(a).dtype
    return (impl or lax.dot_general)(a, b, (contract, batch), precision,
                                     preferred_element_type=preferred)


def _transpose_to(x, labels, target):
    """``x`` (whose axes carry ``labels``) with its axes reordered as ``target``."""
    perm = tuple(labels.index(t) for t in target)
    return x if perm == tuple(range(len(perm))) else lax.transpose(x, perm)


def _ravel(x):
    return lax.reshape(x, (int(np.prod(shape_of(x), dtype=np.int64)),))


def _conj(x):
    return lax.conj(x) if dtypes.is_complex(get_aval(x).dtype) else x


def _mismatch(name, sa, sb, ka, kb):
    return TypeError(f"{name}: contracting dimensions must have the same size, got {ka} for a "
                     f"(shape {sa}) and {kb} for b (shape {sb}). dot_general requires contracting "
                     f"dimensions to have the same shape, got ({ka},) and ({kb},).")


def _multiply(a, b, preferred):
    """Elementwise product (a product with a scalar), cast to ``preferred`` if given."""
    r = ufuncs.multiply(a, b)
    return r if preferred is None else lax.convert_element_type(r, preferred)


# --- matmul and friends -------------------------------------------------------------------
def _matmul_labels(shape, nb, inner):
    """Axis labels of a matmul operand: ('B', i) for batch axis i of ``nb``, then ``inner``."""
    nbatch = len(shape) - len(inner)
    return [("B", nb - nbatch + i) for i in range(nbatch)] + inner


@takes_out_sharding
def matmul(a, b, *, precision=None, preferred_element_type=None):
    """Matrix product with NumPy's rules: batch axes broadcast, 1-D operands are vectors."""
    a, b = _promote("matmul", a, b)
    sa, sb = shape_of(a), shape_of(b)
    for i, s in enumerate((sa, sb)):
        if not s:
            raise ValueError(f"matmul input operand {i} must have ndim at least 1, but it has "
                             "ndim 0")
    ka, kb = sa[-1], (sb[-2] if len(sb) > 1 else sb[0])
    if ka != kb:
        raise _mismatch("matmul", sa, sb, ka, kb)
    nb = max(len(sa) - 2, len(sb) - 2, 0)
    la = _matmul_labels(sa, nb, ["m", "k"] if len(sa) > 1 else ["k"])
    lb = _matmul_labels(sb, nb, ["k", "n"] if len(sb) > 1 else ["k"])
    # Size-1 batch axes facing a larger one are squeezed: the other side's axis is then free.
    squeeze_a, squeeze_b = [], []
    for lab in [l for l in la if l in lb and l[0] == "B"]:
        da, db = sa[la.index(lab)], sb[lb.index(lab)]
        if da == db:
            continue
        if da == 1:
            squeeze_a.append(la.index(lab))
        elif db == 1:
            squeeze_b.append(lb.index(lab))
        else:
            raise ValueError(f"Incompatible batch shapes for matmul arguments: a has shape {sa} "
                             f"and b has shape {sb}; batch shapes {sa[:-2]} and {sb[:-2]} do not "
                             "broadcast.")
    if squeeze_a:
        a, la = lax.squeeze(a, squeeze_a), [l for i, l in enumerate(la) if i not in squeeze_a]
    if squeeze_b:
        b, lb = lax.squeeze(b, squeeze_b), [l for i, l in enumerate(lb) if i not in squeeze_b]
    batch = [l for l in la if l in lb and l != "k"]
    out = _dot(a, b, ((la.index("k"),), (lb.index("k"),)),
                       (tuple(la.index(l) for l in batch), tuple(lb.index(l) for l in batch)),
                       precision, _preferred(preferred_element_type))
    labels = batch + [l for l in la if l not in batch and l != "k"] + \
        [l for l in lb if l not in batch and l != "k"]
    target = [("B", i) for i in range(nb)] + [l for l in ("m", "n") if l in labels]
    return _transpose_to(out, labels, target)


@takes_out_sharding
def dot(a, b, *, precision=None, preferred_element_type=None):
    """NumPy's dot: a product with scalars, else contract a's last axis with b's second-to-last."""
    a, b = _promote("dot", a, b)
    preferred = _preferred(preferred_element_type)
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        return _multiply(a, b, preferred)
    cb = 0 if len(sb) == 1 else len(sb) - 2
    if sa[-1] != sb[cb]:
        raise _mismatch("dot", sa, sb, sa[-1], sb[cb])
    return _dot(a, b, ((len(sa) - 1,), (cb,)), ((), ()), precision, preferred)


def vdot(a, b, *, precision=None, preferred_element_type=None):
    """Dot product of the flattened arrays, conjugating ``a`` when complex."""
    a, b = _promote("vdot", a, b)
    sa, sb = shape_of(a), shape_of(b)
    na, nb = int(np.prod(sa, dtype=np.int64)), int(np.prod(sb, dtype=np.int64))
    if na != nb:
        raise _mismatch("vdot", sa, sb, na, nb)
    a, b = _ravel(_conj(a)), _ravel(b)
    return dot(a, b, precision=precision, preferred_element_type=preferred_element_type)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """Vector dot product along ``axis`` (``x1`` conjugated), broadcasting the other axes."""
    x1, x2 = _promote("vecdot", x1, x2)
    s1, s2 = shape_of(x1), shape_of(x2)
    if not s1 or not s2:
        raise ValueError(f"vecdot requires arrays of at least one dimension, got shapes {s1} and "
                         f"{s2}.")
    a1, a2 = canonicalize_axis(axis, len(s1)), canonicalize_axis(axis, len(s2))
    if s1[a1] != s2[a2]:
        raise ValueError(f"vecdot: the axes along which the product is taken must have the same "
                         f"size, got {s1[a1]} (x1 shape {s1}) and {s2[a2]} (x2 shape {s2}) for "
                         f"axis={axis}.")
    check_loop_rank_promotion([s1, s2], [s1[:-1], s2[:-1]], "(n),(n)->()")  # as JAX's vecdot
    x1, x2 = _to_last(_conj(x1), a1), _to_last(x2, a2)
    shape = broadcast_shapes(shape_of(x1)[:-1], shape_of(x2)[:-1]) + (s1[a1],)
    x1, x2 = broadcast_to_shape(x1, shape), broadcast_to_shape(x2, shape)
    batch = tuple(range(len(shape) - 1))
    last = len(shape) - 1
    return _dot(x1, x2, ((last,), (last,)), (batch, batch), precision,
                _preferred(preferred_element_type))


def _to_last(x, axis):
    nd = len(shape_of(x))
    if axis == nd - 1:
        return x
    return lax.transpose(x, tuple(i for i in range(nd) if i != axis) + (axis,))


def matvec(x1, x2, /):
    """Matrix-vector product over the last axes, broadcasting batch axes."""
    x1, x2 = _promote("matvec", x1, x2)
    if len(shape_of(x1)) < 2 or len(shape_of(x2)) < 1:
        raise ValueError(f"matvec requires x1 of ndim >= 2 and x2 of ndim >= 1, got shapes "
                         f"{shape_of(x1)} and {shape_of(x2)}.")
    r = matmul(x1, lax.expand_dims(x2, (-1,)))
    return lax.squeeze(r, (-1,))


def vecmat(x1, x2, /):
    """Vector-matrix product (``x1`` conjugated) over the last axes, broadcasting batch axes."""
    x1, x2 = _promote("vecmat", x1, x2)
    if len(shape_of(x1)) < 1 or len(shape_of(x2)) < 2:
        raise ValueError(f"vecmat requires x1 of ndim >= 1 and x2 of ndim >= 2, got shapes "
                         f"{shape_of(x1)} and {shape_of(x2)}.")
    r = matmul(lax.expand_dims(_conj(x1), (-2,)), x2)
    return lax.squeeze(r, (-2,))


def inner(a, b, *, precision=None, preferred_element_type=None):
    """Inner product over the last axes of ``a`` and ``b``."""
    a, b = _promote("inner", a, b)
    preferred = _preferred(preferred_element_type)
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        return _multiply(a, b, preferred)
    if sa[-1] != sb[-1]:
        raise _mismatch("inner", sa, sb, sa[-1], sb[-1])
    return _dot(a, b, ((len(sa) - 1,), (len(sb) - 1,)), ((), ()), precision, preferred)


def outer(a, b, out=None):
    """Outer product of the flattened arrays."""
    if out is not None:
        raise ValueError("plax.numpy.outer: the 'out' argument must be None; plax arrays are "
                         "immutable, so the result is returned.")
    a, b = _promote("outer", a, b)
    a, b = _ravel(a), _ravel(b)
    return ufuncs.multiply(lax.expand_dims(a, (1,)), lax.expand_dims(b, (0,)))


def _tensordot_axes(axes, sa, sb):
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        n = int(axes)
        if n < 0 or n > min(len(sa), len(sb)):
            raise TypeError(f"Number of tensordot axes (axes {n}) exceeds input ranks ({sa} and "
                            f"{sb})")
        return tuple(range(len(sa) - n, len(sa))), tuple(range(n))
    try:
        ax_a, ax_b = axes
        ax_a = (ax_a,) if isinstance(ax_a, (int, np.integer)) else tuple(ax_a)
        ax_b = (ax_b,) if isinstance(ax_b, (int, np.integer)) else tuple(ax_b)
        ax_a, ax_b = [operator.index(i) for i in ax_a], [operator.index(i) for i in ax_b]
    except (TypeError, ValueError):
        raise TypeError("tensordot axes argument must be an int, a pair of ints, or a pair of "
                        f"lists/tuples of ints, got {axes!r}.") from None
    if len(ax_a) != len(ax_b):
        raise TypeError(f"tensordot requires axes lists to have equal length, got {ax_a} and "
                        f"{ax_b}.")
    return (tuple(canonicalize_axis(i, len(sa)) for i in ax_a),
            tuple(canonicalize_axis(i, len(sb)) for i in ax_b))


@takes_out_sharding
def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    """Sum of products over ``axes`` (the last/first N, or explicit pairs of axis lists)."""
    a, b = _promote("tensordot", a, b)
    sa, sb = shape_of(a), shape_of(b)
    ca, cb = _tensordot_axes(axes, sa, sb)
    for i, j in zip(ca, cb):
        if sa[i] != sb[j]:
            raise _mismatch("tensordot", sa, sb, sa[i], sb[j])
    return _dot(a, b, (ca, cb), ((), ()), precision, _preferred(preferred_element_type))


def kron(a, b):
    """Kronecker product: the blocks of ``b`` scaled by the elements of ``a``."""
    a, b = _promote("kron", a, b)
    sa, sb = shape_of(a), shape_of(b)
    nd = max(len(sa), len(sb))
    sa, sb = (1,) * (nd - len(sa)) + sa, (1,) * (nd - len(sb)) + sb
    a, b = lax.reshape(a, sa), lax.reshape(b, sb)
    pairs = tuple(d for pair in zip(sa, sb) for d in pair)
    a = lax.broadcast_in_dim(a, pairs, tuple(range(0, 2 * nd, 2)))
    b = lax.broadcast_in_dim(b, pairs, tuple(range(1, 2 * nd, 2)))
    return lax.reshape(lax.mul(a, b), tuple(x * y for x, y in zip(sa, sb)))


# --- diagonals ------------------------------------------------------------------------------
def diagonal(a, offset=0, axis1=0, axis2=1):
    """The ``offset`` diagonal over ``axis1``/``axis2``, appended as the last axis."""
    check_arraylike("diagonal", a)
    a = as_operand(a)
    shape = shape_of(a)
    if len(shape) < 2:
        raise ValueError(f"diagonal requires an array of at least two dimensions, got shape "
                         f"{shape}.")
    offset = operator.index(offset)
    ax1, ax2 = canonicalize_axis(axis1, len(shape)), canonicalize_axis(axis2, len(shape))
    if ax1 == ax2:
        raise ValueError(f"axis1 and axis2 cannot be the same, got axis1={axis1}, axis2={axis2}.")
    rest = [i for i in range(len(shape)) if i not in (ax1, ax2)]
    perm = tuple(rest) + (ax1, ax2)
    x = a if perm == tuple(range(len(shape))) else lax.transpose(a, perm)
    n, m = shape[ax1], shape[ax2]
    batch = tuple(shape[i] for i in rest)
    length = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    # Element (i, i + offset) of the flattened n*m block sits at start + i * (m + 1).
    x = lax.reshape(x, batch + (n * m,))
    start = (offset if offset >= 0 else -offset * m) if length else 0
    limit = start + (length - 1) * (m + 1) + 1 if length else 0
    nd = len(batch)
    return lax.slice(x, (0,) * nd + (start,), batch + (limit,), (1,) * nd + (m + 1,))


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Sum along the ``offset`` diagonal of ``axis1``/``axis2``."""
    if out is not None:
        raise ValueError("plax.numpy.trace: the 'out' argument must be None; plax arrays are "
                         "immutable, so the result is returned.")
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def diag(v, k=0):
    """The ``k``-th diagonal of a 2-D array, or a 2-D array with 1-D ``v`` on that diagonal."""
    check_arraylike("diag", v)
    v = as_operand(v)
    shape = shape_of(v)
    k = operator.index(k)
    if len(shape) == 2:
        return diagonal(v, k)
    if len(shape) != 1:
        raise ValueError(f"diag input must be 1d or 2d, got shape {shape}.")
    n = shape[0] + abs(k)
    dt = get_aval(v).dtype
    padded = lax.pad(v, np.asarray(0, dt), [(0, abs(k), 0)])
    # Entry (i, i + k) holds v[i] for k >= 0 (constant along rows), v[j] otherwise.
    full = lax.broadcast_in_dim(padded, (n, n), (0,) if k >= 0 else (1,))
    on_diag = lax.eq(lax.add(lax.broadcasted_iota(np.int32, (n, n), 0), np.int32(k)),
                     lax.broadcasted_iota(np.int32, (n, n), 1))
    return lax.select(on_diag, full, lax.broadcast_in_dim(np.asarray(0, dt), (n, n), ()))


# --- einsum ------------------------------------------------------------------------------------
def _interleaved_to_subscripts(args):
    """einsum(op0, sublist0, op1, sublist1, ..., [out_sublist]) as a subscripts string."""
    args = list(args)
    out = args.pop() if len(args) % 2 == 1 else None
    ops, subs = args[0::2], args[1::2]

    import opt_einsum  # loaded on first use: it costs import time

    def term(sub):
        return "".join("..." if s is Ellipsis else opt_einsum.get_symbol(operator.index(s))
                       for s in sub)
    spec = ",".join(term(s) for s in subs)
    if out is not None:
        spec += "->" + term(out)
    return spec, ops


def _path_arg(optimize, n):
    if optimize is False:
        return [(0, 1)] * (n - 1) if n > 1 else [(0,)]
    if optimize is True:
        return "greedy"
    return optimize


def _reduce_sum(x, axes):
    if not axes:
        return x
    if dtypes.is_bool(get_aval(x).dtype):
        return lax.reduce_or(x, tuple(axes))
    return lax.reduce_sum(x, tuple(axes))


def _take_diagonals(x, labels):
    """Collapse repeated labels of one operand onto their diagonal, via iota masks."""
    labels = list(labels)
    while True:
        repeated = [c for c, n in Counter(labels).items() if n > 1]
        if not repeated:
            return x, labels
        i = labels.index(repeated[0])
        j = labels.index(repeated[0], i + 1)
        shape = shape_of(x)
        mask = lax.eq(lax.broadcasted_iota(np.int32, shape, i),
                      lax.broadcasted_iota(np.int32, shape, j))
        zero = lax.broadcast_in_dim(np.asarray(0, get_aval(x).dtype), shape, ())
        x = _reduce_sum(lax.select(mask, x, zero), (j,))
        del labels[j]


def _sum_unique(x, labels, keep):
    """Sum away the labels not in ``keep``."""
    axes = [i for i, c in enumerate(labels) if c not in keep]
    return _reduce_sum(x, axes), [c for c in labels if c in keep]


def _einsum_pair(x, lx, y, ly, out, dot):
    x, lx = _take_diagonals(x, lx)
    y, ly = _take_diagonals(y, ly)
    # Ellipsis axes broadcast: a size-1 axis facing a larger one is squeezed away.
    for c in [c for c in lx if c in ly]:
        dx, dy = shape_of(x)[lx.index(c)], shape_of(y)[ly.index(c)]
        if dx != dy and 1 in (dx, dy):
            if dx == 1:
                x, lx = lax.squeeze(x, (lx.index(c),)), [l for l in lx if l != c]
            else:
                y, ly = lax.squeeze(y, (ly.index(c),)), [l for l in ly if l != c]
    x, lx = _sum_unique(x, lx, set(out) | set(ly))
    y, ly = _sum_unique(y, ly, set(out) | set(lx))
    sx, sy = shape_of(x), shape_of(y)
    if any(sx[lx.index(c)] != sy[ly.index(c)] for c in lx if c in ly):
        # (only symbolic sizes get here: opt_einsum's planning refuses unequal constant ones)
        raise AssertionError(f"Incompatible reduction dimensions: lhs.shape={sx} "
                             f"lhs_names={''.join(lx)} rhs.shape={sy} rhs_names={''.join(ly)}")
    out = list(out)
    if _pair_labels(ly, lx, out) == out != _pair_labels(lx, ly, out):
        # dot_general lays out lhs's free axes before rhs's: with the operands swapped the
        # product comes out in the requested order, and no transpose follows it.
        x, lx, y, ly = y, ly, x, lx
    batch = [c for c in lx if c in ly and c in out]
    contract = [c for c in lx if c in ly and c not in out]
    dims = [(tuple(lx.index(c) for c in group), tuple(ly.index(c) for c in group))
            for group in (contract, batch)]
    r = dot(x, y, dims[0], dims[1])
    return _transpose_to(r, _pair_labels(lx, ly, out), out)


def _pair_labels(lx, ly, out):
    """The axis labels of the dot_general _einsum_pair forms from operands labelled lx, ly."""
    batch = [c for c in lx if c in ly and c in out]
    return batch + [c for c in lx if c not in ly] + [c for c in ly if c not in lx]


def _einsum_step(args, in_labels, out, dot):
    """One contraction of opt_einsum's path: one operand, a pair, or more folded pairwise."""
    if len(args) == 1:
        x, labels = _take_diagonals(args[0], in_labels[0])
        x, labels = _sum_unique(x, labels, set(out))
        return _transpose_to(x, labels, list(out))
    x, lx = args[0], in_labels[0]
    for i in range(1, len(args)):
        later = set(out).union(*in_labels[i + 1:])
        keep = out if i == len(args) - 1 else \
            "".join(dict.fromkeys(c for c in lx + in_labels[i] if c in later))
        x = _einsum_pair(x, list(lx), args[i], list(in_labels[i]), keep, dot)
        lx = keep
    return x


@takes_out_sharding
def einsum(subscripts, /, *operands, out=None, optimize="auto", precision=None,
           preferred_element_type=None, _dot_general=None):
    """Einstein summation; the contraction order comes from opt_einsum (``optimize``).

    ``_dot_general`` (as in JAX, for libraries) replaces ``lax.dot_general`` in every pairwise
    contraction; it takes ``(lhs, rhs, dimension_numbers, precision, preferred_element_type=)``.
    """
    if out is not None:
        raise ValueError("plax.numpy.einsum: the 'out' argument must be None; plax arrays are "
                         "immutable, so the result is returned.")
    if not isinstance(subscripts, str):
        subscripts, operands = _interleaved_to_subscripts((subscripts,) + operands)
    check_arraylike("einsum", *operands)
    operands = promote_dtypes(*operands)
    preferred = _preferred(preferred_element_type)
    if preferred is not None:
        # Single-operand sums accumulate in the requested type, as the dots do.
        operands = [convert(o, preferred) if dtypes.itemsize_bits(get_aval(o).dtype)
                    < dtypes.itemsize_bits(preferred) or dtypes.is_bool(get_aval(o).dtype)
                    else o for o in operands]
    # The path is planned with every symbolic size (plax.export) taken as 8, as JAX does.
    shapes = [tuple(8 if type(d) is DimExpr else d for d in shape_of(o)) for o in operands]
    import opt_einsum
    _, contractions = opt_einsum.contract_path(subscripts, *shapes, shapes=True, einsum_call=True,
                                               optimize=_path_arg(optimize, len(operands)))
    def dot(x, y, contract, batch):
        return _dot(x, y, contract, batch, precision, preferred, _dot_general)
    ops = list(operands)
    for inds, _, spec, _, _ in contractions:
        args = [ops.pop(i) for i in inds]
        ins, result = spec.split("->")
        ops.append(_einsum_step(args, ins.split(","), result, dot))
    r = ops[0]
    if preferred is not None and get_aval(r).dtype != preferred:
        r = lax.convert_element_type(r, preferred)
    if isinstance(r, (np.ndarray, np.generic)):  # nothing was computed: still return an Array
        r = lax.broadcast_in_dim(r, r.shape, tuple(range(r.ndim)))
    return r


def einsum_path(subscripts, /, *operands, optimize="auto"):
    """opt_einsum's contraction path and its description for an einsum."""
    if not isinstance(subscripts, str):
        subscripts, operands = _interleaved_to_subscripts((subscripts,) + operands)
    shapes = [shape_of(as_operand(o)) for o in operands]
    import opt_einsum
    return opt_einsum.contract_path(subscripts, *shapes, shapes=True,
                                    optimize=_path_arg(optimize, len(operands)))
