"""Statistics as in NumPy: cov, corrcoef, bincount, digitize and the histogram family.

Written on plax.lax and the other plax.numpy modules. Dtype rules follow JAX: results
are floating (the default float type for integer input), counts of unweighted
multi-dimensional histograms are integers, and shapes never depend on data under jit
(``bincount`` takes a static ``length`` for that).
"""
from __future__ import annotations

import builtins

import numpy as np

from plax import lax
from plax.core import dtypes
from plax.core.errors import ConcretizationTypeError
from plax.core.trace import Tracer, get_aval
from plax.first_order.common import real_dtype
from plax.numpy import creation, products, reductions, shape_ops, sorting, ufuncs, util
from plax.numpy.util import as_operand, check_arraylike, convert, promote_dtypes_inexact

__all__ = ["cov", "corrcoef", "bincount", "digitize", "histogram", "histogram_bin_edges",
           "histogram2d", "histogramdd"]


def _aval(x):
    return get_aval(as_operand(x))


def _user_dtype(dtype):
    return None if dtype is None else dtypes.canonicalize_dtype(np.dtype(dtype))


# --- cov, corrcoef ------------------------------------------------------------------------
def _as_rows(name: str, x, argname: str, rowvar: bool):
    x = as_operand(x)
    nd = _aval(x).ndim
    if nd > 2:
        raise ValueError(f"{name}: {argname} has more than 2 dimensions (shape "
                         f"{_aval(x).shape}).")
    x = shape_ops.atleast_2d(x)
    if not rowvar and nd == 2:
        x = lax.transpose(x, (1, 0))
    return x


def _sample_weights(name: str, weights, n: int, integer: bool):
    """cov's ``fweights``/``aweights`` checked (at most 1-D, ``n`` of them or one; integers
    when ``integer``) and broadcast to one per sample."""
    check_arraylike("cov", weights)
    w = as_operand(weights)
    aval = _aval(w)
    if aval.ndim > 1:
        raise ValueError(f"cov: {name} must be at most 1-dimensional, got shape {aval.shape}.")
    if integer and not dtypes.is_integer(aval.dtype):
        raise TypeError(f"cov: {name} must be integer, got dtype {aval.dtype}.")
    if aval.shape not in ((n,), ()):
        raise ValueError(f"cov: incompatible numbers of samples ({n}) and {name} "
                         f"(shape {aval.shape}).")
    return shape_ops.broadcast_to(w, (n,))


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None,
        dtype=None):
    """Covariance matrix of the variables in the rows (or columns) of ``m`` (and ``y``)."""
    check_arraylike("cov", m)
    if y is not None:
        check_arraylike("cov", y)
    if ddof is not None and not isinstance(ddof, (int, np.integer)):
        raise ValueError(f"cov: ddof must be an integer, got {ddof!r}.")
    dt = _user_dtype(dtype)
    args = [m] if y is None else [m, y]
    args = promote_dtypes_inexact(*args)
    if dt is not None:
        args = [convert(a, dt) for a in args]
    x = _as_rows("cov", args[0], "m", rowvar)
    if y is not None:
        yr = _as_rows("cov", args[1], "y", rowvar)
        if _aval(yr).shape[1] != _aval(x).shape[1]:
            raise ValueError(f"cov: m and y must have the same number of observations, got "
                             f"{_aval(x).shape[1]} and {_aval(yr).shape[1]}.")
        x = lax.concatenate([x, yr], 0)
    xdt = _aval(x).dtype
    if _aval(x).shape[0] == 0:
        return creation.zeros((0, 0), xdt)
    n = _aval(x).shape[1]
    if ddof is None:
        ddof = 0 if bias else 1
    rdt = real_dtype(xdt)  # weights and the normalisation are real
    w = None
    if fweights is not None:
        w = convert(_sample_weights("fweights", fweights, n, True), rdt)
    if aweights is not None:
        aw = convert(_sample_weights("aweights", aweights, n, False), rdt)
        w = aw if w is None else ufuncs.multiply(w, aw)
    if w is None:
        avg = reductions.mean(x, axis=1)
        fact = creation.asarray(n - ddof, rdt)
    else:
        avg = reductions.average(x, axis=1, weights=w)
        w_sum = reductions.sum(w)
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = ufuncs.subtract(w_sum, ddof)
        else:
            fact = ufuncs.subtract(w_sum, ufuncs.true_divide(
                ufuncs.multiply(ddof, reductions.sum(ufuncs.multiply(w, aw))), w_sum))
    fact = ufuncs.maximum(fact, creation.zeros((), _aval(fact).dtype))
    xc = ufuncs.subtract(x, avg[:, None])
    xt = xc if w is None else ufuncs.multiply(xc, w[None, :])  # (ranks explicit)
    c = products.dot(xc, ufuncs.conj(lax.transpose(xt, (1, 0))))
    c = ufuncs.true_divide(c, fact)
    return shape_ops.squeeze(c)


def corrcoef(x, y=None, rowvar=True, dtype=None):
    """Pearson correlation coefficients of the variables in ``x`` (and ``y``)."""
    c = cov(x, y, rowvar, dtype=dtype)
    if _aval(c).ndim == 0:
        return ufuncs.true_divide(c, c)
    d = products.diagonal(c)
    std = ufuncs.sqrt(ufuncs.real(d))
    c = ufuncs.true_divide(ufuncs.true_divide(c, std[:, None]), std[None, :])
    one = 1.0
    if dtypes.is_complex(_aval(c).dtype):
        re = ufuncs.clip(ufuncs.real(c), -one, one)
        im = ufuncs.clip(ufuncs.imag(c), -one, one)
        return lax.complex(re, im)
    return ufuncs.clip(c, -one, one)


# --- bincount, digitize ------------------------------------------------------------------------
def _concrete_max(x, fn: str) -> int:
    if isinstance(x, Tracer) and x.to_concrete_value() is None:
        raise ConcretizationTypeError(
            x, f"The error occurred because of argument 'x' of plax.numpy.{fn}: its output "
               "length depends on max(x). Pass a static length= to use it under jit.")
    host = np.asarray(x.to_concrete_value() if isinstance(x, Tracer) else x)
    return int(host.max()) if host.size else -1


def bincount(x, weights=None, minlength=0, *, length=None):
    """Number of occurrences (or total weight) of each non-negative integer in 1-D ``x``.

    Negative entries count towards bin 0; with ``length`` (static, needed under jit) the
    output has exactly ``length`` bins and larger values are dropped.
    """
    check_arraylike("bincount", x)
    x = as_operand(x)
    aval = _aval(x)
    if not (dtypes.is_integer(aval.dtype) or dtypes.is_bool(aval.dtype)):
        raise TypeError(f"x argument to bincount must have an integer type; got {aval.dtype}.")
    if aval.ndim != 1:
        raise ValueError(f"bincount: x must be 1-dimensional, got shape {aval.shape}.")
    minlength = util.static_nonnegative_int(minlength, "minlength", "bincount")
    if length is None:
        length = builtins.max(minlength, _concrete_max(x, "bincount") + 1)
    else:
        length = util.static_nonnegative_int(length, "length", "bincount")
    if weights is None:
        w = creation.ones(aval.shape, dtypes.default_int_dtype())
    else:
        check_arraylike("bincount", weights)
        w = as_operand(weights)
        if _aval(w).shape not in (aval.shape, ()):
            raise ValueError(f"bincount: weights must have the same shape as x, got "
                             f"{_aval(w).shape} and {aval.shape}.")
        if dtypes.is_bool(_aval(w).dtype):
            raise TypeError("bincount: weights must be numeric, got dtype bool.")
        w = shape_ops.broadcast_to(w, aval.shape)
    idx = ufuncs.maximum(convert(x, dtypes.default_int_dtype()), 0)
    return creation.zeros((length,), _aval(w).dtype).at[idx].add(w, mode="drop")


def digitize(x, bins, right=False, *, method=None):
    """Index of the bin of ``bins`` (increasing or decreasing, 1-D) each ``x`` falls in."""
    check_arraylike("digitize", x, bins)
    x, bins = as_operand(x), as_operand(bins)
    if _aval(bins).ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got shape "
                         f"{_aval(bins).shape}.")
    kw = {} if method is None else {"method": method}
    n = _aval(bins).shape[0]
    if n == 0:
        sorting.searchsorted(creation.zeros((1,), np.float32), 0.0, **kw)  # validates method
        return creation.zeros(_aval(x).shape, np.int32)
    side = "left" if right else "right"
    increasing = lax.ge(bins[-1], bins[0])
    up = sorting.searchsorted(bins, x, side=side, **kw)
    down = lax.sub(creation.full((), n, np.int32),
                   sorting.searchsorted(shape_ops.flip(bins), x, side=side, **kw))
    return ufuncs.where(increasing, up, down)


# --- histograms -------------------------------------------------------------------------------
def _range_pair(range_, fn: str):
    if range_ is None:
        return None
    try:
        items = list(range_)
    except TypeError:
        raise ValueError(f"{fn}: range must be None or a sequence (min, max), got "
                         f"{range_!r}.") from None
    if len(items) != 2 or builtins.any(np.ndim(r) if not isinstance(r, Tracer)
                                       else _aval(r).ndim for r in items):
        raise ValueError(f"{fn}: range must be None or a sequence of two scalars, got "
                         f"{range_!r}.")
    lo, hi = items
    if not isinstance(lo, Tracer) and not isinstance(hi, Tracer):
        if not np.all(np.asarray(lo) <= np.asarray(hi)):
            raise ValueError(f"{fn}: max must be larger than min in range parameter, got "
                             f"{range_!r}.")
    return lo, hi


def _int_bins(bins):
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, (bool, np.bool_)):
        return int(bins)
    if isinstance(bins, np.ndarray) and bins.ndim == 0 and bins.dtype.kind in "iu":
        return int(bins)
    return None


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """Edges of the bins ``histogram`` uses: ``bins`` equal bins over ``range`` (default
    the data's min and max, widened by 0.5 on each side when they coincide), or ``bins``
    itself when it is an array of edges."""
    check_arraylike("histogram_bin_edges", a)
    nbins = _int_bins(bins)
    if nbins is None:
        if isinstance(bins, str):
            raise NotImplementedError(f"histogram_bin_edges: string bins={bins!r} are not "
                                      "supported; pass an integer or an array of edges.")
        check_arraylike("histogram_bin_edges", bins)
        dt = _aval(promote_dtypes_inexact(a)[0]).dtype
        edges = creation.asarray(convert(as_operand(bins), dt))
        if _aval(edges).ndim != 1:
            raise ValueError(f"histogram_bin_edges: bins must be an integer or a 1-D array of "
                             f"edges, got shape {_aval(edges).shape}.")
        return edges
    if nbins < 1:
        raise ValueError(f"histogram_bin_edges: bins must be a positive integer, got {nbins}.")
    a = promote_dtypes_inexact(a)[0]
    dt = _aval(a).dtype
    if dtypes.is_complex(dt):
        raise TypeError("histogram_bin_edges: a must be real, got a complex array.")
    rng = _range_pair(range, "histogram_bin_edges")
    if rng is None:
        if _aval(a).size == 0:
            lo, hi = creation.zeros((), dt), creation.ones((), dt)
        else:
            lo, hi = reductions.min(a), reductions.max(a)
    else:
        lo, hi = convert(as_operand(rng[0]), dt), convert(as_operand(rng[1]), dt)
    same = lax.eq(lo, hi)
    half = creation.full((), 0.5, dt)
    lo = ufuncs.where(same, lax.sub(lo, half), lo)
    hi = ufuncs.where(same, lax.add(hi, half), hi)
    return creation.linspace(lo, hi, nbins + 1, dtype=dt)


def _bin_index(x, edges):
    """Bin of each ``x`` among ``len(edges) - 1`` bins (the last closed on the right), or
    ``len(edges) - 1`` (a drop bin) for values outside the edges and NaN."""
    nb = _aval(edges).shape[0] - 1
    idx = lax.sub(sorting.searchsorted(edges, x, side="right"), creation.full((), 1, np.int32))
    idx = ufuncs.where(ufuncs.equal(x, edges[-1]), creation.full((), nb - 1, np.int32), idx)
    inside = lax.bitwise_and(ufuncs.greater_equal(x, edges[0]), ufuncs.less_equal(x, edges[-1]))
    return ufuncs.where(inside, idx, creation.full((), nb, np.int32))


def _weights(fn: str, weights, shape, dt):
    if weights is None:
        return None
    check_arraylike(fn, weights)
    w = as_operand(weights)
    if _aval(w).shape != tuple(shape):
        raise ValueError(f"{fn}: weights should have the same shape as the samples, got "
                         f"{_aval(w).shape} and {tuple(shape)}.")
    return w


def histogram(a, bins=10, range=None, weights=None, density=None):
    """Counts (or total weight, or with ``density`` a probability density) of ``a`` in
    each bin, and the bin edges. Values outside the edges are ignored."""
    check_arraylike("histogram", a)
    a = as_operand(a)
    edges = histogram_bin_edges(a, bins, range)
    x = shape_ops.ravel(a)
    w = _weights("histogram", weights, _aval(a).shape, None)
    if w is None:
        w = creation.ones(_aval(x).shape, _aval(promote_dtypes_inexact(a)[0]).dtype)
    else:
        w = shape_ops.ravel(convert(w, _aval(promote_dtypes_inexact(a, w)[0]).dtype))
    nb = _aval(edges).shape[0] - 1
    idx = _bin_index(x, edges)
    counts = creation.zeros((nb + 1,), _aval(w).dtype).at[idx].add(w)[:nb]
    if density:
        widths = lax.sub(edges[1:], edges[:-1])
        counts = ufuncs.true_divide(ufuncs.true_divide(counts, widths), reductions.sum(counts))
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """Multi-dimensional histogram of ``sample`` (N points of D coordinates, shape (N, D)):
    the counts, shape one less than each edge array, and the list of D edge arrays."""
    check_arraylike("histogramdd", sample)
    sample = as_operand(sample)
    aval = _aval(sample)
    if aval.ndim == 1:
        sample = sample[:, None]
        aval = _aval(sample)
    if aval.ndim != 2:
        raise ValueError(f"histogramdd: sample must be 1- or 2-dimensional, got shape "
                         f"{aval.shape}.")
    n, d = aval.shape
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        bins = [bins] * d
    if isinstance(bins, (list, tuple)) or (isinstance(bins, np.ndarray) and bins.ndim == 1
                                           and bins.dtype.kind in "iu"):
        bins = list(bins)
    else:
        bins = [bins] if d == 1 else None
    if bins is None or len(bins) != d:
        raise ValueError(f"histogramdd: bins must be an integer or a sequence of {d} bin "
                         "specifications (one per dimension).")
    if range is None:
        range = [None] * d
    elif len(range) != d:
        raise ValueError(f"histogramdd: range must have one entry per dimension ({d}), got "
                         f"{len(range)}.")
    w = _weights("histogramdd", weights, (n,), None)
    edges, flat = [], creation.zeros((n,), np.int32)
    for i in builtins.range(d):
        e = histogram_bin_edges(sample[:, i], bins[i], range[i])
        nb = _aval(e).shape[0] - 1
        idx = _bin_index(sample[:, i], e)
        if i:  # fold the dimensions into one index over bins of size nb + 1 (drop bin last)
            flat = lax.mul(flat, creation.full((), nb + 1, np.int32))
        flat = lax.add(flat, idx)
        edges.append(e)
    sizes = tuple(_aval(e).shape[0] for e in edges)  # nb + 1 per dimension
    if w is None and not density:
        w = creation.ones((n,), dtypes.default_int_dtype())
    elif w is None:
        w = creation.ones((n,), dtypes.default_float_dtype())
    else:
        w = promote_dtypes_inexact(w)[0]
    total = int(np.prod(sizes))
    counts = creation.zeros((total,), _aval(w).dtype).at[flat].add(w)
    counts = lax.reshape(counts, sizes)
    counts = counts[tuple(slice(0, s - 1) for s in sizes)]
    if density:
        counts = ufuncs.true_divide(counts, reductions.sum(counts))
        for i, e in enumerate(edges):
            shape = [1] * d
            shape[i] = sizes[i] - 1
            counts = ufuncs.true_divide(counts, lax.reshape(lax.sub(e[1:], e[:-1]), tuple(shape)))
    return counts, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """Two-dimensional histogram of the points ``(x[i], y[i])``: counts, x edges, y edges."""
    check_arraylike("histogram2d", x, y)
    x, y = promote_dtypes_inexact(x, y)
    if _aval(x).shape != _aval(y).shape or _aval(x).ndim != 1:
        raise ValueError(f"histogram2d: x and y must be 1-D arrays of the same length, got "
                         f"shapes {_aval(x).shape} and {_aval(y).shape}.")
    if isinstance(bins, (list, tuple)) and len(bins) not in (1, 2):
        bins = np.asarray(bins)  # a sequence of edges, as NumPy reads it
    if not isinstance(bins, (list, tuple)) and _int_bins(bins) is None:
        bins = [bins, bins]  # one array of edges for both dimensions
    counts, (ex, ey) = histogramdd(shape_ops.stack([x, y], axis=1), bins, range, weights,
                                   density)
    return counts, ex, ey
